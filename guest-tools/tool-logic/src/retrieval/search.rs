//! `search_project`: literal, smart-case search over the project's text files.
//!
//! Each file is read once into a reused buffer; binary files (a NUL byte in the first 8 KiB) and
//! files over [`MAX_SEARCH_FILE_BYTES`] are skipped silently. The bytes are searched with
//! `memchr::memmem`; under smart case both sides are lowercased (ASCII lowercasing, which keeps byte
//! offsets, unless the query holds a non-ASCII letter). Line numbers are computed only for files
//! that match.

use std::borrow::Cow;
use std::ops::ControlFlow;

use memchr::memmem;

use super::MAX_SEARCH_FILE_BYTES;
use super::glob;
use super::walk::{FileBuf, Walker, narrow};
use crate::error::ToolError;
use crate::fsio::looks_binary;
use crate::paths::Root;

/// One result: lines `start_line..=end_line` (1-based) of `file_path`, as `snippet`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    pub file_path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub snippet: String,
}

/// The results in path order, and whether more matches existed than were returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOutput {
    pub results: Vec<SearchHit>,
    pub truncated: bool,
}

/// Lines of context shown on each side of a matching line (fewer when the snippet cap is small).
pub const CONTEXT_LINES: usize = 2;

/// A snippet line longer than this many bytes is shortened to about this length around the match
/// (or from its start), marked with `…`.
pub const MAX_SNIPPET_LINE_BYTES: usize = 400;

/// How the query is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fold {
    /// Case-sensitive (the query has an uppercase letter, or no letters at all).
    Exact,
    /// Case-insensitive over ASCII: the file is ASCII-lowercased (offsets unchanged).
    Ascii,
    /// Case-insensitive with Unicode lowercasing (the query holds a non-ASCII cased letter).
    Unicode,
}

/// The compiled query.
struct Matcher {
    finder: memmem::Finder<'static>,
    needle_len: usize,
    fold: Fold,
    /// The needle contains a newline (a match may span lines).
    multiline: bool,
    /// Under [`Fold::Ascii`], what tells a file without a match before it is lowercased.
    pivot: Option<Pivot>,
}

/// A quick look for a case-insensitive (ASCII) query in a file as it is: the needle's rarest byte
/// (in either case) is looked for with `memchr`, and each place it occurs is compared with the
/// needle ignoring ASCII case. Most files have no match, and are then never lowercased.
struct Pivot {
    /// The needle, ASCII-lowercased.
    needle: Vec<u8>,
    /// Where the rarest byte sits in the needle.
    offset: usize,
    /// It, and its uppercase form when it is a letter.
    bytes: (u8, Option<u8>),
}

/// What [`Pivot::scan`] found out about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// The needle occurs (in some case).
    Match,
    /// It does not occur.
    NoMatch,
    /// The rare byte turned out to be common in this file: the comparisons stopped before they
    /// cost more than lowercasing the file would.
    GaveUp,
}

impl Pivot {
    fn new(needle: &[u8]) -> Option<Pivot> {
        let (offset, &b) = needle.iter().enumerate().min_by_key(|&(_, &b)| rank(b))?;
        let upper = b.to_ascii_uppercase();
        Some(Pivot {
            needle: needle.to_vec(),
            offset,
            bytes: (b, (upper != b).then_some(upper)),
        })
    }

