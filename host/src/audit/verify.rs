//! Reading the chain back, offline: verification (`bb7 audit verify`), its head (`bb7 audit head`)
//! and its records (`bb7 audit show`). Nothing here writes.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use ed25519_dalek::VerifyingKey;
use serde_json::Value;

use super::chain::Head;
use super::{AuditError, HeadError, canonical, key, sha256_tagged};

/// A head pinned elsewhere (`--head`): a hash, optionally with its `seq` (`bb7 audit head`'s
/// output, `SEQ HASH`, is accepted as is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// The pinned record's `seq`, when given.
    pub seq: Option<u64>,
    /// The pinned record's `hash`.
    pub hash: String,
}

impl Pinned {
    /// Parses `HASH`, `SEQ HASH` or `SEQ:HASH`.
    pub fn parse(text: &str) -> Result<Pinned, PinnedError> {
        let text = text.trim();
        let (seq, hash) = match text.split_once(char::is_whitespace) {
            Some((s, h)) => (Some(s), h.trim()),
            None => match text.split_once(':') {
                Some((s, h)) if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() => {
                    (Some(s), h)
                }
                _ => (None, text),
            },
        };
        let seq = seq
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|_| PinnedError::Seq(s.to_string()))
            })
            .transpose()?;
        let hex = hash.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(PinnedError::Hash(hash.to_string()));
        }
        Ok(Pinned {
            seq,
            hash: hash.to_ascii_lowercase(),
        })
    }
}

/// Why a `--head` value is not a head.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinnedError {
    /// The part before the hash is not a number.
    #[error("{0:?} is not a seq")]
    Seq(String),
    /// The hash is not `sha256:` and 64 hex digits.
    #[error("{0:?} is not a head hash (sha256: and 64 hex digits)")]
    Hash(String),
}

/// A chain that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Records in the chain.
    pub records: u64,
    /// Its last record.
    pub head: Head,
    /// Checkpoints whose signature was checked.
    pub checkpoints: u64,
    /// Whether signatures were checked (a public key was given or found).
    pub signed_by: Option<String>,
    /// The length of a torn last line (no newline: a write cut short), which is not part of the chain.
    pub torn_bytes: Option<u64>,
    /// Records after the pinned head, when one was given.
    pub after_pinned: Option<u64>,
}

/// Where and why a chain failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}{}: {message}", .seq.map(|s| format!(" (seq {s})")).unwrap_or_default())]
pub struct Failure {
    /// The 1-based line of the first bad record (the line after the last, for a missing head).
    pub line: u64,
    /// Its `seq`, when it has one.
    pub seq: Option<u64>,
    /// What is wrong.
    pub message: String,
}

/// Opens `path` for reading: a regular file, never blocking on a FIFO.
pub fn open(path: &Path) -> std::io::Result<File> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let dir = Dir::open_ambient_dir(parent, ambient_authority())?;
    let mut opts = OpenOptions::new();
    opts.read(true).custom_flags(libc::O_NONBLOCK);
    let f = dir.open_with(name, &opts)?.into_std();
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Reads a public key file.
pub fn read_public(path: &Path) -> Result<VerifyingKey, AuditError> {
    let read = |source| AuditError::Read {
        path: path.to_path_buf(),
        source,
    };
    let f = open(path).map_err(read)?;
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(f, 4096), &mut text).map_err(read)?;
    key::parse_public(&text).map_err(|reason| AuditError::PublicKey {
        path: path.to_path_buf(),
        reason,
    })
}

