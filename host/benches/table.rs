//! The performance table, reproduced through the real `bb7` binary. Run:
//! `cargo bench -p bb7 --bench table` (`BB7_TABLE_RUNS=N` for N runs per row instead of 10;
//! `BB7_TABLE_ROWS=4,6,7` for only those rows; `BB7_TABLE_MESSAGE_BYTES=N` for template chats whose
//! user message is about N bytes instead of ~600, e.g. 2650 for ~3.3 KB of text per chat);
//! `BB7_TABLE_FIRST_SEND=1` for rows 1, 9 and 10 only, the first-send rows, which come first;
//! `BB7_TABLE_TEMPLATE=DIR` to keep the 5,000-chat template of rows 2/6 in DIR and reuse it).
//! Prints min / median / max of every timed row with its target; asserts nothing about timings
//! (a protocol error panics with the host's message).
//!
//! Every process is the release `bb7` (`CARGO_BIN_EXE_bb7`, or the binary `BB7_TABLE_BIN` names) spawned with a cleared environment
//! (`HOME`, `BB7_HOME`, `BB7_CACHE_DIR`, `PATH` only), driven over stdin/stdout, with
//! `~/.config/bb7/config.json` pointing at a `bb7-mock-llm` server on 127.0.0.1 (one server per
//! row, each with a fallback reply, so every `send` gets the same answer). Chats are named
//! (`chat_new {name}`), so no title request follows a reply. A median over an even number of runs
//! is the mean of the middle two.
//!
//! 1. First `send` on a fresh install: per run a fresh HOME, BB7_HOME, an empty `BB7_CACHE_DIR`
//!    and a fresh project (`.bb7/chats` made on disk, as `bb7_init` would); the time from
//!    `spawn` through `init`, `chat_new`, `send` to reading `done` (a 3-chunk reply). The built-in
//!    tool components are precompiled into the binary, so the cache is expected to stay empty (a
//!    note prints what it held after the first run).
//! 2. `chat_list` with 5,000 chats: the chats are made once, through the protocol, in a template
//!    project (`chat_new` + one `send` each: a ~600-byte user message and a ~650-byte reply;
//!    the last chat's message holds a unique needle; `BB7_TABLE_MESSAGE_BYTES` sets the message
//!    size). Per run a fresh process: `init`, then the
//!    time of the first `chat_list` (request written to reply read; 5,000 entries checked).
//! 3. `context_add` ×8: 8 files of exactly 256 KiB of Rust-like text (2 MiB), added one after
//!    the other (each waits for its `ok`); the time for the 8 requests. Main line: a fresh
//!    process per run (`init`, `chat_new`, then the 8 adds right away, while the host's background
//!    warm-up may still run); second line: one long-lived process, a new chat per run.
//! 4. Host CPU per streamed chunk: per run a fresh process does `init`, `chat_new`, waits until
//!    its CPU time stops moving (the background warm-up of the tokenizer and tool components is
//!    not streaming), then `send`s; the mock answers 2,000 content chunks. CPU = utime + stime
//!    (fields 14 + 15 of /proc/<pid>/stat, in `sysconf(_SC_CLK_TCK)` ticks, i.e. 10 ms steps)
//!    read just before writing the `send` and just after reading `done`, divided by 2,000.
//!    Because ticks are coarse, the same span is also read from the process's CPU-time clock
//!    (`clock_getcpuclockid` + `clock_gettime`, nanoseconds, all threads). Also the CPU of the
//!    whole send, the CPU from the first chunk to `done`, and the send's wall time.
//! 5. stdin EOF -> exit: per run a fresh process does `init` and `chat_new`, then the bench
//!    closes its stdin and times until `wait()` returns. Main line: right after the `chat_new`
//!    reply (background warm-up possibly still running); second line: after CPU has settled.
//! 6. Peak RSS of a session over the 5,000 chats (the template of row 2): per run a fresh
//!    process does `init`, a `chat_list` (5,000 entries), a title `search_chats` ("topic 4242": 1 hit) and a content
//!    `search_chats` (the needle of the last chat: 1 hit), then `VmHWM` of /proc/<pid>/status is
//!    read just before stdin is closed. The first search reads every chat (a chat whose name
//!    does not match is searched by content), so it carries the cache fill; both times printed.
//! 7. Peak RSS while streaming: `VmHWM` just after `done` in the processes of row 4.
//! 8. Binary size: `target/release/bb7` as built, and a copy stripped with `strip -o`.
//! 9. First `send` on a fresh install whose reply makes one `edit_file` call: as row 1 (fresh
//!    HOME, cache and project), with `a.txt` (a few lines) written in the project; the time from
//!    `spawn` through `init`, `chat_new`, `context_add a.txt`, `send` to reading `done` (the mock
//!    answers one `edit_file` call changing one line; the bench checks the staged output).
//! 10. A 1 MB `edit_file` through a send, minus a plain send: per run two fresh processes on a
//!     project holding a 1 MiB text file added with `context_add`; one's reply is plain text, the
//!     other's one `edit_file` call changing one line of the big file. Both time `send` to `done`
//!     (after `init`, `chat_new` and the `context_add`); the row is the difference of the medians.
//!     Second line: the same in one long-lived process (sandbox already made), a new chat per run.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use serde_json::{Value, json};

