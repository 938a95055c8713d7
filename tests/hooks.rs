//! Hooks (ECOSYSTEM-PROTOCOL.md §8) through the real binary and the mock model server: the example
//! and test hooks of `examples/hooks` (built here as CI builds them), installed, granted and
//! enabled like tools. A deny at each point stops its action (no model request, the component not
//! run, the result withheld, the file untouched); a hook that loops, runs out of memory or traps
//! denies (fail closed); a hook with no grant cannot read the project; removing a hook changes
//! `tools audit --check`; every decision is in the audit chain, which verifies.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::*;
use serde_json::{Value, json};

/// The hook `<name>.wasm` of `examples/hooks` (its manifest embedded).
fn hook(name: &str) -> PathBuf {
    common::wasm::build(
        "examples/hooks",
        "hook-examples-wasm",
        &format!("{name}.wasm"),
    )
}

/// `bb7 <args>` for the user of `home`, in `cwd`.
fn bb7(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(common::bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BB7_CACHE_DIR", common::shared_cache())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .args(args)
        .output()
        .expect("spawn bb7")
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

/// A project session against `server` with the hooks `names` installed, granted (what they
/// request) and enabled for the project, and a chat open.
fn session(server: &MockServer, names: &[&str]) -> (Env, Bb7) {
    session_with(server, names, json!({}))
}

/// [`session`] with the user config's `agent` settings `agent`.
fn session_with(server: &MockServer, names: &[&str], agent: Value) -> (Env, Bb7) {
    session_in(Env::new(), server, names, agent)
}

/// [`session_with`] in `env` (made first when the script needs the project's path).
fn session_in(env: Env, server: &MockServer, names: &[&str], agent: Value) -> (Env, Bb7) {
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url(), "agent": agent}).to_string(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    for name in names {
        let wasm = hook(name);
        ok(&bb7(
            &env.home(),
            &env.proj(),
            &["tools", "add", wasm.to_str().unwrap(), "--project"],
        ));
        ok(&bb7(
            &env.home(),
            &env.proj(),
            &["tools", "grant", name, "--all"],
        ));
    }
    s.ok(json!({"action": "chat_new", "name": "t"}));
    (env, s)
}

/// Sends `content` in agent mode and returns the terminal event and the events before it.
fn send_agent(s: &mut Bb7, content: &str) -> (Value, Vec<Value>) {
    send_in(s, content, "agent")
}

/// Sends `content` in `mode` and returns the terminal event and the events before it.
fn send_in(s: &mut Bb7, content: &str, mode: &str) -> (Value, Vec<Value>) {
    let (evs, end) = s.send_collect(
        json!({"action": "send", "content": content, "model": "mock/agent", "mode": mode}),
    );
    (end, evs)
}

/// What the model read as the result of call `id` (from the request after the calls).
fn tool_result(server: &MockServer, id: &str) -> String {
    let reqs = server.requests();
    reqs.iter()
        .rev()
        .find_map(|r| {
            r.body["messages"]
                .as_array()?
                .iter()
                .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
                .and_then(|m| m["content"].as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no result for {id}"))
}

/// The chain's `hook` records, after `bb7 audit verify` passed.
fn verified_hook_records(home: &Path, cwd: &Path) -> Vec<Value> {
    ok(&bb7(home, cwd, &["audit", "verify"]));
    let shown = ok(&bb7(home, cwd, &["audit", "show", "--json"]));
    let records: Vec<Value> = match serde_json::from_str::<Value>(&shown) {
        Ok(Value::Array(a)) => a,
        _ => shown
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    };
    records
        .into_iter()
        .filter(|r| r["kind"] == "hook")
        .collect()
}

#[test]
fn a_denied_send_makes_no_request_to_the_model_and_is_recorded() {
    let server = MockServer::start(Script::new(vec![Reply::text(["hello"])]));
    let (env, mut s) = session(&server, &["hook_pass", "hook_deny_all"]);
    let msg = s.err(json!({"action": "send", "content": "hi", "model": "mock/m"}));
    assert!(
        msg.starts_with("Denied by hook hook_deny_all: policy says no"),
        "{msg}"
    );
    assert!(server.requests().is_empty(), "the model was asked");
    s.shutdown();
    let records = verified_hook_records(&env.home(), &env.proj());
    // Hooks are asked in name order: hook_deny_all denied first, so hook_pass was never asked
    // (a pass could not have overridden the deny anyway).
    let at_send: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r["point"] == "pre_send")
        .map(|r| {
            (
                r["component"].as_str().unwrap(),
                r["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(at_send, vec![("hook_deny_all", "deny")], "{records:?}");
    let deny = records.iter().find(|r| r["decision"] == "deny").unwrap();
    assert_eq!(deny["ok"], false);
    assert_eq!(deny["reason"], "policy says no");
    assert_eq!(deny["component_sha256"].as_str().map(str::len), Some(64));
}

#[test]
fn a_passing_hook_lets_the_send_through() {
    let server = MockServer::start(Script::new(vec![Reply::text(["hello"])]));
    let (env, mut s) = session(&server, &["hook_pass"]);
    let (end, _) = send_agent(&mut s, "hi");
    assert_eq!(end["type"], "done", "{end}");
    assert_eq!(server.requests().len(), 1);
    s.shutdown();
    let records = verified_hook_records(&env.home(), &env.proj());
    assert!(
        records
            .iter()
            .any(|r| r["point"] == "pre_send" && r["decision"] == "pass" && r["ok"] == true),
        "{records:?}"
    );
}

#[test]
fn no_decision_finds_what_an_earlier_one_left_in_the_hook_s_memory() {
    // hook_once marks its memory when it decides and denies when it finds the mark: every decision
    // of a session (a fresh instance each, in reused pool slots) must pass.
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls((0..3).map(|i| {
            let args = json!({"file_path": "a.txt", "start_line": i + 1}).to_string();
            ToolCall::new(i, format!("c{i}"), "read_file", args)
        })),
        Reply::text(["read"]),
        Reply::text(["again"]),
    ]));
    let env = Env::new();
    env.write_local("a.txt", "alpha\nalpha\nalpha\n");
    let (env, mut s) = session_in(env, &server, &["hook_once"], json!({}));
    let (end, _) = send_agent(&mut s, "read it three times");
    assert_eq!(end["type"], "done", "{end}");
    for i in 0..3 {
        let result = tool_result(&server, &format!("c{i}"));
        assert!(result.contains("alpha"), "{result}");
    }
    let (end, _) = send_agent(&mut s, "once more");
    assert_eq!(end["type"], "done", "{end}");
    s.shutdown();
    let records = verified_hook_records(&env.home(), &env.proj());
    // pre_send, three pre_tool_call and three post_tool_call, pre_send.
    assert_eq!(records.len(), 8, "{records:?}");
    assert!(
        records.iter().all(|r| r["decision"] == "pass"),
        "{records:?}"
    );
}

#[test]
fn a_denied_tool_call_never_runs_and_the_model_reads_why() {
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([
            ToolCall::new(
                0,
                "c1",
                "write_file",
                r#"{"path": "migrations/001.sql", "content": "DROP TABLE users;\n"}"#,
            ),
            ToolCall::new(
                1,
                "c2",
                "write_file",
                r#"{"path": "src/ok.txt", "content": "fine\n"}"#,
            ),
        ]),
        Reply::text(["done"]),
    ]));
    let (env, mut s) = session(&server, &["deny_migrations"]);
    let (end, _) = send_agent(&mut s, "write");
    assert_ne!(end["type"], "error", "{end}");
    let denied = tool_result(&server, "c1");
    assert!(
        denied.contains("denied by hook deny_migrations: migrations/001.sql is under migrations/"),
        "{denied}"
    );
    assert!(!tool_result(&server, "c2").contains("denied"));
    // The write never ran: nothing of it was staged or proposed; the other one was.
    let id = env.index()[0]["id"].as_str().unwrap().to_string();
    assert!(!env.output_path(&id, "migrations/001.sql").exists());
    assert_eq!(
        std::fs::read_to_string(env.output_path(&id, "src/ok.txt")).unwrap(),
        "fine\n"
    );
    assert!(!env.proj().join("migrations").exists());
    s.shutdown();
}

#[test]
fn a_post_tool_call_deny_replaces_the_result() {
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "c1",
            "read_file",
            r#"{"file_path": "notes.txt"}"#,
        )]),
        Reply::text(["done"]),
    ]));
    let (env, mut s) = session(&server, &["hook_withhold"]);
    env.write_local("notes.txt", "the SECRET is 1234\n");
    let (end, _) = send_agent(&mut s, "read");
    assert_eq!(end["type"], "done", "{end}");
    let result = tool_result(&server, "c1");
    assert!(
        result.contains("denied by hook hook_withhold: the result holds a secret"),
        "{result}"
    );
    assert!(!result.contains("1234"), "{result}");
    s.shutdown();
}

