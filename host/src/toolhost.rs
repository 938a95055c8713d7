//! The tool host: the one owner of what running tools needs — the sandbox (wasmtime engine, the
//! built-in components, the audit log) and the third-party components loaded under their grants.
//!
//! It sits between the reply engine ([`crate::agent`]) and [`crate::components`] +
//! [`crate::sandbox`]. Nothing here knows of a reply or of the protocol: the workspace holds one
//! and passes it to each reply, the CLI (`bb7 tools`) makes its own with [`ToolHost::with_audit`],
//! and later hosts (`bb7 mcp`, hooks) can hold theirs. The sandbox is created on the first tool
//! call, or ahead of it ([`ToolHost::prewarm`]) when a file the model may edit joins a project
//! chat's context or a reply likely to edit is sent; a session that does neither never sets it up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::components::installed::Status;
use crate::sandbox::{AuditLog, Sandbox, ToolComponent};

/// Why the tool host cannot run a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolHostError {
    /// The sandbox could not be created (the message is its cause, with context).
    #[error("The tool sandbox is unavailable: {0}")]
    Unavailable(String),
}

/// Why a third-party component could not be made ready to run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The sandbox could not be created.
    #[error(transparent)]
    Sandbox(#[from] ToolHostError),
    /// The component could not be loaded under its grant.
    #[error(transparent)]
    Component(#[from] crate::components::error::ComponentError),
}

/// Which audit log the sandbox writes to, decided when the host is made.
enum Audit {
    /// `~/.bb7/audit/log.jsonl`, the audit chain (when the state directory is known): the host's default.
    Default,
    /// The given log, or none.
    Given(Option<AuditLog>),
}

/// The third-party components loaded so far, by what they were loaded as (see
/// [`crate::components::load::load_granted`]).
pub type LoadedComponents = Mutex<HashMap<String, Arc<ToolComponent>>>;

/// The sandbox and the loaded components of one host (a session, a CLI run).
pub struct ToolHost {
    audit: Mutex<Option<Audit>>,
    sandbox: OnceLock<Result<Arc<Sandbox>, ToolHostError>>,
    loaded: LoadedComponents,
    prewarming: AtomicBool,
}

impl Default for ToolHost {
    fn default() -> Self {
        ToolHost::new()
    }
}

impl std::fmt::Debug for ToolHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHost")
            .field("sandbox_created", &self.sandbox.get().is_some())
            .finish_non_exhaustive()
    }
}

impl ToolHost {
    /// A host whose sandbox (made on first use) audits to the default log. Creates nothing yet.
    pub fn new() -> ToolHost {
        ToolHost::with(Audit::Default)
    }

    /// A host whose sandbox (made on first use) audits to `audit` (`None`: no audit log).
    pub fn with_audit(audit: Option<AuditLog>) -> ToolHost {
        ToolHost::with(Audit::Given(audit))
    }

    fn with(audit: Audit) -> ToolHost {
        ToolHost {
            audit: Mutex::new(Some(audit)),
            sandbox: OnceLock::new(),
            loaded: Mutex::new(HashMap::new()),
            prewarming: AtomicBool::new(false),
        }
    }

    /// The sandbox, created on the first call (a failure is kept: every later call gets it too).
    pub fn sandbox(&self) -> Result<Arc<Sandbox>, ToolHostError> {
        self.sandbox
            .get_or_init(|| {
                let audit = match self.audit.lock().ok().and_then(|mut a| a.take()) {
                    Some(Audit::Given(a)) => a,
                    Some(Audit::Default) | None => crate::paths::audit_log()
                        .map(|p| AuditLog::new(p).actor(crate::audit::Actor::Model)),
                };
                crate::sandbox::host_sandbox(audit)
                    .map(Arc::new)
                    .map_err(|e| ToolHostError::Unavailable(format!("{e:#}")))
            })
            .clone()
    }

    /// Starts making the sandbox and loading the built-in `tools` on a background thread (once
    /// per host), for a reply likely to call them: the set-up overlaps the wait for the model
    /// instead of delaying the first call. A call that comes first waits for the set-up under way
    /// (nothing is made twice); a failure is the one the call would have met.
    pub fn prewarm(self: &Arc<Self>, tools: &'static [&'static str]) {
        if self.sandbox.get().is_some() || self.prewarming.swap(true, Ordering::Relaxed) {
            return;
        }
        let host = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("bb7-prewarm".into())
            .spawn(move || {
                if let Ok(sandbox) = host.sandbox() {
                    for tool in tools {
                        if let Ok(t) = sandbox.registry().builtin(tool) {
                            sandbox.warm(&t);
                        }
                    }
                }
            });
        if spawned.is_err() {
            self.prewarming.store(false, Ordering::Relaxed);
        }
    }

    /// Whether the sandbox is made or being made ahead by [`Self::prewarm`].
    #[cfg(test)]
    pub(crate) fn sandbox_requested(&self) -> bool {
        self.sandbox_created() || self.prewarming.load(Ordering::Relaxed)
    }

    /// Whether the sandbox has been created (a reply without tool calls leaves it uncreated).
    pub fn sandbox_created(&self) -> bool {
        self.sandbox.get().is_some()
    }

    /// The component of an offered third-party tool, ready to run under its grant: loaded once per
    /// host and kept (see [`crate::components::load::load_granted`]).
    pub fn load_granted(&self, status: &Status) -> Result<Arc<ToolComponent>, LoadError> {
        let sandbox = self.sandbox()?;
        Ok(crate::components::load::load_granted(
            &sandbox,
            status,
            &self.loaded,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_is_made_on_first_use_and_kept() {
        let host = ToolHost::with_audit(None);
        assert!(!host.sandbox_created());
        let a = host.sandbox().expect("sandbox");
        assert!(host.sandbox_created());
        let b = host.sandbox().expect("sandbox");
        assert!(Arc::ptr_eq(&a, &b));
    }
}
