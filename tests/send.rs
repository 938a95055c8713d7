//! `send` end to end: the real `bb7` binary against the local mock OpenAI-compatible server
//! (`bb7-mock-llm`). Each test scripts the model's replies, drives the protocol, and checks the
//! streamed events, the terminal event, chat.json, the chat's `output/`, and the request bodies
//! the mock received (SPEC.md "LLM Request Assembly", "LLM Response Handling", "Stream
//! Cancellation", "Auto-Generated Titles"; EDITS.md; PROTOCOL-ADDENDUM.md).

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use bb7_mock_llm::{LineEnds, MockServer, RecordedRequest, Reply, Script, ToolCall, Usage};
use common::proto::*;
use serde_json::{Value, json};

const MODEL: &str = "mock/model";
const TITLE_MODEL: &str = "mock/title";
const TITLE: &str = "Generated Title";
const ABORTED: &str = "Response aborted by user.";
const BUSY: &str = "Another request is already in progress";
const REATTEMPT: &str = "\n[Reattempting to apply file changes...]\n";

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// One test's world: the mock server, an isolated tree, a running bb7 with an active chat.
struct T {
    env: Env,
    server: MockServer,
    s: Bb7,
    id: String,
}

fn config(server: &MockServer, extra: &Value) -> Value {
    let mut c =
        json!({"api_key": "test-key", "base_url": server.base_url(), "title_model": TITLE_MODEL});
    for (k, v) in extra.as_object().expect("config object") {
        c[k] = v.clone();
    }
    c
}

fn write_config(env: &Env, server: &MockServer, extra: &Value) {
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &config(server, extra).to_string(),
    );
}

fn script(replies: Vec<Reply>) -> Script {
    Script::new(replies).with_model_reply(TITLE_MODEL, Reply::text([TITLE]))
}

/// A project with one active chat named `chat_name` (`None`: the default name, so titles are made).
fn setup_full(replies: Vec<Reply>, extra: Value, chat_name: Option<&str>, global: bool) -> T {
    let server = MockServer::start(script(replies));
    let env = Env::new();
    write_config(&env, &server, &extra);
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let mut req = json!({"action": "chat_new", "global": global});
    if let Some(n) = chat_name {
        req["name"] = json!(n);
    }
    let r = s.ok(req);
    let id = r["id"].as_str().expect("chat id").to_string();
    T { env, server, s, id }
}

fn setup_with(replies: Vec<Reply>, extra: Value) -> T {
    setup_full(replies, extra, Some("test chat"), false)
}

fn setup(replies: Vec<Reply>) -> T {
    setup_with(replies, json!({}))
}

impl T {
    /// Adds a project file to the context (writing it to disk too).
    fn add(&mut self, path: &str, content: &str) {
        self.env.write_local(path, content);
        self.s
            .ok(json!({"action": "context_add", "path": path, "content": content}));
    }

    fn add_ro(&mut self, path: &str, content: &str) {
        self.add(path, content);
        self.s
            .ok(json!({"action": "context_set_readonly", "path": path, "readonly": true}));
    }

    /// Sends `content` with model MODEL; returns the streamed events and the terminal event.
    fn send(&mut self, content: &str) -> (Vec<Value>, Value) {
        self.send_req(json!({"action": "send", "content": content, "model": MODEL}))
    }

    fn send_req(&mut self, req: Value) -> (Vec<Value>, Value) {
        let id = self.start_send(req);
        self.finish(&id)
    }

    /// Writes a send request and returns its request id, without waiting.
    fn start_send(&mut self, mut req: Value) -> String {
        let id = self.s.next_id();
        req["request_id"] = json!(id);
        self.s.send(&req);
        id
    }

    /// Everything carrying request id `id` up to its terminal event.
    fn finish(&mut self, id: &str) -> (Vec<Value>, Value) {
        let want = json!(id);
        let mut evs = Vec::new();
        loop {
            let v = self
                .s
                .recv_where("a send event", |v| v.get("request_id") == Some(&want));
            match v["type"].as_str() {
                Some("done" | "diff_error" | "error") => return (evs, v),
                Some("chunk" | "thinking") => {
                    assert!(v["content"].is_string(), "event without content: {v}");
                    evs.push(v)
                }
                _ => panic!("unexpected event for a send: {v}"),
            }
        }
    }

    fn chat(&self) -> Value {
        self.env.chat_json(&self.id)
    }

    /// The conversation in chat.json: every message except the context-event records that
    /// context actions append.
    fn messages(&self) -> Vec<Value> {
        list(&self.chat()["messages"])
            .into_iter()
            .filter(|m| !parts_of(m).iter().all(|p| p["type"] == "context_event"))
            .collect()
    }

    /// The chat-completion requests of the replies (title requests left out).
    fn reqs(&self) -> Vec<RecordedRequest> {
        self.server
            .chat_requests()
            .into_iter()
            .filter(|r| r.body["model"] != TITLE_MODEL)
            .collect()
    }

    fn body(&self, i: usize) -> Value {
        let reqs = self.reqs();
        assert!(reqs.len() > i, "only {} requests: {reqs:?}", reqs.len());
        reqs[i].body.clone()
    }

    fn output(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.env.output_path(&self.id, rel)).ok()
    }

    fn output_files(&self) -> Vec<String> {
        let dir = self.env.chat_dir(&self.id).join("output");
        let mut v: Vec<String> = files_under(&dir)
            .into_iter()
            .map(|(p, _)| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        v.sort();
        v
    }
}

fn text_of(evs: &[Value], kind: &str) -> String {
    evs.iter()
        .filter(|e| e["type"] == kind)
        .map(|e| e["content"].as_str().unwrap().to_string())
        .collect()
}

fn chunks(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .filter(|e| e["type"] == "chunk")
        .map(|e| e["content"].as_str().unwrap().to_string())
        .collect()
}

/// The user message text of a request body.
fn user_content(body: &Value) -> String {
    let msgs = body["messages"].as_array().expect("messages");
    assert_eq!(msgs.len(), 2, "a request is [system, user]: {body}");
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[1]["role"], "user");
    msgs[1]["content"]
        .as_str()
        .expect("user content")
        .to_string()
}

fn tool_names(body: &Value) -> Vec<String> {
    list(body.get("tools").unwrap_or(&Value::Null))
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn pos(hay: &str, needle: &str) -> usize {
    hay.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not found in:\n{hay}"))
}

fn write_call(index: u32, id: &str, path: &str, content: &str) -> ToolCall {
    ToolCall::new(
        index,
        id,
        "write_file",
        json!({"path": path, "content": content}).to_string(),
    )
}

fn default_usage() -> Value {
    json!({"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 40,
           "total_tokens": 120, "cost": 0.00042})
}

fn assert_usage(u: &Value, want: &Value) {
    for k in [
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "total_tokens",
    ] {
        assert_eq!(u[k], want[k], "usage.{k}: {u}");
    }
    let (a, b) = (u["cost"].as_f64().unwrap(), want["cost"].as_f64().unwrap());
    assert!((a - b).abs() < 1e-12, "usage.cost {a} != {b}");
}

fn assert_error_recorded(t: &T, term: &Value) {
    assert_eq!(term["type"], "error", "{term}");
    let msg = term["message"].as_str().expect("message");
    let msgs = t.messages();
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "system", "{msgs:?}");
    assert_eq!(msg_text(last), msg, "the system message is the error text");
}

fn parts_of(m: &Value) -> Vec<Value> {
    list(&m["parts"])
}

// ---------------------------------------------------------------------------------------------
// Streaming and recording
// ---------------------------------------------------------------------------------------------

