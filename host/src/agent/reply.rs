//! One reply, end to end: stream the model's answer, run its tool calls in the sandbox against the
//! staging directory, commit all changes or none, and report what happened. Recording the result in
//! the chat is the caller's job ([`ReplyOutcome`] says everything it needs).

use std::sync::Arc;
use std::time::Instant;

use cap_std::fs::Dir;
use serde_json::Value;
use tokio::sync::watch;

use super::request::RequestBuilder;
use super::tools::{ToolRunner, Written, call_record};
use crate::llm::prompt::RetryContext;
use crate::llm::tool_calls::ToolCall;
use crate::llm::{LlmError, Provider, StreamEvent, StreamSummary, Usage};

/// The chunk streamed before the host's own repair attempt (EDITS.md).
pub const REATTEMPT_CHUNK: &str = "\n[Reattempting to apply file changes...]\n";

/// Where a reply's live output goes (the protocol's `chunk` and `thinking` events).
pub trait ReplySink: Send {
    /// Streams a piece of reply text or a status line (`chunk`).
    fn chunk(&mut self, text: &str);
    /// Streams a piece of reasoning text (`thinking`).
    fn thinking(&mut self, text: &str);
    /// An agent-mode event (`cursor` starts at 1 per reply). Chat-mode replies emit none.
    fn agent_event(&mut self, _cursor: u64, _kind: &str, _data: &Value) {}
}

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
    pub agent: Option<super::steps::AgentJob>,
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
        /// One [`call_record`] per call, failed or not (in agent mode, per edit call).
        tool_calls: Vec<Value>,
    },
    /// The request or the stream failed.
    Failed(String),
    /// The user cancelled.
    Cancelled,
}

/// What a reply produced.
#[derive(Debug, Clone)]
pub struct ReplyOutcome {
    /// The reply text as streamed (in agent mode, with the status line of each edit).
    pub text: String,
    /// The reasoning text as streamed; empty when the model sent none.
    pub thinking: String,
    /// The files committed to `output/`; empty when nothing was committed.
    pub written: Vec<Written>,
    /// Token accounting summed over every request of the reply.
    pub usage: Usage,
    /// How the reply ended.
    pub ending: Ending,
    /// Wall-clock time of the whole reply, in seconds.
    pub duration: f64,
    /// Agent mode only: steps, calls and the chat.json parts of the loop.
    pub agent: Option<super::steps::AgentSummary>,
}

/// The terminal error after a cancel, also stored as a system message (clients match it exactly).
pub const ABORTED: &str = "Response aborted by user.";

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

impl ReplyOutcome {
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
            agent: self.agent.as_ref().map(super::events::message_summary),
            system_note: match &self.ending {
                Ending::Failed(msg) => Some(msg.clone()),
                Ending::Cancelled => Some(ABORTED.to_string()),
                _ => None,
            },
        }
    }
}

struct Acc<'s> {
    text: String,
    thinking: String,
    sink: &'s mut dyn ReplySink,
}

impl Acc<'_> {
    fn event(&mut self, ev: &StreamEvent) {
        match ev {
            StreamEvent::Text(t) if !t.is_empty() => {
                self.text.push_str(t);
                self.sink.chunk(t);
            }
            StreamEvent::Reasoning(t) if !t.is_empty() => {
                self.thinking.push_str(t);
                self.sink.thinking(t);
            }
            _ => {}
        }
    }

    fn status(&mut self, line: &str) {
        self.sink.chunk(line);
    }
}

enum Streamed {
    Ok(StreamSummary),
    Err(LlmError),
    Cancelled,
}

async fn stream_once(
    provider: &dyn Provider,
    body: &Value,
    acc: &mut Acc<'_>,
    cancel: &mut watch::Receiver<bool>,
) -> Streamed {
    if *cancel.borrow() {
        return Streamed::Cancelled;
    }
    let mut on_event = |ev: &StreamEvent| acc.event(ev);
    tokio::select! {
        r = provider.stream(body, &mut on_event) => match r {
            Ok(s) => Streamed::Ok(s),
            Err(e) => Streamed::Err(e),
        },
        _ = cancel.wait_for(|c| *c) => Streamed::Cancelled,
    }
}

