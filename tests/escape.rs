//! Sandbox escape tests: a hostile tool component (`tests/hostile`) and the real built-in tools try
//! to get out of their directory grant, and the real `bb7` binary must stop them.
//!
//! Every test builds a fresh layout in a temporary directory:
//!
//! ```text
//! <root>/secret                         next to the grant: `../secret`
//! <root>/outside/{secret, hl_target, hl2_target, empty_dir/, dir/outside-only-q8z.txt, dir/nested/deep-q8z.txt}
//! <root>/grant/                         the only directory the call is granted, mounted at `/`
//!     inside.txt, victim1..9.txt, sub/file.txt, sub/empty/, etc/passwd, evil\nname.txt
//!     hl, sub/hl2                       hard links to outside/hl_target, outside/hl2_target
//!     file_link -> ../outside/secret    abs_file_link -> <root>/outside/secret
//!     dir_link -> ../outside/dir        abs_dir_link -> <root>/outside/dir
//!     root_link -> /                    up_link -> ..      parent_secret_link -> ../secret
//!     chain_a -> chain_b -> sub/chain_c -> ../../outside/secret
//!     dotdot_link -> sub/../../outside/secret     sub/tricky -> ../sub/./../../outside/secret
//!     sub/escape_via_up -> ../../outside/dir      reenter_link -> ../grant/inside.txt
//!     dangling_link -> ../outside/created-by-dangling.txt
//!     abs_dangling_link -> <root>/outside/created-by-abs-dangling.txt
//!     ok_link -> inside.txt             dot_inside_link -> ./sub/./../inside.txt
//!     self_loop -> self_loop
//! ```
//!
//! runs one attack through `bb7 tools call`, and asserts that the attack got nothing (no byte of an
//! outside file in the output), that nothing outside the grant changed (paths, contents, modes,
//! mtimes, symlink targets) and no grant entry became a hard link to an outside file, that the
//! process ended as it should (exit code, error kind, a bounded time, stdout exactly the JSON
//! result), and that the call left exactly one audit record with one grant, no network and no env.
//!
//! A failing test here is a release-blocking sandbox bug: fix the host, never the test.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------------------------
// Markers
// ---------------------------------------------------------------------------------------------

/// Every file outside the grant contains this.
const SECRET_MARK: &str = "TOP-SECRET-7f3c9a";
/// The full contents (less the newline) of the outside files; no output of any call may hold one
/// (unless the request itself spelled it out).
const SECRETS: [&str; 4] = [
    "TOP-SECRET-7f3c9a-next-to-the-grant",
    "TOP-SECRET-7f3c9a-outside",
    "TOP-SECRET-7f3c9a-dir",
    "TOP-SECRET-7f3c9a-deep",
];
/// Names that exist only outside the grant; no listing may show them.
const OUTSIDE_NAMES: [&str; 2] = ["outside-only-q8z", "deep-q8z"];
/// The content of `grant/inside.txt` (for positive controls).
const INSIDE: &str = "INSIDE-GRANT-CONTENT needle-in-grant\n";
/// Content of the outside files that are hard-linked into the grant (readable through the grant
/// by construction, so they carry no secret mark).
const HL_CONTENT: &str = "HARDLINK-ORIGINAL-CONTENT\n";
const HL2_CONTENT: &str = "HARDLINK2-ORIGINAL-CONTENT\n";
/// Put in bb7's environment and on its stdin; the guest must never see them.
const HOST_ENV_MARK: &str = "HOST-ENV-MARKER-b61e";
const HOST_STDIN_MARK: &str = "HOST-STDIN-MARKER-b61e";

/// A call that should finish on its own is killed (and the test fails) after this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Calls that hit the 10 s wall-time limit must end well under a minute: within this.
const LIMITED_CALL_BOUND: Duration = Duration::from_secs(30);
/// How long a call expected to be stopped by the wall-time limit may run before we kill it.
const LIMITED_CALL_KILL: Duration = Duration::from_secs(40);

// ---------------------------------------------------------------------------------------------
// Building the hostile component, shared state
// ---------------------------------------------------------------------------------------------

/// The hostile component, built once per test run into `<repo>/target/hostile-wasm`.
fn hostile_wasm() -> &'static Path {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| common::wasm::build("tests/hostile", "hostile-wasm", "hostile.wasm"))
}

fn hostile_sha256() -> &'static str {
    static SHA: OnceLock<String> = OnceLock::new();
    SHA.get_or_init(|| {
        hex::encode(Sha256::digest(
            std::fs::read(hostile_wasm()).expect("reading hostile.wasm"),
        ))
    })
}

/// One compiled-component cache for the whole test run (outside every grant), in cargo's target
/// tmpdir so that runs leave nothing in /tmp; each third-party component is compiled once (every
/// artifact is integrity-checked, so one left by an earlier run cannot be trusted blindly).
fn cache_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bb7-escape-cache");
        std::fs::create_dir_all(&dir).expect("creating the component cache dir");
        dir
    })
}

