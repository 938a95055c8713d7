//! Token estimation with the `cl100k_base` tokenizer (a compact counting-only encoder, [`bpe`]), and a
//! cache of per-file counts keyed by file id.
//!
//! Building the tokenizer takes tens of milliseconds and about 5 MiB, so it is built by the first count, not at
//! start-up: a session that never counts (most only chat) never holds it. Text is counted as ordinary text:
//! special-token markers such as `<|endoftext|>` count as the plain text they are.
//!
//! Counts are exact (they equal tiktoken's), but computed faster than tiktoken alone: ASCII text is split into
//! pre-tokenizer pieces by [`split`] and each distinct piece is encoded once per batch; other text goes through
//! tiktoken's split and merge ([`bpe`]). Large batches are cut into chunks (only where the count stays additive, see
//! [`split::is_exact_split`]) and counted on several threads.

mod bpe;
mod split;

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, OnceLock};

use bpe::Bpe;

/// How many file counts the cache keeps.
pub const CACHE_CAPACITY: usize = 10_000;

/// Batches smaller than this (in bytes) are counted on the calling thread.
const PARALLEL_MIN_BYTES: usize = 128 * 1024;
/// The size texts are cut to for parallel counting.
const CHUNK_BYTES: usize = 64 * 1024;
/// At most this many threads count one batch.
const MAX_THREADS: usize = 4;
/// A worker stops remembering new pieces past this many (bounding memory on huge, varied input).
const MAX_REMEMBERED_PIECES: usize = 1 << 17;
/// Marks a chunk that no worker has counted.
const NOT_COUNTED: usize = usize::MAX;

static BPE: LazyLock<Option<Bpe>> = LazyLock::new(build_bpe);
static READY: AtomicBool = AtomicBool::new(false);

fn build_bpe() -> Option<Bpe> {
    let bpe = match catch_unwind(Bpe::cl100k) {
        Ok(Ok(bpe)) => Some(bpe),
        Ok(Err(e)) => {
            tracing::warn!(
                "cl100k_base tokenizer unavailable, estimating 4 characters per token: {e}"
            );
            None
        }
        Err(_) => {
            tracing::warn!("cl100k_base tokenizer panicked, estimating 4 characters per token");
            None
        }
    };
    READY.store(true, Ordering::Release);
    bpe
}

/// The tokenizer, built by the first call (other callers wait for that build).
fn bpe() -> Option<&'static Bpe> {
    BPE.as_ref()
}

fn worker_count() -> usize {
    static WORKERS: OnceLock<usize> = OnceLock::new();
    *WORKERS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, MAX_THREADS)
    })
}

/// Counts tokens (cl100k_base) and remembers the counts of files by id.
pub struct TokenCounter {
    cache: Mutex<FileCache>,
}

impl Default for TokenCounter {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter")
            .field("ready", &self.is_ready())
            .field("cached_files", &self.cached_files())
            .finish()
    }
}

impl TokenCounter {
    /// A counter with an empty cache. Returns immediately and builds nothing: the first count builds
    /// the tokenizer (tens of milliseconds, about 5 MiB), so a session that never counts never holds it.
    pub fn new() -> Self {
        TokenCounter {
            cache: Mutex::new(FileCache::default()),
        }
    }

    /// Whether the tokenizer is built (counting will not wait).
    pub fn is_ready(&self) -> bool {
        READY.load(Ordering::Acquire)
    }

    /// The number of tokens in `text`. Never fails: should the tokenizer be unusable, the count is estimated
    /// at four characters per token.
    pub fn count(&self, text: &str) -> usize {
        count_batch(&[text])[0]
    }

    /// The token counts of several texts, counted in parallel when they are large. Not cached.
    pub fn count_texts(&self, texts: &[&str]) -> Vec<usize> {
        count_batch(texts)
    }

    /// The number of tokens in a file's `text`, cached under its `file_id` (the 8-hex id of path + content).
    /// The text's length is part of the cache key, so a reused id with other content is counted afresh. An
    /// empty id is not cached.
    pub fn count_file(&self, file_id: &str, text: &str) -> usize {
        self.count_files(&[(file_id, text)])[0]
    }

