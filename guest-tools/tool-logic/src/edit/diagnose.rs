//! Errors that help the model fix its call (issue 13): when `old_string` (or an anchor) is not
//! found, the closest region of the file is named with its line numbers and what differs on each
//! line — indentation (tabs vs spaces), trailing whitespace, quotes or dashes, line numbers copied
//! into the text, or a changed value (often a stale one: the file changed since the model read it).
//!
//! Only runs on the error path; linear in the file size.

use std::collections::{HashMap, HashSet};

use super::indent::indent_of;
use super::repair::{Ambiguous, number_prefix, to_plain};
use super::search::{Blocked, list_lines};
use super::text::Doc;

/// The most differing lines described.
const MAX_NOTES: usize = 6;
/// The longest line quoted, in characters.
const CLIP: usize = 100;

/// `s`, cut to [`CLIP`] characters.
pub(crate) fn clip(s: &str) -> String {
    if s.chars().count() <= CLIP {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(CLIP).collect();
        t.push('…');
        t
    }
}

/// The hint appended to `old_string not found in file`.
pub(crate) fn hint(
    doc: &Doc<'_>,
    old: &str,
    blocked: &[Blocked],
    ambiguous: &[Ambiguous],
) -> Option<String> {
    if let Some(Blocked::InToken { line, text }) = blocked.first() {
        return Some(format!(
            "it occurs only inside a longer word or number, at line {} (`{}`): the file may have changed \
             since you read it; copy old_string from its current text",
            line + 1,
            clip(text.trim())
        ));
    }
    if let Some(a) = ambiguous.first() {
        return Some(format!(
            "read with {} repaired it matches {} places (lines {}); add surrounding lines to make it unique",
            describe_pass(a.pass),
            a.lines.len(),
            list_lines(&a.lines)
        ));
    }
    let body = old.strip_suffix('\n').unwrap_or(old);
    let old_lines: Vec<&str> = body.split('\n').collect();
    closest(&doc.line_strs(), &old_lines)
}

fn describe_pass(p: super::search::Pass) -> &'static str {
    use super::search::Pass;
    match p {
        Pass::LineNumbers => "line numbers",
        Pass::Unescaped => "escapes",
        Pass::HtmlEntities => "HTML entities",
        Pass::Typography => "quotes and dashes",
        Pass::InnerWhitespace => "spaces inside lines",
        Pass::BlankLines => "blank lines",
        _ => "whitespace",
    }
}

/// The text without whitespace, typographic characters as ASCII, a line-number prefix dropped.
fn loose(line: &str) -> String {
    let l = number_prefix(line).map(|(_, _, c)| c).unwrap_or(line);
    to_plain(l).chars().filter(|c| !c.is_whitespace()).collect()
}

/// Identifier and number tokens of `s`.
fn tokens(s: &str) -> Vec<&str> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .collect()
}

/// Where `old` (lines) most probably was meant to be in `file` (lines), and what differs there:
/// `closest match at lines a-b: ...`. `None` when nothing in the file resembles it.
pub(crate) fn closest(file: &[&str], old: &[&str]) -> Option<String> {
    if file.is_empty() || old.is_empty() {
        return None;
    }
    let start = by_votes(file, old).or_else(|| by_tokens(file, old))?;
    let s = start.max(0) as usize;
    if s >= file.len() {
        return None;
    }
    let e = (s + old.len()).min(file.len());
    let mut notes = Vec::new();
    let offset = (s as isize - start) as usize;
    for (k, f) in (s..e).enumerate() {
        let Some(o) = old.get(k + offset) else { break };
        if let Some(n) = note(f + 1, file[f], o) {
            notes.push(n);
        }
        if notes.len() == MAX_NOTES {
            notes.push("...".to_string());
            break;
        }
    }
    let range = if e - s > 1 {
        format!("lines {}-{}", s + 1, e)
    } else {
        format!("line {}", s + 1)
    };
    if notes.is_empty() {
        return Some(format!(
            "the closest text is at {range}; copy old_string from the file's current text"
        ));
    }
    Some(format!(
        "the closest text is at {range}, where it differs:\n{}",
        notes.join("\n")
    ))
}

