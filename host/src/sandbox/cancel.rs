//! A per-call cancel: a flag the caller sets when whoever asked for the call gave up (an MCP
//! client's `notifications/cancelled`). Calls started on a thread inside [`scoped`] check it at
//! every epoch tick and stop at the next one after it is set ([`CallError::Cancelled`]); without a
//! flag a call runs exactly as before, to its result or its wall-time limit. A call blocked in a
//! host call still waits there until its deadline (guest code is what the epoch interrupts).
//!
//! [`CallError::Cancelled`]: super::CallError::Cancelled

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::{Store, UpdateDeadline};

use super::limits::Limits;
use super::state::CallState;

/// A cancel flag shared by the caller and its calls.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    /// A flag not set.
    pub fn new() -> CancelFlag {
        CancelFlag::default()
    }

    /// Sets the flag: the calls running under it stop at the next epoch tick.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Makes `store` check the flag at every epoch tick, keeping its wall-time limit: it is
    /// interrupted when the flag is set or when its limit's ticks have passed.
    pub(crate) fn arm(&self, store: &mut Store<CallState>, limits: &Limits) {
        let flag = self.clone();
        let limit = limits.epoch_ticks();
        let mut ticks = 0u64;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            ticks += 1;
            if flag.is_cancelled() || ticks >= limit {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
    }
}

thread_local! {
    static CURRENT: RefCell<Option<CancelFlag>> = const { RefCell::new(None) };
}

/// Runs `f` with `flag` as the cancel of every sandbox call it makes on this thread.
pub fn scoped<R>(flag: &CancelFlag, f: impl FnOnce() -> R) -> R {
    let previous = CURRENT.with(|c| c.borrow_mut().replace(flag.clone()));
    struct Restore(Option<CancelFlag>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let _restore = Restore(previous);
    f()
}

/// The cancel flag of calls made on this thread now, if any.
pub(crate) fn current() -> Option<CancelFlag> {
    CURRENT.with(|c| c.borrow().clone())
}