    /// [`count_file`](Self::count_file) for several `(file_id, text)` pairs; the files not in the cache are
    /// counted in parallel when they are large.
    pub fn count_files(&self, items: &[(&str, &str)]) -> Vec<usize> {
        let mut counts = vec![NOT_COUNTED; items.len()];
        let mut misses: Vec<usize> = Vec::new();
        let mut first_miss: HashMap<(&str, usize), usize> = HashMap::new();
        let mut duplicates: Vec<(usize, usize)> = Vec::new();
        {
            let mut cache = self.lock();
            for (i, &(id, text)) in items.iter().enumerate() {
                if text.is_empty() {
                    counts[i] = 0;
                    continue;
                }
                if id.is_empty() {
                    misses.push(i);
                    continue;
                }
                if let Some(n) = cache.get(id, text.len()) {
                    counts[i] = n;
                } else if let Some(&first) = first_miss.get(&(id, text.len())) {
                    duplicates.push((i, first));
                } else {
                    first_miss.insert((id, text.len()), i);
                    misses.push(i);
                }
            }
        }
        if !misses.is_empty() {
            let texts: Vec<&str> = misses.iter().map(|&i| items[i].1).collect();
            let fresh = count_batch(&texts);
            let mut cache = self.lock();
            for (&i, n) in misses.iter().zip(fresh) {
                counts[i] = n;
                let id = items[i].0;
                if !id.is_empty() {
                    cache.insert(id, items[i].1.len(), n);
                }
            }
        }
        for (i, first) in duplicates {
            counts[i] = counts[first];
        }
        counts
    }

    /// The number of tokens in `text`, cached by its content (a 64-bit hash and the length): the
    /// instructions and the rendered history are counted again only when they change.
    pub fn count_cached(&self, text: &str) -> usize {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        let key = format!("text:{:016x}", h.finish());
        self.count_file(&key, text)
    }

    /// How many file counts are cached.
    pub fn cached_files(&self) -> usize {
        self.lock().map.len()
    }

    /// Forgets every cached count.
    pub fn clear_cache(&self) {
        self.lock().map.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FileCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// File counts keyed by (file id, text length), evicting the least recently used half when full.
#[derive(Default)]
struct FileCache {
    map: HashMap<(String, usize), CacheEntry>,
    clock: u64,
}

struct CacheEntry {
    tokens: usize,
    last_used: u64,
}

impl FileCache {
    fn get(&mut self, id: &str, len: usize) -> Option<usize> {
        self.clock += 1;
        let clock = self.clock;
        let entry = self.map.get_mut(&(id.to_string(), len))?;
        entry.last_used = clock;
        Some(entry.tokens)
    }

    fn insert(&mut self, id: &str, len: usize, tokens: usize) {
        if self.map.len() >= CACHE_CAPACITY {
            self.evict_older_half();
        }
        self.clock += 1;
        self.map.insert(
            (id.to_string(), len),
            CacheEntry {
                tokens,
                last_used: self.clock,
            },
        );
    }

    fn evict_older_half(&mut self) {
        let mut ages: Vec<u64> = self.map.values().map(|e| e.last_used).collect();
        let middle = ages.len() / 2;
        let (_, &mut cutoff, _) = ages.select_nth_unstable(middle);
        self.map.retain(|_, e| e.last_used > cutoff);
    }
}

/// Token counts of the distinct pre-tokenizer pieces seen by one worker during one batch.
type PieceCounts<'t> = HashMap<&'t [u8], usize>;

/// Counts each text, on several threads when the batch is large.
fn count_batch(texts: &[&str]) -> Vec<usize> {
    if texts.iter().all(|t| t.is_empty()) {
        return vec![0; texts.len()];
    }
    let bpe = bpe();
    let total: usize = texts.iter().map(|t| t.len()).sum();
    let workers = worker_count();
    if workers < 2 || total < PARALLEL_MIN_BYTES {
        let mut pieces = PieceCounts::new();
        return texts
            .iter()
            .map(|t| count_text(bpe, t, &mut pieces))
            .collect();
    }

    let mut chunks: Vec<(usize, &str)> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        chunks.extend(split::chunks(text, CHUNK_BYTES).map(|c| (i, c)));
    }
    chunks.sort_by_key(|(_, c)| std::cmp::Reverse(c.len()));
    let results: Vec<AtomicUsize> = chunks
        .iter()
        .map(|_| AtomicUsize::new(NOT_COUNTED))
        .collect();
    let next = AtomicUsize::new(0);
    let work = || {
        let mut pieces = PieceCounts::new();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&(_, chunk)) = chunks.get(k) else {
                break;
            };
            results[k].store(count_text(bpe, chunk, &mut pieces), Ordering::Relaxed);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..workers.min(chunks.len()) {
            let spawned = std::thread::Builder::new()
                .name("bb7-tokens".to_string())
                .spawn_scoped(scope, work);
            if spawned.is_err() {
                break;
            }
        }
        work();
    });

    let mut counts = vec![0; texts.len()];
    let mut pieces = PieceCounts::new();
    for ((i, chunk), n) in chunks.iter().zip(&results) {
        counts[*i] += match n.load(Ordering::Relaxed) {
            NOT_COUNTED => count_text(bpe, chunk, &mut pieces),
            n => n,
        };
    }
    counts
}

