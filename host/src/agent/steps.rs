//! The reply loop, for both modes (AGENT-PROTOCOL.md §1, EDITS.md): each step streams the model's
//! answer; its tool calls run (retrieval against the project read-only, edits against the reply's
//! staging directory, `clarify_user` through the client), and the assistant message with its calls
//! plus one result per call are appended for the next step. One place makes the model request
//! ([`steps`]), one runs a call ([`step_call`]). The job's [`Policy`] decides what differs: chat
//! mode offers only the edit tools, takes one step (plus one hidden repair request when an edit
//! fails) and reports no job; agent mode ends when a step makes no call, or after the budget is
//! spent with one last step in which no tool may be called. Edits are committed to `output/` all
//! or nothing.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::{Value, json};

use super::builtin::{BuiltinTool, ToolKind};
use super::clarify::{self, NO_USER_ANSWER};
use super::emit::{self, round3};
use super::events::{AgentEvent, JobEvents, ReplySink, new_job_id};
use super::gate::{CallGate, Verdict};
use super::job::{
    AgentError, AgentJob, AgentSummary, Ending, Policy, REATTEMPT_CHUNK, ReplyJob, ReplyOutcome,
    StepLimit,
};
use super::retrieval::{self, CallOutcome, Project};
use super::stream::{self, Acc, Streamed};
use super::tools::{ToolRunner, call_record};
use super::trace::Trace;
use crate::config::agent::AgentConfig;
use crate::llm::Usage;
use crate::llm::prompt::{RetryContext, printable};
use crate::llm::request::{ToolResult, Turn};
use crate::llm::tool_calls::{MAX_TOOL_CALLS_PER_STEP, ToolCall};

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
        "{} ({max} calls) is spent: no more tools can be called. \
         Answer now with what you have found, and say what you could not check.",
        crate::llm::routing::BUDGET_SPENT
    )
}

/// What the loop has gathered so far.
#[derive(Default)]
struct JobState {
    summary: AgentSummary,
    usage: Usage,
    turns: Vec<Turn>,
    /// The errors of the current step's edit calls that reached the tool (they fail the reply).
    edit_errors: Vec<String>,
    /// One record per edit call, failed or not, over every step (a `diff_error`'s `tool_calls`).
    edit_records: Vec<Value>,
    /// Time spent waiting for the model, left out of the host's own time.
    model_ms: f64,
    /// Time spent waiting for the user, left out of the host's own time.
    wait_ms: f64,
}

/// The request a step makes.
enum Next {
    /// A step: the first, or one after the calls of the step before.
    Step,
    /// The last step, after the budget is spent: no tool may be called.
    Final,
    /// Chat mode's hidden repair attempt: the first request again, with the errors and the
    /// reply's pending changes.
    Repair(RetryContext),
}

/// Where a call goes.
enum Route<'a> {
    /// To the edit runner (in chat mode, every call: the runner refuses any other tool).
    Edit,
    /// A retrieval tool, against the job's project.
    Retrieval(&'a AgentJob),
    /// A third-party tool.
    ThirdParty(&'a AgentJob, &'a super::third_party::Offered),
    /// `clarify_user`.
    Clarify,
    /// `propose_plan` (plan mode, [`super::plan`]).
    Plan,
    /// No tool of that name is offered.
    Unknown,
}

impl Policy {
    fn route(&self, name: &str) -> Route<'_> {
        let Some(agent) = &self.explore else {
            return Route::Edit;
        };
        match agent.plan.route(name) {
            Some(true) => return Route::Plan,
            Some(false) => return Route::Unknown,
            None => {}
        }
        if let Some(t) = agent.third_party.find(name) {
            return Route::ThirdParty(agent, t);
        }
        match BuiltinTool::parse(name).map(BuiltinTool::kind) {
            Some(ToolKind::Clarify) => Route::Clarify,
            Some(ToolKind::Edit) => Route::Edit,
            Some(_) => Route::Retrieval(agent),
            None => Route::Unknown,
        }
    }
}