/// The sha256 of each built-in component, as `bb7 tools audit --json` reports it.
fn builtin_shas() -> &'static BTreeMap<String, String> {
    static SHAS: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    SHAS.get_or_init(|| {
        let state = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_bb7"))
            .args(["tools", "audit", "--json"])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", state.path())
            .env("BB7_HOME", state.path().join("bb7home"))
            .env("BB7_CACHE_DIR", cache_dir())
            .stdin(Stdio::null())
            .output()
            .expect("running bb7 tools audit");
        assert!(
            out.status.success(),
            "bb7 tools audit failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).expect("audit --json is JSON");
        doc["components"]
            .as_array()
            .expect("components")
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_string(),
                    c["sha256"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// The layout and its snapshots
// ---------------------------------------------------------------------------------------------

/// One test's world: the grant, what lies around it, and a state dir (HOME, BB7_HOME, audit log)
/// that is not part of either.
struct Layout {
    _tmp: tempfile::TempDir,
    _state: tempfile::TempDir,
    root: PathBuf,
    grant: PathBuf,
    home: PathBuf,
    audit: PathBuf,
}

fn write(path: &Path, content: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, content).unwrap();
}

fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
}

impl Layout {
    fn new() -> Layout {
        let tmp = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let grant = root.join("grant");
        let outside = root.join("outside");

        write(&root.join("secret"), &format!("{}\n", SECRETS[0]));
        write(&outside.join("secret"), &format!("{}\n", SECRETS[1]));
        write(
            &outside.join("dir/outside-only-q8z.txt"),
            &format!("{}\n", SECRETS[2]),
        );
        write(
            &outside.join("dir/nested/deep-q8z.txt"),
            &format!("{}\n", SECRETS[3]),
        );
        write(&outside.join("hl_target"), HL_CONTENT);
        write(&outside.join("hl2_target"), HL2_CONTENT);
        std::fs::create_dir_all(outside.join("empty_dir")).unwrap();

        write(&grant.join("inside.txt"), INSIDE);
        for i in 1..=9 {
            write(
                &grant.join(format!("victim{i}.txt")),
                &format!("victim {i}\n"),
            );
        }
        write(&grant.join("sub/file.txt"), "SUB-FILE-CONTENT\n");
        std::fs::create_dir_all(grant.join("sub/empty")).unwrap();
        write(&grant.join("etc/passwd"), "GRANT-PASSWD\n");
        write(&grant.join("evil\nname.txt"), INSIDE);
        std::fs::hard_link(outside.join("hl_target"), grant.join("hl")).unwrap();
        std::fs::hard_link(outside.join("hl2_target"), grant.join("sub/hl2")).unwrap();

        let g = |p: &str| grant.join(p);
        symlink("../outside/secret", &g("file_link"));
        symlink(outside.join("secret"), &g("abs_file_link"));
        symlink("../outside/dir", &g("dir_link"));
        symlink(outside.join("dir"), &g("abs_dir_link"));
        symlink("/", &g("root_link"));
        symlink("..", &g("up_link"));
        symlink("../secret", &g("parent_secret_link"));
        symlink("chain_b", &g("chain_a"));
        symlink("sub/chain_c", &g("chain_b"));
        symlink("../../outside/secret", &g("sub/chain_c"));
        symlink("sub/../../outside/secret", &g("dotdot_link"));
        symlink("../sub/./../../outside/secret", &g("sub/tricky"));
        symlink("../../outside/dir", &g("sub/escape_via_up"));
        symlink("../grant/inside.txt", &g("reenter_link"));
        symlink("../outside/created-by-dangling.txt", &g("dangling_link"));
        symlink(
            outside.join("created-by-abs-dangling.txt"),
            &g("abs_dangling_link"),
        );
        symlink("inside.txt", &g("ok_link"));
        symlink("./sub/./../inside.txt", &g("dot_inside_link"));
        symlink("self_loop", &g("self_loop"));

        let home = state.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let audit = state.path().join("audit").join("tool-calls.jsonl");
        Layout {
            _tmp: tmp,
            _state: state,
            root,
            grant,
            home,
            audit,
        }
    }

    /// `<root>/outside/<rel>`.
    fn outside(&self, rel: &str) -> PathBuf {
        self.root.join("outside").join(rel)
    }

    /// A path that reaches `rel` under the outside dir through `root_link` (the host's `/`).
    fn via_root_link(&self, rel: &str) -> String {
        format!("root_link{}/outside/{rel}", self.root.display())
    }

    /// Everything outside the grant: the root dir itself and every entry but `grant/`.
    fn outside_snapshot(&self) -> Snapshot {
        snapshot(&self.root, Some(&self.grant))
    }

    fn grant_snapshot(&self) -> Snapshot {
        snapshot(&self.grant, None)
    }

    /// No entry of the grant may be a hard link to an outside file (other than the two the layout
    /// plants on purpose): that would be a new name for outside data.
    fn assert_no_outside_inode_in_grant(&self, what: &str) {
        let planted: Vec<(u64, u64)> = ["hl_target", "hl2_target"]
            .iter()
            .map(|f| {
                std::fs::metadata(self.outside(f))
                    .map(|m| (m.dev(), m.ino()))
                    .unwrap_or((0, 0))
            })
            .collect();
        let mut outside_inodes = BTreeMap::new();
        for (rel, _) in snapshot(&self.root, Some(&self.grant)) {
            let m = std::fs::symlink_metadata(self.root.join(&rel)).unwrap();
            if m.is_file() && !planted.contains(&(m.dev(), m.ino())) {
                outside_inodes.insert((m.dev(), m.ino()), rel);
            }
        }
        for (rel, _) in snapshot(&self.grant, None) {
            let m = std::fs::symlink_metadata(self.grant.join(&rel)).unwrap();
            if let Some(out) = outside_inodes.get(&(m.dev(), m.ino())) {
                panic!(
                    "SANDBOX ESCAPE: after {what}, grant/{} is a hard link to {} outside the grant",
                    rel.display(),
                    out.display()
                );
            }
        }
    }

    fn assert_outside_unchanged(&self, before: &Snapshot, what: &str) {
        self.assert_no_outside_inode_in_grant(what);
        assert_same(
            before,
            &self.outside_snapshot(),
            &format!("outside the grant after {what}"),
        );
    }

    /// Plants a FIFO (named pipe) in the grant: opening it for reading blocks until a writer comes.
    fn plant_fifo(&self, rel: &str) {
        let status = Command::new("mkfifo")
            .arg(self.grant.join(rel))
            .status()
            .expect("running mkfifo");
        assert!(status.success(), "mkfifo failed");
    }
}

use common::snapshot as tree_snapshot;
use tree_snapshot::{Node, Snapshot};

/// Everything under `dir` (but `skip`), directories' mtimes included (tests/common/snapshot.rs).
fn snapshot(dir: &Path, skip: Option<&Path>) -> Snapshot {
    tree_snapshot::snapshot(dir, skip.as_slice(), true)
}

fn assert_same(before: &Snapshot, after: &Snapshot, what: &str) {
    let diffs = tree_snapshot::differences(before, after);
    assert!(
        diffs.is_empty(),
        "SANDBOX ESCAPE: something changed {what}:\n{}",
        diffs.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Running bb7
// ---------------------------------------------------------------------------------------------

/// How one `bb7 tools call` ended.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// The audit record the call appended.
    audit: Value,
    /// The audit record's line length in bytes.
    audit_line_len: usize,
}

impl Run {
    /// The JSON result of a successful call.
    fn json(&self) -> Value {
        assert_eq!(
            self.code,
            0,
            "expected success, got exit {}: {}",
            self.code,
            self.stderr_head()
        );
        serde_json::from_str(self.stdout.trim_end()).expect("checked in run_bb7")
    }

    /// The error kind of a failed call (`bb7: <tool> failed [<kind>]: …`).
    fn kind(&self) -> Option<&str> {
        let start = self.stderr.find(" failed [")? + " failed [".len();
        let len = self.stderr[start..].find(']')?;
        Some(&self.stderr[start..start + len])
    }

    fn stderr_head(&self) -> String {
        self.stderr.chars().take(600).collect()
    }

    /// Everything the call printed, for leak checks.
    fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    fn assert_failed_with(&self, kind: &str) {
        assert_eq!(
            self.code,
            1,
            "expected a failed call [{kind}], got exit {}: {}",
            self.code,
            self.stderr_head()
        );
        assert_eq!(
            self.kind(),
            Some(kind),
            "wrong error kind: {}",
            self.stderr_head()
        );
        assert_eq!(self.audit["outcome"], kind, "audit outcome: {}", self.audit);
    }
}

/// What to run: a built-in tool, or the hostile component with the given access.
#[derive(Clone, Copy)]
enum Tool<'a> {
    Builtin(&'a str),
    Hostile { read_only: bool },
}

/// Runs `bb7 tools call` with `dir` as the grant and `args`, waiting at most `timeout`, and checks
/// what every call must satisfy: it finished, exit 0 (exactly one JSON line on stdout, nothing on
/// stderr) or 1 (nothing on stdout, one `bb7: … failed [kind]` report), and exactly one new audit
/// record with one grant (this dir, the right access), no network, no env and the right component.
fn run_bb7(layout: &Layout, tool: Tool, dir: &Path, args: &Value, timeout: Duration) -> Run {
    let args_text = args.to_string();
    let (name, read_only, sha) = match tool {
        Tool::Builtin(t) => {
            let sha = builtin_shas()
                .get(t)
                .unwrap_or_else(|| panic!("no built-in tool {t}"))
                .clone();
            (t.to_string(), !matches!(t, "write_file" | "edit_file"), sha)
        }
        Tool::Hostile { read_only } => (
            "hostile".to_string(),
            read_only,
            hostile_sha256().to_string(),
        ),
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bb7"));
    cmd.args(["tools", "call", &name, "--dir"])
        .arg(dir)
        .arg("--audit-log")
        .arg(&layout.audit);
    // Long arguments go through stdin (an argv string is capped at 128 KiB); otherwise stdin carries
    // a marker the guest must never see.
    let via_stdin = args_text.len() > 64 * 1024;
    cmd.arg("--args")
        .arg(if via_stdin { "-" } else { args_text.as_str() });
    if let Tool::Hostile { .. } = tool {
        cmd.arg("--component")
            .arg(hostile_wasm())
            .arg("--access")
            .arg(if read_only { "read-only" } else { "read-write" });
    }
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &layout.home)
        .env("BB7_HOME", layout.home.join(".bb7"))
        .env("BB7_CACHE_DIR", cache_dir())
        .env("BB7_ESCAPE_TEST_SECRET", HOST_ENV_MARK)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    // The audit chain (doc/audit.md) also holds checkpoints and refusals: count the call records.
    let audit_before = std::fs::read_to_string(&layout.audit)
        .map(|s| {
            s.lines()
                .filter(|l| l.contains(r#""kind":"tool_call""#))
                .count()
        })
        .unwrap_or(0);
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawning bb7");
    let mut stdin = child.stdin.take().unwrap();
    let input = if via_stdin {
        args_text.clone()
    } else {
        format!("{HOST_STDIN_MARK}\n")
    };
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out_pipe.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_pipe.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for bb7") {
            break s;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "bb7 {name} did not finish within {} s and was killed (the wall-time limit did not stop it); args: {}",
                timeout.as_secs(),
                truncate(&args_text, 300)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = started.elapsed();
    let _ = feeder.join();
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
    let code = status.code().unwrap_or_else(|| {
        panic!(
            "bb7 {name} was killed by a signal ({status:?}); stderr: {}",
            truncate(&stderr, 600)
        )
    });

    assert!(
        code == 0 || code == 1,
        "bb7 {name} exited {code} (not 0 or 1); stderr: {}",
        truncate(&stderr, 600)
    );
    if code == 0 {
        assert!(
            stderr.is_empty(),
            "a successful call printed on stderr: {}",
            truncate(&stderr, 600)
        );
        assert!(
            stdout.ends_with('\n') && stdout.matches('\n').count() == 1,
            "stdout of a successful call must be exactly one line (the result): {}",
            truncate(&stdout, 600)
        );
        let parsed: Result<Value, _> = serde_json::from_str(stdout.trim_end());
        assert!(
            parsed.is_ok(),
            "stdout is not the JSON result: {}",
            truncate(&stdout, 600)
        );
    } else {
        assert!(
            stdout.is_empty(),
            "a failed call printed on stdout: {}",
            truncate(&stdout, 600)
        );
        assert!(
            stderr.starts_with(&format!("bb7: {name} failed [")),
            "a failed call must report `bb7: {name} failed [kind]: …`, got: {}",
            truncate(&stderr, 600)
        );
    }

    let log = std::fs::read_to_string(&layout.audit).unwrap_or_default();
    for l in log.lines() {
        let _: Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {}", truncate(l, 300)));
    }
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).unwrap()["kind"] == "tool_call")
        .collect();
    assert_eq!(
        lines.len(),
        audit_before + 1,
        "each call must append exactly one audit record"
    );
    let line = lines.last().unwrap();
    let audit: Value = serde_json::from_str(line).unwrap();
    assert_eq!(audit["network"], "none", "audit: {audit}");
    assert_eq!(audit["env"], "none", "audit: {audit}");
    assert_eq!(audit["tool"], name.as_str(), "audit: {audit}");
    assert_eq!(audit["component_sha256"], sha.as_str(), "audit: {audit}");
    assert_eq!(audit["wit_version"], "0.1.0", "audit: {audit}");
    let grants = audit["grants"].as_array().expect("audit grants");
    assert_eq!(grants.len(), 1, "exactly one grant per call: {audit}");
    let granted = dir.canonicalize().unwrap();
    assert_eq!(
        grants[0]["path"],
        granted.to_str().unwrap(),
        "audit: {audit}"
    );
    assert_eq!(
        grants[0]["access"],
        if read_only { "read-only" } else { "read-write" },
        "audit: {audit}"
    );
    assert!(
        audit["started"].is_string() && audit["duration_ms"].is_number(),
        "audit: {audit}"
    );
    if code == 0 {
        assert_eq!(audit["outcome"], "ok", "audit: {audit}");
    } else {
        assert_ne!(audit["outcome"], "ok", "audit: {audit}");
    }
    Run {
        code,
        stdout,
        stderr,
        elapsed,
        audit_line_len: line.len(),
        audit,
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        s.to_string()
    } else {
        format!("{}… ({} bytes)", &s[..s.floor_char_boundary(n)], s.len())
    }
}

fn hostile(layout: &Layout, args: Value) -> Run {
    run_bb7(
        layout,
        Tool::Hostile { read_only: false },
        &layout.grant,
        &args,
        CALL_TIMEOUT,
    )
}

fn hostile_ro(layout: &Layout, args: Value) -> Run {
    run_bb7(
        layout,
        Tool::Hostile { read_only: true },
        &layout.grant,
        &args,
        CALL_TIMEOUT,
    )
}

fn builtin(layout: &Layout, tool: &str, args: Value) -> Run {
    run_bb7(
        layout,
        Tool::Builtin(tool),
        &layout.grant,
        &args,
        CALL_TIMEOUT,
    )
}

/// After a resource attack the next call must be served normally.
fn assert_serves_next_call(layout: &Layout) {
    let run = hostile(layout, json!({"attack": "ok"}));
    assert_eq!(run.json(), json!({"ok": true}));
}

// ---------------------------------------------------------------------------------------------
// Filesystem attacks through the hostile component
// ---------------------------------------------------------------------------------------------

fn op(name: &str, path: &str) -> Value {
    json!({"op": name, "path": path})
}

fn op2(name: &str, path: &str, to: &str) -> Value {
    json!({"op": name, "path": path, "to": to})
}

fn raw_open(path: &str, flags: &[&str]) -> Value {
    json!({"op": "raw_open", "path": path, "flags": flags})
}

#[derive(Debug, Clone)]
struct OpResult {
    op: String,
    path: String,
    to: String,
    ok: bool,
    raw: Value,
}

impl std::fmt::Display for OpResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.op, self.path)?;
        if !self.to.is_empty() {
            write!(f, " -> {:?}", self.to)?;
        }
        write!(f, ": {}", truncate(&self.raw.to_string(), 400))
    }
}

/// Runs `ops` in the hostile component (read-write or read-only grant) and returns what each did.
fn fs_attack(layout: &Layout, read_only: bool, ops: Vec<Value>) -> Vec<OpResult> {
    let n = ops.len();
    let args = json!({"attack": "fs", "ops": ops});
    let run = if read_only {
        hostile_ro(layout, args)
    } else {
        hostile(layout, args)
    };
    let v = run.json();
    let results = v["results"].as_array().expect("fs results");
    assert_eq!(results.len(), n, "one result per op");
    results
        .iter()
        .map(|r| OpResult {
            op: r["op"].as_str().unwrap_or("").to_string(),
            path: r["path"].as_str().unwrap_or("").to_string(),
            to: r["to"].as_str().unwrap_or("").to_string(),
            ok: r["ok"].as_bool().unwrap_or(false),
            raw: r.clone(),
        })
        .collect()
}

/// No output may hold a byte of an outside file or the name of an outside-only entry.
/// No output may hold the content of an outside file or the name of an outside-only entry (unless
/// `request`, what the caller sent, already held it: tools may echo the path they were given), nor
/// the host's /etc/passwd, environment or stdin.
fn assert_no_leak(text: &str, what: &str, request: &str) {
    for secret in SECRETS.iter().filter(|s| !request.contains(*s)) {
        assert!(
            !text.contains(secret),
            "SANDBOX ESCAPE: {what} returned the content of a file outside the grant: {}",
            excerpt_around(text, secret)
        );
    }
    for name in OUTSIDE_NAMES.iter().filter(|n| !request.contains(*n)) {
        assert!(
            !text.contains(name),
            "SANDBOX ESCAPE: {what} revealed the outside-only entry {name}: {}",
            excerpt_around(text, name)
        );
    }
    assert!(
        !text.contains("root:x:0:0"),
        "SANDBOX ESCAPE: {what} returned the host's /etc/passwd"
    );
    assert!(
        !text.contains(HOST_ENV_MARK),
        "SANDBOX ESCAPE: {what} returned the host's environment"
    );
    assert!(
        !text.contains(HOST_STDIN_MARK),
        "SANDBOX ESCAPE: {what} returned the host's stdin"
    );
}

fn excerpt_around(text: &str, needle: &str) -> String {
    let i = text.find(needle).unwrap_or(0);
    let start = text.floor_char_boundary(i.saturating_sub(200));
    let end = text.floor_char_boundary((i + 200).min(text.len()));
    text[start..end].to_string()
}

/// Every op must have failed.
fn assert_all_failed(results: &[OpResult], what: &str) {
    let succeeded: Vec<String> = results
        .iter()
        .filter(|r| r.ok)
        .map(|r| r.to_string())
        .collect();
    assert!(
        succeeded.is_empty(),
        "SANDBOX ESCAPE ({what}): these operations should have been refused but succeeded:\n  {}",
        succeeded.join("\n  ")
    );
}

fn assert_results_no_leak(results: &[OpResult], what: &str) {
    for r in results {
        // What the guest got back (the op's own path is not part of it).
        let got = format!("{} {}", r.raw["data"], r.raw["error"]);
        assert_no_leak(&got, &format!("{what}: {r}"), "");
    }
}

fn find<'a>(results: &'a [OpResult], op: &str, path: &str) -> &'a OpResult {
    results
        .iter()
        .find(|r| r.op == op && r.path == path)
        .unwrap_or_else(|| panic!("no result for {op} {path:?}"))
}

#[test]
fn hostile_reads_parent_relative_secret() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let paths = [
        "../secret",
        "/../secret",
        "//../secret",
        "/./../secret",
        "./../secret",
        "sub/../../secret",
        "sub/../../outside/secret",
        "../outside/secret",
        "../outside/dir/outside-only-q8z.txt",
        "/../outside/dir/nested/deep-q8z.txt",
        "../../../../../../../../../etc/passwd",
        "../grant/inside.txt",
    ];
    let mut ops = Vec::new();
    for p in paths {
        ops.push(op("read", p));
        ops.push(op("metadata", p));
        ops.push(op("symlink_metadata", p));
        ops.push(raw_open(p, &["rdonly"]));
    }
    for d in ["..", "/..", "../outside", "../outside/dir", "sub/../.."] {
        ops.push(op("read_dir", d));
        ops.push(op("walk", d));
        ops.push(op("metadata", d));
    }
    // From a descriptor of a subdirectory: `..` must not climb past the grant either.
    for (dir, p) in [
        ("sub", "../../secret"),
        ("sub", "../../outside/secret"),
        ("sub/empty", "../../../secret"),
    ] {
        ops.push(json!({"op": "raw_openat", "dir": dir, "path": p, "flags": ["rdonly"]}));
    }
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "reading ../");
    assert_all_failed(&results, "paths that climb out with ..");
    l.assert_outside_unchanged(&before, "reads with ..");
}

