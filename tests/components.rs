//! Third-party tool components through the real binary (issue 14, AGENT-PROTOCOL.md §4): install,
//! grant, a call through a model reply in agent mode (mock server), revoke; grants pinned to the
//! binary; link-time refusal of undeclared sockets; network and env grants enforced; the lockfile
//! and `audit --check`; tampered binaries and cache entries; namespacing; the project-read view;
//! manifest limits. The components are `examples/tool-components/` (built here, as CI builds
//! them) and the hostile fixture `tests/hostile/` with manifests written by the tests.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn word_count() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        common::wasm::build(
            "examples/tool-components",
            "tool-examples-wasm",
            "word_count.wasm",
        )
    })
}

fn net_probe() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        common::wasm::build(
            "examples/tool-components",
            "tool-examples-wasm",
            "net_probe.wasm",
        )
    })
}

fn hostile() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| common::wasm::build("tests/hostile", "hostile-wasm", "hostile.wasm"))
}

fn sha(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// A directory holding a copy of `wasm` and `manifest` as `bb7-tool.toml`.
fn packaged(wasm: &Path, manifest: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(wasm, d.path().join("c.wasm")).unwrap();
    std::fs::write(d.path().join("bb7-tool.toml"), manifest).unwrap();
    d
}

/// The hostile fixture packaged as component `name` with extra manifest lines. It imports
/// wasi:sockets, so it always requests some network.
fn hostile_as(name: &str, extra: &str) -> tempfile::TempDir {
    let network = if extra.contains("network") {
        String::new()
    } else {
        "network = [\"127.0.0.1:9\"]\n".to_string()
    };
    packaged(
        hostile(),
        &format!("name = \"{name}\"\nversion = \"1.0\"\nwit = \"0.1.0\"\n{network}{extra}\n"),
    )
}

/// `word_count.wasm` with a custom section appended: the same tool, another sha256.
fn word_count_variant(tag: &str) -> tempfile::TempDir {
    let mut bytes = std::fs::read(word_count()).unwrap();
    let name = b"bb7-test-variant";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    bytes.push(0);
    bytes.push(payload.len() as u8);
    bytes.extend_from_slice(&payload);
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("word_count.wasm"), bytes).unwrap();
    d
}

/// Runs `bb7 tools <args>` as the user of `home`, in `cwd`.
fn tools(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    tools_env(home, cwd, args, &[])
}

fn tools_env(home: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(common::bin());
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BB7_CACHE_DIR", common::shared_cache())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .arg("tools")
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("spawn bb7")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "bb7 failed ({:?}):\nstdout: {}\nstderr: {}",
        o.status.code(),
        common::stdout(o),
        common::stderr(o)
    );
    common::stdout(o)
}

fn refused(o: &Output, code: i32) -> String {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        common::stdout(o),
        common::stderr(o)
    );
    common::stderr(o)
}

/// A user home and a project with `.bb7/`.
struct World {
    root: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        std::fs::create_dir_all(root.path().join("proj/.bb7")).unwrap();
        std::fs::create_dir_all(root.path().join("elsewhere")).unwrap();
        World { root }
    }
    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    fn proj(&self) -> PathBuf {
        self.root.path().join("proj")
    }
    fn elsewhere(&self) -> PathBuf {
        self.root.path().join("elsewhere")
    }
    fn run(&self, args: &[&str]) -> Output {
        tools(&self.home(), &self.proj(), args)
    }
    fn lock(&self) -> String {
        std::fs::read_to_string(self.proj().join(".bb7/tools.lock")).unwrap_or_default()
    }
    fn state(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.home().join(".bb7/tools.json")).unwrap())
            .unwrap()
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn install_grant_call_in_an_agent_reply_revoke_and_the_call_is_refused() {
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "c1",
            "wordcount__count_words",
            r#"{"path":"."}"#,
        )]),
        Reply::text(["counted"]),
        Reply::tool_calls([ToolCall::new(
            0,
            "c2",
            "wordcount__count_words",
            r#"{"path":"."}"#,
        )]),
        Reply::text(["could not"]),
    ]));
    let env = model_env(&server);
    env.write_local("src/a.txt", "one two three\nfour\n");
    env.write_local(".env", "SECRET=hunter2 hunter2 hunter2\n");
    let mut s = started(&env);

    // Installed from the bare .wasm: its manifest is the embedded bb7-manifest section.
    let out = ok(&tools(
        &env.home(),
        &env.proj(),
        &["add", p(word_count()), "--project"],
    ));
    assert!(out.contains("wordcount__count_words"), "{out}");
    assert!(out.contains("custom section"), "{out}");
    assert!(out.contains("Nothing is granted"), "{out}");
    assert!(
        !env.proj().join(".bb7/tools.lock").exists(),
        "add must not write the lockfile"
    );

    // Not granted yet: listed, but not offered.
    let list = s.ok(json!({"action": "tools_list"}));
    let wc = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["component"] == "wordcount")
        .cloned()
        .unwrap();
    assert_eq!(wc["name"], "wordcount__count_words");
    assert_eq!(wc["source"], "third-party");
    assert_eq!(wc["requested"]["files"], "project-read");
    assert_eq!(wc["granted"], Value::Null);
    assert_eq!(wc["enabled"], true);
    assert_eq!(wc["sha256"], sha(word_count()));

    // An approval for a binary other than the one installed is refused.
    s.err_has(
        json!({"action": "tool_grant", "name": "wordcount", "sha256": "00", "files": "project-read"}),
        "changed since it was shown",
    );
    // Approved through the protocol (what the plugin sends after the user confirms).
    let list = s.ok(
        json!({"action": "tool_grant", "name": "wordcount__count_words",
        "sha256": sha(word_count()), "files": "project-read", "network": [], "env": []}),
    );
    let wc = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["component"] == "wordcount")
        .cloned()
        .unwrap();
    assert_eq!(wc["granted"]["files"], "project-read", "{wc}");
    assert_eq!(wc["state"], "offered");
    let lock = std::fs::read_to_string(env.proj().join(".bb7/tools.lock")).unwrap();
    assert!(
        lock.contains("name = \"wordcount\"") && lock.contains(&sha(word_count())),
        "{lock}"
    );

    let id = s.ok(json!({"action": "chat_new", "name": "t"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (evs, end) = send_agent(&mut s, "count");
    assert_eq!(end["type"], "done", "{end}");
    let done = completed(&evs);
    assert_eq!(done.len(), 1, "{evs:?}");
    assert_eq!(done[0]["data"]["tool"], "wordcount__count_words");
    assert_eq!(done[0]["data"]["ok"], true, "{:?}", done[0]);
    let reqs = server.requests();
    let offered: Vec<String> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        offered.contains(&"wordcount__count_words".to_string()),
        "{offered:?}"
    );
    // What the model read: the counts over the project view — src/a.txt only (.env is denied).
    let result = tool_result(&reqs[1].body, "c1");
    let counted: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(counted["words"], 4, "{counted}");
    assert_eq!(counted["files"], 1, "{counted}");
    assert!(
        !result.contains("hunter2") && !result.contains(".env"),
        "{result}"
    );

    // The trace and the audit log record the component, its sha256 and its grants.
    let traces = env.chat_dir(&id).join("traces");
    let trace = std::fs::read_dir(&traces)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    let line: Value = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["kind"] == "tool.call.completed")
        .unwrap();
    assert_eq!(line["component"], "wordcount", "{line}");
    assert_eq!(line["component_sha256"], sha(word_count()), "{line}");
    assert_eq!(line["grants"][0]["access"], "read-only", "{line}");
    assert_eq!(line["network"], "none", "{line}");
    let audit = std::fs::read_to_string(env.home().join(".bb7/audit/log.jsonl")).unwrap();
    let rec: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|r| r["kind"] == "tool_call")
        .unwrap();
    assert_eq!(rec["component"], "wordcount", "{rec}");
    assert_eq!(rec["component_sha256"], sha(word_count()), "{rec}");
    // The project view held copies: the built-in tools still read the project's files.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(env.proj().join("src/a.txt"))
            .unwrap()
            .nlink(),
        1
    );

    // Revoked: no longer offered, and a call to it is refused.
    let list = s.ok(json!({"action": "tool_revoke", "name": "wordcount"}));
    let wc = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["component"] == "wordcount")
        .cloned()
        .unwrap();
    assert_eq!(wc["granted"], Value::Null);
    let lock = std::fs::read_to_string(env.proj().join(".bb7/tools.lock")).unwrap();
    assert!(!lock.contains("wordcount"), "{lock}");
    let (evs, _end) = send_agent(&mut s, "count again");
    let done = completed(&evs);
    assert_eq!(done[0]["data"]["ok"], false, "{:?}", done[0]);
    assert!(
        done[0]["data"]["error"]
            .as_str()
            .unwrap()
            .contains("unknown tool"),
        "{:?}",
        done[0]
    );
    let reqs = server.requests();
    let offered = reqs[2].body["tools"].to_string();
    assert!(!offered.contains("wordcount__"), "{offered}");
    assert_eq!(s.stderr_text(), "", "stderr must stay silent");
}

