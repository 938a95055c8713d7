//! What every hook of `examples/hooks` shares: the `bb7:hook@0.1.0` bindings, generated once here,
//! and [`hook!`], which makes a crate a hook from its `decide` function alone:
//!
//! ```ignore
//! use hook_common::Decision;
//!
//! fn decide(event: String) -> Decision {
//!     if event.contains("migrations/") { Decision::Deny("no".into()) } else { Decision::Pass }
//! }
//!
//! hook_common::hook!(decide);
//! ```
//!
//! The crate using it is a `cdylib` with its manifest in `bb7-tool.toml` beside its `Cargo.toml`.

wit_bindgen::generate!({
    path: "../../../wit/hook-v0.1.0",
    world: "hook-component",
    pub_export_macro: true,
    export_macro_name: "export_hook",
    default_bindings_module: "hook_common",
});

pub use exports::bb7::hook::hook::{Decision, Guest};

/// Makes the crate a hook whose `decide` is the function `$decide` (`fn(String) -> Decision`):
/// exports `bb7:hook/hook@0.1.0#decide` and embeds the crate's `bb7-tool.toml` as the custom
/// section `bb7-manifest`, so the `.wasm` file alone carries its manifest.
#[macro_export]
macro_rules! hook {
    ($decide:path) => {
        const _: () = {
            const MANIFEST_LEN: usize =
                include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/bb7-tool.toml")).len();
            #[unsafe(link_section = "bb7-manifest")]
            #[used]
            static MANIFEST: [u8; MANIFEST_LEN] =
                *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/bb7-tool.toml"));

            struct Component;

            impl $crate::Guest for Component {
                fn decide(event: ::std::string::String) -> $crate::Decision {
                    $decide(event)
                }
            }

            $crate::export_hook!(Component with_types_in $crate);
        };
    };
}
