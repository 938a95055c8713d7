//! The process-wide wasmtime engine: pooling allocator, epoch interruption and its ticker thread.

use std::sync::{Arc, OnceLock};
use std::thread;

use wasmtime::Engine;

use super::limits::{EPOCH_TICK, Limits};

include!("engine_config.rs");

/// One engine per process, created on first use, with a ticker thread that advances its epoch every
/// [`EPOCH_TICK`] so that wall-time limits interrupt runaway guests.
pub fn shared(limits: &Limits) -> anyhow::Result<Engine> {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    if let Some(e) = ENGINE.get() {
        return Ok(e.clone());
    }
    let engine = new_engine(limits.memory_bytes as usize)
        .map_err(|e| anyhow::anyhow!("cannot start the wasm engine: {e}"))?;
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

#[cfg(test)]
mod tests {
    /// Making an engine maps no per-slot guard pages it never uses: the pooling allocator's pool
    /// of fiber stacks (1,000 by default, each behind its own `mprotect`ed guard page, so about
    /// 2,000 new mappings and 1,000 system calls) is empty, as no call runs asynchronously.
    #[test]
    fn a_new_engine_maps_no_fiber_stacks() {
        let mappings = || {
            std::fs::read_to_string("/proc/self/maps")
                .map(|m| m.lines().count())
                .unwrap_or(0)
        };
        let before = mappings();
        let engine = super::new_engine(64 << 20).expect("an engine");
        let after = mappings();
        drop(engine);
        // Other tests of this process may map a few things meanwhile (thread stacks, engines).
        assert!(after < before + 200, "{before} -> {after} mappings");
    }
}
