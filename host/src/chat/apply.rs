//! Settling a chat after the model's output reaches the project: a whole apply (or save-as), a
//! partial one (per hunk, or merged by hand in a diff), a rejected output. Each keeps the snapshot,
//! the context, the output and the recorded events in step; the caller writes the project file and
//! saves the chat.

use std::io;

use cap_std::fs::Dir;

use super::error::ChatError;
use super::model::{Chat, ContextEvent, ContextFile, EventKind};
use super::paths;
use super::snapshots;
use bb7_tool_logic::file_id::file_id;

/// An apply of `content` to project file `dest`, staged before the project is written: the new
/// snapshot sits under a temporary name, so a chat directory that cannot take it fails the apply
/// before the project changes.
pub struct Staged {
    pending: crate::store::Prepared,
    file: ContextFile,
    existing: Option<usize>,
}

/// Stages applying `content` to `dest` in `chat` (whose directory is `dir`).
pub fn stage(chat: &Chat, dir: &Dir, dest: &str, content: &[u8]) -> Result<Staged, ChatError> {
    let version = file_id(dest, content);
    let existing = whole_file(chat, dest);
    let file = match existing {
        Some(i) => ContextFile {
            version,
            ..chat.context_files[i].clone()
        },
        None => ContextFile {
            path: dest.to_string(),
            version,
            ..Default::default()
        },
    };
    let rel = snapshots::location(&file)?;
    let pending = crate::store::prepare_atomic(dir, &rel, content)
        .map_err(ChatError::io("Failed to update snapshot"))?;
    Ok(Staged {
        pending,
        file,
        existing,
    })
}

impl Staged {
    /// After the project file was written: the snapshot of `dest` follows (joining the context,
    /// writable, when it was not there), `kind` is recorded (with `source` as the original path of
    /// a save-as) and the output of `source` goes. An error here is the reason of the workspace's
    /// half-applied error (the project file was already written); the returned `Err` inside `Ok` is
    /// a failed output removal, to report after the chat is saved.
    pub fn settle(
        self,
        chat: &mut Chat,
        dir: &Dir,
        source: &str,
        kind: EventKind,
    ) -> Result<io::Result<()>, ChatError> {
        self.pending
            .commit()
            .map_err(ChatError::io("updating the snapshot failed"))?;
        let mut ev = ContextEvent::new(kind, &self.file.path).version(&self.file.version);
        let prev = match self.existing {
            Some(i) => Some(std::mem::replace(&mut chat.context_files[i], self.file).version),
            None => {
                chat.context_files.push(self.file);
                None
            }
        };
        ev = ev.prev(prev.as_deref());
        if kind == EventKind::UserSaveAs {
            ev.original_path = Some(source.to_string());
        }
        chat.record_event(ev);
        Ok(crate::store::remove_file_if_exists(
            dir,
            paths::output_rel(source),
        ))
    }
}

/// The index of the whole-file context entry for `path`.
fn whole_file(chat: &Chat, path: &str) -> Option<usize> {
    chat.context_files
        .iter()
        .position(|c| !c.is_section() && c.path == path)
}

/// Makes `content` the snapshot of whole file `path` (adding it to the context, writable, when the
/// model created it). Returns the new version and the previous one, if the file was in context.
fn resnapshot_whole_file(
    chat: &mut Chat,
    dir: &Dir,
    path: &str,
    content: &[u8],
) -> Result<(String, Option<String>), ChatError> {
    let version = file_id(path, content);
    let i = match whole_file(chat, path) {
        Some(i) => i,
        None => {
            chat.context_files.push(ContextFile {
                path: path.to_string(),
                ..Default::default()
            });
            chat.context_files.len() - 1
        }
    };
    let cf = &mut chat.context_files[i];
    let prev = Some(std::mem::replace(&mut cf.version, version.clone())).filter(|v| !v.is_empty());
    snapshots::write(dir, cf, content).map_err(ChatError::io("Failed to update snapshot"))?;
    Ok((version, prev))
}

/// Records that the user took the whole output of `path`, which is now `content` locally (merged by
/// hand in a diff): the snapshot follows, the output goes.
pub fn record_full_merge(
    chat: &mut Chat,
    dir: &Dir,
    path: &str,
    content: &[u8],
) -> Result<(), ChatError> {
    let (version, prev) = resnapshot_whole_file(chat, dir, path, content)?;
    crate::store::remove_file_if_exists(dir, paths::output_rel(path))
        .map_err(ChatError::io("Failed to remove output"))?;
    chat.record_event(
        ContextEvent::new(EventKind::UserApplyFile, path)
            .version(&version)
            .prev(prev.as_deref()),
    );
    Ok(())
}

/// Records that the user took part of the output of `path`, which is now `content` locally: the
/// snapshot becomes what the user has (joining the context when the model created the file); the
/// output stays for the rest.
pub fn record_partial_apply(
    chat: &mut Chat,
    dir: &Dir,
    path: &str,
    content: &[u8],
) -> Result<(), ChatError> {
    let (version, prev) = resnapshot_whole_file(chat, dir, path, content)?;
    let readonly = whole_file(chat, path).is_some_and(|i| chat.context_files[i].readonly);
    chat.record_event(
        ContextEvent::new(EventKind::UserPartialApplyFile, path)
            .version(&version)
            .prev(prev.as_deref())
            .flags(readonly, false),
    );
    Ok(())
}

/// Records that the user rejected the output of `path`, which was `output` (already removed).
pub fn record_rejected(chat: &mut Chat, path: &str, output: Option<&[u8]>) {
    let prev = output.map(|o| file_id(path, o));
    chat.record_event(ContextEvent::new(EventKind::UserRejectOutput, path).prev(prev.as_deref()));
}

/// Removes the output of `path` and records the rejection.
pub fn reject_output(chat: &mut Chat, dir: &Dir, path: &str) -> Result<(), ChatError> {
    let Some(out) = snapshots::read_output(dir, path) else {
        return Err(ChatError::NothingToReject(path.to_string()));
    };
    crate::store::remove_file_if_exists(dir, paths::output_rel(path))
        .map_err(ChatError::io("Failed to remove output"))?;
    record_rejected(chat, path, Some(&out));
    Ok(())
}

/// How much of an output the user took in a diff (`diff_local_done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merged {
    /// Nothing: no local file, no output, or the file is as the context has it.
    None,
    /// Part of it: the snapshot followed, the output stays.
    Partial,
    /// All of it: as if applied.
    Full,
}

impl Merged {
    /// The `outcome` the client is told.
    pub fn as_str(self) -> &'static str {
        match self {
            Merged::None => "none",
            Merged::Partial => "partial",
            Merged::Full => "full",
        }
    }
}

/// After the user closed a diff of `path` against its output: compares the local file (`local`,
/// `None` when unreadable) with the snapshot and the output and records what was taken.
pub fn diff_done(
    chat: &mut Chat,
    dir: &Dir,
    path: &str,
    local: Option<Vec<u8>>,
) -> Result<Merged, ChatError> {
    let ctx =
        whole_file(chat, path).and_then(|i| snapshots::read(dir, &chat.context_files[i]).ok());
    let (Some(local), Some(out)) = (local, snapshots::read_output(dir, path)) else {
        return Ok(Merged::None);
    };
    if ctx
        .as_deref()
        .is_some_and(|c| snapshots::same_text(c, &local))
    {
        return Ok(Merged::None);
    }
    if snapshots::same_text(&out, &local) {
        record_full_merge(chat, dir, path, &local)?;
        return Ok(Merged::Full);
    }
    record_partial_apply(chat, dir, path, &local)?;
    Ok(Merged::Partial)
}
