//! The check that makes bad arguments a JSON-RPC invalid-params error (ECOSYSTEM-PROTOCOL.md §6)
//! rather than a tool error: the top level of a tool's input schema — required properties present,
//! each given property of its declared JSON type, no unknown property where the schema forbids
//! them. Anything deeper is the component's to judge (its own message comes back as a tool error).

use serde_json::{Map, Value};

/// Why arguments do not fit a tool's input schema (the client is told exactly this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// A required property is absent.
    #[error("{tool}: missing required argument `{name}`")]
    Missing {
        /// The tool.
        tool: String,
        /// The property.
        name: String,
    },
    /// A property is of another JSON type than declared.
    #[error("{tool}: argument `{name}` must be {expected}")]
    Type {
        /// The tool.
        tool: String,
        /// The property.
        name: String,
        /// The declared type(s).
        expected: String,
    },
    /// A property the schema does not declare (it sets `additionalProperties: false`).
    #[error("{tool}: unknown argument `{name}`")]
    Unknown {
        /// The tool.
        tool: String,
        /// The property.
        name: String,
    },
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "string" => v.is_string(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        // A type this check does not know: the component judges.
        _ => true,
    }
}

/// Checks `args` against the top level of `schema`.
pub fn check(
    tool: &str,
    schema: &Map<String, Value>,
    args: &Map<String, Value>,
) -> Result<(), ArgsError> {
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !args.contains_key(name) {
                return Err(ArgsError::Missing {
                    tool: tool.to_string(),
                    name: name.to_string(),
                });
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, value) in args {
        let Some(decl) = props.and_then(|p| p.get(name)) else {
            if closed {
                return Err(ArgsError::Unknown {
                    tool: tool.to_string(),
                    name: name.clone(),
                });
            }
            continue;
        };
        let types: Vec<&str> = match decl.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        if !types.is_empty() && !types.iter().any(|t| is_type(value, t)) {
            return Err(ArgsError::Type {
                tool: tool.to_string(),
                name: name.clone(),
                expected: types.join(" or "),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn required_types_and_unknown_properties() {
        let schema = obj(json!({"type": "object", "additionalProperties": false,
            "required": ["file_path"],
            "properties": {"file_path": {"type": "string"}, "start_line": {"type": "integer"}}}));
        assert_eq!(
            check("read_file", &schema, &obj(json!({"file_path": "a"}))),
            Ok(())
        );
        assert_eq!(
            check("read_file", &schema, &obj(json!({}))).map_err(|e| e.to_string()),
            Err("read_file: missing required argument `file_path`".to_string())
        );
        assert_eq!(
            check("read_file", &schema, &obj(json!({"file_path": 3}))).map_err(|e| e.to_string()),
            Err("read_file: argument `file_path` must be string".to_string())
        );
        assert_eq!(
            check(
                "read_file",
                &schema,
                &obj(json!({"file_path": "a", "start_line": 1.5}))
            )
            .map_err(|e| e.to_string()),
            Err("read_file: argument `start_line` must be integer".to_string())
        );
        assert_eq!(
            check(
                "read_file",
                &schema,
                &obj(json!({"file_path": "a", "x": 1}))
            )
            .map_err(|e| e.to_string()),
            Err("read_file: unknown argument `x`".to_string())
        );
    }
}
