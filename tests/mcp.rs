//! `bb7 mcp` through real MCP clients (issue 26, ECOSYSTEM-PROTOCOL.md §6): the official Python SDK's
//! stdio client (tests/mcp_py/scenarios.py, from the venv scripts/mcp-venv installs into
//! target/mcp-venv), and rmcp's own client for the protocol edge cases. Every bb7 runs in an isolated
//! home; the third-party components are the example word counter and the hostile fixture, built as
//! tests/components.rs builds them.
//!
//! Without the venv the Python tests say so and pass locally; under `CI=true` they fail.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

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

fn hostile() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| common::wasm::build("tests/hostile", "hostile-wasm", "hostile.wasm"))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A home, a project with files the tools may and may not see, and things outside it.
struct World {
    root: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        let w = World { root };
        std::fs::create_dir_all(w.home()).unwrap();
        std::fs::create_dir_all(w.proj().join(".bb7")).unwrap();
        std::fs::create_dir_all(w.proj().join(".git")).unwrap();
        std::fs::create_dir_all(w.proj().join("src")).unwrap();
        std::fs::create_dir_all(w.proj().join("many")).unwrap();
        std::fs::create_dir_all(w.root.path().join("elsewhere")).unwrap();
        std::fs::write(w.proj().join("src/a.txt"), "alpha beta\ngamma\n").unwrap();
        std::fs::write(w.proj().join(".env"), "SECRET=hunter2\n").unwrap();
        std::fs::write(w.proj().join(".git/config"), "token = hunter2\n").unwrap();
        for i in 0..10 {
            std::fs::write(
                w.proj().join(format!("many/f{i}.txt")),
                format!("content of file {i}\n"),
            )
            .unwrap();
        }
        std::fs::write(w.root.path().join("outside.txt"), "hunter2 outside\n").unwrap();
        std::fs::write(w.root.path().join("elsewhere/b.txt"), "hunter2 b\n").unwrap();
        std::os::unix::fs::symlink(w.root.path().join("outside.txt"), w.proj().join("link.txt"))
            .unwrap();
        std::os::unix::fs::symlink(w.root.path().join("elsewhere"), w.proj().join("linkdir"))
            .unwrap();
        w
    }
    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    fn proj(&self) -> PathBuf {
        self.root.path().join("proj")
    }
    fn env(&self, c: &mut Command) {
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("BB7_CACHE_DIR", common::shared_cache());
    }
    /// `bb7 tools ARGS` in the project.
    fn tools(&self, args: &[&str]) {
        let mut c = Command::new(common::bin());
        self.env(&mut c);
        let out = c
            .current_dir(self.proj())
            .stdin(Stdio::null())
            .arg("tools")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "bb7 tools {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    /// Installs `wasm` (with `manifest`, when given) for the project and grants it everything it asks.
    fn install(&self, name: &str, wasm: &Path, manifest: Option<&str>) {
        let dir = tempfile::tempdir().unwrap();
        let src = match manifest {
            Some(m) => {
                std::fs::copy(wasm, dir.path().join("c.wasm")).unwrap();
                std::fs::write(dir.path().join("bb7-tool.toml"), m).unwrap();
                dir.path().to_path_buf()
            }
            None => wasm.to_path_buf(),
        };
        self.tools(&["add", p(&src), "--project"]);
        self.tools(&["grant", name, "--all"]);
    }
    fn install_hostile(&self, limits: &str) {
        let manifest = format!(
            "name = \"bomb\"\nversion = \"1.0\"\nwit = \"0.1.0\"\nnetwork = [\"127.0.0.1:9\"]\n{limits}\n"
        );
        self.install("bomb", hostile(), Some(&manifest));
    }
    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.home().join(".bb7/audit/log.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// The venv's python, or `None` (locally) when scripts/mcp-venv has not been run.
fn python() -> Option<PathBuf> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-venv/bin/python");
    if py.exists() {
        return Some(py);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{} is missing: scripts/test installs it with scripts/mcp-venv",
        py.display()
    );
    eprintln!("skipped: no {} (run bash scripts/mcp-venv)", py.display());
    None
}

/// Runs a scenario of tests/mcp_py/scenarios.py; its JSON line of facts.
fn scenario(w: &World, name: &str, extra: &str) -> Option<Value> {
    let py = python()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp_py/scenarios.py");
    let mut c = Command::new(py);
    w.env(&mut c);
    let out = c
        .current_dir(w.root.path())
        .arg(script)
        .args([name, common::bin(), p(&w.proj()), extra])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scenario {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let facts: Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();
    assert_eq!(facts["stderr"], "", "bb7 mcp wrote to stderr in {name}");
    Some(facts)
}

#[test]
fn the_python_client_lists_the_tools_and_calls_each_built_in_and_a_granted_component() {
    let w = World::new();
    w.install("wordcount", word_count(), None);
    let Some(f) = scenario(&w, "basics", "") else {
        return;
    };
    let tools: Vec<&str> = f["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "search_project",
            "read_file",
            "list_files",
            "wordcount__count_words"
        ],
        "agent mode's retrieval tools and the granted component, nothing that edits or grants"
    );
    assert_eq!(f["list_changed"], false);
    // The word counter saw the project as agent mode's view shows it: src/a.txt and many/*, never
    // .env or .git/.
    let wc = f["wordcount"].to_string();
    assert!(!wc.contains("hunter2"), "{wc}");
    let files = f["files"].to_string();
    assert!(
        files.contains("src/a.txt") && files.contains("many/f0.txt"),
        "{files}"
    );
    for path in [".env", ".git/config", "link.txt", "linkdir/b.txt"] {
        assert!(
            !files.contains(&format!("\"{path}\"")),
            "{path} listed: {files}"
        );
    }
    let refusals = f["refusals"].as_object().unwrap();
    for (path, message) in refusals {
        let m = message.as_str().unwrap();
        assert!(!m.contains("hunter2"), "{path}: {m}");
        assert!(m.starts_with("read_file"), "{path}: {m}");
    }
    // Every call is in the audit chain under the client's name.
    let records = w.audit();
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "tool_call")
        .collect();
    assert!(!calls.is_empty(), "no tool_call records: {records:?}");
    for r in &calls {
        assert_eq!(r["actor"], "mcp:pytest-mcp", "{r}");
    }
    for tool in ["read_file", "search_project", "list_files", "wordcount"] {
        assert!(
            calls
                .iter()
                .any(|r| r["tool"].as_str().unwrap_or("").contains(tool)),
            "{tool} not audited: {calls:?}"
        );
    }
}

