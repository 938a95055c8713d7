//! Checkpoints (AGENT-PROTOCOL.md §3): every write the host makes into the project (apply, apply-as,
//! applied hunks, rollbacks) is recorded under `.bb7/checkpoints/<id>/` with each file's content
//! before and after, so it can be inspected and undone later, across restarts.
//!
//! Layout of one checkpoint: `checkpoint.json` (the record) and `<n>.before` / `<n>.after` (the
//! contents of file `n` of the record; absent when the file did not exist on that side).
//!
//! Crash safety. [`apply_changes`] works in three steps:
//! 1. the content files, then the record with `state: "pending"` (each written atomically: temp
//!    file, fsync, rename, fsync of the directory);
//! 2. each project file, replaced atomically (so it is old or new, never torn);
//! 3. the record again, `state: "done"`.
//!
//! Steps 1 and 3 are not fsynced on the request's path: a `kill -9` cannot undo a completed write or
//! rename (the kernel keeps them), so the order above holds for a crashed process without them, and
//! an fsync of two copies of a large file would cost more than the apply itself. Durability against
//! power loss follows right after: a background thread fsyncs the checkpoint's files once the apply
//! is done (a power cut in that window can lose the newest checkpoint, never a project file, which
//! is fsynced before the reply as always). A content file that does not match its hash is reported,
//! never used.
//!
//! Writing the record before touching the project means a crash can never leave a project change
//! without a record of how to undo it. A record still `pending` whose process is gone (a crash in
//! step 2 or 3) is reconciled when checkpoints are next read: each file is compared with its
//! hashes; files still at their `before` content were never written and leave the record; if none
//! was written the checkpoint is removed; otherwise it becomes `done`. So after recovery every
//! record lists exactly the files its apply changed, and its content files match its hashes.
//!
//! Ownership. A repository can ship `.bb7/checkpoints/` too, so only what this user's bb7 recorded is
//! used: every id ends in a tag of its time stamp, and every record carries a tag of its content,
//! both HMAC-SHA256 under a per-user key in the global state directory (`~/.bb7/checkpoint.key`,
//! which no repository can read). A directory or record without valid tags is never listed, read,
//! rolled back, counted or removed: a shipped record that claims the user's chat is not offered,
//! and shipped directories cannot push the user's own checkpoints out of retention.
//!
//! Retention: the newest [`KEEP`] checkpoints this user recorded in the project, none older than
//! [`MAX_AGE_DAYS`] days; older ones are removed whenever a new checkpoint is made (never the one
//! just made), with any directory of ours a crash left without a record once it is ten minutes old.

use std::io;

use cap_std::fs::Dir;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::hunks::hash;
use super::projfs;

/// How many checkpoints a project keeps.
pub const KEEP: usize = 50;
/// The age after which a checkpoint is removed.
pub const MAX_AGE_DAYS: i64 = 30;

const RECORD: &str = "checkpoint.json";
/// The per-user key's file in the global state directory.
const KEY_FILE: &str = "checkpoint.key";
/// Hex digits of an id's tag.
const ID_TAG_HEX: usize = 12;

/// Why a checkpoint cannot be opened, made, read or applied.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// No checkpoint with a readable record has this id.
    #[error("Unknown checkpoint: {0}")]
    Unknown(String),
    /// The checkpoint (by id) was not recorded by this user's bb7, or its record was altered
    /// since: it is never used.
    #[error(
        "Unknown checkpoint: {0} (not recorded by BB-7 for this user, or altered since; it is not used)"
    )]
    NotOurs(String),
    /// The id is not a plain name (1 to 64 ASCII letters, digits, `-` or `_`).
    #[error("Invalid checkpoint id: {0:?}")]
    BadId(String),
    /// The checkpoint (by id) does not record the file (by path).
    #[error("Checkpoint {0} has no file {1}")]
    NoFile(String, String),
    /// `.bb7/checkpoints/` cannot be opened or created.
    #[error("Cannot open .bb7/checkpoints: {0}")]
    Open(io::Error),
    /// A checkpoint's directory, content file or record (by id) cannot be written.
    #[error("Cannot write checkpoint {0}: {1}")]
    Store(String, io::Error),
    /// A checkpoint (by id) cannot be used; the text says why (a bad record, a missing
    /// or altered content file, another process still writing it).
    #[error("Cannot read checkpoint {0}: {1}")]
    Read(String, String),
    /// Writing or removing a project file (by path) failed during an apply.
    #[error("Cannot write file {0}: {1}")]
    Write(String, io::Error),
}