#[test]
fn plain_text_is_streamed_and_recorded() {
    let mut t = setup(vec![Reply::text(["Hel", "lo ", "world"])]);
    t.add("a.txt", "alpha\n");
    let (evs, term) = t.send("say hello");
    assert!(evs.iter().all(|e| e["type"] == "chunk"), "{evs:?}");
    assert_eq!(chunks(&evs), ["Hel", "lo ", "world"]);
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(list(&term["output_files"]), Vec::<Value>::new());
    assert_usage(&term["usage"], &default_usage());
    assert!(term["duration"].as_f64().unwrap() >= 0.0, "{term}");

    let msgs = t.messages();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    let (u, a) = (&msgs[0], &msgs[1]);
    assert_eq!(u["role"], "user");
    assert_eq!(msg_text(u), "say hello");
    assert_eq!(u["model"], MODEL);
    assert_eq!(
        u["context_snapshot"],
        json!([{"path": "a.txt", "file_id": fid("a.txt", "alpha\n")}])
    );
    assert_eq!(a["role"], "assistant");
    assert_eq!(a["model"], MODEL);
    assert_eq!(msg_text(a), "Hello world");
    assert_rfc3339(a["timestamp"].as_str().expect("timestamp"));
    assert_usage(&a["usage"], &default_usage());
    assert!(
        list(a.get("output_files").unwrap_or(&Value::Null)).is_empty(),
        "{a}"
    );

    let reqs = t.reqs();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].authorization(), Some("Bearer test-key"));
    assert_eq!(reqs[0].body["stream"], true);
    assert_eq!(reqs[0].body["model"], MODEL);
    assert!(user_content(&reqs[0].body).contains("say hello"));
    // The usage log has one line for the reply.
    let log = fs::read_to_string(t.env.home().join(".bb7/usage.jsonl")).expect("usage log");
    let line: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(line["outcome"], "done");
    assert_eq!(line["chat_id"], t.id.as_str());
    t.s.shutdown();
}

/// The names of process `pid`'s threads, sorted.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(format!("/proc/{pid}/task"))
        .expect("/proc/<pid>/task")
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim_end().to_string())
        .collect();
    names.sort();
    names
}

/// Issue 30: every streamed chunk cost a wake across tokio's two I/O workers (the connection
/// task on one, the reply reading it on the other), and the tokenizer was built after the first
/// reply even in sessions that never count. A session now runs one I/O worker beside the main
/// thread and builds nothing ahead; a long reply still streams whole. And the runtime is started
/// by the first action that needs one: until then the session is one thread, so end of input
/// exits without waking (and waiting for) an idle worker.
#[test]
fn a_session_runs_one_io_worker_and_streams_whole() {
    let words: Vec<String> = (0..300).map(|i| format!("w{i} ")).collect();
    let mut t = setup(vec![Reply::text(words.clone())]);
    // (The sweep of stale temporaries `init` starts ends on its own.)
    let deadline = Instant::now() + Duration::from_secs(10);
    while thread_names(t.s.pid) != ["bb7"] && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(thread_names(t.s.pid), ["bb7"]);
    let (evs, term) = t.send("go");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(chunks(&evs), words);
    assert_eq!(msg_text(&t.messages()[1]), words.concat());
    let names = thread_names(t.s.pid);
    assert!(names.iter().any(|n| n == "bb7-io"), "{names:?}");
    assert!(
        names.iter().all(|n| n == "bb7" || n == "bb7-io"),
        "{names:?}"
    );
    t.s.shutdown();
}

/// Lines may end with a bare CR (the SSE rules allow CR, LF or CRLF). Such a body ends with the
/// CR of its last event's empty line, which the decoder held back waiting for an LF that never
/// comes: the last event (here the one with the finish reason) was dropped and the reply failed
/// as cut off. Now the end of the body ends that line, and the reply is whole.
#[test]
fn a_reply_with_bare_cr_line_ends_is_read_to_its_last_event() {
    let mut t = setup(vec![
        Reply::sse()
            .contents(["Hel", "lo"])
            .finish("stop")
            .line_ends(LineEnds::Cr),
    ]);
    let (evs, term) = t.send("say hello");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(chunks(&evs), ["Hel", "lo"]);
    assert_eq!(msg_text(&t.messages()[1]), "Hello");
    t.s.shutdown();
}

#[test]
fn user_message_is_saved_before_the_reply_arrives() {
    let mut t = setup(vec![Reply::slow_text(["a", "b", "c", "d"], 150)]);
    let id = t.start_send(json!({"action": "send", "content": "early", "model": MODEL}));
    let want = json!(id);
    t.s.recv_where("the first chunk", |v| {
        v.get("request_id") == Some(&want) && v["type"] == "chunk"
    });
    let msgs = t.messages();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msg_text(&msgs[0]), "early");
    let (_, term) = t.finish(&id);
    assert_eq!(term["type"], "done");
    assert_eq!(msg_text(&t.messages()[1]), "abcd");
}

#[test]
fn reasoning_is_streamed_as_thinking_and_stored() {
    let mut t = setup(vec![Reply::reasoning_then_text(
        ["let me ", "think"],
        ["The ", "answer"],
    )]);
    let (evs, term) = t.send_req(json!({"action": "send", "content": "q", "model": MODEL,
        "reasoning_effort": "high"}));
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(text_of(&evs, "thinking"), "let me think");
    assert_eq!(text_of(&evs, "chunk"), "The answer");
    // Thinking comes first, as streamed.
    let first_chunk = evs.iter().position(|e| e["type"] == "chunk").unwrap();
    let last_thinking = evs.iter().rposition(|e| e["type"] == "thinking").unwrap();
    assert!(last_thinking < first_chunk);

    let a = &t.messages()[1];
    let parts = parts_of(a);
    assert_eq!(parts[0]["type"], "thinking", "{a}");
    assert_eq!(parts[0]["content"], "let me think");
    assert_eq!(parts[1]["type"], "text");
    assert_eq!(parts[1]["content"], "The answer");

    let body = t.body(0);
    assert_eq!(body["reasoning"], json!({"effort": "high"}));
    assert_eq!(body["provider"]["require_parameters"], true);

    // The reasoning goes back to the model in the next request's history.
    t.server.push(Reply::text(["ok"]));
    let (_, term) = t.send("next");
    assert_eq!(term["type"], "done");
    let user = user_content(&t.body(1));
    assert!(
        user.contains("@reasoning\nlet me think\n@end_reasoning"),
        "{user}"
    );
}

#[test]
fn comment_lines_and_nospace_data_are_ignored() {
    let chunk = json!({"id": "gen-x", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "B"}, "finish_reason": null}]});
    let reply = Reply::sse()
        .processing()
        .content("A")
        .comment("keep-alive")
        .processing()
        .data_nospace(chunk)
        .content("C")
        .finish_ok("stop");
    let mut t = setup(vec![reply]);
    let (evs, term) = t.send("hi");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(text_of(&evs, "chunk"), "ABC");
    assert!(
        !evs.iter()
            .any(|e| e["content"].as_str().unwrap().contains("PROCESSING")),
        "{evs:?}"
    );
    assert_eq!(msg_text(&t.messages()[1]), "ABC");
}

#[test]
fn usage_frame_is_reported_and_stored() {
    let reply = Reply::sse()
        .content("x")
        .finish("stop")
        .usage(
            Usage::new(1234, 56)
                .cached(1000)
                .reasoning(7)
                .cost(0.0125)
                .finish("stop"),
        )
        .done();
    let mut t = setup(vec![reply]);
    let (_, term) = t.send("hi");
    let want = json!({"prompt_tokens": 1234, "completion_tokens": 56, "cached_tokens": 1000,
        "total_tokens": 1290, "cost": 0.0125});
    assert_eq!(term["type"], "done", "{term}");
    assert_usage(&term["usage"], &want);
    assert_usage(&t.messages()[1]["usage"], &want);
}

// ---------------------------------------------------------------------------------------------
// Tool calls
// ---------------------------------------------------------------------------------------------

#[test]
fn tool_call_split_across_many_fragments_is_committed() {
    let call = write_call(0, "call_1", "a.txt", "two\nlines\n").fragments(30);
    let mut t = setup(vec![
        Reply::sse()
            .content("Rewriting.")
            .tool_call(call)
            .finish_ok("tool_calls"),
    ]);
    t.add("a.txt", "one\n");
    let (evs, term) = t.send("rewrite a");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(term["output_files"], json!(["a.txt"]));
    assert_eq!(
        chunks(&evs),
        ["Rewriting.", "\n[Assistant modified: a.txt]\n"]
    );
    assert_eq!(t.output("a.txt").as_deref(), Some("two\nlines\n"));
    // The project file itself is untouched until applied.
    assert_eq!(
        fs::read_to_string(t.env.proj().join("a.txt")).unwrap(),
        "one\n"
    );

    let a = &t.messages()[1];
    assert_eq!(a["output_files"], json!(["a.txt"]));
    // Status chunks are not saved in history.
    assert_eq!(msg_text(a), "Rewriting.");
    let ev = event(&t.chat(), "AssistantWriteFile", "a.txt");
    assert_eq!(ev["version"], fid("a.txt", "two\nlines\n"));
    assert_eq!(ev["prev_version"], fid("a.txt", "one\n"));

    // The next request shows the pending output as the version to edit.
    t.server.push(Reply::text(["ok"]));
    t.send("again");
    let user = user_content(&t.body(1));
    let line = format!(
        "@file id={} path=a.txt mode=rw source=output status=pending_output",
        fid("a.txt", "two\nlines\n")
    );
    assert!(user.contains(&line), "{user}");
}

