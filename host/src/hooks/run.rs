//! One hook asked in the sandbox: loaded under its grant (checked against its approved sha256, as
//! tools are), `decide` called with the event and nothing else the grant does not give (no files,
//! network or environment unless granted; the fuel, wall-time and memory limits of every call), its
//! answer read, and the decision recorded in the audit chain. Anything but a clean `pass` or
//! `deny(reason)` is a deny whose reason says what went wrong.

use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use serde_json::Value;

use super::Point;
use crate::audit::{Actor, Entry};
use crate::components::installed::Status;
use crate::components::load::{self, OutputTo};
use crate::components::manage::HOOK_EXPORT;
use crate::components::view::ViewSlot;
use crate::sandbox::cache::ComponentCache;
use crate::sandbox::{Limits, Sandbox, ToolComponent};
use crate::toolhost::{LoadError, LoadedComponents, ToolHostError};

/// The longest reason kept from a hook (it reaches the model, the user and the chain).
const MAX_REASON: usize = 1024;

/// Why a hook denied (or was denied for): its own reason, or what went wrong asking it. `Display`
/// is the reason the model, the user and the audit chain read.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The hook is enabled for the project but has no grant that holds.
    #[error(
        "the hook is enabled for this project but {}, so it denies: review it and run `bb7 tools grant {name}` (or `bb7 tools disable {name}`)",
        if *.stale { "its binary changed since it was granted" } else { "it is not granted" }
    )]
    NotGranted {
        /// The hook's name.
        name: String,
        /// Its grant is for another build (re-added since).
        stale: bool,
    },
    /// The sandbox could not be set up.
    #[error("the hook could not run: {0}")]
    Sandbox(#[from] ToolHostError),
    /// The hook could not be loaded under its grant (e.g. its binary changed on disk).
    #[error("the hook could not be loaded: {0}")]
    Load(#[from] LoadError),
    /// The component exports no `decide`.
    #[error("the component does not export {HOOK_EXPORT}, so it cannot decide")]
    NoDecide,
    /// The directory its grant gives could not be set up.
    #[error("the hook's directory could not be set up: {0}")]
    Dir(#[from] crate::components::error::ComponentError),
    /// The call failed (trap, time or memory limit, …); the text says how, cleaned.
    #[error("{0}")]
    Failed(String),
    /// The hook denied, with this reason (cleaned).
    #[error("{0}")]
    Denied(String),
    /// The hook denied with an empty reason.
    #[error("(the hook gave no reason)")]
    NoReason,
    /// The answer is not a decision (the start of it, as JSON).
    #[error("the hook's answer is not a decision (pass or deny), so it denies: {0}")]
    NotADecision(String),
}

/// The sandbox hooks run on: one per process, set up at the first hook asked, on the hook engine
/// ([`crate::sandbox::hook_engine`]). It keeps no call records: a hook's decision is recorded as a
/// `hook` record instead. Its compiled components are cached where the tools' are (the same code
/// generation).
fn sandbox() -> Result<Arc<Sandbox>, ToolHostError> {
    static SANDBOX: OnceLock<Result<Arc<Sandbox>, ToolHostError>> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let engine = crate::sandbox::hook_engine::engine()
                .map_err(|e| ToolHostError::Unavailable(e.to_string()))?;
            let protected: Vec<std::path::PathBuf> =
                crate::paths::state_dir().into_iter().collect();
            Sandbox::with_engine(
                engine,
                Limits::default(),
                ComponentCache::default_base(),
                None,
                &protected,
            )
            .map(Arc::new)
            .map_err(|e| ToolHostError::Unavailable(format!("{e:#}")))
        })
        .clone()
}

/// `hook`'s component loaded on the hook sandbox under its grant (checked against its approved
/// sha256 when first loaded, then kept per binary and grant, as a tool host keeps tools).
fn load_granted(hook: &Status) -> Result<Arc<ToolComponent>, LoadError> {
    static LOADED: LazyLock<LoadedComponents> = LazyLock::new(Default::default);
    let sandbox = sandbox()?;
    Ok(load::load_granted(&sandbox, hook, &LOADED)?)
}

/// One event to put to the hooks of a point.
pub(super) struct Ask<'a> {
    /// The project the action is in.
    pub project: &'a Path,
    /// The point.
    pub point: Point,
    /// Who caused the action.
    pub actor: &'a Actor,
    /// The event JSON.
    pub event: &'a str,
}

