//! Running a reply: [`run`] takes a [`ReplyJob`] to its [`ReplyOutcome`]. Agent mode is the loop of
//! [`super::steps`]; chat mode, here, is one step whose edit calls all run, with one hidden repair
//! attempt when some fail. Both stream, run edits and commit through [`super::stream`]. Recording
//! the result in the chat is the caller's job ([`ReplyOutcome`] says everything it needs).

use std::time::Instant;

use serde_json::Value;

use super::events::ReplySink;
use super::job::{Ending, REATTEMPT_CHUNK, ReplyJob, ReplyOutcome};
use super::stream::{self, Acc, Streamed};
use super::tools::call_record;
use crate::llm::Usage;
use crate::llm::prompt::RetryContext;
use crate::llm::tool_calls::ToolCall;

/// Runs the reply.
pub async fn run(mut job: ReplyJob, sink: &mut dyn ReplySink) -> ReplyOutcome {
    if let Some(agent) = job.agent.take() {
        return super::steps::run(job, agent, sink).await;
    }
    let started = Instant::now();
    let mut acc = Acc::new(sink, false);
    let mut usage = Usage::default();
    let mut body = job.request.body(job.retry.as_ref(), &[], true);
    let mut attempt = 0;
    let mut all_calls: Vec<Value> = Vec::new();
    let ending = loop {
        let summary =
            match stream::stream_once(&*job.provider, &body, &mut acc, &mut job.cancel).await {
                Streamed::Ok(s) => s,
                Streamed::Err(e) => break Ending::Failed(e),
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
    let (ending, written) = stream::commit(job.tools.as_ref(), &job.chat_dir, ending);
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
        match stream::run_edit(&mut job.tools, call).await {
            Ok(done) => {
                acc.status(&done.status);
                records.push(call_record(call, None));
            }
            Err(e) => {
                records.push(call_record(call, Some(&e.0)));
                errors.push(e.0);
            }
        }
    }
    (errors, false)
}
