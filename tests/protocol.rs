//! End-to-end tests of the stdio protocol (PROTOCOL.md, PROTOCOL-ADDENDUM.md, SPEC.md) through the
//! real `bb7` binary: every action's success and error paths, the files each leaves in `.bb7/`, the
//! wire rules, bad input, path traversal in every path field, symlinks planted in `.bb7/`, the
//! initialisation state machine, global chats, and two processes sharing one project.
//!
//! There is no model here: output files are made the way the model makes them, by writing
//! `{chat dir}/output/{path}`, and history with user messages (for fork/edit) is appended to
//! chat.json while no server runs, with each message's `context_snapshot` taken from the chat's
//! `context_files`, exactly as a send records it.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use common::proto::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A fresh project: `bb7_init` then `init`.
fn start() -> (Env, Bb7) {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    (env, s)
}

/// A fresh project with one active chat.
fn start_chat() -> (Env, Bb7, String) {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "test chat");
    (env, s, id)
}

fn new_chat(s: &mut Bb7, name: &str) -> String {
    let r = s.ok(json!({"action": "chat_new", "name": name}));
    chat_id_of(&r)
}

fn chat_id_of(r: &Value) -> String {
    assert_eq!(r["type"], "ok", "{r}");
    let id = r["id"]
        .as_str()
        .unwrap_or_else(|| panic!("the reply must carry the new chat's id: {r}"))
        .to_string();
    assert!(
        !id.is_empty() && !id.contains('/') && id != "." && id != "..",
        "a chat id must be a plain directory name: {id:?}"
    );
    id
}

fn select(s: &mut Bb7, id: &str) {
    s.ok(json!({"action": "chat_select", "id": id}));
}

fn add(s: &mut Bb7, path: &str, content: &str) {
    s.ok(json!({"action": "context_add", "path": path, "content": content}));
}

fn add_section(s: &mut Bb7, path: &str, content: &str, start: u64, end: u64) {
    s.ok(
        json!({"action": "context_add_section", "path": path, "content": content,
        "start_line": start, "end_line": end}),
    );
}

fn ctx_list(s: &mut Bb7) -> Vec<Value> {
    let r = s.ok(json!({"action": "context_list"}));
    assert_eq!(r["type"], "context_list", "{r}");
    list(&r["files"])
}

fn is_section(e: &Value) -> bool {
    e.get("start_line").and_then(Value::as_u64).unwrap_or(0) > 0
}

/// The full-file entry for `path` in a context list (or context_files).
fn full(files: &[Value], path: &str) -> Option<Value> {
    files
        .iter()
        .find(|e| e["path"] == path && !is_section(e))
        .cloned()
}

fn section(files: &[Value], path: &str, start: u64, end: u64) -> Option<Value> {
    files
        .iter()
        .find(|e| e["path"] == path && e["start_line"] == start && e["end_line"] == end)
        .cloned()
}

fn context_file(s: &mut Bb7, path: &str) -> String {
    let r = s.ok(json!({"action": "get_context_file", "path": path}));
    assert_eq!(r["type"], "file_content", "{r}");
    assert_eq!(r["path"], path, "{r}");
    r["content"].as_str().expect("content").to_string()
}

fn statuses(s: &mut Bb7) -> Vec<Value> {
    let r = s.ok(json!({"action": "get_file_statuses"}));
    assert_eq!(r["type"], "file_statuses", "{r}");
    list(&r["files"])
}

fn chat_list(s: &mut Bb7, global: bool) -> Vec<Value> {
    let r = s.ok(json!({"action": "chat_list", "global": global}));
    assert_eq!(r["type"], "chat_list", "{r}");
    list(&r["chats"])
}

fn by_id(entries: &[Value], id: &str) -> Option<Value> {
    entries.iter().find(|e| e["id"] == id).cloned()
}

fn lock_of(chat_dir: &Path) -> Option<String> {
    fs::read_to_string(chat_dir.join("lock"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn active(s: &mut Bb7) -> Value {
    let r = s.ok(json!({"action": "chat_active"}));
    assert_eq!(r["type"], "chat_active", "{r}");
    r
}

fn user_texts(chat: &Value) -> Vec<String> {
    list(&chat["messages"])
        .iter()
        .filter(|m| m["role"] == "user")
        .map(msg_text)
        .collect()
}

fn all_texts(chat: &Value) -> String {
    list(&chat["messages"])
        .iter()
        .map(msg_text)
        .collect::<Vec<_>>()
        .join("\n")
}

fn num(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} must be a non-negative integer: {v}"))
}

/// Appends a user message (with the context snapshot a send records) and an assistant answer to
/// chat.json; returns the index of the user message. No server may be running.
fn append_exchange(env: &Env, id: &str, question: &str, answer: &str) -> usize {
    let mut chat = env.chat_json(id);
    let snapshot: Vec<Value> = list(&chat["context_files"])
        .iter()
        .map(|cf| {
            let mut r = json!({"path": cf["path"], "file_id": cf["version"]});
            if is_section(cf) {
                r["start_line"] = cf["start_line"].clone();
                r["end_line"] = cf["end_line"].clone();
            }
            r
        })
        .collect();
    let model = chat["model"].clone();
    let msgs = chat["messages"].as_array_mut().unwrap();
    let at = msgs.len();
    msgs.push(
        json!({"role": "user", "parts": [{"type": "text", "content": question}],
        "model": model, "timestamp": "2025-01-19T22:01:00Z", "context_snapshot": snapshot}),
    );
    msgs.push(
        json!({"role": "assistant", "model": model, "timestamp": "2025-01-19T22:01:05Z",
        "parts": [{"type": "text", "content": answer}]}),
    );
    env.put_chat_json(id, &chat);
    at
}

const SECRET: &str = "TOPSECRET-must-never-leak\n";

/// Sends `v`, which must be refused with an error that leaks nothing of SECRET.
fn refused(s: &mut Bb7, v: Value) {
    let r = s.req(v.clone());
    assert_eq!(r["type"], "error", "{} must be refused, got {r}", brief(&v));
    assert!(
        !r.to_string().contains("TOPSECRET"),
        "the reply to {} leaks a file from outside: {r}",
        brief(&v)
    );
}

/// Sends `v`, which the reference backend answers without an error when there is nothing to do
/// (`sync_context` of a file not in context, `diff_local_done` with no output to merge): it must be
/// refused or be a no-op (`ok`, outcome `none` where there is one), and leak nothing of SECRET.
fn refused_or_noop(s: &mut Bb7, v: Value) {
    let r = s.req(v.clone());
    let noop = r["type"] == "ok" && r.get("outcome").is_none_or(|o| o == "none");
    assert!(
        r["type"] == "error" || noop,
        "{} must be refused or a no-op, got {r}",
        brief(&v)
    );
    assert!(
        !r.to_string().contains("TOPSECRET"),
        "the reply to {} leaks a file from outside: {r}",
        brief(&v)
    );
}

fn no_leak(r: &Value, what: &str) {
    assert!(
        !r.to_string().contains("TOPSECRET"),
        "{what} leaks a file from outside: {r}"
    );
}

// ---------------------------------------------------------------------------------------------
// Wire rules
// ---------------------------------------------------------------------------------------------

#[test]
fn wire_numeric_request_id_is_echoed_as_a_string() {
    let env = Env::new();
    let mut s = env.spawn();
    s.send_raw(b"{\"request_id\":42,\"action\":\"ping\"}\n");
    let r = s.recv_where("the reply to request 42", |v| v.get("request_id").is_some());
    assert_eq!(r["request_id"], json!("42"), "{r}");
    assert_ne!(r["type"], "error", "{r}");

    s.send_raw(b"{\"request_id\":7,\"action\":\"no_such_action\"}\n");
    let r = s.recv_where("the reply to request 7", |v| v.get("request_id").is_some());
    assert_eq!(r["request_id"], json!("7"), "{r}");
    assert_eq!(r["type"], "error");
    assert_eq!(r["message"], "Unknown action: no_such_action");

    let r = s.req(json!({"request_id": "abc-1", "action": "ping"}));
    assert_eq!(r["request_id"], "abc-1");
    s.shutdown();
}

#[test]
fn wire_request_without_id_gets_reply_without_id() {
    let env = Env::new();
    let mut s = env.spawn();
    s.send(&json!({"action": "ping"}));
    let r = s.recv_any();
    assert!(r.get("request_id").is_none(), "{r}");
    assert_ne!(r["type"], "error", "{r}");
    s.send(&json!({"action": "frobnicate"}));
    let r = s.recv_any();
    assert!(r.get("request_id").is_none(), "{r}");
    assert_eq!(r["type"], "error");
    assert_eq!(r["message"], "Unknown action: frobnicate");
    s.shutdown();
}

#[test]
fn wire_unknown_action_is_named_in_the_error() {
    let (_env, mut s) = start();
    s.err_is(
        json!({"action": "frobnicate", "path": "x"}),
        "Unknown action: frobnicate",
    );
    s.ok(json!({"action": "ping"}));
    s.shutdown();
}

#[test]
fn wire_lines_that_are_not_json_get_invalid_json_and_serving_continues() {
    let (_env, mut s, _id) = start_chat();
    for line in [
        "this is not json",
        "{\"action\":",
        "{\"request_id\":\"x1\",\"action\":\"ping\"",
        "{'action': 'ping'}",
        "{\"request_id\":\"x2\",\"action\":\"ping\",}",
    ] {
        s.send_raw(format!("{line}\n").as_bytes());
        let r = s.recv_unnumbered(&format!("the error for {line:?}"));
        assert_eq!(
            r,
            json!({"type": "error", "message": "Invalid JSON"}),
            "for {line:?}"
        );
        s.ok(json!({"action": "ping"}));
    }
    // Valid JSON that is not a request object is refused too.
    for line in ["[1,2,3]", "\"ping\"", "42", "null", "{}"] {
        s.send_raw(format!("{line}\n").as_bytes());
        let r = s.recv_unnumbered(&format!("the error for {line:?}"));
        assert_eq!(r["type"], "error", "for {line:?}: {r}");
        s.ok(json!({"action": "ping"}));
    }
    s.shutdown_noisy();
}

#[test]
fn wire_missing_required_fields_are_named() {
    let (env, mut s, id) = start_chat();
    env.write_local("a.txt", "a\n");
    add(&mut s, "a.txt", "a\n");
    let cases = [
        (json!({"action": "chat_select"}), "id"),
        (json!({"action": "chat_delete"}), "id"),
        (json!({"action": "chat_rename", "name": "x"}), "id"),
        (json!({"action": "chat_rename", "id": id}), "name"),
        (json!({"action": "context_add", "content": "x"}), "path"),
        (
            json!({"action": "context_add_section", "content": "x", "start_line": 1, "end_line": 1}),
            "path",
        ),
        (json!({"action": "context_update", "content": "x"}), "path"),
        (json!({"action": "context_remove"}), "path"),
        (
            json!({"action": "context_remove_section", "start_line": 1, "end_line": 1}),
            "path",
        ),
        (
            json!({"action": "context_set_readonly", "readonly": true}),
            "path",
        ),
        (
            json!({"action": "context_set_readonly", "path": "a.txt"}),
            "readonly",
        ),
        (json!({"action": "get_context_file"}), "path"),
        (json!({"action": "get_output_file"}), "path"),
        (json!({"action": "get_diff_paths"}), "path"),
        (json!({"action": "apply_file"}), "path"),
        (
            json!({"action": "apply_file_as", "destination": "b.txt"}),
            "path",
        ),
        (
            json!({"action": "apply_file_as", "path": "a.txt"}),
            "destination",
        ),
        (json!({"action": "output_delete"}), "path"),
        (json!({"action": "sync_context"}), "path"),
        (json!({"action": "diff_local_done"}), "path"),
        (
            json!({"action": "fork_chat", "fork_message_index": 0}),
            "chat_id",
        ),
        (
            json!({"action": "fork_chat", "chat_id": id}),
            "fork_message_index",
        ),
        (json!({"action": "chat_new_with_context"}), "source_chat_id"),
        (
            json!({"action": "chat_edit", "chat_id": id, "content": "x"}),
            "message_index",
        ),
        (json!({"action": "bb7_init"}), "project_root"),
        (json!({"action": "prepare_instructions"}), "level"),
        (json!({"action": "chat_force_unlock"}), "id"),
        (json!({"action": "chat_move", "to": "global"}), "id"),
    ];
    for (req, field) in cases {
        s.err_is(req, &format!("Missing required field: {field}"));
    }
    // Nothing changed and the server still serves.
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(env.chat_dir(&id).join("chat.json").exists());
    s.shutdown();
}

#[test]
fn wire_wrong_field_types_are_errors_and_change_nothing() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "a\n");
    s.ok(json!({"action": "save_draft", "draft": "keep me"}));
    for req in [
        json!({"action": "chat_select", "id": 123}),
        json!({"action": "chat_rename", "id": id, "name": ["x"]}),
        json!({"action": "context_add", "path": ["w.txt"], "content": "x"}),
        json!({"action": "context_add", "path": "w.txt", "content": 5}),
        json!({"action": "context_add_section", "path": "a.txt", "content": "a\n",
            "start_line": "1", "end_line": 1}),
        json!({"action": "context_set_readonly", "path": "a.txt", "readonly": "yes"}),
        json!({"action": "chat_edit", "chat_id": id, "message_index": "0", "content": "x"}),
        json!({"action": "save_draft", "draft": 5}),
        json!({"action": "estimate_text_tokens", "texts": "abc"}),
        json!({"action": 5}),
    ] {
        s.err(req);
    }
    let chat = env.chat_json(&id);
    assert_eq!(draft_of(&chat), "keep me");
    assert_eq!(chat["name"], "test chat");
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["readonly"], false);
    s.shutdown_noisy();
}

#[test]
fn wire_oversized_line_gets_an_error_and_loses_no_state() {
    let (env, mut s, id) = start_chat();
    s.ok(json!({"action": "save_draft", "draft": "small"}));
    let mut line = br#"{"request_id":"big","action":"save_draft","draft":""#.to_vec();
    line.extend(std::iter::repeat_n(b'x', 20 * 1024 * 1024));
    line.extend_from_slice(b"\"}\n");
    s.send_raw(&line);
    let r = s.recv_where_for(
        "the reply to the 20 MiB line",
        std::time::Duration::from_secs(30),
        |v| v.get("request_id").is_none() || v["request_id"] == "big",
    );
    assert_eq!(
        r["type"],
        "error",
        "a 20 MiB line must be refused: {}",
        brief(&r)
    );
    s.ok(json!({"action": "ping"}));
    let chat = s.ok(json!({"action": "chat_get"}));
    assert_eq!(chat["draft"], "small");
    assert_eq!(draft_of(&env.chat_json(&id)), "small");
    s.shutdown_noisy();
}

