//! The line codec: one JSON object per line each way. Reading never panics and never buffers more
//! than [`MAX_LINE`] bytes of one line; writing emits each reply as one `write` of one line.

use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Map, Value};

/// The longest request line accepted (16 MiB). Longer lines are discarded up to their newline and
/// answered with an error.
pub const MAX_LINE: usize = 16 << 20;

/// One line read from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line (without its newline).
    Data(Vec<u8>),
    /// A line longer than [`MAX_LINE`]; its bytes were dropped.
    TooLong(usize),
}

/// Reads the next line; `None` at end of input.
pub fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<Option<Line>> {
    buf.clear();
    let mut total = 0usize;
    let mut overflow = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if total == 0 {
                return Ok(None);
            }
            break;
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        total += take;
        if !overflow {
            if buf.len() + take > MAX_LINE {
                overflow = true;
                buf.clear();
                buf.shrink_to(64 << 10);
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(if done { take + 1 } else { take });
        if done {
            break;
        }
    }
    if overflow {
        return Ok(Some(Line::TooLong(total)));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(Line::Data(std::mem::take(buf))))
}

/// Where replies go: stdout, shared by everything that answers.
#[derive(Clone)]
pub struct Output {
    inner: Arc<Mutex<Sink>>,
}

/// The writer and the buffer each line is serialised into (reused: a streamed reply writes
/// thousands of small lines, each without an allocation of its own).
struct Sink {
    w: Box<dyn Write + Send>,
    line: Vec<u8>,
}

/// A line buffer grown past this by one large reply (a chat's history, a long list) is dropped
/// after the write rather than kept for the rest of the session.
const KEEP_LINE_CAPACITY: usize = 64 << 10;

impl Output {
    /// An output that writes replies to `w` (stdout, when serving).
    pub fn new(w: impl Write + Send + 'static) -> Self {
        Output {
            inner: Arc::new(Mutex::new(Sink {
                w: Box::new(w),
                line: Vec::with_capacity(1024),
            })),
        }
    }

    /// Writes one reply as a single line and flushes. Errors (a closed stdout) are returned so the
    /// server can stop.
    pub fn send(&self, reply: &Map<String, Value>) -> io::Result<()> {
        self.send_value(reply)
    }

    /// Writes `line` (one serialised JSON object, without its newline) with one `write` and a
    /// flush.
    pub fn send_line(&self, mut line: String) -> io::Result<()> {
        line.push('\n');
        let mut sink = self
            .inner
            .lock()
            .map_err(|_| io::Error::other("output lock poisoned"))?;
        sink.w.write_all(line.as_bytes())?;
        sink.w.flush()
    }

    /// Writes anything that serialises to a JSON object (an event struct borrowing its text, so a
    /// streamed chunk is never copied into a map) as one line, with one `write` and a flush.
    pub fn send_value(&self, reply: &impl Serialize) -> io::Result<()> {
        let mut sink = self
            .inner
            .lock()
            .map_err(|_| io::Error::other("output lock poisoned"))?;
        let Sink { w, line } = &mut *sink;
        line.clear();
        let written = serde_json::to_writer(&mut *line, reply)
            .map_err(io::Error::other)
            .and_then(|()| {
                line.push(b'\n');
                w.write_all(line)
            })
            .and_then(|()| w.flush());
        if line.capacity() > KEEP_LINE_CAPACITY {
            *line = Vec::with_capacity(1024);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_overlong_lines() {
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"a\":1}\r\n");
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        input.extend_from_slice(b"\nlast");
        let mut r = io::BufReader::with_capacity(1 << 16, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut r, &mut buf).unwrap(),
            Some(Line::Data(b"{\"a\":1}".to_vec()))
        );
        assert_eq!(
            read_line(&mut r, &mut buf).unwrap(),
            Some(Line::TooLong(MAX_LINE + 10))
        );
        assert_eq!(
            read_line(&mut r, &mut buf).unwrap(),
            Some(Line::Data(b"last".to_vec()))
        );
        assert_eq!(read_line(&mut r, &mut buf).unwrap(), None);
    }
}
