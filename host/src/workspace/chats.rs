//! The chat operations that need the workspace: they pick the store a request addresses, load a
//! chat (the active chat's copy when it is that one), keep the active chat in step, and call the
//! chat domain ([`crate::chat`]) for the work itself.

use serde_json::Value;

use super::{ChatKey, Workspace, WorkspaceError};
use crate::chat::ChatError;
use crate::chat::fork::{self, ContextWarning, Forked};
use crate::chat::local::LocalFiles;
use crate::chat::model::Chat;
use crate::chat::moving;
use crate::chat::naming::check_name;
use crate::chat::store::ChatStore;

/// `last_model` from the client-owned `~/.bb7/state.json` (read, never written).
fn last_model() -> Option<String> {
    let path = crate::paths::state_dir()?.join("state.json");
    let v: Value = serde_json::from_slice(&crate::store::read_regular_path(&path).ok()?).ok()?;
    v.get("last_model")?
        .as_str()
        .filter(|m| !m.is_empty())
        .map(str::to_string)
}

/// The chat a reply belongs to, held independently of which chat is active when it ends.
pub struct ChatRef {
    /// The chat's id.
    pub id: String,
    /// Whether it is in the global store.
    pub global: bool,
    /// `chats/<id>/`, held open since the send.
    pub dir: cap_std::fs::Dir,
}

impl ChatRef {
    /// Which chat this is.
    pub fn key(&self) -> ChatKey {
        ChatKey {
            id: self.id.clone(),
            global: self.global,
        }
    }
}

impl Workspace {
    /// Applies `f` to the chat `target` names and saves it: the active chat in memory when it is
    /// that one, else chat.json through the held directory handle.
    pub fn update_chat(
        &mut self,
        target: &ChatRef,
        f: impl FnOnce(&mut Chat),
    ) -> Result<(), WorkspaceError> {
        if let Some(a) = self.active_if_mut(&target.key()) {
            f(&mut a.chat);
            return self.save_active();
        }
        Ok(crate::chat::turn::update_stored(
            &target.dir,
            &target.id,
            f,
        )?)
    }

    /// The store a request addresses and where its chats' files are re-read from, together (the
    /// store is opened first if it is the global one and not open yet).
    fn store_and_files(
        &mut self,
        global: bool,
    ) -> Result<(&mut ChatStore, LocalFiles<'_>), WorkspaceError> {
        self.store(global)?;
        let global_chat = self.is_global(global);
        let files = LocalFiles {
            project: self.project.as_ref(),
            global_chat,
        };
        let store = if global_chat {
            self.global_store.as_mut()
        } else {
            self.project_store.as_mut()
        };
        Ok((store.ok_or(WorkspaceError::StoreClosed)?, files))
    }

    /// The model a new chat starts with: an explicit `default_model` in config wins, then the
    /// request's `model`, then the last model used (`~/.bb7/state.json`), then the built-in default.
    fn initial_model(&self, requested: Option<&str>) -> String {
        let config = &self.config.config;
        if let Some(m) = config.default_model.as_deref().filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        if let Some(m) = requested.filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        last_model().unwrap_or_else(|| config.effective_default_model().to_string())
    }

    /// Creates a chat in the store `global` addresses and makes it the active one. Returns its id.
    pub fn new_chat(
        &mut self,
        global: bool,
        name: Option<&str>,
        model: Option<&str>,
    ) -> Result<String, WorkspaceError> {
        if let Some(n) = name {
            check_name(n)?;
        }
        let model = self.initial_model(model);
        let chat = self
            .store(global)?
            .create_active(name, &model)
            .map_err(ChatError::io("Failed to create chat"))?;
        let id = chat.id.clone();
        let is_global = self.is_global(global);
        self.activate(is_global, chat)?;
        Ok(id)
    }

    /// Opens chat `id` as the active one (it must exist and not be held by another process).
    pub fn select_chat(&mut self, id: &str, global: bool) -> Result<(), WorkspaceError> {
        let is_global = self.is_global(global);
        let store = self.store(global)?;
        store.require_usable(id)?;
        let chat = store.load(id)?;
        self.activate(is_global, chat)
    }

