//! The state of one call's store: its WASI context (built in one locked-down way for every call),
//! its resource table and its resource limiter. Both the registry (which links components against
//! it) and the runner (which creates a store per call) use it; it depends on neither.

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use wasmtime_wasi::sockets::SocketAddrUse;

use super::audit::AuditLog;
use super::error::CallError;
use super::grant::{Access, CallCaps, is_ip_entry};
use super::http::HttpGuard;
use super::limits::{Limits, OutputBudget, OutputLimit};

/// The per-call store state.
pub struct CallState {
    wasi: WasiCtx,
    /// `wasi:http`'s context, and the hook that checks each request against the granted origins.
    http: (WasiHttpCtx, HttpGuard),
    table: ResourceTable,
    limiter: CallLimiter,
    /// When the call's wall time ends: no host call waits past it.
    deadline: Instant,
    /// Whether a host call's wait was cut at the deadline.
    deadline_hit: bool,
    /// What the call may still write, when its output is limited.
    output: Option<Arc<OutputBudget>>,
    /// Where a socket use of a call without a network grant is recorded (`audit.rs`).
    socket_denials: Option<super::audit::SocketDenials>,
}

impl CallState {
    /// Whether the call was stopped for outgrowing its memory budget.
    pub fn memory_limit_hit(&self) -> bool {
        self.limiter.memory_hit
    }

    /// Whether the call was stopped at its deadline while it waited in a host call.
    pub fn deadline_hit(&self) -> bool {
        self.deadline_hit
    }

    /// The call's output budget, if its output is limited.
    pub fn output_budget(&self) -> Option<&Arc<OutputBudget>> {
        self.output.as_ref()
    }

    /// The deadline, where to record that a wait hit it, and the resource table (for the bounded
    /// waits of the shadowed host calls, `hostcalls.rs`).
    pub(super) fn waiting(&mut self) -> (Instant, &mut bool, &mut ResourceTable) {
        (self.deadline, &mut self.deadline_hit, &mut self.table)
    }

    /// When the call's wall time ends.
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The trap of a host call that found the call's deadline passed (recorded, so the failure
    /// reads as the time limit, as for a wait cut at it).
    pub(super) fn deadline_passed(&mut self) -> wasmtime::Error {
        self.deadline_hit = true;
        wasmtime::Error::msg("the tool's time limit passed during a host call")
    }

    /// [`Self::deadline_passed`] when the deadline has passed, for host calls that do work rather
    /// than wait (`hostfiles.rs`): checked before the work.
    pub(super) fn check_deadline(&mut self) -> wasmtime::Result<()> {
        if Instant::now() >= self.deadline {
            return Err(self.deadline_passed());
        }
        Ok(())
    }

    /// The call's resource table.
    pub(super) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// Records in `log` each distinct socket use this call tries, for a call in `project` (when
    /// known) without a network grant, whose every socket use is refused.
    pub fn audit_socket_denials(&mut self, log: AuditLog, project: Option<&std::path::Path>) {
        self.socket_denials = Some(super::audit::SocketDenials::new(log, project));
    }

    /// A socket use the call tries (the shadowed `wasi:sockets` entry points, `audit.rs`).
    pub(super) fn socket_attempt(&mut self, what: &str) {
        if let Some(d) = &mut self.socket_denials {
            d.record(what);
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http.0,
            table: &mut self.table,
            hooks: &mut self.http.1,
        }
    }
}

/// What a call's store is built from: its WASI context and its `wasi:http` request hook (which
/// denies every request unless the call was granted origins).
pub struct CallWasi {
    wasi: WasiCtx,
    http: HttpGuard,
}

/// Caps what one call may allocate: the **sum** of all its linear memories (a component with many
/// core instances must not get the budget once per memory), how many instances, memories and tables
/// it may create, and each table's size. Remembers whether the memory cap was hit so the error can
/// say so.
struct CallLimiter {
    memory_bytes: usize,
    /// Bytes of linear memory the call's memories hold now, together.
    memory_total: usize,
    memory_hit: bool,
}

/// Core instances one call may create (a built-in tool uses a handful).
pub const MAX_INSTANCES: usize = 32;
/// Linear memories one call may create.
pub const MAX_MEMORIES: usize = 4;
/// Tables one call may create.
pub const MAX_TABLES: usize = 32;
/// Elements one table may grow to.
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .memory_total
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.memory_bytes {
            self.memory_hit = true;
            return Err(wasmtime::Error::msg("memory limit exceeded"));
        }
        self.memory_total = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

