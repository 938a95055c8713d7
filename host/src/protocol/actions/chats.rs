//! Chat actions: create, list, select, get, delete, rename, search, edit, fork, move, locks, drafts,
//! settings.

use serde_json::{Value, json};

use super::Handled;
use crate::chat::model::{Chat, ContextFile, Message, SnapshotEntry, event_part};
use crate::chat::paths::{self, ClientPath};
use crate::chat::snapshots;
use crate::protocol::request::Request;
use crate::protocol::{ok, reply};
use crate::store::lock::LockState;
use crate::workspace::{ChatKey, Workspace};

/// The model a new chat starts with: an explicit `default_model` in config wins, then the request's
/// `model`, then the last model used (`~/.bb7/state.json`), then the built-in default.
fn initial_model(s: &Workspace, requested: Option<&str>) -> String {
    if let Some(m) = s
        .config
        .config
        .default_model
        .as_deref()
        .filter(|m| !m.is_empty())
    {
        return m.to_string();
    }
    if let Some(m) = requested.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    last_model().unwrap_or_else(|| s.config.config.effective_default_model().to_string())
}

/// `last_model` from the client-owned `~/.bb7/state.json` (read, never written).
fn last_model() -> Option<String> {
    let path = crate::paths::state_dir()?.join("state.json");
    let v: Value = serde_json::from_slice(&crate::store::read_regular_path(&path).ok()?).ok()?;
    v.get("last_model")?
        .as_str()
        .filter(|m| !m.is_empty())
        .map(str::to_string)
}

/// Fails unless chat `id` exists in `store` and no other live process holds it.
fn require_usable(store: &mut crate::chat::store::ChatStore, id: &str) -> Result<(), String> {
    if !store.exists(id) {
        return Err("Chat not found".into());
    }
    if let LockState::Other(_) = store.lock_state(id) {
        return Err("chat is locked by another process".into());
    }
    Ok(())
}

/// A chat name is one line of text: line breaks and other control characters are refused (every
/// client shows names in one line).
fn check_name(name: &str) -> Result<(), String> {
    match name.chars().find(|c| c.is_control()) {
        Some(c) => Err(format!(
            "Invalid chat name: it contains the control character {c:?} (a name is one line of text)"
        )),
        None => Ok(()),
    }
}

pub fn new(s: &mut Workspace, req: &Request) -> Handled {
    let global = req.global()?;
    let model = initial_model(s, req.opt_str("model")?);
    let name = req.opt_str("name")?.map(str::to_string);
    if let Some(n) = &name {
        check_name(n)?;
    }
    let chat = s
        .store(global)?
        .create(name.as_deref(), &model)
        .map_err(|e| format!("Failed to create chat: {e}"))?;
    let id = chat.id.clone();
    let is_global = s.is_global(global);
    s.activate(is_global, chat)?;
    Ok(reply("ok", json!({"id": id})))
}

pub fn list(s: &mut Workspace, req: &Request) -> Handled {
    let global = req.global()?;
    let store = s.store(global)?;
    store
        .refresh_if_changed()
        .map_err(|e| format!("Cannot list chats: {e}"))?;
    let chats: Vec<Value> = store
        .newest_first()
        .into_iter()
        .map(|e| {
            let mut v = json!({"id": e.id, "name": e.name, "created": e.created});
            if matches!(store.lock_state(&e.id), LockState::Other(_)) {
                v["locked"] = json!(true);
            }
            v
        })
        .collect();
    Ok(reply("chat_list", json!({"chats": chats})))
}

pub fn select(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    let global = req.global()?;
    let is_global = s.is_global(global);
    let store = s.store(global)?;
    require_usable(store, id)?;
    let chat = store.load(id)?;
    s.activate(is_global, chat)?;
    details(s)
}

pub fn get(s: &mut Workspace) -> Handled {
    details(s)
}

