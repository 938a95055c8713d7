//! Line hunks between two texts (AGENT-PROTOCOL.md §2): computed with `similar`, sized per
//! AGENT-PLAN.md §23, with ids that stay the same for the same content, and splicing that keeps the
//! base text's line endings and final newline byte for byte.
//!
//! Lines are compared without their terminators, so a CRLF file and an LF output differ only where
//! their lines do. A hunk is a maximal run of changed lines (no unchanged line inside); a run larger
//! than [`MAX_HUNK_LINES`] / [`MAX_HUNK_BYTES`] is cut into pieces at paragraph (blank-line)
//! boundaries, pairing the old side's paragraphs with the new side's; a piece that still does not fit
//! is marked `oversized`.
//!
//! The diff work is bounded: texts of more than [`MAX_DIFF_LINES`] lines together, or a diff that
//! runs past [`DIFF_DEADLINE`], are not diffed line by line; the file is then one `whole` hunk,
//! marked `oversized`, whose patch carries only its `@@` header (review it as a whole). So no
//! model output, however large or pathological, holds the host for long.

use std::collections::HashMap;
use std::ops::Range;

use sha2::{Digest, Sha256};
use similar::{Algorithm, DiffTag};

/// Most lines (old + new) in one hunk.
pub const MAX_HUNK_LINES: usize = 80;
/// Most bytes (old + new lines, one terminator each) in one hunk.
pub const MAX_HUNK_BYTES: usize = 8192;
/// Most lines (old + new) diffed line by line; larger files are one whole-file hunk.
pub const MAX_DIFF_LINES: usize = 200_000;
/// The longest a line diff may run before the file is answered as one whole-file hunk.
pub const DIFF_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a file cannot be reviewed by hunks.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TextError {
    /// The file (by path) contains NUL bytes.
    #[error("Not a text file: {0} is binary (contains NUL bytes); review it as a whole")]
    Binary(String),
    /// The file (by path) is not valid UTF-8.
    #[error("Not a text file: {0} is not valid UTF-8; review it as a whole")]
    NotUtf8(String),
}

/// `bytes` as text, or why not (NUL bytes → binary; invalid UTF-8).
pub fn as_text<'a>(path: &str, bytes: &'a [u8]) -> Result<&'a str, TextError> {
    if memchr::memchr(0, bytes).is_some() {
        return Err(TextError::Binary(path.to_string()));
    }
    std::str::from_utf8(bytes).map_err(|_| TextError::NotUtf8(path.to_string()))
}

/// A text split into lines, each with its own terminator kept aside.
#[derive(Debug)]
pub struct Lines<'a> {
    /// Line contents without terminators.
    pub lines: Vec<&'a str>,
    /// Each line's terminator: `"\n"`, `"\r\n"`, or `""` (a last line without newline).
    pub ends: Vec<&'a str>,
    /// The terminator new lines get: CRLF when most lines end so, else LF.
    pub eol: &'static str,
    /// Whether the text ends with a line terminator.
    pub final_newline: bool,
}

impl<'a> Lines<'a> {
    /// Splits `text` into lines, keeping each one's terminator (`\n` or `\r\n`) aside.
    pub fn parse(text: &'a str) -> Lines<'a> {
        let mut lines = Vec::new();
        let mut ends = Vec::new();
        let (mut crlf, mut lf) = (0usize, 0usize);
        for piece in text.split_inclusive('\n') {
            if let Some(c) = piece.strip_suffix("\r\n") {
                lines.push(c);
                ends.push("\r\n");
                crlf += 1;
            } else if let Some(c) = piece.strip_suffix('\n') {
                lines.push(c);
                ends.push("\n");
                lf += 1;
            } else {
                lines.push(piece);
                ends.push("");
            }
        }
        Lines {
            final_newline: text.ends_with('\n'),
            eol: if crlf > lf { "\r\n" } else { "\n" },
            lines,
            ends,
        }
    }

    /// The number of lines (a final newline does not start another).
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether there are no lines (the text is empty).
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// One hunk: old lines `old` (0-based, half-open, in the first text) become new lines `new` (in the
/// second).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// Its id: `h` and 16 hex digits of a hash of the path, the change and two lines
    /// either side; a repeat within one file gets `-2`, `-3`, ….
    pub id: String,
    /// The lines it replaces in the first text.
    pub old: Range<usize>,
    /// The lines that replace them, in the second text.
    pub new: Range<usize>,
    /// Whether it is over [`MAX_HUNK_LINES`] or [`MAX_HUNK_BYTES`] even after splitting.
    pub oversized: bool,
    /// Whether it is the whole file because the texts were too large to diff (see the module
    /// notes); it is also `oversized`, and its patch is its header only.
    pub whole: bool,
}

impl Hunk {
    /// The unified-diff start of a range: 1-based first line, or for an empty range the line after
    /// which it sits (0 = before the first line), as `diff -U0` and Neovim's `vim.diff` count.
    pub fn start_1based(r: &Range<usize>) -> usize {
        if r.is_empty() { r.start } else { r.start + 1 }
    }

