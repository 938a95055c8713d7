//! The retrieval tools of agent mode (`search_project`, `read_file`, `list_files`): each call runs
//! its built-in component in the sandbox with the project root granted read-only (or, for a file
//! this reply already staged, the staging directory read-only), and its result is shaped into the
//! text the model reads.
//!
//! Beyond what the components enforce (no `.git/`, `.bb7/` in any case, ignored or deny-listed
//! files, no symbolic links anywhere on a path), the host refuses files with more than one hard
//! link: a hard link inside the project may be the same file as one outside it. The host's own
//! look at a file (its link count, the bytes its id is computed from) walks the path one component
//! at a time without following links too.

use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, MetadataExt as _};
use serde_json::{Value, json};

use super::builtin::BuiltinTool;
use super::error::AgentError;
use super::tools::ToolRunner;
use crate::llm::tool_calls::ToolCall;
use crate::sandbox::{Access, CallRecord, Grant};

/// The project as the retrieval tools see it.
pub struct Project {
    /// The project's root directory on the host.
    pub root: PathBuf,
    dir: Dir,
    grant: Grant,
    settings: Vec<(String, String)>,
}

impl Project {
    /// Opens `root` and grants it read-only, with `settings` (limits and deny list) for every call.
    pub fn open(root: &Path, settings: Vec<(String, String)>) -> Result<Project, AgentError> {
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority()).map_err(|e| {
            AgentError::Project(format!("Cannot open the project {}: {e}", root.display()))
        })?;
        let grant = Grant::new(root, Access::ReadOnly).map_err(|e| {
            AgentError::Project(format!("Cannot grant the project {}: {e}", root.display()))
        })?;
        Ok(Project {
            root: root.to_path_buf(),
            dir,
            grant,
            settings,
        })
    }

    /// The settings every retrieval call gets (limits and the deny list).
    pub fn settings(&self) -> &[(String, String)] {
        &self.settings
    }

    /// Whether `rel` is a regular file with more than one hard link (never read by the tools).
    /// Looked at from its directory opened link by link (a path that crosses a link is not a file
    /// the tools read at all).
    fn hard_linked(&self, rel: &str) -> bool {
        self.parent(rel)
            .and_then(|(dir, name)| dir.symlink_metadata(name))
            .map(|m| m.is_file() && m.nlink() > 1)
            .unwrap_or(false)
    }

    /// The directory holding `rel`, opened one component at a time without following a link, and
    /// the file's name in it. `.git`/`.bb7` components (in any case) are refused.
    fn parent<'a>(&self, rel: &'a str) -> std::io::Result<(Dir, &'a str)> {
        let parts = crate::store::project::check_rel(rel)?;
        crate::store::project::parent_nofollow(&self.dir, parts, false)
    }

    /// The bytes of regular file `rel`, reached without following any link: the same file the
    /// component read, or an error (never the target of a link swapped in since).
    fn read(&self, rel: &str) -> std::io::Result<Vec<u8>> {
        let (dir, name) = self.parent(rel)?;
        crate::store::read_regular_nofollow(&dir, name)
    }
}

/// What one call produced.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    /// Whether the call succeeded.
    pub ok: bool,
    /// What the model reads.
    pub content: String,
    /// One line for the event log (`src/a.rs lines 1-40 of 40`, `3 results`).
    pub summary: String,
    /// Why the call failed; `None` when it succeeded.
    pub error: Option<String>,
    /// The sandbox's record of the call; `None` when it never reached the sandbox.
    pub record: Option<CallRecord>,
}

impl CallOutcome {
    /// A failed call: the model reads the error.
    pub fn failed(error: String, record: Option<CallRecord>) -> CallOutcome {
        CallOutcome {
            ok: false,
            content: format!("error: {error}"),
            summary: "error".into(),
            error: Some(error),
            record,
        }
    }
}

