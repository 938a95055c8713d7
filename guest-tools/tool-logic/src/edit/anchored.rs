//! Anchored edits (EDITS.md, `diff_mode: anchored`): each change names a region of whole lines by a
//! start anchor (1–10 lines) and an optional end anchor (at most 10 lines) and replaces it with
//! `content`. Every anchor must occur exactly once in the *original* file; all changes are located
//! before any is applied, and they must not overlap.

use std::cell::OnceCell;
use std::fmt;

use super::diagnose;
use super::find::find_all;
use super::indent::{self, Style};
use super::repair::{has_typography, number_prefix, to_plain};
use super::search::list_lines;
use super::text::{Doc, Splice, apply_splices, to_lf};

/// The most lines a start or end anchor may have.
pub const MAX_ANCHOR_LINES: usize = 10;

/// One change: the region from the start anchor's first line to the end anchor's last line (or
/// exactly the start anchor without an end) is replaced by `content`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    pub start: Vec<String>,
    /// Empty: the region is exactly the start anchor.
    pub end: Vec<String>,
    /// Empty: the region is deleted.
    pub content: Vec<String>,
}

/// Which anchor of a change an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    End,
}

impl Anchor {
    pub fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::End => "end",
        }
    }
}

/// What is wrong with a change. `Display` gives the texts of EDITS.md where it names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorErrorKind {
    /// `start` has no lines, or only blank ones.
    EmptyStart,
    /// `start` has more than [`MAX_ANCHOR_LINES`] lines.
    StartTooLong(usize),
    /// `end` has more than [`MAX_ANCHOR_LINES`] lines.
    EndTooLong(usize),
    /// The anchor occurs nowhere (at any tier).
    NotFound(Anchor),
    /// The first tier that found the anchor found it more than once; 1-based start lines.
    NotUnique(Anchor, Vec<usize>),
    /// The end anchor does not begin after the start anchor's last line (1-based lines).
    EndNotAfterStart { start: (usize, usize), end: usize },
    /// This change's region (1-based lines) shares lines with change `other`'s.
    Overlap {
        lines: (usize, usize),
        other: usize,
        other_lines: (usize, usize),
    },
}

impl fmt::Display for AnchorErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnchorErrorKind::EmptyStart => f.write_str("empty start anchor"),
            AnchorErrorKind::StartTooLong(n) => {
                write!(
                    f,
                    "start anchor too long ({n} lines, max {MAX_ANCHOR_LINES})"
                )
            }
            AnchorErrorKind::EndTooLong(n) => {
                write!(f, "end anchor too long ({n} lines, max {MAX_ANCHOR_LINES})")
            }
            AnchorErrorKind::NotFound(_) => f.write_str("anchor not found"),
            AnchorErrorKind::NotUnique(_, lines) => {
                write!(f, "anchor not unique (lines {})", list_lines(lines))
            }
            AnchorErrorKind::EndNotAfterStart { start, end } => write!(
                f,
                "end anchor (line {end}) must come after the start anchor (lines {}-{})",
                start.0, start.1
            ),
            AnchorErrorKind::Overlap {
                lines,
                other,
                other_lines,
            } => write!(
                f,
                "region (lines {}-{}) overlaps the region of changes[{other}] (lines {}-{}); changes must not overlap",
                lines.0, lines.1, other_lines.0, other_lines.1
            ),
        }
    }
}

/// An error in change number `change` (0-based index into the changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchoredError {
    pub change: usize,
    pub kind: AnchorErrorKind,
    /// For an anchor not found: the closest region of the file and what differs.
    pub hint: Option<String>,
}

impl AnchoredError {
    /// The anchor the error is about, if it is about locating one.
    pub fn anchor(&self) -> Option<Anchor> {
        match self.kind {
            AnchorErrorKind::NotFound(a) | AnchorErrorKind::NotUnique(a, _) => Some(a),
            AnchorErrorKind::EndNotAfterStart { .. } => Some(Anchor::End),
            _ => None,
        }
    }
}

/// How an anchor matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    Exact,
    TrailingWhitespace,
    Trimmed,
    /// Typographic quotes/dashes read as ASCII (then trimmed), see [`super::repair`].
    Typography,
}

/// The lines of a change's field: `\r\n` read as `\n`; an element that itself contains newlines
/// counts as several lines (a single trailing newline is ignored).
fn flatten(items: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let item = to_lf(item);
        let body = item.strip_suffix('\n').unwrap_or(&item);
        out.extend(body.split('\n').map(str::to_string));
    }
    out
}