#[test]
fn a_denied_apply_leaves_the_file_untouched() {
    let server = MockServer::start(Script::new(vec![]));
    let (env, mut s) = session(&server, &["deny_migrations"]);
    let original = b"CREATE TABLE users (id int);\r\n\x00binary-ish tail";
    std::fs::create_dir_all(env.proj().join("migrations")).unwrap();
    std::fs::write(env.proj().join("migrations/001.sql"), original).unwrap();
    let id = env.index()[0]["id"].as_str().unwrap().to_string();
    env.write_output(&id, "migrations/001.sql", "DROP TABLE users;\n");
    env.write_output(&id, "ok.txt", "fine\n");
    let msg = s.err(json!({"action": "apply_file", "path": "migrations/001.sql"}));
    assert!(
        msg.starts_with("Denied by hook deny_migrations: migrations/001.sql is under migrations/"),
        "{msg}"
    );
    let msg = s.err(
        json!({"action": "apply_file_as", "path": "ok.txt", "destination": "migrations/002.sql"}),
    );
    assert!(msg.starts_with("Denied by hook deny_migrations:"), "{msg}");
    let msg = s.err(json!({"action": "apply_hunks", "path": "migrations/001.sql", "hunk_ids": ["h1"], "base_hash": "x"}));
    assert!(msg.starts_with("Denied by hook deny_migrations:"), "{msg}");
    assert_eq!(
        std::fs::read(env.proj().join("migrations/001.sql")).unwrap(),
        original
    );
    assert!(!env.proj().join("migrations/002.sql").exists());
    assert!(env.output_path(&id, "migrations/001.sql").exists());
    // Elsewhere the hook passes and the apply goes ahead.
    s.ok(json!({"action": "apply_file", "path": "ok.txt"}));
    assert_eq!(
        std::fs::read_to_string(env.proj().join("ok.txt")).unwrap(),
        "fine\n"
    );
    s.shutdown();
}

