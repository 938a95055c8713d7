//! Tool calls arrive as fragments keyed by `index`; providers differ (some repeat `id` and `name` on
//! every fragment, some send a whole call at once). This assembles them and parses the arguments
//! only when the call is complete.

use std::collections::BTreeMap;

use serde_json::Value;

/// A complete tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's call id (`call_<index>` when none was sent).
    pub id: String,
    /// The tool's name (empty when none was sent).
    pub name: String,
    /// The arguments exactly as the model produced them.
    pub arguments_raw: String,
    /// The parsed arguments, or why they are not a JSON object (reported to the model as a tool
    /// error, never a crash).
    pub arguments: Result<Value, ArgumentsError>,
}

/// Why a tool call's arguments are not usable: the model reads this as the call's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    /// Valid JSON, but not an object.
    #[error("the arguments are not a JSON object")]
    NotAnObject,
    /// Not JSON at all; serde_json's message (kept as text so a call stays `Clone` and comparable).
    #[error("the arguments are not valid JSON: {0}")]
    InvalidJson(String),
}

impl ArgumentsError {
    /// The error of arguments that failed to parse.
    pub fn invalid_json(e: &serde_json::Error) -> ArgumentsError {
        ArgumentsError::InvalidJson(e.to_string())
    }
}

#[derive(Debug, Default)]
struct Partial {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// The most tool calls one model response may make; the calls past it (by order of arrival) are
/// not assembled, only counted (see [`ToolCallAssembler::dropped`]).
pub const MAX_TOOL_CALLS_PER_STEP: usize = 64;

/// Collects fragments by index, keeping at most [`MAX_TOOL_CALLS_PER_STEP`] calls.
#[derive(Debug, Default)]
pub struct ToolCallAssembler {
    calls: BTreeMap<u64, Partial>,
    dropped: std::collections::HashSet<u64>,
}

impl ToolCallAssembler {
    /// Adds one fragment. A repeated id or name replaces nothing (the first one stands); argument
    /// fragments are appended in arrival order.
    pub fn push(&mut self, index: u64, id: Option<String>, name: Option<String>, arguments: &str) {
        if !self.calls.contains_key(&index) && self.calls.len() >= MAX_TOOL_CALLS_PER_STEP {
            // Past the cap: counted once, its fragments never kept (a response of 200,000 calls
            // costs a set of indices, not 200,000 calls).
            self.dropped.insert(index);
            return;
        }
        let p = self.calls.entry(index).or_default();
        if p.id.is_none() {
            p.id = id;
        }
        if p.name.is_none() {
            p.name = name;
        }
        p.arguments.push_str(arguments);
    }

    /// How many calls past [`MAX_TOOL_CALLS_PER_STEP`] were left out.
    pub fn dropped(&self) -> usize {
        self.dropped.len()
    }

    /// The complete calls, in index order.
    pub fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .map(|(index, p)| {
                let raw = p.arguments;
                let arguments = if raw.trim().is_empty() {
                    Ok(Value::Object(Default::default()))
                } else {
                    match serde_json::from_str::<Value>(&raw) {
                        Ok(v @ Value::Object(_)) => Ok(v),
                        Ok(_) => Err(ArgumentsError::NotAnObject),
                        Err(e) => Err(ArgumentsError::invalid_json(&e)),
                    }
                };
                ToolCall {
                    id: p.id.unwrap_or_else(|| format!("call_{index}")),
                    name: p.name.unwrap_or_default(),
                    arguments_raw: raw,
                    arguments,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_repeated_and_whole_calls() {
        let mut a = ToolCallAssembler::default();
        a.push(1, Some("b".into()), Some("write_file".into()), "{\"path\":");
        a.push(0, Some("a".into()), Some("edit_file".into()), "{\"edits\"");
        a.push(
            1,
            Some("b".into()),
            Some("write_file".into()),
            "\"x\",\"content\":\"y\"}",
        );
        a.push(0, None, None, ":[]}");
        a.push(
            2,
            Some("c".into()),
            Some("write_file".into()),
            "{\"path\":\"z\",\"content\":\"\"}",
        );
        a.push(
            3,
            Some("d".into()),
            Some("write_file".into()),
            "{\"path\": oops",
        );
        let calls = a.finish();
        assert_eq!(
            calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            calls[0].arguments.as_ref().unwrap()["edits"],
            serde_json::json!([])
        );
        assert_eq!(calls[1].arguments.as_ref().unwrap()["path"], "x");
        assert!(matches!(
            calls[3].arguments,
            Err(ArgumentsError::InvalidJson(_))
        ));
        assert!(
            calls[3]
                .arguments
                .as_ref()
                .unwrap_err()
                .to_string()
                .starts_with("the arguments are not valid JSON: ")
        );
        assert_eq!(calls[3].arguments_raw, "{\"path\": oops");
    }

    #[test]
    fn calls_past_the_cap_are_counted_not_kept() {
        let mut a = ToolCallAssembler::default();
        for i in 0..(MAX_TOOL_CALLS_PER_STEP as u64 + 10) {
            a.push(i, Some(format!("c{i}")), Some("list_files".into()), "{");
            a.push(i, None, None, "}");
        }
        // A late fragment of a kept call still lands.
        a.push(0, None, None, " ");
        assert_eq!(a.dropped(), 10);
        let calls = a.finish();
        assert_eq!(calls.len(), MAX_TOOL_CALLS_PER_STEP);
        assert_eq!(calls[0].arguments_raw, "{} ");
    }
}
