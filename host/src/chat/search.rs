//! `search_chats`: title and content matches with excerpts. Chat texts are cached in memory, keyed
//! by chat.json's modification time and size, so a repeated search reads only the chats that
//! changed. The cache holds at most [`CACHE_BYTES`] of text (the newest chats first: a session over
//! thousands of long chats would otherwise keep all of them resident); for a chat past it only a
//! 256-byte filter of the three-byte sequences of its text is kept ([`Trigrams`]), so a later search
//! reads it again only when its filter holds every sequence of the query. Only the text itself is kept (no lowercased copy): each search lowercases
//! into one reused buffer, a few milliseconds for thousands of chats, instead of holding every chat
//! twice.

use std::collections::HashMap;
use std::time::SystemTime;

use serde::Serialize;

use super::model::Chat;
use super::store::ChatStore;

/// The most message text the cache keeps, in bytes.
pub const CACHE_BYTES: usize = 2 << 20;

/// Characters of context on each side of a content match.
const EXCERPT_CONTEXT: usize = 40;

#[derive(Debug)]
struct Cached {
    stamp: (Option<SystemTime>, u64),
    /// Message texts joined by newlines.
    text: String,
}

/// Which three-byte sequences of a chat's ASCII-lowercased text occur, hashed into 2,048 bits: a
/// query holding a sequence whose bit is clear cannot occur in the text (no false negatives).
#[derive(Debug)]
struct Trigrams {
    stamp: (Option<SystemTime>, u64),
    bits: Box<[u64; 32]>,
}

impl Trigrams {
    fn bit(t: &[u8]) -> usize {
        let h = (u32::from(t[0]) << 16 | u32::from(t[1]) << 8 | u32::from(t[2]))
            .wrapping_mul(0x9E37_79B1);
        (h >> 21) as usize
    }

    /// The filter of `lower` (already lowercased).
    fn of(stamp: (Option<SystemTime>, u64), lower: &[u8]) -> Trigrams {
        let mut bits = Box::new([0u64; 32]);
        for t in lower.windows(3) {
            let b = Trigrams::bit(t);
            bits[b / 64] |= 1 << (b % 64);
        }
        Trigrams { stamp, bits }
    }

    /// Whether `query` (lowercased) may occur: every one of its sequences is in the filter.
    /// Queries shorter than three bytes always may.
    fn may_hold(&self, query: &[u8]) -> bool {
        query.windows(3).all(|t| {
            let b = Trigrams::bit(t);
            self.bits[b / 64] & (1 << (b % 64)) != 0
        })
    }
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
    /// The bytes of text in `cache`.
    cached_bytes: usize,
    /// The filters of the chats whose text the cache has no room for.
    filters: HashMap<String, Trigrams>,
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
        // The text of a chat the cache has no room for, one chat at a time.
        let mut uncached = String::new();
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
            let Some(stamp) = stamp_of(store, &e.id) else {
                continue;
            };
            if let Some(f) = self.filters.get(&e.id)
                && f.stamp == stamp
                && !f.may_hold(q.as_bytes())
            {
                continue;
            }
            let Some((text, filter)) = self.text(store, &e.id, stamp, &mut uncached) else {
                continue;
            };
            lower.clear();
            lower.extend(text.bytes().map(|b| b.to_ascii_lowercase()));
            let hit = finder.find(&lower).map(|pos| excerpt(text, pos, q.len()));
            if filter {
                self.filters
                    .insert(e.id.clone(), Trigrams::of(stamp, &lower));
            }
            if let Some(excerpt) = hit {
                out.push(SearchHit {
                    id: e.id.clone(),
                    name: e.name.clone(),
                    created: e.created.clone(),
                    match_type: "content",
                    excerpt: Some(excerpt),
                });
            }
        }
        self.cache.retain(|id, _| live.contains(id));
        self.filters.retain(|id, _| live.contains(id));
        self.cached_bytes = self.cache.values().map(|c| c.text.len()).sum();
        out
    }

    /// The bytes of message text the cache holds.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// Chat `id`'s message text as of `stamp`: from the cache when fresh, else read (and cached
    /// while the cache has room; otherwise it is kept in `spare` for this search only, and the
    /// flag says that its filter is to be kept instead).
    fn text<'s>(
        &'s mut self,
        store: &ChatStore,
        id: &str,
        stamp: (Option<SystemTime>, u64),
        spare: &'s mut String,
    ) -> Option<(&'s str, bool)> {
        if self.cache.get(id).is_some_and(|c| c.stamp == stamp) {
            return self.cache.get(id).map(|c| (c.text.as_str(), false));
        }
        if let Some(stale) = self.cache.remove(id) {
            self.cached_bytes -= stale.text.len();
        }
        let bytes =
            crate::store::read_regular(store.chats.dir(), format!("{id}/chat.json")).ok()?;
        let (chat, _) = Chat::parse(&bytes).ok()?;
        drop(bytes);
        spare.clear();
        for m in &chat.messages {
            let t = m.text_content();
            if !t.is_empty() {
                spare.push_str(&t);
                spare.push('\n');
            }
        }
        drop(chat);
        if self.cached_bytes + spare.len() > CACHE_BYTES {
            return Some((spare.as_str(), true));
        }
        self.filters.remove(id);
        self.cached_bytes += spare.len();
        let text = String::from(spare.as_str());
        let c = self
            .cache
            .entry(id.to_string())
            .insert_entry(Cached { stamp, text });
        Some((c.into_mut().text.as_str(), false))
    }
}