#[test]
fn a_hook_that_loops_runs_out_of_memory_or_traps_denies() {
    for (name, why) in [
        ("hook_loop", "time"),
        ("hook_memory", "memory"),
        ("hook_trap", "trap"),
    ] {
        let server = MockServer::start(Script::new(vec![Reply::text(["hello"])]));
        let (env, mut s) = session(&server, &[name]);
        let msg = s.err(json!({"action": "send", "content": "hi", "model": "mock/m"}));
        assert!(
            msg.starts_with(&format!("Denied by hook {name}: the hook failed (")),
            "{msg}"
        );
        assert!(msg.to_lowercase().contains(why), "{name}: {msg}");
        assert!(server.requests().is_empty(), "{name}: the model was asked");
        // The session goes on serving.
        s.ok(json!({"action": "chat_list"}));
        s.shutdown();
        let records = verified_hook_records(&env.home(), &env.proj());
        assert!(
            records
                .iter()
                .any(|r| r["component"] == name && r["decision"] == "deny"),
            "{records:?}"
        );
    }
}

#[test]
fn a_hook_without_a_grant_cannot_read_the_project() {
    let server = MockServer::start(Script::new(vec![Reply::text(["hello"])]));
    let (env, mut s) = session(&server, &["hook_read_project"]);
    env.write_local("secret.txt", "TOPSECRET-4242\n");
    let msg = s.err(json!({"action": "send", "content": "hi", "model": "mock/m"}));
    assert!(
        msg.starts_with("Denied by hook hook_read_project: could not read the project:"),
        "{msg}"
    );
    assert!(!msg.contains("TOPSECRET"), "{msg}");
    assert!(server.requests().is_empty());
    let stderr = s.stderr_text();
    s.shutdown();
    assert!(!stderr.contains("TOPSECRET"), "{stderr}");
    let log = std::fs::read_to_string(env.home().join(".bb7/audit/log.jsonl")).unwrap();
    assert!(!log.contains("TOPSECRET"));
    assert!(log.contains("could not read the project"), "{log}");
}

