//! Worker threads with a host-side deadline.
//!
//! Epoch interruption stops a guest only while guest code runs. A guest blocked inside a host call
//! (a sleep, opening a FIFO nobody writes to) never reaches an epoch check, so every call runs on a
//! worker thread and the caller waits at most the wall-time limit plus a grace period. A call still
//! blocked then is abandoned: the caller gets a time-limit error, the worker is replaced, and the
//! abandoned worker exits when (if ever) its call returns. The number of abandoned calls still
//! blocked is capped, so a hostile tool cannot exhaust threads or instance slots.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// A queued call; returns whether its caller had abandoned it by the time it returned.
type Job = Box<dyn FnOnce() -> bool + Send + 'static>;

/// Abandoned calls still blocked, at most; past this, calls are refused until some return.
pub const MAX_STUCK: usize = 8;
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

/// A small pool of worker threads that run calls under a deadline.
pub struct Workers {
    tx: Mutex<Sender<Job>>,
    rx: Arc<Mutex<Receiver<Job>>>,
    stuck: Arc<AtomicUsize>,
    workers: Arc<AtomicUsize>,
}

enum Slot<T> {
    Running,
    Done(T),
    Abandoned,
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
    /// costs as much as running a small call, and the caller need not wait for it).
    pub fn run<T: Send + 'static, D: Send + 'static>(
        &self,
        deadline: Duration,
        f: impl FnOnce() -> (T, D) + Send + 'static,
    ) -> Result<T, Overrun> {
        if self.stuck() >= MAX_STUCK {
            return Err(Overrun::TooManyStuck);
        }
        let slot = Arc::new((Mutex::new(Slot::Running), Condvar::new()));
        let job_slot = Arc::clone(&slot);
        let stuck = Arc::clone(&self.stuck);
        let job: Job = Box::new(move || {
            let (out, deferred) = f();
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
        let (mut s, _) =
            match cv.wait_timeout_while(guard, deadline, |s| matches!(s, Slot::Running)) {
                Ok(r) => r,
                Err(_) => return Err(Overrun::Deadline),
            };
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
        let w = Workers::new();
        assert_eq!(w.run(Duration::from_secs(5), || (7, ())), Ok(7));
        let r = w.run(Duration::from_millis(20), || {
            (thread::sleep(Duration::from_millis(300)), ())
        });
        assert_eq!(r, Err(Overrun::Deadline));
        assert_eq!(w.stuck(), 1);
        // The pool still serves while the abandoned call is blocked.
        assert_eq!(w.run(Duration::from_secs(5), || (8, ())), Ok(8));
        thread::sleep(Duration::from_millis(500));
        assert_eq!(
            w.stuck(),
            0,
            "a returning abandoned call is no longer counted"
        );
    }

    #[test]
    fn refuses_when_too_many_calls_are_stuck() {
        let w = Workers::new();
        for _ in 0..MAX_STUCK {
            let r = w.run(Duration::from_millis(1), || {
                (thread::sleep(Duration::from_millis(400)), ())
            });
            assert_eq!(r, Err(Overrun::Deadline));
        }
        assert_eq!(
            w.run(Duration::from_secs(1), || (1, ())),
            Err(Overrun::TooManyStuck)
        );
    }
}
