//! The process-wide wasmtime engine: pooling allocator, epoch interruption and its ticker thread,
//! and the code publisher that lets the built-ins' precompiled code run where the binary holds it.

use std::sync::OnceLock;
use std::thread;

use wasmtime::Engine;

use super::limits::{EPOCH_TICK, Limits};

include!("engine_config.rs");

static ENGINE: OnceLock<Engine> = OnceLock::new();

/// Whether `engine` is the process-wide one ([`shared`]): the only engine the built-ins' code is
/// loaded in place for (it is never dropped, so neither is that load).
pub(crate) fn is_shared(engine: &Engine) -> bool {
    ENGINE.get().is_some_and(|e| Engine::same(e, engine))
}

/// One engine per process, created on first use, with a ticker thread that advances its epoch every
/// [`EPOCH_TICK`] so that wall-time limits interrupt runaway guests.
pub fn shared(limits: &Limits) -> anyhow::Result<Engine> {
    if let Some(e) = ENGINE.get() {
        start_ticker(e)?;
        return Ok(e.clone());
    }
    let engine = host_engine(limits.memory_bytes as usize)
        .map_err(|e| anyhow::anyhow!("cannot start the wasm engine: {e}"))?;
    let engine = ENGINE.get_or_init(|| engine).clone();
    start_ticker(&engine)?;
    Ok(engine)
}

/// [`new_engine`] with native code published by this module's in-place publisher (where it is
/// supported: see `in_place`), so that [`super::registry::Registry`] can run the built-ins'
/// precompiled code in place: the engine of every sandbox of the process.
pub(crate) fn host_engine(memory_bytes: usize) -> wasmtime::Result<Engine> {
    let config = |pooled| {
        let mut cfg = engine_config(memory_bytes, pooled);
        in_place::publish_with(&mut cfg);
        cfg
    };
    Engine::new(&config(true)).or_else(|_| Engine::new(&config(false)))
}

pub use in_place::runs_in_place;

/// Publishing native code as executable, for wasmtime ([`wasmtime::CustomCodeMemory`]), so that
/// code the binary itself holds can run without a copy.
///
/// By default wasmtime copies precompiled code into a fresh mapping and makes that executable:
/// for the built-ins' 3.5 MB that is about 900 pages faulted in and copied on a process's first
/// tool call. [`Component::deserialize_raw`](wasmtime::component::Component::deserialize_raw)
/// uses the bytes where they are instead, but memory wasmtime does not own can only be made
/// executable by a publisher of the embedder's. This one does what wasmtime itself does —
/// `mprotect` the code's pages to read + execute when published, back to read + write when
/// unpublished — with one exception: the built-ins' precompiled code embedded in the binary
/// ([`super::registry::BUILTIN_PRECOMPILED`], page-aligned by the build script), which lies in the
/// binary's read-only data. Those pages are made read + execute and stay so: they are never
/// writable (no mapping of them ever is, so no page is writable and executable at once), they are
/// part of the binary as its own code is, and nothing a tool or a user file does can change them;
/// several engines of one process may run them at once, so one dropping its copy must not take
/// execution away from the others.
///
/// Only on x86-64 Linux (no instruction-cache maintenance is needed after `mprotect`, and pages
/// are 4 KiB, the alignment the build script gives the code); elsewhere wasmtime publishes its own
/// copies as usual.
mod in_place {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    mod imp {
        use std::sync::Arc;

        /// The publisher (see the module).
        struct InPlaceCode {
            page: usize,
        }

        /// The system's page size.
        fn page_size() -> usize {
            // SAFETY: `sysconf` only reads a system constant.
            let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            usize::try_from(n).unwrap_or(4096).max(1)
        }

        /// The binary's own code that runs in place (`[start, end)`; see [`runs_in_place`]).
        static EMBEDDED: std::sync::OnceLock<(usize, usize)> = std::sync::OnceLock::new();

        /// Whether `[ptr, ptr + len)` lies within the embedded code run in place.
        fn embedded(ptr: *const u8, len: usize) -> bool {
            let p = ptr as usize;
            EMBEDDED
                .get()
                .is_some_and(|&(start, end)| p >= start && p.saturating_add(len) <= end)
        }

        fn protect(ptr: *const u8, len: usize, prot: libc::c_int) -> wasmtime::Result<()> {
            if len == 0 {
                return Ok(());
            }
            // SAFETY: wasmtime hands over a page-aligned range of code memory it is publishing or
            // unpublishing (`required_alignment`); changing its protection touches nothing else.
            let r = unsafe { libc::mprotect(ptr as *mut libc::c_void, len, prot) };
            if r == 0 {
                Ok(())
            } else {
                Err(wasmtime::Error::msg(format!(
                    "cannot change the protection of code memory: {}",
                    std::io::Error::last_os_error()
                )))
            }
        }

        impl wasmtime::CustomCodeMemory for InPlaceCode {
            fn required_alignment(&self) -> usize {
                self.page
            }

