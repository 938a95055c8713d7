//! Re-indentation of a replacement whose old text matched only after trimming (EDITS.md, pass 3 and
//! the anchored fallback): the model's indentation is mapped onto the file's, line by line.
//!
//! Widths count a tab as [`TAB`] columns. The mapping works from *pairs*: for every non-blank line of
//! the model's old text, its indentation and the indentation of the file line it matched. A line of
//! the replacement is re-indented relative to one pair (its *anchor*):
//! - indentation equal to the anchor's model indentation becomes the anchor's file indentation;
//! - deeper lines keep their extra depth, converted to the file's style (tabs or spaces) and unit
//!   (e.g. 2-space levels in the model become 4-space levels or tabs in the file);
//! - shallower lines lose the corresponding depth from the anchor's file indentation.
//!
//! When every model indentation maps to a single file indentation (the usual case: the model shifted
//! or restyled the block), the anchor is chosen by depth, so inserted lines land at the right level,
//! and the whole block moves by one consistent mapping. Depth differences are converted by the ratio
//! the block itself shows (model levels 2 columns apart that are 4 apart in the file); a block whose
//! old lines all sit at one depth shows no ratio and is shifted as it is (issue 32: the unit the rest
//! of the file seems to use is no evidence about the model's).
//!
//! When the model flattened distinct levels onto one (the mapping is ambiguous), anchors follow the
//! lines instead: the replacement is aligned with the old text (a line diff of the trimmed lines); a
//! replacement line equal to an old line uses that line's pair, a changed line that replaces exactly
//! one old line (as many changed lines as old lines between the same unchanged ones) uses that old
//! line's pair, and an inserted line is placed only when every old line around it puts it at the
//! same indentation. Otherwise the re-indentation would be a guess and [`Ambiguous`] is returned.

use std::collections::HashMap;

use super::repair::{Op, diff};

/// Re-indentation that would be a guess: `line` (a replacement line) lands at `widths` (columns)
/// depending on which old line it is placed by, because the old text's indentation does not map
/// onto the file's consistently (`model_line` is at `model_w` columns in old_string, `file_w` in
/// the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ambiguous {
    pub line: String,
    pub widths: (usize, usize),
    pub model_line: String,
    pub model_w: usize,
    pub file_w: usize,
}

impl Ambiguous {
    /// The refusal for the model.
    pub fn message(&self) -> String {
        format!(
            "the indentation of new_string is ambiguous: old_string's indentation does not match \
             the file's consistently (`{}` is at {} columns in old_string but {} in the file), so \
             the new line `{}` could go at {} or {} columns; copy old_string with the file's exact \
             indentation",
            super::diagnose::clip(&self.model_line),
            self.model_w,
            self.file_w,
            super::diagnose::clip(self.line.trim()),
            self.widths.0,
            self.widths.1
        )
    }
}

/// Columns a tab counts for when comparing indentation widths.
pub(crate) const TAB: usize = 4;

/// How a text indents: with tabs or spaces, and the width of one level (if it can be told).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    pub tabs: bool,
    pub unit: Option<usize>,
}

/// The leading whitespace of `line`.
pub(crate) fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The width of indentation `ws` in columns.
fn width(ws: &str) -> usize {
    ws.chars().map(|c| if c == '\t' { TAB } else { 1 }).sum()
}

/// Accumulates indentation statistics over one or more runs of lines.
#[derive(Default)]
struct Detector {
    tab_lines: usize,
    space_lines: usize,
    /// How often each step between consecutive non-blank lines (1..=16 columns) occurs.
    steps: [usize; 17],
}