impl Ask<'_> {
    /// Asks `hook`; `Err` is a deny (its `Display` the reason). The decision is recorded either way.
    pub fn decide(&self, hook: &Status) -> Result<(), HookError> {
        let decision = self.run(hook);
        let entry = Entry::new("hook", self.actor, Some(self.project))
            .set("component", hook.name.clone())
            .set("component_sha256", hook.installed.sha256.clone())
            .set("point", self.point.as_str())
            .set(
                "args_sha256",
                crate::audit::sha256_hex(self.event.as_bytes()),
            )
            .set("decision", if decision.is_ok() { "pass" } else { "deny" })
            .set_opt(
                "grants",
                hook.granted
                    .as_ref()
                    .and_then(|g| serde_json::to_value(g).ok()),
            );
        crate::audit::record(match &decision {
            Ok(()) => entry,
            Err(e) => {
                let reason = e.to_string();
                entry.set("reason", reason.clone()).failed(reason)
            }
        });
        decision
    }

    fn run(&self, hook: &Status) -> Result<(), HookError> {
        let granted = hook.granted.clone().ok_or_else(|| HookError::NotGranted {
            name: hook.name.clone(),
            stale: hook.grant_stale,
        })?;
        let sandbox = sandbox()?;
        let decide = decide_of(hook)?;
        let views = ViewSlot::default();
        let dir = load::call_dir(
            granted.files,
            self.project,
            || crate::config::load().config().agent.tool_settings(),
            &views,
            OutputTo::Fresh,
        )?;
        let caps = load::call_caps(&granted, dir.grant);
        let arguments = serde_json::json!({ "event": self.event }).to_string();
        // A hook granted nothing cannot block in a host call: it runs on this thread (no hand-off
        // to a worker); any other under the watchdog, as tool calls run.
        let http_linked = !hook.installed.requested.http.is_empty();
        let result = if super::exec::inline_safe(&caps, http_linked) {
            super::exec::call_inline(&sandbox, &decide, &caps, &arguments)
        } else {
            sandbox
                .call_metered(&decide, &caps, dir.limit, &[], &arguments)
                .0
        };
        match result {
            Ok(answer) => read_answer(&answer),
            Err(e) => Err(HookError::Failed(clean(&format!(
                "the hook failed ({}), so it denies: {e}",
                e.kind()
            )))),
        }
    }
}

/// `hook`'s `decide`, ready to call: its component loaded under its grant (checked against its
/// approved sha256 when first loaded, kept by the tool host per binary and grant), and the function
/// looked up once per loaded component.
fn decide_of(hook: &Status) -> Result<Arc<ToolComponent>, HookError> {
    /// Per hook name, the component last loaded for it and its `decide` (the component kept with
    /// it, so its address names it while the entry lives). One entry per name: a hook reloaded
    /// (re-granted, its limits changed, or the same binary under another name) replaces its own
    /// entry, so the cache stays as small as the set of installed hooks.
    type Kept = Vec<(String, Arc<ToolComponent>, Arc<ToolComponent>)>;
    static DECIDE: Mutex<Kept> = Mutex::new(Vec::new());
    let component = load_granted(hook)?;
    let mut kept = DECIDE.lock().unwrap_or_else(|p| p.into_inner());
    let slot = kept.iter().position(|(name, _, _)| *name == hook.name);
    if let Some(i) = slot
        && Arc::ptr_eq(&kept[i].1, &component)
    {
        return Ok(Arc::clone(&kept[i].2));
    }
    let decide = decide_function(&component).ok_or(HookError::NoDecide)?;
    let entry = (hook.name.clone(), component, Arc::clone(&decide));
    match slot {
        Some(i) => kept[i] = entry,
        None => kept.push(entry),
    }
    Ok(decide)
}

/// The component's `decide`, ready to call.
pub(super) fn decide_function(component: &Arc<ToolComponent>) -> Option<Arc<ToolComponent>> {
    let tool = component
        .generic()?
        .functions
        .iter()
        .find(|f| f.export == HOOK_EXPORT)?
        .tool
        .clone();
    component.function(&tool).map(Arc::new)
}

/// A `decision` as the sandbox gives it back (`{"tag": "pass"}` or `{"tag": "deny", "val": "…"}`):
/// `Ok` for pass, `Err` for deny and for anything else.
fn read_answer(answer: &Value) -> Result<(), HookError> {
    match (answer.get("tag").and_then(Value::as_str), answer.get("val")) {
        (Some("pass"), None) => Ok(()),
        (Some("deny"), Some(Value::String(reason))) if !reason.trim().is_empty() => {
            Err(HookError::Denied(clean(reason)))
        }
        (Some("deny"), Some(Value::String(_))) => Err(HookError::NoReason),
        _ => Err(HookError::NotADecision(
            answer.to_string().chars().take(200).collect(),
        )),
    }
}

/// `reason` on one line, without control, bidirectional or invisible characters, at most
/// [`MAX_REASON`] bytes.
fn clean(reason: &str) -> String {
    let mut out = String::new();
    for c in reason.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if crate::components::manifest::invisible(c) {
            continue;
        }
        if out.len() + c.len_utf8() > MAX_REASON {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_clean_pass_passes() {
        assert!(read_answer(&json!({"tag": "pass"})).is_ok());
        assert_eq!(
            read_answer(&json!({"tag": "deny", "val": "no\nway\u{202e}"}))
                .unwrap_err()
                .to_string(),
            "no way"
        );
        assert!(read_answer(&json!({"tag": "deny", "val": ""})).is_err());
        for garbage in [
            json!("pass"),
            json!({"tag": "pass", "val": 1}),
            json!(null),
            json!({"tag": "allow"}),
        ] {
            let e = read_answer(&garbage).unwrap_err().to_string();
            assert!(e.contains("not a decision"), "{e}");
        }
    }

    #[test]
    fn reasons_are_bounded() {
        let r = clean(&"x".repeat(5000));
        assert!(r.len() <= MAX_REASON + 3);
    }
}
