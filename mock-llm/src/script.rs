//! The script: what the mock answers, in order, and the builders that make scripts short.
//!
//! A [`Script`] is a queue of [`Reply`]s consumed one per chat-completion request, plus fixed replies
//! for `/models`, `/credits` and `/key`. A reply is either a JSON body, a plain-text body, or a
//! stream of SSE [`Step`]s. The same types are the JSON script format of the `bb7-mock-llm` binary
//! (see the crate documentation for an example).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::placeholder::split_fragments;

/// The text of the keep-alive comment OpenRouter sends while a model is starting: `: OPENROUTER PROCESSING`.
pub const OPENROUTER_PROCESSING: &str = "OPENROUTER PROCESSING";

/// How long a [`Step::Stall`] keeps the connection open when the client does not give up first.
pub const DEFAULT_STALL_TIMEOUT_MS: u64 = 300_000;

/// Everything the mock will answer: the chat-completion queue and the fixed replies of the other endpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Consumed in order, one per `POST …/chat/completions` whose body is valid JSON.
    #[serde(default)]
    pub replies: Vec<Reply>,
    /// Served (and kept) whenever `replies` is exhausted. Without it an exhausted queue answers 500.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Reply>,
    /// Replies by requested model, served (and kept) outside the queue: e.g. the title model's
    /// requests, which would otherwise take the next scripted reply.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_model: BTreeMap<String, Reply>,
    /// The fixed reply of `GET /api/v1/models`.
    #[serde(default = "Reply::default_models")]
    pub models: Reply,
    /// The fixed reply of `GET /api/v1/credits`.
    #[serde(default = "Reply::default_credits")]
    pub credits: Reply,
    /// The fixed reply of `GET /api/v1/key` (also served at `/api/v1/auth/key`).
    #[serde(default = "Reply::default_key")]
    pub key: Reply,
    /// How long a `stall` step waits before closing the connection abruptly.
    #[serde(default = "default_stall_timeout_ms")]
    pub stall_timeout_ms: u64,
    /// A weaker model (the "local" one of the agent evaluation): schema mistakes and a small
    /// context window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weak: Option<Weak>,
}

/// How a weaker model misbehaves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weak {
    /// The first this-many queued replies that make tool calls are first served with every
    /// call's arguments cut in half (not JSON) and stay queued: the request after gets the same
    /// reply whole (a model that gets it right once told).
    #[serde(default)]
    pub schema_mistakes: usize,
    /// The model's context window, in tokens: a chat request longer than 4 bytes per token is
    /// answered HTTP 400 `context length exceeded` (nothing is taken from the queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
}

impl Weak {
    /// `reply` as the weak model first gets it: tool-call arguments cut in half; `None` when it
    /// makes no tool call.
    pub fn mistaken(reply: &Reply) -> Option<Reply> {
        let steps = reply.stream.as_ref()?;
        let mut changed = false;
        let steps = steps
            .iter()
            .map(|s| match s {
                Step::ToolCall(c) => {
                    changed = true;
                    let mut c = c.clone();
                    let half = (0..=c.arguments.len() / 2)
                        .rev()
                        .find(|i| c.arguments.is_char_boundary(*i))
                        .unwrap_or(0);
                    c.arguments.truncate(half);
                    c.fragments = c.fragments.clamp(1, c.arguments.len().max(1));
                    Step::ToolCall(c)
                }
                other => other.clone(),
            })
            .collect();
        changed.then(|| Reply {
            stream: Some(steps),
            ..reply.clone()
        })
    }
}

fn default_stall_timeout_ms() -> u64 {
    DEFAULT_STALL_TIMEOUT_MS
}

impl Default for Script {
    fn default() -> Self {
        Script::new(Vec::new())
    }
}

/// A script that cannot be used, with what is wrong in words a person can act on.
#[derive(Debug)]
pub struct ScriptError(pub String);

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScriptError {}

