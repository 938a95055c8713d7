//! Spend caps and usage (ECOSYSTEM-PROTOCOL.md §11).
//!
//! - [`ledger`]: every model request's usage, appended to the user's ledger (`~/.bb7/spend/`) with
//!   per-day totals for the caps.
//! - [`Capped`]: the [`Provider`] a reply talks to. Before EVERY request (each agent step, chat
//!   mode's hidden repair, the title) it runs [`check`] against the caps of config.json `spend`,
//!   and after each one it records the usage in the ledger (inside [`deferring`], a request that
//!   held nothing against a cap is recorded in the background, and the reply waits for it before
//!   it reports done). Over a cap, the request is not made:
//!   the reply fails with an error that starts `Spend cap:`.
//! - [`LocalLedger`]: a reply's local requests (§10), recorded in the ledger at cost 0 with their
//!   token counts (no cap applies to them).
//! - [`usage`]: `get_usage`'s rows, grouped by day, model or chat.
//!
//! With a day or month cap set, the check and a hold of the request's worst case are one step under
//! the ledger's lock ([`Ledger::hold`]), so two hosts cannot both pass a cap; the hold is settled
//! with the real usage when the request ends. A request cancelled or failed after it was sent is
//! recorded too, marked `partial`: the usage the provider reported before it ended, else an
//! estimate (the prompt and what streamed, counted, at the model's price when known).
//!
//! [`now`] is the clock of the caps and the ledger: the system's, unless `BB7_SPEND_NOW` (an RFC
//! 3339 time, for tests) says otherwise.
//!
//! A request's worst case is its prompt tokens (counted in the body's messages and tools) × the
//! model's prompt price, plus its `max_tokens` (else the model's `max_completion_tokens`, else its
//! context window) × the completion price; the prices come from the model list the host already
//! fetches and caches. A model whose price is not known (not in the list, or the list cannot be
//! fetched) counts as over a cap, but only when a cap is set: with no cap, nothing is looked up.
//! A provider whose model is free (a local one, §10) lists its price as 0 and passes every cap.

pub mod ledger;
pub mod usage;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::config::spend::SpendConfig;
use crate::llm::meta::ModelInfo;
use crate::llm::routing::LocalUsageLog;
use crate::llm::{LlmError, Provider, StreamEvent, StreamSummary, Usage};
pub use ledger::{Entry, Ledger, LedgerError};

/// The time the caps and the ledger go by: now, unless `BB7_SPEND_NOW` holds an RFC 3339 time (a
/// fixed clock for tests that must not depend on the day they run on).
pub fn now() -> DateTime<Utc> {
    std::env::var("BB7_SPEND_NOW")
        .ok()
        .and_then(|s| DateTime::parse_from_rfc3339(s.trim()).ok())
        .map_or_else(Utc::now, |t| t.with_timezone(&Utc))
}

/// [`now`] as the ledger writes it.
fn now_text() -> String {
    now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A hold's id, unique among every host of the user: the process and a counter.
fn hold_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        Utc::now().timestamp_nanos_opt().unwrap_or_default(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// What was spent before a request: in this reply, today and this month (US dollars).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// The reply's earlier requests.
    pub reply: f64,
    /// Today (UTC), every host of the user.
    pub day: f64,
    /// This month (UTC).
    pub month: f64,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CapError {
    /// Spent plus the request's worst case is more than a cap.
    #[error(
        "Spend cap: spend.{cap} is ${limit:.4}; spent ${spent:.4} {period}, and this request to {model} may cost up to ${worst:.4} (${total:.4} in all). Nothing was sent; send with override_cap to go past the cap once.",
        total = spent + worst
    )]
    Over {
        /// The cap's key (`per_reply_usd`, `per_day_usd`, `per_month_usd`).
        cap: &'static str,
        /// Its value.
        limit: f64,
        /// Spent so far in its period.
        spent: f64,
        /// The period, as the message says it (`in this reply`, `today (UTC)`, `this month (UTC)`).
        period: &'static str,
        /// The request's worst case.
        worst: f64,
        /// The model asked.
        model: String,
    },
    /// A day or month cap is set but the usage ledger cannot be read.
    #[error(
        "Spend cap: a day or month cap is set but the usage ledger cannot be read ({0}), so what was spent is not known. Nothing was sent; send with override_cap to go ahead once."
    )]
    Ledger(String),
    /// A cap is set but the model's price is not known, so the request cannot be bounded.
    #[error(
        "Spend cap: spend.{cap} is ${limit:.4} and the price of {model} is not known ({why}), so this request's cost cannot be bounded. Nothing was sent; send with override_cap to go ahead once."
    )]
    UnknownPrice {
        /// The first cap set.
        cap: &'static str,
        /// Its value.
        limit: f64,
        /// The model asked.
        model: String,
        /// Why the price is not known.
        why: PriceUnknown,
    },
}

