//! A reply as the workspace sees it: starting one in the active chat (the job set up by
//! [`ReplyJob::prepare`], then the user message recorded before anything is sent), recording its
//! outcome in its chat when it ends (whichever chat is active by then), and the decision whether the
//! chat gets an automatic title.

use crate::agent::job::{AgentError, ReplyJob, ReplyOutcome};
use crate::agent::prepare::{ChatView, ReplyRequest};
use crate::chat::turn;

use super::{ChatRef, Workspace, WorkspaceError};

/// Why a reply could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    /// The reply could not be set up.
    #[error(transparent)]
    Setup(#[from] AgentError),
    /// The chat refused (no active chat, or the user message could not be saved).
    #[error(transparent)]
    Chat(#[from] WorkspaceError),
    /// The chat directory could not be held for the reply.
    #[error("Cannot open chat: {0}")]
    ChatDir(std::io::Error),
}

/// A reply ready to run, and what its end needs.
pub struct StartedReply {
    /// The job to run.
    pub job: ReplyJob,
    /// The chat the reply belongs to.
    pub target: ChatRef,
    /// The model it asks.
    pub model: String,
    /// Whether this is the chat's first exchange.
    pub first_exchange: bool,
    /// The user's message.
    pub first_message: String,
}

impl Workspace {
    /// Files in the active chat's context whose local copy changed since their snapshot (the user
    /// may want to update them; a send goes on). `None` without an active chat.
    pub fn stale_context(&self) -> Option<Vec<String>> {
        let a = self.active().ok()?;
        // Read as the context itself is: the project path rule, and external files only when this
        // user added them.
        Some(crate::chat::review::stale_files(
            a.dir.dir(),
            &a.chat.context_files,
            |p| self.read_local(p, a.global),
        ))
    }

    /// Sets up the reply `req` asks for in the active chat and records the user message (with its
    /// context snapshot) before anything is sent: a crash from here on loses at most the reply.
    pub fn start_reply(&mut self, req: ReplyRequest) -> Result<StartedReply, ReplyError> {
        let first_message = req.content.clone();
        let a = self.active().map_err(ReplyError::Chat)?;
        let prepared = ReplyJob::prepare(
            req,
            ChatView {
                id: &a.id,
                chat: &a.chat,
                dir: a.dir.dir(),
                global: a.global,
                project: self.project.as_ref(),
                config: &self.config,
                tools: &self.tools,
            },
        )?;
        let target = ChatRef {
            id: a.id.clone(),
            global: a.global,
            dir: a.dir.dir().try_clone().map_err(ReplyError::ChatDir)?,
        };
        let msg = turn::user_message(&a.chat, &first_message, &prepared.model, &prepared.effort);
        let a = self.active_mut().map_err(ReplyError::Chat)?;
        turn::record_user_message(&mut a.chat, msg);
        if let Err(e) = self.save_active() {
            if let Ok(a) = self.active_mut() {
                turn::unrecord_user_message(&mut a.chat);
            }
            return Err(ReplyError::Chat(e));
        }
        Ok(StartedReply {
            job: prepared.job,
            target,
            model: prepared.model,
            first_exchange: prepared.first_exchange,
            first_message,
        })
    }

    /// Records the outcome of a reply by `model` in its chat `target` (nothing when it left
    /// nothing to record).
    pub fn record_reply(
        &mut self,
        target: &ChatRef,
        model: &str,
        outcome: &ReplyOutcome,
    ) -> Result<(), WorkspaceError> {
        // A plan approval whose reply got nowhere is undone: the plan can be approved again.
        let unapprove = outcome
            .agent
            .as_ref()
            .and_then(|a| a.approving.as_deref())
            .filter(|_| nothing_streamed(outcome));
        if refused_before_sending(outcome) {
            // Nothing was sent, so nothing of it stays: the client sends the same message again
            // with `override_cap` (which records it once) or puts it back in its input.
            return self.update_chat(target, |chat| {
                if chat
                    .messages
                    .last()
                    .is_some_and(|m| m.role == crate::chat::model::Role::User)
                {
                    turn::unrecord_user_message(chat);
                }
                if let Some(id) = unapprove {
                    crate::agent::plan::unapprove(chat, id);
                }
            });
        }
        let record = outcome.record(model);
        if record.messages_are_empty() && unapprove.is_none() {
            return Ok(());
        }
        self.update_chat(target, |chat| {
            record.record_in(chat);
            if let Some(id) = unapprove {
                crate::agent::plan::unapprove(chat, id);
            }
            if let Some(plan) = outcome.proposed_plan() {
                crate::agent::plan::store(chat, plan);
            }
        })
    }

    /// Whether the chat `target` gets an automatic title after a reply: after its first exchange,
    /// when the reply got through and the chat still has a default name. `Some` with the context
    /// paths to name it from (those of the active chat only if it is this one).
    pub fn wants_title(
        &mut self,
        target: &ChatRef,
        first_exchange: bool,
        outcome: &ReplyOutcome,
    ) -> Option<Vec<String>> {
        if !first_exchange || !outcome.ending.answered() {
            return None;
        }
        // The active chat only if it is this one, in this store (ids are unique per store only).
        let files = self.context_paths_if_active(&target.key());
        self.current_name(target.global, &target.id)
            .is_some_and(|n| crate::chat::naming::is_default_name(&n))
            .then_some(files)
    }
}

/// A reply that ended without an answer before anything streamed: no text, no usage, no call.
fn nothing_streamed(outcome: &ReplyOutcome) -> bool {
    !outcome.ending.answered()
        && outcome.text.is_empty()
        && outcome.thinking.is_empty()
        && outcome.usage == crate::llm::Usage::default()
        && outcome
            .agent
            .as_ref()
            .is_none_or(|a| a.parts.is_empty() && a.tool_calls == 0)
}

/// A reply the spend caps refused before its first request (ECOSYSTEM-PROTOCOL.md §11: "Nothing
/// was sent"): nothing streamed, nothing used, no step made a call.
fn refused_before_sending(outcome: &ReplyOutcome) -> bool {
    matches!(&outcome.ending, crate::agent::job::Ending::Failed(m) if m.starts_with("Spend cap:"))
        && nothing_streamed(outcome)
}