#[test]
fn two_tool_calls_interleaved_by_index() {
    let a = write_call(0, "call_a", "x.txt", "content of x, quite long\n").fragments(6);
    let b = write_call(1, "call_b", "y.txt", "content of y, also long\n").fragments(6);
    let mut t = setup(vec![Reply::interleaved_tool_calls([a, b])]);
    let (evs, term) = t.send("make two files");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(
        chunks(&evs),
        [
            "\n[Assistant added: x.txt]\n",
            "\n[Assistant added: y.txt]\n"
        ]
    );
    assert_eq!(term["output_files"], json!(["x.txt", "y.txt"]));
    assert_eq!(
        t.output("x.txt").as_deref(),
        Some("content of x, quite long\n")
    );
    assert_eq!(
        t.output("y.txt").as_deref(),
        Some("content of y, also long\n")
    );
    let ev = event(&t.chat(), "AssistantWriteFile", "y.txt");
    assert_eq!(ev["version"], fid("y.txt", "content of y, also long\n"));
    assert!(ev.get("prev_version").is_none(), "a new file: {ev}");
}

#[test]
fn repeated_ids_on_fragments_make_one_call() {
    let call = write_call(0, "call_r", "r.txt", "repeated id and name\n")
        .fragments(5)
        .repeat_id_name();
    let mut t = setup(vec![Reply::tool_calls([call])]);
    let (evs, term) = t.send("write r");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(chunks(&evs), ["\n[Assistant added: r.txt]\n"]);
    assert_eq!(t.output("r.txt").as_deref(), Some("repeated id and name\n"));
    assert_eq!(t.output_files(), ["r.txt"]);
}

#[test]
fn edit_file_applies_to_the_context_version() {
    let edit = ToolCall::edit_file(
        0,
        "call_e",
        &[
            ("a.txt", "{{file_id:a.txt}}", "beta", "BETA"),
            ("b.txt", "{{file_id:b.txt}}", "two", "TWO"),
        ],
    )
    .fragments(8);
    let mut t = setup(vec![Reply::tool_calls([edit])]);
    t.add("a.txt", "alpha\nbeta\n");
    t.add("b.txt", "one\ntwo\n");
    let (evs, term) = t.send("edit both");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(chunks(&evs), ["\n[Assistant modified: 2 edit(s)]\n"]);
    assert_eq!(t.output("a.txt").as_deref(), Some("alpha\nBETA\n"));
    assert_eq!(t.output("b.txt").as_deref(), Some("one\nTWO\n"));
    assert_eq!(term["output_files"], json!(["a.txt", "b.txt"]));
}

#[test]
fn invalid_arguments_fail_the_reply_and_commit_nothing() {
    let good = write_call(0, "call_ok", "ok.txt", "fine\n");
    let bad = ToolCall::new(
        1,
        "call_bad",
        "write_file",
        r#"{"path": "bad.txt", "content": "#,
    );
    let mut t = setup(vec![
        Reply::sse()
            .content("Writing.")
            .tool_call(good)
            .tool_call(bad)
            .finish_ok("tool_calls"),
    ]);
    let (evs, term) = t.send("write");
    assert_eq!(term["type"], "diff_error", "{term}");
    let errors = list(&term["errors"]);
    assert_eq!(errors.len(), 1, "{term}");
    assert!(
        errors[0].as_str().unwrap().contains("invalid arguments"),
        "{term}"
    );
    let calls = list(&term["tool_calls"]);
    assert_eq!(calls.len(), 2, "{term}");
    assert_eq!(calls[0]["tool"], "write_file");
    assert_eq!(calls[0]["id"], "call_ok");
    assert_eq!(calls[0]["path"], "ok.txt");
    assert_eq!(calls[0]["args"]["content"], "fine\n");
    assert!(calls[0].get("error").is_none(), "{term}");
    assert_eq!(calls[1]["id"], "call_bad");
    assert_eq!(calls[1]["args_raw"], r#"{"path": "bad.txt", "content": "#);
    assert!(calls[1]["error"].is_string(), "{term}");
    assert_usage(&term["usage"], &default_usage());
    assert!(term["duration"].is_number());
    // The success streamed its status, but nothing was committed (all or nothing).
    assert!(chunks(&evs).contains(&"\n[Assistant added: ok.txt]\n".to_string()));
    assert!(t.output_files().is_empty(), "{:?}", t.output_files());
    let a = &t.messages()[1];
    assert_eq!(msg_text(a), "Writing.");
    assert!(list(a.get("output_files").unwrap_or(&Value::Null)).is_empty());
    assert!(events(&t.chat()).is_empty(), "{:?}", events(&t.chat()));
}

#[test]
fn failed_edit_commits_nothing() {
    let write = write_call(0, "c1", "new.txt", "new\n");
    let edit = ToolCall::edit_file(
        1,
        "c2",
        &[("a.txt", "{{file_id:a.txt}}", "no such text", "x")],
    );
    let mut t = setup(vec![Reply::tool_calls([write, edit])]);
    t.add("a.txt", "alpha\n");
    let (_, term) = t.send("edit");
    assert_eq!(term["type"], "diff_error", "{term}");
    let errors = list(&term["errors"]);
    assert!(
        errors[0].as_str().unwrap().contains("old_string not found"),
        "{term}"
    );
    assert_eq!(list(&term["tool_calls"])[1]["path"], "a.txt");
    assert!(t.output_files().is_empty(), "{:?}", t.output_files());
}

#[test]
fn write_to_a_read_only_file_is_a_tool_error() {
    let mut t = setup(vec![Reply::tool_calls([write_call(
        0,
        "c1",
        "ro.txt",
        "changed\n",
    )])]);
    t.add_ro("ro.txt", "original\n");
    let (_, term) = t.send("change ro");
    assert_eq!(term["type"], "diff_error", "{term}");
    let err = list(&term["errors"])[0].as_str().unwrap().to_string();
    assert!(err.contains("read-only"), "{err}");
    assert!(t.output_files().is_empty());
    assert_eq!(
        fs::read_to_string(t.env.proj().join("ro.txt")).unwrap(),
        "original\n"
    );
}

#[test]
fn retry_context_is_rendered_and_never_stored() {
    let mut t = setup(vec![Reply::text(["fixed"])]);
    t.add("a.txt", "alpha\n");
    let rc = json!({
        "errors": ["edit_file: old_string not found in file ZZMARK"],
        "tool_calls": [{"tool": "edit_file", "id": "c9",
            "args": {"edits": [{"path": "a.txt", "file_id": "deadbeef", "old_string": "q", "new_string": "r"}]},
            "path": "a.txt", "error": "edit_file: old_string not found in file ZZMARK"}]
    });
    let (_, term) = t.send_req(
        json!({"action": "send", "content": "try again", "model": MODEL,
        "retry_context": rc}),
    );
    assert_eq!(term["type"], "done", "{term}");
    let user = user_content(&t.body(0));
    let p = pos(&user, "@retry_context");
    assert!(pos(&user, "@files_summary") < p, "{user}");
    assert!(p < pos(&user, "@writable_files"), "{user}");
    assert!(
        user[p..].contains("old_string not found in file ZZMARK"),
        "{user}"
    );
    assert!(
        user[p..].contains("deadbeef"),
        "the calls are shown: {user}"
    );
    let raw = fs::read_to_string(t.env.chat_dir(&t.id).join("chat.json")).unwrap();
    assert!(!raw.contains("ZZMARK"), "retry context stored: {raw}");
    assert!(!raw.contains("@retry_context"));
    // A bad retry_context is refused before anything is sent.
    let n = t.reqs().len();
    let r =
        t.s.req(json!({"action": "send", "content": "x", "retry_context": "nope"}));
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(t.reqs().len(), n);
}

#[test]
fn auto_retry_repairs_failed_edits_once() {
    let first = Reply::sse()
        .reasoning("hmm")
        .content("Try 1.")
        .tool_call(write_call(0, "c1", "new.txt", "new\n"))
        .tool_call(ToolCall::edit_file(
            1,
            "c2",
            &[("a.txt", "{{file_id:a.txt}}", "gamma", "GAMMA")],
        ))
        .finish_ok("tool_calls");
    let second = Reply::tool_calls([ToolCall::edit_file(
        0,
        "c3",
        &[("a.txt", "{{file_id:a.txt}}", "beta", "BETA")],
    )]);
    let mut t = setup_with(
        vec![first, second],
        json!({"auto_retry_partial_edits": true}),
    );
    t.add("a.txt", "alpha\nbeta\n");
    let (evs, term) = t.send_req(json!({"action": "send", "content": "edit", "model": MODEL,
        "reasoning_effort": "high"}));
    assert_eq!(term["type"], "done", "{term}");
    let cs = chunks(&evs);
    assert_eq!(
        cs,
        [
            "Try 1.",
            "\n[Assistant added: new.txt]\n",
            REATTEMPT,
            "\n[Assistant modified: a.txt]\n"
        ]
    );
    assert_eq!(t.output("a.txt").as_deref(), Some("alpha\nBETA\n"));
    assert_eq!(t.output("new.txt").as_deref(), Some("new\n"));
    let mut out = list(&term["output_files"]);
    out.sort_by_key(|v| v.to_string());
    assert_eq!(out, [json!("a.txt"), json!("new.txt")]);
    assert_usage(
        &term["usage"],
        &json!({"prompt_tokens": 200, "completion_tokens": 40, "cached_tokens": 80,
            "total_tokens": 240, "cost": 0.00084}),
    );
    let reqs = t.reqs();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].body["reasoning"], json!({"effort": "high"}));
    assert!(reqs[1].body.get("reasoning").is_none(), "{}", reqs[1].body);
    let u1 = user_content(&reqs[0].body);
    let u2 = user_content(&reqs[1].body);
    assert!(!u1.contains("@retry_context"));
    assert!(u2.contains("@retry_context"), "{u2}");
    assert!(u2.contains("old_string not found"), "{u2}");
    // The kept write is shown to the retry as the model's pending file.
    let added = format!(
        "@file id={} path=new.txt mode=rw source=output status=added_output",
        fid("new.txt", "new\n")
    );
    assert!(u2.contains(&added), "{u2}");
    // Stored: one assistant message, the reattempt chunk not in it, both writes recorded.
    let msgs = t.messages();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(!msg_text(&msgs[1]).contains("Reattempting"));
    event(&t.chat(), "AssistantWriteFile", "a.txt");
    event(&t.chat(), "AssistantWriteFile", "new.txt");
}