/// Why a request's worst case is not known (so a cap cannot bound it): the `why` of
/// [`CapError::UnknownPrice`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceUnknown {
    /// The model list could not be fetched.
    #[error("the model list could not be fetched: {0}")]
    NoModelList(String),
    /// The model is not in the list.
    #[error("it is not in the model list")]
    NotListed,
    /// The list gives the model no (numeric) price.
    #[error("the model list gives no price")]
    NoPrice,
    /// The prompt's tokens could not be counted.
    #[error("the prompt could not be counted: {0}")]
    NotCounted(String),
    /// Neither the request nor the list bounds the completion.
    #[error("the model list gives no completion limit")]
    NoCompletionLimit,
}

/// A model's prices per token, and the most tokens one completion may have.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Per prompt token.
    pub prompt: f64,
    /// Per completion token.
    pub completion: f64,
    /// The most completion tokens (`max_completion_tokens`, else the context window); `None`
    /// when the list gives neither.
    pub max_completion: Option<u64>,
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => s.trim().parse::<f64>().ok(),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
    .filter(|x| x.is_finite() && *x >= 0.0)
}

impl Price {
    /// The price of `m` as the model list gives it; `None` when a price is missing or not a number.
    pub fn of(m: &ModelInfo) -> Option<Price> {
        let count = |v: &Value| v.as_u64().filter(|n| *n > 0);
        Some(Price {
            prompt: num(&m.pricing.prompt)?,
            completion: num(&m.pricing.completion)?,
            max_completion: count(&m.max_completion_tokens).or_else(|| count(&m.context_length)),
        })
    }

    /// The worst case of a request of `prompt_tokens` asking for at most `max_tokens` (else the
    /// model's own limit); `None` when neither bounds the completion.
    pub fn worst_case(&self, prompt_tokens: u64, max_tokens: Option<u64>) -> Option<f64> {
        let completion = max_tokens.or(self.max_completion)?;
        Some(prompt_tokens as f64 * self.prompt + completion as f64 * self.completion)
    }
}

/// Compares `spent` + `worst` (the request's worst case; `Err(why)` when it is not known)
/// with each cap set in `caps`. `Ok` when no cap is set, whatever the price.
pub fn check(
    caps: &SpendConfig,
    spent: Spent,
    worst: Result<f64, PriceUnknown>,
    model: &str,
) -> Result<(), CapError> {
    let set = [
        (
            "per_reply_usd",
            caps.per_reply_usd,
            spent.reply,
            "in this reply",
        ),
        ("per_day_usd", caps.per_day_usd, spent.day, "today (UTC)"),
        (
            "per_month_usd",
            caps.per_month_usd,
            spent.month,
            "this month (UTC)",
        ),
    ];
    for (cap, limit, spent, period) in set {
        let Some(limit) = limit else { continue };
        let worst = match &worst {
            Ok(w) => *w,
            Err(why) => {
                return Err(CapError::UnknownPrice {
                    cap,
                    limit,
                    model: model.to_string(),
                    why: why.clone(),
                });
            }
        };
        if spent + worst > limit {
            return Err(CapError::Over {
                cap,
                limit,
                spent,
                period,
                worst,
                model: model.to_string(),
            });
        }
    }
    Ok(())
}

/// The prompt tokens of a request body: its messages and tools as sent (the JSON text, so
/// slightly more than the model counts — a worst case).
fn prompt_tokens(body: &Value) -> u64 {
    let mut text = String::new();
    for k in ["messages", "tools"] {
        if let Some(v) = body.get(k) {
            text.push_str(&v.to_string());
        }
    }
    crate::tokens::TokenCounter::new().count(&text) as u64
}

/// A [`Provider`] that checks the spend caps before every request and records every request's
/// usage in the ledger. One per reply: it keeps what the reply has spent so far.
pub struct Capped {
    inner: Arc<dyn Provider>,
    caps: SpendConfig,
    base_url: String,
    chat: String,
    override_cap: bool,
    reply_spent: Mutex<f64>,
    /// The model's price, once the cap check looked it up (for a partial request's estimate).
    price: Mutex<Option<Price>>,
}

