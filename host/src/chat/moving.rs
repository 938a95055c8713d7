//! Moving a chat between the project's store and the global one: re-homing its context files, and
//! the crash-safe publish (stage a complete copy, then two renames) that leaves the chat in one
//! store, never in none.

use std::path::Path;

use serde_json::json;

use super::error::ChatError;
use super::external::ExternalRecord;
use super::local::LocalFiles;
use super::model::{Chat, ContextFile};
use super::paths::{self, ClientPath};
use super::snapshots;
use super::store::ChatStore;

/// A move checked and prepared, before anything was renamed.
pub struct Move {
    chat: Chat,
    files: Vec<(ContextFile, Vec<u8>)>,
    to_global: bool,
}

impl Move {
    /// The chat's id.
    pub fn id(&self) -> &str {
        &self.chat.id
    }
}

/// Prepares moving chat `id` out of `src` (the project's store for `to_global`, else the global
/// one): the chat must be usable and have no outputs waiting for review. Every context file is
/// re-homed: to global, everything becomes external and read-only (absolute paths); to a project,
/// files inside it become relative and writable again. External files stay re-readable after the
/// move only where they were before (`from` is the source scope): they are recorded for `to_scope`.
pub fn prepare(
    src: &mut ChatStore,
    from: &LocalFiles,
    to_scope: &str,
    root: &Path,
    id: &str,
    to_global: bool,
) -> Result<Move, ChatError> {
    src.require_usable(id)?;
    let src_dir = src
        .chat_dir(id)
        .map_err(ChatError::io("Cannot open chat"))?;
    if !snapshots::output_files(src_dir.dir()).is_empty() {
        return Err(ChatError::PendingOutputs);
    }
    let mut chat = src.load(id)?;
    let mut files = Vec::new();
    let mut trusted = Vec::new();
    for c in &chat.context_files {
        let source = snapshots::client_path(c)?;
        let content = snapshots::read(src_dir.dir(), c)
            .map_err(ChatError::io(format!("Cannot read snapshot of {}", c.path)))?;
        let next = match (&source, to_global) {
            (ClientPath::Internal(rel), true) => {
                ClientPath::External(root.join(rel).to_string_lossy().into_owned())
            }
            (ClientPath::External(abs), false) => paths::classify(abs, Some(root))?,
            (other, _) => other.clone(),
        };
        let mut cf = c.clone();
        cf.path = next.as_str().to_string();
        cf.external = next.is_external();
        // An external file that comes back into the project becomes writable again.
        let back_in_project = c.external && !cf.external;
        cf.readonly = to_global || cf.is_section() || (c.readonly && !back_in_project);
        cf.version = snapshots::version(&cf.path, cf.start_line, cf.end_line, &content);
        if cf.external && from.trusts(&source) {
            trusted.push(cf.path.clone());
        }
        files.push((cf, content));
    }
    chat.context_files = files.iter().map(|(cf, _)| cf.clone()).collect();
    ExternalRecord::of_user()
        .add(to_scope, trusted.iter().map(String::as_str))
        .map_err(ChatError::io(
            "Failed to move chat: cannot record its external files",
        ))?;
    Ok(Move {
        chat,
        files,
        to_global,
    })
}

/// Publishes a prepared move from `src` to `dst`: the complete copy is staged under a hidden name in
/// the destination, then flipped with two renames (publish the copy, retire the source). A crash
/// leaves the chat in one store, never in none, and in both only for the instant between the
/// renames; leftovers are cleaned up on open. Returns the chat as it now is in `dst`.
pub fn publish(src: &mut ChatStore, dst: &mut ChatStore, m: Move) -> Result<Chat, ChatError> {
    let Move {
        mut chat,
        files,
        to_global,
    } = m;
    let id = chat.id.clone();
    if dst.exists(&id) {
        return Err(ChatError::Exists);
    }
    let fail = || ChatError::io("Failed to move chat");
    let staged = format!(".move-{id}");
    let d = dst.chats.dir();
    let _ = d.remove_dir_all(&staged);
    d.create_dir_all(format!("{staged}/context"))
        .map_err(fail())?;
    if !to_global {
        d.create_dir_all(format!("{staged}/output"))
            .map_err(fail())?;
    }
    let staged_dir = dst.chats.sub(&staged, false).map_err(fail())?;
    for (cf, content) in &files {
        snapshots::write(staged_dir.dir(), cf, content).map_err(fail())?;
    }
    // Marks the copy as the newest: a crash between the two renames below can leave the chat in both
    // stores, and the next start keeps the copy with the latest mark
    // (`Workspace::resolve_interrupted_moves`).
    chat.extra.insert(
        "moved_at".into(),
        json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)),
    );
    crate::store::write_atomic(staged_dir.dir(), "chat.json", &chat.to_json()).map_err(fail())?;
    d.rename(&staged, d, &id).map_err(fail())?;
    let retired = format!(".trash-{id}");
    if let Err(e) = src.chats.dir().rename(&id, src.chats.dir(), &retired) {
        // Undo the publish so the chat stays where it was.
        let _ = dst.chats.dir().rename(&id, dst.chats.dir(), &staged);
        return Err(fail()(e));
    }
    // Both renames are visible at once; now make them durable (publish first).
    crate::store::sync_dir(dst.chats.dir());
    crate::store::sync_dir(src.chats.dir());
    let _ = src.chats.dir().remove_dir_all(&retired);
    src.refresh().map_err(fail())?;
    dst.refresh().map_err(fail())?;
    Ok(chat)
}
