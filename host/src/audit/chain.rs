//! The chain's writer.
//!
//! Every append runs under an exclusive `flock` on the log file, so appends from any number of bb7
//! processes (several Neovims, the command line) form one linear chain: under the lock the writer
//! reads the last record (or reuses what it knows when the file is exactly as it left it), gives the
//! new record the next `seq` and the last `hash` as `prev`, and writes the line with one `write` on
//! an `O_APPEND` descriptor.
//!
//! A torn tail (bytes after the last newline: a process killed mid-write) is cut under the lock and
//! a `recovered` record names what was cut (its length and sha256); nothing before it is touched.
//!
//! Durability: the data is `fdatasync`ed at every checkpoint (after each record whose `seq` is a
//! multiple of [`CHECKPOINT_EVERY`]) and at the checkpoint a process writes when it exits, not after
//! every record. A killed process loses nothing it wrote (the kernel has it); a power cut can lose
//! the records since the last checkpoint, never reorder or corrupt the ones before it.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use ed25519_dalek::SigningKey;
use serde_json::{Map, Value};

use super::{
    Actor, AuditError, CHECKPOINT_EVERY, Entry, GENESIS, HeadError, LEGACY_FILE, LOG_FILE,
    UNCHAINED_SUFFIX, canonical, key, sha256_hex, sha256_tagged,
};

/// The last record of a chain: what the next one chains to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Its `seq` (0 for an empty chain).
    pub seq: u64,
    /// Its `hash` ([`GENESIS`] for an empty chain).
    pub hash: String,
}

impl Head {
    /// The head of an empty chain.
    pub fn genesis() -> Self {
        Head {
            seq: 0,
            hash: GENESIS.to_string(),
        }
    }
}

/// A chain file, written by this process. Use [`Chain::shared`]: one per path per process.
pub struct Chain {
    path: PathBuf,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    dir: Option<Dir>,
    file: Option<File>,
    /// The file's length after this process's last write, and the head it wrote then.
    known: Option<(u64, Head)>,
    key: Option<SigningKey>,
    /// Records appended by this process since its last checkpoint.
    pending: bool,
    /// The legacy `tool-calls.jsonl` was looked at (once per process).
    migrated: bool,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain").field("path", &self.path).finish()
    }
}

fn registry() -> &'static Mutex<HashMap<PathBuf, Arc<Chain>>> {
    static CHAINS: OnceLock<Mutex<HashMap<PathBuf, Arc<Chain>>>> = OnceLock::new();
    CHAINS.get_or_init(|| {
        // SAFETY: `at_exit` is a plain `extern "C" fn` that never unwinds (it catches panics).
        unsafe {
            libc::atexit(at_exit);
        }
        Mutex::new(HashMap::new())
    })
}

/// At process exit: a signed checkpoint on every chain this process appended to since its last one.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Ok(map) = registry().try_lock() else {
            return;
        };
        for chain in map.values() {
            let _ = chain.exit_checkpoint();
        }
    });
}

impl Chain {
    /// The process's writer for the chain at `path` (made on first use; nothing is opened yet).
    pub fn shared(path: &Path) -> Arc<Chain> {
        let mut map = registry().lock().unwrap_or_else(|p| p.into_inner());
        map.entry(path.to_path_buf())
            .or_insert_with(|| {
                Arc::new(Chain {
                    path: path.to_path_buf(),
                    inner: Mutex::new(Inner::default()),
                })
            })
            .clone()
    }

    /// The chain file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry`, returning the new head (a checkpoint that follows it is not counted).
    ///
    /// A record the chain cannot take (its last line is not a record, the disk is full, …) is not
    /// dropped: it is appended to `<log>.unchained` beside the chain, and the failure is kept for
    /// [`super::take_trouble`] (the command line exits non-zero, the protocol server warns).
    pub fn append(&self, entry: Entry) -> Result<Head, AuditError> {
        let fields = entry.fields.clone();
        let result = self.append_chained(entry);
        if let Err(e) = &result {
            let kept = self.keep_unchained(fields);
            super::note_trouble(&self.path, e, kept);
        }
        result
    }

    /// Appends `fields` (and the time) as one line of `<log>.unchained`; its path when written.
    fn keep_unchained(&self, mut fields: Map<String, Value>) -> Option<PathBuf> {
        let (parent, name) = split(&self.path);
        let side = format!("{name}{UNCHAINED_SUFFIX}");
        fields.insert("time".into(), now().into());
        let mut line = canonical::to_vec(&Value::Object(fields));
        line.push(b'\n');
        let dir = crate::store::StateDir::open(&parent, true).ok()?;
        let mut opts = OpenOptions::new();
        opts.append(true).create(true).mode(0o600);
        let mut f = dir.dir().open_with(&side, &opts).ok()?.into_std();
        f.write_all(&line).ok()?;
        Some(parent.join(side))
    }