#[test]
fn hostile_absolute_paths_are_rerooted_into_the_grant() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let abs_secret = l.outside("secret").display().to_string();
    let abs_dir_file = l.outside("dir/outside-only-q8z.txt").display().to_string();
    let abs_grant_file = l.grant.join("inside.txt").display().to_string();
    let reads = [
        "/etc/passwd",
        "/etc/shadow",
        "/etc/hostname",
        "/proc/self/environ",
        "/proc/self/cmdline",
        "/proc/self/maps",
        "/root/.bashrc",
        abs_secret.as_str(),
        abs_dir_file.as_str(),
        abs_grant_file.as_str(),
    ];
    let mut ops: Vec<Value> = reads.iter().map(|p| op("read", p)).collect();
    ops.push(op("read_dir", "/"));
    ops.push(op("read_dir", "/proc"));
    ops.push(op("read_dir", "/tmp"));
    ops.push(op("read_dir", &l.root.display().to_string()));
    ops.push(json!({"op": "write", "path": format!("{}/outside/abs-write.txt", l.root.display())}));
    ops.push(json!({"op": "write", "path": abs_secret}));
    ops.push(json!({"op": "write", "path": "/abs-write-in-grant.txt"}));
    ops.push(json!({"op": "mkdir_all", "path": format!("{}/outside/abs-mkdir", l.root.display())}));
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "absolute paths");

    // `/etc/passwd` is the grant's own etc/passwd (or nothing), never the host's.
    let passwd = find(&results, "read", "/etc/passwd");
    assert!(
        !passwd.ok || passwd.raw["data"] == "GRANT-PASSWD\n",
        "/etc/passwd: {passwd}"
    );
    for p in [&abs_secret, &abs_dir_file] {
        assert!(
            !find(&results, "read", p).ok,
            "host absolute path readable: {}",
            find(&results, "read", p)
        );
    }
    // `/` lists the grant.
    let listing = find(&results, "read_dir", "/");
    assert!(listing.ok, "{listing}");
    let names: Vec<&str> = listing.raw["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert!(
        names.contains(&"inside.txt") && !names.contains(&"outside"),
        "/ lists {names:?}"
    );
    // A write to `/x` lands inside the grant.
    assert!(find(&results, "write", "/abs-write-in-grant.txt").ok);
    assert!(l.grant.join("abs-write-in-grant.txt").is_file());
    l.assert_outside_unchanged(&before, "absolute paths");
    assert!(
        !Path::new("/abs-write-in-grant.txt").exists(),
        "a guest wrote into the host's /"
    );
}

/// Reads, writes and metadata changes through a planted symlink to a file outside.
#[test]
fn hostile_symlink_to_outside_file_read_and_write() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let mut ops = Vec::new();
    for link in ["file_link", "abs_file_link", "parent_secret_link"] {
        ops.push(op("read", link));
        ops.push(op("metadata", link));
        ops.push(raw_open(link, &["rdonly"]));
        ops.push(op("write_existing", link));
        ops.push(op("append", link));
        ops.push(op("open_trunc", link));
        ops.push(op("set_len", link));
        ops.push(op("set_times", link));
        ops.push(op("utimensat", link));
        ops.push(op("chmod", link));
        ops.push(op("set_readonly", link));
        ops.push(op("truncate", link));
        ops.push(json!({"op": "raw_open", "path": link, "flags": ["rdwr"], "data": "RAW-WRITE"}));
        ops.push(json!({"op": "raw_open", "path": link, "flags": ["wronly", "trunc"], "data": "RAW-TRUNC"}));
        ops.push(op2("copy", link, &format!("copied_{link}")));
    }
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "symlink to an outside file");
    assert_all_failed(&results, "following a symlink to an outside file");
    l.assert_outside_unchanged(&before, "symlink-to-file attacks");
}

/// Writes through planted symlinks whose outside target does not exist yet (O_CREAT follows links).
#[test]
fn hostile_write_through_dangling_symlink_creates_nothing_outside() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let mut ops = Vec::new();
    for link in ["dangling_link", "abs_dangling_link"] {
        ops.push(op("write", link));
        ops.push(op("create_new", link));
        ops.push(
            json!({"op": "raw_open", "path": link, "flags": ["wronly", "creat"], "data": "RAW"}),
        );
        ops.push(json!({"op": "raw_open", "path": link, "flags": ["wronly", "creat", "trunc"], "data": "RAW"}));
        ops.push(op2("copy", "inside.txt", link));
        ops.push(op("mkdir", &format!("{link}/")));
    }
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "dangling symlinks");
    // `create_new` on an existing (dangling) link name fails with AlreadyExists, which is fine; what
    // matters is that nothing appears outside.
    l.assert_outside_unchanged(&before, "writes through dangling symlinks");
    assert!(!l.outside("created-by-dangling.txt").exists());
    assert!(!l.outside("created-by-abs-dangling.txt").exists());
}

/// Traversal through planted symlinks to a directory outside: read, list, create, delete, rename.
#[test]
fn hostile_symlink_to_outside_dir_traversal() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let mut ops = Vec::new();
    for d in ["dir_link", "abs_dir_link", "sub/escape_via_up"] {
        ops.push(op("read", &format!("{d}/outside-only-q8z.txt")));
        ops.push(op("read", &format!("{d}/nested/deep-q8z.txt")));
        ops.push(op("read_dir", d));
        ops.push(op("read_dir", &format!("{d}/nested")));
        ops.push(op("walk", d));
        ops.push(op("metadata", &format!("{d}/outside-only-q8z.txt")));
        ops.push(op("write", &format!("{d}/created.txt")));
        ops.push(op("create_new", &format!("{d}/created-new.txt")));
        ops.push(op("write_existing", &format!("{d}/outside-only-q8z.txt")));
        ops.push(op("open_trunc", &format!("{d}/outside-only-q8z.txt")));
        ops.push(op("mkdir", &format!("{d}/newdir")));
        ops.push(op("mkdir_all", &format!("{d}/a/b/c")));
        ops.push(op("remove_file", &format!("{d}/outside-only-q8z.txt")));
        ops.push(op("remove_dir_all", &format!("{d}/nested")));
        ops.push(op("remove_file", &format!("{d}/nested/deep-q8z.txt")));
        ops.push(op2(
            "rename",
            &format!("{d}/outside-only-q8z.txt"),
            "stolen.txt",
        ));
        ops.push(op2("rename", &format!("{d}/nested"), "stolen_dir"));
        ops.push(op2(
            "hard_link",
            &format!("{d}/outside-only-q8z.txt"),
            "stolen_link.txt",
        ));
        ops.push(op2(
            "copy",
            &format!("{d}/outside-only-q8z.txt"),
            "stolen_copy.txt",
        ));
        ops.push(json!({"op": "symlink", "path": format!("{d}/planted"), "target": "x"}));
        ops.push(op("utimensat", &format!("{d}/outside-only-q8z.txt")));
        ops.push(json!({"op": "raw_open", "path": d, "flags": ["rdonly", "directory"]}));
        ops.push(json!({"op": "raw_openat", "dir": d, "path": "outside-only-q8z.txt", "flags": ["rdonly"]}));
        ops.push(json!({"op": "raw_openat", "dir": d, "path": "created-at.txt", "flags": ["wronly", "creat"], "data": "X"}));
    }
    // Moving grant files into the outside directory through the symlinks.
    ops.push(op2("rename", "victim1.txt", "dir_link/moved.txt"));
    ops.push(op2("rename", "victim2.txt", "abs_dir_link/moved.txt"));
    ops.push(op2("rename", "victim3.txt", "sub/escape_via_up/moved.txt"));
    ops.push(op2("hard_link", "victim4.txt", "dir_link/linked.txt"));
    ops.push(op2("copy", "victim5.txt", "dir_link/copied.txt"));
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "symlink to an outside dir");
    assert_all_failed(&results, "traversing a symlink to an outside directory");
    l.assert_outside_unchanged(&before, "directory-symlink traversal");
}

#[test]
fn hostile_trailing_slash_paths() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let reads = [
        "file_link/",
        "file_link/.",
        "file_link//",
        "abs_file_link/",
        "chain_a/",
        "dir_link/",
        "dir_link/.",
        "dir_link/./",
        "dir_link//outside-only-q8z.txt",
        "dir_link/./outside-only-q8z.txt",
        "dir_link/nested/",
        "up_link/",
        "up_link/.",
        "up_link/./secret",
        "root_link/",
        "root_link/.",
        "dangling_link/",
        "inside.txt/",
        "inside.txt/.",
        "hl/",
    ];
    let mut ops = Vec::new();
    for p in reads {
        ops.push(op("read", p));
        ops.push(op("read_dir", p));
        ops.push(op("metadata", p));
        ops.push(raw_open(p, &["rdonly"]));
        ops.push(raw_open(p, &["rdonly", "directory"]));
    }
    for p in [
        "file_link/",
        "file_link/.",
        "dir_link/",
        "dir_link/.",
        "dangling_link/",
        "up_link/.",
    ] {
        ops.push(op("write", p));
        ops.push(op("write_existing", p));
        ops.push(op("open_trunc", p));
        ops.push(op("remove_dir", p));
        ops.push(op("remove_dir_all", p));
        ops.push(op("remove_file", p));
        ops.push(op("mkdir", p));
        ops.push(op("utimensat", p));
        ops.push(op2("rename", p, "renamed_by_slash"));
        ops.push(op2("hard_link", p, "linked_by_slash"));
    }
    ops.push(op2("rename", "victim1.txt", "dir_link/"));
    ops.push(op2("rename", "victim2.txt", "dir_link/./moved.txt"));
    ops.push(op2("rename", "victim3.txt", "dangling_link/"));
    ops.push(op2("rename", "sub/empty", "dir_link/"));
    ops.push(op2("rename", "sub/empty", "up_link/."));
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "trailing slashes");
    // Nothing that goes through a symlink to the outside may succeed; only the in-grant directory
    // symlinks none of these name, so every op must fail.
    let leaks: Vec<&OpResult> = results
        .iter()
        .filter(|r| r.ok && !r.path.starts_with("inside.txt") && !r.path.starts_with("hl/"))
        .collect();
    assert!(
        leaks.is_empty(),
        "SANDBOX ESCAPE: trailing-slash paths through outside symlinks succeeded:\n  {}",
        leaks
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    // A trailing slash on a regular file names no directory: POSIX says ENOTDIR.
    for p in ["inside.txt/", "inside.txt/.", "hl/"] {
        let r = find(&results, "read", p);
        assert!(!r.ok, "reading {p:?} succeeded: {r}");
    }
    l.assert_outside_unchanged(&before, "trailing-slash attacks");
}

/// Chains, `.`/`..` inside targets, links to `/` and `..`, loops; in-grant links still work.
#[test]
fn hostile_symlink_chains_and_dotdot_targets() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let via_root = l.via_root_link("secret");
    let bad_reads = [
        "chain_a",
        "chain_b",
        "sub/chain_c",
        "dotdot_link",
        "sub/tricky",
        "up_link/secret",
        "up_link/outside/secret",
        "up_link/outside/dir/outside-only-q8z.txt",
        "up_link/grant/inside.txt",
        "reenter_link",
        "root_link/etc/passwd",
        "root_link/proc/self/environ",
        via_root.as_str(),
        "self_loop",
        "sub/../dotdot_link",
        "./chain_a",
    ];
    let mut ops: Vec<Value> = bad_reads.iter().map(|p| op("read", p)).collect();
    for d in ["up_link", "root_link", "up_link/outside", "root_link/tmp"] {
        ops.push(op("read_dir", d));
    }
    let writes = [
        "chain_a".to_string(),
        "dotdot_link".to_string(),
        "sub/tricky".to_string(),
        "up_link/outside/via-up.txt".to_string(),
        "up_link/secret".to_string(),
        l.via_root_link("via-root.txt"),
        l.via_root_link("secret"),
    ];
    for w in &writes {
        ops.push(op("write", w));
        ops.push(op("write_existing", w));
    }
    ops.push(op("mkdir", "up_link/made-by-guest"));
    ops.push(op("mkdir", &l.via_root_link("made-by-guest")));
    ops.push(op("remove_file", "up_link/secret"));
    ops.push(op("remove_file", &l.via_root_link("secret")));
    ops.push(op2("rename", "up_link/secret", "stolen"));
    ops.push(op2("rename", "victim1.txt", "up_link/moved.txt"));
    ops.push(op2("rename", "victim2.txt", &l.via_root_link("moved.txt")));
    ops.push(op2("link_follow", "chain_a", "stolen_via_linkat_follow"));
    ops.push(op2("link_follow", "file_link", "stolen_via_linkat_follow2"));
    let n_attacks = ops.len();
    // Positive controls: symlinks that stay inside the grant are followed.
    ops.push(op("read", "ok_link"));
    ops.push(op("read", "dot_inside_link"));
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "symlink chains");
    assert_all_failed(
        &results[..n_attacks],
        "symlink chains, dot-dot targets, links to / and ..",
    );
    assert!(
        find(&results, "read", "ok_link").ok,
        "control: in-grant symlink must work"
    );
    assert_eq!(find(&results, "read", "ok_link").raw["data"], INSIDE);
    assert_eq!(
        find(&results, "read", "dot_inside_link").raw["data"],
        INSIDE,
        "control"
    );
    l.assert_outside_unchanged(&before, "symlink chains");
}

