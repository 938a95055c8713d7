//! Remote, local and hybrid routing (ECOSYSTEM-PROTOCOL.md §10) through the real binary and two
//! mock servers (a "remote" and a "local" one): every hybrid fallback trigger (schema failures,
//! a context the local model cannot hold, an unreachable local server, a local server that sends
//! nothing in time, a tool-call budget spent without edits) with its events and the remote
//! server receiving the conversation so far; `disable_fallback` keeping the local failure;
//! routing `local` (a chat setting) never contacting the remote server; fenced-JSON tool calls;
//! `by_provider` summing to `done.usage`; the spend caps still checked for remote requests.

mod common;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall, Usage};
use common::proto::*;
use serde_json::{Value, json};

const REMOTE_MODEL: &str = "mock/model";
const LOCAL_MODEL: &str = "local/coder";

struct T {
    env: Env,
    id: String,
    s: Bb7,
    remote: MockServer,
    local: MockServer,
}

/// A host whose config has `remote` and a local provider at `local_url` (the local mock's, unless
/// a test points it elsewhere), plus `providers` and top-level `extra` keys.
fn start_with(local_url: Option<String>, providers: Value, extra: Value) -> T {
    let remote = MockServer::start(Script::default());
    let local = MockServer::start(Script::default());
    let env = Env::new();
    let mut p = json!({
        "remote": {"base_url": remote.base_url(), "api_key": "k"},
        "local": {"base_url": local_url.unwrap_or_else(|| local.base_url()), "model": LOCAL_MODEL},
    });
    for (k, v) in providers.as_object().unwrap() {
        if k == "local" {
            for (lk, lv) in v.as_object().unwrap() {
                p["local"][lk] = lv.clone();
            }
        } else {
            p[k] = v.clone();
        }
    }
    let mut config = json!({"providers": p});
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &config.to_string(),
    );
    env.write_local("a.txt", "alpha\n");
    let mut s = env.spawn();
    let root = env.proj_str();
    s.ok(json!({"action": "bb7_init", "project_root": root}));
    s.ok(json!({"action": "init", "project_root": root}));
    let id = s.ok(json!({"action": "chat_new", "name": "t"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    T {
        env,
        id,
        s,
        remote,
        local,
    }
}

fn start(providers: Value) -> T {
    start_with(None, providers, json!({}))
}

/// Sends with `extra` fields; the stream's events and the terminal event.
fn send(s: &mut Bb7, extra: Value) -> (Vec<Value>, Value) {
    let mut req = json!({"action": "send", "content": "go", "model": REMOTE_MODEL});
    for (k, v) in extra.as_object().unwrap() {
        req[k] = v.clone();
    }
    s.send_collect(req)
}

/// The provider events of a stream, as `(kind, data)`.
fn provider_events(evs: &[Value]) -> Vec<(String, Value)> {
    evs.iter()
        .filter(|e| e["type"] == "agent_event")
        .filter(|e| {
            e["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("provider."))
        })
        .map(|e| (e["kind"].as_str().unwrap().to_string(), e["data"].clone()))
        .collect()
}

/// Asserts the stream selected local, fell back for `reason`, then selected remote.
fn assert_fell_back(evs: &[Value], reason: &str) {
    let p = provider_events(evs);
    assert_eq!(p.len(), 3, "{p:?}");
    assert_eq!(p[0].0, "provider.selected");
    assert_eq!(p[0].1, json!({"provider": "local", "model": LOCAL_MODEL}));
    assert_eq!(p[1].0, "provider.fallback");
    assert_eq!(p[1].1["from"], "local");
    assert_eq!(p[1].1["to"], "remote");
    assert_eq!(p[1].1["reason"], reason, "{:?}", p[1]);
    assert_eq!(p[2].0, "provider.selected");
    assert_eq!(p[2].1, json!({"provider": "remote", "model": REMOTE_MODEL}));
}

fn text_reply(text: &str, cost: f64) -> Reply {
    Reply::sse()
        .content(text)
        .finish("stop")
        .usage(Usage::new(100, 20).cost(cost).finish("stop"))
        .done()
}

/// A local reply with this text and no usage at all (as many local servers send).
fn local_text(text: &str) -> Reply {
    Reply::sse().content(text).finish("stop").done()
}

/// Asserts `by_provider` sums to the usage's own fields.
fn assert_sums(usage: &Value) {
    let by = usage["by_provider"].as_object().expect("by_provider");
    for k in ["prompt_tokens", "completion_tokens", "total_tokens"] {
        let sum: u64 = by.values().map(|v| v[k].as_u64().unwrap()).sum();
        assert_eq!(sum, usage[k].as_u64().unwrap(), "{k}: {usage}");
    }
    let cost: f64 = by.values().map(|v| v["cost"].as_f64().unwrap()).sum();
    assert!(
        (cost - usage["cost"].as_f64().unwrap()).abs() < 1e-12,
        "{usage}"
    );
}

fn tool_messages(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect()
}

#[test]
fn schema_failures_fall_back_and_remote_continues_the_conversation() {
    let t = start(json!({}));
    // Step 1: a call that fails read_file's schema (no file_path): failure 1, run (it errs).
    t.local.push(
        Reply::sse()
            .tool_call(ToolCall::new(0, "c1", "read_file", r#"{"path":"a.txt"}"#))
            .finish("tool_calls")
            .done(),
    );
    // Step 2: a fenced call that is not JSON: failure 2, the fallback.
    t.local.push(local_text(
        "Reading.\n```json\n{\"name\": \"read_file\", \"arguments\": {file_path: a.txt}}\n```\n",
    ));
    t.remote.push(text_reply("remote answer", 0.01));
    let mut t = t;
    let (evs, term) = send(&mut t.s, json!({"mode": "agent", "routing": "hybrid_auto"}));
    assert_eq!(term["type"], "done", "{term}");
    assert_fell_back(&evs, "schema_failures");
    let local = t.local.chat_requests();
    let remote = t.remote.chat_requests();
    assert_eq!((local.len(), remote.len()), (2, 1));
    assert_eq!(local[0].body["model"], LOCAL_MODEL);
    assert!(
        local[0].body.get("provider").is_none(),
        "no OpenRouter fields"
    );
    // The remote request is step 2's: step 1's call and its result are in it.
    assert_eq!(remote[0].body["model"], REMOTE_MODEL);
    let results = tool_messages(&remote[0].body);
    assert_eq!(results.len(), 1, "{}", remote[0].body);
    assert_eq!(results[0]["tool_call_id"], "c1");
    let usage = &term["usage"];
    assert_eq!(usage["by_provider"]["local"]["requests"], 2, "{usage}");
    assert_eq!(usage["by_provider"]["local"]["cost"], 0.0);
    assert_eq!(usage["by_provider"]["local"]["estimated"], true);
    assert_eq!(usage["by_provider"]["remote"]["requests"], 1);
    assert_sums(usage);
    // The fenced block never reached the reply text.
    let text: String = evs
        .iter()
        .filter(|e| e["type"] == "chunk")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert!(!text.contains("```json"), "{text}");
    assert!(text.contains("remote answer"), "{text}");
    // The job's trace records the routing too.
    let traces = t.env.chat_dir(&t.id).join("traces");
    let trace: String = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let kinds: Vec<String> = trace
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["kind"].to_string())
        .collect();
    for k in ["provider.selected", "provider.fallback"] {
        assert!(kinds.contains(&format!("\"{k}\"")), "{kinds:?}");
    }
    t.s.shutdown();
}

#[test]
fn a_context_the_local_model_cannot_hold_falls_back_before_asking_it() {
    let t = start(json!({}));
    // The local server's model list says how small the model is (no context_tokens in config).
    t.local.set_models(Reply::json(
        200,
        json!({"data": [{"id": LOCAL_MODEL, "max_model_len": 50}]}),
    ));
    t.remote.push(text_reply("fits here", 0.01));
    let mut t = t;
    let (evs, term) = send(&mut t.s, json!({"routing": "hybrid_auto"}));
    assert_eq!(term["type"], "done", "{term}");
    assert_fell_back(&evs, "context_overflow");
    assert_eq!(
        t.local.chat_requests().len(),
        0,
        "the local model was not asked"
    );
    assert_eq!(t.remote.chat_requests().len(), 1);
    assert!(term["usage"]["by_provider"].get("local").is_none());
    assert_sums(&term["usage"]);
    t.s.shutdown();
}

/// A port nothing listens on.
fn closed_port_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    format!("http://127.0.0.1:{port}/v1")
}

#[test]
fn an_unreachable_local_server_falls_back_and_disable_fallback_keeps_the_error() {
    let mut t = start_with(Some(closed_port_url()), json!({}), json!({}));
    t.remote.push(text_reply("remote", 0.01));
    let (evs, term) = send(&mut t.s, json!({"routing": "hybrid_auto"}));
    assert_eq!(term["type"], "done", "{term}");
    assert_fell_back(&evs, "unreachable");
    assert_eq!(t.remote.chat_requests().len(), 1);

    let (evs, term) = send(
        &mut t.s,
        json!({"routing": "hybrid_auto", "disable_fallback": true}),
    );
    assert_eq!(term["type"], "error", "{term}");
    assert!(
        term["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach the model API"),
        "{term}"
    );
    let p = provider_events(&evs);
    assert_eq!(p.len(), 1, "selected local, no fallback: {p:?}");
    assert_eq!(
        t.remote.chat_requests().len(),
        1,
        "no second remote request"
    );
    assert!(t.s.alive());
    t.s.shutdown();
}

#[test]
fn a_local_server_silent_past_the_timeout_falls_back() {
    let t = start(json!({"hybrid_local_timeout_ms": 300}));
    t.local.push(Reply::sse().stall());
    t.remote.push(text_reply("remote", 0.01));
    let mut t = t;
    let (evs, term) = send(&mut t.s, json!({"routing": "hybrid_auto"}));
    assert_eq!(term["type"], "done", "{term}");
    assert_fell_back(&evs, "timeout");
    assert_eq!(t.local.chat_requests().len(), 1);
    assert_eq!(t.remote.chat_requests().len(), 1);
    t.s.shutdown();
}

#[test]
fn a_budget_spent_without_edits_falls_back_with_the_budget_left() {
    let t = start_with(
        None,
        json!({}),
        json!({"agent": {"max_tool_calls_per_job": 2}}),
    );
    let read = |id: &str| {
        Reply::sse()
            .tool_call(ToolCall::new(
                0,
                id,
                "read_file",
                r#"{"file_path":"a.txt"}"#,
            ))
            .finish("tool_calls")
            .done()
    };
    // The local model reads and reads: its second read would spend the budget, no edit made.
    t.local.push(read("l1"));
    t.local.push(read("l2"));
    t.remote.push(text_reply("remote takes over", 0.01));
    let mut t = t;
    let (evs, term) = send(&mut t.s, json!({"mode": "agent", "routing": "hybrid_auto"}));
    assert_eq!(term["type"], "done", "{term}");
    assert_fell_back(&evs, "budget_without_edits");
    let remote = t.remote.chat_requests();
    assert_eq!(remote.len(), 1);
    // The remote request continues after the first read (its result is there), and still
    // offers tools: one call of the budget is left.
    let results = tool_messages(&remote[0].body);
    assert_eq!(results.len(), 1);
    assert!(results[0]["content"].as_str().unwrap().contains("alpha"));
    assert!(
        remote[0].body["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(term["tool_calls"], 1, "{term}");
    t.s.shutdown();
}

#[test]
fn routing_local_is_a_chat_setting_and_never_contacts_remote() {
    let mut t = start(json!({}));
    t.s.ok(json!({"action": "save_chat_settings", "routing": "local"}));
    assert_eq!(t.s.ok(json!({"action": "chat_get"}))["routing"], "local");
    let e =
        t.s.err(json!({"action": "save_chat_settings", "routing": "cloud"}));
    assert!(e.contains("routing"), "{e}");
    // A fenced call runs like a native one; the next step answers.
    t.local.push(local_text(
        "Let me read it.\n```json\n{\"tool\": \"read_file\", \"args\": {\"file_path\": \"a.txt\"}}\n```",
    ));
    t.local.push(local_text("It says alpha."));
    let (evs, term) = send(&mut t.s, json!({"mode": "agent"}));
    assert_eq!(term["type"], "done", "{term}");
    let p = provider_events(&evs);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].1["provider"], "local");
    let completed: Vec<&Value> = evs
        .iter()
        .filter(|e| e["kind"] == "tool.call.completed")
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["data"]["ok"], true, "{}", completed[0]);
    assert!(
        t.remote.requests().is_empty(),
        "the remote server was never contacted"
    );
    let local = t.local.chat_requests();
    assert_eq!(local.len(), 2);
    assert!(
        tool_messages(&local[1].body)[0]["content"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );
    let usage = &term["usage"];
    assert_eq!(usage["cost"], 0.0);
    assert_eq!(usage["by_provider"]["local"]["estimated"], true);
    assert!(
        usage["prompt_tokens"].as_u64().unwrap() > 0,
        "estimated: {usage}"
    );
    assert_sums(usage);
    t.s.shutdown();
}

#[test]
fn spend_caps_hold_for_remote_requests_not_local_ones() {
    let mut t = start_with(
        None,
        json!({}),
        json!({"spend": {"per_reply_usd": 0.000001}}),
    );
    t.local.push(local_text("free"));
    let (_, term) = send(&mut t.s, json!({"routing": "local"}));
    assert_eq!(term["type"], "done", "{term}");
    let (_, term) = send(&mut t.s, json!({"routing": "remote"}));
    assert_eq!(term["type"], "error", "{term}");
    assert!(
        term["message"].as_str().unwrap().starts_with("Spend cap:"),
        "{term}"
    );
    assert_eq!(t.remote.chat_requests().len(), 0);
    t.s.shutdown();
}

/// Local requests are in the usage ledger (they were not): cost 0 even when the server reports
/// one, their token counts (the server's, else the host's estimate), under the local model's name
/// and the chat, so `get_usage` shows local use beside the remote one.
#[test]
fn local_requests_are_in_the_usage_ledger_at_no_cost() {
    let mut t = start(json!({}));
    t.local.push(local_text("estimated"));
    t.local.push(
        Reply::sse()
            .content("reported")
            .finish("stop")
            .usage(Usage::new(100, 20).cost(0.5).finish("stop"))
            .done(),
    );
    let (_, first) = send(&mut t.s, json!({"routing": "local"}));
    assert_eq!(first["type"], "done", "{first}");
    let (_, second) = send(&mut t.s, json!({"routing": "local"}));
    assert_eq!(second["type"], "done", "{second}");
    assert_eq!(t.local.chat_requests().len(), 2);
    assert!(t.remote.requests().is_empty());
    let rows = |s: &mut Bb7, by: &str| {
        let r = s.ok(json!({"action": "get_usage", "group_by": by}));
        r["rows"].as_array().unwrap().clone()
    };
    let by_model = rows(&mut t.s, "model");
    assert_eq!(
        by_model.len(),
        1,
        "only the local model was asked: {by_model:?}"
    );
    let row = &by_model[0];
    assert_eq!(row["key"], LOCAL_MODEL, "{row}");
    assert_eq!(row["requests"], 2, "{row}");
    assert_eq!(row["cost"], 0.0, "{row}");
    let estimated = first["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(estimated > 0, "{first}");
    assert_eq!(
        row["prompt_tokens"].as_u64().unwrap(),
        estimated + 100,
        "the estimate plus the server's count: {row}"
    );
    assert_eq!(
        row["completion_tokens"].as_u64().unwrap(),
        first["usage"]["completion_tokens"].as_u64().unwrap() + 20,
        "{row}"
    );
    let by_chat = rows(&mut t.s, "chat");
    assert_eq!(by_chat.len(), 1, "{by_chat:?}");
    assert_eq!(by_chat[0]["key"], t.id.as_str());
    assert_eq!(by_chat[0]["requests"], 2);
    t.s.shutdown();
}

#[test]
fn local_routing_without_a_local_provider_is_a_clear_error() {
    let remote = MockServer::start(Script::default());
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": remote.base_url()}).to_string(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "chat_new", "name": "t"}));
    let rid = s.next_id();
    s.send(&json!({"action": "send", "content": "go", "routing": "local", "request_id": rid}));
    let v = s.recv_where("send reply", |v| v.get("request_id") == Some(&json!(rid)));
    assert_eq!(v["type"], "error", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("providers.local"),
        "{v}"
    );
    assert!(s.alive());
    s.shutdown();
}

/// A fenced call in a local reply's text.
fn fenced_read(file: &str) -> String {
    format!(
        "```json\n{{\"name\": \"read_file\", \"arguments\": {{\"file_path\": \"{file}\"}}}}\n```\n"
    )
}

/// Review finding: the text of a local attempt abandoned by a hybrid fallback was already
/// streamed, so the reply held the local text and then the remote one. It is held back until the
/// attempt is kept: neither the chunks nor chat.json have it.
#[test]
fn an_abandoned_local_attempt_s_text_is_not_in_the_reply() {
    let mut t = start(json!({"hybrid_max_schema_failures": 1}));
    t.local.push(local_text(
        "LOCAL-TEXT\n```json\n{\"name\": \"read_file\", \"arguments\": {file_path: a.txt}}\n```\n",
    ));
    t.remote.push(text_reply("remote answer", 0.01));
    let (evs, term) = send(&mut t.s, json!({"mode": "agent", "routing": "hybrid_auto"}));
    assert_eq!(term["type"], "done", "{term}");
    assert_fell_back(&evs, "schema_failures");
    let text: String = evs
        .iter()
        .filter(|e| e["type"] == "chunk")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert!(text.contains("remote answer"), "{text}");
    assert!(!text.contains("LOCAL-TEXT"), "{text}");
    t.s.shutdown();
    let chat = t.env.chat_json(&t.id).to_string();
    assert!(chat.contains("remote answer"), "{chat}");
    assert!(!chat.contains("LOCAL-TEXT"), "{chat}");
}

/// Review finding: the ids of calls found in the local model's text restarted every step, so the
/// conversation held two calls `text_call_0`. They are unique in the reply.
#[test]
fn text_call_ids_are_unique_across_steps() {
    let mut t = start(json!({}));
    t.env.write_local("b.txt", "beta\n");
    t.local.push(local_text(&fenced_read("a.txt")));
    t.local.push(local_text(&fenced_read("b.txt")));
    t.local.push(local_text("both read"));
    let (_evs, term) = send(&mut t.s, json!({"mode": "agent", "routing": "local"}));
    assert_eq!(term["type"], "done", "{term}");
    let local = t.local.chat_requests();
    assert_eq!(local.len(), 3);
    let ids: Vec<Value> = tool_messages(&local[2].body)
        .iter()
        .map(|m| m["tool_call_id"].clone())
        .collect();
    assert_eq!(
        ids,
        [json!("text_call_0"), json!("text_call_1")],
        "{}",
        local[2].body
    );
    t.s.shutdown();
}
