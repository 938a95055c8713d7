//! The hooks around one tool call ([`crate::hooks`], points `pre_tool_call` and `post_tool_call`),
//! for the agent loop (plan mode's `propose_plan` too), `bb7 mcp` and `bb7 tools call --project`: a denied call never runs (the model reads `denied by hook
//! <name>: <reason>`), and a result a `post_tool_call` hook denies is replaced by that error.

use std::path::{Path, PathBuf};

use super::retrieval::CallOutcome;
use crate::audit::Actor;
use crate::hooks::{self, Point, event};
use crate::llm::tool_calls::ToolCall;

/// The hooks of one call: the project they are the project's, the component the call runs (a
/// third-party one; `None` for a built-in tool), and who made the call.
pub struct Hooked {
    root: Option<PathBuf>,
    component: Option<String>,
    actor: Actor,
}

impl Hooked {
    /// The hooks of a call in `root` (`None`: no project, so no hooks) running `component`.
    pub fn new(root: Option<&Path>, component: Option<&str>, actor: Actor) -> Hooked {
        Hooked {
            root: root.map(Path::to_path_buf),
            component: component.map(str::to_string),
            actor,
        }
    }

    /// `pre_tool_call`: the outcome the model reads when a hook denies the call (it is not run).
    pub fn before(&self, call: &ToolCall) -> Option<CallOutcome> {
        self.pre(call)
            .err()
            .map(|d| CallOutcome::failed(d.tool_error(), None))
    }

    /// `post_tool_call`: `outcome`, or the denial that replaces it.
    pub fn after(&self, call: &ToolCall, outcome: CallOutcome) -> CallOutcome {
        match self.post(call, outcome.ok, &outcome.content) {
            Ok(()) => outcome,
            Err(d) => CallOutcome::failed(d.tool_error(), outcome.record),
        }
    }

    /// `pre_tool_call`: `Err` when a hook denies the call (it must not run).
    pub fn pre(&self, call: &ToolCall) -> Result<(), hooks::Denied> {
        let Some(root) = self.root.as_deref() else {
            return Ok(());
        };
        let component = self.component.as_deref();
        blocking(|| {
            hooks::check(root, Point::PreToolCall, &self.actor, || {
                let named = call
                    .arguments
                    .as_ref()
                    .map(super::tools::arg_paths)
                    .unwrap_or_default();
                event::pre_tool_call(call, component, root, &named)
            })
        })
    }

    /// `post_tool_call` on a call's result (`ok`, and `result`: the text the caller would read):
    /// `Err` when a hook withholds it.
    pub fn post(&self, call: &ToolCall, ok: bool, result: &str) -> Result<(), hooks::Denied> {
        let Some(root) = self.root.as_deref() else {
            return Ok(());
        };
        let component = self.component.as_deref();
        blocking(|| {
            hooks::check(root, Point::PostToolCall, &self.actor, || {
                event::post_tool_call(call, component, ok, result)
            })
        })
    }
}

/// Runs `f` (which may block on a sandbox call) letting the async runtime move its other tasks
/// away, when there is a multi-threaded runtime; else directly.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// `pre_send`: before any model request of a send in `root` (the user's action). The event carries
/// the model, the mode, the context paths, the prompt's estimated tokens (the request body's
/// messages and tools, counted as the spend caps count them) and their cost at the model's listed
/// prompt price (from the cached model list; `null` when it is not there).
pub fn pre_send(
    root: &Path,
    request: &super::request::RequestBuilder,
    mode: super::mode::Mode,
    context: Vec<String>,
) -> Result<(), hooks::Denied> {
    hooks::check(root, Point::PreSend, &Actor::User, || {
        let body = request.body(None, &[], true);
        let mut text = String::new();
        for k in ["messages", "tools"] {
            if let Some(v) = body.get(k) {
                text.push_str(&v.to_string());
            }
        }
        let tokens = crate::tokens::TokenCounter::new().count(&text) as u64;
        let price = crate::paths::state_dir()
            .and_then(|d| crate::llm::meta::cached_models(&request.config.base_url, &d))
            .and_then(|models| {
                let m = models.into_iter().find(|m| m.id == request.model)?;
                crate::spend::Price::of(&m)
            });
        event::pre_send(event::Send {
            model: &request.model,
            mode: mode.as_str(),
            context,
            estimated_tokens: tokens,
            estimated_cost_usd: price.map(|p| p.prompt * tokens as f64),
        })
    })
}
