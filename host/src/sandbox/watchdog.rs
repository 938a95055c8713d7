//! Worker threads with a host-side deadline.
//!
//! Epoch interruption stops a guest only while guest code runs. The waits a guest can start in a
//! host call (sleeps, polls, blocking stream calls) end at the call's deadline by construction
//! (`hostcalls.rs`); what is left is a host call blocked in a system call (opening a FIFO nobody
//! writes to). So every call runs on a worker thread and the caller waits at most the wall-time
//! limit plus a grace period; a call still running then is **interrupted**: its thread gets a
//! signal whose handler does nothing and does not restart system calls, so the blocked call fails
//! with `EINTR`, the guest resumes, and its store — descriptors, memory, instance slot — is dropped
//! on its worker as for any other call. Before the signal the call is marked [`Overdue`], which
//! advances the engine's epoch and makes the call's epoch callback stop the guest at its next epoch
//! check ([`super::cancel::arm`]), so a guest that retries the interrupted call does not get to
//! block in it again (it used to, on a loaded machine, while its count of epoch ticks lagged
//! behind the clock). Only a call that still
//! has not returned after that is abandoned: the caller gets a time-limit error, the worker is
//! replaced, and the abandoned worker exits when (if ever) its call returns. The number of
//! abandoned calls still blocked is capped, so a hostile tool cannot exhaust threads or instance
//! slots.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

/// A queued call; returns whether its caller had abandoned it by the time it returned.
type Job = Box<dyn FnOnce() -> bool + Send + 'static>;

/// Abandoned calls still blocked, at most; past this, calls are refused until some return.
pub const MAX_STUCK: usize = 8;
/// How long an interrupted call has to return before it is abandoned.
const INTERRUPT_GRACE: Duration = Duration::from_millis(500);
/// How many times an overrunning call is interrupted (a guest may retry the blocked call once).
const INTERRUPTS: u32 = 5;
/// Worker threads kept ready. Calls are sequential (one reply's tool calls run one after another),
/// so one worker serves; a worker abandoned on a blocked call is replaced at once.
const BASE_WORKERS: usize = 1;
/// Why [`Workers::run`] produced no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// The call did not return in time and was abandoned.
    Deadline,
    /// Too many abandoned calls are still blocked; this one was not started.
    TooManyStuck,
}

/// Whether the watchdog found a call past its deadline (and is about to interrupt it): shared by
/// [`Workers::run`] and the call it runs, which stops its guest code when it is set.
#[derive(Clone, Default)]
pub struct Overdue(Arc<OverdueState>);

#[derive(Default)]
struct OverdueState {
    set: AtomicBool,
    /// Run when the call is marked (after the flag is set, before the interrupt).
    on_set: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Overdue {
    /// Whether the call was found past its deadline.
    pub fn is_set(&self) -> bool {
        self.0.set.load(Ordering::SeqCst)
    }

    /// Makes `f` run each time the call is marked overdue (the first `f` given is kept).
    pub fn on_set(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.0.on_set.set(Box::new(f));
    }

    fn set(&self) {
        self.0.set.store(true, Ordering::SeqCst);
        if let Some(f) = self.0.on_set.get() {
            f();
        }
    }
}

/// A small pool of worker threads that run calls under a deadline.
pub struct Workers {
    tx: Mutex<Sender<Job>>,
    rx: Arc<Mutex<Receiver<Job>>>,
    stuck: Arc<AtomicUsize>,
    workers: Arc<AtomicUsize>,
}

enum Slot<T> {
    /// Queued, or running on the thread given (from the moment the job starts until it publishes).
    Running(Option<Worker>),
    Done(T),
    Abandoned,
}

/// The thread a job runs on, so that an overrunning call can be interrupted.
#[derive(Clone, Copy)]
struct Worker(#[cfg(unix)] libc::pthread_t);

impl Worker {
    fn current() -> Worker {
        // SAFETY: pthread_self has no preconditions.
        #[cfg(unix)]
        return Worker(unsafe { libc::pthread_self() });
        #[cfg(not(unix))]
        return Worker();
    }

    /// Interrupts a system call the thread is blocked in. The caller holds the slot's lock and saw
    /// the job running, so the thread is alive (it publishes its result under that lock).
    fn interrupt(self) {
        #[cfg(unix)]
        {
            install_interrupt_handler();
            // SAFETY: the thread is alive (see above); the signal's handler does nothing.
            unsafe {
                libc::pthread_kill(self.0, INTERRUPT_SIGNAL);
            }
        }
    }
}

/// The signal that interrupts a blocked call: ignored by default, so a stray one is harmless.
#[cfg(unix)]
const INTERRUPT_SIGNAL: libc::c_int = libc::SIGURG;

#[cfg(unix)]
extern "C" fn on_interrupt(_: libc::c_int) {}

/// Installs (once) a handler for [`INTERRUPT_SIGNAL`] that does nothing and, without
/// `SA_RESTART`, makes the system call it lands in fail with `EINTR`. Leaves a handler someone
/// else installed alone.
#[cfg(unix)]
fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: plain sigaction calls on zero-initialised structures; the handler is
        // async-signal-safe (it does nothing).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(INTERRUPT_SIGNAL, std::ptr::null(), &mut old) != 0 {
                return;
            }
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                return;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(INTERRUPT_SIGNAL, &sa, std::ptr::null_mut());
        }
    });
}