#[test]
fn a_component_over_its_time_limit_is_a_tool_error_and_the_server_keeps_serving() {
    let w = World::new();
    w.install_hostile("[limits]\nwall_time_ms = 300\n");
    let Some(f) = scenario(&w, "time_limit", "") else {
        return;
    };
    let over = f["over"].as_str().unwrap();
    assert!(over.contains("time limit (300 ms)"), "{over}");
    assert_eq!(f["after"], "{\"ok\":true}");
    assert_eq!(f["read_ok"], true);
}

#[test]
fn a_cancelled_call_stops_its_component_and_the_next_call_is_served() {
    let w = World::new();
    w.install_hostile("");
    let Some(f) = scenario(&w, "cancel", "") else {
        return;
    };
    assert_eq!(f["cancelled"], true);
    assert_eq!(f["read_ok"], true);
    // The looping component was stopped by the cancel, not by its time limit (nor left running
    // until the server was killed): its record in the audit chain says so.
    let records = w.audit();
    let looped: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "tool_call" && r["ok"] == false)
        .collect();
    assert_eq!(looped.len(), 1, "{records:?}");
    assert_eq!(looped[0]["outcome"], "cancelled", "{}", looped[0]);
    assert_eq!(looped[0]["actor"], "mcp:pytest-mcp");
}

#[test]
fn a_hundred_sequential_calls_get_their_own_replies() {
    let w = World::new();
    let Some(f) = scenario(&w, "sequential", "100") else {
        return;
    };
    assert_eq!(f["calls"], 100);
}