/// The `chat` reply for the active chat.
fn details(s: &mut Workspace) -> Handled {
    let a = s.active()?;
    let messages: Vec<Value> = a
        .chat
        .messages
        .iter()
        .map(|m| {
            let mut v = serde_json::to_value(m).unwrap_or_else(|_| json!({}));
            v["content"] = json!(m.text_content());
            v
        })
        .collect();
    let mut fields = json!({
        "id": a.chat.id,
        "name": a.chat.name,
        "created": a.chat.created,
        "model": a.chat.current_model(),
        // The model last chosen for this chat (`save_chat_settings`, else the one it was created
        // with); `model` above is the one of the last user message.
        "settings_model": a.chat.model,
        "draft": a.chat.draft,
        "reasoning_effort": a.chat.reasoning_effort,
        "mode": crate::agent::mode::Mode::of(&a.chat).as_str(),
        "messages": messages,
        "instructions_info": super::misc::instructions_info(s, a.global),
    });
    if a.global {
        fields["global"] = json!(true);
    }
    Ok(reply("chat", fields))
}

pub fn delete(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    let global = req.global()?;
    let key = s.key(id, global);
    let store = s.store(global)?;
    require_usable(store, id)?;
    if s.active_if(&key).is_some() {
        s.release_active();
    }
    s.store(global)?.delete(id)?;
    Ok(ok())
}

pub fn rename(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    let name = req.str("name")?.trim().to_string();
    if name.is_empty() {
        return Err("Missing required field: name".into());
    }
    check_name(&name)?;
    let global = req.global()?;
    s.rename_chat(global, id, &name)?;
    Ok(ok())
}

pub fn active(s: &mut Workspace) -> Handled {
    let mut fields = json!({});
    if let Some(a) = &s.active {
        fields["id"] = json!(a.id);
        if a.global {
            fields["global"] = json!(true);
        }
    }
    Ok(reply("chat_active", fields))
}

pub fn search(s: &mut Workspace, req: &Request) -> Handled {
    let query = req.str("query")?.trim().to_string();
    let global = req.global()?;
    let is_global = s.is_global(global);
    s.store(global)?
        .refresh_if_changed()
        .map_err(|e| format!("Cannot search chats: {e}"))?;
    // Split borrows: the store and its search index live in different fields.
    let mut index = std::mem::take(s.search_index(is_global));
    let results = index.search(s.store(global)?, &query);
    *s.search_index(is_global) = index;
    Ok(reply("search_results", json!({"results": results})))
}

/// Context warnings for the files of `snapshot` that changed or vanished since it was taken.
fn context_warnings(s: &Workspace, snapshot: &[SnapshotEntry], global: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for e in snapshot {
        let external = std::path::Path::new(&e.path).is_absolute();
        let Ok(cp) = paths::stored(&e.path, external) else {
            continue;
        };
        match s.read_local(&cp, global) {
            // An external file this user never added here is not read (nor its existence
            // revealed): it leaves the context like a deleted one.
            Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied && external => out.push(
                json!({"path": e.path, "issue": "deleted", "original_version": e.file_id,
                       "reason": "external file not added by you in this project; not re-read"}),
            ),
            Err(_) => {
                out.push(json!({"path": e.path, "issue": "deleted", "original_version": e.file_id}))
            }
            Ok(local) => {
                let content = match (e.start_line, e.end_line) {
                    (Some(a), Some(b)) => snapshots::section_lines(&local, a, b),
                    _ => local,
                };
                if snapshots::version(&e.path, e.start_line, e.end_line, &content) != e.file_id {
                    out.push(
                        json!({"path": e.path, "issue": "modified", "original_version": e.file_id}),
                    );
                }
            }
        }
    }
    out
}

/// The context as `snapshot` recorded it, written into `dest`: each entry's exact snapshot when
/// `current` (read from `source`) still holds that version, else the file as it is now (the caller
/// warns about those); files that no longer exist are left out.
fn restore_context(
    s: &Workspace,
    global: bool,
    current: &[ContextFile],
    source: &cap_std::fs::Dir,
    snapshot: &[SnapshotEntry],
    dest: &cap_std::fs::Dir,
) -> std::io::Result<Vec<ContextFile>> {
    let mut out = Vec::new();
    for e in snapshot {
        let external = std::path::Path::new(&e.path).is_absolute();
        let now = current
            .iter()
            .find(|c| c.path == e.path && c.start_line == e.start_line && c.end_line == e.end_line);
        let mut cf = ContextFile {
            path: e.path.clone(),
            readonly: now
                .map(|c| c.readonly)
                .unwrap_or(external || e.start_line.is_some()),
            external,
            version: e.file_id.clone(),
            start_line: e.start_line,
            end_line: e.end_line,
            ..Default::default()
        };
        let kept = now
            .filter(|c| c.version == e.file_id)
            .and_then(|c| snapshots::read(source, c).ok());
        let content = match kept {
            Some(c) => c,
            None => {
                let Ok(cp) = paths::stored(&e.path, external) else {
                    continue;
                };
                let Ok(local) = s.read_local(&cp, global) else {
                    continue;
                };
                match (e.start_line, e.end_line) {
                    (Some(a), Some(b)) => snapshots::section_lines(&local, a, b),
                    _ => local,
                }
            }
        };
        cf.version = snapshots::version(&cf.path, cf.start_line, cf.end_line, &content);
        snapshots::write(dest, &cf, &content)?;
        out.push(cf);
    }
    Ok(out)
}

