//! The engine hooks run on (`crate::hooks`). A hook is one small component asked thousands of times,
//! each time in a fresh instance that is dropped right after. This engine compiles exactly as the
//! tools' engine does ([`super::engine::engine_config`]: the same code, so a hook compiled by
//! `bb7 tools add` loads from the same compiled-component cache), on a smaller pool (hooks are
//! asked one at a time per thread). A dropped instance's memory is released to the kernel as the
//! tools' engine releases it, so the next instance starts from fresh pages.
//!
//! Not used: keeping a dropped instance's written pages mapped and resetting them in place
//! (wasmtime's `pagemap_scan` with `linear_memory_keep_resident`). It saved about half a trivial
//! hook's cost, but wasmtime 48's scan finds only written pages that are *present*: a page the
//! kernel swapped out before the drop is neither reset nor released, and the next decision in that
//! slot — possibly another hook's — would read it (wasmtime PR #14357). Without a swap-proof reset,
//! isolation between decisions comes first.
//!
//! Its epoch is ticked by a thread of its own, as the tools' engine's is, so the wall-time limits
//! hold the same way.

use std::sync::OnceLock;
use std::thread;

use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

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

/// The pooling allocator of the hook engine for linear memories of at most `memory_bytes`: a
/// smaller pool than the tools' (hooks are asked one at a time per thread); dropped instances are
/// released, not reset in place (see the module).
fn pool(memory_bytes: usize) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(16)
        .total_core_instances(64)
        .total_memories(16)
        .total_tables(64)
        .max_memory_size(memory_bytes)
        // No call runs asynchronously (as the tools' engine: no fiber stacks).
        .total_stacks(0);
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use wasmtime::component::Component;

    use super::super::compiler::{Kind, native_code};

    #[test]
    fn the_hook_engine_runs_what_the_compiler_makes_for_the_tools_engine() {
        // So a hook compiled by `bb7 tools add` (cached once) loads on either engine.
        let empty_component = b"\0asm\x0d\0\x01\0";
        let native = native_code(Kind::Component, empty_component, Duration::from_secs(60))
            .expect("compiles");
        let tools = super::super::engine::shared(&super::Limits::default()).unwrap();
        for engine in [super::engine().unwrap(), tools] {
            // SAFETY: made just now by the compiler; wasmtime checks it against the engine.
            unsafe { Component::deserialize(&engine, &native) }.expect("loads");
        }
    }
}
