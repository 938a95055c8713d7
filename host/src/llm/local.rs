//! The local adapter's quirks (ECOSYSTEM-PROTOCOL.md §10): what differs when the model runs on an
//! OpenAI-compatible server on the user's machine (Ollama, llama.cpp's server, LM Studio, vLLM).
//!
//! - The request: the local model's name, without OpenRouter's own fields (`provider`,
//!   `reasoning`, `usage`, `session_id`, `prompt_cache_key`), and a system note that says how to
//!   call a tool in text, for models without native tool calling.
//! - Tool calls in text: a fenced block (```` ```json ````, ```` ```tool_call ```` or a bare
//!   fence) holding one object or an array of objects, each
//!   `{"name": T, "arguments": {…}}`, `{"tool": T, "args": {…}}`, `{"tool_name": T,
//!   "parameters": {…}}`, `{"name": T, "input": {…}}` or `{"function": {"name": T, "arguments":
//!   {…}}}` (`arguments` may also be a JSON string). The block is taken out of the reply text and
//!   becomes a tool call like a native one. A fenced block that names a tool but is not valid
//!   JSON becomes a call whose arguments are invalid (the model reads the error).
//! - Every call (native or from text) is checked against its tool's schema ([`check_call`]);
//!   an invalid one counts as a schema failure in a hybrid reply.
//! - No `usage` (or no `usage.cost`): cost 0; missing token counts are estimated with the host's
//!   tokenizer and marked `estimated` in `by_provider`.

use serde_json::{Map, Value};

use super::Usage;
use super::tool_calls::{ArgumentsError, ToolCall};

/// Added to the system message of a local request that offers tools.
pub const TEXT_TOOLS_NOTE: &str = "\n\n# Calling tools\n\nIf you cannot call tools natively, \
call one by answering with a fenced block:\n```json\n{\"name\": \"<tool>\", \"arguments\": {…}}\n```\n\
(one object, or an array of them, per block). The arguments must match the tool's schema.";

/// OpenRouter's own request fields, not sent to a local server.
const REMOTE_ONLY: [&str; 6] = [
    "provider",
    "reasoning",
    "usage",
    "session_id",
    "prompt_cache_key",
    "transforms",
];

/// The body of a local request: `body` for `model`, without OpenRouter's fields, with the
/// text-tools note in its system message when it offers tools.
pub fn body(body: &Value, model: &str) -> Value {
    let mut b = body.clone();
    if let Value::Object(m) = &mut b {
        for k in REMOTE_ONLY {
            m.remove(k);
        }
        m.insert("model".into(), Value::String(model.to_string()));
    }
    let has_tools = b
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    if has_tools
        && let Some(first) = b.pointer_mut("/messages/0")
        && first.get("role").and_then(Value::as_str) == Some("system")
        && let Some(Value::String(content)) = first.get_mut("content")
    {
        content.push_str(TEXT_TOOLS_NOTE);
    }
    b
}

/// Holds back reply text from the first code fence on, so that a tool call written as a fenced
/// block is never shown as text; what is not a tool call is released at the end.
#[derive(Debug, Default)]
pub struct TextFilter {
    held: String,
    holding: bool,
}

impl TextFilter {
    /// Takes one text fragment; returns the part that can be shown now.
    pub fn push(&mut self, t: &str) -> String {
        self.held.push_str(t);
        if self.holding {
            return String::new();
        }
        if let Some(i) = self.held.find("```") {
            self.holding = true;
            let out = self.held[..i].to_string();
            self.held.drain(..i);
            return out;
        }
        // A fence may be starting: keep trailing backticks back.
        let keep = self.held.len() - self.held.trim_end_matches('`').len();
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    /// The end of the stream: the held text with its tool-call blocks taken out, and the calls.
    pub fn finish(self) -> (String, Vec<TextCall>) {
        extract(&self.held)
    }
}

/// A tool call found in reply text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    /// The tool named.
    pub name: String,
    /// The arguments as written (a JSON object as text, or the block when it is not JSON).
    pub arguments_raw: String,
    /// The arguments, or why they are not usable.
    pub arguments: Result<Value, ArgumentsError>,
}

