//! Publishing a reply's output files, alone or together with the chat record that names them.
//!
//! [`Outputs::prepare`] writes every file under a temporary name (a full disk shows there, before
//! anything changed). [`Outputs::publish`] then fsyncs them, renames them into place and fsyncs
//! their directories; [`Outputs::publish_with_record`] does the same while the record (chat.json)
//! is written and fsynced at the same time, and renames the record only once the outputs are in
//! place and durable: on disk, the outputs always come before the record naming them. Either is
//! all or nothing: on any failure the temporaries are removed and the outputs already renamed get
//! their previous content back (or are removed when they had none), so nothing names a file that
//! is not there and no file is left that nothing will name.

use std::io;
use std::sync::{Mutex, MutexGuard, TryLockError};

use cap_std::fs::Dir;

use super::{Durability, Prepared};

/// Why publishing failed (nothing of it stays).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// An output file could not be written, made durable or put in place.
    #[error("Cannot write the output file {path}: {source}")]
    Output {
        /// The file's path inside the chat directory (`output/…`).
        path: String,
        /// What the file system said.
        source: io::Error,
    },
    /// The record naming the outputs could not be written, made durable or put in place.
    #[error("Cannot save {name} with the reply's files: {source}")]
    Record {
        /// The record's file name (`chat.json`).
        name: String,
        /// What the file system said.
        source: io::Error,
    },
}

/// Holds every chat's outputs still for as long as it is kept: a reply's publish (its renames,
/// and their rollback) and a review's read-change-write of an output (`apply_hunks`,
/// `reject_hunks`, the rebase before `get_hunks`) never interleave, so neither writes over what
/// the other did in between (a review that read the output before a reply's commit wrote its
/// own over the reply's, or removed it). One lock for the process: these are short.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static OUTPUTS: Mutex<()> = Mutex::new(());
    match OUTPUTS.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => {
            #[cfg(test)]
            waiting::announce();
            OUTPUTS.lock().unwrap_or_else(|e| e.into_inner())
        }
    }
}

/// Tests only: a thread told to can say when it waits for [`exclusive`], so a test can stop
/// another operation exactly while this one waits (no timing).
#[cfg(test)]
pub(crate) mod waiting {
    use std::cell::RefCell;
    use std::sync::mpsc::Sender;

    thread_local! {
        static TELL: RefCell<Option<Sender<&'static str>>> = const { RefCell::new(None) };
    }

    /// This thread sends `"waiting"` on `tx` when it has to wait for the lock.
    pub(crate) fn tell(tx: Sender<&'static str>) {
        TELL.with(|t| *t.borrow_mut() = Some(tx));
    }

    pub(super) fn announce() {
        TELL.with(|t| {
            if let Some(tx) = t.borrow().as_ref() {
                let _ = tx.send("waiting");
            }
        });
    }
}

/// One output file written under a temporary name.
struct Output {
    /// Its path inside the chat directory.
    rel: String,
    /// The parent directory part of `rel` (`output`, `output/src`): fsynced once per commit.
    parent: String,
    file: Prepared,
}

/// A reply's output files, written but not yet durable nor in place. Dropped unpublished, their
/// temporaries are removed.
pub struct Outputs {
    chat_dir: Dir,
    files: Vec<Output>,
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.files.iter().map(|o| &o.rel))
            .finish()
    }
}

impl Outputs {
    /// Writes each `(rel, bytes)` (a path inside `chat_dir`) under a temporary name next to it,
    /// not fsynced: all are written before any waits for the disk. Missing parent directories
    /// are created.
    pub fn prepare<'a>(
        chat_dir: &Dir,
        files: impl IntoIterator<Item = (String, &'a [u8])>,
    ) -> Result<Outputs, PublishError> {
        let mut out = Vec::new();
        for (rel, bytes) in files {
            let written = super::parent_and_name(chat_dir, std::path::Path::new(&rel)).and_then(
                |(dir, name)| Prepared::write(dir, &name, bytes, None, Durability::Durable, false),
            );
            let file = written.map_err(|source| PublishError::Output {
                path: rel.clone(),
                source,
            })?;
            let parent = rel.rsplit_once('/').map_or("", |(p, _)| p).to_string();
            out.push(Output { rel, parent, file });
        }
        let chat_dir = chat_dir
            .try_clone()
            .map_err(|source| PublishError::Output {
                path: out.first().map_or_else(String::new, |o| o.rel.clone()),
                source,
            })?;
        Ok(Outputs {
            chat_dir,
            files: out,
        })
    }

