//! `send` and `cancel`: snapshot the context and record the user message, run the reply in the
//! background (see [`crate::agent`]), then record the outcome in the chat and write the terminal
//! event (`done`, `diff_error` or `error`).

use std::sync::Arc;

use cap_std::fs::Dir;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::Handled;
use crate::agent::mode::Mode;
use crate::agent::tools::{self, ToolRunner};
use crate::agent::{Ending, ReplyJob, ReplyOutcome, ReplySink, RequestBuilder};
use crate::chat::model::{Chat, Message, SnapshotEntry, event_part, now, text_part};
use crate::chat::snapshots;
use crate::llm::prompt::{FileBlock, FileStatus, RetryContext};
use crate::llm::{ClientSettings, LlmClient, Provider};
use crate::protocol::request::Request;
use crate::protocol::{Ctx, Outcome, ok};
use crate::workspace::{ChatKey, Workspace};

/// The terminal error after a cancel, also stored as a system message (clients match it exactly).
pub const ABORTED: &str = "Response aborted by user.";

/// The chat a reply belongs to, held independently of which chat is active when it ends.
pub struct ChatRef {
    pub id: String,
    pub global: bool,
    pub dir: Dir,
}

impl ChatRef {
    /// Which chat this is.
    pub fn key(&self) -> ChatKey {
        ChatKey {
            id: self.id.clone(),
            global: self.global,
        }
    }
}

