//! The events a request produces besides its reply, in their wire form: the stream of a `send`
//! (`chunk`, `thinking`, `agent_event`), its `warning` and terminal event (`done`, `diff_error`,
//! `error`), and replies written later by background work (`models`, `balance`, `title_updated`).

use serde_json::{Map, Value, json};

use super::Ctx;
use crate::agent::events::{AgentEvent, ReplySink};
use crate::agent::job::{ABORTED, AgentSummary, Ending, ReplyOutcome};

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

/// A `chunk` / `thinking` event in its wire form, borrowing its text: the same object
/// [`event`] makes (keys in the same order), without building a map per streamed piece.
#[derive(serde::Serialize)]
struct TextEvent<'a> {
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    #[serde(rename = "type")]
    kind: &'a str,
}

impl ProtocolSink {
    fn text(&self, kind: &str, content: &str) {
        let _ = self.ctx.out.send_value(&TextEvent {
            content,
            request_id: self.id.as_deref(),
            kind,
        });
    }
}

impl ReplySink for ProtocolSink {
    fn chunk(&mut self, text: &str) {
        self.text(kind::CHUNK, text);
    }
    fn thinking(&mut self, text: &str) {
        self.text(kind::THINKING, text);
    }
    fn agent_event(&mut self, cursor: u64, e: &AgentEvent) {
        emit(&self.ctx, &agent_event(self.id.as_deref(), cursor, e));
    }
}

/// The wire form of an agent event: `{"type":"agent_event","cursor":N,"kind":K,"data":{…}}`
/// (AGENT-PROTOCOL.md §1), the only place an [`AgentEvent`] becomes JSON for the client.
pub fn agent_event(id: Option<&str>, cursor: u64, e: &AgentEvent) -> Map<String, Value> {
    let mut fields = match serde_json::to_value(e) {
        Ok(Value::Object(m)) => m,
        // An enum of plain fields always serialises to an object.
        _ => Map::from_iter([("kind".to_string(), json!(e.kind()))]),
    };
    fields.insert("cursor".into(), json!(cursor));
    event(kind::AGENT_EVENT, id, Value::Object(fields))
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

/// The `warning` of kind `audit`: the audit chain could not take a record (the reply goes on; the
/// record was kept beside the chain, as `message` says).
pub fn audit_trouble(id: Option<&str>, message: &str) -> Map<String, Value> {
    event(
        kind::WARNING,
        id,
        json!({"kind": "audit", "message": message}),
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

/// The terminal event of a reply that could not be recorded in its chat (`error`): when the reply
/// got through, its outputs were committed before the chat could not be saved, so the event says
/// so and names them (nothing the model changed sits in the output unannounced). A reply that did
/// not get through keeps its own terminal event.
pub fn unsaved(id: Option<&str>, o: &ReplyOutcome, error: &str) -> Map<String, Value> {
    if !o.ending.answered() {
        return terminal(id, o);
    }
    let written: Vec<&str> = o.written.iter().map(|w| w.path.as_str()).collect();
    let msg = if written.is_empty() {
        format!("The reply could not be saved: {error}")
    } else {
        format!(
            "The reply could not be saved: {error}. Its file changes were written to the output and wait for your review: {}",
            written.join(", ")
        )
    };
    event(kind::ERROR, id, json!({"message": msg}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A streamed `chunk` / `thinking` line is byte for byte what the map-built event serialises to
    /// (the text event borrows its text instead of copying it into a map).
    #[test]
    fn text_events_keep_their_wire_form() {
        for (kind, id, content) in [
            (kind::CHUNK, Some("r1"), "word \"quoted\"\n\u{1F600}"),
            (kind::THINKING, None, ""),
        ] {
            let typed = serde_json::to_string(&TextEvent {
                content,
                request_id: id,
                kind,
            })
            .unwrap();
            let mapped =
                serde_json::to_string(&event(kind, id, json!({"content": content}))).unwrap();
            assert_eq!(typed, mapped);
        }
    }

    /// The wire form of each agent event is exactly what clients got before events were typed.
    #[test]
    fn agent_events_keep_their_wire_form() {
        let cases = [
            (
                AgentEvent::JobStarted {
                    job_id: "j".into(),
                    mode: "agent",
                    plan_id: None,
                    model: "m".into(),
                    max_tool_calls: 40,
                },
                json!({"job_id": "j", "mode": "agent", "model": "m", "max_tool_calls": 40}),
            ),
            (
                AgentEvent::JobStarted {
                    job_id: "j".into(),
                    mode: "agent",
                    plan_id: Some("plan-1".into()),
                    model: "m".into(),
                    max_tool_calls: 40,
                },
                json!({"job_id": "j", "mode": "agent", "plan_id": "plan-1", "model": "m",
                       "max_tool_calls": 40}),
            ),
            (
                AgentEvent::ToolCallRequested {
                    id: "c".into(),
                    tool: "read_file".into(),
                    args: json!({"file_path": "a"}),
                    step: 2,
                },
                json!({"id": "c", "tool": "read_file", "args": {"file_path": "a"}, "step": 2}),
            ),
            (
                AgentEvent::ToolCallCompleted {
                    id: "c".into(),
                    tool: "read_file".into(),
                    ok: false,
                    summary: "error".into(),
                    bytes: 7,
                    duration_ms: 0.25,
                    step: 2,
                    error: Some("nope".into()),
                },
                json!({"id": "c", "tool": "read_file", "ok": false, "summary": "error",
                       "bytes": 7, "duration_ms": 0.25, "step": 2, "error": "nope"}),
            ),
            (
                AgentEvent::ClarificationRequested {
                    question_id: "q".into(),
                    question: "?".into(),
                    id: "c".into(),
                },
                json!({"question_id": "q", "question": "?", "id": "c"}),
            ),
            (
                AgentEvent::ClarificationReceived {
                    question_id: "q".into(),
                    answer: "yes".into(),
                    skipped: false,
                },
                json!({"question_id": "q", "answer": "yes", "skipped": false}),
            ),
            (
                AgentEvent::EditsProposed {
                    files: vec!["a.rs".into()],
                },
                json!({"files": ["a.rs"]}),
            ),
            (
                AgentEvent::JobFailed { error: "x".into() },
                json!({"error": "x"}),
            ),
        ];
        for (e, data) in cases {
            let m = agent_event(Some("r1"), 3, &e);
            assert_eq!(
                Value::Object(m),
                json!({"type": "agent_event", "request_id": "r1", "cursor": 3,
                       "kind": e.kind(), "data": data})
            );
        }
    }
}
