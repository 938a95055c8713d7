//! Fuzz target `chat_json`: loading chat.json and index.json: [`bb7::chat::model::Chat::parse`]
//! (with the version 0/1 → 2 migration) and a real [`bb7::chat::store::ChatStore`] opened over a
//! `.bb7/chats/` holding the fuzzed files.
//!
//! Input: split at the first `0xFF` byte into chat.json's bytes and index.json's bytes (absent when
//! there is no `0xFF`). Invariants:
//! - nothing panics;
//! - migration is idempotent and serialisation stable: `parse(to_json(parse(x)))` is not migrated
//!   again and serialises to the same bytes;
//! - the store opens; it lists only valid, distinct ids whose directories exist, and the same list
//!   when opened again; a chat whose chat.json parses is listed; `load` succeeds exactly when chat.json parses, and afterwards the file on
//!   disk parses as the current version with the directory's id. (index.json may keep listing a
//!   chat whose chat.json is unreadable: its directory exists.)

use std::fs;
use std::sync::{Mutex, OnceLock};

use bb7::chat::model::Chat;
use bb7::chat::store::{ChatStore, valid_id};

const ID: &str = "20250101-000000-fuzz01";

fn workdir() -> &'static Mutex<tempfile::TempDir> {
    static DIR: OnceLock<Mutex<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| Mutex::new(super::scratch_dir()))
}

pub fn run(data: &[u8]) {
    let (chat_bytes, index_bytes) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };

    let parsed = Chat::parse(chat_bytes);
    if let Ok((chat, _)) = &parsed {
        let once = chat.to_json();
        let (again, migrated) =
            Chat::parse(&once).unwrap_or_else(|e| panic!("a saved chat does not load again: {e}"));
        assert!(!migrated, "a saved chat needs migrating again");
        assert_eq!(again.to_json(), once, "saving a loaded chat changes it");
    }

    let guard = workdir().lock().unwrap_or_else(|p| p.into_inner());
    let state = guard.path().join(".bb7");
    let _ = fs::remove_dir_all(&state);
    let chat_dir = state.join("chats").join(ID);
    fs::create_dir_all(&chat_dir).expect("create the chat dir");
    fs::write(chat_dir.join("chat.json"), chat_bytes).expect("write chat.json");
    if let Some(ix) = index_bytes {
        fs::write(state.join("chats").join("index.json"), ix).expect("write index.json");
    }

    let store = ChatStore::open(&state, false).expect("the store opens");
    let ids: Vec<String> = store.list().iter().map(|e| e.id.clone()).collect();
    let mut seen = std::collections::HashSet::new();
    for id in &ids {
        assert!(valid_id(id), "listed an invalid id {id:?}");
        assert!(seen.insert(id.clone()), "listed {id} twice");
        assert!(
            state.join("chats").join(id).is_dir(),
            "listed {id} without its directory"
        );
    }
    let listed = ids.iter().any(|i| i == ID);
    if parsed.is_ok() {
        assert!(listed, "a chat whose chat.json parses is not listed");
    }
    if index_bytes.is_none() {
        // Without an index naming it, only a readable chat is listed.
        assert_eq!(listed, parsed.is_ok(), "an unreadable chat is listed");
    }
    let reopened = ChatStore::open(&state, false).expect("the store opens again");
    let ids2: Vec<String> = reopened.list().iter().map(|e| e.id.clone()).collect();
    assert_eq!(ids2, ids, "a second open lists other chats");
    let _ = reopened.active_chat_id();

    let loaded = store.load(ID);
    assert_eq!(
        loaded.is_ok(),
        parsed.is_ok(),
        "load and parse disagree: {loaded:?}"
    );
    if loaded.is_ok() {
        let bytes = fs::read(chat_dir.join("chat.json")).expect("chat.json after load");
        let (c, migrated) = Chat::parse(&bytes).expect("chat.json after load parses");
        assert!(!migrated, "chat.json after load still needs migrating");
        assert_eq!(c.id, ID, "chat.json after load has another id");
    }
}