/// One file of a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileRecord {
    /// The file, relative to the project root.
    pub path: String,
    /// `sha256:…` of the content before; `null` when the file did not exist.
    pub before_hash: Option<String>,
    /// `sha256:…` of the content written; `null` when the file was removed.
    pub after_hash: Option<String>,
    /// The number of its content files (`<blob>.before`, `<blob>.after`).
    pub blob: usize,
}

/// A checkpoint record (`checkpoint.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The id, also its directory name: the UTC time to the microsecond, then four
    /// random hex digits.
    pub id: String,
    /// When it was made, RFC 3339 UTC.
    pub created: String,
    /// The chat that made it (a rollback takes its target's); `None` when no chat
    /// was active.
    pub chat_id: Option<String>,
    /// `apply_file`, `apply_file_as`, `apply_hunks` or `rollback`.
    pub kind: String,
    /// For a rollback: the checkpoint it rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<String>,
    /// `pending` while the apply runs, then `done`.
    pub state: String,
    /// The process that made it (a `pending` record of a live process is not recovered).
    #[serde(default)]
    pub pid: u32,
    /// The files it changed.
    pub files: Vec<FileRecord>,
    /// HMAC-SHA256 (hex) of the record without this field, under the user's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// One file to change: its content now (`None`: absent) and the content to write (`None`: remove).
#[derive(Debug, Clone)]
pub struct Change {
    /// The file, relative to the project root.
    pub path: String,
    /// Its content before the change; `None` when it does not exist.
    pub before: Option<Vec<u8>>,
    /// The content to write; `None` to remove the file.
    pub after: Option<Vec<u8>>,
}

/// What a new checkpoint is about.
pub struct Meta<'a> {
    /// The chat making the change; `None` when there is none.
    pub chat_id: Option<&'a str>,
    /// What makes it: `apply_file`, `apply_file_as`, `apply_hunks` or `rollback`.
    pub kind: &'a str,
    /// For a rollback: the id of the checkpoint it rolls back.
    pub rollback_of: Option<&'a str>,
}

/// `.bb7/checkpoints/` of a project, as a handle, with the key that tells this user's checkpoints
/// from any other.
pub struct Checkpoints {
    dir: Dir,
    key: Vec<u8>,
}