            fn publish_executable(&self, ptr: *const u8, len: usize) -> wasmtime::Result<()> {
                protect(ptr, len, libc::PROT_READ | libc::PROT_EXEC)
            }

            fn unpublish_executable(&self, ptr: *const u8, len: usize) -> wasmtime::Result<()> {
                if embedded(ptr, len) {
                    // Never writable; other engines of the process may run it (see the module).
                    return Ok(());
                }
                protect(ptr, len, libc::PROT_READ | libc::PROT_WRITE)
            }
        }

        /// Sets the publisher on `cfg`.
        pub fn publish_with(cfg: &mut wasmtime::Config) {
            cfg.with_custom_code_memory(Some(Arc::new(InPlaceCode { page: page_size() })));
        }

        /// Whether `code` can be run in place by an engine from [`super::super::host_engine`]:
        /// it starts on a page boundary and pages are the 4 KiB the code's sections are aligned to.
        /// When it can, `code` (the binary's own, the built-ins' precompiled code: one per
        /// process) is what the publisher never makes writable again when it is unpublished.
        pub fn runs_in_place(code: &'static [u8]) -> bool {
            let page = page_size();
            let can = page == 4096 && (code.as_ptr() as usize).is_multiple_of(page);
            if can {
                let start = code.as_ptr() as usize;
                let _ = EMBEDDED.set((start, start + code.len()));
            }
            can
        }
    }

    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    mod imp {
        /// No publisher here: wasmtime publishes its own copies.
        pub fn publish_with(_cfg: &mut wasmtime::Config) {}

        /// Never: the code is copied.
        pub fn runs_in_place(_code: &'static [u8]) -> bool {
            false
        }
    }

    pub use imp::{publish_with, runs_in_place};
}

fn start_ticker(engine: &Engine) -> anyhow::Result<()> {
    static STARTED: OnceLock<bool> = OnceLock::new();
    let started = *STARTED.get_or_init(|| {
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
            .is_ok()
    });
    // Without it no call would ever reach its time limit: run none.
    anyhow::ensure!(
        started,
        "cannot start the wasm engine's timer thread, so no tool call could be time-limited"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The built-ins' precompiled code runs where the binary holds it: loading it through the
    /// host's engine makes (part of) the embedded bytes executable in place instead of copying
    /// 3.5 MB into a fresh mapping, and no mapping of those bytes is ever writable. Several
    /// sandboxes load it at once (wasmtime registers loaded code by address, once: the in-place
    /// load is shared on the process-wide engine, and a sandbox on another engine gets a copy),
    /// and each keeps running when another is dropped.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn the_builtins_precompiled_code_runs_in_place_and_is_never_writable() {
        use super::super::cache::CacheOutcome;
        use super::super::registry::BUILTIN_PRECOMPILED;
        use super::super::{Limits, Sandbox};
        let sandbox = |engine: wasmtime::Engine| {
            let sb = Sandbox::with_engine(engine, Limits::default(), None, None, &[])
                .expect("a sandbox");
            let tool = sb.registry().builtin("read_file").expect("loads");
            assert_eq!(tool.cache, CacheOutcome::Embedded);
            (sb, tool)
        };
        let shared = || super::shared(&Limits::default()).expect("the engine");
        let (a, a_tool) = sandbox(shared());
        let (b, b_tool) = sandbox(shared());
        let (other, other_tool) = sandbox(super::host_engine(64 << 20).expect("an engine"));
        for (sb, tool) in [(&a, &a_tool), (&b, &b_tool), (&other, &other_tool)] {
            assert_eq!(sb.describe(tool, &[]).expect("describes").name, "read_file");
        }
        drop((a_tool, a));
        drop((other_tool, other));
        assert_eq!(
            b.describe(&b_tool, &[]).expect("still runs").name,
            "read_file"
        );
        let (start, end) = (
            BUILTIN_PRECOMPILED.as_ptr() as u64,
            BUILTIN_PRECOMPILED.as_ptr() as u64 + BUILTIN_PRECOMPILED.len() as u64,
        );
        let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
        let over: Vec<&str> = maps
            .lines()
            .filter(|l| {
                let range = l.split(' ').next().unwrap_or("");
                let (a, b) = range.split_once('-').unwrap_or(("0", "0"));
                let a = u64::from_str_radix(a, 16).unwrap_or(0);
                let b = u64::from_str_radix(b, 16).unwrap_or(0);
                a < end && b > start
            })
            .collect();
        let perms = |l: &str| l.split(' ').nth(1).unwrap_or("").to_string();
        assert!(
            over.iter().any(|l| perms(l).contains('x')),
            "the embedded code was not made executable in place: {over:#?}"
        );
        assert!(
            over.iter().all(|l| !perms(l).contains('w')),
            "a mapping of the embedded code is writable: {over:#?}"
        );
    }

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
