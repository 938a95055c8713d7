//! The types of one reply, shared by every part of the engine: what a reply needs ([`ReplyJob`],
//! plus [`AgentJob`] in agent mode), how it ended ([`Ending`]), what it produced
//! ([`ReplyOutcome`], [`AgentSummary`]), and why one could not be set up ([`AgentError`], in [`super::error`]).

use std::sync::Arc;

use cap_std::fs::Dir;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

pub use super::error::AgentError;
use super::request::RequestBuilder;
use super::retrieval::Project;
use super::third_party::ThirdParty;
use super::tools::{ToolRunner, Written};
use crate::llm::Provider;
use crate::llm::Usage;
use crate::llm::prompt::RetryContext;
use crate::store::publish::Outputs;

/// The chunk streamed before the host's own repair attempt (EDITS.md).
pub const REATTEMPT_CHUNK: &str = "\n[Reattempting to apply file changes...]\n";

/// The terminal error after a cancel, also stored as a system message (clients match it exactly).
pub const ABORTED: &str = "Response aborted by user.";

/// Everything one reply needs.
pub struct ReplyJob {
    /// The model API the reply streams from.
    pub provider: Arc<dyn Provider>,
    /// The parts of every request the reply sends.
    pub request: RequestBuilder,
    /// The client's `retry_context`, rendered into the first request.
    pub retry: Option<RetryContext>,
    /// One hidden repair attempt after failed edits (`auto_retry_partial_edits`).
    pub auto_retry: bool,
    /// `None` in global chats (no tools).
    pub tools: Option<ToolRunner>,
    /// The chat directory, for the commit into `output/`.
    pub chat_dir: Dir,
    /// Becomes `true` on `cancel`.
    pub cancel: watch::Receiver<bool>,
    /// Agent mode: the multi-step loop of [`super::steps`]; `None` is chat mode (one step).
    pub agent: Option<AgentJob>,
}

/// What an agent reply needs beyond a [`ReplyJob`].
pub struct AgentJob {
    /// The tool-call budget, the retrieval limits and the deny list.
    pub config: crate::config::agent::AgentConfig,
    /// The project the retrieval tools read.
    pub project: Project,
    /// The third-party tools enabled and granted for the project.
    pub third_party: ThirdParty,
    /// Plan mode: proposing a plan, or carrying out an approved one ([`super::plan`]).
    pub plan: super::plan::PlanRole,
}

/// How a reply runs through the one loop of [`super::steps`]: chat mode is that loop with the
/// edit tools only, one step (plus the hidden repair attempt) and nothing reported beyond the
/// reply's chunks; agent mode adds the retrieval, clarify and third-party tools, steps until the
/// model stops calling (within a call budget) and the AGENT-PROTOCOL events, status lines and trace.
pub struct Policy {
    /// The tools beyond the edit tools and what they work on; `None`: every call goes to the edit
    /// runner, which refuses any other tool.
    pub explore: Option<AgentJob>,
    /// How many steps the reply may take.
    pub steps: StepLimit,
    /// Whether the reply is an agent job: its events, its trace, status lines in the reply text
    /// and an [`AgentSummary`] on the outcome.
    pub report: bool,
}

/// How many steps a reply may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepLimit {
    /// One step. When one of its edit calls fails and `repair` is set, one more hidden request
    /// with the errors and the reply's pending changes (EDITS.md), whose result ends the reply.
    One {
        /// Whether the one repair attempt may be made (`auto_retry_partial_edits`).
        repair: bool,
    },
    /// Steps until one makes no call; once this many calls are counted, one last step in which no
    /// tool may be called. Repeated calls are refused.
    Budget(usize),
}

impl Policy {
    /// The policy of `job`: agent mode when it carries an [`AgentJob`] (taken), else chat mode.
    pub fn of(job: &mut ReplyJob) -> Policy {
        match job.agent.take() {
            Some(agent) => Policy {
                steps: StepLimit::Budget(agent.config.max_tool_calls_per_job),
                explore: Some(agent),
                report: true,
            },
            None => Policy {
                explore: None,
                steps: StepLimit::One {
                    repair: job.auto_retry,
                },
                report: false,
            },
        }
    }
}

