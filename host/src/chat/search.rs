//! `search_chats`: title and content matches with excerpts. Chat texts are cached in memory, keyed
//! by chat.json's modification time and size, so a repeated search reads only the chats that
//! changed. The cache holds at most [`CACHE_BYTES`] of text (the newest chats first: a session over
//! thousands of long chats would otherwise keep all of them resident); for a chat past it only a
//! 256-byte filter of the three-byte sequences of its text is kept ([`Trigrams`]), so a later search
//! reads it again only when its filter holds every sequence of the query. Only the text itself is
//! kept (no lowercased copy): each search lowercases into one reused buffer, a few milliseconds for
//! thousands of chats, instead of holding every chat twice.
//!
//! The first search of a session reads every chat, so a chat is read cheaply: only its messages'
//! text is taken from chat.json ([`chat_text`]; no [`super::model::Chat`] is built), and a chat
//! this index has not seen is opened without a stat first (its stamp comes from the open file).

use std::collections::HashMap;
use std::time::SystemTime;

use serde::Serialize;

use super::store::ChatStore;

/// The most message text the cache keeps, in bytes.
pub const CACHE_BYTES: usize = 2 << 20;

/// Characters of context on each side of a content match.
const EXCERPT_CONTEXT: usize = 40;

#[derive(Debug)]
struct Cached {
    stamp: Stamp,
    /// Message texts joined by newlines.
    text: String,
}

/// Which three-byte sequences of a chat's ASCII-lowercased text occur, hashed into 2,048 bits: a
/// query holding a sequence whose bit is clear cannot occur in the text (no false negatives).
#[derive(Debug)]
struct Trigrams {
    stamp: Stamp,
    /// Boxed: the map's table holds a pointer, not 256 bytes per chat (a table that doubles
    /// would copy them all while both copies are resident).
    bits: Box<[u64; 32]>,
}

impl Trigrams {
    fn bit(t: &[u8]) -> usize {
        let h = (u32::from(t[0]) << 16 | u32::from(t[1]) << 8 | u32::from(t[2]))
            .wrapping_mul(0x9E37_79B1);
        (h >> 21) as usize
    }