/// A user and project whose model is `server`.
fn model_env(server: &MockServer) -> Env {
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url()}).to_string(),
    );
    env
}

/// The host, serving `env`'s project (`bb7_init` and `init` done).
fn started(env: &Env) -> Bb7 {
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s
}

fn send_agent(s: &mut Bb7, content: &str) -> (Vec<Value>, Value) {
    s.send_collect(
        json!({"action": "send", "content": content, "model": "mock/agent", "mode": "agent"}),
    )
}

fn completed(evs: &[Value]) -> Vec<Value> {
    evs.iter()
        .filter(|e| e["type"] == "agent_event" && e["kind"] == "tool.call.completed")
        .cloned()
        .collect()
}

/// The content of the tool message answering `call_id` in a request body.
fn tool_result(body: &Value, call_id: &str) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result for {call_id} in {body}"))
        .to_string()
}

#[test]
fn a_changed_binary_loses_its_grant_until_approved_again() {
    let w = World::new();
    ok(&w.run(&["add", p(word_count()), "--project"]));
    ok(&w.run(&["grant", "wordcount", "--all"]));
    assert!(ok(&w.run(&["list"])).contains("wordcount 0.1.0: offered"));
    let v = word_count_variant("v2");
    let out = ok(&w.run(&["add", p(&v.path().join("word_count.wasm"))]));
    assert!(out.contains("replaced"), "{out}");
    let list = ok(&w.run(&["list"]));
    assert!(list.contains("wordcount 0.1.0: changed"), "{list}");
    let e = refused(
        &w.run(&["call", "wordcount", "--dir", p(&w.proj()), "--args", "{}"]),
        2,
    );
    assert!(e.contains("has no grant"), "{e}");
    // The lockfile (not rewritten by add) no longer matches what would be offered.
    let o = w.run(&["audit", "--check"]);
    let out = common::stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("wordcount: missing"), "{out}");
    ok(&w.run(&["grant", "wordcount", "--all"]));
    assert!(w.lock().contains(&sha(&v.path().join("word_count.wasm"))));
    ok(&w.run(&["audit", "--check"]));
}

