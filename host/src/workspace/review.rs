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
        let rebased = self.rebase_output(path)?;
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
