// The wasmtime configuration every tool component is compiled for and run with. This file is
// shared, by `include!`, between the host (`sandbox/engine.rs`) and `bb7-compile` (compiler/), which
// compiles the built-in component at build time and third-party components and hooks at run time
// with exactly this configuration (wasmtime checks compiled code against the engine that loads it).
// It may use nothing but `wasmtime`.

/// The engine configuration for linear memories of at most `memory_bytes`, pooled or on demand.
pub fn engine_config(memory_bytes: usize, pooled: bool) -> wasmtime::Config {
    let mut cfg = wasmtime::Config::new();
    cfg.wasm_component_model(true).epoch_interruption(true);
    // `map<K, V>` and fixed-length `list<T, N>` in a generic component's functions (dynamic.rs).
    cfg.wasm_component_model_map(true)
        .wasm_component_model_fixed_length_lists(true);
    // No native-pc → wasm-offset map and no `.eh_frame` in compiled code (wasmtime walks wasm frames
    // by frame pointers; a trap still names its function): 0.6 MB less embedded built-in code.
    cfg.generate_address_map(false).native_unwind_info(false);
    if pooled {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(64)
            .total_core_instances(128)
            .total_memories(64)
            .total_tables(128)
            .max_memory_size(memory_bytes)
            // No fiber stacks: every call runs synchronously (no `call_async`, no async component
            // functions), so none is ever taken from the pool. The default of 1,000 made the
            // engine's set-up map 2 GB and `mprotect` a guard page per stack, about 1,000 system
            // calls and 3-4 ms of CPU on the first tool call of a process.
            .total_stacks(0);
        // Not `linear_memory_keep_resident`: measured here, zeroing 1 MiB of kept pages on teardown
        // (~27 µs) cost more than releasing the slot and re-faulting its pages (~9 µs).
        cfg.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    } else {
        cfg.allocation_strategy(wasmtime::InstanceAllocationStrategy::OnDemand);
    }
    cfg
}

/// The engine for `memory_bytes`: pooled, or on demand where the pooling allocator's up-front
/// address-space reservation is refused (e.g. under a tight `ulimit -v`).
pub fn new_engine(memory_bytes: usize) -> wasmtime::Result<wasmtime::Engine> {
    wasmtime::Engine::new(&engine_config(memory_bytes, true))
        .or_else(|_| wasmtime::Engine::new(&engine_config(memory_bytes, false)))
}
