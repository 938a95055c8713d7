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
    let rid = s.next_id();
    let mut req = json!({"action": "send", "content": content, "model": MODEL, "request_id": rid});
    if let Some(m) = mode {
        req["mode"] = json!(m);
    }
    s.send(&req);
    let want = json!(rid);
    let mut evs = Vec::new();
    loop {
        let v = s.recv_where_for("send event", std::time::Duration::from_secs(120), |v| {
            v.get("request_id") == Some(&want)
        });
        match v["type"].as_str() {
            Some("done" | "diff_error" | "error") => return (evs, v),
            _ => evs.push(v),
        }
    }
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
        r#"Invalid field: mode must be "chat" or "agent""#,
    );
    s.err_is(
        json!({"action": "send", "content": "x", "mode": "robot"}),
        r#"Invalid field: mode must be "chat" or "agent""#,
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
