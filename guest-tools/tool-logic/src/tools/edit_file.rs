//! PLACEHOLDER: being written.
use serde_json::{json, Value};
use crate::{Root, Settings, ToolError};
use super::ToolInfo;
pub fn describe(_s: &Settings) -> ToolInfo {
    ToolInfo { name: "edit_file".into(), description: "placeholder".into(), parameters: json!({"type":"object","properties":{}}) }
}
pub fn call(_root: &Root, _s: &Settings, args: &str) -> Result<Value, ToolError> {
    let v: Value = super::parse_args("edit_file", args)?;
    Ok(json!({"echo": v}))
}
