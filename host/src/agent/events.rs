//! What a reply reports while it runs: its live output goes to a [`ReplySink`] (text, reasoning,
//! and in agent mode the [`AgentEvent`]s of AGENT-PROTOCOL.md §1, with a cursor that starts at 1
//! and increases by one per event). Each agent event is also written to the job's trace. The wire
//! form of an event is the protocol's business (`crate::protocol::events`); here events are typed.

use serde::Serialize;
use serde_json::{Value, json};

use super::trace::Trace;

/// Where a reply's live output goes (the protocol's `chunk` and `thinking` events).
pub trait ReplySink: Send {
    /// Streams a piece of reply text or a status line (`chunk`).
    fn chunk(&mut self, text: &str);
    /// Streams a piece of reasoning text (`thinking`).
    fn thinking(&mut self, text: &str);
    /// An agent-mode event (`cursor` starts at 1 per reply). Chat-mode replies emit none.
    fn agent_event(&mut self, _cursor: u64, _event: &AgentEvent) {}
}

/// One event of an agent job (AGENT-PROTOCOL.md §1): serialised as `{"kind": …, "data": {…}}`,
/// the data's fields as the protocol names them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "data")]
pub enum AgentEvent {
    /// The job started.
    #[serde(rename = "job.started")]
    JobStarted {
        /// The job's id.
        job_id: String,
        /// `agent`, or `plan` for a plan reply ([`super::plan::PlanRole::job_mode`]).
        mode: &'static str,
        /// The approved plan the job carries out (`plan_approve`); absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        plan_id: Option<String>,
        /// The model requested.
        model: String,
        /// The tool-call budget.
        max_tool_calls: usize,
    },
    /// The model called a tool.
    #[serde(rename = "tool.call.requested")]
    ToolCallRequested {
        /// The call's id.
        id: String,
        /// The tool called.
        tool: String,
        /// Its arguments as stored (see `steps::stored_args`).
        args: Value,
        /// The step it was made in.
        step: usize,
    },
    /// A call finished (run or refused).
    #[serde(rename = "tool.call.completed")]
    ToolCallCompleted {
        /// The call's id.
        id: String,
        /// The tool called.
        tool: String,
        /// Whether it succeeded.
        ok: bool,
        /// One line for the event log.
        summary: String,
        /// The bytes of the result the model reads.
        bytes: usize,
        /// How long the call took, in milliseconds.
        duration_ms: f64,
        /// The step it was made in.
        step: usize,
        /// Why it failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// `clarify_user`: the job waits for the user's answer.
    #[serde(rename = "clarification.requested")]
    ClarificationRequested {
        /// The id the `clarify` action answers with.
        question_id: String,
        /// The question, printable.
        question: String,
        /// The call's id.
        id: String,
    },
    /// The user answered (or skipped) the question.
    #[serde(rename = "clarification.received")]
    ClarificationReceived {
        /// The question answered.
        question_id: String,
        /// The answer (`no_user_answer` when skipped).
        answer: String,
        /// Whether the user skipped it.
        skipped: bool,
    },
    /// Plan mode: the reply proposed a plan (ECOSYSTEM-PROTOCOL.md §9).
    #[serde(rename = "plan.proposed")]
    PlanProposed {
        /// The plan's id (`plan_approve` / `plan_reject` name it).
        plan_id: String,
        /// What the plan does.
        summary: String,
        /// Its steps: `[{title, detail?, files?}]`.
        steps: Value,
    },
    /// The job's edits were committed to the output.
    #[serde(rename = "edits.proposed")]
    EditsProposed {
        /// The files proposed.
        files: Vec<String>,
    },
    /// The job failed (the terminal event follows).
    #[serde(rename = "job.failed")]
    JobFailed {
        /// Why.
        error: String,
    },
    /// A provider serves the reply's requests (ECOSYSTEM-PROTOCOL.md §10; chat mode too).
    #[serde(rename = "provider.selected")]
    ProviderSelected {
        /// `remote` or `local`.
        provider: &'static str,
        /// The model it is asked for.
        model: String,
    },
    /// A hybrid reply moved from one provider to the other (chat mode too).
    #[serde(rename = "provider.fallback")]
    ProviderFallback {
        /// The provider left.
        from: &'static str,
        /// The provider taken.
        to: &'static str,
        /// Why (`schema_failures`, `context_overflow`, `unreachable`, `timeout`,
        /// `budget_without_edits`).
        reason: &'static str,
        /// What happened, in words.
        detail: String,
    },
}

impl From<crate::llm::routing::ProviderEvent> for AgentEvent {
    fn from(e: crate::llm::routing::ProviderEvent) -> AgentEvent {
        use crate::llm::routing::ProviderEvent as P;
        match e {
            P::Selected { provider, model } => AgentEvent::ProviderSelected { provider, model },
            P::Fallback {
                from,
                to,
                reason,
                detail,
            } => AgentEvent::ProviderFallback {
                from,
                to,
                reason,
                detail,
            },
        }
    }
}

impl AgentEvent {
    /// The event's `kind` as the protocol names it.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentEvent::JobStarted { .. } => "job.started",
            AgentEvent::ToolCallRequested { .. } => "tool.call.requested",
            AgentEvent::ToolCallCompleted { .. } => "tool.call.completed",
            AgentEvent::ClarificationRequested { .. } => "clarification.requested",
            AgentEvent::ClarificationReceived { .. } => "clarification.received",
            AgentEvent::EditsProposed { .. } => "edits.proposed",
            AgentEvent::PlanProposed { .. } => "plan.proposed",
            AgentEvent::JobFailed { .. } => "job.failed",
            AgentEvent::ProviderSelected { .. } => "provider.selected",
            AgentEvent::ProviderFallback { .. } => "provider.fallback",
        }
    }
}