#[test]
fn wire_invalid_utf8_gets_an_error_and_serving_continues() {
    let (env, mut s, id) = start_chat();
    s.ok(json!({"action": "save_draft", "draft": "before"}));
    s.send_raw(b"{\"request_id\":\"u8\",\"action\":\"save_draft\",\"draft\":\"bad \xff\xfe\"}\n");
    let r = s.recv_where("the reply to the invalid UTF-8 line", |v| {
        v.get("request_id").is_none() || v["request_id"] == "u8"
    });
    assert_eq!(r["type"], "error", "{r}");
    s.send_raw(b"\xff\xfe\xfd\x00\x01\n");
    let r = s.recv_unnumbered("the reply to a line of garbage bytes");
    assert_eq!(r["type"], "error", "{r}");
    s.ok(json!({"action": "ping"}));
    assert_eq!(draft_of(&env.chat_json(&id)), "before");
    s.shutdown_noisy();
}

#[test]
fn wire_shutdown_releases_the_lock_and_exits_zero_without_reply() {
    let (env, s, id) = start_chat();
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(s.pid.to_string()));
    s.shutdown();
    assert_eq!(
        lock_of(&env.chat_dir(&id)),
        None,
        "shutdown releases the lock"
    );
    env.chat_json(&id);
}

#[test]
fn wire_stdin_eof_releases_the_lock_and_exits_zero() {
    let (env, mut s, id) = start_chat();
    s.ok(json!({"action": "save_draft", "draft": "kept"}));
    s.close_stdin();
    let st = s.wait_exit();
    assert!(st.success(), "EOF must exit 0: {st:?}\n{}", s.stderr_text());
    assert_eq!(lock_of(&env.chat_dir(&id)), None, "EOF releases the lock");
    assert_eq!(draft_of(&env.chat_json(&id)), "kept");
    assert_quiet(&s);
}

#[test]
fn ping_and_version() {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "ping"}));
    let r = s.ok(json!({"action": "version"}));
    assert_eq!(r["type"], "version", "{r}");
    let v = r["version"].as_str().expect("version string");
    assert!(
        v.starts_with(env!("CARGO_PKG_VERSION")),
        "version {v:?} must be the crate version"
    );
    s.shutdown();
}

#[test]
fn model_actions_without_config_answer_with_errors_and_cancel_has_nothing_to_cancel() {
    let (env, mut s, id) = start_chat();
    for req in [
        json!({"action": "send", "content": "hello"}),
        json!({"action": "generate_title", "chat_id": id, "content": "hello"}),
        json!({"action": "get_models"}),
        json!({"action": "get_balance"}),
    ] {
        let msg = s.err(req.clone());
        assert!(
            !msg.starts_with("Unknown action"),
            "{} is a known action: {msg}",
            brief(&req)
        );
    }
    s.err_is(
        json!({"action": "cancel", "target_request_id": "21"}),
        "No active request to cancel",
    );
    s.ok(json!({"action": "ping"}));
    env.chat_json(&id);
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Initialisation & state machine
// ---------------------------------------------------------------------------------------------

#[test]
fn state_nothing_works_before_init_and_init_needs_bb7_init() {
    let env = Env::new();
    let mut s = env.spawn();
    s.err(json!({"action": "chat_new", "name": "x"}));
    s.err(json!({"action": "chat_list"}));
    s.err(json!({"action": "context_add", "path": "a.txt", "content": "x"}));
    // As the reference backend (the client always sends its working directory): a directory
    // without .bb7/ serves global chats only, and init creates nothing there.
    let r = s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    assert_eq!(r["global_only"], true, "{r}");
    assert!(!env.bb7().exists(), "init must not create .bb7/");

    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    assert!(env.bb7().is_dir(), "bb7_init creates .bb7/");
    let r = s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    assert_eq!(r["type"], "ok");
    assert!(!flag(&r, "global_only"), "{r}");
    assert!(
        r.get("default_model").is_none(),
        "no config, no default_model: {r}"
    );
    assert!(chat_list(&mut s, false).is_empty());
    s.shutdown();
}

#[test]
fn state_bb7_init_twice_is_already_initialized() {
    let (env, mut s) = start();
    s.err_has(
        json!({"action": "bb7_init", "project_root": env.proj_str()}),
        "Already initialized",
    );
    s.shutdown();
    let mut s = env.spawn();
    s.err_has(
        json!({"action": "bb7_init", "project_root": env.proj_str()}),
        "Already initialized",
    );
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s.shutdown();
}

#[test]
fn state_init_on_a_missing_dir_or_a_file_is_an_error() {
    let env = Env::new();
    let mut s = env.spawn();
    let missing = env.root.join("nope");
    s.err(json!({"action": "init", "project_root": missing.to_str().unwrap()}));
    let file = env.root.join("file.txt");
    fs::write(&file, "x").unwrap();
    s.err(json!({"action": "bb7_init", "project_root": file.to_str().unwrap()}));
    s.err(json!({"action": "init", "project_root": file.to_str().unwrap()}));
    assert!(!missing.exists());
    s.shutdown_noisy();
}

#[test]
fn state_context_and_chat_actions_without_active_chat_say_no_active_chat() {
    let (_env, mut s) = start();
    let r = active(&mut s);
    assert!(r.get("id").is_none(), "no chat is active yet: {r}");
    for req in [
        json!({"action": "chat_get"}),
        json!({"action": "save_draft", "draft": "x"}),
        json!({"action": "save_chat_settings", "model": "a/b"}),
        json!({"action": "context_add", "path": "a.txt", "content": "x"}),
        json!({"action": "context_add_section", "path": "a.txt", "content": "x",
            "start_line": 1, "end_line": 1}),
        json!({"action": "context_update", "path": "a.txt", "content": "x"}),
        json!({"action": "context_remove", "path": "a.txt"}),
        json!({"action": "context_remove_section", "path": "a.txt", "start_line": 1, "end_line": 1}),
        json!({"action": "context_list"}),
        json!({"action": "context_set_readonly", "path": "a.txt", "readonly": true}),
        json!({"action": "sync_context", "path": "a.txt"}),
        json!({"action": "get_context_file", "path": "a.txt"}),
        json!({"action": "get_output_file", "path": "a.txt"}),
        json!({"action": "get_diff_paths", "path": "a.txt"}),
        json!({"action": "get_file_statuses"}),
        json!({"action": "apply_file", "path": "a.txt"}),
        json!({"action": "apply_file_as", "path": "a.txt", "destination": "b.txt"}),
        json!({"action": "output_delete", "path": "a.txt"}),
        json!({"action": "diff_local_done", "path": "a.txt"}),
        json!({"action": "estimate_tokens"}),
        json!({"action": "add_system_message", "message": "x"}),
    ] {
        s.err_has(req, "No active chat");
    }
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Chats
// ---------------------------------------------------------------------------------------------

#[test]
fn chat_new_writes_a_v2_chat_an_index_entry_and_a_lock() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "physics-refactor");
    let chat = env.chat_json(&id);
    assert_eq!(chat["id"], id);
    assert_eq!(chat["name"], "physics-refactor");
    assert_eq!(draft_of(&chat), "");
    assert!(list(&chat["context_files"]).is_empty());
    assert!(list(&chat["messages"]).is_empty());
    let idx = env.index();
    let e = by_id(&idx, &id).unwrap_or_else(|| panic!("index.json must list the chat: {idx:?}"));
    assert_eq!(e["name"], "physics-refactor");
    let created = e["created"].as_str().expect("index created");
    assert_rfc3339(created);
    assert_eq!(
        created[..19],
        chat["created"].as_str().unwrap()[..19],
        "index and chat agree on created"
    );
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(s.pid.to_string()));
    assert_eq!(active(&mut s)["id"], id);
    let listed = chat_list(&mut s, false);
    let e = by_id(&listed, &id).expect("chat_list shows the new chat");
    assert_eq!(e["name"], "physics-refactor");
    assert_rfc3339(e["created"].as_str().unwrap());
    assert!(
        !flag(&e, "locked"),
        "our own chat is not locked for us: {e}"
    );
    s.shutdown();
}

#[test]
fn chat_new_default_name_and_model() {
    let (env, mut s) = start();
    let r = s.ok(json!({"action": "chat_new"}));
    let id = chat_id_of(&r);
    let chat = env.chat_json(&id);
    let name = chat["name"].as_str().unwrap();
    // "Chat YYYY-MM-DD HH:MM"
    let b = name.as_bytes();
    assert!(
        name.len() == 21
            && name.starts_with("Chat ")
            && b[9] == b'-'
            && b[12] == b'-'
            && b[15] == b' '
            && b[18] == b':'
            && [5, 6, 7, 8, 10, 11, 13, 14, 16, 17, 19, 20]
                .iter()
                .all(|&i| b[i].is_ascii_digit()),
        "default name must be \"Chat YYYY-MM-DD HH:MM\": {name:?}"
    );
    assert_eq!(chat["model"], DEFAULT_MODEL);
    let r = s.ok(json!({"action": "chat_new", "name": "m", "model": "openai/gpt-4o"}));
    let id2 = chat_id_of(&r);
    assert_ne!(id, id2);
    assert_eq!(env.chat_json(&id2)["model"], "openai/gpt-4o");
    s.shutdown();
}

#[test]
fn chat_select_moves_the_lock_and_unknown_ids_are_not_found() {
    let (env, mut s) = start();
    let a = new_chat(&mut s, "A");
    let b = new_chat(&mut s, "B");
    assert_eq!(lock_of(&env.chat_dir(&a)), None, "switching releases A");
    assert_eq!(lock_of(&env.chat_dir(&b)), Some(s.pid.to_string()));
    select(&mut s, &a);
    assert_eq!(lock_of(&env.chat_dir(&a)), Some(s.pid.to_string()));
    assert_eq!(lock_of(&env.chat_dir(&b)), None);
    assert_eq!(active(&mut s)["id"], a);
    let r = s.ok(json!({"action": "chat_get"}));
    assert_eq!(r["id"], a);
    s.err_has(
        json!({"action": "chat_select", "id": "0123456789"}),
        "not found",
    );
    assert_eq!(
        active(&mut s)["id"],
        a,
        "a failed select keeps the active chat"
    );
    let listed = chat_list(&mut s, false);
    assert!(by_id(&listed, &a).is_some() && by_id(&listed, &b).is_some());
    s.shutdown();
}

#[test]
fn chat_get_shape_and_instructions_info() {
    let (_env, mut s, id) = start_chat();
    let r = s.ok(json!({"action": "chat_get"}));
    assert_eq!(r["type"], "chat", "{r}");
    assert_eq!(r["id"], id);
    assert_eq!(r["name"], "test chat");
    assert_eq!(r["model"], DEFAULT_MODEL);
    assert_eq!(r["draft"], "");
    assert!(r["reasoning_effort"].is_string(), "{r}");
    assert_rfc3339(r["created"].as_str().expect("created"));
    assert!(list(&r["messages"]).is_empty());
    assert!(!flag(&r, "global"));
    let ii = &r["instructions_info"];
    assert!(
        ii["global_path"]
            .as_str()
            .unwrap()
            .ends_with(".config/bb7/instructions.md"),
        "{ii}"
    );
    assert_eq!(ii["global_exists"], false);
    assert!(
        ii["project_path"]
            .as_str()
            .unwrap()
            .ends_with(".bb7/instructions"),
        "{ii}"
    );
    assert_eq!(ii["project_exists"], false);
    assert!(
        ii.get("project_error").is_none(),
        "project_error is omitted when empty: {ii}"
    );
    s.shutdown();
}

#[test]
fn chat_rename_updates_chat_json_and_index() {
    let (env, mut s) = start();
    let a = new_chat(&mut s, "A");
    let b = new_chat(&mut s, "B");
    select(&mut s, &a);
    s.ok(json!({"action": "chat_rename", "id": b, "name": "Renamed B"}));
    assert_eq!(env.chat_json(&b)["name"], "Renamed B");
    assert_eq!(by_id(&env.index(), &b).unwrap()["name"], "Renamed B");
    assert_eq!(
        by_id(&chat_list(&mut s, false), &b).unwrap()["name"],
        "Renamed B"
    );
    s.ok(json!({"action": "chat_rename", "id": a, "name": "Renamed A"}));
    assert_eq!(s.ok(json!({"action": "chat_get"}))["name"], "Renamed A");
    assert_eq!(env.chat_json(&a)["name"], "Renamed A");
    assert_eq!(by_id(&env.index(), &a).unwrap()["name"], "Renamed A");
    s.err(json!({"action": "chat_rename", "id": a, "name": ""}));
    s.err(json!({"action": "chat_rename", "id": a, "name": "   "}));
    assert_eq!(env.chat_json(&a)["name"], "Renamed A");
    s.err_has(
        json!({"action": "chat_rename", "id": "0123456789", "name": "x"}),
        "not found",
    );
    s.shutdown();
}

#[test]
fn chat_delete_removes_the_dir_and_the_index_entry() {
    let (env, mut s) = start();
    let a = new_chat(&mut s, "A");
    let b = new_chat(&mut s, "B");
    s.ok(json!({"action": "chat_delete", "id": a}));
    assert!(!env.chat_dir(&a).exists());
    assert!(by_id(&env.index(), &a).is_none());
    assert!(by_id(&chat_list(&mut s, false), &a).is_none());
    assert_eq!(
        active(&mut s)["id"],
        b,
        "deleting another chat keeps B active"
    );
    s.ok(json!({"action": "chat_delete", "id": b}));
    assert!(!env.chat_dir(&b).exists());
    assert!(env.index().is_empty());
    assert!(active(&mut s).get("id").is_none());
    s.err_has(json!({"action": "chat_get"}), "No active chat");
    s.err_has(json!({"action": "chat_delete", "id": a}), "not found");
    s.shutdown();
}

#[test]
fn save_draft_persists_across_chat_switches_and_restarts() {
    let (env, mut s, id) = start_chat();
    let text = "Work in progress — héllo ✓\nsecond line";
    s.ok(json!({"action": "save_draft", "draft": text}));
    assert_eq!(draft_of(&env.chat_json(&id)), text);
    new_chat(&mut s, "other");
    select(&mut s, &id);
    assert_eq!(s.ok(json!({"action": "chat_get"}))["draft"], text);
    s.shutdown();
    let mut s = env.start();
    select(&mut s, &id);
    assert_eq!(s.ok(json!({"action": "chat_get"}))["draft"], text);
    s.ok(json!({"action": "save_draft", "draft": ""}));
    assert_eq!(draft_of(&env.chat_json(&id)), "");
    s.shutdown();
}