    /// Whether the needle occurs in `hay`, ignoring ASCII case.
    fn scan(&self, hay: &[u8]) -> Scan {
        let n = self.needle.len();
        if hay.len() < n {
            return Scan::NoMatch;
        }
        // Comparisons may cost about two passes over the file before lowercasing it is cheaper.
        let mut budget = hay.len().saturating_mul(2).saturating_add(4096);
        // Pivot positions that leave room for the whole needle.
        let end = hay.len() - n + self.offset + 1;
        let mut at = self.offset;
        while at < end {
            let window = &hay[at..end];
            let found = match self.bytes {
                (b, None) => memchr::memchr(b, window),
                (b, Some(u)) => memchr::memchr2(b, u, window),
            };
            let Some(i) = found else {
                return Scan::NoMatch;
            };
            let start = at + i - self.offset;
            if hay[start..start + n].eq_ignore_ascii_case(&self.needle) {
                return Scan::Match;
            }
            budget = match budget.checked_sub(n) {
                Some(b) => b,
                None => return Scan::GaveUp,
            };
            at += i + 1;
        }
        Scan::NoMatch
    }
}

/// About how common byte `b` is in source text (higher is more common), to pick the needle's
/// rarest byte. A letter counts both of its cases.
fn rank(b: u8) -> u8 {
    match b.to_ascii_lowercase() {
        b' ' | b'e' => 250,
        b't' | b'\n' => 230,
        b'a' | b'i' | b'o' | b'n' | b's' | b'r' => 220,
        b'l' | b'c' | b'd' | b'u' | b'_' | b'.' | b'(' | b')' => 200,
        b'p' | b'm' | b'f' | b'h' | b'g' | b',' | b'=' | b'\t' => 180,
        b'b' | b'y' | b'w' | b'v' | b'0' | b'1' | b';' | b':' | b'"' | b'/' | b'-' => 160,
        b'{' | b'}' | b'[' | b']' | b'<' | b'>' | b'\'' | b'*' | b'2'..=b'9' => 140,
        b'k' | b'x' | b'&' | b'+' | b'#' | b'!' | b'|' => 120,
        b'q' | b'j' | b'z' | b'?' | b'$' | b'%' | b'@' | b'`' | b'\\' | b'\r' => 90,
        0x80.. => 60,
        _ => 40,
    }
}

/// One match: the lines it spans and the column (in characters) where it starts.
#[derive(Debug, Clone, Copy)]
struct Hit {
    first: usize,
    last: usize,
    col: usize,
}

impl Matcher {
    fn new(query: &str) -> Matcher {
        let fold = if query.chars().any(char::is_uppercase) {
            Fold::Exact
        } else if query
            .chars()
            .any(|c| !c.is_ascii() && c.to_uppercase().ne(std::iter::once(c)))
        {
            Fold::Unicode
        } else if query.bytes().any(|b| b.is_ascii_alphabetic()) {
            Fold::Ascii
        } else {
            Fold::Exact
        };
        let needle: Vec<u8> = match fold {
            Fold::Exact => query.as_bytes().to_vec(),
            Fold::Ascii => query.to_ascii_lowercase().into_bytes(),
            Fold::Unicode => query.to_lowercase().into_bytes(),
        };
        let multiline = needle.contains(&b'\n');
        let needle_len = needle.len();
        Matcher {
            finder: memmem::Finder::new(&needle).into_owned(),
            needle_len,
            fold,
            multiline,
            pivot: (fold == Fold::Ascii).then(|| Pivot::new(&needle)).flatten(),
        }
    }

    /// Whether `hay` (the file as read) certainly holds no match, found without lowercasing it.
    fn surely_absent(&self, hay: &[u8]) -> bool {
        self.pivot
            .as_ref()
            .is_some_and(|p| p.scan(hay) == Scan::NoMatch)
    }

