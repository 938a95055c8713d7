//! One tool call: a fresh store holding exactly the granted directory, no network, no environment,
//! no inherited stdio; memory, wall-time and result-size limits; an audit record.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmtime::{Store, Trap};

use super::api::{ToolFailure, ToolInfo};
use super::audit::{AuditLog, CallRecord};
use super::engine;
use super::error::CallError;
use super::grant::{Access, CallCaps, Grant};
use super::limits::{Limits, OutputLimit};
use super::registry::{Registry, ToolComponent};
use super::state::{CallState, CallWasi, new_store, wasi_ctx};
use super::watchdog::{Overrun, Workers};

/// How long past its wall-time limit a call may stay blocked in a host call before it is abandoned.
/// (Guest code is stopped by the epoch at the limit itself.)
const DEADLINE_GRACE: Duration = Duration::from_millis(250);
/// Error messages from a tool are cut to this many bytes: they reach the model, the user and the log.
pub const MAX_ERROR_MESSAGE: usize = 16 << 10;

/// Runs tool components: each call in a fresh store on a worker thread, under a host-side deadline.
pub struct Sandbox {
    registry: Registry,
    limits: Limits,
    audit: Option<AuditLog>,
    workers: Workers,
    /// Directories no read-write grant may overlap: the compiled-component cache (native code the
    /// host loads) and the global state dir (chats, the audit log).
    protected: Vec<PathBuf>,
}

impl Sandbox {
    /// A sandbox with `limits`, caching compiled components under `cache_base`, appending a record of
    /// every call to `audit` when given. `protected` lists further directories no read-write grant
    /// may contain or lie in (the cache base and the audit log's directory are always protected).
    pub fn new(
        limits: Limits,
        cache_base: Option<PathBuf>,
        audit: Option<AuditLog>,
        protected: &[PathBuf],
    ) -> anyhow::Result<Self> {
        Sandbox::with_engine(
            engine::shared(&limits)?,
            limits,
            cache_base,
            audit,
            protected,
        )
    }

    /// [`Sandbox::new`] on `engine` instead of the process-wide one: an engine configured as
    /// [`engine::engine_config`] configures it (the same code generation), whose epoch is ticked
    /// every [`super::limits::EPOCH_TICK`] (the hooks' engine, [`super::hook_engine`]).
    pub fn with_engine(
        engine: wasmtime::Engine,
        limits: Limits,
        cache_base: Option<PathBuf>,
        audit: Option<AuditLog>,
        protected: &[PathBuf],
    ) -> anyhow::Result<Self> {
        let mut dirs: Vec<PathBuf> = protected.to_vec();
        dirs.extend(cache_base.clone());
        dirs.extend(
            audit
                .as_ref()
                .and_then(|a| a.path().parent().map(Path::to_path_buf)),
        );
        let protected = dirs.iter().map(|d| canonical_or_lexical(d)).collect();
        Ok(Sandbox {
            registry: Registry::new(engine, cache_base)?,
            limits,
            audit,
            workers: Workers::new(),
            protected,
        })
    }

    /// The components this sandbox can run.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The audit log every call is recorded in, when there is one.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Asks `tool` to describe itself. The component gets no directory at all.
    pub fn describe(
        &self,
        tool: &Arc<ToolComponent>,
        settings: &[(String, String)],
    ) -> Result<ToolInfo, CallError> {
        let settings = settings.to_vec();
        self.execute(
            tool,
            wasi_ctx(&CallCaps::none(), self.audit.as_ref())?,
            None,
            move |pre, store| pre.describe(store, &settings),
        )
    }

    /// Readies `tool`'s first call ahead of it ([`crate::toolhost::ToolHost::prewarm`]): one
    /// `describe` in a fresh store without any directory makes what a component's first
    /// instantiation makes (its memory image, the call worker's state) and wasmtime-wasi's runtime
    /// starts, so the call that follows waits for neither. A failure is ignored: the call meets
    /// it again and reports it.
    pub fn warm(&self, tool: &Arc<ToolComponent>) {
        // wasmtime-wasi's own runtime, which its host calls enter when no runtime is current (as
        // on the call worker); on a runtime's thread it would be that runtime instead.
        if tokio::runtime::Handle::try_current().is_err() {
            wasmtime_wasi::runtime::in_tokio(async {});
        }
        let _ = self.describe(tool, &[]);
    }