#[test]
fn removing_a_hook_changes_tools_audit_check_and_lists_show_hooks() {
    let server = MockServer::start(Script::new(vec![]));
    let (env, mut s) = session(&server, &["deny_migrations"]);
    let tools = s.ok(json!({"action": "tools_list"}));
    let h = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["component"] == "deny_migrations")
        .cloned()
        .unwrap_or_else(|| panic!("{tools}"));
    assert_eq!(h["kind"], "hook", "{h}");
    assert_eq!(h["hook"], json!(["pre_tool_call", "pre_apply"]));
    assert_eq!(h["name"], "deny_migrations");
    s.shutdown();
    let (home, proj) = (env.home(), env.proj());
    let list = ok(&bb7(&home, &proj, &["tools", "list"]));
    assert!(
        list.contains("hook bb7:hook/hook@0.1.0 at pre_tool_call, pre_apply"),
        "{list}"
    );
    assert!(
        !list.contains("deny_migrations__"),
        "a hook is no tool: {list}"
    );
    let audit: Value =
        serde_json::from_str(&ok(&bb7(&home, &proj, &["tools", "audit", "--json"]))).unwrap();
    let third = audit["third_party"].as_array().unwrap();
    assert_eq!(third[0]["kind"], "hook");
    ok(&bb7(&home, &proj, &["tools", "audit", "--check"]));
    // Removed elsewhere: the project's lockfile still pins it, and the check says so.
    ok(&bb7(
        &home,
        &env.outside(),
        &["tools", "remove", "deny_migrations"],
    ));
    let check = bb7(&home, &proj, &["tools", "audit", "--check"]);
    assert_eq!(check.status.code(), Some(1), "{}", common::stdout(&check));
    assert!(common::stdout(&check).contains("deny_migrations"));
}

#[test]
fn apply_file_as_is_checked_at_the_normalised_destination() {
    let server = MockServer::start(Script::new(vec![]));
    let (env, mut s) = session(&server, &["deny_migrations"]);
    let id = env.index()[0]["id"].as_str().unwrap().to_string();
    env.write_output(&id, "ok.txt", "DROP TABLE users;\n");
    let proj = env.proj_str();
    for dest in [
        format!("{proj}/./migrations/002.sql"),
        format!("{proj}/x/../migrations/002.sql"),
        format!("{proj}/migrations/002.sql"),
        "./migrations/002.sql".to_string(),
        "migrations/002.sql".to_string(),
    ] {
        let msg = s.err(json!({"action": "apply_file_as", "path": "ok.txt", "destination": dest}));
        assert!(
            msg.starts_with(
                "Denied by hook deny_migrations: migrations/002.sql is under migrations/"
            ),
            "{dest}: {msg}"
        );
        assert!(!env.proj().join("migrations").exists(), "{dest}");
    }
    s.shutdown();
}

