//! Third-party tools in agent mode: the components enabled and granted for the project are offered
//! as `<component>__<tool>`, and each call runs with exactly its grant — no directory, a read-only
//! view of the project (built once per reply), or an empty directory whose files become the reply's
//! proposed files — plus its network and environment. The result and the sandbox's record (sha256,
//! grants) go to the trace and the audit log like any other call.

use super::retrieval::{CallOutcome, Project};
use super::tools::ToolRunner;
use crate::components::installed::{Status, function_name};
use crate::components::load::{self, MAX_OUTPUT_BYTES, MAX_OUTPUT_FILES, OutputTo};
use crate::components::manage;
use crate::components::view::ViewSlot;
use crate::llm::request::ToolSpec;
use crate::llm::tool_calls::ToolCall;

/// The most of a result the model reads.
const MAX_RESULT_SHOWN: usize = 64 << 10;

/// One offered third-party tool.
#[derive(Clone)]
pub struct Offered {
    /// The name the model calls (`<component>__<tool>`).
    pub function: String,
    /// The component as it stood when the reply started.
    pub status: Status,
    /// The tool's name inside the component (a generic component offers several).
    pub tool: String,
}

/// The third-party tools of one reply, and the project view they share.
#[derive(Default)]
pub struct ThirdParty {
    /// The offered tools.
    pub tools: Vec<Offered>,
    view: ViewSlot,
}

impl ThirdParty {
    /// The components enabled and granted for `project`, whose tools do not collide with
    /// `reserved` (the built-in names; a namespaced name cannot, but this is checked, not assumed).
    pub fn for_project(project: &std::path::Path, reserved: &[String]) -> ThirdParty {
        let statuses = manage::statuses(Some(project)).unwrap_or_else(|e| {
            tracing::warn!("third-party tools unavailable: {e}");
            Vec::new()
        });
        let tools = statuses
            .into_iter()
            .filter(|s| s.offered())
            .flat_map(|s| {
                s.installed
                    .offered_tools()
                    .into_iter()
                    .map(|t| Offered {
                        function: function_name(&s.name, &t.name),
                        status: s.clone(),
                        tool: t.name.clone(),
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|o| !reserved.contains(&o.function))
            .collect();
        ThirdParty {
            tools,
            view: ViewSlot::default(),
        }
    }

    /// The tools of `tools` with a project view of their own (`bb7 mcp`: one per call, as the
    /// offered list is fixed for the server's life but the project changes under it).
    pub fn with_tools(tools: Vec<Offered>) -> ThirdParty {
        ThirdParty {
            tools,
            view: ViewSlot::default(),
        }
    }

    /// The specs the model is offered.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .filter_map(|t| {
                let d = t
                    .status
                    .installed
                    .offered_tools()
                    .into_iter()
                    .find(|d| d.name == t.tool)?;
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

    /// Runs one call (blocking); `plan` bounds the files an `output-write` call may propose.
    pub fn run(
        &self,
        runner: &mut ToolRunner,
        project: &Project,
        tool: &Offered,
        call: &ToolCall,
        plan: &super::plan::PlanRole,
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
        // A generic component: the exported function this tool calls.
        let component = if component.generic().is_some() {
            match component.function(&tool.tool) {
                Some(f) => std::sync::Arc::new(f),
                None => {
                    return CallOutcome::failed(
                        format!("{name}: the component no longer exports this tool"),
                        None,
                    );
                }
            }
        } else {
            component
        };
        // The project's view (built once per reply), a fresh output directory, or nothing.
        let dir = load::call_dir(
            granted.files,
            &project.root,
            || project.settings().to_vec(),
            &self.view,
            OutputTo::Fresh,
        );
        let dir = match dir {
            Ok(d) => d,
            Err(e) => return CallOutcome::failed(format!("{name}: {e}"), None),
        };
        let caps = load::call_caps(&granted, dir.grant);
        // Only an output-write call writes; its output is metered as it is written.
        let (result, record) =
            sandbox.call_metered(&component, &caps, dir.limit, &[], &call.arguments_raw);
        let value = match result {
            Ok(v) => v,
            Err(e) => return CallOutcome::failed(format!("{name}: {e}"), Some(record)),
        };
        let mut summary = "ok".to_string();
        if let Some(out) = &dir.output {
            let adopted = out
                .collect(MAX_OUTPUT_FILES, MAX_OUTPUT_BYTES)
                .map_err(|e| e.to_string())
                .and_then(|files| {
                    runner
                        .adopt_written(name, files, &|tool, rel| plan.refuse_path(tool, rel))
                        .map_err(|e| e.0)
                });
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
}
