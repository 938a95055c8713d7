//! Fuzz target `codec`: the protocol's line decoder ([`bb7::protocol::codec::read_line`]), request
//! parsing ([`bb7::protocol::request::Request`]) and the reply encoder ([`bb7::protocol::codec::Output`]).
//!
//! Input: byte 0 picks the reader's buffer size (1..=64, so lines straddle buffer refills); the rest is
//! the client's stdin. Invariants:
//! - the decoder never panics and yields exactly the input's lines (split at `\n`, one trailing `\r`
//!   dropped, no empty tail after a final newline);
//! - a line that parses as a request, re-encoded as JSON, parses back to the same id, action and fields;
//! - every field accessor answers (value or error text) without panicking;
//! - a reply encoded by `Output::send` is exactly one line that decodes back to the same object.

use std::io::{self, BufReader, Write};
use std::sync::{Arc, Mutex};

use bb7::protocol::codec::{Line, Output, read_line};
use bb7::protocol::request::Request;
use serde_json::{Map, Value};

#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("sink").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The lines a correct decoder yields for `input` (all far below `MAX_LINE`).
fn expected_lines(input: &[u8]) -> Vec<Vec<u8>> {
    if input.is_empty() {
        return Vec::new();
    }
    let mut parts: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if input.ends_with(b"\n") {
        parts.pop();
    }
    parts
        .into_iter()
        .map(|p| p.strip_suffix(b"\r").unwrap_or(p).to_vec())
        .collect()
}

fn has_float(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_f64(),
        Value::Array(a) => a.iter().any(has_float),
        Value::Object(o) => o.values().any(has_float),
        _ => false,
    }
}

pub fn run(data: &[u8]) {
    let Some((&cap, input)) = data.split_first() else {
        return;
    };
    let cap = (cap as usize % 64) + 1;
    let mut reader = BufReader::with_capacity(cap, input);
    let mut buf = Vec::new();
    let mut lines = Vec::new();
    loop {
        match read_line(&mut reader, &mut buf) {
            Ok(Some(Line::Data(l))) => lines.push(l),
            Ok(Some(Line::TooLong(n))) => panic!("a {n}-byte line reported too long"),
            Ok(None) => break,
            Err(e) => panic!("reading from memory failed: {e}"),
        }
        assert!(lines.len() <= input.len() + 1, "more lines than bytes");
    }
    assert_eq!(
        lines,
        expected_lines(input),
        "decoded lines differ from the input's lines"
    );

    let sink = Sink::default();
    let out = Output::new(sink.clone());
    for line in &lines {
        let req = match Request::parse(line) {
            Ok(r) => r,
            Err(bad) => {
                assert!(!bad.message.is_empty(), "an error reply needs a message");
                continue;
            }
        };
        assert!(
            !req.action.is_empty(),
            "a request with an empty action was accepted"
        );
        // Every accessor on every field (and on a missing one) answers without panicking.
        let names: Vec<String> = req
            .fields
            .keys()
            .cloned()
            .chain(["absent".to_string()])
            .collect();
        for name in &names {
            let _ = req.str(name);
            let _ = req.nonempty(name);
            let _ = req.opt_str(name);
            let _ = req.flag(name);
            let _ = req.bool(name);
            let _ = req.uint(name);
        }
        let _ = req.global();

        // decode(encode(request)) == request
        let mut obj = req.fields.clone();
        obj.insert("action".into(), Value::String(req.action.clone()));
        if let Some(id) = &req.id {
            obj.insert("request_id".into(), Value::String(id.clone()));
        }
        let encoded = serde_json::to_vec(&Value::Object(obj)).expect("encode a request");
        let again = Request::parse(&encoded)
            .unwrap_or_else(|e| panic!("a re-encoded request does not parse: {}", e.message));
        assert_eq!(again.id, req.id);
        assert_eq!(again.action, req.action);
        // serde_json (without its `float_roundtrip` feature) may parse a long decimal to a float
        // one ulp off, so a float read back can differ by that ulp (found by this target); the
        // protocol's numbers are integers, compared exactly.
        if !has_float(&Value::Object(req.fields.clone())) {
            assert_eq!(again.fields, req.fields);
        }

        // decode(encode(reply)) == reply, as exactly one line.
        let mut reply = Map::new();
        reply.insert("type".into(), Value::String("echo".into()));
        if let Some(id) = &req.id {
            reply.insert("request_id".into(), Value::String(id.clone()));
        }
        reply.insert("fields".into(), Value::Object(req.fields.clone()));
        sink.0.lock().expect("sink").clear();
        out.send(&reply).expect("send to memory");
        let written = sink.0.lock().expect("sink").clone();
        let mut r = BufReader::with_capacity(cap, &written[..]);
        let mut b = Vec::new();
        let one = match read_line(&mut r, &mut b) {
            Ok(Some(Line::Data(l))) => l,
            other => panic!("a reply is not one line: {other:?}"),
        };
        assert!(
            matches!(read_line(&mut r, &mut b), Ok(None)),
            "a reply spans two lines"
        );
        let back: Value = serde_json::from_slice(&one).expect("a reply is JSON");
        if !has_float(&back) {
            assert_eq!(
                back,
                Value::Object(reply),
                "a reply does not decode to itself"
            );
        }
    }
}
