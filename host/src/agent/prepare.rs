//! Setting up a reply ([`ReplyJob::prepare`]): from what the client asked ([`ReplyRequest`]) and
//! the chat it is for ([`ChatView`]), everything the reply needs — the model client, the system
//! message with the instructions, the tools offered, the request parts, the tool runner with its
//! staging directory, and in agent mode the project and third-party tools. Nothing is recorded
//! here: the caller records the user message once the job is ready (see
//! `crate::workspace::Workspace::start_reply`).

use std::path::Path;
use std::sync::Arc;

use cap_std::fs::Dir;
use tokio::sync::watch;

use super::job::{AgentError, AgentJob, ReplyJob};
use super::mode::Mode;
use super::plan::PlanRole;
use super::request::{RequestBuilder, file_blocks};
use super::third_party::ThirdParty;
use super::tools::{self, ToolRunner};
use crate::chat::model::Chat;
use crate::llm::prompt::RetryContext;
use crate::llm::{LlmClient, Provider};
use crate::store::project::ProjectDir;
use crate::toolhost::ToolHost;

/// What the client asked for with a `send`.
pub struct ReplyRequest {
    /// The user's message.
    pub content: String,
    /// The model to use; `None`: the chat's, else the default.
    pub model: Option<String>,
    /// The reasoning effort; `None`: the chat's.
    pub effort: Option<String>,
    /// The client's `retry_context`.
    pub retry: Option<RetryContext>,
    /// The mode for this reply; `None`: the chat's.
    pub mode: Option<Mode>,
    /// Becomes `true` on `cancel`.
    pub cancel: watch::Receiver<bool>,
    /// `send {override_cap}`: this reply's requests pass the spend caps.
    pub override_cap: bool,
    /// `plan_approve`: the reply carries out an approved plan (an agent reply; see
    /// [`super::plan::PlanRole::Execute`]). `None` for a `send`.
    pub plan: Option<super::plan::PlanRole>,
    /// `send {routing}`: where this reply's requests go; `None`: the chat's.
    pub routing: Option<crate::llm::routing::Routing>,
    /// `send {disable_fallback}`: a hybrid reply's local failure is its error.
    pub disable_fallback: bool,
}

/// The chat a reply is for, and what the session holds for it.
pub struct ChatView<'a> {
    /// The chat's id.
    pub id: &'a str,
    /// Its contents (before the user message is recorded).
    pub chat: &'a Chat,
    /// `chats/<id>/`.
    pub dir: &'a Dir,
    /// Whether it is a global chat (no tools, no project).
    pub global: bool,
    /// The session's project, if any.
    pub project: Option<&'a ProjectDir>,
    /// The session's config.
    pub config: &'a crate::config::ConfigState,
    /// The session's tool host.
    pub tools: &'a Arc<ToolHost>,
    /// The chat's snapshots read so far in this send (the stale check's): the request and the
    /// reply's edit bases use them instead of reading them again.
    pub snapshots: &'a mut crate::chat::snapshots::Memo,
}

/// A reply ready to run, with what recording it needs.
pub struct PreparedReply {
    /// The job.
    pub job: ReplyJob,
    /// The model it asks.
    pub model: String,
    /// The reasoning effort it asks for.
    pub effort: String,
    /// Whether this is the chat's first exchange (no reply yet).
    pub first_exchange: bool,
}

