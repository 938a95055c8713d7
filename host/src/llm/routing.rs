//! Remote, local and hybrid routing (ECOSYSTEM-PROTOCOL.md §10), behind the [`Provider`] trait:
//! the reply loop talks to a [`Routed`] provider and never branches on where a request goes.
//!
//! - `remote` (the default): every request goes to the remote provider (OpenRouter unless
//!   config.json says otherwise), through the spend caps.
//! - `local`: every request goes to `providers.local`; the remote one is never contacted.
//! - `hybrid_auto`: requests start on the local provider and move to the remote one, for the
//!   rest of the reply, when one of these happens ([`FallbackReason`]): its tool calls are
//!   invalid JSON or fail their schema `hybrid_max_schema_failures` times; the request does not
//!   fit the local model's context (`providers.local.context_tokens`, else the server's `models`
//!   list); the server cannot be reached or sends nothing for `hybrid_local_timeout_ms`; its
//!   calls would spend the reply's tool-call budget with no edit made. The request that
//!   triggered the fallback is sent again to the remote provider as it was (the whole
//!   conversation so far, every tool result included), so the reply goes on from where it was.
//!   With `disable_fallback`, the local failure is the reply's error instead.
//!
//! Unless the routing is plain `remote` (the default, which adds no event), the stream says
//! which provider serves a reply ([`ProviderEvent::Selected`], once per provider) and every fallback ([`ProviderEvent::Fallback`]); each request's usage carries its provider's
//! share in `by_provider` (the local one costs 0; its tokens are estimated when the server sends
//! none).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::client::{ClientSettings, LlmClient, LlmError, StreamSummary};
use super::local;
use super::{Provider, ProviderUsage, StreamEvent, Usage};
use crate::config::providers::{LocalProvider, ProvidersConfig};

/// The start of the last user message of a reply whose tool-call budget is spent (the agent
/// loop's `budget_note`).
pub const BUDGET_SPENT: &str = "[bb7] The tool-call budget of this reply";

/// The tools whose calls are edits (a reply that made one has usable edits).
const EDIT_TOOLS: [&str; 2] = ["write_file", "edit_file"];

/// The error for a bad `routing` value.
pub const ROUTING_ERROR: &str =
    r#"Invalid field: routing must be "remote", "local" or "hybrid_auto""#;

/// A `routing` value that is not one of the three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", ROUTING_ERROR)]
pub struct RoutingError;

/// The protocol edge's message (handlers return their error as the client's text).
impl From<RoutingError> for String {
    fn from(e: RoutingError) -> String {
        e.to_string()
    }
}

/// Where a reply's requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Routing {
    /// The remote provider (the default).
    #[default]
    Remote,
    /// The local provider only.
    Local,
    /// Local first, the remote one on a fallback trigger.
    HybridAuto,
}

impl Routing {
    /// The name as stored in chat.json and sent to the client.
    pub fn as_str(self) -> &'static str {
        match self {
            Routing::Remote => "remote",
            Routing::Local => "local",
            Routing::HybridAuto => "hybrid_auto",
        }
    }

    /// Parses a client's value.
    pub fn parse(s: &str) -> Result<Routing, RoutingError> {
        match s {
            "remote" => Ok(Routing::Remote),
            "local" => Ok(Routing::Local),
            "hybrid_auto" => Ok(Routing::HybridAuto),
            _ => Err(RoutingError),
        }
    }

    /// The routing stored in `chat` (`routing`; absent or unknown reads as `remote`).
    pub fn of(chat: &crate::chat::model::Chat) -> Routing {
        chat.extra
            .get("routing")
            .and_then(Value::as_str)
            .and_then(|s| Routing::parse(s).ok())
            .unwrap_or_default()
    }

    /// Stores the routing in `chat` (`remote` removes the key: older files stay byte-identical).
    pub fn store(self, chat: &mut crate::chat::model::Chat) {
        match self {
            Routing::Remote => {
                chat.extra.remove("routing");
            }
            r => {
                chat.extra.insert("routing".into(), json!(r.as_str()));
            }
        }
    }
}

