//! `hook_deny_plan`: a test `pre_tool_call` hook that denies `propose_plan` (plan mode's tool) and
//! lets every other call pass.

use hook_common::Decision;

fn decide(event: String) -> Decision {
    if event.contains(r#""tool":"propose_plan""#) {
        Decision::Deny("plans are made by people here".into())
    } else {
        Decision::Pass
    }
}

hook_common::hook!(decide);
