//! A small synchronous client for `bb7`'s stdio protocol (one JSON object per line each way), plus the
//! helpers the protocol, crash-safety and compatibility suites share: an isolated tree per test
//! (`home/`, `proj/`, `outside/` under one temporary root), file ids, token counts, chat.json checks
//! and directory-tree snapshots.
//!
//! Every wait has a timeout: a hung server fails the test instead of hanging CI.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How long any reply may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How long the first reply of a fresh process may take (a first start may fill the component cache).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The default model SPEC.md documents for new chats when nothing else chooses one.
pub const DEFAULT_MODEL: &str = "anthropic/claude-sonnet-4";

// ---------------------------------------------------------------------------------------------
// The isolated tree of one test
// ---------------------------------------------------------------------------------------------

/// One temporary root holding `home/` (the server's `$HOME`), `proj/` (the project) and `outside/`
/// (a directory neither may touch). The root is canonical, so the paths the server reports compare
/// equal to ours.
pub struct Env {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        for d in ["home", "proj", "outside"] {
            fs::create_dir_all(root.join(d)).expect("create test dirs");
        }
        Env { _dir: dir, root }
    }

    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    pub fn proj(&self) -> PathBuf {
        self.root.join("proj")
    }

    pub fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }

    /// The project root as the string `init` carries.
    pub fn proj_str(&self) -> String {
        self.proj().to_str().expect("utf-8 path").to_string()
    }

    pub fn bb7(&self) -> PathBuf {
        self.proj().join(".bb7")
    }

    pub fn chats(&self) -> PathBuf {
        self.bb7().join("chats")
    }

    pub fn chat_dir(&self, id: &str) -> PathBuf {
        self.chats().join(id)
    }

    pub fn global_chats(&self) -> PathBuf {
        self.home().join(".bb7").join("chats")
    }

    pub fn global_chat_dir(&self, id: &str) -> PathBuf {
        self.global_chats().join(id)
    }

    /// Starts `bb7` with no arguments (cwd: the test root, which is neither project nor home).
    pub fn spawn(&self) -> Bb7 {
        Bb7::spawn(&self.home(), &self.root)
    }

    /// Starts `bb7` and runs `init` on the (already initialised) project.
    pub fn start(&self) -> Bb7 {
        let mut s = self.spawn();
        s.ok(json!({"action": "init", "project_root": self.proj_str()}));
        s
    }

    /// Writes a project file (creating parents).
    pub fn write_local(&self, rel: &str, content: &str) {
        write_file(&self.proj().join(rel), content);
    }

    /// Writes `{chat dir}/output/{rel}` the way the model would.
    pub fn write_output(&self, id: &str, rel: &str, content: &str) {
        write_file(&self.chat_dir(id).join("output").join(rel), content);
    }

    pub fn output_path(&self, id: &str, rel: &str) -> PathBuf {
        self.chat_dir(id).join("output").join(rel)
    }

    /// chat.json of a project chat, parsed and checked against SPEC.md's version-2 format.
    pub fn chat_json(&self, id: &str) -> Value {
        let chat = read_json(&self.chat_dir(id).join("chat.json"));
        check_chat_v2(&chat);
        chat
    }

    pub fn global_chat_json(&self, id: &str) -> Value {
        let chat = read_json(&self.global_chat_dir(id).join("chat.json"));
        check_chat_v2(&chat);
        chat
    }

    /// Writes chat.json of a project chat back (used to plant history the model would have made).
    pub fn put_chat_json(&self, id: &str, chat: &Value) {
        write_file(
            &self.chat_dir(id).join("chat.json"),
            &serde_json::to_string_pretty(chat).unwrap(),
        );
    }

    /// The entries of the project's index.json.
    pub fn index(&self) -> Vec<Value> {
        index_entries(&self.chats().join("index.json"))
    }

    pub fn global_index(&self) -> Vec<Value> {
        index_entries(&self.global_chats().join("index.json"))
    }

    /// A map of everything under the root except the two `.bb7/` state directories: what must not
    /// change when an attack is refused.
    pub fn outside_state(&self) -> BTreeMap<String, String> {
        tree(&self.root, &[self.bb7(), self.home().join(".bb7")])
    }
}

// ---------------------------------------------------------------------------------------------
// The client
// ---------------------------------------------------------------------------------------------

