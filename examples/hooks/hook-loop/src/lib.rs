//! `hook_loop`: a test hook that never answers (the host stops it at its time limit).

use hook_common::Decision;

fn decide(event: String) -> Decision {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(event.len() as u64));
    }
}

hook_common::hook!(decide);
