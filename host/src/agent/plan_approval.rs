//! Approving a plan (`plan_approve`, ECOSYSTEM-PROTOCOL.md §9): marks the proposed plan approved
//! and builds the agent reply that carries it out, with the [`Undo`] that puts the plan back when
//! that reply cannot start. Apart from [`super::plan`] (which [`super::prepare`] uses for the
//! plan's role in a reply) so that the two do not use each other.

use std::path::Path;

use tokio::sync::watch;

use super::mode::Mode;
use super::plan::{self, Plan, PlanError, PlanRole, PlanStep};
use super::prepare::ReplyRequest;
use crate::chat::model::Chat;

/// What `plan_approve` asks for: the plan, the user's edits to it and how the reply that carries
/// it out runs.
pub struct Approval {
    /// The proposed plan to approve.
    pub plan_id: String,
    /// The user's steps, replacing the proposed ones (checked by [`plan::parse_steps`]).
    pub steps: Option<Vec<PlanStep>>,
    /// Whether the plan's files bound the reply's edits (`restrict_to_plan_files`).
    pub restrict: bool,
    /// The model to use; `None`: the chat's.
    pub model: Option<String>,
    /// The reasoning effort; `None`: the chat's.
    pub effort: Option<String>,
    /// The reply's requests pass the spend caps (`override_cap`).
    pub override_cap: bool,
    /// Becomes `true` on `cancel`.
    pub cancel: watch::Receiver<bool>,
}

/// The plan as it was before [`approve`]; [`Undo::restore`] puts it back when the reply cannot
/// start (nothing was saved then).
#[derive(Debug)]
pub struct Undo(Plan);

impl Undo {
    /// Puts the plan back in `chat` as it was before it was approved.
    pub fn restore(self, chat: &mut Chat) {
        plan::store(chat, &self.0);
    }
}

/// Marks the proposed plan of `approval` approved in `chat` (with the user's steps when given)
/// and returns the agent reply that carries it out, whose user message is the approved plan, and
/// the [`Undo`] for when that reply cannot start. With `restrict` and a `project_root`, the
/// plan's files (normalised against it) bound the reply's edits.
pub fn approve(
    chat: &mut Chat,
    approval: Approval,
    project_root: Option<&Path>,
) -> Result<(ReplyRequest, Undo), PlanError> {
    let before = plan::pending(chat, &approval.plan_id)?;
    let mut approved = before.clone();
    if let Some(steps) = approval.steps {
        approved.steps = steps;
    }
    approved.status = "approved".into();
    let files = if approval.restrict {
        project_root.and_then(|root| plan::plan_files(&approved, root))
    } else {
        None
    };
    let content = plan::approval_message(&approved, files.is_some());
    plan::store(chat, &approved);
    let reply = ReplyRequest {
        content,
        model: approval.model,
        effort: approval.effort,
        retry: None,
        mode: Some(Mode::Agent),
        cancel: approval.cancel,
        override_cap: approval.override_cap,
        plan: Some(PlanRole::Execute {
            files,
            plan_id: approved.id,
        }),
        routing: None,
        disable_fallback: false,
    };
    Ok((reply, Undo(before)))
}
