//! cl100k_base's pre-tokenizer, re-implemented for ASCII text, and the places where a text can be cut without
//! changing its token count.
//!
//! cl100k splits text into pieces with this regex, then byte-pair-encodes each piece on its own:
//!
//! ```text
//! '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
//! ```
//!
//! Running that regex (a backtracking `fancy_regex`) is most of tiktoken's cost. For ASCII, where letters,
//! digits and whitespace are simple byte classes, [`ascii_piece_len`] finds the same pieces directly, and the
//! counter encodes each distinct piece once. Text with other characters goes through the regex split
//! (`super::bpe`).

/// Unicode `White_Space` within ASCII (the regex's `\s`).
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is_newline(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// Neither whitespace, a letter nor a digit: `[^\s\p{L}\p{N}]` within ASCII.
fn is_other(b: u8) -> bool {
    !is_space(b) && !b.is_ascii_alphanumeric()
}

fn run_len(s: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    s[from..].iter().take_while(|&&b| class(b)).count()
}

/// The length of the cl100k piece starting at `s[i]`, for ASCII `s` (the whole text, whose end is the regex's
/// `$`). Each branch is one alternative of the regex, tried in the regex's order.
pub(super) fn ascii_piece_len(s: &[u8], i: usize) -> usize {
    let c = s[i];
    let next = s.get(i + 1).copied();

    // '(?i:[sdmt]|ll|ve|re)
    if c == b'\''
        && let Some(d) = next
    {
        let d = d.to_ascii_lowercase();
        if matches!(d, b's' | b'd' | b'm' | b't') {
            return 2;
        }
        if let Some(e) = s.get(i + 2) {
            let pair = [d, e.to_ascii_lowercase()];
            if matches!(&pair, b"ll" | b"ve" | b"re") {
                return 3;
            }
        }
    }
    // [^\r\n\p{L}\p{N}]?+\p{L}++
    if c.is_ascii_alphabetic() {
        return 1 + run_len(s, i + 1, |b| b.is_ascii_alphabetic());
    }
    if !is_newline(c) && !c.is_ascii_digit() && next.is_some_and(|d| d.is_ascii_alphabetic()) {
        return 2 + run_len(s, i + 2, |b| b.is_ascii_alphabetic());
    }
    // \p{N}{1,3}+
    if c.is_ascii_digit() {
        return 1 + run_len(s, i + 1, |b| b.is_ascii_digit()).min(2);
    }
    //  ?[^\s\p{L}\p{N}]++[\r\n]*+
    let start = if c == b' ' && next.is_some_and(is_other) {
        i + 1
    } else {
        i
    };
    if is_other(s[start]) {
        let end = start + 1 + run_len(s, start + 1, is_other);
        return end + run_len(s, end, is_newline) - i;
    }
    // Whitespace from here on: the run is s[i..i + run].
    let run = 1 + run_len(s, i + 1, is_space);
    // \s++$
    if i + run == s.len() {
        return run;
    }
    // \s*[\r\n]: up to the run's last line break.
    if let Some(last) = s[i..i + run].iter().rposition(|&b| is_newline(b)) {
        return last + 1;
    }
    // \s+(?!\S): the run but its last character (which then joins the next piece), else \s.
    if run >= 2 { run - 1 } else { 1 }
}

/// Whether the pre-tokenizer always ends a piece at byte `at` of `text`, so that counting `text[..at]` and
/// `text[at..]` separately gives the same total as counting `text`.
///
/// That holds right after a `\n` whose following line holds a non-whitespace character: the whitespace run
/// ending in that `\n` is one piece (`\s*[\r\n]`, or `\s++$` when the text is cut there), no alternative can
/// carry a piece across a line break into a letter, digit or symbol, and the regex only looks ahead.
pub(super) fn is_exact_split(text: &str, at: usize) -> bool {
    let bytes = text.as_bytes();
    if at == 0 || at >= bytes.len() || bytes[at - 1] != b'\n' {
        return false;
    }
    for c in text[at..].chars() {
        if c == '\n' || c == '\r' {
            return false;
        }
        if !c.is_whitespace() {
            return true;
        }
    }
    false
}

/// The first exact split point in `from..limit` (see [`is_exact_split`]).
pub(super) fn next_exact_split(text: &str, from: usize, limit: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let limit = limit.min(bytes.len());
    let mut at = from.saturating_sub(1);
    while at < limit {
        let newline = at + bytes[at..limit].iter().position(|&b| b == b'\n')?;
        let split = newline + 1;
        if split >= from && is_exact_split(text, split) {
            return Some(split);
        }
        at = split;
    }
    None
}

/// The last exact split point in `lo..=hi`, or `lo` when there is none.
pub(super) fn last_exact_split(text: &str, lo: usize, hi: usize) -> usize {
    let bytes = text.as_bytes();
    let mut end = hi.min(bytes.len());
    while end > lo {
        let Some(newline) = bytes[lo..end].iter().rposition(|&b| b == b'\n') else {
            break;
        };
        let split = lo + newline + 1;
        if is_exact_split(text, split) {
            return split;
        }
        end = lo + newline;
    }
    lo
}

/// Cuts `text` into pieces of about `target` bytes or more at exact split points. Texts without such points
/// stay whole; the last piece is at least `target / 2` bytes unless the text is shorter.
pub(super) fn chunks(text: &str, target: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let split = if rest.len() >= target + target / 2 {
            next_exact_split(rest, target, rest.len() - target / 2)
        } else {
            None
        };
        let (piece, tail) = rest.split_at(split.unwrap_or(rest.len()));
        rest = tail;
        Some(piece)
    })
}

