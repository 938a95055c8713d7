//! A set of chats on disk: `chats/` under a project's `.bb7/` or under `~/.bb7/` (global chats).

use std::io;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::ChatError;
use super::model::{CHAT_VERSION, Chat, now};
use crate::store::index::{self, Index, IndexEntry};
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
    index: Index,
    /// index.json's and `chats/`'s modification stamps when the index was last reconciled.
    seen: Option<Stamp>,
}

/// How an index write is made to last (see [`crate::store::write_atomic_relaxed`]).
#[derive(Debug, Clone, Copy)]
enum Durability {
    /// The file and its directory are fsynced: the change survives a power cut.
    Durable,
    /// The file only: whole after a power cut, but maybe the previous version.
    Relaxed,
}

type Stamp = (
    Option<std::time::SystemTime>,
    u64,
    Option<std::time::SystemTime>,
);

/// `<id>/chat.json` of `chat` (refused for an id that is no plain name).
fn chat_json(chat: &Chat) -> io::Result<String> {
    if !valid_id(&chat.id) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "invalid chat id",
        ));
    }
    Ok(format!("{}/chat.json", chat.id))
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
        let mut store = ChatStore {
            state,
            chats,
            global,
            index: Index::default(),
            seen: None,
        };
        store.remove_leftovers();
        store.refresh()?;
        Ok(store)
    }

    /// [`ChatStore::refresh`], unless neither index.json nor the `chats/` directory changed since
    /// the last one (two `stat`s instead of reading thousands of entries).
    pub fn refresh_if_changed(&mut self) -> io::Result<()> {
        if self.seen == Some(self.stamp()) {
            return Ok(());
        }
        self.refresh()
    }

    fn stamp(&self) -> Stamp {
        let index = std::fs::symlink_metadata(self.chats.path().join("index.json")).ok();
        let dir = std::fs::symlink_metadata(self.chats.path()).ok();
        (
            index.as_ref().and_then(|m| m.modified().ok()),
            index.as_ref().map_or(0, |m| m.len()),
            dir.and_then(|m| m.modified().ok()),
        )
    }

    /// Removes what an interrupted move left behind: a staged copy that was never published
    /// (`.move-<id>`), or a retired source that was not deleted yet (`.trash-<id>`).
    fn remove_leftovers(&self) {
        let Ok(entries) = self.chats.dir().entries() else {
            return;
        };
        for e in entries.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            if (name.starts_with(".move-") || name.starts_with(".trash-"))
                && e.file_type().is_ok_and(|t| t.is_dir())
            {
                let _ = self.chats.dir().remove_dir_all(&name);
            }
        }
    }

    /// Re-reads the index and brings it in step with the chat directories, so chats created, renamed
    /// or deleted by another process show up.
    pub fn refresh(&mut self) -> io::Result<()> {
        self.seen = Some(self.stamp());
        let chats = &self.chats;
        self.index = index::reconcile(chats.dir(), |id| {
            if !valid_id(id) {
                return None;
            }
            let bytes = crate::store::read_regular(chats.dir(), format!("{id}/chat.json")).ok()?;
            let (chat, _) = Chat::parse(&bytes).ok()?;
            Some(IndexEntry {
                id: id.to_string(),
                name: chat.name,
                created: chat.created,
            })
        })?;
        Ok(())
    }

    /// The chats, in index order.
    pub fn list(&self) -> &[IndexEntry] {
        &self.index.entries
    }

    /// The chats newest first (by creation time, then id), as the client lists them.
    pub fn newest_first(&self) -> Vec<&IndexEntry> {
        let mut v: Vec<&IndexEntry> = self.index.entries.iter().collect();
        v.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.id.cmp(&a.id)));
        v
    }

    /// Whether chat `id` exists (re-reading the index when another process may have created it).
    pub fn exists(&mut self, id: &str) -> bool {
        if !valid_id(id) {
            return false;
        }
        if self.index.entries.iter().any(|e| e.id == id) {
            return true;
        }
        self.chats.dir().exists(format!("{id}/chat.json"))
            && self.refresh().is_ok()
            && self.index.entries.iter().any(|e| e.id == id)
    }

    /// Creates a chat (directory, chat.json, index entry).
    pub fn create(&mut self, name: Option<&str>, model: &str) -> io::Result<Chat> {
        self.create_with(name, model, false)
    }

    /// [`Self::create`], recording the new chat as the last active one in the same index write
    /// (`chat_new`: one index write, and one fsync of `chats/`, instead of two).
    pub fn create_active(&mut self, name: Option<&str>, model: &str) -> io::Result<Chat> {
        self.create_with(name, model, true)
    }

    fn create_with(&mut self, name: Option<&str>, model: &str, active: bool) -> io::Result<Chat> {
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
        // The index is brought in step with the directories before the new one exists: a refresh
        // after it would index the new chat from its chat.json and write index.json once more.
        self.refresh()?;
        self.chats.dir().create_dir_all(format!("{id}/context"))?;
        if !self.global {
            self.chats.dir().create_dir_all(format!("{id}/output"))?;
        }
        // One index write adds the chat (and, for `chat_new`, makes it the active one). It is
        // written and fsynced under a temporary name while chat.json is (the two fsyncs wait for
        // the disk together), and put in place only once chat.json and its directory are durable:
        // index.json never names a chat whose chat.json is not.
        let mut index = self.index.clone();
        if active {
            index.set_active_chat_id(Some(&id));
        }
        if !index.entries.iter().any(|e| e.id == id) {
            index.entries.push(IndexEntry { id, name, created });
        }
        let chats = self.chats.dir();
        let (staged, saved) =
            crate::store::both(|| index::prepare(chats, &index), || self.save(&chat));
        saved?;
        staged?.commit()?;
        self.index = index;
        Ok(chat)
    }

    /// Loads a chat, migrating (and re-saving) legacy formats.
    pub fn load(&self, id: &str) -> Result<Chat, ChatError> {
        if !valid_id(id) {
            return Err(ChatError::NotFound);
        }
        let bytes = crate::store::read_regular(self.chats.dir(), format!("{id}/chat.json"))
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => ChatError::NotFound,
                _ => ChatError::io(format!("Cannot read chat {id}"))(e),
            })?;
        let (mut chat, migrated) = Chat::parse(&bytes).map_err(ChatError::Corrupt)?;
        // The directory name is the id: a copied chat directory must not write into its original.
        let renamed = chat.id != id;
        chat.id = id.to_string();
        if migrated || renamed {
            self.save(&chat)
                .map_err(ChatError::io("Failed to save chat"))?;
        }
        Ok(chat)
    }

    /// Writes chat.json atomically and keeps the index name in step.
    pub fn save(&self, chat: &Chat) -> io::Result<()> {
        write_atomic(self.chats.dir(), chat_json(chat)?, &chat.to_json())
    }

    /// Writes `chat` under a temporary name in its directory, to be fsynced and put in place by
    /// [`crate::store::Staged::publish`] (no directory fsync, as
    /// [`crate::store::write_atomic_relaxed`]): a send's user message, written before its model
    /// request and made durable while the request goes out; the reply's durable save, when it
    /// ends, makes it durable with the reply.
    pub fn stage(&self, chat: &Chat) -> io::Result<crate::store::Staged> {
        crate::store::stage_relaxed(self.chats.dir(), chat_json(chat)?, &chat.to_json())
    }

    /// Renames a chat (chat.json and index).
    pub fn rename(&mut self, id: &str, name: &str) -> Result<(), ChatError> {
        let mut chat = self.load(id)?;
        chat.name = name.to_string();
        self.save(&chat)
            .map_err(ChatError::io("Failed to rename chat"))?;
        self.update_index(Durability::Durable, |ix| {
            if let Some(e) = ix.entries.iter_mut().find(|e| e.id == id) {
                e.name = name.to_string();
            }
        })
        .map_err(ChatError::io("Failed to rename chat"))
    }

    /// Deletes a chat directory and its index entry.
    pub fn delete(&mut self, id: &str) -> Result<(), ChatError> {
        if !self.exists(id) {
            return Err(ChatError::NotFound);
        }
        // Retire the directory with one rename first: a crash while deleting its files leaves a
        // `.trash-<id>` (removed on the next open), never a half-deleted chat that would be re-indexed.
        let fail = |e: io::Error| ChatError::io("Failed to delete chat")(e);
        let retired = format!(".trash-{id}");
        let _ = self.chats.dir().remove_dir_all(&retired);
        self.chats
            .dir()
            .rename(id, self.chats.dir(), &retired)
            .map_err(fail)?;
        crate::store::sync_dir(self.chats.dir());
        self.update_index(Durability::Durable, |ix| ix.entries.retain(|e| e.id != id))
            .map_err(fail)?;
        self.chats.dir().remove_dir_all(&retired).map_err(fail)
    }

    /// The chat last active in this store (recorded in index.json, as the reference backend does).
    pub fn active_chat_id(&self) -> Option<&str> {
        self.index.active_chat_id()
    }

    /// Records the chat last active in this store. Not durable (a power cut may bring back the
    /// previous one, in an index that is whole): which chat opens first is a convenience.
    pub fn set_active_chat_id(&mut self, id: Option<&str>) -> io::Result<()> {
        if self.index.active_chat_id() == id {
            return Ok(());
        }
        self.update_index(Durability::Relaxed, |ix| ix.set_active_chat_id(id))
    }

    /// Applies one change to the index as it is on disk now (another process may have changed it
    /// since we read it), then saves it if the change changed anything.
    fn update_index(
        &mut self,
        durability: Durability,
        change: impl FnOnce(&mut Index),
    ) -> io::Result<()> {
        self.refresh()?;
        self.change_index(durability, change)
    }

    /// Applies one change to the index as last refreshed and saves it if it changed anything.
    fn change_index(
        &mut self,
        durability: Durability,
        change: impl FnOnce(&mut Index),
    ) -> io::Result<()> {
        let before = self.index.clone();
        change(&mut self.index);
        if self.index == before {
            return Ok(());
        }
        match durability {
            Durability::Durable => index::save(self.chats.dir(), &self.index),
            Durability::Relaxed => index::save_relaxed(self.chats.dir(), &self.index),
        }
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

    /// Who holds chat `id`'s lock, removing a stale one (an invalid id is `Free`).
    pub fn lock_state(&self, id: &str) -> lock::LockState {
        if !valid_id(id) {
            return lock::LockState::Free;
        }
        lock::state_at(self.chats.dir(), self.chats.path(), id)
    }

    /// Fails unless chat `id` exists and no other live process holds it (what every change to a
    /// chat that is not the active one requires).
    pub fn require_usable(&mut self, id: &str) -> Result<(), ChatError> {
        if !self.exists(id) {
            return Err(ChatError::NotFound);
        }
        if let lock::LockState::Other(_) = self.lock_state(id) {
            return Err(ChatError::Locked);
        }
        Ok(())
    }

    /// Takes chat `id`'s lock for this process; fails when another live process holds it.
    pub fn acquire(&self, id: &str) -> Result<(), ChatError> {
        lock::acquire(self.chats.dir(), id).map_err(ChatError::Lock)
    }

    /// Releases chat `id`'s lock if this process holds it.
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn on_disk(state: &Path) -> Index {
        let dir =
            cap_std::fs::Dir::open_ambient_dir(state.join("chats"), cap_std::ambient_authority())
                .expect("chats dir");
        index::load(&dir)
    }

    fn index_inode(state: &Path) -> u64 {
        std::fs::metadata(state.join("chats/index.json"))
            .expect("index.json")
            .ino()
    }

    /// A new chat is indexed once, whether or not a refresh saw its directory first (index.json once
    /// held it twice until the next refresh).
    #[test]
    fn a_new_chat_is_indexed_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut store = ChatStore::open(tmp.path(), false).expect("open");
        let chat = store.create(Some("one"), "m/x").expect("create");
        let ix = on_disk(tmp.path());
        let ids: Vec<&str> = ix.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, [chat.id.as_str()]);
        assert_eq!(ix.entries[0].name, "one");
    }

    /// A change that changes nothing does not rewrite index.json (each rewrite is a temporary file,
    /// two fsyncs and a rename: a new inode).
    #[test]
    fn an_unchanged_index_is_not_rewritten() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut store = ChatStore::open(tmp.path(), false).expect("open");
        let chat = store.create(Some("one"), "m/x").expect("create");
        let before = index_inode(tmp.path());
        store.rename(&chat.id, "one").expect("rename");
        assert_eq!(index_inode(tmp.path()), before);
        store.rename(&chat.id, "two").expect("rename");
        assert_ne!(index_inode(tmp.path()), before);
        assert_eq!(on_disk(tmp.path()).entries[0].name, "two");
    }
}
