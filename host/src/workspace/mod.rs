//! What one editor session holds: the project (if any), its chat store and the global one, the
//! active chat, the search indexes, the tokenizer and the config. The protocol's handlers
//! (`crate::protocol::actions`) operate on it; it knows nothing of JSON lines. Its submodules run
//! the chat domain's operations (`crate::chat`) where they need the stores or the active chat.

mod chats;
mod error;
mod files;
mod reply;
mod review;

pub use chats::ChatRef;
pub use error::WorkspaceError;
pub use reply::{ReplyError, StartedReply};
pub use review::HunkSource;

use std::path::Path;

use crate::chat::ChatError;
use crate::chat::local::LocalFiles;
use crate::chat::model::Chat;
use crate::chat::paths::ClientPath;
use crate::chat::search::SearchIndex;
use crate::chat::store::ChatStore;
use crate::store::StateDir;
use crate::store::project::ProjectDir;

/// Which chat: its id, and whether it lives in the global store (resolved: a project-less
/// workspace's chats are global whatever a request's `global` flag said; see
/// [`Workspace::key`]). Ids are unique per store, not across them, so both are needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatKey {
    /// The chat's id (its directory name).
    pub id: String,
    /// In the global store (`~/.bb7/chats/`) rather than the project's.
    pub global: bool,
}

/// The chat in use.
pub struct Active {
    /// The chat's id.
    pub id: String,
    /// Whether it is a global chat.
    pub global: bool,
    /// Its contents, as last loaded or changed here.
    pub chat: Chat,
    /// `chats/<id>/` as a handle.
    pub dir: StateDir,
}

impl Active {
    /// Which chat this is.
    pub fn key(&self) -> ChatKey {
        ChatKey {
            id: self.id.clone(),
            global: self.global,
        }
    }

    /// Whether this is the chat `key` names.
    pub fn is(&self, key: &ChatKey) -> bool {
        self.id == key.id && self.global == key.global
    }
}

/// Everything one editor session holds.
pub struct Workspace {
    /// Whether `init` has run.
    pub initialized: bool,
    /// The opened project: every read and write of a project file goes through it (see
    /// [`crate::store::project`]).
    pub project: Option<ProjectDir>,
    project_store: Option<ChatStore>,
    global_store: Option<ChatStore>,
    /// The chat in use; `None` until one is opened, and after it is released.
    pub active: Option<Active>,
    /// The chat search cache of the project's store; reset by every `init`.
    pub project_search: SearchIndex,
    /// The chat search cache of the global store.
    pub global_search: SearchIndex,
    /// The token counter, with the file counts it remembers.
    pub tokens: crate::tokens::TokenCounter,
    /// The global config, reloaded by every `init`.
    pub config: crate::config::ConfigState,
    /// Runs the session's tool calls (its sandbox is made on the first call), passed to each reply.
    pub tools: std::sync::Arc<crate::toolhost::ToolHost>,
    /// Set when a send's user message could not be put in place before its reply
    /// ([`Workspace::publish_message`]): the reply's record then saves the chat in full, even when
    /// the reply records nothing, so the message is on disk before the terminal event.
    message_unsaved: bool,
    /// The active chat's snapshots the stale check of a send read, for the reply it starts
    /// ([`Workspace::start_reply`] takes them): each is read once per send.
    snapshot_memo: crate::chat::snapshots::Memo,
}

impl Workspace {
    /// A workspace with no project and no active chat (until `init`).
    pub fn new() -> Self {
        Workspace {
            initialized: false,
            project: None,
            project_store: None,
            global_store: None,
            active: None,
            message_unsaved: false,
            snapshot_memo: Default::default(),
            project_search: SearchIndex::default(),
            global_search: SearchIndex::default(),
            tokens: crate::tokens::TokenCounter::new(),
            config: crate::config::load(),
            tools: std::sync::Arc::new(crate::toolhost::ToolHost::new()),
        }
    }

