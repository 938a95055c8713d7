//! The event each point hands its hooks (besides `point` and `project`, which [`super::check`]
//! adds). Documented for hook authors in `doc/components.md`, Hooks. Large texts are cut to
//! [`MAX_TEXT`] bytes and say so (`…_truncated: true`).

use serde_json::{Map, Value, json};

use crate::llm::tool_calls::ToolCall;

/// The most bytes of a tool result (`post_tool_call`) or a file (`pre_apply`) an event carries.
pub const MAX_TEXT: usize = 64 << 10;

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `text` cut to [`MAX_TEXT`] bytes at a character boundary, and whether it was cut.
fn excerpt(text: &str) -> (&str, bool) {
    if text.len() <= MAX_TEXT {
        return (text, false);
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// What a send is about to ask the model.
pub struct Send<'a> {
    /// The model.
    pub model: &'a str,
    /// `chat` or `agent`.
    pub mode: &'a str,
    /// The chat's context files (project-relative paths, or external absolute ones).
    pub context: Vec<String>,
    /// The prompt's tokens, estimated (the system message, context, history and the new message).
    pub estimated_tokens: u64,
    /// Their cost in USD at the model's listed prompt price, when the price is known.
    pub estimated_cost_usd: Option<f64>,
}

/// `pre_send`: `{model, mode, context, estimated_tokens, estimated_cost_usd}`.
pub fn pre_send(s: Send<'_>) -> Map<String, Value> {
    object(json!({
        "model": s.model,
        "mode": s.mode,
        "context": s.context,
        "estimated_tokens": s.estimated_tokens,
        "estimated_cost_usd": s.estimated_cost_usd,
    }))
}

/// `pre_tool_call`: `{tool, component, arguments}` — `component` is the third-party component's
/// name (`null` for a built-in tool); `arguments` the parsed object, or the raw text when it is not
/// JSON.
pub fn pre_tool_call(call: &ToolCall, component: Option<&str>) -> Map<String, Value> {
    let arguments = match &call.arguments {
        Ok(v) => v.clone(),
        Err(_) => Value::String(call.arguments_raw.clone()),
    };
    object(json!({"tool": call.name, "component": component, "arguments": arguments}))
}

/// `post_tool_call`: `{tool, component, ok, result, result_truncated}` — `result` is what the
/// model would read (cut to [`MAX_TEXT`] bytes).
pub fn post_tool_call(
    call: &ToolCall,
    component: Option<&str>,
    ok: bool,
    result: &str,
) -> Map<String, Value> {
    let (result, cut) = excerpt(result);
    object(json!({
        "tool": call.name,
        "component": component,
        "ok": ok,
        "result": result,
        "result_truncated": cut,
    }))
}

/// What an apply is about to write.
pub enum Apply<'a> {
    /// The whole proposed file (`apply_file`, `apply_file_as` with its `destination`).
    File {
        /// Where it would be written, relative to the project.
        destination: &'a str,
        /// The file's proposed bytes.
        content: &'a [u8],
    },
    /// Hunks of it (`apply_hunks`): their ids, and the proposed file they come from.
    Hunks {
        /// The hunk ids.
        ids: &'a [String],
        /// The whole proposed file.
        content: &'a [u8],
    },
}

/// `pre_apply`: `{path, destination, content, content_truncated}` for a whole file, `{path,
/// hunks, content, content_truncated}` for hunks (`content` is the proposed file, as text).
pub fn pre_apply(path: &str, what: Apply<'_>) -> Map<String, Value> {
    let (key, extra, content) = match what {
        Apply::File {
            destination,
            content,
        } => ("destination", json!(destination), content),
        Apply::Hunks { ids, content } => ("hunks", json!(ids), content),
    };
    let text = String::from_utf8_lossy(content);
    let (content, cut) = excerpt(&text);
    let mut m = object(json!({
        "path": path,
        "content": content,
        "content_truncated": cut,
    }));
    m.insert(key.into(), extra);
    m
}