#[test]
fn a_write_through_dot_dot_or_an_absolute_path_is_denied_at_its_resolved_path() {
    let env = Env::new();
    let proj = env.proj_str();
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([
            ToolCall::new(
                0,
                "c1",
                "write_file",
                json!({"path": format!("{proj}/src/../migrations/001.sql"), "content": "DROP;\n"})
                    .to_string(),
            ),
            ToolCall::new(
                1,
                "c2",
                "write_file",
                r#"{"path": "./migrations/003.sql", "content": "DROP;\n"}"#,
            ),
        ]),
        Reply::text(["done"]),
    ]));
    let (env, mut s) = session_in(env, &server, &["deny_migrations"], json!({}));
    let (end, _) = send_agent(&mut s, "write");
    assert_ne!(end["type"], "error", "{end}");
    for id in ["c1", "c2"] {
        let denied = tool_result(&server, id);
        assert!(
            denied.contains("denied by hook deny_migrations:")
                && denied.contains("is under migrations/"),
            "{id}: {denied}"
        );
    }
    let chat = env.index()[0]["id"].as_str().unwrap().to_string();
    assert!(!env.output_path(&chat, "migrations/001.sql").exists());
    assert!(!env.output_path(&chat, "migrations/003.sql").exists());
    s.shutdown();
}

#[test]
fn a_secret_past_64_kib_of_a_result_is_still_withheld() {
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "c1",
            "read_file",
            r#"{"file_path": "big.txt"}"#,
        )]),
        Reply::text(["done"]),
    ]));
    let (env, mut s) = session_with(
        &server,
        &["hook_withhold"],
        json!({"max_read_bytes_default": 262144, "max_read_lines_default": 5000}),
    );
    let mut text =
        "padding padding padding padding padding padding padding padding padding\n".repeat(1000);
    assert!(text.len() > 70_000);
    text.push_str("the SECRET is 1234\n");
    env.write_local("big.txt", &text);
    let (end, _) = send_agent(&mut s, "read");
    assert_eq!(end["type"], "done", "{end}");
    let result = tool_result(&server, "c1");
    assert!(
        result.contains("denied by hook hook_withhold: the result holds a secret"),
        "{}",
        &result[..result.len().min(300)]
    );
    assert!(!result.contains("1234"));
    s.shutdown();
}

#[test]
fn an_enabled_hook_without_a_grant_denies_and_says_what_to_do() {
    let server = MockServer::start(Script::new(vec![]));
    let (env, mut s) = session(&server, &[]);
    let wasm = hook("deny_migrations");
    ok(&bb7(
        &env.home(),
        &env.proj(),
        &["tools", "add", wasm.to_str().unwrap(), "--project"],
    ));
    let id = env.index()[0]["id"].as_str().unwrap().to_string();
    env.write_output(&id, "ok.txt", "fine\n");
    let msg = s.err(json!({"action": "apply_file", "path": "ok.txt"}));
    assert!(
        msg.starts_with("Denied by hook deny_migrations: ")
            && msg.contains("not granted")
            && msg.contains("bb7 tools grant deny_migrations"),
        "{msg}"
    );
    assert!(!env.proj().join("ok.txt").exists());
    ok(&bb7(
        &env.home(),
        &env.proj(),
        &["tools", "grant", "deny_migrations", "--all"],
    ));
    s.ok(json!({"action": "apply_file", "path": "ok.txt"}));
    assert_eq!(
        std::fs::read_to_string(env.proj().join("ok.txt")).unwrap(),
        "fine\n"
    );
    s.shutdown();
}

#[test]
fn the_lockfile_pins_a_hook_s_points_and_the_check_names_a_change() {
    let server = MockServer::start(Script::new(vec![]));
    let (env, s) = session(&server, &["deny_migrations"]);
    s.shutdown();
    let (home, proj) = (env.home(), env.proj());
    let lock_path = proj.join(".bb7/tools.lock");
    let lock = std::fs::read_to_string(&lock_path).unwrap();
    let pinned = "hook = [\n    \"pre_tool_call\",\n    \"pre_apply\",\n]";
    assert!(lock.contains(pinned), "{lock}");
    ok(&bb7(&home, &proj, &["tools", "audit", "--check"]));
    // Approved when it was asked at pre_tool_call only: the added point is a difference.
    std::fs::write(
        &lock_path,
        lock.replace(pinned, "hook = [\"pre_tool_call\"]"),
    )
    .unwrap();
    let check = bb7(&home, &proj, &["tools", "audit", "--check"]);
    assert_eq!(check.status.code(), Some(1), "{}", common::stdout(&check));
    assert!(
        common::stdout(&check).contains(
            "deny_migrations: hook points changed: locked pre_tool_call, now pre_tool_call, pre_apply"
        ),
        "{}",
        common::stdout(&check)
    );
}