/// The WASI context of one call, the only way one is built: no arguments, no inherited stdio, at
/// most one directory (`caps.dir` mounted at `/` with its access; `describe` gets none), and no
/// network and no environment unless `caps` grants them: TCP connections only to the granted
/// `host:port` pairs (names resolved here, by the host; name lookup inside the component only when
/// a granted host is a name), no listening, no UDP; only the granted variables, with the host's
/// values; `wasi:http` requests only to the granted origins (when the component is linked with
/// it). A connection or request refused for lying outside the grant is a `refusal` record in
/// `audit` (the sandbox's chain, when it has one).
pub fn wasi_ctx(caps: &CallCaps, audit: Option<&AuditLog>) -> Result<CallWasi, CallError> {
    let mut builder = WasiCtxBuilder::new();
    // Must precede preopened_dir: it is recorded per preopen. Without it every filesystem call
    // hops through a thread pool (~10x slower directory walks).
    builder.allow_blocking_current_thread(true);
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    if !caps.network.is_empty() {
        let allowed = resolve_network(&caps.network);
        let lookup = caps.network.iter().any(|e| !is_ip_entry(e));
        // One refusal record per distinct address per call (capped): a component looping on
        // connects outside its grant must not flood the audit chain.
        let project = caps.dir.as_ref().map(|g| g.path.as_path());
        let refusals = audit.map(|log| {
            std::sync::Mutex::new(super::audit::CallRefusals::new(
                log.clone(),
                project,
                "socket",
            ))
        });
        builder
            .allow_tcp(true)
            .allow_ip_name_lookup(lookup)
            .socket_addr_check(move |addr, use_| {
                let ok = match use_ {
                    // The implicit bind of an outgoing connection: the wildcard address, port 0.
                    SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
                    SocketAddrUse::TcpConnect => allowed.contains(&addr),
                    _ => false,
                };
                if !ok && let Some(refusals) = &refusals {
                    let target = format!("{use_:?} {addr}");
                    refusals
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .record(&target, &format!("{target}: not granted"));
                }
                Box::pin(async move { ok })
            });
    }
    for name in &caps.env {
        if let Ok(value) = std::env::var(name) {
            builder.env(name, value);
        }
    }
    if let Some(grant) = &caps.dir {
        let perms = match grant.access {
            Access::ReadOnly => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        builder
            .preopened_dir(&grant.path, "/", perms)
            .map_err(|e| CallError::Grant(format!("{}: {e}", grant.path.display())))?;
    }
    Ok(CallWasi {
        wasi: builder.build(),
        http: HttpGuard::new(
            &caps.http,
            audit,
            caps.dir.as_ref().map(|g| g.path.as_path()),
        ),
    })
}

/// The socket addresses the granted `host:port` pairs resolve to now (a name that does not resolve
/// allows nothing).
fn resolve_network(entries: &[String]) -> HashSet<SocketAddr> {
    use std::net::ToSocketAddrs;
    let mut out = HashSet::new();
    for e in entries {
        match e.parse::<SocketAddr>() {
            Ok(a) => {
                out.insert(a);
            }
            Err(_) => out.extend(e.as_str().to_socket_addrs().into_iter().flatten()),
        }
    }
    out
}

/// A fresh store for one call: `wasi`, the memory budget of `limits` for all of the call's memories
/// together, the epoch deadline of its wall-time limit (and the same deadline for its waits in host
/// calls and its HTTP requests; an HTTP response body is at most the result size), and `output` as
/// its output budget when given.
pub fn new_store(
    engine: &Engine,
    limits: &Limits,
    wasi: CallWasi,
    output: Option<OutputLimit>,
) -> Store<CallState> {
    let deadline = Instant::now() + limits.wall_time;
    let CallWasi { wasi, mut http } = wasi;
    http.bound(limits.result_bytes, deadline);
    let state = CallState {
        wasi,
        http: (WasiHttpCtx::new(), http),
        table: ResourceTable::new(),
        limiter: CallLimiter {
            memory_bytes: limits.memory_bytes as usize,
            memory_total: 0,
            memory_hit: false,
        },
        deadline,
        deadline_hit: false,
        output: output.map(OutputBudget::new),
        socket_denials: None,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(limits.epoch_ticks());
    store.epoch_deadline_trap();
    store
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::engine;

    /// A component with `n` core instances of a module holding one memory of `pages` 64 KiB pages.
    fn many_memories(n: u32, pages: u64) -> Vec<u8> {
        use wasm_encoder::{
            Component, InstanceSection, MemorySection, MemoryType, Module, ModuleArg, ModuleSection,
        };
        let mut module = Module::new();
        let mut mems = MemorySection::new();
        mems.memory(MemoryType {
            minimum: pages,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        module.section(&mems);
        let mut c = Component::new();
        c.section(&ModuleSection(&module));
        let mut inst = InstanceSection::new();
        for _ in 0..n {
            inst.instantiate(0, Vec::<(&str, ModuleArg)>::new());
        }
        c.section(&inst);
        c.finish()
    }

    /// Instantiates `bytes` under the default limits: the error (if any) and whether the memory
    /// limit was hit.
    fn instantiate(bytes: &[u8]) -> (Option<String>, bool) {
        let limits = Limits::default();
        let engine = engine::shared(&limits).unwrap();
        let component = crate::sandbox::compiler::component(
            &engine,
            bytes,
            std::time::Duration::from_secs(120),
        )
        .unwrap()
        .0;
        let mut store = new_store(
            &engine,
            &limits,
            wasi_ctx(&CallCaps::none(), None).unwrap(),
            None,
        );
        let linker = wasmtime::component::Linker::<CallState>::new(&engine);
        let r = linker
            .instantiate(&mut store, &component)
            .err()
            .map(|e| format!("{e:#}"));
        (r, store.data().memory_limit_hit())
    }

    #[test]
    fn the_memory_budget_is_for_all_of_a_call_s_memories_together() {
        // Three memories of 64 MiB fit the 256 MiB budget; three of 100 MiB do not, although each
        // alone would (the hole: the cap was per memory).
        assert_eq!(instantiate(&many_memories(3, 1024)).0, None);
        let (r, hit) = instantiate(&many_memories(3, 1600));
        assert!(r.is_some() && hit, "{r:?}");
        // And no more memories than MAX_MEMORIES, however small.
        let (r, _) = instantiate(&many_memories(MAX_MEMORIES as u32 + 4, 1));
        assert!(r.is_some(), "{r:?}");
    }
}
