//! `hook_pass`: a test hook that lets everything pass (the cost of a trivial hook).

use hook_common::Decision;

fn decide(_event: String) -> Decision {
    Decision::Pass
}

hook_common::hook!(decide);