/// Splits `text` at exact split points into alternating runs: `(true, run)` for pure-ASCII runs and
/// `(false, run)` for runs holding other characters (each as small as the split points allow).
pub(super) fn ascii_runs(text: &str) -> impl Iterator<Item = (bool, &str)> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut pending: Option<(usize, usize)> = None;
    std::iter::from_fn(move || {
        if let Some((from, to)) = pending.take() {
            start = to;
            return Some((false, &text[from..to]));
        }
        if start >= bytes.len() {
            return None;
        }
        let Some(offset) = bytes[start..].iter().position(|b| !b.is_ascii()) else {
            let run = &text[start..];
            start = bytes.len();
            return Some((true, run));
        };
        let non_ascii = start + offset;
        let from = last_exact_split(text, start, non_ascii);
        let to = next_exact_split(text, non_ascii + 1, bytes.len()).unwrap_or(bytes.len());
        if from > start {
            let run = &text[start..from];
            pending = Some((from, to));
            start = from;
            Some((true, run))
        } else {
            start = to;
            Some((false, &text[from..to]))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        let s = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < s.len() {
            let n = ascii_piece_len(s, i);
            out.push(&text[i..i + n]);
            i += n;
        }
        out
    }

    #[test]
    fn pieces_follow_the_cl100k_regex() {
        assert_eq!(pieces("hello world"), ["hello", " world"]);
        assert_eq!(
            pieces("it's we'LL they've"),
            ["it", "'s", " we", "'LL", " they", "'ve"]
        );
        assert_eq!(
            pieces("'x 'llama x'llama"),
            ["'x", " '", "llama", " x", "'ll", "ama"]
        );
        assert_eq!(pieces("12345 x1"), ["123", "45", " x", "1"]);
        assert_eq!(
            pieces("(foo) += bar;\n"),
            ["(foo", ")", " +=", " bar", ";\n"]
        );
        assert_eq!(pieces("a   b"), ["a", "  ", " b"]);
        assert_eq!(pieces("a  \n\n  b"), ["a", "  \n\n", " ", " b"]);
        assert_eq!(pieces("a \n"), ["a", " \n"]);
        assert_eq!(pieces("a\t\t"), ["a", "\t\t"]);
        assert_eq!(pieces("a 1"), ["a", " ", "1"]);
        assert_eq!(pieces("\tfoo"), ["\tfoo"]);
        assert_eq!(pieces("x\n\ty"), ["x", "\n", "\ty"]);
        assert_eq!(pieces("};\r\n\r\nfn"), ["};\r\n\r\n", "fn"]);
        assert_eq!(pieces("\x00\x1f\x7f a"), ["\x00\x1f\x7f", " a"]);
    }

    #[test]
    fn exact_split_points() {
        assert!(is_exact_split("a\nb", 2));
        assert!(is_exact_split("a\n  \tb", 2));
        assert!(!is_exact_split("a\n\nb", 2));
        assert!(!is_exact_split("a\n  \nb", 2));
        assert!(!is_exact_split("a\n\r\nb", 2));
        assert!(!is_exact_split("a\n   ", 2));
        assert!(!is_exact_split("ab", 1));
        assert!(!is_exact_split("ab", 0));
        assert_eq!(next_exact_split("a\n\nb\nc", 0, 6), Some(3));
        assert_eq!(next_exact_split("a\n\nb\nc", 4, 6), Some(5));
        assert_eq!(next_exact_split("a\n\nb\nc", 6, 6), None);
        assert_eq!(next_exact_split("a\n\n\nb", 0, 5), Some(4));
        assert_eq!(last_exact_split("a\nb\n\nc", 0, 6), 5);
        assert_eq!(last_exact_split("a\nb\n\nc", 0, 4), 2);
        assert_eq!(last_exact_split("a\nb\n\nc", 3, 4), 3);
    }

    #[test]
    fn chunks_cover_the_text() {
        let pieces: Vec<&str> = chunks("x\n\n\n\n\n\n\n\n\n\n", 2).collect();
        assert_eq!(pieces, ["x\n\n\n\n\n\n\n\n\n\n"]);
        assert_eq!(chunks(&"y".repeat(10_000), 100).count(), 1);
        assert_eq!(chunks("", 100).count(), 0);
        let text = "ab\n".repeat(1000);
        let cut: Vec<&str> = chunks(&text, 100).collect();
        assert!(cut.len() > 10);
        assert!(cut.iter().all(|c| c.len() >= 50));
        assert_eq!(cut.concat(), text);
    }

    #[test]
    fn ascii_runs_isolate_non_ascii_lines() {
        let text = "a\nb é\nc\n\nd\ne\n";
        let runs: Vec<(bool, &str)> = ascii_runs(text).collect();
        assert_eq!(
            runs,
            [(true, "a\n"), (false, "b é\n"), (true, "c\n\nd\ne\n")]
        );
        let runs: Vec<(bool, &str)> = ascii_runs("é\n\nx\ny").collect();
        assert_eq!(runs, [(false, "é\n\n"), (true, "x\ny")]);
        assert_eq!(ascii_runs("").count(), 0);
        assert_eq!(ascii_runs("ab").collect::<Vec<_>>(), [(true, "ab")]);
        let text = "x\n😀\n😀\ny\nz 😀";
        assert_eq!(ascii_runs(text).map(|(_, r)| r).collect::<String>(), text);
    }
}
