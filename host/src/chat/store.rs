//! A set of chats on disk: `chats/` under a project's `.bb7/` or under `~/.bb7/` (global chats).

use std::io;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::model::{CHAT_VERSION, Chat, now};
use crate::store::index::{self, IndexEntry};
use crate::store::{StateDir, lock, write_atomic};

/// The chats of one store.
#[derive(Debug)]
pub struct ChatStore {
    /// `.bb7/` or `~/.bb7/`.
    pub state: StateDir,
    /// `<state>/chats/`.
    pub chats: StateDir,
    /// Whether these are global chats.
    pub global: bool,
    entries: Vec<IndexEntry>,
}

/// Chat ids are generated here (`YYYYMMDD-HHMMSS-xxxxxx`); ids read from disk or sent by clients must
/// be plain names so they can never address anything but a chat directory.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl ChatStore {
    /// Opens the store under `state_root` (`.bb7/` or `~/.bb7/`), creating `chats/` as needed, and
    /// reconciles the index with the chat directories.
    pub fn open(state_root: &Path, global: bool) -> io::Result<Self> {
        let state = StateDir::open(state_root, global)?;
        let chats = state.sub("chats", true)?;
        let entries = index::reconcile(chats.dir(), |id| {
            if !valid_id(id) {
                return None;
            }
            let bytes = chats.dir().read(format!("{id}/chat.json")).ok()?;
            let (chat, _) = Chat::parse(&bytes).ok()?;
            Some(IndexEntry {
                id: id.to_string(),
                name: chat.name,
                created: chat.created,
            })
        })?;
        Ok(ChatStore {
            state,
            chats,
            global,
            entries,
        })
    }

    /// The chats, in creation order.
    pub fn list(&self) -> &[IndexEntry] {
        &self.entries
    }

    pub fn exists(&self, id: &str) -> bool {
        valid_id(id) && self.entries.iter().any(|e| e.id == id)
    }

    /// Creates a chat (directory, chat.json, index entry).
    pub fn create(&mut self, name: Option<&str>, model: &str) -> io::Result<Chat> {
        let created = now();
        let id = new_id();
        let name = match name.map(str::trim).filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => chrono::Local::now()
                .format("Chat %Y-%m-%d %H:%M")
                .to_string(),
        };
        let chat = Chat {
            version: CHAT_VERSION,
            id: id.clone(),
            name: name.clone(),
            created: created.clone(),
            model: model.to_string(),
            ..Default::default()
        };
        self.chats.dir().create_dir_all(format!("{id}/context"))?;
        self.chats.dir().create_dir_all(format!("{id}/output"))?;
        self.save(&chat)?;
        self.entries.push(IndexEntry { id, name, created });
        index::save(self.chats.dir(), &self.entries)?;
        Ok(chat)
    }

    /// Loads a chat, migrating (and re-saving) legacy formats.
    pub fn load(&self, id: &str) -> Result<Chat, String> {
        if !valid_id(id) {
            return Err("Chat not found".into());
        }
        let bytes = self
            .chats
            .dir()
            .read(format!("{id}/chat.json"))
            .map_err(|_| "Chat not found".to_string())?;
        let (mut chat, migrated) = Chat::parse(&bytes)?;
        if chat.id.is_empty() {
            chat.id = id.to_string();
        }
        if migrated {
            self.save(&chat)
                .map_err(|e| format!("Failed to save chat: {e}"))?;
        }
        Ok(chat)
    }

    /// Writes chat.json atomically and keeps the index name in step.
    pub fn save(&self, chat: &Chat) -> io::Result<()> {
        if !valid_id(&chat.id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "invalid chat id",
            ));
        }
        write_atomic(
            self.chats.dir(),
            format!("{}/chat.json", chat.id),
            &chat.to_json(),
        )
    }

    /// Renames a chat (chat.json and index).
    pub fn rename(&mut self, id: &str, name: &str) -> Result<(), String> {
        let mut chat = self.load(id)?;
        chat.name = name.to_string();
        self.save(&chat)
            .map_err(|e| format!("Failed to rename chat: {e}"))?;
        if let Some(e) = self.entries.iter_mut().find(|e| e.id == id) {
            e.name = name.to_string();
        }
        index::save(self.chats.dir(), &self.entries)
            .map_err(|e| format!("Failed to rename chat: {e}"))
    }

    /// Deletes a chat directory and its index entry.
    pub fn delete(&mut self, id: &str) -> Result<(), String> {
        if !self.exists(id) {
            return Err("Chat not found".into());
        }
        // Drop the index entry first: a crash in between leaves a directory the next start re-indexes
        // or removes, never an entry without a directory.
        self.entries.retain(|e| e.id != id);
        index::save(self.chats.dir(), &self.entries)
            .map_err(|e| format!("Failed to delete chat: {e}"))?;
        self.chats
            .dir()
            .remove_dir_all(id)
            .map_err(|e| format!("Failed to delete chat: {e}"))
    }

    /// Adds an existing chat directory (moved in from another store) to the index.
    pub fn adopt(&mut self, chat: &Chat) -> io::Result<()> {
        self.entries.retain(|e| e.id != chat.id);
        self.entries.push(IndexEntry {
            id: chat.id.clone(),
            name: chat.name.clone(),
            created: chat.created.clone(),
        });
        index::save(self.chats.dir(), &self.entries)
    }

    /// Drops a chat from the index without touching its directory (it was moved away).
    pub fn forget(&mut self, id: &str) -> io::Result<()> {
        self.entries.retain(|e| e.id != id);
        index::save(self.chats.dir(), &self.entries)
    }

    /// The chat's directory as a handle.
    pub fn chat_dir(&self, id: &str) -> io::Result<StateDir> {
        if !valid_id(id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "invalid chat id",
            ));
        }
        self.chats.sub(id, false)
    }

    pub fn lock_state(&self, id: &str) -> lock::LockState {
        if !valid_id(id) {
            return lock::LockState::Free;
        }
        lock::state_at(self.chats.dir(), self.chats.path(), id)
    }

    pub fn acquire(&self, id: &str) -> Result<(), String> {
        lock::acquire(self.chats.dir(), id).map_err(|e| e.to_string())
    }

    pub fn release(&self, id: &str) {
        lock::release(self.chats.dir(), id)
    }
}

/// A new chat id: time plus 6 hex digits of entropy (sortable, unique across processes).
fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let now = chrono::Utc::now();
    let mut h = Sha256::new();
    h.update(now.timestamp_nanos_opt().unwrap_or_default().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(SEQ.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    format!(
        "{}-{}",
        now.format("%Y%m%d-%H%M%S"),
        &hex::encode(h.finalize())[..6]
    )
}