#[test]
fn save_chat_settings_persists_model_and_reasoning_effort() {
    let (env, mut s, id) = start_chat();
    s.ok(json!({"action": "save_chat_settings", "model": "openai/gpt-4o", "reasoning_effort": "high"}));
    let chat = env.chat_json(&id);
    assert_eq!(chat["model"], "openai/gpt-4o");
    assert_eq!(chat["reasoning_effort"], "high");
    let r = s.ok(json!({"action": "chat_get"}));
    assert_eq!(r["model"], "openai/gpt-4o");
    assert_eq!(r["reasoning_effort"], "high");
    // An empty model is not stored; an empty effort clears it.
    s.ok(json!({"action": "save_chat_settings", "model": "", "reasoning_effort": ""}));
    let chat = env.chat_json(&id);
    assert_eq!(chat["model"], "openai/gpt-4o");
    assert_eq!(
        chat.get("reasoning_effort")
            .and_then(Value::as_str)
            .unwrap_or(""),
        ""
    );
    s.ok(json!({"action": "save_chat_settings", "reasoning_effort": "low"}));
    let chat = env.chat_json(&id);
    assert_eq!(chat["model"], "openai/gpt-4o");
    assert_eq!(chat["reasoning_effort"], "low");
    s.shutdown();
}

#[test]
fn search_chats_matches_titles_and_content_with_an_excerpt() {
    let (env, mut s) = start();
    let a = new_chat(&mut s, "physics refactor");
    let b = new_chat(&mut s, "Game dev");
    let c = new_chat(&mut s, "Unrelated");
    s.shutdown();
    let mut chat = env.chat_json(&b);
    chat["messages"].as_array_mut().unwrap().extend([
        json!({"role": "user", "model": DEFAULT_MODEL, "timestamp": "2025-01-19T22:01:00Z",
            "parts": [{"type": "text", "content":
                "The game loop stutters. We need a faster physics engine, ideally one that batches."}],
            "context_snapshot": []}),
        json!({"role": "assistant", "model": DEFAULT_MODEL, "timestamp": "2025-01-19T22:01:05Z",
            "parts": [{"type": "text", "content": "Sure."}]}),
    ]);
    env.put_chat_json(&b, &chat);

    let mut s = env.start();
    let r = s.ok(json!({"action": "search_chats", "query": "physics"}));
    assert_eq!(r["type"], "search_results", "{r}");
    let res = list(&r["results"]);
    let ra = by_id(&res, &a).unwrap_or_else(|| panic!("title match missing: {res:?}"));
    assert_eq!(ra["match_type"], "title");
    assert_eq!(ra["name"], "physics refactor");
    assert_rfc3339(ra["created"].as_str().unwrap());
    let rb = by_id(&res, &b).unwrap_or_else(|| panic!("content match missing: {res:?}"));
    assert_eq!(rb["match_type"], "content");
    assert_eq!(rb["name"], "Game dev");
    let excerpt = rb["excerpt"]
        .as_str()
        .expect("content matches carry an excerpt");
    assert!(
        excerpt.to_lowercase().contains("physics"),
        "excerpt around the match: {excerpt:?}"
    );
    assert!(by_id(&res, &c).is_none(), "{res:?}");
    let r = s.ok(json!({"action": "search_chats", "query": "nomatch-zzz-qqq"}));
    assert!(list(&r["results"]).is_empty(), "{r}");
    s.shutdown();
}

/// A chat.json that `chat_select` cannot open (no `id`, a message without `role`, a name of the
/// wrong type) is not a search hit: the search read such files for their text and offered hits
/// the client could not open. A sound chat with the same words still is.
#[test]
fn search_chats_skips_chats_that_cannot_be_opened() {
    let (env, mut s) = start();
    let good = new_chat(&mut s, "good");
    let broken: Vec<String> = (0..3).map(|i| new_chat(&mut s, &format!("b{i}"))).collect();
    s.shutdown();
    let message =
        json!({"role": "user", "parts": [{"type": "text", "content": "the zebra-needle here"}]});
    for id in broken.iter().chain([&good]) {
        let mut chat = env.chat_json(id);
        chat["messages"] = json!([message]);
        env.put_chat_json(id, &chat);
    }
    let mut chat = env.chat_json(&broken[0]);
    chat.as_object_mut().unwrap().remove("id");
    env.put_chat_json(&broken[0], &chat);
    let mut chat = env.chat_json(&broken[1]);
    chat["messages"][0].as_object_mut().unwrap().remove("role");
    env.put_chat_json(&broken[1], &chat);
    let mut chat = env.chat_json(&broken[2]);
    chat["name"] = json!(42);
    env.put_chat_json(&broken[2], &chat);

    let mut s = env.start();
    for id in &broken {
        s.err(json!({"action": "chat_select", "id": id}));
    }
    let r = s.ok(json!({"action": "search_chats", "query": "zebra-needle"}));
    let ids: Vec<Value> = list(&r["results"])
        .iter()
        .map(|h| h["id"].clone())
        .collect();
    assert_eq!(ids, [json!(good)], "{r}");
    s.ok(json!({"action": "chat_select", "id": good}));
    s.shutdown();
}

#[test]
fn add_system_message_appends_and_ignores_blank_ones() {
    let (env, mut s, id) = start_chat();
    s.ok(json!({"action": "add_system_message", "message": "Heads up: files changed."}));
    let chat = env.chat_json(&id);
    let last = list(&chat["messages"]).last().cloned().expect("a message");
    assert_eq!(last["role"], "system");
    assert_eq!(msg_text(&last), "Heads up: files changed.");
    let r = s.ok(json!({"action": "chat_get"}));
    let last = list(&r["messages"]).last().cloned().unwrap();
    assert_eq!(last["role"], "system");
    assert_eq!(msg_text(&last), "Heads up: files changed.");
    let n = list(&chat["messages"]).len();
    let r = s.req(json!({"action": "add_system_message", "message": "   "}));
    assert_eq!(
        r["type"], "ok",
        "blank messages are ignored, not refused: {r}"
    );
    assert_eq!(list(&env.chat_json(&id)["messages"]).len(), n);
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------------------------

#[test]
fn context_add_snapshots_the_file_with_its_id_and_an_event() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "src/math.cs", "int x;\n");
    s.ok(
        json!({"action": "context_add", "path": "src/ro.cs", "content": "ro\n", "readonly": true}),
    );
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 2, "{files:?}");
    let e = full(&files, "src/math.cs").unwrap();
    assert_eq!(e["readonly"], false);
    assert_eq!(e["external"], false);
    assert_eq!(e["version"], fid("src/math.cs", "int x;\n"));
    let e = full(&files, "src/ro.cs").unwrap();
    assert_eq!(e["readonly"], true);
    assert_eq!(e["version"], fid("src/ro.cs", "ro\n"));
    let dir = env.chat_dir(&id).join("context");
    assert_eq!(
        fs::read_to_string(dir.join("src/math.cs")).unwrap(),
        "int x;\n"
    );
    assert_eq!(fs::read_to_string(dir.join("src/ro.cs")).unwrap(), "ro\n");
    let chat = env.chat_json(&id);
    let cf = full(&list(&chat["context_files"]), "src/math.cs").expect("in chat.json");
    assert_eq!(cf["version"], fid("src/math.cs", "int x;\n"));
    let ev = event(&chat, "UserAddFile", "src/math.cs");
    assert_eq!(ev["version"], fid("src/math.cs", "int x;\n"));
    assert_eq!(ev["readonly"], false);
    assert_eq!(ev["external"], false);
    assert_eq!(event(&chat, "UserAddFile", "src/ro.cs")["readonly"], true);
    assert_eq!(context_file(&mut s, "src/math.cs"), "int x;\n");
    s.shutdown();
}

#[test]
fn context_add_absolute_path_inside_the_project_becomes_relative() {
    let (env, mut s, _id) = start_chat();
    env.write_local("lib/b.rs", "fn b() {}\n");
    let abs = env.proj().join("lib/b.rs");
    add(&mut s, abs.to_str().unwrap(), "fn b() {}\n");
    let files = ctx_list(&mut s);
    let e = full(&files, "lib/b.rs").unwrap_or_else(|| panic!("stored relative: {files:?}"));
    assert_eq!(e["external"], false);
    assert_eq!(e["readonly"], false);
    assert_eq!(e["version"], fid("lib/b.rs", "fn b() {}\n"));
    s.err_has(
        json!({"action": "context_add", "path": "lib/b.rs", "content": "fn b() {}\n"}),
        "already exists",
    );
    s.shutdown();
}

#[test]
fn context_add_external_file_is_read_only_and_snapshotted_inside_bb7() {
    let (env, mut s, id) = start_chat();
    let ext = env.outside().join("ref.txt");
    fs::write(&ext, "reference\n").unwrap();
    let abs = ext.to_str().unwrap();
    let before = env.outside_state();
    s.ok(
        json!({"action": "context_add", "path": abs, "content": "reference\n", "readonly": false}),
    );
    let files = ctx_list(&mut s);
    let e =
        full(&files, abs).unwrap_or_else(|| panic!("external keeps its absolute path: {files:?}"));
    assert_eq!(e["readonly"], true, "external files are always read-only");
    assert_eq!(e["external"], true);
    assert_eq!(e["version"], fid(abs, "reference\n"));
    assert!(
        files_under(&env.chat_dir(&id).join("context"))
            .iter()
            .any(|(_, c)| c == b"reference\n"),
        "the snapshot lives under the chat's context/"
    );
    assert_eq!(context_file(&mut s, abs), "reference\n");
    let ev = event(&env.chat_json(&id), "UserAddFile", abs);
    assert_eq!(ev["external"], true);
    assert_eq!(ev["readonly"], true);
    s.err(json!({"action": "context_set_readonly", "path": abs, "readonly": false}));
    assert_same_tree(&before, &env.outside_state());
    s.shutdown();
}

#[test]
fn context_add_twice_already_exists() {
    let (_env, mut s, _id) = start_chat();
    add(&mut s, "a.txt", "a\n");
    s.err_has(
        json!({"action": "context_add", "path": "a.txt", "content": "a\n"}),
        "already exists",
    );
    add_section(&mut s, "a.txt", "a\n", 1, 1);
    s.err_has(
        json!({"action": "context_add_section", "path": "a.txt", "content": "a\n",
            "start_line": 1, "end_line": 1}),
        "already exists",
    );
    assert_eq!(ctx_list(&mut s).len(), 2);
    s.shutdown();
}

#[test]
fn context_add_section_is_read_only_and_stored_under_sections() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "src/a.txt", "l1\nl2\nl3\nl4\n");
    s.ok(
        json!({"action": "context_add_section", "path": "src/a.txt", "content": "l2\nl3\n",
        "start_line": 2, "end_line": 3, "readonly": false}),
    );
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 2, "a file and its section coexist: {files:?}");
    let e = section(&files, "src/a.txt", 2, 3).expect("the section");
    assert_eq!(e["readonly"], true, "sections are always read-only");
    assert_eq!(e["external"], false);
    let v = e["version"].as_str().expect("section version");
    assert!(
        v.len() == 8 && v.bytes().all(|c| c.is_ascii_hexdigit()),
        "{v:?}"
    );
    let secs = files_under(&env.chat_dir(&id).join("context/_sections"));
    assert_eq!(
        secs.len(),
        1,
        "one snapshot under context/_sections: {secs:?}"
    );
    assert_eq!(secs[0].1, b"l2\nl3\n");
    let chat = env.chat_json(&id);
    let ev = event(&chat, "UserAddSection", "src/a.txt");
    assert_eq!(ev["start_line"], 2);
    assert_eq!(ev["end_line"], 3);
    let st = statuses(&mut s);
    let sec = st
        .iter()
        .find(|f| f["status"] == "S")
        .expect("S status for the section");
    assert_eq!(sec["path"], "src/a.txt");
    assert_eq!(sec["context_content"], "l2\nl3\n");
    s.shutdown();
}

#[test]
fn context_add_section_with_bad_ranges_is_refused() {
    let (_env, mut s, _id) = start_chat();
    for (a, b) in [(0, 3), (5, 3), (-1, 2), (2, 0)] {
        s.err(
            json!({"action": "context_add_section", "path": "a.txt", "content": "x\n",
            "start_line": a, "end_line": b}),
        );
    }
    assert!(ctx_list(&mut s).is_empty());
    s.shutdown_noisy();
}

#[test]
fn context_update_resnapshots_with_prev_version() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "v1\n");
    s.ok(json!({"action": "context_update", "path": "a.txt", "content": "v2\n"}));
    assert_eq!(
        fs::read_to_string(env.chat_dir(&id).join("context/a.txt")).unwrap(),
        "v2\n"
    );
    let e = full(&ctx_list(&mut s), "a.txt").unwrap();
    assert_eq!(e["version"], fid("a.txt", "v2\n"));
    assert_eq!(context_file(&mut s, "a.txt"), "v2\n");
    let ev = event(&env.chat_json(&id), "UserWriteFile", "a.txt");
    assert_eq!(ev["version"], fid("a.txt", "v2\n"));
    assert_eq!(ev["prev_version"], fid("a.txt", "v1\n"));
    s.err_has(
        json!({"action": "context_update", "path": "zzz.txt", "content": "x"}),
        "not found",
    );
    s.shutdown();
}

#[test]
fn context_remove_and_remove_section() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "one\ntwo\n");
    add_section(&mut s, "a.txt", "one\n", 1, 1);
    add(&mut s, "b.txt", "b\n");
    s.ok(json!({"action": "context_remove_section", "path": "a.txt", "start_line": 1, "end_line": 1}));
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(full(&files, "a.txt").is_some(), "the full file stays");
    let ev = event(&env.chat_json(&id), "UserRemoveSection", "a.txt");
    assert_eq!(ev["start_line"], 1);
    assert_eq!(ev["end_line"], 1);
    s.err_has(
        json!({"action": "context_remove_section", "path": "a.txt", "start_line": 1, "end_line": 1}),
        "not found",
    );
    s.ok(json!({"action": "context_remove", "path": "a.txt"}));
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(full(&files, "b.txt").is_some());
    let chat = env.chat_json(&id);
    event(&chat, "UserRemoveFile", "a.txt");
    assert!(full(&list(&chat["context_files"]), "a.txt").is_none());
    s.err_has(
        json!({"action": "context_remove", "path": "a.txt"}),
        "not found",
    );
    s.shutdown();
}

#[test]
fn context_set_readonly_rules() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "a\n");
    s.ok(json!({"action": "context_set_readonly", "path": "a.txt", "readonly": true}));
    assert_eq!(full(&ctx_list(&mut s), "a.txt").unwrap()["readonly"], true);
    let ev = event(&env.chat_json(&id), "UserSetReadOnly", "a.txt");
    assert_eq!(ev["readonly"], true);
    s.ok(json!({"action": "context_set_readonly", "path": "a.txt", "readonly": false}));
    assert_eq!(full(&ctx_list(&mut s), "a.txt").unwrap()["readonly"], false);
    // Not while the file has pending output.
    env.write_output(&id, "a.txt", "changed\n");
    s.err(json!({"action": "context_set_readonly", "path": "a.txt", "readonly": true}));
    assert_eq!(full(&ctx_list(&mut s), "a.txt").unwrap()["readonly"], false);
    s.err_has(
        json!({"action": "context_set_readonly", "path": "nope.txt", "readonly": true}),
        "not found",
    );
    s.shutdown();
}