/// How a reply ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// Every tool call succeeded; the changes are in `output/`.
    Done,
    /// At least one tool call failed; nothing was committed.
    DiffError {
        /// One message per failed tool call.
        errors: Vec<String>,
        /// One [`super::tools::call_record`] per call, failed or not (in agent mode, per edit
        /// call).
        tool_calls: Vec<Value>,
    },
    /// The request or the stream failed.
    Failed(String),
    /// The user cancelled.
    Cancelled,
}

impl Ending {
    /// How the usage log names the ending.
    pub fn as_str(&self) -> &'static str {
        match self {
            Ending::Done => "done",
            Ending::DiffError { .. } => "diff_error",
            Ending::Failed(_) => "error",
            Ending::Cancelled => "cancelled",
        }
    }

    /// Whether the reply got through (its changes, if any, are in the output): done, or an edit
    /// error the client may retry.
    pub fn answered(&self) -> bool {
        matches!(self, Ending::Done | Ending::DiffError { .. })
    }
}

/// What the agent loop adds to a [`ReplyOutcome`].
#[derive(Debug, Clone, Default)]
pub struct AgentSummary {
    /// The job's id (names its trace file).
    pub job_id: String,
    /// Steps started (one model request each).
    pub steps: usize,
    /// Every call the model made (each got a result, run or not).
    pub tool_calls: usize,
    /// The calls that ran.
    pub tool_calls_run: usize,
    /// chat.json parts in order: each step's text, then its calls.
    pub parts: Vec<Map<String, Value>>,
    /// Plan mode: the plan the reply proposed (its latest valid `propose_plan` call).
    pub plan: Option<super::plan::Plan>,
    /// `plan_approve`: the id of the approved plan the reply carries out.
    pub approving: Option<String>,
}

impl AgentSummary {
    /// The `agent` summary stored on an agent reply's message in chat.json.
    pub fn message_summary(&self) -> Value {
        json!({"job_id": self.job_id, "steps": self.steps, "tool_calls": self.tool_calls,
               "tool_calls_run": self.tool_calls_run})
    }
}

/// What a reply produced.
#[derive(Debug)]
pub struct ReplyOutcome {
    /// The reply text as streamed (in agent mode, with the status line of each edit).
    pub text: String,
    /// The reasoning text as streamed; empty when the model sent none.
    pub thinking: String,
    /// The files committed to `output/`; empty when nothing was committed. With `publish`, the
    /// files are not in place yet.
    pub written: Vec<Written>,
    /// `written`, written under temporary names and not yet durable nor in place (chat mode):
    /// the reply's record publishes them together with the record naming them, and on failure
    /// the reply fails and nothing of them stays (`Workspace::record_reply`).
    pub publish: Option<Outputs>,
    /// Token accounting summed over every request of the reply.
    pub usage: Usage,
    /// How the reply ended.
    pub ending: Ending,
    /// Wall-clock time of the whole reply, in seconds.
    pub duration: f64,
    /// Agent mode only: steps, calls and the chat.json parts of the loop.
    pub agent: Option<AgentSummary>,
}

impl ReplyOutcome {
    /// Plan mode: the plan the reply proposed, when it got through (stored with the reply).
    pub fn proposed_plan(&self) -> Option<&super::plan::Plan> {
        self.agent
            .as_ref()
            .and_then(|a| a.plan.as_ref())
            .filter(|_| self.ending.answered())
    }

    /// What the reply leaves in its chat: the reply by `model` and, after an error or a cancel,
    /// the system message saying so.
    pub fn record(&self, model: &str) -> crate::chat::turn::ReplyRecord {
        let parts = match &self.agent {
            Some(a) => a.parts.clone(),
            None if !self.text.is_empty() => vec![crate::chat::model::text_part(&self.text)],
            None => Vec::new(),
        };
        crate::chat::turn::ReplyRecord {
            thinking: self.thinking.clone(),
            parts,
            written: self
                .written
                .iter()
                .map(|w| crate::chat::turn::WrittenFile {
                    path: w.path.clone(),
                    version: w.version.clone(),
                    prev_version: w.prev_version.clone(),
                    adopted: w.adopted.clone(),
                })
                .collect(),
            model: model.to_string(),
            usage: serde_json::to_value(&self.usage).unwrap_or(Value::Null),
            agent: self.agent.as_ref().map(AgentSummary::message_summary),
            system_note: match &self.ending {
                Ending::Failed(msg) => Some(msg.clone()),
                Ending::Cancelled => Some(ABORTED.to_string()),
                _ => None,
            },
        }
    }
}
