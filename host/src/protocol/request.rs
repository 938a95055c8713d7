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
    pub fn str(&self, name: &str) -> Result<&str, String> {
        match self.fields.get(name) {
            Some(Value::String(s)) => Ok(s),
            None | Some(Value::Null) => Err(format!("Missing required field: {name}")),
            Some(_) => Err(format!("Invalid field: {name} (expected a string)")),
        }
    }

    /// A required, non-empty string field.
    pub fn nonempty(&self, name: &str) -> Result<&str, String> {
        match self.str(name)? {
            "" => Err(format!("Missing required field: {name}")),
            s => Ok(s),
        }
    }

    /// An optional string field.
    pub fn opt_str(&self, name: &str) -> Result<Option<&str>, String> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("Invalid field: {name} (expected a string)")),
        }
    }

    /// An optional boolean field (false when absent).
    pub fn flag(&self, name: &str) -> Result<bool, String> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("Invalid field: {name} (expected true or false)")),
        }
    }

    /// A required boolean field.
    pub fn bool(&self, name: &str) -> Result<bool, String> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Err(format!("Missing required field: {name}")),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("Invalid field: {name} (expected true or false)")),
        }
    }

    /// A required non-negative integer field.
    pub fn uint(&self, name: &str) -> Result<u64, String> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Err(format!("Missing required field: {name}")),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| format!("Invalid field: {name} (expected a non-negative integer)")),
        }
    }

    /// `global: true` on the request.
    pub fn global(&self) -> Result<bool, String> {
        self.flag("global")
    }
}