/// Runs the reply.
pub async fn run(mut job: ReplyJob, sink: &mut dyn ReplySink) -> ReplyOutcome {
    if let Some(agent) = job.agent.take() {
        return super::steps::run(job, agent, sink).await;
    }
    let started = Instant::now();
    let mut acc = Acc {
        text: String::new(),
        thinking: String::new(),
        sink,
    };
    let mut usage = Usage::default();
    let mut body = job.request.body(job.retry.as_ref(), &[], true);
    let mut attempt = 0;
    let mut all_calls: Vec<Value> = Vec::new();
    let ending = loop {
        let summary = match stream_once(&*job.provider, &body, &mut acc, &mut job.cancel).await {
            Streamed::Ok(s) => s,
            Streamed::Err(e) => break Ending::Failed(e.to_string()),
            Streamed::Cancelled => break Ending::Cancelled,
        };
        usage = usage.add(&summary.usage);
        let (mut errors, cancelled) =
            run_tools(&mut job, &summary.tool_calls, &mut acc, &mut all_calls).await;
        if cancelled {
            break Ending::Cancelled;
        }
        if summary.dropped_tool_calls > 0 {
            // All or nothing: the calls past the cap were not run, so nothing of this reply is
            // proposed.
            errors.push(format!(
                "{} more tool calls than the {} one reply may make were not run",
                summary.dropped_tool_calls,
                crate::llm::tool_calls::MAX_TOOL_CALLS_PER_STEP
            ));
        }
        if errors.is_empty() {
            break Ending::Done;
        }
        if job.auto_retry && attempt == 0 && job.tools.is_some() {
            attempt += 1;
            acc.status(REATTEMPT_CHUNK);
            let retry = RetryContext {
                errors: errors.clone(),
                tool_calls: all_calls.clone(),
                partial: true,
            };
            let pending = job.tools.as_ref().map(|t| t.pending()).unwrap_or_default();
            body = job.request.body(Some(&retry), &pending, false);
            continue;
        }
        break Ending::DiffError {
            errors,
            tool_calls: all_calls.clone(),
        };
    };
    // Commit on success, and on a cancel (SPEC.md: writes that completed before it stay).
    let mut ending = ending;
    let mut written = Vec::new();
    if matches!(ending, Ending::Done | Ending::Cancelled) {
        if let Some(tools) = &job.tools {
            match tools.commit(&job.chat_dir) {
                Ok(w) => written = w,
                Err(e) if ending == Ending::Done => ending = Ending::Failed(e),
                Err(e) => tracing::warn!("cancelled reply: {e}"),
            }
        }
    }
    ReplyOutcome {
        text: acc.text,
        thinking: acc.thinking,
        written,
        usage,
        ending,
        duration: started.elapsed().as_secs_f64(),
        agent: None,
    }
}

/// Runs `calls` in order (each on a blocking thread), streaming a status chunk per success. Returns
/// the errors, and whether a cancel stopped the run.
async fn run_tools(
    job: &mut ReplyJob,
    calls: &[ToolCall],
    acc: &mut Acc<'_>,
    records: &mut Vec<Value>,
) -> (Vec<String>, bool) {
    let mut errors = Vec::new();
    for call in calls {
        if *job.cancel.borrow() {
            return (errors, true);
        }
        let result = match job.tools.take() {
            None => Err(format!(
                "{}: this chat has no tools (global chats cannot change files)",
                call.name
            )),
            Some(mut runner) => {
                let c = call.clone();
                match tokio::task::spawn_blocking(move || {
                    let r = runner.run(&c);
                    (runner, r)
                })
                .await
                {
                    Ok((runner, r)) => {
                        job.tools = Some(runner);
                        r.map(|d| d.status)
                    }
                    Err(e) => {
                        // The runner (and its staging directory) is lost with the task: fail the
                        // reply rather than commit anything.
                        job.tools = None;
                        Err(format!(
                            "{}: the tool call failed unexpectedly: {e}",
                            call.name
                        ))
                    }
                }
            }
        };
        match result {
            Ok(status) => {
                acc.status(&status);
                records.push(call_record(call, None));
            }
            Err(e) => {
                records.push(call_record(call, Some(&e)));
                errors.push(e);
            }
        }
    }
    (errors, false)
}