    /// Makes the files durable and puts them in place, all or nothing.
    pub fn publish(mut self) -> Result<(), PublishError> {
        for o in &mut self.files {
            o.file.sync_file().map_err(|source| PublishError::Output {
                path: o.rel.clone(),
                source,
            })?;
        }
        // The last file's rename has nothing after it that could fail: it needs no undo.
        let keep = self.files.len().saturating_sub(1);
        let _outputs = exclusive();
        self.rename_all(keep)?;
        self.sync_parents();
        Ok(())
    }

    /// Publishes the files and, after them, `bytes` as `name` in `record_dir` (the chat's
    /// chat.json, which names them): the record is written while the files' fsyncs run, fsynced
    /// at the same time as they are, and renamed (then its directory fsynced) only once every
    /// file is in place and its directory fsynced. On any failure nothing of it stays: the
    /// record's temporary is removed, and the files already renamed are rolled back.
    pub fn publish_with_record(
        mut self,
        record_dir: &Dir,
        name: &str,
        bytes: &[u8],
    ) -> Result<(), PublishError> {
        let record_err = |source| PublishError::Record {
            name: name.to_string(),
            source,
        };
        let mut record = record_dir
            .try_clone()
            .and_then(|d| Prepared::write(d, name, bytes, None, Durability::Durable, false))
            .map_err(record_err)?;
        let files = &mut self.files;
        let (outputs, synced) = super::both(
            move || {
                for o in files.iter_mut() {
                    o.file.sync_file().map_err(|source| PublishError::Output {
                        path: o.rel.clone(),
                        source,
                    })?;
                }
                Ok(())
            },
            || record.sync_file(),
        );
        outputs?;
        synced.map_err(record_err)?;
        let keep = self.files.len();
        let _outputs = exclusive();
        let renamed = self.rename_all(keep)?;
        self.sync_parents();
        if let Err(e) = record.rename_into_place() {
            let e = renamed.roll_back(&self.chat_dir, e);
            return Err(record_err(e));
        }
        super::sync_dir(record_dir);
        Ok(())
    }

    /// Renames every file into place, keeping the previous content of the first `keep` to undo
    /// their renames; on a failure, the ones renamed are rolled back.
    fn rename_all(&mut self, keep: usize) -> Result<Renamed, PublishError> {
        let mut before = Vec::new();
        for (i, o) in self.files.iter().enumerate() {
            let prev = if i < keep {
                match super::read_regular(&self.chat_dir, &o.rel) {
                    Ok(b) => Some(b),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    // Unreadable (not a regular file, too large, an I/O error): nothing is
                    // renamed over what could not be given back.
                    Err(source) => {
                        return Err(PublishError::Output {
                            path: o.rel.clone(),
                            source,
                        });
                    }
                }
            } else {
                None
            };
            before.push(prev);
        }
        let mut renamed = Renamed(Vec::new());
        for (o, prev) in self.files.iter_mut().zip(before) {
            if let Err(source) = o.file.rename_into_place() {
                let source = renamed.roll_back(&self.chat_dir, source);
                return Err(PublishError::Output {
                    path: o.rel.clone(),
                    source,
                });
            }
            renamed.0.push((o.rel.clone(), prev));
        }
        Ok(renamed)
    }

    /// fsyncs each directory a file was renamed in, once (best effort, as [`super::sync_dir`]).
    fn sync_parents(&self) {
        let mut done: Vec<&str> = Vec::new();
        for o in &self.files {
            if !done.contains(&o.parent.as_str()) {
                done.push(&o.parent);
                super::sync_dir(&o.file.dir);
            }
        }
    }
}

/// The files renamed into place, each with its previous content (`None`: there was none, or
/// it is not kept because nothing after its rename can fail).
struct Renamed(Vec<(String, Option<Vec<u8>>)>);

