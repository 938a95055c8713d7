//! Search/replace matching (EDITS.md, "Matching"): locate `old_string` with the first of five passes
//! that finds anything, check uniqueness, and build the replacement. When nothing is found, the
//! repair passes of [`super::repair`] run; when they find nothing either, [`super::diagnose`] tells
//! the model what differs.
//!
//! Safety rules on top of EDITS.md (issue 13):
//! - the inexact passes (4, truncated boundary; 5, raw substring; every repair) never accept a match
//!   that starts or ends inside an identifier or number (a word character of `old_string` next to a
//!   word character of the file): a stale `retries = 3` is not found inside `retries = 30`;
//! - the prefix rule: a single-line `old_string` found as part of a line, with a `new_string` that
//!   retypes the rest of that line, replaces the whole line instead of duplicating its rest; when
//!   the `new_string` looks like a whole line but does not end like the file's line, the edit is
//!   refused;
//! - whole-line matches ignore a trailing-newline asymmetry between `old_string` and `new_string`.

use std::fmt;

use memchr::memmem;

use super::find::find_all;
use super::indent;
use super::text::{Doc, Splice, apply_splices, to_lf};
use super::{diagnose, repair};

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
    /// Repair: line-number prefixes copied from a numbered listing (`12: `, `  12→`, `12\t`, `12 | `).
    LineNumbers,
    /// Repair: over-escaped text (`\n`, `\t`, `\"` written literally in a one-line `old_string`).
    Unescaped,
    /// Repair: HTML entities (`&lt;`, `&amp;`, ...) that the file does not contain.
    HtmlEntities,
    /// Repair: typographic quotes, dashes and no-break spaces read as their ASCII forms.
    Typography,
    /// Repair: runs of spaces and tabs inside lines (outside quotes) read as one space (issue 32).
    InnerWhitespace,
    /// Repair: blank lines inside the block ignored (the file's blank lines are kept).
    BlankLines,
    /// Repair: elision marker lines (`// ... existing code ...`) split the edit into pieces.
    Elision,
}

impl Pass {
    /// Every pass, in the order they run.
    pub const ALL: [Pass; 13] = [
        Pass::Exact,
        Pass::TrailingWhitespace,
        Pass::Indentation,
        Pass::TruncatedBoundary,
        Pass::Substring,
        Pass::EmptyFile,
        Pass::LineNumbers,
        Pass::Unescaped,
        Pass::HtmlEntities,
        Pass::Typography,
        Pass::InnerWhitespace,
        Pass::BlankLines,
        Pass::Elision,
    ];

    /// A short stable name (used by the test corpus and benchmarks).
    pub fn name(self) -> &'static str {
        match self {
            Pass::Exact => "exact",
            Pass::TrailingWhitespace => "trailing_whitespace",
            Pass::Indentation => "indentation",
            Pass::TruncatedBoundary => "truncated_boundary",
            Pass::Substring => "substring",
            Pass::EmptyFile => "empty_file",
            Pass::LineNumbers => "line_numbers",
            Pass::Unescaped => "unescaped",
            Pass::HtmlEntities => "html_entities",
            Pass::Typography => "typography",
            Pass::InnerWhitespace => "inner_whitespace",
            Pass::BlankLines => "blank_lines",
            Pass::Elision => "elision",
        }
    }

    /// Whether this is a repair pass (runs only after the five matching passes found nothing).
    pub fn is_repair(self) -> bool {
        matches!(
            self,
            Pass::LineNumbers
                | Pass::Unescaped
                | Pass::HtmlEntities
                | Pass::Typography
                | Pass::InnerWhitespace
                | Pass::BlankLines
                | Pass::Elision
        )
    }
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
    /// Occurrences of a one-line `old_string` inside longer words (identifiers, numbers) that the
    /// edit left unchanged (issue 32): the tool result reports them so the model can check.
    pub in_words: InWords,
}

/// Occurrences of `old_string` inside longer words, left unchanged by an edit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InWords {
    /// How many.
    pub count: usize,
    /// The 1-based lines of the first [`MAX_LISTED_LINES`] of them (a line once).
    pub lines: Vec<usize>,
}

