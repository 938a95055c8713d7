//! The tokio runtime background work runs on (model requests, remote fetches, titles, diffs),
//! started by the first action that needs it rather than at start-up.
//!
//! Why lazily: a session that only opens, lists and switches chats never needs it, and a runtime
//! means a worker thread parked in `epoll_wait`. When the editor closes our stdin, `exit_group`
//! has to wake that thread (an idle CPU, often a halted virtual one) and wait for it to die before
//! the editor's `wait` returns; the last thread out also tears the address space down. With no
//! runtime the process exits as one thread.

use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime};

/// The runtime could not be started (the system refused a thread or an event queue).
#[derive(Debug, thiserror::Error)]
#[error("Cannot start the background runtime: {0}")]
pub struct RuntimeError(#[from] std::io::Error);

/// A runtime made on first use ([`LazyRuntime::handle`]).
#[derive(Debug, Default)]
pub struct LazyRuntime(OnceLock<Runtime>);

impl LazyRuntime {
    /// The runtime's handle, starting the runtime if this is the first use.
    pub fn handle(&self) -> Result<&Handle, RuntimeError> {
        if let Some(rt) = self.0.get() {
            return Ok(rt.handle());
        }
        if let Err(extra) = self.0.set(build()?) {
            // Another thread started one first (handlers run on the stdin thread, so this does not
            // happen today): keep theirs. `shutdown_background` may run anywhere, even on a runtime.
            extra.shutdown_background();
        }
        self.0
            .get()
            .map(Runtime::handle)
            .ok_or_else(|| RuntimeError(std::io::Error::other("the runtime was not kept")))
    }

    /// Whether the runtime was started.
    pub fn started(&self) -> bool {
        self.0.get().is_some()
    }
}

/// One worker: a streamed reply's connection task and the task reading its body then run on the
/// same thread, so no chunk costs a cross-thread wake (a futex and a context switch each). Still
/// the multi-thread flavour, because `block_in_place` (sandbox calls) needs it; blocking work goes
/// to the blocking pool, so one worker never waits on another.
fn build() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bb7-io")
        .enable_all()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime is made by the first `handle`, once: the same one serves every later call.
    #[test]
    fn the_runtime_starts_on_first_use_only() {
        let rt = LazyRuntime::default();
        assert!(!rt.started());
        let first: *const Handle = rt.handle().expect("runtime");
        assert!(rt.started());
        assert!(std::ptr::eq(rt.handle().expect("runtime"), first));
        assert_eq!(
            rt.handle()
                .expect("runtime")
                .block_on(async { tokio::task::spawn(async { 7 }).await })
                .expect("task"),
            7
        );
    }
}
