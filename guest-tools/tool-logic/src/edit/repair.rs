//! Repair passes (issue 13): when none of the five matching passes finds `old_string`, the mistakes
//! models commonly make are undone, each repair applied to `old_string` and `new_string` alike, and
//! the repaired edit is accepted only when the repaired `old_string` matches exactly once. Text the
//! edit does not change keeps the file's own characters.
//!
//! In order:
//! 1. line-number prefixes copied from a numbered listing (`12: `, `  12→`, `12\t`, `12 | `,
//!    `L12: `), consecutive on every line of `old_string`;
//! 2. over-escaped text: a one-line `old_string` with literal `\n`, `\t`, `\"`, `\'`, `\\`;
//! 3. HTML entities (`&lt;` `&gt;` `&amp;` `&quot;` `&#39;` `&apos;` `&nbsp;`) the file does not contain;
//! 4. typographic quotes, dashes and no-break spaces, in either direction: matching reads them as
//!    ASCII; lines and characters the edit does not change keep the file's;
//! 5. blank lines: a missing or extra blank line inside the block; the file's blank lines are kept;
//! 6. elision: marker lines (`// ... existing code ...`, `# ...`, `...`) at the same places in
//!    `old_string` and `new_string` split the edit into pieces, each matched once, in order, the
//!    file's text between them kept. A marker in `old_string` only is refused.

use super::find::find_all;
use super::indent;
use super::search::{Attempt, MatchError, Old, Pass, Replaced, attempt};
use super::text::{Doc, Splice, apply_splices};

/// A repair whose repaired `old_string` matched more than once (reported when nothing else works).
#[derive(Debug, Clone)]
pub(crate) struct Ambiguous {
    pub pass: Pass,
    pub lines: Vec<usize>,
}

/// Runs the repair passes in order; the first accepted one wins.
pub(crate) fn run(
    doc: &Doc<'_>,
    old: &str,
    new: &str,
    ambiguous: &mut Vec<Ambiguous>,
) -> Result<Option<Replaced>, MatchError> {
    let mut accept = |pass: Pass, a: Attempt| -> Option<Replaced> {
        match a {
            Attempt::Done(mut r) if r.count == 1 => {
                r.pass = pass;
                Some(r)
            }
            Attempt::NotUnique { lines, .. } => {
                ambiguous.push(Ambiguous { pass, lines });
                None
            }
            _ => None,
        }
    };
    // A repair that leaves nothing to match (`12: ` alone) is no repair.
    let usable = |o: &str| !o.trim().is_empty();
    if let Some((o, n)) = strip_line_numbers(old, new).filter(|(o, _)| usable(o)) {
        if let Some(r) = accept(Pass::LineNumbers, attempt(doc, &o, &n, false)?) {
            return Ok(Some(r));
        }
    }
    if let Some((o, n)) = unescape_pair(old, new).filter(|(o, _)| usable(o)) {
        if let Some(r) = accept(Pass::Unescaped, attempt(doc, &o, &n, false)?) {
            return Ok(Some(r));
        }
    }
    if let Some((o, n)) = decode_entities(&doc.lf, old, new).filter(|(o, _)| usable(o)) {
        if let Some(r) = accept(Pass::HtmlEntities, attempt(doc, &o, &n, false)?) {
            return Ok(Some(r));
        }
    }
    if let Some(r) = typography(doc, old, new, &mut accept)? {
        return Ok(Some(r));
    }
    if let Some(r) = inner_whitespace(doc, old, new, &mut accept)? {
        return Ok(Some(r));
    }
    if let Some(r) = blank_lines(doc, old, new, ambiguous)? {
        return Ok(Some(r));
    }
    elision(doc, old, new)
}

// ---- 1. line numbers ------------------------------------------------------------------------------

/// The shapes of a line-number prefix, after optional leading spaces and the digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sep {
    Arrow,
    Tab,
    Colon,
    Bar,
}

