//! `hook_memory`: a test hook that allocates past its memory limit.

wit_bindgen::generate!({
    path: "../../../wit/hook-v0.1.0",
    world: "hook-component",
});

use exports::bb7::hook::hook::{Decision, Guest};

/// The manifest, embedded as the custom section `bb7-manifest` so the `.wasm` file alone carries it.
const MANIFEST_LEN: usize = include_bytes!("../bb7-tool.toml").len();
#[unsafe(link_section = "bb7-manifest")]
#[used]
static MANIFEST: [u8; MANIFEST_LEN] = *include_bytes!("../bb7-tool.toml");

struct Component;
export!(Component);

impl Guest for Component {
    fn decide(_event: String) -> Decision {
        let mut held: Vec<Vec<u8>> = Vec::new();
        loop {
            held.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&held);
        }
    }
}
