//! Where the host keeps per-user files: the global state dir and the compiled-component cache.

use std::path::PathBuf;

/// The global state directory: `$BB7_HOME` when set, else `~/.bb7`.
pub fn state_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("BB7_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    home().map(|h| h.join(".bb7"))
}

/// The user's home directory (`$HOME`).
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// The audit chain (ECOSYSTEM-PROTOCOL.md §7): every tool call, component change and refusal.
pub fn audit_log() -> Option<PathBuf> {
    state_dir().map(|d| d.join("audit").join("log.jsonl"))
}
