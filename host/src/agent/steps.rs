//! Agent mode (AGENT-PROTOCOL.md §1): a reply of several steps. Each step streams the model's
//! answer; its tool calls run (retrieval against the project read-only, edits against the reply's
//! staging directory, `clarify_user` through the client), and the assistant message with its calls
//! plus one result per call are appended for the next step. The loop ends when a step makes no
//! call, or after the budget is spent with one last step in which no tool may be called. Edits are
//! committed to `output/` all or nothing, as in chat mode.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::clarify::{self, NO_USER_ANSWER};
use super::config::AgentConfig;
use super::events::{JobEvents, new_job_id};
use super::reply::{Ending, ReplyJob, ReplyOutcome, ReplySink};
use super::retrieval::{self, CallOutcome, Project};
use super::tools::call_record;
use super::trace::Trace;
use crate::llm::prompt::printable;
use crate::llm::request::{ToolResult, Turn};
use crate::llm::tool_calls::{MAX_TOOL_CALLS_PER_STEP, ToolCall};
use crate::llm::{StreamEvent, Usage};

/// Added to the system message in agent mode.
pub const AGENT_SYSTEM_NOTE: &str = "\n\n# Agent mode\n\nYou can explore the project yourself: \
search_project finds text, list_files lists files, read_file reads a file (large files in ranges of \
lines). Only files inside the project are visible; `.git/`, `.bb7/`, files ignored by `.gitignore` \
and secret files (the deny list) are not. You may change any UTF-8 text file of the project: read \
it with read_file first and pass the `file_id` its result shows to edit_file, or create files with \
write_file. Your changes are proposed to the user, never applied directly; later reads of a file \
you changed show your version. Ask the user with clarify_user only when a wrong guess would waste \
work. Tool calls are limited per reply, so search before reading whole files.";

/// The last user message once the tool budget is spent.
pub fn budget_note(max: usize) -> String {
    format!(
        "[bb7] The tool-call budget of this reply ({max} calls) is spent: no more tools can be called. \
         Answer now with what you have found, and say what you could not check."
    )
}

/// How much of a result chat.json keeps (and `@history` shows).
pub const EXCERPT_CHARS: usize = 600;
/// The most bytes of a call's arguments (as JSON) chat.json keeps and the client is sent; longer
/// ones are shortened (long strings cut, then the whole cut to an excerpt), so one step stores at
/// most [`MAX_TOOL_CALLS_PER_STEP`] × (this + the result excerpt).
pub const MAX_STORED_ARGS_BYTES: usize = 2048;
/// The longest string value kept whole in stored arguments.
const STORED_STRING_CHARS: usize = 200;

/// What the model is told (after the step's last result) when its step made more calls than
/// [`MAX_TOOL_CALLS_PER_STEP`].
pub fn dropped_note(dropped: usize) -> String {
    format!(
        "[bb7] This step made {} tool calls; at most {MAX_TOOL_CALLS_PER_STEP} are taken per step, so the \
         other {dropped} were not run (they count against this reply's tool-call budget). Make fewer \
         calls per step.",
        MAX_TOOL_CALLS_PER_STEP + dropped
    )
}

/// What an agent reply needs beyond a [`ReplyJob`].
pub struct AgentJob {
    /// The tool-call budget, the retrieval limits and the deny list.
    pub config: AgentConfig,
    /// The project the retrieval tools read.
    pub project: Project,
    /// The third-party tools enabled and granted for the project.
    pub third_party: super::third_party::ThirdParty,
}

/// What the agent loop adds to a [`ReplyOutcome`].
#[derive(Debug, Clone, Default)]
pub struct AgentSummary {
    /// The job's id (names its trace file).
    pub job_id: String,
    /// Steps started (one model request each).
    pub steps: usize,
    /// Every call the model made (each got a result, run or not).
    pub tool_calls: usize,
    /// The calls that ran.
    pub tool_calls_run: usize,
    /// chat.json parts in order: each step's text, then its calls.
    pub parts: Vec<Map<String, Value>>,
}