#[test]
fn sync_context_rereads_the_local_file_ignoring_crlf() {
    let (env, mut s, id) = start_chat();
    env.write_local("a.txt", "one\n");
    add(&mut s, "a.txt", "one\n");
    env.write_local("a.txt", "two\n");
    s.ok(json!({"action": "sync_context", "path": "a.txt"}));
    assert_eq!(context_file(&mut s, "a.txt"), "two\n");
    assert_eq!(
        full(&ctx_list(&mut s), "a.txt").unwrap()["version"],
        fid("a.txt", "two\n")
    );
    assert_eq!(
        fs::read_to_string(env.chat_dir(&id).join("context/a.txt")).unwrap(),
        "two\n"
    );
    env.write_local("a.txt", "two\r\n");
    s.ok(json!({"action": "sync_context", "path": "a.txt"}));
    assert_eq!(
        context_file(&mut s, "a.txt"),
        "two\n",
        "CRLF vs LF is no change"
    );
    assert_eq!(
        full(&ctx_list(&mut s), "a.txt").unwrap()["version"],
        fid("a.txt", "two\n")
    );
    // As the reference backend: syncing a file that is not in context is a silent no-op.
    s.ok(json!({"action": "sync_context", "path": "not-in-context.txt"}));
    assert!(full(&ctx_list(&mut s), "not-in-context.txt").is_none());
    s.shutdown();
}

#[test]
fn get_context_file_replies_with_content_or_not_found() {
    let (_env, mut s, _id) = start_chat();
    add(&mut s, "dir/a.txt", "alpha\n");
    let r = s.ok(json!({"action": "get_context_file", "path": "dir/a.txt"}));
    assert_eq!(
        r,
        json!({"type": "file_content", "request_id": r["request_id"], "path": "dir/a.txt",
            "content": "alpha\n"})
    );
    s.err_has(
        json!({"action": "get_context_file", "path": "dir/b.txt"}),
        "not found",
    );
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Output files
// ---------------------------------------------------------------------------------------------

#[test]
fn file_statuses_cover_every_status_with_token_fields() {
    let (env, mut s, id) = start_chat();
    let ext = env.outside().join("ext.txt");
    fs::write(&ext, "external\n").unwrap();
    let ext = ext.to_str().unwrap().to_string();
    add(&mut s, "same.txt", "same\n");
    add(&mut s, "mod.txt", "old line\n");
    add(&mut s, "applied.txt", "x\n");
    add_section(&mut s, "same.txt", "same\n", 1, 1);
    add(&mut s, &ext, "external\n");
    env.write_output(&id, "mod.txt", "new line\nmore\n");
    env.write_output(&id, "applied.txt", "x\n");
    env.write_output(&id, "new.txt", "brand new\n");
    env.write_output(&id, "clash.txt", "theirs\n");
    env.write_local("clash.txt", "mine\n");
    env.write_output(&id, "dir/deep.txt", "deep\n");

    let files = statuses(&mut s);
    assert_eq!(files.len(), 8, "{files:#?}");
    let find = |path: &str, sec: bool| {
        files
            .iter()
            .find(|f| f["path"] == path && (f["status"] == "S") == sec)
            .cloned()
            .unwrap_or_else(|| panic!("no entry for {path}: {files:#?}"))
    };

    let f = find("same.txt", false);
    assert_eq!(f["status"], "");
    assert_eq!(f["in_context"], true);
    assert_eq!(f["has_output"], false);
    assert_eq!(f["readonly"], false);
    assert_eq!(f["external"], false);
    assert_eq!(num(&f, "tokens"), tokens("same\n"));

    let f = find("mod.txt", false);
    assert_eq!(f["status"], "M");
    assert_eq!(f["in_context"], true);
    assert_eq!(f["has_output"], true);
    assert_eq!(num(&f, "original_tokens"), tokens("old line\n"));
    assert_eq!(num(&f, "output_tokens"), tokens("new line\nmore\n"));
    assert_eq!(
        num(&f, "tokens"),
        num(&f, "original_tokens") + num(&f, "output_tokens"),
        "M sends both versions"
    );
    assert_eq!(f["context_content"], "old line\n");
    assert_eq!(f["output_content"], "new line\nmore\n");

    let f = find("applied.txt", false);
    assert_eq!(f["status"], "", "output equal to context is blank: {f}");
    assert_eq!(f["in_context"], true);

    let f = find("new.txt", false);
    assert_eq!(f["status"], "A");
    assert_eq!(f["in_context"], false);
    assert_eq!(f["has_output"], true);
    assert_eq!(num(&f, "tokens"), tokens("brand new\n"));
    assert_eq!(f["output_content"], "brand new\n");

    let f = find("clash.txt", false);
    assert_eq!(
        f["status"], "!A",
        "output for a file that exists locally: {f}"
    );
    assert_eq!(f["in_context"], false);

    let f = find("dir/deep.txt", false);
    assert_eq!(f["status"], "A");

    let f = find("same.txt", true);
    assert_eq!(f["readonly"], true);
    assert_eq!(f["in_context"], true);
    assert_eq!(f["has_output"], false);
    assert_eq!(f["start_line"], 1);
    assert_eq!(f["end_line"], 1);
    assert_eq!(f["context_content"], "same\n");
    assert_eq!(num(&f, "tokens"), tokens("same\n"));

    let f = find(&ext, false);
    assert_eq!(f["status"], "");
    assert_eq!(f["external"], true);
    assert_eq!(f["readonly"], true);
    s.shutdown();
}

#[test]
fn get_output_file_and_diff_paths() {
    let (env, mut s, id) = start_chat();
    env.write_output(&id, "src/x.txt", "out\n");
    env.write_local("src/x.txt", "local\n");
    let r = s.ok(json!({"action": "get_output_file", "path": "src/x.txt"}));
    assert_eq!(r["type"], "file_content");
    assert_eq!(r["path"], "src/x.txt");
    assert_eq!(r["content"], "out\n");
    s.err_has(
        json!({"action": "get_output_file", "path": "src/y.txt"}),
        "not found",
    );
    let r = s.ok(json!({"action": "get_diff_paths", "path": "src/x.txt"}));
    assert_eq!(r["type"], "diff_paths", "{r}");
    assert_eq!(r["path"], "src/x.txt");
    let out = Path::new(r["output_path"].as_str().expect("output_path"));
    let local = Path::new(r["local_path"].as_str().expect("local_path"));
    assert!(out.is_absolute() && local.is_absolute(), "{r}");
    assert_eq!(
        out.canonicalize().unwrap(),
        env.output_path(&id, "src/x.txt").canonicalize().unwrap()
    );
    assert_eq!(
        local.canonicalize().unwrap(),
        env.proj().join("src/x.txt").canonicalize().unwrap()
    );
    s.err(json!({"action": "get_diff_paths", "path": "src/y.txt"}));
    s.shutdown();
}

#[test]
fn apply_file_moves_output_into_context() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "mod.txt", "a\n");
    env.write_output(&id, "mod.txt", "b\n");
    let r = s.ok(json!({"action": "apply_file", "path": "mod.txt"}));
    assert_eq!(r["type"], "ok");
    assert_eq!(r["content"], "b\n");
    assert!(
        !env.output_path(&id, "mod.txt").exists(),
        "output is consumed"
    );
    assert_eq!(
        fs::read_to_string(env.chat_dir(&id).join("context/mod.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(
        full(&ctx_list(&mut s), "mod.txt").unwrap()["version"],
        fid("mod.txt", "b\n")
    );
    let ev = event(&env.chat_json(&id), "UserApplyFile", "mod.txt");
    assert_eq!(ev["version"], fid("mod.txt", "b\n"));
    assert_eq!(ev["prev_version"], fid("mod.txt", "a\n"));
    let st = statuses(&mut s);
    assert_eq!(st.len(), 1);
    assert_eq!(st[0]["status"], "");

    // A file the model added joins the context.
    env.write_output(&id, "new.txt", "fresh\n");
    let r = s.ok(json!({"action": "apply_file", "path": "new.txt"}));
    assert_eq!(r["content"], "fresh\n");
    assert!(!env.output_path(&id, "new.txt").exists());
    let e = full(&ctx_list(&mut s), "new.txt").expect("applied file joins the context");
    assert_eq!(e["readonly"], false);
    assert_eq!(e["external"], false);
    assert_eq!(e["version"], fid("new.txt", "fresh\n"));
    assert_eq!(context_file(&mut s, "new.txt"), "fresh\n");
    s.err_has(
        json!({"action": "apply_file", "path": "none.txt"}),
        "not found",
    );
    s.shutdown();
}

#[test]
fn apply_file_as_saves_the_output_under_a_new_path() {
    let (env, mut s, id) = start_chat();
    env.write_local("new.txt", "already here\n");
    env.write_output(&id, "new.txt", "content\n");
    assert_eq!(statuses(&mut s)[0]["status"], "!A");
    let r = s.ok(json!({"action": "apply_file_as", "path": "new.txt",
        "destination": "src/renamed.txt"}));
    assert_eq!(r["type"], "ok");
    assert_eq!(r["content"], "content\n");
    assert!(
        !env.output_path(&id, "new.txt").exists(),
        "output is consumed"
    );
    event(&env.chat_json(&id), "UserSaveAs", "src/renamed.txt");
    assert_eq!(
        fs::read_to_string(env.proj().join("new.txt")).unwrap(),
        "already here\n",
        "the conflicting local file is left alone"
    );
    s.err(json!({"action": "apply_file_as", "path": "none.txt", "destination": "x.txt"}));
    s.shutdown();
}

#[test]
fn output_delete_rejects_the_output() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "mod.txt", "a\n");
    env.write_output(&id, "mod.txt", "b\n");
    s.ok(json!({"action": "output_delete", "path": "mod.txt"}));
    assert!(!env.output_path(&id, "mod.txt").exists());
    event(&env.chat_json(&id), "UserRejectOutput", "mod.txt");
    assert_eq!(context_file(&mut s, "mod.txt"), "a\n");
    s.err_has(
        json!({"action": "get_output_file", "path": "mod.txt"}),
        "not found",
    );
    s.err_has(
        json!({"action": "output_delete", "path": "mod.txt"}),
        "not found",
    );
    s.shutdown();
}

#[test]
fn diff_local_done_outcomes_none_full_partial() {
    let (env, mut s, id) = start_chat();
    for f in ["n.txt", "f.txt", "p.txt"] {
        add(&mut s, f, "one\n");
        env.write_output(&id, f, "two\n");
    }
    env.write_local("n.txt", "one\n");
    env.write_local("f.txt", "two\n");
    env.write_local("p.txt", "mine\n");

    let r = s.ok(json!({"action": "diff_local_done", "path": "n.txt"}));
    assert_eq!(r["type"], "ok");
    assert_eq!(r["outcome"], "none");
    assert!(env.output_path(&id, "n.txt").exists());
    assert_eq!(context_file(&mut s, "n.txt"), "one\n");

    let r = s.ok(json!({"action": "diff_local_done", "path": "f.txt"}));
    assert_eq!(r["outcome"], "full");
    assert!(
        !env.output_path(&id, "f.txt").exists(),
        "full apply consumes output"
    );
    assert_eq!(context_file(&mut s, "f.txt"), "two\n");

    let r = s.ok(json!({"action": "diff_local_done", "path": "p.txt"}));
    assert_eq!(r["outcome"], "partial");
    assert_eq!(context_file(&mut s, "p.txt"), "mine\n");
    assert_eq!(
        fs::read_to_string(env.output_path(&id, "p.txt")).unwrap(),
        "two\n",
        "the output stays after a partial apply"
    );
    assert_eq!(
        full(&ctx_list(&mut s), "p.txt").unwrap()["version"],
        fid("p.txt", "mine\n")
    );
    event(&env.chat_json(&id), "UserPartialApplyFile", "p.txt");
    s.shutdown();
}

#[test]
fn estimate_tokens_reports_every_part() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "hello world\n");
    add(&mut s, "b.txt", "fn main() {}\n");
    env.write_output(&id, "a.txt", "hello brave new world\n");
    let r = s.ok(json!({"action": "estimate_tokens", "input_text": "draft text here"}));
    assert_eq!(r["type"], "token_estimate", "{r}");
    let files = list(&r["files"]);
    assert_eq!(files.len(), 2, "{r}");
    let fa = files.iter().find(|f| f["path"] == "a.txt").unwrap();
    assert_eq!(fa["has_output"], true);
    assert_eq!(num(fa, "original_tokens"), tokens("hello world\n"));
    assert_eq!(num(fa, "output_tokens"), tokens("hello brave new world\n"));
    assert_eq!(
        num(fa, "tokens"),
        tokens("hello world\n") + tokens("hello brave new world\n")
    );
    let fb = files.iter().find(|f| f["path"] == "b.txt").unwrap();
    assert_eq!(fb["has_output"], false);
    assert_eq!(num(fb, "tokens"), tokens("fn main() {}\n"));
    assert_eq!(
        num(&r, "context_files"),
        num(fa, "tokens") + num(fb, "tokens")
    );
    assert_eq!(num(&r, "input_text"), tokens("draft text here"));
    assert_eq!(num(&r, "instructions"), 0, "no instruction files exist");
    assert!(num(&r, "system_prompt") > 0);
    assert!(num(&r, "potential_savings") > 0, "an M file can be applied");
    let parts = num(&r, "context_files")
        + num(&r, "history")
        + num(&r, "instructions")
        + num(&r, "system_prompt")
        + num(&r, "input_text");
    assert!(num(&r, "total") >= parts, "total covers its parts: {r}");
    s.ok(json!({"action": "output_delete", "path": "a.txt"}));
    let r = s.ok(json!({"action": "estimate_tokens"}));
    assert_eq!(num(&r, "potential_savings"), 0, "{r}");
    s.shutdown();
}

/// The history is counted as the `@history` block the model is sent (a context event is an `@event`
/// line there, though it has no text of its own), and a cached count never outlives the text it
/// counted: instructions edited between two estimates are counted afresh.
#[test]
fn estimate_tokens_counts_the_rendered_history_and_follows_changed_instructions() {
    let (env, mut s, _id) = start_chat();
    let r = s.ok(json!({"action": "estimate_tokens"}));
    assert_eq!(num(&r, "history"), 0, "a new chat has no history: {r}");
    add(&mut s, "a.txt", "hello world\n");
    let r = s.ok(json!({"action": "estimate_tokens"}));
    let with_event = num(&r, "history");
    assert!(
        with_event > 0,
        "the @event line of the add is sent, so it is counted: {r}"
    );
    fs::write(env.bb7().join("instructions"), "Use tabs.\n").unwrap();
    let short = num(&s.ok(json!({"action": "estimate_tokens"})), "instructions");
    assert!(short > 0);
    assert_eq!(
        num(&s.ok(json!({"action": "estimate_tokens"})), "instructions"),
        short,
        "a repeat counts the same"
    );
    fs::write(
        env.bb7().join("instructions"),
        "Use tabs. Prefer small functions, explicit error types and doc comments on every public item.\n",
    )
    .unwrap();
    let long = num(&s.ok(json!({"action": "estimate_tokens"})), "instructions");
    assert!(
        long > short,
        "edited instructions are counted afresh: {short} then {long}"
    );
    s.shutdown();
}