/// Splits `line` into (number, separator, content) if it starts with a line-number prefix.
pub(crate) fn number_prefix(line: &str) -> Option<(usize, Sep, &str)> {
    let s = line.trim_start_matches(' ');
    let s = s.strip_prefix('L').unwrap_or(s);
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 7 {
        return None;
    }
    let n: usize = s[..digits].parse().ok()?;
    let rest = &s[digits..];
    let (sep, content) = if let Some(c) = rest.strip_prefix('→') {
        (Sep::Arrow, c)
    } else if let Some(c) = rest.strip_prefix('\t') {
        (Sep::Tab, c)
    } else if let Some(c) = rest.strip_prefix(':') {
        (Sep::Colon, c.strip_prefix(' ').unwrap_or(c))
    } else if let Some(c) = rest.strip_prefix(" | ").or_else(|| rest.strip_prefix(" |")) {
        (Sep::Bar, c)
    } else if let Some(c) = rest.strip_prefix('|') {
        (Sep::Bar, c.strip_prefix(' ').unwrap_or(c))
    } else {
        return None;
    };
    Some((n, sep, content))
}

/// Every line of `old` (but an empty last one) carries a consecutive line number with the same
/// separator: strips them from `old`, and the same-shaped prefixes from `new`.
fn strip_line_numbers(old: &str, new: &str) -> Option<(String, String)> {
    let body = old.strip_suffix('\n').unwrap_or(old);
    let mut sep0 = None;
    let mut prev: Option<usize> = None;
    let mut lo = None;
    let mut padded = false;
    let mut out = Vec::new();
    for line in body.split('\n') {
        let (n, sep, content) = number_prefix(line)?;
        if sep0.is_some_and(|s| s != sep) || prev.is_some_and(|p| p + 1 != n) {
            return None;
        }
        sep0 = Some(sep);
        prev = Some(n);
        lo.get_or_insert(n);
        padded |= line.starts_with(' ');
        out.push(content);
    }
    let (sep0, lo, hi) = (sep0?, lo?, prev?);
    let mut o = out.join("\n");
    if old.ends_with('\n') {
        o.push('\n');
    }
    // In `new`, only prefixes shaped like old's (same separator, padding only if old's were padded)
    // with a number near old's range are line numbers: `    1: "a",` in a dict literal is not.
    let span = new.split('\n').count();
    let n = new
        .split('\n')
        .map(|l| match number_prefix(l) {
            Some((num, sep, content))
                if sep == sep0
                    && (padded || !l.starts_with(' '))
                    && num + span >= lo
                    && num <= hi + span =>
            {
                content
            }
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    Some((o, n))
}

// ---- 2. over-escaped text -------------------------------------------------------------------------

/// Undoes one level of escaping (`\n` `\t` `\r` `\"` `\'` `\\`); other backslashes stay.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.peek().copied() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('"') => out.push('"'),
            Some('\'') => out.push('\''),
            Some('\\') => out.push('\\'),
            _ => {
                out.push('\\');
                continue;
            }
        }
        it.next();
    }
    out.replace("\r\n", "\n")
}

/// A one-line `old` with escapes: both unescaped (`new` only when it has no real newline either).
fn unescape_pair(old: &str, new: &str) -> Option<(String, String)> {
    if old.contains('\n') || !old.contains('\\') {
        return None;
    }
    let o = unescape(old);
    if o == old {
        return None;
    }
    let n = if new.contains('\n') {
        new.to_string()
    } else {
        unescape(new)
    };
    Some((o, n))
}

// ---- 3. HTML entities -----------------------------------------------------------------------------

const ENTITIES: [(&str, &str); 8] = [
    ("&lt;", "<"),
    ("&gt;", ">"),
    ("&quot;", "\""),
    ("&#39;", "'"),
    ("&#x27;", "'"),
    ("&apos;", "'"),
    ("&nbsp;", " "),
    ("&amp;", "&"),
];

/// When `old` uses an entity of [`ENTITIES`] the file does not contain: decodes, in `old` and
/// `new`, every such entity the file does not contain.
fn decode_entities(file: &str, old: &str, new: &str) -> Option<(String, String)> {
    if !ENTITIES
        .iter()
        .any(|(e, _)| old.contains(e) && !file.contains(e))
    {
        return None;
    }
    let used: Vec<(&str, &str)> = ENTITIES
        .iter()
        .copied()
        .filter(|(e, _)| (old.contains(e) || new.contains(e)) && !file.contains(e))
        .collect();
    let dec = |s: &str| {
        let mut s = s.to_string();
        for (e, c) in &used {
            s = s.replace(e, c);
        }
        s
    };
    Some((dec(old), dec(new)))
}

// ---- 4. typography --------------------------------------------------------------------------------

/// The ASCII form of a typographic character (one character for one, so positions correspond).
fn plain(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => '"',
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2212}' => '-',
        '\u{00A0}' | '\u{202F}' => ' ',
        c => c,
    }
}