/// Counts one text: ASCII runs piece by piece (each distinct piece encoded once, remembered in `pieces`),
/// everything else with tiktoken.
fn count_text<'t>(bpe: Option<&Bpe>, text: &'t str, pieces: &mut PieceCounts<'t>) -> usize {
    let Some(bpe) = bpe else {
        return approximate(text);
    };
    let mut total = 0;
    for (ascii, run) in split::ascii_runs(text) {
        if !ascii {
            total += tiktoken_count(bpe, run);
            continue;
        }
        let bytes = run.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let len = split::ascii_piece_len(bytes, i);
            let piece = &bytes[i..i + len];
            total += if len == 1 {
                1
            } else if let Some(&n) = pieces.get(piece) {
                n
            } else {
                let n = tiktoken_count(bpe, &run[i..i + len]);
                if pieces.len() < MAX_REMEMBERED_PIECES {
                    pieces.insert(piece, n);
                }
                n
            };
            i += len;
        }
    }
    total
}

/// tiktoken's count of `text` as ordinary text; four characters per token should the split fail.
fn tiktoken_count(bpe: &Bpe, text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    match catch_unwind(AssertUnwindSafe(|| bpe.count(text))) {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            tracing::debug!("tokenizer error, estimating instead: {e}");
            approximate(text)
        }
        Err(_) => approximate(text),
    }
}

