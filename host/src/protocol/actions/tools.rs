//! `tools_list`, `tool_set_enabled`, `tool_grant`, `tool_revoke` (AGENT-PROTOCOL.md §4): the tools
//! the model may be offered, built-in and third-party, and the user's approvals. Each verb does
//! what its `bb7 tools` counterpart does (and rewrites the project's lockfile); each replies with
//! the updated list.

use serde_json::{Value, json};

use super::Handled;
use crate::components::error::ComponentError;
use crate::components::installed::{Status, function_name};
use crate::components::manage;
use crate::components::manifest::{Capabilities, Files};
use crate::protocol::reply;
use crate::protocol::request::Request;
use crate::sandbox::registry::{BUILTIN_COMPONENTS, builtin_policy};
use crate::workspace::Workspace;

pub fn list(s: &Workspace) -> Handled {
    tools_reply(s)
}

pub fn set_enabled(s: &Workspace, req: &Request) -> Handled {
    let name = component_name(s, req.nonempty("name")?)?;
    let enabled = req.bool("enabled")?;
    let project = s.project_or("enabling a tool is per project; open one first")?;
    manage::set_enabled(&name, project.root(), enabled).map_err(text)?;
    tools_reply(s)
}

pub fn grant(s: &Workspace, req: &Request) -> Handled {
    let name = component_name(s, req.nonempty("name")?)?;
    let files = req.opt_str("files")?;
    let network = string_list(req, "network")?;
    let env = string_list(req, "env")?;
    let http = string_list(req, "http")?;
    let caps = if files.is_none() && network.is_none() && env.is_none() && http.is_none() {
        None
    } else {
        Some(Capabilities {
            files: files
                .map(Files::parse)
                .transpose()
                .map_err(|e| e.to_string())?
                .unwrap_or_default(),
            network: network.unwrap_or_default(),
            env: env.unwrap_or_default(),
            http: http.unwrap_or_default(),
        })
    };
    if let Some(shown) = req.opt_str("sha256")? {
        let installed = manage::statuses(project(s))
            .map_err(text)?
            .into_iter()
            .find(|st| st.name == name)
            .map(|st| st.installed.sha256)
            .unwrap_or_default();
        if installed != shown {
            return Err(format!(
                "{name} changed since it was shown (sha256 {installed}, shown {shown}); nothing was granted — review it again"
            ));
        }
    }
    manage::grant(&name, caps, project(s)).map_err(text)?;
    tools_reply(s)
}

pub fn revoke(s: &Workspace, req: &Request) -> Handled {
    let name = component_name(s, req.nonempty("name")?)?;
    manage::revoke(&name, project(s)).map_err(text)?;
    tools_reply(s)
}

/// A component error as the client is told it.
fn text(e: ComponentError) -> String {
    e.to_string()
}

fn project(s: &Workspace) -> Option<&std::path::Path> {
    s.project.as_ref().map(|p| p.root())
}

/// Why a tools verb refuses its request before anything changes.
#[derive(Debug, thiserror::Error)]
enum VerbError {
    /// The name is a built-in tool's.
    #[error("{0} is a built-in tool: it is always available and its sandbox is fixed")]
    Builtin(String),
    /// No installed component has the name (as component or as tool).
    #[error("No tool component named {0:?} is installed")]
    NotInstalled(String),
    /// A list field holds something other than strings.
    #[error("Invalid field: {0} must be a list of strings")]
    NotStringList(String),
    /// Reading the installed components failed.
    #[error(transparent)]
    Component(#[from] ComponentError),
}

/// The protocol edge's message.
impl From<VerbError> for String {
    fn from(e: VerbError) -> String {
        e.to_string()
    }
}

/// A list of strings field, if present.
fn string_list(req: &Request, field: &str) -> Result<Option<Vec<String>>, VerbError> {
    match req.fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| VerbError::NotStringList(field.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(VerbError::NotStringList(field.to_string())),
    }
}

/// The installed component a request names, by component name or by the model's tool name.
fn component_name(s: &Workspace, name: &str) -> Result<String, VerbError> {
    if BUILTIN_COMPONENTS.iter().any(|c| c.tool == name) {
        return Err(VerbError::Builtin(name.to_string()));
    }
    let statuses = manage::statuses(project(s))?;
    statuses
        .iter()
        .find(|st| {
            st.name == name
                || st
                    .installed
                    .offered_tools()
                    .iter()
                    .any(|t| function_name(&st.name, &t.name) == name)
        })
        .map(|st| st.name.clone())
        .ok_or_else(|| VerbError::NotInstalled(name.to_string()))
}

fn function(st: &Status) -> Option<String> {
    // A generic component offers several tools; the first names it here.
    st.installed
        .offered_tools()
        .first()
        .map(|t| function_name(&st.name, &t.name))
}

/// Every tool a component offers, as the model calls it (`<component>__<function>`), with its
/// description (a generic component offers one per exported function).
fn offered_json(st: &Status) -> Vec<Value> {
    st.installed
        .offered_tools()
        .iter()
        .map(|t| {
            json!({
                "name": function_name(&st.name, &t.name),
                "export": t.export,
                "description": t.description,
                "undocumented": t.undocumented,
            })
        })
        .collect()
}

fn tools_reply(s: &Workspace) -> Handled {
    let mut tools: Vec<Value> = BUILTIN_COMPONENTS
        .iter()
        .map(|c| {
            let files = match builtin_policy(c.tool).access {
                crate::sandbox::Access::ReadWrite => Files::OutputWrite,
                crate::sandbox::Access::ReadOnly => Files::ProjectRead,
            };
            let caps = Capabilities {
                files,
                ..Capabilities::default()
            };
            json!({
                "name": c.tool,
                "component": c.tool,
                "sha256": c.sha256,
                "source": "builtin",
                "requested": caps,
                "granted": caps,
                "enabled": true,
            })
        })
        .collect();
    let approved = manage::grant_shas().map_err(text)?;
    for st in manage::statuses(project(s)).map_err(text)? {
        let i = &st.installed;
        let l = i.effective_limits();
        tools.push(json!({
            "name": function(&st).unwrap_or_else(|| match i.is_hook() {
                true => st.name.clone(),
                false => format!("{}__?", st.name),
            }),
            "component": st.name,
            "kind": if i.is_hook() { "hook" } else { "tool" },
            "hook": i.hook,
            "sha256": i.sha256,
            "source": "third-party",
            "requested": i.requested,
            "granted": st.granted,
            "grant_stale": st.grant_stale,
            "enabled": st.enabled,
            "state": st.state(),
            "version": i.version,
            "description": i.description,
            "wit": i.wit,
            "tools": offered_json(&st),
            "skipped": i.skipped.iter().map(|k| json!({"export": k.export, "reason": k.reason})).collect::<Vec<_>>(),
            "approved_sha256": approved.get(&st.name),
            "limits": {
                "memory_bytes": l.memory_bytes,
                "wall_time_ms": l.wall_time.as_millis() as u64,
                "result_bytes": l.result_bytes,
            },
        }));
    }
    Ok(reply("tools", json!({"tools": tools})))
}
