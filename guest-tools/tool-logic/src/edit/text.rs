//! The text model the matchers work on: a file seen in "LF space" (every `\r\n` turned into `\n`),
//! its lines, and the splicing that writes replacements back into the original bytes.
//!
//! Matching happens in LF space because models write `\n`. Replacements are spliced into the
//! *original* text, so every byte outside a replaced region is kept as it was (a mixed file is not
//! normalised), and the replacement's newlines take the line-ending style of the region it replaces.

use std::borrow::Cow;

use memchr::{memchr_iter, memmem};

use super::scan;

/// One line of a [`Doc`], as byte offsets into its LF-space text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    /// Offset of the line's first byte.
    pub start: usize,
    /// Offset just past the line's content (the `\n` itself, or the end of the text).
    pub end: usize,
    /// Whether a `\n` terminates the line (false only for a last line without a final newline).
    pub nl: bool,
}

impl Line {
    /// Offset just past the line including its terminator.
    pub fn end_with_nl(&self) -> usize {
        self.end + usize::from(self.nl)
    }
}

/// A file's text prepared for matching.
#[derive(Debug)]
pub(crate) struct Doc<'a> {
    /// The text as read.
    pub orig: &'a str,
    /// The text with every `\r\n` replaced by `\n` (borrowed when there is none).
    pub lf: Cow<'a, str>,
    /// LF-space offsets of the `\n`s that were `\r\n` in `orig`, ascending.
    crs: Vec<usize>,
    /// The lines of `lf`. A final `\n` does not start an extra empty line; an empty text has no lines.
    pub lines: Vec<Line>,
}

impl<'a> Doc<'a> {
    pub fn new(orig: &'a str) -> Self {
        let bytes = orig.as_bytes();
        // One pass over the file for an LF file (the usual case): its lines, and whether any
        // newline is a `\r\n` (then a second pass builds the LF-space text).
        let mut lines = Vec::with_capacity(bytes.len() / 32 + 1);
        let mut line_start = 0usize;
        let mut has_crlf = false;
        scan::for_each_newline(bytes, |p| {
            has_crlf |= p > 0 && bytes[p - 1] == b'\r';
            lines.push(Line {
                start: line_start,
                end: p,
                nl: true,
            });
            line_start = p + 1;
        });
        let mut crs = Vec::new();
        let lf: Cow<'a, str> = if has_crlf {
            lines.clear();
            line_start = 0;
            let mut lf = String::with_capacity(orig.len());
            let mut seg_start = 0usize;
            scan::for_each_newline(bytes, |p| {
                let crlf = p > 0 && bytes[p - 1] == b'\r';
                // `\r` and `\n` are ASCII, so these offsets are char boundaries.
                let content_end = if crlf { p - 1 } else { p };
                lf.push_str(&orig[seg_start..content_end]);
                let nl_at = lf.len();
                lf.push('\n');
                if crlf {
                    crs.push(nl_at);
                }
                lines.push(Line {
                    start: line_start,
                    end: nl_at,
                    nl: true,
                });
                seg_start = p + 1;
                line_start = nl_at + 1;
            });
            lf.push_str(&orig[seg_start..]);
            Cow::Owned(lf)
        } else {
            Cow::Borrowed(orig)
        };
        if line_start < lf.len() {
            lines.push(Line {
                start: line_start,
                end: lf.len(),
                nl: false,
            });
        }
        Doc {
            orig,
            lf,
            crs,
            lines,
        }
    }

    /// The content of line `i` (without its terminator).
    pub fn line(&self, i: usize) -> &str {
        let l = self.lines[i];
        &self.lf[l.start..l.end]
    }

    /// All line contents, in order.
    pub fn line_strs(&self) -> Vec<&str> {
        self.lines
            .iter()
            .map(|l| &self.lf[l.start..l.end])
            .collect()
    }

    /// Maps an LF-space offset to the offset in `orig`. An offset at a `\n` that was `\r\n` maps to
    /// the `\r`, so a region ending before a newline excludes the whole terminator.
    pub fn orig_offset(&self, lf_off: usize) -> usize {
        lf_off + self.crs.partition_point(|&c| c < lf_off)
    }

    /// The 0-based line containing LF-space offset `off`.
    pub fn line_at(&self, off: usize) -> usize {
        self.lines
            .partition_point(|l| l.start <= off)
            .saturating_sub(1)
    }

    /// Whether most of the file's line terminators are `\r\n` (a tie counts as LF).
    fn crlf_dominant(&self) -> bool {
        let total = self.lines.iter().filter(|l| l.nl).count();
        self.crs.len() * 2 > total
    }

    /// Whether a replacement of LF-space region `start..end` should use `\r\n`: the majority style of
    /// the newlines inside the region; without any, the terminator of the line the region starts
    /// in; for an unterminated last line, the file's majority.
    fn region_uses_crlf(&self, start: usize, end: usize) -> bool {
        let nls = memchr_iter(b'\n', &self.lf.as_bytes()[start..end]).count();
        if nls > 0 {
            let crlfs =
                self.crs.partition_point(|&c| c < end) - self.crs.partition_point(|&c| c < start);
            if crlfs * 2 != nls {
                return crlfs * 2 > nls;
            }
            return self.crlf_dominant();
        }
        match self.lines.get(self.line_at(start)) {
            Some(l) if l.nl => self.crs.binary_search(&l.end).is_ok(),
            _ => self.crlf_dominant(),
        }
    }
}

