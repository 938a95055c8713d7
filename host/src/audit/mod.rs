//! The audit chain (ECOSYSTEM-PROTOCOL.md §7): one hash-chained, append-only log of everything a
//! security reviewer needs to see, `~/.bb7/audit/log.jsonl`, with Ed25519-signed checkpoints.
//!
//! - [`canonical`]: the canonical JSON a record's hash is taken over.
//! - [`chain`]: the writer — a file lock keeps appends from several processes one linear chain, a
//!   torn tail is cut and noted, signed checkpoints, the migration of `tool-calls.jsonl`.
//! - [`key`]: the signing key, made at first use (`key`, mode 0600; `key.pub`).
//! - [`verify`]: reading the chain back offline (`bb7 audit verify | head | show`).
//!
//! The format is described for reviewers in `doc/audit.md`.

pub mod canonical;
pub mod chain;
pub mod key;
pub mod verify;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use chain::Chain;

/// The `prev` of the first record: `sha256:` and 64 zeros.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// A checkpoint is appended after every record whose `seq` is a multiple of this.
pub const CHECKPOINT_EVERY: u64 = 100;

/// The chain's file name inside its directory.
pub const LOG_FILE: &str = "log.jsonl";
/// The secret signing key (hex of the 32-byte Ed25519 seed), mode 0600.
pub const KEY_FILE: &str = "key";
/// The public key (hex of the 32-byte Ed25519 public key): what a reviewer pins.
pub const PUBKEY_FILE: &str = "key.pub";
/// Appended to the chain's file name for the side file that keeps records the chain could not take
/// (`log.jsonl.unchained`).
pub const UNCHAINED_SUFFIX: &str = ".unchained";
/// The log of tool calls that came before the chain; its records move into the chain on first use.
pub const LEGACY_FILE: &str = "tool-calls.jsonl";

/// Why the chain could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A file of the chain could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done (`cannot append to`, `cannot read`, …).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The signing or public key is unusable.
    #[error("the audit key {}: {reason}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: KeyError,
    },
    /// The chain's last complete line is not a record, so nothing can be chained after it.
    #[error(
        "the last line of the audit chain {} is not a record ({reason}); run `bb7 audit verify`", path.display()
    )]
    BadHead {
        /// The chain file.
        path: PathBuf,
        /// Why it is not a record.
        reason: HeadError,
    },
    /// A chain or key file named on the command line cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A public key file holds no usable key.
    #[error("{}: {reason}", path.display())]
    PublicKey {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: KeyError,
    },
}

/// Why a key file's text is not a key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KeyError {
    /// Not UTF-8 text.
    #[error("not hex text")]
    NotText,
    /// Not hex digits.
    #[error("not hex: {0}")]
    NotHex(#[from] hex::FromHexError),
    /// Hex of the wrong length.
    #[error("not a 32-byte Ed25519 {0}")]
    WrongLength(&'static str),
    /// 32 bytes that are not an Ed25519 public key.
    #[error("not an Ed25519 public key: {0}")]
    NotPublicKey(String),
}

/// Why the last line of a chain is not a record.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    /// It could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    /// It has no numeric `seq`.
    #[error("no seq")]
    NoSeq,
    /// It has no `hash` string.
    #[error("no hash")]
    NoHash,
}

