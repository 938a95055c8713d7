//! The agent evaluation harness: one task = initial project files + the scripted model turns the
//! mock server replays (resolving `{{file_id:PATH}}` from the tool results it receives) + how the
//! client reacts (answer, skip or cancel) + checks on the outcome (events, terminal event, request
//! bodies, chat.json, trace, output files). Every task runs the real `bb7` binary in its own
//! isolated tree.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall, Weak};
use serde_json::{Value, json};

use crate::common::proto::*;

pub const MODEL: &str = "mock/agent";
pub const ABORTED: &str = "Response aborted by user.";

/// How the client behaves while the reply runs.
#[derive(Clone, Debug)]
pub enum Interact {
    None,
    /// Answer every clarification with this text.
    Answer(&'static str),
    /// Skip every clarification (`no_user_answer`).
    Skip,
    /// Cancel when a clarification is requested.
    CancelAtQuestion,
    /// Cancel after the n-th `tool.call.completed` event.
    CancelAfterCalls(usize),
}

/// One scripted task.
pub struct Task {
    pub name: &'static str,
    pub files: Vec<(&'static str, Vec<u8>)>,
    /// Extra set-up on the tree (links, directories outside the project).
    pub setup: Option<fn(&Env)>,
    /// Added to config.json (e.g. `{"agent": {...}}`).
    pub config: Value,
    /// Files added to the context (writable unless listed in `readonly`).
    pub context: Vec<&'static str>,
    pub readonly: Vec<&'static str>,
    /// "agent" (default) or "chat".
    pub mode: &'static str,
    pub replies: Vec<Reply>,
    pub prompt: &'static str,
    pub interact: Interact,
    /// A second send after the first (its replies are the tail of `replies`).
    pub followup: Option<&'static str>,
    pub check: fn(&Run) -> Result<(), String>,
}

impl Task {
    pub fn new(name: &'static str, check: fn(&Run) -> Result<(), String>) -> Task {
        Task {
            name,
            files: Vec::new(),
            setup: None,
            config: json!({}),
            context: Vec::new(),
            readonly: Vec::new(),
            mode: "agent",
            replies: Vec::new(),
            prompt: "Please help with the project.",
            interact: Interact::None,
            followup: None,
            check,
        }
    }

    pub fn file(mut self, path: &'static str, content: impl Into<Vec<u8>>) -> Task {
        self.files.push((path, content.into()));
        self
    }

    pub fn reply(mut self, r: Reply) -> Task {
        self.replies.push(r);
        self
    }

    /// A step that calls `calls` (tool, arguments); ids are `s{step}c{i}`.
    pub fn step(self, step: usize, calls: &[(&str, Value)]) -> Task {
        self.reply(calls_reply(step, calls))
    }

    pub fn text(self, t: &str) -> Task {
        self.reply(Reply::text([t.to_string()]))
    }
}

/// A reply making `calls` in one step.
pub fn calls_reply(step: usize, calls: &[(&str, Value)]) -> Reply {
    Reply::tool_calls(calls.iter().enumerate().map(|(i, (name, args))| {
        ToolCall::new(i as u32, format!("s{step}c{i}"), *name, args.to_string()).fragments(2)
    }))
}

/// Where a run's model requests go (ECOSYSTEM-PROTOCOL.md §10): the competent "remote" mock
/// only (the baseline, no `providers` in config.json), or a weaker "local" mock (schema mistakes;
/// the hard tasks do not fit its context) with routing `local` or `hybrid_auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    Remote,
    Local,
    HybridAuto,
}

impl Routing {
    pub fn name(self) -> &'static str {
        match self {
            Routing::Remote => "remote",
            Routing::Local => "local",
            Routing::HybridAuto => "hybrid_auto",
        }
    }
}

/// A hard task: three or more model requests. The weak local model cannot hold it.
pub fn hard(task: &Task) -> bool {
    task.replies.len() >= 3
}

/// The weak local mock for `task`: a hard task does not fit its context (its `/models` says so,
/// and a request gets HTTP 400); any other gets its first tool-calling reply wrong once.
fn weak_local(task: &Task) -> Script {
    let script = Script::new(task.replies.clone());
    if hard(task) {
        let mut s = script.with_weak(Weak {
            schema_mistakes: 0,
            context_tokens: Some(1),
        });
        s.models = Reply::json(200, json!({"data": [{"id": MODEL, "context_length": 1}]}));
        s
    } else {
        script.with_weak(Weak {
            schema_mistakes: 1,
            context_tokens: None,
        })
    }
}