/// The occurrences of one-line `old` (LF) in `doc` that start or end inside a word. Empty for a
/// multi-line `old` or one without a word character at an edge (it cannot sit inside a word).
fn in_words(doc: &Doc<'_>, old: &str) -> InWords {
    let old = old.strip_suffix('\n').unwrap_or(old);
    let mut w = InWords::default();
    let edge_word =
        old.chars().next().is_some_and(is_word) || old.chars().next_back().is_some_and(is_word);
    if old.is_empty() || old.contains('\n') || !edge_word {
        return w;
    }
    for at in memmem::find_iter(doc.lf.as_bytes(), old.as_bytes()) {
        if cuts_token(&doc.lf, at, at + old.len(), old) {
            w.count += 1;
            let line = doc.line_at(at) + 1;
            if w.lines.len() < MAX_LISTED_LINES && w.lines.last() != Some(&line) {
                w.lines.push(line);
            }
        }
    }
    w
}

/// Why `old_string` could not be applied. `Display` gives the texts of EDITS.md, followed (for
/// [`MatchError::NotFound`]) by what the model can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchError {
    /// `old_string` is empty but the file has non-whitespace content.
    EmptyOldString,
    /// No pass found `old_string`. `hint`: the closest region and what differs, when one is known.
    NotFound { hint: Option<String> },
    /// The first pass that found anything found `count` matches (and `replace_all` was off);
    /// `lines` are their 1-based start lines, overlapping matches included.
    NotUnique { count: usize, lines: Vec<usize> },
    /// The edit was located but applying it could write a wrong file (e.g. an elision marker in
    /// `old_string` only); the message says why and what to send instead.
    Refused(String),
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchError::EmptyOldString => f.write_str(
                "old_string is empty; an empty old_string is only allowed when the file is empty or contains only whitespace",
            ),
            MatchError::NotFound { hint: None } => f.write_str("old_string not found in file"),
            MatchError::NotFound { hint: Some(h) } => {
                write!(f, "old_string not found in file; {h}")
            }
            MatchError::NotUnique { count, lines } => {
                write!(
                    f,
                    "old_string not unique ({count} matches at lines {})",
                    list_lines(lines)
                )
            }
            MatchError::Refused(why) => f.write_str(why),
        }
    }
}

/// `a, b, c` — at most [`MAX_LISTED_LINES`] numbers, then `, ...`.
pub fn list_lines(lines: &[usize]) -> String {
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
pub(crate) struct Old<'s> {
    pub text: &'s str,
    pub lines: Vec<&'s str>,
    /// Whether `old` ends with `\n` (the match then includes the last line's terminator).
    pub trailing_nl: bool,
}

impl<'s> Old<'s> {
    pub fn new(text: &'s str) -> Self {
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

/// A match an inexact pass found but did not accept (reported to the model when nothing else is
/// found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// The match would start or end inside an identifier or number: 0-based line and its text.
    InToken { line: usize, text: String },
}

/// What one matching attempt produced.
pub(crate) enum Attempt {
    Done(Replaced),
    NotUnique { count: usize, lines: Vec<usize> },
    NotFound(Vec<Blocked>),
}

/// Whether `c` belongs to an identifier or number.
pub(crate) fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether an occurrence of `needle` at LF-space `start..end` of `hay` would start or end inside a
/// token of the file: a word character at the edge of `needle` next to a word character of `hay`.
pub(crate) fn cuts_token(hay: &str, start: usize, end: usize, needle: &str) -> bool {
    let cut_start = needle.chars().next().is_some_and(is_word)
        && hay[..start].chars().next_back().is_some_and(is_word);
    let cut_end = needle.chars().next_back().is_some_and(is_word)
        && hay[end..].chars().next().is_some_and(is_word);
    cut_start || cut_end
}

/// Replaces `old` by `new` in `text` following EDITS.md's matching rules, then the repair passes.
/// `\r\n` in `old` and `new` is read as `\n`; the result keeps `text`'s line endings and
/// final-newline state.
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
            in_words: InWords::default(),
        });
    }
    let blocked = match attempt(&doc, &old, &new, replace_all)? {
        Attempt::Done(mut r) => {
            repair::check_new_only_markers(&doc, &old, &new)?;
            r.in_words = in_words(&doc, &old);
            return Ok(r);
        }
        Attempt::NotUnique { count, lines } => {
            return Err(MatchError::NotUnique { count, lines });
        }
        Attempt::NotFound(blocked) => blocked,
    };
    let mut ambiguous = Vec::new();
    if let Some(r) = repair::run(&doc, &old, &new, &mut ambiguous)? {
        return Ok(r);
    }
    Err(MatchError::NotFound {
        hint: diagnose::hint(&doc, &old, &blocked, &ambiguous),
    })
}