impl TextCall {
    /// As a tool call with id `id`.
    pub fn into_call(self, id: String) -> ToolCall {
        ToolCall {
            id,
            name: self.name,
            arguments_raw: self.arguments_raw,
            arguments: self.arguments,
        }
    }
}

const NAME_KEYS: [&str; 3] = ["name", "tool", "tool_name"];
const ARG_KEYS: [&str; 4] = ["arguments", "args", "parameters", "input"];

fn call_of(v: &Value) -> Option<TextCall> {
    let m = v.as_object()?;
    if let Some(f) = m.get("function").and_then(Value::as_object)
        && f.get("name").is_some()
    {
        return call_of(&Value::Object(f.clone()));
    }
    let name = NAME_KEYS
        .iter()
        .find_map(|k| m.get(*k).and_then(Value::as_str))?
        .to_string();
    let args = ARG_KEYS
        .iter()
        .find_map(|k| m.get(*k))
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    let (raw, parsed) = match args {
        Value::String(s) => {
            let parsed = match serde_json::from_str::<Value>(&s) {
                Ok(Value::Object(o)) => Ok(Value::Object(o)),
                Ok(_) => Err(ArgumentsError::NotAnObject),
                Err(e) => Err(ArgumentsError::InvalidJson(e.to_string())),
            };
            (s, parsed)
        }
        Value::Object(o) => (Value::Object(o.clone()).to_string(), Ok(Value::Object(o))),
        other => (other.to_string(), Err(ArgumentsError::NotAnObject)),
    };
    Some(TextCall {
        name,
        arguments_raw: raw,
        arguments: parsed,
    })
}

/// The tool named in a block that is not valid JSON (`"name": "x"` or `"tool": "x"`), if any.
fn named_in(block: &str) -> Option<String> {
    for key in NAME_KEYS {
        let pat = format!("\"{key}\"");
        let Some(i) = block.find(&pat) else { continue };
        let rest = block[i + pat.len()..].trim_start().strip_prefix(':')?;
        let rest = rest.trim_start().strip_prefix('"')?;
        let end = rest.find('"')?;
        let name = &rest[..end];
        if !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return Some(name.to_string());
        }
    }
    None
}

/// The tool calls of one fenced block's content, or `None` when it is not a tool call.
fn block_calls(info: &str, content: &str) -> Option<Vec<TextCall>> {
    if !matches!(info, "" | "json" | "tool_call" | "tool" | "tool_calls") {
        return None;
    }
    match serde_json::from_str::<Value>(content.trim()) {
        Ok(Value::Array(items)) => {
            let calls: Option<Vec<TextCall>> = items.iter().map(call_of).collect();
            calls.filter(|c| !c.is_empty())
        }
        Ok(v) => call_of(&v).map(|c| vec![c]),
        Err(e) => named_in(content).map(|name| {
            vec![TextCall {
                name,
                arguments_raw: content.trim().to_string(),
                arguments: Err(ArgumentsError::InvalidJson(e.to_string())),
            }]
        }),
    }
}

/// Takes the tool-call blocks out of `text`: the text left and the calls, in order.
pub fn extract(text: &str) -> (String, Vec<TextCall>) {
    let mut out = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(nl) = after.find('\n') else { break };
        let info = after[..nl].trim().to_ascii_lowercase();
        let body = &after[nl + 1..];
        let Some(end) = body.find("```") else { break };
        let block_end = start + 3 + nl + 1 + end + 3;
        match block_calls(&info, &body[..end]) {
            Some(c) => {
                out.push_str(&rest[..start]);
                calls.extend(c);
            }
            None => out.push_str(&rest[..block_end]),
        }
        rest = &rest[block_end..];
    }
    out.push_str(rest);
    (out, calls)
}

/// Why a tool call does not fit its tool's schema ([`check_call`]); the message is what the
/// routing reports of the failure (`… invalid tool calls from the local model (the last: …)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The arguments are not valid JSON.
    #[error("{tool}: {reason}")]
    InvalidJson {
        /// The tool called.
        tool: String,
        /// The parser's message.
        reason: String,
    },
    /// The tool is not among those offered.
    #[error("{0}: no such tool is offered")]
    UnknownTool(String),
    /// A value is not of the schema's type.
    #[error("{at} must be of type {ty}")]
    WrongType {
        /// Where (`tool.field[i]…`).
        at: String,
        /// The type the schema names.
        ty: String,
    },
    /// A value is none of the schema's types.
    #[error("{0} has the wrong type")]
    NoTypeFits(String),
    /// A value is not in the schema's `enum`.
    #[error("{0} is not one of the allowed values")]
    NotAllowed(String),
    /// An object lacks a required field.
    #[error("{at}: missing required field `{field}`")]
    MissingField {
        /// Where.
        at: String,
        /// The field.
        field: String,
    },
    /// An object has a field a closed schema does not list.
    #[error("{at}: unknown field `{field}`")]
    UnknownField {
        /// Where.
        at: String,
        /// The field.
        field: String,
    },
}

