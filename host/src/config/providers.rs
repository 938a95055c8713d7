//! The `providers` object of config.json (ECOSYSTEM-PROTOCOL.md §10): the remote provider
//! (OpenRouter unless set otherwise), an optional local one (any OpenAI-compatible server: Ollama,
//! llama.cpp's server, LM Studio, vLLM) and the hybrid routing's fallback settings.
//!
//! ```json
//! "providers": {
//!   "remote": {"base_url": "https://openrouter.ai/api/v1", "api_key": "sk-or-…"},
//!   "local": {"base_url": "http://127.0.0.1:11434/v1", "model": "qwen2.5-coder:7b",
//!             "api_key": "optional", "context_tokens": 32768},
//!   "hybrid_max_schema_failures": 2, "hybrid_local_timeout_ms": 30000, "disable_fallback": false
//! }
//! ```
//!
//! `remote.base_url` / `remote.api_key` are the top-level `base_url` / `api_key` under another
//! name (either place works; `providers.remote` wins when both are set).

use serde_json::{Map, Value};

/// The default of `hybrid_max_schema_failures`.
pub const DEFAULT_MAX_SCHEMA_FAILURES: usize = 2;
/// The default of `hybrid_local_timeout_ms` (time to the local server's first byte).
pub const DEFAULT_LOCAL_TIMEOUT_MS: u64 = 30_000;

/// The local provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalProvider {
    /// Its OpenAI-compatible base URL (`…/v1`), without a trailing `/`.
    pub base_url: String,
    /// The model it serves (sent as `model`).
    pub model: String,
    /// Its API key, when the server wants one.
    pub api_key: Option<String>,
    /// The model's context window in tokens; `None`: ask the server's `models` list.
    pub context_tokens: Option<u64>,
}

/// The `providers` settings that are not the remote provider's URL and key (those land in
/// `Config::base_url` / `Config::api_key`).
#[derive(Clone, PartialEq, Eq)]
pub struct ProvidersConfig {
    /// The local provider, when configured.
    pub local: Option<LocalProvider>,
    /// How many invalid tool calls (bad JSON or failing the tool's schema) a hybrid reply takes
    /// from the local model before it falls back to the remote one.
    pub hybrid_max_schema_failures: usize,
    /// The longest wait for the local server's first byte in a hybrid reply, in milliseconds.
    pub hybrid_local_timeout_ms: u64,
    /// No fallback: a hybrid reply's local failure is the reply's error.
    pub disable_fallback: bool,
}

impl Default for ProvidersConfig {
    fn default() -> Self {
        ProvidersConfig {
            local: None,
            hybrid_max_schema_failures: DEFAULT_MAX_SCHEMA_FAILURES,
            hybrid_local_timeout_ms: DEFAULT_LOCAL_TIMEOUT_MS,
            disable_fallback: false,
        }
    }
}

impl std::fmt::Debug for ProvidersConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvidersConfig")
            .field(
                "local",
                &self
                    .local
                    .as_ref()
                    .map(|l| (&l.base_url, &l.model, l.context_tokens)),
            )
            .field(
                "hybrid_max_schema_failures",
                &self.hybrid_max_schema_failures,
            )
            .field("hybrid_local_timeout_ms", &self.hybrid_local_timeout_ms)
            .field("disable_fallback", &self.disable_fallback)
            .finish()
    }
}

/// What `providers` parsed to: the settings, and the remote provider's URL and key when given.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Everything but the remote URL and key.
    pub config: ProvidersConfig,
    /// `providers.remote.base_url` (no trailing `/`).
    pub remote_base_url: Option<String>,
    /// `providers.remote.api_key` (trimmed, non-empty).
    pub remote_api_key: Option<String>,
}

const KEYS: [&str; 5] = [
    "remote",
    "local",
    "hybrid_max_schema_failures",
    "hybrid_local_timeout_ms",
    "disable_fallback",
];

fn url(key: &str, v: Option<&Value>, problems: &mut Vec<String>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            let u = s.trim().trim_end_matches('/');
            if u.starts_with("https://") || u.starts_with("http://") {
                Some(u.to_string())
            } else {
                problems.push(format!(
                    "providers.{key}.base_url must start with https:// or http://"
                ));
                None
            }
        }
        Some(_) => {
            problems.push(format!("providers.{key}.base_url must be a string"));
            None
        }
    }
}

fn text(key: &str, field: &str, v: Option<&Value>, problems: &mut Vec<String>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Some(_) => {
            problems.push(format!("providers.{key}.{field} must be a string"));
            None
        }
    }
}

