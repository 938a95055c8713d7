//! Search/replace matching (EDITS.md, "Matching"): locate `old_string` with the first of five passes
//! that finds anything, check uniqueness, and build the replacement.

use std::fmt;

use memchr::memmem;

use super::find::find_all;
use super::indent;
use super::text::{Doc, Splice, apply_splices, to_lf};

/// The pass that located `old_string`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// 1: the old lines equal file lines exactly.
    Exact,
    /// 2: equal after trimming trailing whitespace.
    TrailingWhitespace,
    /// 3: equal after trimming all surrounding whitespace; the replacement is re-indented.
    Indentation,
    /// 4: interior lines equal after trimming, a boundary line of the old text is a truncated prefix
    /// (at least [`MIN_PREFIX_CHARS`] characters) of the file's line.
    TruncatedBoundary,
    /// 5: raw substring match.
    Substring,
    /// Empty `old_string` on an empty or whitespace-only file: the whole file is replaced.
    EmptyFile,
}

/// The shortest truncated boundary line pass 4 accepts, in characters (after trimming).
pub const MIN_PREFIX_CHARS: usize = 8;

/// How many line numbers a "not unique" message lists before eliding the rest.
pub const MAX_LISTED_LINES: usize = 10;

/// A successful replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replaced {
    /// The new file text.
    pub text: String,
    /// The pass that matched.
    pub pass: Pass,
    /// How many occurrences were replaced (1 unless `replace_all`).
    pub count: usize,
}

/// Why `old_string` could not be applied. `Display` gives the texts of EDITS.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchError {
    /// `old_string` is empty but the file has non-whitespace content.
    EmptyOldString,
    /// No pass found `old_string`.
    NotFound,
    /// The first pass that found anything found `count` matches (and `replace_all` was off);
    /// `lines` are their 1-based start lines, overlapping matches included.
    NotUnique { count: usize, lines: Vec<usize> },
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchError::EmptyOldString => f.write_str(
                "old_string is empty; an empty old_string is only allowed when the file is empty or contains only whitespace",
            ),
            MatchError::NotFound => f.write_str("old_string not found in file"),
            MatchError::NotUnique { count, lines } => {
                write!(f, "old_string not unique ({count} matches at lines {})", list_lines(lines))
            }
        }
    }
}

/// `a, b, c` — at most [`MAX_LISTED_LINES`] numbers, then `, ...`.
pub(crate) fn list_lines(lines: &[usize]) -> String {
    let mut s = lines
        .iter()
        .take(MAX_LISTED_LINES)
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if lines.len() > MAX_LISTED_LINES {
        s.push_str(", ...");
    }
    s
}

/// `old` split into lines: a final `\n` ends the last line instead of starting an empty one.
struct Old<'s> {
    text: &'s str,
    lines: Vec<&'s str>,
    /// Whether `old` ends with `\n` (the match then includes the last line's terminator).
    trailing_nl: bool,
}

impl<'s> Old<'s> {
    fn new(text: &'s str) -> Self {
        let (body, trailing_nl) = match text.strip_suffix('\n') {
            Some(b) => (b, true),
            None => (text, false),
        };
        Old {
            text,
            lines: body.split('\n').collect(),
            trailing_nl,
        }
    }
}

/// A located occurrence.
#[derive(Debug, Clone, Copy)]
enum Found {
    /// Lines `first..first + old.lines.len()` (passes 1–4).
    Lines(usize),
    /// LF-space byte offset (pass 5).
    Raw(usize),
}