/// A replacement of an LF-space region by LF-space text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Splice {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// Applies `splices` (sorted by `start`, non-overlapping, offsets at char boundaries of `doc.lf`)
/// to the original text.
///
/// Lines a replacement leaves as they were (its common leading and trailing lines with the region)
/// keep their original bytes, terminators included, so a mixed file keeps each unchanged line's
/// ending. Of the rest, when the replacement has as many newlines as the region it replaces, its
/// i-th newline gets the region's i-th terminator; otherwise its newlines take the majority style of
/// the region. Finally the file's final-newline state is kept: if the file had no final newline and
/// the result gained one, it is removed; if it had one and a non-empty result lost it, it is
/// restored. So an edit that changes nothing yields byte-identical output.
pub(crate) fn apply_splices(doc: &Doc<'_>, splices: &[Splice]) -> String {
    let orig = doc.orig;
    let extra: usize = splices
        .iter()
        .map(|s| s.text.len() + s.text.len() / 8)
        .sum();
    let mut out = String::with_capacity(orig.len() + extra);
    let mut prev = 0usize;
    for s in splices {
        let (head, tail) = unchanged_lines(&doc.lf[s.start..s.end], &s.text);
        let (start, end) = (s.start + head, s.end - tail);
        let text = &s.text[head..s.text.len() - tail];
        let os = doc.orig_offset(start);
        let oe = doc.orig_offset(end);
        out.push_str(&orig[prev..os]);
        let region = &doc.lf[start..end];
        if region == text {
            out.push_str(&orig[os..oe]);
        } else if !doc.crs.is_empty() {
            let region_nls = memchr_iter(b'\n', region.as_bytes()).count();
            let text_nls = memchr_iter(b'\n', text.as_bytes()).count();
            if region_nls > 0 && region_nls == text_nls {
                // line for line: each newline keeps the terminator of the region's line it replaces
                let ends = memchr_iter(b'\n', region.as_bytes())
                    .map(|p| doc.crs.binary_search(&(start + p)).is_ok());
                let mut last = 0;
                for (p, crlf) in memchr_iter(b'\n', text.as_bytes()).zip(ends) {
                    out.push_str(&text[last..p]);
                    out.push_str(if crlf { "\r\n" } else { "\n" });
                    last = p + 1;
                }
                out.push_str(&text[last..]);
            } else if doc.region_uses_crlf(start, end) {
                push_crlf(&mut out, text);
            } else {
                out.push_str(text);
            }
        } else {
            out.push_str(text);
        }
        prev = oe;
    }
    out.push_str(&orig[prev..]);
    keep_final_newline(orig, &mut out);
    out
}

/// The byte lengths of the whole lines `region` and `text` share at their start and at their end
/// (never overlapping): the lines a replacement leaves unchanged. Lines are compared with their
/// `\n`; a shared start counts only lines ending in `\n`.
fn unchanged_lines(region: &str, text: &str) -> (usize, usize) {
    if region == text {
        return (0, 0);
    }
    let (rb, tb) = (region.as_bytes(), text.as_bytes());
    let mut head = 0usize;
    while let Some(p) = memchr::memchr(b'\n', &rb[head..]) {
        let line = &rb[head..=head + p];
        if tb.len() >= head + line.len() && &tb[head..head + line.len()] == line {
            head += line.len();
        } else {
            break;
        }
    }
    // Trailing lines: compare backwards from each end, a line at a time, without reaching `head`.
    let mut tail = 0usize;
    loop {
        let r_rest = &rb[head..rb.len() - tail];
        let t_rest = &tb[head..tb.len() - tail];
        // the last line of each rest (after its last `\n` that is not the final byte)
        let line_start = |b: &[u8]| {
            let body = if tail > 0 || b.last() == Some(&b'\n') {
                &b[..b.len().saturating_sub(1)]
            } else {
                b
            };
            memchr::memrchr(b'\n', body).map(|p| p + 1)
        };
        let (Some(rs), Some(ts)) = (line_start(r_rest), line_start(t_rest)) else {
            break;
        };
        let (rl, tl) = (&r_rest[rs..], &t_rest[ts..]);
        if rl != tl || rl.is_empty() {
            break;
        }
        tail += rl.len();
    }
    (head, tail)
}

