//! The chat-completion request body: model, messages, tools, reasoning, and OpenRouter's provider
//! preferences and cache keys (issue 4, "Request body").

use serde_json::{Value, json};

use crate::config::Config;

/// A tool as offered to the model (from the component's own description).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
}

/// What one request needs beyond the config.
pub struct RequestParts<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub user: &'a str,
    /// Empty for global chats (no tools) and when nothing is offered.
    pub tools: &'a [ToolSpec],
    /// `""` sends no reasoning settings.
    pub reasoning_effort: &'a str,
    /// The chat id, sent as `session_id` / `prompt_cache_key` when `explicit_cache_key` is set.
    pub chat_id: &'a str,
}

/// Builds the JSON body (without `stream`, which the client sets).
pub fn body(config: &Config, p: &RequestParts<'_>) -> Value {
    let mut messages = Vec::with_capacity(2);
    if !p.system.is_empty() {
        messages.push(json!({"role": "system", "content": p.system}));
    }
    messages.push(json!({"role": "user", "content": p.user}));
    let mut body = json!({
        "model": p.model,
        "messages": messages,
        "usage": {"include": true},
    });
    if !p.tools.is_empty() {
        body["tools"] = Value::Array(
            p.tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect(),
        );
        body["tool_choice"] = json!("auto");
    }
    if !p.reasoning_effort.is_empty() {
        body["reasoning"] = json!({"effort": p.reasoning_effort});
    }
    body["provider"] = provider_preferences(
        config,
        !p.tools.is_empty() || !p.reasoning_effort.is_empty(),
    );
    if config.explicit_cache_key && !p.chat_id.is_empty() {
        body["session_id"] = json!(p.chat_id);
        body["prompt_cache_key"] = json!(p.chat_id);
    }
    body
}

/// OpenRouter's `provider` object: no training on user data unless allowed, zero data retention
/// when retention is not allowed, and only providers that honour every parameter when tools or
/// reasoning are sent.
pub fn provider_preferences(config: &Config, require_parameters: bool) -> Value {
    let mut p = json!({});
    if !config.allow_training {
        p["data_collection"] = json!("deny");
    }
    if !config.allow_data_retention {
        p["zdr"] = json!(true);
    }
    if require_parameters {
        p["require_parameters"] = json!(true);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(tools: &'a [ToolSpec], effort: &'a str) -> RequestParts<'a> {
        RequestParts {
            model: "m",
            system: "sys",
            user: "u",
            tools,
            reasoning_effort: effort,
            chat_id: "c1",
        }
    }

    #[test]
    fn defaults() {
        let b = body(&Config::default(), &parts(&[], ""));
        assert_eq!(b["messages"][0]["role"], "system");
        assert_eq!(b["messages"][1]["content"], "u");
        assert!(b.get("tools").is_none() && b.get("reasoning").is_none());
        assert_eq!(b["provider"], json!({"data_collection": "deny"}));
        assert!(b.get("prompt_cache_key").is_none());
    }

    #[test]
    fn preferences_and_cache_key() {
        let config = Config {
            allow_training: true,
            allow_data_retention: false,
            explicit_cache_key: true,
            ..Config::default()
        };
        let b = body(&config, &parts(&[], "high"));
        assert_eq!(b["reasoning"], json!({"effort": "high"}));
        assert_eq!(
            b["provider"],
            json!({"zdr": true, "require_parameters": true})
        );
        assert_eq!(b["prompt_cache_key"], "c1");
        assert_eq!(b["session_id"], "c1");
    }
}
