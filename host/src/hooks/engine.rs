//! The engine hooks run on. A hook is one small component asked thousands of times, each time in a
//! fresh instance that is dropped right after: the tools' engine releases a dropped instance's
//! written pages to the kernel (`madvise`) and the next instance faults them in again, which was
//! most of a trivial hook's cost. This engine compiles exactly as the tools' engine does
//! ([`crate::sandbox::engine::engine_config`]: the same code, so a hook compiled by `bb7 tools add`
//! loads from the same compiled-component cache) but resets a dropped instance in place: the pages
//! it wrote (found with Linux's `PAGEMAP_SCAN`) are copied back from the component's initial image
//! or zeroed, up to [`KEEP_RESIDENT`] bytes, and stay mapped for the next instance. Nothing of one
//! decision is left for the next: every written page is reset, and anything past the budget is
//! released as before. Where `PAGEMAP_SCAN` is missing (Linux before 6.7), nothing is kept: the
//! reset would have to clear the budget's bytes whether written or not, which costs more.
//!
//! Its epoch is ticked by a thread of its own, as the tools' engine's is, so the wall-time limits
//! hold the same way.

use std::sync::OnceLock;
use std::thread;

use wasmtime::{Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::sandbox::limits::{EPOCH_TICK, Limits};
use crate::toolhost::ToolHostError;

/// How many bytes of a dropped instance's written memory pages are reset in place (kept mapped)
/// rather than released to the kernel: a policy hook writes a few pages per decision (a trivial
/// Rust hook: its stack top, its data and a heap page). Kept pages stay in the process's memory
/// for the next decision (at most this much per pool slot a hook used).
const KEEP_RESIDENT: usize = 1 << 20;
/// The same for its tables.
const TABLE_KEEP_RESIDENT: usize = 256 << 10;

/// The pooling allocator of the hook engine for linear memories of at most `memory_bytes`: a
/// smaller pool than the tools' (hooks are asked one at a time per thread), and dropped instances
/// reset in place when the kernel can say which pages they wrote (see the module).
fn pool(memory_bytes: usize) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(16)
        .total_core_instances(64)
        .total_memories(16)
        .total_tables(64)
        .max_memory_size(memory_bytes);
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        pool.pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(TABLE_KEEP_RESIDENT);
    }
    pool
}

/// The hook engine, made on first use (a failure is kept: every later ask gets it too), with its
/// epoch ticker. Pooled, or on demand where the pool's address-space reservation is refused (as
/// the tools' engine falls back).
pub(super) fn engine() -> Result<Engine, ToolHostError> {
    static ENGINE: OnceLock<Result<Engine, ToolHostError>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let memory = Limits::default().memory_bytes as usize;
            let mut cfg = crate::sandbox::engine::engine_config(memory, true);
            cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool(memory)));
            let engine = Engine::new(&cfg)
                .or_else(|_| Engine::new(&crate::sandbox::engine::engine_config(memory, false)))
                .map_err(|e| {
                    ToolHostError::Unavailable(format!("cannot start the hook engine: {e}"))
                })?;
            // Without its ticker a hook that loops would never be stopped: no engine then.
            tick(&engine).map_err(|e| {
                ToolHostError::Unavailable(format!("cannot start the hook engine's clock: {e}"))
            })?;
            Ok(engine)
        })
        .clone()
}

/// Advances `engine`'s epoch every [`EPOCH_TICK`] on a thread of its own, for as long as it lives.
fn tick(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    thread::Builder::new()
        .name("bb7-hook-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                thread::sleep(EPOCH_TICK);
            }
        })
        .map(drop)
}

#[cfg(test)]
#[path = "../../../tests/common/wasm.rs"]
mod test_wasm;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use serde_json::json;

    use crate::sandbox::engine::compatibility_digest;
    use crate::sandbox::grant::{Access, CallCaps};
    use crate::sandbox::{CallError, Sandbox};

    /// The minor page faults of this thread so far.
    fn faults() -> i64 {
        // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid `rusage` to write to.
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
        usage.ru_minflt
    }

    /// The test hook `<name>` of `examples/hooks`, loaded on a sandbox over the hook engine, and
    /// a decision of it made on this thread (as `hooks::exec` makes one).
    fn hook(name: &str) -> impl Fn() -> Result<serde_json::Value, CallError> {
        let wasm = test_wasm::build(
            "examples/hooks",
            "hook-examples-wasm",
            &format!("{name}.wasm"),
        );
        let sandbox =
            Sandbox::with_engine(engine().unwrap(), Limits::default(), None, None, &[]).unwrap();
        let component = Arc::new(
            sandbox
                .registry()
                .load_file(name, &wasm, Access::ReadOnly)
                .unwrap(),
        );
        let decide = super::super::run::decide_function(&component).unwrap();
        let args = json!({"event": "{\"point\":\"pre_send\"}"}).to_string();
        move || super::super::exec::call_inline(&sandbox, &decide, &CallCaps::none(), &args)
    }

    #[test]
    fn the_hook_engine_compiles_as_the_tools_engine_does() {
        // So a hook compiled by `bb7 tools add` (on the tools' engine) loads from the cache.
        let tools = crate::sandbox::engine::shared(&Limits::default()).unwrap();
        assert_eq!(
            compatibility_digest(&engine().unwrap()),
            compatibility_digest(&tools)
        );
    }

    #[test]
    fn no_decision_finds_what_an_earlier_one_left_in_memory() {
        // hook_once marks its memory when it decides and denies when it finds the mark.
        let decide = hook("hook_once");
        for i in 0..40 {
            assert_eq!(decide().unwrap(), json!({"tag": "pass"}), "decision {i}");
        }
    }

    #[test]
    fn a_decision_does_not_fault_in_again_the_pages_the_last_one_wrote() {
        if !PoolingAllocationConfig::is_pagemap_scan_available() {
            eprintln!("PAGEMAP_SCAN is not available here: dropped instances are released");
            return;
        }
        let decide = hook("hook_pass");
        for _ in 0..5 {
            decide().unwrap();
        }
        let before = faults();
        for _ in 0..50 {
            assert_eq!(decide().unwrap(), json!({"tag": "pass"}));
        }
        let per_decision = (faults() - before) as f64 / 50.0;
        // On the tools' engine each decision faults in the 2–4 pages the last one wrote.
        assert!(
            per_decision < 0.5,
            "{per_decision} page faults per decision"
        );
    }
}