/// Chat mode is the agent loop with one step: when the repair fails too there is no third
/// request, the reattempt chunk is streamed once, the `diff_error` lists the calls of both attempts
/// but only the repair's errors, and no agent event or job trace is made (`finish` fails on any
/// event that is not a chunk).
#[test]
fn auto_retry_repairs_only_once_and_chat_mode_reports_no_agent_job() {
    let bad = |id: &str| {
        Reply::tool_calls([ToolCall::edit_file(
            0,
            id,
            &[("a.txt", "{{file_id:a.txt}}", "gamma", "GAMMA")],
        )])
    };
    let mut t = setup_with(
        vec![bad("c1"), bad("c2"), Reply::text(["never asked"])],
        json!({"auto_retry_partial_edits": true}),
    );
    t.add("a.txt", "alpha\n");
    let (evs, term) = t.send("edit");
    assert_eq!(term["type"], "diff_error", "{term}");
    assert_eq!(t.reqs().len(), 2);
    assert_eq!(chunks(&evs), [REATTEMPT]);
    assert_eq!(list(&term["errors"]).len(), 1, "{term}");
    let calls = list(&term["tool_calls"]);
    let ids: Vec<&str> = calls.iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(ids, ["c1", "c2"], "{term}");
    assert!(calls.iter().all(|c| c["error"].is_string()), "{term}");
    assert!(t.chat().get("mode").is_none());
    assert!(!t.env.chat_dir(&t.id).join("traces").exists());
    let msgs = t.messages();
    assert!(msgs.iter().all(|m| m.get("agent").is_none()), "{msgs:?}");
}