    /// The hunk as a unified diff without context (`@@ -a,b +c,d @@`, `-` and `+` lines; the
    /// header alone for a [`Hunk::whole`] hunk).
    pub fn patch(&self, old: &Lines, new: &Lines) -> String {
        let mut p = format!(
            "@@ -{},{} +{},{} @@\n",
            Self::start_1based(&self.old),
            self.old.len(),
            Self::start_1based(&self.new),
            self.new.len()
        );
        if self.whole {
            return p;
        }
        for l in &old.lines[self.old.clone()] {
            p.push('-');
            p.push_str(l);
            p.push('\n');
        }
        for l in &new.lines[self.new.clone()] {
            p.push('+');
            p.push_str(l);
            p.push('\n');
        }
        p
    }
}

/// The changed runs between `old` and `new` as (old range, new range), in order; `None` when the
/// texts are too large to diff line by line (over [`MAX_DIFF_LINES`], or the diff ran past
/// [`DIFF_DEADLINE`]).
fn changed_runs(old: &Lines, new: &Lines) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    if old.len() + new.len() > MAX_DIFF_LINES {
        return None;
    }
    let started = std::time::Instant::now();
    let deadline = started + DIFF_DEADLINE;
    // Lines are interned to numbers first, so the diff compares integers, not strings.
    let mut table: HashMap<&str, u32> = HashMap::with_capacity(old.len() + new.len());
    let mut a = Vec::with_capacity(old.len());
    for l in &old.lines {
        let n = table.len() as u32;
        a.push(*table.entry(*l).or_insert(n));
    }
    let mut b = Vec::with_capacity(new.len());
    for l in &new.lines {
        let n = table.len() as u32;
        b.push(*table.entry(*l).or_insert(n));
    }
    // Past the deadline `similar` finishes with a coarse diff; the file is then answered whole
    // instead (a coarse diff would give other hunks on the next request).
    let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &a, &b, Some(deadline));
    if std::time::Instant::now() >= deadline {
        return None;
    }
    let mut runs: Vec<(Range<usize>, Range<usize>)> = Vec::new();
    for op in ops {
        let (tag, o, n) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            continue;
        }
        match runs.last_mut() {
            Some((lo, ln)) if lo.end == o.start && ln.end == n.start => {
                lo.end = o.end;
                ln.end = n.end;
            }
            _ => runs.push((o, n)),
        }
    }
    Some(runs)
}

fn size(old: &Lines, new: &Lines, o: &Range<usize>, n: &Range<usize>) -> (usize, usize) {
    let bytes: usize = old.lines[o.clone()]
        .iter()
        .map(|l| l.len() + 1)
        .sum::<usize>()
        + new.lines[n.clone()]
            .iter()
            .map(|l| l.len() + 1)
            .sum::<usize>();
    (o.len() + n.len(), bytes)
}

fn fits(old: &Lines, new: &Lines, o: &Range<usize>, n: &Range<usize>) -> bool {
    let (l, b) = size(old, new, o, n);
    l <= MAX_HUNK_LINES && b <= MAX_HUNK_BYTES
}