impl Script {
    /// A script with these chat replies and the default `/models`, `/credits` and `/key` replies.
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Script {
        Script {
            replies: replies.into_iter().collect(),
            fallback: None,
            by_model: BTreeMap::new(),
            models: Reply::default_models(),
            credits: Reply::default_credits(),
            key: Reply::default_key(),
            stall_timeout_ms: DEFAULT_STALL_TIMEOUT_MS,
            weak: None,
        }
    }

    /// Makes the model a weaker one ([`Weak`]).
    pub fn with_weak(mut self, weak: Weak) -> Script {
        self.weak = Some(weak);
        self
    }

    /// Adds a reply served whenever the queue is empty.
    pub fn with_fallback(mut self, reply: Reply) -> Script {
        self.fallback = Some(reply);
        self
    }

    /// Serves `reply` to every chat request for `model`, outside the queue.
    pub fn with_model_reply(mut self, model: &str, reply: Reply) -> Script {
        self.by_model.insert(model.to_string(), reply);
        self
    }

    /// Sets how long a `stall` step waits before it closes the connection.
    pub fn with_stall_timeout_ms(mut self, ms: u64) -> Script {
        self.stall_timeout_ms = ms;
        self
    }

    /// Parses and checks a JSON script (the binary's `--script` file).
    pub fn from_json(text: &str) -> Result<Script, ScriptError> {
        let script: Script = serde_json::from_str(text)
            .map_err(|e| ScriptError(format!("the script is not valid: {e}")))?;
        script.validate()?;
        Ok(script)
    }

    /// Reads a JSON script from a file.
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Script, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScriptError(format!("cannot read script {}: {e}", path.display())))?;
        Script::from_json(&text).map_err(|e| ScriptError(format!("{}: {e}", path.display())))
    }

    /// Checks every reply (see [`Reply::validate`]).
    pub fn validate(&self) -> Result<(), ScriptError> {
        for (i, reply) in self.replies.iter().enumerate() {
            reply
                .validate()
                .map_err(|e| ScriptError(format!("replies[{i}]: {e}")))?;
        }
        for (model, reply) in &self.by_model {
            reply
                .validate()
                .map_err(|e| ScriptError(format!("by_model[{model}]: {e}")))?;
        }
        let fixed = [
            ("fallback", self.fallback.as_ref()),
            ("models", Some(&self.models)),
            ("credits", Some(&self.credits)),
            ("key", Some(&self.key)),
        ];
        for (name, reply) in fixed {
            if let Some(reply) = reply {
                reply
                    .validate()
                    .map_err(|e| ScriptError(format!("{name}: {e}")))?;
            }
        }
        Ok(())
    }
}

/// One HTTP response: status, extra headers, and at most one of a JSON body, a text body or an SSE stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    /// The HTTP status code (default 200).
    #[serde(default = "default_status")]
    pub status: u16,
    /// Extra response headers, e.g. `{"Retry-After": "2"}`. They replace defaults of the same name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// A JSON body, sent with `Content-Type: application/json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// A plain body sent as is (e.g. a proxy's HTML error page), `Content-Type: text/plain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// An SSE stream, sent chunked with `Content-Type: text/event-stream`, one HTTP chunk per write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<Vec<Step>>,
    /// The chunks' `id` (default `gen-mock-N`, N the request's index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The chunks' `model` (default: the request's `model`, else `mock/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The chunks' `created` (default 1700000000, so test output is reproducible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<u64>,
    /// The chunks' `provider` (default `Mock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// How a stream's lines end (default `lf`).
    #[serde(default, skip_serializing_if = "LineEnds::is_lf")]
    pub line_ends: LineEnds,
}

/// How the lines of a streamed reply end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineEnds {
    /// `\n`, as the steps write them.
    #[default]
    Lf,
    /// A bare `\r` (a line end the SSE rules allow): every `\n` any step writes, a raw one's
    /// included, is sent as `\r`, so an event ends with `\r\r`.
    Cr,
}

impl LineEnds {
    fn is_lf(&self) -> bool {
        *self == LineEnds::Lf
    }
}

