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

/// Appends the text [`super::model::Chat::parse`] and [`super::model::Message::text_content`] give chat.json
/// `bytes` — each message's text parts joined, then a newline, for every message with text — to
/// `out`, keeping only `messages` (their `parts` and legacy `content`) and skipping every other
/// field without building it: no tree, no map per part, no string but an escaped one. Exactly what
/// [`super::model::Chat::parse`] rejects is an error (so search skips what `chat_list` and
/// `chat_select` cannot open): malformed JSON, a missing `id` or message `role`, a field of the
/// wrong type (a number for `name`, a null `role`, a context entry without `path`...), a field
/// given twice; fields the model does not know are only checked to be JSON.
fn chat_text(bytes: &[u8], out: &mut String) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde::de::DeserializeSeed::deserialize(text::ChatText(out), &mut de)?;
    de.end()
}

/// The streaming readers of [`chat_text`].
mod text {
    use std::borrow::Cow;
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    /// The chat object: `messages` is read, and every other field [`super::super::model::Chat`]
    /// knows is checked to have the type `Chat::parse` requires (`id` present, strings where
    /// strings go, ...) without being kept, so a chat `Chat::parse` rejects is rejected here too.
    pub(super) struct ChatText<'o>(pub(super) &'o mut String);

    #[derive(serde::Deserialize)]
    #[serde(field_identifier, rename_all = "snake_case")]
    enum ChatKey {
        Version,
        Id,
        Name,
        Created,
        Model,
        Draft,
        ReasoningEffort,
        ContextFiles,
        Messages,
        #[serde(other)]
        Other,
    }

    impl<'de> DeserializeSeed<'de> for ChatText<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for ChatText<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a chat object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = Seen::default();
            while let Some(key) = map.next_key::<ChatKey>()? {
                match key {
                    ChatKey::Version => {
                        seen.once::<A::Error>(0, "version")?;
                        map.next_value::<u64>()?;
                    }
                    ChatKey::Id => {
                        seen.once::<A::Error>(1, "id")?;
                        map.next_value::<Str>()?;
                    }
                    ChatKey::Name => {
                        seen.once::<A::Error>(2, "name")?;
                        map.next_value::<Str>()?;
                    }
                    ChatKey::Created => {
                        seen.once::<A::Error>(3, "created")?;
                        map.next_value::<Str>()?;
                    }
                    ChatKey::Model => {
                        seen.once::<A::Error>(4, "model")?;
                        map.next_value::<Str>()?;
                    }
                    ChatKey::Draft => {
                        seen.once::<A::Error>(5, "draft")?;
                        map.next_value::<Str>()?;
                    }
                    ChatKey::ReasoningEffort => {
                        seen.once::<A::Error>(6, "reasoning_effort")?;
                        map.next_value::<Str>()?;
                    }
                    ChatKey::ContextFiles => {
                        seen.once::<A::Error>(7, "context_files")?;
                        map.next_value::<Option<Seq<ContextFile>>>()?;
                    }
                    ChatKey::Messages => {
                        seen.once::<A::Error>(8, "messages")?;
                        map.next_value_seed(Messages(&mut *self.0))?;
                    }
                    ChatKey::Other => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            seen.required::<A::Error>(1, "id")
        }
    }

    /// Which known fields of an object were read: a repeated one is an error (as in a derived
    /// `Deserialize`), and so is a required one that is missing.
    #[derive(Default)]
    struct Seen(u32);

    impl Seen {
        fn once<E: serde::de::Error>(&mut self, bit: u32, name: &'static str) -> Result<(), E> {
            if self.0 & 1 << bit != 0 {
                return Err(E::duplicate_field(name));
            }
            self.0 |= 1 << bit;
            Ok(())
        }

        fn required<E: serde::de::Error>(&self, bit: u32, name: &'static str) -> Result<(), E> {
            match self.0 & 1 << bit {
                0 => Err(E::missing_field(name)),
                _ => Ok(()),
            }
        }
    }

    /// A JSON string, checked and not kept (an escaped one is unescaped into the parser's
    /// scratch buffer, not a new string).
    struct Str;

    impl<'de> serde::Deserialize<'de> for Str {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_str(StrVisitor)
        }
    }

    struct StrVisitor;

    impl Visitor<'_> for StrVisitor {
        type Value = Str;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E>(self, _: &str) -> Result<Str, E> {
            Ok(Str)
        }
    }

    /// A JSON array of `T`s, each checked, none kept.
    struct Seq<T>(PhantomData<T>);

    impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Seq<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_seq(SeqVisitor(PhantomData))
        }
    }

    struct SeqVisitor<T>(PhantomData<T>);

    impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for SeqVisitor<T> {
        type Value = Seq<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Seq<T>, A::Error> {
            while seq.next_element::<T>()?.is_some() {}
            Ok(Seq(PhantomData))
        }
    }

    /// A context entry, checked as [`super::super::model::ContextFile`] reads it.
    struct ContextFile;

    #[derive(serde::Deserialize)]
    #[serde(field_identifier, rename_all = "snake_case")]
    enum ContextFileKey {
        Path,
        Readonly,
        External,
        Version,
        StartLine,
        EndLine,
        #[serde(other)]
        Other,
    }

    impl<'de> serde::Deserialize<'de> for ContextFile {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(ContextFileVisitor)
        }
    }

    struct ContextFileVisitor;

    impl<'de> Visitor<'de> for ContextFileVisitor {
        type Value = ContextFile;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a context file object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContextFile, A::Error> {
            let mut seen = Seen::default();
            while let Some(key) = map.next_key::<ContextFileKey>()? {
                match key {
                    ContextFileKey::Path => {
                        seen.once::<A::Error>(0, "path")?;
                        map.next_value::<Str>()?;
                    }
                    ContextFileKey::Readonly => {
                        seen.once::<A::Error>(1, "readonly")?;
                        map.next_value::<bool>()?;
                    }
                    ContextFileKey::External => {
                        seen.once::<A::Error>(2, "external")?;
                        map.next_value::<bool>()?;
                    }
                    ContextFileKey::Version => {
                        seen.once::<A::Error>(3, "version")?;
                        map.next_value::<Str>()?;
                    }
                    ContextFileKey::StartLine => {
                        seen.once::<A::Error>(4, "start_line")?;
                        map.next_value::<Option<u64>>()?;
                    }
                    ContextFileKey::EndLine => {
                        seen.once::<A::Error>(5, "end_line")?;
                        map.next_value::<Option<u64>>()?;
                    }
                    ContextFileKey::Other => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            seen.required::<A::Error>(0, "path")?;
            Ok(ContextFile)
        }
    }

    /// An entry of a message's `context_snapshot`, checked as
    /// [`super::super::model::SnapshotEntry`] reads it.
    struct SnapshotEntry;

    #[derive(serde::Deserialize)]
    #[serde(field_identifier, rename_all = "snake_case")]
    enum SnapshotKey {
        Path,
        FileId,
        StartLine,
        EndLine,
        #[serde(other)]
        Other,
    }

    impl<'de> serde::Deserialize<'de> for SnapshotEntry {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(SnapshotVisitor)
        }
    }

    struct SnapshotVisitor;

    impl<'de> Visitor<'de> for SnapshotVisitor {
        type Value = SnapshotEntry;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a context snapshot entry")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SnapshotEntry, A::Error> {
            let mut seen = Seen::default();
            while let Some(key) = map.next_key::<SnapshotKey>()? {
                match key {
                    SnapshotKey::Path => {
                        seen.once::<A::Error>(0, "path")?;
                        map.next_value::<Str>()?;
                    }
                    SnapshotKey::FileId => {
                        seen.once::<A::Error>(1, "file_id")?;
                        map.next_value::<Str>()?;
                    }
                    SnapshotKey::StartLine => {
                        seen.once::<A::Error>(2, "start_line")?;
                        map.next_value::<Option<u64>>()?;
                    }
                    SnapshotKey::EndLine => {
                        seen.once::<A::Error>(3, "end_line")?;
                        map.next_value::<Option<u64>>()?;
                    }
                    SnapshotKey::Other => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            seen.required::<A::Error>(0, "path")?;
            seen.required::<A::Error>(1, "file_id")?;
            Ok(SnapshotEntry)
        }
    }

    /// `messages`: null or an array of message objects.
    struct Messages<'o>(&'o mut String);

    impl<'de> DeserializeSeed<'de> for Messages<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_option(self)
        }
    }

    impl<'de> Visitor<'de> for Messages<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("null or an array of messages")
        }
        fn visit_none<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Message(&mut *self.0))?.is_some() {}
            Ok(())
        }
    }

    /// One message: its text parts, else its legacy `content` string, then a newline when it had
    /// any text.
    struct Message<'o>(&'o mut String);

    #[derive(serde::Deserialize)]
    #[serde(field_identifier, rename_all = "snake_case")]
    enum MessageKey {
        Role,
        Parts,
        Model,
        Timestamp,
        ContextSnapshot,
        OutputFiles,
        Content,
        #[serde(other)]
        Other,
    }

    impl<'de> DeserializeSeed<'de> for Message<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Message<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a message object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let out = self.0;
            let start = out.len();
            let mut parts: Option<usize> = None;
            let mut legacy: Option<Option<Cow<'de, str>>> = None;
            let mut seen = Seen::default();
            while let Some(key) = map.next_key::<MessageKey>()? {
                match key {
                    MessageKey::Role => {
                        seen.once::<A::Error>(0, "role")?;
                        map.next_value::<Str>()?;
                    }
                    MessageKey::Parts if parts.is_some() => {
                        return Err(serde::de::Error::duplicate_field("parts"));
                    }
                    MessageKey::Parts => parts = Some(map.next_value_seed(Parts(&mut *out))?),
                    MessageKey::Model => {
                        seen.once::<A::Error>(1, "model")?;
                        map.next_value::<Option<Str>>()?;
                    }
                    MessageKey::Timestamp => {
                        seen.once::<A::Error>(2, "timestamp")?;
                        map.next_value::<Option<Str>>()?;
                    }
                    MessageKey::ContextSnapshot => {
                        seen.once::<A::Error>(3, "context_snapshot")?;
                        map.next_value::<Option<Seq<SnapshotEntry>>>()?;
                    }
                    MessageKey::OutputFiles => {
                        seen.once::<A::Error>(4, "output_files")?;
                        map.next_value::<Option<Seq<Str>>>()?;
                    }
                    MessageKey::Content if legacy.is_some() => {
                        return Err(serde::de::Error::duplicate_field("content"));
                    }
                    MessageKey::Content => legacy = Some(map.next_value::<MaybeStr<'de>>()?.0),
                    MessageKey::Other => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            seen.required::<A::Error>(0, "role")?;
            // A legacy `content` becomes the only part when there are none (Chat::parse).
            if parts.unwrap_or(0) == 0
                && let Some(Some(s)) = legacy
            {
                out.push_str(&s);
            }
            if out.len() > start {
                out.push('\n');
            }
            Ok(())
        }
    }

    /// `parts`: null or an array of part objects; appends the text parts, returns how many parts.
    struct Parts<'o>(&'o mut String);

    impl<'de> DeserializeSeed<'de> for Parts<'_> {
        type Value = usize;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
            d.deserialize_option(self)
        }
    }

    impl<'de> Visitor<'de> for Parts<'_> {
        type Value = usize;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("null or an array of parts")
        }
        fn visit_none<E>(self) -> Result<usize, E> {
            Ok(0)
        }
        fn visit_unit<E>(self) -> Result<usize, E> {
            Ok(0)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
            let mut n = 0;
            while seq.next_element_seed(Part(&mut *self.0))?.is_some() {
                n += 1;
            }
            Ok(n)
        }
    }

    /// One part (an object): its `content` is appended when its `type` is `text` and the content
    /// a string. A repeated key counts once, the last one (as in a JSON map).
    struct Part<'o>(&'o mut String);

    #[derive(serde::Deserialize)]
    #[serde(field_identifier, rename_all = "lowercase")]
    enum PartKey {
        Type,
        Content,
        #[serde(other)]
        Other,
    }

    impl<'de> DeserializeSeed<'de> for Part<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Part<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a part object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut is_text = false;
            let mut content: Option<Cow<'de, str>> = None;
            while let Some(key) = map.next_key::<PartKey>()? {
                match key {
                    PartKey::Type => {
                        is_text = map.next_value::<MaybeStr<'de>>()?.0.as_deref() == Some("text");
                    }
                    PartKey::Content => content = map.next_value::<MaybeStr<'de>>()?.0,
                    PartKey::Other => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            if is_text && let Some(c) = content {
                self.0.push_str(&c);
            }
            Ok(())
        }
    }

    /// Any JSON value; the string when it is one (borrowed from the input unless escaped).
    struct MaybeStr<'de>(Option<Cow<'de, str>>);

    impl<'de> serde::Deserialize<'de> for MaybeStr<'de> {
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
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(MaybeStr(None))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
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
