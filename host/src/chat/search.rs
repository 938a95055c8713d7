//! `search_chats`: title and content matches with excerpts. Chat texts are cached in memory, keyed
//! by chat.json's modification time and size, so only the first search reads every chat. Only the
//! text itself is kept (no lowercased copy): each search lowercases into one reused buffer, a few
//! milliseconds for thousands of chats, instead of holding every chat twice.

use std::collections::HashMap;
use std::time::SystemTime;

use serde::Serialize;

use super::model::Chat;
use super::store::ChatStore;

/// Characters of context on each side of a content match.
const EXCERPT_CONTEXT: usize = 40;

#[derive(Debug)]
struct Cached {
    stamp: (Option<SystemTime>, u64),
    /// Message texts joined by newlines.
    text: String,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    /// The chat's id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// When it was created.
    pub created: String,
    /// `title` when the name matched, else `content`.
    pub match_type: &'static str,
    /// For a content match: the text around it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<String>,
}

/// The in-memory text cache for one store.
#[derive(Debug, Default)]
pub struct SearchIndex {
    cache: HashMap<String, Cached>,
}

impl SearchIndex {
    /// Chats whose name (`match_type: title`) or message text (`content`, with an excerpt) contains
    /// `query`, ASCII case-insensitively, newest first. An empty query lists every chat as a title
    /// match (the client's picker opens with that list).
    pub fn search(&mut self, store: &ChatStore, query: &str) -> Vec<SearchHit> {
        let q = query.to_ascii_lowercase();
        let finder = memchr::memmem::Finder::new(q.as_bytes());
        let mut out = Vec::new();
        let mut live = std::collections::HashSet::new();
        // `text` with ASCII letters lowercased (same byte offsets), one chat at a time.
        let mut lower: Vec<u8> = Vec::new();
        for e in store.newest_first() {
            live.insert(e.id.clone());
            if e.name.to_ascii_lowercase().contains(&q) {
                out.push(SearchHit {
                    id: e.id.clone(),
                    name: e.name.clone(),
                    created: e.created.clone(),
                    match_type: "title",
                    excerpt: None,
                });
                continue;
            }
            let Some(c) = self.cached(store, &e.id) else {
                continue;
            };
            lower.clear();
            lower.extend(c.text.bytes().map(|b| b.to_ascii_lowercase()));
            if let Some(pos) = finder.find(&lower) {
                out.push(SearchHit {
                    id: e.id.clone(),
                    name: e.name.clone(),
                    created: e.created.clone(),
                    match_type: "content",
                    excerpt: Some(excerpt(&c.text, pos, q.len())),
                });
            }
        }
        self.cache.retain(|id, _| live.contains(id));
        out
    }

    fn cached(&mut self, store: &ChatStore, id: &str) -> Option<&Cached> {
        // Staleness is checked with one plain `statx` on our own validated path (a capability
        // `metadata` costs an open and a close per chat); the content is read through the handle.
        if !super::store::valid_id(id) {
            return None;
        }
        let meta = std::fs::symlink_metadata(store.chats.path().join(id).join("chat.json")).ok()?;
        let stamp = (meta.modified().ok(), meta.len());
        let fresh = self.cache.get(id).is_some_and(|c| c.stamp == stamp);
        if !fresh {
            let bytes =
                crate::store::read_regular(store.chats.dir(), format!("{id}/chat.json")).ok()?;
            let (chat, _) = Chat::parse(&bytes).ok()?;
            let mut text = String::new();
            for m in &chat.messages {
                let t = m.text_content();
                if !t.is_empty() {
                    text.push_str(&t);
                    text.push('\n');
                }
            }
            text.shrink_to_fit();
            self.cache.insert(id.to_string(), Cached { stamp, text });
        }
        self.cache.get(id)
    }
}

/// `...before MATCH after...` around byte `pos`, on character boundaries, newlines flattened.
fn excerpt(text: &str, pos: usize, len: usize) -> String {
    let mut start = pos;
    for _ in 0..EXCERPT_CONTEXT {
        if start == 0 {
            break;
        }
        start -= 1;
        while !text.is_char_boundary(start) {
            start -= 1;
        }
    }
    let mut end = (pos + len).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    for _ in 0..EXCERPT_CONTEXT {
        if end >= text.len() {
            break;
        }
        end += 1;
        while !text.is_char_boundary(end) {
            end += 1;
        }
    }
    let mut s = String::new();
    if start > 0 {
        s.push_str("...");
    }
    s.push_str(&text[start..end].replace(['\n', '\r'], " "));
    if end < text.len() {
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_respect_char_boundaries() {
        let t = format!("{}needle{}", "é".repeat(50), "ü".repeat(50));
        let pos = t.find("needle").unwrap();
        let e = excerpt(&t, pos, 6);
        assert!(e.starts_with("...") && e.ends_with("...") && e.contains("needle"));
        assert_eq!(excerpt("a needle\nb", 2, 6), "a needle b");
    }
}