impl AuditError {
    pub(crate) fn io(what: &'static str, path: &Path, source: std::io::Error) -> Self {
        AuditError::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Who caused a record: `user`, `model` or `mcp:<client name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// The person at the keyboard (the command line, the Neovim plugin's own actions).
    User,
    /// The model, through a tool call in agent mode.
    Model,
    /// An MCP client of `bb7 mcp`.
    Mcp(String),
}

impl Actor {
    /// The `actor` field's value.
    pub fn as_str(&self) -> String {
        match self {
            Actor::User => "user".to_string(),
            Actor::Model => "model".to_string(),
            Actor::Mcp(c) => format!("mcp:{c}"),
        }
    }
}

/// One record before the chain gives it `seq`, `time`, `prev` and `hash`.
#[derive(Debug, Clone)]
pub struct Entry {
    fields: Map<String, Value>,
}

impl Entry {
    /// A record of `kind` caused by `actor` in `project` (`None`: no project, e.g. a global install).
    pub fn new(kind: &str, actor: &Actor, project: Option<&Path>) -> Self {
        let mut fields = Map::new();
        fields.insert("kind".into(), kind.into());
        fields.insert("actor".into(), actor.as_str().into());
        fields.insert(
            "project".into(),
            project
                .map(|p| Value::from(p.to_string_lossy().into_owned()))
                .unwrap_or(Value::Null),
        );
        fields.insert("ok".into(), true.into());
        Entry { fields }
    }

    /// Sets field `key` (any field but the four the chain owns).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Self {
        if !matches!(key, "seq" | "time" | "prev" | "hash") {
            self.fields.insert(key.to_string(), value.into());
        }
        self
    }

    /// Sets `key` when `value` is present.
    pub fn set_opt(self, key: &str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(v) => self.set(key, v),
            None => self,
        }
    }

    /// Marks the record failed with `error`.
    pub fn failed(self, error: impl Into<String>) -> Self {
        self.set("ok", false).set("error", error.into())
    }

    /// The fields set so far.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }
}

/// `sha256:` + hex of `bytes`' SHA-256.
pub fn sha256_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Hex of `bytes`' SHA-256 (the form `component_sha256`, `args_sha256`, … take).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The default chain's directory, `~/.bb7/audit/` (`$BB7_HOME/audit/`).
pub fn default_dir() -> Option<PathBuf> {
    crate::paths::state_dir().map(|d| d.join("audit"))
}

/// Appends `entry` to the default chain. A chain that cannot be written is reported as a warning,
/// never turned into a failure of what it records (the action already happened).
pub fn record(entry: Entry) {
    let Some(dir) = default_dir() else {
        return;
    };
    let path = dir.join(LOG_FILE);
    if let Err(e) = Chain::shared(&path).append(entry) {
        tracing::warn!("{e}");
    }
}

static TROUBLE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Notes that the chain at `path` could not take a record (`kept`: where the record went instead).
pub(crate) fn note_trouble(path: &Path, e: &AuditError, kept: Option<PathBuf>) {
    let kept = match kept {
        Some(k) => format!("the record was kept in {}", k.display()),
        None => "the record could not be kept anywhere".to_string(),
    };
    let message = format!(
        "the audit chain {} could not take a record: {e}; {kept}",
        path.display()
    );
    let mut t = TROUBLE.lock().unwrap_or_else(|p| p.into_inner());
    // The first failure says what went wrong; later ones are the same story.
    t.get_or_insert(message);
}

/// The first failure to append to an audit chain since the last call, if any (then cleared): the
/// command line exits non-zero with it, the protocol server sends it as a `warning` event.
pub fn take_trouble() -> Option<String> {
    TROUBLE.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Records a refusal: `what` was denied (`deny_list`, `socket`, `http`, `call`) with `reason`.
pub fn refusal(actor: &Actor, project: Option<&Path>, what: &str, reason: &str) {
    record(
        Entry::new("refusal", actor, project)
            .set("refused", what)
            .failed(reason),
    );
}

static PROCESS_ACTOR: std::sync::OnceLock<Actor> = std::sync::OnceLock::new();

/// Who this process acts for when a record cannot say better (a refusal deep in the sandbox): the
/// user on the command line ([`set_process_actor`]), else the model (the protocol server runs tool
/// calls only for the model).
pub fn process_actor() -> Actor {
    PROCESS_ACTOR.get().cloned().unwrap_or(Actor::Model)
}

/// Sets [`process_actor`] (once, at start).
pub fn set_process_actor(actor: Actor) {
    let _ = PROCESS_ACTOR.set(actor);
}

#[cfg(test)]
mod tests {
    /// The chain's files are opened and made through `cap_std` handles and `store/`'s helpers,
    /// never by path with `std::fs` (a planted symlink must not redirect them).
    #[test]
    fn no_direct_std_fs_calls_by_path() {
        for (name, text) in [
            ("chain.rs", include_str!("chain.rs")),
            ("key.rs", include_str!("key.rs")),
            ("verify.rs", include_str!("verify.rs")),
            ("canonical.rs", include_str!("canonical.rs")),
        ] {
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            for call in [
                "std::fs::create_dir",
                "std::fs::write",
                "std::fs::read",
                "std::fs::remove",
                "std::fs::rename",
                "std::fs::OpenOptions",
                "File::open(",
                "File::create(",
            ] {
                assert!(!code.contains(call), "{name} calls {call}");
            }
        }
    }
}
