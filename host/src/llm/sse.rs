//! Server-sent events: the `data` of each event of a byte stream, decoded in place. The same
//! events `eventsource-stream` gives (the fuzz target `sse` compares the two), without its copies:
//! it moved the rest of its buffer into a new string after every line (with many events in one
//! read, each line copied all the ones after it) and built three strings per event. Here the bytes
//! are kept in one buffer, lines are found with `memchr`, and an event's data is built in one reused
//! string and lent out.
//!
//! The format (the WHATWG `EventSource` parsing rules): lines end with CRLF, LF or CR; a leading
//! byte order mark is dropped; a line starting with `:` is a comment; `data: x` (one space after
//! the colon dropped) adds `x` and a newline to the event's data; an empty line ends the event,
//! which is dispatched without its last newline when it has data. Other fields (`event`, `id`,
//! `retry`) are not used by the model stream and are skipped. At the end of the stream
//! ([`SseDecoder::end`]) a CR last in the body ends its line too (no LF can follow it), so a body
//! whose last event ends with a bare CR (`data: x\r\r`) still gives that event; an event not ended
//! by an empty line is dropped, as the rules say. `eventsource-stream` drops the event ended by a
//! final bare CR: the one deliberate difference (the `sse` fuzz target allows exactly that one).

/// The stream is not UTF-8 (every line must be).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the event stream is not UTF-8")]
pub struct NotUtf8;

/// An incremental SSE decoder: [`SseDecoder::push`] bytes as they arrive, then take the complete
/// events with [`SseDecoder::next_event`] until it has none.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Received bytes; those before `pos` are decoded.
    buf: Vec<u8>,
    pos: usize,
    /// Bytes after `pos` known to hold no line end.
    scanned: usize,
    /// Whether the start of the stream (a byte order mark) has been dealt with.
    started: bool,
    /// The data of the event being read.
    data: String,
    /// `data` was lent out by the last `next_event`: clear it first.
    lent: bool,
    /// No more bytes will come ([`SseDecoder::end`]).
    ended: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The most bytes one unfinished event may hold ([`SseDecoder::pending`]): a stream that sends more
/// without ending its line or event (a misbehaving endpoint trickling bytes) is refused instead of
/// growing the buffer for as long as the bytes keep the idle timer from firing.
pub const MAX_PENDING: usize = 16 << 20;

impl SseDecoder {
    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes of the event not complete yet: its unfinished line and its data so far (after
    /// [`SseDecoder::next_event`] returned `None`).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos + self.data.len()
    }