#[test]
fn estimate_text_tokens_counts_cl100k_and_refuses_empty_input() {
    let (_env, mut s) = start();
    let texts = [
        "hello world",
        "",
        "fn main() { println!(\"hi\"); }",
        "héllo ✓ 日本語",
    ];
    let r = s.ok(json!({"action": "estimate_text_tokens", "texts": texts}));
    assert_eq!(r["type"], "text_token_estimate", "{r}");
    let want: Vec<u64> = texts.iter().map(|t| tokens(t)).collect();
    assert_eq!(r["tokens"], json!(want));
    s.err_is(
        json!({"action": "estimate_text_tokens", "texts": []}),
        "Missing or empty 'texts' array",
    );
    s.err_is(
        json!({"action": "estimate_text_tokens"}),
        "Missing or empty 'texts' array",
    );
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Fork, edit, new chat with context
// ---------------------------------------------------------------------------------------------

const A1: &str = "alpha v1\n";
const A2: &str = "alpha v2\n";
const U: &str = "unchanged\nline two\n";
const U1: &str = "unchanged\n";
const D: &str = "delta\n";
const C: &str = "late\n";

struct Forkable {
    env: Env,
    id: String,
    first: usize,
    second: usize,
    section_version: String,
}

/// A chat whose first user message saw a.txt v1, u.txt, d.txt and a section of u.txt; then a.txt
/// was updated to v2 (locally and in context) and c.txt added; the second user message saw that.
fn forkable() -> Forkable {
    let (env, mut s, id) = start_chat();
    env.write_local("a.txt", A1);
    env.write_local("u.txt", U);
    env.write_local("d.txt", D);
    add(&mut s, "a.txt", A1);
    add(&mut s, "u.txt", U);
    add(&mut s, "d.txt", D);
    add_section(&mut s, "u.txt", U1, 1, 1);
    s.shutdown();
    let first = append_exchange(&env, &id, "first question", "first answer");
    let mut s = env.start();
    select(&mut s, &id);
    env.write_local("a.txt", A2);
    s.ok(json!({"action": "context_update", "path": "a.txt", "content": A2}));
    env.write_local("c.txt", C);
    add(&mut s, "c.txt", C);
    s.shutdown();
    let second = append_exchange(&env, &id, "second question", "second answer");
    let chat = env.chat_json(&id);
    let section_version = section(&list(&chat["context_files"]), "u.txt", 1, 1)
        .expect("section in chat.json")["version"]
        .as_str()
        .unwrap()
        .to_string();
    Forkable {
        env,
        id,
        first,
        second,
        section_version,
    }
}

fn warning<'a>(ws: &'a [Value], path: &str) -> Option<&'a Value> {
    ws.iter().find(|w| w["path"] == path)
}

#[test]
fn fork_chat_restores_the_message_snapshot() {
    let f = forkable();
    let mut s = f.env.start();
    let before = list(&f.env.chat_json(&f.id)["messages"]).len();
    let r = s.ok(json!({"action": "fork_chat", "chat_id": f.id, "fork_message_index": f.second}));
    assert_eq!(r["type"], "fork_result", "{r}");
    let new = r["new_chat_id"].as_str().expect("new_chat_id").to_string();
    assert_ne!(new, f.id);
    assert_eq!(r["fork_message_content"], "second question");
    assert!(
        list(&r["context_warnings"]).is_empty(),
        "nothing changed since the message: {r}"
    );

    let chat = f.env.chat_json(&new);
    assert_eq!(draft_of(&chat), "second question");
    assert_eq!(user_texts(&chat), vec!["first question".to_string()]);
    let texts = all_texts(&chat);
    assert!(texts.contains("first answer"), "{texts}");
    assert!(!texts.contains("second answer"), "{texts}");
    assert!(by_id(&f.env.index(), &new).is_some(), "the fork is indexed");

    select(&mut s, &new);
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 5, "{files:#?}");
    assert_eq!(full(&files, "a.txt").unwrap()["version"], fid("a.txt", A2));
    assert_eq!(full(&files, "u.txt").unwrap()["version"], fid("u.txt", U));
    assert_eq!(full(&files, "d.txt").unwrap()["version"], fid("d.txt", D));
    assert_eq!(full(&files, "c.txt").unwrap()["version"], fid("c.txt", C));
    assert_eq!(
        section(&files, "u.txt", 1, 1).expect("section restored")["version"],
        f.section_version
    );
    assert_eq!(context_file(&mut s, "a.txt"), A2);
    assert_eq!(context_file(&mut s, "c.txt"), C);
    assert_eq!(
        list(&f.env.chat_json(&f.id)["messages"]).len(),
        before,
        "the source chat is untouched"
    );
    s.shutdown();
}

#[test]
fn fork_chat_warns_about_modified_and_deleted_files() {
    let f = forkable();
    fs::remove_file(f.env.proj().join("d.txt")).unwrap();
    let mut s = f.env.start();
    let r = s.ok(json!({"action": "fork_chat", "chat_id": f.id, "fork_message_index": f.first}));
    assert_eq!(r["type"], "fork_result", "{r}");
    assert_eq!(r["fork_message_content"], "first question");
    let ws = list(&r["context_warnings"]);
    let w = warning(&ws, "a.txt").unwrap_or_else(|| panic!("a.txt changed since: {ws:?}"));
    assert_eq!(w["issue"], "modified");
    assert_eq!(w["original_version"], fid("a.txt", A1));
    let w = warning(&ws, "d.txt").unwrap_or_else(|| panic!("d.txt is gone: {ws:?}"));
    assert_eq!(w["issue"], "deleted");
    assert_eq!(w["original_version"], fid("d.txt", D));
    assert!(
        warning(&ws, "u.txt").is_none(),
        "u.txt and its section did not change: {ws:?}"
    );
    assert!(warning(&ws, "c.txt").is_none(), "{ws:?}");
    assert_eq!(ws.len(), 2, "{ws:?}");

    let new = r["new_chat_id"].as_str().unwrap().to_string();
    let chat = f.env.chat_json(&new);
    assert_eq!(draft_of(&chat), "first question");
    assert!(user_texts(&chat).is_empty());
    event(&chat, "ForkWarningModified", "a.txt");
    event(&chat, "ForkWarningDeleted", "d.txt");
    select(&mut s, &new);
    let files = ctx_list(&mut s);
    assert_eq!(full(&files, "u.txt").unwrap()["version"], fid("u.txt", U));
    assert!(full(&files, "a.txt").is_some(), "{files:?}");
    assert!(section(&files, "u.txt", 1, 1).is_some(), "{files:?}");
    assert!(
        full(&files, "c.txt").is_none(),
        "c.txt was added after the message: {files:?}"
    );
    s.shutdown();
}

#[test]
fn fork_chat_errors() {
    let f = forkable();
    let mut s = f.env.start();
    s.err(json!({"action": "fork_chat", "chat_id": f.id, "fork_message_index": f.first + 1}));
    s.err(json!({"action": "fork_chat", "chat_id": f.id, "fork_message_index": 999}));
    s.err(json!({"action": "fork_chat", "chat_id": f.id, "fork_message_index": -1}));
    s.err_has(
        json!({"action": "fork_chat", "chat_id": "0123456789", "fork_message_index": 0}),
        "not found",
    );
    let listed = chat_list(&mut s, false);
    assert_eq!(listed.len(), 1, "no chat was created: {listed:?}");
    s.shutdown_noisy();
}

#[test]
fn chat_edit_truncates_sets_the_draft_and_warns() {
    let f = forkable();
    fs::remove_file(f.env.proj().join("d.txt")).unwrap();
    let mut s = f.env.start();
    select(&mut s, &f.id);
    let r = s.ok(
        json!({"action": "chat_edit", "chat_id": f.id, "message_index": f.second,
        "content": "second question, edited"}),
    );
    assert_eq!(r["type"], "ok");
    let ws = list(&r["context_warnings"]);
    assert_eq!(ws.len(), 1, "{ws:?}");
    assert_eq!(ws[0]["path"], "d.txt");
    assert_eq!(ws[0]["issue"], "deleted");
    assert_eq!(ws[0]["original_version"], fid("d.txt", D));
    let chat = f.env.chat_json(&f.id);
    assert_eq!(draft_of(&chat), "second question, edited");
    assert_eq!(user_texts(&chat), vec!["first question".to_string()]);
    assert!(!all_texts(&chat).contains("second answer"));
    event(&chat, "ForkWarningDeleted", "d.txt");
    let g = s.ok(json!({"action": "chat_get"}));
    assert_eq!(g["draft"], "second question, edited");
    let files = ctx_list(&mut s);
    assert_eq!(full(&files, "a.txt").unwrap()["version"], fid("a.txt", A2));
    assert!(full(&files, "c.txt").is_some(), "{files:?}");

    let r = s.ok(
        json!({"action": "chat_edit", "chat_id": f.id, "message_index": f.first,
        "content": "first, edited"}),
    );
    let ws = list(&r["context_warnings"]);
    let w = warning(&ws, "a.txt").unwrap_or_else(|| panic!("{ws:?}"));
    assert_eq!(w["issue"], "modified");
    assert_eq!(w["original_version"], fid("a.txt", A1));
    assert_eq!(warning(&ws, "d.txt").unwrap()["issue"], "deleted");
    assert!(warning(&ws, "u.txt").is_none(), "{ws:?}");
    let chat = f.env.chat_json(&f.id);
    assert_eq!(draft_of(&chat), "first, edited");
    assert!(user_texts(&chat).is_empty());
    // SPEC.md: the context_snapshot "enables fork and edit operations to restore context".
    let files = ctx_list(&mut s);
    assert!(
        full(&files, "c.txt").is_none(),
        "chat_edit restores the edited message's context (c.txt came later): {files:?}"
    );
    assert_eq!(full(&files, "u.txt").unwrap()["version"], fid("u.txt", U));
    s.shutdown();
}

#[test]
fn chat_edit_errors_leave_the_chat_alone() {
    let f = forkable();
    let mut s = f.env.start();
    select(&mut s, &f.id);
    let n = list(&f.env.chat_json(&f.id)["messages"]).len();
    for i in [f.first as i64 + 1, 999, -1] {
        s.err(json!({"action": "chat_edit", "chat_id": f.id, "message_index": i, "content": "x"}));
    }
    let chat = f.env.chat_json(&f.id);
    assert_eq!(list(&chat["messages"]).len(), n);
    assert_eq!(draft_of(&chat), "");
    s.shutdown_noisy();
}

