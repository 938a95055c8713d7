//! Third-party tool component benchmarks (issue 14). Run: `cargo bench -p bb7 --bench components`
//! (`BB7_COMPONENT_RUNS=N` for N runs per process row instead of 10). Prints min / median / max of
//! every row with its target; asserts nothing about timings (a protocol or install error panics).
//!
//! Processes are the release `bb7` (`CARGO_BIN_EXE_bb7`) with a cleared environment (`PATH`,
//! `HOME`, `BB7_HOME`, `BB7_CACHE_DIR` only), each scenario with its own directories. The
//! components are built as `tests/common/wasm.rs` builds them (a nested cargo into
//! `target/tool-examples-wasm` and `target/hostile-wasm`).
//!
//! 1. Start-up with 20 installed third-party components, enabled for the project and granted, the
//!    compiled-code cache filled by their install (warm; one unmeasured run first). The 20 are
//!    distinct binaries: copies of the release `word_count.wasm` whose embedded `bb7-manifest`
//!    section is renamed (`bb7-manifesx`, same length: an unrelated custom section) so that the
//!    `bb7-tool.toml` beside each (`name = "wc01".."wc20"`, otherwise the example's manifest) is
//!    the only manifest, with a custom section appended that differs per copy. Two timings:
//!    a. spawn -> `bb7_init` -> `init` -> its reply, per run on a fresh project directory that
//!    was enabled beforehand (its `.bb7/` removed again, so `bb7_init` succeeds);
//!    b. spawn -> `init` -> `chat_new` -> an agent-mode `send` -> `done`, against `bb7-mock-llm`
//!    (a one-chunk text reply; the first request is checked to offer the 20 tools).
//!    The same two with no component installed, for comparison.
//! 2. `bb7 tools add <dir>` of the dev-profile `word_count.wasm` (no `--release`; its size and
//!    how much of it is code is printed), cold (fresh HOME and empty `BB7_CACHE_DIR` per run) and
//!    warm (fresh HOME per run, one cache filled beforehand); the release build for comparison.
//! 3. In-process, through the library: the per-call overhead of a third-party call as agent mode
//!    makes it (`load::load_granted` — a cache hit after the first — then
//!    `load::call_caps` and `Sandbox::call_with`) on the hostile fixture's `{"attack":"ok"}`,
//!    installed with `manage::add` + `manage::grant` under `host_sandbox(None)` (no audit log), with
//!    files `none` and with a directory grant (an empty directory, read-only); the built-in
//!    `list_files` on an empty directory (`Sandbox::call`) for comparison. The hostile fixture
//!    imports `wasi:sockets`, so its manifest must request some network (`127.0.0.1:9`, never
//!    connected to); a fourth row calls it with no capabilities at all (`CallCaps::none()`).
//!    Then `ProjectView::build` of a 2,000-file project (what every project-read call from the
//!    CLI, or the first one of an agent reply, pays) and the view's removal.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use bb7::components::installed::Status;
use bb7::components::{load, manage, view};
use bb7::sandbox::grant::CallCaps;
use bb7::sandbox::{Access, Grant};
use bb7_mock_llm::{MockServer, Reply, Script};
use serde_json::{Value, json};

const MODEL: &str = "mock/agent";
const COMPONENTS: usize = 20;
const VIEW_FILES: usize = 2000;
/// Calls timed per in-process row (after a warm-up of 200).
const CALLS: usize = 3000;

// ---------------------------------------------------------------------------------------------
// Building the components
// ---------------------------------------------------------------------------------------------

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
fn word_count_copy(original: &[u8], tag: &str) -> Vec<u8> {
    let mut bytes = original.to_vec();
    let from = b"\x0cbb7-manifest";
    let at: Vec<usize> = bytes
        .windows(from.len())
        .enumerate()
        .filter(|(_, w)| *w == from)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        at.len(),
        1,
        "expected exactly one bb7-manifest section name in word_count.wasm, found {}",
        at.len()
    );
    bytes[at[0] + from.len() - 1] = b'x';
    let name = b"bb7-bench-variant";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    assert!(payload.len() < 128);
    bytes.push(0);
    bytes.push(payload.len() as u8);
    bytes.extend_from_slice(&payload);
    bytes
}

