//! Resource limits for one tool call.

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

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}