#[test]
fn eight_concurrent_clients_on_one_project_get_their_own_replies() {
    let w = World::new();
    let Some(f) = scenario(&w, "concurrent", "8") else {
        return;
    };
    assert_eq!(f["calls"], 80);
    let actors: std::collections::BTreeSet<String> = w
        .audit()
        .iter()
        .filter(|r| r["kind"] == "tool_call")
        .map(|r| r["actor"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(actors.len(), 8, "{actors:?}");
}

#[test]
fn the_python_client_sees_bad_arguments_and_unknown_tools_as_invalid_params() {
    let w = World::new();
    let Some(f) = scenario(&w, "bad", "") else {
        return;
    };
    let codes = &f["codes"];
    assert_eq!(codes["no_such_tool{}"][0], "error", "{codes}");
    assert_eq!(codes["no_such_tool{}"][1], -32602, "{codes}");
    assert_eq!(codes["read_file{}"][1], -32602, "{codes}");
    assert_eq!(
        codes["read_file{}"][2],
        "read_file: missing required argument `file_path`"
    );
    assert_eq!(codes["read_file{\"file_path\": 7}"][1], -32602, "{codes}");
    assert_eq!(f["read_ok"], true);
}

#[test]
fn stage_puts_edits_in_the_clients_chat_for_review_and_never_writes_the_project() {
    let w = World::new();
    let Some(f) = scenario(&w, "stage", "") else {
        return;
    };
    let tools: Vec<&str> = f["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "search_project",
            "read_file",
            "list_files",
            "write_file",
            "edit_file"
        ]
    );
    let edit = f["edit"].as_str().unwrap();
    assert!(edit.contains("[Assistant modified: src/a.txt]"), "{edit}");
    assert!(edit.contains("mcp: pytest-mcp"), "{edit}");
    // A stale file id and a deny-listed file are refused, without the secret.
    let stale = f["stale"].as_str().unwrap();
    assert!(stale.starts_with("edit_file"), "{stale}");
    let secret = f["secret"].as_str().unwrap();
    assert!(
        secret.starts_with("edit_file") && !secret.contains("hunter2"),
        "{secret}"
    );
    // The project is untouched; one chat `mcp: pytest-mcp` holds the edits (reused by each call).
    assert_eq!(
        std::fs::read_to_string(w.proj().join("src/a.txt")).unwrap(),
        "alpha beta\ngamma\n"
    );
    assert!(!w.proj().join("src/new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(w.proj().join(".env")).unwrap(),
        "SECRET=hunter2\n"
    );
    let index: Value =
        serde_json::from_slice(&std::fs::read(w.proj().join(".bb7/chats/index.json")).unwrap())
            .unwrap();
    let entries = index["chats"].as_array().cloned().unwrap_or_default();
    let ids: Vec<String> = entries
        .iter()
        .filter(|e| e["name"] == "mcp: pytest-mcp")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 1, "{index}");

    // Reviewed through the normal stdio protocol, as Neovim does.
    let mut s = common::proto::Bb7::spawn(&w.home(), &w.proj());
    s.ok(json!({"action": "init", "project_root": p(&w.proj())}));
    s.ok(json!({"action": "chat_select", "id": ids[0]}));
    let r = s.ok(json!({"action": "get_hunks", "path": "src/a.txt"}));
    let hunks = common::proto::list(&r["hunks"]);
    assert!(!hunks.is_empty(), "{r}");
    assert_eq!(
        std::fs::read_to_string(w.proj().join("src/a.txt")).unwrap(),
        "alpha beta\ngamma\n",
        "get_hunks changed the project"
    );
    let all: Vec<Value> = hunks.iter().map(|h| h["id"].clone()).collect();
    s.ok(
        json!({"action": "apply_hunks", "path": "src/a.txt", "hunk_ids": all,
                "base_hash": r["base_hash"]}),
    );
    assert_eq!(
        std::fs::read_to_string(w.proj().join("src/a.txt")).unwrap(),
        "alpha BETA\nGAMMA\n"
    );
    let r = s.ok(json!({"action": "get_hunks", "path": "src/new.txt"}));
    assert!(!common::proto::list(&r["hunks"]).is_empty(), "{r}");
    // While this host has the chat open (its lock), an MCP edit is refused, never written under it.
    let f = scenario(&w, "stage_locked", "").unwrap();
    let refused = f["refused"].as_str().unwrap();
    assert!(
        refused.starts_with("write_file") && refused.contains("is open in another bb7 process"),
        "{refused}"
    );
    assert_eq!(f["read_ok"], true);
    assert!(
        !w.proj()
            .join(format!(".bb7/chats/{}/output/src/other.txt", ids[0]))
            .exists()
    );
    s.shutdown();
}

/// Spawns `bb7 mcp` in `cwd` with `args`, writes `input`, closes stdin, and waits.
fn raw(w: &World, cwd: &Path, args: &[&str], input: &str) -> Output {
    let mut c = Command::new(common::bin());
    w.env(&mut c);
    let mut child = c
        .current_dir(cwd)
        .arg("mcp")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn init_lines() -> String {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect()
}

#[test]
fn stdin_closing_ends_the_server_cleanly_and_a_project_is_required() {
    let w = World::new();
    // Nothing at all, then a handshake alone: exit 0, nothing on stderr.
    for input in [String::new(), init_lines()] {
        let out = raw(&w, &w.proj(), &[], &input);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    }
    // A call written just before stdin closes is still answered.
    let mut input = init_lines();
    input.push_str(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"file_path": "src/a.txt"}}})
        .to_string(),
    );
    input.push('\n');
    let out = raw(&w, &w.proj().join("src"), &[], &input);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let replies: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = replies
        .iter()
        .find(|r| r["id"] == 2)
        .expect("the call's reply");
    assert!(
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("alpha beta"),
        "{call}"
    );
    // No .bb7/ above the directory, $HOME and the state directory: refused, before reading.
    let out = raw(&w, w.root.path(), &[], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no project"),
        "{out:?}"
    );
    std::fs::create_dir_all(w.home().join(".bb7")).unwrap();
    // The state directory `~/.bb7` marks no project: a directory under $HOME without its own
    // .bb7/ has none.
    let plain = w.home().join("notes");
    std::fs::create_dir_all(&plain).unwrap();
    let out = raw(&w, &plain, &[], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no project"),
        "{out:?}"
    );
    for dir in [w.home(), w.home().join(".bb7")] {
        let out = raw(&w, w.root.path(), &["--project", p(&dir)], "");
        assert_eq!(out.status.code(), Some(1), "{dir:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("cannot be served as a project"),
            "{out:?}"
        );
    }
}