pub(crate) fn has_typography(s: &str) -> bool {
    s.chars().any(|c| plain(c) != c)
}

pub(crate) fn to_plain(s: &str) -> String {
    s.chars().map(plain).collect()
}

/// Matches with typographic characters read as ASCII in the file and `old_string` (and in
/// `new_string` when `old_string` had any: they are the model's, not the file's), then gives back
/// the file's characters everywhere the edit did not change them.
fn typography(
    doc: &Doc<'_>,
    old: &str,
    new: &str,
    accept: &mut impl FnMut(Pass, Attempt) -> Option<Replaced>,
) -> Result<Option<Replaced>, MatchError> {
    let old_typo = has_typography(old);
    if !old_typo && !has_typography(&doc.lf) {
        return Ok(None);
    }
    let norm = to_plain(doc.orig);
    let ndoc = Doc::new(&norm);
    let o = to_plain(old);
    if o.trim().is_empty() {
        return Ok(None);
    }
    let n = if old_typo {
        to_plain(new)
    } else {
        new.to_string()
    };
    let Some(mut r) = accept(Pass::Typography, attempt(&ndoc, &o, &n, false)?) else {
        return Ok(None);
    };
    r.text = restore(doc.orig, &norm, &r.text);
    Ok(Some(r))
}

/// Lines of `s`, each with its terminator.
fn lines_nl(s: &str) -> Vec<&str> {
    s.split_inclusive('\n').collect()
}

/// `edited` is `norm` (the file with [`plain`] applied) after an edit; returns it with the file's
/// (`orig`'s) characters wherever the edit kept `norm`'s: whole lines, and the unchanged start and
/// end of a changed line.
fn restore(orig: &str, norm: &str, edited: &str) -> String {
    let o = lines_nl(orig);
    let n = lines_nl(norm);
    let e = lines_nl(edited);
    let mut a = 0;
    while a < n.len() && a < e.len() && n[a] == e[a] {
        a += 1;
    }
    let mut b = 0;
    while b < n.len() - a && b < e.len() - a && n[n.len() - 1 - b] == e[e.len() - 1 - b] {
        b += 1;
    }
    let mut out = String::with_capacity(edited.len() + 64);
    for l in &o[..a] {
        out.push_str(l);
    }
    let ops = diff(&n[a..n.len() - b], &e[a..e.len() - b], |x, y| x == y);
    let mut dels: Vec<usize> = Vec::new();
    let mut ins: Vec<usize> = Vec::new();
    let flush = |dels: &mut Vec<usize>, ins: &mut Vec<usize>, out: &mut String| {
        for (k, &j) in ins.iter().enumerate() {
            match dels.get(k) {
                Some(&i) => out.push_str(&merge_chars(o[a + i], n[a + i], e[a + j])),
                None => out.push_str(e[a + j]),
            }
        }
        dels.clear();
        ins.clear();
    };
    for op in ops {
        match op {
            Op::Keep(i, _) => {
                flush(&mut dels, &mut ins, &mut out);
                out.push_str(o[a + i]);
            }
            Op::Delete(i) => dels.push(i),
            Op::Insert(j) => ins.push(j),
        }
    }
    flush(&mut dels, &mut ins, &mut out);
    for l in &o[o.len() - b..] {
        out.push_str(l);
    }
    out
}

/// A changed line: `orig`'s characters for the start and end it shares with `edited` (compared in
/// `norm`, `orig` with [`plain`] applied, so the same number of characters), `edited`'s between.
fn merge_chars(orig: &str, norm: &str, edited: &str) -> String {
    let oc: Vec<char> = orig.chars().collect();
    let nc: Vec<char> = norm.chars().collect();
    let ec: Vec<char> = edited.chars().collect();
    if oc.len() != nc.len() {
        return edited.to_string();
    }
    let mut p = 0;
    while p < nc.len() && p < ec.len() && nc[p] == ec[p] {
        p += 1;
    }
    let mut s = 0;
    while s < nc.len() - p && s < ec.len() - p && nc[nc.len() - 1 - s] == ec[ec.len() - 1 - s] {
        s += 1;
    }
    let mut out: String = oc[..p].iter().collect();
    out.extend(&ec[p..ec.len() - s]);
    out.extend(&oc[oc.len() - s..]);
    out
}

// ---- 4b. whitespace inside lines ---------------------------------------------------------------