struct StepAcc<'s> {
    text: String,
    thinking: String,
    step_text: String,
    sink: &'s mut dyn ReplySink,
}

impl StepAcc<'_> {
    fn event(&mut self, ev: &StreamEvent) {
        match ev {
            StreamEvent::Text(t) if !t.is_empty() => {
                self.text.push_str(t);
                self.step_text.push_str(t);
                self.sink.chunk(t);
            }
            StreamEvent::Reasoning(t) if !t.is_empty() => {
                self.thinking.push_str(t);
                self.sink.thinking(t);
            }
            _ => {}
        }
    }

    fn status(&mut self, line: &str) {
        self.text.push_str(line);
        self.sink.chunk(line);
    }
}

enum Step {
    Ok(crate::llm::StreamSummary),
    Err(String),
    Cancelled,
}

/// Runs an agent reply.
pub async fn run(mut job: ReplyJob, agent: AgentJob, sink: &mut dyn ReplySink) -> ReplyOutcome {
    let started = Instant::now();
    let job_id = new_job_id();
    let trace = match job.chat_dir.try_clone() {
        Ok(d) => Trace::open(&d, &job_id),
        Err(_) => Trace::none(),
    };
    let mut events = JobEvents::new(job_id.clone(), trace);
    let budget = agent.config.max_tool_calls_per_job;
    let mut acc = StepAcc {
        text: String::new(),
        thinking: String::new(),
        step_text: String::new(),
        sink,
    };
    events.emit(
        acc.sink,
        "job.started",
        json!({"job_id": job_id, "mode": "agent", "model": job.request.model,
               "max_tool_calls": budget}),
        Some(json!({"project": agent.project.root, "tools": job.request.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>()})),
    );
    if let Some(t) = job.tools.as_mut() {
        t.set_agent(true);
    }
    let user = job.request.user_message(job.retry.as_ref(), &[]);
    let mut summary = AgentSummary {
        job_id: job_id.clone(),
        ..Default::default()
    };
    let mut usage = Usage::default();
    let mut turns: Vec<Turn> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut edit_errors: Vec<String> = Vec::new();
    let mut edit_records: Vec<Value> = Vec::new();
    let mut final_step = false;
    let note = budget_note(budget);
    // Time spent waiting for the model and for the user, left out of the host's own time.
    let mut model_ms = 0.0f64;
    let mut wait_ms = 0.0f64;
    let ending = 'job: loop {
        summary.steps += 1;
        let step = summary.steps;
        let body = job
            .request
            .agent_body(&user, &turns, final_step.then_some(note.as_str()));
        events.note(
            "step.request",
            json!({"step": step, "earlier_steps": turns.len(), "final": final_step}),
        );
        acc.step_text.clear();
        let t_model = Instant::now();
        let streamed = stream_step(&job, &body, &mut acc, &mut job.cancel.clone()).await;
        model_ms += t_model.elapsed().as_secs_f64() * 1000.0;
        let s = match streamed {
            Step::Ok(s) => s,
            Step::Err(e) => break Ending::Failed(e),
            Step::Cancelled => break Ending::Cancelled,
        };
        usage = usage.add(&s.usage);
        if !acc.step_text.is_empty() {
            summary
                .parts
                .push(crate::chat::model::text_part(&acc.step_text));
        }
        if final_step || s.tool_calls.is_empty() {
            if final_step && !s.tool_calls.is_empty() {
                events.note(
                    "step.ignored_calls",
                    json!({"step": step, "calls": s.tool_calls.len()}),
                );
            }
            break Ending::Done;
        }
        let dropped = s.dropped_tool_calls;
        if dropped > 0 {
            // Refused as the budget refuses: counted, not run. They are not in the step's
            // assistant message either, so they need no results; the model is told below.
            events.note(
                "step.calls_dropped",
                json!({"step": step, "taken": s.tool_calls.len(), "dropped": dropped}),
            );
            acc.status(&format!(
                "\n[{dropped} more tool calls in this step were not run: at most {MAX_TOOL_CALLS_PER_STEP} per step]\n"
            ));
        }
        let mut turn = Turn {
            text: acc.step_text.clone(),
            tool_calls: s.tool_calls.clone(),
            reasoning_details: s.reasoning_details.clone(),
            results: Vec::new(),
        };
        // The loop detector: a step that repeats a call already made is stopped there; the repeat
        // and every call after it in the step are not run, and the model is told why.
        let mut repeated: Option<(String, usize)> = None;
        for call in &s.tool_calls {
            if *job.cancel.borrow() {
                break 'job Ending::Cancelled;
            }
            summary.tool_calls += 1;
            events.emit(
                acc.sink,
                "tool.call.requested",
                json!({"id": call.id, "tool": call.name, "args": stored_args(call), "step": step}),
                None,
            );
            let t0 = Instant::now();
            let key = call_key(call);
            let outcome = if summary.tool_calls > budget {
                CallOutcome::failed(
                    format!(
                        "not run: the tool-call budget of this reply ({budget} calls) is spent"
                    ),
                    None,
                )
            } else if let Some((tool, first)) = &repeated {
                CallOutcome::failed(
                    format!(
                        "not run: this step was stopped at its repeated `{tool}` call (first made in step {first}); \
                         use the results above and decide again"
                    ),
                    None,
                )
            } else if let Some(first) = seen.get(&key) {
                repeated = Some((call.name.clone(), *first));
                events.note(
                    "step.loop_detected",
                    json!({"step": step, "tool": call.name, "first_step": first}),
                );
                CallOutcome::failed(
                    format!(
                        "not run again: this exact call was already made in step {first} and its result is above; \
                         the rest of this step is not run either. Do not repeat a call: use its result or try \
                         something different"
                    ),
                    None,
                )
            } else {
                seen.insert(key, step);
                let waits = call.name == "clarify_user";
                let call_result = run_call(&mut job, &agent, call, &mut events, &mut acc).await;
                if waits {
                    wait_ms += t0.elapsed().as_secs_f64() * 1000.0;
                }
                match call_result {
                    Some(o) => o,
                    None => break 'job Ending::Cancelled,
                }
            };
            if outcome.record.is_some() || outcome.ok {
                summary.tool_calls_run += 1;
            }
            if matches!(call.name.as_str(), "write_file" | "edit_file") {
                edit_records.push(call_record(call, outcome.error.as_deref()));
                if let Some(e) = &outcome.error
                    && outcome.record.is_some()
                {
                    edit_errors.push(e.clone());
                }
            }
            let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
            let mut data = json!({"id": call.id, "tool": call.name, "ok": outcome.ok,
                "summary": printable(&outcome.summary), "bytes": outcome.content.len(),
                "duration_ms": round3(duration_ms), "step": step});
            if let Some(e) = &outcome.error {
                data["error"] = json!(printable(e));
            }
            let extra = json!({
                "component_sha256": outcome.record.as_ref().map(|r| r.component_sha256.clone()),
                "wit_version": outcome.record.as_ref().map(|r| r.wit_version.clone()),
                "grants": outcome.record.as_ref().map(|r| r.grants.clone()),
                "component": outcome.record.as_ref().and_then(|r| r.component.clone()),
                "network": outcome.record.as_ref().map(|r| r.network.clone()),
                "env": outcome.record.as_ref().map(|r| r.env.clone()),
                "sandbox_ms": outcome.record.as_ref().map(|r| round3(r.duration_ms)),
                "args_raw": call.arguments_raw,
                "result": outcome.content,
            });
            events.emit(acc.sink, "tool.call.completed", data, Some(extra));
            summary
                .parts
                .push(call_part(call, &outcome, step, duration_ms));
            turn.results.push(ToolResult {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                ok: outcome.ok,
                content: outcome.content,
            });
        }
        summary.tool_calls += dropped;
        if dropped > 0
            && let Some(last) = turn.results.last_mut()
        {
            last.content.push_str("\n\n");
            last.content.push_str(&dropped_note(dropped));
        }
        turns.push(turn);
        if !edit_errors.is_empty() {
            break Ending::DiffError {
                errors: edit_errors.clone(),
                tool_calls: edit_records.clone(),
            };
        }
        if summary.tool_calls >= budget {
            final_step = true;
        }
        if !acc.text.is_empty() && !acc.text.ends_with('\n') {
            acc.status("\n");
        }
    };
    let mut ending = ending;
    let mut written = Vec::new();
    if matches!(ending, Ending::Done | Ending::Cancelled)
        && let Some(tools) = &job.tools
    {
        match tools.commit(&job.chat_dir) {
            Ok(w) => written = w,
            Err(e) if ending == Ending::Done => ending = Ending::Failed(e),
            Err(e) => tracing::warn!("cancelled reply: {e}"),
        }
    }
    match &ending {
        Ending::Done => {
            if !written.is_empty() {
                let files: Vec<&str> = written.iter().map(|w| w.path.as_str()).collect();
                events.emit(acc.sink, "edits.proposed", json!({"files": files}), None);
            }
        }
        Ending::DiffError { errors, .. } => {
            events.emit(
                acc.sink,
                "job.failed",
                json!({"error": format!("{} file change(s) failed; nothing was proposed", errors.len())}),
                Some(json!({"errors": errors})),
            );
        }
        Ending::Failed(e) => {
            events.emit(acc.sink, "job.failed", json!({"error": e}), None);
        }
        Ending::Cancelled => {
            events.emit(
                acc.sink,
                "job.failed",
                json!({"error": "cancelled by the user"}),
                None,
            );
        }
    }
    events.note(
        "job.finished",
        json!({"steps": summary.steps, "tool_calls": summary.tool_calls,
               "tool_calls_run": summary.tool_calls_run, "usage": usage,
               "duration_ms": round3(started.elapsed().as_secs_f64() * 1000.0),
               "model_ms": round3(model_ms), "user_wait_ms": round3(wait_ms),
               "host_ms": round3(started.elapsed().as_secs_f64() * 1000.0 - model_ms - wait_ms)}),
    );
    ReplyOutcome {
        text: acc.text,
        thinking: acc.thinking,
        written,
        usage,
        ending,
        duration: started.elapsed().as_secs_f64(),
        agent: Some(summary),
    }
}