/// A naive recursive walk from `/` that follows every symlink finds nothing from outside.
#[test]
fn hostile_recursive_walk_follows_no_symlink_out() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let results = fs_attack(
        &l,
        false,
        vec![op("walk", "/"), op("walk", "."), op("walk", "sub")],
    );
    assert_results_no_leak(&results, "recursive walk");
    let walked = results[0].raw["data"].to_string();
    assert!(
        walked.contains("needle-in-grant"),
        "control: the walk reads grant files: {}",
        truncate(&walked, 500)
    );
    l.assert_outside_unchanged(&before, "recursive walk");
}

/// Opens of one name for reading without following links (the host's own `open-at` for them,
/// `sandbox/fileread.rs`, not wasmtime-wasi's resolver): a link in the name's place, to a file or
/// a directory outside, dangling or looping, is refused, from the root and from a subdirectory;
/// the same opens of real entries work (control).
#[test]
fn hostile_single_name_nofollow_opens_refuse_every_link() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let mut ops = Vec::new();
    for link in [
        "file_link",
        "abs_file_link",
        "parent_secret_link",
        "dangling_link",
        "self_loop",
        "root_link",
        "up_link",
    ] {
        ops.push(raw_open(link, &["rdonly", "nofollow"]));
    }
    for link in ["dir_link", "abs_dir_link", "root_link", "up_link"] {
        ops.push(raw_open(link, &["rdonly", "nofollow", "directory"]));
    }
    for (dir, name) in [("sub", "escape_via_up"), ("sub", "tricky")] {
        ops.push(
            json!({"op": "raw_openat", "dir": dir, "path": name, "flags": ["rdonly", "nofollow"]}),
        );
        ops.push(json!({"op": "raw_openat", "dir": dir, "path": name, "flags": ["rdonly", "nofollow", "directory"]}));
    }
    let n = ops.len();
    ops.push(raw_open("inside.txt", &["rdonly", "nofollow"]));
    ops.push(json!({"op": "raw_openat", "dir": "sub", "path": "file.txt", "flags": ["rdonly", "nofollow"]}));
    ops.push(raw_open("sub", &["rdonly", "nofollow", "directory"]));
    let results = fs_attack(&l, true, ops);
    assert_results_no_leak(&results, "single-name no-follow opens");
    assert_all_failed(&results[..n], "a single-name no-follow open of a link");
    let inside = &results[n];
    assert!(inside.ok, "control: {inside}");
    assert!(
        inside.raw["data"]["read"]
            .as_str()
            .is_some_and(|r| r.contains("needle-in-grant")),
        "control reads the grant file: {inside}"
    );
    assert!(results[n + 1].ok, "control: {}", results[n + 1]);
    assert!(results[n + 2].ok, "control: {}", results[n + 2]);
    l.assert_outside_unchanged(&before, "single-name no-follow opens");
}

/// Which of `paths` anything opened (not `O_PATH`, not a `stat`) while `f` ran: inotify `IN_OPEN`
/// events on their inodes.
fn opened_during<R>(paths: &[PathBuf], f: impl FnOnce() -> R) -> (Vec<PathBuf>, R) {
    use rustix::fs::inotify::{self, CreateFlags, Reader, WatchFlags};
    let watch = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap();
    let wds: Vec<(i32, &PathBuf)> = paths
        .iter()
        .map(|p| (inotify::add_watch(&watch, p, WatchFlags::OPEN).unwrap(), p))
        .collect();
    let r = f();
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 64 * 1024];
    let mut events = Reader::new(&watch, &mut buf);
    let mut opened = Vec::new();
    loop {
        match events.next() {
            Ok(e) => {
                let wd = e.wd();
                if let Some((_, p)) = wds.iter().find(|(w, _)| *w == wd)
                    && !opened.contains(*p)
                {
                    opened.push((*p).clone());
                }
            }
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => panic!("reading inotify events: {e}"),
        }
    }
    (opened, r)
}

/// Makes a character device node `rel` in the grant (`/dev/zero`'s numbers, 1:5, or `/dev/null`'s,
/// 1:3): possible as root only (`None` otherwise).
fn plant_device(l: &Layout, rel: &str, minor: u32) -> Option<PathBuf> {
    let path = l.grant.join(rel);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, minor),
    )
    .ok()
    .map(|()| path)
}

/// The built-in tools walk a tree through `bb7:host/files` (`read-file-at`, `read-directory-entries`)
/// and WASI's one-name `open-at` (`fileread.rs`): a device node (a copy of `/dev/zero` and of
/// `/dev/null`), a FIFO (also as `.git/info/exclude`, which every walk reads without a listing
/// typing it) and a socket in the grant are looked at or typed by a listing, and never opened —
/// not even opened and closed unread (inotify sees every open of their inodes) —, a 5 GiB sparse
/// file is not read, and every call finishes without leaking anything from outside.
#[test]
fn builtin_walk_never_opens_a_device_node_fifo_or_socket() {
    let l = Layout::new();
    l.plant_fifo("pipe");
    l.plant_fifo("sub/pipe2");
    let _sock = std::os::unix::net::UnixListener::bind(l.grant.join("sock")).unwrap();
    std::fs::File::create(l.grant.join("huge.bin"))
        .and_then(|f| f.set_len(5 << 30))
        .unwrap();
    // Read by every walk without a listing typing it first: it must be looked at too.
    std::fs::create_dir_all(l.grant.join(".git/info")).unwrap();
    l.plant_fifo(".git/info/exclude");
    let mut specials = vec![
        l.grant.join("pipe"),
        l.grant.join("sub/pipe2"),
        l.grant.join(".git/info/exclude"),
    ];
    specials.extend(plant_device(&l, "zero", 5));
    specials.extend(plant_device(&l, "sub/null", 3));
    let before = l.outside_snapshot();
    let mut calls = vec![
        ("search_project", json!({"query": "needle-in-grant"})),
        ("search_project", json!({"query": "TOP-SECRET"})),
        ("list_files", json!({})),
        ("read_file", read_file_args("huge.bin")),
    ];
    for p in &specials {
        let rel = p.strip_prefix(&l.grant).unwrap().to_str().unwrap();
        calls.push(("read_file", read_file_args(rel)));
    }
    for (tool, args) in calls {
        // Every special file watched at once: any open of any of them is seen.
        let (opened, run) = opened_during(&specials, || {
            run_bb7(&l, Tool::Builtin(tool), &l.grant, &args, LIMITED_CALL_KILL)
        });
        assert!(
            opened.is_empty(),
            "{tool} {args}: opened {opened:?} (a device node or FIFO must only be looked at)"
        );
        assert!(
            run.elapsed < LIMITED_CALL_BOUND,
            "{tool} took {:?}",
            run.elapsed
        );
        assert_no_leak(&run.output(), tool, &args.to_string());
        if tool == "search_project" && args["query"] == "needle-in-grant" {
            assert!(run.output().contains("inside.txt"), "{}", run.output());
        }
    }
    l.assert_outside_unchanged(&before, "the built-in walk over special files");
}

/// A directory of 200,000 entries is past `read-directory-entries`' cap (65,536 entries): the
/// host reads no more than the cap and answers `overflow`, and the walk lists it entry by entry
/// through WASI instead: the one file holding the query is still found, and nothing outside leaks.
/// (The other entries are links out of the grant, listed but never followed, so the call stays
/// well inside its time limit on a loaded machine.)
#[test]
fn builtin_walk_lists_a_directory_past_the_listing_cap() {
    let l = Layout::new();
    let big = l.grant.join("big");
    std::fs::create_dir(&big).unwrap();
    for i in 0..200_000u32 {
        if i != 123_456 {
            symlink("../../outside/secret", &big.join(format!("f{i:06}")));
        }
    }
    std::fs::write(big.join("f123456"), "the-one-needle-q1\n").unwrap();
    let before = l.outside_snapshot();
    let run = builtin(&l, "search_project", json!({"query": "the-one-needle-q1"}));
    assert_no_leak(&run.output(), "search_project", "a huge directory");
    assert!(
        run.output().contains("big/f123456"),
        "the file past the cap is found: {}",
        run.output()
    );
    l.assert_outside_unchanged(&before, "a walk over a huge directory");
}

/// A file swapped, between the host's look at it and its open, for a link out of the grant, a
/// FIFO or another file (a thread renames them in a loop while the built-in tools read the tree)
/// is never read through the link and never waited on: every call finishes and nothing outside
/// leaks (`names.rs` opens only the inode it looked at and refuses a swapped one unread; for
/// `read-file-at`, a name the listing typed as a regular file, it reads only what `fstat` shows is
/// a regular file).
#[test]
fn builtin_walk_survives_a_swap_between_look_and_open() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let l = Layout::new();
    write(
        &l.grant.join("swap/real.txt"),
        "SWAP-INSIDE needle-in-grant\n",
    );
    symlink(l.outside("secret"), &l.grant.join("swap/link.txt"));
    let fifo = Command::new("mkfifo")
        .arg(l.grant.join("swap/fifo.txt"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let before = l.outside_snapshot();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, d) = (stop.clone(), l.grant.join("swap"));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for from in ["real.txt", "link.txt", "fifo.txt"] {
                    let _ = std::fs::rename(d.join(from), d.join("victim.txt"));
                    let _ = std::fs::rename(d.join("victim.txt"), d.join(from));
                }
            }
        })
    };
    for _ in 0..10 {
        for (tool, args) in [
            ("search_project", json!({"query": "TOP-SECRET"})),
            ("search_project", json!({"query": "needle-in-grant"})),
            ("read_file", read_file_args("swap/victim.txt")),
        ] {
            let run = run_bb7(&l, Tool::Builtin(tool), &l.grant, &args, LIMITED_CALL_KILL);
            assert!(
                run.elapsed < LIMITED_CALL_BOUND,
                "{tool} took {:?}",
                run.elapsed
            );
            assert_no_leak(
                &run.output(),
                "a built-in tool during the look/open swap",
                "TOP-SECRET",
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    l.assert_outside_unchanged(&before, "the look/open swap race");
}

/// Symlinks the guest creates itself cannot be used to get out either.
#[test]
fn hostile_guest_created_symlinks_cannot_escape() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let abs_secret = l.outside("secret").display().to_string();
    let links = [
        ("mine_rel", "../outside/secret".to_string()),
        ("mine_deep", "sub/../../outside/secret".to_string()),
        ("mine_dir", "../outside/dir".to_string()),
        ("mine_up", "..".to_string()),
        ("mine_root", "/".to_string()),
        ("mine_abs", abs_secret.clone()),
        (
            "mine_dangling",
            "../outside/created-by-guest-link.txt".to_string(),
        ),
        ("sub/mine_sub", "../../secret".to_string()),
    ];
    let create: Vec<Value> = links
        .iter()
        .map(|(link, target)| json!({"op": "symlink", "path": link, "target": target}))
        .collect();
    let created = fs_attack(&l, false, create);
    // wasmtime refuses absolute symlink targets (so that no other program on the host can be
    // tricked into following one).
    for ((link, target), r) in links.iter().zip(&created) {
        if target.starts_with('/') {
            assert!(!r.ok, "the guest created {link} -> absolute {target}: {r}");
        }
    }
    let mut attacks = Vec::new();
    for ((link, _), _) in links.iter().zip(&created).filter(|(_, r)| r.ok) {
        attacks.push(op("read", link));
        attacks.push(op("write", link));
        attacks.push(op("write_existing", link));
        attacks.push(op("read_dir", link));
        attacks.push(op("walk", link));
        attacks.push(op("read", &format!("{link}/outside-only-q8z.txt")));
        attacks.push(op("read", &format!("{link}/secret")));
        attacks.push(op("write", &format!("{link}/created.txt")));
        attacks.push(op("mkdir", &format!("{link}/made")));
        attacks.push(op2(
            "link_follow",
            link,
            &format!("{}_hard", link.replace('/', "_")),
        ));
    }
    assert!(
        !attacks.is_empty(),
        "the guest could create no symlink at all (nothing to attack with)"
    );
    let results = fs_attack(&l, false, attacks);
    assert_results_no_leak(&results, "guest-created symlinks");
    assert_all_failed(&results, "following guest-created symlinks");
    l.assert_outside_unchanged(&before, "guest-created symlinks");
}

/// New hard links from the grant to outside paths, and from outside files into the grant.
#[test]
fn hostile_hard_link_to_outside_paths() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let abs_out = l.outside("abs-linked.txt").display().to_string();
    let ops = vec![
        op2("hard_link", "inside.txt", "../outside/linked.txt"),
        op2("hard_link", "inside.txt", "../linked.txt"),
        op2("hard_link", "inside.txt", "/../outside/linked.txt"),
        op2("hard_link", "inside.txt", &abs_out),
        op2("hard_link", "inside.txt", "dir_link/linked.txt"),
        op2("hard_link", "inside.txt", "up_link/outside/linked.txt"),
        op2("hard_link", "inside.txt", &l.via_root_link("linked.txt")),
        op2("hard_link", "../outside/secret", "stolen1"),
        op2("hard_link", "/../secret", "stolen2"),
        op2(
            "hard_link",
            &l.outside("secret").display().to_string(),
            "stolen3",
        ),
        op2("hard_link", "dir_link/outside-only-q8z.txt", "stolen4"),
        op2("hard_link", "up_link/secret", "stolen5"),
        op2("link_follow", "file_link", "stolen6"),
        op2("link_follow", "abs_file_link", "stolen7"),
        op2("link_follow", "chain_a", "stolen8"),
        op2("link_follow", "dangling_link", "stolen9"),
        // Link the planted symlink itself (allowed: it is a grant entry), then use the new name.
        op2("hard_link", "file_link", "file_link_again"),
        op("read", "file_link_again"),
        op("write_existing", "file_link_again"),
        op("write", "file_link_again"),
    ];
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "hard links");
    let escaped: Vec<String> = results
        .iter()
        .filter(|r| r.ok && !(r.op == "hard_link" && r.path == "file_link"))
        .map(|r| r.to_string())
        .collect();
    assert!(
        escaped.is_empty(),
        "SANDBOX ESCAPE: hard-link attacks succeeded:\n  {}",
        escaped.join("\n  ")
    );
    // A `stolenN` may exist only as a copy of a planted symlink (wasi-libc drops
    // AT_SYMLINK_FOLLOW), never as a regular file: assert_outside_unchanged also checks that no
    // grant entry shares an inode with an outside file.
    for stolen in 1..=9 {
        if let Ok(m) = std::fs::symlink_metadata(l.grant.join(format!("stolen{stolen}"))) {
            assert!(
                m.file_type().is_symlink(),
                "SANDBOX ESCAPE: grant/stolen{stolen} is {m:?}"
            );
        }
    }
    l.assert_outside_unchanged(&before, "hard-link attacks");
}

