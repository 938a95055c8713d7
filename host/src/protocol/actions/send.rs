//! `send` and `cancel`: parse the request, prepare the reply job (recording the user message first,
//! see [`crate::chat::turn`]), run it in the background ([`crate::agent`]), then record the outcome
//! in the chat and write the terminal event ([`crate::protocol::events`]).

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use super::Handled;
use super::title::{self, TitleJob};
use crate::agent::mode::Mode;
use crate::agent::request::file_blocks;
use crate::agent::tools::{self, ToolRunner};
use crate::agent::{ReplyJob, RequestBuilder};
use crate::chat::turn;
use crate::llm::prompt::RetryContext;
use crate::llm::{LlmClient, Provider};
use crate::protocol::events::{self, ProtocolSink};
use crate::protocol::request::Request;
use crate::protocol::{Ctx, Outcome, ok};
use crate::workspace::{ChatRef, Workspace};

struct Prepared {
    job: ReplyJob,
    target: ChatRef,
    model: String,
    first_exchange: bool,
    first_message: String,
}

pub fn send(ctx: &Ctx, req: &Request) -> Handled {
    let content = req.str("content")?.to_string();
    if content.trim().is_empty() {
        return Err("Missing required field: content".into());
    }
    let model = req
        .opt_str("model")?
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    let effort = req.opt_str("reasoning_effort")?.map(str::to_string);
    let retry = RetryContext::from_json(req.fields.get("retry_context").unwrap_or(&Value::Null))?;
    let mode = req.opt_str("mode")?.map(Mode::parse).transpose()?;
    let cancel = ctx.inflight.claim(req.id.as_deref())?;
    let (prepared, stale) = {
        let mut s = ctx.lock();
        let stale = s.active().ok().map(|a| {
            // Read as the context itself is: the project path rule, and external files only when
            // this user added them.
            crate::chat::review::stale_files(a.dir.dir(), &a.chat.context_files, |p| {
                s.read_local(p, a.global)
            })
        });
        (
            prepare(&mut s, &content, model, effort, retry, cancel, mode),
            stale,
        )
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            ctx.inflight.release();
            return Err(e);
        }
    };
    // Files in context whose local copy changed since their snapshot: the user may want to update
    // them; the send goes on.
    if let Some(files) = stale.filter(|f| !f.is_empty()) {
        events::emit(ctx, &events::stale_context(req.id.as_deref(), &files));
    }
    let ctx2 = ctx.clone();
    let id = req.id.clone();
    ctx.rt
        .spawn(async move { finish_send(ctx2, id, prepared).await });
    Ok(Outcome::Later)
}

fn prepare(
    s: &mut Workspace,
    content: &str,
    model: Option<String>,
    effort: Option<String>,
    retry: Option<RetryContext>,
    cancel: watch::Receiver<bool>,
    mode: Option<Mode>,
) -> Result<Prepared, String> {
    let a = s.active()?;
    let global = a.global;
    let mode = mode.unwrap_or_else(|| Mode::of(&a.chat));
    if mode == Mode::Agent && global {
        return Err(crate::agent::mode::GLOBAL_AGENT_ERROR.to_string());
    }
    let provider: Arc<dyn Provider> = Arc::new(LlmClient::from_config(&s.config)?);
    let config = s.config.config().clone();
    let config_dir = crate::config::config_dir();
    let project_root = s.project.as_ref().map(|p| p.root().to_path_buf());
    let inst = crate::instructions::load(
        config_dir.as_deref(),
        if global { None } else { s.project.as_ref() },
    );
    if let Err(e) = &inst.project {
        return Err(format!("Project instructions error: {e}"));
    }
    let (system, _) = crate::instructions::system_prompt(config_dir.as_deref());
    let mut system = crate::instructions::render_system_message(&system, &inst, global);
    let third_party = match (&project_root, mode, global) {
        (Some(root), Mode::Agent, false) => crate::agent::third_party::ThirdParty::for_project(
            root,
            &crate::agent::steps::reserved_names(),
        ),
        _ => Default::default(),
    };
    let tools_offered = if global {
        Vec::new()
    } else if mode == Mode::Agent {
        system.push_str(crate::agent::steps::AGENT_SYSTEM_NOTE);
        crate::agent::steps::offered(config.diff_mode, &config.agent, &third_party)?
    } else {
        tools::offered(config.diff_mode)?
    };
    let agent = match (&project_root, mode) {
        (Some(root), Mode::Agent) => Some(crate::agent::steps::AgentJob {
            config: config.agent.clone(),
            project: crate::agent::steps::open_project(root, &config.agent)?,
            third_party,
        }),
        (None, Mode::Agent) => return Err(crate::agent::mode::GLOBAL_AGENT_ERROR.to_string()),
        _ => None,
    };

    let a = s.active()?;
    let chat = &a.chat;
    let model = model.unwrap_or_else(|| {
        let m = chat.current_model();
        if m.is_empty() {
            config.effective_default_model().to_string()
        } else {
            m.to_string()
        }
    });
    let effort = effort.unwrap_or_else(|| chat.reasoning_effort.clone());
    let (read_only, writable) = file_blocks(a.dir.dir(), chat, global);
    let first_exchange = !turn::has_reply(chat);
    let history = chat.messages.clone();
    let chat_dir = a
        .dir
        .dir()
        .try_clone()
        .map_err(|e| format!("Cannot open chat: {e}"))?;
    let target = ChatRef {
        id: a.id.clone(),
        global,
        dir: a
            .dir
            .dir()
            .try_clone()
            .map_err(|e| format!("Cannot open chat: {e}"))?,
    };
    let runner = match (&project_root, global) {
        (Some(root), false) => Some(ToolRunner::new(
            config.diff_mode,
            root,
            a.dir
                .dir()
                .try_clone()
                .map_err(|e| format!("Cannot open chat: {e}"))?,
            &chat.context_files,
        )?),
        _ => None,
    };

    // Record the user message (with its context snapshot) before anything is sent: a crash from
    // here on loses at most the reply.
    let msg = turn::user_message(chat, content, &model, &effort);
    let a = s.active_mut()?;
    turn::record_user_message(&mut a.chat, msg);
    if let Err(e) = s.save_active() {
        if let Ok(a) = s.active_mut() {
            turn::unrecord_user_message(&mut a.chat);
        }
        return Err(e.into());
    }
    let request = RequestBuilder {
        config: config.clone(),
        model: model.clone(),
        reasoning_effort: effort,
        chat_id: target.id.clone(),
        system,
        read_only,
        history,
        latest: content.to_string(),
        writable,
        tools: tools_offered,
    };
    Ok(Prepared {
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
        target,
        model,
        first_exchange,
        first_message: content.to_string(),
    })
}

