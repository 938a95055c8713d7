//! `hook_trap`: a test hook whose answer is unusable: it traps instead of answering.

use hook_common::Decision;

fn decide(event: String) -> Decision {
    if std::hint::black_box(!event.is_empty()) {
        std::process::abort();
    }
    Decision::Pass
}

hook_common::hook!(decide);
