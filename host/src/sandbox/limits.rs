//! Resource limits for one tool call, and the meter of what an output-write call may still write.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// What one call may use. Exceeding any of them fails the call with a clear error; the host keeps
/// serving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Linear memory the component may grow to, in bytes.
    pub memory_bytes: u64,
    /// Wall time for one call (instantiation included).
    #[serde(serialize_with = "ser_ms")]
    pub wall_time: Duration,
    /// Size of the JSON result, in bytes.
    pub result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 256 << 20,
            wall_time: Duration::from_secs(10),
            result_bytes: 4 << 20,
        }
    }
}

/// How often the epoch ticker advances; the wall-time limit is enforced to this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

impl Limits {
    /// The wall-time limit in epoch ticks (at least one).
    pub fn epoch_ticks(&self) -> u64 {
        (self.wall_time.as_micros() / EPOCH_TICK.as_micros()).max(1) as u64
    }
}

/// What one call may write: bytes of file data and directory entries it may create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// Bytes of file data, all writes together (an overwrite counts again).
    pub bytes: u64,
    /// Files, directories and links created, together.
    pub entries: u64,
}

/// The part of an [`OutputLimit`] a call has left; shared with the output streams it opened.
#[derive(Debug)]
pub struct OutputBudget {
    limit: OutputLimit,
    bytes_left: AtomicU64,
    entries_left: AtomicU64,
    exceeded: AtomicBool,
}

impl OutputBudget {
    /// A full budget of `limit`.
    pub fn new(limit: OutputLimit) -> Arc<OutputBudget> {
        Arc::new(OutputBudget {
            limit,
            bytes_left: AtomicU64::new(limit.bytes),
            entries_left: AtomicU64::new(limit.entries),
            exceeded: AtomicBool::new(false),
        })
    }

    /// The limit the budget started from.
    pub fn limit(&self) -> OutputLimit {
        self.limit
    }

    /// Whether the call tried to write past the budget.
    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::SeqCst)
    }

    fn take(&self, left: &AtomicU64, n: u64, what: &str) -> wasmtime::Result<()> {
        let ok = left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| l.checked_sub(n))
            .is_ok();
        if ok {
            return Ok(());
        }
        self.exceeded.store(true, Ordering::SeqCst);
        Err(wasmtime::Error::msg(format!(
            "the tool tried to write past its output limit ({what})"
        )))
    }

    pub(super) fn bytes(&self, n: u64) -> wasmtime::Result<()> {
        self.take(&self.bytes_left, n, "bytes")
    }

    pub(super) fn entry(&self) -> wasmtime::Result<()> {
        self.take(&self.entries_left, 1, "entries")
    }
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_what_would_pass_it_and_remembers() {
        let b = OutputBudget::new(OutputLimit {
            bytes: 10,
            entries: 2,
        });
        assert!(b.bytes(6).is_ok());
        assert!(b.bytes(5).is_err(), "6 + 5 passes 10");
        assert!(b.exceeded());
        assert!(b.bytes(4).is_ok(), "a refused write charged nothing");
        assert!(b.entry().is_ok() && b.entry().is_ok());
        assert!(b.entry().is_err());
    }
}