#[test]
fn chat_new_with_context_rereads_files_and_copies_sections_and_settings() {
    let (env, mut s, src) = start_chat();
    env.write_local("a.txt", "v1\n");
    add(&mut s, "a.txt", "v1\n");
    add_section(&mut s, "a.txt", "v1\n", 1, 1);
    let ext = env.outside().join("ext.txt");
    fs::write(&ext, "ext one\n").unwrap();
    let ext = ext.to_str().unwrap().to_string();
    add(&mut s, &ext, "ext one\n");
    s.ok(json!({"action": "save_chat_settings", "model": "openai/gpt-4o", "reasoning_effort": "high"}));
    let sec_v = section(&ctx_list(&mut s), "a.txt", 1, 1).unwrap()["version"].clone();
    env.write_local("a.txt", "v2 fresh\n");
    fs::write(&ext, "ext two\n").unwrap();

    let r = s.ok(json!({"action": "chat_new_with_context", "source_chat_id": src}));
    let new = chat_id_of(&r);
    assert_ne!(new, src);
    let chat = env.chat_json(&new);
    assert_eq!(chat["model"], "openai/gpt-4o");
    assert_eq!(chat["reasoning_effort"], "high");
    let cfs = list(&chat["context_files"]);
    assert_eq!(cfs.len(), 3, "{cfs:?}");
    assert_eq!(
        full(&cfs, "a.txt").unwrap()["version"],
        fid("a.txt", "v2 fresh\n")
    );
    assert_eq!(section(&cfs, "a.txt", 1, 1).unwrap()["version"], sec_v);
    let e = full(&cfs, &ext).unwrap();
    assert_eq!(e["version"], fid(&ext, "ext two\n"));
    assert_eq!(e["readonly"], true);
    assert_eq!(e["external"], true);
    assert!(by_id(&env.index(), &new).is_some());
    select(&mut s, &new);
    assert_eq!(context_file(&mut s, "a.txt"), "v2 fresh\n");
    assert_eq!(context_file(&mut s, &ext), "ext two\n");
    let src_chat = env.chat_json(&src);
    assert_eq!(
        full(&list(&src_chat["context_files"]), "a.txt").unwrap()["version"],
        fid("a.txt", "v1\n"),
        "the source is untouched"
    );
    s.err_has(
        json!({"action": "chat_new_with_context", "source_chat_id": "0123456789"}),
        "not found",
    );
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Global chats
// ---------------------------------------------------------------------------------------------

#[test]
fn global_only_mode_keeps_chats_in_home() {
    let env = Env::new();
    let ext = env.outside().join("ref.txt");
    fs::write(&ext, "ref\n").unwrap();
    let ext = ext.to_str().unwrap().to_string();
    let before = env.outside_state();
    let mut s = env.spawn();
    let r = s.ok(json!({"action": "init"}));
    assert_eq!(r["type"], "ok");
    assert_eq!(r["global_only"], true, "{r}");
    let id = new_chat(&mut s, "global one");
    env.global_chat_json(&id);
    assert!(
        !env.global_chat_dir(&id).join("output").exists(),
        "global chats have no output/"
    );
    assert!(by_id(&env.global_index(), &id).is_some());
    assert_eq!(lock_of(&env.global_chat_dir(&id)), Some(s.pid.to_string()));
    assert!(by_id(&chat_list(&mut s, false), &id).is_some());
    let a = active(&mut s);
    assert_eq!(a["id"], id);
    assert_eq!(a["global"], true);
    let g = s.ok(json!({"action": "chat_get"}));
    assert_eq!(g["global"], true);
    assert!(!flag(&g["instructions_info"], "project_exists"));
    s.err(json!({"action": "context_add", "path": "rel.txt", "content": "x"}));
    add(&mut s, &ext, "ref\n");
    let e = full(&ctx_list(&mut s), &ext).unwrap();
    assert_eq!(e["readonly"], true);
    assert_eq!(e["external"], true);
    assert_eq!(e["version"], fid(&ext, "ref\n"));
    s.shutdown();
    assert!(!env.bb7().exists(), "global-only mode touches no project");
    assert_same_tree(&before, &env.outside_state());

    let mut s = env.spawn();
    let r = s.ok(json!({"action": "init", "project_root": ""}));
    assert_eq!(r["global_only"], true, "{r}");
    assert!(by_id(&chat_list(&mut s, false), &id).is_some());
    s.shutdown();
}

#[test]
fn global_flag_in_a_project_session() {
    let (env, mut s) = start();
    let p = new_chat(&mut s, "project chat");
    let r = s.ok(json!({"action": "chat_new", "name": "global chat", "global": true}));
    let g = chat_id_of(&r);
    env.global_chat_json(&g);
    assert!(!env.chat_dir(&g).exists());
    let proj_list = chat_list(&mut s, false);
    assert!(by_id(&proj_list, &p).is_some() && by_id(&proj_list, &g).is_none());
    let glob_list = chat_list(&mut s, true);
    assert!(by_id(&glob_list, &g).is_some() && by_id(&glob_list, &p).is_none());

    // Every file of a global chat is read-only and external, with its absolute path, even one
    // inside the project.
    env.write_local("a.txt", "A\n");
    let abs = env.proj().join("a.txt").to_str().unwrap().to_string();
    s.ok(json!({"action": "context_add", "path": abs, "content": "A\n", "readonly": false}));
    let e = full(&ctx_list(&mut s), &abs).unwrap_or_else(|| panic!("absolute path expected"));
    assert_eq!(e["readonly"], true);
    assert_eq!(e["external"], true);
    let a = active(&mut s);
    assert_eq!(
        (a["id"].clone(), a["global"].clone()),
        (json!(g), json!(true))
    );
    let ch = s.ok(json!({"action": "chat_get"}));
    assert_eq!(ch["global"], true);

    select(&mut s, &p);
    s.ok(json!({"action": "chat_select", "id": g, "global": true}));
    assert_eq!(active(&mut s)["id"], g);
    s.ok(json!({"action": "chat_rename", "id": g, "name": "renamed global", "global": true}));
    assert_eq!(env.global_chat_json(&g)["name"], "renamed global");
    assert_eq!(
        by_id(&env.global_index(), &g).unwrap()["name"],
        "renamed global"
    );
    let r = s.ok(json!({"action": "search_chats", "query": "renamed", "global": true}));
    assert!(by_id(&list(&r["results"]), &g).is_some(), "{r}");
    let r = s.ok(json!({"action": "search_chats", "query": "renamed"}));
    assert!(by_id(&list(&r["results"]), &g).is_none(), "{r}");
    s.ok(json!({"action": "chat_delete", "id": g, "global": true}));
    assert!(!env.global_chat_dir(&g).exists());
    assert!(by_id(&env.global_index(), &g).is_none());
    assert!(env.chat_dir(&p).join("chat.json").exists());
    s.shutdown();
}

#[test]
fn chat_move_to_global_and_back() {
    let (env, mut s, id) = start_chat();
    env.write_local("src/a.txt", "alpha\n");
    add(&mut s, "src/a.txt", "alpha\n");
    s.ok(json!({"action": "save_draft", "draft": "moving"}));
    s.ok(json!({"action": "chat_move", "id": id, "to": "global"}));
    assert!(!env.chat_dir(&id).exists(), "moved away from the project");
    let g = env.global_chat_json(&id);
    assert_eq!(g["id"], id);
    assert_eq!(draft_of(&g), "moving");
    assert!(by_id(&env.index(), &id).is_none());
    assert!(by_id(&env.global_index(), &id).is_some());
    let a = active(&mut s);
    assert_eq!(a["id"], id, "the moved chat is active");
    assert_eq!(a["global"], true);
    assert_eq!(lock_of(&env.global_chat_dir(&id)), Some(s.pid.to_string()));
    let abs = env.proj().join("src/a.txt").to_str().unwrap().to_string();
    let files = ctx_list(&mut s);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["path"], abs.as_str());
    assert_eq!(files[0]["readonly"], true);
    assert_eq!(files[0]["external"], true);
    assert_eq!(context_file(&mut s, &abs), "alpha\n");

    s.ok(json!({"action": "chat_move", "id": id, "to": "project"}));
    assert!(!env.global_chat_dir(&id).exists());
    let p = env.chat_json(&id);
    assert_eq!(draft_of(&p), "moving");
    assert!(by_id(&env.index(), &id).is_some());
    assert!(by_id(&env.global_index(), &id).is_none());
    let a = active(&mut s);
    assert_eq!(a["id"], id);
    assert!(!flag(&a, "global"));
    let files = ctx_list(&mut s);
    let e = full(&files, "src/a.txt").unwrap_or_else(|| panic!("relative again: {files:?}"));
    assert_eq!(e["readonly"], false, "writable again");
    assert_eq!(e["external"], false);
    assert_eq!(e["version"], fid("src/a.txt", "alpha\n"));
    assert_eq!(context_file(&mut s, "src/a.txt"), "alpha\n");
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(s.pid.to_string()));
    s.shutdown();
}

#[test]
fn chat_move_refusals() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "a\n");
    env.write_output(&id, "a.txt", "changed\n");
    s.err_has(
        json!({"action": "chat_move", "id": id, "to": "global"}),
        "pending file modifications",
    );
    assert!(env.chat_dir(&id).join("chat.json").exists());
    assert!(!env.global_chat_dir(&id).exists());
    let bad_to = "Missing or invalid field: to (must be 'global' or 'project')";
    s.err_is(
        json!({"action": "chat_move", "id": id, "to": "elsewhere"}),
        bad_to,
    );
    s.err_is(json!({"action": "chat_move", "id": id}), bad_to);
    s.err_has(
        json!({"action": "chat_move", "id": "0123456789", "to": "global"}),
        "not found",
    );
    assert!(env.output_path(&id, "a.txt").exists());
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Instructions
// ---------------------------------------------------------------------------------------------

fn same_file(a: &Path, b: &Path) -> bool {
    a.canonicalize().ok() == b.canonicalize().ok()
}

#[test]
fn prepare_instructions_creates_each_level_once() {
    let (env, mut s) = start();
    let r = s.ok(json!({"action": "prepare_instructions", "level": "project"}));
    assert_eq!(r["type"], "instructions_path", "{r}");
    let p = Path::new(r["path"].as_str().unwrap()).to_path_buf();
    assert!(p.is_absolute());
    assert!(same_file(&p, &env.bb7().join("instructions")), "{r}");
    fs::write(&p, "custom\n").unwrap();
    let r = s.ok(json!({"action": "prepare_instructions", "level": "project"}));
    assert!(same_file(Path::new(r["path"].as_str().unwrap()), &p));
    assert_eq!(
        fs::read_to_string(&p).unwrap(),
        "custom\n",
        "never overwritten"
    );

    let r = s.ok(json!({"action": "prepare_instructions", "level": "global"}));
    let g = env.home().join(".config/bb7/instructions.md");
    assert!(same_file(Path::new(r["path"].as_str().unwrap()), &g), "{r}");
    let r = s.ok(json!({"action": "prepare_instructions", "level": "system"}));
    let sp = Path::new(r["path"].as_str().unwrap()).to_path_buf();
    assert!(
        sp.canonicalize()
            .unwrap()
            .starts_with(env.home().join(".config/bb7")),
        "the system prompt override lives in the config dir: {r}"
    );
    assert!(!fs::read_to_string(&sp).unwrap().trim().is_empty());
    s.err(json!({"action": "prepare_instructions", "level": "bogus"}));
    s.err(json!({"action": "prepare_instructions", "level": "../../x"}));
    s.shutdown();
}

#[test]
fn customization_info_reflects_the_files() {
    let (env, mut s) = start();
    let info = |s: &mut Bb7| {
        let r = s.ok(json!({"action": "get_customization_info"}));
        assert_eq!(r["type"], "customization_info", "{r}");
        r
    };
    let r = info(&mut s);
    assert_eq!(r["system_override"], false);
    assert_eq!(r["global_instructions"], false);
    assert_eq!(r["project_instructions"], false);
    assert_eq!(r["project_instructions_error"], "");
    write_file(&env.home().join(".config/bb7/instructions.md"), "be nice\n");
    fs::write(env.bb7().join("instructions"), "Be terse.\n").unwrap();
    // The override file is wherever prepare_instructions puts it (created there, so it exists).
    s.ok(json!({"action": "prepare_instructions", "level": "system"}));
    let r = info(&mut s);
    assert_eq!(r["system_override"], true);
    assert_eq!(r["global_instructions"], true);
    assert_eq!(r["project_instructions"], true);
    assert_eq!(r["project_instructions_error"], "");
    fs::write(env.bb7().join("instructions"), "@include /no/such/abs.md\n").unwrap();
    let r = info(&mut s);
    assert_eq!(r["project_instructions"], false);
    assert!(
        !r["project_instructions_error"].as_str().unwrap().is_empty(),
        "{r}"
    );
    s.shutdown();
}

#[test]
fn instructions_include_inside_the_project_is_fine() {
    let (env, mut s, _id) = start_chat();
    env.write_local("docs/style.md", "Use tabs.\n");
    fs::write(
        env.bb7().join("instructions"),
        "@@ a comment\n@include docs/style.md\nPlain text.\n",
    )
    .unwrap();
    let r = s.ok(json!({"action": "chat_get"}));
    let ii = &r["instructions_info"];
    assert_eq!(ii["project_exists"], true, "{ii}");
    assert!(ii.get("project_error").is_none(), "{ii}");
    let ci = s.ok(json!({"action": "get_customization_info"}));
    assert_eq!(ci["project_instructions"], true, "{ci}");
    assert_eq!(ci["project_instructions_error"], "");
    let est = s.ok(json!({"action": "estimate_tokens"}));
    assert!(num(&est, "instructions") > 0, "{est}");
    s.shutdown();
}

#[test]
fn instructions_includes_that_escape_the_project_are_errors() {
    let (env, mut s, _id) = start_chat();
    let x = env.outside().join("x.md");
    fs::write(&x, "TOPSECRET outside instructions\n").unwrap();
    symlink(&x, env.proj().join("link.md")).unwrap();
    symlink(env.outside(), env.proj().join("linkdir")).unwrap();
    let cases = [
        (format!("@include {}\n", x.display()), "absolute path"),
        ("@include ../outside/x.md\n".to_string(), "../ escape"),
        (
            "@include link.md\n".to_string(),
            "symlink to a file outside",
        ),
        (
            "@include linkdir/x.md\n".to_string(),
            "through a symlinked dir",
        ),
        ("@include missing.md\n".to_string(), "missing file"),
        ("ok line\n@include\n".to_string(), "no path"),
    ];
    for (text, what) in cases {
        fs::write(env.bb7().join("instructions"), &text).unwrap();
        let r = s.ok(json!({"action": "chat_get"}));
        let ii = &r["instructions_info"];
        assert_eq!(ii["project_exists"], true, "{what}: {ii}");
        let e = ii["project_error"].as_str().unwrap_or("");
        assert!(!e.is_empty(), "{what} must be a project_error: {ii}");
        no_leak(&r, what);
        let ci = s.ok(json!({"action": "get_customization_info"}));
        assert_eq!(ci["project_instructions"], false, "{what}: {ci}");
        assert!(
            !ci["project_instructions_error"]
                .as_str()
                .unwrap_or("")
                .is_empty(),
            "{what}: {ci}"
        );
        let est = s.req(json!({"action": "estimate_tokens"}));
        no_leak(&est, what);
    }
    s.shutdown();
}

#[test]
fn instructions_directives_in_fences_comments_or_indented_are_ignored() {
    let (env, mut s, _id) = start_chat();
    fs::write(
        env.bb7().join("instructions"),
        "```\n@include /etc/passwd\n```\n~~~\n@include ../outside/x.md\n~~~\n\
         @@ @include /abs/path\n  @include /indented/is/not/a/directive\ntext\n",
    )
    .unwrap();
    let r = s.ok(json!({"action": "chat_get"}));
    assert!(
        r["instructions_info"].get("project_error").is_none(),
        "{}",
        r["instructions_info"]
    );
    let ci = s.ok(json!({"action": "get_customization_info"}));
    assert_eq!(ci["project_instructions"], true, "{ci}");
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Two processes on one project: locks
// ---------------------------------------------------------------------------------------------

#[test]
fn lock_held_by_another_process_refuses_select_delete_and_move() {
    let (env, mut a, id) = start_chat();
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(a.pid.to_string()));
    let mut b = env.start();
    let e = by_id(&chat_list(&mut b, false), &id).unwrap();
    assert_eq!(e["locked"], true, "{e}");
    let locked = "chat is locked by another process";
    b.err_has(json!({"action": "chat_select", "id": id}), locked);
    b.err_has(json!({"action": "chat_delete", "id": id}), locked);
    b.err_has(
        json!({"action": "chat_move", "id": id, "to": "global"}),
        locked,
    );
    assert!(env.chat_dir(&id).join("chat.json").exists());
    assert!(!env.global_chat_dir(&id).exists());
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(a.pid.to_string()));
    assert!(!flag(
        &by_id(&chat_list(&mut a, false), &id).unwrap(),
        "locked"
    ));

    // A switches away: the lock is released and B may take the chat.
    let other = new_chat(&mut a, "other");
    assert_eq!(lock_of(&env.chat_dir(&id)), None);
    let listed = chat_list(&mut b, false);
    assert!(!flag(&by_id(&listed, &id).unwrap(), "locked"));
    let e = by_id(&listed, &other).unwrap_or_else(|| {
        panic!("B's chat_list must show the chat A just created (on disk): {listed:?}")
    });
    assert_eq!(e["locked"], true, "{e}");
    select(&mut b, &id);
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(b.pid.to_string()));
    a.err_has(json!({"action": "chat_select", "id": id}), locked);
    b.shutdown();
    assert_eq!(
        lock_of(&env.chat_dir(&id)),
        None,
        "B's shutdown released it"
    );
    select(&mut a, &id);
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(a.pid.to_string()));
    a.shutdown();
    assert_eq!(lock_of(&env.chat_dir(&id)), None);
}

#[test]
fn lock_with_a_dead_pid_or_garbage_is_stale() {
    let (env, mut a, id) = start_chat();
    new_chat(&mut a, "other");
    a.shutdown();
    for content in [dead_pid().to_string(), "garbage".into(), String::new()] {
        fs::write(env.chat_dir(&id).join("lock"), &content).unwrap();
        let mut b = env.start();
        let e = by_id(&chat_list(&mut b, false), &id).unwrap();
        assert!(!flag(&e, "locked"), "lock {content:?} is stale: {e}");
        select(&mut b, &id);
        assert_eq!(lock_of(&env.chat_dir(&id)), Some(b.pid.to_string()));
        b.shutdown();
        assert_eq!(lock_of(&env.chat_dir(&id)), None);
    }
}