/// Runs one retrieval call (blocking).
pub fn run(runner: &mut ToolRunner, project: &Project, call: &ToolCall) -> CallOutcome {
    let tool = call.name.as_str();
    let args = match &call.arguments {
        Ok(a) => a.clone(),
        Err(e) => return CallOutcome::failed(format!("{tool}: invalid arguments: {e}"), None),
    };
    let which = match BuiltinTool::parse(tool) {
        Some(t) if t.kind() == super::builtin::ToolKind::Retrieval => t,
        _ => return CallOutcome::failed(format!("{tool} is not a retrieval tool"), None),
    };
    let sandbox = match runner.sandbox() {
        Ok(s) => s,
        Err(e) => return CallOutcome::failed(format!("{tool}: {e}"), None),
    };
    let component = match sandbox.registry().builtin(tool) {
        Ok(c) => c,
        Err(e) => {
            return CallOutcome::failed(format!("{tool}: the tool is unavailable: {e:#}"), None);
        }
    };
    match which {
        BuiltinTool::ReadFile => {
            let raw = args.get("file_path").and_then(Value::as_str).unwrap_or("");
            // A path the component will reject gets the component's own message.
            let rel = runner.project_path(tool, raw).ok();
            let staged = rel.as_deref().is_some_and(|r| runner.stage_for_read(r));
            // Changed by this reply, or the chat's own version (output or context snapshot).
            let source = match rel.as_deref() {
                Some(r) if runner.touched().iter().any(|t| t.path == r) => "this_reply",
                _ if staged => "chat",
                _ => "project",
            };
            let grant = if staged {
                match Grant::new(runner.staging_path(), Access::ReadOnly) {
                    Ok(g) => g,
                    Err(e) => {
                        return CallOutcome::failed(
                            format!("read_file: cannot grant staging: {e}"),
                            None,
                        );
                    }
                }
            } else {
                if let Some(r) = rel.as_deref().filter(|r| project.hard_linked(r)) {
                    return CallOutcome::failed(
                        format!(
                            "read_file: `{r}` has several hard links (it may be the same file as one outside the project), so tools do not read it"
                        ),
                        None,
                    );
                }
                project.grant.clone()
            };
            let (result, record) =
                sandbox.call(&component, &grant, &project.settings, &call.arguments_raw);
            let value = match result {
                Ok(v) => v,
                Err(e) => return CallOutcome::failed(prefixed(tool, &e.to_string()), Some(record)),
            };
            let path = value
                .get("file_path")
                .and_then(Value::as_str)
                .unwrap_or(raw)
                .to_string();
            // The id of the whole file, which edit_file asks for; the whole file becomes the base.
            let whole = if staged {
                runner.staged(&path)
            } else {
                project.read(&path).ok()
            };
            let file_id = whole
                .as_ref()
                .filter(|b| std::str::from_utf8(b).is_ok())
                .map(|b| bb7_tool_logic::file_id::file_id(&path, b));
            if let (false, Some(bytes), Some(_)) = (staged, whole, &file_id) {
                runner.note_project_read(&path, bytes);
            }
            read_outcome(&path, file_id.as_deref(), source, &value, record)
        }
        BuiltinTool::SearchProject | BuiltinTool::ListFiles => {
            let (result, record) = sandbox.call(
                &component,
                &project.grant,
                &project.settings,
                &call.arguments_raw,
            );
            let mut value = match result {
                Ok(v) => v,
                Err(e) => return CallOutcome::failed(prefixed(tool, &e.to_string()), Some(record)),
            };
            let summary = if which == BuiltinTool::SearchProject {
                let mut hidden = 0;
                if let Some(results) = value.get_mut("results").and_then(Value::as_array_mut) {
                    let before = results.len();
                    results.retain(|r| {
                        r.get("file_path")
                            .and_then(Value::as_str)
                            .is_none_or(|p| !project.hard_linked(p))
                    });
                    hidden = before - results.len();
                }
                if hidden > 0 {
                    value["hidden_hard_linked"] = json!(hidden);
                }
                let n = value["results"].as_array().map_or(0, Vec::len);
                format!("{n} result{}", if n == 1 { "" } else { "s" })
            } else {
                let n = value["files"].as_array().map_or(0, Vec::len);
                format!("{n} file{}", if n == 1 { "" } else { "s" })
            };
            let truncated = value["truncated"].as_bool() == Some(true);
            CallOutcome {
                ok: true,
                content: value.to_string(),
                summary: if truncated {
                    format!("{summary} (truncated)")
                } else {
                    summary
                },
                error: None,
                record: Some(record),
            }
        }
        _ => CallOutcome::failed(format!("{tool} is not a retrieval tool"), None),
    }
}

/// The model's view of a read: a header line naming the path first and its file id, then the text.
fn read_outcome(
    path: &str,
    file_id: Option<&str>,
    source: &str,
    v: &Value,
    record: CallRecord,
) -> CallOutcome {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (start, end, total) = (n("start_line"), n("end_line"), n("total_lines"));
    let truncated = v.get("truncated").and_then(Value::as_bool) == Some(true);
    let content = v.get("content").and_then(Value::as_str).unwrap_or("");
    let mut header = format!("path={path}");
    if let Some(id) = file_id {
        header.push_str(&format!(" file_id={id}"));
    }
    header.push_str(&format!(
        " lines={start}-{end} total_lines={total} truncated={truncated} source={source}"
    ));
    let mut text = format!("{header}\n{content}");
    if truncated {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[truncated: continue with start_line={}]",
            end + 1
        ));
    }
    CallOutcome {
        ok: true,
        content: text,
        summary: format!("{path} lines {start}-{end} of {total}"),
        error: None,
        record: Some(record),
    }
}

fn prefixed(tool: &str, message: &str) -> String {
    if message.starts_with(tool) {
        message.to_string()
    } else {
        format!("{tool}: {message}")
    }
}

/// The retrieval tools as offered to the model, described as their components describe themselves
/// under `settings` (the limits show in the descriptions).
pub fn specs(
    settings: &[(String, String)],
) -> Result<Vec<crate::llm::request::ToolSpec>, AgentError> {
    BuiltinTool::RETRIEVAL
        .iter()
        .map(|&tool| super::tools::describe_builtin(tool, settings))
        .collect()
}
