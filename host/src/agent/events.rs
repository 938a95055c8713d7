//! The events of one agent job (AGENT-PROTOCOL.md §1): `agent_event`s with a cursor that starts at
//! 1 and increases by one per event, each also written to the job's trace.

use serde_json::{Value, json};

use super::reply::ReplySink;
use super::trace::Trace;

/// The job's event stream.
pub struct JobEvents {
    cursor: u64,
    /// The job's trace, which every event is also written to.
    pub trace: Trace,
    /// The job's id, written on every trace line.
    pub job_id: String,
}

impl JobEvents {
    /// The event stream of job `job_id`, traced to `trace`; the first event gets cursor 1.
    pub fn new(job_id: String, trace: Trace) -> JobEvents {
        JobEvents {
            cursor: 0,
            trace,
            job_id,
        }
    }

    /// Emits event `kind` with `data` to the client, and traces it with `extra` (fields only the
    /// trace carries: component hash, grants, the text the model read).
    pub fn emit(
        &mut self,
        sink: &mut dyn ReplySink,
        kind: &str,
        data: Value,
        extra: Option<Value>,
    ) {
        self.cursor += 1;
        sink.agent_event(self.cursor, kind, &data);
        let mut line = json!({
            "cursor": self.cursor,
            "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "job": self.job_id,
            "kind": kind,
            "data": data,
        });
        if let Some(Value::Object(extra)) = extra {
            for (k, v) in extra {
                line[k] = v;
            }
        }
        self.trace.line(&line);
    }

    /// Traces a line that is not an event (each step's request summary).
    pub fn note(&mut self, kind: &str, data: Value) {
        self.trace.line(&json!({
            "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "job": self.job_id,
            "kind": kind,
            "data": data,
        }));
    }

    /// Events emitted so far.
    pub fn count(&self) -> u64 {
        self.cursor
    }
}

/// A new job id: UTC time plus random hex (sortable, unique enough per chat).
pub fn new_job_id() -> String {
    use rand::Rng;
    format!(
        "job-{}-{:06x}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%3f"),
        rand::rng().random_range(0..0x1000000u32)
    )
}

/// The `agent` summary stored on an agent reply's message in chat.json.
pub fn message_summary(a: &super::steps::AgentSummary) -> Value {
    json!({"job_id": a.job_id, "steps": a.steps, "tool_calls": a.tool_calls,
           "tool_calls_run": a.tool_calls_run})
}