    /// The bytes to search for `hay`: itself, or its lowercased copy in `scratch`. Lowercasing never
    /// adds or removes a newline, so line numbers carry over to `hay`.
    fn haystack<'a>(&self, hay: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
        match self.fold {
            Fold::Exact => hay,
            Fold::Ascii => {
                ascii_lowercase_into(hay, scratch);
                scratch
            }
            Fold::Unicode => {
                *scratch = String::from_utf8_lossy(hay).to_lowercase().into_bytes();
                scratch
            }
        }
    }

    /// Calls `f` with each match in `hay` (the output of [`Matcher::haystack`]) starting at or after
    /// `from`, in order, one per line for single-line queries.
    fn for_each(&self, hay: &[u8], from: usize, mut f: impl FnMut(Hit) -> ControlFlow<()>) {
        let (mut at, mut line, mut line_start) = (0usize, 1usize, 0usize);
        // Moves the cursor to `to`, counting the newlines passed.
        let advance = |at: &mut usize, line: &mut usize, line_start: &mut usize, to: usize| {
            let seg = &hay[*at..to];
            let n = memchr::memchr_iter(b'\n', seg).count();
            if n > 0 {
                *line += n;
                *line_start = *at + memchr::memrchr(b'\n', seg).map_or(0, |p| p + 1);
            }
            *at = to;
        };
        let mut search_from = from;
        while search_from <= hay.len() {
            let Some(i) = self.finder.find(&hay[search_from..]) else {
                break;
            };
            let pos = search_from + i;
            advance(&mut at, &mut line, &mut line_start, pos);
            let first = line;
            let col = count_chars(&hay[line_start..pos]);
            let end = pos + self.needle_len;
            advance(
                &mut at,
                &mut line,
                &mut line_start,
                end.saturating_sub(1).max(pos),
            );
            if f(Hit {
                first,
                last: line,
                col,
            })
            .is_break()
            {
                return;
            }
            search_from = if self.multiline {
                end
            } else {
                match memchr::memchr(b'\n', &hay[end..]) {
                    Some(j) => end + j + 1,
                    None => break,
                }
            };
        }
    }
}

/// Writes `src` with ASCII letters lowercased into `dst`, eight bytes at a time.
fn ascii_lowercase_into(src: &[u8], dst: &mut Vec<u8>) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Every byte is overwritten below: only grow (zeroing) when the buffer is too short.
    if dst.len() < src.len() {
        dst.resize(src.len(), 0);
    } else {
        dst.truncate(src.len());
    }
    let mut out = dst.chunks_exact_mut(8);
    let mut inp = src.chunks_exact(8);
    for (o, i) in (&mut out).zip(&mut inp) {
        let mut word = [0u8; 8];
        word.copy_from_slice(i);
        let x = u64::from_le_bytes(word);
        // Per byte: bit 7 of `ge_a` is set when the low seven bits are >= b'A', of `gt_z` when
        // they are > b'Z'; ASCII bytes with exactly one of them set are uppercase letters.
        let low = x & LOW7;
        let ge_a = low + 0x3f3f_3f3f_3f3f_3f3f;
        let gt_z = low + 0x2525_2525_2525_2525;
        let upper = (ge_a ^ gt_z) & !x & HIGH;
        o.copy_from_slice(&(x | (upper >> 2)).to_le_bytes());
    }
    for (o, i) in out.into_remainder().iter_mut().zip(inp.remainder()) {
        *o = i.to_ascii_lowercase();
    }
}

/// Characters in `bytes`, counting each invalid byte as one (as lossy decoding would).
fn count_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// Lines `start..=end` of a file are shown as one result; `focus` holds, per line with a match, the
/// character column of its first match.
struct Window {
    start: usize,
    end: usize,
    focus: Vec<(usize, usize)>,
}

/// Groups matches into windows of at most `cap` lines: each match with `ctx` lines of context,
/// nearby matches sharing a window as long as it stays within `cap`.
struct Windows {
    cap: usize,
    ctx: usize,
    total: usize,
    list: Vec<Window>,
}

impl Windows {
    fn new(cap: usize, total: usize) -> Windows {
        let cap = cap.max(1);
        Windows {
            cap,
            ctx: CONTEXT_LINES.min((cap - 1) / 2),
            total,
            list: Vec::new(),
        }
    }