#[test]
fn lock_with_a_non_positive_pid_is_garbage() {
    let (env, mut a, id) = start_chat();
    new_chat(&mut a, "other");
    a.shutdown();
    for content in ["0", "-1"] {
        fs::write(env.chat_dir(&id).join("lock"), content).unwrap();
        let mut b = env.start();
        let e = by_id(&chat_list(&mut b, false), &id).unwrap();
        assert!(
            !flag(&e, "locked"),
            "lock {content:?} names no process: {e}"
        );
        select(&mut b, &id);
        b.shutdown();
    }
}

#[test]
fn chat_force_unlock_removes_the_lock() {
    let (env, a, id) = start_chat();
    let mut b = env.start();
    b.ok(json!({"action": "chat_force_unlock", "id": id}));
    assert_eq!(lock_of(&env.chat_dir(&id)), None);
    select(&mut b, &id);
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(b.pid.to_string()));
    // A no longer holds the chat: its shutdown must not remove B's lock.
    a.shutdown();
    assert_eq!(
        lock_of(&env.chat_dir(&id)),
        Some(b.pid.to_string()),
        "a process only releases its own lock"
    );
    // An unlocked chat: nothing to do, still ok.
    let other = new_chat(&mut b, "other");
    select(&mut b, &id);
    b.ok(json!({"action": "chat_force_unlock", "id": other}));

    // A global chat held by some other live process.
    let r = b.ok(json!({"action": "chat_new", "name": "g", "global": true}));
    let g = chat_id_of(&r);
    select(&mut b, &id);
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    fs::write(
        env.global_chat_dir(&g).join("lock"),
        sleeper.id().to_string(),
    )
    .unwrap();
    assert_eq!(by_id(&chat_list(&mut b, true), &g).unwrap()["locked"], true);
    b.err_has(
        json!({"action": "chat_select", "id": g, "global": true}),
        "locked",
    );
    b.ok(json!({"action": "chat_force_unlock", "id": g, "global": true}));
    assert_eq!(lock_of(&env.global_chat_dir(&g)), None);
    b.ok(json!({"action": "chat_select", "id": g, "global": true}));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    b.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Path traversal in every path field
// ---------------------------------------------------------------------------------------------

#[test]
fn traversal_in_context_paths_is_refused() {
    let (env, mut s, id) = start_chat();
    let secret = env.outside().join("secret.txt");
    fs::write(&secret, SECRET).unwrap();
    let abs_secret = secret.to_str().unwrap().to_string();
    let before = env.outside_state();
    for path in [
        "../outside/evil.txt",
        "sub/../../outside/evil.txt",
        "../../../../../../outside/evil.txt",
        "..",
        "a\u{0}b.txt",
    ] {
        refused(
            &mut s,
            json!({"action": "context_add", "path": path, "content": "pwned"}),
        );
        refused(
            &mut s,
            json!({"action": "context_add_section", "path": path, "content": "pwned",
                "start_line": 1, "end_line": 1}),
        );
    }
    for path in [
        "../outside/secret.txt",
        "../../../../../outside/secret.txt",
        abs_secret.as_str(),
        "a\u{0}b.txt",
    ] {
        refused(
            &mut s,
            json!({"action": "context_update", "path": path, "content": "pwned"}),
        );
        refused(&mut s, json!({"action": "context_remove", "path": path}));
        refused(
            &mut s,
            json!({"action": "context_remove_section", "path": path, "start_line": 1, "end_line": 1}),
        );
        refused(
            &mut s,
            json!({"action": "context_set_readonly", "path": path, "readonly": true}),
        );
        refused_or_noop(&mut s, json!({"action": "sync_context", "path": path}));
        refused(&mut s, json!({"action": "get_context_file", "path": path}));
    }
    assert_same_tree(&before, &env.outside_state());
    assert!(ctx_list(&mut s).is_empty());
    assert!(list(&env.chat_json(&id)["context_files"]).is_empty());
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
}

#[test]
fn traversal_in_output_paths_is_refused_and_leaks_nothing() {
    let (env, mut s, id) = start_chat();
    fs::write(env.outside().join("secret.txt"), SECRET).unwrap();
    let abs_secret = env.outside().join("secret.txt");
    let abs_secret = abs_secret.to_str().unwrap().to_string();
    env.write_output(&id, "legit.txt", "legit\n");
    let before = env.outside_state();
    for path in [
        "../../../../../outside/secret.txt",
        abs_secret.as_str(),
        "../chat.json",
        "../../index.json",
        "../context",
        "..",
        "a\u{0}b",
    ] {
        refused(&mut s, json!({"action": "get_output_file", "path": path}));
        refused(&mut s, json!({"action": "get_diff_paths", "path": path}));
        refused(&mut s, json!({"action": "apply_file", "path": path}));
        refused(&mut s, json!({"action": "output_delete", "path": path}));
        refused_or_noop(&mut s, json!({"action": "diff_local_done", "path": path}));
        refused(
            &mut s,
            json!({"action": "apply_file_as", "path": path, "destination": "stolen.txt"}),
        );
    }
    assert_same_tree(&before, &env.outside_state());
    env.chat_json(&id);
    assert!(by_id(&env.index(), &id).is_some(), "index.json survives");
    assert!(env.output_path(&id, "legit.txt").exists());
    assert!(ctx_list(&mut s).is_empty());
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
}

#[test]
fn traversal_apply_file_as_destination_stays_in_the_project() {
    let (env, mut s, id) = start_chat();
    env.write_output(&id, "new.txt", "fresh\n");
    symlink(env.outside(), env.proj().join("linkdir")).unwrap();
    let evil = env.outside().join("evil.txt");
    let before = env.outside_state();
    for dest in [
        "../outside/evil.txt",
        evil.to_str().unwrap(),
        "sub/../../outside/evil.txt",
        "..",
        "a\u{0}b.txt",
    ] {
        refused(
            &mut s,
            json!({"action": "apply_file_as", "path": "new.txt", "destination": dest}),
        );
        assert!(
            env.output_path(&id, "new.txt").exists(),
            "a refused apply keeps the output"
        );
    }
    assert!(ctx_list(&mut s).is_empty());
    // Through a symlinked directory inside the project: whatever the reply, nothing lands outside.
    let _ = s.req(json!({"action": "apply_file_as", "path": "new.txt",
        "destination": "linkdir/evil.txt"}));
    assert_same_tree(&before, &env.outside_state());
    assert!(!evil.exists());
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
}

#[test]
fn applying_output_never_overwrites_bb7_state() {
    let (env, mut s, id) = start_chat();
    s.ok(json!({"action": "save_draft", "draft": "state"}));
    env.write_output(&id, "new.txt", "not a chat\n");
    let chat_rel = format!(".bb7/chats/{id}/chat.json");
    for dest in [chat_rel.as_str(), ".bb7/chats/index.json", ".bb7"] {
        refused(
            &mut s,
            json!({"action": "apply_file_as", "path": "new.txt", "destination": dest}),
        );
        assert_eq!(draft_of(&env.chat_json(&id)), "state");
        env.index();
    }
    // Output the model put under output/.bb7/…: applying it must not clobber the chat.
    env.write_output(&id, &chat_rel, "not a chat\n");
    let _ = s.req(json!({"action": "apply_file", "path": chat_rel}));
    assert_eq!(draft_of(&env.chat_json(&id)), "state");
    let _ = s.req(json!({"action": "save_draft", "draft": "still works"}));
    assert_eq!(draft_of(&env.chat_json(&id)), "still works");
    s.shutdown_noisy();
}

#[test]
fn traversal_in_chat_ids_is_refused() {
    let (env, mut s, id) = start_chat();
    // A decoy chat outside the project, reachable from .bb7/chats via ../../../outside.
    let decoy = json!({"version": 2, "id": "decoy", "name": "decoy", "created": "2025-01-19T22:00:00Z",
        "model": DEFAULT_MODEL, "draft": "", "context_files": [], "messages": [
            {"role": "user", "parts": [{"type": "text", "content": "decoy"}],
             "timestamp": "2025-01-19T22:01:00Z", "context_snapshot": []}]});
    write_file(
        &env.outside().join("chat.json"),
        &serde_json::to_string_pretty(&decoy).unwrap(),
    );
    write_file(&env.outside().join("lock"), "1");
    write_file(&env.outside().join("output/x.txt"), "x\n");
    write_file(&env.outside().join("context/x.txt"), "x\n");
    let abs = env.outside().to_str().unwrap().to_string();
    let before = env.outside_state();
    for cid in [
        "../../../outside",
        abs.as_str(),
        "..",
        ".",
        "../chats",
        "../../..",
        "x\u{0}y",
    ] {
        for global in [false, true] {
            refused(
                &mut s,
                json!({"action": "chat_select", "id": cid, "global": global}),
            );
            refused(
                &mut s,
                json!({"action": "chat_delete", "id": cid, "global": global}),
            );
            refused(
                &mut s,
                json!({"action": "chat_rename", "id": cid, "name": "pwned", "global": global}),
            );
            refused(
                &mut s,
                json!({"action": "chat_force_unlock", "id": cid, "global": global}),
            );
            refused(
                &mut s,
                json!({"action": "fork_chat", "chat_id": cid, "fork_message_index": 0,
                    "global": global}),
            );
            refused(
                &mut s,
                json!({"action": "chat_new_with_context", "source_chat_id": cid, "global": global}),
            );
        }
        refused(
            &mut s,
            json!({"action": "chat_move", "id": cid, "to": "global"}),
        );
        refused(
            &mut s,
            json!({"action": "chat_move", "id": cid, "to": "project"}),
        );
    }
    assert_same_tree(&before, &env.outside_state());
    assert!(env.chats().is_dir());
    env.chat_json(&id);
    assert!(by_id(&env.index(), &id).is_some());
    assert_eq!(active(&mut s)["id"], id);
    s.shutdown_noisy();
}

// ---------------------------------------------------------------------------------------------
// Symlinks planted in .bb7/
// ---------------------------------------------------------------------------------------------

#[test]
fn symlinked_output_dir_is_not_followed() {
    let (env, mut s, id) = start_chat();
    let odir = env.outside().join("odir");
    write_file(&odir.join("secret.txt"), SECRET);
    let out = env.chat_dir(&id).join("output");
    let _ = fs::remove_dir_all(&out);
    symlink(&odir, &out).unwrap();
    let before = env.outside_state();
    refused(
        &mut s,
        json!({"action": "get_output_file", "path": "secret.txt"}),
    );
    refused(
        &mut s,
        json!({"action": "get_diff_paths", "path": "secret.txt"}),
    );
    refused(
        &mut s,
        json!({"action": "apply_file", "path": "secret.txt"}),
    );
    refused(
        &mut s,
        json!({"action": "output_delete", "path": "secret.txt"}),
    );
    refused_or_noop(
        &mut s,
        json!({"action": "diff_local_done", "path": "secret.txt"}),
    );
    refused(
        &mut s,
        json!({"action": "apply_file_as", "path": "secret.txt", "destination": "stolen.txt"}),
    );
    let r = s.req(json!({"action": "get_file_statuses"}));
    no_leak(&r, "get_file_statuses");
    let r = s.req(json!({"action": "estimate_tokens"}));
    no_leak(&r, "estimate_tokens");
    assert_same_tree(&before, &env.outside_state());
    let _ = s.req(json!({"action": "chat_delete", "id": id}));
    assert_same_tree(&before, &env.outside_state());
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
}

#[test]
fn symlink_inside_output_is_not_followed() {
    let (env, mut s, id) = start_chat();
    let odir = env.outside().join("odir");
    write_file(&odir.join("secret.txt"), SECRET);
    env.write_output(&id, "legit.txt", "legit\n");
    symlink(&odir, env.chat_dir(&id).join("output/sub")).unwrap();
    let before = env.outside_state();
    for req in [
        json!({"action": "get_output_file", "path": "sub/secret.txt"}),
        json!({"action": "get_diff_paths", "path": "sub/secret.txt"}),
        json!({"action": "apply_file", "path": "sub/secret.txt"}),
        json!({"action": "output_delete", "path": "sub/secret.txt"}),
    ] {
        refused(&mut s, req);
    }
    refused_or_noop(
        &mut s,
        json!({"action": "diff_local_done", "path": "sub/secret.txt"}),
    );
    let r = s.req(json!({"action": "get_file_statuses"}));
    no_leak(&r, "get_file_statuses");
    assert_same_tree(&before, &env.outside_state());
    let _ = s.req(json!({"action": "chat_delete", "id": id}));
    assert_same_tree(&before, &env.outside_state());
    s.shutdown_noisy();
}

#[test]
fn symlinked_context_dir_is_not_followed() {
    let (env, s, id) = start_chat();
    s.shutdown();
    let cdir = env.outside().join("cdir");
    write_file(&cdir.join("secret.txt"), SECRET);
    // The chat believes secret.txt is in its context, and its context/ points outside.
    let mut chat = env.chat_json(&id);
    chat["context_files"]
        .as_array_mut()
        .unwrap()
        .push(json!({"path": "secret.txt",
        "readonly": false, "external": false, "version": fid("secret.txt", SECRET)}));
    env.put_chat_json(&id, &chat);
    let ctx = env.chat_dir(&id).join("context");
    let _ = fs::remove_dir_all(&ctx);
    symlink(&cdir, &ctx).unwrap();
    let before = env.outside_state();
    let mut s = env.start();
    let r = s.req(json!({"action": "chat_select", "id": id}));
    no_leak(&r, "chat_select");
    refused(
        &mut s,
        json!({"action": "get_context_file", "path": "secret.txt"}),
    );
    refused(
        &mut s,
        json!({"action": "context_update", "path": "secret.txt", "content": "pwned"}),
    );
    refused(
        &mut s,
        json!({"action": "context_add", "path": "new.txt", "content": "pwned"}),
    );
    refused(
        &mut s,
        json!({"action": "context_add_section", "path": "new.txt", "content": "pwned",
            "start_line": 1, "end_line": 1}),
    );
    let r = s.req(json!({"action": "get_file_statuses"}));
    no_leak(&r, "get_file_statuses");
    let r = s.req(json!({"action": "chat_get"}));
    no_leak(&r, "chat_get");
    assert_same_tree(&before, &env.outside_state());
    let _ = s.req(json!({"action": "chat_delete", "id": id}));
    assert_same_tree(&before, &env.outside_state());
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
}

#[test]
fn symlinked_sections_dir_is_not_followed() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "one\ntwo\n");
    let sdir = env.outside().join("sdir");
    fs::create_dir_all(&sdir).unwrap();
    let secs = env.chat_dir(&id).join("context/_sections");
    let _ = fs::remove_dir_all(&secs);
    symlink(&sdir, &secs).unwrap();
    let before = env.outside_state();
    refused(
        &mut s,
        json!({"action": "context_add_section", "path": "a.txt", "content": "one\n",
            "start_line": 1, "end_line": 1}),
    );
    assert_same_tree(&before, &env.outside_state());
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
}

