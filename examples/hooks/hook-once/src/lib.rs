//! `hook_once`: a test hook that passes the first decision its instance makes and denies any
//! later one. It marks its memory (a static, a heap block) when it decides; a fresh instance per
//! decision never finds the mark, so it always passes. Finding it means one decision's memory was
//! left for the next.

use std::sync::atomic::{AtomicBool, Ordering};

use hook_common::Decision;

static DECIDED: AtomicBool = AtomicBool::new(false);

fn decide(_event: String) -> Decision {
    // A heap block too: the allocator's state lives in the same memory.
    let mark = Box::new(0x5eed_u32);
    let earlier = DECIDED.swap(true, Ordering::SeqCst);
    std::mem::forget(mark);
    if earlier {
        Decision::Deny("this instance already decided once: state was carried over".into())
    } else {
        Decision::Pass
    }
}

hook_common::hook!(decide);