/// Bytes of code (the code sections) and of custom sections, at every nesting level.
fn wasm_breakdown(bytes: &[u8]) -> (usize, usize) {
    let (mut code, mut custom) = (0, 0);
    for p in wasmparser::Parser::new(0).parse_all(bytes) {
        match p.expect("parsing the component") {
            wasmparser::Payload::CodeSectionStart { size, .. } => code += size as usize,
            wasmparser::Payload::CustomSection(r) => custom += r.data().len(),
            _ => {}
        }
    }
    (code, custom)
}

// ---------------------------------------------------------------------------------------------
// The host process
// ---------------------------------------------------------------------------------------------

/// Where a process keeps its per-user state: `HOME` (with the config), `BB7_HOME`, the cache.
struct Env {
    home: PathBuf,
    bb7_home: PathBuf,
    cache: PathBuf,
}

impl Env {
    /// Fresh directories under `dir`; a config pointing at `server` when given.
    fn new(dir: &Path, server: Option<&MockServer>) -> Env {
        Env::with_cache(dir, &dir.join("cache"), server)
    }

    fn with_cache(dir: &Path, cache: &Path, server: Option<&MockServer>) -> Env {
        let env = Env {
            home: dir.join("home"),
            bb7_home: dir.join("bb7-home"),
            cache: cache.to_path_buf(),
        };
        for d in [&env.home, &env.bb7_home, &env.cache] {
            std::fs::create_dir_all(d).unwrap();
        }
        if let Some(server) = server {
            let cfg = env.home.join(".config/bb7");
            std::fs::create_dir_all(&cfg).unwrap();
            std::fs::write(
                cfg.join("config.json"),
                json!({"api_key": "bench", "base_url": server.base_url(), "title_model": "mock/title"})
                    .to_string(),
            )
            .unwrap();
        }
        env
    }

    fn command(&self, cwd: &Path) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_bb7"));
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("BB7_HOME", &self.bb7_home)
            .env("BB7_CACHE_DIR", &self.cache)
            .current_dir(cwd);
        c
    }

    /// Runs `bb7 tools <args>` in `cwd`; panics unless it succeeds.
    fn tools(&self, cwd: &Path, args: &[&str]) -> Output {
        let o = self
            .command(cwd)
            .stdin(Stdio::null())
            .arg("tools")
            .args(args)
            .output()
            .expect("spawn bb7");
        assert!(
            o.status.success(),
            "bb7 tools {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }
}

struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    seq: u64,
    line: String,
}

impl Host {
    fn start(env: &Env) -> Host {
        let mut child = env
            .command(&env.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn bb7");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Host {
            child,
            stdin,
            stdout,
            seq: 0,
            line: String::new(),
        }
    }

    /// Writes `req` with a new request id; returns the id.
    fn write(&mut self, mut req: Value) -> String {
        self.seq += 1;
        let rid = self.seq.to_string();
        req["request_id"] = json!(rid);
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(&line).expect("write to bb7");
        stdin.flush().expect("flush");
        rid
    }

    fn next(&mut self) -> Value {
        self.line.clear();
        if self.stdout.read_line(&mut self.line).expect("read bb7") == 0 {
            panic!("bb7 closed stdout");
        }
        serde_json::from_str(&self.line)
            .unwrap_or_else(|e| panic!("bb7 wrote a line that is not JSON ({e}): {}", self.line))
    }

    /// Sends `req` and returns its reply; panics on `error`.
    fn call(&mut self, req: Value) -> Value {
        let rid = self.write(req.clone());
        loop {
            let v = self.next();
            if v["request_id"] == rid.as_str() {
                if v["type"] == "error" {
                    panic!("{req} failed: {v}");
                }
                return v;
            }
        }
    }

    /// An agent-mode `send`, read to its `done`; panics on `error` / `diff_error`.
    fn send_agent(&mut self, content: &str) -> Value {
        let rid = self
            .write(json!({"action": "send", "content": content, "model": MODEL, "mode": "agent"}));
        loop {
            let v = self.next();
            if v["request_id"] != rid.as_str() {
                continue;
            }
            match v["type"].as_str() {
                Some("done") => return v,
                Some("error") | Some("diff_error") => panic!("send failed: {v}"),
                _ => {}
            }
        }
    }

    fn close(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait bb7");
        assert!(status.success(), "bb7 exited with {status}");
    }
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (v[0], median, v[n - 1])
}

