//! The active chat's files: its context, the model's outputs and applying them to the project with
//! a checkpoint. Each method resolves the client's path for the active chat, calls the chat domain
//! ([`crate::chat::context`], [`crate::chat::apply`], [`crate::chat::statuses`]) and saves the chat.

use cap_std::fs::Dir;

use super::{Workspace, WorkspaceError};
use crate::chat::ChatError;
use crate::chat::apply::{self, Merged};
use crate::chat::checkpoints::Checkpoints;
use crate::chat::model::{Chat, EventKind};
use crate::chat::paths::{self, ClientPath};
use crate::chat::statuses::{self, FileState};
use crate::chat::{context, snapshots};
use crate::store::project::ProjectDir;

/// What needs a project, for [`WorkspaceError::NoProject`].
pub(super) const NEEDS_PROJECT: &str = "checkpoints and hunks need a project with .bb7/";

impl Workspace {
    /// A client path classified for the active chat.
    pub fn active_path(&self, path: &str) -> Result<ClientPath, WorkspaceError> {
        self.classify(path, self.active()?.global)
    }

    /// A project path of the active chat (only project files have outputs and checkpoints).
    pub fn active_internal_path(&self, path: &str) -> Result<String, WorkspaceError> {
        match self.active_path(path)? {
            ClientPath::Internal(p) => Ok(p),
            ClientPath::External(p) => Err(WorkspaceError::ExternalHasNoOutput(p)),
        }
    }

    /// Applies `f` to the active chat and its directory, then saves the chat.
    pub fn change_active<T>(
        &mut self,
        f: impl FnOnce(&mut Chat, &Dir) -> Result<T, ChatError>,
    ) -> Result<T, WorkspaceError> {
        let a = self.active_mut()?;
        let out = f(&mut a.chat, a.dir.dir())?;
        self.save_active()?;
        Ok(out)
    }

    /// `context_add`: adds whole file `path` with `content`.
    pub fn add_context_file(
        &mut self,
        path: &str,
        content: &str,
        readonly: bool,
    ) -> Result<(), WorkspaceError> {
        let cp = self.active_path(path)?;
        let scope = self.external_scope(self.active()?.global);
        self.change_active(|chat, dir| {
            context::add_file(chat, dir, &scope, &cp, content.as_bytes(), readonly)
        })?;
        // Once the file is in (an add refused as a duplicate or unwritable sets up nothing).
        self.prewarm_for_context(&cp, readonly);
        Ok(())
    }

    /// `context_add_section`: adds lines `start..=end` of `path` with `content`.
    pub fn add_context_section(
        &mut self,
        path: &str,
        content: &str,
        lines: (u64, u64),
    ) -> Result<(), WorkspaceError> {
        let cp = self.active_path(path)?;
        let scope = self.external_scope(self.active()?.global);
        self.change_active(|chat, dir| {
            context::add_section(chat, dir, &scope, &cp, content.as_bytes(), lines)
        })
    }

    /// `context_update`: replaces the snapshot of `path` with `content`.
    pub fn update_context_file(&mut self, path: &str, content: &str) -> Result<(), WorkspaceError> {
        let cp = self.active_path(path)?;
        self.change_active(|chat, dir| context::update(chat, dir, &cp, content.as_bytes()))
    }

    /// `context_remove`: removes whole file `path` from the context.
    pub fn remove_context_file(&mut self, path: &str) -> Result<(), WorkspaceError> {
        let cp = self.active_path(path)?;
        self.change_active(|chat, _| context::remove_file(chat, &cp))
    }

    /// `context_remove_section`: removes a section from the context.
    pub fn remove_context_section(
        &mut self,
        path: &str,
        lines: (u64, u64),
    ) -> Result<(), WorkspaceError> {
        let cp = self.active_path(path)?;
        self.change_active(|chat, _| context::remove_section(chat, &cp, lines))
    }

    /// `context_set_readonly`.
    pub fn set_context_readonly(
        &mut self,
        path: &str,
        readonly: bool,
    ) -> Result<(), WorkspaceError> {
        let cp = self.active_path(path)?;
        self.change_active(|chat, dir| context::set_readonly(chat, dir, &cp, readonly))
    }