#[test]
fn without_auto_retry_a_failed_edit_is_not_retried() {
    let mut t = setup(vec![Reply::tool_calls([ToolCall::edit_file(
        0,
        "c2",
        &[("a.txt", "{{file_id:a.txt}}", "gamma", "GAMMA")],
    )])]);
    t.add("a.txt", "alpha\n");
    let (evs, term) = t.send("edit");
    assert_eq!(term["type"], "diff_error", "{term}");
    assert!(!chunks(&evs).iter().any(|c| c == REATTEMPT));
    assert_eq!(t.reqs().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------------

#[test]
fn request_blocks_in_order_and_prefix_stable() {
    let mut t = setup(vec![
        Reply::text(["first answer"]),
        Reply::text(["second answer"]),
        Reply::text(["third answer"]),
    ]);
    t.add_ro("z_ro.txt", "zed\n");
    t.add_ro("b_ro.txt", "bee\n");
    t.add("w.txt", "writable\n");
    t.env.write_local("s.txt", "l1\nl2\nl3\nl4\n");
    t.s.ok(
        json!({"action": "context_add_section", "path": "s.txt", "content": "l2\nl3\n",
        "start_line": 2, "end_line": 3}),
    );
    for q in ["one", "two", "three"] {
        let (_, term) = t.send(q);
        assert_eq!(term["type"], "done", "{term}");
    }
    let bodies: Vec<Value> = (0..3).map(|i| t.body(i)).collect();
    let users: Vec<String> = bodies.iter().map(user_content).collect();
    let u = &users[1];
    let order = [
        "@readonly_files",
        "@history",
        "@latest_user_message",
        "@files_summary",
        "@writable_files",
    ];
    for w in order.windows(2) {
        assert!(
            pos(u, w[0]) < pos(u, w[1]),
            "{} before {}:\n{u}",
            w[0],
            w[1]
        );
    }
    assert!(!u.contains("@retry_context"));
    // The first request's history holds only the context events, no messages.
    assert!(!users[0].contains("@message"), "{}", users[0]);
    assert!(u.contains("@event action=UserAddFile path=w.txt"), "{u}");
    // Read-only files sorted by path; headers as specified.
    let b = format!(
        "@file id={} path=b_ro.txt mode=ro source=context status=original\nbee\n@end_file",
        fid("b_ro.txt", "bee\n")
    );
    let z = format!(
        "@file id={} path=z_ro.txt mode=ro source=context status=original\nzed\n@end_file",
        fid("z_ro.txt", "zed\n")
    );
    let s = " path=s.txt mode=ro source=context status=original lines=2-3\nl2\nl3\n@end_file"
        .to_string();
    assert!(pos(u, &b) < pos(u, &s) && pos(u, &s) < pos(u, &z), "{u}");
    assert!(pos(u, &z) < pos(u, "@history"));
    let w = format!(
        "@file id={} path=w.txt mode=rw source=context status=original\nwritable\n@end_file",
        fid("w.txt", "writable\n")
    );
    assert!(pos(u, "@writable_files") < pos(u, &w), "{u}");
    // History carries the earlier exchange; the latest message is the new one.
    let h = &u[pos(u, "@history")..pos(u, "@latest_user_message")];
    assert!(h.contains("one") && h.contains("first answer"), "{h}");
    assert!(u[pos(u, "@latest_user_message")..].starts_with("@latest_user_message\ntwo\n"));
    // Stable prefix: each request up to its latest message is a prefix of the next one.
    for i in 0..2 {
        // (up to the blank line that closes the history block, which the next history extends)
        let prefix = &users[i][..pos(&users[i], "\n@latest_user_message")];
        assert!(
            users[i + 1].starts_with(prefix),
            "request {} does not start with the prefix of request {i}:\n--- {i}\n{}\n--- {}\n{}",
            i + 1,
            users[i],
            i + 1,
            users[i + 1]
        );
        assert_eq!(bodies[i]["messages"][0], bodies[i + 1]["messages"][0]);
        assert_eq!(bodies[i]["tools"], bodies[i + 1]["tools"]);
        assert_eq!(bodies[i]["provider"], bodies[i + 1]["provider"]);
    }
}

#[test]
fn provider_preferences_by_default() {
    let mut t = setup(vec![Reply::text(["a"])]);
    t.send("hi");
    let body = t.body(0);
    assert_eq!(
        body["provider"],
        json!({"data_collection": "deny", "require_parameters": true})
    );
    assert_eq!(body["tool_choice"], "auto");
    assert!(body.get("session_id").is_none() && body.get("prompt_cache_key").is_none());
    assert!(body.get("reasoning").is_none());
}

#[test]
fn provider_preferences_and_cache_key_from_config() {
    let mut t = setup_with(
        vec![Reply::text(["a"])],
        json!({"allow_training": true, "allow_data_retention": false, "explicit_cache_key": true}),
    );
    t.send("hi");
    let body = t.body(0);
    assert_eq!(
        body["provider"],
        json!({"zdr": true, "require_parameters": true})
    );
    assert_eq!(body["session_id"], t.id.as_str());
    assert_eq!(body["prompt_cache_key"], t.id.as_str());
}

#[test]
fn tools_follow_diff_mode() {
    for (mode, want) in [
        ("search_replace_multi", vec!["write_file", "edit_file"]),
        ("search_replace", vec!["write_file", "edit_file"]),
        ("anchored", vec!["write_file", "edit_file"]),
        ("off", vec!["write_file"]),
    ] {
        let mut t = setup_with(vec![Reply::text(["a"])], json!({"diff_mode": mode}));
        let (_, term) = t.send("hi");
        assert_eq!(term["type"], "done", "{mode}: {term}");
        let body = t.body(0);
        assert_eq!(tool_names(&body), want, "{mode}");
        let wf = &body["tools"][0]["function"]["parameters"]["properties"];
        assert!(
            wf.get("path").is_some() && wf.get("content").is_some(),
            "{mode}: {wf}"
        );
        if want.len() == 2 {
            let props = &body["tools"][1]["function"]["parameters"]["properties"];
            let key = match mode {
                "search_replace_multi" => "edits",
                "search_replace" => "old_string",
                _ => "changes",
            };
            assert!(props.get(key).is_some(), "{mode}: edit_file schema {props}");
        }
        t.s.shutdown();
    }
}

#[test]
fn global_chats_get_no_tools() {
    let mut t = setup_full(
        vec![Reply::text(["global answer"])],
        json!({}),
        Some("g"),
        true,
    );
    let (_, term) = t.send("hi");
    assert_eq!(term["type"], "done", "{term}");
    let body = t.body(0);
    assert!(body.get("tools").is_none(), "{body}");
    assert!(body.get("tool_choice").is_none(), "{body}");
    assert_eq!(body["provider"], json!({"data_collection": "deny"}));
    let chat = t.env.global_chat_json(&t.id);
    let msgs = list(&chat["messages"]);
    assert_eq!(msg_text(&msgs[1]), "global answer");
}

#[test]
fn tool_call_in_a_global_chat_writes_nothing() {
    let mut t = setup_full(
        vec![Reply::tool_calls([write_call(0, "c1", "x.txt", "x\n")])],
        json!({}),
        Some("g"),
        true,
    );
    let before = t.env.outside_state();
    let (_, term) = t.send("write");
    assert_eq!(term["type"], "diff_error", "{term}");
    assert!(files_under(&t.env.global_chat_dir(&t.id).join("output")).is_empty());
    assert_same_tree(&before, &t.env.outside_state());
}

// ---------------------------------------------------------------------------------------------
// Failures
// ---------------------------------------------------------------------------------------------

#[test]
fn error_chunk_after_200_is_an_error() {
    let mut t = setup(vec![Reply::error_after_text(
        ["partial "],
        502,
        "Provider disconnected",
    )]);
    let (evs, term) = t.send("hi");
    assert_eq!(text_of(&evs, "chunk"), "partial ");
    assert!(
        term["message"]
            .as_str()
            .unwrap()
            .contains("Provider disconnected"),
        "{term}"
    );
    assert_error_recorded(&t, &term);
    let msgs = t.messages();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(msg_text(&msgs[1]), "partial ");
    assert_eq!(t.reqs().len(), 1, "an error after 200 is not retried");
}

#[test]
fn truncated_stream_is_an_error() {
    let mut t = setup(vec![Reply::sse().content("half").truncate()]);
    let (_, term) = t.send("hi");
    assert!(
        term["message"].as_str().unwrap().contains("truncated"),
        "{term}"
    );
    assert_error_recorded(&t, &term);
}

#[test]
fn stream_without_finish_reason_is_an_error() {
    let mut t = setup(vec![Reply::without_finish(["no finish"])]);
    let (_, term) = t.send("hi");
    assert_eq!(term["type"], "error", "{term}");
    assert_error_recorded(&t, &term);
}

#[test]
fn rate_limit_is_retried_after_retry_after() {
    let mut t = setup(vec![Reply::rate_limited(1), Reply::text(["after wait"])]);
    let started = Instant::now();
    let (evs, term) = t.send("hi");
    let took = started.elapsed();
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(text_of(&evs, "chunk"), "after wait");
    assert!(
        took >= Duration::from_millis(900),
        "Retry-After: 1 honoured, took {took:?}"
    );
    let reqs = t.reqs();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].body, reqs[1].body,
        "the retry sends the same request"
    );
    let msgs = t.messages();
    assert_eq!(msgs.len(), 2, "no error recorded: {msgs:?}");
}

#[test]
fn insufficient_credits_is_an_error_with_the_providers_message() {
    let mut t = setup(vec![Reply::insufficient_credits(4096, 100)]);
    let (_, term) = t.send("hi");
    let msg = term["message"].as_str().unwrap();
    assert!(msg.contains("requires more credits"), "{term}");
    assert!(msg.contains("can only afford 100"), "{term}");
    assert_error_recorded(&t, &term);
    assert_eq!(t.reqs().len(), 1, "402 is not retried");
}

#[test]
fn unauthorized_is_an_error() {
    let mut t = setup(vec![Reply::unauthorized()]);
    let (_, term) = t.send("hi");
    assert!(
        term["message"]
            .as_str()
            .unwrap()
            .contains("No auth credentials found"),
        "{term}"
    );
    assert_error_recorded(&t, &term);
    assert_eq!(t.reqs().len(), 1, "401 is not retried");
    // The slot is free again.
    t.server.push(Reply::text(["ok"]));
    let (_, term) = t.send("again");
    assert_eq!(term["type"], "done", "{term}");
}

#[test]
fn stall_ends_with_the_idle_timeout() {
    let mut t = setup_with(
        vec![Reply::sse().content("a").stall()],
        json!({"stream_idle_timeout": 0.7}),
    );
    let started = Instant::now();
    let (evs, term) = t.send("hi");
    let took = started.elapsed();
    assert_eq!(text_of(&evs, "chunk"), "a");
    let msg = term["message"].as_str().unwrap();
    assert!(msg.contains("stalled"), "{term}");
    assert!(
        !msg.contains(" 0 s"),
        "the message names the real timeout: {msg}"
    );
    // Not before the idle timeout (a lower bound: the host must have waited). That it ends at
    // all is the "stalled" error above: a host that waited on would fail the reply's timeout.
    assert!(took >= Duration::from_millis(600), "took {took:?}");
    assert_eq!(
        t.server.wait_for_outcome(0, Duration::from_secs(5)),
        Some(bb7_mock_llm::Outcome::ClientGone),
        "the host hung up on the stalled stream"
    );
    assert_error_recorded(&t, &term);
}

// ---------------------------------------------------------------------------------------------
// Cancel and the in-flight slot
// ---------------------------------------------------------------------------------------------

fn slow(n: usize) -> Reply {
    Reply::slow_text((0..n).map(|i| format!("w{i} ")), 100)
}