enum Out {
    Line(Value),
    Bad(String),
    Eof,
}

/// A running `bb7` serving the protocol on its stdio.
///
/// Every test host ends checked: [`Bb7::shutdown`] (exit 0, stderr silent) or
/// [`Bb7::shutdown_noisy`] (exit 0, for tests that fed bad input and expect warnings) or
/// [`Bb7::kill9`]. One still running when it is dropped is shut down by `Drop` with the same checks
/// as `shutdown` (a test that is already failing only kills it).
pub struct Bb7 {
    child: Child,
    pub pid: u32,
    input: Option<Sender<Vec<u8>>>,
    out: Receiver<Out>,
    stash: VecDeque<Value>,
    stderr: Arc<Mutex<Vec<u8>>>,
    answered: bool,
    eof: bool,
    seq: u64,
    /// The test ended this process itself (shutdown or kill): `Drop` has nothing to check.
    settled: bool,
    /// The thread collecting stderr: joined after the exit, so that no late line is missed.
    stderr_reader: Option<thread::JoinHandle<()>>,
}

impl Bb7 {
    /// Spawns `bb7` with an isolated environment: only PATH, HOME and the shared component cache.
    pub fn spawn(home: &Path, cwd: &Path) -> Bb7 {
        Bb7::spawn_env(home, cwd, &[])
    }