    /// `sync_context`: a file in context whose local copy changed takes it as its snapshot.
    pub fn sync_context_file(&mut self, path: &str) -> Result<(), WorkspaceError> {
        let cp = self.active_path(path)?;
        let a = self.active()?;
        if context::find_file(&a.chat, &cp).is_none() {
            return Ok(());
        }
        let local = self.read_local(&cp, a.global).ok();
        self.change_active(|chat, dir| context::sync(chat, dir, &cp, local))
    }

    /// The open project, or the error a request that needs one gets.
    pub fn project_or(&self, what: &'static str) -> Result<&ProjectDir, WorkspaceError> {
        self.project.as_ref().ok_or(WorkspaceError::NoProject(what))
    }

    /// `.bb7/checkpoints/`, opened through the `.bb7/` handle held since `init`.
    pub fn checkpoints(&self) -> Result<Checkpoints, WorkspaceError> {
        let p = self.project_or(NEEDS_PROJECT)?;
        Ok(Checkpoints::open(p.state())?)
    }

    /// Writes `content` to project file `path` with a checkpoint of `kind`. Returns the checkpoint
    /// id (none when the file already had that content).
    fn write_checkpointed(
        &self,
        kind: &str,
        path: &str,
        content: &[u8],
    ) -> Result<Option<String>, WorkspaceError> {
        let p = self.project_or("global chats cannot apply files")?;
        let cps = self.checkpoints()?;
        let chat_id = self.active().ok().map(|a| a.id.clone());
        let rec = crate::chat::review::checkpointed_write(
            p.dir(),
            &cps,
            chat_id.as_deref(),
            kind,
            &[(path, content)],
        )?;
        Ok(rec.map(|r| r.id))
    }

    /// Writes `content` (the output of `source`) to project file `dest` with `write` and settles the
    /// active chat (see [`apply::Staged::settle`]). All or nothing up to the project write; a
    /// failure after it is reported as exactly that ([`ChatError::HalfApplied`]).
    fn apply_content<T>(
        &mut self,
        source: &str,
        dest: &str,
        content: &[u8],
        kind: EventKind,
        write: impl FnOnce(&Workspace) -> Result<T, WorkspaceError>,
    ) -> Result<T, WorkspaceError> {
        let a = self.active()?;
        let staged = apply::stage(&a.chat, a.dir.dir(), dest, content)?;
        let written = write(self)?;
        let settled = (|| -> Result<(), WorkspaceError> {
            let a = self.active_mut()?;
            let removed = staged.settle(&mut a.chat, a.dir.dir(), source, kind)?;
            self.save_active()?;
            Ok(removed.map_err(ChatError::io("removing the output failed"))?)
        })();
        settled.map_err(|reason| WorkspaceError::HalfApplied {
            path: dest.to_string(),
            reason: Box::new(reason),
        })?;
        Ok(written)
    }

    /// The output of project file `path` in the active chat.
    fn output_to_apply(&self, path: &str) -> Result<Vec<u8>, WorkspaceError> {
        snapshots::read_output(self.active()?.dir.dir(), path)
            .ok_or_else(|| ChatError::NoOutput(path.to_string()).into())
    }

    /// `apply_file`: writes the output of `path` to the project. Returns the content and the
    /// checkpoint id.
    pub fn apply_file(&mut self, path: &str) -> Result<(Vec<u8>, Option<String>), WorkspaceError> {
        // From reading the output to settling the chat, no reply publishes over it.
        let _outputs = crate::store::publish::exclusive();
        let out = self.output_to_apply(path)?;
        let cp = self.apply_content(path, path, &out, EventKind::UserApplyFile, |s| {
            s.write_checkpointed("apply_file", path, &out)
        })?;
        Ok((out, cp))
    }

    /// `apply_file_as`: writes the output of `path` to project file `destination`, which joins the
    /// context (it is now the user's file); the source's output is used up, and an output the
    /// destination has of its own stays for the user to review.
    pub fn apply_file_as(
        &mut self,
        path: &str,
        destination: &str,
    ) -> Result<(Vec<u8>, Option<String>), WorkspaceError> {
        let root = self
            .project_or("global chats cannot apply files")?
            .root()
            .to_path_buf();
        let dest = match paths::classify(destination, Some(&root))? {
            ClientPath::Internal(d) => d,
            ClientPath::External(d) => {
                return Err(WorkspaceError::DestinationOutsideProject(d));
            }
        };
        let _outputs = crate::store::publish::exclusive();
        let out = self.output_to_apply(path)?;
        let cp = self.apply_content(path, &dest, &out, EventKind::UserSaveAs, |s| {
            s.write_checkpointed("apply_file_as", &dest, &out)
        })?;
        Ok((out, cp))
    }