/// `line` with every run of spaces and tabs after its indentation read as one space and trailing
/// whitespace dropped, except inside quotes (`"`, `'`, `` ` ``) where spacing is content. `None`
/// when the line has nothing to squeeze.
fn squeeze(line: &str) -> Option<String> {
    let body = line.trim_end();
    let ind = &body[..body.len() - body.trim_start().len()];
    let mut out = String::with_capacity(body.len());
    out.push_str(ind);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut space = false;
    for c in body[ind.len()..].chars() {
        if quote.is_none() && (c == ' ' || c == '\t') {
            space = true;
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c);
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
            _ => {}
        }
    }
    (out != line).then_some(out)
}

/// `text` with [`squeeze`] applied to every line (`\n`-separated, terminators kept).
fn squeeze_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, l) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        match squeeze(l) {
            Some(s) => out.push_str(&s),
            None => out.push_str(l),
        }
    }
    out
}

/// Matches with runs of spaces and tabs inside lines (outside quotes) read as one space, in the file
/// and `old_string` (`function   sum(a,   b)` for `function sum(a, b)`, either way round). Lines of
/// `new_string` that equal an old line once squeezed are read squeezed too (they are context the
/// model retyped), the others are written as the model wrote them; lines the edit does not change
/// keep the file's text. Accepted only when the squeezed `old_string` matches exactly once.
fn inner_whitespace(
    doc: &Doc<'_>,
    old: &str,
    new: &str,
    accept: &mut impl FnMut(Pass, Attempt) -> Option<Replaced>,
) -> Result<Option<Replaced>, MatchError> {
    let o = squeeze_text(old);
    if o.trim().is_empty() {
        return Ok(None);
    }
    let norm = squeeze_text(&doc.lf);
    if o == old && norm == *doc.lf {
        return Ok(None);
    }
    let old_keys: std::collections::HashSet<&str> = o.split('\n').collect();
    let n = new
        .split('\n')
        .map(|l| match squeeze(l) {
            Some(s) if old_keys.contains(s.as_str()) => s,
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let ndoc = Doc::new(&norm);
    let Some(mut r) = accept(Pass::InnerWhitespace, attempt(&ndoc, &o, &n, false)?) else {
        return Ok(None);
    };
    // back to the file's characters where the edit kept the squeezed lines, then the file's endings
    let edited = restore(&doc.lf, &norm, &r.text);
    r.text = if edited == *doc.lf {
        doc.orig.to_string()
    } else {
        apply_splices(
            doc,
            &[Splice {
                start: 0,
                end: doc.lf.len(),
                text: edited,
            }],
        )
    };
    Ok(Some(r))
}

// ---- line diff ------------------------------------------------------------------------------------

/// One step of a line diff from `a` to `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Keep(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// The largest diff computed exactly (cells of the LCS table); larger ones replace everything.
const MAX_DIFF_CELLS: usize = 4_000_000;

/// A longest-common-subsequence diff; deletions come before insertions within a change.
pub(crate) fn diff<T>(a: &[T], b: &[T], eq: impl Fn(&T, &T) -> bool) -> Vec<Op> {
    let (n, m) = (a.len(), b.len());
    if n.saturating_mul(m) > MAX_DIFF_CELLS {
        let mut ops: Vec<Op> = (0..n).map(Op::Delete).collect();
        ops.extend((0..m).map(Op::Insert));
        return ops;
    }
    // lcs[i][j]: LCS length of a[i..] and b[j..]
    let w = m + 1;
    let mut lcs = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * w + j] = if eq(&a[i], &b[j]) {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let mut ops = Vec::with_capacity(n + m);
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && eq(&a[i], &b[j]) {
            ops.push(Op::Keep(i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            ops.push(Op::Delete(i));
            i += 1;
        } else {
            ops.push(Op::Insert(j));
            j += 1;
        }
    }
    ops
}

// ---- 5. blank lines -------------------------------------------------------------------------------

/// Key tiers for whole-line matching: exact, trailing whitespace trimmed, fully trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    Exact,
    TrimEnd,
    Trim,
}

const TIERS: [Tier; 3] = [Tier::Exact, Tier::TrimEnd, Tier::Trim];

fn key(tier: Tier, l: &str) -> &str {
    match tier {
        Tier::Exact => l,
        Tier::TrimEnd => l.trim_end(),
        Tier::Trim => l.trim(),
    }
}

/// Matches the non-blank lines of `old` against consecutive non-blank lines of the file, and
/// applies `old`→`new` onto the file's region line by line: unchanged lines keep the file's text
/// (and the file's blank lines stay where they are), changed and added lines come from `new`.
fn blank_lines(
    doc: &Doc<'_>,
    old: &str,
    new: &str,
    ambiguous: &mut Vec<Ambiguous>,
) -> Result<Option<Replaced>, MatchError> {
    let old = Old::new(old);
    let ob: Vec<usize> = (0..old.lines.len())
        .filter(|&i| !old.lines[i].trim().is_empty())
        .collect();
    if ob.len() < 2 {
        return Ok(None);
    }
    let file = doc.line_strs();
    let fb: Vec<usize> = (0..file.len())
        .filter(|&i| !file[i].trim().is_empty())
        .collect();
    let mut hit = None;
    for tier in TIERS {
        let hay: Vec<&str> = fb.iter().map(|&i| key(tier, file[i])).collect();
        let pat: Vec<&str> = ob.iter().map(|&i| key(tier, old.lines[i])).collect();
        let found = find_all(&hay, &pat);
        match found.as_slice() {
            [] => continue,
            [q] => {
                hit = Some((tier, *q));
                break;
            }
            many => {
                ambiguous.push(Ambiguous {
                    pass: Pass::BlankLines,
                    lines: many.iter().map(|&q| fb[q] + 1).collect(),
                });
                return Ok(None);
            }
        }
    }
    let Some((tier, q)) = hit else {
        return Ok(None);
    };
    // old line i -> file line
    let mut align: Vec<Option<usize>> = vec![None; old.lines.len()];
    for (k, &i) in ob.iter().enumerate() {
        align[i] = Some(fb[q + k]);
    }
    let first = fb[q];
    let last = fb[q + ob.len() - 1];
    let new_body = new.strip_suffix('\n').unwrap_or(new);
    let new_lines: Vec<&str> = if new.is_empty() {
        Vec::new()
    } else {
        new_body.split('\n').collect()
    };
    let reindented: Option<Vec<String>> = if tier == Tier::Trim {
        let (ol, fl): (Vec<&str>, Vec<&str>) = ob
            .iter()
            .map(|&i| (old.lines[i], file[align[i].unwrap_or(first)]))
            .unzip();
        let style = indent::detect(file.iter().copied());
        let re = indent::reindent(&ol, &fl, &new_lines, style, true)
            .map_err(|a| MatchError::Refused(a.message()))?;
        Some(re.split('\n').map(str::to_string).collect())
    } else {
        None
    };
    let new_line = |j: usize| -> &str {
        match &reindented {
            Some(r) => r.get(j).map(String::as_str).unwrap_or(new_lines[j]),
            None => new_lines[j],
        }
    };
    let ops = diff(&old.lines, &new_lines, |a, b| key(tier, a) == key(tier, b));
    let mut out: Vec<&str> = Vec::new();
    let mut fc = first; // next file line of the region not yet emitted or skipped
    let mut last_kept = true; // whether the previous aligned old line was kept
    for op in ops {
        match op {
            Op::Keep(i, _) => match align[i] {
                Some(f) => {
                    while fc < f {
                        out.push(file[fc]);
                        fc += 1;
                    }
                    out.push(file[f]);
                    fc = f + 1;
                    last_kept = true;
                }
                None => {
                    if fc <= last && file[fc].trim().is_empty() {
                        out.push(file[fc]);
                        fc += 1;
                    }
                }
            },
            Op::Delete(i) => match align[i] {
                Some(f) => {
                    while fc < f {
                        if last_kept {
                            out.push(file[fc]);
                        }
                        fc += 1;
                    }
                    fc = f + 1;
                    last_kept = false;
                }
                None => {
                    if fc <= last && file[fc].trim().is_empty() {
                        fc += 1;
                    }
                }
            },
            Op::Insert(j) => out.push(new_line(j)),
        }
    }
    let mut text = out.join("\n");
    if !out.is_empty() {
        text.push('\n');
    }
    let splice = Splice {
        start: doc.lines[first].start,
        end: doc.lines[last].end_with_nl(),
        text,
    };
    Ok(Some(Replaced {
        text: apply_splices(doc, &[splice]),
        pass: Pass::BlankLines,
        count: 1,
        in_words: Default::default(),
    }))
}

// ---- 6. elision -----------------------------------------------------------------------------------

/// Whether `line` is an elision marker: `...` or `…` alone or followed by words (`... existing code
/// ...`), optionally inside a comment (`//`, `#`, `--`, `;`, `%`, `/* */`, `<!-- -->`, `{/* */}`).
/// `...rest` (a spread) is not one. `commented` reports whether a comment leader was present or
/// words followed (the markers that can never be code).
pub(crate) fn marker(line: &str) -> Option<bool> {
    let mut s = line.trim();
    let mut commented = false;
    for lead in ["{/*", "/*", "<!--", "//", "#", "--", ";", "%"] {
        if let Some(r) = s.strip_prefix(lead) {
            s = r.trim_start();
            commented = true;
            break;
        }
    }
    for tail in ["*/}", "*/", "-->"] {
        if let Some(r) = s.strip_suffix(tail) {
            s = r.trim_end();
        }
    }
    let s = s
        .strip_prefix("[...]")
        .or_else(|| s.strip_prefix("(...)"))
        .or_else(|| s.strip_prefix("..."))
        .or_else(|| s.strip_prefix('…'))?;
    let s = s.trim_start_matches('.');
    if s.is_empty() {
        return Some(commented);
    }
    if !s.starts_with(char::is_whitespace) {
        return None;
    }
    // words after the dots: a short phrase, no code punctuation
    let words = s.split_whitespace().count();
    if words <= 8 && !s.contains(['(', ')', '{', '}', ';', '=', '[', ']']) {
        Some(true)
    } else {
        None
    }
}

/// Refuses a `new_string` with commented elision markers that `old_string` does not have: the
/// marker would be written literally in place of the code it stands for.
pub(crate) fn check_new_only_markers(
    doc: &Doc<'_>,
    old: &str,
    new: &str,
) -> Result<(), MatchError> {
    for (j, line) in new.split('\n').enumerate() {
        if marker(line) == Some(true)
            && !old.split('\n').any(|o| o.trim() == line.trim())
            && !doc.lf.contains(line.trim())
        {
            return Err(MatchError::Refused(format!(
                "new_string line {} (`{}`) is an elision marker that old_string does not have at the same \
                 place; it would be written into the file literally. Write out the code it stands for, or \
                 put the same marker line in old_string",
                j + 1,
                line.trim()
            )));
        }
    }
    Ok(())
}

/// Splits `text` (LF, no final newline) at marker lines: the pieces between them (as lines) and
/// the 1-based line numbers of the markers.
fn split_markers(text: &str) -> (Vec<Vec<&str>>, Vec<usize>) {
    let mut pieces = vec![Vec::new()];
    let mut markers = Vec::new();
    if text.is_empty() {
        return (pieces, markers);
    }
    for (i, line) in text.split('\n').enumerate() {
        if marker(line).is_some() {
            markers.push(i + 1);
            pieces.push(Vec::new());
        } else if let Some(p) = pieces.last_mut() {
            p.push(line);
        }
    }
    (pieces, markers)
}

/// Drops leading and trailing blank lines.
fn trim_blank<'a, 's>(lines: &'a [&'s str]) -> &'a [&'s str] {
    let s = lines.iter().position(|l| !l.trim().is_empty());
    let e = lines.iter().rposition(|l| !l.trim().is_empty());
    match (s, e) {
        (Some(s), Some(e)) => &lines[s..=e],
        _ => &[],
    }
}

