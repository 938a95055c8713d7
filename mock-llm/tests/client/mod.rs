//! A deliberately plain HTTP/1.1 client over `std::net::TcpStream` for the mock's tests: it keeps the
//! HTTP chunk boundaries of a chunked body, so tests can see exactly how the server cut its writes,
//! and it reports whether the body ended properly (terminating chunk) or the connection was cut.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// Long enough never to fire on a working server; short enough that a broken one fails the test
/// instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A response as it came off the wire.
#[derive(Debug, Default)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// For a chunked body, one entry per HTTP chunk; otherwise one entry with the whole body.
    pub chunks: Vec<Vec<u8>>,
    /// The body ended as HTTP says it must (terminating chunk, or all Content-Length bytes).
    pub complete: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn body(&self) -> Vec<u8> {
        self.chunks.concat()
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body()).expect("body is UTF-8")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body()).expect("body is JSON")
    }

    /// The SSE events of the body (text between blank lines), comments included.
    pub fn events(&self) -> Vec<String> {
        self.text()
            .split_terminator("\n\n")
            .map(str::to_string)
            .collect()
    }

    /// The JSON of every `data:` event except `[DONE]`.
    pub fn data(&self) -> Vec<Value> {
        self.events()
            .iter()
            .filter_map(|e| e.strip_prefix("data:"))
            .map(str::trim_start)
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).expect("data event is JSON"))
            .collect()
    }
}

pub enum Chunk {
    Data(Vec<u8>),
    End,
    Cut,
}

/// One client connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).expect("connect to the mock");
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).expect("write");
    }

    pub fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        self.write_raw(&bytes);
    }

    fn line(&mut self) -> Option<String> {
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) if line.ends_with(b"\r\n") => {
                line.truncate(line.len() - 2);
                Some(String::from_utf8_lossy(&line).into_owned())
            }
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("reading from the mock: {e}"),
        }
    }

    /// Reads the status line and headers; `None` if the connection closed first.
    pub fn read_head(&mut self) -> Option<(u16, Vec<(String, String)>)> {
        let status_line = self.line()?;
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut headers = Vec::new();
        loop {
            let line = self.line()?;
            if line.is_empty() {
                return Some((status, headers));
            }
            let (k, v) = line.split_once(':').expect("header line");
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }

    /// Reads one chunk of a chunked body.
    pub fn read_chunk(&mut self) -> Chunk {
        let Some(size_line) = self.line() else {
            return Chunk::Cut;
        };
        let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size line {size_line:?}"));
        if size == 0 {
            return match self.line() {
                Some(l) if l.is_empty() => Chunk::End,
                _ => Chunk::Cut,
            };
        }
        let mut data = vec![0; size];
        if self.reader.read_exact(&mut data).is_err() {
            return Chunk::Cut;
        }
        match self.line() {
            Some(l) if l.is_empty() => Chunk::Data(data),
            _ => Chunk::Cut,
        }
    }

    /// Reads a whole response (after `send`).
    pub fn read_response(&mut self) -> Response {
        let (status, headers) = self.read_head().expect("a response head");
        let mut response = Response {
            status,
            headers,
            ..Response::default()
        };
        let chunked = response
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        if chunked {
            loop {
                match self.read_chunk() {
                    Chunk::Data(d) => response.chunks.push(d),
                    Chunk::End => {
                        response.complete = true;
                        break;
                    }
                    Chunk::Cut => break,
                }
            }
        } else {
            let len: usize = response
                .header("content-length")
                .map(|v| v.parse().expect("content-length"))
                .unwrap_or(0);
            let mut body = vec![0; len];
            response.complete = self.reader.read_exact(&mut body).is_ok();
            response.chunks.push(body);
        }
        response
    }

    /// Whether the server closed the connection (EOF or reset) — waits up to [`IO_TIMEOUT`].
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.reader.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            ),
        }
    }
}

/// A chat-completion request body whose last user message is `user_text`.
pub fn chat_body(user_text: &str) -> Value {
    serde_json::json!({
        "model": "openai/gpt-test",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "You are BB-7."},
            {"role": "user", "content": user_text}
        ]
    })
}

/// `POST /api/v1/chat/completions` on a fresh connection (closed after the response).
pub fn post_chat(addr: SocketAddr, body: &Value) -> Response {
    let mut conn = Conn::open(addr);
    conn.send(
        "POST",
        "/api/v1/chat/completions",
        &[
            ("Authorization", "Bearer sk-or-v1-test"),
            ("Content-Type", "application/json"),
            ("Connection", "close"),
        ],
        body.to_string().as_bytes(),
    );
    conn.read_response()
}

/// `GET path` on a fresh connection.
pub fn get(addr: SocketAddr, path: &str) -> Response {
    let mut conn = Conn::open(addr);
    conn.send(
        "GET",
        path,
        &[
            ("Authorization", "Bearer sk-or-v1-test"),
            ("Connection", "close"),
        ],
        b"",
    );
    conn.read_response()
}