fn mac(key: &[u8], what: &[u8], bytes: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any size");
    m.update(what);
    m.update(&[0]);
    m.update(bytes);
    m
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Replaces `rel` in `dir` with `bytes`: a new temporary file renamed over it, so a reader sees the
/// old file or the new one; not fsynced (see the module notes).
fn write_fast(dir: &Dir, rel: &str, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp = format!("{rel}.tmp-{}", std::process::id());
    let mut opts = cap_std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    let written = dir
        .open_with(&tmp, &opts)
        .and_then(|mut f| f.write_all(bytes));
    if let Err(e) = written.and_then(|_| dir.rename(&tmp, dir, rel)) {
        let _ = dir.remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// fsyncs checkpoint `id`'s files and directory on a background thread.
fn sync_later(dir: &Dir, id: &str) {
    let (Ok(parent), Ok(sub)) = (dir.try_clone(), dir.open_dir(id)) else {
        return;
    };
    std::thread::spawn(move || {
        if let Ok(entries) = sub.entries() {
            for e in entries.flatten() {
                if let Ok(f) = sub.open(e.file_name()) {
                    let _ = f.sync_all();
                }
            }
        }
        crate::store::sync_dir(&sub);
        crate::store::sync_dir(&parent);
    });
}

impl Checkpoints {
    /// Opens (creating) `checkpoints/` in `state`, the project's `.bb7/` handle held since `init`;
    /// `checkpoints` must be a real directory (it is opened without following a link).
    pub fn open(state: &Dir) -> Result<Checkpoints, CheckpointError> {
        Self::open_keyed(state, crate::store::user_key(KEY_FILE))
    }

    /// [`Checkpoints::open`] with an explicit key (tests).
    pub fn open_keyed(state: &Dir, key: Vec<u8>) -> Result<Checkpoints, CheckpointError> {
        let open =
            || crate::store::project::open_dir_nofollow(state, "checkpoints", ".bb7/checkpoints");
        let dir = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match state.create_dir("checkpoints") {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                        return Err(CheckpointError::Open(e));
                    }
                    _ => open(),
                }
            }
            r => r,
        }
        .map_err(CheckpointError::Open)?;
        Ok(Checkpoints { dir, key })
    }

    /// The tag an id ends with: the first hex digits of an HMAC of the rest.
    fn id_tag(&self, stem: &str) -> String {
        let m = mac(&self.key, b"bb7 checkpoint id", stem.as_bytes());
        hex::encode(m.finalize().into_bytes())[..ID_TAG_HEX].to_string()
    }

    /// A new id: the UTC time to the microsecond, four random hex digits, and the id's tag.
    fn new_id(&self) -> String {
        let stem = format!(
            "{}-{:04x}",
            chrono::Utc::now().format("%Y%m%d-%H%M%S-%6f"),
            rand::random::<u16>()
        );
        let tag = self.id_tag(&stem);
        format!("{stem}-{tag}")
    }

    /// Whether `id` was made by this user's bb7 (its tag matches).
    fn ours(&self, id: &str) -> bool {
        id.rsplit_once('-').is_some_and(|(stem, tag)| {
            tag.len() == ID_TAG_HEX && {
                let want = self.id_tag(stem);
                // Compared in constant time.
                want.bytes()
                    .zip(tag.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
            }
        })
    }

    /// The record's tag: an HMAC of its JSON without the tag.
    fn record_mac(&self, rec: &Record) -> Result<Hmac<Sha256>, serde_json::Error> {
        let mut bare = rec.clone();
        bare.tag = None;
        Ok(mac(
            &self.key,
            b"bb7 checkpoint record",
            &serde_json::to_vec(&bare)?,
        ))
    }

    fn write_record(&self, rec: &Record) -> Result<(), CheckpointError> {
        let store_err =
            |e: serde_json::Error| CheckpointError::Store(rec.id.clone(), io::Error::other(e));
        let mut tagged = rec.clone();
        tagged.tag = Some(hex::encode(
            self.record_mac(rec)
                .map_err(store_err)?
                .finalize()
                .into_bytes(),
        ));
        let json = serde_json::to_vec_pretty(&tagged).map_err(store_err)?;
        let sub = self
            .dir
            .open_dir(&rec.id)
            .map_err(|e| CheckpointError::Store(rec.id.clone(), e))?;
        write_fast(&sub, RECORD, &json).map_err(|e| CheckpointError::Store(rec.id.clone(), e))
    }

    fn read_record(&self, id: &str) -> Result<Record, CheckpointError> {
        if !self.ours(id) {
            return Err(CheckpointError::NotOurs(id.to_string()));
        }
        let bytes = crate::store::read_regular(&self.dir, format!("{id}/{RECORD}"))
            .map_err(|_| CheckpointError::Unknown(id.to_string()))?;
        let rec: Record =
            serde_json::from_slice(&bytes).map_err(|_| CheckpointError::NotOurs(id.to_string()))?;
        let tag = rec.tag.as_deref().and_then(|t| hex::decode(t).ok());
        let verified = match (tag, self.record_mac(&rec)) {
            (Some(t), Ok(m)) => m.verify_slice(&t).is_ok(),
            _ => false,
        };
        if !verified {
            return Err(CheckpointError::NotOurs(id.to_string()));
        }
        if rec.id != id {
            return Err(CheckpointError::Read(
                id.to_string(),
                "the record names another id".into(),
            ));
        }
        // A record is input (a repository can ship one): its paths follow the project path rule
        // (nothing under .git/ or .bb7/, no `..`), so a rollback cannot write, say, a git hook.
        for f in &rec.files {
            crate::store::project::check_rel(&f.path)
                .map_err(|e| CheckpointError::Read(id.to_string(), e.to_string()))?;
        }
        Ok(rec)
    }

    fn remove(&self, id: &str) {
        if valid_id(id) {
            let _ = self.dir.remove_dir_all(id);
        }
    }

    /// Step 1: a new pending record with the contents of `changes`.
    fn begin(
        &self,
        project: Option<&Dir>,
        meta: &Meta,
        changes: &[Change],
    ) -> Result<Record, CheckpointError> {
        let mut id = self.new_id();
        while self.dir.exists(&id) {
            id = self.new_id();
        }
        self.dir
            .create_dir(&id)
            .map_err(|e| CheckpointError::Store(id.clone(), e))?;
        let sub = self
            .dir
            .open_dir(&id)
            .map_err(|e| CheckpointError::Store(id.clone(), e))?;
        let mut files = Vec::new();
        for (n, c) in changes.iter().enumerate() {
            for (side, content) in [("before", &c.before), ("after", &c.after)] {
                let Some(bytes) = content else { continue };
                let name = format!("{n}.{side}");
                // The content before is the project file itself until the apply replaces it: a hard
                // link keeps it without a copy (a mismatch is caught by the hash on every read).
                if side == "before"
                    && project.is_some_and(|p| projfs::link_into(p, &c.path, &sub, &name).is_ok())
                {
                    if sub
                        .metadata(&name)
                        .is_ok_and(|m| m.len() == bytes.len() as u64)
                    {
                        continue;
                    }
                    let _ = sub.remove_file(&name);
                }
                write_fast(&sub, &name, bytes)
                    .map_err(|e| CheckpointError::Store(id.clone(), e))?;
            }
            files.push(FileRecord {
                path: c.path.clone(),
                before_hash: c.before.as_deref().map(hash),
                after_hash: c.after.as_deref().map(hash),
                blob: n,
            });
        }
        let rec = Record {
            id,
            created: crate::chat::model::now(),
            chat_id: meta.chat_id.map(str::to_string),
            kind: meta.kind.to_string(),
            rollback_of: meta.rollback_of.map(str::to_string),
            state: "pending".into(),
            pid: std::process::id(),
            files,
            tag: None,
        };
        self.write_record(&rec)?;
        Ok(rec)
    }

    /// Brings a pending record in line with the project (see the module notes). Returns the record,
    /// or `None` when nothing of it was applied (and it was removed).
    fn reconcile(&self, project: &Dir, mut rec: Record) -> Option<Record> {
        rec.files.retain(|f| {
            let now = projfs::read(project, &f.path)
                .ok()
                .map(|c| c.as_deref().map(hash));
            // Unreadable now: keep it (the user may have replaced it since).
            match now {
                Some(h) => h == f.after_hash || h != f.before_hash,
                None => true,
            }
        });
        if rec.files.is_empty() {
            self.remove(&rec.id);
            return None;
        }
        rec.state = "done".into();
        if self.write_record(&rec).is_err() {
            return None;
        }
        Some(rec)
    }

    /// A checkpoint by id (recovered first if its apply was interrupted).
    pub fn load(&self, project: &Dir, id: &str) -> Result<Record, CheckpointError> {
        if !valid_id(id) {
            return Err(CheckpointError::BadId(id.to_string()));
        }
        let rec = self.read_record(id)?;
        if rec.state == "pending" {
            if rec.pid != std::process::id() && alive(rec.pid) {
                return Err(CheckpointError::Read(
                    id.to_string(),
                    "another process is still writing it".into(),
                ));
            }
            return self
                .reconcile(project, rec)
                .ok_or_else(|| CheckpointError::Unknown(id.to_string()));
        }
        Ok(rec)
    }

    /// Every checkpoint this user recorded (of `chat_id` when given), newest first; interrupted
    /// ones are recovered.
    pub fn list(&self, project: &Dir, chat_id: Option<&str>) -> Vec<Record> {
        let mut ids = self.ids();
        ids.retain(|id| self.ours(id));
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let mut out = Vec::new();
        for id in ids {
            let Ok(rec) = self.load(project, &id) else {
                continue;
            };
            if chat_id.is_none_or(|c| rec.chat_id.as_deref() == Some(c)) {
                out.push(rec);
            }
        }
        out
    }

    fn ids(&self) -> Vec<String> {
        let Ok(entries) = self.dir.entries() else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| valid_id(n))
            .collect()
    }

    /// The content of `file` of `rec` on one side (`None`: the file did not exist there).
    pub fn content(
        &self,
        rec: &Record,
        file: &FileRecord,
        after: bool,
    ) -> Result<Option<Vec<u8>>, CheckpointError> {
        let (h, side) = if after {
            (&file.after_hash, "after")
        } else {
            (&file.before_hash, "before")
        };
        if h.is_none() {
            return Ok(None);
        }
        let bytes =
            crate::store::read_regular(&self.dir, format!("{}/{}.{side}", rec.id, file.blob))
                .map_err(|e| CheckpointError::Read(rec.id.clone(), e.to_string()))?;
        if Some(hash(&bytes)) != *h {
            return Err(CheckpointError::Read(
                rec.id.clone(),
                format!(
                    "the {side} content of {} does not match its hash",
                    file.path
                ),
            ));
        }
        Ok(Some(bytes))
    }

    /// Applies the retention rule to the checkpoints this user recorded: the newest [`KEEP`], none
    /// older than [`MAX_AGE_DAYS`]; `newest` (the one just made) is always kept, and what this
    /// user's bb7 did not create is never counted nor removed.
    pub fn prune(&self, newest: &str) {
        let mut ids = self.ids();
        ids.retain(|id| self.ours(id));
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let cutoff = (chrono::Utc::now() - chrono::Duration::days(MAX_AGE_DAYS))
            .format("%Y%m%d-%H%M%S")
            .to_string();
        // A directory without a record is what a crash while writing the contents leaves; after ten
        // minutes no apply can still be writing it.
        let abandoned = (chrono::Utc::now() - chrono::Duration::minutes(10))
            .format("%Y%m%d-%H%M%S")
            .to_string();
        let mut kept = usize::from(!newest.is_empty());
        for id in &ids {
            if id == newest {
                continue;
            }
            let stamp = id.get(..15).unwrap_or("");
            let has_record = self.dir.exists(format!("{id}/{RECORD}"));
            let old = stamp < cutoff.as_str();
            let orphan = !has_record && stamp < abandoned.as_str();
            if has_record {
                kept += 1;
            }
            if (has_record && kept > KEEP) || old || orphan {
                self.remove(id);
            }
        }
    }
}