/// Finds `pat` in `file` (tiers: exact, trailing whitespace, trimmed; the first tier that finds
/// anything decides) among starts `>= from`: with `unique`, exactly one occurrence; otherwise the
/// nearest. (Elision asks for unique pieces: the first in the whole file, later ones in the rest
/// of the file after the previous piece.)
fn find_piece(
    file: &[&str],
    pat: &[&str],
    from: usize,
    unique: bool,
) -> Result<(usize, Tier), Option<Vec<usize>>> {
    for tier in TIERS {
        let hay: Vec<&str> = file.iter().map(|l| key(tier, l)).collect();
        let p: Vec<&str> = pat.iter().map(|l| key(tier, l)).collect();
        let found: Vec<usize> = find_all(&hay, &p)
            .into_iter()
            .filter(|&f| f >= from)
            .collect();
        match found.as_slice() {
            [] => continue,
            [one] => return Ok((*one, tier)),
            many if unique => return Err(Some(many.iter().map(|f| f + 1).collect())),
            [first, ..] => return Ok((*first, tier)),
        }
    }
    Err(None)
}

/// When line `open` opens a block (ends with `{`, `(`, `[`, `:` or `do`/`then`), the first line of
/// the elided gap `open + 1..next` that is not indented deeper than it (the block was left).
fn leaves_block(file: &[&str], open: usize, next: usize) -> Option<usize> {
    let o = file[open].trim_end();
    let opener = o.ends_with(['{', '(', '[', ':']) || o.ends_with(" do") || o.ends_with(" then");
    if !opener {
        return None;
    }
    let w = |l: &str| {
        super::indent::indent_of(l)
            .chars()
            .map(|c| if c == '\t' { 4 } else { 1 })
            .sum::<usize>()
    };
    let base = w(file[open]);
    (open + 1..next).find(|&i| !file[i].trim().is_empty() && w(file[i]) <= base)
}

