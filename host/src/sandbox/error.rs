//! Why a sandbox operation failed: a call ([`CallError`]) or a `host:port` network entry
//! ([`HostPortError`]). Every message is the one users, the model and the audit log read.

use super::api::ToolFailure;
use super::limits::OutputLimit;
use super::watchdog::MAX_STUCK;

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The tool ran and reported an error (for the model to fix).
    #[error("{}", .0.message)]
    Tool(ToolFailure),
    /// Guest code ran past the wall-time limit (in milliseconds) and the epoch stopped it.
    #[error("the tool exceeded its time limit ({0} ms) and was stopped")]
    TimeLimit(u64),
    /// The call stayed blocked in a host call past its deadline and was abandoned: its thread may
    /// still hold the granted directory, so whoever granted a read-write directory must discard it.
    #[error("the tool exceeded its time limit ({0} ms) while blocked and was abandoned")]
    Abandoned(u64),
    /// The call's memories together outgrew the memory limit (in bytes); the call was stopped.
    #[error("the tool exceeded its memory limit ({} MiB) and was stopped", .0 >> 20)]
    MemoryLimit(u64),
    /// The call tried to write more than its output limit; the write was refused before it reached
    /// the disk and the call was stopped.
    #[error(
        "the tool tried to write more than its output limit ({} MiB, {} files and directories) and was stopped",
        .0.bytes >> 20,
        .0.entries
    )]
    OutputLimit(OutputLimit),
    /// The JSON result is larger than the result-size limit.
    #[error("the tool's result is too large ({size} bytes; the limit is {limit} bytes)")]
    ResultTooLarge {
        /// The result's size, in bytes.
        size: usize,
        /// The result-size limit, in bytes.
        limit: usize,
    },
    /// The result is not valid JSON; holds the parse error.
    #[error("the tool returned a result that is not JSON: {0}")]
    BadResult(String),
    /// The component trapped or failed to instantiate; holds the error's first line, cut to
    /// `runner::MAX_ERROR_MESSAGE` bytes.
    #[error("the tool crashed: {0}")]
    Trap(String),
    /// The directory cannot be granted: it overlaps bb7's own state or cannot be opened.
    #[error("cannot grant {0}")]
    Grant(String),
    /// [`MAX_STUCK`] abandoned calls are still blocked, so this call was not started.
    #[error(
        "{MAX_STUCK} earlier tool calls are still blocked; no new call starts until they end (restart bb7 to clear them)"
    )]
    Unavailable,
    /// The caller cancelled the call ([`super::cancel`]); it was stopped.
    #[error("the call was cancelled and the tool was stopped")]
    Cancelled,
}

impl CallError {
    /// A short machine-readable kind: the WIT error kind for tool errors, else the limit or failure.
    pub fn kind(&self) -> &str {
        match self {
            CallError::Tool(f) => &f.kind,
            CallError::TimeLimit(_) | CallError::Abandoned(_) => "time-limit",
            CallError::MemoryLimit(_) => "memory-limit",
            CallError::OutputLimit(_) => "output-limit",
            CallError::ResultTooLarge { .. } => "result-too-large",
            CallError::BadResult(_) => "bad-result",
            CallError::Trap(_) => "trap",
            CallError::Grant(_) => "grant",
            CallError::Unavailable => "unavailable",
            CallError::Cancelled => "cancelled",
        }
    }
}

/// Why a `host:port` network entry (in a manifest or a grant) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network entry {entry:?}: {why}")]
pub struct HostPortError {
    /// The entry as given.
    pub entry: String,
    /// What is wrong with it.
    pub why: &'static str,
}
