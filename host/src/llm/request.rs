//! The chat-completion request body: model, messages, tools, reasoning, and OpenRouter's provider
//! preferences and cache keys (issue 4, "Request body").

use serde_json::{Value, json};

use crate::config::Config;

/// A tool as offered to the model (from the component's own description).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls the tool by.
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub parameters: Value,
}

/// What one request needs beyond the config.
pub struct RequestParts<'a> {
    /// The model id, sent as `model`.
    pub model: &'a str,
    /// The system message; empty sends none.
    pub system: &'a str,
    /// The structured user message ([`super::prompt::render_user_message`]).
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

/// One finished step of an agent reply in canonical form (AGENT-PLAN.md §14): what the model said
/// and called, and the result of every call. Only this module turns it into the wire format.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Turn {
    /// The assistant text the step streamed.
    pub text: String,
    /// The calls the model made in the step, in index order.
    pub tool_calls: Vec<super::tool_calls::ToolCall>,
    /// The provider's opaque reasoning state (`reasoning_details`), sent back unchanged.
    pub reasoning_details: Vec<Value>,
    /// One result per call, in call order.
    pub results: Vec<ToolResult>,
}

/// The canonical result of one tool call, as the model will read it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the call this result answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// Whether the call succeeded.
    pub ok: bool,
    /// The text the model sees (a result, or the error).
    pub content: String,
}

/// The body of step `turns.len() + 1` of an agent reply: the request of [`body`] followed by every
/// earlier step (the assistant message with its tool calls, then one `tool` message per call), so
/// each step's messages extend the previous step's byte for byte. `final_note` (the budget is
/// spent) adds a last user message and forbids tool calls with `tool_choice: "none"`; the tools
/// stay declared so the cached prefix stays the same.
pub fn agent_body(
    config: &Config,
    p: &RequestParts<'_>,
    turns: &[Turn],
    final_note: Option<&str>,
) -> Value {
    let mut b = body(config, p);
    if let Some(messages) = b["messages"].as_array_mut() {
        for t in turns {
            let mut m = json!({"role": "assistant", "content": t.text});
            if !t.tool_calls.is_empty() {
                m["tool_calls"] = Value::Array(
                    t.tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments_raw}})
                        })
                        .collect(),
                );
            }
            if !t.reasoning_details.is_empty() {
                m["reasoning_details"] = Value::Array(t.reasoning_details.clone());
            }
            messages.push(m);
            for r in &t.results {
                messages.push(json!({"role": "tool", "tool_call_id": r.tool_call_id,
                    "name": r.name, "content": r.content}));
            }
        }
        if let Some(note) = final_note {
            messages.push(json!({"role": "user", "content": note}));
        }
    }
    if final_note.is_some() && b.get("tools").is_some() {
        b["tool_choice"] = json!("none");
    }
    b
}

/// Merges streamed `reasoning_details` fragments: entries continuing the previous one (same `type`
/// and `index`) have their text appended; anything else starts a new entry.
pub fn merge_reasoning_details(acc: &mut Vec<Value>, fragment: &Value) {
    let key = |v: &Value| (v.get("type").cloned(), v.get("index").cloned());
    if let Some(last) = acc.last_mut()
        && key(last) == key(fragment)
        && fragment.get("index").is_some()
    {
        if let (Some(l), Some(f)) = (last.as_object_mut(), fragment.as_object()) {
            for (k, v) in f {
                match (l.get_mut(k), v) {
                    (Some(Value::String(a)), Value::String(b))
                        if matches!(k.as_str(), "text" | "summary" | "data") =>
                    {
                        a.push_str(b)
                    }
                    (_, v) if !v.is_null() => {
                        l.insert(k.clone(), v.clone());
                    }
                    _ => {}
                }
            }
        }
        return;
    }
    acc.push(fragment.clone());
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