async fn stream_step(
    job: &ReplyJob,
    body: &Value,
    acc: &mut StepAcc<'_>,
    cancel: &mut watch::Receiver<bool>,
) -> Step {
    if *cancel.borrow() {
        return Step::Cancelled;
    }
    let mut on_event = |ev: &StreamEvent| acc.event(ev);
    tokio::select! {
        r = job.provider.stream(body, &mut on_event) => match r {
            Ok(s) => Step::Ok(s),
            Err(e) => Step::Err(e.to_string()),
        },
        _ = cancel.wait_for(|c| *c) => Step::Cancelled,
    }
}

/// Runs one call that is within budget and not a repeat. `None`: cancelled while it waited.
async fn run_call(
    job: &mut ReplyJob,
    agent: &AgentJob,
    call: &ToolCall,
    events: &mut JobEvents,
    acc: &mut StepAcc<'_>,
) -> Option<CallOutcome> {
    let name = call.name.as_str();
    if name == "clarify_user" {
        return clarify_call(job, call, events, acc).await;
    }
    let is_edit = matches!(name, "write_file" | "edit_file");
    let third = agent.third_party.find(name);
    if !retrieval::is_retrieval(name) && !is_edit && third.is_none() {
        let offered: Vec<&str> = job.request.tools.iter().map(|t| t.name.as_str()).collect();
        return Some(CallOutcome::failed(
            format!(
                "unknown tool {name:?}; the tools offered are {}",
                offered.join(", ")
            ),
            None,
        ));
    }
    let Some(mut runner) = job.tools.take() else {
        return Some(CallOutcome::failed(
            format!("{name}: this chat has no tools"),
            None,
        ));
    };
    let c = call.clone();
    let project = &agent.project;
    // The project handle is shared by reference: run on this thread inside block_in_place, which
    // lets the runtime move other tasks away while the sandbox call blocks.
    let (runner, outcome) = tokio::task::block_in_place(|| {
        let outcome = if let Some(t) = third {
            agent.third_party.run(&mut runner, project, t, &c)
        } else if is_edit {
            match runner.run(&c) {
                Ok(done) => CallOutcome {
                    ok: true,
                    // the status, then what the tool asks the model to check (edit_file notes)
                    content: std::iter::once(done.status.trim())
                        .chain(done.notes.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    summary: done.status.trim().trim_matches(['[', ']']).to_string(),
                    error: None,
                    record: runner.take_record(),
                },
                Err(e) => {
                    let record = runner.take_record();
                    // A refusal before the sandbox ran (read-only file, bad path) is an edit
                    // failure too: give it a record-less marker so the reply still fails.
                    let mut o = CallOutcome::failed(e, record);
                    if o.record.is_none() {
                        crate::audit::refusal(
                            &crate::audit::Actor::Model,
                            Some(&project.root),
                            "call",
                            o.error.as_deref().unwrap_or_default(),
                        );
                        o.record = Some(crate::sandbox::CallRecord {
                            started: chrono::Utc::now()
                                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                            tool: c.name.clone(),
                            component_sha256: String::new(),
                            wit_version: String::new(),
                            component: None,
                            grants: Vec::new(),
                            network: "none".into(),
                            env: "none".into(),
                            duration_ms: 0.0,
                            compile_ms: 0.0,
                            outcome: "refused".into(),
                            error: o.error.clone(),
                        });
                    }
                    o
                }
            }
        } else {
            retrieval::run(&mut runner, project, &c)
        };
        (runner, outcome)
    });
    job.tools = Some(runner);
    if is_edit && outcome.ok {
        acc.status(&format!("\n[{}]\n", outcome.summary));
    }
    Some(outcome)
}

async fn clarify_call(
    job: &mut ReplyJob,
    call: &ToolCall,
    events: &mut JobEvents,
    acc: &mut StepAcc<'_>,
) -> Option<CallOutcome> {
    let question = call
        .arguments
        .as_ref()
        .ok()
        .and_then(|a| a.get("question"))
        .and_then(Value::as_str)
        // Shown to the user: no escape sequence of the model's reaches the client.
        .map(|q| printable(q).trim().to_string())
        .filter(|q| !q.is_empty());
    let Some(question) = question else {
        return Some(CallOutcome::failed(
            "clarify_user: `question` must be a non-empty string".into(),
            None,
        ));
    };
    let question_id = format!("q-{}", &new_job_id()[4..]);
    let mut waiting = clarify::ask(question_id.clone());
    events.emit(
        acc.sink,
        "clarification.requested",
        json!({"question_id": question_id, "question": question, "id": call.id}),
        None,
    );
    let mut cancel = job.cancel.clone();
    let answer = tokio::select! {
        a = waiting.answer() => a,
        _ = cancel.wait_for(|c| *c) => None,
    };
    drop(waiting);
    let answer = answer?;
    let skipped = answer == NO_USER_ANSWER;
    events.emit(
        acc.sink,
        "clarification.received",
        json!({"question_id": question_id, "answer": answer, "skipped": skipped}),
        None,
    );
    let content = if skipped {
        format!(
            "{NO_USER_ANSWER}: the user chose not to answer. Proceed with your best judgment and say what you assumed."
        )
    } else {
        format!("The user answered: {answer}")
    };
    Some(CallOutcome {
        ok: true,
        content,
        summary: if skipped {
            "skipped".into()
        } else {
            "answered".into()
        },
        error: None,
        record: None,
    })
}

/// The loop detector's key: the tool and its arguments in canonical form.
fn call_key(call: &ToolCall) -> String {
    match &call.arguments {
        Ok(v) => format!("{}\u{0}{v}", call.name),
        Err(_) => format!("{}\u{0}{}", call.name, call.arguments_raw),
    }
}

fn args_value(call: &ToolCall) -> Value {
    match &call.arguments {
        Ok(v) => v.clone(),
        Err(_) => json!(call.arguments_raw),
    }
}

/// The chat.json part of one call: the tool, its arguments and a capped excerpt of its result.
fn call_part(
    call: &ToolCall,
    o: &CallOutcome,
    step: usize,
    duration_ms: f64,
) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("type".into(), json!("tool_call"));
    p.insert("id".into(), json!(call.id));
    p.insert("tool".into(), json!(call.name));
    p.insert("args".into(), stored_args(call));
    p.insert("ok".into(), json!(o.ok));
    p.insert("summary".into(), json!(printable(&o.summary)));
    p.insert("bytes".into(), json!(o.content.len()));
    p.insert("step".into(), json!(step));
    p.insert("duration_ms".into(), json!(round3(duration_ms)));
    // Shown by the client (the tool log) and in `@history`: no terminal control.
    p.insert(
        "excerpt".into(),
        json!(excerpt(&printable(&o.content), EXCERPT_CHARS)),
    );
    p
}