/// A located change: lines `first..=last` (0-based) become `text` (LF, no final newline).
struct Located {
    first: usize,
    last: usize,
    text: String,
    delete: bool,
    change: usize,
}

/// The file's lines and their trimmed forms (computed on first use).
struct Keys<'d> {
    exact: Vec<&'d str>,
    trim_end: OnceCell<Vec<&'d str>>,
    trim: OnceCell<Vec<&'d str>>,
    plain: OnceCell<Vec<String>>,
    style: OnceCell<Style>,
}

impl<'d> Keys<'d> {
    /// Finds `anchor` exactly once: exact, then trailing whitespace trimmed, then fully trimmed.
    fn locate(&self, anchor: &[String], which: Anchor) -> Result<(usize, Tier), AnchorErrorKind> {
        let pat: Vec<&str> = anchor.iter().map(String::as_str).collect();
        let mut found = find_all(&self.exact, &pat);
        let mut tier = Tier::Exact;
        if found.is_empty() {
            let keys = self
                .trim_end
                .get_or_init(|| self.exact.iter().map(|l| l.trim_end()).collect());
            let pat: Vec<&str> = pat.iter().map(|l| l.trim_end()).collect();
            found = find_all(keys, &pat);
            tier = Tier::TrailingWhitespace;
        }
        if found.is_empty() {
            let keys = self
                .trim
                .get_or_init(|| self.exact.iter().map(|l| l.trim()).collect());
            let pat: Vec<&str> = pat.iter().map(|l| l.trim()).collect();
            found = find_all(keys, &pat);
            tier = Tier::Trimmed;
        }
        if found.is_empty() && pat.iter().chain(&self.exact).any(|l| has_typography(l)) {
            let keys = self.plain.get_or_init(|| {
                self.exact
                    .iter()
                    .map(|l| to_plain(l).trim().to_string())
                    .collect()
            });
            let pat: Vec<String> = pat.iter().map(|l| to_plain(l).trim().to_string()).collect();
            found = find_all(keys, &pat);
            tier = Tier::Typography;
        }
        match found.as_slice() {
            [] => Err(AnchorErrorKind::NotFound(which)),
            [one] => Ok((*one, tier)),
            many => Err(AnchorErrorKind::NotUnique(
                which,
                many.iter().map(|i| i + 1).collect(),
            )),
        }
    }
}