impl Capped {
    /// Wraps `inner` for one reply in chat `chat`: `caps` from the config, `base_url` to find the
    /// cached model list, `override_cap` (the send's) skips the check for this reply.
    pub fn wrap(
        inner: Arc<dyn Provider>,
        caps: SpendConfig,
        base_url: &str,
        chat: &str,
        override_cap: bool,
    ) -> Arc<dyn Provider> {
        Arc::new(Capped {
            inner,
            caps,
            base_url: base_url.to_string(),
            chat: chat.to_string(),
            override_cap,
            reply_spent: Mutex::new(0.0),
            price: Mutex::new(None),
        })
    }

    fn reply_spent(&self) -> f64 {
        self.reply_spent.lock().map(|g| *g).unwrap_or(0.0)
    }

    /// The check before a request with `body`; with a day or month cap, the request's worst case is
    /// held in the ledger (the returned id) until it is settled.
    async fn before(&self, body: &Value) -> Result<Option<String>, CapError> {
        if self.override_cap || !self.caps.any() {
            return Ok(None);
        }
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let worst = self.worst_case(body, &model).await;
        let reply = self.reply_spent();
        let w = match (&worst, self.caps.per_day_usd.or(self.caps.per_month_usd)) {
            (Ok(w), Some(_)) => *w,
            // No day or month cap (nothing to hold), or no price (refused, whatever was spent).
            _ => {
                let spent = Spent {
                    reply,
                    day: 0.0,
                    month: 0.0,
                };
                return check(&self.caps, spent, worst, &model).map(|()| None);
            }
        };
        // A day or month cap cannot be checked without the ledger: refused, not passed. The check
        // and the hold are one step under the ledger's lock, so no other host passes in between.
        let caps = self.caps;
        let id = hold_id();
        let held = id.clone();
        // Dropped with this future (a cancel while the hold is being taken): the hold is released
        // once taken, not left in the ledger for an hour.
        let pending = PendingHold::new(id.clone(), Arc::new(release_hold));
        let taker = pending.taker();
        let r = tokio::task::spawn_blocking(move || {
            let r = Ledger::open_global()?.hold(&now(), &held, w, |day, month| {
                check(&caps, Spent { reply, day, month }, Ok(w), &model)
            });
            if matches!(r, Ok(Ok(()))) {
                taker.taken();
            }
            r
        })
        .await;
        match r {
            Ok(Ok(Ok(()))) => {
                pending.keep();
                Ok(Some(id))
            }
            Ok(Ok(Err(cap))) => Err(cap),
            Ok(Err(e)) => Err(CapError::Ledger(e.to_string())),
            Err(e) => Err(CapError::Ledger(e.to_string())),
        }
    }

    async fn worst_case(&self, body: &Value, model: &str) -> Result<f64, PriceUnknown> {
        let state = crate::paths::state_dir();
        let models = crate::llm::meta::models(&*self.inner, &self.base_url, state.as_deref())
            .await
            .map_err(|e| PriceUnknown::NoModelList(e.to_string()))?;
        let info = models
            .iter()
            .find(|m| m.id == model)
            .ok_or(PriceUnknown::NotListed)?;
        let price = Price::of(info).ok_or(PriceUnknown::NoPrice)?;
        if let Ok(mut p) = self.price.lock() {
            *p = Some(price);
        }
        let b = body.clone();
        let tokens = tokio::task::spawn_blocking(move || prompt_tokens(&b))
            .await
            .map_err(|e| PriceUnknown::NotCounted(e.to_string()))?;
        let max_tokens = ["max_tokens", "max_completion_tokens"]
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_u64));
        price
            .worst_case(tokens, max_tokens)
            .ok_or(PriceUnknown::NoCompletionLimit)
    }

    /// Records a request's usage and drops its hold (on a blocking thread: a slow disk does not
    /// hold the runtime). The reply waits for it: here, or, for a request that held nothing
    /// against a cap inside [`deferring`], before it reports the reply done (no cap check reads
    /// that record: a per-reply cap counts in memory), so the ledger's fsync overlaps the reply's
    /// own.
    async fn after(&self, hold: Option<String>, entry: Entry) {
        let deferred = if hold.is_none() {
            DEFERRED.try_with(Deferred::clone).ok()
        } else {
            None
        };
        let task = tokio::task::spawn_blocking(move || settle(hold.as_deref(), &entry));
        match deferred {
            Some(d) => d.push(task),
            None => Deferred::join(task).await,
        }
    }

    /// The ledger entry of a request to `model` that used `usage`.
    fn entry(&self, model: &str, usage: &Usage, partial: bool) -> Entry {
        if let Ok(mut g) = self.reply_spent.lock() {
            *g += usage.cost;
        }
        ledger_entry(&self.chat, model, usage, partial)
    }
}

