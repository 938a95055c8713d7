//! `hook_withhold`: a test `post_tool_call` hook: a result holding `SECRET` is withheld from the model.

use hook_common::Decision;

fn decide(event: String) -> Decision {
    if event.contains("SECRET") {
        Decision::Deny("the result holds a secret".into())
    } else {
        Decision::Pass
    }
}

hook_common::hook!(decide);