#[test]
fn slow_stream_cancelled_midway() {
    // 10 s of stream: a cancel that works ends it early, which the mock server sees (the client
    // went away before the stream's end) and the partial reply shows (far fewer than 100 words).
    let mut t = setup(vec![slow(100), Reply::text(["after"])]);
    let id = t.start_send(json!({"action": "send", "content": "long", "model": MODEL}));
    let want = json!(id);
    for _ in 0..2 {
        t.s.recv_where("a chunk", |v| {
            v.get("request_id") == Some(&want) && v["type"] == "chunk"
        });
    }
    let r = t.s.ok(json!({"action": "cancel", "target_request_id": id}));
    assert_eq!(r["type"], "ok", "{r}");
    let (evs, term) = t.finish(&id);
    assert_eq!(term["type"], "error", "{term}");
    assert_eq!(term["message"], ABORTED);
    let _ = evs;
    // The HTTP stream was dropped, not read to its end.
    assert_eq!(
        t.server.wait_for_outcome(0, Duration::from_secs(2)),
        Some(bb7_mock_llm::Outcome::ClientGone)
    );
    let msgs = t.messages();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    let partial = msg_text(&msgs[1]);
    assert_eq!(msgs[1]["role"], "assistant");
    assert!(partial.starts_with("w0 w1 "), "{partial}");
    assert!(partial.len() < "w0 ".len() * 40, "{partial}");
    assert_eq!(msgs[2]["role"], "system");
    assert_eq!(msg_text(&msgs[2]), ABORTED);
    // Nothing to cancel any more; the next send works and carries both messages in its history.
    t.s.err_is(
        json!({"action": "cancel", "target_request_id": id}),
        "No active request to cancel",
    );
    let (_, term) = t.send("next");
    assert_eq!(term["type"], "done", "{term}");
    let user = user_content(&t.body(1));
    let h = &user[pos(&user, "@history")..pos(&user, "@latest_user_message")];
    assert!(h.contains(&partial.trim_end().to_string()), "{h}");
    assert!(h.contains(ABORTED), "{h}");
}

#[test]
fn cancel_of_another_request_id_is_refused() {
    let mut t = setup(vec![slow(30)]);
    let id = t.start_send(json!({"action": "send", "content": "long", "model": MODEL}));
    let want = json!(id);
    t.s.recv_where("a chunk", |v| {
        v.get("request_id") == Some(&want) && v["type"] == "chunk"
    });
    t.s.err(json!({"action": "cancel", "target_request_id": "not-it"}));
    let (_, term) = t.finish(&id);
    assert_eq!(term["type"], "done", "{term}");
}

#[test]
fn one_send_in_flight_and_mutations_refused() {
    let mut t = setup(vec![slow(30), Reply::text(["second"])]);
    t.add("a.txt", "alpha\n");
    let other = t.s.ok(json!({"action": "chat_new", "name": "other"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.s.ok(json!({"action": "chat_select", "id": t.id}));
    let id = t.start_send(json!({"action": "send", "content": "long", "model": MODEL}));
    let want = json!(id);
    t.s.recv_where("a chunk", |v| {
        v.get("request_id") == Some(&want) && v["type"] == "chunk"
    });
    t.s.err_is(
        json!({"action": "send", "content": "second", "model": MODEL}),
        BUSY,
    );
    for req in [
        json!({"action": "context_add", "path": "b.txt", "content": "b\n"}),
        json!({"action": "context_remove", "path": "a.txt"}),
        json!({"action": "chat_select", "id": other}),
        json!({"action": "chat_new", "name": "x"}),
        json!({"action": "apply_file", "path": "a.txt"}),
        json!({"action": "save_chat_settings", "model": "x/y"}),
        json!({"action": "apply_hunks", "path": "a.txt", "hunk_ids": ["h0"], "base_hash": "x"}),
        json!({"action": "checkpoint_rollback", "checkpoint_id": "x", "mode": "hard_all"}),
    ] {
        t.s.err_is(req, BUSY);
    }
    t.s.ok(json!({"action": "ping"}));
    let chat = t.s.ok(json!({"action": "chat_get"}));
    assert_eq!(chat["id"], t.id.as_str());
    t.s.ok(json!({"action": "get_file_statuses"}));
    let (_, term) = t.finish(&id);
    assert_eq!(term["type"], "done", "{term}");
    // The slot is released before the terminal event: a send right after `done` works.
    let (_, term) = t.send("second");
    assert_eq!(term["type"], "done", "{term}");
    // The refused send left no trace in the chat.
    let users: Vec<String> = t
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(msg_text)
        .collect();
    assert_eq!(users, ["long", "second"]);
}

// ---------------------------------------------------------------------------------------------
// Models, balance, titles
// ---------------------------------------------------------------------------------------------

#[test]
fn get_models_is_cached_on_disk() {
    let mut t = setup(vec![]);
    let r = t.s.ok(json!({"action": "get_models"}));
    assert_eq!(r["type"], "models", "{r}");
    let models = list(&r["models"]);
    let m = models
        .iter()
        .find(|m| m["id"] == MODEL)
        .expect("mock/model listed");
    assert_eq!(m["name"], "Mock: Model");
    assert_eq!(m["supports_tools"], true);
    assert_eq!(m["supports_reasoning"], false);
    assert_eq!(m["context_length"], 128_000);
    assert!(m["pricing"].is_object(), "{m}");
    let reasoner = models.iter().find(|m| m["id"] == "mock/reasoner").unwrap();
    assert_eq!(reasoner["supports_reasoning"], true);
    assert!(t.env.home().join(".bb7/models_cache.json").is_file());
    let models_calls = |server: &MockServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.path.ends_with("/models"))
            .count()
    };
    assert_eq!(models_calls(&t.server), 1);
    let r2 = t.s.ok(json!({"action": "get_models"}));
    assert_eq!(r2["models"], r["models"]);
    assert_eq!(
        models_calls(&t.server),
        1,
        "the second call is served from the cache"
    );
    // A new process reads the same cache.
    let T { env, server, s, .. } = t;
    s.shutdown();
    let mut s = env.start();
    let r3 = s.ok(json!({"action": "get_models"}));
    assert_eq!(r3["models"], r["models"]);
    assert_eq!(models_calls(&server), 1);
}

#[test]
fn get_balance_from_credits_then_key() {
    let mut t = setup(vec![]);
    let r = t.s.ok(json!({"action": "get_balance"}));
    assert_eq!(r["type"], "balance", "{r}");
    assert_eq!(r["total_credits"], 10.0);
    assert_eq!(r["total_usage"], 2.5);
    for status in [401, 403] {
        t.server.set_credits(Reply::error(status, "not allowed"));
        let r = t.s.ok(json!({"action": "get_balance"}));
        assert_eq!(r["type"], "balance", "{r}");
        assert_eq!(r["source"], "key", "{r}");
        assert_eq!(r["total_usage"], 2.5, "{r}");
    }
    assert!(t.server.requests().iter().any(|r| r.path.ends_with("/key")));
    t.server.set_credits(Reply::error(500, "boom"));
    t.server.set_key(Reply::error(500, "boom"));
    let msg = t.s.err(json!({"action": "get_balance"}));
    assert!(msg.contains("balance"), "{msg}");
}

/// The existing bb7.nvim client names a new chat `Untitled chat - YYYY-MM-DD HH:MM`: that is a default
/// name too, so the chat gets its automatic title.
#[test]
fn a_chat_named_by_the_go_client_s_default_gets_a_title() {
    let mut t = setup_full(
        vec![Reply::text(["answer"])],
        json!({}),
        Some("Untitled chat - 2026-01-31 14:05"),
        false,
    );
    let (_, term) = t.send("How do I parse TOML in Rust?");
    assert_eq!(term["type"], "done", "{term}");
    let ev = t.s.recv_unnumbered("title_updated");
    assert_eq!(ev["title"], TITLE, "{ev}");
    assert_eq!(t.chat()["name"], TITLE);
}

#[test]
fn title_is_generated_after_the_first_exchange() {
    let mut t = setup_full(
        vec![Reply::text(["answer"]), Reply::text(["answer 2"])],
        json!({}),
        None,
        false,
    );
    let (_, term) = t.send("How do I parse TOML in Rust?");
    assert_eq!(term["type"], "done", "{term}");
    let ev = t.s.recv_unnumbered("title_updated");
    assert_eq!(ev["type"], "title_updated", "{ev}");
    assert_eq!(ev["chat_id"], t.id.as_str());
    assert_eq!(ev["title"], TITLE);
    assert_eq!(t.chat()["name"], TITLE);
    let titles: Vec<RecordedRequest> = t
        .server
        .chat_requests()
        .into_iter()
        .filter(|r| r.body["model"] == TITLE_MODEL)
        .collect();
    assert_eq!(titles.len(), 1);
    let input = titles[0].body["messages"].to_string();
    assert!(input.contains("parse TOML"), "{input}");
    // Not again after the second exchange (decided before its `done`).
    t.send("more");
    t.s.ok(json!({"action": "ping"}));
    let n = t
        .server
        .chat_requests()
        .iter()
        .filter(|r| r.body["model"] == TITLE_MODEL)
        .count();
    assert_eq!(n, 1);
}

#[test]
fn no_automatic_title_for_a_named_chat_and_generate_title_on_request() {
    let mut t = setup(vec![Reply::text(["answer"])]);
    t.send("hi");
    // Whether to title is decided before `done`: for a named chat no title request can follow.
    t.s.ok(json!({"action": "ping"}));
    assert!(
        !t.server
            .chat_requests()
            .iter()
            .any(|r| r.body["model"] == TITLE_MODEL),
        "a chat the user named keeps its name"
    );
    assert_eq!(t.chat()["name"], "test chat");
    let r =
        t.s.ok(json!({"action": "generate_title", "chat_id": t.id, "content": "rename me"}));
    assert_eq!(r["type"], "ok", "{r}");
    let ev = t.s.recv_unnumbered("title_updated");
    assert_eq!(
        ev,
        json!({"type": "title_updated", "chat_id": t.id, "title": TITLE})
    );
    assert_eq!(t.chat()["name"], TITLE);
    t.s.err(json!({"action": "generate_title", "chat_id": "nope", "content": "x"}));
}

// ---------------------------------------------------------------------------------------------
// Escapes through the model's tool calls
// ---------------------------------------------------------------------------------------------

#[test]
fn escape_attempts_leave_outside_and_project_untouched() {
    let mut t = setup(vec![]);
    t.env.write_local("keep.txt", "keep\n");
    t.env
        .write_local(".git/hooks/pre-commit.sample", "#!/bin/sh\n");
    write_file(&t.env.outside().join("secret.txt"), "secret\n");
    symlink(t.env.outside(), t.env.proj().join("link")).unwrap();
    symlink(
        t.env.outside().join("secret.txt"),
        t.env.proj().join("secret_link.txt"),
    )
    .unwrap();
    t.add("keep.txt", "keep\n");
    let outside = t.env.outside().display().to_string();
    let proj = t.env.proj().display().to_string();
    let attempts: Vec<(String, bool)> = vec![
        ("../outside/x.txt".into(), true),
        ("../../outside/x.txt".into(), true),
        (format!("{outside}/abs.txt"), true),
        ("/etc/bb7-escape.txt".into(), true),
        ("link/x.txt".into(), false),
        ("secret_link.txt".into(), false),
        (".git/hooks/pre-commit".into(), true),
        (format!("{proj}/keep.txt"), false),
        (format!("{proj}/../outside/y.txt"), true),
    ];
    let before = t.env.outside_state();
    for (path, must_fail) in &attempts {
        t.server.push(Reply::tool_calls([write_call(
            0,
            "c",
            path,
            "#!/bin/sh\necho pwned\n",
        )]));
        let (_, term) = t.send(&format!("write {path}"));
        assert!(
            term["type"] == "done" || term["type"] == "diff_error",
            "{path}: {term}"
        );
        if *must_fail {
            assert_eq!(term["type"], "diff_error", "{path} must be refused: {term}");
        }
        assert_same_tree(&before, &t.env.outside_state());
    }
    // An edit through a symlinked path and one outside the project.
    t.server.push(Reply::tool_calls([ToolCall::edit_file(
        0,
        "e",
        &[("../outside/secret.txt", "00000000", "secret", "pwned")],
    )]));
    let (_, term) = t.send("edit outside");
    assert_eq!(term["type"], "diff_error", "{term}");
    assert_same_tree(&before, &t.env.outside_state());
    assert!(!std::path::Path::new("/etc/bb7-escape.txt").exists());
    // Whatever reached output/ is regular files inside the chat's output directory.
    let out = t.env.chat_dir(&t.id).join("output");
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let md = fs::symlink_metadata(e.path()).unwrap();
            assert!(
                !md.file_type().is_symlink(),
                "symlink in output: {}",
                e.path().display()
            );
            if md.is_dir() {
                stack.push(e.path());
            }
        }
    }
    assert_eq!(
        fs::read_to_string(t.env.outside().join("secret.txt")).unwrap(),
        "secret\n"
    );
}