    /// [`Bb7::spawn`] with `extra` variables set as well (e.g. `TMPDIR`).
    pub fn spawn_env(home: &Path, cwd: &Path, extra: &[(&str, &Path)]) -> Bb7 {
        let mut cmd = Command::new(super::bin());
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("BB7_CACHE_DIR", super::shared_cache());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let mut child = cmd
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bb7");
        let pid = child.id();

        // stdin is written by its own thread so that a server that stops reading cannot block the test.
        let mut stdin = child.stdin.take().expect("stdin");
        let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>();
        thread::spawn(move || {
            for buf in in_rx {
                if stdin.write_all(&buf).is_err() || stdin.flush().is_err() {
                    break;
                }
            }
        });

        let stdout = child.stdout.take().expect("stdout");
        let (out_tx, out_rx) = mpsc::channel();
        thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => {
                        let _ = out_tx.send(Out::Eof);
                        break;
                    }
                    Ok(_) => {
                        let body = line.strip_suffix(b"\n").unwrap_or(&line);
                        let msg = match serde_json::from_slice::<Value>(body) {
                            Ok(v) if v.is_object() => Out::Line(v),
                            _ => Out::Bad(String::from_utf8_lossy(&line).into_owned()),
                        };
                        if out_tx.send(msg).is_err() {
                            break;
                        }
                    }
                }
            }
        });

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().expect("stderr");
        let sink = stderr.clone();
        let stderr_reader = thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
        });

        Bb7 {
            child,
            pid,
            input: Some(in_tx),
            out: out_rx,
            stash: VecDeque::new(),
            stderr,
            answered: false,
            eof: false,
            seq: 0,
            settled: false,
            stderr_reader: Some(stderr_reader),
        }
    }

    /// Everything the server wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Writes raw bytes to the server's stdin (no newline added).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        if let Some(tx) = &self.input {
            let _ = tx.send(bytes.to_vec());
        } else {
            panic!("stdin of bb7 is already closed");
        }
    }

    /// Writes one request line without waiting for anything.
    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// A fresh request id.
    pub fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("t{}", self.seq)
    }

    /// Sends `v` (adding a string request_id unless it has one) and returns the reply carrying that id.
    pub fn req(&mut self, mut v: Value) -> Value {
        let id = match v.get("request_id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                let id = self.next_id();
                v["request_id"] = json!(id);
                id
            }
        };
        self.send(&v);
        let what = format!("the reply to {}", brief(&v));
        let want = Value::String(id);
        self.recv_where(&what, |r| r.get("request_id") == Some(&want))
    }

    /// Sends the streaming request `req` (`send`, `plan_approve`) with a fresh request_id and
    /// collects what carries that id up to its terminal event (`done`, `diff_error` or `error`):
    /// the events before it (chunks, `agent_event`s, …) and the terminal event. A reply may stream
    /// for up to two minutes (a loaded machine, an agent reply of many steps).
    pub fn send_collect(&mut self, mut req: Value) -> (Vec<Value>, Value) {
        let rid = self.next_id();
        req["request_id"] = json!(rid);
        self.send(&req);
        let want = json!(rid);
        let what = format!("the events of {}", brief(&req));
        let mut events = Vec::new();
        loop {
            let v = self.recv_where_for(&what, Duration::from_secs(120), |v| {
                v.get("request_id") == Some(&want)
            });
            match v["type"].as_str() {
                Some("done" | "diff_error" | "error") => return (events, v),
                _ => events.push(v),
            }
        }
    }

    /// Like `req`, asserting the reply is not an error.
    pub fn ok(&mut self, v: Value) -> Value {
        let r = self.req(v.clone());
        assert_ne!(r["type"], "error", "{} must succeed, got {r}", brief(&v));
        r
    }

    /// Like `req`, asserting an error reply with a message; returns the message.
    pub fn err(&mut self, v: Value) -> String {
        let r = self.req(v.clone());
        assert_eq!(r["type"], "error", "{} must fail, got {r}", brief(&v));
        let msg = r["message"]
            .as_str()
            .unwrap_or_else(|| panic!("error reply without a message: {r}"))
            .to_string();
        assert!(
            !msg.trim().is_empty(),
            "empty error message for {}",
            brief(&v)
        );
        msg
    }

    /// An error whose message contains `needle` (case-sensitive).
    pub fn err_has(&mut self, v: Value, needle: &str) -> String {
        let msg = self.err(v.clone());
        assert!(
            msg.contains(needle),
            "error for {} must mention {needle:?}: {msg:?}",
            brief(&v)
        );
        msg
    }

    /// An error whose message is exactly `want`.
    pub fn err_is(&mut self, v: Value, want: &str) {
        let msg = self.err(v.clone());
        assert_eq!(msg, want, "error message for {}", brief(&v));
    }

    fn wait_time(&self) -> Duration {
        if self.answered {
            TIMEOUT
        } else {
            START_TIMEOUT
        }
    }

    /// The next reply (stashed ones first) satisfying `pred`; the others are kept for later.
    pub fn recv_where(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let t = self.wait_time();
        self.recv_where_for(what, t, pred)
    }

    pub fn recv_where_for(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        if let Some(i) = self.stash.iter().position(&pred) {
            return self.stash.remove(i).unwrap();
        }
        let deadline = Instant::now() + timeout;
        loop {
            if self.eof {
                panic!(
                    "bb7 closed stdout before {what}; exit: {:?}\nstderr: {}",
                    self.child.try_wait(),
                    self.stderr_text()
                );
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(Out::Line(v)) => {
                    self.answered = true;
                    if pred(&v) {
                        return v;
                    }
                    self.stash.push_back(v);
                }
                Ok(Out::Bad(l)) => panic!(
                    "bb7 wrote a stdout line that is not a JSON object: {l:?}\nstderr: {}",
                    self.stderr_text()
                ),
                Ok(Out::Eof) | Err(RecvTimeoutError::Disconnected) => self.eof = true,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no {what} within {timeout:?} (hung?)\nstderr: {}",
                    self.stderr_text()
                ),
            }
        }
    }

    /// The next reply of any kind.
    pub fn recv_any(&mut self) -> Value {
        self.recv_where("any reply", |_| true)
    }

    /// The next reply that carries no request_id (answers to lines that could not be parsed).
    pub fn recv_unnumbered(&mut self, what: &str) -> Value {
        self.recv_where(what, |v| v.get("request_id").is_none())
    }

    /// Closes stdin (EOF for the server).
    pub fn close_stdin(&mut self) {
        self.input = None;
    }

    /// Waits for the process to exit; kills it and fails after the timeout.
    pub fn wait_exit(&mut self) -> ExitStatus {
        // The caller has the exit status: `Drop` leaves checking it to them.
        self.settled = true;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "bb7 did not exit within {TIMEOUT:?}\nstderr: {}",
                    self.stderr_text()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// True while the process runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) {
        self.settled = true;
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.input = None;
    }

    /// After the process died: every complete reply it wrote that was not consumed yet.
    pub fn drain(&mut self) -> Vec<Value> {
        let mut got: Vec<Value> = self.stash.drain(..).collect();
        while !self.eof {
            match self.out.recv_timeout(TIMEOUT) {
                Ok(Out::Line(v)) => got.push(v),
                Ok(Out::Bad(_)) => {} // a torn last line of a killed process
                Ok(Out::Eof) | Err(_) => self.eof = true,
            }
        }
        got
    }

    /// `{"action":"shutdown"}`: no reply, exit 0, and stderr stayed silent.
    pub fn shutdown(mut self) {
        self.shutdown_inner(true);
    }

    /// Like `shutdown`, for tests that fed bad input (stderr is not checked).
    pub fn shutdown_noisy(mut self) {
        self.shutdown_inner(false);
    }

    /// After the exit: waits until stderr is read to its end (the pipe closes with the process).
    /// (Bounded: a descendant still holding the pipe cannot hang the test.)
    fn stderr_complete(&mut self) {
        let deadline = Instant::now() + TIMEOUT;
        if let Some(h) = self.stderr_reader.take() {
            while !h.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }

    fn shutdown_inner(&mut self, quiet: bool) {
        self.settled = true;
        self.stash.clear();
        self.send(&json!({"request_id": "bye", "action": "shutdown"}));
        let st = self.wait_exit();
        self.stderr_complete();
        assert!(
            st.success(),
            "shutdown must exit 0, got {st:?}\nstderr: {}",
            self.stderr_text()
        );
        let after = self.drain();
        assert!(
            !after
                .iter()
                .any(|v| v.get("request_id") == Some(&json!("bye"))),
            "shutdown gets no reply: {after:?}"
        );
        if quiet {
            assert_quiet(self);
        }
    }
}

