//! The record every tool call leaves, and the append-only log it goes to.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::grant::Grant;

/// What one call did, for a security reviewer: which component ran, with what access, for how long,
/// and how it ended.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallRecord {
    /// When the call started, RFC 3339 UTC.
    pub started: String,
    /// The name of the tool called.
    pub tool: String,
    /// Hex sha256 of the component that ran.
    pub component_sha256: String,
    /// The contract version the component speaks, e.g. `0.1.0`.
    pub wit_version: String,
    /// The third-party component's name (built-in tools: absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// Exactly the directories the call received.
    pub grants: Vec<Grant>,
    /// The network access the call had: `"none"`, or the granted `host:port` pairs.
    pub network: serde_json::Value,
    /// The environment variables the call could read: `"none"`, or their names.
    pub env: serde_json::Value,
    /// How long the call took, in milliseconds of wall time (loading the component excluded).
    pub duration_ms: f64,
    /// How long compiling the component (or loading it from the cache) took before its first call
    /// in this process; 0 for later calls.
    pub compile_ms: f64,
    /// `ok`, or the error kind (`conflict`, `time-limit`, `memory-limit`, `trap`, …).
    pub outcome: String,
    /// The error message, when the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A granted list as the record writes it: `"none"` when empty, else the entries.
pub fn granted_list(entries: &[String]) -> serde_json::Value {
    if entries.is_empty() {
        serde_json::Value::from("none")
    } else {
        serde_json::Value::from(entries.to_vec())
    }
}

/// An append-only JSON-lines file of [`CallRecord`]s.
#[derive(Debug, Clone)]
pub struct AuditLog {
    path: PathBuf,
}

impl AuditLog {
    /// A log at `path`; the file and its directory are created on the first append.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        AuditLog { path: path.into() }
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as a single line (one `write` call, so concurrent writers do not interleave).
    pub fn append(&self, record: &CallRecord) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(&line)
    }
}
