//! The events a request produces besides its reply, in their wire form: the stream of a `send`
//! (`chunk`, `thinking`, `agent_event`), its `warning` and terminal event (`done`, `diff_error`,
//! `error`), and replies written later by background work (`models`, `balance`, `title_updated`).

use serde_json::{Map, Value, json};

use super::Ctx;
use crate::agent::reply::{ABORTED, Ending, ReplyOutcome, ReplySink};
use crate::agent::steps::AgentSummary;

/// Event and reply `type`s written outside a handler's own reply.
pub mod kind {
    /// A piece of reply text.
    pub const CHUNK: &str = "chunk";
    /// A piece of reasoning text.
    pub const THINKING: &str = "thinking";
    /// An agent job's event.
    pub const AGENT_EVENT: &str = "agent_event";
    /// A warning about a request that goes on.
    pub const WARNING: &str = "warning";
    /// A reply that ended with every tool call applied.
    pub const DONE: &str = "done";
    /// A reply whose edit calls failed; nothing was committed.
    pub const DIFF_ERROR: &str = "diff_error";
    /// A failed request.
    pub const ERROR: &str = "error";
    /// A chat got a (generated) title.
    pub const TITLE_UPDATED: &str = "title_updated";
}

/// `fields` as an object, with `type` set to `kind` and the request id added when there is one.
pub fn event(kind: &str, id: Option<&str>, fields: Value) -> Map<String, Value> {
    let mut m = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    m.insert("type".into(), json!(kind));
    if let Some(id) = id {
        m.insert("request_id".into(), json!(id));
    }
    m
}

/// Writes an event (a closed stdout is the client gone: nothing to do).
pub fn emit(ctx: &Ctx, m: &Map<String, Value>) {
    let _ = ctx.out.send(m);
}

/// Writes an `error` reply to request `id` from background work.
pub fn error_later(ctx: &Ctx, id: Option<&str>, message: String) {
    emit(ctx, &event(kind::ERROR, id, json!({"message": message})));
}

/// Streams a reply to the client as `chunk` / `thinking` / `agent_event` events of one request.
pub struct ProtocolSink {
    /// Where the events go.
    pub ctx: Ctx,
    /// The `send` request's id.
    pub id: Option<String>,
}

impl ProtocolSink {
    fn text(&self, kind: &str, content: &str) {
        emit(
            &self.ctx,
            &event(kind, self.id.as_deref(), json!({"content": content})),
        );
    }
}

impl ReplySink for ProtocolSink {
    fn chunk(&mut self, text: &str) {
        self.text(kind::CHUNK, text);
    }
    fn thinking(&mut self, text: &str) {
        self.text(kind::THINKING, text);
    }
    fn agent_event(&mut self, cursor: u64, kind: &str, data: &Value) {
        emit(
            &self.ctx,
            &event(
                kind::AGENT_EVENT,
                self.id.as_deref(),
                json!({"cursor": cursor, "kind": kind, "data": data}),
            ),
        );
    }
}

/// The `warning` of kind `stale_context`: files in context whose local copy changed since their
/// snapshot (the send goes on).
pub fn stale_context(id: Option<&str>, files: &[String]) -> Map<String, Value> {
    event(
        kind::WARNING,
        id,
        json!({"kind": "stale_context", "files": files}),
    )
}

/// Adds the agent job's counts to a `done` (`steps`, `tool_calls`) or `diff_error` event (`steps`,
/// `tool_call_count`: its `tool_calls` is already the list of edit calls), and the `job_id`.
fn add_counts(m: &mut Map<String, Value>, a: &AgentSummary) {
    m.insert("steps".into(), json!(a.steps));
    let key = if m.get("type") == Some(&json!(kind::DONE)) {
        "tool_calls"
    } else {
        "tool_call_count"
    };
    m.insert(key.into(), json!(a.tool_calls));
    m.insert("job_id".into(), json!(a.job_id));
}

/// The terminal event of a reply: `done`, `diff_error` or `error`.
pub fn terminal(id: Option<&str>, o: &ReplyOutcome) -> Map<String, Value> {
    let usage = serde_json::to_value(&o.usage).unwrap_or(json!({}));
    let mut m = match &o.ending {
        Ending::Done => event(
            kind::DONE,
            id,
            json!({
                "output_files": o.written.iter().map(|w| w.path.clone()).collect::<Vec<_>>(),
                "usage": usage,
                "duration": o.duration,
            }),
        ),
        Ending::DiffError { errors, tool_calls } => event(
            kind::DIFF_ERROR,
            id,
            json!({
                "errors": errors,
                "tool_calls": tool_calls,
                "usage": usage,
                "duration": o.duration,
            }),
        ),
        Ending::Failed(msg) => event(kind::ERROR, id, json!({"message": msg})),
        Ending::Cancelled => event(kind::ERROR, id, json!({"message": ABORTED})),
    };
    if let Some(a) = &o.agent
        && o.ending.answered()
    {
        add_counts(&mut m, a);
    }
    m
}
