//! `chats/index.json`: a lightweight list of chats (id, name, created) so that listing thousands of
//! chats does not read every chat.json. The chat directories are the truth; [`reconcile`] brings the
//! index back in step with them (new or foreign chats added, vanished ones dropped).

use std::collections::HashSet;
use std::io;

use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};

/// One chat in the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    pub id: String,
    pub name: String,
    pub created: String,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum IndexFile {
    Wrapped { chats: Vec<IndexEntry> },
    Bare(Vec<IndexEntry>),
}

/// Reads the index of the `chats` directory; a missing or unreadable index is empty.
pub fn load(chats: &Dir) -> Vec<IndexEntry> {
    let Ok(bytes) = chats.read("index.json") else {
        return Vec::new();
    };
    match serde_json::from_slice::<IndexFile>(&bytes) {
        Ok(IndexFile::Wrapped { chats }) | Ok(IndexFile::Bare(chats)) => chats,
        Err(_) => Vec::new(),
    }
}

/// Writes the index atomically.
pub fn save(chats: &Dir, entries: &[IndexEntry]) -> io::Result<()> {
    #[derive(Serialize)]
    struct Out<'a> {
        chats: &'a [IndexEntry],
    }
    let bytes = serde_json::to_vec_pretty(&Out { chats: entries }).map_err(io::Error::other)?;
    super::write_atomic(chats, "index.json", &bytes)
}

/// Brings the index in step with the chat directories: entries whose directory is gone are dropped;
/// directories with a chat.json but no entry are added (name and created read from chat.json by
/// `describe`). Rewrites index.json only when something changed. Returns the entries.
pub fn reconcile(
    chats: &Dir,
    describe: impl Fn(&str) -> Option<IndexEntry>,
) -> io::Result<Vec<IndexEntry>> {
    let mut entries = load(chats);
    let mut dirs = HashSet::new();
    for e in chats.entries()? {
        let e = e?;
        if e.file_type()?.is_dir() {
            if let Ok(name) = e.file_name().into_string() {
                if !name.starts_with('.') {
                    dirs.insert(name);
                }
            }
        }
    }
    let before = entries.len();
    let mut seen = HashSet::new();
    entries.retain(|e| dirs.contains(&e.id) && seen.insert(e.id.clone()));
    let mut changed = entries.len() != before;
    let mut missing: Vec<&String> = dirs.iter().filter(|d| !seen.contains(*d)).collect();
    missing.sort();
    for id in missing {
        if let Some(entry) = describe(id) {
            entries.push(entry);
            changed = true;
        }
    }
    if changed {
        save(chats, &entries)?;
    }
    Ok(entries)
}
