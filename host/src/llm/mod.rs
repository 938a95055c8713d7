//! Talking to the model: one normalised event stream ([`StreamEvent`]) from any OpenAI-compatible
//! `chat/completions` endpoint (OpenRouter by default), with tool calls assembled by index.
//!
//! - [`chunk`]: one SSE `data:` payload → events (pure; no I/O).
//! - [`tool_calls`]: tool-call fragments → complete calls in index order.
//! - [`client`]: the HTTP side: request, retries before the first token, timeouts.
//! - [`sse`]: the event stream's framing (each event's `data`).
//! - [`provider`]: the trait the reply loop talks to; [`LlmClient`] implements it.
//! - [`prompt`]: the structured user message (request assembly); [`request`]: the request body.
//! - [`meta`]: titles, the model list, the balance.
//! - [`routing`]: the provider a reply talks to when a local provider is configured (`remote`,
//!   `local`, `hybrid_auto` with its fallback), behind the same trait; [`local`] the local
//!   adapter's quirks (fenced-JSON tool calls, schema checks, estimated usage).

use std::collections::BTreeMap;

pub mod chunk;
pub mod client;
pub mod local;
pub mod meta;
pub mod prompt;
pub mod provider;
pub mod request;
pub mod routing;
pub mod sse;
pub mod tool_calls;

pub use client::{ClientSettings, LlmClient, LlmError, StreamSummary};
pub use provider::Provider;

/// One thing the model stream said.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// Reply text.
    Text(String),
    /// Reasoning ("thinking") text.
    Reasoning(String),
    /// A piece of tool call `index`: any of its id, name and a fragment of its JSON arguments.
    ToolCall {
        /// The call's position among the reply's calls (shared by its fragments).
        index: u64,
        /// The call's id, when this fragment carries it.
        id: Option<String>,
        /// The tool's name, when this fragment carries it.
        name: Option<String>,
        /// The next piece of the JSON arguments (may be empty).
        arguments: String,
    },
    /// Token accounting (the final usage frame).
    Usage(Usage),
    /// The model finished (`stop`, `tool_calls`, `length`, …).
    Finish(String),
    /// Which provider serves the reply, or a fallback from one to another ([`routing`]).
    Provider(routing::ProviderEvent),
}

/// Token accounting for one request.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Usage {
    /// Tokens of input (`prompt_tokens`).
    pub prompt_tokens: u64,
    /// Tokens the model generated (`completion_tokens`).
    pub completion_tokens: u64,
    /// Prompt tokens read from the provider's cache (`prompt_tokens_details.cached_tokens`).
    pub cached_tokens: u64,
    /// All tokens: the provider's `total_tokens`, else prompt plus completion.
    pub total_tokens: u64,
    /// The cost the provider reports (`usage.cost`, in credits); 0 when not reported.
    pub cost: f64,
    /// The same per provider (`remote`, `local`) when the reply was routed ([`routing`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_provider: BTreeMap<String, ProviderUsage>,
}

/// One provider's share of a reply's usage (`done.usage.by_provider.<name>`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ProviderUsage {
    /// Tokens of input.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// All tokens.
    pub total_tokens: u64,
    /// The cost (always 0 for the local provider).
    pub cost: f64,
    /// Requests made to it.
    pub requests: u64,
    /// Whether some of its token counts are the host's estimate (the server sent no usage).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl ProviderUsage {
    /// One request's usage as this provider's share.
    pub fn of(u: &Usage, estimated: bool) -> ProviderUsage {
        ProviderUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.total_tokens,
            cost: u.cost,
            requests: 1,
            estimated,
        }
    }

    fn add(&self, o: &ProviderUsage) -> ProviderUsage {
        ProviderUsage {
            prompt_tokens: self.prompt_tokens + o.prompt_tokens,
            completion_tokens: self.completion_tokens + o.completion_tokens,
            total_tokens: self.total_tokens + o.total_tokens,
            cost: self.cost + o.cost,
            requests: self.requests + o.requests,
            estimated: self.estimated || o.estimated,
        }
    }
}

impl Usage {
    /// The sum of two requests' usage (a reply with a hidden retry reports both).
    pub fn add(&self, other: &Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            cached_tokens: self.cached_tokens + other.cached_tokens,
            total_tokens: self.total_tokens + other.total_tokens,
            cost: self.cost + other.cost,
            by_provider: {
                let mut m = self.by_provider.clone();
                for (k, v) in &other.by_provider {
                    let sum = m.get(k).map_or_else(|| v.clone(), |mine| mine.add(v));
                    m.insert(k.clone(), sum);
                }
                m
            },
        }
    }
}