    /// Runs one call of `tool` with `grant` as its only directory (mounted at `/`), returning the JSON
    /// result and the audit record (also appended to the audit log, if any).
    pub fn call(
        &self,
        tool: &Arc<ToolComponent>,
        grant: &Grant,
        settings: &[(String, String)],
        arguments: &str,
    ) -> (Result<Value, CallError>, CallRecord) {
        self.call_with(tool, &CallCaps::dir(grant.clone()), settings, arguments)
    }

    /// Runs one call of `tool` with exactly `caps` (a third-party component's grant: at most one
    /// directory, its network and environment), returning the result and the audit record.
    pub fn call_with(
        &self,
        tool: &Arc<ToolComponent>,
        caps: &CallCaps,
        settings: &[(String, String)],
        arguments: &str,
    ) -> (Result<Value, CallError>, CallRecord) {
        self.call_metered(tool, caps, None, settings, arguments)
    }

    /// [`Sandbox::call_with`], writing at most `output` (when given): the write that would pass it
    /// is refused before it reaches the disk and fails the call ([`CallError::OutputLimit`]).
    pub fn call_metered(
        &self,
        tool: &Arc<ToolComponent>,
        caps: &CallCaps,
        output: Option<OutputLimit>,
        settings: &[(String, String)],
        arguments: &str,
    ) -> (Result<Value, CallError>, CallRecord) {
        let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let t0 = Instant::now();
        let result = self.run(tool, caps, output, settings, arguments);
        let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let record = CallRecord {
            started,
            tool: tool.name.clone(),
            component_sha256: tool.sha256.clone(),
            wit_version: tool.wit_version.as_str().to_string(),
            component: tool.third_party.clone(),
            grants: caps.dir.iter().cloned().collect(),
            network: super::audit::granted_list(&caps.network),
            env: super::audit::granted_list(&caps.env),
            duration_ms,
            compile_ms: if tool
                .load_reported
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                0.0
            } else {
                tool.load_ms
            },
            outcome: match &result {
                Ok(_) => "ok".to_string(),
                Err(e) => e.kind().to_string(),
            },
            error: result.as_ref().err().map(|e| e.to_string()),
        };
        if let Some(log) = &self.audit {
            // The call's effect stands either way; a log that cannot be written is reported, not
            // turned into a failed call.
            // A built-in tool refused a path: the host checks the deny list itself (a message is
            // only text, and a component could write any).
            let refusal = match &result {
                Err(CallError::Tool(f))
                    if f.kind == "permission-denied" && tool.third_party.is_none() =>
                {
                    super::audit::deny_list_refusal(settings, arguments)
                }
                _ => None,
            };
            if let Err(e) = log.append_call(
                &record,
                Some(arguments),
                result.as_ref().ok(),
                refusal.as_ref(),
            ) {
                tracing::warn!(
                    "cannot append to the audit log {}: {e}",
                    log.path().display()
                );
            }
        }
        (result, record)
    }

    fn run(
        &self,
        tool: &Arc<ToolComponent>,
        caps: &CallCaps,
        output: Option<OutputLimit>,
        settings: &[(String, String)],
        arguments: &str,
    ) -> Result<Value, CallError> {
        if let Some(grant) = &caps.dir {
            self.check_grant(grant)?;
        }
        let limits = tool.limits.unwrap_or(self.limits);
        let wasi = wasi_ctx(caps, self.audit.as_ref())?;
        let settings = settings.to_vec();
        let arguments = arguments.to_string();
        let denials = self.audit.clone().filter(|_| caps.network.is_empty());
        let project = caps.dir.as_ref().map(|g| g.path.clone());
        let json = self.execute(tool, wasi, output, move |pre, store| {
            if let Some(log) = denials {
                store
                    .data_mut()
                    .audit_socket_denials(log, project.as_deref());
            }
            pre.call(store, &settings, &arguments)
        })?;
        if json.len() > limits.result_bytes {
            return Err(CallError::ResultTooLarge {
                size: json.len(),
                limit: limits.result_bytes,
            });
        }
        serde_json::from_str::<Value>(&json).map_err(|e| CallError::BadResult(e.to_string()))
    }

    /// Refuses a read-write grant that contains, or lies inside, a protected directory. [`Sandbox::call`]
    /// always checks; callers may check first to report a set-up error before anything runs.
    pub fn check_grant(&self, grant: &Grant) -> Result<(), CallError> {
        if grant.access == Access::ReadOnly {
            return Ok(());
        }
        let dir = &grant.path;
        for p in &self.protected {
            if p.starts_with(dir) || dir.starts_with(p) {
                return Err(CallError::Grant(format!(
                    "{} read-write: it overlaps {}, which holds bb7's own state (compiled components, chats or the audit log) and is never given to a tool",
                    dir.display(),
                    p.display()
                )));
            }
        }
        Ok(())
    }

    /// Runs `op` on a fresh store on a worker thread, under the wall-time deadline, and classifies
    /// every way it can fail.
    fn execute<R: Send + 'static>(
        &self,
        tool: &Arc<ToolComponent>,
        wasi: CallWasi,
        output: Option<OutputLimit>,
        op: impl FnOnce(
            &super::api::ToolPre<CallState>,
            &mut Store<CallState>,
        ) -> wasmtime::Result<Result<R, ToolFailure>>
        + Send
        + 'static,
    ) -> Result<R, CallError> {
        let engine = self.registry.engine().clone();
        let limits = tool.limits.unwrap_or(self.limits);
        let tool = Arc::clone(tool);
        let cancel = super::cancel::current();
        if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            return Err(CallError::Cancelled);
        }
        let ran = self
            .workers
            .run(limits.wall_time + DEADLINE_GRACE, move |overdue| {
                let mut store = new_store(&engine, &limits, wasi, output);
                super::cancel::arm(&mut store, &limits, cancel.as_ref(), Some(overdue));
                let ran = op(&tool.pre, &mut store);
                let exceeded = store
                    .data()
                    .output_budget()
                    .filter(|b| b.exceeded())
                    .map(|b| b.limit());
                let out = match (ran, exceeded) {
                    // Every refused write traps; a guest cannot turn one into success.
                    (Ok(_), Some(limit)) => Err(CallError::OutputLimit(limit)),
                    (Ok(Ok(r)), None) => Ok(r),
                    (Ok(Err(f)), None) => Err(CallError::Tool(bounded(f))),
                    (Err(_), _) if cancel.as_ref().is_some_and(|c| c.is_cancelled()) => {
                        Err(CallError::Cancelled)
                    }
                    (Err(e), _) => Err(classify(&store, &limits, e)),
                };
                (out, store)
            });
        match ran {
            Ok(r) => r,
            Err(Overrun::Deadline) => {
                Err(CallError::Abandoned(limits.wall_time.as_millis() as u64))
            }
            Err(Overrun::TooManyStuck) => Err(CallError::Unavailable),
        }
    }
}

