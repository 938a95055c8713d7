//! Continuing a chat from an earlier point: editing a user message in place, forking from one, and
//! a new chat with another's context. Each restores the context as the message recorded it and
//! warns (to the client and, as events, to the model) about files that changed since.

use std::io;
use std::path::Path;

use cap_std::fs::Dir;
use serde::Serialize;

use super::error::ChatError;
use super::local::LocalFiles;
use super::model::{Chat, ContextEvent, ContextFile, EventKind, Message, Role, SnapshotEntry, now};
use super::paths;
use super::snapshots;
use super::store::ChatStore;

/// How a file of the restored context differs from the message's snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Issue {
    /// The file no longer exists (or may not be re-read).
    Deleted,
    /// The file changed.
    Modified,
}

/// A file of the restored context that changed or vanished since the message was sent (the
/// `context_warnings` of `chat_edit` and `fork_chat`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextWarning {
    /// The file's path.
    pub path: String,
    /// What happened to it.
    pub issue: Issue,
    /// The version the message's snapshot recorded.
    pub original_version: String,
    /// Why it is treated as deleted, when it is not simply gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

/// A fork: the new chat (saved, not yet active), the forked message's text and the warnings.
pub struct Forked {
    /// The new chat.
    pub chat: Chat,
    /// The text of the message forked from (the new chat's draft).
    pub content: String,
    /// Files that changed since that message.
    pub warnings: Vec<ContextWarning>,
}

/// User message `index` of `chat`; `field` names the request field for the error.
fn user_message<'c>(
    chat: &'c Chat,
    index: usize,
    field: &'static str,
) -> Result<&'c Message, ChatError> {
    let m = chat.messages.get(index).ok_or(ChatError::BadIndex {
        field,
        index,
        len: chat.messages.len(),
    })?;
    if m.role != Role::User {
        return Err(ChatError::NotUserMessage(index));
    }
    Ok(m)
}

/// A message's context snapshot; messages written without one (older chats) fall back to the
/// chat's current context, as the reference backend does.
fn snapshot_or_current(m: &Message, current: &[ContextFile]) -> Vec<SnapshotEntry> {
    match &m.context_snapshot {
        Some(snap) => snap.clone(),
        None => current.iter().map(SnapshotEntry::of).collect(),
    }
}

/// The content of `e` as the user has it now (its line range for a section).
fn current_content(local: &LocalFiles, e: &SnapshotEntry) -> Option<io::Result<Vec<u8>>> {
    let external = Path::new(&e.path).is_absolute();
    let cp = paths::stored(&e.path, external).ok()?;
    Some(
        local
            .read(&cp)
            .map(|content| match (e.start_line, e.end_line) {
                (Some(a), Some(b)) => snapshots::section_lines(&content, a, b),
                _ => content,
            }),
    )
}

/// Warnings for the files of `snapshot` that changed or vanished since it was taken.
fn context_warnings(local: &LocalFiles, snapshot: &[SnapshotEntry]) -> Vec<ContextWarning> {
    let mut out = Vec::new();
    for e in snapshot {
        let external = Path::new(&e.path).is_absolute();
        let warn = |issue, reason| ContextWarning {
            path: e.path.clone(),
            issue,
            original_version: e.file_id.clone(),
            reason,
        };
        match current_content(local, e) {
            None => {}
            // An external file this user never added here is not read (nor its existence
            // revealed): it leaves the context like a deleted one.
            Some(Err(err)) if err.kind() == io::ErrorKind::PermissionDenied && external => out
                .push(warn(
                    Issue::Deleted,
                    Some("external file not added by you in this project; not re-read"),
                )),
            Some(Err(_)) => out.push(warn(Issue::Deleted, None)),
            Some(Ok(content))
                if snapshots::version(&e.path, e.start_line, e.end_line, &content) != e.file_id =>
            {
                out.push(warn(Issue::Modified, None))
            }
            Some(Ok(_)) => {}
        }
    }
    out
}

/// The context as `snapshot` recorded it, written into `dest`: each entry's exact snapshot when
/// `current` (read from `source`) still holds that version, else the file as it is now (the caller
/// warns about those); files that no longer exist are left out.
fn restore_context(
    local: &LocalFiles,
    current: &[ContextFile],
    source: &Dir,
    snapshot: &[SnapshotEntry],
    dest: &Dir,
) -> io::Result<Vec<ContextFile>> {
    let mut out = Vec::new();
    for e in snapshot {
        let external = Path::new(&e.path).is_absolute();
        let now = current
            .iter()
            .find(|c| c.path == e.path && c.start_line == e.start_line && c.end_line == e.end_line);
        let kept = now
            .filter(|c| c.version == e.file_id)
            .and_then(|c| snapshots::read(source, c).ok());
        let Some(content) = kept.or_else(|| current_content(local, e)?.ok()) else {
            continue;
        };
        let mut cf = ContextFile {
            path: e.path.clone(),
            readonly: now
                .map(|c| c.readonly)
                .unwrap_or(external || e.start_line.is_some()),
            external,
            start_line: e.start_line,
            end_line: e.end_line,
            ..Default::default()
        };
        cf.version = snapshots::version(&cf.path, cf.start_line, cf.end_line, &content);
        snapshots::write(dest, &cf, &content)?;
        out.push(cf);
    }
    Ok(out)
}