/// One run of the five passes for `old`/`new` (both LF) in `doc`: locates, checks uniqueness and
/// builds the new text. `Err` only for a refusal (the prefix rule).
pub(crate) fn attempt(
    doc: &Doc<'_>,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Attempt, MatchError> {
    let old = Old::new(old);
    let mut blocked = Vec::new();
    let (pass, found) = locate(doc, &old, &mut blocked);
    if found.is_empty() {
        return Ok(Attempt::NotFound(blocked));
    }
    if found.len() > 1 && !replace_all {
        let lines = found
            .iter()
            .map(|f| match *f {
                Found::Lines(first) => first + 1,
                Found::Raw(at) => doc.line_at(at) + 1,
            })
            .collect();
        return Ok(Attempt::NotUnique {
            count: found.len(),
            lines,
        });
    }
    let is_lines = matches!(found[0], Found::Lines(_));
    // Whole-line matches: the trailing newline of old/new is not meaningful.
    let mut delete_lines = false;
    let new: std::borrow::Cow<'_, str> = if !is_lines {
        new.into()
    } else if new.is_empty() {
        delete_lines = !old.trailing_nl;
        new.into()
    } else if old.trailing_nl && !new.ends_with('\n') {
        format!("{new}\n").into()
    } else if !old.trailing_nl && new.ends_with('\n') {
        new[..new.len() - 1].to_string().into()
    } else {
        new.into()
    };
    let style = matches!(pass, Pass::Indentation | Pass::TruncatedBoundary)
        .then(|| indent::detect(doc.line_strs()));
    let new_lines: Vec<&str> = new.split('\n').collect();
    let mut splices: Vec<Splice> = Vec::new();
    let occurrences = found.len();
    for f in found {
        let (mut start, mut end) = region(doc, &old, f);
        if delete_lines {
            if let Found::Lines(first) = f {
                end = doc.lines[first + old.lines.len() - 1].end_with_nl();
            }
        }
        if splices.last().is_some_and(|s| start < s.end) {
            continue; // overlaps the previous occurrence (replace_all): leftmost wins
        }
        let text = match (f, style) {
            (Found::Lines(first), Some(style)) => {
                let k = old.lines.len();
                let file_lines: Vec<&str> = (first..first + k).map(|i| doc.line(i)).collect();
                let re = indent::reindent(&old.lines, &file_lines, &new_lines, style, true)
                    .map_err(|a| MatchError::Refused(a.message()))?;
                let re = if pass == Pass::TruncatedBoundary {
                    restore_truncated(&old, first, &file_lines, &new, re)?
                } else {
                    re
                };
                keep_retyped(&old.lines, &file_lines, &new_lines, re)
            }
            (Found::Lines(first), None) if pass == Pass::TrailingWhitespace => {
                let k = old.lines.len();
                let file_lines: Vec<&str> = (first..first + k).map(|i| doc.line(i)).collect();
                keep_retyped(&old.lines, &file_lines, &new_lines, new.to_string())
            }
            (Found::Raw(at), _) if !old.text.contains('\n') => {
                let (s, e, t) = prefix_rule(doc, at, old.text, &new)?;
                if (s, e) != (start, end) && occurrences > 1 {
                    // new_string retypes one line; with replace_all it cannot fit every occurrence
                    return Err(MatchError::Refused(format!(
                        "new_string retypes the whole of line {} around old_string, so it cannot replace \
                         every occurrence (replace_all); edit each line with its own edit",
                        doc.line_at(at) + 1
                    )));
                }
                start = s;
                end = e;
                t
            }
            _ => new.to_string(),
        };
        splices.push(Splice { start, end, text });
    }
    let count = splices.len();
    Ok(Attempt::Done(Replaced {
        text: apply_splices(doc, &splices),
        pass,
        count,
        in_words: InWords::default(),
    }))
}

