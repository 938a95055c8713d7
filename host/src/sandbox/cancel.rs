//! A per-call cancel, and the clock every call's guest code is stopped by.
//!
//! The cancel: a flag the caller sets when whoever asked for the call gave up (an MCP client's
//! `notifications/cancelled`). Calls started on a thread inside [`scoped`] check it at every epoch
//! tick and stop at the next one after it is set ([`CallError::Cancelled`]); without a flag a call
//! runs exactly as before, to its result or its wall-time limit. A call blocked in a host call
//! still waits there until its deadline (guest code is what the epoch interrupts).
//!
//! The clock ([`arm`]): a call's guest code is stopped at the first epoch tick after its
//! wall-time deadline *by the clock*, not after a count of ticks. The epoch thread sleeps one tick
//! between increments, and on a loaded machine its sleeps run long (at load 10 on two cores, 400
//! sleeps of 5 ms took 5.05 s: a 10 s limit counted in ticks comes due after about 25 s), so the
//! epoch came due well after the deadline: a guest blocked in a host call (a FIFO's `open`) that
//! the watchdog interrupted at the deadline resumed with its epoch not yet due, retried the call,
//! blocked again, and was abandoned. The watchdog also marks an overrunning call [`Overdue`] and advances the epoch
//! before it interrupts it, so the guest stops at its very next epoch check.
//!
//! [`CallError::Cancelled`]: super::CallError::Cancelled

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use wasmtime::{Store, UpdateDeadline};

use super::limits::Limits;
use super::watchdog::Overdue;

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
}

/// Makes `store` stop its guest code at the first epoch tick at which its wall-time limit has
/// passed by the clock (counted from now: call it right after making the store), `cancel` is set,
/// or the watchdog found the call `overdue`; until then the epoch lets it run on. An `overdue`
/// call also has the engine's epoch advanced when it is marked, so it is stopped at its next epoch
/// check, not at the next tick.
pub(crate) fn arm<T: 'static>(
    store: &mut Store<T>,
    limits: &Limits,
    cancel: Option<&CancelFlag>,
    overdue: Option<&Overdue>,
) {
    let deadline = Instant::now() + limits.wall_time;
    let cancel = cancel.cloned();
    let overdue = overdue.cloned();
    if let Some(o) = &overdue {
        let engine = store.engine().clone();
        o.on_set(move || engine.increment_epoch());
    }
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        let stop = cancel.as_ref().is_some_and(CancelFlag::is_cancelled)
            || overdue.as_ref().is_some_and(Overdue::is_set)
            || Instant::now() >= deadline;
        Ok(match stop {
            true => UpdateDeadline::Interrupt,
            false => UpdateDeadline::Continue(1),
        })
    });
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The epoch thread's ticks lag the clock on a loaded machine (each of its sleeps runs long),
    /// so a limit counted in ticks came due late: guest code is stopped at the first tick past its
    /// wall-time limit by the clock. Here the epoch does not tick at all until the limit has passed,
    /// then once: the spinning guest stops at that tick (it ran on: one tick of the limit's four).
    #[test]
    fn guest_code_is_stopped_at_the_first_tick_past_its_deadline_by_the_clock() {
        use wasm_encoder::{
            BlockType, CodeSection, ExportKind, ExportSection, Function, FunctionSection, Module,
            TypeSection,
        };
        // (func (export "spin") (loop (br 0)))
        let mut m = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], []);
        m.section(&types);
        let mut funcs = FunctionSection::new();
        funcs.function(0);
        m.section(&funcs);
        let mut exports = ExportSection::new();
        exports.export("spin", ExportKind::Func, 0);
        m.section(&exports);
        let mut code = CodeSection::new();
        let mut f = Function::new([]);
        f.instructions().loop_(BlockType::Empty).br(0).end().end();
        code.function(&f);
        m.section(&code);
        let wasm = m.finish();
        let engine = super::super::engine::new_engine(64 << 20).expect("engine");
        let module = super::super::compiler::module(&engine, &wasm);
        let limits = Limits {
            wall_time: Duration::from_millis(20),
            ..Default::default()
        };
        assert!(limits.epoch_ticks() > 1);
        // Only a failing run uses it: it stops the guest the fix did not.
        let fallback = CancelFlag::new();
        let (armed_tx, armed) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        let guest = {
            let (engine, fallback) = (engine.clone(), fallback.clone());
            std::thread::spawn(move || {
                let mut store = Store::new(&engine, ());
                arm(&mut store, &limits, Some(&fallback), None);
                let armed_at = Instant::now();
                let _ = armed_tx.send(armed_at);
                let ran = wasmtime::Instance::new(&mut store, &module, &[])
                    .and_then(|i| i.get_typed_func::<(), ()>(&mut store, "spin"))
                    .and_then(|spin| spin.call(&mut store, ()));
                let _ = done_tx.send(());
                ran.err()
                    .and_then(|e| e.downcast_ref::<wasmtime::Trap>().copied())
            })
        };
        let armed_at = armed.recv().expect("the guest thread arms its store");
        while let Some(left) = (armed_at + limits.wall_time).checked_duration_since(Instant::now())
        {
            std::thread::sleep(left);
        }
        engine.increment_epoch();
        let stopped_by_the_clock = done.recv_timeout(Duration::from_secs(30)).is_ok();
        if !stopped_by_the_clock {
            fallback.cancel();
            engine.increment_epoch();
        }
        let trap = guest.join().expect("the guest thread");
        assert!(
            stopped_by_the_clock,
            "one tick past the deadline did not stop the guest"
        );
        assert_eq!(trap, Some(wasmtime::Trap::Interrupt));
    }
}