    /// Deletes chat `id` (releasing it first when it is the active one).
    pub fn delete_chat(&mut self, id: &str, global: bool) -> Result<(), WorkspaceError> {
        let key = self.key(id, global);
        self.store(global)?.require_usable(id)?;
        if self.active_if(&key).is_some() {
            self.release_active();
        }
        Ok(self.store(global)?.delete(id)?)
    }

    /// `chat_force_unlock`: removes chat `id`'s lock whoever holds it (the user's way out of a lock
    /// a process left that is not provably dead).
    pub fn force_unlock(&mut self, id: &str, global: bool) -> Result<(), WorkspaceError> {
        let store = self.store(global)?;
        if !store.exists(id) {
            return Err(ChatError::NotFound.into());
        }
        crate::store::lock::force_remove(store.chats.dir(), id)
            .map_err(ChatError::io("Failed to unlock chat"))?;
        Ok(())
    }

    /// Renames chat `id` after checking the name is one line (see [`Self::rename_chat`]).
    pub fn rename_checked(
        &mut self,
        id: &str,
        global: bool,
        name: &str,
    ) -> Result<(), WorkspaceError> {
        check_name(name)?;
        self.rename_chat(global, id, name)
    }

    /// The chat `id` in the store (the active chat's copy when it is the active one). `for_change`
    /// also requires that no other live process holds it; forking only reads its source, whoever
    /// holds it.
    fn load_chat(
        &mut self,
        id: &str,
        global: bool,
        for_change: bool,
    ) -> Result<Chat, WorkspaceError> {
        if let Some(a) = self.active_if(&self.key(id, global)) {
            return Ok(a.chat.clone());
        }
        let store = self.store(global)?;
        if for_change {
            store.require_usable(id)?;
        } else if !store.exists(id) {
            return Err(ChatError::NotFound.into());
        }
        Ok(store.load(id)?)
    }

    /// `chat_edit`: edits user message `index` of chat `id` (the active chat when `None`) in place;
    /// see [`fork::edit`]. Returns the context warnings.
    pub fn edit_chat(
        &mut self,
        id: Option<&str>,
        global: bool,
        index: usize,
        content: String,
    ) -> Result<Vec<ContextWarning>, WorkspaceError> {
        let id = match id {
            Some(id) => id.to_string(),
            None => self.active()?.id.clone(),
        };
        let key = self.key(&id, global);
        let mut chat = self.load_chat(&id, global, true)?;
        let (store, files) = self.store_and_files(global)?;
        let dir = store
            .chat_dir(&id)
            .map_err(ChatError::io("Cannot open chat"))?;
        let warnings = fork::edit(&mut chat, dir.dir(), &files, index, content)?;
        store
            .save(&chat)
            .map_err(ChatError::io("Failed to save chat"))?;
        if let Some(a) = self.active_if_mut(&key) {
            a.chat = chat;
        }
        Ok(warnings)
    }

    /// `fork_chat`: forks chat `id` at user message `index` (see [`fork::fork`]) and makes the fork
    /// the active chat.
    pub fn fork_chat(
        &mut self,
        id: &str,
        global: bool,
        index: usize,
    ) -> Result<Forked, WorkspaceError> {
        let source = self.load_chat(id, global, false)?;
        let (store, files) = self.store_and_files(global)?;
        let forked = fork::fork(store, &files, &source, index)?;
        let is_global = self.is_global(global);
        self.activate(is_global, forked.chat.clone())?;
        Ok(forked)
    }

    /// `chat_new_with_context`: a new chat with the context of chat `source_id` (see
    /// [`fork::new_with_context`]), made the active chat. Returns its id.
    pub fn new_chat_with_context(
        &mut self,
        source_id: &str,
        global: bool,
    ) -> Result<String, WorkspaceError> {
        let source = self.load_chat(source_id, global, false)?;
        let (store, files) = self.store_and_files(global)?;
        let chat = fork::new_with_context(store, &files, &source)?;
        let id = chat.id.clone();
        let is_global = self.is_global(global);
        self.activate(is_global, chat)?;
        Ok(id)
    }