/// What a task run produced.
pub struct Run {
    pub env: Env,
    /// `agent_event`s of the (first) send, in order (the routing's `provider.*` events are in
    /// `provider_events`).
    pub events: Vec<Value>,
    /// `provider.selected` / `provider.fallback` events of the (first) send.
    pub provider_events: Vec<Value>,
    /// Chat-completion requests that reached the remote mock (any model).
    pub remote_requests: usize,
    /// Streamed reply text (`chunk` events).
    pub text: String,
    pub terminal: Value,
    /// Chat-completion request bodies, in order.
    pub requests: Vec<Value>,
    pub chat: Value,
    pub trace: Vec<Value>,
    pub outputs: BTreeMap<String, String>,
    /// Replies to actions made during the run (e.g. a late `clarify`).
    pub notes: Vec<Value>,
    /// The second send's terminal event.
    pub followup_terminal: Option<Value>,
    pub wall: Duration,
}

impl Run {
    pub fn kinds(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e["kind"].as_str().unwrap_or("").to_string())
            .collect()
    }

    pub fn completed(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["kind"] == "tool.call.completed")
            .map(|e| &e["data"])
            .collect()
    }

    /// The content of the tool result for call id `id`, from the last request.
    pub fn result_of(&self, id: &str) -> String {
        for b in self.requests.iter().rev() {
            for m in b["messages"].as_array().into_iter().flatten() {
                if m["role"] == "tool" && m["tool_call_id"] == id {
                    return m["content"].as_str().unwrap_or("").to_string();
                }
            }
        }
        String::new()
    }

    /// Everything the model and the client saw, as one string (for leak checks).
    pub fn everything(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{}",
            serde_json::to_string(&self.requests).unwrap_or_default(),
            serde_json::to_string(&self.events).unwrap_or_default(),
            self.text,
            serde_json::to_string(&self.trace).unwrap_or_default(),
            self.chat
        )
    }

    pub fn done(&self) -> Result<(), String> {
        if self.terminal["type"] != "done" {
            return Err(format!("expected done, got {}", self.terminal));
        }
        Ok(())
    }

    pub fn steps(&self) -> u64 {
        self.terminal["steps"]
            .as_u64()
            .unwrap_or_else(|| self.trace_finished()["steps"].as_u64().unwrap_or(0))
    }

    pub fn tool_calls(&self) -> u64 {
        self.terminal["tool_calls"]
            .as_u64()
            .or(self.terminal["tool_call_count"].as_u64())
            .unwrap_or_else(|| self.trace_finished()["tool_calls"].as_u64().unwrap_or(0))
    }

    pub fn trace_finished(&self) -> Value {
        self.trace
            .iter()
            .find(|l| l["kind"] == "job.finished")
            .map(|l| l["data"].clone())
            .unwrap_or(Value::Null)
    }

    /// Host time excluding the model and the user (from the trace).
    pub fn host_ms(&self) -> f64 {
        self.trace_finished()["host_ms"]
            .as_f64()
            .unwrap_or(f64::NAN)
    }
}

/// `Err(msg)` unless `cond`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).expect("mkdir");
    }
    fs::write(path, bytes).expect("write");
}

/// Runs one task end to end against the remote mock only.
pub fn run(task: &Task) -> Run {
    run_routed(task, Routing::Remote)
}

