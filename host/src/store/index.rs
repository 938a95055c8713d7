//! `chats/index.json`: a lightweight list of chats (id, name, created) so that listing thousands of
//! chats does not read every chat.json, plus the id of the chat last active in this store. The chat
//! directories are the truth; [`reconcile`] brings the index back in step with them (new or foreign
//! chats added, vanished ones dropped). Keys this host does not know are kept.

use std::collections::HashSet;
use std::io;

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One chat in the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The chat's id, also its directory name under `chats/`.
    pub id: String,
    /// The name shown in chat lists.
    pub name: String,
    /// When the chat was created, RFC 3339 UTC.
    pub created: String,
}

/// The whole index file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Index {
    /// The chats (the file's `chats` array), in index order.
    pub entries: Vec<IndexEntry>,
    /// Every other key of the file (`version`, `active_chat_id`, …), written back unchanged.
    pub extra: Map<String, Value>,
}

impl Index {
    /// The chat last active in this store, if recorded.
    pub fn active_chat_id(&self) -> Option<&str> {
        self.extra
            .get("active_chat_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Records `id` as the chat last active in this store; `None` clears the record.
    pub fn set_active_chat_id(&mut self, id: Option<&str>) {
        match id {
            Some(id) => self
                .extra
                .insert("active_chat_id".into(), Value::String(id.into())),
            None => self.extra.remove("active_chat_id"),
        };
    }
}

/// Reads the index of the `chats` directory; a missing or unreadable index is empty. Accepts
/// `{"chats":[…], …}` and a bare array.
pub fn load(chats: &Dir) -> Index {
    let Ok(bytes) = super::read_regular(chats, "index.json") else {
        return Index::default();
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut m)) => {
            let entries = m
                .remove("chats")
                .and_then(|c| serde_json::from_value::<Vec<IndexEntry>>(c).ok())
                .unwrap_or_default();
            Index { entries, extra: m }
        }
        Ok(v @ Value::Array(_)) => Index {
            entries: serde_json::from_value(v).unwrap_or_default(),
            extra: Map::new(),
        },
        _ => Index::default(),
    }
}

/// Writes the index atomically and durably.
pub fn save(chats: &Dir, index: &Index) -> io::Result<()> {
    super::write_atomic(chats, "index.json", &encode(index)?)
}

/// [`save`] up to the rename: the index written and fsynced under a temporary name, put in place
/// (and its directory fsynced) by [`super::Prepared::commit`].
pub fn prepare(chats: &Dir, index: &Index) -> io::Result<super::Prepared> {
    super::prepare_atomic(chats, "index.json", &encode(index)?)
}

/// Writes the index atomically without the directory fsync (see
/// [`super::write_atomic_relaxed`]): for a change only to the last active chat, which a power cut
/// may undo (the previous index, every chat in it, comes back whole).
pub fn save_relaxed(chats: &Dir, index: &Index) -> io::Result<()> {
    super::write_atomic_relaxed(chats, "index.json", &encode(index)?)
}

fn encode(index: &Index) -> io::Result<Vec<u8>> {
    let mut m = index.extra.clone();
    m.insert(
        "chats".into(),
        serde_json::to_value(&index.entries).map_err(io::Error::other)?,
    );
    serde_json::to_vec_pretty(&Value::Object(m)).map_err(io::Error::other)
}

/// Brings the index in step with the chat directories: entries whose directory is gone are dropped;
/// directories with a chat.json but no entry are added (name and created read from chat.json by
/// `describe`). Rewrites index.json only when something changed. Returns the index.
pub fn reconcile(chats: &Dir, describe: impl Fn(&str) -> Option<IndexEntry>) -> io::Result<Index> {
    let mut index = load(chats);
    let mut dirs = HashSet::new();
    for e in chats.entries()? {
        let e = e?;
        if e.file_type()?.is_dir()
            && let Ok(name) = e.file_name().into_string()
            && !name.starts_with('.')
        {
            dirs.insert(name);
        }
    }
    let before = index.entries.len();
    let mut seen = HashSet::new();
    index
        .entries
        .retain(|e| dirs.contains(&e.id) && seen.insert(e.id.clone()));
    let mut changed = index.entries.len() != before;
    let mut missing: Vec<&String> = dirs.iter().filter(|d| !seen.contains(*d)).collect();
    missing.sort();
    for id in missing {
        if let Some(entry) = describe(id) {
            index.entries.push(entry);
            changed = true;
        }
    }
    if changed {
        save(chats, &index)?;
    }
    Ok(index)
}
