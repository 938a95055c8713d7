//! The small model-backed services beside a reply: chat titles, the model list (cached on disk),
//! and the account balance.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::StreamEvent;
use super::client::LlmError;
use super::provider::Provider;
use crate::config::Config;

/// How long a fetched model list is served from the disk cache.
pub const MODELS_TTL: Duration = Duration::from_secs(60 * 60);
/// The cache file under the global state dir.
pub const MODELS_CACHE_FILE: &str = "models_cache.json";
/// The longest title kept.
const TITLE_MAX_CHARS: usize = 60;
/// How much of the first message the title model sees.
const TITLE_INPUT_CHARS: usize = 4000;

const TITLE_PROMPT: &str = "You name chat conversations. Reply with a title of 3 to 6 words that says what the \
user's message is about. Reply with the title only: no quotes, no trailing punctuation, no preamble.";

/// Asks `model` for a 3–6 word title for a chat that starts with `first_message`.
pub async fn generate_title(
    provider: &dyn Provider,
    config: &Config,
    model: &str,
    first_message: &str,
) -> Result<String, LlmError> {
    let input: String = first_message.chars().take(TITLE_INPUT_CHARS).collect();
    let body = json!({
        "model": model,
        "messages": [
            {"role": "system", "content": TITLE_PROMPT},
            {"role": "user", "content": input},
        ],
        "max_tokens": 32,
        "provider": super::request::provider_preferences(config, false),
    });
    let mut text = String::new();
    let mut on_event = |ev: &StreamEvent| {
        if let StreamEvent::Text(t) = ev {
            text.push_str(t);
        }
    };
    provider.stream(&body, &mut on_event).await?;
    clean_title(&text).ok_or_else(|| LlmError::Stream {
        code: String::new(),
        message: "the title model returned no title".into(),
    })
}

/// The first non-empty line, without quotes, markdown or trailing punctuation, at most 60 characters.
pub fn clean_title(raw: &str) -> Option<String> {
    let line = raw.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line
        .trim_start_matches(['#', '*', ' '])
        .trim_start_matches("Title:")
        .trim();
    let line = line.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '*' | '“' | '”'));
    let line = line.trim_end_matches(['.', '!', '?', ':', ';', ',']).trim();
    // A name is one line of text: control characters (a tab, an escape sequence) become spaces,
    // as the host refuses them in names the user types.
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if line.is_empty() {
        return None;
    }
    let mut title: String = line.chars().take(TITLE_MAX_CHARS).collect();
    if line.chars().count() > TITLE_MAX_CHARS
        && let Some(i) = title.rfind(' ')
    {
        title.truncate(i);
    }
    Some(title)
}

/// A model the API offers, as the client lists it (fields the API leaves out are `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model id to request.
    pub id: String,
    /// Its display name (the id when the API gives none).
    pub name: String,
    /// Its description.
    pub description: Value,
    /// When it was published (Unix seconds).
    pub created: Value,
    /// Its context window, in tokens.
    pub context_length: Value,
    /// The most tokens one completion may have.
    pub max_completion_tokens: Value,
    /// Whether it takes tools (the edit tools need them).
    pub supports_tools: bool,
    /// Whether it takes reasoning settings.
    pub supports_reasoning: bool,
    /// Prices per token, as the API gives them (strings).
    pub pricing: Pricing,
}

/// A model's prices, as the API gives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    /// Per prompt token.
    pub prompt: Value,
    /// Per completion token.
    pub completion: Value,
    /// Per prompt token read from the cache.
    pub input_cache_read: Value,
    /// Per prompt token written to the cache.
    pub input_cache_write: Value,
    /// Per reasoning token.
    pub internal_reasoning: Value,
}

/// The account's balance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Balance {
    /// Credits bought, or the key's limit; `None` for a key without a limit.
    pub total_credits: Option<f64>,
    /// Credits used.
    pub total_usage: f64,
    /// `"key"` when the figures are the key's own (the key may not read the account's credits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// Whether the key has no limit.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unlimited: bool,
    /// The key's own spending limit (`GET /key`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// What is left of the key's limit, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_remaining: Option<f64>,
}

/// The key's `limit` and `limit_remaining` from a `GET /key` answer; both `None` for a key without
/// a limit.
fn key_limit(v: &Value) -> (Option<f64>, Option<f64>) {
    let d = v.get("data").unwrap_or(v);
    let limit = d.get("limit").and_then(Value::as_f64);
    let remaining = limit.and(d.get("limit_remaining").and_then(Value::as_f64));
    (limit, remaining)
}