    /// `chat_move`: moves chat `id` to the global store or to the project's (see
    /// [`moving`]), and makes it the active chat there.
    pub fn move_chat(&mut self, id: &str, to_global: bool) -> Result<(), WorkspaceError> {
        let Some(root) = self.project.as_ref().map(|p| p.root().to_path_buf()) else {
            return Err(WorkspaceError::MoveNeedsProject);
        };
        let from_global = !to_global;
        let to_scope = self.external_scope(to_global);
        let (src, from) = self.store_and_files(from_global)?;
        let prepared = moving::prepare(src, &from, &to_scope, &root, id, to_global)?;
        self.release_active_if(&ChatKey {
            id: prepared.id().to_string(),
            global: from_global,
        });
        self.store(to_global)?;
        let (Some(project), Some(global)) =
            (self.project_store.as_mut(), self.global_store.as_mut())
        else {
            return Err(WorkspaceError::StoreClosed);
        };
        let (src, dst) = if to_global {
            (project, global)
        } else {
            (global, project)
        };
        let chat = moving::publish(src, dst, prepared)?;
        self.activate(to_global, chat)
    }

    /// The current name of chat `id`: the in-memory one when it is active, else the stored one.
    pub fn current_name(&mut self, global: bool, id: &str) -> Option<String> {
        let key = ChatKey {
            id: id.to_string(),
            global,
        };
        if let Some(a) = self.active_if(&key) {
            return Some(a.chat.name.clone());
        }
        self.store(global).ok()?.load(id).ok().map(|c| c.name)
    }

    /// The context file paths of chat `key` if it is the active one (what a title request
    /// mentions), else none.
    pub fn context_paths_if_active(&self, key: &ChatKey) -> Vec<String> {
        self.active_if(key)
            .map(|a| {
                a.chat
                    .context_files
                    .iter()
                    .map(|c| c.path.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Releases the active chat if it is the one `key` names.
    fn release_active_if(&mut self, key: &ChatKey) {
        if self.active_if(key).is_some() {
            self.release_active();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fsyncs;
    use crate::store::lock::LockState;

    /// A project as `bb7_init` makes it, opened by a fresh workspace.
    fn opened() -> (tempfile::TempDir, Workspace) {
        let t = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(t.path().join(".bb7/chats")).expect("mkdir");
        let mut ws = Workspace::new();
        ws.init(Some(t.path())).expect("init");
        (t, ws)
    }

    /// What index.json on disk names as the active chat.
    fn active_on_disk(root: &std::path::Path) -> Option<String> {
        let bytes = std::fs::read(root.join(".bb7/chats/index.json")).expect("index.json");
        let v: Value = serde_json::from_slice(&bytes).expect("index.json parses");
        v["active_chat_id"].as_str().map(str::to_string)
    }

    /// `chat_new` fsyncs chat.json and its directory, then index.json and `chats/` (one index
    /// write records the chat and makes it the active one); the PID lock costs none. It made 8
    /// (a second index write for the active chat, a durable lock file).
    #[test]
    fn chat_new_fsyncs_each_file_and_directory_once() {
        let (t, mut ws) = opened();
        let before = fsyncs();
        let id = ws
            .new_chat(false, Some("one"), Some("m/x"))
            .expect("chat_new");
        assert_eq!(fsyncs() - before, 4);
        assert_eq!(active_on_disk(t.path()).as_deref(), Some(id.as_str()));
        let store = ws.store(false).expect("store");
        assert_eq!(store.lock_state(&id), LockState::Ours);
        let ix: Vec<&str> = store.list().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ix, [id.as_str()]);
    }

    /// Opening another chat writes only the last active chat into index.json: the file is fsynced
    /// (never torn), neither the directory (a power cut may bring back the previous active chat)
    /// nor the lock. It made 4.
    #[test]
    fn opening_a_chat_fsyncs_only_the_index_file() {
        let (t, mut ws) = opened();
        let a = ws.new_chat(false, Some("a"), None).expect("chat_new");
        let b = ws.new_chat(false, Some("b"), None).expect("chat_new");
        assert_eq!(active_on_disk(t.path()).as_deref(), Some(b.as_str()));
        let before = fsyncs();
        ws.select_chat(&a, false).expect("chat_select");
        assert_eq!(fsyncs() - before, 1);
        assert_eq!(active_on_disk(t.path()).as_deref(), Some(a.as_str()));
        let store = ws.store(false).expect("store");
        assert_eq!(store.lock_state(&a), LockState::Ours);
        assert_eq!(store.lock_state(&b), LockState::Free);
    }
}
