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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use bb7::sandbox::Access;
use bb7::sandbox::grant::CallCaps;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Builds the component workspace at `<repo>/<crate_rel>` for wasm32-wasip2 into
/// `<repo>/target/<target_name>` (release or dev profile) and returns the `.wasm`, as
/// `tests/common/wasm.rs` does.
fn build_wasm(crate_rel: &str, target_name: &str, wasm: &str, release: bool) -> PathBuf {
    let repo = repo_root();
    let target = repo.join("target").join(target_name);
    let cargo = std::env::var_os("CARGO")
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo.join(crate_rel)).arg("build");
    if release {
        cmd.arg("--release");
    }
    cmd.args(["--locked", "--target", "wasm32-wasip2", "--target-dir"])
        .arg(&target)
        .stdin(Stdio::null());
    // The outer cargo's settings must not leak into the nested wasm build.
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        let exact = [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_RUSTFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "CARGO_BUILD_TARGET_DIR",
            "CARGO_PRIMARY_PACKAGE",
            "RUSTC_LINKER",
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_CRATE_NAME",
        ];
        let prefixes = [
            "CARGO_PROFILE_",
            "CARGO_FEATURE_",
            "CARGO_CFG_",
            "CARGO_TARGET_",
            "CARGO_PKG_",
            "CARGO_BIN_",
        ];
        if exact.contains(&k.as_ref()) || prefixes.iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(&key);
        }
    }
    let out = cmd.output().expect("running cargo for a wasm component");
    assert!(
        out.status.success(),
        "building {crate_rel} (wasm32-wasip2) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let profile = if release { "release" } else { "debug" };
    let path = target.join("wasm32-wasip2").join(profile).join(wasm);
    assert!(path.is_file(), "the build produced no {}", path.display());
    path
}

/// `word_count.wasm` with its embedded manifest section renamed (same length, so the binary stays
/// valid: it becomes an unrelated custom section) and a custom section naming `tag` appended.
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
    let hostile = build_wasm("tests/hostile", "hostile-wasm", "hostile.wasm", true);
    let generic = build_wasm(
        "examples/tool-components",
        "tool-examples-wasm",
        "generic_types.wasm",
        true,
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
