//! The HTTP side: POST `chat/completions` with `stream: true`, retry what is worth retrying before
//! the first byte of content, read the SSE stream into [`StreamEvent`]s, and fail loudly on every
//! way a stream can go wrong (error chunks after HTTP 200, truncation, stalls). The API key is sent
//! in the `Authorization` header only and never appears in an error or a log line.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;

use super::chunk;
use super::sse::SseDecoder;
use super::tool_calls::{ToolCall, ToolCallAssembler};
use super::{StreamEvent, Usage};

/// How to reach the model and how patient to be.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// e.g. `https://openrouter.ai/api/v1` (no trailing slash).
    pub base_url: String,
    /// The API key, sent only as the bearer token.
    pub api_key: String,
    /// Longest wait for the connection to be established.
    pub connect_timeout: Duration,
    /// Longest silence (no bytes at all, keep-alive comments included) while streaming.
    pub idle_timeout: Duration,
    /// Retries of 429 / transient 402 / 5xx / connection failures before the first token.
    pub max_retries: u32,
    /// First backoff step (doubled per retry, with jitter), and the most any one wait may be.
    pub backoff_base: Duration,
    /// The longest any one wait before a retry may be (`Retry-After` included).
    pub backoff_cap: Duration,
}

impl ClientSettings {
    /// Settings for `base_url` (trailing slashes removed) and `api_key`, with the default
    /// timeouts and retries.
    pub fn new(base_url: &str, api_key: &str) -> Self {
        ClientSettings {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
            connect_timeout: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(120),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(20),
        }
    }
}

/// Why a model request failed. The messages are shown to the user as they are.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The API answered with an error status. A 402 reads `Insufficient credits: <OpenRouter's
    /// message>` (ECOSYSTEM-PROTOCOL.md §11).
    #[error("{}", http_text(*status, message))]
    Http {
        /// The HTTP status code.
        status: u16,
        /// The provider's error message from the body, else the status's reason phrase.
        message: String,
    },
    /// The config gives no API key (a missing or invalid file, or no `api_key`).
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The API could not be reached (or the HTTP client not built); holds the cause.
    #[error("cannot reach the model API: {0}")]
    Network(String),
    /// The API or the stream stayed silent too long; holds the whole message.
    #[error("{0}")]
    Timeout(String),
    /// The provider reported an error inside the stream (after HTTP 200).
    #[error("the provider failed mid-stream: {message}{}", if code.is_empty() { String::new() } else { format!(" (code {code})") })]
    Stream {
        /// The provider's error code as text; empty when it sent none.
        code: String,
        /// The provider's error message.
        message: String,
    },
    /// The stream ended or broke off before a `finish_reason` arrived.
    #[error("the response stream ended before the model finished (truncated response)")]
    Truncated,
    /// A stream chunk or response body is not JSON; holds the parse error.
    #[error("the model API sent an unreadable chunk: {0}")]
    BadChunk(String),
    /// The host refused to make the request (a spend cap, [`crate::spend`]); holds the whole
    /// message, which starts with `Spend cap:`.
    #[error("{0}")]
    Refused(String),
}

/// How an HTTP error reads: OpenRouter's message and the status; a 402 says that credits ran out.
fn http_text(status: u16, message: &str) -> String {
    if status == 402 {
        format!("Insufficient credits: {message} (HTTP 402)")
    } else {
        format!("{message} (HTTP {status})")
    }
}

/// What a completed stream amounted to.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamSummary {
    /// The first `finish_reason` the stream sent (`stop`, `tool_calls`, `length`, …).
    pub finish_reason: String,
    /// Token accounting from the usage frame (zero when none was sent).
    pub usage: Usage,
    /// Complete tool calls, in index order.
    pub tool_calls: Vec<ToolCall>,
    /// The provider's `reasoning_details` (merged fragments), to send back with the next step.
    pub reasoning_details: Vec<Value>,
    /// Tool calls past [`super::tool_calls::MAX_TOOL_CALLS_PER_STEP`]: not in `tool_calls`, not run.
    pub dropped_tool_calls: usize,
}

/// A client for one OpenAI-compatible API.
#[derive(Debug, Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    settings: ClientSettings,
}

impl LlmClient {
    /// A client for the configured API: its base URL, API key and stream idle timeout, or the
    /// error to report (a missing or invalid config, no API key).
    pub fn from_config(config: &crate::config::ConfigState) -> Result<Self, LlmError> {
        let key = config.api_key()?;
        let c = config.config();
        let mut settings = ClientSettings::new(&c.base_url, key);
        settings.idle_timeout = Duration::from_millis(c.stream_idle_timeout_ms);
        LlmClient::new(settings)
    }