fn approximate(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tiktoken's own count: the reference every path must equal.
    fn reference(text: &str) -> usize {
        static TIKTOKEN: LazyLock<tiktoken_rs::CoreBPE> =
            LazyLock::new(|| tiktoken_rs::cl100k_base().unwrap());
        TIKTOKEN
            .count(text, &std::collections::HashSet::new())
            .unwrap()
    }

    fn fast(text: &str) -> usize {
        count_text(bpe(), text, &mut PieceCounts::new())
    }

    fn chunked(text: &str, target: usize) -> usize {
        let mut pieces = PieceCounts::new();
        split::chunks(text, target)
            .map(|c| count_text(bpe(), c, &mut pieces))
            .sum()
    }

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Deterministic pseudo-random lines mixing code, blank lines, CRLF, tabs, Unicode and odd whitespace.
    fn messy_text(seed: u64, lines: usize) -> String {
        const PARTS: &[&str] = &[
            "fn main() {",
            "    let x = 42;",
            "\tif (a && b) { return; }",
            "",
            "   ",
            "}",
            "// comment with ünïcödé and 漢字",
            "  \t  ",
            "x = \"string with spaces   \"",
            "123456789 0.5e10",
            "<|endoftext|> <|fim_prefix|>",
            "\u{2028}odd\u{00a0}spaces\u{3000}",
            "it's we'll they'RE I'M",
            "   trailing   ",
            "\r",
            "😀 emoji 👍🏽",
            "\x0b\x0c\x1c\x1f\x00\x7f",
            "ſtraße 'ſ 'K ²³ x²",
        ];
        let mut state = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut out = String::new();
        for _ in 0..lines {
            let r = xorshift(&mut state);
            out.push_str(PARTS[(r >> 33) as usize % PARTS.len()]);
            out.push_str(if r.is_multiple_of(7) { "\r\n" } else { "\n" });
        }
        out
    }

    /// Deterministic pseudo-random characters from `alphabet`.
    fn random_chars(seed: u64, alphabet: &[char], len: usize) -> String {
        let mut state = seed.wrapping_add(0x2545_f491_4f6c_dd1d);
        (0..len)
            .map(|_| alphabet[(xorshift(&mut state) % alphabet.len() as u64) as usize])
            .collect()
    }

    const ASCII_ALPHABET: &[char] = &[
        ' ', ' ', ' ', '\t', '\n', '\n', '\r', '\x0b', '\x0c', '\x1f', '\0', 'a', 'b', 'Z', 's',
        'S', 'l', 'L', 'v', 'e', 'r', 'd', 'm', 't', '\'', '\'', '1', '2', '3', '.', '{', '(', '"',
        '<', '|',
    ];

    const MIXED_ALPHABET: &[char] = &[
        ' ', ' ', '\t', '\n', '\n', '\r', 'a', 'Z', 's', '\'', '1', '.', '{', '\u{a0}', '\u{2028}',
        '\u{85}', '\u{3000}', 'é', 'ſ', '\u{212a}', '漢', '😀', '²', '\u{301}', '<', '|',
    ];

    #[test]
    fn known_counts() {
        let c = TokenCounter::new();
        assert_eq!(c.count("hello world"), 2);
        assert_eq!(c.count(""), 0);
        assert_eq!(c.count("a"), 1);
        assert_eq!(c.count("\n"), 1);
        assert_eq!(c.count("tiktoken is great!"), 6);
        assert!(c.is_ready());
    }

    #[test]
    fn fast_path_equals_tiktoken_on_random_ascii() {
        for seed in 0..300 {
            let text = random_chars(seed, ASCII_ALPHABET, 1500);
            assert_eq!(fast(&text), reference(&text), "seed {seed}: {text:?}");
        }
    }

    #[test]
    fn fast_path_equals_tiktoken_on_mixed_text() {
        for seed in 0..200 {
            let text = random_chars(seed, MIXED_ALPHABET, 1500);
            assert_eq!(fast(&text), reference(&text), "seed {seed}: {text:?}");
        }
        for seed in 0..20 {
            let text = messy_text(seed, 2000);
            assert_eq!(fast(&text), reference(&text), "seed {seed}");
        }
    }

    #[test]
    fn fast_path_equals_tiktoken_on_source_code() {
        for text in [
            include_str!("mod.rs"),
            include_str!("split.rs"),
            include_str!("../instructions.rs"),
            include_str!("../config/mod.rs"),
            include_str!("../../prompts/system.md"),
        ] {
            assert_eq!(fast(text), reference(text));
            let crlf = text.replace('\n', "\r\n");
            assert_eq!(fast(&crlf), reference(&crlf));
        }
    }

    #[test]
    fn chunked_counts_are_exact() {
        for seed in 0..12 {
            let text = messy_text(seed, 3000);
            let expected = reference(&text);
            for target in [16, 500, 4096] {
                assert!(
                    split::chunks(&text, target).count() > 1,
                    "seed {seed} target {target}"
                );
                assert_eq!(
                    chunked(&text, target),
                    expected,
                    "seed {seed} target {target}"
                );
            }
        }
        for seed in 0..100 {
            let text = random_chars(seed, MIXED_ALPHABET, 2000);
            assert_eq!(
                chunked(&text, 16),
                reference(&text),
                "seed {seed}: {text:?}"
            );
            let text = random_chars(seed, ASCII_ALPHABET, 2000);
            assert_eq!(
                chunked(&text, 16),
                reference(&text),
                "seed {seed}: {text:?}"
            );
        }
    }

    #[test]
    fn special_tokens_count_as_plain_text() {
        let c = TokenCounter::new();
        assert!(c.count("<|endoftext|>") > 1);
        let text = "a <|endoftext|> b<|fim_suffix|><|endofprompt|>";
        assert_eq!(
            c.count(text),
            tiktoken_rs::cl100k_base()
                .unwrap()
                .encode_ordinary(text)
                .len()
        );
    }

    /// The compact encoder alone (split and merge, no fast ASCII path) equals tiktoken, including
    /// long pieces (the heap merge) and non-ASCII text.
    #[test]
    fn the_compact_encoder_equals_tiktoken() {
        let b = bpe().unwrap();
        let long_word = "supercalifragilistic".repeat(40);
        let long_digits = "1234567890".repeat(30);
        let long_punct = "=-+*&^%$#@!".repeat(20);
        let mut texts = vec![
            long_word.as_str(),
            long_digits.as_str(),
            long_punct.as_str(),
            "日本語のテキストと English mixed, ünïcödé — 😀👍🏽",
            "  \n\n\t\r\n  x  ",
            "",
        ];
        let messy: Vec<String> = (0..40).map(|seed| messy_text(seed, 30)).collect();
        texts.extend(messy.iter().map(String::as_str));
        for t in texts {
            assert_eq!(b.count(t).unwrap(), reference(t), "{t:?}");
        }
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let c = TokenCounter::new();
        let inputs = [
            "\0\0\0".to_string(),
            "\u{FFFD}\u{FEFF}\u{200B}".to_string(),
            " ".repeat(200_000),
            "\n".repeat(100_000),
            "a".repeat(300_000),
            "😀".repeat(50_000),
            "'s'S'll'LL".repeat(1_000),
            "\r\n\r\r\n \t\u{0085}\u{2029}".repeat(10_000),
            (0u32..0x3000)
                .filter_map(char::from_u32)
                .collect::<String>(),
        ];
        for text in &inputs {
            let n = c.count(text);
            assert!(n > 0 && n <= text.len(), "{n}");
        }
    }

    #[test]
    fn file_counts_are_cached_by_id_and_length() {
        let c = TokenCounter::new();
        assert_eq!(c.count_file("a1b2c3d4", "hello world"), 2);
        assert_eq!(c.cached_files(), 1);
        assert_eq!(c.count_file("a1b2c3d4", "hello world"), 2);
        assert_eq!(c.cached_files(), 1);
        // A known id and length is answered from the cache without counting: same length, other text.
        assert_eq!(c.count_file("a1b2c3d4", "hello_world"), 2);
        // Another length under the same id is counted afresh.
        assert_eq!(c.count_file("a1b2c3d4", "hello"), 1);
        assert_eq!(c.cached_files(), 2);
        // Empty ids and empty texts are not cached.
        assert_eq!(c.count_file("", "hello world"), 2);
        assert_eq!(c.count_file("00000000", ""), 0);
        assert_eq!(c.cached_files(), 2);
        c.clear_cache();
        assert_eq!(c.cached_files(), 0);
    }

    #[test]
    fn count_files_matches_tiktoken() {
        let c = TokenCounter::new();
        let texts: Vec<String> = (0..8).map(|i| messy_text(i, 4000)).collect();
        let ids: Vec<String> = (0..8).map(|i| format!("{i:08x}")).collect();
        let pairs: Vec<(&str, &str)> = ids
            .iter()
            .zip(&texts)
            .map(|(id, t)| (id.as_str(), t.as_str()))
            .collect();
        let expected: Vec<usize> = texts.iter().map(|t| reference(t)).collect();
        assert_eq!(c.count_files(&pairs), expected);
        assert_eq!(c.cached_files(), 8);
        assert_eq!(c.count_files(&pairs), expected);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        assert_eq!(c.count_texts(&refs), expected);
        c.clear_cache();
        assert_eq!(
            c.count_files(&[pairs[0], pairs[1], pairs[0]]),
            [expected[0], expected[1], expected[0]]
        );
        assert_eq!(c.count_files(&[]), Vec::<usize>::new());
        let big = texts.concat();
        assert_eq!(c.count(&big), reference(&big));
    }

    #[test]
    fn cache_is_bounded() {
        let mut cache = FileCache::default();
        for i in 0..CACHE_CAPACITY * 3 {
            cache.insert(&format!("{i:08x}"), 1, i);
            assert!(cache.map.len() <= CACHE_CAPACITY);
        }
        let newest = CACHE_CAPACITY * 3 - 1;
        assert_eq!(cache.get(&format!("{newest:08x}"), 1), Some(newest));
        assert_eq!(cache.get("00000000", 1), None);
    }

    #[test]
    fn recently_used_entries_survive_eviction() {
        let mut cache = FileCache::default();
        for i in 0..CACHE_CAPACITY {
            cache.insert(&format!("{i:08x}"), 1, i);
        }
        assert_eq!(cache.get("00000000", 1), Some(0));
        cache.insert("new", 1, 7);
        assert_eq!(cache.get("00000000", 1), Some(0));
        assert_eq!(cache.get("00000001", 1), None);
        assert_eq!(cache.get("new", 1), Some(7));
    }

    #[test]
    fn approximation_fallback() {
        let mut pieces = PieceCounts::new();
        assert_eq!(count_text(None, "abcdefgh", &mut pieces), 2);
        assert_eq!(count_text(None, "abcde", &mut pieces), 2);
        assert_eq!(count_text(None, "", &mut pieces), 0);
    }
}