/// Runs a reply as `policy` says: announces the job (agent mode), runs its steps, commits, and
/// reports how it ended.
pub async fn run(mut job: ReplyJob, policy: Policy, sink: &mut dyn ReplySink) -> ReplyOutcome {
    let started = Instant::now();
    let mut events = if policy.report {
        let job_id = new_job_id();
        let trace = match job.chat_dir.try_clone() {
            Ok(d) => Trace::open(&d, &job_id),
            Err(_) => Trace::none(),
        };
        JobEvents::new(job_id, trace)
    } else {
        JobEvents::silent()
    };
    let mut gate = match policy.steps {
        StepLimit::Budget(n) => CallGate::new(n),
        StepLimit::One { .. } => CallGate::unlimited(),
    };
    let mut acc = Acc::new(sink, policy.report);
    events.emit(
        acc.sink,
        AgentEvent::JobStarted {
            job_id: events.job_id.clone(),
            mode: (policy.explore.as_ref()).map_or("agent", |a| a.plan.job_mode()),
            plan_id: (policy.explore.as_ref())
                .and_then(|a| a.plan.approving())
                .map(str::to_string),
            model: job.request.model.clone(),
            max_tool_calls: gate.budget(),
        },
        Some(
            json!({"project": policy.explore.as_ref().map(|a| &a.project.root),
                    "tools": job.request.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>()}),
        ),
    );
    if let Some(t) = job.tools.as_mut() {
        t.set_agent(policy.explore.is_some());
    }
    let mut st = JobState {
        summary: AgentSummary {
            job_id: events.job_id.clone(),
            approving: (policy.explore.as_ref())
                .and_then(|a| a.plan.approving())
                .map(str::to_string),
            ..Default::default()
        },
        ..Default::default()
    };
    let ending = steps(&mut job, &policy, &mut events, &mut gate, &mut acc, &mut st).await;
    // Chat mode reports nothing before its record: its files are published with it.
    // It writes, fsyncs and may wait for a review action holding the outputs (apply_hunks): off
    // the runtime's worker, as the sandbox calls are.
    let (ending, written, publish) = tokio::task::block_in_place(|| {
        stream::commit(job.tools.as_ref(), &job.chat_dir, ending, !policy.report)
    });
    if let Some(plan) = st.summary.plan.as_ref().filter(|_| ending.answered()) {
        events.emit(acc.sink, super::plan::proposed_event(plan), None);
    }
    emit::job_end(&mut events, acc.sink, &ending, &written);
    let total_ms = started.elapsed().as_secs_f64() * 1000.0;
    events.note(
        "job.finished",
        json!({"steps": st.summary.steps, "tool_calls": st.summary.tool_calls,
               "tool_calls_run": st.summary.tool_calls_run, "usage": st.usage,
               "duration_ms": round3(total_ms),
               "model_ms": round3(st.model_ms), "user_wait_ms": round3(st.wait_ms),
               "host_ms": round3(total_ms - st.model_ms - st.wait_ms)}),
    );
    ReplyOutcome {
        text: acc.text,
        thinking: acc.thinking,
        written,
        publish,
        usage: st.usage,
        ending,
        duration: started.elapsed().as_secs_f64(),
        agent: policy.report.then_some(st.summary),
    }
}