/// Why a call whose store is `store` failed with `e`: a limit it hit, or the trap (also used by
/// hooks run on the caller's thread, `hooks/exec.rs`).
pub(crate) fn classify(store: &Store<CallState>, limits: &Limits, e: wasmtime::Error) -> CallError {
    if store.data().memory_limit_hit() {
        return CallError::MemoryLimit(limits.memory_bytes);
    }
    if let Some(b) = store.data().output_budget().filter(|b| b.exceeded()) {
        return CallError::OutputLimit(b.limit());
    }
    if store.data().deadline_hit() || matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return CallError::TimeLimit(limits.wall_time.as_millis() as u64);
    }
    // The whole cause chain (the trap itself is the root cause, under wasmtime's backtrace
    // context), and the fix when it is a known one.
    let msg = super::hints::explained(super::hints::chain(e.chain()));
    let msg = if msg.is_empty() {
        "unknown trap".to_string()
    } else {
        msg
    };
    CallError::Trap(truncate(&msg, MAX_ERROR_MESSAGE))
}

/// A tool failure with its message cut to [`MAX_ERROR_MESSAGE`] bytes.
fn bounded(mut f: ToolFailure) -> ToolFailure {
    if f.message.len() > MAX_ERROR_MESSAGE {
        f.message = truncate(&f.message, MAX_ERROR_MESSAGE);
    }
    f
}

/// Cuts `s` to at most `max` bytes at a character boundary, saying how much was cut.
fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes cut]", &s[..end], s.len() - end)
}

/// The canonical form of `p` when it exists; else `p` made absolute, so a protected directory that
/// does not exist yet is still compared sensibly.
fn canonical_or_lexical(p: &Path) -> PathBuf {
    p.canonicalize()
        .unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "é".repeat(10);
        let t = truncate(&s, 5);
        assert!(t.starts_with("éé"));
        assert!(t.contains("more bytes cut"));
        assert_eq!(truncate("short", 10), "short");
    }
}
