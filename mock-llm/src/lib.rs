//! `bb7-mock-llm`: a scripted, local, OpenAI-compatible HTTP/1.1 server that stands in for OpenRouter
//! in BB-7's tests and offline demo. It is the project's only test double.
//!
//! It speaks real HTTP/1.1 (via hyper) and real SSE, binds `127.0.0.1` only, records every request,
//! and answers chat-completion requests from a queue of scripted [`Reply`]s, one per request, in order.
//! A streamed reply is a list of [`Step`]s; every write is flushed as its own HTTP chunk, so a client
//! sees the stream as fragmented as the script says. It can misbehave the ways OpenRouter does:
//! `: OPENROUTER PROCESSING` comments, `data:` without a space, events cut mid-line across writes,
//! error chunks after HTTP 200, streams without a finish reason, connections closed mid-body,
//! streams that stall, 401/402/429 with OpenRouter's error bodies and `Retry-After`; and, as other
//! servers may, lines ended by a bare CR (`"line_ends": "cr"`, [`LineEnds`]).
//!
//! # Endpoints
//!
//! | request | answer |
//! |---|---|
//! | `POST /api/v1/chat/completions` (also `/v1/…`) | the next scripted reply; 400 if the body is not JSON (no reply used); the fallback or a 500 when the queue is empty |
//! | `GET /api/v1/models` | `Script::models` (default: two models in OpenRouter's shape) |
//! | `GET /api/v1/credits` | `Script::credits` (default `{"data":{"total_credits":10.0,"total_usage":2.5}}`) |
//! | `GET /api/v1/key` (also `/auth/key`) | `Script::key` (default: an unlimited paid key) |
//! | anything else | 404 (405 for a known path with the wrong method), OpenRouter error shape |
//!
//! The mock does not check the request's `stream` flag or `Authorization`: it records them for the
//! test to assert on and serves what the script says. Every request that parses as HTTP is recorded
//! ([`RecordedRequest`]: method, path, query, headers, body text and JSON, which reply answered,
//! how the answer ended); bytes that are not HTTP at all get hyper's bare 400 and are not recorded.
//!
//! Streams are sent with `Transfer-Encoding: chunked`; each write of a step is its own HTTP chunk and
//! its own `writev` on the socket (the body yields to hyper after every frame, and `TCP_NODELAY` is
//! set), so clients really receive fragmented streams. `truncate` shuts the socket down after the
//! bytes already written, without the terminating `0\r\n\r\n`.
//!
//! # Library use
//!
//! ```no_run
//! use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
//! use std::time::Duration;
//!
//! let server = MockServer::start(Script::new([
//!     Reply::rate_limited(1),                  // 429 + Retry-After: 1
//!     Reply::text(["Hel", "lo"]),              // then a normal stream
//! ]));
//! server.push(Reply::tool_calls([ToolCall::new(0, "call_1", "write_file", "{}").fragments(3)]));
//! let base = server.base_url();                // http://127.0.0.1:PORT/api/v1
//! // … point the host at `base`, run it …
//! let requests = server.wait_for_requests(2, Duration::from_secs(10));
//! assert_eq!(requests[0].authorization(), Some("Bearer sk-test"));
//! ```
//!
//! [`MockServer`] runs on its own thread with its own tokio runtime, so synchronous tests can use it;
//! dropping it stops the server. It never panics on client behaviour: disconnects, garbage requests
//! and the like are logged (through `tracing`) and the server keeps serving.
//!
//! # The JSON script (the binary's `--script FILE`)
//!
//! The same [`Script`] and [`Reply`] types, through serde. Unknown fields are errors.
//!
//! ```json
//! {
//!   "replies": [
//!     {"status": 429, "headers": {"Retry-After": "2"},
//!      "body": {"error": {"code": 429, "message": "Rate limit exceeded"}}},
//!     {"model": "mock/reasoner", "stream": [
//!       {"comment": "OPENROUTER PROCESSING"},
//!       {"reasoning": "The user wants a greeting."},
//!       {"delay_ms": 50},
//!       {"content": "Hel"},
//!       {"split": {"at": [7], "step": {"content": "lo"}}},
//!       {"tool_call": {"index": 0, "id": "call_1", "name": "edit_file", "fragments": 4,
//!                      "arguments": "{\"edits\":[{\"path\":\"src/main.rs\",\"file_id\":\"{{file_id:src/main.rs}}\",\"old_string\":\"a\",\"new_string\":\"b\"}]}"}},
//!       {"finish": "tool_calls"},
//!       {"usage": {"prompt_tokens": 120, "completion_tokens": 30, "cached_tokens": 64,
//!                  "cost": 0.0004, "finish_reason": "tool_calls"}},
//!       "done"
//!     ]},
//!     {"stream": [{"content": "partial"}, {"error": {"code": 502, "message": "Provider disconnected"}}]},
//!     {"stream": [{"data_nospace": {"choices": []}}, {"raw": "data: {\"cho"}, "truncate"]}
//!   ],
//!   "fallback": {"stream": [{"content": "(no more scripted replies)"}, {"finish": "stop"}, "done"]},
//!   "credits": {"body": {"data": {"total_credits": 5, "total_usage": 4.99}}},
//!   "stall_timeout_ms": 300000
//! }
//! ```
//!
//! A reply has `status` (default 200), `headers`, and at most one of `body` (JSON), `text` (a plain
//! body) and `stream` (SSE steps); `id`, `model`, `created`, `provider` override the chunks' envelope
//! (defaults `gen-mock-N`, the request's `model`, 1700000000, `Mock`). Steps (see [`Step`]):
//! `data`, `data_nospace`, `comment`, `raw`, `raw_bytes`, `delay_ms`, `"done"`, `"truncate"`,
//! `"stall"` write exact bytes or act on the connection; `content`, `reasoning`, `tool_call`,
//! `tool_call_delta`, `finish`, `usage`, `error` write OpenRouter-shaped chunks; `split` cuts another
//! step's bytes into several writes.
//!
//! # `{{file_id:PATH}}`
//!
//! Any string in a reply may contain `{{file_id:PATH}}`; when the reply is served it becomes the
//! 8-hex-digit id the host showed for PATH in the request. The exact rule is in [`placeholder`].

pub mod placeholder;
mod render;
pub mod script;
mod server;

pub use render::Envelope;
pub use script::{
    DEFAULT_STALL_TIMEOUT_MS, ErrorChunk, LineEnds, OPENROUTER_PROCESSING, Reply, Script,
    ScriptError, Split, Step, ToolCall, ToolCallDelta, Usage, Weak, edit_file_arguments,
    insufficient_credits_message,
};
pub use server::{DEFAULT_CREATED, MAX_REQUEST_BODY, MockServer, Outcome, RecordedRequest};