    /// The filter of `lower` (already lowercased). One pass with a rolling three-byte window:
    /// the same bits as [`Trigrams::bit`] of every window.
    fn of(stamp: Stamp, lower: &[u8]) -> Trigrams {
        let mut bits = Box::new([0u64; 32]);
        if let [a, b, rest @ ..] = lower {
            let mut w = u32::from(*a) << 8 | u32::from(*b);
            for &c in rest {
                w = (w << 8 | u32::from(c)) & 0x00FF_FFFF;
                let h = (w.wrapping_mul(0x9E37_79B1) >> 21) as usize;
                bits[h / 64] |= 1 << (h % 64);
            }
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
        // `text` (or a name) with ASCII letters lowercased (same byte offsets), one at a time.
        let mut lower: Vec<u8> = Vec::new();
        // The text of a chat the cache has no room for, one chat at a time.
        let mut uncached = String::new();
        for e in store.newest_first() {
            live.insert(e.id.as_str());
            lower.clear();
            lower.extend(e.name.bytes().map(|b| b.to_ascii_lowercase()));
            if finder.find(&lower).is_some() {
                out.push(SearchHit {
                    id: e.id.clone(),
                    name: e.name.clone(),
                    created: e.created.clone(),
                    match_type: "title",
                    excerpt: None,
                });
                continue;
            }
            // A chat this index has never seen is read right away (its stamp comes from the open
            // file); one it holds is checked for staleness first.
            let known = self.cache.contains_key(&e.id) || self.filters.contains_key(&e.id);
            let stamp = match known {
                true => match stamp_of(store, &e.id) {
                    Some(stamp) => Some(stamp),
                    None => continue,
                },
                false => None,
            };
            if let Some(f) = self.filters.get(&e.id)
                && Some(f.stamp) == stamp
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
            if let Some(stamp) = filter {
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
        self.cache.retain(|id, _| live.contains(id.as_str()));
        self.filters.retain(|id, _| live.contains(id.as_str()));
        self.cached_bytes = self.cache.values().map(|c| c.text.len()).sum();
        out
    }

    /// The bytes of message text the cache holds.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// Chat `id`'s message text: from the cache when it holds it as of `stamp`, else read (and
    /// cached while the cache has room; otherwise it is kept in `spare` for this search only, and
    /// the stamp it was read at is returned: its filter is to be kept instead).
    fn text<'s>(
        &'s mut self,
        store: &ChatStore,
        id: &str,
        stamp: Option<Stamp>,
        spare: &'s mut String,
    ) -> Option<(&'s str, Option<Stamp>)> {
        if stamp.is_some() && self.cache.get(id).is_some_and(|c| Some(c.stamp) == stamp) {
            return self.cache.get(id).map(|c| (c.text.as_str(), None));
        }
        if let Some(stale) = self.cache.remove(id) {
            self.cached_bytes -= stale.text.len();
        }
        let (bytes, stamp) = read_chat(store, id)?;
        spare.clear();
        chat_text(&bytes, spare).ok()?;
        drop(bytes);
        if self.cached_bytes + spare.len() > CACHE_BYTES {
            return Some((spare.as_str(), Some(stamp)));
        }
        self.filters.remove(id);
        self.cached_bytes += spare.len();
        let text = String::from(spare.as_str());
        let c = self
            .cache
            .entry(id.to_string())
            .insert_entry(Cached { stamp, text });
        Some((c.into_mut().text.as_str(), None))
    }
}

/// What a cached text or a filter was made from: chat.json's modification time and size.
type Stamp = (Option<SystemTime>, u64);

/// Chat `id`'s chat.json, if it is a regular file of at most [`crate::store::MAX_READ`] bytes
/// (the checks of [`crate::store::read_regular`]), and its stamp from the open file. Chats are
/// replaced by rename, never written in place, so the open file is read for exactly its size
/// (no read to find the end).
fn read_chat(store: &ChatStore, id: &str) -> Option<(Vec<u8>, Stamp)> {
    use cap_std::fs::OpenOptionsExt;
    use std::io::Read;
    if !super::store::valid_id(id) {
        return None;
    }
    let mut opts = cap_std::fs::OpenOptions::new();
    opts.read(true).custom_flags(libc::O_NONBLOCK);
    let file = store
        .chats
        .dir()
        .open_with(format!("{id}/chat.json"), &opts)
        .ok()?
        .into_std();
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > crate::store::MAX_READ {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(meta.len()).read_to_end(&mut bytes).ok()?;
    Some((bytes, (meta.modified().ok(), meta.len())))
}

/// The staleness stamp of chat `id` (chat.json's modification time and size), with one plain
/// `statx` on our own validated path (a capability `metadata` costs an open and a close per
/// chat); the content is read through the handle.
fn stamp_of(store: &ChatStore, id: &str) -> Option<Stamp> {
    if !super::store::valid_id(id) {
        return None;
    }
    let meta = std::fs::symlink_metadata(store.chats.path().join(id).join("chat.json")).ok()?;
    Some((meta.modified().ok(), meta.len()))
}

/// Appends the text [`super::model::Chat::parse`] and [`super::model::Message::text_content`] give
/// chat.json `bytes` — each message's text parts joined, then a newline, for every message with
/// text — to `out`, keeping only `messages` (their `parts` and legacy `content`) and skipping every
/// other field without building it: no tree, no map per part, no string but an escaped one.
/// Exactly what [`super::model::Chat::parse`] rejects is an error (so search skips what
/// `chat_list` and `chat_select` cannot open): the checker is the model's own field list, derived
/// the same way with discard-only field types (see [`text`]).
fn chat_text(bytes: &[u8], out: &mut String) -> Result<(), serde_json::Error> {
    text::read(bytes, out)
}

/// The streaming reader of [`chat_text`].
///
/// Each chat type of [`super::model`] has a twin here, derived with the same field names, the same
/// `#[serde(default)]`s and the same `#[serde(flatten)]` of the fields it does not know, so serde
/// makes the same decisions for both: a missing required field, a field given twice, a value of
/// the wrong type, an array where an object goes, an unknown field's value that is not JSON the
/// model can hold (a lone surrogate, a number out of range). The twins' field types check a value
/// and keep nothing ([`Str`], [`Seq`], `u64`, `bool`); only the text goes anywhere, appended by
/// the parts as they stream past to the buffer [`read`] lends ([`SINK`]). A field added to the
/// model and not here fails `chat::search::tests::chat_text_agrees_with_chat_parse_on_every_mutation`.
mod text {
    use std::borrow::Cow;
    use std::cell::RefCell;
    use std::fmt;
    use std::marker::PhantomData;

    use serde::Deserialize;
    use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    thread_local! {
        /// The buffer the chat being read appends its text to: the caller's, lent for one read.
        static SINK: RefCell<String> = const { RefCell::new(String::new()) };
    }

    /// Runs `f` on the buffer being appended to.
    fn sink<R>(f: impl FnOnce(&mut String) -> R) -> R {
        SINK.with(|s| f(&mut s.borrow_mut()))
    }

    /// Reads chat.json `bytes`, appending its messages' text to `out`.
    pub(super) fn read(bytes: &[u8], out: &mut String) -> Result<(), serde_json::Error> {
        /// Gives the lent buffer back, whatever the read did.
        struct Lent<'o>(&'o mut String);
        impl Drop for Lent<'_> {
            fn drop(&mut self) {
                sink(|s| std::mem::swap(s, self.0));
            }
        }
        sink(|s| std::mem::swap(s, out));
        let _lent = Lent(out);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        Chat::deserialize(&mut de)?;
        de.end()
    }

    /// [`crate::chat::model::Chat`], checked.
    #[derive(Deserialize)]
    #[allow(dead_code, reason = "the fields are read only to be checked")]
    struct Chat {
        #[serde(default)]
        version: u64,
        id: Str,
        #[serde(default)]
        name: Str,
        #[serde(default)]
        created: Str,
        #[serde(default)]
        model: Str,
        #[serde(default)]
        draft: Str,
        #[serde(default)]
        reasoning_effort: Str,
        #[serde(default)]
        context_files: Option<Seq<ContextFile>>,
        #[serde(default)]
        messages: Option<Seq<MessageText>>,
        #[serde(flatten)]
        extra: Rest,
    }

    /// [`crate::chat::model::ContextFile`], checked.
    #[derive(Deserialize)]
    #[allow(dead_code, reason = "the fields are read only to be checked")]
    struct ContextFile {
        path: Str,
        #[serde(default)]
        readonly: bool,
        #[serde(default)]
        external: bool,
        #[serde(default)]
        version: Str,
        #[serde(default)]
        start_line: Option<u64>,
        #[serde(default)]
        end_line: Option<u64>,
        #[serde(flatten)]
        extra: Rest,
    }

    /// [`crate::chat::model::SnapshotEntry`], checked.
    #[derive(Deserialize)]
    #[allow(dead_code, reason = "the fields are read only to be checked")]
    struct SnapshotEntry {
        path: Str,
        file_id: Str,
        #[serde(default)]
        start_line: Option<u64>,
        #[serde(default)]
        end_line: Option<u64>,
        #[serde(flatten)]
        extra: Rest,
    }

    /// [`crate::chat::model::Message`], checked; its text parts are appended as they are read.
    #[derive(Deserialize)]
    #[allow(dead_code, reason = "the fields are read only to be checked")]
    struct Message<'a> {
        /// A [`crate::chat::model::Role`] is any string.
        role: Str,
        #[serde(default)]
        parts: Parts,
        #[serde(default)]
        model: Option<Str>,
        #[serde(default)]
        timestamp: Option<Str>,
        #[serde(default)]
        context_snapshot: Option<Seq<SnapshotEntry>>,
        #[serde(default)]
        output_files: Option<Seq<Str>>,
        #[serde(default, borrow)]
        content: Option<MaybeStr<'a>>,
        #[serde(flatten)]
        extra: Rest,
    }

