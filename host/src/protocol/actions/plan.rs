//! `plan_approve` and `plan_reject` (ECOSYSTEM-PROTOCOL.md §9, [`crate::agent::plan`]): deciding
//! a plan the active chat's plan reply proposed. Approving starts an agent reply (the events of a
//! `send`) whose user message is the approved plan; rejecting records the user's feedback for the
//! next request.

use serde_json::{Value, json};

use super::Handled;
use crate::agent::plan::{self, PlanError};
use crate::agent::plan_approval::{self, Approval};
use crate::protocol::reply;
use crate::protocol::request::Request;
use crate::workspace::Workspace;

/// `chat_id`, when given, must be the active chat's.
fn check_chat(s: &Workspace, req: &Request) -> Result<(), String> {
    let active = &s.active()?.id;
    match req.opt_str("chat_id")? {
        Some(id) if !id.is_empty() && id != active => Err(PlanError::NotActive(id.into()).into()),
        _ => Ok(()),
    }
}

/// `plan_approve {chat_id?, plan_id, steps?, restrict_to_plan_files?, model?, reasoning_effort?,
/// override_cap?}`: marks the plan approved (with the user's `steps` when given) and starts the
/// agent reply that carries it out, in the same chat.json write as its user message.
pub fn approve(ctx: &crate::protocol::Ctx, req: &Request) -> Handled {
    let plan_id = req.nonempty("plan_id")?.to_string();
    let steps = match req.fields.get("steps") {
        None | Some(Value::Null) => None,
        Some(v) => Some(plan::parse_steps(v)?),
    };
    // Default true: the approved plan's files bound the edits.
    let restrict = match req.fields.get("restrict_to_plan_files") {
        None | Some(Value::Null) => true,
        Some(_) => req.bool("restrict_to_plan_files")?,
    };
    let model = req
        .opt_str("model")?
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    let effort = req.opt_str("reasoning_effort")?.map(str::to_string);
    let override_cap = req.flag("override_cap")?;
    {
        // Refused before the in-flight slot is claimed: a bad plan_id never looks busy.
        let s = ctx.lock();
        check_chat(&s, req)?;
        plan::pending(&s.active()?.chat, &plan_id)?;
    }
    let approval = Approval {
        plan_id,
        steps,
        restrict,
        model,
        effort,
        override_cap,
        cancel: ctx.inflight.claim(req.id.as_deref())?,
    };
    super::send::start(ctx, req, move |s| {
        check_chat(s, req)?;
        let root = s.project.as_ref().map(|p| p.root().to_path_buf());
        let (reply, undo) =
            plan_approval::approve(&mut s.active_mut()?.chat, approval, root.as_deref())?;
        // start_reply saves the chat with the approval and its user message together; when it
        // fails nothing was saved, so the plan is put back as it was.
        s.start_reply(reply).map_err(|e| {
            if let Ok(a) = s.active_mut() {
                undo.restore(&mut a.chat);
            }
            e.to_string()
        })
    })
}

/// `plan_reject {chat_id?, plan_id, feedback?}`: marks the plan rejected and records the feedback
/// as a system message (the next request's history carries it).
pub fn reject(s: &mut Workspace, req: &Request) -> Handled {
    check_chat(s, req)?;
    let plan_id = req.nonempty("plan_id")?;
    let feedback = req.opt_str("feedback")?;
    let a = s.active_mut()?;
    let before = a.chat.clone();
    plan::reject(&mut a.chat, plan_id, feedback)?;
    if let Err(e) = s.save_active() {
        if let Ok(a) = s.active_mut() {
            a.chat = before;
        }
        return Err(e.into());
    }
    Ok(reply(
        "ok",
        json!({"plan_id": plan_id, "status": "rejected"}),
    ))
}
