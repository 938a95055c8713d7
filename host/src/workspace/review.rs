//! Per-hunk review and checkpoints for the active chat (AGENT-PROTOCOL.md §2–3), next to
//! [`Workspace::apply_file`]: the hunks of an output, applying or rejecting some of them and
//! settling the chat as a whole-file apply or reject does, and the checkpoints those writes leave
//! (list, diff3, rollback). [`crate::chat::review`] does the work on the project and chat
//! directories; these methods pick them, check the project and keep the active chat in step.

use cap_std::fs::Dir;

use super::files::NEEDS_PROJECT;
use super::{Workspace, WorkspaceError};
use crate::chat::checkpoints::Record;
use crate::chat::paths::{self, ClientPath};
use crate::chat::review::{self, Applied, Diff3, Rejected, RolledBack};

/// What `get_hunks` computes from, taken under the session lock so the diff can run off it.
pub struct HunkSource {
    /// The project root.
    pub project: Dir,
    /// The active chat's directory.
    pub chat_dir: Dir,
    /// Whether the output was first carried onto edits made to the local file since it was made.
    pub rebased: bool,
}

impl Workspace {
    /// The project directory, or the error a review request without a project gets.
    fn review_project(&self) -> Result<&Dir, WorkspaceError> {
        Ok(self.project_or(NEEDS_PROJECT)?.dir())
    }

    /// Before `get_hunks` of project file `path`: the output is carried onto edits made to the file
    /// since it was made (see [`Self::rebase_output`]), then the handles the diff needs are taken.
    pub fn hunk_source(&mut self, path: &str) -> Result<HunkSource, WorkspaceError> {
        self.review_project()?;
        // The rebase rewrites the output: not while a reply publishes its own.
        let rebased = {
            let _outputs = crate::store::publish::exclusive();
            self.rebase_output(path)?
        };
        let read_err = |source| WorkspaceError::Read {
            path: path.to_string(),
            source,
        };
        let chat_dir = self.active()?.dir.dir().try_clone();
        let project = self.review_project()?.try_clone();
        Ok(HunkSource {
            project: project.map_err(read_err)?,
            chat_dir: chat_dir.map_err(read_err)?,
            rebased,
        })
    }

    /// `apply_hunks`: writes project file `path` with hunks `ids` of its output applied (checked
    /// against `base_hash`), with a checkpoint. When that took the whole output, the chat settles
    /// as after [`Self::apply_file`]; when part of it, the snapshot becomes the local file and the
    /// output keeps the rest.
    pub fn apply_hunks(
        &mut self,
        path: &str,
        ids: &[String],
        base_hash: &str,
    ) -> Result<Applied, WorkspaceError> {
        let cps = self.checkpoints()?;
        // From reading the output to settling the chat, no reply publishes over it.
        let _outputs = crate::store::publish::exclusive();
        let base = self.output_base(path)?;
        let a = self.active()?;
        let applied = review::apply_hunks(
            self.review_project()?,
            a.dir.dir(),
            &cps,
            &a.id,
            path,
            ids,
            base_hash,
            base.as_deref(),
        )?;
        #[cfg(test)]
        tests::between_write_and_settle();
        if applied.checkpoint.is_some() {
            if applied.remaining == 0 {
                // Everything is taken: as apply_file does, the output goes and the snapshot follows.
                self.settle_applied(path, &applied.content)?;
            } else {
                // Part of it: the snapshot becomes what the user has now; the output keeps the rest.
                self.record_partial_apply(path, &applied.content)?;
            }
        }
        Ok(applied)
    }

    /// `reject_hunks`: reverts hunks `ids` in the output of project file `path`; when none is left
    /// the output is gone and that is recorded as `output_delete` records it.
    pub fn reject_hunks(&mut self, path: &str, ids: &[String]) -> Result<Rejected, WorkspaceError> {
        let _outputs = crate::store::publish::exclusive();
        let a = self.active()?;
        let before = crate::chat::snapshots::read_output(a.dir.dir(), path);
        let rejected = review::reject_hunks(self.review_project()?, a.dir.dir(), path, ids)?;
        if rejected.output.is_none() {
            self.record_rejected(path, before.as_deref())?;
        }
        Ok(rejected)
    }

    /// `checkpoint_list`: this user's checkpoints, newest first (of chat `chat_id` only, if given).
    pub fn checkpoint_list(&self, chat_id: Option<&str>) -> Result<Vec<Record>, WorkspaceError> {
        let cps = self.checkpoints()?;
        Ok(cps.list(self.review_project()?, chat_id))
    }