/// The model list in the protocol's shape, from the disk cache when it is fresh for this base URL,
/// else fetched (and cached). A failed fetch falls back to a stale cache when there is one.
pub async fn models(
    provider: &dyn Provider,
    base_url: &str,
    state_dir: Option<&Path>,
) -> Result<Vec<ModelInfo>, LlmError> {
    let cache_path = state_dir.map(|d| d.join(MODELS_CACHE_FILE));
    let cached = cache_path.as_deref().and_then(|p| read_cache(p, base_url));
    if let Some((age, models)) = &cached
        && *age < MODELS_TTL
    {
        return Ok(models.clone());
    }
    match provider.get_json("models").await {
        Ok(v) => {
            let models: Vec<ModelInfo> = v
                .get("data")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(model_entry).collect())
                .unwrap_or_default();
            if let Some(p) = &cache_path {
                write_cache(p, base_url, &models);
            }
            Ok(models)
        }
        Err(e) => match cached {
            Some((_, models)) => {
                tracing::warn!("model list fetch failed, serving the cached list: {e}");
                Ok(models)
            }
            None => Err(e),
        },
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The model list cached on disk for `base_url` (fresh or not), without asking the network.
pub fn cached_models(base_url: &str, state_dir: &Path) -> Option<Vec<ModelInfo>> {
    read_cache(&state_dir.join(MODELS_CACHE_FILE), base_url).map(|(_, m)| m)
}

fn read_cache(path: &Path, base_url: &str) -> Option<(Duration, Vec<ModelInfo>)> {
    let bytes = crate::store::read_regular_path(path).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    if v.get("base_url").and_then(Value::as_str) != Some(base_url) {
        return None;
    }
    let fetched = v.get("fetched_at").and_then(Value::as_u64)?;
    let models: Vec<ModelInfo> = serde_json::from_value(v.get("models")?.clone()).ok()?;
    Some((
        Duration::from_secs(now_secs().saturating_sub(fetched)),
        models,
    ))
}

fn write_cache(path: &Path, base_url: &str, models: &[ModelInfo]) {
    let Some(dir) = path.parent() else { return };
    let body = json!({"base_url": base_url, "fetched_at": now_secs(), "models": models});
    let result = std::fs::create_dir_all(dir).and_then(|_| {
        let d = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())?;
        crate::store::write_atomic(&d, MODELS_CACHE_FILE, body.to_string().as_bytes())
    });
    if let Err(e) = result {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}

/// One OpenRouter model object → the protocol's `models` entry.
fn model_entry(m: &Value) -> Option<ModelInfo> {
    let id = m.get("id")?.as_str()?;
    let params: Vec<&str> = m
        .get("supported_parameters")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let pricing = m.get("pricing").cloned().unwrap_or(json!({}));
    let price = |k: &str| pricing.get(k).cloned().unwrap_or(Value::Null);
    Some(ModelInfo {
        id: id.to_string(),
        name: m
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(id)
            .to_string(),
        description: m.get("description").cloned().unwrap_or(json!("")),
        created: m.get("created").cloned().unwrap_or(Value::Null),
        context_length: m
            .get("context_length")
            .cloned()
            .or_else(|| m.pointer("/top_provider/context_length").cloned())
            .unwrap_or(Value::Null),
        max_completion_tokens: m
            .pointer("/top_provider/max_completion_tokens")
            .cloned()
            .unwrap_or(Value::Null),
        supports_tools: params.contains(&"tools"),
        supports_reasoning: params.contains(&"reasoning") || params.contains(&"include_reasoning"),
        pricing: Pricing {
            prompt: price("prompt"),
            completion: price("completion"),
            input_cache_read: price("input_cache_read"),
            input_cache_write: price("input_cache_write"),
            internal_reasoning: price("internal_reasoning"),
        },
    })
}

/// The balance: `/credits` when the key may read it, else the key's own limit and usage from
/// `/key`; either way with the key's `limit` and `limit_remaining` when it has a limit.
pub async fn balance(provider: &dyn Provider) -> Result<Balance, LlmError> {
    match provider.get_json("credits").await {
        Ok(v) => {
            let d = v.get("data").unwrap_or(&v);
            // The key's limit is extra: a key endpoint that fails does not fail the balance.
            let (limit, limit_remaining) = match provider.get_json("key").await {
                Ok(k) => key_limit(&k),
                Err(e) => {
                    tracing::debug!("no key limit: {e}");
                    (None, None)
                }
            };
            Ok(Balance {
                limit,
                limit_remaining,
                total_credits: Some(
                    d.get("total_credits")
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0),
                ),
                total_usage: d.get("total_usage").and_then(Value::as_f64).unwrap_or(0.0),
                source: None,
                unlimited: false,
            })
        }
        Err(LlmError::Http {
            status: 401 | 403 | 404,
            ..
        }) => {
            let v = provider.get_json("key").await?;
            let d = v.get("data").unwrap_or(&v);
            let (limit, limit_remaining) = key_limit(&v);
            Ok(Balance {
                limit_remaining,
                total_credits: limit,
                total_usage: d.get("usage").and_then(Value::as_f64).unwrap_or(0.0),
                source: Some("key"),
                unlimited: limit.is_none(),
                limit,
            })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_cleaned() {
        assert_eq!(
            clean_title("\"Fix The Parser.\"\n").as_deref(),
            Some("Fix The Parser")
        );
        assert_eq!(
            clean_title("\n\nTitle: Rust Refactor").as_deref(),
            Some("Rust Refactor")
        );
        assert_eq!(clean_title("  \n "), None);
        assert_eq!(
            clean_title("Fix\tthe \u{1b}[31mparser").as_deref(),
            Some("Fix the [31mparser"),
            "control characters never reach a chat name"
        );
        let long = "word ".repeat(40);
        assert!(clean_title(&long).unwrap().chars().count() <= 60);
    }

    #[test]
    fn model_entries_derive_capabilities() {
        let m = json!({"id": "a/b", "name": "B", "context_length": 1000,
            "supported_parameters": ["tools", "reasoning"],
            "pricing": {"prompt": "0.1", "completion": "0.2"},
            "top_provider": {"max_completion_tokens": 50}});
        let e = serde_json::to_value(model_entry(&m).unwrap()).unwrap();
        assert_eq!(e["supports_tools"], true);
        assert_eq!(e["supports_reasoning"], true);
        assert_eq!(e["max_completion_tokens"], 50);
        assert_eq!(e["pricing"]["prompt"], "0.1");
        let e = serde_json::to_value(model_entry(&json!({"id": "x"})).unwrap()).unwrap();
        assert_eq!(e["supports_tools"], false);
        assert_eq!(e["name"], "x");
    }
}