/// Writes `changes` into the project with a checkpoint (see the module notes for the order).
/// Changes whose content stays the same are left out; with none left nothing is written and
/// `Ok(None)` returned. On a failed write the record is reconciled (it keeps what was written) and
/// the error returned.
pub fn apply_changes(
    project: &Dir,
    cps: &Checkpoints,
    meta: Meta,
    changes: Vec<Change>,
) -> Result<Option<Record>, CheckpointError> {
    let changes: Vec<Change> = changes
        .into_iter()
        .filter(|c| c.before != c.after)
        .collect();
    if changes.is_empty() {
        return Ok(None);
    }
    let mut rec = cps.begin(Some(project), &meta, &changes)?;
    for c in &changes {
        let written = match &c.after {
            Some(bytes) => crate::store::write_no_follow(project, &c.path, bytes),
            None => projfs::remove(project, &c.path),
        };
        if let Err(e) = written {
            cps.reconcile(project, rec);
            return Err(CheckpointError::Write(c.path.clone(), e));
        }
    }
    rec.state = "done".into();
    cps.write_record(&rec)?;
    sync_later(&cps.dir, &rec.id);
    cps.prune(&rec.id);
    Ok(Some(rec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    #[test]
    fn records_recover_and_prune() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join(".bb7")).unwrap();
        let root = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        let cps = Checkpoints::open_keyed(&root.open_dir(".bb7").unwrap(), b"k".to_vec()).unwrap();
        let meta = || Meta {
            chat_id: Some("c1"),
            kind: "apply_file",
            rollback_of: None,
        };
        let rec = apply_changes(
            &root,
            &cps,
            meta(),
            vec![Change {
                path: "a/b.txt".into(),
                before: None,
                after: Some(b"new\n".to_vec()),
            }],
        )
        .unwrap()
        .unwrap();
        assert_eq!(std::fs::read(t.path().join("a/b.txt")).unwrap(), b"new\n");
        let got = cps.load(&root, &rec.id).unwrap();
        assert_eq!(got.state, "done");
        assert_eq!(
            cps.content(&got, &got.files[0], true).unwrap().unwrap(),
            b"new\n"
        );
        assert_eq!(cps.content(&got, &got.files[0], false).unwrap(), None);
        // An interrupted apply that never reached the project disappears on the next read.
        let pending = cps
            .begin(
                None,
                &meta(),
                &[Change {
                    path: "a/b.txt".into(),
                    before: Some(b"new\n".to_vec()),
                    after: Some(b"newer\n".to_vec()),
                }],
            )
            .unwrap();
        let mut p = pending.clone();
        p.pid = u32::MAX; // a dead process
        cps.write_record(&p).unwrap();
        assert_eq!(cps.list(&root, None).len(), 1);
        let e = cps.load(&root, &pending.id).expect_err("gone");
        assert!(
            matches!(e, CheckpointError::Unknown(ref id) if *id == pending.id),
            "{e}"
        );
        // Retention keeps the newest KEEP.
        for i in 0..KEEP + 3 {
            apply_changes(
                &root,
                &cps,
                meta(),
                vec![Change {
                    path: "x.txt".into(),
                    before: None,
                    after: Some(format!("{i}").into_bytes()),
                }],
            )
            .unwrap();
            let _ = std::fs::remove_file(t.path().join("x.txt"));
        }
        assert_eq!(cps.ids().len(), KEEP);
        let e = cps.load(&root, "../x").expect_err("a bad id");
        assert!(
            matches!(e, CheckpointError::BadId(ref id) if id == "../x"),
            "{e}"
        );
        // Another key (another user, a repository) recognises none of them.
        let theirs =
            Checkpoints::open_keyed(&root.open_dir(".bb7").unwrap(), b"other".to_vec()).unwrap();
        assert!(theirs.list(&root, None).is_empty());
        let id = cps.list(&root, None)[0].id.clone();
        assert!(matches!(
            theirs.load(&root, &id),
            Err(CheckpointError::NotOurs(_))
        ));
    }

    #[test]
    fn directories_without_a_record_go_once_abandoned() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join(".bb7")).unwrap();
        let root = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        let cps = Checkpoints::open_keyed(&root.open_dir(".bb7").unwrap(), b"k".to_vec()).unwrap();
        let stamp = |d: chrono::Duration| {
            let stem = (chrono::Utc::now() - d)
                .format("%Y%m%d-%H%M%S-000000-0000")
                .to_string();
            let tag = cps.id_tag(&stem);
            format!("{stem}-{tag}")
        };
        let (hour_ago, just_now) = (
            stamp(chrono::Duration::hours(1)),
            stamp(chrono::Duration::seconds(5)),
        );
        // Another user's (or a repository's) directory: no valid tag, never removed.
        let foreign = (chrono::Utc::now() - chrono::Duration::hours(1))
            .format("%Y%m%d-%H%M%S-000000-0000-000000000000")
            .to_string();
        for d in [&hour_ago, &just_now, &foreign] {
            std::fs::create_dir(t.path().join(".bb7/checkpoints").join(d)).unwrap();
        }
        apply_changes(
            &root,
            &cps,
            Meta {
                chat_id: None,
                kind: "apply_file",
                rollback_of: None,
            },
            vec![Change {
                path: "y.txt".into(),
                before: None,
                after: Some(b"y".to_vec()),
            }],
        )
        .unwrap();
        let dirs = |d: &str| t.path().join(".bb7/checkpoints").join(d).exists();
        assert!(!dirs(&hour_ago), "abandoned: removed");
        assert!(dirs(&just_now), "may still be being written: kept");
        assert!(dirs(&foreign), "not ours: kept");
        assert_eq!(cps.list(&root, None).len(), 1);
    }
}