    /// One message: its text parts, else (no parts at all) its legacy `content` string, as
    /// [`crate::chat::model::Chat::parse`] migrates it; then a newline when it had any text.
    struct MessageText;

    impl<'de> Deserialize<'de> for MessageText {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let start = sink(|s| s.len());
            let m = Message::deserialize(d)?;
            sink(|s| {
                if m.parts.0 == 0
                    && let Some(MaybeStr(Some(legacy))) = &m.content
                {
                    s.push_str(legacy);
                }
                if s.len() > start {
                    s.push('\n');
                }
            });
            Ok(MessageText)
        }
    }

    /// A JSON string, checked and not kept (an escaped one is unescaped into the parser's
    /// scratch buffer, not a new string).
    #[derive(Default)]
    struct Str;

    impl<'de> Deserialize<'de> for Str {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Str;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a string")
                }
                fn visit_str<E>(self, _: &str) -> Result<Str, E> {
                    Ok(Str)
                }
            }
            d.deserialize_str(V)
        }
    }

    /// A JSON array of `T`s, each checked, none kept.
    struct Seq<T>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Seq<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V<T>(PhantomData<T>);
            impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
                type Value = Seq<T>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an array")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seq<T>, A::Error> {
                    while seq.next_element::<T>()?.is_some() {}
                    Ok(Seq(PhantomData))
                }
            }
            d.deserialize_seq(V(PhantomData))
        }
    }

    /// The fields a twin does not know (the model's `extra`): serde has already read each value
    /// as the model reads it (the same buffering, so the same checks), and nothing is kept.
    struct Rest;

    impl<'de> Deserialize<'de> for Rest {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Rest;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("the other fields")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Rest, A::Error> {
                    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                    Ok(Rest)
                }
            }
            d.deserialize_map(V)
        }
    }

    /// `parts`: null or an array of part objects; appends the text parts, holds how many parts.
    #[derive(Default)]
    struct Parts(usize);

    impl<'de> Deserialize<'de> for Parts {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Parts;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("null or an array of parts")
                }
                fn visit_none<E>(self) -> Result<Parts, E> {
                    Ok(Parts(0))
                }
                fn visit_unit<E>(self) -> Result<Parts, E> {
                    Ok(Parts(0))
                }
                fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Parts, D::Error> {
                    d.deserialize_seq(self)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Parts, A::Error> {
                    let mut n = 0;
                    while seq.next_element::<Part>()?.is_some() {
                        n += 1;
                    }
                    Ok(Parts(n))
                }
            }
            d.deserialize_option(V)
        }
    }

    /// One part, which the model keeps as a JSON object (a map: a repeated key is not an error,
    /// the last one counts): its `content` is appended when its `type` is `text` and the content a
    /// string. The one reader here that is not derived: a derived struct refuses repeated keys.
    struct Part;

    #[derive(Deserialize)]
    #[serde(field_identifier, rename_all = "lowercase")]
    enum PartKey {
        Type,
        Content,
        #[serde(other)]
        Other,
    }

    impl<'de> Deserialize<'de> for Part {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Part;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a part object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
                    let mut is_text = false;
                    let mut content: Option<Cow<'de, str>> = None;
                    while let Some(key) = map.next_key::<PartKey>()? {
                        match key {
                            PartKey::Type => {
                                is_text =
                                    map.next_value::<MaybeStr<'de>>()?.0.as_deref() == Some("text");
                            }
                            PartKey::Content => content = map.next_value::<MaybeStr<'de>>()?.0,
                            PartKey::Other => {
                                map.next_value::<Any>()?;
                            }
                        }
                    }
                    if is_text && let Some(c) = content {
                        sink(|s| s.push_str(&c));
                    }
                    Ok(Part)
                }
            }
            d.deserialize_map(V)
        }
    }

    /// Any JSON value a `serde_json::Value` can hold, read as one is read (strings checked, numbers
    /// in range) and not kept (not even an escaped string).
    struct Any;

    impl<'de> Deserialize<'de> for Any {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Any;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_str<E>(self, _: &str) -> Result<Any, E> {
                    Ok(Any)
                }
                fn visit_bool<E>(self, _: bool) -> Result<Any, E> {
                    Ok(Any)
                }
                fn visit_i64<E>(self, _: i64) -> Result<Any, E> {
                    Ok(Any)
                }
                fn visit_u64<E>(self, _: u64) -> Result<Any, E> {
                    Ok(Any)
                }
                fn visit_f64<E>(self, _: f64) -> Result<Any, E> {
                    Ok(Any)
                }
                fn visit_unit<E>(self) -> Result<Any, E> {
                    Ok(Any)
                }
                fn visit_none<E>(self) -> Result<Any, E> {
                    Ok(Any)
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Any, A::Error> {
                    while seq.next_element::<Any>()?.is_some() {}
                    Ok(Any)
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Any, A::Error> {
                    while map.next_entry::<Any, Any>()?.is_some() {}
                    Ok(Any)
                }
            }
            d.deserialize_any(V)
        }
    }

    /// Any JSON value, checked as [`Any`]; the string when it is one (borrowed from the input
    /// unless escaped).
    struct MaybeStr<'de>(Option<Cow<'de, str>>);

    impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(MaybeStrVisitor)
        }
    }

    struct MaybeStrVisitor;

    impl<'de> Visitor<'de> for MaybeStrVisitor {
        type Value = MaybeStr<'de>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(MaybeStr(Some(Cow::Borrowed(v))))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(MaybeStr(Some(Cow::Owned(v.to_string()))))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok(MaybeStr(Some(Cow::Owned(v))))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(MaybeStr(None))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(MaybeStr(None))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(MaybeStr(None))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(MaybeStr(None))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(MaybeStr(None))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(MaybeStr(None))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<Any>()?.is_some() {}
            Ok(MaybeStr(None))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<Any, Any>()?.is_some() {}
            Ok(MaybeStr(None))
        }
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
    use crate::chat::model::{Chat, Message, Role};

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// Counts the allocations each thread makes (for the cost of a cold search).
    struct Counting;

    thread_local! {
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    fn count() {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
    }

    // SAFETY: every call is passed on to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count();
            // SAFETY: the caller's contract, passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Issue 30: the first search of a session reads every chat, and it read each into a whole
    /// [`Chat`] (a map per part, a string per field, serde's buffering of flattened fields: about
    /// 175 ms over 5,000 chats). It now reads only the message text, so a chat costs a handful of
    /// allocations (the path, the file's bytes, its cache entry), however many messages it has.
    #[test]
    fn a_cold_search_reads_chats_without_building_them() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut store = ChatStore::open(tmp.path(), false).expect("open");
        const N: u64 = 100;
        for i in 0..N {
            let mut chat = store
                .create(Some(&format!("chat {i}")), "m/x")
                .expect("create");
            for j in 0..4 {
                chat.messages.push(Message::text(
                    Role::User,
                    &format!("question {j} about the integrator of chat {i}"),
                ));
                chat.messages.push(Message::text(
                    Role::Assistant,
                    &format!("answer {j}: clamp the velocities"),
                ));
            }
            store.save(&chat).expect("save");
        }
        let mut index = SearchIndex::default();
        let before = ALLOCS.with(Cell::get);
        let hits = index.search(&store, "integrator of chat 7");
        let per_chat = (ALLOCS.with(Cell::get) - before) / N;
        assert_eq!(hits.len(), 11, "{hits:?}");
        assert!(per_chat <= 12, "{per_chat} allocations per chat");
    }

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

    /// The text [`chat_text`] reads is what a whole [`Chat`] gives, message by message: text parts
    /// only (any key order, escapes, repeated keys), a legacy `content` string only when there are
    /// no parts, nulls as empty; and a chat [`Chat::parse`] rejects for its messages' shape is
    /// rejected too.
    #[test]
    fn chat_text_reads_what_a_parsed_chat_holds() {
        fn whole(bytes: &[u8]) -> Option<String> {
            let (chat, _) = Chat::parse(bytes).ok()?;
            let mut s = String::new();
            for m in &chat.messages {
                let t = m.text_content();
                if !t.is_empty() {
                    s.push_str(&t);
                    s.push('\n');
                }
            }
            Some(s)
        }
        let chats = [
            r#"{"id":"a","messages":[{"role":"user","parts":[{"type":"text","content":"hi"},{"type":"code","content":"x"},{"content":"b\u00e9\n\"q\"","type":"text"}]},{"role":"assistant","parts":[]}]}"#,
            r#"{"id":"a","version":1,"messages":[{"role":"user","content":"legacy"},{"role":"user","content":{"k":[1,2]}},{"role":"user","content":null},{"role":"user","content":"dropped","parts":[{"type":"text","content":"kept"}]}]}"#,
            r#"{"messages":null,"id":"a"}"#,
            r#"{"id":"a","extra":{"deep":[[{"x":1e5}]]},"messages":[{"role":"user","parts":null,"content":"c"}]}"#,
            r#"{"id":"a","messages":[{"role":"user","parts":[{"type":"text","content":5},{"type":"text"},{"type":"text","content":"a","content":"b"},{"type":"raw","type":"text","content":"t"}]}]}"#,
            r#"{"id":"a","messages":[{"role":"user","parts":[{"type":"text","content":"a"},{"type":"thinking","content":"b"},{"type":"text","content":"c"}],"model":"m","extra":[null]}]}"#,
        ];
        for c in chats {
            let mut got = String::new();
            chat_text(c.as_bytes(), &mut got).expect(c);
            assert_eq!(Some(got), whole(c.as_bytes()), "{c}");
        }
        for bad in [
            r#"{"id":"a","messages":[{"role":"user","parts":["text"]}]}"#,
            r#"{"id":"a","messages":{"role":"user"}}"#,
            r#"{"id":"a","messages":[5]}"#,
            r#"[{"id":"a"}]"#,
            r#"{"id":"a","messages":[]} x"#,
            r#"{"id":"a","messages":[{"role":"user","parts":[{"type":"text","content":"a"}]}"#,
        ] {
            assert!(whole(bad.as_bytes()).is_none(), "{bad}");
            assert!(
                chat_text(bad.as_bytes(), &mut String::new()).is_err(),
                "{bad}"
            );
        }
    }

    /// `chat_text` refuses exactly the chat.json files [`Chat::parse`] refuses (which `chat_list`
    /// skips and `chat_select` cannot open): a missing `id` or `role`, fields of the wrong type,
    /// fields given twice. It searched them, and the hit could not be opened.
    #[test]
    fn chat_text_refuses_what_chat_parse_refuses() {
        let cases = [
            r#"{"messages":[]}"#,
            r#"{"id":5,"messages":[]}"#,
            r#"{"id":null}"#,
            r#"{"id":"a","id":"b"}"#,
            r#"{"\u0069d":"a","messages":[]}"#,
            r#"{"id":"a","name":null}"#,
            r#"{"id":"a","name":3}"#,
            r#"{"id":"a","name":"n","name":"m"}"#,
            r#"{"id":"a","created":{}}"#,
            r#"{"id":"a","model":true}"#,
            r#"{"id":"a","draft":[]}"#,
            r#"{"id":"a","reasoning_effort":null}"#,
            r#"{"id":"a","reasoning_effort":"high"}"#,
            r#"{"id":"a","version":2}"#,
            r#"{"id":"a","version":-1}"#,
            r#"{"id":"a","version":2.0}"#,
            r#"{"id":"a","version":"2"}"#,
            r#"{"id":"a","version":null}"#,
            r#"{"id":"a","context_files":null}"#,
            r#"{"id":"a","context_files":[{"path":"x"}]}"#,
            r#"{"id":"a","context_files":[{}]}"#,
            r#"{"id":"a","context_files":[{"path":"x","path":"y"}]}"#,
            r#"{"id":"a","context_files":[{"path":"x","readonly":"yes"}]}"#,
            r#"{"id":"a","context_files":[{"path":"x","external":null}]}"#,
            r#"{"id":"a","context_files":[{"path":"x","version":"v","start_line":null,"end_line":3,"more":[1]}]}"#,
            r#"{"id":"a","context_files":[{"path":"x","start_line":-3}]}"#,
            r#"{"id":"a","context_files":{"path":"x"}}"#,
            r#"{"id":"a","context_files":[["x"]]}"#,
            r#"{"id":"a","messages":[{"parts":[]}]}"#,
            r#"{"id":"a","messages":[{"role":null}]}"#,
            r#"{"id":"a","messages":[{"role":7}]}"#,
            r#"{"id":"a","messages":[{"role":"tool"}]}"#,
            r#"{"id":"a","messages":[{"role":"user","role":"user"}]}"#,
            r#"{"id":"a","messages":[{"role":"user","model":null,"timestamp":"t"}]}"#,
            r#"{"id":"a","messages":[{"role":"user","model":1}]}"#,
            r#"{"id":"a","messages":[{"role":"user","timestamp":["t"]}]}"#,
            r#"{"id":"a","messages":[{"role":"user","output_files":["a",1]}]}"#,
            r#"{"id":"a","messages":[{"role":"user","output_files":null}]}"#,
            r#"{"id":"a","messages":[{"role":"user","output_files":"a"}]}"#,
            r#"{"id":"a","messages":[{"role":"user","context_snapshot":[{"path":"a"}]}]}"#,
            r#"{"id":"a","messages":[{"role":"user","context_snapshot":[{"path":"a","file_id":"f","start_line":1,"x":{}}]}]}"#,
            r#"{"id":"a","messages":[{"role":"user","context_snapshot":[{"path":"a","file_id":"f","end_line":"1"}]}]}"#,
            r#"{"id":"a","messages":[{"role":"user","context_snapshot":null,"content":"c"}]}"#,
            r#"{"id":"a","messages":[{"role":"user","parts":[{"type":"text","content":"x","type":"text"}]}]}"#,
            r#"{"id":"a","unknown":{"x":[1,{"y":null}]},"messages":[{"role":"user","more":[[]]}]}"#,
        ];
        for c in cases {
            let mut got = String::new();
            let text = chat_text(c.as_bytes(), &mut got).map(|()| got);
            let parsed = Chat::parse(c.as_bytes()).map(|(chat, _)| {
                let mut s = String::new();
                for m in &chat.messages {
                    let t = m.text_content();
                    if !t.is_empty() {
                        s.push_str(&t);
                        s.push('\n');
                    }
                }
                s
            });
            assert_eq!(text.ok(), parsed.ok(), "{c}");
        }
    }

    /// The text of every message of chat.json `bytes` as a whole [`Chat`] gives it, if
    /// [`Chat::parse`] takes it (what `chat_text` must give).
    fn parsed_text(bytes: &[u8]) -> Option<String> {
        let (chat, _) = Chat::parse(bytes).ok()?;
        let mut s = String::new();
        for m in &chat.messages {
            let t = m.text_content();
            if !t.is_empty() {
                s.push_str(&t);
                s.push('\n');
            }
        }
        Some(s)
    }

    /// A chat with every field of the model set (none left to a default the model does not
    /// write), as the model writes it, plus a message with only a legacy `content` (read, never
    /// written). A struct literal: a field added to the model must be given a value here, and
    /// then every mutation below covers it.
    fn every_field_set() -> serde_json::Value {
        use crate::chat::model::{ContextFile, SnapshotEntry, text_part};
        use serde_json::json;
        let mut extra = serde_json::Map::new();
        extra.insert("custom".into(), json!({"k": [1, "two"]}));
        let context_file = ContextFile {
            path: "src/a.rs".into(),
            readonly: true,
            external: true,
            version: "v1".into(),
            start_line: Some(2),
            end_line: Some(9),
            extra: extra.clone(),
        };
        let entry = SnapshotEntry {
            path: "src/a.rs".into(),
            file_id: "f1".into(),
            start_line: Some(2),
            end_line: Some(9),
            extra: extra.clone(),
        };
        let mut code = text_part("fn main() {}");
        code.insert("type".into(), json!("code"));
        let question = Message {
            role: Role::User,
            parts: vec![text_part("why \"this\"?\n"), code],
            model: Some("m/x".into()),
            timestamp: Some("2025-01-19T22:00:00Z".into()),
            context_snapshot: Some(vec![entry]),
            output_files: Some(vec!["src/b.rs".into()]),
            content: None,
            extra: extra.clone(),
        };
        let chat = Chat {
            version: 2,
            id: "c1".into(),
            name: "name".into(),
            created: "2025-01-19T22:00:00Z".into(),
            model: "m/x".into(),
            draft: "draft".into(),
            reasoning_effort: "high".into(),
            context_files: vec![context_file],
            messages: vec![question, Message::text(Role::Assistant, "because")],
            extra,
        };
        let mut v = serde_json::to_value(&chat).expect("a chat serializes");
        if let Some(messages) = v["messages"].as_array_mut() {
            messages.push(json!({"role": "user", "content": "legacy text"}));
        }
        v
    }

    /// Where a value sits in a JSON tree.
    #[derive(Clone, PartialEq, Debug)]
    enum Seg {
        Key(String),
        Index(usize),
    }

    /// One change to the object or array at some path.
    enum Edit {
        Remove(Seg),
        Twice(Seg),
        Set(Seg, &'static [u8]),
        Add(&'static [u8]),
    }

    /// `v` as JSON text, with `edit` made to the container at `target`. Written by hand: a
    /// repeated key and text that is not UTF-8 are among the edits.
    fn emit(v: &serde_json::Value, path: &mut Vec<Seg>, target: &[Seg], edit: &Edit) -> Vec<u8> {
        enum Piece<'v> {
            Child(Seg, &'v serde_json::Value),
            Raw(&'static [u8]),
        }
        let (open, close, mut pieces): (u8, u8, Vec<(Option<&str>, Piece)>) = match v {
            serde_json::Value::Object(m) => (
                b'{',
                b'}',
                m.iter()
                    .map(|(k, c)| (Some(k.as_str()), Piece::Child(Seg::Key(k.clone()), c)))
                    .collect(),
            ),
            serde_json::Value::Array(a) => (
                b'[',
                b']',
                a.iter()
                    .enumerate()
                    .map(|(i, c)| (None, Piece::Child(Seg::Index(i), c)))
                    .collect(),
            ),
            leaf => return serde_json::to_vec(leaf).expect("a leaf serializes"),
        };
        if path.as_slice() == target {
            let at = |s: &Seg, pieces: &[(Option<&str>, Piece)]| {
                pieces
                    .iter()
                    .position(|(_, p)| matches!(p, Piece::Child(c, _) if c == s))
            };
            match edit {
                Edit::Remove(s) => {
                    if let Some(i) = at(s, &pieces) {
                        pieces.remove(i);
                    }
                }
                Edit::Twice(s) => {
                    if let Some(i) = at(s, &pieces)
                        && let (k, Piece::Child(c, val)) = &pieces[i]
                    {
                        let again = (*k, Piece::Child(c.clone(), val));
                        pieces.insert(i + 1, again);
                    }
                }
                Edit::Set(s, raw) => {
                    if let Some(i) = at(s, &pieces) {
                        pieces[i].1 = Piece::Raw(raw);
                    }
                }
                Edit::Add(raw) => {
                    let key = (open == b'{').then_some("zz_unknown");
                    pieces.push((key, Piece::Raw(raw)));
                }
            }
        }
        let mut out = vec![open];
        for (i, (key, piece)) in pieces.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if let Some(k) = key {
                out.extend(serde_json::to_vec(k).expect("a key serializes"));
                out.push(b':');
            }
            match piece {
                Piece::Child(seg, val) => {
                    path.push(seg.clone());
                    out.extend(emit(val, path, target, edit));
                    path.pop();
                }
                Piece::Raw(raw) => out.extend_from_slice(raw),
            }
        }
        out.push(close);
        out
    }

    /// Every container of `v` (its path) and the segments of its children.
    fn containers(v: &serde_json::Value, path: &mut Vec<Seg>, out: &mut Vec<(Vec<Seg>, Vec<Seg>)>) {
        let children: Vec<(Seg, &serde_json::Value)> = match v {
            serde_json::Value::Object(m) => {
                m.iter().map(|(k, c)| (Seg::Key(k.clone()), c)).collect()
            }
            serde_json::Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, c)| (Seg::Index(i), c))
                .collect(),
            _ => return,
        };
        out.push((
            path.clone(),
            children.iter().map(|(s, _)| s.clone()).collect(),
        ));
        for (seg, child) in children {
            path.push(seg);
            containers(child, path, out);
            path.pop();
        }
    }

    /// `chat_text` takes exactly the chats [`Chat::parse`] takes, and reads the same text from
    /// them, over mutations of a chat with every field of the model set: each field or element
    /// removed, given twice, or replaced by each value below (wrong types, nulls, a lone surrogate,
    /// a number out of range, text that is not UTF-8, objects of the other chat types), and an
    /// unknown field of each value added to every object. (The hand-written checker took unknown
    /// fields' values without reading them as the model does: a lone surrogate or an out-of-range
    /// number in one made `Chat::parse` refuse a chat search still read.)
    #[test]
    fn chat_text_agrees_with_chat_parse_on_every_mutation() {
        const VALUES: &[&[u8]] = &[
            b"null",
            b"true",
            b"0",
            b"7",
            b"-1",
            b"2.5",
            b"1e400",
            b"18446744073709551616",
            br#""s""#,
            br#""""#,
            br#""\ud800""#,
            b"\"\xff\"",
            br#""\u00e9\n""#,
            b"[]",
            br#"["s"]"#,
            b"[1e400]",
            b"{}",
            br#"{"k":"\ud800"}"#,
            br#"{"path":"p","file_id":"f","role":"user","type":"text","content":"z"}"#,
            br#"[{"type":"text","content":"x"}]"#,
            br#"[{"path":"p","file_id":"f"}]"#,
            br#"[{"role":"user","parts":[{"type":"text","content":"y"}]}]"#,
        ];
        let chat = every_field_set();
        let mut all = Vec::new();
        containers(&chat, &mut Vec::new(), &mut all);
        let (mut taken, mut refused) = (0, 0);
        for (target, children) in &all {
            let mut edits: Vec<Edit> = VALUES.iter().map(|v| Edit::Add(v)).collect();
            for child in children {
                edits.push(Edit::Remove(child.clone()));
                edits.push(Edit::Twice(child.clone()));
                edits.extend(VALUES.iter().map(|v| Edit::Set(child.clone(), v)));
            }
            for edit in &edits {
                let bytes = emit(&chat, &mut Vec::new(), target, edit);
                let mut got = String::new();
                let got = chat_text(&bytes, &mut got).map(|()| got).ok();
                let want = parsed_text(&bytes);
                assert_eq!(got, want, "{}", String::from_utf8_lossy(&bytes));
                match want {
                    Some(_) => taken += 1,
                    None => refused += 1,
                }
            }
        }
        // Both decisions are well represented (the test would pass vacuously otherwise).
        assert!(
            taken > 300 && refused > 300,
            "{taken} taken, {refused} refused"
        );
        // The unmutated chat reads whole.
        let bytes = serde_json::to_vec(&chat).expect("serializes");
        let mut got = String::new();
        chat_text(&bytes, &mut got).expect("the chat reads");
        assert_eq!(got, "why \"this\"?\n\nbecause\nlegacy text\n");
    }

    /// The one-pass filter sets exactly the bits of every three-byte window.
    #[test]
    fn the_rolling_filter_is_the_filter_of_every_window() {
        let text = "ab\nZz é-needle 0123456789 the integrator".to_ascii_lowercase();
        for len in 0..text.len() {
            let t = &text.as_bytes()[..len];
            let mut want = [0u64; 32];
            for w in t.windows(3) {
                let b = Trigrams::bit(w);
                want[b / 64] |= 1 << (b % 64);
            }
            assert_eq!(*Trigrams::of((None, 0), t).bits, want, "{len}");
        }
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