fn default_status() -> u16 {
    200
}

impl Default for Reply {
    fn default() -> Self {
        Reply {
            status: 200,
            headers: BTreeMap::new(),
            body: None,
            text: None,
            stream: None,
            id: None,
            model: None,
            created: None,
            provider: None,
            line_ends: LineEnds::Lf,
        }
    }
}

/// One thing a streamed reply does. Low-level steps write exact bytes; high-level steps write one
/// OpenRouter-shaped `chat.completion.chunk` (or several, for [`Step::ToolCall`]) as `data: …\n\n`.
///
/// In JSON each step is `{"kind": value}` (or the bare string for `done`, `truncate`, `stall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// `data: <json>\n\n`, the JSON exactly as given.
    Data(Value),
    /// `data:<json>\n\n` (no space after the colon, which the SSE spec allows).
    DataNospace(Value),
    /// `: <text>\n\n`, an SSE comment such as [`OPENROUTER_PROCESSING`].
    Comment(String),
    /// These exact bytes (UTF-8), as one write.
    Raw(String),
    /// These exact bytes, as one write; for bytes that are not UTF-8.
    RawBytes(Vec<u8>),
    /// Wait this many milliseconds before the next step.
    DelayMs(u64),
    /// `data: [DONE]\n\n`.
    Done,
    /// Close the connection at once: no terminating chunk, no `[DONE]`.
    Truncate,
    /// Send nothing more and keep the connection open until the client leaves or the script's
    /// `stall_timeout_ms` passes; then close it like [`Step::Truncate`].
    Stall,
    /// A chunk whose delta is `{"role":"assistant","content":<text>}`.
    Content(String),
    /// A chunk whose delta carries `reasoning` and the matching `reasoning_details` entry.
    Reasoning(String),
    /// A whole tool call, written as `fragments` chunks.
    ToolCall(ToolCall),
    /// One chunk carrying exactly this tool-call delta.
    ToolCallDelta(ToolCallDelta),
    /// A chunk with an empty delta and this `finish_reason` (and `native_finish_reason`).
    Finish(String),
    /// The usage chunk (`choices` empty unless `finish_reason` is repeated in it).
    Usage(Usage),
    /// An error chunk after HTTP 200: `{"error":{…},"choices":[{…,"finish_reason":"error"}]}`.
    Error(ErrorChunk),
    /// The bytes of `step`, cut at these byte offsets into separate writes (mid-line, mid-UTF-8…).
    Split(Split),
}

/// A tool call that the mock writes as `fragments` chunks, its `arguments` cut into that many pieces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// `tool_calls[].index`.
    pub index: u32,
    /// The call id, sent on the first fragment (or on every one with `repeat_id_name`).
    pub id: String,
    /// The function name, sent like `id`.
    pub name: String,
    /// The arguments string, as the model would write it (need not be valid JSON).
    pub arguments: String,
    /// How many chunks to cut `arguments` into (at most one per character; placeholders stay whole).
    #[serde(default = "one")]
    pub fragments: usize,
    /// Send `id`, `type` and `name` on every fragment, as some providers do.
    #[serde(default, skip_serializing_if = "is_false")]
    pub repeat_id_name: bool,
}