/// Applies `changes` to `text`. Line endings and the final-newline state of `text` are kept.
pub fn apply_anchored(text: &str, changes: &[Change]) -> Result<String, AnchoredError> {
    let doc = Doc::new(text);
    let keys = Keys {
        exact: doc.line_strs(),
        trim_end: OnceCell::new(),
        trim: OnceCell::new(),
        plain: OnceCell::new(),
        style: OnceCell::new(),
    };
    let mut located: Vec<Located> = Vec::with_capacity(changes.len());
    for (ci, c) in changes.iter().enumerate() {
        let err = |kind| AnchoredError {
            change: ci,
            kind,
            hint: None,
        };
        let mut start = flatten(&c.start);
        let mut end = flatten(&c.end);
        let mut content = flatten(&c.content);
        if start.iter().all(|l| l.trim().is_empty()) {
            return Err(err(AnchorErrorKind::EmptyStart));
        }
        if start.len() > MAX_ANCHOR_LINES {
            return Err(err(AnchorErrorKind::StartTooLong(start.len())));
        }
        if end.len() > MAX_ANCHOR_LINES {
            return Err(err(AnchorErrorKind::EndTooLong(end.len())));
        }
        // Repair: line numbers copied into the anchors (and the content) are dropped when that
        // makes the anchors match.
        if let Some((s2, e2, c2)) = strip_numbers(&start, &end, &content) {
            let found = |a: &[String], w| !a.is_empty() && keys.locate(a, w).is_ok();
            let raw_ok = keys.locate(&start, Anchor::Start).is_ok()
                && (end.is_empty() || keys.locate(&end, Anchor::End).is_ok());
            if !raw_ok && found(&s2, Anchor::Start) && (e2.is_empty() || found(&e2, Anchor::End)) {
                (start, end, content) = (s2, e2, c2);
            }
        }
        let not_found = |kind: AnchorErrorKind, anchor: &[String]| {
            let hint = match kind {
                AnchorErrorKind::NotFound(_) => {
                    let a: Vec<&str> = anchor.iter().map(String::as_str).collect();
                    diagnose::closest(&keys.exact, &a)
                }
                _ => None,
            };
            AnchoredError {
                change: ci,
                kind,
                hint,
            }
        };
        let (first, tier) = keys
            .locate(&start, Anchor::Start)
            .map_err(|k| not_found(k, &start))?;
        let start_last = first + start.len() - 1;
        let mut end_tier = None;
        let last = if end.is_empty() {
            start_last
        } else {
            let (e_first, t) = keys
                .locate(&end, Anchor::End)
                .map_err(|k| not_found(k, &end))?;
            if e_first <= start_last {
                return Err(err(AnchorErrorKind::EndNotAfterStart {
                    start: (first + 1, start_last + 1),
                    end: e_first + 1,
                }));
            }
            end_tier = Some((e_first, t));
            e_first + end.len() - 1
        };
        let content_lines: Vec<&str> = content.iter().map(String::as_str).collect();
        let mut text = match start.iter().position(|l| !l.trim().is_empty()) {
            Some(j) if matches!(tier, Tier::Trimmed | Tier::Typography) => {
                let style = *keys
                    .style
                    .get_or_init(|| indent::detect(keys.exact.iter().copied()));
                indent::reindent_by_first(&start[j], keys.exact[first + j], &content_lines, style)
            }
            _ => content_lines.join("\n"),
        };
        if tier == Tier::Typography || end_tier.is_some_and(|(_, t)| t == Tier::Typography) {
            text = keep_file_typography(&keys.exact, &start, first, &end, end_tier, &text);
        }
        located.push(Located {
            first,
            last,
            text,
            delete: content.is_empty(),
            change: ci,
        });
    }
    located.sort_by_key(|l| l.first);
    for pair in located.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.first <= a.last {
            let (later, earlier) = if a.change > b.change { (a, b) } else { (b, a) };
            return Err(AnchoredError {
                change: later.change,
                kind: AnchorErrorKind::Overlap {
                    lines: (later.first + 1, later.last + 1),
                    other: earlier.change,
                    other_lines: (earlier.first + 1, earlier.last + 1),
                },
                hint: None,
            });
        }
    }
    let splices: Vec<Splice> = located
        .into_iter()
        .map(|l| {
            let last = doc.lines[l.last];
            let mut text = l.text;
            if !l.delete && last.nl {
                text.push('\n');
            }
            Splice {
                start: doc.lines[l.first].start,
                end: last.end_with_nl(),
                text,
            }
        })
        .collect();
    Ok(apply_splices(&doc, &splices))
}

/// Line numbers on every anchor line (consecutive within an anchor): the anchors and content with
/// them dropped (see [`super::repair`]).
fn strip_numbers(
    start: &[String],
    end: &[String],
    content: &[String],
) -> Option<(Vec<String>, Vec<String>, Vec<String>)> {
    let strip = |lines: &[String]| -> Option<Vec<String>> {
        let mut prev: Option<usize> = None;
        let mut out = Vec::with_capacity(lines.len());
        for l in lines {
            let (n, _, c) = number_prefix(l)?;
            if prev.is_some_and(|p| p + 1 != n) {
                return None;
            }
            prev = Some(n);
            out.push(c.to_string());
        }
        Some(out)
    };
    let s = strip(start)?;
    let e = if end.is_empty() {
        Vec::new()
    } else {
        strip(end)?
    };
    let c = content
        .iter()
        .map(|l| match number_prefix(l) {
            Some((_, _, c)) => c.to_string(),
            None => l.clone(),
        })
        .collect();
    Some((s, e, c))
}

/// After a typography match: content lines that repeat an anchor line (compared as ASCII) take the
/// file's line, so quotes the change does not touch keep the file's characters; other lines are
/// written in ASCII when the anchors used typographic characters the file does not.
fn keep_file_typography(
    file: &[&str],
    start: &[String],
    first: usize,
    end: &[String],
    end_at: Option<(usize, Tier)>,
    text: &str,
) -> String {
    let mut pairs: Vec<(String, &str)> = start
        .iter()
        .enumerate()
        .map(|(k, a)| (to_plain(a).trim().to_string(), file[first + k]))
        .collect();
    if let Some((e, _)) = end_at {
        pairs.extend(
            end.iter()
                .enumerate()
                .map(|(k, a)| (to_plain(a).trim().to_string(), file[e + k])),
        );
    }
    let model_typo = start.iter().chain(end).any(|l| has_typography(l));
    text.split('\n')
        .map(|l| {
            let p = to_plain(l);
            match pairs.iter().find(|(k, _)| *k == p.trim()) {
                Some((_, f)) => f.to_string(),
                None if model_typo => p,
                None => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
