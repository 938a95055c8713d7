//! The line codec: one JSON object per line each way. Reading never panics and never buffers more
//! than [`MAX_LINE`] bytes of one line; writing emits each reply as one `write` of one line.

use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};

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
    inner: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl Output {
    /// An output that writes replies to `w` (stdout, when serving).
    pub fn new(w: impl Write + Send + 'static) -> Self {
        Output {
            inner: Arc::new(Mutex::new(Box::new(w))),
        }
    }

    /// Writes one reply as a single line and flushes. Errors (a closed stdout) are returned so the
    /// server can stop.
    pub fn send(&self, reply: &Map<String, Value>) -> io::Result<()> {
        let mut line = serde_json::to_vec(reply).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut w = self
            .inner
            .lock()
            .map_err(|_| io::Error::other("output lock poisoned"))?;
        w.write_all(&line)?;
        w.flush()
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