/// The staleness stamp of chat `id` (chat.json's modification time and size), with one plain
/// `statx` on our own validated path (a capability `metadata` costs an open and a close per
/// chat); the content is read through the handle.
fn stamp_of(store: &ChatStore, id: &str) -> Option<(Option<SystemTime>, u64)> {
    if !super::store::valid_id(id) {
        return None;
    }
    let meta = std::fs::symlink_metadata(store.chats.path().join(id).join("chat.json")).ok()?;
    Some((meta.modified().ok(), meta.len()))
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
    use crate::chat::model::{Message, Role};

    /// Issue 30: the cache kept every chat's text for the whole session (16 MB over 5,000 chats of
    /// 3.3 KB). It now keeps at most `CACHE_BYTES`; chats past it are still found, read again.
    #[test]
    fn the_text_cache_is_bounded_and_chats_past_it_are_still_found() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut store = ChatStore::open(tmp.path(), false).expect("open");
        let big = "lorem ipsum ".repeat(CACHE_BYTES / 12 / 2);
        let mut ids = Vec::new();
        for i in 0..5 {
            let mut chat = store
                .create(Some(&format!("chat {i}")), "m/x")
                .expect("create");
            chat.messages
                .push(Message::text(Role::User, &format!("{big} needle-{i}")));
            store.save(&chat).expect("save");
            ids.push(chat.id);
        }
        let mut index = SearchIndex::default();
        for round in 0..2 {
            for (i, id) in ids.iter().enumerate() {
                let hits = index.search(&store, &format!("NEEDLE-{i}"));
                assert_eq!(hits.len(), 1, "round {round}, chat {i}: {hits:?}");
                assert_eq!(&hits[0].id, id);
                assert_eq!(hits[0].match_type, "content");
                assert!(
                    hits[0]
                        .excerpt
                        .as_deref()
                        .unwrap()
                        .contains(&format!("needle-{i}"))
                );
            }
            assert!(
                index.cached_bytes() <= CACHE_BYTES,
                "{}",
                index.cached_bytes()
            );
            assert!(index.cached_bytes() > 0);
            let held: usize = index.cache.values().map(|c| c.text.len()).sum();
            assert_eq!(held, index.cached_bytes());
            // The chats past the cache keep a filter instead.
            assert_eq!(index.cache.len() + index.filters.len(), ids.len());
        }
        // A chat past the cache that changed is read again, not judged by its old filter.
        let victim = ids
            .iter()
            .find(|id| index.filters.contains_key(*id))
            .expect("a filtered chat");
        let mut chat = store.load(victim).expect("load");
        chat.messages
            .push(Message::text(Role::User, "a fresh zebra-word"));
        store.save(&chat).expect("save");
        let hits = index.search(&store, "zebra-word");
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(&hits[0].id, victim);
    }

    /// The filter never hides a text that holds the query (any case, any position, spanning the
    /// newline between messages), and it rules out most that do not.
    #[test]
    fn trigram_filters_have_no_false_negatives() {
        let text = "Hello World\nsecond message: Needle-42 and more".to_ascii_lowercase();
        let f = Trigrams::of((None, 0), text.as_bytes());
        for q in [
            "hello",
            "world\nsec",
            "needle-42",
            "d m",
            "e",
            "he",
            "message: needle",
        ] {
            assert!(f.may_hold(q.as_bytes()), "{q}");
        }
        let absent = ["zebra", "qqq", "xylophone", "needle-43x", "jjjkkk"];
        assert!(absent.iter().filter(|q| f.may_hold(q.as_bytes())).count() <= 1);
    }

    #[test]
    fn excerpts_respect_char_boundaries() {
        let t = format!("{}needle{}", "é".repeat(50), "ü".repeat(50));
        let pos = t.find("needle").unwrap();
        let e = excerpt(&t, pos, 6);
        assert!(e.starts_with("...") && e.ends_with("...") && e.contains("needle"));
        assert_eq!(excerpt("a needle\nb", 2, 6), "a needle b");
    }
}