/// The loop: one model request per step, then the step's calls; [`after_step`] decides whether
/// another request follows.
async fn steps(
    job: &mut ReplyJob,
    policy: &Policy,
    events: &mut JobEvents,
    gate: &mut CallGate,
    acc: &mut Acc<'_>,
    st: &mut JobState,
) -> Ending {
    let mut user = None;
    let mut next = Next::Step;
    loop {
        st.summary.steps += 1;
        let step = st.summary.steps;
        let final_step = matches!(next, Next::Final);
        let body = request_body(job, policy, &st.turns, &next, &mut user);
        events.note(
            "step.request",
            json!({"step": step, "earlier_steps": st.turns.len(), "final": final_step}),
        );
        acc.step_text.clear();
        st.edit_errors.clear();
        let t_model = Instant::now();
        let streamed =
            stream::stream_once(&*job.provider, &body, acc, events, &mut job.cancel.clone()).await;
        st.model_ms += t_model.elapsed().as_secs_f64() * 1000.0;
        let s = match streamed {
            Streamed::Ok(s) => s,
            Streamed::Err(e) => return Ending::Failed(e.to_string()),
            Streamed::Cancelled => return Ending::Cancelled,
        };
        st.usage = st.usage.add(&s.usage);
        if !acc.step_text.is_empty() {
            st.summary
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
            return Ending::Done;
        }
        let dropped = s.dropped_tool_calls;
        if dropped > 0 {
            events.note(
                "step.calls_dropped",
                json!({"step": step, "taken": s.tool_calls.len(), "dropped": dropped}),
            );
            if let StepLimit::Budget(_) = policy.steps {
                // Refused as the budget refuses: counted, not run. They are not in the step's
                // assistant message either, so they need no results; the model is told below.
                acc.status(&format!(
                    "\n[{dropped} more tool calls in this step were not run: at most {MAX_TOOL_CALLS_PER_STEP} per step]\n"
                ));
            }
        }
        let mut turn = Turn {
            text: acc.step_text.clone(),
            tool_calls: s.tool_calls.clone(),
            reasoning_details: s.reasoning_details.clone(),
            results: Vec::new(),
        };
        gate.start_step();
        for call in &s.tool_calls {
            if *job.cancel.borrow() {
                return Ending::Cancelled;
            }
            match step_call(job, policy, call, step, events, gate, acc, st).await {
                Some(result) => turn.results.push(result),
                None => return Ending::Cancelled,
            }
        }
        gate.count_dropped(dropped);
        st.summary.tool_calls = gate.calls();
        if dropped > 0 {
            match policy.steps {
                StepLimit::Budget(_) => {
                    if let Some(last) = turn.results.last_mut() {
                        last.content.push_str("\n\n");
                        last.content.push_str(&emit::dropped_note(dropped));
                    }
                }
                // All or nothing: the calls past the cap were not run, so nothing of this reply
                // is proposed.
                StepLimit::One { .. } => st.edit_errors.push(format!(
                    "{dropped} more tool calls than the {MAX_TOOL_CALLS_PER_STEP} one reply may make were not run"
                )),
            }
        }
        st.turns.push(turn);
        next = match after_step(job, policy, gate, acc, st) {
            Ok(next) => next,
            Err(ending) => return ending,
        };
    }
}

/// The body of the request `next`: chat mode renders its one request (again, with the retry
/// context, for the repair); agent mode sends the user message once rendered (`user`) and every
/// earlier step's calls and results.
fn request_body(
    job: &ReplyJob,
    policy: &Policy,
    turns: &[Turn],
    next: &Next,
    user: &mut Option<String>,
) -> Value {
    match (next, policy.steps) {
        (Next::Repair(retry), _) => {
            let pending = job.tools.as_ref().map(|t| t.pending()).unwrap_or_default();
            job.request.body(Some(retry), &pending, false)
        }
        (_, StepLimit::One { .. }) => job.request.body(job.retry.as_ref(), &[], true),
        (_, StepLimit::Budget(max)) => {
            let user =
                user.get_or_insert_with(|| job.request.user_message(job.retry.as_ref(), &[]));
            let note = matches!(next, Next::Final).then(|| budget_note(max));
            job.request.agent_body(user, turns, note.as_deref())
        }
    }
}

/// After a step's calls: the next request, or how the reply ends. A failed edit ends it (after
/// chat mode's one repair attempt); chat mode's one step ends it anyway; in agent mode the step
/// after the budget is spent is the last.
fn after_step(
    job: &ReplyJob,
    policy: &Policy,
    gate: &CallGate,
    acc: &mut Acc<'_>,
    st: &mut JobState,
) -> Result<Next, Ending> {
    let failed = !st.edit_errors.is_empty();
    match policy.steps {
        StepLimit::One { .. } if !failed => return Err(Ending::Done),
        StepLimit::One { repair } => {
            if repair && st.summary.steps == 1 && job.tools.is_some() {
                acc.status(REATTEMPT_CHUNK);
                return Ok(Next::Repair(RetryContext {
                    errors: st.edit_errors.clone(),
                    tool_calls: st.edit_records.clone(),
                    partial: true,
                }));
            }
        }
        StepLimit::Budget(_) if !failed => {
            if !acc.text.is_empty() && !acc.text.ends_with('\n') {
                acc.status("\n");
            }
            return Ok(if gate.spent() {
                Next::Final
            } else {
                Next::Step
            });
        }
        StepLimit::Budget(_) => {}
    }
    Err(Ending::DiffError {
        errors: st.edit_errors.clone(),
        tool_calls: st.edit_records.clone(),
    })
}

