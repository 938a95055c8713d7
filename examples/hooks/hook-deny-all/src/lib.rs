//! `hook_deny_all`: a test hook that denies every point with a fixed reason.

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
        Decision::Deny("policy says no".into())
    }
}