/// Appends LF-space `text` with every `\n` written as `\r\n`.
fn push_crlf(out: &mut String, text: &str) {
    let mut last = 0;
    for p in memchr_iter(b'\n', text.as_bytes()) {
        out.push_str(&text[last..p]);
        out.push_str("\r\n");
        last = p + 1;
    }
    out.push_str(&text[last..]);
}

/// Gives `out` the final-newline state of `orig` (see [`apply_splices`]).
fn keep_final_newline(orig: &str, out: &mut String) {
    if orig.is_empty() || out.is_empty() {
        return;
    }
    let had = orig.ends_with('\n');
    if !had && out.ends_with('\n') {
        out.pop();
        if out.ends_with('\r') {
            out.pop();
        }
    } else if had && !out.ends_with('\n') {
        out.push_str(if orig.ends_with("\r\n") { "\r\n" } else { "\n" });
    }
}

/// `s` with every `\r\n` turned into `\n` (borrowed when there is none).
pub(crate) fn to_lf(s: &str) -> Cow<'_, str> {
    if memmem::find(s.as_bytes(), b"\r\n").is_some() {
        Cow::Owned(s.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_offsets_in_lf_space() {
        let d = Doc::new("a\r\nbc\nd\r\n");
        assert_eq!(d.lf, "a\nbc\nd\n");
        assert_eq!(d.line_strs(), vec!["a", "bc", "d"]);
        assert!(d.lines.iter().all(|l| l.nl));
        // "a\n|bc" -> after the CRLF
        assert_eq!(d.orig_offset(2), 3);
        // the '\n' of line 0 maps to its '\r'
        assert_eq!(d.orig_offset(1), 1);
        assert_eq!(d.orig_offset(d.lf.len()), d.orig.len());
        assert_eq!(d.line_at(0), 0);
        assert_eq!(d.line_at(3), 1);
        assert_eq!(d.line_at(5), 2);
    }

    #[test]
    fn last_line_without_newline_and_empty_text() {
        let d = Doc::new("x\ny");
        assert_eq!(d.lines.len(), 2);
        assert!(!d.lines[1].nl);
        assert!(Doc::new("").lines.is_empty());
        let d = Doc::new("\n");
        assert_eq!(d.line_strs(), vec![""]);
    }

    #[test]
    fn lone_cr_is_content() {
        let d = Doc::new("a\rb\r\r\n");
        assert_eq!(d.line_strs(), vec!["a\rb\r"]);
    }

    #[test]
    fn splice_uses_region_style_and_keeps_other_bytes() {
        // mixed: line 1 CRLF, line 2 LF
        let d = Doc::new("a\r\nb\nc\r\n");
        let out = apply_splices(
            &d,
            &[Splice {
                start: 0,
                end: 2,
                text: "x\ny\n".into(),
            }],
        );
        assert_eq!(out, "x\r\ny\r\nb\nc\r\n");
        let out = apply_splices(
            &d,
            &[Splice {
                start: 2,
                end: 4,
                text: "B\nB2\n".into(),
            }],
        );
        assert_eq!(out, "a\r\nB\nB2\nc\r\n");
        // identical replacement keeps the original bytes even in a mixed region
        let out = apply_splices(
            &d,
            &[Splice {
                start: 0,
                end: 6,
                text: "a\nb\nc\n".into(),
            }],
        );
        assert_eq!(out, d.orig);
    }

    #[test]
    fn final_newline_state_is_kept() {
        let d = Doc::new("a\nb");
        let out = apply_splices(
            &d,
            &[Splice {
                start: 2,
                end: 3,
                text: "c\n".into(),
            }],
        );
        assert_eq!(out, "a\nc");
        let d = Doc::new("a\r\nb\r\n");
        let out = apply_splices(
            &d,
            &[Splice {
                start: 2,
                end: 4,
                text: "c".into(),
            }],
        );
        assert_eq!(out, "a\r\nc\r\n");
        // deleting everything leaves an empty file
        let out = apply_splices(
            &d,
            &[Splice {
                start: 0,
                end: 4,
                text: String::new(),
            }],
        );
        assert_eq!(out, "");
    }
}