    /// `checkpoint_diff3`: base, current and proposed content of file `path` (a client path; it
    /// must be in the project) in checkpoint `id`.
    pub fn checkpoint_diff3(&self, id: &str, path: &str) -> Result<Diff3, WorkspaceError> {
        let root = self.project.as_ref().map(|p| p.root());
        let path = match paths::classify(path, root)? {
            ClientPath::Internal(p) => p,
            ClientPath::External(p) => return Err(WorkspaceError::OutsideProject(p)),
        };
        let cps = self.checkpoints()?;
        Ok(review::diff3(self.review_project()?, &cps, id, &path)?)
    }

    /// `checkpoint_rollback`: restores checkpoint `id` (`mode`: `hard_all`, or `scoped_selected`
    /// with `hunk_ids`), with a checkpoint of its own.
    pub fn checkpoint_rollback(
        &self,
        id: &str,
        mode: &str,
        hunk_ids: &[String],
    ) -> Result<RolledBack, WorkspaceError> {
        let cps = self.checkpoints()?;
        Ok(review::rollback(
            self.review_project()?,
            &cps,
            id,
            mode,
            hunk_ids,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::mpsc;

    use super::*;
    use crate::store::publish::{Outputs, waiting};

    thread_local! {
        static BETWEEN: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
    }

    /// Runs what the test set to run between `apply_hunks`' write of the local file and its
    /// settling of the chat.
    pub(super) fn between_write_and_settle() {
        if let Some(f) = BETWEEN.with(|b| b.borrow_mut().take()) {
            f();
        }
    }

    /// The review minor of issue 30: a reply's commit landing between an `apply_hunks`' write and
    /// its settling of the chat was lost: the settle (all hunks taken) removed the output the
    /// reply had just published, with the reply recorded as having written it. The review and
    /// the publish are exclusive now: the reply's commit, started exactly there, waits, and
    /// publishes after the settle (the user's applied file and the reply's new output both stay).
    #[test]
    fn a_reply_s_commit_during_an_apply_hunks_is_not_lost() {
        let t = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(t.path().join(".bb7/chats")).expect("mkdir");
        let mut ws = Workspace::new();
        ws.init(Some(t.path())).expect("init");
        ws.new_chat(false, Some("c"), Some("m/x"))
            .expect("chat_new");
        std::fs::write(t.path().join("a.txt"), "one\ntwo\n").expect("local");
        ws.add_context_file("a.txt", "one\ntwo\n", false)
            .expect("context_add");
        let chat_dir = ws
            .active()
            .expect("active")
            .dir
            .dir()
            .try_clone()
            .expect("dir");
        crate::store::write_atomic(&chat_dir, "output/a.txt", b"one\nTWO\n").expect("output");
        let hunks = review::get_hunks(ws.review_project().expect("project"), &chat_dir, "a.txt")
            .expect("hunks");
        let ids: Vec<String> = hunks.hunks.iter().map(|h| h.id.clone()).collect();
        // The reply's commit (the file it made from the output), started between the write and
        // the settle; the settle goes on once it waits for the review or is done.
        let reply = Outputs::prepare(
            &chat_dir,
            [("output/a.txt".to_string(), &b"one\nTWO\nthree\n"[..])],
        )
        .expect("prepare");
        let (tx, rx) = mpsc::channel();
        let commit = std::sync::Arc::new(std::sync::Mutex::new(None));
        let handle = std::sync::Arc::clone(&commit);
        BETWEEN.with(|b| {
            *b.borrow_mut() = Some(Box::new(move || {
                let h = std::thread::spawn(move || {
                    waiting::tell(tx.clone());
                    let r = reply.publish();
                    let _ = tx.send("done");
                    r
                });
                // Waiting for the review, or done: either way the commit had its chance.
                let _ = rx.recv();
                *handle.lock().expect("handle") = Some(h);
            }));
        });
        let applied = ws
            .apply_hunks("a.txt", &ids, &hunks.base_hash)
            .expect("apply_hunks");
        assert_eq!(applied.remaining, 0);
        let h = commit
            .lock()
            .expect("handle")
            .take()
            .expect("the commit ran");
        h.join().expect("commit thread").expect("publish");
        assert_eq!(
            std::fs::read(t.path().join("a.txt")).expect("local"),
            b"one\nTWO\n",
            "the user's applied hunk"
        );
        let id = ws.active().expect("active").id.clone();
        let output = t.path().join(".bb7/chats").join(id).join("output/a.txt");
        assert_eq!(
            std::fs::read(output).expect("the reply's output is there"),
            b"one\nTWO\nthree\n"
        );
    }
}