const MODEL: &str = "mock/model";
const CHATS: usize = 5000;
const STREAM_CHUNKS: usize = 2000;
const CONTEXT_FILES: usize = 8;
const CONTEXT_FILE_BYTES: usize = 256 << 10;
const BIG_EDIT_BYTES: usize = 1 << 20;

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
    /// Fresh directories under `dir`, with a config pointing at `server`.
    fn new(dir: &Path, server: &MockServer) -> Env {
        let env = Env {
            home: dir.join("home"),
            bb7_home: dir.join("bb7-home"),
            cache: dir.join("cache"),
        };
        for d in [&env.home, &env.bb7_home, &env.cache] {
            std::fs::create_dir_all(d).unwrap();
        }
        let cfg = env.home.join(".config/bb7");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(
            cfg.join("config.json"),
            json!({"api_key": "bench", "base_url": server.base_url(), "title_model": "mock/title"})
                .to_string(),
        )
        .unwrap();
        env
    }
}

/// The binary measured: `BB7_TABLE_BIN` (e.g. a copy of an earlier build, for a before/after
/// table), else the release `bb7` of this build.
fn bin() -> PathBuf {
    std::env::var_os("BB7_TABLE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_bb7")))
}

/// A project directory with `.bb7/chats`, as `bb7_init` makes it.
fn project(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join(".bb7/chats")).unwrap();
    dir.canonicalize().unwrap()
}

struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pid: u32,
    seq: u64,
    line: String,
}

impl Host {
    fn start(env: &Env) -> Host {
        let mut child = Command::new(bin())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &env.home)
            .env("BB7_HOME", &env.bb7_home)
            .env("BB7_CACHE_DIR", &env.cache)
            .current_dir(&env.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn bb7");
        let pid = child.id();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Host {
            child,
            stdin,
            stdout,
            pid,
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

    /// The next line from stdout.
    fn next(&mut self) -> Value {
        self.line.clear();
        if self.stdout.read_line(&mut self.line).expect("read bb7") == 0 {
            panic!("bb7 closed stdout");
        }
        serde_json::from_str(&self.line)
            .unwrap_or_else(|e| panic!("bb7 wrote a line that is not JSON ({e}): {}", self.line))
    }

    /// Sends `req` and returns its reply (the first line with its request id); panics on `error`.
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

    /// Sends a `send` and reads to its `done`, calling `on_chunk` for each `chunk`; panics on
    /// `error` / `diff_error`.
    fn send(&mut self, content: &str, on_chunk: impl FnMut()) -> Value {
        self.send_to(MODEL, content, on_chunk)
    }

    /// [`Host::send`] with model `model`.
    fn send_to(&mut self, model: &str, content: &str, mut on_chunk: impl FnMut()) -> Value {
        let req = json!({"action": "send", "content": content, "model": model});
        let rid = self.write(req);
        loop {
            let v = self.next();
            if v["request_id"] != rid.as_str() {
                continue;
            }
            match v["type"].as_str() {
                Some("chunk") => on_chunk(),
                Some("done") => return v,
                Some("error") | Some("diff_error") => panic!("send failed: {v}"),
                _ => {}
            }
        }
    }

    /// Closes stdin and waits for the process to exit; returns the time from the close to `wait()`.
    fn close(mut self) -> Duration {
        let t = Instant::now();
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait bb7");
        let d = t.elapsed();
        assert!(status.success(), "bb7 exited with {status}");
        d
    }

    /// Waits until the process's CPU time has not moved by more than 1 ms in 3 polls 50 ms apart
    /// (its background warm-up is over), at most 10 s.
    fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = cpu_ns(self.pid);
        let mut quiet = 0;
        while quiet < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            let now = cpu_ns(self.pid);
            if now.saturating_sub(last) < 1_000_000 {
                quiet += 1;
            } else {
                quiet = 0;
            }
            last = now;
        }
    }