impl Detector {
    fn feed<'s>(&mut self, lines: impl IntoIterator<Item = &'s str>) {
        let mut prev: Option<usize> = None;
        for line in lines {
            if line.trim().is_empty() {
                continue;
            }
            let ind = indent_of(line);
            if ind.starts_with('\t') {
                self.tab_lines += 1;
            } else if ind.starts_with(' ') {
                self.space_lines += 1;
            }
            let w = width(ind);
            if let Some(p) = prev {
                let d = w.abs_diff(p);
                if (1..self.steps.len()).contains(&d) {
                    self.steps[d] += 1;
                }
            }
            prev = Some(w);
        }
    }

    fn style(&self) -> Style {
        let tabs = self.tab_lines > self.space_lines;
        let unit = if tabs {
            Some(TAB)
        } else {
            // The most frequent step; ties go to the smaller step.
            let mut best: Option<(usize, usize)> = None;
            for (step, &count) in self.steps.iter().enumerate().skip(1) {
                if count > 0 && best.is_none_or(|(_, c)| count > c) {
                    best = Some((step, count));
                }
            }
            best.map(|(step, _)| step)
        };
        Style { tabs, unit }
    }
}

/// The indentation style of a whole file.
pub(crate) fn detect<'s>(lines: impl IntoIterator<Item = &'s str>) -> Style {
    let mut d = Detector::default();
    d.feed(lines);
    d.style()
}

/// One non-blank old line: the model's indentation and the matched file line's.
#[derive(Debug, Clone, Copy)]
struct Pair<'s> {
    model: &'s str,
    file: &'s str,
    model_w: usize,
    file_w: usize,
    /// The trimmed content (equal in the model's and the file's line for passes 3 and 4).
    key: &'s str,
}