    /// A client for `settings` (connect timeout, `bb7/<version>` user agent).
    pub fn new(settings: ClientSettings) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .user_agent(concat!("bb7/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Network(e.to_string()))?;
        Ok(LlmClient { http, settings })
    }

    /// The settings the client was built with.
    pub fn settings(&self) -> &ClientSettings {
        &self.settings
    }

    /// Streams one chat completion for `body` (the request JSON; `stream: true` is set here),
    /// calling `on_event` for every text, reasoning and tool-call fragment as it arrives. Dropping the
    /// future aborts the request (cancellation).
    pub async fn stream(
        &self,
        body: &Value,
        mut on_event: impl FnMut(&StreamEvent),
    ) -> Result<StreamSummary, LlmError> {
        let mut body = body.clone();
        body["stream"] = Value::Bool(true);
        let response = self.post_with_retries("chat/completions", &body).await?;
        let mut bytes = response.bytes_stream();
        let mut sse = SseDecoder::default();
        let mut tools = ToolCallAssembler::default();
        let mut finish: Option<String> = None;
        let mut usage = Usage::default();
        let mut reasoning_details: Vec<Value> = Vec::new();
        let mut idle = IdleTimer::new(self.settings.idle_timeout);
        'read: loop {
            // Every complete event of what has arrived, then wait for more.
            loop {
                let data = match sse.next_event() {
                    Ok(Some(data)) => data.trim(),
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!("stream error: {e}");
                        return Err(LlmError::Truncated);
                    }
                };
                if data.is_empty() {
                    continue;
                }
                if data == "[DONE]" {
                    break 'read;
                }
                // Nearly every chunk is plain text: read it without building a JSON tree.
                let parsed = match chunk::parse_plain(data) {
                    Some(events) => events,
                    None => parse_value(data, &mut reasoning_details)?,
                };
                for ev in parsed {
                    match &ev {
                        StreamEvent::ToolCall {
                            index,
                            id,
                            name,
                            arguments,
                        } => {
                            tools.push(*index, id.clone(), name.clone(), arguments);
                        }
                        // The usage frame repeats finish_reason: accounting, not a second ending.
                        StreamEvent::Finish(reason) => {
                            if finish.is_none() {
                                finish = Some(reason.clone());
                            }
                            continue;
                        }
                        StreamEvent::Usage(u) => {
                            usage = u.clone();
                            continue;
                        }
                        _ => {}
                    }
                    on_event(&ev);
                }
            }
            if sse.ended() {
                // The body ended and its last events are taken: what is left must be UTF-8.
                if sse.finish().is_ok() {
                    break;
                }
                return Err(LlmError::Truncated);
            }
            let next = tokio::select! {
                biased;
                next = bytes.next() => next,
                () = idle.expired() => {
                    return Err(LlmError::Timeout(format!(
                        "the model stream stalled (nothing received for {} s)",
                        self.settings.idle_timeout.as_secs_f64()
                    )));
                }
            };
            match next {
                Some(Ok(b)) => {
                    idle.touch();
                    sse.push(&b);
                    if sse.pending() > super::sse::MAX_PENDING {
                        return Err(LlmError::BadChunk(format!(
                            "an event of more than {} MiB",
                            super::sse::MAX_PENDING >> 20
                        )));
                    }
                }
                // The end of the body: a CR last in it ends its line now, which may complete
                // one more event (taken by the loop above).
                None => sse.end(),
                // A connection cut mid-body: the stream is incomplete.
                Some(Err(e)) => {
                    tracing::debug!("stream error: {e}");
                    return Err(LlmError::Truncated);
                }
            }
        }
        let Some(finish_reason) = finish else {
            return Err(LlmError::Truncated);
        };
        let dropped_tool_calls = tools.dropped();
        Ok(StreamSummary {
            finish_reason,
            usage,
            tool_calls: tools.finish(),
            reasoning_details,
            dropped_tool_calls,
        })
    }

    /// GETs `path` under the base URL (models, credits, key) and parses the JSON.
    pub async fn get_json(&self, path: &str) -> Result<Value, LlmError> {
        let url = format!("{}/{path}", self.settings.base_url);
        let r = self
            .http
            .get(url)
            .bearer_auth(&self.settings.api_key)
            .send()
            .await
            .map_err(network)?;
        let status = r.status();
        let text = r.text().await.map_err(network)?;
        if !status.is_success() {
            return Err(LlmError::Http {
                status: status.as_u16(),
                message: api_message(&text, status),
            });
        }
        serde_json::from_str(&text).map_err(|e| LlmError::BadChunk(e.to_string()))
    }

    async fn post_with_retries(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<reqwest::Response, LlmError> {
        let url = format!("{}/{path}", self.settings.base_url);
        let mut attempt = 0u32;
        loop {
            let request = self
                .http
                .post(&url)
                .bearer_auth(&self.settings.api_key)
                .json(body)
                .send();
            // A server that takes the request and never answers would otherwise hang the reply:
            // the response headers get the same patience as silence mid-stream. Not retried (the
            // request may be running upstream).
            let sent = match tokio::time::timeout(self.settings.idle_timeout, request).await {
                Ok(sent) => sent,
                Err(_) => {
                    return Err(LlmError::Timeout(format!(
                        "the model API did not answer (no response for {} s)",
                        self.settings.idle_timeout.as_secs_f64()
                    )));
                }
            };
            let (retryable, wait_hint, err) = match sent {
                Ok(r) if r.status().is_success() => return Ok(r),
                Ok(r) => {
                    let status = r.status();
                    let retry_after = r
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    let text = r.text().await.unwrap_or_default();
                    let retryable = status == StatusCode::TOO_MANY_REQUESTS
                        || status.is_server_error()
                        || (status == StatusCode::PAYMENT_REQUIRED && text.contains("in_flight"));
                    (
                        retryable,
                        retry_after,
                        LlmError::Http {
                            status: status.as_u16(),
                            message: api_message(&text, status),
                        },
                    )
                }
                Err(e) => (e.is_connect() || e.is_timeout(), None, network(e)),
            };
            if !retryable || attempt >= self.settings.max_retries {
                return Err(err);
            }
            let wait = wait_hint
                .unwrap_or_else(|| self.backoff(attempt))
                .min(self.settings.backoff_cap);
            tracing::debug!("retrying after {err} in {wait:?}");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    /// Exponential backoff with full jitter: a random wait in [step/2, step].
    fn backoff(&self, attempt: u32) -> Duration {
        let step = self
            .settings
            .backoff_base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.settings.backoff_cap);
        let ms = step.as_millis() as u64;
        Duration::from_millis(rand::random_range(ms / 2..=ms.max(1)))
    }
}

/// The stream's idle limit with one timer for the whole stream: an event only notes the time
/// ([`IdleTimer::touch`]), and the timer, when it fires, is moved to the limit past the last event
/// unless that has passed. (A `timeout` per event made and dropped a timer entry each time the
/// body had to wait for the network, nearly every chunk.)
struct IdleTimer {
    limit: Duration,
    last: tokio::time::Instant,
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl IdleTimer {
    fn new(limit: Duration) -> IdleTimer {
        let now = tokio::time::Instant::now();
        IdleTimer {
            limit,
            last: now,
            sleep: Box::pin(tokio::time::sleep_until(now + limit)),
        }
    }

    /// Something arrived: the silence starts again now.
    fn touch(&mut self) {
        self.last = tokio::time::Instant::now();
    }

    /// Completes once nothing has arrived for the limit.
    async fn expired(&mut self) {
        loop {
            (&mut self.sleep).await;
            let due = self.last + self.limit;
            if tokio::time::Instant::now() >= due {
                return;
            }
            self.sleep.as_mut().reset(due);
        }
    }
}

/// A chunk [`chunk::parse_plain`] leaves alone: parsed as a JSON tree, its `reasoning_details`
/// merged into `details`.
fn parse_value(data: &str, details: &mut Vec<Value>) -> Result<Vec<StreamEvent>, LlmError> {
    let value: Value = serde_json::from_str(data).map_err(|e| LlmError::BadChunk(e.to_string()))?;
    if let Some(ds) = value
        .pointer("/choices/0/delta/reasoning_details")
        .and_then(Value::as_array)
    {
        for d in ds {
            super::request::merge_reasoning_details(details, d);
        }
    }
    chunk::parse(&value).map_err(|e| LlmError::Stream {
        code: e.code,
        message: e.message,
    })
}

fn network(e: reqwest::Error) -> LlmError {
    // reqwest's Display includes the URL but never headers, so the key cannot leak here.
    if e.is_timeout() {
        LlmError::Timeout(format!("the model API did not answer in time: {e}"))
    } else {
        LlmError::Network(e.without_url().to_string())
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn parse_retry_after(v: &str) -> Option<Duration> {
    if let Ok(secs) = v.trim().parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(v.trim()).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

/// The provider's error message from an error body (`{"error":{"message":…}}`), else the status.
fn api_message(body: &str, status: StatusCode) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let msg = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|e| {
            e.get("message")
                .and_then(Value::as_str)
                .or_else(|| e.as_str())
        })
        .map(str::to_string);
    match msg.filter(|m| !m.is_empty()) {
        Some(m) => m,
        None => status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }

    #[test]
    fn error_messages_come_from_the_body() {
        assert_eq!(
            api_message(
                r#"{"error":{"code":402,"message":"Insufficient credits"}}"#,
                StatusCode::PAYMENT_REQUIRED
            ),
            "Insufficient credits"
        );
        assert_eq!(
            api_message("<html>", StatusCode::BAD_GATEWAY),
            "Bad Gateway"
        );
    }
}