/// One table row: `name  min X unit  median X unit  max X unit   (target)`.
fn row(name: &str, unit: &str, decimals: usize, v: &[f64], target: &str) -> String {
    let (lo, med, hi) = stats(v);
    let f = |x: f64| format!("{x:.decimals$} {unit}");
    let t = if target.is_empty() {
        String::new()
    } else {
        format!("   ({target})")
    };
    format!(
        "{name:<50} min {:>11}  median {:>11}  max {:>11}  n={:<5}{t}",
        f(lo),
        f(med),
        f(hi),
        v.len()
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn mib(n: usize) -> f64 {
    n as f64 / 1048576.0
}

fn dir_bytes(p: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

/// A fresh, canonical directory `dir`.
fn fresh_dir(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    dir.canonicalize().unwrap()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

fn main() {
    let runs: usize = std::env::var("BB7_COMPONENT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(10);
    // Scenario 3 runs in this process through `host_sandbox(None)` and `ComponentStore`, which
    // read HOME / BB7_HOME / BB7_CACHE_DIR: point them at a directory of its own, now, before any
    // thread exists. (The spawned processes of scenarios 1 and 2 get a cleared environment.)
    let in_process = tempfile::tempdir().unwrap();
    let ip = fresh_dir(in_process.path());
    for d in ["home", "bb7-home", "cache"] {
        std::fs::create_dir_all(ip.join(d)).unwrap();
    }
    // SAFETY: no other thread exists yet (nothing has been spawned), so nothing reads the
    // environment concurrently.
    unsafe {
        std::env::set_var("HOME", ip.join("home"));
        std::env::set_var("BB7_HOME", ip.join("bb7-home"));
        std::env::set_var("BB7_CACHE_DIR", ip.join("cache"));
        std::env::remove_var("XDG_CACHE_HOME");
    }

    let started = Instant::now();
    let bin = Path::new(env!("CARGO_BIN_EXE_bb7"));
    println!(
        "bb7 third-party component benchmarks ({} , {runs} runs per process row, {CALLS} calls per in-process row)",
        bin.display()
    );
    let t = Instant::now();
    let wc_release = build_wasm(
        "examples/tool-components",
        "tool-examples-wasm",
        "word_count.wasm",
        true,
    );
    let wc_dev = build_wasm(
        "examples/tool-components",
        "tool-examples-wasm",
        "word_count.wasm",
        false,
    );
    let hostile = build_wasm("tests/hostile", "hostile-wasm", "hostile.wasm", true);
    println!(
        "  (components built in {:.1} s: {}, {}, {})",
        t.elapsed().as_secs_f64(),
        wc_release.display(),
        wc_dev.display(),
        hostile.display()
    );
    let wc_manifest = std::fs::read_to_string(
        repo_root().join("examples/tool-components/word-count/bb7-tool.toml"),
    )
    .unwrap();
    assert!(wc_manifest.starts_with("name = \"wordcount\"\n"));

    let work = tempfile::tempdir().unwrap();
    let work = fresh_dir(work.path());
    let mut table: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    // 1. Start-up with 20 components ---------------------------------------------------------------
    {
        let server = MockServer::start(Script::new([]).with_fallback(Reply::text(["Done."])));
        let s1 = work.join("s1");
        let env = Env::new(&s1, Some(&server));
        let original = std::fs::read(&wc_release).unwrap();
        let packages = s1.join("packages");
        let mut names = Vec::new();
        let t = Instant::now();
        for i in 1..=COMPONENTS {
            let name = format!("wc{i:02}");
            let dir = packages.join(&name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("word_count.wasm"),
                word_count_copy(&original, &name),
            )
            .unwrap();
            std::fs::write(
                dir.join("bb7-tool.toml"),
                wc_manifest.replacen("name = \"wordcount\"", &format!("name = \"{name}\""), 1),
            )
            .unwrap();
            let out = env.tools(&s1, &["add", p(&dir)]);
            let out = String::from_utf8_lossy(&out.stdout);
            assert!(out.contains(&format!("{name}__count_words")), "{out}");
            assert!(!out.contains("custom section"), "{out}");
            env.tools(&s1, &["grant", &name, "--all"]);
            names.push(name);
        }
        let installed = t.elapsed();
        // Enables all 20 for `project` (made with `.bb7/` so the CLI acts on it).
        let enable_all = |project: &Path| {
            std::fs::create_dir_all(project.join(".bb7")).unwrap();
            for n in &names {
                env.tools(project, &["enable", n]);
            }
        };
        let send_proj = fresh_dir(&s1.join("send-proj"));
        enable_all(&send_proj);
        std::fs::create_dir_all(send_proj.join(".bb7/chats")).unwrap();
        let list = String::from_utf8_lossy(&env.tools(&send_proj, &["list"]).stdout).into_owned();
        assert_eq!(
            list.matches(": offered").count(),
            COMPONENTS,
            "not all {COMPONENTS} offered:\n{list}"
        );
        // Fresh projects for the bb7_init runs (one extra for the unmeasured run), enabled, then
        // their .bb7/ removed so bb7_init can make it.
        let init_projs: Vec<PathBuf> = (0..=runs)
            .map(|r| {
                let d = fresh_dir(&s1.join(format!("init-proj-{r}")));
                enable_all(&d);
                std::fs::remove_dir_all(d.join(".bb7")).unwrap();
                d
            })
            .collect();
        let cached = dir_bytes(&env.cache);
        println!(
            "  ({COMPONENTS} components installed and granted in {:.1} s; cache holds {:.1} MiB; {} projects enabled)",
            installed.as_secs_f64(),
            cached as f64 / 1048576.0,
            init_projs.len() + 1
        );
        notes.push(format!(
            "row 1: {COMPONENTS} copies of the release word_count.wasm ({} bytes each + the variant section), compiled-code cache {:.1} MiB after install",
            original.len(),
            cached as f64 / 1048576.0
        ));

        let startup = |env: &Env, project: &Path| -> f64 {
            let t = Instant::now();
            let mut h = Host::start(env);
            h.call(json!({"action": "bb7_init", "project_root": project}));
            h.call(json!({"action": "init", "project_root": project}));
            let d = ms(t.elapsed());
            h.close();
            d
        };
        let first_send = |env: &Env, project: &Path, r: usize| -> f64 {
            let t = Instant::now();
            let mut h = Host::start(env);
            h.call(json!({"action": "init", "project_root": project}));
            h.call(json!({"action": "chat_new", "name": format!("bench {r}")}));
            let done = h.send_agent("hello");
            let d = ms(t.elapsed());
            assert_eq!(done["type"], "done");
            h.close();
            d
        };

        startup(&env, &init_projs[runs]);
        let a: Vec<f64> = (0..runs).map(|r| startup(&env, &init_projs[r])).collect();
        first_send(&env, &send_proj, 999);
        // What the model was offered: the 20 third-party tools.
        let reqs = server.chat_requests();
        let offered: Vec<String> = reqs[0].body["tools"]
            .as_array()
            .expect("tools offered")
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(String::from))
            .collect();
        let third: Vec<&String> = offered.iter().filter(|n| n.contains("__")).collect();
        assert_eq!(third.len(), COMPONENTS, "offered: {offered:?}");
        notes.push(format!(
            "row 1b: the agent request offered {} tools, {} of them third-party ({} .. {})",
            offered.len(),
            third.len(),
            third[0],
            third[third.len() - 1]
        ));
        let b: Vec<f64> = (0..runs).map(|r| first_send(&env, &send_proj, r)).collect();

        // The same with nothing installed.
        let s0 = work.join("s1-none");
        let env0 = Env::new(&s0, Some(&server));
        let projs0: Vec<PathBuf> = (0..=runs)
            .map(|r| fresh_dir(&s0.join(format!("init-proj-{r}"))))
            .collect();
        let send0 = fresh_dir(&s0.join("send-proj"));
        std::fs::create_dir_all(send0.join(".bb7/chats")).unwrap();
        startup(&env0, &projs0[runs]);
        let a0: Vec<f64> = (0..runs).map(|r| startup(&env0, &projs0[r])).collect();
        first_send(&env0, &send0, 999);
        let b0: Vec<f64> = (0..runs).map(|r| first_send(&env0, &send0, r)).collect();

        for line in [
            row(
                "1a 20 components: spawn..bb7_init..init reply",
                "ms",
                2,
                &a,
                "target ≤ 30 ms",
            ),
            row(
                "1b 20 components: spawn..init..chat_new..done",
                "ms",
                2,
                &b,
                "target ≤ 30 ms",
            ),
            row(
                "   no components: spawn..bb7_init..init reply",
                "ms",
                2,
                &a0,
                "",
            ),
            row(
                "   no components: spawn..init..chat_new..done",
                "ms",
                2,
                &b0,
                "",
            ),
        ] {
            println!("{line}");
            table.push(line);
        }
    }

    // 2. Install + compile ----------------------------------------------------------------------------
    {
        let s2 = work.join("s2");
        std::fs::create_dir_all(&s2).unwrap();
        let mut lines = Vec::new();
        for (label, wasm) in [("dev", &wc_dev), ("release", &wc_release)] {
            let bytes = std::fs::read(wasm).unwrap();
            let (code, custom) = wasm_breakdown(&bytes);
            let pkg = s2.join(format!("pkg-{label}"));
            std::fs::create_dir_all(&pkg).unwrap();
            std::fs::copy(wasm, pkg.join("word_count.wasm")).unwrap();
            std::fs::write(pkg.join("bb7-tool.toml"), &wc_manifest).unwrap();
            let note = format!(
                "row 2 ({label}): word_count.wasm is {} bytes ({:.2} MiB): code sections {:.2} MiB, custom sections {:.2} MiB (DWARF, names, manifest)",
                bytes.len(),
                mib(bytes.len()),
                mib(code),
                mib(custom)
            );
            println!("  ({note})");
            notes.push(note);
            let add = |env: &Env| -> f64 {
                let cwd = env.home.clone();
                let t = Instant::now();
                let o = env
                    .command(&cwd)
                    .stdin(Stdio::null())
                    .args(["tools", "add"])
                    .arg(&pkg)
                    .output()
                    .expect("spawn bb7");
                let d = ms(t.elapsed());
                assert!(
                    o.status.success(),
                    "bb7 tools add failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                d
            };
            let mut cold = Vec::new();
            for r in 0..runs {
                let env = Env::new(&s2.join(format!("{label}-cold-{r}")), None);
                cold.push(add(&env));
                if r == 0 {
                    notes.push(format!(
                        "row 2 ({label}): the compiled artifact in the cache is {:.2} MiB",
                        dir_bytes(&env.cache) as f64 / 1048576.0
                    ));
                }
            }
            let warm_cache = s2.join(format!("{label}-warm-cache"));
            add(&Env::with_cache(
                &s2.join(format!("{label}-warm-fill")),
                &warm_cache,
                None,
            ));
            let warm: Vec<f64> = (0..runs)
                .map(|r| {
                    add(&Env::with_cache(
                        &s2.join(format!("{label}-warm-{r}")),
                        &warm_cache,
                        None,
                    ))
                })
                .collect();
            let size = format!("{:.2} MiB", mib(bytes.len()));
            lines.push(row(
                &format!("2 tools add {label} build ({size}), cold cache"),
                "ms",
                1,
                &cold,
                "",
            ));
            lines.push(row(
                &format!("  tools add {label} build ({size}), warm cache"),
                "ms",
                1,
                &warm,
                "",
            ));
        }
        for line in lines {
            println!("{line}");
            table.push(line);
        }
    }

    // 3. Per-call overhead, in process ----------------------------------------------------------------
    {
        let sb = bb7::sandbox::host_sandbox(None).expect("host sandbox");
        let proj = fresh_dir(&ip.join("proj"));
        std::fs::create_dir_all(proj.join(".bb7")).unwrap();
        let pkg = |name: &str, files: &str| -> PathBuf {
            let d = ip.join(format!("pkg-{name}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::copy(&hostile, d.join("hostile.wasm")).unwrap();
            std::fs::write(
                d.join("bb7-tool.toml"),
                format!(
                    "name = \"{name}\"\nversion = \"1.0\"\nwit = \"0.1.0\"\nfiles = \"{files}\"\nnetwork = [\"127.0.0.1:9\"]\n"
                ),
            )
            .unwrap();
            d
        };
        for (name, files) in [("tp_none", "none"), ("tp_dir", "project-read")] {
            manage::add(&sb, &pkg(name, files), Some(&proj)).expect("manage::add");
            manage::grant(name, None, Some(&proj)).expect("manage::grant");
        }
        let statuses = manage::statuses(Some(&proj)).expect("statuses");
        let status = |name: &str| {
            statuses
                .iter()
                .find(|s| s.name == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} not installed"))
        };
        let (st_none, st_dir) = (status("tp_none"), status("tp_dir"));
        assert!(st_none.offered() && st_dir.offered());
        let empty = tempfile::tempdir().unwrap();
        let grant = Grant::new(empty.path(), Access::ReadOnly).unwrap();
        let args = r#"{"attack":"ok"}"#;

        let bench = |mut f: Box<dyn FnMut() + '_>| -> Vec<f64> {
            for _ in 0..200 {
                f();
            }
            (0..CALLS)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    us(t.elapsed())
                })
                .collect()
        };
        let loaded = Default::default();
        let third_party = |st: &Status, dir: Option<Grant>| {
            let c = load::load_granted(&sb, st, &loaded).expect("load_granted");
            let granted = st.granted.as_ref().expect("granted");
            let caps = load::call_caps(granted, dir);
            let (r, _rec) = sb.call_with(&c, &caps, &[], args);
            let v = r.expect("third-party call");
            assert_eq!(v["ok"], true, "{v}");
        };
        let tp_none = bench(Box::new(|| third_party(&st_none, None)));
        let tp_dir = bench(Box::new(|| third_party(&st_dir, Some(grant.clone()))));
        let bare = load::load_granted(&sb, &st_none, &loaded).expect("load_granted");
        let tp_bare = bench(Box::new(|| {
            let (r, _rec) = sb.call_with(&bare, &CallCaps::none(), &[], args);
            r.expect("third-party call");
        }));
        let list_files = sb.registry().builtin("list_files").expect("list_files");
        let builtin = bench(Box::new(|| {
            sb.call(&list_files, &grant, &[], "{}")
                .0
                .expect("list_files");
        }));
        for line in [
            row(
                "3 third-party call, files none (+net grant)",
                "µs",
                1,
                &tp_none,
                "target ≤ 50 µs",
            ),
            row(
                "  third-party call, directory grant (+net)",
                "µs",
                1,
                &tp_dir,
                "target ≤ 50 µs",
            ),
            row(
                "  third-party call, CallCaps::none()",
                "µs",
                1,
                &tp_bare,
                "",
            ),
            row("  built-in list_files, empty dir", "µs", 1, &builtin, ""),
        ] {
            println!("{line}");
            table.push(line);
        }

        // The project-read view of a 2,000-file project.
        let vp = fresh_dir(&ip.join("view-proj"));
        make_project(&vp, VIEW_FILES);
        let settings = bb7::config::agent::AgentConfig::default().tool_settings();
        let (mut build, mut drop_t) = (Vec::new(), Vec::new());
        let mut held = 0;
        for r in 0..=runs.max(10) {
            let t = Instant::now();
            let v = view::ProjectView::build(&vp, &settings).expect("view");
            let b = ms(t.elapsed());
            held = v.files;
            let t = Instant::now();
            drop(v);
            let d = ms(t.elapsed());
            if r > 0 {
                build.push(b);
                drop_t.push(d);
            }
        }
        assert_eq!(held, VIEW_FILES, "the view held {held} files");
        notes.push(format!(
            "row 3 view: {VIEW_FILES} readable files in 100 directories (+ .git/, an ignored build/, .env, none in the view); the view held {held}; one unmeasured build first"
        ));
        for line in [
            row("  project-read view build, 2000 files", "ms", 2, &build, ""),
            row("  project-read view removal (drop)", "ms", 2, &drop_t, ""),
        ] {
            println!("{line}");
            table.push(line);
        }
    }

    println!();
    println!("summary:");
    for line in &table {
        println!("{line}");
    }
    for n in &notes {
        println!("note: {n}");
    }
    println!("bench took {:.1} s", started.elapsed().as_secs_f64());
}

/// `files` readable source files (the last one is `.gitignore`) in 100 directories, plus what the
/// view leaves out: `.git/`, an ignored `build/`, `.env`.
fn make_project(root: &Path, files: usize) {
    std::fs::create_dir_all(root.join(".bb7")).unwrap();
    std::fs::create_dir_all(root.join(".git/objects")).unwrap();
    for i in 0..50 {
        std::fs::write(root.join(format!(".git/objects/o{i}")), "git object").unwrap();
    }
    std::fs::create_dir_all(root.join("build")).unwrap();
    for i in 0..100 {
        std::fs::write(root.join(format!("build/out{i}.o")), "object").unwrap();
    }
    std::fs::write(root.join(".env"), "SECRET=1\n").unwrap();
    std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
    for i in 0..files - 1 {
        let dir = root.join(format!("src/m{:02}", i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        let mut body = String::new();
        for l in 0..20 {
            body.push_str(&format!("fn f_{i}_{l}(x: u32) -> u32 {{ x + {l} }}\n"));
        }
        std::fs::write(dir.join(format!("f{i:04}.rs")), body).unwrap();
    }
}
