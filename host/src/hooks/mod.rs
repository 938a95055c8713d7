//! Hooks (ECOSYSTEM-PROTOCOL.md §8): deny-only policy as sandboxed components. A hook is an
//! installed component exporting `bb7:hook/hook@0.1.0` whose manifest names its points; enabled and
//! granted for a project, it is asked to `decide` on an event at each of them. It can only deny:
//! `pass` lets the action go on to every other rule, the first deny stops it, and a hook that traps,
//! exceeds a limit or answers anything else denies (fail closed). Every decision is a `hook` record
//! in the audit chain.
//!
//! - [`event`]: the event JSON of each point.
//! - `run`: one hook asked in the sandbox under its grant, its answer read, the decision recorded.
//! - `exec`: a hook granted nothing run on the caller's thread (no hand-off to a worker).
//! - `state`: the components' state, parsed once and kept while `tools.json` is unchanged.
//! - [`crate::sandbox::hook_engine`]: the engine hooks run on: the tools' code generation on a
//!   smaller pool; a dropped instance's memory is released, never kept for the next decision.
//!
//! A project with no hook at a point costs one look at the components' state file (read again
//! only when it changed): no engine, sandbox or component is set up then.

pub mod event;
mod exec;
mod run;
mod state;

use std::path::Path;

use serde_json::{Map, Value};

use crate::audit::Actor;
use crate::components::error::ComponentError;
use crate::components::installed::Status;

/// Where in an action hooks are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Before any model request of a send.
    PreSend,
    /// Before a tool call runs.
    PreToolCall,
    /// After a tool call, before the model reads its result.
    PostToolCall,
    /// Before a change is written to the project (a whole file, or hunks of it).
    PreApply,
}

impl Point {
    /// The point's name, as manifests and events spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Point::PreSend => "pre_send",
            Point::PreToolCall => "pre_tool_call",
            Point::PostToolCall => "post_tool_call",
            Point::PreApply => "pre_apply",
        }
    }
}

/// A hook denied an action. `Display` is what a denied send or apply tells the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Denied by hook {hook}: {reason}")]
pub struct Denied {
    /// The hook's name.
    pub hook: String,
    /// Why, as the hook said it (or why the host denied for it: a trap, a limit, an unusable answer).
    pub reason: String,
}

impl Denied {
    /// What the model reads for a denied tool call.
    pub fn tool_error(&self) -> String {
        format!("denied by hook {}: {}", self.hook, self.reason)
    }
}

/// The hooks enabled for `project` that are asked at `point`, in name order — granted or not: one
/// enabled but not granted (or whose grant is for another build) denies when asked (fail closed),
/// naming itself and `bb7 tools grant <name>`. The components' state cannot be read → `Err`:
/// whether a hook applies is unknown, so the caller denies.
pub fn at(project: &Path, point: Point) -> Result<Vec<Status>, ComponentError> {
    match state::hooks_at(project, point) {
        // No state directory: nothing is installed, so no hook.
        Err(ComponentError::NoHome) => Ok(Vec::new()),
        r => r,
    }
}

/// Asks every hook of `project` at `point` (see [`at`]) about the event `fields` builds (called
/// only when there is a hook to ask; `point` and `project` are added). `actor` is who caused the
/// action, for the audit chain. The first deny wins; `Ok` when every hook passed (or none applies).
pub fn check(
    project: &Path,
    point: Point,
    actor: &Actor,
    fields: impl FnOnce() -> Map<String, Value>,
) -> Result<(), Denied> {
    let hooks = at(project, point).map_err(|e| {
        let denied = Denied {
            hook: "(unknown)".into(),
            reason: format!("the installed hooks cannot be read, so none can be asked: {e}"),
        };
        crate::audit::record(
            crate::audit::Entry::new("hook", actor, Some(project))
                .set("component", denied.hook.clone())
                .set("point", point.as_str())
                .set("decision", "deny")
                .set("reason", denied.reason.clone())
                .failed(denied.reason.clone()),
        );
        denied
    })?;
    if hooks.is_empty() {
        return Ok(());
    }
    let mut event = Map::new();
    event.insert("point".into(), point.as_str().into());
    event.insert(
        "project".into(),
        project.to_string_lossy().into_owned().into(),
    );
    for (k, v) in fields() {
        event.entry(k).or_insert(v);
    }
    let event = Value::Object(event).to_string();
    let ask = run::Ask {
        project,
        point,
        actor,
        event: &event,
    };
    for hook in &hooks {
        if let Err(e) = ask.decide(hook) {
            return Err(Denied {
                hook: hook.name.clone(),
                reason: e.to_string(),
            });
        }
    }
    Ok(())
}