    /// The data of the next complete event, if the bytes pushed so far hold one (lent until the
    /// next call). A line that is not UTF-8 is an error.
    pub fn next_event(&mut self) -> Result<Option<&str>, NotUtf8> {
        if std::mem::take(&mut self.lent) {
            self.data.clear();
        }
        loop {
            let rest = &self.buf[self.pos..];
            if !self.started {
                if !self.ended && rest.len() < BOM.len() && BOM.starts_with(rest) {
                    return Ok(None);
                }
                if rest.starts_with(BOM) {
                    self.pos += BOM.len();
                }
                self.started = true;
                continue;
            }
            let Some(i) = memchr::memchr2(b'\n', b'\r', &rest[self.scanned..]) else {
                self.scanned = rest.len();
                return Ok(None);
            };
            let end = self.scanned + i;
            let next = match rest[end] {
                b'\r' if end + 1 == rest.len() && !self.ended => {
                    // A CR last in the buffer may be the first half of a CRLF: wait.
                    self.scanned = end;
                    return Ok(None);
                }
                b'\r' if rest.get(end + 1) == Some(&b'\n') => end + 2,
                _ => end + 1,
            };
            let line = std::str::from_utf8(&rest[..end]).map_err(|_| NotUtf8)?;
            self.pos += next;
            self.scanned = 0;
            if line.is_empty() {
                if self.data.is_empty() {
                    continue;
                }
                self.data.pop();
                self.lent = true;
                return Ok(Some(&self.data));
            }
            if line.starts_with(':') {
                continue;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            if name == "data" {
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
                self.data.push('\n');
            }
        }
    }

    /// Marks the end of the stream: no more bytes will come, so a CR last in the body ends its
    /// line rather than waiting for an LF. Take the events [`SseDecoder::next_event`] still has
    /// (at most the one that line completes), then call [`SseDecoder::finish`].
    pub fn end(&mut self) {
        self.ended = true;
    }

    /// Whether [`SseDecoder::end`] was called.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// At the end of the stream: the bytes left over (an unfinished line or event, which is
    /// dropped) must be UTF-8 too.
    pub fn finish(&self) -> Result<(), NotUtf8> {
        std::str::from_utf8(&self.buf[self.pos..])
            .map(|_| ())
            .map_err(|_| NotUtf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_counts_the_unfinished_line_and_data() {
        let mut d = SseDecoder::default();
        d.push(b"data: a\ndata: bc");
        assert_eq!(d.next_event(), Ok(None));
        // "a\n" of data, and the unfinished line "data: bc".
        assert_eq!(d.pending(), 2 + 8);
        d.push(b"\n\n");
        assert_eq!(d.next_event(), Ok(Some("a\nbc")));
        assert_eq!(d.next_event(), Ok(None));
        assert_eq!(d.pending(), 0);
        let line = vec![b'x'; MAX_PENDING + 1];
        d.push(&line);
        assert_eq!(d.next_event(), Ok(None));
        assert!(d.pending() > MAX_PENDING);
    }

    fn events(pieces: &[&[u8]]) -> (Vec<String>, Result<(), NotUtf8>) {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for p in pieces.iter().map(Some).chain([None]) {
            match p {
                Some(p) => d.push(p),
                None => d.end(),
            }
            loop {
                match d.next_event() {
                    Ok(Some(e)) => out.push(e.to_string()),
                    Ok(None) => break,
                    Err(e) => return (out, Err(e)),
                }
            }
        }
        (out, d.finish())
    }

    /// A body whose last event ends with a bare CR (the empty line that ends it is a lone CR,
    /// last in the body) gives that event, whole or cut anywhere (the CR alone in the last
    /// piece); an event not ended by an empty line is still dropped at the end.
    #[test]
    fn a_bare_cr_last_in_the_body_ends_its_line() {
        for body in [
            &b"data: a\r\rdata: x\r\r"[..],
            b"data: a\n\ndata: x\n\r",
            b"data: a\r\n\r\ndata: x\r\n\r",
        ] {
            for step in 1..=body.len() {
                let pieces: Vec<&[u8]> = body.chunks(step).collect();
                assert_eq!(
                    events(&pieces),
                    (vec!["a".to_string(), "x".to_string()], Ok(())),
                    "{body:?} every {step} bytes"
                );
            }
        }
        for body in [&b"data: a\r\rdata: x\r"[..], b"data: a\r\rdata: x"] {
            assert_eq!(events(&[body]), (vec!["a".to_string()], Ok(())));
        }
        // A lone CR, or the start of a byte order mark, at the end.
        assert_eq!(events(&[b"\r"]), (vec![], Ok(())));
        assert_eq!(events(&[b"\xEF\xBB"]).1, Err(NotUtf8));
    }

    #[test]
    fn the_format() {
        let body: &[u8] = b"\xEF\xBB\xBF: keep-alive\r\ndata: a\r\ndata:b\r\rdata\n\nevent: x\nid: 1\ndata:  two spaces\n\n\n\ndata: no end";
        let (got, end) = events(&[body]);
        assert_eq!(got, ["a\nb", "", " two spaces"]);
        assert_eq!(end, Ok(()));
        // Cut anywhere, the same events.
        for step in 1..body.len() {
            let pieces: Vec<&[u8]> = body.chunks(step).collect();
            assert_eq!(events(&pieces).0, got, "every {step} bytes");
        }
        assert_eq!(
            events(&[b"data: a\n\ndata: \xFF\n\n"]),
            (vec!["a".to_string()], Err(NotUtf8))
        );
        assert_eq!(events(&[b"data: a\n\n\xE2"]).1, Err(NotUtf8));
        assert_eq!(
            events(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"]).0,
            Vec::<String>::new()
        );
    }
}