/// A hard link planted by the host (`grant/hl` shares its inode with `outside/hl_target`): the
/// guest links it under a new name and writes. A hard link *is* the outside file, so a write in
/// place reaches that one inode — the sandbox grants by name, and the host's defence is never to
/// put hard links into a writable grant (staging dirs are fresh copies; `write_file` replaces by
/// rename, see `write_file_to_hard_linked_name_leaves_outside_file_unchanged`). What the guest must
/// not get is anything beyond that inode: no other outside file, directory entry, mode or time.
#[test]
fn hostile_hard_link_of_planted_hard_link_then_write() {
    let l = Layout::new();
    let mut before = l.outside_snapshot();
    let ops = vec![
        op2("hard_link", "hl", "hl_again"),
        json!({"op": "write_existing", "path": "hl_again", "data": "HOSTILE-VIA-HL"}),
        op2("hard_link", "sub/hl2", "sub/hl2_again"),
        op2("rename", "sub/hl2_again", "../outside/hl2_moved"),
        op2("hard_link", "hl_again", "../outside/hl_third"),
        op("read", "hl"),
    ];
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "planted hard links");
    assert!(
        !find(&results, "rename", "sub/hl2_again").ok,
        "renamed a link out of the grant"
    );
    assert!(
        !find(&results, "hard_link", "hl_again").ok,
        "hard-linked out of the grant"
    );
    assert!(!l.outside("hl2_moved").exists() && !l.outside("hl_third").exists());
    // Everything outside except the shared inode's content and mtime must be as it was.
    let mut after = l.outside_snapshot();
    before.remove(Path::new("outside/hl_target"));
    let hl_after = after.remove(Path::new("outside/hl_target"));
    assert_same(
        &before,
        &after,
        "outside the grant after writing through a planted hard link",
    );
    assert!(
        matches!(hl_after, Some(Node::File { .. })),
        "outside/hl_target must still be a file"
    );
    l.assert_no_outside_inode_in_grant("writing through a planted hard link");
}

#[test]
fn hostile_rename_out_of_the_grant() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let abs_out = l.outside("renamed-abs.txt").display().to_string();
    let attacks = vec![
        op2("rename", "victim1.txt", "../renamed.txt"),
        op2("rename", "victim1.txt", "../outside/renamed.txt"),
        op2("rename", "victim1.txt", "/../renamed.txt"),
        op2("rename", "victim1.txt", "sub/../../renamed.txt"),
        op2("rename", "victim1.txt", &abs_out),
        op2("rename", "victim1.txt", "../outside/secret"),
        op2("rename", "victim1.txt", "dir_link/renamed.txt"),
        op2("rename", "victim1.txt", "dir_link/outside-only-q8z.txt"),
        op2("rename", "victim1.txt", "up_link/renamed.txt"),
        op2("rename", "sub", "../sub_moved"),
        op2("rename", "sub", "dir_link/sub_moved"),
        op2("rename", ".", "../dot_moved"),
        op2("rename", "/", "../root_moved"),
        op2("rename", "../secret", "stolen_by_rename"),
        op2("rename", "../outside", "stolen_outside"),
        op2("rename", "../outside/dir", "stolen_dir"),
        op2("rename", "dir_link/nested", "stolen_nested"),
        op2("rename", "up_link/secret", "stolen_up"),
        op2("rename", "../grant", "../grant_moved"),
    ];
    let n = attacks.len();
    let mut ops = attacks;
    // Renames that stay inside the grant still work (absolute paths are re-rooted).
    ops.push(op2("rename", "victim2.txt", "/renamed-in-grant.txt"));
    ops.push(op2("rename", "file_link", "renamed_symlink"));
    ops.push(op("read", "renamed_symlink"));
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "renames");
    assert_all_failed(&results[..n], "renaming out of (or into) the grant");
    assert!(
        find(&results, "rename", "victim2.txt").ok,
        "control: in-grant rename"
    );
    assert!(l.grant.join("renamed-in-grant.txt").is_file());
    assert!(
        find(&results, "rename", "file_link").ok,
        "control: renaming the symlink itself"
    );
    assert!(
        !find(&results, "read", "renamed_symlink").ok,
        "a renamed symlink still must not be followed out"
    );
    assert!(
        l.grant.join("victim1.txt").is_file(),
        "victim1 must still be in the grant"
    );
    l.assert_outside_unchanged(&before, "rename attacks");
}

#[test]
fn hostile_read_only_grant_refuses_every_mutation() {
    let l = Layout::new();
    let outside_before = l.outside_snapshot();
    let grant_before = l.grant_snapshot();
    let mut ops = Vec::new();
    for f in ["inside.txt", "sub/file.txt", "hl", "sub/hl2", "ok_link"] {
        ops.push(op("open_write", f));
        ops.push(op("write", f));
        ops.push(op("write_existing", f));
        ops.push(op("append", f));
        ops.push(op("open_trunc", f));
        ops.push(op("write_via_read_fd", f));
        ops.push(op("set_len_via_read_fd", f));
        ops.push(op("set_len", f));
        ops.push(op("set_times_via_read_fd", f));
        ops.push(op("set_times", f));
        ops.push(op("utimensat", f));
        ops.push(op("utimensat_nofollow", f));
        ops.push(op("set_readonly", f));
        ops.push(op("chmod", f));
        ops.push(op("truncate", f));
        ops.push(op("remove_file", f));
        ops.push(op2("rename", f, "renamed"));
        ops.push(op2("hard_link", f, "hard_linked"));
        ops.push(op2("link_follow", f, "hard_linked_follow"));
        ops.push(op2("copy", f, "copied"));
        ops.push(raw_open(f, &["rdonly", "trunc"]));
        ops.push(raw_open(f, &["wronly"]));
        ops.push(raw_open(f, &["rdwr"]));
        ops.push(json!({"op": "raw_open", "path": f, "flags": ["rdonly", "append"], "data": "X"}));
        ops.push(json!({"op": "raw_openat", "dir": "sub", "path": "file.txt", "flags": ["rdonly", "trunc"]}));
    }
    for new in ["new.txt", "sub/new.txt", "/new-abs.txt"] {
        ops.push(op("write", new));
        ops.push(op("create_new", new));
        ops.push(raw_open(new, &["rdonly", "creat"]));
        ops.push(raw_open(new, &["wronly", "creat", "excl"]));
        ops.push(json!({"op": "symlink", "path": new, "target": "inside.txt"}));
    }
    ops.push(json!({"op": "raw_openat", "dir": "sub", "path": "new-at.txt", "flags": ["rdonly", "creat"]}));
    ops.push(json!({"op": "raw_openat", "dir": "sub", "path": "file.txt", "flags": ["wronly"], "data": "X"}));
    for d in ["sub/empty", "sub", "etc"] {
        ops.push(op("remove_dir", d));
        ops.push(op("remove_dir_all", d));
        ops.push(op2("rename", d, "moved_dir"));
        ops.push(op("set_times", d));
        ops.push(op("utimensat", d));
        ops.push(op("chmod", d));
    }
    ops.push(op("mkdir", "newdir"));
    ops.push(op("mkdir_all", "sub/a/b"));
    ops.push(op("remove_file", "file_link"));
    ops.push(op("remove_file", "self_loop"));
    ops.push(op2("rename", "ok_link", "moved_link"));
    ops.push(op("utimensat_nofollow", "ok_link"));
    let n = ops.len();
    ops.push(op("read", "inside.txt")); // control: reading is allowed
    let results = fs_attack(&l, true, ops);
    assert_results_no_leak(&results, "read-only grant");
    assert_all_failed(&results[..n], "mutations in a read-only grant");
    assert_eq!(
        results[n].raw["data"], INSIDE,
        "control: a read-only grant can be read"
    );
    assert_same(
        &grant_before,
        &l.grant_snapshot(),
        "inside the read-only grant",
    );
    l.assert_outside_unchanged(&outside_before, "read-only grant attacks");
}

/// Very long paths, long names, deep `..` chains and names with newlines: failures, not crashes.
#[test]
fn hostile_very_long_paths_and_odd_names() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let deep = "a/".repeat(3000) + "x";
    let long_name = "n".repeat(300);
    let dots = "../".repeat(200) + "secret";
    let slashes = "/".repeat(5000) + "../secret";
    let huge = "b".repeat(200_000);
    let ops = vec![
        op("read", &deep),
        op("write", &deep),
        op("write", &long_name),
        op("read", &dots),
        op("write", &dots),
        op("read", &slashes),
        op("read", &huge),
        op("write", &huge),
        op("read", "evil\nname.txt"),
        op("write", "new\nline\n{\"fake\":1}.txt"),
        op("write", "tab\tand\u{7f}del.txt"),
        op("read", "ünïcødé-../secret"),
        op("read", "sub/./././../../secret"),
        op("read", "dir_link\u{0}/outside-only-q8z.txt"),
    ];
    let results = fs_attack(&l, false, ops);
    assert_results_no_leak(&results, "odd paths");
    for (i, p) in [(3, &dots), (4, &dots), (5, &slashes)] {
        assert!(!results[i].ok, "{p:.40}…: {}", results[i]);
    }
    assert_eq!(
        find(&results, "read", "evil\nname.txt").raw["data"],
        INSIDE,
        "control: a name with a newline"
    );
    assert!(
        !results[12].ok && !results[13].ok,
        "{} / {}",
        results[12],
        results[13]
    );
    l.assert_outside_unchanged(&before, "odd paths");
}

// ---------------------------------------------------------------------------------------------
// Ambient authority: network, environment, stdio
// ---------------------------------------------------------------------------------------------

