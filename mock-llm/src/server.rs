//! The HTTP/1.1 server: accepts loopback connections, records every request, answers from the script.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::time::Sleep;
use tracing::{debug, info, warn};

use crate::placeholder::substitute_reply;
use crate::render::{Action, Envelope, render};
use crate::script::{LineEnds, Reply, Script};

/// Request bodies larger than this are refused with 413 (the host never sends anything near it).
pub const MAX_REQUEST_BODY: usize = 64 << 20;

/// The `created` of every chunk unless the reply sets one: fixed, so test output is reproducible.
pub const DEFAULT_CREATED: u64 = 1_700_000_000;

/// How the server's answer to one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still being answered (a stream that has not ended yet).
    Responding,
    /// The server produced the whole response: for a stream, every step and then the end of the body.
    Completed,
    /// The connection went away before the stream ended: the client gave up or disconnected.
    ClientGone,
    /// A `truncate` step, or a `stall` that timed out, closed the connection on purpose.
    Truncated,
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// 0-based position among all requests this server received.
    pub index: usize,
    /// `GET`, `POST`, ….
    pub method: String,
    /// The path without the query, e.g. `/api/v1/chat/completions`.
    pub path: String,
    /// The query string, if any.
    pub query: Option<String>,
    /// Every header in arrival order; names are lower case.
    pub headers: Vec<(String, String)>,
    /// The body as text (invalid UTF-8 replaced).
    pub body_text: String,
    /// The body parsed as JSON; `Value::Null` when it is empty or not JSON.
    pub body: Value,
    /// Which scripted reply answered (0-based position in `Script::replies` followed by every
    /// `push`ed reply); `None` for the fallback, the fixed endpoints and the mock's own errors.
    pub reply: Option<usize>,
    /// `{{file_id:PATH}}` paths that could not be resolved from this request.
    pub unresolved_placeholders: Vec<String>,
    /// How the answer ended.
    pub outcome: Outcome,
}

impl RecordedRequest {
    /// The first value of this header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Authorization` header.
    pub fn authorization(&self) -> Option<&str> {
        self.header("authorization")
    }

    /// Whether this was a chat-completion request (`POST …/chat/completions`).
    pub fn is_chat(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/chat/completions")
    }
}

struct State {
    queue: VecDeque<Reply>,
    next_reply: usize,
    fallback: Option<Reply>,
    by_model: std::collections::BTreeMap<String, Reply>,
    models: Reply,
    credits: Reply,
    key: Reply,
    stall_timeout: Duration,
    weak: Option<crate::script::Weak>,
    requests: Vec<RecordedRequest>,
    /// Connections accepted and not closed yet.
    open_connections: usize,
}

/// The state the server threads and the test thread share.
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not take the mock down with it: keep using the data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_outcome(&self, index: usize, outcome: Outcome) {
        let mut state = self.lock();
        if let Some(r) = state.requests.get_mut(index)
            && r.outcome == Outcome::Responding
        {
            r.outcome = outcome;
        }
        drop(state);
        self.changed.notify_all();
    }
}