/// One call of a step: reported, passed through the gate, run if admitted, reported again and
/// recorded. Its result for the model; `None`: cancelled while it waited.
#[allow(clippy::too_many_arguments)]
async fn step_call(
    job: &mut ReplyJob,
    policy: &Policy,
    call: &ToolCall,
    step: usize,
    events: &mut JobEvents,
    gate: &mut CallGate,
    acc: &mut Acc<'_>,
    st: &mut JobState,
) -> Option<ToolResult> {
    let route = policy.route(&call.name);
    emit::call_requested(events, acc.sink, call, step);
    let t0 = Instant::now();
    let verdict = gate.admit(call, step);
    st.summary.tool_calls = gate.calls();
    let outcome = match verdict {
        Verdict::Refuse(error) => CallOutcome::failed(error, None),
        Verdict::Repeat { first_step, error } => {
            events.note(
                "step.loop_detected",
                json!({"step": step, "tool": call.name, "first_step": first_step}),
            );
            CallOutcome::failed(error, None)
        }
        Verdict::Run if matches!(route, Route::Plan) => {
            let root = job.tools.as_ref().map(|r| r.project_root());
            super::plan::propose_hooked(root, call, &mut st.summary.plan)
        }
        Verdict::Run => {
            let component = match &route {
                Route::ThirdParty(_, t) => Some(t.status.name.as_str()),
                _ => None,
            };
            let root = job.tools.as_ref().map(|r| r.project_root());
            let hooks = super::hooked::Hooked::new(root, component, crate::audit::Actor::Model);
            match hooks.before(call) {
                Some(denied) => denied,
                None => {
                    let outcome = run_call(job, policy, &route, call, events, acc).await;
                    if matches!(route, Route::Clarify) {
                        st.wait_ms += t0.elapsed().as_secs_f64() * 1000.0;
                    }
                    hooks.after(call, outcome?)
                }
            }
        }
    };
    if outcome.record.is_some() || outcome.ok {
        st.summary.tool_calls_run += 1;
    }
    if matches!(route, Route::Edit) {
        st.edit_records
            .push(call_record(call, outcome.error.as_deref()));
        if let Some(e) = &outcome.error
            && outcome.record.is_some()
        {
            st.edit_errors.push(e.clone());
        }
    }
    let duration_ms = t0.elapsed().as_secs_f64() * 1000.0;
    emit::call_completed(events, acc.sink, call, &outcome, step, duration_ms);
    st.summary
        .parts
        .push(emit::call_part(call, &outcome, step, duration_ms));
    Some(ToolResult {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        ok: outcome.ok,
        content: outcome.content,
    })
}

/// Runs one call that is within budget and not a repeat. `None`: cancelled while it waited.
async fn run_call(
    job: &mut ReplyJob,
    policy: &Policy,
    route: &Route<'_>,
    call: &ToolCall,
    events: &mut JobEvents,
    acc: &mut Acc<'_>,
) -> Option<CallOutcome> {
    let name = call.name.as_str();
    let agent = match route {
        Route::Clarify => return clarify_call(job, call, events, acc).await,
        Route::Edit => {
            let plan = policy.explore.as_ref().map(|a| &a.plan);
            if let Some(e) = plan.and_then(|p| p.refuse_edit(job.tools.as_ref(), call)) {
                return Some(CallOutcome::failed(e, None));
            }
            let audit_root = policy.explore.as_ref().map(|a| a.project.root.clone());
            return Some(edit_call(&mut job.tools, call, audit_root, acc).await);
        }
        Route::Unknown => {
            let offered: Vec<&str> = job.request.tools.iter().map(|t| t.name.as_str()).collect();
            return Some(CallOutcome::failed(
                format!(
                    "unknown tool {name:?}; the tools offered are {}",
                    offered.join(", ")
                ),
                None,
            ));
        }
        Route::Retrieval(agent) | Route::ThirdParty(agent, _) => *agent,
        // Run by `step_call` (it records the plan on the reply).
        Route::Plan => {
            return Some(CallOutcome::failed(format!("{name}: not run"), None));
        }
    };
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
        let outcome = match route {
            Route::ThirdParty(_, t) => {
                agent
                    .third_party
                    .run(&mut runner, project, t, &c, &agent.plan)
            }
            _ => retrieval::run(&mut runner, project, &c),
        };
        (runner, outcome)
    });
    job.tools = Some(runner);
    Some(outcome)
}

