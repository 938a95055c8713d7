//! The engine hooks run on (`crate::hooks`). A hook is one small component asked thousands of times, each time in a
//! fresh instance that is dropped right after: the tools' engine releases a dropped instance's
//! written pages to the kernel (`madvise`) and the next instance faults them in again, which was
//! most of a trivial hook's cost. This engine compiles exactly as the tools' engine does
//! ([`super::engine::engine_config`]: the same code, so a hook compiled by `bb7 tools add`
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

use super::limits::{EPOCH_TICK, Limits};

/// Why the hook engine cannot run hooks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookEngineError {
    /// wasmtime refused the configuration (and the on-demand fallback).
    #[error("cannot start the hook engine: {0}")]
    Engine(String),
    /// Its epoch ticker thread could not be started (without it a looping hook would never stop).
    #[error("cannot start the hook engine's clock: {0}")]
    Clock(String),
}

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
pub fn engine() -> Result<Engine, HookEngineError> {
    static ENGINE: OnceLock<Result<Engine, HookEngineError>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let memory = Limits::default().memory_bytes as usize;
            let mut cfg = super::engine::engine_config(memory, true);
            cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool(memory)));
            let engine = Engine::new(&cfg)
                .or_else(|_| Engine::new(&super::engine::engine_config(memory, false)))
                .map_err(|e| HookEngineError::Engine(e.to_string()))?;
            // Without its ticker a hook that loops would never be stopped: no engine then.
            tick(&engine).map_err(|e| HookEngineError::Clock(e.to_string()))?;
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
