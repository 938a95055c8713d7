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
    pub arguments: Result<Value, String>,
}

#[derive(Debug, Default)]
struct Partial {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Collects fragments by index.
#[derive(Debug, Default)]
pub struct ToolCallAssembler {
    calls: BTreeMap<u64, Partial>,
}

impl ToolCallAssembler {
    /// Adds one fragment. A repeated id or name replaces nothing (the first one stands); argument
    /// fragments are appended in arrival order.
    pub fn push(&mut self, index: u64, id: Option<String>, name: Option<String>, arguments: &str) {
        let p = self.calls.entry(index).or_default();
        if p.id.is_none() {
            p.id = id;
        }
        if p.name.is_none() {
            p.name = name;
        }
        p.arguments.push_str(arguments);
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
                        Ok(_) => Err("the arguments are not a JSON object".to_string()),
                        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
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
        assert!(
            calls[3]
                .arguments
                .as_ref()
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert_eq!(calls[3].arguments_raw, "{\"path\": oops");
    }
}
