//! `send` and `cancel`: parse the request, start the reply in the workspace (which records the user
//! message first, see [`crate::workspace::Workspace::start_reply`]), run it in the background
//! ([`crate::agent`]), then record the outcome and write the terminal event
//! ([`crate::protocol::events`]).

use serde_json::Value;

use super::Handled;
use super::title::{self, TitleJob};
use crate::agent::mode::Mode;
use crate::agent::prepare::ReplyRequest;
use crate::llm::prompt::RetryContext;
use crate::protocol::events::{self, ProtocolSink};
use crate::protocol::request::Request;
use crate::protocol::{Ctx, Outcome, ok};
use crate::workspace::{StartedReply, Workspace};

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
    let override_cap = req.flag("override_cap")?;
    let routing = req
        .opt_str("routing")?
        .map(crate::llm::routing::Routing::parse)
        .transpose()?;
    let disable_fallback = req.flag("disable_fallback")?;
    let cancel = ctx.inflight.claim(req.id.as_deref())?;
    let reply = ReplyRequest {
        content,
        model,
        effort,
        retry,
        mode,
        cancel,
        override_cap,
        plan: None,
        routing,
        disable_fallback,
    };
    start(ctx, req, |s| {
        s.start_reply(reply).map_err(|e| e.to_string())
    })
}

/// Starts the reply `begin` sets up in the workspace (the request's in-flight slot is claimed),
/// then finishes it in the background as a `send` does. An error releases the slot.
pub(super) fn start(
    ctx: &Ctx,
    req: &Request,
    begin: impl FnOnce(&mut Workspace) -> Result<StartedReply, String>,
) -> Handled {
    let rt = ctx.rt().inspect_err(|_| ctx.inflight.release())?;
    let mut s = ctx.lock();
    let stale = s.stale_context();
    let mut started = match begin(&mut s) {
        Ok(p) => p,
        Err(e) => {
            // The snapshots read for this send are not kept past it.
            s.forget_snapshots();
            drop(s);
            ctx.inflight.release();
            return Err(e);
        }
    };
    if let Some(files) = stale.filter(|f| !f.is_empty()) {
        events::emit(ctx, &events::stale_context(req.id.as_deref(), &files));
    }
    let message = started.message.take();
    let ctx2 = ctx.clone();
    let id = req.id.clone();
    rt.spawn(async move { finish_send(ctx2, id, started).await });
    // The model request goes out while the user message is fsynced and put in place, under the
    // workspace lock: the reply's record waits for it.
    if let Some(m) = message {
        s.publish_message(m);
    }
    Ok(Outcome::Later)
}

async fn finish_send(ctx: Ctx, id: Option<String>, started: StartedReply) {
    let StartedReply {
        job,
        target,
        model,
        first_exchange,
        first_message,
        message: _,
    } = started;
    let provider = job.provider.clone();
    let config = job.request.config.clone();
    let mut sink = ProtocolSink {
        ctx: ctx.clone(),
        id: id.clone(),
    };
    let (mut outcome, usage) =
        crate::spend::deferring(crate::agent::reply::run(job, &mut sink)).await;
    // Recording waits for the workspace lock (the stdin thread may hold it, e.g. through a
    // `pre_apply` hook) and fsyncs: off the runtime's one worker, so other replies keep streaming.
    let recorded = tokio::task::block_in_place(|| {
        let recorded = ctx.lock().record_reply(&target, &model, &mut outcome);
        crate::agent::usage_log::append(&target.id, target.global, &model, &outcome);
        recorded
    });
    // The ledger lines of the reply's requests, written alongside the record, are in before `done`.
    usage.wait().await;
    ctx.inflight.release();
    let m = match recorded {
        Ok(()) => events::terminal(id.as_deref(), &outcome),
        Err(e) => {
            tracing::error!("cannot record the reply: {e}");
            events::unsaved(id.as_deref(), &outcome, &e.to_string())
        }
    };
    // Whether the chat gets an automatic title is decided before the terminal event, so a client
    // that sees `done` knows the decision is made (no title request can follow a named chat's reply).
    let title_job =
        tokio::task::block_in_place(|| ctx.lock().wants_title(&target, first_exchange, &outcome))
            .map(|files| TitleJob {
                id: target.id.clone(),
                global: target.global,
                first_message,
                files,
                only_if_unnamed: true,
            });
    // An audit record the chain could not take during the reply (kept in `<log>.unchained`).
    if let Some(t) = crate::audit::take_trouble() {
        events::emit(&ctx, &events::audit_trouble(id.as_deref(), &t));
    }
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