impl ReplyJob {
    /// Sets up the reply `req` asks for in `view`'s chat.
    pub fn prepare(req: ReplyRequest, view: ChatView<'_>) -> Result<PreparedReply, AgentError> {
        let ReplyRequest {
            content,
            model,
            effort,
            retry,
            mode,
            cancel,
            override_cap,
            plan,
            routing,
            disable_fallback,
        } = req;
        let global = view.global;
        let chat = view.chat;
        let mode = mode.unwrap_or_else(|| Mode::of(chat));
        match (mode, global) {
            (Mode::Agent, true) => return Err(AgentError::GlobalAgent),
            (Mode::Plan, true) => return Err(AgentError::GlobalPlan),
            _ => {}
        }
        let plan = match mode {
            Mode::Plan => PlanRole::Propose,
            _ => plan.unwrap_or_default(),
        };
        let config = view.config.config().clone();
        let routing = routing.unwrap_or_else(|| crate::llm::routing::Routing::of(chat));
        // Every remote request of the reply passes the spend caps first (ECOSYSTEM-PROTOCOL.md
        // §11); where each request goes is the routing's business (§10). A remote provider
        // that cannot be built is an error only for a reply that needs it.
        let remote = LlmClient::from_config(view.config).map(|c| {
            crate::spend::Capped::wrap(
                Arc::new(c) as Arc<dyn Provider>,
                config.spend,
                &config.base_url,
                view.id,
                override_cap,
            )
        });
        if routing == crate::llm::routing::Routing::Remote
            && let Err(e) = &remote
        {
            return Err(e.clone().into());
        }
        let provider = crate::llm::routing::Routed::for_reply(
            remote,
            crate::llm::routing::RouteSettings {
                routing,
                providers: config.providers.clone(),
                disable_fallback: disable_fallback || config.providers.disable_fallback,
                budget: (mode == Mode::Agent).then_some(config.agent.max_tool_calls_per_job),
                idle_timeout_ms: config.stream_idle_timeout_ms,
                local_log: Some(crate::spend::LocalLedger::for_chat(view.id)),
            },
        )?;
        let config_dir = crate::config::config_dir();
        let project_root = view.project.map(|p| p.root().to_path_buf());
        let inst = crate::instructions::load(
            config_dir.as_deref(),
            if global { None } else { view.project },
        );
        if let Err(e) = &inst.project {
            return Err(AgentError::Instructions(e.to_string()));
        }
        let (system, _) = crate::instructions::system_prompt(config_dir.as_deref());
        let mut system = crate::instructions::render_system_message(&system, &inst, global);
        let third_party = match (&project_root, mode, global) {
            (Some(root), Mode::Agent, false) => {
                ThirdParty::for_project(root, &super::steps::reserved_names())
            }
            _ => Default::default(),
        };
        let tools_offered = if global {
            Vec::new()
        } else if mode == Mode::Agent {
            system.push_str(super::steps::AGENT_SYSTEM_NOTE);
            super::steps::offered(config.diff_mode, &config.agent, &third_party)?
        } else if mode == Mode::Plan {
            // The retrieval tools and propose_plan: no edit tool is offered.
            system.push_str(super::plan::PLAN_SYSTEM_NOTE);
            let mut specs = super::retrieval::specs(&config.agent.tool_settings())?;
            specs.push(super::plan::spec());
            specs
        } else {
            tools::offered(config.diff_mode)?
        };
        let agent = match (&project_root, mode) {
            (Some(root), Mode::Agent | Mode::Plan) => Some(AgentJob {
                config: config.agent.clone(),
                project: super::steps::open_project(root, &config.agent)?,
                third_party,
                plan,
            }),
            (None, Mode::Agent) => return Err(AgentError::GlobalAgent),
            (None, Mode::Plan) => return Err(AgentError::GlobalPlan),
            _ => None,
        };

        let model = model.unwrap_or_else(|| {
            let m = chat.current_model();
            if m.is_empty() {
                config.effective_default_model().to_string()
            } else {
                m.to_string()
            }
        });
        let effort = effort.unwrap_or_else(|| chat.reasoning_effort.clone());
        let (read_only, writable) = file_blocks(view.dir, chat, global, view.snapshots);
        let first_exchange = !crate::chat::turn::has_reply(chat);
        let chat_dir = view.dir.try_clone().map_err(AgentError::ChatDir)?;
        let runner = match (&project_root, global) {
            (Some(root), false) => Some(runner(view.tools, &config, root, &view, chat)?),
            _ => None,
        };
        let request = RequestBuilder {
            config: config.clone(),
            model: model.clone(),
            reasoning_effort: effort.clone(),
            chat_id: view.id.to_string(),
            system,
            read_only,
            history: chat.messages.clone(),
            latest: content,
            writable,
            tools: tools_offered,
        };
        // pre_send hooks: a deny stops the send before any request reaches the model.
        if let (Some(root), false) = (&project_root, global) {
            let context = chat.context_files.iter().map(|c| c.path.clone()).collect();
            super::hooked::pre_send(root, &request, mode, context)?;
        }
        Ok(PreparedReply {
            job: ReplyJob {
                provider,
                request,
                retry,
                auto_retry: config.auto_retry_partial_edits,
                tools: runner,
                chat_dir,
                cancel,
                agent,
            },
            model,
            effort,
            first_exchange,
        })
    }
}

fn runner(
    host: &Arc<ToolHost>,
    config: &crate::config::Config,
    root: &Path,
    view: &ChatView<'_>,
    chat: &Chat,
) -> Result<ToolRunner, AgentError> {
    let mut runner = ToolRunner::new(
        Arc::clone(host),
        config.diff_mode,
        root,
        view.dir.try_clone().map_err(AgentError::ChatDir)?,
        &chat.context_files,
    )?;
    runner.keep_snapshots(view.snapshots);
    Ok(runner)
}