/// A message's context snapshot; messages written without one (older chats) fall back to the
/// chat's current context, as the reference backend does.
fn snapshot_or_current(m: &Message, current: &[ContextFile]) -> Vec<SnapshotEntry> {
    match &m.context_snapshot {
        Some(snap) => snap.clone(),
        None => current
            .iter()
            .map(|c| SnapshotEntry {
                path: c.path.clone(),
                file_id: c.version.clone(),
                start_line: c.start_line,
                end_line: c.end_line,
                extra: Default::default(),
            })
            .collect(),
    }
}

/// Records each warning as a `ForkWarningModified` / `ForkWarningDeleted` event, so the model learns
/// that the files changed since the message it is continuing from.
fn record_warnings(chat: &mut Chat, warnings: &[Value]) {
    // One system message holding every warning, as the existing client renders them.
    let mut parts = Vec::new();
    for w in warnings {
        let action = if w["issue"] == "deleted" {
            "ForkWarningDeleted"
        } else {
            "ForkWarningModified"
        };
        let path = w["path"].as_str().unwrap_or_default();
        let external = std::path::Path::new(path).is_absolute();
        let current = chat
            .context_files
            .iter()
            .find(|c| c.path == path && !c.is_section())
            .map(|c| c.version.clone());
        let original = w["original_version"].as_str();
        parts.push(event_part(
            action,
            path,
            current.as_deref().unwrap_or(""),
            original,
            external,
            external,
        ));
    }
    if !parts.is_empty() {
        chat.messages.push(Message {
            role: "system".into(),
            parts,
            timestamp: Some(crate::chat::model::now()),
            ..Default::default()
        });
    }
}

/// The chat `id` in the store (the active chat's copy when it is the active one). `for_change` also
/// requires that no other live process holds it; forking only reads its source, whoever holds it.
fn load_chat(s: &mut Workspace, id: &str, global: bool, for_change: bool) -> Result<Chat, String> {
    if let Some(a) = s.active_if(&s.key(id, global)) {
        return Ok(a.chat.clone());
    }
    let store = s.store(global)?;
    if for_change {
        require_usable(store, id)?;
    } else if !store.exists(id) {
        return Err("Chat not found".into());
    }
    store.load(id)
}

pub fn edit(s: &mut Workspace, req: &Request) -> Handled {
    let id = match req.opt_str("chat_id")?.filter(|i| !i.is_empty()) {
        Some(id) => id.to_string(),
        None => s.active()?.id.clone(),
    };
    let index = req.uint("message_index")? as usize;
    let content = req.str("content")?.to_string();
    let global = req.global()?;
    let is_global = s.is_global(global);
    let mut chat = load_chat(s, &id, global, true)?;
    let Some(target) = chat.messages.get(index) else {
        return Err(format!(
            "Invalid message_index: {index} (the chat has {} messages)",
            chat.messages.len()
        ));
    };
    if target.role != "user" {
        return Err(format!("Message {index} is not a user message"));
    }
    // Back to the context the edited message was sent with: files added since leave the context, the
    // snapshot's files come back (as they are now, when their recorded version is gone).
    let snapshot = snapshot_or_current(target, &chat.context_files);
    let warnings = context_warnings(s, &snapshot, is_global);
    let dir = s
        .store(global)?
        .chat_dir(&id)
        .map_err(|e| format!("Cannot open chat: {e}"))?;
    let restored = restore_context(
        s,
        is_global,
        &chat.context_files,
        dir.dir(),
        &snapshot,
        dir.dir(),
    )
    .map_err(|e| format!("Failed to edit chat: {e}"))?;
    // Snapshot files of entries that leave the context stay on disk, as history (the reference
    // backend reads them when forking).
    chat.context_files = restored;
    chat.messages.truncate(index);
    chat.draft = content;
    record_warnings(&mut chat, &warnings);
    s.store(global)?
        .save(&chat)
        .map_err(|e| format!("Failed to save chat: {e}"))?;
    if let Some(a) = s.active_if_mut(&ChatKey {
        id: id.to_string(),
        global: is_global,
    }) {
        a.chat = chat;
    }
    Ok(reply("ok", json!({"context_warnings": warnings})))
}