tokio::task_local! {
    /// The usage records of the reply being run (see [`deferring`]).
    static DEFERRED: Deferred;
}

/// The usage records a reply's requests are writing in the background ([`deferring`]).
#[derive(Clone, Default)]
pub struct Deferred(Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>);

impl Deferred {
    fn push(&self, task: tokio::task::JoinHandle<()>) {
        match self.0.lock() {
            Ok(mut v) => v.push(task),
            Err(e) => e.into_inner().push(task),
        }
    }

    /// Waits until every record is written (a failed one is logged).
    pub async fn wait(self) {
        let tasks = match self.0.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(e) => std::mem::take(&mut *e.into_inner()),
        };
        for t in tasks {
            Deferred::join(t).await;
        }
    }

    async fn join(task: tokio::task::JoinHandle<()>) {
        if let Err(e) = task.await {
            tracing::warn!("cannot record usage: {e}");
        }
    }
}

/// Runs `reply` so that the usage of its requests that hold nothing against a cap is written to
/// the ledger in the background while the reply goes on; the caller records the reply in its chat,
/// then waits with the returned [`Deferred`] before it reports the reply done: the two fsyncs wait
/// for the disk together, and a crash still loses at most the reply in flight.
pub async fn deferring<F: std::future::Future>(reply: F) -> (F::Output, Deferred) {
    let d = Deferred::default();
    let out = DEFERRED.scope(d.clone(), reply).await;
    (out, d)
}

/// The ledger entry, now, of a request for chat `chat` to `model` that used `usage`.
fn ledger_entry(chat: &str, model: &str, usage: &Usage, partial: bool) -> Entry {
    Entry {
        time: now_text(),
        model: model.to_string(),
        chat: chat.to_string(),
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        cached_tokens: usage.cached_tokens,
        cost: usage.cost,
        partial,
    }
}

/// Drops the hold `id` from the ledger (in the background when on the runtime).
fn release_hold(id: &str) {
    let id = id.to_string();
    let release = move || {
        if let Err(e) = Ledger::open_global().and_then(|l| l.settle(Some(&id), None)) {
            tracing::warn!("cannot release a spend hold: {e}");
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) => {
            h.spawn_blocking(release);
        }
        Err(_) => release(),
    }
}

/// How a hold being taken stands: taken (in the ledger) and/or abandoned (its waiter is gone).
#[derive(Default)]
struct Taking {
    taken: bool,
    abandoned: bool,
}

/// A hold being taken in the background for a waiter that may be dropped (cancelled) before it
/// is taken: whichever comes second, the hold being taken or the waiter being dropped, releases
/// it, unless the waiter kept it ([`PendingHold::keep`]).
struct PendingHold {
    id: String,
    state: Arc<Mutex<Taking>>,
    release: Arc<dyn Fn(&str) + Send + Sync>,
    kept: bool,
}

/// The background side of a [`PendingHold`].
struct HoldTaker {
    id: String,
    state: Arc<Mutex<Taking>>,
    release: Arc<dyn Fn(&str) + Send + Sync>,
}

impl PendingHold {
    fn new(id: String, release: Arc<dyn Fn(&str) + Send + Sync>) -> Self {
        PendingHold {
            id,
            state: Arc::default(),
            release,
            kept: false,
        }
    }

    fn taker(&self) -> HoldTaker {
        HoldTaker {
            id: self.id.clone(),
            state: Arc::clone(&self.state),
            release: Arc::clone(&self.release),
        }
    }

    /// The hold is the waiter's now (it settles it after its request).
    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for PendingHold {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.abandoned = true;
        if st.taken {
            (self.release)(&self.id);
        }
    }
}

impl HoldTaker {
    /// The hold is in the ledger: released here when the waiter is already gone.
    fn taken(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.taken = true;
        if st.abandoned {
            (self.release)(&self.id);
        }
    }
}

/// Records one chat's local requests (ECOSYSTEM-PROTOCOL.md §10) in the ledger: cost 0 and their
/// token counts, so `get_usage` shows local use beside the remote one. No cap applies to them
/// (they are free), so nothing is checked or held first.
pub struct LocalLedger {
    chat: String,
}