// ---------------------------------------------------------------------------------------------
// More edges
// ---------------------------------------------------------------------------------------------

#[test]
fn cancel_during_the_retry_after_wait_is_prompt() {
    let mut t = setup(vec![Reply::rate_limited(30), Reply::text(["never"])]);
    let id = t.start_send(json!({"action": "send", "content": "hi", "model": MODEL}));
    assert!(
        t.server
            .wait_until(Duration::from_secs(5), |r| r.iter().any(|r| r.is_chat()))
    );
    // Without a target: cancels whatever is in flight.
    t.s.ok(json!({"action": "cancel"}));
    // The server asked for 30 s, longer than `finish` waits for the terminal event: an answer at
    // all is the cancel, not the wait (and no second request was made, below).
    let (evs, term) = t.finish(&id);
    assert!(evs.is_empty(), "{evs:?}");
    assert_eq!(term["message"], ABORTED, "{term}");
    let msgs = t.messages();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[1]["role"], "system");
    assert_eq!(msg_text(&msgs[1]), ABORTED);
    assert_eq!(t.reqs().len(), 1, "no request after the cancel");
}

#[test]
fn send_errors_before_streaming_release_the_slot() {
    let server = MockServer::start(script(vec![Reply::text(["ok"])]));
    let env = Env::new();
    write_config(&env, &server, &json!({}));
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    // No active chat yet.
    s.err(json!({"action": "send", "content": "hi", "model": MODEL}));
    s.ok(json!({"action": "chat_new", "name": "n"}));
    s.err(json!({"action": "send", "content": "  ", "model": MODEL}));
    // The slot is free: a mutating action and a real send both work.
    s.ok(json!({"action": "context_add", "path": "a.txt", "content": "a\n"}));
    let id = "real";
    s.send(&json!({"action": "send", "content": "hi", "model": MODEL, "request_id": id}));
    let term = s.recv_where("the terminal event", |v| {
        v["request_id"] == id && v["type"] != "chunk"
    });
    assert_eq!(term["type"], "done", "{term}");
    assert!(
        server
            .chat_requests()
            .iter()
            .all(|r| r.body["model"] == MODEL)
    );
    assert_eq!(
        server
            .chat_requests()
            .iter()
            .filter(|r| r.body["model"] == MODEL)
            .count(),
        1
    );
}

#[test]
fn missing_api_key_is_an_error_without_a_request() {
    let server = MockServer::start(script(vec![Reply::text(["ok"])]));
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"base_url": server.base_url()}).to_string(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "chat_new", "name": "n"}));
    s.err(json!({"action": "send", "content": "hi", "model": MODEL}));
    s.err(json!({"action": "get_models"}));
    s.err(json!({"action": "get_balance"}));
    assert!(server.requests().is_empty());
}

#[test]
fn auto_retry_of_a_multi_edit_that_partly_failed() {
    // One edit_file call: the a.txt edit is fine, the b.txt one is not; the repair sends both again.
    let bad = ToolCall::edit_file(
        0,
        "c1",
        &[
            ("a.txt", "{{file_id:a.txt}}", "beta", "BETA"),
            ("b.txt", "{{file_id:b.txt}}", "nope", "x"),
        ],
    );
    let good = ToolCall::edit_file(
        0,
        "c2",
        &[
            ("a.txt", "{{file_id:a.txt}}", "beta", "BETA"),
            ("b.txt", "{{file_id:b.txt}}", "two", "TWO"),
        ],
    );
    let mut t = setup_with(
        vec![Reply::tool_calls([bad]), Reply::tool_calls([good])],
        json!({"auto_retry_partial_edits": true}),
    );
    t.add("a.txt", "alpha\nbeta\n");
    t.add("b.txt", "one\ntwo\n");
    let (evs, term) = t.send("edit");
    assert_eq!(term["type"], "done", "{term} {evs:?}");
    assert_eq!(t.output("a.txt").as_deref(), Some("alpha\nBETA\n"));
    assert_eq!(t.output("b.txt").as_deref(), Some("one\nTWO\n"));
    // The retry was shown the files as they really are (nothing pending from the failed call).
    let u2 = user_content(&t.body(1));
    assert!(!u2.contains("source=output"), "{u2}");
}