#[test]
fn rmcp_client_edge_cases() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::service::ServiceError;
    use rmcp::transport::TokioChildProcess;

    let w = World::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(common::bin());
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", w.home())
            .env("BB7_CACHE_DIR", common::shared_cache())
            .arg("mcp")
            .arg("--project")
            .arg(w.proj());
        let (transport, stderr) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = stderr.expect("stderr");
        let client = ().serve(transport).await.unwrap();
        let info = client.peer_info().expect("initialized");
        assert_eq!(
            info.server_info.as_ref().map(|i| i.name.as_str()),
            Some("bb7")
        );
        let tools = client.list_all_tools().await.unwrap();
        assert_eq!(tools.len(), 3);

        let invalid = |r: Result<rmcp::model::CallToolResult, ServiceError>| match r {
            Err(ServiceError::McpError(e)) => {
                assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{e:?}");
                e.message.to_string()
            }
            other => panic!("expected invalid params, got {other:?}"),
        };
        let m = invalid(client.call_tool(CallToolRequestParams::new("nope")).await);
        assert!(m.contains("unknown tool \"nope\""), "{m}");
        let bad = |args: Value| {
            let mut p = CallToolRequestParams::new("read_file");
            p.arguments = args.as_object().cloned();
            p
        };
        let m = invalid(client.call_tool(bad(json!({"file_path": ["a"]}))).await);
        assert_eq!(m, "read_file: argument `file_path` must be string");
        let m = invalid(client.call_tool(bad(json!({"start_line": 1}))).await);
        assert_eq!(m, "read_file: missing required argument `file_path`");
        // A tool error is a result with isError, not a protocol error.
        let r = client
            .call_tool(bad(json!({"file_path": "../outside.txt"})))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        // Still serving.
        let r = client
            .call_tool(bad(json!({"file_path": "src/a.txt"})))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false));

        // After the client closes its side, a call fails at once instead of hanging.
        let peer = client.peer().clone();
        client.cancel().await.unwrap();
        let after = peer.call_tool(bad(json!({"file_path": "src/a.txt"}))).await;
        assert!(
            matches!(
                after,
                Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))
            ),
            "{after:?}"
        );
        // The server ended at the end of its input, saying nothing on stderr.
        let mut err = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut err)
            .await
            .unwrap();
        assert_eq!(err, "");
    });
}

/// Bench (run by hand: `cargo test --release --test mcp -- --ignored --nocapture bench`): spawn →
/// initialize reply, and the median round trips through the Python client of `read_file` of a
/// 64 KiB file and of `search_project` over 20,000 files, on the very tree `host/benches/agent.rs`
/// builds (run `cargo bench -p bb7 --bench agent` for the same calls through agent mode: the
/// difference is the per-call overhead of MCP, client included).
#[test]
#[ignore]
fn bench() {
    let w = World::new();
    let root = w.proj();
    for i in 0..20_000u32 {
        let p = root.join(format!("d{:03}/s{:02}/f{i:05}.txt", i % 200, i % 13));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut s = String::new();
        for l in 0..20 {
            s.push_str(&format!("line {l} of file {i} with some ordinary text\n"));
        }
        if i % 997 == 0 {
            s.push_str("the NEEDLE_TOKEN is here\n");
        }
        std::fs::write(p, s).unwrap();
    }
    let big: String = (0..2000)
        .map(|i| format!("{i:05} {}\n", "x".repeat(94)))
        .collect();
    std::fs::write(root.join("big.txt"), &big[..65536]).unwrap();
    let mut times = Vec::new();
    for _ in 0..20 {
        let t0 = std::time::Instant::now();
        let mut c = Command::new(common::bin());
        w.env(&mut c);
        let mut child = c
            .arg("mcp")
            .arg("--project")
            .arg(w.proj())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(init_lines().as_bytes()).unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut buf = [0u8; 1];
        let mut line = Vec::new();
        while stdout.read(&mut buf).unwrap() == 1 && buf[0] != b'\n' {
            line.push(buf[0]);
        }
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        drop(stdin);
        child.wait().unwrap();
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "spawn -> initialize reply: median {:.1} ms, max {:.1} ms",
        times[10], times[19]
    );
    if let Some(f) = scenario(&w, "bench", "200") {
        println!(
            "python client, median round trip: read_file 64 KiB {:.3} ms; search_project on 20,000 files {:.1} ms",
            f["read_ms"].as_f64().unwrap(),
            f["search_ms"].as_f64().unwrap()
        );
    }
}