impl LocalLedger {
    /// The log of chat `chat`'s local requests, for [`crate::llm::routing::RouteSettings`].
    pub fn for_chat(chat: &str) -> Arc<dyn LocalUsageLog> {
        Arc::new(LocalLedger {
            chat: chat.to_string(),
        })
    }
}

impl LocalUsageLog for LocalLedger {
    fn record(&self, model: &str, usage: &Usage) {
        let entry = ledger_entry(&self.chat, model, usage, false);
        settle(None, &Entry { cost: 0.0, ..entry });
    }
}

/// Drops the hold `hold` and appends `entry` (a failure is logged: the reply goes on).
fn settle(hold: Option<&str>, entry: &Entry) {
    if let Err(e) = Ledger::open_global().and_then(|l| l.settle(hold, Some(entry))) {
        tracing::warn!("cannot record usage: {e}");
    }
}

/// What a request streamed so far: the usage the provider reported, and the generated text.
#[derive(Default)]
struct Streamed {
    usage: Option<Usage>,
    generated: String,
    /// Whether anything streamed at all.
    any: bool,
}

impl Streamed {
    fn observe(&mut self, ev: &StreamEvent) {
        self.any = true;
        match ev {
            StreamEvent::Text(t) | StreamEvent::Reasoning(t) => self.generated.push_str(t),
            StreamEvent::ToolCall {
                name, arguments, ..
            } => {
                if let Some(n) = name {
                    self.generated.push_str(n);
                }
                self.generated.push_str(arguments);
            }
            StreamEvent::Usage(u) => self.usage = Some(u.clone()),
            StreamEvent::Finish(_) | StreamEvent::Provider(_) => {}
        }
    }
}

/// A request in flight. Dropped before [`InFlight::finish`] — the request failed, or the reply
/// was cancelled and its future dropped — it records the request as partial and drops its hold.
struct InFlight<'a> {
    capped: &'a Capped,
    body: &'a Value,
    hold: Option<String>,
    streamed: Mutex<Streamed>,
    finished: bool,
}

impl InFlight<'_> {
    fn model(&self) -> &str {
        self.body.get("model").and_then(Value::as_str).unwrap_or("")
    }

    /// The request finished with `usage`: recorded, its hold dropped.
    async fn finish(mut self, usage: &Usage) {
        self.finished = true;
        let entry = self.capped.entry(self.model(), usage, false);
        self.capped.after(self.hold.take(), entry).await;
    }

    /// The request failed before anything streamed (refused, unreachable, an HTTP error): it used
    /// nothing; its hold is dropped.
    async fn abandon(mut self) {
        self.finished = true;
        if let Some(hold) = self.hold.take() {
            let r = tokio::task::spawn_blocking(move || {
                Ledger::open_global().and_then(|l| l.settle(Some(&hold), None))
            })
            .await;
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("cannot drop a spend hold: {e}"),
                Err(e) => tracing::warn!("cannot drop a spend hold: {e}"),
            }
        }
    }

    fn streamed_any(&self) -> bool {
        self.streamed.lock().map(|g| g.any).unwrap_or(true)
    }

    /// The usage of a request that did not finish: what the provider reported, else the prompt and
    /// what streamed, counted, at the model's price when known.
    fn partial_usage(&self) -> Usage {
        let streamed = match self.streamed.lock() {
            Ok(g) => g,
            Err(e) => e.into_inner(),
        };
        if let Some(u) = &streamed.usage {
            return u.clone();
        }
        let prompt = prompt_tokens(self.body);
        let completion = crate::tokens::TokenCounter::new().count(&streamed.generated) as u64;
        let price = self.capped.price.lock().ok().and_then(|p| *p);
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cost: price.map_or(0.0, |p| {
                prompt as f64 * p.prompt + completion as f64 * p.completion
            }),
            ..Usage::default()
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let usage = self.partial_usage();
        let entry = self.capped.entry(self.model(), &usage, true);
        // Synchronous: a cancelled reply's future is being dropped, nothing awaits this any more.
        settle(self.hold.as_deref(), &entry);
    }
}