    /// After a per-hunk apply took the whole output of `path` (the project file is now `content`):
    /// the snapshot follows, the output goes, as [`Self::apply_file`] does.
    pub fn settle_applied(&mut self, path: &str, content: &[u8]) -> Result<(), WorkspaceError> {
        self.apply_content(path, path, content, EventKind::UserApplyFile, |_| Ok(()))
    }

    /// After a per-hunk apply took part of the output of `path` (now `content` locally).
    pub fn record_partial_apply(
        &mut self,
        path: &str,
        content: &[u8],
    ) -> Result<(), WorkspaceError> {
        self.change_active(|chat, dir| apply::record_partial_apply(chat, dir, path, content))
    }

    /// After the last hunks of `path` were rejected (its output, `before`, is gone).
    pub fn record_rejected(
        &mut self,
        path: &str,
        before: Option<&[u8]>,
    ) -> Result<(), WorkspaceError> {
        self.change_active(|chat, _| {
            apply::record_rejected(chat, path, before);
            Ok(())
        })
    }

    /// `output_delete`: rejects the output of `path`.
    pub fn reject_output(&mut self, path: &str) -> Result<(), WorkspaceError> {
        let _outputs = crate::store::publish::exclusive();
        self.change_active(|chat, dir| apply::reject_output(chat, dir, path))
    }

    /// `diff_local_done`: what the user took from the output of `path` in a diff.
    pub fn diff_done(&mut self, path: &str) -> Result<Merged, WorkspaceError> {
        let _outputs = crate::store::publish::exclusive();
        let local = self
            .read_local(&ClientPath::Internal(path.to_string()), false)
            .ok();
        let a = self.active_mut()?;
        let merged = apply::diff_done(&mut a.chat, a.dir.dir(), path, local)?;
        if merged != Merged::None {
            self.save_active()?;
        }
        Ok(merged)
    }

    /// What the output of project file `path` was made from: the snapshot of its whole-file entry
    /// in the active chat's context (`None`: not in context, e.g. a file the model created).
    pub fn output_base(&self, path: &str) -> Result<Option<Vec<u8>>, WorkspaceError> {
        let a = self.active()?;
        Ok(a.chat
            .context_files
            .iter()
            .find(|cf| cf.path == path && !cf.is_section() && !cf.external)
            .and_then(|cf| snapshots::read(a.dir.dir(), cf).ok()))
    }

    /// Before a review of `path`: when the local file changed since the output was made from its
    /// snapshot, the model's changes are carried onto the local file (the output is rewritten) and
    /// the snapshot becomes the local file, so the hunks never undo that change. Whether it did.
    pub fn rebase_output(&mut self, path: &str) -> Result<bool, WorkspaceError> {
        let Some(base) = self.output_base(path)? else {
            return Ok(false);
        };
        let project = self.project_or(NEEDS_PROJECT)?;
        let a = self.active()?;
        let Some(r) = crate::chat::review::rebase(project.dir(), a.dir.dir(), path, &base)? else {
            return Ok(false);
        };
        // The output first: should the snapshot then fail to follow, the next review finds the
        // changes overlapping and refuses, rather than undoing anything.
        let rel = paths::output_rel(path);
        crate::store::write_atomic(a.dir.dir(), &rel, &r.output)
            .map_err(|source| WorkspaceError::Write { what: rel, source })?;
        let cp = ClientPath::Internal(path.to_string());
        self.change_active(|chat, dir| context::sync(chat, dir, &cp, Some(r.local)))?;
        Ok(true)
    }

    /// `get_file_statuses`: every file the active chat knows, with token counts.
    pub fn file_states(&mut self) -> Result<Vec<FileState>, WorkspaceError> {
        let a = self.active.as_ref().ok_or(WorkspaceError::NoActiveChat)?;
        let project = self.project.as_ref();
        let tokens = &mut self.tokens;
        Ok(statuses::file_states(
            &a.chat,
            a.dir.dir(),
            &mut |id, text| tokens.count_file(id, text),
            &|path| project.is_some_and(|p| p.exists(path)),
        ))
    }
}
