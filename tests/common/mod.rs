//! Shared helpers for the end-to-end tests: run the real `bb7` binary in an isolated home.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub mod proto;
pub mod seed;
pub mod snapshot;
pub mod tools;
pub mod wasm;

/// The `bb7` binary cargo built for these tests.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_bb7")
}

/// A compiled-component cache shared by every bb7 the tests start (third-party components compile
/// once; the built-ins are precompiled into the binary). It lives in cargo's target tmpdir, so test
/// runs leave nothing in /tmp.
pub fn shared_cache() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bb7-test-cache");
        std::fs::create_dir_all(&d).expect("cache dir");
        d
    })
}

/// A throwaway home for one test: HOME, BB7_HOME and the cache all point inside it (the cache is shared).
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Self {
        Home {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join(".bb7")
    }

    /// A `bb7` command with the isolated environment.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(bin());
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("BB7_HOME", self.state_dir())
            .env("BB7_CACHE_DIR", shared_cache())
            .stdin(Stdio::null());
        c
    }

    /// Runs `bb7 <args>` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("spawn bb7")
    }

    /// Runs `bb7 tools call <tool> --dir <dir> --args <json> [extra…]`.
    pub fn call(&self, tool: &str, dir: &Path, args: &str, extra: &[&str]) -> Output {
        let dir = dir.to_str().expect("utf-8 path");
        let mut a = vec!["tools", "call", tool, "--dir", dir, "--args", args];
        a.extend_from_slice(extra);
        self.run(&a)
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and parses stdout as JSON.
pub fn ok_json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "bb7 failed: {:?}\nstdout: {}\nstderr: {}",
        o.status,
        stdout(o),
        stderr(o)
    );
    assert!(
        o.stderr.is_empty(),
        "stderr must stay silent on success: {}",
        stderr(o)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

/// Asserts a failed tool call (exit 1) whose error has `kind`; returns the stderr text.
pub fn tool_error(o: &Output, kind: &str) -> String {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "expected a tool error, got {:?}\nstdout: {}\nstderr: {err}",
        o.status,
        stdout(o)
    );
    assert!(
        o.stdout.is_empty(),
        "a failed call prints nothing on stdout: {}",
        stdout(o)
    );
    assert!(
        err.contains(&format!("[{kind}]")),
        "expected error kind {kind}: {err}"
    );
    err
}

/// The sha256 file id of `content` at `path`.
pub fn file_id(path: &str, content: &[u8]) -> String {
    bb7_tool_logic::file_id::file_id(path, content)
}