    /// Adds a match. Returns `Break` without adding it when it would need a window beyond `max`.
    fn add(&mut self, hit: Hit, max: usize) -> ControlFlow<()> {
        let ws = hit.first.saturating_sub(self.ctx).max(1);
        let we = hit
            .last
            .saturating_add(self.ctx)
            .min(self.total)
            .max(hit.first);
        let cap = self.cap;
        let mut ws_new = ws;
        if let Some(cur) = self.list.last_mut() {
            let limit = cur.start.saturating_add(cap - 1);
            if hit.first <= cur.end {
                // Already in view: show as much of its context as fits.
                cur.end = cur.end.max(we.min(limit));
                cur.focus.push((hit.first, hit.col));
                return ControlFlow::Continue(());
            }
            if ws <= cur.end + 1 && we <= limit {
                cur.end = we;
                cur.focus.push((hit.first, hit.col));
                return ControlFlow::Continue(());
            }
            // A new window, starting after this one.
            ws_new = ws.max(cur.end + 1);
        }
        if self.list.len() >= max {
            return ControlFlow::Break(());
        }
        self.list.push(Window {
            start: ws_new,
            end: we.min(ws_new.saturating_add(cap - 1)),
            focus: vec![(hit.first, hit.col)],
        });
        ControlFlow::Continue(())
    }
}

/// Shortens a long snippet line to about [`MAX_SNIPPET_LINE_BYTES`], around character column
/// `focus` when given.
fn clip_line(line: &str, focus: Option<usize>) -> Cow<'_, str> {
    if line.len() <= MAX_SNIPPET_LINE_BYTES {
        return Cow::Borrowed(line);
    }
    let bytes = line.as_bytes();
    let focus_byte = focus.map(|c| line.char_indices().nth(c).map_or(line.len(), |(i, _)| i));
    let mut start = focus_byte.map_or(0, |f| f.saturating_sub(MAX_SNIPPET_LINE_BYTES / 4));
    start = start.min(line.len() - MAX_SNIPPET_LINE_BYTES);
    let start = super::floor_boundary(bytes, start);
    let end = super::floor_boundary(bytes, start + MAX_SNIPPET_LINE_BYTES);
    let mut out = String::with_capacity(MAX_SNIPPET_LINE_BYTES + 8);
    if start > 0 {
        out.push('…');
    }
    out.push_str(&line[start..end]);
    if end < line.len() {
        out.push('…');
    }
    Cow::Owned(out)
}

/// Positions of the file's newlines, for finding lines by number.
struct Lines<'a> {
    hay: &'a [u8],
    newlines: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(hay: &'a [u8]) -> Lines<'a> {
        Lines {
            hay,
            newlines: memchr::memchr_iter(b'\n', hay).collect(),
        }
    }

    /// Lines in the file (a final line without a newline counts).
    fn total(&self) -> usize {
        let partial = !self.hay.is_empty() && self.hay.last() != Some(&b'\n');
        self.newlines.len() + usize::from(partial)
    }

    /// Line `n` (1-based, `<= total()`) without its line ending.
    fn line(&self, n: usize) -> &'a [u8] {
        let start = if n <= 1 {
            0
        } else {
            self.newlines.get(n - 2).map_or(self.hay.len(), |p| p + 1)
        };
        let end = self
            .newlines
            .get(n.saturating_sub(1))
            .copied()
            .unwrap_or(self.hay.len());
        let line = &self.hay[start.min(end)..end];
        line.strip_suffix(b"\r").unwrap_or(line)
    }
}

