//! Spend caps and usage (ECOSYSTEM-PROTOCOL.md §11).
//!
//! - [`ledger`]: every model request's usage, appended to the user's ledger (`~/.bb7/spend/`) with
//!   per-day totals for the caps.
//! - [`Capped`]: the [`Provider`] a reply talks to. Before EVERY request (each agent step, chat
//!   mode's hidden repair, the title) it runs [`check`] against the caps of config.json `spend`,
//!   and after each one it records the usage in the ledger. Over a cap, the request is not made:
//!   the reply fails with an error that starts `Spend cap:`.
//! - [`usage`]: `get_usage`'s rows, grouped by day, model or chat.
//!
//! A request's worst case is its prompt tokens (counted in the body's messages and tools) × the
//! model's prompt price, plus its `max_tokens` (else the model's `max_completion_tokens`, else its
//! context window) × the completion price; the prices come from the model list the host already
//! fetches and caches. A model whose price is not known (not in the list, or the list cannot be
//! fetched) counts as over a cap, but only when a cap is set: with no cap, nothing is looked up.
//! A provider whose model is free (a local one, §10) lists its price as 0 and passes every cap.

pub mod ledger;
pub mod usage;

use std::sync::{Arc, Mutex};

use chrono::Utc;
use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::config::spend::SpendConfig;
use crate::llm::meta::ModelInfo;
use crate::llm::{LlmError, Provider, StreamEvent, StreamSummary, Usage};
pub use ledger::{Entry, Ledger, LedgerError};

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
        why: String,
    },
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

/// Compares `spent` + `worst` (the request's worst case; `Err(why)` when its price is not known)
/// with each cap set in `caps`. `Ok` when no cap is set, whatever the price.
pub fn check(
    caps: &SpendConfig,
    spent: Spent,
    worst: Result<f64, String>,
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
        })
    }

    fn reply_spent(&self) -> f64 {
        self.reply_spent.lock().map(|g| *g).unwrap_or(0.0)
    }

    /// The check before a request with `body`.
    async fn before(&self, body: &Value) -> Result<(), CapError> {
        if self.override_cap || !self.caps.any() {
            return Ok(());
        }
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let worst = self.worst_case(body, &model).await;
        // A day or month cap cannot be checked without the ledger: refused, not passed.
        let (day, month) = if self.caps.per_day_usd.is_some() || self.caps.per_month_usd.is_some() {
            let spent =
                tokio::task::spawn_blocking(|| Ledger::open_global()?.spent(&Utc::now())).await;
            match spent {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => return Err(CapError::Ledger(e.to_string())),
                Err(e) => return Err(CapError::Ledger(e.to_string())),
            }
        } else {
            (0.0, 0.0)
        };
        let spent = Spent {
            reply: self.reply_spent(),
            day,
            month,
        };
        check(&self.caps, spent, worst, &model)
    }

    async fn worst_case(&self, body: &Value, model: &str) -> Result<f64, String> {
        let state = crate::paths::state_dir();
        let models = crate::llm::meta::models(&*self.inner, &self.base_url, state.as_deref())
            .await
            .map_err(|e| format!("the model list could not be fetched: {e}"))?;
        let info = models
            .iter()
            .find(|m| m.id == model)
            .ok_or_else(|| "it is not in the model list".to_string())?;
        let price = Price::of(info).ok_or_else(|| "the model list gives no price".to_string())?;
        let b = body.clone();
        let tokens = tokio::task::spawn_blocking(move || prompt_tokens(&b))
            .await
            .map_err(|e| format!("the prompt could not be counted: {e}"))?;
        let max_tokens = ["max_tokens", "max_completion_tokens"]
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_u64));
        price
            .worst_case(tokens, max_tokens)
            .ok_or_else(|| "the model list gives no completion limit".to_string())
    }

    /// Records a finished request's usage (in the background: a slow disk does not hold the reply).
    async fn after(&self, model: &str, usage: &Usage) {
        if let Ok(mut g) = self.reply_spent.lock() {
            *g += usage.cost;
        }
        let entry = Entry {
            time: crate::chat::model::now(),
            model: model.to_string(),
            chat: self.chat.clone(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cached_tokens,
            cost: usage.cost,
        };
        let r = tokio::task::spawn_blocking(move || Ledger::open_global()?.append(&entry)).await;
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("cannot record usage: {e}"),
            Err(e) => tracing::warn!("cannot record usage: {e}"),
        }
    }
}

impl Provider for Capped {
    fn stream<'a>(
        &'a self,
        body: &'a Value,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<StreamSummary, LlmError>> {
        Box::pin(async move {
            self.before(body)
                .await
                .map_err(|e| LlmError::Refused(e.to_string()))?;
            let r = self.inner.stream(body, on_event).await;
            if let Ok(s) = &r {
                let model = body.get("model").and_then(Value::as_str).unwrap_or("");
                self.after(model, &s.usage).await;
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
        let e = check(&caps, spent, Err("x".into()), "m")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("Spend cap:") && e.contains("not known"),
            "{e}"
        );
        assert!(
            check(&SpendConfig::default(), spent, Err("x".into()), "m").is_ok(),
            "an unknown price is over a cap only when a cap is set"
        );
    }
}