impl Renamed {
    /// Gives every renamed file its previous content back, last first (or removes it when it had
    /// none), then fsyncs the directories it touched. This runs on a failure, `why`, already being
    /// reported: what could not be undone is added to it, naming the file.
    fn roll_back(&self, chat_dir: &Dir, why: io::Error) -> io::Error {
        let mut failed = Vec::new();
        for (rel, before) in self.0.iter().rev() {
            let undone = match before {
                Some(b) => super::write_atomic(chat_dir, rel, b),
                None => super::remove_file_if_exists(chat_dir, rel),
            };
            if let Err(e) = undone {
                failed.push(format!(
                    "{rel} could not be given back its previous state: {e}"
                ));
            }
        }
        let mut parents: Vec<&str> = Vec::new();
        for (rel, _) in &self.0 {
            let parent = rel.rsplit_once('/').map_or("", |(p, _)| p);
            if !parents.contains(&parent) {
                parents.push(parent);
                if let Ok(d) = if parent.is_empty() {
                    chat_dir.try_clone()
                } else {
                    chat_dir.open_dir(parent)
                } {
                    super::sync_dir(&d);
                }
            }
        }
        if failed.is_empty() {
            why
        } else {
            io::Error::new(why.kind(), format!("{why}; and {}", failed.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::faults::{self, Op};

    fn dir() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), cap_std::ambient_authority()).unwrap();
        (t, d)
    }

    fn names(p: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    fn outputs(d: &Dir, files: &[(&str, &[u8])]) -> Outputs {
        Outputs::prepare(d, files.iter().map(|(r, b)| (r.to_string(), *b))).unwrap()
    }

    /// The outputs and the record are published together: every file in place, the record
    /// after them, no temporary left; fsyncs: each file, the record, `output/` once (two files
    /// share it), the chat directory once.
    #[test]
    fn outputs_and_record_are_published_together() {
        let (t, d) = dir();
        d.write("chat.json", b"old").unwrap();
        let o = outputs(&d, &[("output/a.txt", b"a"), ("output/b.txt", b"b")]);
        let before = crate::store::fsyncs();
        o.publish_with_record(&d, "chat.json", b"new").unwrap();
        assert_eq!(crate::store::fsyncs() - before, 5);
        assert_eq!(std::fs::read(t.path().join("chat.json")).unwrap(), b"new");
        assert_eq!(names(&t.path().join("output")), ["a.txt", "b.txt"]);
        assert_eq!(names(t.path()), ["chat.json", "output"]);
    }

    /// A failed fsync or rename of an output, or of the record, leaves nothing of the publish:
    /// the record as it was, every output as it was (a previous one restored, a new one gone),
    /// and no temporary file.
    #[test]
    fn any_failure_leaves_the_outputs_and_the_record_as_they_were() {
        for (op, name) in [
            (Op::Fsync, "b.txt"),
            (Op::Rename, "b.txt"),
            (Op::Fsync, "chat.json"),
            (Op::Rename, "chat.json"),
        ] {
            let (t, d) = dir();
            d.write("chat.json", b"old").unwrap();
            d.create_dir_all("output").unwrap();
            d.write("output/a.txt", b"a before").unwrap();
            let o = outputs(&d, &[("output/a.txt", b"a after"), ("output/b.txt", b"b")]);
            faults::fail_once(op, name);
            let e = o
                .publish_with_record(&d, "chat.json", b"new")
                .expect_err("fails");
            let want = if name == "chat.json" {
                "Cannot save chat.json with the reply's files"
            } else {
                "Cannot write the output file output/b.txt"
            };
            assert!(e.to_string().starts_with(want), "{op:?} {name}: {e}");
            assert_eq!(std::fs::read(t.path().join("chat.json")).unwrap(), b"old");
            assert_eq!(
                std::fs::read(t.path().join("output/a.txt")).unwrap(),
                b"a before",
                "{op:?} {name}"
            );
            assert_eq!(names(&t.path().join("output")), ["a.txt"], "{op:?} {name}");
            assert_eq!(names(t.path()), ["chat.json", "output"], "{op:?} {name}");
        }
    }

    /// An existing output that cannot be read for the rollback (here a FIFO in its place) stops
    /// the publish before anything is renamed: nothing would give it back.
    #[test]
    fn an_output_that_cannot_be_kept_for_the_rollback_is_not_replaced() {
        let (t, d) = dir();
        d.write("chat.json", b"old").unwrap();
        d.create_dir_all("output").unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            t.path().join("output/a.txt"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let o = outputs(&d, &[("output/b.txt", b"b"), ("output/a.txt", b"a")]);
        let e = o
            .publish_with_record(&d, "chat.json", b"new")
            .expect_err("fails");
        assert!(
            e.to_string()
                .starts_with("Cannot write the output file output/a.txt"),
            "{e}"
        );
        assert_eq!(std::fs::read(t.path().join("chat.json")).unwrap(), b"old");
        assert!(!t.path().join("output/b.txt").exists(), "nothing renamed");
        let ft = std::fs::symlink_metadata(t.path().join("output/a.txt")).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&ft.file_type()));
        assert_eq!(names(&t.path().join("output")), ["a.txt"]);
    }

    /// Outputs alone: a failed rename of the second file rolls the first back.
    #[test]
    fn a_failed_rename_rolls_the_earlier_outputs_back() {
        let (t, d) = dir();
        let o = outputs(&d, &[("output/a.txt", b"a"), ("output/src/b.txt", b"b")]);
        faults::fail_once(Op::Rename, "b.txt");
        o.publish().expect_err("fails");
        assert!(names(&t.path().join("output")) == ["src"]);
        assert!(names(&t.path().join("output/src")).is_empty());
    }
}