/// A chat just created for `fork_chat` / `chat_new_with_context` whose filling failed is removed
/// again, so a failure leaves no empty chat behind; the error is passed on.
fn discard_on_error(
    s: &mut Workspace,
    global: bool,
    id: &str,
    r: Result<(), String>,
) -> Result<(), String> {
    if r.is_err() {
        if let Ok(store) = s.store(global) {
            let _ = store.delete(id);
        }
    }
    r
}

pub fn fork(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("chat_id")?.to_string();
    let index = req.uint("fork_message_index")? as usize;
    let global = req.global()?;
    let is_global = s.is_global(global);
    let source = load_chat(s, &id, global, false)?;
    let Some(target) = source.messages.get(index) else {
        return Err(format!(
            "Invalid fork_message_index: {index} (the chat has {} messages)",
            source.messages.len()
        ));
    };
    if target.role != "user" {
        return Err(format!("Message {index} is not a user message"));
    }
    let fork_content = target.text_content();
    let snapshot = snapshot_or_current(target, &source.context_files);
    let warnings = context_warnings(s, &snapshot, is_global);
    let source_dir = s
        .store(global)?
        .chat_dir(&id)
        .map_err(|e| format!("Cannot open chat: {e}"))?;

    let mut chat = s
        .store(global)?
        .create(Some(&format!("Fork of {}", source.name)), &source.model)
        .map_err(|e| format!("Failed to create chat: {e}"))?;
    chat.reasoning_effort = source.reasoning_effort.clone();
    chat.messages = source.messages[..index].to_vec();
    chat.draft = fork_content.clone();
    let filled = (|| -> Result<(), String> {
        let dir = s
            .store(global)?
            .chat_dir(&chat.id)
            .map_err(|e| format!("Cannot open chat: {e}"))?;
        chat.context_files = restore_context(
            s,
            is_global,
            &source.context_files,
            source_dir.dir(),
            &snapshot,
            dir.dir(),
        )
        .map_err(|e| format!("Failed to fork chat: {e}"))?;
        record_warnings(&mut chat, &warnings);
        s.store(global)?
            .save(&chat)
            .map_err(|e| format!("Failed to fork chat: {e}"))
    })();
    discard_on_error(s, global, &chat.id, filled)?;
    let new_id = chat.id.clone();
    s.activate(is_global, chat)?;
    Ok(reply(
        "fork_result",
        json!({"new_chat_id": new_id, "fork_message_content": fork_content, "context_warnings": warnings}),
    ))
}

pub fn new_with_context(s: &mut Workspace, req: &Request) -> Handled {
    let source_id = req.nonempty("source_chat_id")?.to_string();
    let global = req.global()?;
    let is_global = s.is_global(global);
    let source = load_chat(s, &source_id, global, false)?;
    let source_dir = s
        .store(global)?
        .chat_dir(&source_id)
        .map_err(|e| format!("Cannot open chat: {e}"))?;
    let mut chat = s
        .store(global)?
        .create(None, &source.model)
        .map_err(|e| format!("Failed to create chat: {e}"))?;
    chat.reasoning_effort = source.reasoning_effort.clone();
    let filled = (|| -> Result<(), String> {
        let dir = s
            .store(global)?
            .chat_dir(&chat.id)
            .map_err(|e| format!("Cannot open chat: {e}"))?;
        for c in &source.context_files {
            // Sections are copied; full files are re-read from disk (the snapshot if the file is gone).
            let content = if c.is_section() {
                snapshots::read(source_dir.dir(), c).ok()
            } else {
                snapshots::client_path(c)
                    .ok()
                    .and_then(|cp| s.read_local(&cp, is_global).ok())
                    .or_else(|| snapshots::read(source_dir.dir(), c).ok())
            };
            let Some(content) = content else { continue };
            let mut cf = c.clone();
            cf.version = snapshots::version(&cf.path, cf.start_line, cf.end_line, &content);
            snapshots::write(dir.dir(), &cf, &content)
                .map_err(|e| format!("Failed to create chat: {e}"))?;
            chat.record_event(event_part(
                if cf.is_section() {
                    "UserAddSection"
                } else {
                    "UserAddFile"
                },
                &cf.path,
                &cf.version,
                None,
                cf.readonly,
                cf.external,
            ));
            chat.context_files.push(cf);
        }
        s.store(global)?
            .save(&chat)
            .map_err(|e| format!("Failed to create chat: {e}"))
    })();
    discard_on_error(s, global, &chat.id, filled)?;
    let id = chat.id.clone();
    s.activate(is_global, chat)?;
    Ok(reply("ok", json!({"id": id})))
}