#[test]
fn hostile_network_is_denied() {
    use std::net::{TcpListener, UdpSocket};
    let l = Layout::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp6 = TcpListener::bind(("::1", tcp.local_addr().unwrap().port())).ok();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let run = hostile(
        &l,
        json!({"attack": "net", "tcp_port": tcp.local_addr().unwrap().port(), "udp_port": udp.local_addr().unwrap().port()}),
    );
    let v = run.json();
    let results = v["results"].as_array().unwrap();
    assert!(results.len() >= 9, "{v}");
    let allowed: Vec<&Value> = results.iter().filter(|r| r["ok"] == true).collect();
    assert!(
        allowed.is_empty(),
        "SANDBOX ESCAPE: network operations succeeded: {allowed:?}"
    );
    // And from the host side: nobody connected, nothing arrived.
    assert!(
        matches!(tcp.accept(), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "SANDBOX ESCAPE: the guest connected to a host TCP listener"
    );
    if let Some(t6) = tcp6 {
        t6.set_nonblocking(true).unwrap();
        assert!(matches!(t6.accept(), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock));
    }
    let mut buf = [0u8; 64];
    assert!(
        matches!(udp.recv_from(&mut buf), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "SANDBOX ESCAPE: the guest sent a UDP datagram to the host"
    );
}

#[test]
fn hostile_env_and_args_are_empty() {
    let l = Layout::new();
    let v = hostile(&l, json!({"attack": "env"})).json();
    assert_eq!(
        v["vars"],
        json!([]),
        "the guest sees environment variables: {v}"
    );
    assert_eq!(v["args"], json!([]), "the guest sees arguments: {v}");
    assert_eq!(v["home"], Value::Null, "{v}");
    assert_no_leak(&v.to_string(), "env", "");
}

#[test]
fn hostile_stdin_is_empty() {
    let l = Layout::new();
    let v = hostile(&l, json!({"attack": "stdin"})).json();
    assert_no_leak(&v.to_string(), "stdin", "");
    assert!(
        v["ok"] == false || v["len"] == 0,
        "the guest read something on stdin: {v}"
    );
}

#[test]
fn hostile_stdout_and_stderr_do_not_reach_the_host() {
    let l = Layout::new();
    let run = hostile(&l, json!({"attack": "stdio"}));
    // run_bb7 already checked: exit 0, stdout exactly one JSON line, stderr empty.
    assert_eq!(
        run.stdout,
        format!("{}\n", run.json()),
        "stdout must be exactly the result"
    );
    for marker in [
        "GUEST-STDOUT-MARKER",
        "GUEST-STDERR-MARKER",
        "RAW-FD1-GUEST-MARKER",
        "RAW-FD2-GUEST-MARKER",
    ] {
        assert!(
            !run.output().contains(marker),
            "guest output {marker} reached bb7's stdio"
        );
    }
}

#[test]
fn hostile_sees_no_descriptor_but_its_grant() {
    let l = Layout::new();
    let v = hostile(&l, json!({"attack": "fds"})).json();
    let dirs = v["dirs"].as_array().unwrap();
    assert!(
        dirs.len() <= 1,
        "the guest holds more than one directory descriptor: {v}"
    );
}

// ---------------------------------------------------------------------------------------------
// Resource attacks: each must end with the right error, in bounded time, and the next call works
// ---------------------------------------------------------------------------------------------

fn hostile_limited(l: &Layout, args: Value) -> Run {
    let run = run_bb7(
        l,
        Tool::Hostile { read_only: false },
        &l.grant,
        &args,
        LIMITED_CALL_KILL,
    );
    assert!(
        run.elapsed < LIMITED_CALL_BOUND,
        "the call took {:?}, not well under a minute",
        run.elapsed
    );
    run
}

#[test]
fn hostile_endless_loop_hits_time_limit() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "loop"}));
    run.assert_failed_with("time-limit");
    assert_serves_next_call(&l);
}

/// Sleeping blocks in a host call (a WASI pollable), where epoch interruption never looks: the
/// wall-time limit must still stop it.
#[test]
fn hostile_sleep_hits_time_limit() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "sleep", "secs": 3600}));
    run.assert_failed_with("time-limit");
    // The wait ends at the deadline (issue 23 item 11): the call is stopped and its store
    // released, not abandoned still blocked.
    let error = run.audit["error"].as_str().unwrap_or_default();
    assert!(!error.contains("abandoned"), "{}", run.audit);
    assert_serves_next_call(&l);
}

/// Opening a FIFO with no writer blocks inside the host's `open(2)`: the wall-time limit must still
/// stop the call.
#[test]
fn hostile_blocking_fifo_open_hits_time_limit() {
    let l = Layout::new();
    l.plant_fifo("pipe");
    let run = hostile_limited(&l, json!({"attack": "fs", "ops": [op("read", "pipe")]}));
    run.assert_failed_with("time-limit");
    // The blocked open(2) is interrupted (issue 23 item 11): the call is stopped and its store
    // released, not abandoned still blocked.
    let error = run.audit["error"].as_str().unwrap_or_default();
    assert!(!error.contains("abandoned"), "{}", run.audit);
    assert_serves_next_call(&l);
}

#[test]
fn hostile_memory_bomb_hits_memory_limit() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "memory_bomb"}));
    run.assert_failed_with("memory-limit");
    assert_serves_next_call(&l);
}

#[test]
fn hostile_huge_result_is_refused() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "huge_result", "mib": 64}));
    run.assert_failed_with("result-too-large");
    assert!(
        run.stderr.len() < 4096,
        "the refused result leaked into stderr ({} bytes)",
        run.stderr.len()
    );
    assert_serves_next_call(&l);
}

/// The error message is handed to the model verbatim, like a result: it must be bounded like one,
/// on stderr and in the audit log.
#[test]
fn hostile_huge_error_message_is_bounded() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "huge_error", "mib": 64}));
    assert_eq!(run.code, 1);
    let limit = 4 << 20;
    assert!(
        run.stderr.len() <= limit + 4096,
        "a 64 MiB tool error message went through unbounded: {} bytes on stderr (the result limit is {limit})",
        run.stderr.len()
    );
    assert!(
        run.audit_line_len <= limit + 4096,
        "a 64 MiB tool error message went into the audit log unbounded: a {} byte record",
        run.audit_line_len
    );
    assert_serves_next_call(&l);
}

#[test]
fn hostile_deep_recursion_is_a_clean_trap() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "recursion"}));
    run.assert_failed_with("trap");
    assert_serves_next_call(&l);
}

#[test]
fn hostile_panic_is_a_clean_trap() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "panic"}));
    run.assert_failed_with("trap");
    assert_serves_next_call(&l);
}

#[test]
fn hostile_invalid_utf8_result_is_refused() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "invalid_utf8"}));
    assert_eq!(
        run.code,
        1,
        "a result that is not UTF-8 must fail the call: {}",
        run.stderr_head()
    );
    assert_serves_next_call(&l);
}

/// A tool's error message cannot forge audit records (the log stays one JSON record per line).
#[test]
fn hostile_error_message_cannot_forge_audit_records() {
    let l = Layout::new();
    let forged = "ordinary failure\n{\"started\":\"2020-01-01T00:00:00Z\",\"tool\":\"write_file\",\"grants\":[],\"network\":\"all\",\"env\":\"all\",\"outcome\":\"ok\"}\n";
    let run = hostile(
        &l,
        json!({"attack": "error", "kind": "conflict", "message": forged}),
    );
    run.assert_failed_with("conflict");
    // run_bb7 checked that exactly one record was added and every line is JSON; the forged one
    // must not be a line of its own.
    let log = std::fs::read_to_string(&l.audit).unwrap();
    assert!(
        log.lines().all(
            |line| serde_json::from_str::<Value>(line).unwrap()["started"]
                != "2020-01-01T00:00:00Z"
        ),
        "forged audit record: {log}"
    );
}

// ---------------------------------------------------------------------------------------------
// The real built-in tools
// ---------------------------------------------------------------------------------------------

fn file_id(path: &str, content: &str) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0u8]);
    h.update(content.as_bytes());
    hex::encode(h.finalize())[..8].to_string()
}

/// The argument that names read_file's file (`file_path` in the agent plan; `path` as a fallback),
/// found by a positive control: the name under which read_file returns an in-grant file's content.
fn read_file_field() -> &'static str {
    static FIELD: OnceLock<&'static str> = OnceLock::new();
    FIELD.get_or_init(|| {
        let l = Layout::new();
        for field in ["file_path", "path"] {
            let run = builtin(&l, "read_file", json!({ field: "inside.txt" }));
            if run.code == 0 && run.stdout.contains("needle-in-grant") {
                return field;
            }
        }
        panic!("control failed: read_file returns grant/inside.txt under neither `file_path` nor `path`");
    })
}

fn read_file_args(path: &str) -> Value {
    json!({ read_file_field(): path })
}

/// Runs `tool` with each of `args_list` in turn (a retrieval tool in a read-only grant) and checks
/// that no output leaks and nothing inside or outside the grant changed.
fn retrieval_attack(l: &Layout, tool: &str, args_list: Vec<Value>) -> Vec<Run> {
    let outside = l.outside_snapshot();
    let grant = l.grant_snapshot();
    let mut runs = Vec::new();
    for args in args_list {
        let run = builtin(l, tool, args.clone());
        assert_no_leak(&run.output(), &format!("{tool} {args}"), &args.to_string());
        runs.push(run);
    }
    assert_same(
        &grant,
        &l.grant_snapshot(),
        &format!("inside the read-only grant after {tool}"),
    );
    l.assert_outside_unchanged(&outside, tool);
    runs
}

#[test]
fn read_file_cannot_read_outside() {
    let l = Layout::new();
    let abs = l.outside("secret").display().to_string();
    let via_root = l.via_root_link("secret");
    let paths = [
        "../secret",
        "/../secret",
        "./../secret",
        "sub/../../secret",
        "../outside/secret",
        "../outside/dir/outside-only-q8z.txt",
        abs.as_str(),
        "/etc/passwd",
        "~/.bashrc",
        "file_link",
        "abs_file_link",
        "parent_secret_link",
        "chain_a",
        "dotdot_link",
        "sub/tricky",
        "dir_link/outside-only-q8z.txt",
        "abs_dir_link/nested/deep-q8z.txt",
        "sub/escape_via_up/outside-only-q8z.txt",
        "up_link/secret",
        "up_link/outside/secret",
        "root_link/etc/passwd",
        via_root.as_str(),
        "file_link/",
        "file_link/.",
        "dir_link/",
        "dir_link/./outside-only-q8z.txt",
        "self_loop",
        "dangling_link",
        "reenter_link",
    ];
    let mut args: Vec<Value> = paths.iter().map(|p| read_file_args(p)).collect();
    let n = args.len();
    args.push(read_file_args("inside.txt"));
    let runs = retrieval_attack(&l, "read_file", args);
    for (p, run) in paths.iter().zip(&runs[..n]) {
        if run.code == 0 {
            // Succeeding is only acceptable when nothing came back (checked by retrieval_attack);
            // report it anyway if it returned file content.
            let v = run.json();
            assert!(
                v["content"]
                    .as_str()
                    .is_none_or(|c| c.is_empty() || c == "GRANT-PASSWD\n"),
                "read_file {p:?} returned content: {v}"
            );
        }
    }
    assert!(
        runs[n].stdout.contains("needle-in-grant"),
        "control: read_file reads the grant"
    );
}

#[test]
fn list_files_does_not_list_through_symlinks() {
    let l = Layout::new();
    let mut args = vec![json!({})];
    for prefix in [
        "",
        ".",
        "/",
        "..",
        "../",
        "../outside",
        "/..",
        "dir_link",
        "dir_link/",
        "dir_link/nested",
        "abs_dir_link",
        "sub/escape_via_up",
        "up_link",
        "up_link/outside",
        "root_link",
        "root_link/tmp",
        "sub",
    ] {
        args.push(json!({"prefix": prefix}));
        args.push(json!({"prefix": prefix, "glob": "**/*"}));
    }
    for glob in [
        "../**",
        "/**",
        "**/../**",
        "dir_link/**",
        "**/*q8z*",
        "up_link/**",
        "root_link/**",
    ] {
        args.push(json!({"glob": glob}));
    }
    let runs = retrieval_attack(&l, "list_files", args);
    let all = &runs[0];
    assert_eq!(
        all.code,
        0,
        "control: list_files {{}} works: {}",
        all.stderr_head()
    );
    assert!(
        all.stdout.contains("inside.txt") && all.stdout.contains("sub/file.txt"),
        "control: {}",
        all.stdout
    );
    assert!(
        !all.stdout.contains("nested"),
        "list_files descended into a symlinked dir: {}",
        all.stdout
    );
}

#[test]
fn search_project_does_not_search_through_symlinks() {
    let l = Layout::new();
    let mut args = Vec::new();
    for query in [SECRET_MARK, "outside", "q8z", "root:", "needle-in-grant"] {
        args.push(json!({"query": query}));
        for glob in [
            "**/*",
            "../**",
            "/**",
            "dir_link/**",
            "up_link/**",
            "root_link/**",
            "**/../**",
        ] {
            args.push(json!({"query": query, "glob": glob}));
        }
    }
    let runs = retrieval_attack(&l, "search_project", args);
    let control = runs
        .iter()
        .find(|r| {
            r.code == 0 && r.stdout.contains("needle-in-grant") && r.stdout.contains("inside.txt")
        })
        .is_some();
    assert!(
        control,
        "control: search_project finds needle-in-grant in inside.txt"
    );
}