fn unknown(key: &str, m: &Map<String, Value>, known: &[&str], problems: &mut Vec<String>) {
    for k in m.keys() {
        if !known.contains(&k.as_str()) {
            problems.push(format!("providers.{key}.{k} is not a known setting"));
        }
    }
}

fn positive(m: &Map<String, Value>, key: &str, problems: &mut Vec<String>) -> Option<u64> {
    match m.get(key) {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().filter(|n| *n > 0) {
            Some(n) => Some(n),
            None => {
                problems.push(format!("providers.{key} must be a positive whole number"));
                None
            }
        },
    }
}

/// Parses the `providers` value of config.json; every problem names its key (`providers.…`).
pub fn parse(v: &Value) -> Result<Parsed, Vec<String>> {
    let Value::Object(map) = v else {
        return Err(vec!["providers must be an object".to_string()]);
    };
    let mut problems = Vec::new();
    let mut out = Parsed::default();
    match map.get("remote") {
        None | Some(Value::Null) => {}
        Some(Value::Object(r)) => {
            unknown("remote", r, &["base_url", "api_key"], &mut problems);
            out.remote_base_url = url("remote", r.get("base_url"), &mut problems);
            out.remote_api_key = text("remote", "api_key", r.get("api_key"), &mut problems);
        }
        Some(_) => problems.push("providers.remote must be an object".to_string()),
    }
    match map.get("local") {
        None | Some(Value::Null) => {}
        Some(Value::Object(l)) => {
            unknown(
                "local",
                l,
                &["base_url", "model", "api_key", "context_tokens"],
                &mut problems,
            );
            let base = url("local", l.get("base_url"), &mut problems);
            let model = text("local", "model", l.get("model"), &mut problems);
            let api_key = text("local", "api_key", l.get("api_key"), &mut problems);
            let context_tokens = match l.get("context_tokens") {
                None | Some(Value::Null) => None,
                Some(v) => match v.as_u64().filter(|n| *n > 0) {
                    Some(n) => Some(n),
                    None => {
                        problems.push(
                            "providers.local.context_tokens must be a positive whole number"
                                .to_string(),
                        );
                        None
                    }
                },
            };
            match (base, model) {
                (Some(base_url), Some(model)) => {
                    out.config.local = Some(LocalProvider {
                        base_url,
                        model,
                        api_key,
                        context_tokens,
                    })
                }
                _ => problems.push(
                    "providers.local needs both base_url and model (e.g. {\"base_url\": \"http://127.0.0.1:11434/v1\", \"model\": \"qwen2.5-coder:7b\"})"
                        .to_string(),
                ),
            }
        }
        Some(_) => problems.push("providers.local must be an object".to_string()),
    }
    if let Some(n) = positive(map, "hybrid_max_schema_failures", &mut problems) {
        out.config.hybrid_max_schema_failures = n as usize;
    }
    if let Some(n) = positive(map, "hybrid_local_timeout_ms", &mut problems) {
        out.config.hybrid_local_timeout_ms = n;
    }
    match map.get("disable_fallback") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => out.config.disable_fallback = *b,
        Some(_) => problems.push("providers.disable_fallback must be true or false".to_string()),
    }
    for k in map.keys() {
        if !KEYS.contains(&k.as_str()) {
            problems.push(format!("providers.{k} is not a known setting"));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn providers_parse_and_name_their_key() {
        let p = parse(&json!({})).unwrap();
        assert_eq!(p.config, ProvidersConfig::default());
        let p = parse(&json!({
            "remote": {"base_url": "http://r/v1/", "api_key": " k "},
            "local": {"base_url": "http://127.0.0.1:11434/v1", "model": "m", "context_tokens": 8192},
            "hybrid_max_schema_failures": 3, "hybrid_local_timeout_ms": 500, "disable_fallback": true
        }))
        .unwrap();
        assert_eq!(p.remote_base_url.as_deref(), Some("http://r/v1"));
        assert_eq!(p.remote_api_key.as_deref(), Some("k"));
        let l = p.config.local.unwrap();
        assert_eq!((l.model.as_str(), l.context_tokens), ("m", Some(8192)));
        assert_eq!(p.config.hybrid_max_schema_failures, 3);
        assert_eq!(p.config.hybrid_local_timeout_ms, 500);
        assert!(p.config.disable_fallback);
        let e =
            parse(&json!({"local": {"base_url": "ftp://x"}, "hybrid_local_timeout_ms": 0, "x": 1}))
                .unwrap_err();
        assert_eq!(e.len(), 4, "{e:?}");
        assert!(e.iter().all(|m| m.starts_with("providers.")), "{e:?}");
    }
}