impl Workers {
    /// A pool with its ready worker threads started.
    pub fn new() -> Self {
        let (tx, rx) = channel::<Job>();
        let w = Workers {
            tx: Mutex::new(tx),
            rx: Arc::new(Mutex::new(rx)),
            stuck: Arc::new(AtomicUsize::new(0)),
            workers: Arc::new(AtomicUsize::new(0)),
        };
        for _ in 0..BASE_WORKERS {
            w.spawn_worker();
        }
        w
    }

    fn spawn_worker(&self) {
        let rx = Arc::clone(&self.rx);
        let workers = Arc::clone(&self.workers);
        workers.fetch_add(1, Ordering::SeqCst);
        let spawned = thread::Builder::new()
            .name("bb7-tool".into())
            .spawn(move || {
                loop {
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => break,
                    };
                    let Ok(job) = job else { break };
                    // A worker whose call was abandoned was replaced when it was given up on; it rejoins
                    // the pool only if the pool is short, else it leaves.
                    if job()
                        && workers
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                (n < BASE_WORKERS).then_some(n + 1)
                            })
                            .is_err()
                    {
                        return;
                    }
                }
                workers.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.workers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Abandoned calls that have not returned yet.
    pub fn stuck(&self) -> usize {
        self.stuck.load(Ordering::SeqCst)
    }