/// The prefix rule for a single-line `old` found at LF-space offset `at` inside a line: when `new`
/// retypes the rest of the line after the match (or the part before it), the match is widened to
/// the whole line so that part is not duplicated; when `new` looks like a whole line that does not
/// end like the file's line, the edit is refused. Returns the region and its replacement.
fn prefix_rule(
    doc: &Doc<'_>,
    at: usize,
    old: &str,
    new: &str,
) -> Result<(usize, usize, String), MatchError> {
    let line_no = doc.line_at(at);
    let line = doc.lines[line_no];
    let (mut start, mut end) = (at, at + old.len());
    let before = &doc.lf[line.start..start];
    let after = &doc.lf[end..line.end];
    let before_t = before.trim_start();
    let after_t = after.trim_end();
    let body = new.strip_suffix('\n').unwrap_or(new);
    let first = body.split('\n').next().unwrap_or("");
    let last = body.rsplit('\n').next().unwrap_or("");
    // A retyped part must carry some substance: a lone `)` could also be a legitimate partial edit.
    let substantial = |s: &str| s.chars().count() >= 4 || s.chars().any(is_word);
    let mut text = new.to_string();
    let first_t = first.trim_start();
    // `new` retyped the start of the line (before the match)?
    let before_ev = !before_t.is_empty()
        && substantial(before_t)
        && first_t.len() > before_t.len()
        && first_t.starts_with(before_t);
    // `new` retyped the rest of the line (after the match)?
    let after_ev = !after_t.is_empty()
        && (substantial(after_t) || before_ev)
        && last.len() > after_t.len()
        && last.ends_with(after_t);
    if after_ev {
        end = line.end;
        text = body.to_string();
    } else if !after_t.is_empty() && (new.ends_with('\n') || looks_whole(last, after_t, old)) {
        return Err(MatchError::Refused(format!(
            "old_string matches only part of line {} (`{}`), but new_string looks like the whole \
             line; copy the whole line into old_string",
            line_no + 1,
            diagnose::clip(doc.line(line_no).trim())
        )));
    }
    if before_ev {
        start = line.start + (before.len() - before_t.len());
        text = text.trim_start().to_string();
    }
    Ok((start, end, text))
}

/// Whether `last` (the last line of a replacement for a partial-line match followed by `after`)
/// looks like a whole line: it ends with the same closing character as the file's line, which
/// `old` does not end with.
fn looks_whole(last: &str, after: &str, old: &str) -> bool {
    let closing = |c: char| ";)}]{,:".contains(c);
    let last_file = after.chars().next_back();
    let last_new = last.trim_end().chars().next_back();
    last_file.is_some_and(closing)
        && last_new == last_file
        && !old.trim_end().ends_with(|c| Some(c) == last_file)
        && last.trim().len() > old.trim().len() + 1
}

/// Runs the passes in order; returns the first that finds anything, with its occurrences in order.
/// Matches the inexact passes refuse (inside a token) are recorded in `blocked`.
fn locate(doc: &Doc<'_>, old: &Old<'_>, blocked: &mut Vec<Blocked>) -> (Pass, Vec<Found>) {
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
    let mut kept = Vec::with_capacity(found.len());
    for at in found {
        if cuts_token(&doc.lf, at, at + needle.len(), old.text) {
            let line = doc.line_at(at);
            if blocked.len() < MAX_LISTED_LINES {
                blocked.push(Blocked::InToken {
                    line,
                    text: doc.line(line).to_string(),
                });
            }
        } else {
            kept.push(Found::Raw(at));
        }
    }
    (Pass::Substring, kept)
}

