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
