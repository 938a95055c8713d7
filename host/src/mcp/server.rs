//! The MCP server: the offered tools (fixed at start), and each `tools/call` run as agent mode runs
//! it, on a blocking thread, its sandbox record appended to the audit chain under the client's name.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};

use crate::agent::retrieval::{self, CallOutcome, Project};
use crate::agent::third_party::{Offered, ThirdParty};
use crate::agent::tools::ToolRunner;
use crate::audit::Actor;
use crate::llm::tool_calls::ToolCall;
use crate::sandbox::AuditLog;
use crate::toolhost::ToolHost;

/// Why the server cannot start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The project cannot be opened for the tools.
    #[error("{0}")]
    Project(#[from] crate::agent::error::AgentError),
    /// An empty directory standing in for a chat could not be made.
    #[error("cannot create a temporary directory: {0}")]
    Temp(std::io::Error),
    /// The protocol session failed (not a clean end of input).
    #[error("the MCP session failed: {0}")]
    Session(String),
}

/// One offered tool and how it runs.
enum Runs {
    /// A built-in retrieval tool.
    Retrieval,
    /// A third-party component's tool.
    ThirdParty(Box<Offered>),
    /// `--stage`: an edit tool, staged into the client's chat.
    Stage,
}

struct Offer {
    tool: Tool,
    runs: Runs,
}

struct Inner {
    project: Project,
    offers: Vec<Offer>,
    /// The tool host, made at the first call (its audit records name the client).
    host: OnceLock<Arc<ToolHost>>,
    /// What a call's runner takes for its chat: an empty directory (no output, no context), so
    /// every read is of the project itself, as in an agent reply's first step.
    no_chat: tempfile::TempDir,
    diff_mode: crate::config::DiffMode,
    /// `--stage`: edits are staged into the client's chat, and reads see that chat's output.
    stage: bool,
}

/// The `bb7 mcp` server of one project.
#[derive(Clone)]
pub struct Server {
    inner: Arc<Inner>,
}

impl Server {
    /// The server of `root`: its offered tools are decided now, for the server's life.
    pub fn new(root: &Path, stage: bool) -> Result<Server, McpError> {
        let config = crate::config::load().config().clone();
        let project = crate::agent::steps::open_project(root, &config.agent)?;
        let mut offers = Vec::new();
        for spec in retrieval::specs(project.settings())? {
            offers.push(Offer {
                tool: tool(spec),
                runs: Runs::Retrieval,
            });
        }
        if stage {
            for spec in crate::agent::tools::offered(config.diff_mode)? {
                offers.push(Offer {
                    tool: tool(spec),
                    runs: Runs::Stage,
                });
            }
        }
        let third = ThirdParty::for_project(root, &crate::agent::steps::reserved_names());
        let specs = third.specs();
        for offered in third.tools {
            if let Some(spec) = specs.iter().find(|s| s.name == offered.function) {
                offers.push(Offer {
                    tool: tool(spec.clone()),
                    runs: Runs::ThirdParty(Box::new(offered)),
                });
            }
        }
        let no_chat = tempfile::Builder::new()
            .prefix("bb7-mcp-")
            .tempdir()
            .map_err(McpError::Temp)?;
        Ok(Server {
            inner: Arc::new(Inner {
                project,
                offers,
                host: OnceLock::new(),
                no_chat,
                diff_mode: config.diff_mode,
                stage,
            }),
        })
    }

    /// The project's root.
    pub fn root(&self) -> &PathBuf {
        &self.inner.project.root
    }