/// `range` of `lines` cut after each blank line.
fn paragraphs(lines: &[&str], range: Range<usize>) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = range.start;
    for i in range.clone() {
        if lines[i].trim().is_empty() {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < range.end {
        out.push(start..range.end);
    }
    out
}

/// Cuts one changed run into pieces that fit, at paragraph boundaries; returns (old, new, oversized).
fn split_run(
    old: &Lines,
    new: &Lines,
    o: Range<usize>,
    n: Range<usize>,
) -> Vec<(Range<usize>, Range<usize>, bool)> {
    if fits(old, new, &o, &n) {
        return vec![(o, n, false)];
    }
    let po = paragraphs(&old.lines, o.clone());
    let pn = paragraphs(&new.lines, n.clone());
    // Pairs of (old part, new part): the i-th paragraph of one side replaced by the i-th of the
    // other; the last pair takes whatever is left on both sides.
    let mut pairs: Vec<(Range<usize>, Range<usize>)> = Vec::new();
    if po.is_empty() {
        pairs.extend(pn.into_iter().map(|r| (o.start..o.start, r)));
    } else if pn.is_empty() {
        pairs.extend(po.into_iter().map(|r| (r, n.start..n.start)));
    } else {
        let m = po.len().min(pn.len());
        for i in 0..m - 1 {
            pairs.push((po[i].clone(), pn[i].clone()));
        }
        pairs.push((po[m - 1].start..o.end, pn[m - 1].start..n.end));
    }
    let mut out = Vec::new();
    let mut cur: Option<(Range<usize>, Range<usize>)> = None;
    for (po, pn) in pairs {
        cur = match cur {
            None => Some((po, pn)),
            Some((co, cn)) => {
                let (jo, jn) = (co.start..po.end, cn.start..pn.end);
                if fits(old, new, &jo, &jn) {
                    Some((jo, jn))
                } else {
                    let big = !fits(old, new, &co, &cn);
                    out.push((co, cn, big));
                    Some((po, pn))
                }
            }
        };
    }
    if let Some((co, cn)) = cur {
        let big = !fits(old, new, &co, &cn);
        out.push((co, cn, big));
    }
    out
}

/// How many unchanged lines around a hunk go into its id.
const ID_CONTEXT: usize = 2;

fn hunk_id(path: &str, old: &Lines, new: &Lines, o: &Range<usize>, n: &Range<usize>) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    let before = o.start.saturating_sub(ID_CONTEXT)..o.start;
    let after = o.end..(o.end + ID_CONTEXT).min(old.len());
    for part in [
        &old.lines[before],
        &old.lines[o.clone()],
        &new.lines[n.clone()],
        &old.lines[after],
    ] {
        for l in part {
            h.update(l.as_bytes());
            h.update([b'\n']);
        }
        h.update([0]);
    }
    format!("h{}", &hex::encode(h.finalize())[..16])
}