    /// Opens `root` as the project (its `.bb7/` must exist), or global-only mode for `None`. A project
    /// that cannot be opened is an error and changes nothing: the session keeps serving what it served
    /// before (a failed re-`init` never turns into global-only behind the client's back).
    pub fn init(&mut self, root: Option<&Path>) -> Result<(), WorkspaceError> {
        let opened = match root {
            Some(root) => Self::open_project(root)?,
            None => None,
        };
        self.release_active();
        self.project_search = SearchIndex::default();
        self.config = crate::config::load();
        match opened {
            Some((project, store)) => {
                self.project = Some(project);
                self.project_store = Some(store);
            }
            None => {
                self.project = None;
                self.project_store = None;
            }
        }
        self.initialized = true;
        self.resolve_interrupted_moves();
        self.restore_last_active();
        let states = self
            .project_store
            .iter()
            .map(|s| s.state.path().to_path_buf());
        crate::store::temps::sweep_in_background(states.chain(crate::paths::state_dir()).collect());
        Ok(())
    }

    /// The project at `root` with its chat store; `None` when `root` serves global chats only.
    fn open_project(root: &Path) -> Result<Option<(ProjectDir, ChatStore)>, WorkspaceError> {
        let root = root
            .canonicalize()
            .map_err(|source| WorkspaceError::OpenProject {
                path: root.to_path_buf(),
                source,
            })?;
        if !root.is_dir() {
            return Err(WorkspaceError::NotADirectory(root));
        }
        let state = root.join(".bb7");
        // A repository could ship `.bb7` as a symlink and so redirect every state write.
        if std::fs::symlink_metadata(&state).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(WorkspaceError::StateIsSymlink(state));
        }
        // Like the reference backend: a directory without .bb7/ serves global chats only (the
        // client always sends its working directory and branches on `global_only`). So does the
        // home directory, whose .bb7/ *is* the global store: one directory must never be both.
        if !state.is_dir() || is_global_state_dir(&state) {
            return Ok(None);
        }
        let project = ProjectDir::open(&root).map_err(|source| WorkspaceError::OpenProject {
            path: root.clone(),
            source,
        })?;
        let store = ChatStore::open(&state, false).map_err(|source| WorkspaceError::OpenStore {
            path: state.clone(),
            source,
        })?;
        Ok(Some((project, store)))
    }

    /// A crash during `chat_move` between publishing the copy and retiring the source leaves the
    /// chat in both stores. The copy carries the newest `moved_at` mark; the other one is deleted only
    /// when that is provably the same chat: two different store directories, one copy marked newer,
    /// and the same messages. Anything else is left alone (and logged): never delete what might be
    /// the only copy of a chat.
    fn resolve_interrupted_moves(&mut self) {
        let Some(project) = self.project_store.as_ref() else {
            return;
        };
        let Some(global_chats) = crate::paths::state_dir().map(|d| d.join("chats")) else {
            return;
        };
        if same_dir(project.chats.path(), &global_chats) {
            return;
        }
        let both: Vec<String> = project
            .list()
            .iter()
            .filter(|e| global_chats.join(&e.id).join("chat.json").is_file())
            .map(|e| e.id.clone())
            .collect();
        for id in both {
            let Some(Ok(in_project)) = self.project_store.as_ref().map(|s| s.load(&id)) else {
                continue;
            };
            let Ok(Ok(in_global)) = self.store(true).map(|s| s.load(&id)) else {
                continue;
            };
            let mark = |c: &Chat| {
                c.extra
                    .get("moved_at")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            };
            let (mg, mp) = (mark(&in_global), mark(&in_project));
            let duplicate = mg != mp
                && in_global.id == in_project.id
                && in_global.messages.len() == in_project.messages.len()
                && in_global
                    .messages
                    .iter()
                    .zip(&in_project.messages)
                    .all(|(a, b)| a.parts == b.parts && a.role == b.role);
            if !duplicate {
                tracing::warn!("chat {id} is in both the project and the global store; both kept");
                continue;
            }
            // The newer mark wins; a copy without a mark predates every move.
            let loser = if mg > mp {
                self.project_store.as_mut()
            } else {
                self.store(true).ok()
            };
            if let Some(store) = loser
                && let Err(e) = store.delete(&id)
            {
                tracing::warn!("cannot resolve the interrupted move of chat {id}: {e}");
            }
        }
    }

    /// Re-opens the chat that was active when the project was last used (recorded in index.json), if
    /// it still exists and no other live process holds it.
    fn restore_last_active(&mut self) {
        let Some(store) = self.project_store.as_mut() else {
            return;
        };
        let Some(id) = store.active_chat_id().map(str::to_string) else {
            return;
        };
        if !store.exists(&id)
            || matches!(
                store.lock_state(&id),
                crate::store::lock::LockState::Other(_)
            )
        {
            return;
        }
        if let Ok(chat) = store.load(&id) {
            let _ = self.activate(false, chat);
        }
    }

    /// Whether no project is open, so only global chats are served.
    pub fn global_only(&self) -> bool {
        self.project.is_none()
    }

    /// The store a request addresses: the global one when `global` (or in global-only mode), else
    /// the project's.
    pub fn store(&mut self, global: bool) -> Result<&mut ChatStore, WorkspaceError> {
        if !self.initialized {
            return Err(WorkspaceError::NotInitialized);
        }
        if global || self.project_store.is_none() {
            if self.global_store.is_none() {
                let dir = crate::paths::state_dir().ok_or(WorkspaceError::NoHome)?;
                let store = ChatStore::open(&dir, true)
                    .map_err(|source| WorkspaceError::OpenStore { path: dir, source })?;
                return Ok(self.global_store.insert(store));
            }
            return self
                .global_store
                .as_mut()
                .ok_or(WorkspaceError::StoreClosed);
        }
        self.project_store
            .as_mut()
            .ok_or(WorkspaceError::StoreClosed)
    }

    /// Renames chat `id` in the store `global` addresses, and the active chat in memory when it is
    /// that one (so a later save keeps the name).
    pub fn rename_chat(
        &mut self,
        global: bool,
        id: &str,
        name: &str,
    ) -> Result<(), WorkspaceError> {
        let key = self.key(id, global);
        self.store(global)?.rename(id, name)?;
        if let Some(a) = self.active_if_mut(&key) {
            a.chat.name = name.to_string();
        }
        Ok(())
    }

    /// The key of chat `id` for a request's `global` flag (resolved with [`Self::is_global`]).
    pub fn key(&self, id: &str, global: bool) -> ChatKey {
        ChatKey {
            id: id.to_string(),
            global: self.is_global(global),
        }
    }

    /// The active chat, if it is the one `key` names.
    pub fn active_if(&self, key: &ChatKey) -> Option<&Active> {
        self.active.as_ref().filter(|a| a.is(key))
    }

    /// [`Self::active_if`], mutably.
    pub fn active_if_mut(&mut self, key: &ChatKey) -> Option<&mut Active> {
        self.active.as_mut().filter(|a| a.is(key))
    }

    /// Whether a request's `global` flag resolves to the global store.
    pub fn is_global(&self, global: bool) -> bool {
        global || self.project_store.is_none()
    }

    /// The search index for a store.
    pub fn search_index(&mut self, global: bool) -> &mut SearchIndex {
        if self.is_global(global) {
            &mut self.global_search
        } else {
            &mut self.project_search
        }
    }

    /// The active chat; `No active chat` when there is none.
    pub fn active(&self) -> Result<&Active, WorkspaceError> {
        self.active.as_ref().ok_or(WorkspaceError::NoActiveChat)
    }

    /// [`Self::active`], mutably.
    pub fn active_mut(&mut self) -> Result<&mut Active, WorkspaceError> {
        self.active.as_mut().ok_or(WorkspaceError::NoActiveChat)
    }

    /// Saves the active chat.
    pub fn save_active(&mut self) -> Result<(), WorkspaceError> {
        let global = self.active()?.global;
        let chat = self.active()?.chat.clone();
        self.store(global)?
            .save(&chat)
            .map_err(ChatError::io("Failed to save chat"))?;
        Ok(())
    }

    /// Writes the active chat under a temporary name, to be fsynced and put in place later
    /// ([`ChatStore::stage`]): a send's user message, before its model request.
    fn stage_active(&mut self) -> Result<crate::store::Staged, WorkspaceError> {
        let global = self.active()?.global;
        let chat = self.active()?.chat.clone();
        let staged = self.store(global)?.stage(&chat);
        Ok(staged.map_err(ChatError::io("Failed to save chat"))?)
    }

    /// Makes `chat` (in the `global` store) the active chat, taking its lock and releasing the
    /// previous one.
    pub fn activate(&mut self, global: bool, mut chat: Chat) -> Result<(), WorkspaceError> {
        let same = self
            .active_if(&ChatKey {
                id: chat.id.clone(),
                global,
            })
            .is_some();
        let store = self.store(global)?;
        store.acquire(&chat.id)?;
        let dir = store
            .chat_dir(&chat.id)
            .map_err(ChatError::io("Cannot open chat"))?;
        if !same {
            self.release_active();
            // The chat is ours now (locked): clear what a crashed writer left mid-write, and bring
            // the recorded versions in step with snapshots a crash replaced before chat.json was
            // saved.
            crate::store::sweep_dead_temps(dir.dir());
            if crate::chat::snapshots::heal_versions(dir.dir(), &mut chat.context_files)
                && let Ok(store) = self.store(global)
                && let Err(e) = store.save(&chat)
            {
                tracing::warn!("cannot save the healed versions of chat {}: {e}", chat.id);
            }
        }
        // Remember it for the next start (best effort: the chat is usable either way).
        if let Ok(store) = self.store(global) {
            let _ = store.set_active_chat_id(Some(&chat.id));
        }
        self.active = Some(Active {
            id: chat.id.clone(),
            global,
            chat,
            dir,
        });
        Ok(())
    }

    /// Releases the active chat's lock (switching chats, shutdown, EOF).
    pub fn release_active(&mut self) {
        if let Some(a) = self.active.take()
            && let Ok(store) = self.store(a.global)
        {
            store.release(&a.id);
        }
    }

    /// Classifies a client path for a chat: inside the project for project chats; for global chats
    /// every file is external (a relative path is taken relative to the open project, if any).
    pub fn classify(&self, path: &str, global_chat: bool) -> Result<ClientPath, WorkspaceError> {
        let root = self.project.as_ref().map(|p| p.root());
        let cp = crate::chat::paths::classify(path, root)?;
        match (cp, global_chat, root) {
            (ClientPath::Internal(rel), true, Some(root)) => Ok(ClientPath::External(
                root.join(rel).to_string_lossy().into_owned(),
            )),
            (cp, _, _) => Ok(cp),
        }
    }

    /// The scope of a chat for the record of external files (see [`crate::chat::external`]).
    pub fn external_scope(&self, global_chat: bool) -> String {
        crate::chat::external::scope(global_chat, self.project.as_ref().map(|p| p.root()))
    }

    /// Where the context files of a chat in the `global_chat` scope are re-read from.
    pub fn local_files(&self, global_chat: bool) -> LocalFiles<'_> {
        LocalFiles {
            project: self.project.as_ref(),
            global_chat,
        }
    }

    /// Reads the user's current version of a context file under the rules of the chat's scope (see
    /// [`LocalFiles::read`]).
    pub fn read_local(&self, path: &ClientPath, global_chat: bool) -> std::io::Result<Vec<u8>> {
        self.local_files(global_chat).read(path)
    }
}

/// Whether `state` (a project's `.bb7/`) is the global state directory itself (a project rooted at
/// the home directory).
fn is_global_state_dir(state: &Path) -> bool {
    crate::paths::state_dir().is_some_and(|g| same_dir(state, &g))
}

/// Whether two paths name the same existing directory (same device and inode).
fn same_dir(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}