fn elision(doc: &Doc<'_>, old: &str, new: &str) -> Result<Option<Replaced>, MatchError> {
    let old_body = old.strip_suffix('\n').unwrap_or(old);
    let new_body = new.strip_suffix('\n').unwrap_or(new);
    let (opieces, omarks) = split_markers(old_body);
    if omarks.is_empty() {
        return Ok(None);
    }
    let (npieces, nmarks) = split_markers(new_body);
    if nmarks.len() != omarks.len() {
        let at = omarks
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(MatchError::Refused(format!(
            "old_string has {} elision marker line(s) (`...`, at its line(s) {at}) standing for unchanged \
             code, but new_string has {}; a marker must be at the same place in both (or copy the elided \
             lines into old_string and new_string)",
            omarks.len(),
            nmarks.len()
        )));
    }
    let file = doc.line_strs();
    let refuse = |what: String| Err(MatchError::Refused(what));
    let mut from = 0usize;
    let mut anchored = false;
    let mut splices = Vec::new();
    let style = indent::detect(file.iter().copied());
    for (k, (op, np)) in opieces.iter().zip(&npieces).enumerate() {
        let op = trim_blank(op);
        let np = trim_blank(np);
        if op.is_empty() {
            if !np.is_empty() {
                return refuse(format!(
                    "new_string has text in the elided part {k} (between elision markers) where old_string \
                     has none, so there is nothing to place it by; add a line of the file there in old_string"
                ));
            }
            continue;
        }
        let (first, tier) = match find_piece(&file, op, from, true) {
            Ok(f) => f,
            Err(Some(lines)) => {
                return refuse(format!(
                    "old_string part {k} (around elision markers) is not unique ({} matches at lines {}); \
                     add lines to it",
                    lines.len(),
                    super::search::list_lines(&lines)
                ));
            }
            Err(None) => {
                if anchored {
                    return refuse(format!(
                        "old_string part {k} (after an elision marker, starting `{}`) not found after line \
                         {from} of the file",
                        op[0].trim()
                    ));
                }
                return Ok(None);
            }
        };
        if let Some(prev_last) = from.checked_sub(1).filter(|_| anchored) {
            if let Some(bad) = leaves_block(&file, prev_last, first) {
                return refuse(format!(
                    "old_string part {k} (after an elision marker) was found at line {}, but the elided \
                     lines would then include line {} (`{}`), outside the block that line {} opens; \
                     old_string may be stale: copy it from the file's current text",
                    first + 1,
                    bad + 1,
                    super::diagnose::clip(file[bad].trim()),
                    prev_last + 1
                ));
            }
        }
        anchored = true;
        let last = first + op.len() - 1;
        let text = if np.is_empty() {
            String::new()
        } else if tier == Tier::Trim {
            let fl: Vec<&str> = file[first..=last].to_vec();
            let mut t = indent::reindent(op, &fl, np, style, true)
                .map_err(|a| MatchError::Refused(a.message()))?;
            t.push('\n');
            t
        } else {
            let mut t = np.join("\n");
            t.push('\n');
            t
        };
        if op.len() == np.len() && op.iter().zip(np).all(|(a, b)| a == b) {
            // unchanged piece: keep the file's bytes
        } else {
            splices.push(Splice {
                start: doc.lines[first].start,
                end: doc.lines[last].end_with_nl(),
                text,
            });
        }
        from = last + 1;
    }
    if !anchored {
        return Ok(None);
    }
    Ok(Some(Replaced {
        text: apply_splices(doc, &splices),
        pass: Pass::Elision,
        count: 1,
        in_words: Default::default(),
    }))
}