/// The hunks turning `old` into `new` (ids depend on `path` and the content only).
pub fn hunks(path: &str, old: &Lines, new: &Lines) -> Vec<Hunk> {
    let mut out = Vec::new();
    let Some(runs) = changed_runs(old, new) else {
        if old.lines == new.lines {
            return out;
        }
        let (o, n) = (0..old.len(), 0..new.len());
        out.push(Hunk {
            id: hunk_id(path, old, new, &o, &n),
            old: o,
            new: n,
            oversized: true,
            whole: true,
        });
        return out;
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (o, n) in runs {
        for (o, n, oversized) in split_run(old, new, o, n) {
            let mut id = hunk_id(path, old, new, &o, &n);
            let k = seen.entry(id.clone()).or_insert(0);
            *k += 1;
            if *k > 1 {
                id = format!("{id}-{k}");
            }
            out.push(Hunk {
                id,
                old: o,
                new: n,
                oversized,
                whole: false,
            });
        }
    }
    out
}

/// `base` with each `(range, replacement lines)` of `edits` (ranges in `base`, sorted, not
/// overlapping) spliced in. Kept lines keep their own terminators; new lines get `base`'s; the final
/// newline is `base`'s (or `fallback`'s when `base` has no lines).
pub fn splice(base: &Lines, fallback: &Lines, edits: &[(Range<usize>, Vec<&str>)]) -> Vec<u8> {
    let mut out_lines: Vec<(&str, &str)> = Vec::with_capacity(base.len());
    let mut at = 0;
    for (r, repl) in edits {
        for i in at..r.start.min(base.len()) {
            out_lines.push((base.lines[i], base.ends[i]));
        }
        out_lines.extend(repl.iter().map(|l| (*l, "")));
        at = r.end.max(at);
    }
    for i in at..base.len() {
        out_lines.push((base.lines[i], base.ends[i]));
    }
    let (eol, final_newline) = if base.is_empty() {
        (fallback.eol, fallback.final_newline)
    } else {
        (base.eol, base.final_newline)
    };
    let mut out = Vec::with_capacity(out_lines.iter().map(|(l, _)| l.len() + 2).sum());
    let last = out_lines.len().saturating_sub(1);
    for (i, (l, end)) in out_lines.iter().enumerate() {
        out.extend_from_slice(l.as_bytes());
        if i < last || final_newline {
            out.extend_from_slice(if end.is_empty() { eol } else { end }.as_bytes());
        }
    }
    out
}

/// `old` with the hunks `take` chooses applied (their new lines from `new`).
pub fn apply(old: &Lines, new: &Lines, hunks: &[&Hunk]) -> Vec<u8> {
    let edits: Vec<(Range<usize>, Vec<&str>)> = hunks
        .iter()
        .map(|h| (h.old.clone(), new.lines[h.new.clone()].to_vec()))
        .collect();
    splice(old, new, &edits)
}

/// `new` with the given hunks reverted (their old lines from `old`).
pub fn revert(old: &Lines, new: &Lines, hunks: &[&Hunk]) -> Vec<u8> {
    let edits: Vec<(Range<usize>, Vec<&str>)> = hunks
        .iter()
        .map(|h| (h.new.clone(), old.lines[h.old.clone()].to_vec()))
        .collect();
    splice(new, old, &edits)
}

/// `sha256:` + hex of `bytes` (the `base_hash` of AGENT-PROTOCOL.md §2).
pub fn hash(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Scoped revert of `hunks` (old = before, new = after an apply) in `current`, the file as it is now:
/// a hunk whose lines changed since (per a diff of `new` against `current`) is left alone and
/// returned as a conflict. Returns the new content and the conflicting hunk ids.
pub fn revert_onto<'a>(
    old: &Lines,
    new: &Lines,
    current: &Lines,
    hunks: &[&'a Hunk],
) -> (Vec<u8>, Vec<&'a str>) {
    // The user's changes since the apply, as ranges of `new` and where they land in `current`
    // (too large to diff: everything counts as changed, so every hunk is a conflict).
    let changes =
        changed_runs(new, current).unwrap_or_else(|| vec![(0..new.len(), 0..current.len())]);
    let mut edits: Vec<(Range<usize>, Vec<&str>)> = Vec::new();
    let mut conflicts = Vec::new();
    for h in hunks {
        let (ns, ne) = (h.new.start, h.new.end);
        let overlaps = |c: &Range<usize>| {
            let (cs, ce) = (c.start, c.end);
            match (ns == ne, cs == ce) {
                (false, false) => cs.max(ns) < ce.min(ne),
                (false, true) => ns < cs && cs < ne,
                (true, false) => cs <= ns && ns <= ce,
                (true, true) => cs == ns,
            }
        };
        if changes.iter().any(|(c, _)| overlaps(c)) {
            conflicts.push(h.id.as_str());
            continue;
        }
        // Shift by the changes that lie wholly before the hunk.
        let mut shift: isize = 0;
        for (c, d) in &changes {
            let before = if c.is_empty() {
                c.start <= ns
            } else {
                c.end <= ns
            };
            if before && !(ns == ne && c.is_empty() && c.start == ns) {
                shift += d.len() as isize - c.len() as isize;
            }
        }
        let start = (ns as isize + shift).max(0) as usize;
        edits.push((start..start + (ne - ns), old.lines[h.old.clone()].to_vec()));
    }
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    (splice(current, old, &edits), conflicts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(a: &str, b: &str) -> Vec<Hunk> {
        hunks("f", &Lines::parse(a), &Lines::parse(b))
    }

    #[test]
    fn hunks_apply_and_revert_byte_exact() {
        let a = "one\r\ntwo\r\nthree\r\nfour\r\nfive";
        let b = "one\nTWO\nthree\nfour\nfive\nsix\n";
        let (la, lb) = (Lines::parse(a), Lines::parse(b));
        let h = hunks("f", &la, &lb);
        assert_eq!(h.len(), 2, "{h:?}");
        assert_eq!(apply(&la, &lb, &[]), a.as_bytes());
        assert_eq!(
            String::from_utf8(apply(&la, &lb, &[&h[0]])).unwrap(),
            "one\r\nTWO\r\nthree\r\nfour\r\nfive"
        );
        assert_eq!(
            String::from_utf8(apply(&la, &lb, &[&h[1]])).unwrap(),
            "one\r\ntwo\r\nthree\r\nfour\r\nfive\r\nsix"
        );
        assert_eq!(revert(&la, &lb, &[]), b.as_bytes());
        assert_eq!(
            String::from_utf8(revert(&la, &lb, &[&h[0]])).unwrap(),
            "one\ntwo\nthree\nfour\nfive\nsix\n"
        );
        // Same content, same ids.
        assert_eq!(hs(a, b), h);
    }

    #[test]
    fn big_runs_split_at_blank_lines_or_are_oversized() {
        let para = |p: usize| {
            (0..10)
                .map(|i| format!("p{p} line {i}\n"))
                .collect::<String>()
                + "\n"
        };
        let added: String = (0..20).map(para).collect();
        let h = hs("top\n", &format!("top\n{added}"));
        assert!(h.len() > 1, "{h:?}");
        assert!(
            h.iter()
                .all(|h| !h.oversized && h.new.len() <= MAX_HUNK_LINES)
        );
        let solid: String = (0..200).map(|i| format!("x{i}\n")).collect();
        let h = hs("top\n", &format!("top\n{solid}"));
        assert_eq!(h.len(), 1);
        assert!(h[0].oversized);
    }

    #[test]
    fn texts_too_large_to_diff_are_one_whole_hunk() {
        let old: String = (0..10).map(|i| format!("{i}\n")).collect();
        let new: String = (0..MAX_DIFF_LINES)
            .map(|i| format!("{}\n", i % 7))
            .collect();
        let (lo, ln) = (Lines::parse(&old), Lines::parse(&new));
        let h = hunks("f", &lo, &ln);
        assert_eq!(h.len(), 1);
        assert!(h[0].whole && h[0].oversized);
        assert_eq!(
            (h[0].old.clone(), h[0].new.clone()),
            (0..10, 0..MAX_DIFF_LINES)
        );
        assert_eq!(
            h[0].patch(&lo, &ln),
            format!("@@ -1,10 +1,{MAX_DIFF_LINES} @@\n")
        );
        assert_eq!(apply(&lo, &ln, &[&h[0]]), new.as_bytes());
        assert_eq!(hunks("f", &lo, &ln), h, "the same texts, the same hunk");
        // Equal texts have no hunk, however large.
        assert!(hunks("f", &ln, &ln).is_empty());
    }

    #[test]
    fn scoped_revert_keeps_unrelated_edits_and_reports_overlaps() {
        let before = "a\nb\nc\nd\ne\nf\ng\n";
        let after = "a\nB\nc\nd\ne\nF\ng\n";
        let (lb, la) = (Lines::parse(before), Lines::parse(after));
        let h = hunks("f", &lb, &la);
        assert_eq!(h.len(), 2);
        let cur = "zero\na\nB\nc\nD\ne\nF!\ng\n";
        let lc = Lines::parse(cur);
        let (out, conflicts) = revert_onto(&lb, &la, &lc, &[&h[0], &h[1]]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "zero\na\nb\nc\nD\ne\nF!\ng\n"
        );
        assert_eq!(conflicts, vec![h[1].id.as_str()]);
    }

    #[test]
    fn text_checks() {
        assert!(matches!(as_text("x", b"a\0b"), Err(TextError::Binary(_))));
        assert!(matches!(
            as_text("x", b"\xff\xfe"),
            Err(TextError::NotUtf8(_))
        ));
        assert_eq!(as_text("x", b"ok").unwrap(), "ok");
    }
}