/// Why a hybrid reply left the local provider (`provider.fallback`'s `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    /// Tool calls were invalid JSON or failed their schema too often.
    SchemaFailures,
    /// The request does not fit the local model's context window.
    ContextOverflow,
    /// The local server could not be reached (or answered with an error).
    Unreachable,
    /// The local server sent nothing within `hybrid_local_timeout_ms`.
    Timeout,
    /// The tool-call budget would be spent without a usable edit.
    BudgetWithoutEdits,
}

impl FallbackReason {
    /// The reason as the event names it.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::SchemaFailures => "schema_failures",
            FallbackReason::ContextOverflow => "context_overflow",
            FallbackReason::Unreachable => "unreachable",
            FallbackReason::Timeout => "timeout",
            FallbackReason::BudgetWithoutEdits => "budget_without_edits",
        }
    }
}

/// What the routing reports in the stream (the agent events `provider.selected` and
/// `provider.fallback`).
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// `provider` (`remote` or `local`) serves the reply's requests from now on, with `model`.
    Selected {
        /// `remote` or `local`.
        provider: &'static str,
        /// The model it is asked for.
        model: String,
    },
    /// The reply moved from one provider to the other.
    Fallback {
        /// Left.
        from: &'static str,
        /// Taken.
        to: &'static str,
        /// Why ([`FallbackReason::as_str`]).
        reason: &'static str,
        /// What happened, in words.
        detail: String,
    },
}

/// Why a routed reply could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutingSetupError {
    /// `local` or `hybrid_auto` without `providers.local`.
    #[error(
        "routing \"{0}\" needs a local provider: set providers.local {{\"base_url\", \"model\"}} in config.json"
    )]
    NoLocal(&'static str),
    /// The local provider's HTTP client could not be built.
    #[error("the local provider cannot be used: {0}")]
    Client(String),
}

/// Where a reply's completed local requests are recorded: the user's usage ledger, which sits
/// above `llm` (in `spend`), so the caller gives it. Remote requests are recorded by the
/// spend-capped remote provider itself.
pub trait LocalUsageLog: Send + Sync {
    /// Records a completed local request to `model` that used `usage` (its cost is 0). It may
    /// block on the disk: [`Routed`] calls it off the async threads.
    fn record(&self, model: &str, usage: &Usage);
}

/// What one reply's routing is set up with.
pub struct RouteSettings {
    /// Where its requests go.
    pub routing: Routing,
    /// The `providers` settings.
    pub providers: ProvidersConfig,
    /// `send {disable_fallback}` (or the config's).
    pub disable_fallback: bool,
    /// The reply's tool-call budget (agent mode), for the budget trigger.
    pub budget: Option<usize>,
    /// The stream idle timeout of the config (milliseconds).
    pub idle_timeout_ms: u64,
    /// Where the local requests are recorded; `None`: nowhere.
    pub local_log: Option<Arc<dyn LocalUsageLog>>,
}

#[derive(Default)]
struct State {
    /// The hybrid reply fell back: every request goes to the remote provider.
    fell_back: bool,
    /// The providers already announced.
    announced: Vec<&'static str>,
    /// Invalid tool calls from the local model so far.
    schema_failures: usize,
    /// The local context window, once known (`Some(None)`: the server does not say).
    context: Option<Option<u64>>,
    /// Tool calls found in the local model's text so far (numbers their ids).
    text_calls: usize,
}

impl State {
    /// The id of the next tool call found in the local model's text: unique in the reply (its
    /// steps' calls share one history).
    fn text_call_id(&mut self) -> String {
        let id = format!("text_call_{}", self.text_calls);
        self.text_calls += 1;
        id
    }
}

/// The provider a reply talks to when routing is not plain `remote` ([`Routed::for_reply`]).
pub struct Routed {
    remote: Result<Arc<dyn Provider>, LlmError>,
    local: Option<(LlmClient, LocalProvider)>,
    routing: Routing,
    fallback: bool,
    max_schema_failures: usize,
    first_byte: Duration,
    budget: Option<usize>,
    local_log: Option<Arc<dyn LocalUsageLog>>,
    state: Mutex<State>,
}

/// What a local attempt came to.
enum Attempt {
    /// Its result stands (success, or an error that is the reply's).
    Done(Result<StreamSummary, LlmError>),
    /// Move to the remote provider: why, in words, and the local request's usage (when it
    /// completed).
    Fallback(FallbackReason, String, Usage),
}