/// A provider for the configured API, or the error to report (missing config or key).
pub fn provider(s: &Workspace) -> Result<Arc<dyn Provider>, String> {
    let key = s.config.api_key()?;
    let config = s.config.config();
    let mut settings = ClientSettings::new(&config.base_url, key);
    settings.idle_timeout = std::time::Duration::from_millis(config.stream_idle_timeout_ms);
    let client = LlmClient::new(settings).map_err(|e| e.to_string())?;
    Ok(Arc::new(client))
}

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
        let mut m = Map::new();
        m.insert("type".into(), json!("warning"));
        if let Some(id) = &req.id {
            m.insert("request_id".into(), json!(id));
        }
        m.insert("kind".into(), json!("stale_context"));
        m.insert("files".into(), json!(files));
        let _ = ctx.out.send(&m);
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
    let provider = provider(s)?;
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
    let tools_offered = if global {
        Vec::new()
    } else if mode == Mode::Agent {
        system.push_str(crate::agent::steps::AGENT_SYSTEM_NOTE);
        crate::agent::steps::offered(config.diff_mode, &config.agent)?
    } else {
        tools::offered(config.diff_mode)?
    };
    let agent = match (&project_root, mode) {
        (Some(root), Mode::Agent) => Some(crate::agent::steps::AgentJob {
            config: config.agent.clone(),
            project: crate::agent::steps::open_project(root, &config.agent)?,
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
    let first_exchange = !chat.messages.iter().any(is_reply);
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
    let snapshot: Vec<SnapshotEntry> = chat
        .context_files
        .iter()
        .map(|cf| SnapshotEntry {
            path: cf.path.clone(),
            file_id: cf.version.clone(),
            start_line: cf.start_line,
            end_line: cf.end_line,
            extra: Map::new(),
        })
        .collect();
    let mut msg = Message::text("user", content);
    msg.model = Some(model.clone());
    msg.context_snapshot = Some(snapshot);
    if !effort.is_empty() {
        msg.extra.insert("reasoning_effort".into(), json!(effort));
    }
    let a = s.active_mut()?;
    a.chat.messages.push(msg);
    a.chat.draft.clear();
    if let Err(e) = s.save_active() {
        if let Ok(a) = s.active_mut() {
            a.chat.messages.pop();
        }
        return Err(e);
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

/// A message that is a real reply (not a recorded context event).
fn is_reply(m: &Message) -> bool {
    m.role == "assistant"
        && m.parts
            .iter()
            .any(|p| p.get("type").and_then(Value::as_str) != Some("context_event"))
}

/// The file blocks of a request: read-only files and sections; writable files with their pending
/// output; files the model added.
fn file_blocks(dir: &Dir, chat: &Chat, global: bool) -> (Vec<FileBlock>, Vec<FileBlock>) {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut read_only = Vec::new();
    let mut writable = Vec::new();
    let mut in_context = std::collections::HashSet::new();
    for cf in &chat.context_files {
        let content = snapshots::read(dir, cf).unwrap_or_default();
        let lines = cf.start_line.zip(cf.end_line);
        let is_writable = !global && !cf.readonly && !cf.external && lines.is_none();
        let block = FileBlock {
            path: cf.path.clone(),
            id: cf.version.clone(),
            writable: is_writable,
            status: FileStatus::Original,
            lines,
            external: cf.external,
            content: text(&content),
        };
        if !is_writable {
            read_only.push(block);
            continue;
        }
        in_context.insert(cf.path.clone());
        let output = snapshots::read_output(dir, &cf.path);
        writable.push(block);
        if let Some(out) = output.filter(|o| *o != content) {
            writable.push(FileBlock {
                id: bb7_tool_logic::file_id::file_id(&cf.path, &out),
                path: cf.path.clone(),
                writable: true,
                status: FileStatus::PendingOutput,
                lines: None,
                external: false,
                content: text(&out),
            });
        }
    }
    if !global {
        for path in snapshots::output_files(dir) {
            if in_context.contains(&path) {
                continue;
            }
            // A read-only file's output (made before it became read-only) stays visible as such.
            let Some(out) = snapshots::read_output(dir, &path) else {
                continue;
            };
            let ro = chat
                .context_files
                .iter()
                .any(|cf| cf.path == path && !cf.external);
            let block = FileBlock {
                id: bb7_tool_logic::file_id::file_id(&path, &out),
                path,
                writable: !ro,
                status: if ro {
                    FileStatus::PendingOutput
                } else {
                    FileStatus::AddedOutput
                },
                lines: None,
                external: false,
                content: text(&out),
            };
            if ro {
                read_only.push(block);
            } else {
                writable.push(block);
            }
        }
    }
    (read_only, writable)
}

/// Streams to the client as `chunk` / `thinking` events of one request.
struct ProtocolSink {
    ctx: Ctx,
    id: Option<String>,
}

impl ProtocolSink {
    fn emit(&self, kind: &str, content: &str) {
        let mut m = Map::new();
        m.insert("type".into(), json!(kind));
        if let Some(id) = &self.id {
            m.insert("request_id".into(), json!(id));
        }
        m.insert("content".into(), json!(content));
        let _ = self.ctx.out.send(&m);
    }
}

impl ReplySink for ProtocolSink {
    fn chunk(&mut self, text: &str) {
        self.emit("chunk", text);
    }
    fn thinking(&mut self, text: &str) {
        self.emit("thinking", text);
    }
    fn agent_event(&mut self, cursor: u64, kind: &str, data: &Value) {
        let _ = self.ctx.out.send(&crate::agent::events::wire_event(
            self.id.as_deref(),
            cursor,
            kind,
            data,
        ));
    }
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
    let recorded = {
        let mut s = ctx.lock();
        record(&mut s, &target, &outcome, &model)
    };
    log_usage(&target, &model, &outcome);
    ctx.inflight.release();
    let mut m = terminal_event(&outcome);
    if let Err(e) = recorded {
        tracing::error!("cannot record the reply: {e}");
        if matches!(outcome.ending, Ending::Done | Ending::DiffError { .. }) {
            m = Map::new();
            m.insert("type".into(), json!("error"));
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
            m.insert("message".into(), json!(msg));
        }
    }
    if let Some(id) = &id {
        m.insert("request_id".into(), json!(id));
    }
    // Whether the chat gets an automatic title is decided before the terminal event, so a client
    // that sees `done` knows the decision is made (no title request can follow a named chat's reply).
    let title_files =
        if first_exchange && matches!(outcome.ending, Ending::Done | Ending::DiffError { .. }) {
            let mut s = ctx.lock();
            // The active chat only if it is this one, in this store (ids are unique per store only).
            let files: Vec<String> = match s.active_if(&target.key()) {
                Some(a) => a
                    .chat
                    .context_files
                    .iter()
                    .map(|c| c.path.clone())
                    .collect(),
                None => Vec::new(),
            };
            let name = super::remote::current_name(&mut s, target.global, &target.id);
            name.is_some_and(|n| is_default_name(&n)).then_some(files)
        } else {
            None
        };
    let _ = ctx.out.send(&m);
    if let Some(files) = title_files {
        super::remote::auto_title(
            ctx,
            provider,
            config,
            target.id,
            target.global,
            first_message,
            files,
            true,
        )
        .await;
    }
}

/// A name the user did not choose: empty, or what a client names a new chat (ours and bb7.nvim's).
pub fn is_default_name(name: &str) -> bool {
    /// `YYYY-MM-DD HH:MM`, the stamp both clients put in a new chat's name.
    fn stamp(s: &str) -> bool {
        let b = s.as_bytes();
        b.len() == 16
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b' ',
                13 => *c == b':',
                _ => c.is_ascii_digit(),
            })
    }
    let name = name.trim();
    name.is_empty()
        || name.eq_ignore_ascii_case("untitled chat")
        || name.eq_ignore_ascii_case("new chat")
        // Ours: `Chat 2026-01-31 14:05`; the bb7.nvim client's: `Untitled chat - 2026-01-31 14:05`.
        || name.strip_prefix("Chat ").is_some_and(stamp)
        || name.strip_prefix("Untitled chat - ").is_some_and(stamp)
}

#[cfg(test)]
mod default_name_tests {
    use super::is_default_name;

    #[test]
    fn both_clients_default_names_are_default() {
        for n in [
            "",
            "Chat 2026-01-31 14:05",
            "Untitled chat - 2026-01-31 14:05",
            "Untitled chat",
            "New chat",
        ] {
            assert!(is_default_name(n), "{n:?}");
        }
        for n in [
            "Chat about parsing",
            "Untitled chat - my notes",
            "Chat 2026-01-31 14:0x",
            "Chat 2026:01-31 14:05",
            "Fix the parser",
        ] {
            assert!(!is_default_name(n), "{n:?}");
        }
    }
}

/// The `done` / `diff_error` / `error` event (without the request id).
fn terminal_event(o: &ReplyOutcome) -> Map<String, Value> {
    let usage = serde_json::to_value(&o.usage).unwrap_or(json!({}));
    let v = match &o.ending {
        Ending::Done => json!({
            "type": "done",
            "output_files": o.written.iter().map(|w| w.path.clone()).collect::<Vec<_>>(),
            "usage": usage,
            "duration": o.duration,
        }),
        Ending::DiffError { errors, tool_calls } => json!({
            "type": "diff_error",
            "errors": errors,
            "tool_calls": tool_calls,
            "usage": usage,
            "duration": o.duration,
        }),
        Ending::Failed(msg) => json!({"type": "error", "message": msg}),
        Ending::Cancelled => json!({"type": "error", "message": ABORTED}),
    };
    let mut m = match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(a) = &o.agent
        && m.get("type") != Some(&json!("error"))
    {
        crate::agent::events::add_counts(&mut m, a);
    }
    m
}

/// Appends the reply (and, after an error or a cancel, the system message) to its chat.
fn record(
    s: &mut Workspace,
    target: &ChatRef,
    o: &ReplyOutcome,
    model: &str,
) -> Result<(), String> {
    let mut parts = Vec::new();
    if !o.thinking.is_empty() {
        let mut p = Map::new();
        p.insert("type".into(), json!("thinking"));
        p.insert("content".into(), json!(o.thinking));
        parts.push(p);
    }
    match &o.agent {
        Some(a) => parts.extend(a.parts.iter().cloned()),
        None if !o.text.is_empty() => parts.push(text_part(&o.text)),
        None => {}
    }
    for w in &o.written {
        parts.push(event_part(
            "AssistantWriteFile",
            &w.path,
            &w.version,
            w.prev_version.as_deref(),
            false,
            false,
        ));
    }
    let mut messages = Vec::new();
    if !parts.is_empty() {
        let mut m = Message {
            role: "assistant".into(),
            parts,
            model: Some(model.to_string()),
            timestamp: Some(now()),
            ..Default::default()
        };
        if !o.written.is_empty() {
            m.output_files = Some(o.written.iter().map(|w| w.path.clone()).collect());
        }
        m.extra.insert(
            "usage".into(),
            serde_json::to_value(&o.usage).unwrap_or(Value::Null),
        );
        if let Some(a) = &o.agent {
            m.extra
                .insert("agent".into(), crate::agent::events::message_summary(a));
        }
        messages.push(m);
    }
    match &o.ending {
        Ending::Failed(msg) => messages.push(Message::text("system", msg)),
        Ending::Cancelled => messages.push(Message::text("system", ABORTED)),
        _ => {}
    }
    if messages.is_empty() {
        return Ok(());
    }
    update_chat(s, target, |chat| chat.messages.extend(messages))
}

/// Applies `f` to the chat `target` names: the active chat in memory when it is that one, else
/// chat.json through the held directory handle.
pub fn update_chat(
    s: &mut Workspace,
    target: &ChatRef,
    f: impl FnOnce(&mut Chat),
) -> Result<(), String> {
    let active = s.active_if_mut(&target.key());
    if let Some(a) = active {
        f(&mut a.chat);
        return s.save_active();
    }
    let bytes = crate::store::read_regular(&target.dir, "chat.json")
        .map_err(|e| format!("Cannot read chat {}: {e}", target.id))?;
    let (mut chat, _) = Chat::parse(&bytes)?;
    f(&mut chat);
    crate::store::write_atomic(&target.dir, "chat.json", &chat.to_json())
        .map_err(|e| format!("Failed to save chat: {e}"))
}

/// One line per reply in `~/.bb7/usage.jsonl` (best effort).
fn log_usage(target: &ChatRef, model: &str, o: &ReplyOutcome) {
    use std::io::Write;
    let Some(dir) = crate::paths::state_dir() else {
        return;
    };
    let outcome = match &o.ending {
        Ending::Done => "done",
        Ending::DiffError { .. } => "diff_error",
        Ending::Failed(_) => "error",
        Ending::Cancelled => "cancelled",
    };
    let line = json!({
        "timestamp": now(),
        "chat_id": target.id,
        "global": target.global,
        "model": model,
        "outcome": outcome,
        "usage": o.usage,
        "duration": o.duration,
        "output_files": o.written.len(),
    });
    let result = std::fs::create_dir_all(&dir).and_then(|_| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("usage.jsonl"))?;
        f.write_all(format!("{line}\n").as_bytes())
    });
    if let Err(e) = result {
        tracing::warn!("cannot append to the usage log: {e}");
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