fn one() -> usize {
    1
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One tool-call delta exactly as given; absent fields are left out of the chunk.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallDelta {
    /// `tool_calls[].index`.
    pub index: u32,
    /// `tool_calls[].id` (with `"type":"function"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `tool_calls[].function.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `tool_calls[].function.arguments`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// The numbers of the final usage chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// `usage.completion_tokens`.
    pub completion_tokens: u64,
    /// `usage.total_tokens` (default: the sum of the two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`.
    #[serde(default)]
    pub cached_tokens: u64,
    /// `usage.completion_tokens_details.reasoning_tokens`.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// `usage.cost`, in credits (US dollars).
    #[serde(default)]
    pub cost: f64,
    /// Repeat this `finish_reason` in the usage chunk's choice, as OpenRouter does; `None` sends `"choices":[]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

impl Usage {
    /// Usage with these token counts, nothing cached, zero cost, no repeated finish reason.
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: None,
            cached_tokens: 0,
            reasoning_tokens: 0,
            cost: 0.0,
            finish_reason: None,
        }
    }

    /// Sets `prompt_tokens_details.cached_tokens`.
    pub fn cached(mut self, tokens: u64) -> Usage {
        self.cached_tokens = tokens;
        self
    }

    /// Sets `completion_tokens_details.reasoning_tokens`.
    pub fn reasoning(mut self, tokens: u64) -> Usage {
        self.reasoning_tokens = tokens;
        self
    }

    /// Sets `cost`.
    pub fn cost(mut self, cost: f64) -> Usage {
        self.cost = cost;
        self
    }

    /// Repeats this `finish_reason` in the usage chunk.
    pub fn finish(mut self, reason: impl Into<String>) -> Usage {
        self.finish_reason = Some(reason.into());
        self
    }
}

/// The `error` object of a mid-stream error chunk. `code` is a number (`502`) or a string (`"server_error"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorChunk {
    /// `error.code`: a JSON number or string.
    pub code: Value,
    /// `error.message`.
    pub message: String,
}

/// The bytes of one step cut into several writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// Byte offsets into the step's bytes (after placeholder substitution); out-of-range ones are ignored.
    pub at: Vec<usize>,
    /// The step whose bytes are cut.
    pub step: Box<Step>,
}

impl ToolCall {
    /// A tool call sent whole in one chunk.
    pub fn new(
        index: u32,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ToolCall {
        ToolCall {
            index,
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            fragments: 1,
            repeat_id_name: false,
        }
    }

    /// An `edit_file` call with the search_replace_multi arguments
    /// `{"edits":[{"path","file_id","old_string","new_string"}]}`, one entry per `(path, file_id, old, new)`.
    pub fn edit_file(
        index: u32,
        id: impl Into<String>,
        edits: &[(&str, &str, &str, &str)],
    ) -> ToolCall {
        ToolCall::new(index, id, "edit_file", edit_file_arguments(edits))
    }

    /// Cuts the arguments into `n` chunks.
    pub fn fragments(mut self, n: usize) -> ToolCall {
        self.fragments = n;
        self
    }

    /// Sends `id` and `name` on every fragment.
    pub fn repeat_id_name(mut self) -> ToolCall {
        self.repeat_id_name = true;
        self
    }

    /// The deltas this call is written as, in order.
    pub fn deltas(&self) -> Vec<ToolCallDelta> {
        split_fragments(&self.arguments, self.fragments)
            .into_iter()
            .enumerate()
            .map(|(i, piece)| {
                let head = i == 0 || self.repeat_id_name;
                ToolCallDelta {
                    index: self.index,
                    id: head.then(|| self.id.clone()),
                    name: head.then(|| self.name.clone()),
                    arguments: Some(piece),
                }
            })
            .collect()
    }
}

/// The search_replace_multi arguments string for `edit_file`, one edit per `(path, file_id, old, new)`.
pub fn edit_file_arguments(edits: &[(&str, &str, &str, &str)]) -> String {
    let edits: Vec<Value> = edits
        .iter()
        .map(|(path, file_id, old, new)| {
            json!({"path": path, "file_id": file_id, "old_string": old, "new_string": new})
        })
        .collect();
    json!({ "edits": edits }).to_string()
}

/// OpenRouter's 402 message for a request the balance cannot cover.
pub fn insufficient_credits_message(requested: u64, affordable: u64) -> String {
    format!(
        "This request requires more credits, or fewer max_tokens. You requested up to {requested} tokens, \
         but can only afford {affordable}. To increase, visit https://openrouter.ai/settings/credits and \
         upgrade to a paid account"
    )
}

impl Reply {
    // ----- plain constructors -----

    /// An empty `200` SSE stream, to extend with the step methods below.
    pub fn sse() -> Reply {
        Reply {
            stream: Some(Vec::new()),
            ..Reply::default()
        }
    }