/// write_file with paths that climb out: all refused, nothing outside changes.
#[test]
fn write_file_refuses_parent_and_absolute_paths() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let abs = l.outside("secret").display().to_string();
    let abs_new = l.outside("abs-new.txt").display().to_string();
    for path in [
        "../secret",
        "../outside/secret",
        "../outside/new.txt",
        "./../new.txt",
        "sub/../../new.txt",
        "/../new.txt",
        "/new-abs.txt",
        "/etc/passwd",
        abs.as_str(),
        abs_new.as_str(),
        "~/new.txt",
        "..",
        "/",
        "",
    ] {
        let run = builtin(
            &l,
            "write_file",
            json!({"path": path, "content": "PWNED\n"}),
        );
        assert_no_leak(&run.output(), &format!("write_file {path:?}"), path);
        assert_eq!(
            run.code, 1,
            "write_file {path:?} must be refused: {}",
            run.stdout
        );
        l.assert_outside_unchanged(&before, &format!("write_file {path:?}"));
    }
    assert!(
        !l.grant.join("new-abs.txt").exists(),
        "an absolute path was silently re-rooted"
    );
    // Control: a plain write works.
    let run = builtin(
        &l,
        "write_file",
        json!({"path": "sub/new.txt", "content": "NEW\n"}),
    );
    assert_eq!(run.code, 0, "control: {}", run.stderr_head());
    assert_eq!(
        std::fs::read_to_string(l.grant.join("sub/new.txt")).unwrap(),
        "NEW\n"
    );
}

/// write_file to the name of a planted symlink (to a file, dangling, chained): the outside target
/// keeps its content; whatever happens, happens inside the grant.
#[test]
fn write_file_to_symlink_does_not_modify_outside_target() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    for path in [
        "file_link",
        "abs_file_link",
        "parent_secret_link",
        "chain_a",
        "sub/chain_c",
        "dotdot_link",
        "sub/tricky",
        "dangling_link",
        "abs_dangling_link",
        "reenter_link",
        "self_loop",
    ] {
        let run = builtin(
            &l,
            "write_file",
            json!({"path": path, "content": "PWNED\n"}),
        );
        assert_no_leak(&run.output(), &format!("write_file {path:?}"), path);
        l.assert_outside_unchanged(&before, &format!("write_file {path:?}"));
        if run.code == 0 {
            // The symlink was replaced by a regular file inside the grant.
            let meta = std::fs::symlink_metadata(l.grant.join(path)).unwrap();
            assert!(
                meta.is_file(),
                "write_file {path:?} succeeded but left {meta:?}"
            );
        }
    }
    assert!(!l.outside("created-by-dangling.txt").exists());
}

#[test]
fn write_file_through_directory_symlink_stays_inside() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let via_root = l.via_root_link("via-root.txt");
    for path in [
        "dir_link/new.txt",
        "dir_link/outside-only-q8z.txt",
        "dir_link/nested/deep-q8z.txt",
        "dir_link/brand/new/dirs.txt",
        "abs_dir_link/new.txt",
        "sub/escape_via_up/new.txt",
        "up_link/outside/new.txt",
        "up_link/secret",
        "root_link/tmp/bb7-escape-via-root.txt",
        via_root.as_str(),
    ] {
        let run = builtin(
            &l,
            "write_file",
            json!({"path": path, "content": "PWNED\n"}),
        );
        assert_no_leak(&run.output(), &format!("write_file {path:?}"), path);
        assert_eq!(
            run.code, 1,
            "write_file {path:?} through a symlinked directory must fail: {}",
            run.stdout
        );
        l.assert_outside_unchanged(&before, &format!("write_file {path:?}"));
    }
    assert!(!Path::new("/tmp/bb7-escape-via-root.txt").exists());
}

/// Trailing slashes (and `/.`) after a symlink name: refused, or at most the link itself is
/// replaced inside the grant; the outside target never changes.
#[test]
fn write_file_with_trailing_slash_paths() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    for path in [
        "file_link/",
        "file_link/.",
        "file_link//",
        "dir_link/",
        "dir_link/.",
        "dir_link/./",
        "dangling_link/",
        "dangling_link/.",
        "inside.txt/",
        "sub/",
        "up_link/",
        "up_link/.",
        "root_link/",
        "root_link/.",
        "hl/",
    ] {
        let run = builtin(
            &l,
            "write_file",
            json!({"path": path, "content": "PWNED\n"}),
        );
        assert_no_leak(&run.output(), &format!("write_file {path:?}"), path);
        if path.ends_with('/') {
            assert_eq!(
                run.code, 1,
                "write_file {path:?} (a directory path) must be refused: {}",
                run.stdout
            );
        }
        l.assert_outside_unchanged(&before, &format!("write_file {path:?}"));
    }
    assert_eq!(
        std::fs::read_to_string(l.grant.join("inside.txt")).unwrap(),
        INSIDE
    );
}

/// write_file to a name that is a hard link to an outside file replaces the name (atomic rename)
/// instead of writing through the shared inode.
#[test]
fn write_file_to_hard_linked_name_leaves_outside_file_unchanged() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    for path in ["hl", "sub/hl2"] {
        let run = builtin(
            &l,
            "write_file",
            json!({"path": path, "content": "REPLACED\n"}),
        );
        assert_eq!(run.code, 0, "write_file {path:?}: {}", run.stderr_head());
        assert_eq!(
            std::fs::read_to_string(l.grant.join(path)).unwrap(),
            "REPLACED\n"
        );
    }
    assert_eq!(
        std::fs::read_to_string(l.outside("hl_target")).unwrap(),
        HL_CONTENT
    );
    assert_eq!(
        std::fs::read_to_string(l.outside("hl2_target")).unwrap(),
        HL2_CONTENT
    );
    l.assert_outside_unchanged(&before, "write_file to hard-linked names");
}

fn edit(path: &str, id: &str, old: &str, new: &str) -> Value {
    json!({"edits": [{"path": path, "file_id": id, "old_string": old, "new_string": new}]})
}

#[test]
fn edit_file_through_symlinks_and_hard_links() {
    let l = Layout::new();
    let before = l.outside_snapshot();
    let secret = format!("{}\n", SECRETS[1]);
    let dir_secret = format!("{}\n", SECRETS[2]);
    let mut attacks = Vec::new();
    for path in [
        "file_link",
        "abs_file_link",
        "chain_a",
        "dotdot_link",
        "sub/tricky",
        "file_link/",
        "../outside/secret",
        "/../outside/secret",
    ] {
        attacks.push((
            path.to_string(),
            edit(path, &file_id(path, &secret), "-outside", "PWNED"),
        ));
    }
    for path in [
        "dir_link/outside-only-q8z.txt",
        "abs_dir_link/outside-only-q8z.txt",
        "up_link/outside/dir/outside-only-q8z.txt",
    ] {
        attacks.push((
            path.to_string(),
            edit(path, &file_id(path, &dir_secret), "-dir", "PWNED"),
        ));
    }
    let abs = l.outside("secret").display().to_string();
    attacks.push((
        abs.clone(),
        edit(&abs, &file_id(&abs, &secret), "-outside", "PWNED"),
    ));
    for (path, args) in &attacks {
        let run = builtin(&l, "edit_file", args.clone());
        assert_no_leak(
            &run.output(),
            &format!("edit_file {path:?}"),
            &args.to_string(),
        );
        assert_eq!(run.code, 1, "edit_file {path:?} must fail: {}", run.stdout);
        // The error must not reveal the outside file's id either (an oracle for its content).
        for content in [&secret, &dir_secret] {
            let id = file_id(path, content);
            assert!(
                !run.stderr.contains(&id),
                "edit_file {path:?} revealed the outside file's id: {}",
                run.stderr_head()
            );
        }
        l.assert_outside_unchanged(&before, &format!("edit_file {path:?}"));
    }
    // A hard-linked name is edited by replacing it: the outside file keeps its content.
    let run = builtin(
        &l,
        "edit_file",
        edit("hl", &file_id("hl", HL_CONTENT), "ORIGINAL", "EDITED"),
    );
    assert_eq!(run.code, 0, "edit_file hl: {}", run.stderr_head());
    assert_eq!(
        std::fs::read_to_string(l.grant.join("hl")).unwrap(),
        "HARDLINK-EDITED-CONTENT\n"
    );
    assert_eq!(
        std::fs::read_to_string(l.outside("hl_target")).unwrap(),
        HL_CONTENT,
        "edit wrote through a hard link"
    );
    // Control: an ordinary edit works.
    let run = builtin(
        &l,
        "edit_file",
        edit(
            "inside.txt",
            &file_id("inside.txt", INSIDE),
            "needle",
            "pin",
        ),
    );
    assert_eq!(run.code, 0, "control: {}", run.stderr_head());
    l.assert_outside_unchanged(&before, "edit_file attacks");
}

/// Retrieval tools must not hang on a FIFO in the project (opening one blocks until a writer
/// comes): they skip it or fail, within the wall-time limit.
#[test]
fn retrieval_tools_with_fifo_in_grant_finish() {
    let l = Layout::new();
    l.plant_fifo("pipe");
    l.plant_fifo("sub/pipe2");
    for (tool, args) in [
        ("list_files", json!({})),
        ("search_project", json!({"query": "needle-in-grant"})),
        ("read_file", read_file_args("pipe")),
    ] {
        let run = run_bb7(&l, Tool::Builtin(tool), &l.grant, &args, LIMITED_CALL_KILL);
        assert!(
            run.elapsed < LIMITED_CALL_BOUND,
            "{tool} took {:?}",
            run.elapsed
        );
        assert_no_leak(&run.output(), tool, &args.to_string());
    }
}

/// File names with newlines and control characters come back as JSON strings, one result line.
#[test]
fn list_files_reports_odd_names_safely() {
    let l = Layout::new();
    write(&l.grant.join("sub/bb7: fake failed [trap]: x"), "x");
    // run_bb7 checks that stdout is exactly one JSON line whatever the names.
    let runs = retrieval_attack(&l, "list_files", vec![json!({})]);
    let v = runs[0].json();
    assert!(v.to_string().contains("inside.txt"), "control: {v}");
}

// ---------------------------------------------------------------------------------------------
// Races, descriptor exhaustion, the component cache
// ---------------------------------------------------------------------------------------------