#[test]
fn symlinked_lock_and_chat_json_targets_are_untouched() {
    let (env, mut s, x) = start_chat();
    let y = new_chat(&mut s, "other");
    let victim = env.outside().join("victim.txt");
    fs::write(&victim, "victim\n").unwrap();
    let _ = fs::remove_file(env.chat_dir(&x).join("lock"));
    symlink(&victim, env.chat_dir(&x).join("lock")).unwrap();
    let before = env.outside_state();
    let _ = s.req(json!({"action": "chat_list"}));
    let _ = s.req(json!({"action": "chat_select", "id": x}));
    let _ = s.req(json!({"action": "chat_select", "id": y}));
    assert_same_tree(&before, &env.outside_state());

    // y's chat.json becomes a link to a copy outside: saving y must not write through it.
    let copy = env.outside().join("copy.json");
    fs::copy(env.chat_dir(&y).join("chat.json"), &copy).unwrap();
    fs::remove_file(env.chat_dir(&y).join("chat.json")).unwrap();
    symlink(&copy, env.chat_dir(&y).join("chat.json")).unwrap();
    let before = env.outside_state();
    let _ = s.req(json!({"action": "save_draft", "draft": "through a link?"}));
    let _ = s.req(json!({"action": "chat_rename", "id": y, "name": "renamed"}));
    let _ = s.req(json!({"action": "context_add", "path": "a.txt", "content": "a\n"}));
    let _ = s.req(json!({"action": "chat_select", "id": x}));
    let _ = s.req(json!({"action": "chat_rename", "id": y, "name": "renamed again"}));
    assert_same_tree(&before, &env.outside_state());
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
    assert_same_tree(&before, &env.outside_state());
}

// ---- Behaviours the existing client relies on, matched to the reference backend ----

#[test]
fn reference_ping_is_ok_and_lists_are_newest_first() {
    let (_env, mut s) = start();
    assert_eq!(s.ok(json!({"action": "ping"}))["type"], "ok");
    let a = new_chat(&mut s, "alpha");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let b = new_chat(&mut s, "beta");
    let ids: Vec<String> = chat_list(&mut s, false)
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, [b.clone(), a.clone()], "newest first");
    // An empty query lists every chat (the picker's initial list), newest first, as title matches.
    let r = s.ok(json!({"action": "search_chats", "query": ""}));
    let found: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(found, [b.as_str(), a.as_str()]);
    assert!(
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["match_type"] == "title")
    );
    s.shutdown();
}

#[test]
fn reference_context_events_are_assistant_messages() {
    let (env, mut s, id) = start_chat();
    add(&mut s, "a.txt", "A\n");
    let chat = env.chat_json(&id);
    let m = chat["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(m["role"], "assistant", "{m}");
    assert_eq!(m["parts"][0]["type"], "context_event");
    assert_eq!(m["parts"][0]["action"], "UserAddFile");
    s.shutdown();
}

#[test]
fn reference_get_context_file_without_range_finds_a_section() {
    let (_env, mut s, _id) = start_chat();
    add_section(&mut s, "only/section.rs", "fn x() {}\n", 3, 3);
    let r = s.ok(json!({"action": "get_context_file", "path": "only/section.rs"}));
    assert_eq!(r["content"], "fn x() {}\n");
    s.shutdown();
}

#[test]
fn reference_diff_local_done_on_an_added_file_adds_it_partially() {
    let (env, mut s, id) = start_chat();
    env.write_output(&id, "new.txt", "one\ntwo\n");
    env.write_local("new.txt", "one\n");
    let r = s.ok(json!({"action": "diff_local_done", "path": "new.txt"}));
    assert_eq!(r["outcome"], "partial");
    let f = full(&ctx_list(&mut s), "new.txt").expect("added to context");
    assert_eq!(f["version"], fid("new.txt", "one\n"));
    // The model's version is still there for the rest.
    assert!(env.chat_dir(&id).join("output/new.txt").exists());
    // No local file: nothing was merged.
    env.write_output(&id, "gone.txt", "x\n");
    assert_eq!(
        s.ok(json!({"action": "diff_local_done", "path": "gone.txt"}))["outcome"],
        "none"
    );
    s.shutdown();
}

#[test]
fn reference_last_active_chat_is_restored_and_index_keys_survive() {
    let (env, s, id) = start_chat();
    s.shutdown();
    let index_path = env.bb7().join("chats/index.json");
    let mut index: Value = serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
    assert_eq!(index["active_chat_id"], id.as_str());
    index["version"] = json!(1);
    index["x_future"] = json!("kept");
    fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();

    let mut s = env.spawn();
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let r = s.ok(json!({"action": "chat_active"}));
    assert_eq!(
        r["id"],
        id.as_str(),
        "the last active chat is active again after init"
    );
    new_chat(&mut s, "another");
    let index: Value = serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
    assert_eq!(index["version"], 1);
    assert_eq!(index["x_future"], "kept");
    assert_ne!(index["active_chat_id"], id.as_str());
    s.shutdown();
}

#[test]
fn reference_fork_warnings_share_one_system_message() {
    let (env, mut s, id) = start_chat();
    env.write_local("m.txt", "one\n");
    env.write_local("d.txt", "dd\n");
    add(&mut s, "m.txt", "one\n");
    add(&mut s, "d.txt", "dd\n");
    let snapshot = json!([{"path": "m.txt", "file_id": fid("m.txt", "one\n")}, {"path": "d.txt", "file_id": fid("d.txt", "dd\n")}]);
    s.shutdown();
    let mut chat = env.chat_json(&id);
    chat["messages"].as_array_mut().unwrap().push(json!({"role": "user", "parts": [{"type": "text", "content": "q"}], "context_snapshot": snapshot}));
    env.put_chat_json(&id, &chat);
    env.write_local("m.txt", "changed\n");
    fs::remove_file(env.proj().join("d.txt")).unwrap();
    let mut s = env.spawn();
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let idx = env.chat_json(&id)["messages"].as_array().unwrap().len() - 1;
    let r = s.ok(json!({"action": "fork_chat", "chat_id": id, "fork_message_index": idx}));
    assert_eq!(r["context_warnings"].as_array().unwrap().len(), 2, "{r}");
    let fork = env.chat_json(r["new_chat_id"].as_str().unwrap());
    assert_eq!(
        fork["name"],
        format!("Fork of {}", chat["name"].as_str().unwrap())
    );
    let warnings: Vec<&Value> = fork["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one system message holds every warning: {fork}"
    );
    let actions: Vec<&str> = warnings[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["ForkWarningModified", "ForkWarningDeleted"]);
    s.shutdown();
}

// ---- Found in review: symlinks checked into a repository ----

#[test]
fn apply_never_writes_through_a_symlink_in_the_project() {
    let (env, mut s, id) = start_chat();
    fs::create_dir_all(env.proj().join(".git/hooks")).unwrap();
    fs::write(env.proj().join(".git/hooks/pre-commit"), "original hook\n").unwrap();
    // A repository can ship these links; the model's output names ordinary-looking paths.
    symlink(".git/hooks", env.proj().join("hooks")).unwrap();
    symlink(".git/hooks/pre-commit", env.proj().join("script.sh")).unwrap();
    env.write_output(&id, "hooks/pre-commit", "#!/bin/sh\necho pwned\n");
    env.write_output(&id, "script.sh", "#!/bin/sh\necho pwned\n");
    s.err(json!({"action": "apply_file", "path": "hooks/pre-commit"}));
    s.err(json!({"action": "apply_file", "path": "script.sh"}));
    env.write_output(&id, "ok.txt", "fine\n");
    s.err(json!({"action": "apply_file_as", "path": "ok.txt", "destination": "hooks/post-merge"}));
    s.err(json!({"action": "apply_file_as", "path": "ok.txt", "destination": "sub/.GIT/config"}));
    assert_eq!(
        fs::read_to_string(env.proj().join(".git/hooks/pre-commit")).unwrap(),
        "original hook\n"
    );
    assert!(!env.proj().join(".git/hooks/post-merge").exists());
    // An ordinary apply still works.
    s.ok(json!({"action": "apply_file", "path": "ok.txt"}));
    assert_eq!(
        fs::read_to_string(env.proj().join("ok.txt")).unwrap(),
        "fine\n"
    );
    s.shutdown();
}

#[test]
fn a_symlinked_bb7_directory_is_refused() {
    let env = Env::new();
    let elsewhere = env.outside().join("state");
    fs::create_dir_all(elsewhere.join("chats")).unwrap();
    symlink(&elsewhere, env.bb7()).unwrap();
    let mut s = env.spawn();
    s.err_has(
        json!({"action": "init", "project_root": env.proj_str()}),
        "symbolic link",
    );
    s.err_has(
        json!({"action": "bb7_init", "project_root": env.proj_str()}),
        "symbolic link",
    );
    s.shutdown();
    assert_eq!(
        fs::read_dir(elsewhere.join("chats")).unwrap().count(),
        0,
        "nothing written through the link"
    );
}

/// A re-`init` that fails (here: another project whose `.bb7` is a symlink) is an error and changes
/// nothing: the session still serves the project it had, not global chats.
#[test]
fn a_failed_re_init_keeps_the_project_it_had() {
    let (env, mut s, id) = start_chat();
    let other = env.home().join("other");
    fs::create_dir_all(&other).unwrap();
    symlink(env.outside(), other.join(".bb7")).unwrap();
    s.err_has(
        json!({"action": "init", "project_root": other.to_str().unwrap()}),
        "symbolic link",
    );
    let r = s.ok(json!({"action": "chat_list"}));
    assert!(
        r.to_string().contains(&id),
        "still the project's chats: {r}"
    );
    let r = s.ok(json!({"action": "chat_new", "name": "after"}));
    let new_id = chat_id_of(&r);
    assert!(
        env.chat_dir(&new_id).join("chat.json").is_file(),
        "a new chat lands in the project"
    );
    s.shutdown();
}

#[test]
fn a_symlinked_project_instructions_file_is_not_followed() {
    let (env, mut s, _id) = start_chat();
    fs::write(env.outside().join("id_rsa"), SECRET).unwrap();
    symlink(env.outside().join("id_rsa"), env.bb7().join("instructions")).unwrap();
    let r = s.ok(json!({"action": "chat_get"}));
    let err = r["instructions_info"]["project_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(err.contains("symbolic link"), "{r}");
    no_leak(&r, "chat_get");
    let r = s.ok(json!({"action": "estimate_tokens"}));
    assert_eq!(r["instructions"], 0, "{r}");
    s.shutdown();
}

#[test]
fn special_files_in_context_paths_do_not_hang_or_exhaust_the_host() {
    let (env, mut s, _id) = start_chat();
    add(&mut s, "pipe", "was a file\n");
    fs::remove_file(env.proj().join("pipe")).ok();
    let status = Command::new("mkfifo")
        .arg(env.proj().join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    // sync_context re-reads the local file: a FIFO must not block the host, /dev/zero must not fill memory.
    s.ok(json!({"action": "sync_context", "path": "pipe"}));
    s.ok(json!({"action": "context_add", "path": "/dev/zero", "content": ""}));
    s.ok(json!({"action": "sync_context", "path": "/dev/zero"}));
    s.ok(json!({"action": "ping"}));
    s.shutdown();
}

#[test]
fn control_characters_in_chat_names_are_refused() {
    let (_env, mut s, id) = start_chat();
    for bad in [
        "two\nlines",
        "cr\rhere",
        "tab\tname",
        "esc\u{1b}[2J",
        "nul\u{0}",
    ] {
        s.err_has(
            json!({"action": "chat_rename", "id": id, "name": bad}),
            "control character",
        );
        s.err_has(
            json!({"action": "chat_new", "name": bad}),
            "control character",
        );
    }
    // The chat keeps its name, and one-line names (any script) still work.
    let r = s.ok(json!({"action": "chat_get"}));
    assert!(
        !r["name"].as_str().unwrap_or_default().contains('\n'),
        "{r}"
    );
    s.ok(json!({"action": "chat_rename", "id": id, "name": "Überprüfung — 日本 ✓"}));
    let r = s.ok(json!({"action": "chat_get"}));
    assert_eq!(r["name"], "Überprüfung — 日本 ✓", "{r}");
    s.shutdown();
}

#[test]
fn the_chat_reply_carries_the_chosen_model() {
    let (_env, mut s, _id) = start_chat();
    s.ok(json!({"action": "save_chat_settings", "model": "mock/chosen"}));
    let r = s.ok(json!({"action": "chat_get"}));
    assert_eq!(r["settings_model"], "mock/chosen", "{r}");
    s.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Issue 23: the .bb7/.gitignore of bb7_init, a FIFO at a chat's lock
// ---------------------------------------------------------------------------------------------

/// Issue 23 item 17: `bb7_init` writes `.bb7/.gitignore` (chats private by default) in a way that
/// leaves `.bb7/tools.lock` committable, as the lockfile's own header asks.
#[test]
fn bb7_init_ignores_chats_but_not_the_tools_lockfile() {
    let (env, s) = start();
    let gi = fs::read(env.bb7().join(".gitignore")).expect("bb7_init writes .bb7/.gitignore");
    let mut rules = bb7_tool_logic::retrieval::rules::Rules::default();
    assert!(rules.push(".bb7", &gi));
    assert!(
        rules.check(".bb7/chats", true).is_some(),
        "chats stay private"
    );
    assert!(rules.check(".bb7/checkpoints", true).is_some());
    assert!(
        rules.check(".bb7/tools.lock", false).is_none(),
        "tools.lock is ignored: {}",
        String::from_utf8_lossy(&gi)
    );
    s.shutdown();
}

/// Issue 23 (smaller): a FIFO planted at a chat's `lock` neither hangs the host nor is reported
/// as another process's lock: the error says what is wrong and offers `chat_force_unlock`, which
/// frees the chat.
#[test]
fn a_fifo_at_a_chat_lock_is_named_and_force_unlock_frees_it() {
    let (env, mut s, id) = start_chat();
    let other = new_chat(&mut s, "other");
    assert_ne!(other, id);
    let lock = env.chat_dir(&id).join("lock");
    let _ = fs::remove_file(&lock);
    let st = Command::new("mkfifo").arg(&lock).status().unwrap();
    assert!(st.success());
    let e = s.err(json!({"action": "chat_select", "id": id}));
    assert!(!e.contains("another process"), "{e}");
    assert!(e.contains("not a regular file"), "{e}");
    assert!(e.contains("chat_force_unlock"), "{e}");
    assert!(s.alive());
    s.ok(json!({"action": "chat_force_unlock", "id": id}));
    select(&mut s, &id);
    assert_eq!(lock_of(&env.chat_dir(&id)), Some(s.pid.to_string()));
    s.shutdown();
}