/// Searches the project under `root` for `query`.
///
/// `limit` results at most; `snippet_lines` lines per snippet at most; `glob` filters paths. An
/// empty query or a bad glob is an `InvalidArguments` error.
pub fn search(
    root: &Root,
    query: &str,
    glob: Option<&str>,
    limit: usize,
    snippet_lines: usize,
) -> Result<SearchOutput, ToolError> {
    if query.is_empty() {
        return Err(ToolError::invalid(
            "query is empty; give the text to search for",
        ));
    }
    let glob = glob::compile(glob)?;
    let mut walker = Walker::new(root);
    let mut out = SearchOutput {
        results: Vec::new(),
        truncated: false,
    };
    let Some((start, kind)) = narrow(&mut walker, "", super::walk::Kind::Dir, glob.as_ref()) else {
        return Ok(out);
    };
    let matcher = Matcher::new(query);
    let mut buf = FileBuf::new();
    let mut scratch = Vec::new();
    let mut results = Vec::new();
    let mut truncated = false;
    let walked = walker.walk(&start, kind, glob.as_ref(), |tree, rel| {
        let hay = match buf.read(tree, rel, MAX_SEARCH_FILE_BYTES) {
            Ok(Some(bytes)) => bytes,
            _ => return ControlFlow::Continue(()),
        };
        if looks_binary(hay) || matcher.surely_absent(hay) {
            return ControlFlow::Continue(());
        }
        let searched = matcher.haystack(hay, &mut scratch);
        let Some(first) = matcher.finder.find(searched) else {
            return ControlFlow::Continue(());
        };
        let lines = Lines::new(hay);
        let remaining = limit.saturating_sub(results.len());
        let mut windows = Windows::new(snippet_lines, lines.total());
        let mut file_truncated = false;
        matcher.for_each(searched, first, |hit| {
            let flow = windows.add(hit, remaining);
            file_truncated |= flow.is_break();
            flow
        });
        for w in windows.list {
            let mut snippet = String::new();
            for n in w.start..=w.end {
                if n > w.start {
                    snippet.push('\n');
                }
                let text = String::from_utf8_lossy(lines.line(n));
                let focus = w.focus.iter().find(|(l, _)| *l == n).map(|(_, c)| *c);
                snippet.push_str(&clip_line(&text, focus));
            }
            results.push(SearchHit {
                file_path: rel.to_string(),
                start_line: w.start,
                end_line: w.end,
                snippet,
            });
        }
        if file_truncated {
            truncated = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    walked.map_err(|e| ToolError::io(if start.is_empty() { "." } else { &start }, &e))?;
    out.results = results;
    out.truncated = truncated;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::put;
    use super::*;

    fn run(root: &Root, q: &str, glob: Option<&str>, limit: usize, lines: usize) -> SearchOutput {
        search(root, q, glob, limit, lines).unwrap()
    }

    fn spans(o: &SearchOutput) -> Vec<(String, usize, usize)> {
        o.results
            .iter()
            .map(|r| (r.file_path.clone(), r.start_line, r.end_line))
            .collect()
    }

    /// The quick look that skips files never misses a match: on many small haystacks over a
    /// small alphabet it agrees with searching the lowercased file, and on a file where the rare
    /// byte is everywhere it gives up (the file is then lowercased and searched as before).
    #[test]
    fn pivot_scan_agrees_with_lowercased_search() {
        let alphabet = b"aAbB_k\n";
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize % m
        };
        for _ in 0..4000 {
            let hay: Vec<u8> = (0..next(40))
                .map(|_| alphabet[next(alphabet.len())])
                .collect();
            let needle: Vec<u8> = (0..1 + next(4))
                .map(|_| alphabet[next(alphabet.len())].to_ascii_lowercase())
                .collect();
            let Some(pivot) = Pivot::new(&needle) else {
                panic!("a non-empty needle has a pivot")
            };
            let lowered = hay.to_ascii_lowercase();
            let expected = memmem::find(&lowered, &needle).is_some();
            let got = pivot.scan(&hay);
            assert_ne!(got, Scan::GaveUp, "{hay:?} {needle:?}");
            assert_eq!(got == Scan::Match, expected, "{hay:?} {needle:?}");
        }
        let Some(pivot) = Pivot::new(b"ab") else {
            panic!("pivot")
        };
        assert_eq!(pivot.offset, 1, "b is rarer than a");
        assert_eq!(pivot.bytes, (b'b', Some(b'B')));
        let periodic = "ba".repeat(10_000);
        let Some(long) = Pivot::new(&"ba".repeat(20).into_bytes()) else {
            panic!("pivot")
        };
        assert_eq!(long.scan(periodic.as_bytes()), Scan::Match);
        let mut almost = "bc".repeat(10_000).into_bytes();
        almost.extend_from_slice(b"ba");
        let Some(costly) = Pivot::new(&"bc".repeat(20).replace("bcbc", "bcba").into_bytes()) else {
            panic!("pivot")
        };
        assert_eq!(costly.scan(&almost), Scan::GaveUp);
        // Through the search: the same results whether or not the quick look gives up.
        let t = tempfile::tempdir().unwrap();
        let mut text = "xBcBc\n".repeat(3000);
        text.push_str("bcBCbc end\n");
        put(t.path(), "p.txt", &text);
        put(t.path(), "q.txt", "nothing here\n");
        let root = Root::at(t.path());
        let o = run(&root, "bcbcbc", None, 20, 1);
        assert_eq!(spans(&o), [("p.txt".into(), 3001, 3001)]);
        let o = run(&root, "cbcx", None, 20, 1);
        assert!(o.results.is_empty());
    }

    #[test]
    fn ascii_lowercasing_matches_std() {
        let all: Vec<u8> = (0..=255u8)
            .chain((0..=255u8).rev())
            .chain(b"Hello, WORLD! Zz@[`{".iter().copied())
            .collect();
        let mut out = Vec::new();
        for start in 0..9 {
            ascii_lowercase_into(&all[start..], &mut out);
            assert_eq!(out, all[start..].to_ascii_lowercase());
        }
    }

    #[test]
    fn smart_case_and_literal() {
        let t = tempfile::tempdir().unwrap();
        put(
            t.path(),
            "a.txt",
            "Hello World\nhello world\nHELLO\nx.*y\nxay\n",
        );
        let root = Root::at(t.path());
        let o = run(&root, "hello", None, 20, 1);
        assert_eq!(
            spans(&o),
            [
                ("a.txt".into(), 1, 1),
                ("a.txt".into(), 2, 2),
                ("a.txt".into(), 3, 3)
            ]
        );
        let o = run(&root, "Hello", None, 20, 1);
        assert_eq!(spans(&o), [("a.txt".into(), 1, 1)]);
        assert_eq!(o.results[0].snippet, "Hello World");
        let o = run(&root, "x.*y", None, 20, 1);
        assert_eq!(spans(&o), [("a.txt".into(), 4, 4)], "literal, not regex");
        let o = run(&root, "zzz", None, 20, 5);
        assert!(o.results.is_empty() && !o.truncated);
    }

    #[test]
    fn unicode_smart_case() {
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "u.txt", "CAFÉ au lait\nnothing\ncafé noir\n");
        let root = Root::at(t.path());
        let o = run(&root, "café", None, 20, 1);
        assert_eq!(spans(&o), [("u.txt".into(), 1, 1), ("u.txt".into(), 3, 3)]);
        let o = run(&root, "CAFÉ", None, 20, 1);
        assert_eq!(spans(&o), [("u.txt".into(), 1, 1)]);
    }

    #[test]
    fn context_merging_and_snippet_cap() {
        let t = tempfile::tempdir().unwrap();
        let text: String = (1..=40)
            .map(|i| {
                if [5, 9, 20, 30].contains(&i) {
                    "needle\n".to_string()
                } else {
                    format!("line {i}\n")
                }
            })
            .collect();
        put(t.path(), "f.txt", &text);
        let root = Root::at(t.path());
        let o = run(&root, "needle", None, 20, 20);
        assert_eq!(
            spans(&o),
            [
                ("f.txt".into(), 3, 11),
                ("f.txt".into(), 18, 22),
                ("f.txt".into(), 28, 32)
            ]
        );
        assert_eq!(
            o.results[0].snippet,
            "line 3\nline 4\nneedle\nline 6\nline 7\nline 8\nneedle\nline 10\nline 11"
        );
        // With a 5-line cap the two close matches cannot share a snippet, and snippets do not overlap.
        let o = run(&root, "needle", None, 20, 5);
        assert_eq!(
            spans(&o)[..2],
            [("f.txt".into(), 3, 7), ("f.txt".into(), 8, 11)]
        );
        for r in &o.results {
            assert!(r.end_line - r.start_line < 5);
            assert_eq!(r.snippet.lines().count(), r.end_line - r.start_line + 1);
        }
        // A match already in view extends its snippet only up to the cap.
        put(t.path(), "g.txt", "a\nb\nneedle\nc\nneedle\nd\ne\n");
        let o = run(&root, "needle", Some("g.txt"), 20, 5);
        assert_eq!(spans(&o), [("g.txt".into(), 1, 5)]);
        let o = run(&root, "needle", Some("g.txt"), 20, 6);
        assert_eq!(spans(&o), [("g.txt".into(), 1, 6)]);
        // A one-line cap shows only the matching lines.
        let o = run(&root, "needle", Some("f.txt"), 20, 1);
        assert_eq!(
            o.results.iter().map(|r| r.start_line).collect::<Vec<_>>(),
            [5, 9, 20, 30]
        );
        assert!(o.results.iter().all(|r| r.snippet == "needle"));
        // Edges of the file clamp the context.
        put(t.path(), "f.txt", "needle\nb\nc\nd\nneedle");
        let o = run(&root, "needle", Some("f.txt"), 20, 3);
        assert_eq!(spans(&o), [("f.txt".into(), 1, 2), ("f.txt".into(), 4, 5)]);
        // Huge caps do not overflow.
        let o = run(&root, "needle", Some("f.txt"), usize::MAX, usize::MAX);
        assert_eq!(spans(&o), [("f.txt".into(), 1, 5)]);
    }

    #[test]
    fn limits_and_truncation() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..5 {
            put(t.path(), &format!("f{i}.txt"), "x\nhit\n");
        }
        let root = Root::at(t.path());
        let o = run(&root, "hit", None, 5, 5);
        assert_eq!(o.results.len(), 5);
        assert!(!o.truncated);
        let o = run(&root, "hit", None, 3, 5);
        assert_eq!(
            o.results
                .iter()
                .map(|r| r.file_path.as_str())
                .collect::<Vec<_>>(),
            ["f0.txt", "f1.txt", "f2.txt"]
        );
        assert!(o.truncated);
        put(
            t.path(),
            "many.txt",
            "hit\n\n\n\n\n\n\nhit\n\n\n\n\n\nhit\n",
        );
        let o = run(&root, "hit", Some("many.txt"), 2, 5);
        assert_eq!(o.results.len(), 2);
        assert!(o.truncated);
        let o = run(&root, "hit", Some("many.txt"), 3, 5);
        assert_eq!(o.results.len(), 3);
        assert!(!o.truncated);
    }

    #[test]
    fn skips_binary_large_ignored_and_reserved() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        put(d, "bin.dat", b"hit\0hit");
        put(d, "latin1.txt", b"caf\xe9 hit\n");
        let mut big = "hit\n".repeat(10);
        big.push_str(&"x".repeat(MAX_SEARCH_FILE_BYTES));
        put(d, "big.txt", big);
        put(d, ".gitignore", ".env\n");
        put(d, ".env", "hit");
        put(d, ".bb7/s", "hit");
        put(d, ".git/HEAD", "hit");
        put(d, ".github/w.yml", "hit");
        let root = Root::at(d);
        let o = run(&root, "hit", None, 20, 5);
        assert_eq!(
            spans(&o),
            [(".github/w.yml".into(), 1, 1), ("latin1.txt".into(), 1, 1)]
        );
        assert_eq!(o.results[1].snippet, "caf\u{fffd} hit");
    }

    /// Issue 23 item 8: a file is searched to its real end (up to [`MAX_SEARCH_FILE_BYTES`]), not
    /// to the end of the first short read.
    #[test]
    fn matches_deep_in_large_files_are_found() {
        let t = tempfile::tempdir().unwrap();
        let size = MAX_SEARCH_FILE_BYTES;
        let mut bytes = vec![b'x'; size];
        for i in (63..size).step_by(64) {
            bytes[i] = b'\n';
        }
        // Matches starting at 100 KiB and 1 MiB, and one whose last byte is the file's last
        // (2 MiB - 1).
        let needle = b"NEEDLE";
        for at in [100 * 1024, 1024 * 1024, size - needle.len()] {
            bytes[at..at + needle.len()].copy_from_slice(needle);
        }
        put(t.path(), "big.txt", &bytes);
        let root = Root::at(t.path());
        let o = run(&root, "NEEDLE", None, 20, 1);
        let line = |at: usize| bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        assert_eq!(
            spans(&o),
            [
                ("big.txt".into(), line(100 * 1024), line(100 * 1024)),
                ("big.txt".into(), line(1024 * 1024), line(1024 * 1024)),
                ("big.txt".into(), line(size - 1), line(size - 1)),
            ]
        );
        // One byte more and the file is skipped whole.
        bytes.push(b'\n');
        put(t.path(), "big.txt", &bytes);
        assert!(run(&root, "NEEDLE", None, 20, 1).results.is_empty());
    }

    #[test]
    fn glob_filter_and_errors() {
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "src/a.rs", "hit");
        put(t.path(), "src/deep/b.rs", "hit");
        put(t.path(), "docs/c.md", "hit");
        let root = Root::at(t.path());
        let files = |g| {
            run(&root, "hit", Some(g), 20, 5)
                .results
                .into_iter()
                .map(|r| r.file_path)
                .collect::<Vec<_>>()
        };
        assert_eq!(files("**/*.rs"), ["src/a.rs", "src/deep/b.rs"]);
        assert_eq!(files("*.rs"), ["src/a.rs", "src/deep/b.rs"]);
        assert_eq!(files("src/*.rs"), ["src/a.rs"]);
        assert_eq!(files("docs/**"), ["docs/c.md"]);
        assert!(files("nowhere/**").is_empty());
        let e = search(&root, "hit", Some("src/[a"), 20, 5).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::InvalidArguments);
        assert!(e.message.contains("src/[a"), "{}", e.message);
        let e = search(&root, "", None, 20, 5).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::InvalidArguments);
    }

    #[test]
    fn long_lines_are_clipped_around_the_match() {
        let t = tempfile::tempdir().unwrap();
        let line = format!("{}needle{}\n", "é".repeat(2000), "b".repeat(2000));
        put(t.path(), "min.js", &line);
        let root = Root::at(t.path());
        let o = run(&root, "needle", None, 20, 5);
        let s = &o.results[0].snippet;
        assert!(
            s.contains("needle") && s.starts_with('…') && s.ends_with('…'),
            "{s}"
        );
        assert!(s.len() <= MAX_SNIPPET_LINE_BYTES + 6);
    }

    #[test]
    fn multiline_queries_and_crlf() {
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "m.txt", "a\r\nfoo\r\nbar\r\nb\r\n");
        let root = Root::at(t.path());
        let o = run(&root, "foo\r\nbar", None, 20, 1);
        assert_eq!(spans(&o), [("m.txt".into(), 2, 2)]);
        let o = run(&root, "foo\r\nbar", None, 20, 20);
        assert_eq!(spans(&o), [("m.txt".into(), 1, 4)]);
        assert_eq!(o.results[0].snippet, "a\nfoo\nbar\nb");
    }
}