/// Whether trimmed old boundary line `old_t` matches file line `file_line` in pass 4: equal after
/// trimming (`Some(false)`), or a prefix of at least [`MIN_PREFIX_CHARS`] characters of the file's
/// line after its indentation, not ending inside a token (`Some(true)`, truncated).
fn boundary(old_t: &str, file_line: &str) -> Option<bool> {
    if old_t == file_line.trim() {
        return Some(false);
    }
    let rest = file_line.trim_start();
    if old_t.len() >= MIN_PREFIX_CHARS
        && old_t.chars().count() >= MIN_PREFIX_CHARS
        && rest.starts_with(old_t)
        && !cuts_token(rest, 0, old_t.len(), old_t)
    {
        Some(true)
    } else {
        None
    }
}

/// Pass 4: a boundary line of the replacement that repeats the old text's truncated boundary line
/// (after trimming) stands for the unchanged file line, so the file's full line is put back. A
/// truncated boundary line that the replacement does not repeat is refused: replacing the file's
/// whole line would delete the part of it the model never showed, and keeping that part after a
/// changed line would be a guess. `first` is the 0-based file line of the match.
fn restore_truncated(
    old: &Old<'_>,
    first: usize,
    file_lines: &[&str],
    new: &str,
    reindented: String,
) -> Result<String, MatchError> {
    let k = old.lines.len();
    let (Some(&o_first), Some(&o_last), Some(&f_first), Some(&f_last)) = (
        old.lines.first(),
        old.lines.last(),
        file_lines.first(),
        file_lines.last(),
    ) else {
        return Ok(reindented);
    };
    let first_cut = boundary(o_first.trim(), f_first) == Some(true);
    let last_cut = k >= 2 && boundary(o_last.trim(), f_last) == Some(true);
    if !first_cut && !last_cut {
        return Ok(reindented);
    }
    let mut out: Vec<&str> = if new.is_empty() {
        Vec::new()
    } else {
        reindented.split('\n').collect()
    };
    let last_idx = if new.ends_with('\n') && out.len() >= 2 {
        out.len() - 2
    } else {
        out.len().saturating_sub(1)
    };
    let refuse = |line: usize, cut: &str, full: &str| {
        MatchError::Refused(format!(
            "old_string's {} line `{}` is only the start of line {} (`{}`), and new_string does not \
             keep that line unchanged, so the rest of the line would be lost; copy the whole line \
             into old_string (and into new_string where it stays)",
            if line == first { "first" } else { "last" },
            diagnose::clip(cut.trim()),
            line + 1,
            diagnose::clip(full.trim())
        ))
    };
    let mut restored_first = false;
    if first_cut {
        if out.first().is_some_and(|l| l.trim() == o_first.trim()) {
            out[0] = f_first;
            restored_first = true;
        } else {
            return Err(refuse(first, o_first, f_first));
        }
    }
    if last_cut {
        if !(last_idx == 0 && restored_first)
            && out.get(last_idx).is_some_and(|l| l.trim() == o_last.trim())
        {
            out[last_idx] = f_last;
        } else {
            return Err(refuse(first + k - 1, o_last, f_last));
        }
    }
    Ok(out.join("\n"))
}

/// Lines of `new` that the model retyped unchanged from `old` (equal but for trailing whitespace)
/// get the file's line back byte for byte (issue 32: lines the edit does not change keep their
/// bytes), also where passes 2-4 matched a line that differs from the model's in whitespace.
/// `out` is the replacement built from `new_lines` (one line each); `old_lines[i]` matched
/// `file_lines[i]`. A truncated boundary line (not equal to the file's once trimmed) is left to
/// [`restore_truncated`].
fn keep_retyped(
    old_lines: &[&str],
    file_lines: &[&str],
    new_lines: &[&str],
    out: String,
) -> String {
    let mut lines: Vec<&str> = out.split('\n').collect();
    if lines.len() != new_lines.len() {
        return out;
    }
    let mut changed = false;
    for op in repair::diff(old_lines, new_lines, |a, b| a.trim_end() == b.trim_end()) {
        if let repair::Op::Keep(i, j) = op {
            if file_lines[i].trim() == old_lines[i].trim() && lines[j] != file_lines[i] {
                lines[j] = file_lines[i];
                changed = true;
            }
        }
    }
    if changed { lines.join("\n") } else { out }
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
