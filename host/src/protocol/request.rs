//! A parsed request: its id, action and fields, with accessors that produce the protocol's error
//! texts (`Missing required field: X`, …).

use serde_json::{Map, Value};

/// A request line, parsed.
#[derive(Debug)]
pub struct Request {
    /// Echoed back as a string (`42` → `"42"`); absent when the request had none.
    pub id: Option<String>,
    /// The `action` field, never empty: which handler runs.
    pub action: String,
    /// Every other field of the request object (`request_id` and `action` removed).
    pub fields: Map<String, Value>,
}

/// Why a line is not a request: the error reply to send (with the id, when one could be read).
#[derive(Debug)]
pub struct BadRequest {
    /// The request's id, when one could be read.
    pub id: Option<String>,
    /// The error reply's message (`Invalid JSON`, `Missing required field: action`, …).
    pub message: String,
}

/// Why a field of a request is not usable; the text is the client's error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// A required field is absent, null or (for `nonempty`) empty.
    #[error("Missing required field: {0}")]
    Missing(String),
    /// A field of the wrong type; `expected` says what it should be.
    #[error("Invalid field: {name} (expected {expected})")]
    Invalid {
        /// The field.
        name: String,
        /// What it should be ("a string", "true or false", …).
        expected: &'static str,
    },
    /// `project_root` that is not an absolute path.
    #[error("Invalid field: project_root must be an absolute path, got {0}")]
    RelativeRoot(String),
    /// `start_line`/`end_line` that are not a 1-based range.
    #[error("Invalid line range {start}-{end} (lines are 1-based and start_line <= end_line)")]
    LineRange {
        /// The first line given.
        start: u64,
        /// The last line given.
        end: u64,
    },
}

impl FieldError {
    fn invalid(name: &str, expected: &'static str) -> FieldError {
        FieldError::Invalid {
            name: name.to_string(),
            expected,
        }
    }
}

impl Request {
    /// Parses one line.
    pub fn parse(line: &[u8]) -> Result<Request, BadRequest> {
        let invalid = |id| BadRequest {
            id,
            message: "Invalid JSON".into(),
        };
        let value: Value = serde_json::from_slice(line).map_err(|_| invalid(None))?;
        let Value::Object(mut fields) = value else {
            return Err(invalid(None));
        };
        let id = match fields.remove("request_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => Some(other.to_string()),
        };
        let action = match fields.remove("action") {
            Some(Value::String(a)) if !a.is_empty() => a,
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(BadRequest {
                    id,
                    message: "Missing required field: action".into(),
                });
            }
            Some(_) => {
                return Err(BadRequest {
                    id,
                    message: "Invalid field: action (expected a string)".into(),
                });
            }
        };
        Ok(Request { id, action, fields })
    }

    /// A required string field.
    pub fn str(&self, name: &str) -> Result<&str, FieldError> {
        match self.fields.get(name) {
            Some(Value::String(s)) => Ok(s),
            None | Some(Value::Null) => Err(FieldError::Missing(name.to_string())),
            Some(_) => Err(FieldError::invalid(name, "a string")),
        }
    }

    /// A required, non-empty string field.
    pub fn nonempty(&self, name: &str) -> Result<&str, FieldError> {
        match self.str(name)? {
            "" => Err(FieldError::Missing(name.to_string())),
            s => Ok(s),
        }
    }

    /// An optional string field.
    pub fn opt_str(&self, name: &str) -> Result<Option<&str>, FieldError> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(FieldError::invalid(name, "a string")),
        }
    }

    /// An optional boolean field (false when absent).
    pub fn flag(&self, name: &str) -> Result<bool, FieldError> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(FieldError::invalid(name, "true or false")),
        }
    }

    /// A required boolean field.
    pub fn bool(&self, name: &str) -> Result<bool, FieldError> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Err(FieldError::Missing(name.to_string())),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(FieldError::invalid(name, "true or false")),
        }
    }

    /// A required non-negative integer field.
    pub fn uint(&self, name: &str) -> Result<u64, FieldError> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Err(FieldError::Missing(name.to_string())),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| FieldError::invalid(name, "a non-negative integer")),
        }
    }

    /// A list of strings (`hunk_ids`); `required` makes a missing one an error, else it is empty.
    pub fn string_list(&self, name: &str, required: bool) -> Result<Vec<String>, FieldError> {
        let invalid = || FieldError::invalid(name, "a list of strings");
        match self.fields.get(name) {
            None | Some(Value::Null) if !required => Ok(Vec::new()),
            None | Some(Value::Null) => Err(FieldError::Missing(name.to_string())),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(invalid))
                .collect(),
            Some(_) => Err(invalid()),
        }
    }

    /// `start_line` and `end_line`: a 1-based range with `start_line <= end_line`.
    pub fn line_range(&self) -> Result<(u64, u64), FieldError> {
        let start = self.uint("start_line")?;
        let end = self.uint("end_line")?;
        if start == 0 || end < start {
            return Err(FieldError::LineRange { start, end });
        }
        Ok((start, end))
    }

    /// `global: true` on the request.
    pub fn global(&self) -> Result<bool, FieldError> {
        self.flag("global")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(line: &str) -> Request {
        Request::parse(line.as_bytes()).unwrap()
    }

    /// The field errors are the client's messages, typed below the edge and unchanged in text.
    #[test]
    fn field_errors_keep_their_texts() {
        let r = req(
            r#"{"action":"x","s":1,"b":"no","n":-1,"e":"","l":[1],"start_line":3,"end_line":2,"project_root":"rel"}"#,
        );
        let text = |e: FieldError| e.to_string();
        assert_eq!(
            text(r.str("missing").unwrap_err()),
            "Missing required field: missing"
        );
        assert_eq!(
            text(r.str("s").unwrap_err()),
            "Invalid field: s (expected a string)"
        );
        assert_eq!(
            text(r.nonempty("e").unwrap_err()),
            "Missing required field: e"
        );
        assert_eq!(
            text(r.flag("b").unwrap_err()),
            "Invalid field: b (expected true or false)"
        );
        assert_eq!(
            text(r.uint("n").unwrap_err()),
            "Invalid field: n (expected a non-negative integer)"
        );
        assert_eq!(
            text(r.string_list("l", true).unwrap_err()),
            "Invalid field: l (expected a list of strings)"
        );
        assert_eq!(
            text(r.string_list("none", true).unwrap_err()),
            "Missing required field: none"
        );
        assert_eq!(r.string_list("none", false), Ok(Vec::new()));
        assert_eq!(
            text(r.line_range().unwrap_err()),
            "Invalid line range 3-2 (lines are 1-based and start_line <= end_line)"
        );
        assert_eq!(
            text(FieldError::RelativeRoot("rel".into())),
            "Invalid field: project_root must be an absolute path, got rel"
        );
    }
}
