//! Builds a test or example component crate (its own Cargo workspace) for wasm32-wasip2 with a
//! nested cargo, into `<repo>/target/<target_name>`, once per test process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// Builds the workspace at `<repo>/<crate_rel>` and returns `<target>/wasm32-wasip2/release/<wasm>`.
pub fn build(crate_rel: &str, target_name: &str, wasm: &str) -> PathBuf {
    let repo = repo_root();
    let target = repo.join("target").join(target_name);
    let cargo = std::env::var_os("CARGO")
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo.join(crate_rel))
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip2",
            "--target-dir",
        ])
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
    let path = target.join("wasm32-wasip2").join("release").join(wasm);
    assert!(path.is_file(), "the build produced no {}", path.display());
    path
}
