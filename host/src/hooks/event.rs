//! The event each point hands its hooks (besides `point` and `project`, which [`super::check`]
//! adds). Documented for hook authors in `doc/components.md`, Hooks. Texts are passed whole: a tool
//! result is what the model would read (already within the tool's result limit), a file what the
//! apply would write, so a hook sees every byte it is asked to judge.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::chat::paths::{self, ClientPath};
use crate::llm::tool_calls::ToolCall;

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
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

/// `pre_tool_call`: `{tool, component, arguments, paths}` — `component` is the third-party
/// component's name (`null` for a built-in tool); `arguments` the parsed object, or the raw text
/// when it is not JSON; `paths` the paths the call names (`path`, each `edits[].path`) resolved as
/// the write tools resolve them against `project`: project-relative, `.`/`..` and an absolute
/// prefix inside the project removed; an absolute path outside it stays absolute (normalised); a
/// path that does not resolve is left out (the tool refuses it). `named` is what the arguments
/// name as paths (the agent's `arg_paths`: hooks sit below the agent and do not read its tools).
pub fn pre_tool_call(
    call: &ToolCall,
    component: Option<&str>,
    project: &Path,
    named: &[String],
) -> Map<String, Value> {
    let (arguments, resolved) = match &call.arguments {
        Ok(v) => (v.clone(), resolved_paths(named, project)),
        Err(_) => (Value::String(call.arguments_raw.clone()), Vec::new()),
    };
    object(json!({
        "tool": call.name,
        "component": component,
        "arguments": arguments,
        "paths": resolved,
    }))
}

/// The paths `named`, resolved against `project` (see [`pre_tool_call`]).
fn resolved_paths(named: &[String], project: &Path) -> Vec<String> {
    named
        .iter()
        .filter_map(|raw| match paths::classify(raw, Some(project)) {
            Ok(ClientPath::Internal(p) | ClientPath::External(p)) => Some(p),
            Err(_) => None,
        })
        .collect()
}

/// `post_tool_call`: `{tool, component, ok, result, result_truncated}` — `result` is the whole text
/// the model would read; `result_truncated` is always `false` (kept for hooks that read it).
pub fn post_tool_call(
    call: &ToolCall,
    component: Option<&str>,
    ok: bool,
    result: &str,
) -> Map<String, Value> {
    object(json!({
        "tool": call.name,
        "component": component,
        "ok": ok,
        "result": result,
        "result_truncated": false,
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
/// hunks, content, content_truncated}` for hunks (`content` is the whole proposed file, as text;
/// `content_truncated` is always `false`, kept for hooks that read it).
pub fn pre_apply(path: &str, what: Apply<'_>) -> Map<String, Value> {
    let (key, extra, content) = match what {
        Apply::File {
            destination,
            content,
        } => ("destination", json!(destination), content),
        Apply::Hunks { ids, content } => ("hunks", json!(ids), content),
    };
    let content = String::from_utf8_lossy(content);
    let mut m = object(json!({
        "path": path,
        "content": content,
        "content_truncated": false,
    }));
    m.insert(key.into(), extra);
    m
}