/// Runs one task end to end with `routing`.
pub fn run_routed(task: &Task, routing: Routing) -> Run {
    let server = MockServer::start(Script::new(task.replies.clone()));
    let local = (routing != Routing::Remote).then(|| MockServer::start(weak_local(task)));
    let env = Env::new();
    for (p, c) in &task.files {
        write(&env.proj().join(p), c);
    }
    if let Some(f) = task.setup {
        f(&env);
    }
    let mut config =
        json!({"api_key": "k", "base_url": server.base_url(), "title_model": "mock/title"});
    for (k, v) in task.config.as_object().into_iter().flatten() {
        config[k] = v.clone();
    }
    if let Some(l) = &local {
        config["providers"] = json!({"local": {"base_url": l.base_url(), "model": MODEL}});
    }
    write(
        &env.home().join(".config/bb7/config.json"),
        config.to_string().as_bytes(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let id = s.ok(json!({"action": "chat_new", "name": task.name}))["id"]
        .as_str()
        .expect("id")
        .to_string();
    for p in &task.context {
        let content = fs::read_to_string(env.proj().join(p)).expect("context file");
        s.ok(json!({"action": "context_add", "path": p, "content": content}));
    }
    for p in &task.readonly {
        s.ok(json!({"action": "context_set_readonly", "path": p, "readonly": true}));
    }
    s.ok(json!({"action": "save_chat_settings", "mode": task.mode, "routing": routing.name()}));
    let started = Instant::now();
    let (all_events, text, terminal, notes) = send(&mut s, task.prompt, &task.interact);
    let (provider_events, events): (Vec<Value>, Vec<Value>) =
        all_events.into_iter().partition(|e| {
            e["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("provider."))
        });
    let wall = started.elapsed();
    let followup_terminal = task.followup.map(|f| send(&mut s, f, &Interact::None).2);
    let chat = env.chat_json(&id);
    // A fallback only goes local → remote, so the local requests come first.
    let remote_requests = server.chat_requests().len();
    let requests = local
        .iter()
        .flat_map(|l| l.chat_requests())
        .chain(server.chat_requests())
        .filter(|r| r.body["model"] == MODEL)
        .map(|r| r.body)
        .collect();
    let mut trace = Vec::new();
    if let Ok(rd) = fs::read_dir(env.chat_dir(&id).join("traces")) {
        let mut files: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files.into_iter().take(1) {
            for line in fs::read_to_string(f).unwrap_or_default().lines() {
                trace.push(serde_json::from_str(line).unwrap_or(Value::Null));
            }
        }
    }
    let out_dir = env.chat_dir(&id).join("output");
    let outputs = files_under(&out_dir)
        .into_iter()
        .map(|(p, c)| {
            (
                p.strip_prefix(&out_dir).unwrap().display().to_string(),
                String::from_utf8_lossy(&c).into_owned(),
            )
        })
        .collect();
    s.shutdown();
    Run {
        env,
        events,
        provider_events,
        remote_requests,
        text,
        terminal,
        requests,
        chat,
        trace,
        outputs,
        notes,
        followup_terminal,
        wall,
    }
}

type Sent = (Vec<Value>, String, Value, Vec<Value>);

fn send(s: &mut Bb7, prompt: &str, interact: &Interact) -> Sent {
    let rid = s.next_id();
    s.send(&json!({"action": "send", "content": prompt, "model": MODEL, "request_id": rid}));
    let want = json!(rid);
    let mut events = Vec::new();
    let mut text = String::new();
    let mut notes = Vec::new();
    let mut completed = 0;
    let mut late_question: Option<Value> = None;
    loop {
        let v = s.recv_where_for("a send event", Duration::from_secs(60), |v| {
            v.get("request_id") == Some(&want)
        });
        match v["type"].as_str() {
            Some("done" | "diff_error" | "error") => {
                if let Some(qid) = late_question.take() {
                    // The question ended with the job: a late answer is an error.
                    notes.push(
                        s.req(json!({"action": "clarify", "question_id": qid, "answer": "late"})),
                    );
                }
                return (events, text, v, notes);
            }
            Some("chunk") => text.push_str(v["content"].as_str().unwrap_or("")),
            Some("thinking") => {}
            Some("agent_event") => {
                let kind = v["kind"].as_str().unwrap_or("").to_string();
                events.push(v.clone());
                if kind == "tool.call.completed" {
                    completed += 1;
                    if let Interact::CancelAfterCalls(n) = interact
                        && completed == *n
                    {
                        s.ok(json!({"action": "cancel", "target_request_id": rid}));
                    }
                }
                if kind == "clarification.requested" {
                    let qid = v["data"]["question_id"].clone();
                    match interact {
                        Interact::Answer(a) => {
                            s.ok(json!({"action": "clarify", "question_id": qid, "answer": a}));
                        }
                        Interact::Skip => {
                            s.ok(json!({"action": "clarify", "question_id": qid, "answer": "no_user_answer"}));
                        }
                        Interact::CancelAtQuestion => {
                            s.ok(json!({"action": "cancel", "target_request_id": rid}));
                            late_question = Some(qid);
                        }
                        _ => {}
                    }
                }
            }
            _ => panic!("unexpected event for a send: {v}"),
        }
    }
}