/// Replaces `old` by `new` in `text` following EDITS.md's matching rules. `\r\n` in `old` and `new` is
/// read as `\n`; the result keeps `text`'s line endings and final-newline state.
pub fn replace(
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Replaced, MatchError> {
    let old = to_lf(old);
    let new = to_lf(new);
    let doc = Doc::new(text);
    if old.is_empty() {
        if !doc.lf.trim().is_empty() {
            return Err(MatchError::EmptyOldString);
        }
        let splice = Splice {
            start: 0,
            end: doc.lf.len(),
            text: new.into_owned(),
        };
        return Ok(Replaced {
            text: apply_splices(&doc, &[splice]),
            pass: Pass::EmptyFile,
            count: 1,
        });
    }
    let old = Old::new(&old);
    let (pass, found) = locate(&doc, &old);
    if found.is_empty() {
        return Err(MatchError::NotFound);
    }
    if found.len() > 1 && !replace_all {
        let lines = found
            .iter()
            .map(|f| match *f {
                Found::Lines(first) => first + 1,
                Found::Raw(at) => doc.line_at(at) + 1,
            })
            .collect();
        return Err(MatchError::NotUnique {
            count: found.len(),
            lines,
        });
    }
    let style = matches!(pass, Pass::Indentation | Pass::TruncatedBoundary)
        .then(|| indent::detect(doc.line_strs()));
    let new_lines: Vec<&str> = new.split('\n').collect();
    let mut splices: Vec<Splice> = Vec::new();
    for f in found {
        let (start, end) = region(&doc, &old, f);
        if splices.last().is_some_and(|s| start < s.end) {
            continue; // overlaps the previous occurrence (replace_all): leftmost wins
        }
        let text = match (f, style) {
            (Found::Lines(first), Some(style)) => {
                let k = old.lines.len();
                let file_lines: Vec<&str> = (first..first + k).map(|i| doc.line(i)).collect();
                let re = indent::reindent(&old.lines, &file_lines, &new_lines, style, true);
                if pass == Pass::TruncatedBoundary {
                    restore_truncated(&old, &file_lines, &new, re)
                } else {
                    re
                }
            }
            _ => new.to_string(),
        };
        splices.push(Splice { start, end, text });
    }
    let count = splices.len();
    Ok(Replaced {
        text: apply_splices(&doc, &splices),
        pass,
        count,
    })
}

/// Runs the passes in order; returns the first that finds anything, with its occurrences in order.
fn locate(doc: &Doc<'_>, old: &Old<'_>) -> (Pass, Vec<Found>) {
    let k = old.lines.len();
    let lines = |starts: Vec<usize>| starts.into_iter().map(Found::Lines).collect::<Vec<_>>();

    let file: Vec<&str> = doc.line_strs();
    let found = find_all(&file, &old.lines);
    if !found.is_empty() {
        return (Pass::Exact, lines(found));
    }

    let file_te: Vec<&str> = file.iter().map(|l| l.trim_end()).collect();
    let old_te: Vec<&str> = old.lines.iter().map(|l| l.trim_end()).collect();
    let found = find_all(&file_te, &old_te);
    if !found.is_empty() {
        return (Pass::TrailingWhitespace, lines(found));
    }
    drop(file_te);

    let file_t: Vec<&str> = file.iter().map(|l| l.trim()).collect();
    let old_t: Vec<&str> = old.lines.iter().map(|l| l.trim()).collect();
    let found = find_all(&file_t, &old_t);
    if !found.is_empty() {
        return (Pass::Indentation, lines(found));
    }

    if k >= 2 && k <= file.len() {
        let ok = |first: usize| {
            boundary(old_t[0], file[first]).is_some()
                && boundary(old_t[k - 1], file[first + k - 1]).is_some()
        };
        let found: Vec<usize> = if k == 2 {
            (0..=file.len() - k).filter(|&f| ok(f)).collect()
        } else {
            find_all(&file_t, &old_t[1..k - 1])
                .into_iter()
                .filter_map(|i| i.checked_sub(1))
                .filter(|&f| f + k <= file.len() && ok(f))
                .collect()
        };
        if !found.is_empty() {
            return (Pass::TruncatedBoundary, lines(found));
        }
    }

    let hay = doc.lf.as_bytes();
    let needle = old.text.as_bytes();
    let finder = memmem::Finder::new(needle);
    let found = match finder.find(hay) {
        None => Vec::new(),
        Some(first) => match finder.find(&hay[first + 1..]) {
            None => vec![first],
            Some(_) => find_all(hay, needle),
        },
    };
    (Pass::Substring, found.into_iter().map(Found::Raw).collect())
}

/// Whether trimmed old boundary line `old_t` matches file line `file_line` in pass 4: equal after
/// trimming (`Some(false)`), or a prefix of at least [`MIN_PREFIX_CHARS`] characters of the file's
/// line after its indentation (`Some(true)`, truncated).
fn boundary(old_t: &str, file_line: &str) -> Option<bool> {
    if old_t == file_line.trim() {
        Some(false)
    } else if old_t.len() >= MIN_PREFIX_CHARS
        && old_t.chars().count() >= MIN_PREFIX_CHARS
        && file_line.trim_start().starts_with(old_t)
    {
        Some(true)
    } else {
        None
    }
}

/// Pass 4: a boundary line of the replacement that repeats the old text's truncated boundary line
/// (after trimming) stands for the unchanged file line, so the file's full line is put back.
fn restore_truncated(old: &Old<'_>, file_lines: &[&str], new: &str, reindented: String) -> String {
    let k = old.lines.len();
    let (Some(&o_first), Some(&o_last), Some(&f_first), Some(&f_last)) = (
        old.lines.first(),
        old.lines.last(),
        file_lines.first(),
        file_lines.last(),
    ) else {
        return reindented;
    };
    let first_cut = boundary(o_first.trim(), f_first) == Some(true);
    let last_cut = k >= 2 && boundary(o_last.trim(), f_last) == Some(true);
    if !first_cut && !last_cut {
        return reindented;
    }
    let mut out: Vec<&str> = reindented.split('\n').collect();
    let last_idx = if new.ends_with('\n') && out.len() >= 2 {
        out.len() - 2
    } else {
        out.len() - 1
    };
    let mut restored_first = false;
    if first_cut && out[0].trim() == o_first.trim() {
        out[0] = f_first;
        restored_first = true;
    }
    if last_cut && !(last_idx == 0 && restored_first) && out[last_idx].trim() == o_last.trim() {
        out[last_idx] = f_last;
    }
    out.join("\n")
}

/// The LF-space region an occurrence covers.
fn region(doc: &Doc<'_>, old: &Old<'_>, f: Found) -> (usize, usize) {
    match f {
        Found::Raw(at) => (at, at + old.text.len()),
        Found::Lines(first) => {
            let last = doc.lines[first + old.lines.len() - 1];
            let end = if old.trailing_nl {
                last.end_with_nl()
            } else {
                last.end
            };
            (doc.lines[first].start, end)
        }
    }
}