    /// The names of the offered tools, in the order listed.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner
            .offers
            .iter()
            .map(|o| o.tool.name.to_string())
            .collect()
    }

    /// Serves MCP on stdin/stdout until stdin closes.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        let running = match self.serve(rmcp::transport::stdio()).await {
            Ok(r) => r,
            // Input ended before (or during) the handshake: nothing to serve, a clean end.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(McpError::Session(e.to_string())),
        };
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| McpError::Session(e.to_string()))
    }

    fn host(&self, client: &str) -> Arc<ToolHost> {
        Arc::clone(self.inner.host.get_or_init(|| {
            let actor = Actor::Mcp(client.to_string());
            crate::audit::set_process_actor(actor.clone());
            Arc::new(ToolHost::with_audit(
                crate::paths::audit_log().map(|p| AuditLog::new(p).actor(actor)),
            ))
        }))
    }

    /// Runs one call (blocking), exactly as agent mode runs it: between the project's
    /// `pre_tool_call` and `post_tool_call` hooks.
    fn run(&self, host: Arc<ToolHost>, client: &str, offer: usize, call: &ToolCall) -> CallOutcome {
        let component = match &self.inner.offers[offer].runs {
            Runs::ThirdParty(o) => Some(o.status.name.as_str()),
            _ => None,
        };
        let hooks = crate::agent::hooked::Hooked::new(
            Some(&self.inner.project.root),
            component,
            Actor::Mcp(client.to_string()),
        );
        if let Some(denied) = hooks.before(call) {
            return denied;
        }
        hooks.after(call, self.run_unhooked(host, client, offer, call))
    }

    fn run_unhooked(
        &self,
        host: Arc<ToolHost>,
        client: &str,
        offer: usize,
        call: &ToolCall,
    ) -> CallOutcome {
        let inner = &self.inner;
        if let Runs::Stage = inner.offers[offer].runs {
            return super::stage::run(host, inner.diff_mode, &inner.project, client, call);
        }
        // With --stage, reads see the client's chat's output (what a later edit starts from).
        let staged = inner
            .stage
            .then(|| super::stage::existing_chat_dir(&inner.project.root, client))
            .flatten();
        let chat_dir = match staged {
            Some(d) => Ok(d),
            None => cap_std::fs::Dir::open_ambient_dir(
                inner.no_chat.path(),
                cap_std::ambient_authority(),
            ),
        };
        let chat_dir = match chat_dir {
            Ok(d) => d,
            Err(e) => return CallOutcome::failed(format!("{}: {e}", call.name), None),
        };
        let mut runner =
            match ToolRunner::new(host, inner.diff_mode, &inner.project.root, chat_dir, &[]) {
                Ok(r) => r,
                Err(e) => return CallOutcome::failed(format!("{}: {e}", call.name), None),
            };
        runner.set_agent(true);
        match &inner.offers[offer].runs {
            Runs::Retrieval => retrieval::run(&mut runner, &inner.project, call),
            Runs::ThirdParty(offered) => {
                let third = ThirdParty::with_tools(vec![(**offered).clone()]);
                third.run(
                    &mut runner,
                    &inner.project,
                    offered,
                    call,
                    &crate::agent::plan::PlanRole::None,
                )
            }
            Runs::Stage => super::stage::run(
                runner.host().clone(),
                inner.diff_mode,
                &inner.project,
                client,
                call,
            ),
        }
    }
}

/// An agent-mode tool spec as an MCP tool.
fn tool(spec: crate::llm::request::ToolSpec) -> Tool {
    let schema = match spec.parameters {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Tool::new(spec.name, spec.description, Arc::new(schema))
}

/// The client's name as the audit chain records it: printable, at most 64 characters.
fn client_name(info: Option<Implementation>) -> String {
    let name: String = info
        .map(|i| i.name)
        .unwrap_or_default()
        .chars()
        // Control, bidi and invisible characters could disguise the actor in `bb7 audit show`
        // and the chat's name.
        .filter(|c| !c.is_control() && !crate::components::manifest::invisible(*c))
        .take(64)
        .collect();
    if name.trim().is_empty() {
        "unknown".to_string()
    } else {
        name
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(false);
        caps.tools = Some(tools);
        InitializeResult::new(caps)
            .with_server_info(Implementation::new("bb7", crate::VERSION))
            .with_instructions(
                "bb7's sandboxed tools for one project: search_project, read_file and list_files see the project read-only, never .git/, .bb7/ or deny-listed files; third-party tools run under the grants the user gave them.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.inner.offers.iter().map(|o| o.tool.clone()).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner
            .offers
            .iter()
            .find(|o| o.tool.name == name)
            .map(|o| o.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some(offer) = self.inner.offers.iter().position(|o| o.tool.name == name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {name:?}; the tools offered are {}",
                    self.tool_names().join(", ")
                ),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        super::args::check(&name, &self.inner.offers[offer].tool.input_schema, &args)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let value = Value::Object(args);
        let call = ToolCall {
            id: format!("mcp_{}", context.id),
            name,
            arguments_raw: value.to_string(),
            arguments: Ok(value),
        };
        let client = client_name(context.client_info());
        let host = self.host(&client);
        let server = self.clone();
        let cancel = crate::sandbox::cancel::CancelFlag::new();
        let flag = cancel.clone();
        let job = tokio::task::spawn_blocking(move || {
            crate::sandbox::cancel::scoped(&flag, || server.run(host, &client, offer, &call))
        });
        let outcome = tokio::select! {
            joined = job => joined.map_err(|e| ErrorData::internal_error(format!("the call failed: {e}"), None))?,
            // The client gave up: answer at once and stop the component at its next epoch tick
            // (its record, outcome `cancelled`, is still appended to the audit chain).
            _ = context.ct.cancelled() => {
                cancel.cancel();
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        };
        let mut content = vec![ContentBlock::text(if outcome.ok {
            outcome.content
        } else {
            outcome.error.unwrap_or(outcome.content)
        })];
        // An audit record the chain could not take (kept in `<log>.unchained`): said to the
        // client, as stderr stays silent.
        if let Some(t) = crate::audit::take_trouble() {
            content.push(ContentBlock::text(format!("bb7 audit: {t}")));
        }
        let result = if outcome.ok {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_name_keeps_no_control_bidi_or_invisible_character() {
        let info: Implementation = serde_json::from_value(
            serde_json::json!({"name": "cl\u{202e}ie\u{200b}nt\u{7}", "version": "1"}),
        )
        .unwrap();
        assert_eq!(client_name(Some(info)), "client");
        let blank: Implementation =
            serde_json::from_value(serde_json::json!({"name": "\u{202e}", "version": "1"}))
                .unwrap();
        assert_eq!(client_name(Some(blank)), "unknown");
        assert_eq!(client_name(None), "unknown");
    }
}
