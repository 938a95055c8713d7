//! A chat's context: adding and removing files and sections, replacing a snapshot (an update, or a
//! sync with the local file), the read-only flag. Every change is recorded as a context event; the
//! caller saves the chat.

use cap_std::fs::Dir;

use super::error::ChatError;
use super::external::ExternalRecord;
use super::model::{Chat, ContextEvent, ContextFile, EventKind};
use super::paths::ClientPath;
use super::snapshots;
use bb7_tool_logic::file_id::file_id;

/// The index of the whole-file entry for `path`.
pub fn find_file(chat: &Chat, path: &ClientPath) -> Option<usize> {
    chat.context_files
        .iter()
        .position(|c| !c.is_section() && c.path == path.as_str())
}

/// Records an external file the user adds in `scope`, so that later re-reads of it are allowed
/// (see [`super::external`]).
fn record_external(scope: &str, cp: &ClientPath) -> Result<(), ChatError> {
    let ClientPath::External(abs) = cp else {
        return Ok(());
    };
    ExternalRecord::of_user()
        .add(scope, [abs.as_str()])
        .map_err(ChatError::io(
            "Failed to add file: cannot record it in ~/.bb7",
        ))
}

/// Adds whole file `cp` with `content` (external files are always read-only).
pub fn add_file(
    chat: &mut Chat,
    dir: &Dir,
    scope: &str,
    cp: &ClientPath,
    content: &[u8],
    readonly: bool,
) -> Result<(), ChatError> {
    if find_file(chat, cp).is_some() {
        return Err(ChatError::AlreadyInContext);
    }
    let cf = ContextFile {
        path: cp.as_str().to_string(),
        readonly: readonly || cp.is_external(),
        external: cp.is_external(),
        version: file_id(cp.as_str(), content),
        ..Default::default()
    };
    record_external(scope, cp)?;
    snapshots::write(dir, &cf, content).map_err(ChatError::io("Failed to add file"))?;
    chat.record_event(ContextEvent::about(EventKind::UserAddFile, &cf));
    chat.context_files.push(cf);
    Ok(())
}

/// Adds lines `start..=end` of `cp` (read-only, always) with `content`.
pub fn add_section(
    chat: &mut Chat,
    dir: &Dir,
    scope: &str,
    cp: &ClientPath,
    content: &[u8],
    (start, end): (u64, u64),
) -> Result<(), ChatError> {
    record_external(scope, cp)?;
    if chat
        .context_files
        .iter()
        .any(|c| c.path == cp.as_str() && c.start_line == Some(start) && c.end_line == Some(end))
    {
        return Err(ChatError::SectionAlreadyInContext);
    }
    let cf = ContextFile {
        path: cp.as_str().to_string(),
        readonly: true,
        external: cp.is_external(),
        version: snapshots::version(cp.as_str(), Some(start), Some(end), content),
        start_line: Some(start),
        end_line: Some(end),
        ..Default::default()
    };
    snapshots::write(dir, &cf, content).map_err(ChatError::io("Failed to add section"))?;
    chat.record_event(ContextEvent::about(EventKind::UserAddSection, &cf));
    chat.context_files.push(cf);
    Ok(())
}

/// Replaces the snapshot of whole-file entry `i` with `content` (`UserWriteFile`).
fn resnapshot(chat: &mut Chat, dir: &Dir, i: usize, content: &[u8]) -> Result<(), ChatError> {
    let cf = &mut chat.context_files[i];
    let prev = std::mem::replace(&mut cf.version, file_id(&cf.path, content));
    snapshots::write(dir, cf, content)
        .map_err(ChatError::io(format!("Failed to update {}", cf.path)))?;
    let ev = ContextEvent::about(EventKind::UserWriteFile, cf).prev(Some(&prev));
    chat.record_event(ev);
    Ok(())
}

/// Replaces the snapshot of whole file `cp` with `content`.
pub fn update(
    chat: &mut Chat,
    dir: &Dir,
    cp: &ClientPath,
    content: &[u8],
) -> Result<(), ChatError> {
    let i = find_file(chat, cp).ok_or(ChatError::NotInContext)?;
    resnapshot(chat, dir, i, content)
}

/// After the user saved `cp` (whose local content is `local`, `None` when unreadable): a file in
/// context whose snapshot differs takes the local content. A file not in context (or not on disk)
/// is nothing to sync, not an error, as with the reference backend.
pub fn sync(
    chat: &mut Chat,
    dir: &Dir,
    cp: &ClientPath,
    local: Option<Vec<u8>>,
) -> Result<(), ChatError> {
    let (Some(i), Some(local)) = (find_file(chat, cp), local) else {
        return Ok(());
    };
    let snapshot = snapshots::read(dir, &chat.context_files[i]).unwrap_or_default();
    if !snapshots::same_text(&snapshot, &local) {
        resnapshot(chat, dir, i, &local)?;
    }
    Ok(())
}

/// Removes whole file `cp` from the context.
pub fn remove_file(chat: &mut Chat, cp: &ClientPath) -> Result<(), ChatError> {
    let i = find_file(chat, cp).ok_or(ChatError::NotInContext)?;
    let cf = chat.context_files.remove(i);
    chat.record_event(
        ContextEvent::about(EventKind::UserRemoveFile, &cf).flags(cf.readonly, cf.external),
    );
    Ok(())
}

/// Removes section `start..=end` of `cp` from the context.
pub fn remove_section(
    chat: &mut Chat,
    cp: &ClientPath,
    (start, end): (u64, u64),
) -> Result<(), ChatError> {
    let i = chat
        .context_files
        .iter()
        .position(|c| {
            c.path == cp.as_str() && c.start_line == Some(start) && c.end_line == Some(end)
        })
        .ok_or(ChatError::SectionNotInContext)?;
    let cf = chat.context_files.remove(i);
    chat.record_event(ContextEvent::about(EventKind::UserRemoveSection, &cf));
    Ok(())
}

/// Sets the read-only flag of whole file `cp` (external files stay read-only; a file with an output
/// waiting for review cannot become read-only).
pub fn set_readonly(
    chat: &mut Chat,
    dir: &Dir,
    cp: &ClientPath,
    readonly: bool,
) -> Result<(), ChatError> {
    let i = find_file(chat, cp).ok_or(ChatError::NotInContext)?;
    if cp.is_external() && !readonly {
        return Err(ChatError::ExternalReadOnly);
    }
    if readonly && snapshots::read_output(dir, cp.as_str()).is_some() {
        return Err(ChatError::PendingOutput);
    }
    let cf = &mut chat.context_files[i];
    if cf.readonly == readonly {
        return Ok(());
    }
    cf.readonly = readonly;
    let ev = ContextEvent::about(EventKind::UserSetReadOnly, cf);
    chat.record_event(ev);
    Ok(())
}