impl Routed {
    /// The provider for one reply: `remote` (the spend-capped remote provider, or why there is
    /// none: it is only an error when a request needs it) and the local one `settings` name.
    pub fn for_reply(
        remote: Result<Arc<dyn Provider>, LlmError>,
        settings: RouteSettings,
    ) -> Result<Arc<dyn Provider>, RoutingSetupError> {
        let local = match (settings.routing, &settings.providers.local) {
            (Routing::Remote, _) => None,
            (r, None) => return Err(RoutingSetupError::NoLocal(r.as_str())),
            (r, Some(l)) => {
                let mut s = ClientSettings::new(&l.base_url, l.api_key.as_deref().unwrap_or(""));
                s.idle_timeout = Duration::from_millis(settings.idle_timeout_ms);
                if r == Routing::HybridAuto && !settings.disable_fallback {
                    // A dead local server is a fallback, not a wait through retries.
                    s.max_retries = 0;
                    s.connect_timeout =
                        Duration::from_millis(settings.providers.hybrid_local_timeout_ms);
                }
                let client =
                    LlmClient::new(s).map_err(|e| RoutingSetupError::Client(e.to_string()))?;
                Some((client, l.clone()))
            }
        };
        Ok(Arc::new(Routed {
            remote,
            local,
            routing: settings.routing,
            fallback: settings.routing == Routing::HybridAuto && !settings.disable_fallback,
            max_schema_failures: settings.providers.hybrid_max_schema_failures.max(1),
            first_byte: Duration::from_millis(settings.providers.hybrid_local_timeout_ms),
            budget: settings.budget,
            local_log: settings.local_log,
            state: Mutex::new(State::default()),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn announce(
        &self,
        provider: &'static str,
        model: &str,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) {
        // Plain remote routing is the behaviour of a client that never asked for routing: no
        // new events (AGENT-PROTOCOL.md: additive only).
        if self.routing == Routing::Remote {
            return;
        }
        let first = {
            let mut st = self.state();
            let first = !st.announced.contains(&provider);
            if first {
                st.announced.push(provider);
            }
            first
        };
        if first {
            on_event(&StreamEvent::Provider(ProviderEvent::Selected {
                provider,
                model: model.to_string(),
            }));
        }
    }

    /// Records a completed local request in the usage log (the reply waits for it, as for a
    /// remote request, so `get_usage` after `done` sees it).
    async fn log_local(&self, model: &str, usage: &Usage) {
        let Some(log) = &self.local_log else { return };
        let (log, model, usage) = (Arc::clone(log), model.to_string(), usage.clone());
        if let Err(e) = tokio::task::spawn_blocking(move || log.record(&model, &usage)).await {
            tracing::warn!("cannot record a local request's usage: {e}");
        }
    }

    async fn remote(
        &self,
        body: &Value,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Result<StreamSummary, LlmError> {
        let remote = self.remote.as_ref().map_err(Clone::clone)?;
        let model = body.get("model").and_then(Value::as_str).unwrap_or("");
        self.announce("remote", model, on_event);
        let mut s = remote.stream(body, on_event).await?;
        s.usage
            .by_provider
            .insert("remote".into(), ProviderUsage::of(&s.usage, false));
        Ok(s)
    }

    /// The local context window: the config's, else the server's model list (asked once).
    async fn context_tokens(&self, client: &LlmClient, l: &LocalProvider) -> Option<u64> {
        if l.context_tokens.is_some() {
            return l.context_tokens;
        }
        if let Some(c) = self.state().context {
            return c;
        }
        let asked = tokio::time::timeout(self.first_byte, client.get_json("models")).await;
        let c = match asked {
            Ok(Ok(list)) => local::context_of(&list, &l.model),
            _ => None,
        };
        self.state().context = Some(c);
        c
    }

    /// One local attempt. With a fallback, its events are held back until the attempt is kept:
    /// an abandoned attempt's text never reaches the reply (the remote reply replaces it).
    async fn local(
        &self,
        body: &Value,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Attempt {
        let Some((client, l)) = &self.local else {
            return Attempt::Done(Err(LlmError::Network("no local provider".into())));
        };
        self.announce("local", &l.model, on_event);
        if !self.fallback {
            return self.local_attempt(client, l, body, on_event).await;
        }
        let mut held: Vec<StreamEvent> = Vec::new();
        let attempt = self
            .local_attempt(client, l, body, &mut |ev: &StreamEvent| {
                held.push(ev.clone())
            })
            .await;
        if let Attempt::Done(_) = attempt {
            for ev in &held {
                on_event(ev);
            }
        }
        attempt
    }

    async fn local_attempt(
        &self,
        client: &LlmClient,
        l: &LocalProvider,
        body: &Value,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Attempt {
        let lbody = local::body(body, &l.model);
        let counted = lbody.clone();
        let prompt = tokio::task::spawn_blocking(move || local::prompt_tokens(&counted))
            .await
            .unwrap_or(0);
        if self.fallback
            && let Some(ctx) = self.context_tokens(client, l).await
            && prompt >= ctx
        {
            return Attempt::Fallback(
                FallbackReason::ContextOverflow,
                format!(
                    "the request has about {prompt} tokens; the local model's context is {ctx}"
                ),
                Usage::default(),
            );
        }
        if self.fallback && budget_spent_without_edits(body, &[], None) {
            return Attempt::Fallback(
                FallbackReason::BudgetWithoutEdits,
                "the tool-call budget is spent and no edit was made".into(),
                Usage::default(),
            );
        }
        let first = AtomicBool::new(false);
        let mut filter = local::TextFilter::default();
        let mut text = String::new();
        let mut pass = |ev: &StreamEvent| {
            first.store(true, Ordering::Relaxed);
            match ev {
                StreamEvent::Text(t) => {
                    text.push_str(t);
                    let shown = filter.push(t);
                    if !shown.is_empty() {
                        on_event(&StreamEvent::Text(shown));
                    }
                }
                // A local reply has no reasoning field worth keeping apart: shown as it comes.
                other => on_event(other),
            }
        };
        let result = {
            let fut = client.stream(&lbody, &mut pass);
            tokio::pin!(fut);
            let deadline = tokio::time::sleep(self.first_byte);
            tokio::pin!(deadline);
            let mut waited = !self.fallback;
            loop {
                tokio::select! {
                    r = &mut fut => break r,
                    _ = &mut deadline, if !waited => {
                        if !first.load(Ordering::Relaxed) {
                            return Attempt::Fallback(
                                FallbackReason::Timeout,
                                format!("the local server sent nothing for {} ms", self.first_byte.as_millis()),
                                Usage::default(),
                            );
                        }
                        waited = true;
                    }
                }
            }
        };
        let mut s = match result {
            Ok(s) => s,
            Err(e) if self.fallback => {
                let reason = match e {
                    LlmError::Timeout(_) => FallbackReason::Timeout,
                    _ => FallbackReason::Unreachable,
                };
                return Attempt::Fallback(reason, e.to_string(), Usage::default());
            }
            Err(e) => return Attempt::Done(Err(e)),
        };
        let (rest, calls) = filter.finish();
        if !rest.is_empty() {
            on_event(&StreamEvent::Text(rest));
        }
        for c in calls {
            let id = self.state().text_call_id();
            s.tool_calls.push(c.into_call(id));
        }
        if !s.tool_calls.is_empty() && s.finish_reason == "stop" {
            s.finish_reason = "tool_calls".into();
        }
        let failures: Vec<local::SchemaError> = s
            .tool_calls
            .iter()
            .filter_map(|c| local::check_call(c, body).err())
            .collect();
        let mut completion = text;
        for c in &s.tool_calls {
            completion.push_str(&c.arguments_raw);
        }
        let b = lbody.clone();
        let reported = s.usage.clone();
        let (usage, estimated) =
            tokio::task::spawn_blocking(move || local::usage(&reported, &b, &completion))
                .await
                .unwrap_or_default();
        s.usage = usage;
        s.usage
            .by_provider
            .insert("local".into(), ProviderUsage::of(&s.usage, estimated));
        self.log_local(&l.model, &s.usage).await;
        s.reasoning_details.clear();
        if !self.fallback {
            return Attempt::Done(Ok(s));
        }
        let total = {
            let mut st = self.state();
            st.schema_failures += failures.len();
            st.schema_failures
        };
        if total >= self.max_schema_failures {
            return Attempt::Fallback(
                FallbackReason::SchemaFailures,
                format!(
                    "{total} invalid tool calls from the local model (the last: {})",
                    failures.last().map(ToString::to_string).unwrap_or_default()
                ),
                s.usage,
            );
        }
        if budget_spent_without_edits(body, &s.tool_calls, self.budget) {
            return Attempt::Fallback(
                FallbackReason::BudgetWithoutEdits,
                "the local model's calls would spend the tool-call budget with no edit made".into(),
                s.usage,
            );
        }
        Attempt::Done(Ok(s))
    }

    async fn routed(
        &self,
        body: &Value,
        on_event: &mut (dyn FnMut(&StreamEvent) + Send),
    ) -> Result<StreamSummary, LlmError> {
        let on_local = match self.routing {
            Routing::Remote => false,
            Routing::Local => true,
            Routing::HybridAuto => !self.state().fell_back,
        };
        if !on_local {
            return self.remote(body, on_event).await;
        }
        match self.local(body, on_event).await {
            Attempt::Done(r) => r,
            Attempt::Fallback(reason, detail, spent) => {
                self.state().fell_back = true;
                on_event(&StreamEvent::Provider(ProviderEvent::Fallback {
                    from: "local",
                    to: "remote",
                    reason: reason.as_str(),
                    detail,
                }));
                // A completed local request that triggered the fallback still counts.
                let mut s = self.remote(body, on_event).await?;
                s.usage = spent.add(&s.usage);
                Ok(s)
            }
        }
    }
}

/// Whether the conversation in `body` (plus `new_calls`) spends the tool-call budget with no
/// edit call: the budget-spent note is the last message, or the calls would reach `budget`.
fn budget_spent_without_edits(
    body: &Value,
    new_calls: &[super::tool_calls::ToolCall],
    budget: Option<usize>,
) -> bool {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let earlier: Vec<&str> = messages
        .iter()
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.pointer("/function/name").and_then(Value::as_str))
        .collect();
    let edited = earlier.iter().any(|n| EDIT_TOOLS.contains(n))
        || new_calls
            .iter()
            .any(|c| EDIT_TOOLS.contains(&c.name.as_str()));
    if edited {
        return false;
    }
    let note = messages
        .last()
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .is_some_and(|c| c.starts_with(BUDGET_SPENT));
    note || budget.is_some_and(|b| !new_calls.is_empty() && earlier.len() + new_calls.len() >= b)
}

impl Provider for Routed {
    fn stream<'a>(
        &'a self,
        body: &'a Value,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<StreamSummary, LlmError>> {
        Box::pin(self.routed(body, on_event))
    }

    fn get_json<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Value, LlmError>> {
        Box::pin(async move {
            match &self.remote {
                Ok(r) => r.get_json(path).await,
                Err(e) => Err(e.clone()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::tool_calls::ToolCall;

    fn call(name: &str) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments_raw: "{}".into(),
            arguments: Ok(json!({})),
        }
    }

    /// Review finding: text-call ids restarted at `text_call_0` every step, so two steps' calls
    /// in one history shared an id. They are numbered per reply.
    #[test]
    fn text_call_ids_are_unique_in_a_reply() {
        let mut st = State::default();
        let ids: Vec<String> = (0..3).map(|_| st.text_call_id()).collect();
        assert_eq!(ids, ["text_call_0", "text_call_1", "text_call_2"]);
    }

    #[test]
    fn routing_values() {
        for r in [Routing::Remote, Routing::Local, Routing::HybridAuto] {
            assert_eq!(Routing::parse(r.as_str()), Ok(r));
        }
        assert_eq!(Routing::parse("cloud"), Err(RoutingError));
    }

    #[test]
    fn the_budget_trigger() {
        let read =
            json!({"role": "assistant", "tool_calls": [{"function": {"name": "read_file"}}]});
        let body = json!({"messages": [{"role": "user", "content": "go"}, read]});
        assert!(!budget_spent_without_edits(
            &body,
            &[call("read_file")],
            Some(3)
        ));
        assert!(budget_spent_without_edits(
            &body,
            &[call("read_file"), call("list_files")],
            Some(3)
        ));
        assert!(!budget_spent_without_edits(
            &body,
            &[call("read_file"), call("edit_file")],
            Some(3)
        ));
        let spent = json!({"messages": [read, {"role": "user", "content": format!("{BUDGET_SPENT} (2 calls) is spent")}]});
        assert!(budget_spent_without_edits(&spent, &[], None));
    }
}
