//! Per-call overhead of a generic component's call (ECOSYSTEM-PROTOCOL.md §5) against a
//! `bb7:tool` call (issue 25; target: at most 60 µs above). Run:
//! `cargo bench -p bb7 --bench generic` (`BB7_GENERIC_CALLS=N` for N timed calls per row).
//!
//! In-process, through the library: both components loaded with `Registry::load_file` into one
//! `host_sandbox(None)` (no audit log) and called with no capabilities at all
//! (`Sandbox::call_with(.., CallCaps::none(), ..)`), each call a fresh instance:
//! - `bb7:tool`: the hostile fixture (`tests/hostile`) with `{"attack":"ok"}` (returns at once);
//! - generic: the generic-types example's `echo` with `{"s":"ok"}` (JSON → `Val` → call → JSON).
//!
//! Prints min / median / p90 per row and the difference of the medians; asserts nothing about
//! timings (a failed call panics).

use std::sync::Arc;
use std::time::Instant;

use bb7::sandbox::Access;
use bb7::sandbox::grant::CallCaps;

/// The tests' component builder (`tests/common/wasm.rs`): the components are built as the tests
/// build them.
#[path = "../../tests/common/wasm.rs"]
mod wasm;

/// `n` calls of `tool` with `args` (after 200 unmeasured ones), each in µs, sorted.
fn time(
    sb: &bb7::sandbox::Sandbox,
    tool: &Arc<bb7::sandbox::ToolComponent>,
    args: &str,
    n: usize,
) -> Vec<f64> {
    let caps = CallCaps::none();
    for _ in 0..200 {
        let (r, _) = sb.call_with(tool, &caps, &[], args);
        r.unwrap_or_else(|e| panic!("{}: {e}", tool.name));
    }
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            let (r, _) = sb.call_with(tool, &caps, &[], args);
            let us = t.elapsed().as_secs_f64() * 1e6;
            r.unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            us
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn main() {
    let n: usize = std::env::var("BB7_GENERIC_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let hostile = wasm::build("tests/hostile", "hostile-wasm", "hostile.wasm");
    let generic = wasm::build(
        "examples/tool-components",
        "tool-examples-wasm",
        "generic_types.wasm",
    );
    let sb = bb7::sandbox::host_sandbox(None).expect("sandbox");
    let plain = Arc::new(
        sb.registry()
            .load_file("hostile", &hostile, Access::ReadOnly)
            .expect("load hostile"),
    );
    let gen_all = sb
        .registry()
        .load_file("gen", &generic, Access::ReadOnly)
        .expect("load generic");
    let echo = Arc::new(gen_all.function("echo").expect("echo"));
    let a = time(&sb, &plain, r#"{"attack":"ok"}"#, n);
    let b = time(&sb, &echo, r#"{"s":"ok"}"#, n);
    let med = |v: &[f64]| v[v.len() / 2];
    for (name, v) in [
        ("bb7:tool call (hostile, attack=ok)", &a),
        ("generic call (gen echo)", &b),
    ] {
        println!(
            "{name:<40} min {:>8.1} µs  median {:>8.1} µs  p90 {:>8.1} µs  ({n} calls)",
            v[0],
            med(v),
            v[v.len() * 9 / 10]
        );
    }
    println!(
        "generic overhead (difference of medians): {:+.1} µs (target: at most +60 µs)",
        med(&b) - med(&a)
    );
}