    fn init(&mut self, root: &Path) {
        self.call(json!({"action": "init", "project_root": root}));
    }

    fn chat_new(&mut self, name: &str) {
        self.call(json!({"action": "chat_new", "name": name}));
    }
}

// ---------------------------------------------------------------------------------------------
// /proc and clocks
// ---------------------------------------------------------------------------------------------

/// utime + stime of `pid` in clock ticks (fields 14 and 15 of /proc/<pid>/stat).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // The command name (field 2) may hold spaces: count from the closing parenthesis, after which
    // field 3 is the first, so fields 14 and 15 are the 12th and 13th.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// The CPU time of the whole process `pid` (every thread, live or exited) in nanoseconds, from its
/// CPU-time clock; 0 if the clock cannot be read.
fn cpu_ns(pid: u32) -> u64 {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid out-pointer; `ts` is written by clock_gettime on success.
    unsafe {
        if libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) != 0 {
            return 0;
        }
        let mut ts: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(clock, &mut ts) != 0 {
            return 0;
        }
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// A field of /proc/<pid>/status in KiB (e.g. `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
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
        "{name:<44} min {:>11}  median {:>11}  max {:>11}{t}",
        f(lo),
        f(med),
        f(hi)
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

/// Exactly `CONTEXT_FILE_BYTES` of Rust-like source, different for each `n`.
fn source_text(n: usize) -> String {
    let mut text = String::with_capacity(CONTEXT_FILE_BYTES + 256);
    let mut i = 0;
    while text.len() < CONTEXT_FILE_BYTES {
        text.push_str(&format!(
            "/// Computes step {i} of module {n}.\npub fn step_{n}_{i}(value: usize, table: &[u64]) -> u64 {{\n    let x = table[value % table.len()].wrapping_mul({i});\n    x ^ (x >> 7) ^ 0x{n:x}{i:x}\n}}\n\n"
        ));
        i += 1;
    }
    text.truncate(CONTEXT_FILE_BYTES - 1);
    text.push('\n');
    text
}

/// `BIG_EDIT_BYTES` of text lines with one line, `EDIT_MARKER`, halfway.
fn big_text() -> String {
    let mut text = String::with_capacity(BIG_EDIT_BYTES + 128);
    let mut i = 0;
    while text.len() < BIG_EDIT_BYTES / 2 {
        text.push_str(&format!(
            "line {i}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    text.push_str(EDIT_MARKER);
    text.push('\n');
    while text.len() < BIG_EDIT_BYTES {
        text.push_str(&format!(
            "line {i}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    text
}

const EDIT_MARKER: &str = "let marker = \"change me\";";
const EDIT_MODEL: &str = "mock/edit";

/// A mock that answers `MODEL` with a 3-chunk text and `EDIT_MODEL` with one `edit_file` call
/// replacing `EDIT_MARKER` in `path`.
fn edit_server(path: &str) -> MockServer {
    MockServer::start(
        Script::new([])
            .with_fallback(Reply::text(["Hello", " from", " the mock."]))
            .with_model_reply(
                EDIT_MODEL,
                Reply::tool_calls([ToolCall::edit_file(
                    0,
                    "call_1",
                    &[(
                        path,
                        &format!("{{{{file_id:{path}}}}}"),
                        EDIT_MARKER,
                        "let marker = \"changed\";",
                    )],
                )]),
            ),
    )
}

/// Asserts that `done` staged `path`.
fn assert_staged(done: &Value, path: &str) {
    let staged = done["output_files"]
        .as_array()
        .is_some_and(|a| a.iter().any(|p| p == path));
    assert!(staged, "the edit_file call did not stage {path}: {done}");
}

/// The user message of template chat `i`: ~`bytes` bytes; the last chat's holds the needle.
fn chat_message(i: usize, bytes: usize) -> String {
    let mut text = format!("Message for chat {i} about topic {i}. ");
    while text.len() < bytes {
        text.push_str("Please refactor the physics engine so the integrator is stable. ");
    }
    if i == CHATS - 1 {
        text.push_str(" needle-in-chat-4999");
    }
    text
}

fn dir_bytes(p: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_bytes(&e.path())
        } else {
            m.len()
        };
    }
    total
}

// ---------------------------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------------------------

fn main() {
    let runs: usize = std::env::var("BB7_TABLE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(10);
    // Rows to run (all when unset); rows 2 and 6 share the 5,000-chat template, 4 and 7 a run.
    let rows: Option<Vec<usize>> = std::env::var("BB7_TABLE_ROWS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let want = |n: usize| rows.as_ref().is_none_or(|r| r.contains(&n));
    let message_bytes: usize = std::env::var("BB7_TABLE_MESSAGE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let started = Instant::now();
    println!(
        "bb7 performance table (release build, {runs} runs per timed row, through the binary)"
    );
    let mut table: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let show = |line: &str| println!("{line}");

    // 1. First send on a fresh install ---------------------------------------------------------
    if want(1) {
        let server = MockServer::start(Script::new([]).with_fallback(Reply::text([
            "Hello",
            " from",
            " the mock.",
        ])));
        let mut samples = Vec::new();
        for _ in 0..runs {
            let dir = tempfile::tempdir().unwrap();
            let env = Env::new(dir.path(), &server);
            let root = project(&dir.path().join("proj"));
            let t = Instant::now();
            let mut h = Host::start(&env);
            h.init(&root);
            h.chat_new("first");
            h.send("hello", || {});
            samples.push(ms(t.elapsed()));
            h.close();
            let cached = dir_bytes(&env.cache);
            if samples.len() == 1 {
                notes.push(format!(
                    "row 1: the compiled-component cache held {cached} bytes after the first send"
                ));
            }
        }
        let line = row(
            "1 first send, fresh install (spawn..done)",
            "ms",
            2,
            &samples,
            "target ≤ 10 ms",
        );
        show(&line);
        table.push(line);
    }

    // 9. First send on a fresh install, one edit_file call ----------------------------------------
    if want(9) {
        let server = edit_server("a.txt");
        let mut samples = Vec::new();
        for _ in 0..runs {
            let dir = tempfile::tempdir().unwrap();
            let env = Env::new(dir.path(), &server);
            let root = project(&dir.path().join("proj"));
            let small = format!("fn main() {{\n    {EDIT_MARKER}\n}}\n");
            std::fs::write(root.join("a.txt"), &small).unwrap();
            let t = Instant::now();
            let mut h = Host::start(&env);
            h.init(&root);
            h.chat_new("first");
            h.call(json!({"action": "context_add", "path": "a.txt", "content": small}));
            let done = h.send_to(EDIT_MODEL, "edit", || {});
            samples.push(ms(t.elapsed()));
            assert_staged(&done, "a.txt");
            h.close();
        }
        let line = row(
            "9 first send + 1 edit_file, fresh install",
            "ms",
            2,
            &samples,
            "target ≤ 15 ms",
        );
        show(&line);
        table.push(line);
    }

    // 10. A 1 MB edit_file through a send, minus a plain send ---------------------------------------
    if want(10) {
        let server = edit_server("big.txt");
        let dir = tempfile::tempdir().unwrap();
        let env = Env::new(dir.path(), &server);
        let root = project(&dir.path().join("proj"));
        let big = big_text();
        std::fs::write(root.join("big.txt"), &big).unwrap();
        let timed = |h: &mut Host, model: &str, chat: &str| -> f64 {
            h.chat_new(chat);
            h.call(json!({"action": "context_add", "path": "big.txt", "content": big}));
            let t = Instant::now();
            let done = h.send_to(model, "change the marker", || {});
            let d = ms(t.elapsed());
            if model == EDIT_MODEL {
                assert_staged(&done, "big.txt");
            }
            d
        };
        let (mut plain, mut edit) = (Vec::new(), Vec::new());
        for r in 0..runs {
            for (model, out) in [(MODEL, &mut plain), (EDIT_MODEL, &mut edit)] {
                let mut h = Host::start(&env);
                h.init(&root);
                out.push(timed(&mut h, model, &format!("big {r}")));
                h.close();
            }
        }
        let (mut warm_plain, mut warm_edit) = (Vec::new(), Vec::new());
        let mut h = Host::start(&env);
        h.init(&root);
        timed(&mut h, EDIT_MODEL, "warm-up");
        h.settle();
        for r in 0..runs {
            warm_plain.push(timed(&mut h, MODEL, &format!("warm plain {r}")));
            warm_edit.push(timed(&mut h, EDIT_MODEL, &format!("warm edit {r}")));
        }
        h.close();
        let diff = |e: &[f64], p: &[f64]| stats(e).1 - stats(p).1;
        for line in [
            format!(
                "{:<44} median {:>8.2} ms   (target ≤ 8.5 ms)",
                "10 1 MB edit_file send - plain send (fresh)",
                diff(&edit, &plain)
            ),
            row(
                "  send with the 1 MB edit (fresh process)",
                "ms",
                2,
                &edit,
                "",
            ),
            row("  plain send, 1 MB in context (fresh)", "ms", 2, &plain, ""),
            format!(
                "{:<44} median {:>8.2} ms",
                "  1 MB edit - plain (one process)",
                diff(&warm_edit, &warm_plain)
            ),
        ] {
            show(&line);
            table.push(line);
        }
    }

    if std::env::var_os("BB7_TABLE_FIRST_SEND").is_some() {
        summary(runs, &table, &notes, started);
        return;
    }

    // Shared state for rows 2-7: one HOME (warm component cache), the template project.
    let work = tempfile::tempdir().unwrap();
    let short = MockServer::start(Script::new([]).with_fallback(Reply::text([
        "Here is the plan. ",
        "First, move the integrator into its own module and give it a fixed time step. ",
        "Second, clamp the velocities before the collision pass so nothing tunnels through walls. ",
        "Third, replace the explicit Euler step with semi-implicit Euler, which is stable for springs. ",
        "Fourth, accumulate forces per body instead of per contact, which removes the double counting. ",
        "Fifth, add a regression test that drops a box on a plane for ten thousand steps. ",
        "Sixth, profile the broad phase; a sorted sweep along one axis is usually enough. ",
        "That should make the simulation stable at sixty hertz. ",
    ])));
    let env = Env::new(&work.path().join("shared"), &short);

    // 2. chat_list with 5,000 chats ---------------------------------------------------------------
    // `BB7_TABLE_TEMPLATE=DIR` keeps the template in DIR, and reuses it when DIR already holds
    // its chats (made with the same message size), so profiling rows 2/6 need not remake it.
    let kept = std::env::var_os("BB7_TABLE_TEMPLATE").map(PathBuf::from);
    let reuse = kept
        .as_ref()
        .is_some_and(|d| d.join(".bb7/chats/index.json").exists());
    let template = project(&kept.unwrap_or_else(|| work.path().join("template")));
    if (want(2) || want(6)) && !reuse {
        let t = Instant::now();
        let mut h = Host::start(&env);
        h.init(&template);
        for i in 0..CHATS {
            h.chat_new(&format!("Chat about topic {i}"));
            h.send(&chat_message(i, message_bytes), || {});
        }
        h.close();
        let bytes = dir_bytes(&template.join(".bb7"));
        let line = format!(
            "  (made {CHATS} chats through the protocol, chat_new + one send each, in {:.1} s; .bb7/ holds {:.1} MB)",
            t.elapsed().as_secs_f64(),
            bytes as f64 / 1e6
        );
        show(&line);
        notes.push(format!(
            "rows 2/6: template .bb7/ is {:.1} MB for {CHATS} chats (one ~{message_bytes} B user message + ~650 B reply each)",
            bytes as f64 / 1e6
        ));
    }
    if want(2) {
        let mut samples = Vec::new();
        for _ in 0..runs {
            let mut h = Host::start(&env);
            h.init(&template);
            let t = Instant::now();
            let r = h.call(json!({"action": "chat_list"}));
            samples.push(ms(t.elapsed()));
            let n = r["chats"].as_array().map_or(0, Vec::len);
            assert_eq!(n, CHATS, "chat_list returned {n} chats");
            h.close();
        }
        let line = row(
            "2 chat_list, 5000 chats (first in process)",
            "ms",
            2,
            &samples,
            "target ≤ 60 ms",
        );
        show(&line);
        table.push(line);
    }

    // 3. context_add x8, 2 MiB --------------------------------------------------------------------
    if want(3) {
        let files: Vec<(String, String)> = (0..CONTEXT_FILES)
            .map(|n| (format!("src/module{n}.rs"), source_text(n)))
            .collect();
        let root = project(&work.path().join("ctx"));
        let add_all = |h: &mut Host| -> f64 {
            let t = Instant::now();
            for (path, text) in &files {
                h.call(json!({"action": "context_add", "path": path, "content": text}));
            }
            ms(t.elapsed())
        };
        let mut fresh = Vec::new();
        for r in 0..runs {
            let mut h = Host::start(&env);
            h.init(&root);
            h.chat_new(&format!("ctx fresh {r}"));
            fresh.push(add_all(&mut h));
            h.close();
        }
        let mut warm = Vec::new();
        let mut h = Host::start(&env);
        h.init(&root);
        h.settle();
        for r in 0..runs {
            h.chat_new(&format!("ctx warm {r}"));
            warm.push(add_all(&mut h));
        }
        h.close();
        let line = row(
            "3 context_add x8, 2 MiB (fresh process)",
            "ms",
            2,
            &fresh,
            "target ≤ 45 ms",
        );
        show(&line);
        table.push(line);
        let line = row(
            "  context_add x8, 2 MiB (one process)",
            "ms",
            2,
            &warm,
            "target ≤ 45 ms",
        );
        show(&line);
        table.push(line);
    }

    // 4 and 7. CPU per streamed chunk; peak RSS while streaming ------------------------------------
    let mut row7 = None;
    if want(4) || want(7) {
        let server = MockServer::start(
            Script::new([])
                .with_fallback(Reply::text((0..STREAM_CHUNKS).map(|i| format!("word{i} ")))),
        );
        let env4 = Env::new(&work.path().join("stream"), &server);
        // Warm this HOME's component cache once, as the shared one is.
        {
            let root = project(&work.path().join("stream-warm"));
            let mut h = Host::start(&env4);
            h.init(&root);
            h.chat_new("warm");
            h.send("warm", || {});
            h.close();
        }
        let tck = clk_tck();
        let root = project(&work.path().join("stream-proj"));
        let (mut per_chunk, mut per_chunk_ns, mut whole, mut whole_ns) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut from_first_ns, mut wall, mut hwm) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..runs {
            let mut h = Host::start(&env4);
            h.init(&root);
            h.chat_new(&format!("stream {r}"));
            h.settle();
            let pid = h.pid;
            let mut chunks = 0usize;
            let mut first_ns = 0u64;
            let (t0, n0) = (cpu_ticks(pid), cpu_ns(pid));
            let w = Instant::now();
            h.send("stream", || {
                if chunks == 0 {
                    first_ns = cpu_ns(pid);
                }
                chunks += 1;
            });
            let (t1, n1) = (cpu_ticks(pid), cpu_ns(pid));
            wall.push(ms(w.elapsed()));
            hwm.push(mib(status_kib(pid, "VmHWM")));
            assert!(chunks > 0, "no chunk events");
            let cpu_s = (t1 - t0) as f64 / tck;
            whole.push(cpu_s * 1e3);
            per_chunk.push(cpu_s * 1e6 / STREAM_CHUNKS as f64);
            whole_ns.push((n1 - n0) as f64 / 1e6);
            per_chunk_ns.push((n1 - n0) as f64 / 1e3 / STREAM_CHUNKS as f64);
            from_first_ns.push((n1 - first_ns) as f64 / 1e3 / STREAM_CHUNKS as f64);
            if r == 0 {
                notes.push(format!(
                    "row 4: the host wrote {chunks} chunk events for the {STREAM_CHUNKS} chunks the mock sent; clock tick = {:.0} ms",
                    1e3 / tck
                ));
            }
            h.close();
        }
        for line in [
            row(
                "4 host CPU per chunk (/proc stat ticks)",
                "µs",
                2,
                &per_chunk,
                "target ≤ 9.6 µs",
            ),
            row(
                "  host CPU per chunk (CPU clock, ns)",
                "µs",
                2,
                &per_chunk_ns,
                "target ≤ 9.6 µs",
            ),
            row(
                "  host CPU per chunk, first chunk..done",
                "µs",
                2,
                &from_first_ns,
                "",
            ),
            row(
                "  host CPU, whole send (/proc stat ticks)",
                "ms",
                1,
                &whole,
                "",
            ),
            row("  host CPU, whole send (CPU clock)", "ms", 2, &whole_ns, ""),
            row("  wall time of the 2000-chunk send", "ms", 2, &wall, ""),
        ] {
            show(&line);
            table.push(line);
        }
        row7 = Some(row(
            "7 peak RSS (VmHWM) after 2000-chunk send",
            "MiB",
            1,
            &hwm,
            "target ≤ 17.5 MiB",
        ));
    }

    // 5. stdin EOF -> exit --------------------------------------------------------------------------
    if want(5) {
        let root = project(&work.path().join("eof"));
        let mut now = Vec::new();
        let mut settled = Vec::new();
        for r in 0..runs {
            let mut h = Host::start(&env);
            h.init(&root);
            h.chat_new(&format!("eof {r}"));
            now.push(ms(h.close()));
            let mut h = Host::start(&env);
            h.init(&root);
            h.chat_new(&format!("eof settled {r}"));
            h.settle();
            settled.push(ms(h.close()));
        }
        for line in [
            row(
                "5 stdin EOF -> exit (right after chat_new)",
                "ms",
                3,
                &now,
                "target ≤ 1 ms",
            ),
            row(
                "  stdin EOF -> exit (CPU settled)",
                "ms",
                3,
                &settled,
                "target ≤ 1 ms",
            ),
        ] {
            show(&line);
            table.push(line);
        }
    }

    // 6. Peak RSS over 5,000 chats with a list and two searches -------------------------------------
    if want(6) {
        let (mut title, mut content, mut hwm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let mut h = Host::start(&env);
            h.init(&template);
            let r = h.call(json!({"action": "chat_list"}));
            let n = r["chats"].as_array().map_or(0, Vec::len);
            assert_eq!(n, CHATS, "chat_list returned {n} chats");
            let t = Instant::now();
            let r = h.call(json!({"action": "search_chats", "query": "topic 4242"}));
            title.push(ms(t.elapsed()));
            let hits = r["results"].as_array().cloned().unwrap_or_default();
            assert!(
                hits.len() == 1 && hits[0]["match_type"] == "title",
                "title search: {r}"
            );
            let t = Instant::now();
            let r = h.call(json!({"action": "search_chats", "query": "needle-in-chat-4999"}));
            content.push(ms(t.elapsed()));
            let hits = r["results"].as_array().cloned().unwrap_or_default();
            assert!(
                hits.len() == 1 && hits[0]["match_type"] == "content",
                "content search: {r}"
            );
            hwm.push(mib(status_kib(h.pid, "VmHWM")));
            h.close();
        }
        for line in [
            row(
                "6 peak RSS (VmHWM), 5000 chats, list+2 searches",
                "MiB",
                1,
                &hwm,
                "target ≤ 19 MiB",
            ),
            row(
                "  search_chats title (1st search, cold)",
                "ms",
                2,
                &title,
                "target ≤ 100 ms",
            ),
            row(
                "  search_chats content (2nd search)",
                "ms",
                2,
                &content,
                "target ≤ 100 ms",
            ),
        ] {
            show(&line);
            table.push(line);
        }
    }

    // 7 (measured with row 4).
    if let Some(row7) = row7.filter(|_| want(7)) {
        show(&row7);
        table.push(row7);
    }

    // 8. Binary size ------------------------------------------------------------------------------
    if want(8) {
        let bin = &bin();
        let size = std::fs::metadata(bin).expect("bb7 binary").len();
        let mut line = format!(
            "8 binary size {:<30} {size} bytes ({:.1} MiB)",
            bin.display().to_string(),
            size as f64 / 1048576.0
        );
        let stripped = work.path().join("bb7-stripped");
        match Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(bin)
            .status()
        {
            Ok(s) if s.success() => {
                let n = std::fs::metadata(&stripped).unwrap().len();
                line.push_str(&format!(
                    "; stripped {n} bytes ({:.1} MiB)",
                    n as f64 / 1048576.0
                ));
            }
            Ok(s) => line.push_str(&format!("; strip failed ({s})")),
            Err(e) => line.push_str(&format!("; strip is missing ({e})")),
        }
        show(&line);
        table.push(line);
    }

    summary(runs, &table, &notes, started);
}

/// The rows and notes again, after every row ran.
fn summary(runs: usize, table: &[String], notes: &[String], started: Instant) {
    println!();
    println!("summary ({runs} runs per timed row):");
    for line in table {
        println!("{line}");
    }
    for n in notes {
        println!("note: {n}");
    }
    println!("bench took {:.1} s", started.elapsed().as_secs_f64());
}
