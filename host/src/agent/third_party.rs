//! Third-party tools in agent mode: the components enabled and granted for the project are offered
//! as `<component>__<tool>`, and each call runs with exactly its grant — no directory, a read-only
//! view of the project (built once per reply), or an empty directory whose files become the reply's
//! proposed files — plus its network and environment. The result and the sandbox's record (sha256,
//! grants) go to the trace and the audit log like any other call.

use std::sync::Mutex;

use super::retrieval::{CallOutcome, Project};
use super::tools::ToolRunner;
use crate::components::installed::Status;
use crate::components::manifest::Files;
use crate::components::ops;
use crate::components::view::ProjectView;
use crate::llm::request::ToolSpec;
use crate::llm::tool_calls::ToolCall;
use crate::sandbox::outdir::OutputDir;
use crate::sandbox::{Access, Grant, OutputLimit};

/// The most files one `output-write` call may leave.
const MAX_OUTPUT_FILES: usize = 100;
/// The most bytes they may hold together.
const MAX_OUTPUT_BYTES: u64 = 16 << 20;
/// What one `output-write` call may write while it runs: the file bytes it may keep, and entries
/// (files, directories, links) enough for the files it may keep and their directories. Enforced per
/// write, so the disk never holds more.
pub(crate) const OUTPUT_LIMIT: OutputLimit = OutputLimit {
    bytes: MAX_OUTPUT_BYTES,
    entries: 1024,
};
/// The most of a result the model reads.
const MAX_RESULT_SHOWN: usize = 64 << 10;

/// One offered third-party tool.
pub struct Offered {
    /// The name the model calls (`<component>__<tool>`).
    pub function: String,
    /// The component as it stood when the reply started.
    pub status: Status,
}

/// The third-party tools of one reply, and the project view they share.
#[derive(Default)]
pub struct ThirdParty {
    /// The offered tools.
    pub tools: Vec<Offered>,
    view: Mutex<Option<ProjectView>>,
}

impl ThirdParty {
    /// The components enabled and granted for `project`, whose tools do not collide with
    /// `reserved` (the built-in names; a namespaced name cannot, but this is checked, not assumed).
    pub fn for_project(project: &std::path::Path, reserved: &[String]) -> ThirdParty {
        let statuses = ops::statuses(Some(project)).unwrap_or_else(|e| {
            tracing::warn!("third-party tools unavailable: {e}");
            Vec::new()
        });
        let tools = statuses
            .into_iter()
            .filter(|s| s.offered())
            .filter_map(|s| {
                let function = ops::function_name(&s.name, &s.installed.tool.as_ref()?.name);
                (!reserved.contains(&function)).then_some(Offered {
                    function,
                    status: s,
                })
            })
            .collect();
        ThirdParty {
            tools,
            view: Mutex::new(None),
        }
    }

    /// The specs the model is offered.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .filter_map(|t| {
                let d = t.status.installed.tool.as_ref()?;
                let parameters = serde_json::from_str(&d.parameters_schema).ok()?;
                Some(ToolSpec {
                    name: t.function.clone(),
                    description: format!(
                        "{} (Third-party tool {} {}, sandboxed with: {}.)",
                        d.description,
                        t.status.name,
                        t.status.installed.version,
                        t.status
                            .granted
                            .as_ref()
                            .map(|g| g.summary())
                            .unwrap_or_default()
                    ),
                    parameters,
                })
            })
            .collect()
    }

    /// The offered tool the model calls `name`, if any.
    pub fn find(&self, name: &str) -> Option<&Offered> {
        self.tools.iter().find(|t| t.function == name)
    }

    /// Runs one call (blocking).
    pub fn run(
        &self,
        runner: &mut ToolRunner,
        project: &Project,
        tool: &Offered,
        call: &ToolCall,
    ) -> CallOutcome {
        let name = tool.function.as_str();
        if let Err(e) = &call.arguments {
            return CallOutcome::failed(format!("{name}: invalid arguments: {e}"), None);
        }
        let Some(granted) = tool.status.granted.clone() else {
            return CallOutcome::failed(format!("{name}: the tool is not granted"), None);
        };
        let sandbox = match runner.sandbox() {
            Ok(s) => s,
            Err(e) => return CallOutcome::failed(format!("{name}: {e}"), None),
        };
        let component = match runner.host().load_granted(&tool.status) {
            Ok(c) => c,
            Err(e) => {
                return CallOutcome::failed(format!("{name}: the tool is unavailable: {e}"), None);
            }
        };
        let mut out_dir = None;
        let dir = match granted.files {
            Files::None => None,
            Files::ProjectRead => match self.view_grant(project) {
                Ok(g) => Some(g),
                Err(e) => return CallOutcome::failed(format!("{name}: {e}"), None),
            },
            Files::OutputWrite => {
                let made = OutputDir::new().map_err(|e| e.to_string()).and_then(|d| {
                    let g = Grant::new(d.path(), Access::ReadWrite).map_err(|e| e.to_string())?;
                    Ok((d, g))
                });
                match made {
                    Ok((d, g)) => {
                        out_dir = Some(d);
                        Some(g)
                    }
                    Err(e) => {
                        return CallOutcome::failed(
                            format!("{name}: cannot create its output directory: {e}"),
                            None,
                        );
                    }
                }
            }
        };
        let caps = ops::call_caps(&granted, dir);
        // Only an output-write call writes; its output is metered as it is written.
        let output = out_dir.as_ref().map(|_| OUTPUT_LIMIT);
        let (result, record) =
            sandbox.call_metered(&component, &caps, output, &[], &call.arguments_raw);
        let value = match result {
            Ok(v) => v,
            Err(e) => return CallOutcome::failed(format!("{name}: {e}"), Some(record)),
        };
        let mut summary = "ok".to_string();
        if let Some(out) = &out_dir {
            let adopted = out
                .collect(MAX_OUTPUT_FILES, MAX_OUTPUT_BYTES)
                .map_err(|e| e.to_string())
                .and_then(|files| runner.adopt_written(name, files).map_err(|e| e.0));
            match adopted {
                Ok(paths) if !paths.is_empty() => {
                    summary = format!("proposed {}", paths.join(", "));
                }
                Ok(_) => {}
                Err(e) => return CallOutcome::failed(e, Some(record)),
            }
        }
        let mut content = value.to_string();
        if content.len() > MAX_RESULT_SHOWN {
            let mut end = MAX_RESULT_SHOWN;
            while !content.is_char_boundary(end) {
                end -= 1;
            }
            content = format!(
                "{}… [result cut: {} of {} bytes shown]",
                &content[..end],
                end,
                content.len()
            );
        }
        CallOutcome {
            ok: true,
            content,
            summary,
            error: None,
            record: Some(record),
        }
    }

    /// The read-only grant of the project view, built on first use in this reply.
    fn view_grant(&self, project: &Project) -> Result<Grant, String> {
        let mut slot = self.view.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let v = ProjectView::build(&project.root, project.settings())?;
            *slot = Some(v);
        }
        let v = slot.as_ref().ok_or("no project view")?;
        Grant::new(v.path(), Access::ReadOnly)
            .map_err(|e| format!("cannot grant the project view: {e}"))
    }
}