pub fn move_chat(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?.to_string();
    let to_global = match req.opt_str("to")? {
        Some("global") => true,
        Some("project") => false,
        _ => return Err("Missing or invalid field: to (must be 'global' or 'project')".into()),
    };
    let Some(root) = s.project.as_ref().map(|p| p.root().to_path_buf()) else {
        return Err("Moving chats needs a project (started without a project root)".into());
    };
    let from_global = !to_global;
    let store = s.store(from_global)?;
    require_usable(store, &id)?;
    let src_dir = store
        .chat_dir(&id)
        .map_err(|e| format!("Cannot open chat: {e}"))?;
    if !snapshots::output_files(src_dir.dir()).is_empty() {
        return Err(
            "chat has pending file modifications — apply or reject changes before moving".into(),
        );
    }
    let mut chat = store.load(&id)?;
    // Re-home every context file: to global, everything becomes external and read-only (absolute
    // paths); to a project, files inside it become relative and writable again.
    let mut moved: Vec<(ContextFile, Vec<u8>)> = Vec::new();
    let mut source_paths = Vec::new();
    for c in &chat.context_files {
        source_paths.push(snapshots::client_path(c)?);
        let content = snapshots::read(src_dir.dir(), c)
            .map_err(|e| format!("Cannot read snapshot of {}: {e}", c.path))?;
        let mut cf = c.clone();
        let next = match (snapshots::client_path(c)?, to_global) {
            (ClientPath::Internal(rel), true) => {
                ClientPath::External(root.join(rel).to_string_lossy().into_owned())
            }
            (ClientPath::External(abs), false) => paths::classify(&abs, Some(&root))?,
            (other, _) => other,
        };
        cf.path = next.as_str().to_string();
        cf.external = next.is_external();
        cf.readonly = to_global || cf.is_section() || (c.readonly && !(c.external && !cf.external));
        cf.version = snapshots::version(&cf.path, cf.start_line, cf.end_line, &content);
        moved.push((cf, content));
    }
    chat.context_files = moved.iter().map(|(cf, _)| cf.clone()).collect();
    // External files stay re-readable after the move only where they were before: files of the
    // project the user opened, or external files this user added in the source scope.
    let record = crate::chat::external::ExternalRecord::of_user();
    let from_scope = s.external_scope(from_global);
    let trusted: Vec<&str> = source_paths
        .iter()
        .zip(&moved)
        .filter(|(src, (cf, _))| {
            cf.external
                && match src {
                    // A project file becomes an absolute path, re-read later without the project
                    // rule: trust it only if the project rule reads it now (a regular file, no
                    // symlink on the way), so a planted `leak -> ~/.ssh/id_rsa` never becomes one.
                    ClientPath::Internal(rel) => {
                        s.project.as_ref().is_some_and(|p| p.open_read(rel).is_ok())
                    }
                    ClientPath::External(abs) => record.allows(&from_scope, abs),
                }
        })
        .map(|(_, (cf, _))| cf.path.as_str())
        .collect();
    record
        .add(&s.external_scope(to_global), trusted)
        .map_err(|e| format!("Failed to move chat: cannot record its external files: {e}"))?;
    s.release_active_if(&id, from_global);

    // Stage the complete copy under a hidden name in the destination, then flip with two renames
    // (publish the copy, retire the source): a crash leaves the chat in one store, never in none,
    // and in both only for the instant between the renames. Leftovers are cleaned up on open.
    let staged = format!(".move-{id}");
    let dst_store = s.store(to_global)?;
    if dst_store.exists(&id) {
        return Err("A chat with this id already exists there".into());
    }
    let fail = |e: std::io::Error| format!("Failed to move chat: {e}");
    let d = dst_store.chats.dir();
    let _ = d.remove_dir_all(&staged);
    d.create_dir_all(format!("{staged}/context"))
        .map_err(fail)?;
    if !to_global {
        d.create_dir_all(format!("{staged}/output")).map_err(fail)?;
    }
    let staged_dir = dst_store.chats.sub(&staged, false).map_err(fail)?;
    for (cf, content) in &moved {
        snapshots::write(staged_dir.dir(), cf, content).map_err(fail)?;
    }
    // Marks the copy as the newest: a crash between the two renames below can leave the chat in both
    // stores, and the next start keeps the copy with the latest mark (Workspace::resolve_interrupted_moves).
    chat.extra.insert(
        "moved_at".into(),
        json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)),
    );
    crate::store::write_atomic(staged_dir.dir(), "chat.json", &chat.to_json()).map_err(fail)?;
    d.rename(&staged, d, &id).map_err(fail)?;
    let retired = format!(".trash-{id}");
    let src = s.store(from_global)?;
    if let Err(e) = src.chats.dir().rename(&id, src.chats.dir(), &retired) {
        // Undo the publish so the chat stays where it was.
        let dst = s.store(to_global)?;
        let _ = dst.chats.dir().rename(&id, dst.chats.dir(), &staged);
        return Err(fail(e));
    }
    // Both renames are visible at once; now make them durable (publish first).
    crate::store::sync_dir(s.store(to_global)?.chats.dir());
    let src = s.store(from_global)?;
    crate::store::sync_dir(src.chats.dir());
    let _ = src.chats.dir().remove_dir_all(&retired);
    src.refresh().map_err(fail)?;
    s.store(to_global)?.refresh().map_err(fail)?;
    s.activate(to_global, chat)?;
    Ok(ok())
}