/// Records the warnings as one system message of `ForkWarningModified` / `ForkWarningDeleted`
/// events (as the existing client renders them), so the model learns that the files changed since
/// the message it continues from.
fn record_warnings(chat: &mut Chat, warnings: &[ContextWarning]) {
    let parts: Vec<_> = warnings
        .iter()
        .map(|w| {
            let kind = match w.issue {
                Issue::Deleted => EventKind::ForkWarningDeleted,
                Issue::Modified => EventKind::ForkWarningModified,
            };
            let external = Path::new(&w.path).is_absolute();
            let current = chat
                .context_files
                .iter()
                .find(|c| c.path == w.path && !c.is_section())
                .map(|c| c.version.as_str())
                .unwrap_or("");
            ContextEvent::new(kind, &w.path)
                .version(current)
                .prev(Some(&w.original_version))
                .flags(external, external)
                .part()
        })
        .collect();
    if !parts.is_empty() {
        chat.messages.push(Message {
            role: Role::System,
            parts,
            timestamp: Some(now()),
            ..Default::default()
        });
    }
}

/// Edits user message `index` of `chat` (whose directory is `dir`) in place: the messages from it
/// on go, its text becomes the draft, and the context goes back to what it was sent with (files
/// added since leave; the snapshot's files come back, as they are now when their recorded version
/// is gone). The caller saves the chat.
pub fn edit(
    chat: &mut Chat,
    dir: &Dir,
    local: &LocalFiles,
    index: usize,
    content: String,
) -> Result<Vec<ContextWarning>, ChatError> {
    let snapshot = snapshot_or_current(
        user_message(chat, index, "message_index")?,
        &chat.context_files,
    );
    let warnings = context_warnings(local, &snapshot);
    // Snapshot files of entries that leave the context stay on disk, as history (the reference
    // backend reads them when forking).
    chat.context_files = restore_context(local, &chat.context_files, dir, &snapshot, dir)
        .map_err(ChatError::io("Failed to edit chat"))?;
    chat.messages.truncate(index);
    chat.draft = content;
    record_warnings(chat, &warnings);
    Ok(warnings)
}

/// Creates a chat in `store` and fills it with `fill`; a chat whose filling fails is removed again,
/// so a failure leaves no empty chat behind.
fn create_filled(
    store: &mut ChatStore,
    name: Option<&str>,
    source: &Chat,
    what: &str,
    fill: impl FnOnce(&mut Chat, &Dir) -> Result<(), ChatError>,
) -> Result<Chat, ChatError> {
    let mut chat = store
        .create(name, &source.model)
        .map_err(ChatError::io("Failed to create chat"))?;
    chat.reasoning_effort = source.reasoning_effort.clone();
    let filled = store
        .chat_dir(&chat.id)
        .map_err(ChatError::io("Cannot open chat"))
        .and_then(|dir| fill(&mut chat, dir.dir()))
        .and_then(|()| store.save(&chat).map_err(ChatError::io(what)));
    match filled {
        Ok(()) => Ok(chat),
        Err(e) => {
            let _ = store.delete(&chat.id);
            Err(e)
        }
    }
}

/// Forks `source` (a chat of `store`) at user message `index`: a new chat with the messages before
/// it, its text as the draft, and the context it was sent with.
pub fn fork(
    store: &mut ChatStore,
    local: &LocalFiles,
    source: &Chat,
    index: usize,
) -> Result<Forked, ChatError> {
    let target = user_message(source, index, "fork_message_index")?;
    let content = target.text_content();
    let snapshot = snapshot_or_current(target, &source.context_files);
    let warnings = context_warnings(local, &snapshot);
    let source_dir = store
        .chat_dir(&source.id)
        .map_err(ChatError::io("Cannot open chat"))?;
    let name = format!("Fork of {}", source.name);
    let chat = create_filled(
        store,
        Some(&name),
        source,
        "Failed to fork chat",
        |chat, dir| {
            chat.messages = source.messages[..index].to_vec();
            chat.draft = content.clone();
            chat.context_files = restore_context(
                local,
                &source.context_files,
                source_dir.dir(),
                &snapshot,
                dir,
            )
            .map_err(ChatError::io("Failed to fork chat"))?;
            record_warnings(chat, &warnings);
            Ok(())
        },
    )?;
    Ok(Forked {
        chat,
        content,
        warnings,
    })
}

/// A new chat of `store` with the context of `source` (and none of its messages): sections are
/// copied, whole files re-read as they are now (the snapshot when the file is gone).
pub fn new_with_context(
    store: &mut ChatStore,
    local: &LocalFiles,
    source: &Chat,
) -> Result<Chat, ChatError> {
    let source_dir = store
        .chat_dir(&source.id)
        .map_err(ChatError::io("Cannot open chat"))?;
    create_filled(store, None, source, "Failed to create chat", |chat, dir| {
        for c in &source.context_files {
            let content = if c.is_section() {
                snapshots::read(source_dir.dir(), c).ok()
            } else {
                snapshots::client_path(c)
                    .ok()
                    .and_then(|cp| local.read(&cp).ok())
                    .or_else(|| snapshots::read(source_dir.dir(), c).ok())
            };
            let Some(content) = content else { continue };
            let mut cf = c.clone();
            cf.version = snapshots::version(&cf.path, cf.start_line, cf.end_line, &content);
            snapshots::write(dir, &cf, &content).map_err(ChatError::io("Failed to create chat"))?;
            let kind = if cf.is_section() {
                EventKind::UserAddSection
            } else {
                EventKind::UserAddFile
            };
            chat.record_event(ContextEvent::about(kind, &cf));
            chat.context_files.push(cf);
        }
        Ok(())
    })
}