#[test]
fn write_then_edit_in_one_reply_and_mixing_refused() {
    // The second call names the version the first one made (EDITS.md: the base is the pending write).
    let mid = fid("a.txt", "ALPHA\nbeta\n");
    let n_id = fid("n.txt", "n\n");
    let mut t = setup(vec![
        Reply::tool_calls([
            ToolCall::edit_file(0, "c1", &[("a.txt", "{{file_id:a.txt}}", "alpha", "ALPHA")]),
            ToolCall::edit_file(1, "c2", &[("a.txt", &mid, "beta", "BETA")]),
        ]),
        Reply::tool_calls([
            write_call(0, "c3", "n.txt", "n\n"),
            ToolCall::edit_file(1, "c4", &[("n.txt", &n_id, "n", "m")]),
        ]),
    ]);
    t.add("a.txt", "alpha\nbeta\n");
    // Two edits of one file in one reply: the second sees the first.
    let (_, term) = t.send("edit twice");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(t.output("a.txt").as_deref(), Some("ALPHA\nBETA\n"));
    assert_eq!(term["output_files"], json!(["a.txt"]));
    let ev = event(&t.chat(), "AssistantWriteFile", "a.txt");
    assert_eq!(ev["prev_version"], fid("a.txt", "alpha\nbeta\n"));
    // write_file then edit_file on the same path is refused; nothing of that reply is committed.
    let (_, term) = t.send("mix");
    assert_eq!(term["type"], "diff_error", "{term}");
    let err = list(&term["errors"])[0].as_str().unwrap().to_string();
    assert!(err.contains("do not mix"), "{err}");
    assert!(t.output("n.txt").is_none());
    assert_eq!(t.output("a.txt").as_deref(), Some("ALPHA\nBETA\n"));
}

#[test]
fn server_error_is_retried_then_succeeds() {
    let mut t = setup(vec![
        Reply::error(502, "upstream hiccup"),
        Reply::text(["fine"]),
    ]);
    let (evs, term) = t.send("hi");
    assert_eq!(term["type"], "done", "{term}");
    assert_eq!(text_of(&evs, "chunk"), "fine");
    assert_eq!(t.reqs().len(), 2);
}

#[test]
fn rate_limit_retries_are_bounded() {
    let mut t = setup(
        (0..6)
            .map(|_| Reply::rate_limited(0))
            .chain([Reply::text(["late"])])
            .collect(),
    );
    let (_, term) = t.send("hi");
    let msg = term["message"].as_str().unwrap();
    assert!(msg.contains("Rate limit exceeded"), "{term}");
    assert!(msg.contains("429"), "{term}");
    let n = t.reqs().len();
    assert!((2..=6).contains(&n), "{n} requests");
    assert_error_recorded(&t, &term);
}

#[test]
fn stall_before_any_content_also_times_out() {
    let mut t = setup_with(
        vec![Reply::sse().processing().stall()],
        json!({"stream_idle_timeout": 0.5}),
    );
    let (evs, term) = t.send("hi");
    assert!(evs.is_empty(), "{evs:?}");
    assert!(
        term["message"].as_str().unwrap().contains("stalled"),
        "{term}"
    );
    // Only the user message and the error: no empty assistant message.
    let msgs = t.messages();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
}

#[test]
fn a_rename_while_the_title_is_generated_wins() {
    let server = MockServer::start(
        Script::new([Reply::text(["answer"])])
            .with_model_reply(TITLE_MODEL, Reply::slow_text([TITLE], 600)),
    );
    let env = Env::new();
    write_config(&env, &server, &json!({}));
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let id = s.ok(json!({"action": "chat_new"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    s.send(&json!({"action": "send", "content": "hi", "model": MODEL, "request_id": "s1"}));
    let term = s.recv_where("done", |v| v["request_id"] == "s1" && v["type"] != "chunk");
    assert_eq!(term["type"], "done", "{term}");
    // The title request is under way; the user names the chat meanwhile.
    assert!(server.wait_until(Duration::from_secs(5), |r| {
        r.iter().any(|r| r.body["model"] == TITLE_MODEL)
    }));
    s.ok(json!({"action": "chat_rename", "id": id, "name": "Mine"}));
    assert!(server.wait_until(Duration::from_secs(5), |r| r.iter().any(
        |r| r.body["model"] == TITLE_MODEL && r.outcome != bb7_mock_llm::Outcome::Responding
    )));
    // The title reached the host after the rename. Nothing announces that the host dropped it;
    // what shows the title job has ended is its client going away: the reply's model client (the
    // title job's too) closes its connections when it is dropped, at the end of the job, after the
    // name was decided.
    assert!(
        server.wait_connections_closed(Duration::from_secs(30)),
        "the reply and its title job end: {} connections still open",
        server.open_connections()
    );
    assert_eq!(env.chat_json(&id)["name"], "Mine");
    let active = s.ok(json!({"action": "chat_get"}));
    assert_eq!(active["name"], "Mine", "{active}");
}

#[test]
fn chat_settings_choose_model_and_effort_when_the_send_does_not() {
    let mut t = setup(vec![Reply::text(["a"]), Reply::text(["b"])]);
    t.s.ok(json!({"action": "save_chat_settings", "model": "mock/reasoner", "reasoning_effort": "low"}));
    let (_, term) = t.send_req(json!({"action": "send", "content": "hi"}));
    assert_eq!(term["type"], "done", "{term}");
    let body = t.body(0);
    assert_eq!(body["model"], "mock/reasoner");
    assert_eq!(body["reasoning"], json!({"effort": "low"}));
    let msgs = t.messages();
    assert_eq!(msgs[0]["model"], "mock/reasoner");
    assert_eq!(msgs[1]["model"], "mock/reasoner");
    // The send's own choice wins.
    let (_, term) = t.send_req(json!({"action": "send", "content": "again", "model": MODEL,
        "reasoning_effort": "high"}));
    assert_eq!(term["type"], "done", "{term}");
    let body = t.body(1);
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["reasoning"], json!({"effort": "high"}));
}

#[test]
fn cancel_keeps_partial_reasoning() {
    let mut reply = Reply::sse().reasoning("thinking hard");
    for i in 0..30 {
        reply = reply.delay_ms(100).reasoning(format!(" step{i}"));
    }
    let mut t = setup(vec![reply.content("never").finish_ok("stop")]);
    let id = t.start_send(json!({"action": "send", "content": "deep", "model": MODEL}));
    let want = json!(id);
    t.s.recv_where("thinking", |v| {
        v.get("request_id") == Some(&want) && v["type"] == "thinking"
    });
    t.s.ok(json!({"action": "cancel", "target_request_id": id}));
    let (_, term) = t.finish(&id);
    assert_eq!(term["message"], ABORTED);
    let msgs = t.messages();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    let parts = parts_of(&msgs[1]);
    assert_eq!(parts[0]["type"], "thinking", "{msgs:?}");
    assert!(
        parts[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("thinking hard"),
        "{msgs:?}"
    );
    assert_eq!(msg_text(&msgs[2]), ABORTED);
}

/// A server that accepts the connection and never answers: the reply ends with a timeout instead
/// of hanging until the user cancels.
#[test]
fn a_server_that_never_answers_times_out() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let mut t = setup_with(vec![], json!({"stream_idle_timeout": 0.7}));
    write_file(
        &t.env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": format!("http://127.0.0.1:{port}/api/v1"),
            "stream_idle_timeout": 0.7})
        .to_string(),
    );
    t.s.ok(json!({"action": "init", "project_root": t.env.proj_str()}));
    t.s.ok(json!({"action": "chat_select", "id": t.id}));
    let (_, term) = t.send("hello?");
    assert_eq!(term["type"], "error", "{term}");
    let msg = term["message"].as_str().unwrap();
    assert!(msg.contains("did not answer"), "{msg}");
    let last = t.messages().last().cloned().unwrap();
    assert_eq!(last["role"], "system");
    drop(silent);
}

#[test]
fn a_model_written_path_with_control_characters_is_refused() {
    let mut t = setup(vec![
        Reply::sse()
            .content("Writing.")
            .tool_call(write_call(0, "c_nl", "evil\nname.txt", "x\n"))
            .finish_ok("tool_calls"),
    ]);
    let (_evs, term) = t.send("write");
    assert_eq!(term["type"], "diff_error", "{term}");
    let errors = list(&term["errors"]);
    assert_eq!(errors.len(), 1, "{term}");
    let e = errors[0].as_str().unwrap_or_default();
    assert!(e.contains("control character"), "{term}");
    assert!(t.output_files().is_empty(), "{:?}", t.output_files());
    assert!(
        !t.env.proj().join("evil\nname.txt").exists(),
        "nothing written in the project"
    );
}