/// Runs an edit call on a blocking thread and streams its status line when it succeeds. Every
/// failure fails the reply: a refusal before the sandbox ran (read-only file, bad path, no tools
/// in a global chat) gets a record-less marker, and in agent mode (`audit_root`) is recorded in
/// the audit chain. If the blocking task is lost, the runner (and its staging directory) is lost
/// with it and `tools` stays `None`, so nothing of the reply is committed.
async fn edit_call(
    tools: &mut Option<ToolRunner>,
    call: &ToolCall,
    audit_root: Option<PathBuf>,
    acc: &mut Acc<'_>,
) -> CallOutcome {
    let Some(mut runner) = tools.take() else {
        return refused(
            call,
            format!(
                "{}: this chat has no tools (global chats cannot change files)",
                call.name
            ),
        );
    };
    let c = call.clone();
    let joined = tokio::task::spawn_blocking(move || {
        let result = runner.run(&c);
        let record = runner.take_record();
        (runner, result, record)
    })
    .await;
    let (runner, result, record) = match joined {
        Ok(done) => done,
        Err(e) => {
            return refused(
                call,
                format!("{}: the tool call failed unexpectedly: {e}", call.name),
            );
        }
    };
    *tools = Some(runner);
    match result {
        Ok(done) => {
            acc.status(&done.status);
            CallOutcome {
                ok: true,
                // the status, then what the tool asks the model to check (edit_file notes)
                content: std::iter::once(done.status.trim())
                    .chain(done.notes.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                summary: done.status.trim().trim_matches(['[', ']']).to_string(),
                error: None,
                record,
            }
        }
        Err(e) => match record {
            Some(record) => CallOutcome::failed(e.0, Some(record)),
            None => {
                if let Some(root) = &audit_root {
                    // In the sandbox's chain (the one its calls go to, `--audit-log` included);
                    // the default chain when there is no sandbox to ask.
                    let sandbox = tools.as_ref().and_then(|r| r.sandbox().ok());
                    match sandbox.as_ref().and_then(|s| s.audit()) {
                        Some(log) => log.refusal(Some(root.as_path()), "call", &e.0),
                        None => crate::audit::refusal(
                            &crate::audit::Actor::Model,
                            Some(root.as_path()),
                            "call",
                            &e.0,
                        ),
                    }
                }
                refused(call, e.0)
            }
        },
    }
}

/// A failed edit call that never reached the sandbox, with the marker record that makes it fail
/// the reply.
fn refused(call: &ToolCall, error: String) -> CallOutcome {
    let mut o = CallOutcome::failed(error, None);
    o.record = Some(crate::sandbox::CallRecord {
        started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        tool: call.name.clone(),
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
    o
}

async fn clarify_call(
    job: &mut ReplyJob,
    call: &ToolCall,
    events: &mut JobEvents,
    acc: &mut Acc<'_>,
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
        AgentEvent::ClarificationRequested {
            question_id: question_id.clone(),
            question,
            id: call.id.clone(),
        },
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
        AgentEvent::ClarificationReceived {
            question_id,
            answer: answer.clone(),
            skipped,
        },
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

/// Opens the project for a job.
pub fn open_project(root: &std::path::Path, config: &AgentConfig) -> Result<Project, AgentError> {
    Project::open(root, config.tool_settings())
}

/// The tools offered in agent mode: the edit tools of `diff_mode`, the retrieval tools (described
/// under the agent's limits) and `clarify_user`.
pub fn offered(
    diff_mode: crate::config::DiffMode,
    config: &AgentConfig,
    third_party: &super::third_party::ThirdParty,
) -> Result<Vec<crate::llm::request::ToolSpec>, AgentError> {
    let mut specs = super::tools::offered(diff_mode)?;
    specs.extend(retrieval::specs(&config.tool_settings())?);
    specs.push(clarify::spec());
    specs.extend(third_party.specs());
    Ok(specs)
}

/// The names third-party tools may never take: every built-in tool's.
pub fn reserved_names() -> Vec<String> {
    BuiltinTool::ALL
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}