#[test]
fn undeclared_sockets_link_with_every_operation_denied() {
    // Standard libraries import wasi:sockets without using it (Rust's std::net, componentize-py's
    // interpreter): without a network request the component installs, its sockets are linked
    // deny-all, and `tools audit` says so (ECOSYSTEM-PROTOCOL.md §5).
    let w = World::new();
    let d = packaged(
        net_probe(),
        &std::fs::read_to_string(
            common::wasm::repo_root().join("examples/tool-components/net-probe/bb7-tool.toml"),
        )
        .unwrap(),
    );
    ok(&w.run(&["add", p(d.path())]));
    assert!(w.state()["components"]["netprobe"].is_object(), "installed");
    ok(&w.run(&["grant", "netprobe", "--all"]));
    let audit = ok(&w.run(&["audit"]));
    assert!(audit.contains("wasi:sockets/tcp"), "{audit}");
    assert!(audit.contains("(imported, denied)"), "{audit}");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let e = refused(
        &w.run(&[
            "call",
            "netprobe",
            "--dir",
            p(&w.proj()),
            "--args",
            &json!({"host": "127.0.0.1", "port": port}).to_string(),
        ]),
        1,
    );
    assert!(e.contains("permission-denied"), "{e}");
    assert!(e.contains("is not granted"), "{e}");
    // The call has returned: a connection it made would be queued by now.
    assert!(
        listener.accept().is_err(),
        "SANDBOX ESCAPE: an ungranted component connected"
    );
    // The hostile fixture too, when its manifest asks for no network: every socket operation
    // (TCP connect and listen, UDP, name lookup) fails.
    let d = packaged(
        hostile(),
        "name = \"h\"\nversion = \"1\"\nwit = \"0.1.0\"\n",
    );
    ok(&w.run(&["add", p(d.path())]));
    ok(&w.run(&["grant", "h", "--all"]));
    let out = ok(&w.run(&[
        "call",
        "h",
        "--dir",
        p(&w.proj()),
        "--args",
        &json!({"attack": "net", "tcp_port": port, "udp_port": port}).to_string(),
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let allowed: Vec<&Value> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ok"] == true)
        .collect();
    assert!(allowed.is_empty(), "SANDBOX ESCAPE: {allowed:?}");
    assert!(
        listener.accept().is_err(),
        "SANDBOX ESCAPE: an ungranted component connected"
    );
}

#[test]
fn manifests_with_errors_are_refused_clearly() {
    let w = World::new();
    // Manifests with errors are refused clearly.
    for (manifest, want) in [
        (
            "name = \"h\"\nversion = \"1\"\nwit = \"0.1.0\"\ncolour = 1\n",
            "unknown field",
        ),
        (
            "name = \"h\"\nversion = \"1\"\nwit = \"0.9.0\"\n",
            "not a contract version",
        ),
        (
            "name = \"h\"\nversion = \"1\"\nwit = \"0.1.0\"\nnetwork = [\"*.x.org:443\"]\n",
            "no wildcards",
        ),
    ] {
        let d = packaged(hostile(), manifest);
        let e = refused(&w.run(&["add", p(d.path())]), 2);
        assert!(e.contains(want), "{want:?} not in {e}");
    }
}

#[test]
fn a_network_grant_reaches_its_host_port_and_no_other() {
    let w = World::new();
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let gp = granted.local_addr().unwrap().port();
    let op = other.local_addr().unwrap().port();
    let d = hostile_as("probe", &format!("network = [\"127.0.0.1:{gp}\"]"));
    ok(&w.run(&["add", p(d.path())]));
    ok(&w.run(&["grant", "probe", "--network", &format!("127.0.0.1:{gp}")]));
    other.set_nonblocking(true).unwrap();
    granted.set_nonblocking(true).unwrap();
    // To the other port: every network operation fails, nothing arrives.
    let out = ok(&w.run(&[
        "call",
        "probe",
        "--dir",
        p(&w.proj()),
        "--args",
        &json!({"attack": "net", "tcp_port": op, "udp_port": op}).to_string(),
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let allowed: Vec<&Value> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["ok"] == true)
        .collect();
    assert!(allowed.is_empty(), "SANDBOX ESCAPE: {allowed:?}");
    assert!(
        other.accept().is_err(),
        "SANDBOX ESCAPE: reached a port not granted"
    );
    // To the granted one: the plain connect works (and nothing else: no listen, no UDP).
    let out = ok(&w.run(&[
        "call",
        "probe",
        "--dir",
        p(&w.proj()),
        "--args",
        &json!({"attack": "net", "tcp_port": gp, "udp_port": gp}).to_string(),
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let by = |what: &str| {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["what"] == what)
            .cloned()
            .unwrap_or_else(|| panic!("no {what} in {v}"))
    };
    assert_eq!(by("tcp_connect_127.0.0.1")["ok"], true, "{v}");
    assert_eq!(by("tcp_listen")["ok"], false, "{v}");
    assert_eq!(by("udp_send")["ok"], false, "{v}");
    assert_eq!(by("lookup_localhost")["ok"], false, "{v}");
    granted.set_nonblocking(false).unwrap();
    let (mut conn, _) = granted.accept().unwrap();
    let mut got = [0u8; 11];
    conn.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"HOSTILE-TCP");
    // The audit record names the network grant.
    let audit = std::fs::read_to_string(w.home().join(".bb7/audit/log.jsonl")).unwrap();
    let rec: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|r| r["kind"] == "tool_call")
        .unwrap();
    assert_eq!(rec["network"], json!([format!("127.0.0.1:{gp}")]), "{rec}");
}

#[test]
fn an_env_grant_exposes_only_the_named_variable() {
    let w = World::new();
    let d = hostile_as("envy", "env = [\"BB7_VISIBLE\", \"BB7_ALSO\"]");
    ok(&w.run(&["add", p(d.path())]));
    // Only what is granted: BB7_VISIBLE, not BB7_ALSO (requested but not granted).
    ok(&w.run(&[
        "grant",
        "envy",
        "--env",
        "BB7_VISIBLE",
        "--network",
        "127.0.0.1:9",
    ]));
    let o = tools_env(
        &w.home(),
        &w.proj(),
        &[
            "call",
            "envy",
            "--dir",
            p(&w.proj()),
            "--args",
            r#"{"attack":"env"}"#,
        ],
        &[
            ("BB7_VISIBLE", "yes"),
            ("BB7_ALSO", "also"),
            ("BB7_SECRET", "no"),
        ],
    );
    let v: Value = serde_json::from_str(&ok(&o)).unwrap();
    assert_eq!(v["vars"], json!(["BB7_VISIBLE=yes"]), "{v}");
    assert_eq!(v["home"], Value::Null, "{v}");
    // A grant beyond the request is refused.
    let e = refused(&w.run(&["grant", "envy", "--env", "HOME"]), 2);
    assert!(e.contains("did not request env HOME"), "{e}");
}

#[test]
fn audit_check_detects_lockfile_drift() {
    let w = World::new();
    ok(&w.run(&["add", p(word_count()), "--project"]));
    ok(&w.run(&["grant", "wordcount", "--all"]));
    ok(&w.run(&["audit", "--check"]));
    let locked = w.lock();
    assert!(locked.contains("wordcount"), "{locked}");

    // A new component: enabled and granted, but the committed lockfile does not list it.
    let d = hostile_as("probe", "network = [\"127.0.0.1:9\", \"127.0.0.1:10\"]");
    ok(&w.run(&["add", p(d.path())]));
    ok(&w.run(&["grant", "probe", "--network", "127.0.0.1:9"]));
    ok(&w.run(&["enable", "probe"]));
    let with_probe = w.lock();
    std::fs::write(w.proj().join(".bb7/tools.lock"), &locked).unwrap();
    let o = w.run(&["audit", "--check"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        common::stdout(&o).contains("probe: new component"),
        "{}",
        common::stdout(&o)
    );

    // A widened grant, made from another directory (this project's lockfile is not rewritten).
    std::fs::write(w.proj().join(".bb7/tools.lock"), &with_probe).unwrap();
    ok(&w.run(&["audit", "--check"]));
    ok(&tools(
        &w.home(),
        &w.elsewhere(),
        &["grant", "probe", "--all"],
    ));
    let o = w.run(&["audit", "--check", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&common::stdout(&o)).unwrap();
    let diffs = v["differences"].to_string();
    assert!(
        diffs.contains("probe: grant widened: network 127.0.0.1:10"),
        "{diffs}"
    );

    // A changed sha256: another wordcount binary, approved elsewhere.
    ok(&w.run(&["grant", "probe", "--all"]));
    ok(&w.run(&["audit", "--check"]));
    let v2 = word_count_variant("v2");
    ok(&tools(
        &w.home(),
        &w.elsewhere(),
        &["add", p(&v2.path().join("word_count.wasm"))],
    ));
    ok(&tools(
        &w.home(),
        &w.elsewhere(),
        &["grant", "wordcount", "--all"],
    ));
    let o = w.run(&["audit", "--check"]);
    assert_eq!(o.status.code(), Some(1));
    let out = common::stdout(&o);
    assert!(out.contains("wordcount: sha256 changed"), "{out}");

    // Removing rewrites the lockfile; a missing component is reported.
    ok(&w.run(&["grant", "wordcount", "--all"]));
    let before = w.lock();
    ok(&w.run(&["remove", "probe"]));
    assert!(!w.lock().contains("probe"));
    std::fs::write(w.proj().join(".bb7/tools.lock"), before).unwrap();
    let o = w.run(&["audit", "--check"]);
    assert!(
        common::stdout(&o).contains("probe: missing"),
        "{}",
        common::stdout(&o)
    );
}

#[test]
fn a_tampered_stored_binary_or_cache_entry_is_never_run() {
    let w = World::new();
    let cache = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut c = Command::new(common::bin());
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", w.home())
            .env("BB7_CACHE_DIR", cache.path())
            .current_dir(w.proj())
            .stdin(Stdio::null())
            .arg("tools")
            .args(args);
        c.output().unwrap()
    };
    std::fs::write(w.proj().join("a.txt"), "a b c\n").unwrap();
    ok(&run(&["add", p(word_count())]));
    ok(&run(&["grant", "wordcount", "--all"]));
    let proj = w.proj();
    let args = ["call", "wordcount", "--dir", p(&proj), "--args", "{}"];
    ok(&run(&args));
    // The compiled artifact is tampered with: it is recompiled, never loaded.
    let id = sha(word_count());
    let artifact = std::fs::read_dir(cache.path().join("components"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join(format!("{id}.cwasm")))
        .find(|p| p.exists())
        .expect("a cached artifact");
    let len = std::fs::metadata(&artifact).unwrap().len() as usize;
    std::fs::write(&artifact, vec![0xCC; len]).unwrap();
    let out = ok(&run(&args));
    assert!(out.contains("\"words\":3"), "{out}");
    assert_ne!(std::fs::read(&artifact).unwrap(), vec![0xCC; len]);
    // The stored binary is replaced behind bb7's back: refused, not run.
    let stored = w.home().join(format!(".bb7/components/{id}.wasm"));
    let mut perms = std::fs::metadata(&stored).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&stored, perms).unwrap();
    std::fs::copy(
        word_count_variant("evil").path().join("word_count.wasm"),
        &stored,
    )
    .unwrap();
    let e = refused(&run(&args), 2);
    assert!(e.contains("was changed on disk"), "{e}");
}

#[test]
fn namespaced_names_cannot_shadow_built_ins() {
    let env = Env::new();
    let mut s = started(&env);
    let d = hostile_as("read_file", "");
    ok(&tools(
        &env.home(),
        &env.proj(),
        &["add", p(d.path()), "--project"],
    ));
    ok(&tools(
        &env.home(),
        &env.proj(),
        &["grant", "read_file", "--all"],
    ));
    let list = s.ok(json!({"action": "tools_list"}));
    let tools = list["tools"].as_array().unwrap();
    let named: Vec<&Value> = tools.iter().filter(|t| t["name"] == "read_file").collect();
    assert_eq!(named.len(), 1, "{list}");
    assert_eq!(named[0]["source"], "builtin");
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "read_file__hostile" && t["source"] == "third-party"),
        "{list}"
    );
    // Built-ins cannot be granted, revoked or disabled.
    s.err_has(
        json!({"action": "tool_revoke", "name": "read_file"}),
        "built-in",
    );
    // A component name cannot carry the separator.
    let d = hostile_as("a__b", "");
    let e = refused(
        &tools_env(&env.home(), &env.proj(), &["add", p(d.path())], &[]),
        2,
    );
    assert!(e.contains("no \"__\""), "{e}");
}

#[test]
fn project_read_holds_neither_git_bb7_secrets_nor_links() {
    let w = World::new();
    let proj = w.proj();
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    std::fs::create_dir_all(proj.join("src")).unwrap();
    std::fs::write(proj.join(".git/config"), "GIT-SECRET").unwrap();
    std::fs::write(proj.join(".bb7/note"), "BB7-SECRET").unwrap();
    std::fs::write(proj.join(".env"), "ENV-SECRET").unwrap();
    std::fs::write(proj.join("id_rsa"), "KEY-SECRET").unwrap();
    std::fs::write(proj.join("src/a.txt"), "visible").unwrap();
    std::fs::write(w.elsewhere().join("outside.txt"), "OUTSIDE-SECRET").unwrap();
    std::os::unix::fs::symlink(w.elsewhere().join("outside.txt"), proj.join("src/link.txt"))
        .unwrap();
    std::fs::hard_link(w.elsewhere().join("outside.txt"), proj.join("src/hard.txt")).unwrap();
    std::fs::write(proj.join(".gitignore"), "ignored.txt\n").unwrap();
    std::fs::write(proj.join("ignored.txt"), "IGNORED-SECRET").unwrap();
    // A repository may plant `.bb7/tmp` as a link: the view is never built through it.
    let planted = w.elsewhere().join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    std::os::unix::fs::symlink(&planted, proj.join(".bb7/tmp")).unwrap();
    let d = hostile_as("reader", "files = \"project-read\"");
    ok(&w.run(&["add", p(d.path())]));
    ok(&w.run(&["grant", "reader", "--all"]));
    let op = |op: &str, path: &str| json!({"op": op, "path": path});
    let args = json!({"attack": "fs", "ops": [
        op("read", "/src/a.txt"),
        op("read", "/.git/config"), op("read", "/.bb7/note"), op("read", "/.env"),
        op("read", "/id_rsa"), op("read", "/src/link.txt"), op("read", "/src/hard.txt"),
        op("read", "/ignored.txt"), op("read", "/../elsewhere/outside.txt"),
        op("walk", "/"), op("write", "/src/new.txt"),
    ]});
    let out = ok(&w.run(&[
        "call",
        "reader",
        "--dir",
        p(&proj),
        "--args",
        &args.to_string(),
    ]));
    for secret in [
        "GIT-SECRET",
        "BB7-SECRET",
        "ENV-SECRET",
        "KEY-SECRET",
        "OUTSIDE-SECRET",
        "IGNORED-SECRET",
    ] {
        assert!(
            !out.contains(secret),
            "SANDBOX ESCAPE: {secret} read: {out}"
        );
    }
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"][0]["ok"], true, "{v}");
    assert_eq!(v["results"][0]["data"], "visible", "{v}");
    assert_eq!(
        v["results"][10]["ok"], false,
        "a project-read grant wrote: {v}"
    );
    assert!(!proj.join("src/new.txt").exists());
    assert_eq!(
        std::fs::read_dir(&planted).unwrap().count(),
        0,
        "the view was built through a planted .bb7/tmp link"
    );
    // The view holds copies: the project's files keep their single link (which the built-in
    // retrieval tools require).
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(proj.join("src/a.txt")).unwrap().nlink(),
        1
    );
    // bb7's compiled-code cache is never in the view, even when it lies inside the project.
    let cache = proj.join("cachedir");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("planted.txt"), "CACHE-SECRET").unwrap();
    let args =
        json!({"attack": "fs", "ops": [op("walk", "/"), op("read", "/cachedir/planted.txt")]});
    let out = ok(&tools_env(
        &w.home(),
        &proj,
        &[
            "call",
            "reader",
            "--dir",
            p(&proj),
            "--args",
            &args.to_string(),
        ],
        &[("BB7_CACHE_DIR", p(&cache))],
    ));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(
        !out.contains("CACHE-SECRET") && !v["results"][0].to_string().contains("cachedir"),
        "SANDBOX ESCAPE: the cache was in the view: {out}"
    );
    assert_eq!(v["results"][1]["ok"], false, "{out}");
    assert!(out.contains("a.txt"), "{out}");
}

#[test]
fn manifest_limits_hold_for_a_hostile_component() {
    let w = World::new();
    let d = hostile_as("bomb", "[limits]\nmemory_mib = 32\nwall_time_ms = 400\n");
    ok(&w.run(&["add", p(d.path())]));
    ok(&w.run(&["grant", "bomb", "--all"]));
    let call = |attack: &str| {
        w.run(&[
            "call",
            "bomb",
            "--dir",
            p(&w.proj()),
            "--args",
            &json!({"attack": attack}).to_string(),
        ])
    };
    let e = refused(&call("memory_bomb"), 1);
    assert!(e.contains("memory limit (32 MiB)"), "{e}");
    let e = refused(&call("loop"), 1);
    assert!(e.contains("time limit (400 ms)"), "{e}");
    // Limits may only be tighter than the host's.
    let d = hostile_as("big", "[limits]\nmemory_mib = 4096\n");
    let e = refused(&w.run(&["add", p(d.path())]), 2);
    assert!(e.contains("memory_mib"), "{e}");
    // The audit shows requested and granted side by side.
    let v: Value = serde_json::from_str(&ok(&w.run(&["audit", "--json"]))).unwrap();
    let bomb = v["third_party"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "bomb")
        .cloned()
        .unwrap();
    assert_eq!(bomb["limits"]["memory_bytes"], 32 << 20);
    assert_eq!(bomb["requested"]["network"], json!(["127.0.0.1:9"]));
    assert_eq!(bomb["granted"]["network"], json!(["127.0.0.1:9"]));
}

#[test]
fn output_write_files_become_the_reply_s_proposed_files() {
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "c1",
            "maker__hostile",
            json!({"attack": "fs", "ops": [
                {"op": "read_dir", "path": "/"},
                {"op": "mkdir_all", "path": "/gen"},
                {"op": "write", "path": "/gen/new.txt", "data": "made by a component"},
            ]})
            .to_string(),
        )]),
        Reply::text(["made"]),
        Reply::tool_calls([ToolCall::new(
            0,
            "c2",
            "maker__hostile",
            json!({"attack": "fs", "ops": [
                {"op": "mkdir_all", "path": "/.git/hooks"},
                {"op": "write", "path": "/.git/hooks/post-checkout", "data": "evil"},
            ]})
            .to_string(),
        )]),
        Reply::text(["tried"]),
    ]));
    let env = model_env(&server);
    env.write_local("src/a.txt", "PROJECT-CONTENT\n");
    let mut s = started(&env);
    let d = hostile_as("maker", "files = \"output-write\"");
    ok(&tools(
        &env.home(),
        &env.proj(),
        &["add", p(d.path()), "--project"],
    ));
    ok(&tools(
        &env.home(),
        &env.proj(),
        &["grant", "maker", "--all"],
    ));
    let id = s.ok(json!({"action": "chat_new", "name": "t"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (evs, end) = send_agent(&mut s, "make");
    assert_eq!(end["type"], "done", "{end}");
    let done = completed(&evs);
    assert_eq!(done[0]["data"]["ok"], true, "{:?}", done[0]);
    assert_eq!(
        done[0]["data"]["summary"], "proposed gen/new.txt",
        "{:?}",
        done[0]
    );
    // It saw an empty directory, not the project.
    let result = tool_result(&server.requests()[1].body, "c1");
    assert!(
        !result.contains("src") && !result.contains("PROJECT"),
        "{result}"
    );
    // Its file is the reply's proposed file, for the user to review and apply.
    assert_eq!(
        std::fs::read_to_string(env.output_path(&id, "gen/new.txt")).unwrap(),
        "made by a component"
    );
    assert!(
        !env.proj().join("gen").exists(),
        "nothing reaches the project before an apply"
    );
    // A file under .git/ is refused, and nothing of that call is proposed.
    let (evs, _end) = send_agent(&mut s, "again");
    let done = completed(&evs);
    assert_eq!(done[0]["data"]["ok"], false, "{:?}", done[0]);
    assert!(!env.proj().join(".git/hooks/post-checkout").exists());
    assert!(!env.output_path(&id, ".git/hooks/post-checkout").exists());

    // From the command line, an output-write component gets an empty directory only.
    let e = refused(
        &tools(
            &env.home(),
            &env.proj(),
            &[
                "call",
                "maker",
                "--dir",
                &env.proj_str(),
                "--args",
                r#"{"attack":"ok"}"#,
            ],
        ),
        2,
    );
    assert!(e.contains("must be empty"), "{e}");
}

/// Issue 23 item 17: `tools grant` in a directory without `.bb7/` (where `add --project` enabled
/// the component) writes the lockfile, so the very next `audit --check` passes.
/// Review finding: a restricted approved plan bounds an output-write component's files as it
/// bounds the edit tools': a call writing a file outside the plan is a tool error and none of its
/// files is proposed; a call writing only the plan's file is adopted.
#[test]
fn an_approved_plan_bounds_an_output_write_component_s_files() {
    let write = |id: &str, files: &[&str]| {
        let mut ops = vec![json!({"op": "mkdir_all", "path": "/src"})];
        for f in files {
            ops.push(json!({"op": "write", "path": format!("/{f}"), "data": format!("by {id}")}));
        }
        ToolCall::new(
            0,
            id,
            "maker__hostile",
            json!({"attack": "fs", "ops": ops}).to_string(),
        )
    };
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "p1",
            "propose_plan",
            json!({"summary": "Make a.txt", "steps": [{"title": "Write a", "files": ["src/a.txt"]}]})
                .to_string(),
        )]),
        Reply::text(["Plan proposed."]),
        Reply::tool_calls([write("w1", &["src/a.txt", "src/other.txt"])]),
        Reply::tool_calls([write("w2", &["src/a.txt"])]),
        Reply::text(["done"]),
    ]));
    let env = model_env(&server);
    let mut s = started(&env);
    let d = hostile_as("maker", "files = \"output-write\"");
    ok(&tools(
        &env.home(),
        &env.proj(),
        &["add", p(d.path()), "--project"],
    ));
    ok(&tools(
        &env.home(),
        &env.proj(),
        &["grant", "maker", "--all"],
    ));
    let id = s.ok(json!({"action": "chat_new", "name": "t"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (evs, end) = s.send_collect(
        json!({"action": "send", "content": "plan", "model": "mock/agent", "mode": "plan"}),
    );
    assert_eq!(end["type"], "done", "{end}");
    let plan_id = evs
        .iter()
        .find(|e| e["type"] == "agent_event" && e["kind"] == "plan.proposed")
        .and_then(|e| e["data"]["plan_id"].as_str())
        .unwrap_or_else(|| panic!("no plan.proposed in {evs:?}"))
        .to_string();
    let (evs, end) = s
        .send_collect(json!({"action": "plan_approve", "plan_id": plan_id, "model": "mock/agent"}));
    assert_eq!(end["type"], "done", "{end}");
    let done = completed(&evs);
    assert_eq!(done.len(), 2, "{done:?}");
    assert_eq!(done[0]["data"]["ok"], false, "{:?}", done[0]);
    let result = tool_result(&server.chat_requests()[3].body, "w1");
    assert!(
        result.contains("src/other.txt is not among the files of the approved plan (src/a.txt)"),
        "{result}"
    );
    assert_eq!(done[1]["data"]["ok"], true, "{:?}", done[1]);
    assert_eq!(
        std::fs::read_to_string(env.output_path(&id, "src/a.txt")).unwrap(),
        "by w2"
    );
    assert!(!env.output_path(&id, "src/other.txt").exists());
    assert!(s.alive());
    s.shutdown();
}

#[test]
fn grant_in_a_directory_without_bb7_writes_the_lockfile() {
    let w = World::new();
    let bare = w.elsewhere();
    assert!(!bare.join(".bb7").exists());
    ok(&tools(
        &w.home(),
        &bare,
        &["add", p(word_count()), "--project"],
    ));
    let out = ok(&tools(&w.home(), &bare, &["grant", "wordcount", "--all"]));
    let lock = std::fs::read_to_string(bare.join(".bb7/tools.lock"))
        .unwrap_or_else(|_| panic!("no lockfile was written: {out}"));
    assert!(lock.contains("wordcount"), "{lock}");
    ok(&tools(&w.home(), &bare, &["audit", "--check"]));
    // A grant made where nothing is enabled creates no .bb7/ there.
    let empty = w.root.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    ok(&tools(&w.home(), &empty, &["grant", "wordcount", "--all"]));
    assert!(!empty.join(".bb7").exists());
}

/// Issue 23 (smaller): hosts that look numeric in any base (`0x7f.0x1`, which the resolver takes
/// as 127.0.0.1) are refused in a manifest and in `grant --network`; bidi and zero-width
/// characters are refused in a manifest's description and version.
#[test]
fn numeric_looking_hosts_and_invisible_characters_are_refused() {
    let w = World::new();
    for host in [
        "0x7f.0x1",
        "0X7F.0X1",
        "127.0.0.0x1",
        "0x7f.0.0.01",
        "a.0x10",
    ] {
        let d = hostile_as("numhost", &format!("network = [\"{host}:80\"]"));
        let e = refused(&w.run(&["add", p(d.path())]), 2);
        assert!(e.contains("network entry"), "{host}: {e}");
    }
    let d = hostile_as("probe", "network = [\"127.0.0.1:9\"]");
    ok(&w.run(&["add", p(d.path())]));
    let e = refused(&w.run(&["grant", "probe", "--network", "0x7f.0x1:9"]), 2);
    assert!(e.contains("network entry"), "{e}");
    for (field, value) in [
        ("description", "reads \u{202e}txt.exe"),
        ("description", "zero\u{200b}width"),
        ("description", "\u{2066}isolate\u{2069}"),
        ("description", "bom\u{feff}"),
        ("version", "1.0\u{200d}"),
        ("version", "1.0\u{202d}"),
    ] {
        let d = if field == "version" {
            let dir = hostile_as("inv", "");
            let m = std::fs::read_to_string(dir.path().join("bb7-tool.toml")).unwrap();
            std::fs::write(
                dir.path().join("bb7-tool.toml"),
                m.replace("version = \"1.0\"", &format!("version = \"{value}\"")),
            )
            .unwrap();
            dir
        } else {
            hostile_as("inv", &format!("description = \"{value}\""))
        };
        let e = refused(&w.run(&["add", p(d.path())]), 2);
        assert!(e.contains(field), "{value:?}: {e}");
        assert!(!e.contains(value), "the invisible text is echoed: {e:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Issue 23 items 11–13: blocked calls, output past the cap, deep directory chains
// ---------------------------------------------------------------------------------------------

/// Descriptors the process `pid` holds now.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("reading /proc/<pid>/fd")
        .count()
}

/// A field of `/proc/<pid>/status`, in kB (e.g. `VmRSS`).
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// Bytes the process `pid` has passed to write(2) and friends so far (`wchar` of /proc/<pid>/io).
fn written_bytes(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no wchar in {io}"))
}

/// The host serving `env`'s project, with `tmp` as its temporary directory (where the directories
/// of output-write calls are made).
fn started_in_tmp(env: &Env, tmp: &Path) -> Bb7 {
    let mut s = Bb7::spawn_env(&env.home(), &env.root, &[("TMPDIR", tmp)]);
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s
}

/// The hostile fixture installed and granted for `env`'s project as `name`, with `extra`
/// manifest lines.
fn install_hostile(env: &Env, name: &str, extra: &str) {
    let d = hostile_as(name, extra);
    ok(&tools(
        &env.home(),
        &env.proj(),
        &["add", p(d.path()), "--project"],
    ));
    ok(&tools(&env.home(), &env.proj(), &["grant", name, "--all"]));
}

/// What [`blocked_calls`] measured of the host.
struct Blocked {
    fds_before: usize,
    fds_after: usize,
    rss_before_kb: u64,
    rss_after_kb: u64,
    /// The completed tool calls of the reply with the blocked calls.
    done: Vec<Value>,
}

/// In one reply, nine calls (more than the eight abandoned calls the host used to tolerate) of a
/// component that holds `files` descriptors and `mib` MiB and then blocks in a host call (a
/// sleep) far past its 300 ms time limit, then a built-in `write_file`. Measures the host's
/// descriptors and resident memory after a warm-up reply and after the reply has ended.
fn blocked_calls(files: u64, mib: u64) -> Blocked {
    // Each call's arguments differ (`n`): the agent refuses to repeat an identical call.
    let hold = |n: u32| {
        json!({"attack": "hold", "files": files, "mib": mib, "secs": 3600, "n": n}).to_string()
    };
    let mut calls: Vec<ToolCall> = (0..9)
        .map(|i| ToolCall::new(i, format!("h{i}"), "holder__hostile", hold(i)))
        .collect();
    calls.push(ToolCall::new(
        9,
        "w",
        "write_file",
        json!({"path": "after.txt", "content": "still serving\n"}).to_string(),
    ));
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([
            ToolCall::new(0, "warm1", "holder__hostile", r#"{"attack":"ok"}"#),
            ToolCall::new(
                1,
                "warm2",
                "write_file",
                json!({"path": "warm.txt", "content": "warm\n"}).to_string(),
            ),
        ]),
        Reply::text(["warm"]),
        Reply::tool_calls(calls),
        Reply::text(["done"]),
    ]));
    let env = model_env(&server);
    let tmp = env.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    // The project is initialised first: the grant then writes its lockfile into `.bb7/`.
    let mut s = started_in_tmp(&env, &tmp);
    install_hostile(
        &env,
        "holder",
        "files = \"output-write\"\n[limits]\nwall_time_ms = 300\n",
    );
    s.ok(json!({"action": "chat_new", "name": "t"}));
    let (evs, end) = send_agent(&mut s, "warm up");
    assert_eq!(end["type"], "done", "{end}");
    assert!(
        completed(&evs).iter().all(|d| d["data"]["ok"] == true),
        "{evs:?}"
    );
    let fds_before = fd_count(s.pid);
    let rss_before_kb = status_kb(s.pid, "VmRSS");
    let (evs, end) = send_agent(&mut s, "hold");
    assert_eq!(end["type"], "done", "{end}");
    let fds_after = fd_count(s.pid);
    let rss_after_kb = status_kb(s.pid, "VmRSS");
    // Still serving after the reply.
    s.ok(json!({"action": "ping"}));
    Blocked {
        fds_before,
        fds_after,
        rss_before_kb,
        rss_after_kb,
        done: completed(&evs),
    }
}

/// Issue 23 item 11: a component blocked in a host call past its time limit used to be abandoned
/// with its store — ~1,000 descriptors each — and after eight such calls every tool, the
/// built-in `write_file` included, was refused until restart. A call whose time is up must
/// release everything it held.
#[test]
fn blocked_calls_release_their_descriptors_and_tools_keep_working() {
    let b = blocked_calls(500, 0);
    assert_eq!(b.done.len(), 10, "{:?}", b.done);
    for d in &b.done[..9] {
        assert_eq!(d["data"]["ok"], false, "{d}");
        let e = d["data"]["error"].as_str().unwrap_or_default();
        assert!(e.contains("time limit"), "{d}");
        // Stopped at its deadline, not abandoned still holding its store.
        assert!(!e.contains("abandoned"), "{d}");
    }
    let w = &b.done[9];
    assert_eq!(w["data"]["tool"], "write_file", "{w}");
    assert_eq!(
        w["data"]["ok"], true,
        "the built-in write_file was refused after blocked calls: {w}"
    );
    assert!(
        b.fds_after <= b.fds_before + 32,
        "the host holds {} descriptors after the reply, {} before it: the blocked calls kept theirs",
        b.fds_after,
        b.fds_before
    );
}

/// Issue 23 item 13: calls that fill memory and then block used to keep it after the reply ended
/// (eight abandoned calls of 240 MiB: 1,954 MiB). Memory returns when a call ends.
#[test]
fn blocked_calls_release_their_memory() {
    let b = blocked_calls(0, 96);
    for d in &b.done[..9] {
        assert_eq!(d["data"]["ok"], false, "{d}");
    }
    assert!(
        b.rss_after_kb <= b.rss_before_kb + (48 << 10),
        "the host's RSS is {} MiB after the reply, {} MiB before it: the blocked calls kept their memory",
        b.rss_after_kb >> 10,
        b.rss_before_kb >> 10
    );
}

/// Issue 23 item 12: an output-write component wrote ~2 GiB in seconds (the 16 MiB cap was
/// checked after the call) and a deep directory chain aborted bb7, leaving its directories. The
/// cap holds while writing — by std's `File` and by raw appends alike —, a deep chain is refused
/// without crashing, and no output directory is left behind.
#[test]
fn output_write_is_capped_while_writing_and_deep_chains_are_refused() {
    let big = |via: &str| json!({"attack": "write_big", "mib": 256, "via": via}).to_string();
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(0, "c1", "writer__hostile", big("file"))]),
        Reply::text(["one"]),
        Reply::tool_calls([ToolCall::new(0, "c2", "writer__hostile", big("stream"))]),
        Reply::text(["two"]),
        Reply::tool_calls([ToolCall::new(
            0,
            "c3",
            "writer__hostile",
            r#"{"attack":"deep_chain","depth":200000}"#,
        )]),
        Reply::text(["three"]),
        Reply::tool_calls([ToolCall::new(
            0,
            "c4",
            "writer__hostile",
            json!({"attack": "write_big", "mib": 4, "via": "file"}).to_string(),
        )]),
        Reply::text(["four"]),
    ]));
    let env = model_env(&server);
    let tmp = env.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut s = started_in_tmp(&env, &tmp);
    install_hostile(&env, "writer", "files = \"output-write\"");
    s.ok(json!({"action": "chat_new", "name": "t"}));
    // What is left in TMPDIR once the reply's own staging directory (removed as the reply ends)
    // is gone: waits for it to become empty, up to a bound, and returns what is left.
    let left = || -> Vec<String> {
        let list = || -> Vec<String> {
            std::fs::read_dir(&tmp)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        };
        for _ in 0..200 {
            if list().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        list()
    };

    for (i, what) in ["write_all", "raw appends"].iter().enumerate() {
        let before = written_bytes(s.pid);
        let (evs, end) = send_agent(&mut s, what);
        assert_eq!(end["type"], "done", "{what}: {end}");
        let written = written_bytes(s.pid) - before;
        assert!(
            written < 24 << 20,
            "{what}: the host wrote {} MiB for a call capped at 16 MiB",
            written >> 20
        );
        let done = completed(&evs);
        assert_eq!(done.len(), 1, "{what}: {evs:?}");
        assert_eq!(done[0]["data"]["ok"], false, "{what}: {:?}", done[0]);
        let e = done[0]["data"]["error"].as_str().unwrap_or_default();
        assert!(e.contains("output limit"), "{what}: {e}");
        assert_eq!(
            left(),
            Vec::<String>::new(),
            "{what} (call {i}) left files in TMPDIR"
        );
    }

    let (evs, end) = send_agent(&mut s, "deep");
    assert_eq!(end["type"], "done", "{end}");
    let done = completed(&evs);
    assert_eq!(done[0]["data"]["ok"], false, "{:?}", done[0]);
    assert!(s.alive(), "bb7 died on a deep directory chain");
    assert_eq!(
        left(),
        Vec::<String>::new(),
        "the deep chain was left in TMPDIR"
    );

    // Under the cap, an output-write call still works.
    let (evs, end) = send_agent(&mut s, "small");
    assert_eq!(end["type"], "done", "{end}");
    let done = completed(&evs);
    assert_eq!(done[0]["data"]["ok"], true, "{:?}", done[0]);
    assert_eq!(
        done[0]["data"]["summary"], "proposed big.bin",
        "{:?}",
        done[0]
    );
    assert_eq!(left(), Vec::<String>::new());
    s.ok(json!({"action": "ping"}));
}

/// `bb7 tools call` meters an output-write component's writes as agent mode does: a 256 MiB write
/// into `--dir` fails the call with the output limit, and the directory holds at most the cap.
#[test]
fn tools_call_caps_output_write_while_writing() {
    let w = World::new();
    let d = hostile_as("writer", "files = \"output-write\"");
    ok(&w.run(&["add", p(d.path()), "--project"]));
    ok(&w.run(&["grant", "writer", "--all"]));
    let out = w.root.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let args = json!({"attack": "write_big", "mib": 256, "via": "file"}).to_string();
    let e = refused(
        &w.run(&["call", "writer", "--dir", p(&out), "--args", &args]),
        1,
    );
    assert!(e.contains("output limit"), "{e}");
    let held: u64 = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(held <= 16 << 20, "--dir holds {} MiB", held >> 20);
}
