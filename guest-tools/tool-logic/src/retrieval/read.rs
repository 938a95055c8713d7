//! `read_file`: a range of lines of one UTF-8 text file.
//!
//! The file is streamed in chunks, so a file of any size can be read in windows: only the returned
//! lines are kept, while the whole file is checked (binary: a NUL byte in the first 8 KiB, as
//! [`crate::fsio::looks_binary`]; then valid UTF-8 throughout) and its lines counted.

use std::io::{self, Read};

use super::walk::{Kind, Walker};
use crate::error::{ErrorKind, ToolError};
use crate::fsio::looks_binary;
use crate::paths::{Root, normalize};

/// What a read returns: lines `start_line..=end_line` (1-based) of the file's `total_lines`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOutput {
    pub file_path: String,
    /// The lines, exactly as in the file (line endings included).
    pub content: String,
    pub start_line: usize,
    /// The last line in `content` (cut short when `truncated` and it alone exceeded the byte
    /// limit); `start_line - 1` when `content` is empty.
    pub end_line: usize,
    pub total_lines: usize,
    /// The line or byte limit stopped the read before the end of the requested range (or, when no
    /// `end_line` was given, before the end of the file).
    pub truncated: bool,
}

/// A read request, with limits already applied by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest<'a> {
    pub file_path: &'a str,
    pub start_line: Option<usize>,
    pub end_line: Option<usize>,
    /// Most lines returned (the `max-read-lines` setting).
    pub max_lines: usize,
    /// Most bytes returned.
    pub max_bytes: usize,
}

/// Size of each read.
const CHUNK: usize = 64 * 1024;
/// The prefix [`looks_binary`] inspects.
const BINARY_PROBE: usize = 8192;

fn binary_error(rel: &str) -> ToolError {
    ToolError::new(ErrorKind::NotText, format!("{rel} is a binary file"))
}

fn not_utf8_error(rel: &str) -> ToolError {
    ToolError::new(ErrorKind::NotText, format!("{rel} is not valid UTF-8 text"))
}

/// Incremental UTF-8 validation across chunk boundaries.
#[derive(Default)]
struct Utf8Check {
    /// The start of a character cut by the end of the previous chunk.
    pending: Vec<u8>,
}