    /// Runs `f` on a worker and waits up to `deadline` for its result. `f` returns the result and
    /// something to drop after the result has been handed over (a store: tearing down an instance
    /// costs as much as running a small call, and the caller need not wait for it). `f` is given
    /// the call's [`Overdue`] mark, set when the call is past `deadline` and about to be
    /// interrupted.
    pub fn run<T: Send + 'static, D: Send + 'static>(
        &self,
        deadline: Duration,
        f: impl FnOnce(&Overdue) -> (T, D) + Send + 'static,
    ) -> Result<T, Overrun> {
        if self.stuck() >= MAX_STUCK {
            return Err(Overrun::TooManyStuck);
        }
        let slot = Arc::new((Mutex::new(Slot::Running(None)), Condvar::new()));
        let job_slot = Arc::clone(&slot);
        let stuck = Arc::clone(&self.stuck);
        let overdue = Overdue::default();
        let job_overdue = overdue.clone();
        let job: Job = Box::new(move || {
            {
                let (lock, _) = &*job_slot;
                if let Ok(mut s) = lock.lock()
                    && let Slot::Running(w) = &mut *s
                {
                    *w = Some(Worker::current());
                }
            }
            let (out, deferred) = f(&job_overdue);
            let _deferred = deferred;
            let (lock, cv) = &*job_slot;
            let Ok(mut s) = lock.lock() else { return false };
            // `_deferred` is dropped after this block, once the result is published.
            if matches!(*s, Slot::Abandoned) {
                stuck.fetch_sub(1, Ordering::SeqCst);
                true
            } else {
                *s = Slot::Done(out);
                cv.notify_one();
                false
            }
        });
        let sent = self
            .tx
            .lock()
            .map(|tx| tx.send(job).is_ok())
            .unwrap_or(false);
        if !sent {
            return Err(Overrun::TooManyStuck);
        }
        let (lock, cv) = &*slot;
        let Ok(guard) = lock.lock() else {
            return Err(Overrun::Deadline);
        };
        let running = |s: &mut Slot<T>| matches!(s, Slot::Running(_));
        let (mut s, _) = match cv.wait_timeout_while(guard, deadline, running) {
            Ok(r) => r,
            Err(_) => return Err(Overrun::Deadline),
        };
        // Past the deadline and still running: blocked in a system call. Mark it overdue (its guest
        // stops at its next epoch check) and interrupt it (a few times, in case the interrupt
        // lands before the call blocks), and give it a moment to return.
        for _ in 0..INTERRUPTS {
            let Slot::Running(Some(worker)) = &*s else {
                break;
            };
            overdue.set();
            worker.interrupt();
            s = match cv.wait_timeout_while(s, INTERRUPT_GRACE / INTERRUPTS, running) {
                Ok((s, _)) => s,
                Err(_) => return Err(Overrun::Deadline),
            };
        }
        match std::mem::replace(&mut *s, Slot::Abandoned) {
            Slot::Done(out) => Ok(out),
            _ => {
                self.stuck.fetch_add(1, Ordering::SeqCst);
                drop(s);
                // The blocked worker no longer serves; replace it.
                self.workers.fetch_sub(1, Ordering::SeqCst);
                self.spawn_worker();
                Err(Overrun::Deadline)
            }
        }
    }
}

impl Default for Workers {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_results_and_abandons_blocked_calls() {
        /// Reports on `tx` when dropped: the worker drops a call's deferred value after it has
        /// settled the call's slot (and, for an abandoned call, its count).
        struct Settled(std::sync::mpsc::Sender<()>);
        impl Drop for Settled {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let w = Workers::new();
        assert_eq!(w.run(Duration::from_secs(5), |_| (7, ())), Ok(7));
        // Waiting on a channel resumes after the interrupt: the call stays blocked and is
        // abandoned, until the test releases it.
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        let (settled_tx, settled) = std::sync::mpsc::channel::<()>();
        let r = w.run(Duration::from_millis(20), move |_| {
            let got = blocked.recv();
            (got.is_ok(), Settled(settled_tx))
        });
        assert_eq!(r, Err(Overrun::Deadline));
        assert_eq!(w.stuck(), 1);
        // The pool still serves while the abandoned call is blocked.
        assert_eq!(w.run(Duration::from_secs(5), |_| (8, ())), Ok(8));
        assert_eq!(w.stuck(), 1, "still blocked, still counted");
        release.send(()).expect("the blocked call waits");
        settled
            .recv_timeout(Duration::from_secs(30))
            .expect("the released call returns");
        assert_eq!(
            w.stuck(),
            0,
            "a returning abandoned call is no longer counted"
        );
    }

    /// A call blocked in a system call (opening a FIFO nobody writes to) is interrupted at its
    /// deadline, returns, and is not counted as stuck.
    #[test]
    fn a_call_blocked_in_a_system_call_is_interrupted_not_abandoned() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let w = Workers::new();
        let r = w.run(Duration::from_millis(50), move |_| {
            // rustix does not retry on EINTR (std's File::open would).
            let r = rustix::fs::open(&fifo, rustix::fs::OFlags::RDONLY, rustix::fs::Mode::empty());
            (r.map(drop), ())
        });
        assert_eq!(r, Ok(Err(rustix::io::Errno::INTR)));
        assert_eq!(w.stuck(), 0);
        assert_eq!(w.run(Duration::from_secs(5), |_| (9, ())), Ok(9));
    }