/// Converts a depth of `d` model columns into file columns: every `ratio.0` model columns are
/// `ratio.1` file columns.
fn scale(d: usize, ratio: (usize, usize)) -> usize {
    let (m, f) = ratio;
    if m != f && m > 0 {
        (d / m) * f + d % m
    } else {
        d
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// How model depth converts to file depth in a consistently mapped block: the ratio the block's
/// own levels show (all steps between distinct model depths proportional), 1:1 when the block has
/// one depth only, else the detected units of the model's text and of the file.
fn block_ratio(pairs: &[Pair<'_>], model_unit: Option<usize>, file: Style) -> (usize, usize) {
    let mut depths: Vec<(usize, usize)> = pairs.iter().map(|p| (p.model_w, p.file_w)).collect();
    depths.sort_unstable();
    depths.dedup();
    if depths.len() == 1 {
        return (1, 1);
    }
    let steps: Vec<(usize, usize)> = depths
        .windows(2)
        .filter_map(|w| Some((w[1].0 - w[0].0, w[1].1.checked_sub(w[0].1)?)))
        .collect();
    if steps.len() == depths.len() - 1 {
        let (m0, f0) = steps[0];
        if f0 > 0 && steps.iter().all(|&(m, f)| m * f0 == f * m0) {
            let g = gcd(m0, f0);
            return (m0 / g, f0 / g);
        }
    }
    match (model_unit, file.unit) {
        (Some(m), Some(f)) => (m, f),
        _ => (1, 1),
    }
}

/// Indentation of `cols` columns in the given style.
fn render(cols: usize, tabs: bool) -> String {
    if tabs {
        let mut s = "\t".repeat(cols / TAB);
        s.push_str(&" ".repeat(cols % TAB));
        s
    } else {
        " ".repeat(cols)
    }
}

/// Re-indents `new_lines` (the replacement, split at `\n`).
///
/// `old_lines[i]` is the model's old line that matched `file_lines[i]` (after trimming). `file` is the
/// style of the whole file. With `keep_if_carried`, a replacement that already carries the file's
/// indentation is returned unchanged (see [`carries_file_indentation`]). Blank lines are kept as they
/// are. Returns the lines joined with `\n`, or [`Ambiguous`] when placing a line would be a guess.
pub(crate) fn reindent(
    old_lines: &[&str],
    file_lines: &[&str],
    new_lines: &[&str],
    file: Style,
    keep_if_carried: bool,
) -> Result<String, Ambiguous> {
    let pairs: Vec<Pair<'_>> = old_lines
        .iter()
        .zip(file_lines)
        .filter(|(o, _)| !o.trim().is_empty())
        .map(|(o, f)| {
            let model = indent_of(o);
            let file = indent_of(f);
            Pair {
                model,
                file,
                model_w: width(model),
                file_w: width(file),
                key: o.trim(),
            }
        })
        .collect();
    if pairs.is_empty() || (keep_if_carried && carries_file_indentation(&pairs, new_lines)) {
        return Ok(new_lines.join("\n"));
    }
    let mut by_model: HashMap<&str, &str> = HashMap::new();
    let mut consistent = true;
    for p in &pairs {
        if *by_model.entry(p.model).or_insert(p.file) != p.file {
            consistent = false;
        }
    }
    let mut det = Detector::default();
    det.feed(old_lines.iter().copied());
    det.feed(new_lines.iter().copied());
    let model_unit = det.style().unit;
    let ratio = if consistent {
        block_ratio(&pairs, model_unit, file)
    } else {
        match (model_unit, file.unit) {
            (Some(m), Some(f)) => (m, f),
            _ => (1, 1),
        }
    };
    let anchors = if consistent {
        None
    } else {
        Some(align(&pairs, new_lines, ratio, file)?)
    };

    let mut out = String::with_capacity(new_lines.iter().map(|l| l.len() + 1).sum::<usize>() + 64);
    for (n, line) in new_lines.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        if line.trim().is_empty() {
            out.push_str(line);
            continue;
        }
        let ind = indent_of(line);
        let anchor = match &anchors {
            None => by_depth(&pairs, ind),
            Some(a) => &pairs[a[n]],
        };
        out.push_str(&map_indent(anchor, ind, ratio, file));
        out.push_str(&line[ind.len()..]);
    }
    Ok(out)
}

/// For an inconsistently indented block: the pair each non-blank replacement line is placed by
/// (indexed like `new_lines`; blank lines get 0), from a line diff of the trimmed old and new lines.
fn align(
    pairs: &[Pair<'_>],
    new_lines: &[&str],
    ratio: (usize, usize),
    file: Style,
) -> Result<Vec<usize>, Ambiguous> {
    let nb: Vec<usize> = (0..new_lines.len())
        .filter(|&n| !new_lines[n].trim().is_empty())
        .collect();
    let keys: Vec<&str> = nb.iter().map(|&n| new_lines[n].trim()).collect();
    let pkeys: Vec<&str> = pairs.iter().map(|p| p.key).collect();
    let mut anchor = vec![0usize; new_lines.len()];
    // runs of changed lines between unchanged ones: (old pairs deleted, new lines inserted)
    let mut prev_keep: Option<usize> = None;
    let mut deleted: Vec<usize> = Vec::new();
    let mut inserted: Vec<usize> = Vec::new();
    let flush = |anchor: &mut [usize],
                 prev: Option<usize>,
                 next: Option<usize>,
                 deleted: &mut Vec<usize>,
                 inserted: &mut Vec<usize>|
     -> Result<(), Ambiguous> {
        if deleted.len() == inserted.len() {
            for (&d, &j) in deleted.iter().zip(inserted.iter()) {
                anchor[nb[j]] = d;
            }
        } else {
            // every old line around the change must place each new line the same way
            let around: Vec<usize> = prev
                .into_iter()
                .chain(deleted.iter().copied())
                .chain(next)
                .collect();
            for &j in inserted.iter() {
                let line = new_lines[nb[j]];
                let ind = indent_of(line);
                let Some(&first) = around.first() else {
                    continue;
                };
                let want = map_indent(&pairs[first], ind, ratio, file);
                for &a in &around[1..] {
                    let got = map_indent(&pairs[a], ind, ratio, file);
                    if got != want {
                        let odd = if pairs[first].model_w != pairs[first].file_w {
                            first
                        } else {
                            a
                        };
                        return Err(Ambiguous {
                            line: line.to_string(),
                            widths: (width(&want).min(width(&got)), width(&want).max(width(&got))),
                            model_line: pairs[odd].key.to_string(),
                            model_w: pairs[odd].model_w,
                            file_w: pairs[odd].file_w,
                        });
                    }
                }
                anchor[nb[j]] = first;
            }
        }
        deleted.clear();
        inserted.clear();
        Ok(())
    };
    for op in diff(&pkeys, &keys, |a, b| a == b) {
        match op {
            Op::Keep(i, j) => {
                flush(&mut anchor, prev_keep, Some(i), &mut deleted, &mut inserted)?;
                anchor[nb[j]] = i;
                prev_keep = Some(i);
            }
            Op::Delete(i) => deleted.push(i),
            Op::Insert(j) => inserted.push(j),
        }
    }
    flush(&mut anchor, prev_keep, None, &mut deleted, &mut inserted)?;
    Ok(anchor)
}

/// Re-indents `new_lines` relative to a single pair (anchored mode: the first anchor line), without
/// the "already carried" exception. Returns the lines joined with `\n`.
pub(crate) fn reindent_by_first(
    old_line: &str,
    file_line: &str,
    new_lines: &[&str],
    file: Style,
) -> String {
    // one pair is always consistent
    reindent(&[old_line], &[file_line], new_lines, file, false)
        .unwrap_or_else(|_| new_lines.join("\n"))
}

/// Whether the replacement is already written in the file's indentation (while the old text was
/// not). Evidence comes from replacement lines that equal an old line after trimming: all of them
/// must carry that line's file indentation, and for at least one the model's old indentation must
/// differ. Without such lines, the first non-blank replacement line must carry the file indentation
/// of the first old line, and the model's first old line must not.
fn carries_file_indentation(pairs: &[Pair<'_>], new_lines: &[&str]) -> bool {
    let mut by_key: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, p) in pairs.iter().enumerate() {
        by_key.entry(p.key).or_default().push(i);
    }
    let mut evidence = false;
    let mut all_carry = true;
    let mut any_differs = false;
    for line in new_lines.iter().filter(|l| !l.trim().is_empty()) {
        let ind = indent_of(line);
        if let Some(i) = same_line(pairs, &by_key, line, |p| p.file == ind) {
            let p = &pairs[i];
            evidence = true;
            all_carry &= p.file == ind;
            any_differs |= p.model != p.file;
        }
    }
    if evidence {
        return all_carry && any_differs;
    }
    match (
        new_lines.iter().find(|l| !l.trim().is_empty()),
        pairs.first(),
    ) {
        (Some(first), Some(p)) => indent_of(first) == p.file && p.model != p.file,
        _ => false,
    }
}

/// The pair whose old line equals `line` after trimming, preferring one that satisfies `prefer`.
fn same_line(
    pairs: &[Pair<'_>],
    by_key: &HashMap<&str, Vec<usize>>,
    line: &str,
    prefer: impl Fn(&Pair<'_>) -> bool,
) -> Option<usize> {
    let candidates = by_key.get(line.trim())?;
    candidates
        .iter()
        .copied()
        .find(|&i| prefer(&pairs[i]))
        .or_else(|| candidates.first().copied())
}

/// The anchor for indentation `ind` by depth: the pair with exactly that model indentation, else the
/// deepest pair not deeper than it, else the shallowest pair. `pairs` is non-empty.
fn by_depth<'p, 's>(pairs: &'p [Pair<'s>], ind: &str) -> &'p Pair<'s> {
    if let Some(p) = pairs.iter().find(|p| p.model == ind) {
        return p;
    }
    let w = width(ind);
    let mut best: Option<&Pair<'_>> = None;
    for p in pairs.iter().filter(|p| p.model_w <= w) {
        if best.is_none_or(|b| p.model_w > b.model_w) {
            best = Some(p);
        }
    }
    if let Some(b) = best {
        return b;
    }
    let mut shallowest = &pairs[0];
    for p in pairs {
        if p.model_w < shallowest.model_w {
            shallowest = p;
        }
    }
    shallowest
}

/// Maps model indentation `ind` to file indentation relative to `anchor`.
fn map_indent(anchor: &Pair<'_>, ind: &str, ratio: (usize, usize), file: Style) -> String {
    if ind == anchor.model {
        return anchor.file.to_string();
    }
    let tabs = if anchor.file.is_empty() {
        file.tabs
    } else {
        anchor.file.starts_with('\t')
    };
    let w = width(ind);
    if w >= anchor.model_w {
        let mut s = anchor.file.to_string();
        s.push_str(&render(scale(w - anchor.model_w, ratio), tabs));
        s
    } else {
        let target = anchor
            .file_w
            .saturating_sub(scale(anchor.model_w - w, ratio));
        render(target, tabs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<&str> {
        s.split('\n').collect()
    }

    fn re(old: &str, file: &str, new: &str, style: Style) -> String {
        reindent(&lines(old), &lines(file), &lines(new), style, true).expect("unambiguous")
    }

    const SPACES4: Style = Style {
        tabs: false,
        unit: Some(4),
    };
    const TABS: Style = Style {
        tabs: true,
        unit: Some(TAB),
    };

    #[test]
    fn detects_styles() {
        assert_eq!(detect(lines("a\n    b\n        c\n    d")), SPACES4);
        assert_eq!(
            detect(lines("a\n  b\n    c")),
            Style {
                tabs: false,
                unit: Some(2)
            }
        );
        assert_eq!(detect(lines("a\n\tb\n\t\tc")), TABS);
        assert_eq!(
            detect(lines("a\nb")),
            Style {
                tabs: false,
                unit: None
            }
        );
    }

    #[test]
    fn shifted_block_is_shifted_back() {
        let out = re(
            "if x {\n    y();\n}",
            "    if x {\n        y();\n    }",
            "if x {\n    y();\n    z();\n}",
            SPACES4,
        );
        assert_eq!(out, "    if x {\n        y();\n        z();\n    }");
    }

    #[test]
    fn over_indented_model_is_dedented() {
        let out = re(
            "        a\n        b",
            "a\nb",
            "        a\n        c\n            d",
            SPACES4,
        );
        assert_eq!(out, "a\nc\n    d");
    }

    #[test]
    fn spaces_to_tabs_including_new_deeper_lines() {
        let out = re(
            "if x {\n    y()\n}",
            "\tif x {\n\t\ty()\n\t}",
            "if x {\n    y()\n    if z {\n        w()\n    }\n}",
            TABS,
        );
        assert_eq!(out, "\tif x {\n\t\ty()\n\t\tif z {\n\t\t\tw()\n\t\t}\n\t}");
    }

    #[test]
    fn tabs_to_spaces_with_unit_conversion() {
        let out = re(
            "\tif x:\n\t\ty",
            "  if x:\n    y",
            "\tif x:\n\t\ty\n\t\t\tz",
            Style {
                tabs: false,
                unit: Some(2),
            },
        );
        assert_eq!(out, "  if x:\n    y\n      z");
    }

    #[test]
    fn two_space_model_in_four_space_file() {
        let out = re(
            "if x:\n  y",
            "    if x:\n        y",
            "if x:\n  y\n    z",
            SPACES4,
        );
        assert_eq!(out, "    if x:\n        y\n            z");
    }

    #[test]
    fn replacement_carrying_file_indentation_is_kept() {
        let new = "    if x {\n        z();\n    }";
        assert_eq!(
            re(
                "if x {\n    y();\n}",
                "    if x {\n        y();\n    }",
                new,
                SPACES4
            ),
            new
        );
        // no shared lines: the first line decides
        assert_eq!(
            re("a\nb", "    a\n    b", "    c\n    d", SPACES4),
            "    c\n    d"
        );
        assert_eq!(re("a\nb", "    a\n    b", "c\nd", SPACES4), "    c\n    d");
    }

    #[test]
    fn flattened_levels_follow_the_lines() {
        let out = re(
            "def f():\nreturn 1",
            "def f():\n    return 1",
            "def f():\nreturn 2",
            SPACES4,
        );
        assert_eq!(out, "def f():\n    return 2");
    }

    #[test]
    fn blank_lines_untouched_and_no_pairs() {
        assert_eq!(re("a\n\nb", "  a\n\n  b", "a\n\nb", SPACES4), "  a\n\n  b");
        assert_eq!(re("", "   ", "x", SPACES4), "x");
    }

    #[test]
    fn anchored_single_pair() {
        let out = reindent_by_first("foo()", "        foo()", &["bar()", "    baz()"], SPACES4);
        assert_eq!(out, "        bar()\n            baz()");
        // no carry exception
        let out = reindent_by_first("foo()", "    foo()", &["    bar()"], SPACES4);
        assert_eq!(out, "        bar()");
    }
}