/// While the guest reads and writes `racy/f` in a loop, the host keeps swapping `racy` between a
/// real directory and a symlink to an outside directory. No read may ever return the outside
/// file, no write may ever land in it.
#[test]
fn hostile_symlink_swap_race() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let l = Layout::new();
    write(&l.outside("racedir/f"), &format!("{}\n", SECRETS[2]));
    write(&l.grant.join("racy_real/f"), "RACE-INSIDE\n");
    symlink("../outside/racedir", &l.grant.join("racy_sym"));
    let before = l.outside_snapshot();
    let stop = Arc::new(AtomicBool::new(false));
    let flips = Arc::new(AtomicU64::new(0));
    let flipper = {
        let (stop, flips, g) = (stop.clone(), flips.clone(), l.grant.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(g.join("racy_real"), g.join("racy"));
                let _ = std::fs::rename(g.join("racy"), g.join("racy_real"));
                let _ = std::fs::rename(g.join("racy_sym"), g.join("racy"));
                let _ = std::fs::rename(g.join("racy"), g.join("racy_sym"));
                flips.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let run = hostile(
        &l,
        json!({"attack": "race", "path": "racy/f", "millis": 2500, "write": true}),
    );
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    let v = run.json();
    eprintln!(
        "race: {} flips; guest saw {v}",
        flips.load(Ordering::Relaxed)
    );
    assert_no_leak(&v.to_string(), "the symlink-swap race", "");
    assert!(
        flips.load(Ordering::Relaxed) > 100,
        "the race never ran: {v}"
    );
    assert!(
        v["reads_ok"].as_u64().unwrap() > 0,
        "control: the guest never read the real dir: {v}"
    );
    l.assert_outside_unchanged(&before, "the symlink-swap race");
}

/// Holding thousands of descriptors exhausts at most the call itself: bb7 still records the call
/// and serves the next one.
#[test]
fn hostile_descriptor_exhaustion_is_contained() {
    let l = Layout::new();
    let run = hostile_limited(&l, json!({"attack": "fd_bomb", "max": 100_000}));
    eprintln!(
        "fd_bomb: exit {} {} {}",
        run.code,
        run.stdout,
        run.stderr_head()
    );
    assert!(run.code == 0 || run.code == 1, "{}", run.stderr_head());
    assert_serves_next_call(&l);
}

/// Runs bb7 with an explicit component cache and argv, for the cache test (which accepts a refusal,
/// exit 2, as the right answer).
fn raw_bb7(l: &Layout, cache: &Path, argv: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bb7"))
        .args(argv)
        .arg("--audit-log")
        .arg(&l.audit)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &l.home)
        .env("BB7_HOME", l.home.join(".bb7"))
        .env("BB7_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .output()
        .expect("running bb7")
}

/// Compiled components are native code, loaded from the cache without recompiling: the cache must
/// lie outside every directory a tool can see (DESIGN.md). Here the grant contains the cache; a
/// tool that can write there could make bb7 run other code than the component it audits. bb7 must
/// refuse such a grant, or the tool must not be able to change the cache.
#[test]
fn hostile_cannot_poison_the_compiled_component_cache() {
    let l = Layout::new();
    let cache = l.grant.join("bb7-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let staging = tempfile::tempdir().unwrap();
    let staging_dir = staging.path().to_str().unwrap();
    let wf_sha = builtin_shas()["write_file"].clone();
    let wasm = hostile_wasm().to_str().unwrap();
    let grant = l.grant.to_str().unwrap();

    // write_file runs once with this cache, so its compiled artifact is there.
    let out = raw_bb7(
        &l,
        &cache,
        &[
            "tools",
            "call",
            "write_file",
            "--dir",
            staging_dir,
            "--args",
            r#"{"path":"a.txt","content":"a\n"}"#,
        ],
    );
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{out:?}"
    );
    // Built-ins run their build-time precompiled code and need no cache entry; the hostile
    // component (third-party) is compiled through the cache, which creates the engine directory the
    // attack plants a "write_file" artifact (and its integrity tag) into.
    let _ = raw_bb7(
        &l,
        &cache,
        &[
            "tools",
            "call",
            "hostile",
            "--component",
            wasm,
            "--access",
            "read-only",
            "--dir",
            staging_dir,
            "--args",
            r#"{"attack":"env"}"#,
        ],
    );
    let engine_dirs: Vec<PathBuf> = std::fs::read_dir(cache.join("components"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let engine_dir = engine_dirs.first().expect(
        "the hostile component's compiled artifact must be cached for this attack to mean anything",
    );
    let engine_hash = engine_dir
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let wf_artifact = engine_dir.join(format!("{wf_sha}.cwasm"));
    let wf_before = std::fs::read(&wf_artifact).ok();

    // The hostile component, granted a directory that holds the cache, copies its own compiled
    // artifact over write_file's.
    let from = format!(
        "/bb7-cache/components/{engine_hash}/{}.cwasm",
        hostile_sha256()
    );
    let to = format!("/bb7-cache/components/{engine_hash}/{wf_sha}.cwasm");
    let args = json!({"attack": "fs", "ops": [
        op2("copy", &from, &to),
        op2("copy", &format!("{from}.tag"), &format!("{to}.tag")),
    ]})
    .to_string();
    let out = raw_bb7(
        &l,
        &cache,
        &[
            "tools",
            "call",
            "hostile",
            "--component",
            wasm,
            "--access",
            "read-write",
            "--dir",
            grant,
            "--args",
            &args,
        ],
    );
    if out.status.code() == Some(2) {
        // bb7 refused to grant a directory holding its own cache: the contract holds.
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot grant") && err.contains("overlaps"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&wf_artifact).ok(),
            wf_before,
            "the artifact must be untouched"
        );
        return;
    }
    let copied = String::from_utf8_lossy(&out.stdout).contains(r#""ok":true"#);

    // Now write_file runs: whose code?
    let out = raw_bb7(
        &l,
        &cache,
        &[
            "tools",
            "call",
            "write_file",
            "--dir",
            staging_dir,
            "--args",
            r#"{"attack":"env","path":"b.txt","content":"b\n"}"#,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains(r#""vars":[]"#),
        "SANDBOX ESCAPE: a tool granted a directory that holds bb7's compiled-component cache replaced \
         write_file's artifact ({}) with its own (copy succeeded: {copied}); `bb7 tools call write_file` then \
         ran the hostile component's code (it answered {stdout}) while the audit record names write_file's \
         sha256. A crafted artifact is arbitrary native code.",
        wf_artifact.display()
    );
    assert!(
        !copied || wf_before.is_none(),
        "SANDBOX ESCAPE: a tool overwrote bb7's compiled-component cache ({})",
        wf_artifact.display()
    );
}

/// Built-in tools called over and over while `racy` flips between a real directory and a symlink to
/// an outside directory: no read returns the outside file, no write lands in it.
#[test]
fn builtin_tools_symlink_swap_race() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let l = Layout::new();
    write(&l.outside("racedir/f.txt"), &format!("{}\n", SECRETS[2]));
    write(&l.grant.join("racy_real/f.txt"), "RACE-INSIDE\n");
    symlink("../outside/racedir", &l.grant.join("racy_sym"));
    let before = l.outside_snapshot();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, g) = (stop.clone(), l.grant.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(g.join("racy_real"), g.join("racy"));
                let _ = std::fs::rename(g.join("racy"), g.join("racy_real"));
                let _ = std::fs::rename(g.join("racy_sym"), g.join("racy"));
                let _ = std::fs::rename(g.join("racy"), g.join("racy_sym"));
            }
        })
    };
    for i in 0..15 {
        let runs = [
            builtin(&l, "read_file", read_file_args("racy/f.txt")),
            builtin(&l, "search_project", json!({"query": "TOP-SECRET"})),
            builtin(&l, "list_files", json!({"prefix": "racy"})),
            builtin(
                &l,
                "write_file",
                json!({"path": "racy/f.txt", "content": format!("RACE-WRITE {i}\n")}),
            ),
        ];
        for run in &runs {
            assert_no_leak(
                &run.output(),
                "a built-in tool during the symlink-swap race",
                "TOP-SECRET",
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    l.assert_outside_unchanged(&before, "the built-in symlink-swap race");
}

/// BB-7's own state (`.bb7/`, which may hold secrets), `.git/` and git-ignored files are not
/// readable, listable or searchable by the retrieval tools, however the path is spelled.
#[test]
fn retrieval_tools_skip_git_bb7_and_ignored_files() {
    const STATE_SECRET: &str = "BB7-STATE-SECRET-91d2";
    let l = Layout::new();
    write(
        &l.grant.join(".bb7/chats/c1/chat.json"),
        &format!("{{\"key\":\"{STATE_SECRET}\"}}\n"),
    );
    write(
        &l.grant.join(".git/config"),
        &format!("[remote] token = {STATE_SECRET}\n"),
    );
    write(
        &l.grant.join("sub/.bb7/state.json"),
        &format!("{STATE_SECRET}\n"),
    );
    write(&l.grant.join(".gitignore"), "secrets.env\n");
    write(
        &l.grant.join("secrets.env"),
        &format!("API_KEY={STATE_SECRET}\n"),
    );
    let mut args: Vec<(&str, Value)> = Vec::new();
    for p in [
        ".bb7/chats/c1/chat.json",
        "./.bb7/chats/c1/chat.json",
        "sub/../.bb7/chats/c1/chat.json",
        ".bb7//chats/c1/chat.json",
        ".git/config",
        "./.git/config",
        "sub/.bb7/state.json",
        "secrets.env",
        "./secrets.env",
    ] {
        args.push(("read_file", read_file_args(p)));
    }
    for prefix in [".bb7", ".git", "sub/.bb7", "./.bb7", ""] {
        args.push(("list_files", json!({"prefix": prefix})));
    }
    args.push(("list_files", json!({"glob": "**/.bb7/**"})));
    args.push(("list_files", json!({"glob": "**/*.env"})));
    args.push(("search_project", json!({"query": STATE_SECRET})));
    args.push((
        "search_project",
        json!({"query": "token", "glob": ".git/**"}),
    ));
    args.push((
        "search_project",
        json!({"query": "key", "glob": "**/.bb7/**"}),
    ));
    let grant_before = l.grant_snapshot();
    for (tool, a) in args {
        let run = builtin(&l, tool, a.clone());
        let out = run.output();
        let request = a.to_string();
        assert!(
            request.contains(STATE_SECRET) || !out.contains(STATE_SECRET),
            "{tool} {a} returned BB-7 state, .git or an ignored file: {}",
            truncate(&out, 600)
        );
        if tool == "search_project" {
            assert!(
                !run.stdout.contains(".bb7/") && !run.stdout.contains(".git/"),
                "{tool} {a}: {}",
                run.stdout
            );
        }
        if tool == "list_files" {
            for hidden in [".bb7/", ".git/", "secrets.env"] {
                assert!(
                    !run.stdout.contains(hidden),
                    "{tool} {a} listed {hidden}: {}",
                    run.stdout
                );
            }
        }
    }
    assert_same(
        &grant_before,
        &l.grant_snapshot(),
        "inside the read-only grant after retrieval calls",
    );
}

/// Issue 23 item 5: `sub/` flips between a real directory and a symbolic link to `.git` (inside the
/// grant, so resolving beneath the grant does not stop it) while `read_file sub/config` and
/// `search_project` run. The tools decided on the path string and then opened it, following the
/// link: `.git/config` came back in about half the calls. Each component of a path is now opened
/// without following links, so it never does.
#[test]
fn retrieval_symlink_swap_into_git_race() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    const GIT_SECRET: &str = "GIT-CONFIG-SECRET-4c1e";
    let l = Layout::new();
    write(
        &l.grant.join(".git/config"),
        &format!("[remote] token = {GIT_SECRET}\n"),
    );
    write(&l.grant.join("sub/config"), "[inside] token = INSIDE\n");
    // The same names under `.git/` and `sub/`: each file a search reads in `sub/` is one more
    // chance for the swap to land between the walk's look and the open.
    for i in 0..200 {
        write(
            &l.grant.join(format!(".git/f{i:03}.txt")),
            &format!("key = {GIT_SECRET}\n"),
        );
        write(&l.grant.join(format!("sub/f{i:03}.txt")), "key = INSIDE\n");
    }
    symlink(".git", &l.grant.join("sub_link"));
    let stop = Arc::new(AtomicBool::new(false));
    // `sub` and `sub_link` are exchanged atomically (renameat2 RENAME_EXCHANGE): `sub` always
    // exists, a real directory one moment and a link to `.git` the next.
    let flipper = {
        let (stop, g) = (stop.clone(), l.grant.clone());
        std::thread::spawn(move || {
            let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            let (a, b) = (c(&g.join("sub")), c(&g.join("sub_link")));
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: both paths are valid NUL-terminated strings for the call.
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
            }
        })
    };
    let (mut leaks, mut inside) = (Vec::new(), 0);
    for _ in 0..60 {
        let runs = [
            builtin(&l, "read_file", read_file_args("sub/config")),
            builtin(&l, "search_project", json!({"query": GIT_SECRET})),
        ];
        for run in &runs {
            let out = run.output();
            if out.contains(GIT_SECRET) {
                leaks.push(truncate(&out, 300));
            } else if out.contains("INSIDE") {
                inside += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(
        leaks.is_empty(),
        "{} of 120 retrieval calls returned .git/config through `sub` swapped for a link to .git: {}",
        leaks.len(),
        leaks[0]
    );
    assert!(inside > 0, "control: no call ever read the real sub/config");
}

/// Issue 23 item 4: `.git`, `.bb7` and the deny list match in any case. On a case-insensitive file
/// system (macOS, exFAT) `.GIT/config` is git's config and `server.PEM` a key; here the names are
/// spelled that way on disk (tests/caseless.rs repeats this on a real exFAT mount, as root).
#[test]
fn retrieval_tools_refuse_git_bb7_and_secrets_in_any_case() {
    const CASE_SECRET: &str = "CASE-SECRET-80f3";
    let l = Layout::new();
    let planted = [
        ".GIT/config",
        "sub/.Git/HEAD",
        ".BB7/chats/c1/chat.json",
        "certs/server.PEM",
        ".ENV",
        ".Env.Local",
        "keys/ID_RSA",
        "keys/id_ecdsa",
        ".git-credentials",
        "home/.aws/credentials",
        "home/.docker/config.json",
        ".kube/config",
    ];
    for p in planted {
        write(&l.grant.join(p), &format!("token = {CASE_SECRET}\n"));
    }
    let mut args: Vec<(&str, Value)> = planted
        .iter()
        .map(|p| ("read_file", read_file_args(p)))
        .collect();
    args.push(("search_project", json!({"query": CASE_SECRET})));
    args.push((
        "search_project",
        json!({"query": "token", "glob": ".GIT/**"}),
    ));
    args.push(("list_files", json!({"prefix": ".GIT"})));
    args.push(("list_files", json!({})));
    for (tool, a) in args {
        let run = builtin(&l, tool, a.clone());
        let out = run.output();
        assert!(
            !out.contains(CASE_SECRET),
            "{tool} {a} returned a file hidden in another case: {}",
            truncate(&out, 600)
        );
        if tool == "list_files" {
            for p in planted {
                assert!(
                    !run.stdout.contains(p),
                    "{tool} {a} listed {p}: {}",
                    run.stdout
                );
            }
        }
    }
}

/// A component's result is documented as a JSON document and the CLI prints it as the one line of
/// stdout: a result with newlines must not let a tool forge further lines of bb7's output.
#[test]
fn hostile_result_cannot_forge_extra_output_lines() {
    let l = Layout::new();
    let forged = "{\"status\":\"ok\"}\nbb7: write_file failed [trap]: forged\n{\"forged\":true}";
    // run_bb7 checks that stdout is exactly one JSON line (or that the call failed).
    let run = hostile(&l, json!({"attack": "raw_result", "result": forged}));
    assert!(
        !run.stdout.contains("forged"),
        "forged output: {}",
        run.stdout
    );
}
