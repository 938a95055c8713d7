//! What agent mode reports about its calls and its end: the [`AgentEvent`]s it emits (with the
//! trace's extra fields), the chat.json part of each call, and the arguments as stored and shown.

use serde_json::{Map, Value, json};

use super::events::{AgentEvent, JobEvents, ReplySink};
use super::job::Ending;
use super::retrieval::CallOutcome;
use super::tools::Written;
use crate::llm::prompt::printable;
use crate::llm::tool_calls::{MAX_TOOL_CALLS_PER_STEP, ToolCall};

/// How much of a result chat.json keeps (and `@history` shows).
pub const EXCERPT_CHARS: usize = 600;
/// The most bytes of a call's arguments (as JSON) chat.json keeps and the client is sent; longer
/// ones are shortened (long strings cut, then the whole cut to an excerpt), so one step stores at
/// most [`MAX_TOOL_CALLS_PER_STEP`] × (this + the result excerpt).
pub const MAX_STORED_ARGS_BYTES: usize = 2048;
/// The longest string value kept whole in stored arguments.
const STORED_STRING_CHARS: usize = 200;

/// `tool.call.requested` for `call`, made in `step`.
pub fn call_requested(
    events: &mut JobEvents,
    sink: &mut dyn ReplySink,
    call: &ToolCall,
    step: usize,
) {
    if !events.live() {
        return;
    }
    events.emit(
        sink,
        AgentEvent::ToolCallRequested {
            id: call.id.clone(),
            tool: call.name.clone(),
            args: stored_args(call),
            step,
        },
        None,
    );
}

/// `tool.call.completed` for `call`; the trace also gets the sandbox's record, the raw arguments
/// and the whole result the model read.
pub fn call_completed(
    events: &mut JobEvents,
    sink: &mut dyn ReplySink,
    call: &ToolCall,
    outcome: &CallOutcome,
    step: usize,
    duration_ms: f64,
) {
    if !events.live() {
        return;
    }
    let r = outcome.record.as_ref();
    let extra = json!({
        "component_sha256": r.map(|r| r.component_sha256.clone()),
        "wit_version": r.map(|r| r.wit_version.clone()),
        "grants": r.map(|r| r.grants.clone()),
        "component": r.and_then(|r| r.component.clone()),
        "network": r.map(|r| r.network.clone()),
        "env": r.map(|r| r.env.clone()),
        "sandbox_ms": r.map(|r| round3(r.duration_ms)),
        "args_raw": call.arguments_raw,
        "result": outcome.content,
    });
    events.emit(
        sink,
        AgentEvent::ToolCallCompleted {
            id: call.id.clone(),
            tool: call.name.clone(),
            ok: outcome.ok,
            summary: printable(&outcome.summary).into_owned(),
            bytes: outcome.content.len(),
            duration_ms: round3(duration_ms),
            step,
            error: outcome.error.as_deref().map(|e| printable(e).into_owned()),
        },
        Some(extra),
    );
}

/// The event that ends the job: `edits.proposed` when it proposed files, `job.failed` when it
/// failed (nothing when it is done without files).
pub fn job_end(
    events: &mut JobEvents,
    sink: &mut dyn ReplySink,
    ending: &Ending,
    written: &[Written],
) {
    match ending {
        Ending::Done => {
            if !written.is_empty() {
                let files = written.iter().map(|w| w.path.clone()).collect();
                events.emit(sink, AgentEvent::EditsProposed { files }, None);
            }
        }
        Ending::DiffError { errors, .. } => {
            events.emit(
                sink,
                AgentEvent::JobFailed {
                    error: format!(
                        "{} file change(s) failed; nothing was proposed",
                        errors.len()
                    ),
                },
                Some(json!({"errors": errors})),
            );
        }
        Ending::Failed(e) => {
            events.emit(sink, AgentEvent::JobFailed { error: e.clone() }, None);
        }
        Ending::Cancelled => {
            events.emit(
                sink,
                AgentEvent::JobFailed {
                    error: "cancelled by the user".into(),
                },
                None,
            );
        }
    }
}

/// What the model is told (after the step's last result) when its step made more calls than
/// [`MAX_TOOL_CALLS_PER_STEP`].
pub fn dropped_note(dropped: usize) -> String {
    format!(
        "[bb7] This step made {} tool calls; at most {MAX_TOOL_CALLS_PER_STEP} are taken per step, so the \
         other {dropped} were not run (they count against this reply's tool-call budget). Make fewer \
         calls per step.",
        MAX_TOOL_CALLS_PER_STEP + dropped
    )
}

fn args_value(call: &ToolCall) -> Value {
    match &call.arguments {
        Ok(v) => v.clone(),
        Err(_) => json!(call.arguments_raw),
    }
}

/// The chat.json part of one call: the tool, its arguments and a capped excerpt of its result.
pub fn call_part(
    call: &ToolCall,
    o: &CallOutcome,
    step: usize,
    duration_ms: f64,
) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("type".into(), json!("tool_call"));
    p.insert("id".into(), json!(call.id));
    p.insert("tool".into(), json!(call.name));
    p.insert("args".into(), stored_args(call));
    p.insert("ok".into(), json!(o.ok));
    p.insert("summary".into(), json!(printable(&o.summary)));
    p.insert("bytes".into(), json!(o.content.len()));
    p.insert("step".into(), json!(step));
    p.insert("duration_ms".into(), json!(round3(duration_ms)));
    // Shown by the client (the tool log) and in `@history`: no terminal control.
    p.insert(
        "excerpt".into(),
        json!(excerpt(&printable(&o.content), EXCERPT_CHARS)),
    );
    p
}

/// A call's arguments as chat.json keeps them: whole up to [`MAX_STORED_ARGS_BYTES`] of JSON;
/// beyond, string values are cut to [`STORED_STRING_CHARS`], and if that is still too long the
/// whole becomes an excerpt of the JSON text.
pub fn stored_args(call: &ToolCall) -> Value {
    // Shown to the client (the tool log) and repeated in `@history`: no terminal control.
    fn clean(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(printable(s).into_owned()),
            Value::Array(a) => Value::Array(a.iter().map(clean).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), clean(v))).collect())
            }
            other => other.clone(),
        }
    }
    let v = clean(&args_value(call));
    if v.to_string().len() <= MAX_STORED_ARGS_BYTES {
        return v;
    }
    fn cut(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(excerpt(s, STORED_STRING_CHARS)),
            Value::Array(a) => Value::Array(a.iter().map(cut).collect()),
            Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), cut(v))).collect()),
            other => other.clone(),
        }
    }
    let short = cut(&v);
    let text = short.to_string();
    if text.len() <= MAX_STORED_ARGS_BYTES {
        return short;
    }
    Value::String(excerpt(&text, MAX_STORED_ARGS_BYTES / 2))
}

/// The first `max` characters of `s`, saying how much was cut.
pub fn excerpt(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}… [{} more bytes]", &s[..i], s.len() - i),
    }
}

/// `x` rounded to three decimals (milliseconds to the microsecond).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts() {
        assert_eq!(excerpt("abc", 5), "abc");
        assert_eq!(excerpt("abcdef", 3), "abc… [3 more bytes]");
    }
}