/// Why a call does not fit its tool (offered in `body.tools`): invalid JSON, an unknown tool, a
/// missing required field, a field of the wrong type, or one the schema does not allow.
pub fn check_call(call: &ToolCall, body: &Value) -> Result<(), SchemaError> {
    let args = match &call.arguments {
        Ok(a) => a,
        Err(e) => {
            return Err(SchemaError::InvalidJson {
                tool: call.name.clone(),
                reason: e.to_string(),
            });
        }
    };
    let schema = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(call.name.as_str()))
        .and_then(|t| t.pointer("/function/parameters"));
    let Some(schema) = schema else {
        return Err(SchemaError::UnknownTool(call.name.clone()));
    };
    check_value(args, schema, &call.name)
}

fn type_ok(v: &Value, ty: &str) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// A small JSON-schema check (type, required, properties, additionalProperties, items, enum):
/// what the built-in and component tools' schemas use.
fn check_value(v: &Value, schema: &Value, at: &str) -> Result<(), SchemaError> {
    match schema.get("type") {
        Some(Value::String(t)) if !type_ok(v, t) => {
            return Err(SchemaError::WrongType {
                at: at.into(),
                ty: t.clone(),
            });
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_ok(v, t)) => {
            return Err(SchemaError::NoTypeFits(at.into()));
        }
        _ => {}
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        return Err(SchemaError::NotAllowed(at.into()));
    }
    if let Value::Object(m) = v {
        let props = schema.get("properties").and_then(Value::as_object);
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !m.contains_key(r) {
                return Err(SchemaError::MissingField {
                    at: at.into(),
                    field: r.into(),
                });
            }
        }
        let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
        for (k, val) in m {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check_value(val, s, &format!("{at}.{k}"))?,
                None if closed => {
                    return Err(SchemaError::UnknownField {
                        at: at.into(),
                        field: k.clone(),
                    });
                }
                None => {}
            }
        }
    }
    if let (Value::Array(items), Some(s)) = (v, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_value(item, s, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// The usage of a local request: the server's counts when it sent them, else the host's estimate
/// of `body`'s prompt and the `completion` text (`true` when estimated). Cost is always 0.
pub fn usage(reported: &Usage, body: &Value, completion: &str) -> (Usage, bool) {
    if reported.total_tokens > 0 || reported.prompt_tokens > 0 {
        let mut u = reported.clone();
        u.cost = 0.0;
        return (u, false);
    }
    let prompt = prompt_tokens(body);
    let completion = crate::tokens::TokenCounter::new().count(completion) as u64;
    (
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            ..Usage::default()
        },
        true,
    )
}

/// The prompt tokens of `body` (its messages and tools as sent), by the host's tokenizer.
pub fn prompt_tokens(body: &Value) -> u64 {
    let mut text = String::new();
    for k in ["messages", "tools"] {
        if let Some(v) = body.get(k) {
            text.push_str(&v.to_string());
        }
    }
    crate::tokens::TokenCounter::new().count(&text) as u64
}

/// The context window a `models` list gives for `model` (`context_length`, `max_model_len`,
/// `context_window`, llama.cpp's `meta.n_ctx_train`), if it gives one.
pub fn context_of(models: &Value, model: &str) -> Option<u64> {
    let list = models.get("data").and_then(Value::as_array)?;
    let m = list
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (list.len() == 1).then(|| &list[0]))?;
    [
        "/context_length",
        "/max_model_len",
        "/context_window",
        "/meta/n_ctx_train",
    ]
    .iter()
    .find_map(|p| m.pointer(p).and_then(Value::as_u64))
    .filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Value {
        json!({"tools": [{"type": "function", "function": {"name": "read_file", "parameters": {
            "type": "object", "required": ["file_path"], "additionalProperties": false,
            "properties": {"file_path": {"type": "string"}, "start_line": {"type": "integer"}}}}}]})
    }

    #[test]
    fn fenced_shapes_become_calls_and_leave_the_text() {
        let t = "Let me look.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"file_path\": \"a.rs\"}}\n```\nthen\n```tool_call\n[{\"tool\": \"read_file\", \"args\": \"{\\\"file_path\\\":\\\"b\\\"}\"}]\n```\n```rust\nfn x() {}\n```";
        let (text, calls) = extract(t);
        assert_eq!(text, "Let me look.\n\nthen\n\n```rust\nfn x() {}\n```");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, Ok(json!({"file_path": "a.rs"})));
        assert_eq!(calls[1].arguments, Ok(json!({"file_path": "b"})));
        let (_, calls) =
            extract("```json\n{\"function\": {\"name\": \"x\", \"arguments\": {}}}\n```");
        assert_eq!(calls[0].name, "x");
        // Names a tool but is not JSON: a call whose arguments are invalid.
        let (text, calls) =
            extract("```json\n{\"name\": \"read_file\", \"arguments\": {file_path: a}}\n```");
        assert_eq!(text, "");
        assert!(matches!(
            calls[0].arguments,
            Err(ArgumentsError::InvalidJson(_))
        ));
        // A JSON block that is not a call stays text.
        let (text, calls) = extract("```json\n{\"a\": 1}\n```");
        assert!(calls.is_empty() && text.contains("\"a\""));
    }

    #[test]
    fn the_filter_holds_from_the_fence() {
        let mut f = TextFilter::default();
        assert_eq!(f.push("hi `"), "hi ");
        assert_eq!(f.push("x` ``"), "`x` ");
        assert_eq!(f.push("`json\n{\"name\":\"t\",\"arguments\":{}}\n```"), "");
        let (text, calls) = f.finish();
        assert_eq!((text.as_str(), calls.len()), ("", 1));
    }

    #[test]
    fn schema_checks() {
        let b = tools();
        let call = |args: Value| ToolCall {
            id: "c".into(),
            name: "read_file".into(),
            arguments_raw: args.to_string(),
            arguments: Ok(args),
        };
        assert!(check_call(&call(json!({"file_path": "a"})), &b).is_ok());
        assert!(
            check_call(&call(json!({})), &b)
                .unwrap_err()
                .to_string()
                .contains("file_path")
        );
        assert!(check_call(&call(json!({"file_path": 3})), &b).is_err());
        assert!(check_call(&call(json!({"file_path": "a", "x": 1})), &b).is_err());
        assert!(check_call(&call(json!({"file_path": "a", "start_line": 1.5})), &b).is_err());
        let mut c = call(json!({}));
        c.name = "nope".into();
        assert!(check_call(&c, &b).is_err());
    }

    #[test]
    fn local_bodies_and_usage() {
        let b = json!({"model": "r", "provider": {}, "reasoning": {}, "usage": {"include": true},
            "messages": [{"role": "system", "content": "s"}], "tools": [{"type": "function"}]});
        let l = body(&b, "m");
        assert_eq!(l["model"], "m");
        assert!(
            l.get("provider").is_none() && l.get("reasoning").is_none() && l.get("usage").is_none()
        );
        assert!(
            l["messages"][0]["content"]
                .as_str()
                .unwrap()
                .ends_with(TEXT_TOOLS_NOTE)
        );
        let (u, est) = usage(&Usage::default(), &b, "hello world");
        assert!(est && u.prompt_tokens > 0 && u.completion_tokens > 0 && u.cost == 0.0);
        let reported = Usage {
            prompt_tokens: 5,
            total_tokens: 7,
            cost: 1.0,
            ..Usage::default()
        };
        assert_eq!(usage(&reported, &b, "").0.cost, 0.0);
        assert_eq!(
            context_of(&json!({"data": [{"id": "m", "max_model_len": 4096}]}), "m"),
            Some(4096)
        );
        assert_eq!(
            context_of(
                &json!({"data": [{"id": "m", "meta": {"n_ctx_train": 8}}]}),
                "m"
            ),
            Some(8)
        );
    }
}
