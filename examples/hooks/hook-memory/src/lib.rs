//! `hook_memory`: a test hook that allocates past its memory limit.

use hook_common::Decision;

fn decide(_event: String) -> Decision {
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        held.push(vec![1u8; 1 << 20]);
        std::hint::black_box(&held);
    }
}

hook_common::hook!(decide);
