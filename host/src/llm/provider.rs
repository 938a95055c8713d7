//! The provider seam: one trait every model backend implements, so the reply loop never depends on
//! a particular API. [`LlmClient`] (any OpenAI-compatible `base_url`, OpenRouter by default) is the
//! implementation the host ships.

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::StreamEvent;
use super::client::{LlmClient, LlmError, StreamSummary};

/// A model backend: streams chat completions as normalised [`StreamEvent`]s and answers the small
/// JSON endpoints (models, credits, key).
pub trait Provider: Send + Sync {
    /// Streams one completion of `body`, calling `on_event` for each text, reasoning and tool-call
    /// fragment. Dropping the future aborts the request.
    fn stream<'a>(
        &'a self,
        body: &'a Value,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<StreamSummary, LlmError>>;

    /// GETs a JSON endpoint relative to the base URL (`models`, `credits`, `key`).
    fn get_json<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Value, LlmError>>;
}

impl Provider for LlmClient {
    fn stream<'a>(
        &'a self,
        body: &'a Value,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<StreamSummary, LlmError>> {
        Box::pin(LlmClient::stream(self, body, on_event))
    }

    fn get_json<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Value, LlmError>> {
        Box::pin(LlmClient::get_json(self, path))
    }
}