/// A call's arguments as chat.json keeps them: whole up to [`MAX_STORED_ARGS_BYTES`] of JSON;
/// beyond, string values are cut to [`STORED_STRING_CHARS`], and if that is still too long the
/// whole becomes an excerpt of the JSON text.
fn stored_args(call: &ToolCall) -> Value {
    // Shown to the client (the tool log) and repeated in `@history`: no terminal control.
    fn clean(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(printable(s).into_owned()),
            Value::Array(a) => Value::Array(a.iter().map(clean).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), clean(v))).collect())
            }
            other => other.clone(),
        }
    }
    let v = clean(&args_value(call));
    if v.to_string().len() <= MAX_STORED_ARGS_BYTES {
        return v;
    }
    fn cut(v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(excerpt(s, STORED_STRING_CHARS)),
            Value::Array(a) => Value::Array(a.iter().map(cut).collect()),
            Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), cut(v))).collect()),
            other => other.clone(),
        }
    }
    let short = cut(&v);
    let text = short.to_string();
    if text.len() <= MAX_STORED_ARGS_BYTES {
        return short;
    }
    Value::String(excerpt(&text, MAX_STORED_ARGS_BYTES / 2))
}

/// The first `max` characters of `s`, saying how much was cut.
pub fn excerpt(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}… [{} more bytes]", &s[..i], s.len() - i),
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Opens the project for a job; `None` for chats without a project.
pub fn open_project(root: &std::path::Path, config: &AgentConfig) -> Result<Project, String> {
    Project::open(root, config.tool_settings())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_and_keys() {
        assert_eq!(excerpt("abc", 5), "abc");
        assert_eq!(excerpt("abcdef", 3), "abc… [3 more bytes]");
        let c = |args: &str| ToolCall {
            id: "x".into(),
            name: "read_file".into(),
            arguments_raw: args.into(),
            arguments: serde_json::from_str(args).map_err(|e| e.to_string()),
        };
        assert_eq!(
            call_key(&c(r#"{"a":1,"b":2}"#)),
            call_key(&c(r#"{"b":2, "a":1}"#))
        );
        assert_ne!(call_key(&c(r#"{"a":1}"#)), call_key(&c(r#"{"a":2}"#)));
    }
}

/// The tools offered in agent mode: the edit tools of `diff_mode`, the retrieval tools (described
/// under the agent's limits) and `clarify_user`.
pub fn offered(
    diff_mode: crate::config::DiffMode,
    config: &AgentConfig,
    third_party: &super::third_party::ThirdParty,
) -> Result<Vec<crate::llm::request::ToolSpec>, String> {
    let mut specs = super::tools::offered(diff_mode)?;
    specs.extend(retrieval::specs(&config.tool_settings())?);
    specs.push(clarify::spec());
    specs.extend(third_party.specs());
    Ok(specs)
}

/// The names third-party tools may never take: every built-in tool's.
pub fn reserved_names() -> Vec<String> {
    let mut v: Vec<String> = crate::sandbox::registry::BUILTIN_COMPONENTS
        .iter()
        .map(|c| c.tool.to_string())
        .collect();
    v.push(clarify::spec().name);
    v
}
