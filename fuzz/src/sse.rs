//! Fuzz target `sse`: the model stream as the client reads it: SSE framing ([`bb7::llm::sse`], as in
//! `bb7::llm::client`, held to `eventsource-stream`'s events), each `data:` payload parsed as JSON and normalised by [`bb7::llm::chunk::parse`],
//! tool-call fragments assembled by [`bb7::llm::tool_calls::ToolCallAssembler`].
//!
//! Input: byte 0 picks how the body is cut into network chunks (every `n`-th byte, 1..=32; 0: whole);
//! the rest is the response body. Invariants:
//! - nothing panics;
//! - the SSE decoder gives the data of the same events as `eventsource-stream`, and fails where it
//!   fails (a stream that is not UTF-8), whole and cut up; a body ending in a bare CR is compared
//!   with the same body and an LF ([`expected`]: the decoder ends that line at the end of the
//!   stream, `eventsource-stream` drops it);
//! - the plain-chunk reader the client tries first ([`bb7::llm::chunk::parse_plain`]) gives, when
//!   it takes a payload the JSON tree reads too, exactly the events of [`bb7::llm::chunk::parse`];
//! - the events do not depend on where the body was cut (the same body in one piece gives the same
//!   events, errors and tool calls);
//! - an assembled call's parsed arguments, when `Ok`, are a JSON object.

use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bb7::llm::StreamEvent;
use bb7::llm::chunk;
use bb7::llm::sse::SseDecoder;
use bb7::llm::tool_calls::{ToolCall, ToolCallAssembler};
use eventsource_stream::Eventsource;
use futures_util::Stream;
use serde_json::Value;

#[derive(Debug, PartialEq)]
enum Outcome {
    Done,
    Ended,
    StreamError,
    BadChunk,
    ChunkError(String, String),
}

#[derive(Debug, PartialEq)]
struct Read {
    events: Vec<StreamEvent>,
    outcome: Outcome,
    calls: Vec<ToolCall>,
}

/// The `data` of every event `eventsource-stream` reads from `pieces`, and whether it ended in an
/// error (the framing the client used before [`bb7::llm::sse`]; the reference it is held to).
fn reference(pieces: &[Vec<u8>]) -> (Vec<String>, bool) {
    let body = futures_util::stream::iter(
        pieces
            .iter()
            .cloned()
            .map(Ok::<_, std::convert::Infallible>),
    );
    let mut events = pin!(body.eventsource());
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    loop {
        match events.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(Ok(ev))) => out.push(ev.data),
            Poll::Ready(Some(Err(_))) => return (out, true),
            Poll::Ready(None) => return (out, false),
            Poll::Pending => panic!("an in-memory stream cannot be pending"),
        }
    }
}

/// [`reference`] as [`SseDecoder`] is held to it. `eventsource-stream` stops where the body
/// does, or at its first byte that is not UTF-8 (with an error); a CR right before that point is a
/// line end for our decoder (nothing can follow to make it a CRLF: WHATWG counts a bare CR as a
/// line end), which may dispatch one last event, while `eventsource-stream` waits for an LF that
/// never comes and drops it. The one deliberate difference: there, the reference reads the body up
/// to that point with an LF after the CR.
fn expected(pieces: &[Vec<u8>]) -> (Vec<String>, bool) {
    let body = pieces.concat();
    let stop = std::str::from_utf8(&body).map_or_else(|e| e.valid_up_to(), |_| body.len());
    let (events, failed) = reference(pieces);
    if stop == 0 || body[stop - 1] != b'\r' {
        return (events, failed);
    }
    let mut cut = body[..stop].to_vec();
    cut.push(b'\n');
    (reference(&[cut]).0, failed)
}

/// The same from [`SseDecoder`], the client's framing.
fn decoded(pieces: &[Vec<u8>]) -> (Vec<String>, bool) {
    let mut sse = SseDecoder::default();
    let mut out = Vec::new();
    for p in pieces.iter().map(Some).chain([None]) {
        match p {
            Some(p) => sse.push(p),
            None => sse.end(),
        }
        loop {
            match sse.next_event() {
                Ok(Some(data)) => out.push(data.to_string()),
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    (out, sse.finish().is_err())
}

/// Runs the client's loop over `pieces`, synchronously (the stream never waits).
fn read(pieces: Vec<Vec<u8>>) -> Read {
    let mut sse = SseDecoder::default();
    let mut pieces = pieces.into_iter();
    let mut tools = ToolCallAssembler::default();
    let mut out = Vec::new();
    let outcome = loop {
        let data = match sse.next_event() {
            Ok(Some(data)) => data,
            Err(_) => break Outcome::StreamError,
            Ok(None) => {
                if sse.ended() {
                    break match sse.finish() {
                        Err(_) => Outcome::StreamError,
                        Ok(()) => Outcome::Ended,
                    };
                }
                match pieces.next() {
                    Some(p) => sse.push(&p),
                    None => sse.end(),
                }
                continue;
            }
        };
        let data = data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            break Outcome::Done;
        }
        // As the client reads: the plain reader first, else the JSON tree.
        let parsed = match chunk::parse_plain(data) {
            Some(plain) => {
                // (It reads past what the tree refuses in fields nobody reads: nesting deeper
                // than the tree's limit, numbers out of range.)
                if let Ok(value) = serde_json::from_str::<Value>(data) {
                    assert_eq!(
                        chunk::parse(&value).ok().as_ref(),
                        Some(&plain),
                        "the plain reader and parse disagree on {data}"
                    );
                }
                Ok(plain)
            }
            None => {
                let Ok(value) = serde_json::from_str::<Value>(data) else {
                    break Outcome::BadChunk;
                };
                chunk::parse(&value)
            }
        };
        match parsed {
            Ok(parsed) => {
                for ev in parsed {
                    if let StreamEvent::ToolCall {
                        index,
                        id,
                        name,
                        arguments,
                    } = &ev
                    {
                        tools.push(*index, id.clone(), name.clone(), arguments);
                    }
                    out.push(ev);
                }
            }
            // (An `error` object with neither code nor message gives empty ones; the host then
            // says "the provider failed mid-stream: " with nothing after it.)
            Err(e) => break Outcome::ChunkError(e.code, e.message),
        }
    };
    let calls = tools.finish();
    for c in &calls {
        if let Ok(v) = &c.arguments {
            assert!(
                v.is_object(),
                "parsed arguments that are not an object: {v}"
            );
        }
    }
    Read {
        events: out,
        outcome,
        calls,
    }
}

pub fn run(data: &[u8]) {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let whole = read(vec![body.to_vec()]);
    let one = vec![body.to_vec()];
    assert_eq!(
        decoded(&one),
        expected(&one),
        "the SSE decoder and eventsource-stream disagree"
    );
    let step = (cut % 33) as usize;
    if step == 0 {
        return;
    }
    let pieces: Vec<Vec<u8>> = body.chunks(step).map(<[u8]>::to_vec).collect();
    assert_eq!(
        decoded(&pieces),
        expected(&pieces),
        "the SSE decoder and eventsource-stream disagree (every {step} bytes)"
    );
    let cut_up = read(pieces);
    // NaN costs compare unequal to themselves; compare their debug text instead.
    assert_eq!(
        format!("{cut_up:?}"),
        format!("{whole:?}"),
        "the events depend on where the body was cut (every {step} bytes)"
    );
}