/// stderr stays silent in normal operation (every stderr line is a user-visible warning).
pub fn assert_quiet(s: &Bb7) {
    let err = s.stderr_text();
    assert!(err.is_empty(), "stderr must stay silent: {err}");
}

impl Drop for Bb7 {
    fn drop(&mut self) {
        let running = matches!(self.child.try_wait(), Ok(None));
        if !self.settled && !thread::panicking() {
            // The test let its host go without ending it: end it the way the editor does and
            // check what `shutdown` checks (this panics, failing the test, if it does not hold).
            if running && self.input.is_some() {
                self.shutdown_inner(true);
                return;
            }
            // Its stdin was closed (it exits by itself), or it exited unobserved: exit 0, silent.
            let st = self.wait_exit();
            self.stderr_complete();
            assert!(
                st.success(),
                "bb7 must exit 0, got {st:?}\nstderr: {}",
                self.stderr_text()
            );
            assert_quiet(self);
            return;
        }
        if running {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A request shortened for assertion messages (20 MiB lines stay readable).
pub fn brief(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 300 {
        let mut end = 300;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------
// Spec helpers
// ---------------------------------------------------------------------------------------------

/// SPEC.md's file id: the first 8 hex chars of sha256(path + NUL + content).
pub fn fid(path: &str, content: &str) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0u8]);
    h.update(content.as_bytes());
    hex::encode(&h.finalize()[..4])
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// cl100k_base token count (SPEC.md: token estimation uses cl100k_base).
pub fn tokens(text: &str) -> u64 {
    tiktoken_rs::cl100k_base_singleton()
        .encode_ordinary(text)
        .len() as u64
}

/// A list field: `[]`, `null` and absent all mean empty (PROTOCOL-ADDENDUM.md).
pub fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Null => vec![],
        Value::Array(a) => a.clone(),
        other => panic!("expected a list, got {other}"),
    }
}

/// The text of a message: its `content` string if the reply carries one, else its text parts.
pub fn msg_text(m: &Value) -> String {
    if let Some(s) = m.get("content").and_then(Value::as_str) {
        return s.to_string();
    }
    list(m.get("parts").unwrap_or(&Value::Null))
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["content"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("\n")
}

/// All `context_event` parts of a chat, in order.
pub fn events(chat: &Value) -> Vec<Value> {
    list(&chat["messages"])
        .iter()
        .flat_map(|m| list(m.get("parts").unwrap_or(&Value::Null)))
        .filter(|p| p["type"] == "context_event")
        .collect()
}

/// The last context_event with `action` on `path`; fails if there is none.
pub fn event(chat: &Value, action: &str, path: &str) -> Value {
    events(chat)
        .into_iter()
        .rev()
        .find(|e| e["action"] == action && e["path"] == path)
        .unwrap_or_else(|| {
            panic!(
                "no {action} context_event for {path}; events: {:?}",
                events(chat)
            )
        })
}

/// The boolean value of a possibly absent flag.
pub fn flag(v: &Value, key: &str) -> bool {
    match v.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => panic!("{key} must be a bool, got {other}"),
    }
}

pub fn read_json(path: &Path) -> Value {
    let text =
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON ({e}): {text:?}", path.display()))
}

pub fn write_file(path: &Path, content: &str) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(path, content).unwrap();
}