/// A running mock server on `127.0.0.1`, with its own thread and tokio runtime so that synchronous
/// tests can use it. Dropping it stops the server and closes every connection.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MockServer {
    /// Starts a server on `127.0.0.1` at a free port.
    ///
    /// # Panics
    /// If no loopback port can be bound or no thread started; use [`MockServer::try_start`] to handle that.
    pub fn start(script: Script) -> MockServer {
        MockServer::try_start(script, 0)
            .unwrap_or_else(|e| panic!("bb7-mock-llm: cannot start on 127.0.0.1: {e}"))
    }

    /// Starts a server on `127.0.0.1:port` (0 for a free port).
    pub fn try_start(script: Script, port: u16) -> io::Result<MockServer> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: script.replies.into(),
                next_reply: 0,
                fallback: script.fallback,
                by_model: script.by_model,
                models: script.models,
                credits: script.credits,
                key: script.key,
                stall_timeout: Duration::from_millis(script.stall_timeout_ms),
                weak: script.weak,
                requests: Vec::new(),
                open_connections: 0,
            }),
            changed: Condvar::new(),
        });
        let (shutdown, shutdown_rx) = oneshot::channel();
        let server_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("bb7-mock-llm:{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => accept_loop(listener, server_shared, shutdown_rx).await,
                        Err(e) => warn!("bb7-mock-llm: cannot use the listener: {e}"),
                    }
                });
                // Dropping the runtime here cancels every connection task.
            })?;
        Ok(MockServer {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The OpenRouter-style base URL, `http://127.0.0.1:PORT/api/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/api/v1", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The chat-completion requests received so far.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_chat())
            .collect()
    }

    /// Appends a reply to the chat queue.
    pub fn push(&self, reply: Reply) {
        self.shared.lock().queue.push_back(reply);
    }

    /// How many scripted chat replies are still queued.
    pub fn remaining(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Sets (or clears) the reply served when the queue is empty.
    pub fn set_fallback(&self, reply: Option<Reply>) {
        self.shared.lock().fallback = reply;
    }

    /// Serves `reply` (every time, outside the queue) to chat requests for `model`.
    pub fn set_model_reply(&self, model: &str, reply: Reply) {
        self.shared.lock().by_model.insert(model.to_string(), reply);
    }

    /// Replaces the reply of `GET /api/v1/models`.
    pub fn set_models(&self, reply: Reply) {
        self.shared.lock().models = reply;
    }

    /// Replaces the reply of `GET /api/v1/credits`.
    pub fn set_credits(&self, reply: Reply) {
        self.shared.lock().credits = reply;
    }

    /// Replaces the reply of `GET /api/v1/key`.
    pub fn set_key(&self, reply: Reply) {
        self.shared.lock().key = reply;
    }

    /// Waits until `done` holds for the recorded requests or `timeout` passes; returns whether it held.
    pub fn wait_until(&self, timeout: Duration, done: impl Fn(&[RecordedRequest]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if done(&state.requests) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits until at least `n` requests arrived (or `timeout` passes) and returns them all.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        self.wait_until(timeout, |r| r.len() >= n);
        self.requests()
    }

    /// Connections that are open now (accepted, not yet closed by either side).
    pub fn open_connections(&self) -> usize {
        self.shared.lock().open_connections
    }

    /// Waits until every connection is closed (or `timeout` passes); returns whether they are. A
    /// client closes its idle keep-alive connections when it is dropped, so this tells a test that
    /// the client that made them is gone.
    pub fn wait_connections_closed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if state.open_connections == 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits until request `index` has an outcome other than `Responding`; returns it (or `None` on timeout).
    pub fn wait_for_outcome(&self, index: usize, timeout: Duration) -> Option<Outcome> {
        let settled = |r: &[RecordedRequest]| {
            r.get(index)
                .is_some_and(|r| r.outcome != Outcome::Responding)
        };
        if self.wait_until(timeout, settled) {
            self.requests().get(index).map(|r| r.outcome)
        } else {
            None
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    debug!("bb7-mock-llm: connection from {peer}");
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve_connection(stream, shared.clone()));
                }
                Err(e) => {
                    // E.g. out of file descriptors: wait a little rather than spin.
                    warn!("bb7-mock-llm: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    /// Counts the connection as open while it is served (also when the task is cancelled).
    struct Open(Arc<Shared>);
    impl Drop for Open {
        fn drop(&mut self) {
            self.0.lock().open_connections -= 1;
            self.0.changed.notify_all();
        }
    }
    shared.lock().open_connections += 1;
    let _open = Open(shared.clone());
    let abort = Arc::new(AtomicBool::new(false));
    let io = TokioIo::new(AbortableIo {
        inner: stream,
        abort: abort.clone(),
    });
    let service = service_fn(move |req| {
        let shared = shared.clone();
        let abort = abort.clone();
        async move { Ok::<_, Infallible>(handle(req, shared, abort).await) }
    });
    let result = http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(io, service)
        .await;
    if let Err(e) = result {
        // Clients that disconnect mid-stream, send garbage or are cut by `truncate` end up here.
        debug!("bb7-mock-llm: connection ended: {e}");
    }
}

enum Route {
    Chat,
    Models,
    Credits,
    Key,
    WrongMethod,
    NotFound,
}

fn route(method: &Method, path: &str) -> Route {
    let path = path
        .strip_prefix("/api/v1")
        .or_else(|| path.strip_prefix("/v1"))
        .unwrap_or("");
    let (route, wanted) = match path {
        "/chat/completions" => (Route::Chat, Method::POST),
        "/models" => (Route::Models, Method::GET),
        "/credits" => (Route::Credits, Method::GET),
        "/key" | "/auth/key" => (Route::Key, Method::GET),
        _ => return Route::NotFound,
    };
    if *method == wanted {
        route
    } else {
        Route::WrongMethod
    }
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    abort: Arc<AtomicBool>,
) -> Response<MockBody> {
    let (parts, body) = req.into_parts();
    let read = Limited::new(body, MAX_REQUEST_BODY).collect().await;
    let (bytes, read_error) = match read {
        Ok(collected) => (collected.to_bytes(), None),
        Err(e) => {
            let too_big = e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            (
                Bytes::new(),
                Some((if too_big { 413 } else { 400 }, e.to_string())),
            )
        }
    };
    let body_text = String::from_utf8_lossy(&bytes).into_owned();
    let body_json: Option<Value> = serde_json::from_slice(&bytes).ok();
    let record = RecordedRequest {
        index: 0,
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body_text,
        body: body_json.clone().unwrap_or(Value::Null),
        reply: None,
        unresolved_placeholders: Vec::new(),
        outcome: Outcome::Responding,
    };

    let mut state = shared.lock();
    let index = state.requests.len();
    state.requests.push(RecordedRequest { index, ..record });
    let stall_timeout = state.stall_timeout;
    let (mut reply, reply_number) = if let Some((status, e)) = read_error {
        (
            Reply::error(
                status,
                format!("bb7-mock-llm: cannot read the request body: {e}"),
            ),
            None,
        )
    } else {
        match route(&parts.method, parts.uri.path()) {
            Route::Chat => match &body_json {
                None => (
                    Reply::error(400, "bb7-mock-llm: the request body is not valid JSON"),
                    None,
                ),
                Some(b)
                    if b.get("model")
                        .and_then(|m| m.as_str())
                        .is_some_and(|m| state.by_model.contains_key(m)) =>
                {
                    let model = b.get("model").and_then(|m| m.as_str()).unwrap_or_default();
                    (state.by_model[model].clone(), None)
                }
                Some(_)
                    if state
                        .weak
                        .as_ref()
                        .and_then(|w| w.context_tokens)
                        .is_some_and(|c| bytes.len() as u64 > c.saturating_mul(4)) =>
                {
                    (
                        Reply::error(
                            400,
                            "context length exceeded: the prompt does not fit the model's context window",
                        ),
                        None,
                    )
                }
                Some(_)
                    if state.weak.as_ref().is_some_and(|w| w.schema_mistakes > 0)
                        && state
                            .queue
                            .front()
                            .and_then(crate::script::Weak::mistaken)
                            .is_some() =>
                {
                    let mistaken = state
                        .queue
                        .front()
                        .and_then(crate::script::Weak::mistaken)
                        .unwrap_or_else(|| Reply::error(500, "bb7-mock-llm: no reply"));
                    if let Some(w) = state.weak.as_mut() {
                        w.schema_mistakes -= 1;
                    }
                    (mistaken, None)
                }
                Some(_) => match state.queue.pop_front() {
                    Some(reply) => {
                        let n = state.next_reply;
                        state.next_reply += 1;
                        (reply, Some(n))
                    }
                    None => match &state.fallback {
                        Some(reply) => (reply.clone(), None),
                        None => {
                            warn!("bb7-mock-llm: no scripted reply left for request #{index}");
                            (
                                Reply::error(
                                    500,
                                    format!(
                                        "bb7-mock-llm: the script has no reply left for chat request #{index}"
                                    ),
                                ),
                                None,
                            )
                        }
                    },
                },
            },
            Route::Models => (state.models.clone(), None),
            Route::Credits => (state.credits.clone(), None),
            Route::Key => (state.key.clone(), None),
            Route::WrongMethod => (
                Reply::error(
                    405,
                    format!("bb7-mock-llm: {} is not allowed here", parts.method),
                ),
                None,
            ),
            Route::NotFound => (
                Reply::error(
                    404,
                    format!("bb7-mock-llm: no endpoint at {}", parts.uri.path()),
                ),
                None,
            ),
        }
    };
    let unresolved = match &body_json {
        Some(json) => substitute_reply(&mut reply, json),
        None => Vec::new(),
    };
    if !unresolved.is_empty() {
        warn!(
            "bb7-mock-llm: request #{index}: no file id found for {unresolved:?}; placeholders left as they are"
        );
    }
    if let Some(r) = state.requests.get_mut(index) {
        r.reply = reply_number;
        r.unresolved_placeholders = unresolved;
    }
    drop(state);
    shared.changed.notify_all();

    let envelope = Envelope {
        id: reply
            .id
            .clone()
            .unwrap_or_else(|| format!("gen-mock-{index}")),
        model: reply
            .model
            .clone()
            .or_else(|| {
                body_json
                    .as_ref()
                    .and_then(|b| b.get("model"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "mock/model".to_string()),
        created: reply.created.unwrap_or(DEFAULT_CREATED),
        provider: reply.provider.clone().unwrap_or_else(|| "Mock".to_string()),
    };
    info!(
        "bb7-mock-llm: #{index} {} {} -> {} ({})",
        parts.method,
        parts.uri.path(),
        reply.status,
        match (&reply.stream, reply_number) {
            (Some(steps), Some(n)) => format!("scripted reply {n}, {} steps", steps.len()),
            (Some(steps), None) => format!("stream of {} steps", steps.len()),
            (None, Some(n)) => format!("scripted reply {n}"),
            (None, None) => "fixed reply".to_string(),
        }
    );
    respond(
        reply,
        &envelope,
        StreamContext {
            shared,
            index,
            abort,
            stall_timeout,
        },
    )
}

struct StreamContext {
    shared: Arc<Shared>,
    index: usize,
    abort: Arc<AtomicBool>,
    stall_timeout: Duration,
}

fn respond(reply: Reply, envelope: &Envelope, ctx: StreamContext) -> Response<MockBody> {
    let status = StatusCode::from_u16(reply.status).unwrap_or_else(|_| {
        warn!(
            "bb7-mock-llm: status {} is not valid; sending 500",
            reply.status
        );
        StatusCode::INTERNAL_SERVER_ERROR
    });
    let (content_type, body) = if let Some(steps) = &reply.stream {
        let mut actions = render(steps, envelope);
        if reply.line_ends == LineEnds::Cr {
            for action in &mut actions {
                if let Action::Write(bytes) = action {
                    for b in bytes.iter_mut().filter(|b| **b == b'\n') {
                        *b = b'\r';
                    }
                }
            }
        }
        let body = MockBody::Stream(Box::new(SseStream {
            actions: actions.into(),
            sleep: None,
            stalling: false,
            flush_first: false,
            truncating: false,
            finished: false,
            abort: ctx.abort,
            stall_timeout: ctx.stall_timeout,
            shared: ctx.shared,
            index: ctx.index,
        }));
        (Some("text/event-stream"), body)
    } else {
        ctx.shared.set_outcome(ctx.index, Outcome::Completed);
        if let Some(json) = &reply.body {
            (Some("application/json"), MockBody::full(json.to_string()))
        } else if let Some(text) = reply.text {
            (Some("text/plain; charset=utf-8"), MockBody::full(text))
        } else {
            (None, MockBody::full(String::new()))
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Some(content_type) = content_type {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if reply.stream.is_some() {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    for (name, value) in &reply.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(value)) => {
                headers.insert(name, value);
            }
            _ => warn!("bb7-mock-llm: skipping invalid header {name:?}: {value:?}"),
        }
    }
    response
}

/// The response body: a whole buffer, or a scripted stream written one HTTP chunk per write.
enum MockBody {
    Full(Option<Bytes>),
    Stream(Box<SseStream>),
}

impl MockBody {
    fn full(text: String) -> MockBody {
        MockBody::Full(Some(Bytes::from(text)))
    }
}

struct SseStream {
    actions: VecDeque<Action>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// The running sleep is a stall: when it ends, truncate.
    stalling: bool,
    /// Return `Pending` once before the next frame so that hyper flushes each write on its own.
    flush_first: bool,
    /// A truncate is under way: the connection's IO fails on hyper's next flush.
    truncating: bool,
    /// The stream ended on purpose (completed or truncated).
    finished: bool,
    abort: Arc<AtomicBool>,
    stall_timeout: Duration,
    shared: Arc<Shared>,
    index: usize,
}

impl SseStream {
    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            if self.truncating {
                return Poll::Pending;
            }
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
                if std::mem::take(&mut self.stalling) {
                    debug!("bb7-mock-llm: #{} stall timed out; closing", self.index);
                    self.actions.clear();
                    self.actions.push_back(Action::Truncate);
                }
            }
            if std::mem::take(&mut self.flush_first) {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            match self.actions.pop_front() {
                None => {
                    self.finished = true;
                    self.shared.set_outcome(self.index, Outcome::Completed);
                    return Poll::Ready(None);
                }
                Some(Action::Write(bytes)) => {
                    // An empty chunk would read as the end of the body: skip it.
                    if !bytes.is_empty() {
                        self.flush_first = true;
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(bytes)))));
                    }
                }
                Some(Action::Delay(duration)) => {
                    self.sleep = Some(Box::pin(tokio::time::sleep(duration)));
                }
                Some(Action::Stall) => {
                    self.sleep = Some(Box::pin(tokio::time::sleep(self.stall_timeout)));
                    self.stalling = true;
                }
                Some(Action::Truncate) => {
                    // hyper flushes what it holds and then calls the IO's poll_flush, which sees
                    // the flag, shuts the socket down and fails the connection: no final chunk.
                    self.truncating = true;
                    self.finished = true;
                    self.abort.store(true, Ordering::SeqCst);
                    self.shared.set_outcome(self.index, Outcome::Truncated);
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Drop for SseStream {
    fn drop(&mut self) {
        if !self.finished {
            debug!(
                "bb7-mock-llm: #{} stream dropped before its end",
                self.index
            );
            self.shared.set_outcome(self.index, Outcome::ClientGone);
        }
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            MockBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            MockBody::Stream(stream) => stream.poll_next(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, MockBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            MockBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            MockBody::Full(None) => SizeHint::with_exact(0),
            MockBody::Stream(_) => SizeHint::default(),
        }
    }
}

/// A TCP stream whose connection can be cut from the response body: once `abort` is set, the next
/// flush (which hyper makes after writing out everything it buffered) shuts the socket down and fails.
struct AbortableIo {
    inner: TcpStream,
    abort: Arc<AtomicBool>,
}

impl AsyncRead for AbortableIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for AbortableIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.abort.load(Ordering::SeqCst) {
            let _ = Pin::new(&mut self.inner).poll_shutdown(cx);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "scripted truncate",
            )));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