/// The start line (may be negative) most lines of `old` agree on, comparing loosely.
fn by_votes(file: &[&str], old: &[&str]) -> Option<isize> {
    let mut want: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, o) in old.iter().enumerate().take(200) {
        let k = loose(o);
        if k.chars().count() >= 3 {
            want.entry(k).or_default().push(i);
        }
    }
    if want.is_empty() {
        return None;
    }
    let mut votes: HashMap<isize, usize> = HashMap::new();
    for (f, line) in file.iter().enumerate() {
        let k = loose(line);
        if let Some(is) = want.get(&k) {
            for &i in is {
                *votes.entry(f as isize - i as isize).or_default() += 1;
            }
        }
    }
    votes
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(s, _)| s)
}

/// The start line implied by the file line sharing the most tokens with a line of `old` (at least
/// half of that line's tokens).
fn by_tokens(file: &[&str], old: &[&str]) -> Option<isize> {
    let olds: Vec<(usize, HashSet<&str>)> = old
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .take(10)
        .map(|(i, l)| (i, tokens(l).into_iter().collect::<HashSet<_>>()))
        .filter(|(_, t)| !t.is_empty())
        .collect();
    let mut best: Option<(f64, isize)> = None;
    for (f, line) in file.iter().enumerate() {
        let ft: HashSet<&str> = tokens(line).into_iter().collect();
        if ft.is_empty() {
            continue;
        }
        for (i, ot) in &olds {
            let shared = ot.intersection(&ft).count();
            let score = shared as f64 / ot.len().max(ft.len()) as f64;
            if shared > 0 && score >= 0.5 && best.is_none_or(|(b, _)| score > b) {
                best = Some((score, f as isize - *i as isize));
            }
        }
    }
    best.map(|(_, s)| s)
}

/// Describes indentation `ws`.
fn ws_desc(ws: &str) -> String {
    let tabs = ws.chars().filter(|&c| c == '\t').count();
    let spaces = ws.chars().filter(|&c| c == ' ').count();
    match (tabs, spaces) {
        (0, 0) => "no indentation".into(),
        (0, n) => format!("{n} space(s)"),
        (n, 0) => format!("{n} tab(s)"),
        (t, s) => format!("{t} tab(s) and {s} space(s)"),
    }
}

/// What differs between file line `n` (1-based) `f` and the model's line `o`, if anything.
fn note(n: usize, f: &str, o: &str) -> Option<String> {
    if f == o {
        return None;
    }
    if f.trim_end() == o.trim_end() {
        return Some(format!("- line {n}: trailing whitespace differs"));
    }
    if f.trim() == o.trim() {
        return Some(format!(
            "- line {n}: indentation differs: the file has {}, old_string has {}",
            ws_desc(indent_of(f)),
            ws_desc(indent_of(o))
        ));
    }
    if let Some((num, _, content)) = number_prefix(o) {
        if content.trim() == f.trim() || loose(content) == loose(f) {
            return Some(format!(
                "- line {n}: old_string starts with a line number ({num}); line numbers are not part of the file"
            ));
        }
    }
    if to_plain(f).trim() == to_plain(o).trim() {
        return Some(format!(
            "- line {n}: quotes or dashes differ: the file has `{}`, old_string has `{}`",
            clip(f.trim()),
            clip(o.trim())
        ));
    }
    if f.trim().is_empty() != o.trim().is_empty() {
        return Some(if f.trim().is_empty() {
            format!(
                "- line {n}: the file has a blank line here, old_string has `{}`",
                clip(o.trim())
            )
        } else {
            format!(
                "- line {n}: the file has `{}`, old_string has a blank line",
                clip(f.trim())
            )
        });
    }
    let ft = tokens(f);
    let ot = tokens(o);
    let mut stale = String::new();
    if ft.len() == ot.len() {
        let diffs: Vec<(&str, &str)> = ft
            .iter()
            .zip(&ot)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        if let [(a, b)] = diffs.as_slice() {
            let num = |s: &str| s.chars().all(|c| c.is_ascii_digit() || c == '.');
            stale = if num(a) && num(b) {
                format!(
                    " (the file says {a} where old_string says {b}: a stale value? the file may have changed)"
                )
            } else {
                format!(" (`{a}` in the file, `{b}` in old_string)")
            };
        }
    }
    Some(format!(
        "- line {n}: the file has `{}`, old_string has `{}`{stale}",
        clip(f.trim()),
        clip(o.trim())
    ))
}