    /// A guest that retries a host call blocked in a system call (here on every error, as libc
    /// retries on `EINTR`) is stopped once the watchdog interrupts it, however far its epoch lags
    /// the clock (here it never ticks; on a loaded machine the epoch thread's sleeps run long): the
    /// call ends with an interrupt trap, its store dropped, not abandoned still blocked. It was
    /// abandoned: the guest resumed with its epoch not yet due and blocked again at once, five
    /// times (`escape::hostile_blocking_fifo_open_hits_time_limit` at load 12).
    #[test]
    fn a_guest_retrying_an_interrupted_blocking_call_is_stopped_not_abandoned() {
        use std::sync::atomic::AtomicU32;
        use wasm_encoder::{
            BlockType, CodeSection, EntityType, ExportKind, ExportSection, Function,
            FunctionSection, ImportSection, Module, TypeSection, ValType,
        };
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // (func (export "run") (loop (call $open) (drop) (br 0)))
        let mut m = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], [ValType::I32]);
        types.ty().function([], []);
        m.section(&types);
        let mut imports = ImportSection::new();
        imports.import("host", "open", EntityType::Function(0));
        m.section(&imports);
        let mut funcs = FunctionSection::new();
        funcs.function(1);
        m.section(&funcs);
        let mut exports = ExportSection::new();
        exports.export("run", ExportKind::Func, 1);
        m.section(&exports);
        let mut code = CodeSection::new();
        let mut f = Function::new([]);
        f.instructions()
            .loop_(BlockType::Empty)
            .call(0)
            .drop()
            .br(0)
            .end()
            .end();
        code.function(&f);
        m.section(&code);
        let wasm = m.finish();
        let engine = super::super::engine::new_engine(64 << 20).unwrap();
        let module = super::super::compiler::module(&engine, &wasm);
        let opens = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&opens);
        let limits = super::super::limits::Limits {
            wall_time: Duration::from_millis(50),
            ..Default::default()
        };
        let w = Workers::new();
        let r = w.run(limits.wall_time, move |overdue| {
            let mut linker = wasmtime::Linker::<()>::new(&engine);
            linker
                .func_wrap("host", "open", move || -> i32 {
                    counted.fetch_add(1, Ordering::SeqCst);
                    // rustix does not retry on EINTR; the guest does.
                    match rustix::fs::open(
                        &fifo,
                        rustix::fs::OFlags::RDONLY,
                        rustix::fs::Mode::empty(),
                    ) {
                        Ok(_) => 0,
                        Err(e) => e.raw_os_error(),
                    }
                })
                .unwrap();
            let mut store = wasmtime::Store::new(&engine, ());
            super::super::cancel::arm(&mut store, &limits, None, Some(overdue));
            let ran = linker
                .instantiate(&mut store, &module)
                .and_then(|i| i.get_typed_func::<(), ()>(&mut store, "run"))
                .and_then(|run| run.call(&mut store, ()));
            let trap = ran
                .err()
                .and_then(|e| e.downcast_ref::<wasmtime::Trap>().copied());
            (trap, store)
        });
        assert_eq!(r, Ok(Some(wasmtime::Trap::Interrupt)));
        assert_eq!(w.stuck(), 0);
        // Stopped at the loop's next epoch check after the interrupted open: never blocked again.
        assert!(opens.load(Ordering::SeqCst) <= 1, "{opens:?}");
    }

    #[test]
    fn refuses_when_too_many_calls_are_stuck() {
        let w = Workers::new();
        for _ in 0..MAX_STUCK {
            let r = w.run(Duration::from_millis(1), |_| {
                (thread::sleep(Duration::from_secs(20)), ())
            });
            assert_eq!(r, Err(Overrun::Deadline));
        }
        assert_eq!(
            w.run(Duration::from_secs(1), |_| (1, ())),
            Err(Overrun::TooManyStuck)
        );
    }
}