    fn append_chained(&self, entry: Entry) -> Result<Head, AuditError> {
        self.with_lock(|inner, file, path| {
            let mut head = inner.head(file, path)?;
            if !inner.migrated {
                // Marked done only once it is: a failed migration is tried again (and never
                // written twice: see `migrate`).
                head = migrate(file, path, head)?;
                inner.migrated = true;
            }
            let (line, new) = seal(entry.fields, &head);
            write_line(file, path, &line)?;
            inner.pending = true;
            let mut last = new.clone();
            if new.seq % CHECKPOINT_EVERY == 0 {
                last = inner.checkpoint(file, path, &new)?;
            }
            inner.remember(file, last);
            Ok(new)
        })
    }

    /// Appends a signed checkpoint when this process appended records since its last one (what a
    /// process does as it exits).
    pub fn exit_checkpoint(&self) -> Result<(), AuditError> {
        let Ok(inner) = self.inner.try_lock() else {
            return Ok(());
        };
        if !inner.pending {
            return Ok(());
        }
        drop(inner);
        self.with_lock(|inner, file, path| {
            let head = inner.head(file, path)?;
            let last = inner.checkpoint(file, path, &head)?;
            inner.remember(file, last);
            Ok(())
        })
    }

    fn with_lock<R>(
        &self,
        f: impl FnOnce(&mut Inner, &mut File, &Path) -> Result<R, AuditError>,
    ) -> Result<R, AuditError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = match inner.file.take() {
            Some(f) => f,
            None => self.open(&mut inner)?,
        };
        let result = file
            .lock()
            .map_err(|e| AuditError::io("cannot lock", &self.path, e))
            .and_then(|()| f(&mut inner, &mut file, &self.path));
        let _ = file.unlock();
        inner.file = Some(file);
        result
    }

    fn open(&self, inner: &mut Inner) -> Result<File, AuditError> {
        let (parent, name) = split(&self.path);
        let dir = crate::store::StateDir::open(&parent, true)
            .map_err(|e| AuditError::io("cannot open", &parent, e))?
            .dir()
            .try_clone()
            .map_err(|e| AuditError::io("cannot open", &parent, e))?;
        let mut opts = OpenOptions::new();
        opts.read(true).append(true).create(true).mode(0o600);
        let file = dir
            .open_with(&name, &opts)
            .map_err(|e| AuditError::io("cannot open", &self.path, e))?
            .into_std();
        let meta = file
            .metadata()
            .map_err(|e| AuditError::io("cannot read", &self.path, e))?;
        if !meta.is_file() {
            return Err(AuditError::io(
                "cannot use",
                &self.path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        inner.dir = Some(dir);
        Ok(file)
    }
}

/// `path`'s directory and file name (`log.jsonl` when it names none).
fn split(path: &Path) -> (PathBuf, String) {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| LOG_FILE.to_string());
    (parent, name)
}

impl Inner {
    fn remember(&mut self, file: &File, head: Head) {
        self.known = file.metadata().ok().map(|m| (m.len(), head));
    }

    /// The chain's head, cutting a torn tail (and noting it with a `recovered` record) first.
    fn head(&mut self, file: &mut File, path: &Path) -> Result<Head, AuditError> {
        let len = file
            .metadata()
            .map_err(|e| AuditError::io("cannot read", path, e))?
            .len();
        if let Some((known_len, head)) = &self.known
            && *known_len == len
        {
            return Ok(head.clone());
        }
        let torn = tail_after_last_newline(file, len)
            .map_err(|e| AuditError::io("cannot read", path, e))?;
        let end = torn.as_ref().map_or(len, |t| t.offset);
        let head = last_record(file, end).map_err(|reason| AuditError::BadHead {
            path: path.to_path_buf(),
            reason,
        })?;
        let Some(torn) = torn else {
            return Ok(head);
        };
        file.set_len(torn.offset)
            .map_err(|e| AuditError::io("cannot cut the torn tail of", path, e))?;
        let entry = Entry::new("recovered", &Actor::User, None)
            .set("cut_offset", torn.offset)
            .set("cut_bytes", torn.bytes)
            .set("cut_sha256", torn.sha256);
        let (line, new) = seal(entry.fields, &head);
        write_line(file, path, &line)?;
        self.pending = true;
        Ok(new)
    }

    /// Appends a checkpoint signing `head`, fsyncs, and returns the checkpoint as the new head.
    fn checkpoint(
        &mut self,
        file: &mut File,
        path: &Path,
        head: &Head,
    ) -> Result<Head, AuditError> {
        let signing = match self.key.take() {
            Some(k) => k,
            None => {
                let dir = self.dir.as_ref().ok_or_else(|| {
                    AuditError::io(
                        "cannot open",
                        path,
                        std::io::Error::other("the chain's directory is not open"),
                    )
                })?;
                key::load_or_make(dir, &split(path).0)?
            }
        };
        let signing = &*self.key.insert(signing);
        let mut m = Entry::new("checkpoint", &Actor::User, None)
            .set("key_id", key::key_id(&signing.verifying_key()))
            .fields;
        m.insert("seq".into(), (head.seq + 1).into());
        m.insert("time".into(), now().into());
        m.insert("prev".into(), head.hash.clone().into());
        let unsigned = canonical::to_vec(&Value::Object(m.clone()));
        m.insert(
            "signature".into(),
            key::sign(signing, &key::message(&unsigned)).into(),
        );
        let (line, new) = finish(m, head.seq + 1);
        write_line(file, path, &line)?;
        file.sync_data()
            .map_err(|e| AuditError::io("cannot sync", path, e))?;
        self.pending = false;
        Ok(new)
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// `fields` as the record after `head`: its line (canonical JSON and a newline) and its head.
fn seal(mut fields: Map<String, Value>, head: &Head) -> (Vec<u8>, Head) {
    let seq = head.seq + 1;
    fields.insert("seq".into(), seq.into());
    fields.insert("time".into(), now().into());
    fields.insert("prev".into(), head.hash.clone().into());
    finish(fields, seq)
}

/// Hashes a record that has everything but `hash`, and renders its line.
fn finish(mut fields: Map<String, Value>, seq: u64) -> (Vec<u8>, Head) {
    fields.remove("hash");
    let mut v = Value::Object(fields);
    let hash = sha256_tagged(&canonical::to_vec(&v));
    if let Value::Object(m) = &mut v {
        m.insert("hash".into(), hash.clone().into());
    }
    let mut line = canonical::to_vec(&v);
    line.push(b'\n');
    (line, Head { seq, hash })
}

fn write_line(file: &mut File, path: &Path, line: &[u8]) -> Result<(), AuditError> {
    file.write_all(line)
        .map_err(|e| AuditError::io("cannot append to", path, e))
}

/// Bytes after the last newline: where they start, how many, their sha256.
struct Torn {
    offset: u64,
    bytes: u64,
    sha256: String,
}

const CHUNK: u64 = 64 * 1024;

/// The offset just past the last `\n` in `file[..end]` (0 when there is none).
pub(crate) fn line_start_before(file: &File, end: u64) -> std::io::Result<u64> {
    let mut hi = end;
    let mut buf = vec![0u8; CHUNK as usize];
    while hi > 0 {
        let lo = hi.saturating_sub(CHUNK);
        let n = (hi - lo) as usize;
        file.read_exact_at(&mut buf[..n], lo)?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            return Ok(lo + i as u64 + 1);
        }
        hi = lo;
    }
    Ok(0)
}

fn tail_after_last_newline(file: &File, len: u64) -> std::io::Result<Option<Torn>> {
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    if last[0] == b'\n' {
        return Ok(None);
    }
    let offset = line_start_before(file, len)?;
    let mut torn = vec![0u8; (len - offset) as usize];
    file.read_exact_at(&mut torn, offset)?;
    Ok(Some(Torn {
        offset,
        bytes: len - offset,
        sha256: sha256_hex(&torn),
    }))
}

/// The head of `file[..end]`, which ends with a newline (or is empty).
pub(crate) fn last_record(file: &File, end: u64) -> Result<Head, HeadError> {
    if end == 0 {
        return Ok(Head::genesis());
    }
    let start = line_start_before(file, end - 1)?;
    let mut line = vec![0u8; (end - 1 - start) as usize];
    file.read_exact_at(&mut line, start)?;
    let v: Value = serde_json::from_slice(&line)?;
    let seq = v["seq"].as_u64().ok_or(HeadError::NoSeq)?;
    let hash = v["hash"].as_str().ok_or(HeadError::NoHash)?.to_string();
    Ok(Head { seq, hash })
}

/// On a process's first append to the default chain (`<state>/audit/log.jsonl`): moves the records
/// of `<state>/tool-calls.jsonl` into the chain, each as a `tool_call` record marked
/// `migrated: true` (the original fields kept), then a `migration` record with the old file's
/// sha256, fsyncs and removes the old file.
///
/// All or nothing, and never twice: the records and the `migration` record go out in one write,
/// cut back off when the write fails; a chain that already holds a `migration` record of the same
/// old file (a process stopped before it could remove it) only gets the old file removed.
fn migrate(file: &mut File, path: &Path, mut head: Head) -> Result<Head, AuditError> {
    let Some(audit_dir) = path.parent() else {
        return Ok(head);
    };
    let is_default = path.file_name().is_some_and(|n| n == LOG_FILE)
        && audit_dir.file_name().is_some_and(|n| n == "audit");
    let Some(state) = audit_dir.parent().filter(|_| is_default) else {
        return Ok(head);
    };
    let Ok(state_dir) = Dir::open_ambient_dir(state, ambient_authority()) else {
        return Ok(head);
    };
    let legacy_path = state.join(LEGACY_FILE);
    let bytes = match crate::store::read_regular_nofollow(&state_dir, LEGACY_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(head),
        Err(e) => {
            // Left in place (e.g. over 16 MiB): the chain goes on without it.
            tracing::warn!(
                "cannot move {} into the audit chain: {e}",
                legacy_path.display()
            );
            return Ok(head);
        }
    };
    let legacy_sha = sha256_hex(&bytes);
    if !holds_migration_of(file, &legacy_sha).map_err(|e| AuditError::io("cannot read", path, e))? {
        let mut out = Vec::new();
        let mut count = 0u64;
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let entry = match serde_json::from_slice::<Value>(line) {
                Ok(Value::Object(old)) => legacy_entry(old),
                _ => Entry::new("tool_call", &Actor::User, None)
                    .set("migrated", true)
                    .failed("an unreadable line of tool-calls.jsonl")
                    .set("legacy_line", String::from_utf8_lossy(line).into_owned()),
            };
            let (l, new) = seal(entry.fields, &head);
            out.extend_from_slice(&l);
            head = new;
            count += 1;
        }
        let entry = Entry::new("migration", &Actor::User, None)
            .set("from", legacy_path.to_string_lossy().into_owned())
            .set("records", count)
            .set("legacy_sha256", legacy_sha);
        let (l, new) = seal(entry.fields, &head);
        out.extend_from_slice(&l);
        let before = file
            .metadata()
            .map_err(|e| AuditError::io("cannot read", path, e))?
            .len();
        if let Err(e) = write_line(file, path, &out).and_then(|()| {
            file.sync_data()
                .map_err(|e| AuditError::io("cannot sync", path, e))
        }) {
            // Nothing of a failed migration stays (the next append tries again).
            let _ = file.set_len(before);
            return Err(e);
        }
        head = new;
    }
    // A removal that fails is tried again by the next process; the chain already holds the records.
    if let Err(e) = crate::store::remove_file_if_exists(&state_dir, LEGACY_FILE) {
        tracing::warn!("cannot remove {}: {e}", legacy_path.display());
    }
    Ok(head)
}

/// Whether the chain in `file` holds a `migration` record of an old log whose sha256 is `sha`.
fn holds_migration_of(file: &File, sha: &str) -> std::io::Result<bool> {
    use std::io::BufRead;
    let needle = format!("\"legacy_sha256\":\"{sha}\"");
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut reader = std::io::BufReader::with_capacity(1 << 16, ReadAt { file, pos: 0 });
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(false);
        }
        if finder.find(&line).is_some()
            && serde_json::from_slice::<Value>(&line)
                .is_ok_and(|v| v["kind"] == "migration" && v["legacy_sha256"].as_str() == Some(sha))
        {
            return Ok(true);
        }
    }
}

/// Reads `file` from `pos` with positioned reads (the descriptor's offset is left alone).
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
}

impl std::io::Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

fn legacy_entry(old: Map<String, Value>) -> Entry {
    let project = old
        .get("grants")
        .and_then(|g| g.get(0))
        .and_then(|g| g.get("path"))
        .and_then(Value::as_str)
        .map(PathBuf::from);
    let ok = old.get("outcome").and_then(Value::as_str) == Some("ok");
    let mut e = Entry::new("tool_call", &Actor::User, project.as_deref());
    for (k, v) in old {
        e = e.set(&k, v);
    }
    e.set("ok", ok).set("migrated", true)
}
