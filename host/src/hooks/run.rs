//! One hook asked in the sandbox: loaded under its grant (checked against its approved sha256, as
//! tools are), `decide` called with the event and nothing else the grant does not give (no files,
//! network or environment unless granted; the fuel, wall-time and memory limits of every call), its
//! answer read, and the decision recorded in the audit chain. Anything but a clean `pass` or
//! `deny(reason)` is a deny whose reason says what went wrong.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::Point;
use crate::audit::{Actor, Entry};
use crate::components::installed::Status;
use crate::components::load::{self, OutputTo};
use crate::components::manage::HOOK_EXPORT;
use crate::components::view::ViewSlot;
use crate::sandbox::ToolComponent;
use crate::toolhost::ToolHost;

/// The longest reason kept from a hook (it reaches the model, the user and the chain).
const MAX_REASON: usize = 1024;

/// Why a hook enabled but not granted denies, and what to do about it.
fn not_granted(hook: &Status) -> String {
    let why = if hook.grant_stale {
        "its binary changed since it was granted"
    } else {
        "it is not granted"
    };
    format!(
        "the hook is enabled for this project but {why}, so it denies: review it and run `bb7 tools grant {}` (or `bb7 tools disable {}`)",
        hook.name, hook.name
    )
}

/// The tool host hooks run on: one per process, set up at the first hook asked. Its sandbox keeps
/// no call records: a hook's decision is recorded as a `hook` record instead.
fn host() -> &'static ToolHost {
    static HOST: OnceLock<ToolHost> = OnceLock::new();
    HOST.get_or_init(|| ToolHost::with_audit(None))
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
    /// Asks `hook`; `Err(reason)` is a deny. The decision is recorded either way.
    pub fn decide(&self, hook: &Status) -> Result<(), String> {
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
            Err(reason) => entry.set("reason", reason.clone()).failed(reason.clone()),
        });
        decision
    }

    fn run(&self, hook: &Status) -> Result<(), String> {
        let granted = hook.granted.clone().ok_or_else(|| not_granted(hook))?;
        let sandbox = host()
            .sandbox()
            .map_err(|e| format!("the hook could not run: {e}"))?;
        let component = host()
            .load_granted(hook)
            .map_err(|e| format!("the hook could not be loaded: {e}"))?;
        let decide = decide_function(&component).ok_or_else(|| {
            format!("the component does not export {HOOK_EXPORT}, so it cannot decide")
        })?;
        let views = ViewSlot::default();
        let dir = load::call_dir(
            granted.files,
            self.project,
            || crate::config::load().config().agent.tool_settings(),
            &views,
            OutputTo::Fresh,
        )
        .map_err(|e| format!("the hook's directory could not be set up: {e}"))?;
        let caps = load::call_caps(&granted, dir.grant);
        let arguments = serde_json::json!({ "event": self.event }).to_string();
        let (result, _record) = sandbox.call_metered(&decide, &caps, dir.limit, &[], &arguments);
        match result {
            Ok(answer) => read_answer(&answer),
            Err(e) => Err(clean(&format!(
                "the hook failed ({}), so it denies: {e}",
                e.kind()
            ))),
        }
    }
}

/// The component's `decide`, ready to call.
fn decide_function(component: &Arc<ToolComponent>) -> Option<Arc<ToolComponent>> {
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
/// `Ok` for pass, `Err(reason)` for deny and for anything else.
fn read_answer(answer: &Value) -> Result<(), String> {
    match (answer.get("tag").and_then(Value::as_str), answer.get("val")) {
        (Some("pass"), None) => Ok(()),
        (Some("deny"), Some(Value::String(reason))) if !reason.trim().is_empty() => {
            Err(clean(reason))
        }
        (Some("deny"), Some(Value::String(_))) => Err("(the hook gave no reason)".into()),
        _ => {
            let shown: String = answer.to_string().chars().take(200).collect();
            Err(format!(
                "the hook's answer is not a decision (pass or deny), so it denies: {shown}"
            ))
        }
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
        assert_eq!(read_answer(&json!({"tag": "pass"})), Ok(()));
        assert_eq!(
            read_answer(&json!({"tag": "deny", "val": "no\nway\u{202e}"})),
            Err("no way".to_string())
        );
        assert!(read_answer(&json!({"tag": "deny", "val": ""})).is_err());
        for garbage in [
            json!("pass"),
            json!({"tag": "pass", "val": 1}),
            json!(null),
            json!({"tag": "allow"}),
        ] {
            let e = read_answer(&garbage).unwrap_err();
            assert!(e.contains("not a decision"), "{e}");
        }
    }

    #[test]
    fn reasons_are_bounded() {
        let r = clean(&"x".repeat(5000));
        assert!(r.len() <= MAX_REASON + 3);
    }
}
