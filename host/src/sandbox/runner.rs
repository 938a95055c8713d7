//! One tool call: a fresh store holding exactly the granted directory, no network, no environment,
//! no inherited stdio; memory, wall-time and result-size limits; an audit record.

use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::api::{ToolFailure, ToolInfo};
use super::audit::{AuditLog, CallRecord};
use super::engine;
use super::grant::{Access, Grant};
use super::limits::Limits;
use super::registry::{Registry, ToolComponent};

/// The per-call store state.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: CallLimiter,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps linear memory and tables, and remembers whether the cap was hit so the error can say so.
struct CallLimiter {
    memory_bytes: usize,
    memory_hit: bool,
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_hit = true;
            return Err(wasmtime::Error::msg("memory limit exceeded"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The tool ran and reported an error (for the model to fix).
    #[error("{}", .0.message)]
    Tool(ToolFailure),
    #[error("the tool exceeded its time limit ({0} ms) and was stopped")]
    TimeLimit(u64),
    #[error("the tool exceeded its memory limit ({} MiB) and was stopped", .0 >> 20)]
    MemoryLimit(u64),
    #[error("the tool's result is too large ({size} bytes; the limit is {limit} bytes)")]
    ResultTooLarge { size: usize, limit: usize },
    #[error("the tool crashed: {0}")]
    Trap(String),
    #[error("cannot grant {0}")]
    Grant(String),
}

impl CallError {
    /// A short machine-readable kind: the WIT error kind for tool errors, else the limit or failure.
    pub fn kind(&self) -> &str {
        match self {
            CallError::Tool(f) => &f.kind,
            CallError::TimeLimit(_) => "time-limit",
            CallError::MemoryLimit(_) => "memory-limit",
            CallError::ResultTooLarge { .. } => "result-too-large",
            CallError::Trap(_) => "trap",
            CallError::Grant(_) => "grant",
        }
    }
}

/// Runs tool components. Cheap to share: calls are independent (one store each).
pub struct Sandbox {
    registry: Registry,
    limits: Limits,
    audit: Option<AuditLog>,
}

impl Sandbox {
    /// A sandbox with `limits`, caching compiled components under `cache_base`, appending a record of
    /// every call to `audit` when given.
    pub fn new(
        limits: Limits,
        cache_base: Option<std::path::PathBuf>,
        audit: Option<AuditLog>,
    ) -> anyhow::Result<Self> {
        let engine = engine::shared(&limits)?;
        Ok(Sandbox {
            registry: Registry::new(engine, cache_base)?,
            limits,
            audit,
        })
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Asks `tool` to describe itself. The component gets no directory at all.
    pub fn describe(
        &self,
        tool: &ToolComponent,
        settings: &[(String, String)],
    ) -> Result<ToolInfo, CallError> {
        let mut store = self.store(WasiCtxBuilder::new().build());
        match tool.pre.describe(&mut store, settings) {
            Ok(Ok(info)) => Ok(info),
            Ok(Err(f)) => Err(CallError::Tool(f)),
            Err(e) => Err(self.classify(&store, e)),
        }
    }

    /// Runs one call of `tool` with `grant` as its only directory (mounted at `/`), returning the JSON
    /// result and the audit record (also appended to the audit log, if any).
    pub fn call(
        &self,
        tool: &ToolComponent,
        grant: &Grant,
        settings: &[(String, String)],
        arguments: &str,
    ) -> (Result<String, CallError>, CallRecord) {
        let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let t0 = Instant::now();
        let result = self.run(tool, grant, settings, arguments);
        let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let record = CallRecord {
            started,
            tool: tool.name.clone(),
            component_sha256: tool.sha256.clone(),
            wit_version: tool.wit_version.as_str().to_string(),
            grants: vec![grant.clone()],
            network: "none",
            env: "none",
            duration_ms,
            outcome: match &result {
                Ok(_) => "ok".to_string(),
                Err(e) => e.kind().to_string(),
            },
            error: result.as_ref().err().map(|e| e.to_string()),
        };
        if let Some(log) = &self.audit {
            // The call's effect stands either way; a log that cannot be written must not turn a
            // completed call into a failure, but it must not pass silently in tests either.
            if let Err(e) = log.append(&record) {
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
        tool: &ToolComponent,
        grant: &Grant,
        settings: &[(String, String)],
        arguments: &str,
    ) -> Result<String, CallError> {
        let perms = match grant.access {
            Access::ReadOnly => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        let mut builder = WasiCtxBuilder::new();
        // Must precede preopened_dir: it is recorded per preopen. Without it every filesystem call
        // hops through a thread pool (~10x slower directory walks).
        builder.allow_blocking_current_thread(true);
        builder
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        builder
            .preopened_dir(&grant.path, "/", perms)
            .map_err(|e| CallError::Grant(format!("{}: {e}", grant.path.display())))?;
        let mut store = self.store(builder.build());
        let out = match tool.pre.call(&mut store, settings, arguments) {
            Ok(Ok(json)) => json,
            Ok(Err(f)) => return Err(CallError::Tool(f)),
            Err(e) => return Err(self.classify(&store, e)),
        };
        if out.len() > self.limits.result_bytes {
            return Err(CallError::ResultTooLarge {
                size: out.len(),
                limit: self.limits.result_bytes,
            });
        }
        Ok(out)
    }

    fn store(&self, wasi: WasiCtx) -> Store<CallState> {
        let state = CallState {
            wasi,
            table: ResourceTable::new(),
            limiter: CallLimiter {
                memory_bytes: self.limits.memory_bytes as usize,
                memory_hit: false,
            },
        };
        let mut store = Store::new(self.registry.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(self.limits.epoch_ticks());
        store.epoch_deadline_trap();
        store
    }

    fn classify(&self, store: &Store<CallState>, e: wasmtime::Error) -> CallError {
        if store.data().limiter.memory_hit {
            return CallError::MemoryLimit(self.limits.memory_bytes);
        }
        if let Some(Trap::Interrupt) = e.downcast_ref::<Trap>() {
            return CallError::TimeLimit(self.limits.wall_time.as_millis() as u64);
        }
        CallError::Trap(
            format!("{e:#}")
                .lines()
                .next()
                .unwrap_or("unknown trap")
                .to_string(),
        )
    }
}
