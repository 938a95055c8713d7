//! Agent mode through the protocol (AGENT-PROTOCOL.md §1): the per-chat mode, `send {mode}`, the
//! `clarify` action's errors, agent mode refused in global chats, config errors naming `agent.*`,
//! and the byte-stable prompt prefix across sends. The replies themselves are covered by the
//! scripted tasks of `tests/agent_eval/`.

mod common;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::*;
use serde_json::{Value, json};

const MODEL: &str = "mock/agent";

fn start(replies: Vec<Reply>, extra: Value) -> (Env, MockServer, Bb7, String) {
    let server = MockServer::start(Script::new(replies));
    let env = Env::new();
    let mut config = json!({"api_key": "k", "base_url": server.base_url()});
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &config.to_string(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let id = s.ok(json!({"action": "chat_new", "name": "t"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    (env, server, s, id)
}

fn send(s: &mut Bb7, content: &str, mode: Option<&str>) -> (Vec<Value>, Value) {
    let mut req = json!({"action": "send", "content": content, "model": MODEL});
    if let Some(m) = mode {
        req["mode"] = json!(m);
    }
    s.send_collect(req)
}

#[test]
fn mode_is_stored_returned_and_validated() {
    let (env, _server, mut s, id) = start(vec![], json!({}));
    assert_eq!(s.ok(json!({"action": "chat_get"}))["mode"], "chat");
    assert!(
        env.chat_json(&id).get("mode").is_none(),
        "chat mode stores nothing"
    );
    s.ok(json!({"action": "save_chat_settings", "mode": "agent"}));
    assert_eq!(s.ok(json!({"action": "chat_get"}))["mode"], "agent");
    assert_eq!(env.chat_json(&id)["mode"], "agent");
    s.err_is(
        json!({"action": "save_chat_settings", "mode": "robot"}),
        r#"Invalid field: mode must be "chat", "agent" or "plan""#,
    );
    s.err_is(
        json!({"action": "send", "content": "x", "mode": "robot"}),
        r#"Invalid field: mode must be "chat", "agent" or "plan""#,
    );
    // Reopening the chat keeps the mode.
    s.ok(json!({"action": "chat_select", "id": id}));
    assert_eq!(s.ok(json!({"action": "chat_get"}))["mode"], "agent");
    s.ok(json!({"action": "save_chat_settings", "mode": "chat"}));
    assert!(env.chat_json(&id).get("mode").is_none());
    s.shutdown();
}

#[test]
fn global_chats_refuse_agent_mode() {
    let (_env, _server, mut s, _id) = start(vec![], json!({}));
    s.ok(json!({"action": "chat_new", "global": true, "name": "g"}));
    let e = s.err(json!({"action": "save_chat_settings", "mode": "agent"}));
    assert!(e.contains("Agent mode needs a project"), "{e}");
    let e = s.err(json!({"action": "send", "content": "x", "mode": "agent"}));
    assert!(e.contains("Agent mode needs a project"), "{e}");
    s.shutdown();
}

#[test]
fn clarify_without_a_question_is_an_error() {
    let (_env, _server, mut s, _id) = start(vec![], json!({}));
    let e = s.err(json!({"action": "clarify", "question_id": "q-nope", "answer": "yes"}));
    assert!(e.starts_with("Unknown or stale question_id: q-nope"), "{e}");
    let e = s.err(json!({"action": "clarify", "answer": "yes"}));
    assert!(e.contains("question_id"), "{e}");
    assert!(s.alive());
    s.shutdown();
}

#[test]
fn bad_agent_config_names_the_key() {
    let (_env, _server, mut s, _id) = start(
        vec![],
        json!({"agent": {"max_tool_calls_per_job": 0, "deny": "x"}}),
    );
    let e = s.err(json!({"action": "send", "content": "x", "model": MODEL}));
    assert!(
        e.contains("agent.max_tool_calls_per_job") && e.contains("agent.deny"),
        "{e}"
    );
    s.shutdown();
}

/// The send mode overrides the chat's for one send; the system message and the user message's
/// prefix stay byte-identical from send to send (prompt caching).
#[test]
fn send_mode_override_and_prefix_stable_across_sends() {
    let read = |id: &str| {
        Reply::tool_calls([ToolCall::new(
            0,
            id,
            "read_file",
            r#"{"file_path":"a.txt"}"#,
        )])
    };
    let (env, server, mut s, id) = start(
        vec![
            read("r1"),
            Reply::text(["one"]),
            read("r2"),
            Reply::text(["two"]),
            Reply::text(["three"]),
        ],
        json!({}),
    );
    env.write_local("a.txt", "alpha\n");
    let (evs, done) = send(&mut s, "first", Some("agent"));
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(
        (done["steps"].as_u64(), done["tool_calls"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(evs.iter().filter(|e| e["type"] == "agent_event").count(), 3);
    // The chat itself stays in chat mode.
    assert!(env.chat_json(&id).get("mode").is_none());
    let (_, done) = send(&mut s, "second", Some("agent"));
    assert_eq!(done["type"], "done");
    let (evs, done) = send(&mut s, "third", None);
    assert_eq!(done["type"], "done");
    assert!(
        done.get("steps").is_none(),
        "chat mode done is unchanged: {done}"
    );
    assert!(evs.iter().all(|e| e["type"] != "agent_event"));
    let reqs: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    assert_eq!(reqs.len(), 5);
    let user = |b: &Value| b["messages"][1]["content"].as_str().unwrap().to_string();
    let history = |b: &Value| {
        let u = user(b);
        // The first send has no history: its prefix is empty.
        u.find("\n@latest_user_message")
            .map_or(String::new(), |i| u[..i].to_string())
    };
    // Send 2's history extends send 1's; send 3's extends send 2's.
    assert!(history(&reqs[4]).starts_with(&history(&reqs[2])));
    assert!(history(&reqs[2]).starts_with(&history(&reqs[0])));
    assert!(history(&reqs[4]).contains("@tool_call tool=read_file ok=true"));
    // Within a job, step 2 extends step 1 exactly.
    let m0 = reqs[2]["messages"].as_array().unwrap();
    let m1 = reqs[3]["messages"].as_array().unwrap();
    assert_eq!(m1[..m0.len()], m0[..]);
    // The trace of each job is under the chat.
    let traces: Vec<_> = std::fs::read_dir(env.chat_dir(&id).join("traces"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(traces.len(), 2);
    s.shutdown();
}

/// Issue 23 item 9: one model step with thousands of tool calls (the first with 1 MiB of
/// arguments). The calls taken per step are capped (the excess is refused as the budget refuses:
/// counted, not run), chat.json stays small, and the next request in the chat does not repeat
/// megabytes of arguments.
#[test]
fn a_step_with_thousands_of_calls_is_capped_and_stored_small() {
    let huge = "x".repeat(1 << 20);
    let mut calls = vec![ToolCall::new(
        0,
        "c0",
        "search_project",
        json!({"query": huge}).to_string(),
    )];
    for i in 1..5000u32 {
        calls.push(ToolCall::new(
            i,
            format!("c{i}"),
            "list_files",
            format!(r#"{{"prefix":"d{i}"}}"#),
        ));
    }
    let (env, server, mut s, id) = start(
        vec![
            Reply::tool_calls(calls),
            Reply::text(["done"]),
            Reply::text(["again"]),
        ],
        json!({}),
    );
    let (evs, done) = send(&mut s, "go", Some("agent"));
    assert_eq!(done["type"], "done", "{done}");
    let requested = evs
        .iter()
        .filter(|e| e["type"] == "agent_event" && e["kind"] == "tool.call.requested")
        .count();
    assert!(requested <= 64, "{requested} calls taken in one step");
    let chat = env.chat_json(&id);
    let parts: Vec<Value> = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["type"] == "tool_call")
        .collect();
    assert!(parts.len() <= 64, "{} calls stored", parts.len());
    let size = std::fs::metadata(env.chat_dir(&id).join("chat.json"))
        .unwrap()
        .len();
    assert!(size < 256 << 10, "chat.json is {size} bytes");
    // The model was told why the rest did not run.
    let reqs: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    let step2 = reqs[1]["messages"].to_string();
    assert!(
        step2.contains("per step"),
        "the model is not told of the cap"
    );
    // The next send's history is small.
    let (_, done) = send(&mut s, "and now?", None);
    assert_eq!(done["type"], "done", "{done}");
    let reqs: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    let last = reqs.last().unwrap().to_string();
    assert!(
        last.len() < 256 << 10,
        "the next request is {} bytes",
        last.len()
    );
    s.shutdown();
}

/// Issue 23 (smaller): escape sequences in a `clarify_user` question never reach the client, and
/// those in a tool result's excerpt never reach a later request's `@history`.
#[test]
fn control_characters_are_stripped_from_questions_and_history() {
    let (env, server, mut s, _id) = start(
        vec![
            Reply::tool_calls([ToolCall::new(
                0,
                "q1",
                "clarify_user",
                json!({"question": "Which \u{1b}[31mcolour\u{1b}[0m?\u{7}\u{1b}]0;pwned\u{7}\u{9b}2J"})
                    .to_string(),
            )]),
            Reply::tool_calls([ToolCall::new(
                0,
                "r1",
                "read_file",
                r#"{"file_path":"esc.txt"}"#,
            )]),
            Reply::text(["ok"]),
            Reply::text(["again"]),
        ],
        json!({}),
    );
    env.write_local("esc.txt", "plain \u{1b}[2J\u{1b}]52;c;Zm9v\u{7} text\n");
    let rid = s.next_id();
    s.send(&json!({"action": "send", "content": "go", "model": MODEL, "request_id": rid, "mode": "agent"}));
    let want = json!(rid);
    let mut question = None;
    let done = loop {
        let v = s.recv_where_for("send event", std::time::Duration::from_secs(120), |v| {
            v.get("request_id") == Some(&want)
        });
        if v["type"] == "agent_event" && v["kind"] == "clarification.requested" {
            let q = v["data"]["question"].as_str().unwrap().to_string();
            let qid = v["data"]["question_id"].clone();
            question = Some(q);
            s.send(&json!({"action": "clarify", "question_id": qid, "answer": "red"}));
        }
        if matches!(v["type"].as_str(), Some("done" | "diff_error" | "error")) {
            break v;
        }
    };
    assert_eq!(done["type"], "done", "{done}");
    let q = question.expect("the question reached the client");
    assert!(!q.chars().any(|c| c.is_control()), "{q:?}");
    assert!(q.contains("Which") && q.contains("colour"), "{q:?}");
    let (_, done) = send(&mut s, "and now?", None);
    assert_eq!(done["type"], "done", "{done}");
    let reqs: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    let user = reqs.last().unwrap()["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(user.contains("@tool_call tool=read_file"), "{user}");
    assert!(
        !user.contains('\u{1b}') && !user.contains('\u{7}') && !user.contains('\u{9b}'),
        "an escape sequence reached the prompt"
    );
    s.shutdown();
}