async fn finish_send(ctx: Ctx, id: Option<String>, p: Prepared) {
    let Prepared {
        job,
        target,
        model,
        first_exchange,
        first_message,
    } = p;
    let provider = job.provider.clone();
    let config = job.request.config.clone();
    let mut sink = ProtocolSink {
        ctx: ctx.clone(),
        id: id.clone(),
    };
    let outcome = crate::agent::reply::run(job, &mut sink).await;
    let record = outcome.record(&model);
    let recorded = if record.messages_are_empty() {
        Ok(())
    } else {
        ctx.lock()
            .update_chat(&target, |chat| record.record_in(chat))
    };
    crate::agent::usage_log::append(&target.id, target.global, &model, &outcome);
    ctx.inflight.release();
    let mut m = events::terminal(id.as_deref(), &outcome);
    if let Err(e) = recorded {
        tracing::error!("cannot record the reply: {e}");
        if outcome.ending.answered() {
            // The outputs were committed before the chat could not be saved: say so, so that
            // nothing the model changed sits in the output unannounced.
            let written: Vec<&str> = outcome.written.iter().map(|w| w.path.as_str()).collect();
            let msg = if written.is_empty() {
                format!("The reply could not be saved: {e}")
            } else {
                format!(
                    "The reply could not be saved: {e}. Its file changes were written to the output and wait for your review: {}",
                    written.join(", ")
                )
            };
            m = events::event(
                events::kind::ERROR,
                id.as_deref(),
                serde_json::json!({"message": msg}),
            );
        }
    }
    // Whether the chat gets an automatic title is decided before the terminal event, so a client
    // that sees `done` knows the decision is made (no title request can follow a named chat's reply).
    let title_job = if first_exchange && outcome.ending.answered() {
        let mut s = ctx.lock();
        // The active chat only if it is this one, in this store (ids are unique per store only).
        let files = s.context_paths_if_active(&target.key());
        s.current_name(target.global, &target.id)
            .is_some_and(|n| crate::chat::naming::is_default_name(&n))
            .then(|| TitleJob {
                id: target.id.clone(),
                global: target.global,
                first_message,
                files,
                only_if_unnamed: true,
            })
    } else {
        None
    };
    events::emit(&ctx, &m);
    if let Some(job) = title_job {
        title::run(ctx, provider, config, job).await;
    }
}

pub fn cancel(ctx: &Ctx, req: &Request) -> Handled {
    // Like request ids, the target may be a string or a number.
    let target = match req.fields.get("target_request_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    if ctx.inflight.cancel(target.as_deref()) {
        Ok(ok())
    } else {
        Err("No active request to cancel".into())
    }
}