/// The job's event stream.
pub struct JobEvents {
    cursor: u64,
    /// The job's trace, which every event is also written to.
    pub trace: Trace,
    /// The job's id, written on every trace line.
    pub job_id: String,
    /// Whether events reach the client (not in chat mode, which reports no job).
    live: bool,
}

impl JobEvents {
    /// The event stream of job `job_id`, traced to `trace`; the first event gets cursor 1.
    pub fn new(job_id: String, trace: Trace) -> JobEvents {
        JobEvents {
            cursor: 0,
            trace,
            job_id,
            live: true,
        }
    }

    /// An event stream that sends and traces nothing (chat mode).
    pub fn silent() -> JobEvents {
        JobEvents {
            live: false,
            ..JobEvents::new(String::new(), Trace::none())
        }
    }

    /// Emits `event` to the client, and traces it with `extra` (fields only the trace carries:
    /// component hash, grants, the text the model read).
    pub fn emit(&mut self, sink: &mut dyn ReplySink, event: AgentEvent, extra: Option<Value>) {
        if !self.live {
            return;
        }
        self.send(sink, event, extra);
    }

    /// Emits a provider event (`provider.selected`, `provider.fallback`): sent in chat mode too,
    /// which reports no job otherwise (ECOSYSTEM-PROTOCOL.md §10).
    pub fn emit_provider(&mut self, sink: &mut dyn ReplySink, event: AgentEvent) {
        self.send(sink, event, None);
    }

    fn send(&mut self, sink: &mut dyn ReplySink, event: AgentEvent, extra: Option<Value>) {
        self.cursor += 1;
        sink.agent_event(self.cursor, &event);
        let mut line = match serde_json::to_value(&event) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        line.insert("cursor".into(), json!(self.cursor));
        line.insert("time".into(), json!(now()));
        line.insert("job".into(), json!(self.job_id));
        if let Some(Value::Object(extra)) = extra {
            line.extend(extra);
        }
        self.trace.line(&Value::Object(line));
    }

    /// Traces a line that is not an event (each step's request summary).
    pub fn note(&mut self, kind: &str, data: Value) {
        self.trace.line(&json!({
            "time": now(),
            "job": self.job_id,
            "kind": kind,
            "data": data,
        }));
    }

    /// Whether events reach the client and the trace (building one is wasted work otherwise).
    pub fn live(&self) -> bool {
        self.live
    }

    /// Events emitted so far.
    pub fn count(&self) -> u64 {
        self.cursor
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A new job id: UTC time plus random hex (sortable, unique enough per chat).
pub fn new_job_id() -> String {
    format!(
        "job-{}-{:06x}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%3f"),
        rand::random_range(0..0x1000000u32)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serialised form is the protocol's: `kind` plus `data` with the protocol's field names;
    /// `error` only on a failed call.
    #[test]
    fn events_serialise_as_kind_and_data() {
        let ok = AgentEvent::ToolCallCompleted {
            id: "c1".into(),
            tool: "read_file".into(),
            ok: true,
            summary: "a.rs lines 1-2 of 2".into(),
            bytes: 10,
            duration_ms: 1.5,
            step: 1,
            error: None,
        };
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            json!({"kind": "tool.call.completed", "data": {"id": "c1", "tool": "read_file",
                   "ok": true, "summary": "a.rs lines 1-2 of 2", "bytes": 10,
                   "duration_ms": 1.5, "step": 1}})
        );
        let failed = AgentEvent::JobFailed { error: "x".into() };
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            json!({"kind": "job.failed", "data": {"error": "x"}})
        );
        for e in [
            ok,
            failed,
            AgentEvent::EditsProposed { files: vec![] },
            AgentEvent::JobStarted {
                job_id: "j".into(),
                mode: "agent",
                plan_id: None,
                model: "m".into(),
                max_tool_calls: 3,
            },
        ] {
            assert_eq!(serde_json::to_value(&e).unwrap()["kind"], e.kind());
        }
    }
}