/// Walks the chain in `reader`: every record's hash matches its content, its `seq` follows the one
/// before and its `prev` is that record's hash; every checkpoint is signed by `public` (when given);
/// `pinned` (when given) is a record of the chain. A last line without its newline is a torn write,
/// reported in [`Report::torn_bytes`], not a failure.
pub fn verify(
    reader: impl std::io::Read,
    public: Option<&VerifyingKey>,
    pinned: Option<&Pinned>,
) -> Result<Report, Failure> {
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let mut head = Head::genesis();
    let mut line_no = 0u64;
    let mut checkpoints = 0u64;
    let mut torn_bytes = None;
    let mut pinned_at: Option<u64> = None;
    let key_id = public.map(key::key_id);
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(|e| Failure {
            line: line_no + 1,
            seq: None,
            message: format!("cannot read: {e}"),
        })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.last() != Some(&b'\n') {
            torn_bytes = Some(buf.len() as u64);
            break;
        }
        let fail = |seq: Option<u64>, message: String| Failure {
            line: line_no,
            seq,
            message,
        };
        let mut v: Value = serde_json::from_slice(&buf[..buf.len() - 1])
            .map_err(|e| fail(None, format!("not a record (altered): {e}")))?;
        let Some(m) = v.as_object_mut() else {
            return Err(fail(None, "not a record (altered)".into()));
        };
        let seq = m.get("seq").and_then(Value::as_u64);
        let hash = match m.remove("hash") {
            Some(Value::String(h)) => h,
            _ => return Err(fail(seq, "altered: it has no hash".into())),
        };
        let canon = canonical::to_vec(&v);
        if sha256_tagged(&canon) != hash {
            return Err(fail(
                seq,
                "altered: its hash does not match its content".into(),
            ));
        }
        let Some(seq) = seq else {
            return Err(fail(None, "altered: it has no seq".into()));
        };
        let expected = head.seq + 1;
        if seq != expected {
            return Err(fail(
                Some(seq),
                format!(
                    "seq {seq} where seq {expected} belongs: a record was removed, inserted or reordered here"
                ),
            ));
        }
        if v["prev"].as_str() != Some(head.hash.as_str()) {
            let before = if head.seq == 0 {
                "the genesis value".to_string()
            } else {
                format!("seq {}", head.seq)
            };
            return Err(fail(
                Some(seq),
                format!(
                    "its prev is not the hash of the record before it ({before}): a record was removed, inserted or replaced before it"
                ),
            ));
        }
        if v["kind"] == "checkpoint"
            && let (Some(public), Some(id)) = (public, &key_id)
        {
            let signature = match v.as_object_mut().and_then(|m| m.remove("signature")) {
                Some(Value::String(s)) => s,
                _ => return Err(fail(Some(seq), "a checkpoint without a signature".into())),
            };
            let claimed = v.get("key_id").and_then(Value::as_str).unwrap_or("");
            let message = key::message(&canonical::to_vec(&v));
            if !key::verify(public, &message, &signature) {
                return Err(fail(
                    Some(seq),
                    if claimed != id {
                        format!(
                            "checkpoint signature fails: signed with another key (key_id {claimed}, the public key's is {id})"
                        )
                    } else {
                        "checkpoint signature fails".to_string()
                    },
                ));
            }
            checkpoints += 1;
        }
        if let Some(p) = pinned {
            if p.seq == Some(seq) && p.hash != hash {
                return Err(fail(
                    Some(seq),
                    format!(
                        "the head differs from --head: seq {seq} is {hash}, the pinned head is {}",
                        p.hash
                    ),
                ));
            }
            if p.hash == hash {
                pinned_at = Some(seq);
            }
        }
        head = Head { seq, hash };
    }
    let after_pinned = match pinned {
        None => None,
        Some(p) => match pinned_at {
            Some(at) => Some(head.seq - at),
            None => {
                return Err(Failure {
                    line: line_no + 1,
                    seq: None,
                    message: format!(
                        "the head differs from --head: the pinned head {}{} is not in the chain, which ends at seq {} ({}): records were removed or rewritten",
                        p.seq.map(|s| format!("seq {s} ")).unwrap_or_default(),
                        p.hash,
                        head.seq,
                        head.hash
                    ),
                });
            }
        },
    };
    Ok(Report {
        records: head.seq,
        head,
        checkpoints,
        signed_by: key_id,
        torn_bytes,
        after_pinned,
    })
}

/// The last complete record of the chain at `path`: its `seq` and `hash` (not verified).
pub fn read_head(path: &Path) -> Result<Head, AuditError> {
    let read = |source| AuditError::Read {
        path: path.to_path_buf(),
        source,
    };
    let f = match open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Head::genesis()),
        Err(e) => return Err(read(e)),
    };
    let len = f.metadata().map_err(read)?.len();
    // Up to the last newline: a torn tail is not part of the chain.
    let end = super::chain::line_start_before(&f, len).map_err(read)?;
    super::chain::last_record(&f, end).map_err(|reason| match reason {
        HeadError::Io(source) => read(source),
        reason => AuditError::BadHead {
            path: path.to_path_buf(),
            reason,
        },
    })
}

/// Every complete record of the chain in `reader`, as read (not verified); lines that are not JSON
/// objects are skipped.
pub fn records(reader: impl std::io::Read) -> std::io::Result<Vec<Value>> {
    let mut out = Vec::new();
    for line in BufReader::new(reader).split(b'\n') {
        let line = line?;
        if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(&line) {
            out.push(v);
        }
    }
    Ok(out)
}
