//! `hook_deny_all`: a test hook that denies every point with a fixed reason.

use hook_common::Decision;

fn decide(_event: String) -> Decision {
    Decision::Deny("policy says no".into())
}

hook_common::hook!(decide);