pub fn force_unlock(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    let global = req.global()?;
    let store = s.store(global)?;
    if !store.exists(id) {
        return Err("Chat not found".into());
    }
    crate::store::lock::force_remove(store.chats.dir(), id)
        .map_err(|e| format!("Failed to unlock chat: {e}"))?;
    Ok(ok())
}

pub fn save_draft(s: &mut Workspace, req: &Request) -> Handled {
    let draft = req.str("draft")?.to_string();
    s.active_mut()?.chat.draft = draft;
    s.save_active()?;
    Ok(ok())
}

pub fn save_settings(s: &mut Workspace, req: &Request) -> Handled {
    let model = req.opt_str("model")?.map(str::to_string);
    let effort = req.opt_str("reasoning_effort")?.map(str::to_string);
    let mode = req
        .opt_str("mode")?
        .map(crate::agent::mode::Mode::parse)
        .transpose()?;
    if mode == Some(crate::agent::mode::Mode::Agent) && s.active()?.global {
        return Err(crate::agent::mode::GLOBAL_AGENT_ERROR.to_string());
    }
    let a = s.active_mut()?;
    if let Some(mode) = mode {
        mode.store(&mut a.chat);
    }
    if let Some(m) = model.filter(|m| !m.is_empty()) {
        a.chat.model = m;
    }
    if let Some(e) = effort {
        a.chat.reasoning_effort = e;
    }
    s.save_active()?;
    Ok(ok())
}

pub fn add_system_message(s: &mut Workspace, req: &Request) -> Handled {
    let message = req.str("message")?.to_string();
    if message.trim().is_empty() {
        s.active()?;
        return Ok(ok());
    }
    s.active_mut()?
        .chat
        .messages
        .push(Message::text("system", &message));
    s.save_active()?;
    Ok(ok())
}

impl Workspace {
    /// Releases the active chat if it is `id` in the given store.
    fn release_active_if(&mut self, id: &str, global: bool) {
        let key = ChatKey {
            id: id.to_string(),
            global,
        };
        if self.active_if(&key).is_some() {
            self.release_active();
        }
    }
}