impl Provider for Capped {
    fn stream<'a>(
        &'a self,
        body: &'a Value,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<StreamSummary, LlmError>> {
        Box::pin(async move {
            let hold = self
                .before(body)
                .await
                .map_err(|e| LlmError::Refused(e.to_string()))?;
            let flight = InFlight {
                capped: self,
                body,
                hold,
                streamed: Mutex::new(Streamed::default()),
                finished: false,
            };
            let r = {
                let streamed = &flight.streamed;
                let mut seen = |ev: &StreamEvent| {
                    if let Ok(mut g) = streamed.lock() {
                        g.observe(ev);
                    }
                    on_event(ev);
                };
                self.inner.stream(body, &mut seen).await
            };
            match &r {
                Ok(s) => flight.finish(&s.usage).await,
                Err(_) if !flight.streamed_any() => flight.abandon().await,
                // Failed after it streamed: dropping `flight` records it as partial.
                Err(_) => drop(flight),
            }
            r
        })
    }

    fn get_json<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<Value, LlmError>> {
        self.inner.get_json(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review finding: a cancel while the hold was being taken left it in the ledger for an hour.
    /// Dropped before or after the hold is taken, an unkept hold is released exactly once; a kept
    /// one is not.
    #[test]
    fn a_hold_abandoned_while_being_taken_is_released_once() {
        let released: Arc<Mutex<Vec<String>>> = Arc::default();
        let r = Arc::clone(&released);
        let release: Arc<dyn Fn(&str) + Send + Sync> =
            Arc::new(move |id: &str| r.lock().unwrap().push(id.to_string()));
        // Cancelled before the background task took it: released when it is taken.
        let p = PendingHold::new("a".into(), Arc::clone(&release));
        let t = p.taker();
        drop(p);
        assert!(released.lock().unwrap().is_empty());
        t.taken();
        // Cancelled after it was taken: released by the drop.
        let p = PendingHold::new("b".into(), Arc::clone(&release));
        p.taker().taken();
        drop(p);
        // Kept by its waiter: not released here.
        let p = PendingHold::new("c".into(), Arc::clone(&release));
        p.taker().taken();
        p.keep();
        // Refused (never taken) and dropped: nothing to release.
        drop(PendingHold::new("d".into(), release));
        assert_eq!(*released.lock().unwrap(), ["a", "b"]);
    }

    /// Inside `deferring`, a record pushed by a request is left to finish in the background (the
    /// reply returns while it is written) and `wait` returns only once it is written.
    #[test]
    fn a_reply_returns_before_its_deferred_records_and_waits_for_them() {
        use std::sync::atomic::AtomicBool;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (open, gate) = std::sync::mpsc::channel::<()>();
            let written = Arc::new(AtomicBool::new(false));
            let w = Arc::clone(&written);
            let ((), usage) = deferring(async move {
                let task = tokio::task::spawn_blocking(move || {
                    gate.recv().unwrap();
                    w.store(true, Ordering::SeqCst);
                });
                DEFERRED.with(|d| d.push(task));
            })
            .await;
            assert!(!written.load(Ordering::SeqCst), "the reply waited for it");
            open.send(()).unwrap();
            usage.wait().await;
            assert!(written.load(Ordering::SeqCst), "wait returned before it");
        });
        // Outside a reply there is nothing to defer to: `after` waits for the record itself.
        assert!(rt.block_on(async { DEFERRED.try_with(|_| ()).is_err() }));
    }

    #[test]
    fn the_check_names_the_cap_and_the_numbers() {
        let caps = SpendConfig {
            per_reply_usd: Some(1.0),
            per_day_usd: Some(2.0),
            per_month_usd: None,
        };
        let spent = Spent {
            reply: 0.5,
            day: 1.5,
            month: 9.0,
        };
        assert!(check(&caps, spent, Ok(0.4), "m").is_ok());
        let e = check(&caps, spent, Ok(0.6), "m").unwrap_err().to_string();
        assert!(
            e.starts_with("Spend cap: spend.per_reply_usd is $1.0000"),
            "{e}"
        );
        assert!(
            e.contains("$0.5000 in this reply") && e.contains("$0.6000"),
            "{e}"
        );
        let e = check(
            &caps,
            Spent {
                reply: 0.0,
                ..spent
            },
            Ok(0.6),
            "m",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("Spend cap: spend.per_day_usd"), "{e}");
        let e = check(&caps, spent, Err(PriceUnknown::NotListed), "m")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("Spend cap:") && e.contains("not known (it is not in the model list)"),
            "{e}"
        );
        assert!(
            check(
                &SpendConfig::default(),
                spent,
                Err(PriceUnknown::NoPrice),
                "m"
            )
            .is_ok(),
            "an unknown price is over a cap only when a cap is set"
        );
    }
}