/// Plan mode's `propose_plan` is a tool call like any other: a `pre_tool_call` hook that denies it
/// stops it — no plan is recorded or proposed, and the model reads why.
#[test]
fn a_denied_propose_plan_records_no_plan() {
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "p1",
            "propose_plan",
            json!({"summary": "Split the greeting", "steps": [{"title": "Split it", "files": ["src/a.rs"]}]})
                .to_string(),
        )]),
        Reply::text(["I will not plan."]),
    ]));
    let (env, mut s) = session(&server, &["hook_deny_plan"]);
    let (end, evs) = send_in(&mut s, "plan it", "plan");
    assert_eq!(end["type"], "done", "{end}");
    assert!(
        !evs.iter().any(|e| e["kind"] == "plan.proposed"),
        "a denied plan was proposed: {evs:?}"
    );
    let read = tool_result(&server, "p1");
    assert!(
        read.contains("denied by hook hook_deny_plan: plans are made by people here"),
        "{read}"
    );
    let chat = s.ok(json!({"action": "chat_get"}));
    assert!(
        chat["plans"].as_array().is_none_or(|p| p.is_empty()),
        "{chat}"
    );
    s.shutdown();
    let records = verified_hook_records(&env.home(), &env.proj());
    assert!(
        records.iter().any(|r| r["component"] == "hook_deny_plan"
            && r["point"] == "pre_tool_call"
            && r["decision"] == "deny"),
        "{records:?}"
    );
}

/// `bb7 tools call --project` is hooked as agent mode and `bb7 mcp` are: a `pre_tool_call` deny
/// never runs the tool (exit 1, the reason on stderr), a `post_tool_call` deny withholds its
/// result; without `--project` no hook is asked.
#[test]
fn tools_call_with_a_project_asks_its_hooks() {
    let server = MockServer::start(Script::new(vec![]));
    let (env, s) = session(&server, &["hook_deny_all"]);
    s.shutdown();
    env.write_local("a.txt", "hello\n");
    let proj = env.proj_str();
    let args = [
        "tools",
        "call",
        "read_file",
        "--dir",
        &proj,
        "--args",
        r#"{"file_path":"a.txt"}"#,
    ];
    let with_project = |extra: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend_from_slice(extra);
        bb7(&env.home(), &env.proj(), &all)
    };
    let denied = with_project(&["--project", &proj]);
    assert_eq!(denied.status.code(), Some(1), "{}", common::stderr(&denied));
    assert!(
        common::stdout(&denied).is_empty(),
        "{}",
        common::stdout(&denied)
    );
    assert!(
        common::stderr(&denied).contains("denied by hook hook_deny_all: policy says no"),
        "{}",
        common::stderr(&denied)
    );
    // Without --project: no project, no hooks.
    assert!(ok(&with_project(&[])).contains("hello"));
    let records = verified_hook_records(&env.home(), &env.proj());
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["point"] == "pre_tool_call")
        .collect();
    assert_eq!(calls.len(), 1, "{records:?}");
    assert_eq!(calls[0]["actor"], "user");
    assert_eq!(calls[0]["decision"], "deny");

    // post_tool_call: a result holding a secret is withheld.
    let server = MockServer::start(Script::new(vec![]));
    let (env, s) = session(&server, &["hook_withhold"]);
    s.shutdown();
    env.write_local("s.txt", "the SECRET is 42\n");
    let proj = env.proj_str();
    let o = bb7(
        &env.home(),
        &env.proj(),
        &[
            "tools",
            "call",
            "read_file",
            "--dir",
            &proj,
            "--args",
            r#"{"file_path":"s.txt"}"#,
            "--project",
            &proj,
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
    assert!(!common::stdout(&o).contains("42"), "{}", common::stdout(&o));
    assert!(
        common::stderr(&o).contains("denied by hook hook_withhold: the result holds a secret"),
        "{}",
        common::stderr(&o)
    );
}
