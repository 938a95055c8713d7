//! PLACEHOLDER: being written.
use serde_json::{json, Value};
use crate::{Root, Settings, ToolError};
use super::ToolInfo;
pub fn describe(_s: &Settings) -> ToolInfo {
    ToolInfo { name: "search_project".into(), description: "placeholder".into(), parameters: json!({"type":"object","properties":{}}) }
}
pub fn call(_root: &Root, _s: &Settings, args: &str) -> Result<Value, ToolError> {
    let v: Value = super::parse_args("search_project", args)?;
    Ok(json!({"echo": v}))
}