    /// A JSON body with this status.
    pub fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: Some(body),
            ..Reply::default()
        }
    }

    /// A plain-text body with this status (e.g. an HTML error page from a proxy).
    pub fn plain(status: u16, text: impl Into<String>) -> Reply {
        Reply {
            status,
            text: Some(text.into()),
            ..Reply::default()
        }
    }

    /// OpenRouter's error body `{"error":{"code":status,"message":…}}` with this status.
    pub fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::json(
            status,
            json!({"error": {"code": status, "message": message.into()}}),
        )
    }

    /// `429` with `Retry-After: <seconds>` and OpenRouter's error body.
    pub fn rate_limited(retry_after_secs: u64) -> Reply {
        Reply::error(
            429,
            "Rate limit exceeded: limit_rpm/mock/model. Please retry shortly.",
        )
        .header("Retry-After", retry_after_secs.to_string())
    }

    /// `402` with OpenRouter's "requires more credits" message.
    pub fn insufficient_credits(requested: u64, affordable: u64) -> Reply {
        Reply::json(
            402,
            json!({"error": {
                "code": 402,
                "message": insufficient_credits_message(requested, affordable),
                "metadata": {"provider_name": null}
            }}),
        )
    }

    /// `401` as OpenRouter answers a request without a valid key.
    pub fn unauthorized() -> Reply {
        Reply::error(401, "No auth credentials found")
    }

    /// A non-streaming `chat.completion` body whose message is `text`.
    pub fn completion(text: impl Into<String>) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "gen-mock-completion",
                "provider": "Mock",
                "model": "mock/model",
                "object": "chat.completion",
                "created": 1_700_000_000u64,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text.into(), "refusal": null},
                    "finish_reason": "stop",
                    "native_finish_reason": "stop",
                    "logprobs": null
                }],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
            }),
        )
    }

    // ----- whole replies -----

    /// Streams `parts` as content chunks, then `finish_reason: "stop"`, the usage chunk (repeating
    /// the finish reason) and `[DONE]`.
    pub fn text<I, S>(parts: I) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Reply::sse().contents(parts).finish_ok("stop")
    }

    /// Streams reasoning deltas, then content, then finishes like [`Reply::text`].
    pub fn reasoning_then_text<I, S, J, T>(reasoning: I, text: J) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
        J: IntoIterator<Item = T>,
        T: Into<String>,
    {
        let mut reply = Reply::sse();
        for part in reasoning {
            reply = reply.reasoning(part);
        }
        reply.contents(text).finish_ok("stop")
    }

    /// Streams these tool calls one after the other, then `finish_reason: "tool_calls"`, usage, `[DONE]`.
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Reply {
        let mut reply = Reply::sse();
        for call in calls {
            reply = reply.tool_call(call);
        }
        reply.finish_ok("tool_calls")
    }

    /// Streams these tool calls with their fragments interleaved by index (a0 b0 a1 b1 …), then finishes
    /// like [`Reply::tool_calls`].
    pub fn interleaved_tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Reply {
        Reply::sse().interleave(calls).finish_ok("tool_calls")
    }

    /// Streams `parts`, then an error chunk (HTTP status stays 200), then ends the body cleanly
    /// without a finish reason of its own, usage or `[DONE]`.
    pub fn error_after_text<I, S>(
        parts: I,
        code: impl Into<Value>,
        message: impl Into<String>,
    ) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Reply::sse().contents(parts).error_chunk(code, message)
    }

    /// Streams `parts` and `[DONE]` but never a `finish_reason`.
    pub fn without_finish<I, S>(parts: I) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Reply::sse().contents(parts).done()
    }

    /// Like [`Reply::text`] with `delay_ms` before every content chunk: a slow stream to cancel.
    pub fn slow_text<I, S>(parts: I, delay_ms: u64) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut reply = Reply::sse();
        for part in parts {
            reply = reply.delay_ms(delay_ms).content(part);
        }
        reply.finish_ok("stop")
    }

    // ----- reply settings -----

    /// Sets the HTTP status.
    pub fn status(mut self, status: u16) -> Reply {
        self.status = status;
        self
    }

    /// Adds (or replaces) a response header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Reply {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets the chunks' `model`.
    pub fn model(mut self, model: impl Into<String>) -> Reply {
        self.model = Some(model.into());
        self
    }

    /// Sets the chunks' `id`.
    pub fn id(mut self, id: impl Into<String>) -> Reply {
        self.id = Some(id.into());
        self
    }

    /// Sets how the stream's lines end ([`LineEnds::Cr`]: bare CRs).
    pub fn line_ends(mut self, ends: LineEnds) -> Reply {
        self.line_ends = ends;
        self
    }

    // ----- steps -----

    /// Appends a step (turning the reply into a stream if it was not one).
    pub fn step(mut self, step: Step) -> Reply {
        self.stream.get_or_insert_with(Vec::new).push(step);
        self
    }

    /// Appends `data: <json>\n\n`.
    pub fn data(self, value: Value) -> Reply {
        self.step(Step::Data(value))
    }

    /// Appends `data:<json>\n\n`.
    pub fn data_nospace(self, value: Value) -> Reply {
        self.step(Step::DataNospace(value))
    }

    /// Appends `: <text>\n\n`.
    pub fn comment(self, text: impl Into<String>) -> Reply {
        self.step(Step::Comment(text.into()))
    }

    /// Appends `: OPENROUTER PROCESSING\n\n`.
    pub fn processing(self) -> Reply {
        self.comment(OPENROUTER_PROCESSING)
    }

    /// Appends these exact bytes as one write.
    pub fn raw(self, bytes: impl Into<Vec<u8>>) -> Reply {
        let bytes = bytes.into();
        match String::from_utf8(bytes) {
            Ok(text) => self.step(Step::Raw(text)),
            Err(e) => self.step(Step::RawBytes(e.into_bytes())),
        }
    }

    /// Appends a pause.
    pub fn delay_ms(self, ms: u64) -> Reply {
        self.step(Step::DelayMs(ms))
    }

    /// Appends `data: [DONE]\n\n`.
    pub fn done(self) -> Reply {
        self.step(Step::Done)
    }

    /// Appends an abrupt close.
    pub fn truncate(self) -> Reply {
        self.step(Step::Truncate)
    }

    /// Appends a stall (see [`Step::Stall`]).
    pub fn stall(self) -> Reply {
        self.step(Step::Stall)
    }

    /// Appends one content chunk.
    pub fn content(self, text: impl Into<String>) -> Reply {
        self.step(Step::Content(text.into()))
    }

    /// Appends one content chunk per part.
    pub fn contents<I, S>(mut self, parts: I) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for part in parts {
            self = self.content(part);
        }
        self
    }

    /// Appends one reasoning chunk.
    pub fn reasoning(self, text: impl Into<String>) -> Reply {
        self.step(Step::Reasoning(text.into()))
    }

    /// Appends a tool call (its fragments one after the other).
    pub fn tool_call(self, call: ToolCall) -> Reply {
        self.step(Step::ToolCall(call))
    }

    /// Appends one exact tool-call delta.
    pub fn tool_call_delta(self, delta: ToolCallDelta) -> Reply {
        self.step(Step::ToolCallDelta(delta))
    }

    /// Appends the fragments of these calls round-robin: first fragment of each, then the second, ….
    pub fn interleave(mut self, calls: impl IntoIterator<Item = ToolCall>) -> Reply {
        let mut queues: Vec<std::collections::VecDeque<ToolCallDelta>> =
            calls.into_iter().map(|c| c.deltas().into()).collect();
        while queues.iter().any(|q| !q.is_empty()) {
            for queue in &mut queues {
                if let Some(delta) = queue.pop_front() {
                    self = self.tool_call_delta(delta);
                }
            }
        }
        self
    }

    /// Appends a chunk with this `finish_reason`.
    pub fn finish(self, reason: impl Into<String>) -> Reply {
        self.step(Step::Finish(reason.into()))
    }

    /// Appends the usage chunk.
    pub fn usage(self, usage: Usage) -> Reply {
        self.step(Step::Usage(usage))
    }

    /// Appends an error chunk; `code` is a number or a string.
    pub fn error_chunk(self, code: impl Into<Value>, message: impl Into<String>) -> Reply {
        self.step(Step::Error(ErrorChunk {
            code: code.into(),
            message: message.into(),
        }))
    }

    /// Appends `step`, its bytes cut at these byte offsets into separate writes.
    pub fn split(self, step: Step, at: impl IntoIterator<Item = usize>) -> Reply {
        self.step(Step::Split(Split {
            at: at.into_iter().collect(),
            step: Box::new(step),
        }))
    }

    /// Appends the usual ending: the finish chunk, a usage chunk repeating it, and `[DONE]`.
    pub fn finish_ok(self, reason: &str) -> Reply {
        self.finish(reason)
            .usage(Usage::new(100, 20).cached(40).cost(0.00042).finish(reason))
            .done()
    }

    // ----- defaults of the fixed endpoints -----

    /// `GET /api/v1/models`: two models in OpenRouter's shape.
    pub fn default_models() -> Reply {
        let model = |id: &str, name: &str, context: u64, reasoning: bool| {
            let mut params = vec!["max_tokens", "temperature", "tools", "tool_choice", "stop"];
            if reasoning {
                params.extend(["reasoning", "include_reasoning"]);
            }
            json!({
                "id": id,
                "canonical_slug": id,
                "name": name,
                "created": 1_700_000_000u64,
                "description": "A scripted stand-in model served by bb7-mock-llm.",
                "context_length": context,
                "architecture": {
                    "modality": "text->text",
                    "input_modalities": ["text"],
                    "output_modalities": ["text"],
                    "tokenizer": "Other",
                    "instruct_type": null
                },
                "pricing": {
                    "prompt": "0.000001",
                    "completion": "0.000002",
                    "request": "0",
                    "image": "0",
                    "web_search": "0",
                    "internal_reasoning": "0",
                    "input_cache_read": "0.0000001"
                },
                "top_provider": {
                    "context_length": context,
                    "max_completion_tokens": 16384,
                    "is_moderated": false
                },
                "per_request_limits": null,
                "supported_parameters": params
            })
        };
        Reply::json(
            200,
            json!({"data": [
                model("mock/model", "Mock: Model", 128_000, false),
                model("mock/reasoner", "Mock: Reasoner", 200_000, true),
            ]}),
        )
    }

    /// `GET /api/v1/credits`: 10 credits bought, 2.5 used.
    pub fn default_credits() -> Reply {
        Reply::json(
            200,
            json!({"data": {"total_credits": 10.0, "total_usage": 2.5}}),
        )
    }

    /// `GET /api/v1/key`: an unlimited paid key.
    pub fn default_key() -> Reply {
        Reply::json(
            200,
            json!({"data": {
                "label": "sk-or-v1-moc...k00",
                "limit": null,
                "usage": 2.5,
                "limit_remaining": null,
                "is_free_tier": false,
                "is_provisioning_key": false,
                "rate_limit": {"requests": -1, "interval": "10s"}
            }}),
        )
    }

    /// Checks that at most one of `body`, `text` and `stream` is set and that the status is a valid code.
    pub fn validate(&self) -> Result<(), ScriptError> {
        let kinds = [
            self.body.is_some(),
            self.text.is_some(),
            self.stream.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() > 1 {
            return Err(ScriptError(
                "a reply has at most one of \"body\", \"text\" and \"stream\"".into(),
            ));
        }
        if !(100..=999).contains(&self.status) {
            return Err(ScriptError(format!(
                "status {} is not an HTTP status code (100-999)",
                self.status
            )));
        }
        Ok(())
    }
}