impl Utf8Check {
    /// Validates the next chunk; `false` on invalid UTF-8.
    fn feed(&mut self, mut data: &[u8]) -> bool {
        if let Some(&lead) = self.pending.first() {
            let want = match lead {
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                0xF0..=0xF4 => 4,
                _ => return false,
            };
            let take = (want - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() < want {
                return true;
            }
            if std::str::from_utf8(&self.pending).is_err() {
                return false;
            }
            self.pending.clear();
        }
        match std::str::from_utf8(data) {
            Ok(_) => true,
            Err(e) if e.error_len().is_none() => {
                self.pending.extend_from_slice(&data[e.valid_up_to()..]);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the stream ended on a character boundary.
    fn finish(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Collects the requested lines while the file streams past.
struct Collector {
    first: usize,
    last: usize,
    max_bytes: usize,
    /// Line being scanned (1-based).
    line: usize,
    /// Newlines seen.
    newlines: usize,
    last_byte: Option<u8>,
    out: Vec<u8>,
    /// Where the line being collected starts in `out`.
    line_start: usize,
    /// Whether `line` has contributed bytes to `out` yet.
    line_open: bool,
    /// Last line (partly) in `out`.
    end_line: usize,
    /// Collection stopped because of `max_bytes`.
    stopped: bool,
    /// The single line in `out` was cut inside.
    cut: bool,
}

impl Collector {
    fn new(first: usize, last: usize, max_bytes: usize) -> Collector {
        Collector {
            first,
            last,
            max_bytes,
            line: 1,
            newlines: 0,
            last_byte: None,
            out: Vec::new(),
            line_start: 0,
            line_open: false,
            end_line: first - 1,
            stopped: false,
            cut: false,
        }
    }

    fn feed(&mut self, data: &[u8]) {
        if let Some(&b) = data.last() {
            self.last_byte = Some(b);
        }
        if self.stopped {
            let n = memchr::memchr_iter(b'\n', data).count();
            self.newlines += n;
            self.line += n;
            return;
        }
        let mut pos = 0;
        while pos < data.len() {
            let nl = memchr::memchr(b'\n', &data[pos..]).map(|i| pos + i);
            let seg_end = nl.map_or(data.len(), |i| i + 1);
            if !self.stopped && self.line >= self.first && self.line <= self.last {
                self.take(&data[pos..seg_end]);
            }
            if nl.is_some() {
                self.newlines += 1;
                self.line += 1;
                self.line_open = false;
                if self.line > self.last && !self.stopped {
                    // Nothing more to collect: count the rest quickly.
                    self.stopped = true;
                    let rest = &data[seg_end..];
                    let n = memchr::memchr_iter(b'\n', rest).count();
                    self.newlines += n;
                    self.line += n;
                    return;
                }
            }
            pos = seg_end;
        }
    }

    /// Appends part of line `self.line`, enforcing `max_bytes`.
    fn take(&mut self, seg: &[u8]) {
        if !self.line_open {
            self.line_start = self.out.len();
            self.line_open = true;
        }
        let room = self
            .max_bytes
            .saturating_add(1)
            .saturating_sub(self.out.len());
        self.out.extend_from_slice(&seg[..seg.len().min(room)]);
        if self.out.len() <= self.max_bytes {
            self.end_line = self.line;
            return;
        }
        // Over the limit: drop this line if earlier lines were returned, else cut it.
        self.stopped = true;
        if self.line_start > 0 {
            self.out.truncate(self.line_start);
            self.end_line = self.line - 1;
        } else {
            let cut = super::floor_boundary(&self.out, self.max_bytes);
            self.out.truncate(cut);
            self.end_line = self.line;
            self.cut = true;
        }
    }

    /// Lines in the file.
    fn total_lines(&self) -> usize {
        self.newlines + usize::from(self.last_byte.is_some_and(|b| b != b'\n'))
    }
}

/// Reads a range of lines of `req.file_path` under `root`.
pub fn read(root: &Root, req: &ReadRequest<'_>) -> Result<ReadOutput, ToolError> {
    let rel = normalize("file_path", req.file_path, false)?;
    let first = req.start_line.unwrap_or(1);
    if first == 0 {
        return Err(ToolError::invalid(
            "start_line must be at least 1 (lines are numbered from 1)",
        ));
    }
    if let Some(end) = req.end_line
        && end < first
    {
        return Err(ToolError::invalid(format!(
            "end_line ({end}) is before start_line ({first})"
        )));
    }
    let max_lines = req.max_lines.max(1);
    let max_bytes = req.max_bytes.max(1);
    let last = req
        .end_line
        .unwrap_or(usize::MAX)
        .min(first.saturating_add(max_lines - 1));

    let mut walker = Walker::new(root);
    match walker.resolve(&rel).map_err(|r| r.into_error(&rel, true))? {
        Kind::File => {}
        Kind::Dir => {
            return Err(ToolError::invalid(format!(
                "`{rel}` is a directory, not a file; use list_files to see the files in it"
            )));
        }
    }
    // Opened link by link from the root, never by the path string: a directory swapped for a
    // link (to `.git`, say) since `resolve` looked is refused, not followed.
    let mut file = walker.open_file(&rel)?;
    let mut chunk = vec![0u8; CHUNK];
    let mut utf8 = Utf8Check::default();
    let mut collector = Collector::new(first, last, max_bytes);
    let mut offset = 0usize;
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ToolError::io(&rel, &e)),
        };
        let data = &chunk[..n];
        if offset < BINARY_PROBE && looks_binary(&data[..n.min(BINARY_PROBE - offset)]) {
            return Err(binary_error(&rel));
        }
        if !utf8.feed(data) {
            return Err(not_utf8_error(&rel));
        }
        collector.feed(data);
        offset = offset.saturating_add(n);
    }
    if !utf8.finish() {
        return Err(not_utf8_error(&rel));
    }
    let total = collector.total_lines();
    if first > total.max(1) {
        let lines = if total == 1 { "line" } else { "lines" };
        return Err(ToolError::invalid(format!(
            "start_line {first} is past the end of {rel}, which has {total} {lines}"
        )));
    }
    let wanted_end = req.end_line.unwrap_or(total).min(total);
    let truncated = collector.cut || collector.end_line < wanted_end;
    let end_line = collector.end_line;
    let content = String::from_utf8(collector.out).map_err(|_| not_utf8_error(&rel))?;
    Ok(ReadOutput {
        file_path: rel,
        content,
        start_line: first,
        end_line,
        total_lines: total,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::put;
    use super::*;

    fn req(path: &str, s: Option<usize>, e: Option<usize>) -> ReadRequest<'_> {
        ReadRequest {
            file_path: path,
            start_line: s,
            end_line: e,
            max_lines: 800,
            max_bytes: 65536,
        }
    }

    #[test]
    fn line_ranges() {
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "a.txt", "one\ntwo\r\nthree\nfour");
        let root = Root::at(t.path());
        let o = read(&root, &req("a.txt", None, None)).unwrap();
        assert_eq!(o.content, "one\ntwo\r\nthree\nfour");
        assert_eq!(
            (o.start_line, o.end_line, o.total_lines, o.truncated),
            (1, 4, 4, false)
        );
        let o = read(&root, &req("./a.txt", Some(2), Some(3))).unwrap();
        assert_eq!(o.file_path, "a.txt");
        assert_eq!(o.content, "two\r\nthree\n");
        assert_eq!((o.start_line, o.end_line, o.truncated), (2, 3, false));
        let o = read(&root, &req("a.txt", Some(4), Some(100))).unwrap();
        assert_eq!(
            (o.content.as_str(), o.end_line, o.truncated),
            ("four", 4, false)
        );
        let e = read(&root, &req("a.txt", Some(5), None)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArguments);
        assert_eq!(
            e.message,
            "start_line 5 is past the end of a.txt, which has 4 lines"
        );
        let e = read(&root, &req("a.txt", Some(0), None)).unwrap_err();
        assert_eq!(
            e.message,
            "start_line must be at least 1 (lines are numbered from 1)"
        );
        let e = read(&root, &req("a.txt", Some(3), Some(2))).unwrap_err();
        assert_eq!(e.message, "end_line (2) is before start_line (3)");
        put(t.path(), "empty.txt", "");
        let o = read(&root, &req("empty.txt", None, None)).unwrap();
        assert_eq!(
            (
                o.content.as_str(),
                o.start_line,
                o.end_line,
                o.total_lines,
                o.truncated
            ),
            ("", 1, 0, 0, false)
        );
        let e = read(&root, &req("empty.txt", Some(2), None))
            .err()
            .expect("line 2 of an empty file");
        assert_eq!(
            e.message,
            "start_line 2 is past the end of empty.txt, which has 0 lines"
        );
        put(t.path(), "one.txt", "x\n");
        let e = read(&root, &req("one.txt", Some(3), None)).unwrap_err();
        assert_eq!(
            e.message,
            "start_line 3 is past the end of one.txt, which has 1 line"
        );
    }

    #[test]
    fn line_and_byte_caps() {
        let t = tempfile::tempdir().unwrap();
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        put(t.path(), "a.txt", &text);
        let root = Root::at(t.path());
        let mut r = req("a.txt", None, None);
        r.max_lines = 3;
        let o = read(&root, &r).unwrap();
        assert_eq!(
            (o.content.as_str(), o.end_line, o.total_lines, o.truncated),
            ("l1\nl2\nl3\n", 3, 10, true)
        );
        r.start_line = Some(9);
        let o = read(&root, &r).unwrap();
        assert_eq!(
            (o.content.as_str(), o.end_line, o.truncated),
            ("l9\nl10\n", 10, false)
        );
        r.start_line = Some(2);
        r.end_line = Some(3);
        let o = read(&root, &r).unwrap();
        assert!(!o.truncated);
        // Bytes: cut at a line boundary.
        let mut r = req("a.txt", None, None);
        r.max_bytes = 8; // "l1\nl2\nl3\n" is 9 bytes
        let o = read(&root, &r).unwrap();
        assert_eq!(
            (o.content.as_str(), o.end_line, o.truncated),
            ("l1\nl2\n", 2, true)
        );
        r.max_bytes = 9;
        r.end_line = Some(3);
        let o = read(&root, &r).unwrap();
        assert_eq!(
            (o.content.as_str(), o.end_line, o.truncated),
            ("l1\nl2\nl3\n", 3, false)
        );
    }

    #[test]
    fn a_long_first_line_is_cut_at_a_char_boundary() {
        let t = tempfile::tempdir().unwrap();
        put(t.path(), "u.txt", "aé€😀end\nnext\n");
        let root = Root::at(t.path());
        for (max, want) in [
            (1, "a"),
            (2, "a"),
            (3, "aé"),
            (5, "aé"),
            (6, "aé€"),
            (9, "aé€"),
            (10, "aé€😀"),
        ] {
            let mut r = req("u.txt", None, None);
            r.max_bytes = max;
            let o = read(&root, &r).unwrap();
            assert_eq!(o.content, want, "max_bytes {max}");
            assert_eq!((o.end_line, o.truncated), (1, true));
        }
    }

    #[test]
    fn large_files_stream() {
        let t = tempfile::tempdir().unwrap();
        // Multi-byte characters straddle chunk boundaries.
        let text: String = (0..50_000).map(|i| format!("é€ line {i}\n")).collect();
        put(t.path(), "big.txt", &text);
        let root = Root::at(t.path());
        let mut r = req("big.txt", Some(49_999), None);
        r.max_bytes = 1_000_000;
        let o = read(&root, &r).unwrap();
        assert_eq!(o.content, "é€ line 49998\né€ line 49999\n");
        assert_eq!(
            (o.total_lines, o.end_line, o.truncated),
            (50_000, 50_000, false)
        );
        let mut bad = text.into_bytes();
        let at = bad.len() - 5;
        bad[at] = 0xff;
        put(t.path(), "bad.txt", &bad);
        let e = read(&root, &req("bad.txt", None, Some(1))).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::NotText, "bad.txt is not valid UTF-8 text")
        );
        put(t.path(), "cut.txt", &"é".as_bytes()[..1]);
        assert_eq!(
            read(&root, &req("cut.txt", None, None)).unwrap_err().kind,
            ErrorKind::NotText
        );
    }

    #[test]
    fn refusals() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        put(d, "bin.dat", b"abc\0def");
        put(d, "latin1.txt", b"caf\xe9\n");
        put(d, ".gitignore", ".env\n");
        put(d, ".env", "KEY=1");
        put(d, ".bb7/config", "k");
        put(d, "dir/x.txt", "x");
        let root = Root::at(d);
        let e = read(&root, &req("bin.dat", None, None)).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::NotText, "bin.dat is a binary file")
        );
        let e = read(&root, &req("latin1.txt", None, None)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotText);
        let e = read(&root, &req(".env", None, None)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert_eq!(
            e.message,
            "`.env` is ignored (pattern `.env` in `.gitignore`); tools do not see ignored files"
        );
        let e = read(&root, &req(".bb7/config", None, None)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert!(e.message.contains(".bb7/"), "{}", e.message);
        let e = read(&root, &req("dir", None, None)).unwrap_err();
        assert_eq!(
            e.message,
            "`dir` is a directory, not a file; use list_files to see the files in it"
        );
        let e = read(&root, &req("nope.txt", None, None)).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::NotFound, "file not found: nope.txt")
        );
        for bad in ["/etc/passwd", "../x", "dir/../../x", "dir/"] {
            assert_eq!(
                read(&root, &req(bad, None, None)).unwrap_err().kind,
                ErrorKind::InvalidArguments,
                "{bad}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        put(d, ".gitignore", ".env\n");
        put(d, ".env", "KEY=1");
        std::os::unix::fs::symlink(d.join(".env"), d.join("notes.txt")).unwrap();
        let root = Root::at(d);
        let e = read(&root, &req("notes.txt", None, None)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert_eq!(
            e.message,
            "`notes.txt` is a symbolic link; tools do not follow symbolic links"
        );
    }
}
