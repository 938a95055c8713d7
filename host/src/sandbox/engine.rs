//! The process-wide wasmtime engine: pooling allocator, epoch interruption and its ticker thread.

use std::sync::{Arc, OnceLock};
use std::thread;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::limits::{EPOCH_TICK, Limits};

/// Builds the engine configuration every component is compiled for. The on-disk cache key includes
/// this configuration (through `precompile_compatibility_hash`), so changing it invalidates the cache.
fn config(limits: &Limits) -> Config {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(64)
        .total_core_instances(128)
        .total_memories(64)
        .total_tables(128)
        .max_memory_size(limits.memory_bytes as usize);
    // Not `linear_memory_keep_resident`: measured here, zeroing 1 MiB of kept pages on teardown
    // (~27 µs) cost more than releasing the slot and re-faulting its pages (~9 µs).
    let mut cfg = Config::new();
    cfg.wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    cfg
}

/// One engine per process, created on first use, with a ticker thread that advances its epoch every
/// [`EPOCH_TICK`] so that wall-time limits interrupt runaway guests.
pub fn shared(limits: &Limits) -> anyhow::Result<Engine> {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    if let Some(e) = ENGINE.get() {
        return Ok(e.clone());
    }
    let engine = match Engine::new(&config(limits)) {
        Ok(e) => e,
        // The pooling allocator reserves address space up front; fall back to on-demand allocation
        // where that is refused (e.g. under a tight `ulimit -v`).
        Err(_) => {
            let mut cfg = config(limits);
            cfg.allocation_strategy(InstanceAllocationStrategy::OnDemand);
            Engine::new(&cfg).map_err(|e| anyhow::anyhow!("cannot start the wasm engine: {e}"))?
        }
    };
    let engine = ENGINE.get_or_init(|| engine).clone();
    start_ticker(&engine);
    Ok(engine)
}

fn start_ticker(engine: &Engine) {
    static STARTED: OnceLock<Arc<()>> = OnceLock::new();
    STARTED.get_or_init(|| {
        let weak = engine.weak();
        thread::Builder::new()
            .name("bb7-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    thread::sleep(EPOCH_TICK);
                }
            })
            .ok();
        Arc::new(())
    });
}