/// The chat entries of an index.json (an object with `chats`, or a bare list).
pub fn index_entries(path: &Path) -> Vec<Value> {
    let v = read_json(path);
    match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) => list(o.get("chats").unwrap_or(&Value::Null)),
        other => panic!("{} is not an index: {other}", path.display()),
    }
}

/// `YYYY-MM-DDTHH:MM:SS` followed by optional fraction and a `Z` or `±HH:MM` offset.
pub fn assert_rfc3339(s: &str) {
    let b = s.as_bytes();
    let ok = b.len() >= 20
        && b[..19].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            _ => c.is_ascii_digit(),
        })
        && (s.ends_with('Z') || {
            let tail = &b[b.len() - 6..];
            (tail[0] == b'+' || tail[0] == b'-') && tail[3] == b':'
        });
    assert!(ok, "not an RFC 3339 timestamp: {s:?}");
}

/// SPEC.md's chat.json, version 2: the top-level fields, and messages made of `parts` only.
pub fn check_chat_v2(chat: &Value) {
    assert_eq!(chat["version"], 2, "chat.json version: {chat}");
    for key in ["id", "name", "created", "model"] {
        assert!(
            chat[key].is_string(),
            "chat.json {key} must be a string: {chat}"
        );
    }
    assert_rfc3339(chat["created"].as_str().unwrap());
    if let Some(d) = chat.get("draft") {
        assert!(d.is_string(), "draft must be a string: {d}");
    }
    assert!(
        chat["context_files"].is_array(),
        "context_files must be a list: {chat}"
    );
    assert!(
        chat["messages"].is_array(),
        "messages must be a list: {chat}"
    );
    for m in chat["messages"].as_array().unwrap() {
        assert!(m["role"].is_string(), "message without role: {m}");
        assert!(
            m.get("content").is_none(),
            "version 2 messages have no top-level content: {m}"
        );
        assert!(m["parts"].is_array(), "message without parts: {m}");
    }
}

/// A draft as stored: absent means empty.
pub fn draft_of(chat: &Value) -> String {
    chat.get("draft")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The PID of a process that has exited (for stale locks).
pub fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().expect("spawn true");
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// Every entry under `root` (not following symlinks) except the `skip` subtrees: path → kind and hash.
pub fn tree(root: &Path, skip: &[PathBuf]) -> BTreeMap<String, String> {
    // The escape suite's snapshot (tests/common/snapshot.rs): contents, modes, mtimes and link
    // targets; an entry that cannot be read fails the test instead of being skipped. Directories'
    // mtimes are left out: tests create and remove files of their own outside between snapshots.
    let skip: Vec<&Path> = skip.iter().map(PathBuf::as_path).collect();
    super::snapshot::snapshot(root, &skip, false)
        .into_iter()
        .filter(|(rel, _)| !rel.as_os_str().is_empty())
        .map(|(rel, node)| {
            let shown = match &node {
                super::snapshot::Node::File {
                    content,
                    mode,
                    mtime,
                } => {
                    format!("file {} mode {mode:o} mtime {mtime:?}", sha256_hex(content))
                }
                other => super::snapshot::describe_node(Some(other)),
            };
            (rel.display().to_string(), shown)
        })
        .collect()
}

/// Fails with the differences between two `tree` maps.
pub fn assert_same_tree(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) {
    if before == after {
        return;
    }
    let mut diff = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => diff.push(format!("removed {k} ({v})")),
            Some(w) if w != v => diff.push(format!("changed {k}: {v} -> {w}")),
            _ => {}
        }
    }
    for (k, v) in after {
        if !before.contains_key(k) {
            diff.push(format!("created {k} ({v})"));
        }
    }
    panic!("files outside .bb7/ changed:\n  {}", diff.join("\n  "));
}

/// All regular files under `dir` (recursively, not following symlinks) with their contents.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let md = fs::symlink_metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
            } else if md.is_file() {
                out.push((p.clone(), fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out
}
