//! The toolchain examples (doc/components.md, "Other languages"), as an author would use them:
//! `scripts/toolchains` builds them with the pinned toolchains and sets `BB7_TOOLCHAIN_EXAMPLES`
//! to their `dist/` directory; each is installed (`tools add`), granted, called with `tools call`
//! and through a model reply in agent mode (mock server). Under `CI=true` a missing build fails the
//! test; elsewhere it is reported and the test returns.
//!
//! The Python example's interpreter imports `wasi:sockets/*` without using it: it installs without a
//! `network` request, its sockets linked with every operation denied.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::*;
use serde_json::{Value, json};

/// `<dist>/<example>` when the examples were built; `None` (outside CI) when they were not.
fn example(name: &str) -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let dist = std::env::var_os("BB7_TOOLCHAIN_EXAMPLES")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| common::wasm::repo_root().join("examples/tool-components/dist"));
    let dir = dist.join(name);
    let built = std::fs::read_dir(&dir).is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "wasm")))
    });
    if built {
        return Some(dir);
    }
    assert!(
        !ci,
        "{} was not built: run scripts/toolchains (scripts/test does)",
        dir.display()
    );
    println!(
        "{} was not built (run scripts/toolchains); skipped",
        dir.display()
    );
    None
}

use common::tools::{ok, p};

fn tools(env: &Env, args: &[&str]) -> Output {
    common::tools::run(&env.home(), &env.proj(), common::shared_cache(), args)
}

/// Installs, grants and calls the example `dir` (component `name`, tool `read_text`) by hand and in
/// an agent reply; it reads a project file and cannot read `.env`.
fn add_grant_call(dir: &Path, name: &str) {
    let function = format!("{name}__read_text");
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([ToolCall::new(0, "c1", &function, r#"{"path":"notes.txt"}"#)]),
        Reply::text(["read"]),
    ]));
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url()}).to_string(),
    );
    env.write_local("notes.txt", "hello from the project\n");
    env.write_local(".env", "SECRET=hunter2\n");

    // The host serves the project from before the install (as the plugin's would).
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));

    let out = ok(&tools(&env, &["add", p(dir), "--project"]));
    assert!(out.contains(&function), "{out}");
    ok(&tools(&env, &["grant", name, "--all"]));

    let out = ok(&tools(
        &env,
        &[
            "call",
            name,
            "--dir",
            &env.proj_str(),
            "--args",
            r#"{"path":"notes.txt"}"#,
        ],
    ));
    let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["text"], "hello from the project\n", "{v}");
    // The error kind comes through: .env is not in the project-read view.
    let o = tools(
        &env,
        &[
            "call",
            name,
            "--dir",
            &env.proj_str(),
            "--args",
            r#"{"path":".env"}"#,
        ],
    );
    let all = format!("{}{}", common::stdout(&o), common::stderr(&o));
    assert!(!o.status.success(), "{all}");
    assert!(!all.contains("hunter2"), "SECRET LEAKED: {all}");
    assert!(
        all.contains("not-found") || all.contains("not found"),
        "{all}"
    );

    // Agent mode: the model calls it and gets the file's text.
    s.ok(json!({"action": "chat_new", "name": "t"}));
    let rid = s.next_id();
    s.send(&json!({"action": "send", "content": "read notes", "model": "mock/agent", "mode": "agent", "request_id": rid}));
    let want = json!(rid);
    loop {
        let v = s.recv_where_for("send event", Duration::from_secs(120), |v| {
            v.get("request_id") == Some(&want)
        });
        if matches!(v["type"].as_str(), Some("done" | "diff_error" | "error")) {
            assert_eq!(v["type"], "done", "{v}");
            break;
        }
    }
    let bodies = server.requests();
    let second = bodies
        .get(1)
        .expect("a second model request with the tool result");
    let body = &second.body;
    let result = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c1")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result in {body}"))
        .to_string();
    assert!(result.contains("hello from the project"), "{result}");
}

#[test]
fn the_javascript_example_installs_is_granted_and_reads_a_project_file() {
    if let Some(dir) = example("js-read") {
        add_grant_call(&dir, "jsread");
    }
}

#[test]
fn the_python_example_installs_is_granted_and_reads_a_project_file() {
    if let Some(dir) = example("python-read") {
        add_grant_call(&dir, "pyread");
    }
}
