//! The parts every reply shares, whatever its mode: streaming one model request into the reply's
//! text and reasoning ([`Acc`], [`stream_once`]) and committing the staged changes at the end ([`commit`]).

use cap_std::fs::Dir;
use serde_json::Value;
use tokio::sync::watch;

use super::events::{JobEvents, ReplySink};
use super::job::Ending;
use super::tools::{ToolRunner, Written};
use crate::llm::{LlmError, Provider, StreamEvent, StreamSummary};
use crate::store::publish::Outputs;

/// The reply's text and reasoning so far, and the step's own text (agent mode stores each step's
/// text as a part).
pub struct Acc<'s> {
    /// The reply text as streamed (in agent mode, with status lines).
    pub text: String,
    /// The reasoning text as streamed.
    pub thinking: String,
    /// The current step's text.
    pub step_text: String,
    /// Where the reply's live output goes.
    pub sink: &'s mut dyn ReplySink,
    /// Whether status lines are part of the reply text (agent mode) or only streamed (chat mode,
    /// whose statuses the client renders from the output).
    status_in_text: bool,
}

impl<'s> Acc<'s> {
    /// An empty reply streaming to `sink`.
    pub fn new(sink: &'s mut dyn ReplySink, status_in_text: bool) -> Acc<'s> {
        Acc {
            text: String::new(),
            thinking: String::new(),
            step_text: String::new(),
            sink,
            status_in_text,
        }
    }

    fn event(&mut self, ev: &StreamEvent) {
        match ev {
            StreamEvent::Text(t) if !t.is_empty() => {
                self.text.push_str(t);
                self.step_text.push_str(t);
                self.sink.chunk(t);
            }
            StreamEvent::Reasoning(t) if !t.is_empty() => {
                self.thinking.push_str(t);
                self.sink.thinking(t);
            }
            _ => {}
        }
    }

    /// Streams a status line (`[Assistant modified: …]`, the reattempt notice).
    pub fn status(&mut self, line: &str) {
        if self.status_in_text {
            self.text.push_str(line);
        }
        self.sink.chunk(line);
    }
}

/// How one model request ended.
pub enum Streamed {
    /// The stream finished; its tool calls and usage.
    Ok(StreamSummary),
    /// The request or the stream failed (its text is the message the client sees).
    Err(LlmError),
    /// The user cancelled.
    Cancelled,
}

/// Streams one request with `body` into `acc`, stopping at a cancel. The provider's routing
/// events (`provider.selected`, `provider.fallback`) go to `events`, in stream order.
pub async fn stream_once(
    provider: &dyn Provider,
    body: &Value,
    acc: &mut Acc<'_>,
    events: &mut JobEvents,
    cancel: &mut watch::Receiver<bool>,
) -> Streamed {
    if *cancel.borrow() {
        return Streamed::Cancelled;
    }
    let mut on_event = |ev: &StreamEvent| match ev {
        StreamEvent::Provider(p) => events.emit_provider(acc.sink, p.clone().into()),
        _ => acc.event(ev),
    };
    tokio::select! {
        r = provider.stream(body, &mut on_event) => match r {
            Ok(s) => Streamed::Ok(s),
            Err(e) => Streamed::Err(e),
        },
        _ = cancel.wait_for(|c| *c) => Streamed::Cancelled,
    }
}

/// Commits the staged changes when the reply is done, and on a cancel (SPEC.md: writes that
/// completed before it stay). A failed commit turns a done reply into a failed one.
///
/// With `defer` (chat mode, whose end reports nothing before the reply is recorded), the files
/// are only written under temporary names here: the returned [`Outputs`] are made durable and put
/// in place by whoever records the reply, together with the record that names them
/// ([`Outputs::publish_with_record`]), and until then the reply's `written` are not published.
pub fn commit(
    tools: Option<&ToolRunner>,
    chat_dir: &Dir,
    ending: Ending,
    defer: bool,
) -> (Ending, Vec<Written>, Option<Outputs>) {
    let mut ending = ending;
    let mut written = Vec::new();
    let mut pending = None;
    if matches!(ending, Ending::Done | Ending::Cancelled)
        && let Some(tools) = tools
    {
        let committed = if defer {
            tools.prepare_commit(chat_dir).map(|(w, o)| {
                pending = Some(o).filter(|_| !w.is_empty());
                w
            })
        } else {
            tools.commit(chat_dir)
        };
        match committed {
            Ok(w) => written = w,
            Err(e) if ending == Ending::Done => ending = Ending::Failed(e.0),
            Err(e) => tracing::warn!("cancelled reply: {e}"),
        }
    }
    (ending, written, pending)
}
