//! The stdio protocol (PROTOCOL.md and its addendum): line codec, request parsing, dispatch of
//! actions to handlers, error mapping. Nothing below this module knows about JSON lines.

pub mod actions;
pub mod codec;
pub mod events;
pub mod inflight;
pub mod request;
pub mod runtime;

use std::io::{self, BufReader};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::workspace::Workspace;
use codec::{Line, Output, read_line};
use request::Request;

/// What a handler produced.
pub enum Outcome {
    /// Send this reply (`type` and fields; the request id is added).
    Reply(Map<String, Value>),
    /// Stop serving: release the chat lock, flush, exit 0 (no reply).
    Shutdown,
    /// The reply (or a stream of events) is written later by a background task.
    Later,
    /// A reply already serialised (one JSON object with its `type` and request id), written as it
    /// is: a long list is not built as a JSON tree first.
    Line(String),
}

/// What every handler can reach: the workspace, stdout, the runtime for background work, and the
/// in-flight slot.
#[derive(Clone)]
pub struct Ctx {
    /// The session's state, shared with background tasks; see [`Ctx::lock`].
    pub workspace: Arc<Mutex<Workspace>>,
    /// Stdout, where every reply and event is written.
    pub out: Output,
    /// The runtime that background work (model requests, remote fetches) is spawned on, started
    /// by the first action that needs it ([`Ctx::rt`]).
    runtime: Arc<runtime::LazyRuntime>,
    /// The slot of the one model request in flight, which `cancel` reaches.
    pub inflight: Arc<inflight::InFlight>,
}

impl Ctx {
    /// The workspace, locked. A handler that panicked is caught before its guard drops, so the lock
    /// is never poisoned by one; recover anyway rather than stop serving.
    pub fn lock(&self) -> MutexGuard<'_, Workspace> {
        self.workspace.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The runtime background work is spawned on (started on first use; see [`runtime`]).
    pub fn rt(&self) -> Result<&tokio::runtime::Handle, String> {
        self.runtime.handle().map_err(|e| e.to_string())
    }
}

/// A reply object of `type` with `fields`.
pub fn reply(kind: &str, fields: Value) -> Outcome {
    let mut m = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    m.insert("type".into(), json!(kind));
    Outcome::Reply(m)
}

/// `{"type":"ok"}`.
pub fn ok() -> Outcome {
    reply("ok", json!({}))
}

fn error_reply(id: Option<&str>, message: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("type".into(), json!("error"));
    if let Some(id) = id {
        m.insert("request_id".into(), json!(id));
    }
    m.insert("message".into(), json!(message));
    m
}

/// Runs one action; a panic in a handler (a bug, never expected) becomes an error reply instead of
/// killing the session, and is logged rather than printed (stderr reaches the user).
fn guarded_dispatch(ctx: &Ctx, req: &Request) -> actions::Handled {
    if ctx.inflight.busy() && inflight::refused_while_busy(&req.action) {
        return Err(inflight::BUSY.to_string());
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| actions::dispatch(ctx, req))) {
        Ok(handled) => handled,
        Err(_) => Err(format!(
            "Internal error while handling {}; the request was not completed",
            req.action
        )),
    }
}

/// Serves the protocol on stdin/stdout until `shutdown` or end of input.
pub fn serve() -> ExitCode {
    // One malloc arena for the whole process: glibc otherwise gives each thread that allocates
    // (the I/O workers, the tokenizer build, a reply's blocking calls) its own, each keeping freed
    // pages resident. With two cores there is little lock contention to save.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    std::panic::set_hook(Box::new(|info| tracing::error!("panic: {info}")));
    let out = Output::new(io::stdout());
    // No runtime yet: the first action that spawns background work starts it (`Ctx::rt`), so a
    // session that never needs one exits as a single thread.
    let ctx = Ctx {
        workspace: Arc::new(Mutex::new(Workspace::new())),
        out: out.clone(),
        runtime: Arc::default(),
        inflight: Arc::default(),
    };
    let stdin = io::stdin();
    let mut input = BufReader::with_capacity(1 << 16, stdin.lock());
    let mut buf = Vec::new();
    while let Ok(Some(line)) = read_line(&mut input, &mut buf) {
        let reply = match line {
            Line::TooLong(n) => Some(error_reply(
                None,
                &format!(
                    "Request too large: {n} bytes (the limit is {} MiB per line)",
                    codec::MAX_LINE >> 20
                ),
            )),
            Line::Data(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => None,
            Line::Data(bytes) => match Request::parse(&bytes) {
                Err(bad) => Some(error_reply(bad.id.as_deref(), &bad.message)),
                Ok(req) => match guarded_dispatch(&ctx, &req) {
                    Ok(Outcome::Shutdown) => break,
                    Ok(Outcome::Later) => None,
                    Ok(Outcome::Line(line)) => {
                        if out.send_line(line).is_err() {
                            break;
                        }
                        None
                    }
                    Ok(Outcome::Reply(mut m)) => {
                        if let Some(id) = &req.id {
                            m.insert("request_id".into(), json!(id));
                        }
                        Some(m)
                    }
                    Err(message) => Some(error_reply(req.id.as_deref(), &message)),
                },
            },
        };
        if let Some(r) = reply
            && out.send(&r).is_err()
        {
            break;
        }
        // Nothing is built ahead: the tokenizer (about 5 MiB) is built by the first count, as
        // most sessions that only chat never count; a tool component is loaded when the model
        // first calls it (offering them needs only their descriptions).
    }
    // A reply still streaming is cancelled, and given a moment to record what it has.
    if ctx.inflight.cancel(None) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while ctx.inflight.busy() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    ctx.lock().release_active();
    // Every reply was flushed when sent and every state write is atomic, so nothing is lost by
    // exiting now rather than joining the runtime's idle threads (the editor waits on our exit;
    // this halves the time from end of input to exit). A background title save cut short leaves
    // the chat as it was. Nothing is dropped either: dropping the last `Ctx` would drop the
    // runtime, which joins its threads, and freeing the workspace piece by piece is work the
    // exit does at once.
    std::mem::forget(ctx);
    std::process::exit(0);
}
