//! Plan mode through the protocol (ECOSYSTEM-PROTOCOL.md §9), against the real binary and the
//! mock server: a plan reply is offered the retrieval tools and `propose_plan` but no edit tool,
//! validates `propose_plan`'s arguments, ends with `plan.proposed` and stores the plan in
//! chat.json; `plan_approve` (with edited steps) starts an agent reply restricted to the plan's
//! files; `plan_reject`'s feedback reaches the next request; bad plan ids are clear errors.

mod common;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::*;
use serde_json::{Value, json};

const MODEL: &str = "mock/plan";

fn start(replies: Vec<Reply>) -> (Env, MockServer, Bb7, String) {
    let server = MockServer::start(Script::new(replies));
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url()}).to_string(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    // A named chat: no title request follows the first reply.
    let id = s.ok(json!({"action": "chat_new", "name": "t"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    (env, server, s, id)
}

/// A call at position `index` of its step (calls of one step need distinct indexes).
fn call_at(index: u32, id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(index, id, name, args.to_string())
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    call_at(0, id, name, args)
}

fn propose(id: &str, steps: Value) -> Reply {
    Reply::tool_calls([call(
        id,
        "propose_plan",
        json!({"summary": "Split the greeting", "steps": steps}),
    )])
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Everything the model was sent, as one string (to look for a text in it).
fn all_text(body: &Value) -> String {
    body["messages"].to_string()
}

fn plan_event(evs: &[Value]) -> Value {
    evs.iter()
        .find(|e| e["type"] == "agent_event" && e["kind"] == "plan.proposed")
        .cloned()
        .unwrap_or_else(|| panic!("no plan.proposed event in {evs:?}"))
}

/// A plan reply: no edit tool offered (an edit call anyway is an unknown tool), a malformed
/// `propose_plan` is a tool error to the model, and the valid plan ends the reply as
/// `plan.proposed` and is in chat.json.
#[test]
fn plan_reply_offers_no_edit_tool_and_records_the_plan() {
    let (env, server, mut s, id) = start(vec![
        // Malformed: no steps; then an edit the model was not offered.
        Reply::tool_calls([
            call("p1", "propose_plan", json!({"summary": "x"})),
            call_at(
                1,
                "w1",
                "write_file",
                json!({"path": "a.txt", "content": "no\n"}),
            ),
        ]),
        propose(
            "p2",
            json!([{"title": "Edit a.txt", "detail": "say hi", "files": ["a.txt"]},
                   {"title": "Check"}]),
        ),
        Reply::text(["Here is my plan."]),
    ]);
    env.write_local("a.txt", "alpha\n");
    s.ok(json!({"action": "save_chat_settings", "mode": "plan"}));
    assert_eq!(s.ok(json!({"action": "chat_get"}))["mode"], "plan");
    let (evs, done) =
        s.send_collect(json!({"action": "send", "content": "plan it", "model": MODEL}));
    assert_eq!(done["type"], "done", "{done}");
    let reqs: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    assert_eq!(reqs.len(), 3);
    for body in &reqs {
        let names = tool_names(body);
        assert!(names.contains(&"propose_plan".to_string()), "{names:?}");
        assert!(names.contains(&"read_file".to_string()), "{names:?}");
        assert!(
            !names.iter().any(|n| n == "write_file" || n == "edit_file"),
            "no edit tool in plan mode: {names:?}"
        );
    }
    let second = all_text(&reqs[1]);
    assert!(
        second.contains("propose_plan: invalid arguments") && second.contains("steps"),
        "{second}"
    );
    assert!(
        second.contains("unknown tool \\\"write_file\\\""),
        "{second}"
    );
    // The plan event is the reply's last agent event.
    let agent_evs: Vec<&Value> = evs.iter().filter(|e| e["type"] == "agent_event").collect();
    let last = agent_evs.last().unwrap();
    assert_eq!(last["kind"], "plan.proposed", "{last}");
    let ev = plan_event(&evs);
    let plan_id = ev["data"]["plan_id"].as_str().unwrap().to_string();
    assert!(plan_id.starts_with("plan-"), "{plan_id}");
    assert_eq!(ev["data"]["summary"], "Split the greeting");
    assert_eq!(ev["data"]["steps"][0]["files"], json!(["a.txt"]));
    assert_eq!(ev["data"]["steps"][1], json!({"title": "Check"}));
    // Stored with the chat, and nothing was written.
    let chat = env.chat_json(&id);
    assert_eq!(chat["plans"][0]["id"], json!(plan_id));
    assert_eq!(chat["plans"][0]["status"], "proposed");
    assert_eq!(chat["plans"][0]["steps"], ev["data"]["steps"]);
    assert_eq!(
        s.ok(json!({"action": "chat_get"}))["plans"][0]["id"],
        json!(plan_id)
    );
    assert!(!env.output_path(&id, "a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.proj().join("a.txt")).unwrap(),
        "alpha\n"
    );
    s.shutdown();
}

fn job_started(evs: &[Value]) -> Value {
    evs.iter()
        .find(|e| e["type"] == "agent_event" && e["kind"] == "job.started")
        .map(|e| e["data"].clone())
        .unwrap_or_else(|| panic!("no job.started event in {evs:?}"))
}

/// `job.started` says what the job is: a plan reply is mode `plan`; the reply `plan_approve`
/// starts is an agent-mode reply (ECOSYSTEM-PROTOCOL.md §9) carrying out that plan, so it names
/// the plan (`plan_id`); a plain agent reply names none.
#[test]
fn job_started_names_the_plan_a_reply_carries_out() {
    let (_env, _server, mut s, _id) = start(vec![
        propose("p1", json!([{"title": "Write a.txt", "files": ["a.txt"]}])),
        Reply::text(["Plan proposed."]),
        Reply::text(["Done."]),
        Reply::text(["Plain agent."]),
    ]);
    let (evs, done) = s.send_collect(
        json!({"action": "send", "content": "plan it", "model": MODEL, "mode": "plan"}),
    );
    assert_eq!(done["type"], "done", "{done}");
    let started = job_started(&evs);
    assert_eq!(started["mode"], "plan", "{started}");
    assert!(started.get("plan_id").is_none(), "{started}");
    let plan_id = plan_event(&evs)["data"]["plan_id"].clone();
    let (evs, done) =
        s.send_collect(json!({"action": "plan_approve", "plan_id": plan_id, "model": MODEL}));
    assert_eq!(done["type"], "done", "{done}");
    let started = job_started(&evs);
    assert_eq!(started["mode"], "agent", "{started}");
    assert_eq!(started["plan_id"], plan_id, "{started}");
    let (evs, done) =
        s.send_collect(json!({"action": "send", "content": "go", "model": MODEL, "mode": "agent"}));
    assert_eq!(done["type"], "done", "{done}");
    let started = job_started(&evs);
    assert_eq!(started["mode"], "agent", "{started}");
    assert!(started.get("plan_id").is_none(), "{started}");
    s.shutdown();
}

/// Approving with edited steps: the agent reply's first request carries the edited plan and the
/// edit tools; an edit outside the plan's files is refused as a tool error while one inside is
/// staged into the output; a decided plan cannot be approved again.
#[test]
fn approve_with_edited_steps_restricts_edits_to_the_plan_files() {
    let (env, server, mut s, id) = start(vec![
        propose("p1", json!([{"title": "Write a.txt", "files": ["a.txt"]}])),
        Reply::text(["Plan proposed."]),
        Reply::tool_calls([
            call(
                "w1",
                "write_file",
                json!({"path": "in.txt", "content": "in\n"}),
            ),
            call_at(
                1,
                "w2",
                "write_file",
                json!({"path": "out.txt", "content": "out\n"}),
            ),
        ]),
        Reply::text(["Done."]),
    ]);
    let (evs, done) = s.send_collect(
        json!({"action": "send", "content": "plan it", "model": MODEL, "mode": "plan"}),
    );
    assert_eq!(done["type"], "done", "{done}");
    let plan_id = plan_event(&evs)["data"]["plan_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (evs, done) = s.send_collect(
        json!({"action": "plan_approve", "chat_id": id, "plan_id": plan_id, "model": MODEL,
               "steps": [{"title": "Create in.txt (edited by the user)", "files": ["./in.txt"]}]}),
    );
    assert_eq!(done["type"], "done", "{done}");
    assert!(
        evs.iter()
            .any(|e| e["type"] == "agent_event" && e["kind"] == "job.started"),
        "an agent reply: {evs:?}"
    );
    let reqs: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    assert_eq!(reqs.len(), 4);
    // The latest user message is the approval with the edited plan.
    let user = reqs[2]["messages"][1]["content"].as_str().unwrap();
    let latest = &user[user.find("@latest_user_message").expect(user)..];
    assert!(
        latest.contains("Create in.txt (edited by the user)") && latest.contains(&plan_id),
        "{latest}"
    );
    assert!(
        !latest.contains("Write a.txt"),
        "the edited steps replace the proposed ones: {latest}"
    );
    let names = tool_names(&reqs[2]);
    assert!(names.contains(&"write_file".to_string()), "{names:?}");
    assert!(!names.contains(&"propose_plan".to_string()), "{names:?}");
    let results = all_text(&reqs[3]);
    assert!(
        results.contains("out.txt is not among the files of the approved plan (in.txt)"),
        "{results}"
    );
    assert_eq!(
        std::fs::read_to_string(env.output_path(&id, "in.txt")).unwrap(),
        "in\n"
    );
    assert!(!env.output_path(&id, "out.txt").exists());
    let chat = env.chat_json(&id);
    assert_eq!(chat["plans"][0]["status"], "approved");
    assert_eq!(
        chat["plans"][0]["steps"][0]["title"],
        "Create in.txt (edited by the user)"
    );
    let e = s.err(json!({"action": "plan_approve", "plan_id": plan_id}));
    assert!(e.contains("was already approved"), "{e}");
    assert!(s.alive());
    s.shutdown();
}

/// `restrict_to_plan_files: false` lets the approved reply edit any file.
#[test]
fn approve_unrestricted_allows_other_files() {
    let (env, _server, mut s, id) = start(vec![
        propose("p1", json!([{"title": "Write a.txt", "files": ["a.txt"]}])),
        Reply::text(["Plan proposed."]),
        Reply::tool_calls([call(
            "w1",
            "write_file",
            json!({"path": "b.txt", "content": "b\n"}),
        )]),
        Reply::text(["Done."]),
    ]);
    let (evs, _) = s.send_collect(
        json!({"action": "send", "content": "plan it", "model": MODEL, "mode": "plan"}),
    );
    let plan_id = plan_event(&evs)["data"]["plan_id"].clone();
    let (_, done) = s.send_collect(
        json!({"action": "plan_approve", "plan_id": plan_id, "model": MODEL,
               "restrict_to_plan_files": false}),
    );
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(
        std::fs::read_to_string(env.output_path(&id, "b.txt")).unwrap(),
        "b\n"
    );
    s.shutdown();
}

/// Rejecting records the status and the feedback, and the next request carries the feedback.
#[test]
fn reject_feedback_reaches_the_next_request() {
    let (env, server, mut s, id) = start(vec![
        propose("p1", json!([{"title": "Rewrite everything"}])),
        Reply::text(["Plan proposed."]),
        Reply::text(["Understood."]),
    ]);
    let (evs, _) = s.send_collect(
        json!({"action": "send", "content": "plan it", "model": MODEL, "mode": "plan"}),
    );
    let plan_id = plan_event(&evs)["data"]["plan_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.ok(json!({"action": "plan_reject", "plan_id": plan_id,
                        "feedback": "Keep the old API; only add a flag"}));
    assert_eq!(r["status"], "rejected");
    let chat = env.chat_json(&id);
    assert_eq!(chat["plans"][0]["status"], "rejected");
    assert_eq!(
        chat["plans"][0]["feedback"],
        "Keep the old API; only add a flag"
    );
    let (_, done) = s.send_collect(
        json!({"action": "send", "content": "try again", "model": MODEL, "mode": "plan"}),
    );
    assert_eq!(done["type"], "done", "{done}");
    let reqs: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    let last = all_text(reqs.last().unwrap());
    assert!(
        last.contains("Keep the old API; only add a flag") && last.contains(&plan_id),
        "{last}"
    );
    let e = s.err(json!({"action": "plan_reject", "plan_id": plan_id}));
    assert!(e.contains("was already rejected"), "{e}");
    s.shutdown();
}

/// Unknown plan ids, bad fields and plan mode in a global chat are clear errors; the host keeps
/// serving.
#[test]
fn bad_plan_ids_error_and_the_host_keeps_serving() {
    let (_env, server, mut s, _id) = start(vec![]);
    let e = s.err(json!({"action": "plan_approve", "plan_id": "plan-nope"}));
    assert!(e.starts_with("Unknown plan_id: plan-nope"), "{e}");
    let e = s.err(json!({"action": "plan_reject", "plan_id": "plan-nope", "feedback": "x"}));
    assert!(e.starts_with("Unknown plan_id: plan-nope"), "{e}");
    let e = s.err(json!({"action": "plan_approve"}));
    assert!(e.contains("plan_id"), "{e}");
    let e = s.err(json!({"action": "plan_approve", "plan_id": "p", "steps": [{"nope": 1}]}));
    assert!(e.starts_with("Invalid field: steps"), "{e}");
    let e = s.err(json!({"action": "plan_approve", "plan_id": "p", "steps": []}));
    assert!(e.contains("steps must have 1 to"), "{e}");
    let e = s.err(json!({"action": "plan_approve", "plan_id": "p",
                         "restrict_to_plan_files": "yes"}));
    assert!(e.contains("restrict_to_plan_files"), "{e}");
    let e = s.err(json!({"action": "plan_reject", "chat_id": "other", "plan_id": "p"}));
    assert!(e.contains("chat_id other is not the active chat"), "{e}");
    s.ok(json!({"action": "chat_new", "global": true, "name": "g"}));
    let e = s.err(json!({"action": "save_chat_settings", "mode": "plan"}));
    assert!(e.contains("Plan mode needs a project"), "{e}");
    let e = s.err(json!({"action": "send", "content": "x", "mode": "plan"}));
    assert!(e.contains("Plan mode needs a project"), "{e}");
    assert!(s.alive());
    s.ok(json!({"action": "ping"}));
    assert!(server.chat_requests().is_empty());
    s.shutdown();
}
