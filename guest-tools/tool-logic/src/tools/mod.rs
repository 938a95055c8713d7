//! The five built-in tools at the JSON level: what each tells the model ([`describe`]) and what a
//! call does ([`call`]). A component forwards its WIT `describe`/`call` here unchanged.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ToolError;
use crate::paths::Root;
use crate::settings::Settings;

pub mod edit_file;
pub mod list_files;
pub mod read_file;
pub mod search_project;
pub mod write_file;

/// What the host hands the model for one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The function name the model calls (`write_file`, …).
    pub name: String,
    /// What the tool does and when to use it, written for the model.
    pub description: String,
    /// JSON Schema (an object schema) of the arguments.
    pub parameters: Value,
}

/// The names of the built-in tools, in the order they are offered.
pub const BUILTIN: [&str; 5] = [
    "write_file",
    "edit_file",
    "search_project",
    "read_file",
    "list_files",
];

/// Describes built-in tool `tool` under `settings` (the `edit_file` schema follows `diff_mode`).
pub fn describe(tool: &str, settings: &Settings) -> Option<ToolInfo> {
    Some(match tool {
        "write_file" => write_file::describe(settings),
        "edit_file" => edit_file::describe(settings),
        "search_project" => search_project::describe(settings),
        "read_file" => read_file::describe(settings),
        "list_files" => list_files::describe(settings),
        _ => return None,
    })
}

/// Runs built-in tool `tool` with JSON `args` against `root`; returns the JSON result.
pub fn call(tool: &str, root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    match tool {
        "write_file" => write_file::call(root, settings, args),
        "edit_file" => edit_file::call(root, settings, args),
        "search_project" => search_project::call(root, settings, args),
        "read_file" => read_file::call(root, settings, args),
        "list_files" => list_files::call(root, settings, args),
        _ => Err(ToolError::invalid(format!("unknown tool: {tool}"))),
    }
}

/// Parses a tool's JSON arguments, turning serde's message into one the model can act on.
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: &str) -> Result<T, ToolError> {
    serde_json::from_str(args)
        .map_err(|e| ToolError::invalid(format!("{tool}: invalid arguments: {e}")))
}
