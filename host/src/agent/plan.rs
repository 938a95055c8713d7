//! Plan mode (ECOSYSTEM-PROTOCOL.md §9; AGENT-PLAN.md phase 3, "plan, ask, then edit").
//!
//! A plan reply is an agent reply with the retrieval tools and [`PROPOSE_PLAN`] only: no edit
//! tool is offered, and an edit call the model makes anyway is answered as an unknown tool. A
//! valid `propose_plan` call becomes the reply's [`Plan`]; the reply ends with the agent event
//! `plan.proposed`, and the plan is stored in chat.json (`plans`, see [`store`]) in the same
//! write as the reply (`ReplyOutcome::proposed_plan`). `plan_approve` starts an agent reply whose user message is the
//! approved plan ([`approval_message`]); when the plan names files, edits outside them are
//! refused to the model ([`PlanRole::Execute`]). `plan_reject` records the user's feedback as a
//! system message, so the next request carries it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::events::AgentEvent;
use super::retrieval::CallOutcome;
use super::tools::ToolRunner;
use crate::chat::model::{Chat, Message, Role};
use crate::llm::prompt::printable;
use crate::llm::request::ToolSpec;
use crate::llm::tool_calls::ToolCall;

/// The tool a plan reply proposes its plan with.
pub const PROPOSE_PLAN: &str = "propose_plan";

/// The most steps a plan may have.
pub const MAX_STEPS: usize = 50;

/// The most characters of one text field of a plan (summary, title, detail, feedback).
pub const MAX_TEXT: usize = 4000;

/// The most files one step may list.
pub const MAX_FILES: usize = 100;

/// Added to the system message in plan mode.
pub const PLAN_SYSTEM_NOTE: &str = "\n\n# Plan mode\n\nDo not change files in this reply: \
make a plan the user will review. Explore the project with search_project, list_files and \
read_file, then call propose_plan once with a short summary and the steps, each with a title, \
optionally a detail and the project files it will change. After propose_plan, end your reply \
with one or two sentences; the user approves, edits or rejects the plan, and only an approved \
plan is carried out (in a later reply, with the edit tools).";

/// The chat.json key the plans are stored under.
const PLANS_KEY: &str = "plans";

/// Why a plan action or a `propose_plan` call was refused (the message is the client's, or the
/// model's, text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The plan (or its steps) does not match the `propose_plan` schema.
    #[error("{0}")]
    Invalid(String),
    /// No plan with this id in the chat.
    #[error("Unknown plan_id: {0} (no plan with that id in this chat)")]
    Unknown(String),
    /// The plan was already approved or rejected.
    #[error("Plan {id} was already {status}: only a proposed plan can be approved or rejected")]
    Decided {
        /// The plan's id.
        id: String,
        /// Its status.
        status: String,
    },
    /// `chat_id` names a chat other than the active one.
    #[error("Invalid field: chat_id {0} is not the active chat (select it first)")]
    NotActive(String),
}

/// The protocol edge's message (handlers return their error as the client's text).
impl From<PlanError> for String {
    fn from(e: PlanError) -> String {
        e.to_string()
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// What the step does, in a line.
    pub title: String,
    /// More about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The project files it changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// What `propose_plan` takes (validated by [`parse_proposal`] as its schema says).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Proposal {
    summary: String,
    steps: Vec<PlanStep>,
}

/// A plan as stored in chat.json's `plans`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// `plan-…`, unique in the chat.
    pub id: String,
    /// What the plan does.
    pub summary: String,
    /// Its steps, in order (the approved ones once approved).
    pub steps: Vec<PlanStep>,
    /// `proposed`, `approved` or `rejected`.
    pub status: String,
    /// The user's feedback on a rejected plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// When it was proposed, RFC 3339 UTC.
    #[serde(default)]
    pub created: String,
}

/// What plan mode changes in an agent reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum PlanRole {
    /// No plan involved: an ordinary agent reply.
    #[default]
    None,
    /// A plan reply: `propose_plan` is offered, the edit tools are not.
    Propose,
    /// Carrying out an approved plan: with `files`, edits outside them are refused.
    Execute {
        /// The plan's files (normalised project-relative paths); `None`: not restricted.
        files: Option<BTreeSet<String>>,
        /// The approved plan's id: the approval is undone when the reply gets nowhere (see
        /// [`unapprove`]).
        plan_id: String,
    },
}

impl PlanRole {
    /// Whether `name` is routed by plan mode: `Some(true)` for `propose_plan` in a plan reply,
    /// `Some(false)` for a tool a plan reply does not offer (the edit tools: answered as
    /// unknown), `None` when the usual routing applies.
    pub fn route(&self, name: &str) -> Option<bool> {
        match self {
            PlanRole::Propose if name == PROPOSE_PLAN => Some(true),
            PlanRole::Propose
                if super::builtin::BuiltinTool::parse(name).map(|t| t.kind())
                    != Some(super::builtin::ToolKind::Retrieval) =>
            {
                Some(false)
            }
            _ => None,
        }
    }

    /// The mode `job.started` names: `plan` for a plan reply; `agent` otherwise, carrying out an
    /// approved plan included (ECOSYSTEM-PROTOCOL.md §9: an agent-mode reply, which the event
    /// marks with the plan's id instead).
    pub fn job_mode(&self) -> &'static str {
        match self {
            PlanRole::Propose => "plan",
            PlanRole::None | PlanRole::Execute { .. } => "agent",
        }
    }

    /// The id of the plan this reply carries out, if it carries one out.
    pub fn approving(&self) -> Option<&str> {
        match self {
            PlanRole::Execute { plan_id, .. } => Some(plan_id),
            _ => None,
        }
    }

    /// The tool error for `tool` writing `rel` (a normalised project-relative path) outside the
    /// approved plan's files; `None`: the write may be adopted.
    pub fn refuse_path(&self, tool: &str, rel: &str) -> Option<String> {
        let PlanRole::Execute {
            files: Some(files), ..
        } = self
        else {
            return None;
        };
        if files.contains(rel) {
            return None;
        }
        Some(format!(
            "{tool}: {rel} is not among the files of the approved plan ({}); writes are restricted \
             to them, so none of this call's files is proposed",
            files.iter().cloned().collect::<Vec<_>>().join(", ")
        ))
    }

    /// The tool error for an edit call outside the approved plan's files; `None`: it may run.
    pub fn refuse_edit(&self, runner: Option<&ToolRunner>, call: &ToolCall) -> Option<String> {
        let PlanRole::Execute {
            files: Some(files), ..
        } = self
        else {
            return None;
        };
        let (Some(runner), Ok(args)) = (runner, call.arguments.as_ref()) else {
            return None;
        };
        let outside: Vec<String> = super::tools::arg_paths(args)
            .iter()
            // A path that does not normalise is refused by the edit runner with its own message.
            .filter_map(|raw| runner.project_path(&call.name, raw).ok())
            .filter(|rel| !files.contains(rel))
            .collect();
        if outside.is_empty() {
            return None;
        }
        Some(format!(
            "{}: {} is not among the files of the approved plan ({}); edits are restricted to them. \
             Change only those files, or say in your reply what else should change",
            call.name,
            outside.join(", "),
            files.iter().cloned().collect::<Vec<_>>().join(", ")
        ))
    }
}

/// The `propose_plan` tool as offered to the model.
pub fn spec() -> ToolSpec {
    ToolSpec {
        name: PROPOSE_PLAN.into(),
        description:
            "Propose your plan to the user: a short summary and the steps, in order. Each \
            step has a title, optionally a detail, and the project files it will change (relative \
            paths). The user reviews the plan; nothing is changed until they approve it. Call this \
            once, after exploring, then end your reply."
                .into(),
        parameters: schema(),
    }
}

/// The JSON Schema of `propose_plan`'s arguments.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "summary": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT,
                        "description": "What the plan does, in a sentence or two."},
            "steps": {"type": "array", "minItems": 1, "maxItems": MAX_STEPS, "items": step_schema()}
        },
        "required": ["summary", "steps"],
        "additionalProperties": false
    })
}

fn step_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
            "detail": {"type": "string", "maxLength": MAX_TEXT},
            "files": {"type": "array", "maxItems": MAX_FILES,
                      "items": {"type": "string", "minLength": 1}}
        },
        "required": ["title"],
        "additionalProperties": false
    })
}

/// `propose_plan`'s arguments as a summary and steps, checked against [`schema`].
pub fn parse_proposal(args: &Value) -> Result<(String, Vec<PlanStep>), PlanError> {
    let p: Proposal = serde_json::from_value(args.clone())
        .map_err(|e| PlanError::Invalid(format!("{PROPOSE_PLAN}: invalid arguments: {e}")))?;
    let summary = text(&p.summary, "summary")?;
    Ok((summary, check_steps(p.steps)?))
}

/// A client's `steps` (`plan_approve`), checked as `propose_plan`'s are.
pub fn parse_steps(v: &Value) -> Result<Vec<PlanStep>, PlanError> {
    let steps: Vec<PlanStep> = serde_json::from_value(v.clone())
        .map_err(|e| PlanError::Invalid(format!("Invalid field: steps: {e}")))?;
    check_steps(steps)
}

fn text(s: &str, field: &str) -> Result<String, PlanError> {
    let t = printable(s).trim().to_string();
    if t.is_empty() {
        return Err(PlanError::Invalid(format!("{field} must not be empty")));
    }
    if t.chars().count() > MAX_TEXT {
        return Err(PlanError::Invalid(format!(
            "{field} is longer than {MAX_TEXT} characters"
        )));
    }
    Ok(t)
}

fn check_steps(steps: Vec<PlanStep>) -> Result<Vec<PlanStep>, PlanError> {
    if steps.is_empty() || steps.len() > MAX_STEPS {
        return Err(PlanError::Invalid(format!(
            "steps must have 1 to {MAX_STEPS} items"
        )));
    }
    steps
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let n = i + 1;
            let detail = match s.detail.as_deref().map(|d| printable(d).trim().to_string()) {
                Some(d) if d.chars().count() > MAX_TEXT => {
                    return Err(PlanError::Invalid(format!(
                        "steps[{n}].detail is longer than {MAX_TEXT} characters"
                    )));
                }
                Some(d) if !d.is_empty() => Some(d),
                _ => None,
            };
            if s.files.len() > MAX_FILES {
                return Err(PlanError::Invalid(format!(
                    "steps[{n}].files has more than {MAX_FILES} items"
                )));
            }
            let mut files = Vec::new();
            for f in &s.files {
                let f = printable(f).trim().to_string();
                if f.is_empty() {
                    return Err(PlanError::Invalid(format!(
                        "steps[{n}].files must not contain an empty path"
                    )));
                }
                if !files.contains(&f) {
                    files.push(f);
                }
            }
            Ok(PlanStep {
                title: text(&s.title, &format!("steps[{n}].title"))?,
                detail,
                files,
            })
        })
        .collect()
}

/// Runs a `propose_plan` call: a valid plan replaces `slot` (the reply's plan, the latest call's);
/// an invalid one is a tool error the model reads.
pub fn propose(call: &ToolCall, slot: &mut Option<Plan>) -> CallOutcome {
    let parsed = match &call.arguments {
        Ok(args) => parse_proposal(args),
        Err(e) => Err(PlanError::Invalid(format!(
            "{PROPOSE_PLAN}: invalid arguments: {e}"
        ))),
    };
    let (summary, steps) = match parsed {
        Ok(p) => p,
        Err(PlanError::Invalid(e)) if e.starts_with(PROPOSE_PLAN) => {
            return CallOutcome::failed(e, None);
        }
        Err(e) => return CallOutcome::failed(format!("{PROPOSE_PLAN}: {e}"), None),
    };
    let id = format!("plan-{}", &super::events::new_job_id()[4..]);
    let n = steps.len();
    *slot = Some(Plan {
        id: id.clone(),
        summary,
        steps,
        status: "proposed".into(),
        feedback: None,
        created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    });
    CallOutcome {
        ok: true,
        content: format!(
            "The plan ({n} steps) is recorded as {id} and shown to the user, who will approve, edit \
             or reject it. Do not call more tools: end your reply now in a sentence or two."
        ),
        summary: format!("{id}: {n} step{}", if n == 1 { "" } else { "s" }),
        error: None,
        record: None,
    }
}

/// [`propose`] between the project's `pre_tool_call` and `post_tool_call` hooks, as every other
/// tool call runs (`root`: the project, `None` for none): a call a hook denies records no plan, and
/// the model reads `denied by hook <name>: <reason>`.
pub fn propose_hooked(
    root: Option<&std::path::Path>,
    call: &ToolCall,
    slot: &mut Option<Plan>,
) -> CallOutcome {
    let hooks = super::hooked::Hooked::new(root, None, crate::audit::Actor::Model);
    if let Some(denied) = hooks.before(call) {
        return denied;
    }
    let mut proposed = None;
    let outcome = hooks.after(call, propose(call, &mut proposed));
    if outcome.ok && proposed.is_some() {
        *slot = proposed;
    }
    outcome
}

/// The `plan.proposed` event of `plan`.
pub fn proposed_event(plan: &Plan) -> AgentEvent {
    AgentEvent::PlanProposed {
        plan_id: plan.id.clone(),
        summary: plan.summary.clone(),
        steps: serde_json::to_value(&plan.steps).unwrap_or(Value::Null),
    }
}

/// The plans stored in `chat`, oldest first (entries that do not parse are skipped).
pub fn plans(chat: &Chat) -> Vec<Plan> {
    chat.extra
        .get(PLANS_KEY)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| serde_json::from_value(v.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Stores `plan` in `chat`, replacing the stored plan with its id (others are kept as they are).
pub fn store(chat: &mut Chat, plan: &Plan) {
    let v = serde_json::to_value(plan).unwrap_or(Value::Null);
    let list = chat
        .extra
        .entry(PLANS_KEY)
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    if let Value::Array(a) = list {
        match a
            .iter_mut()
            .find(|p| p.get("id").and_then(Value::as_str) == Some(plan.id.as_str()))
        {
            Some(slot) => *slot = v,
            None => a.push(v),
        }
    }
}

/// Puts the approved plan `id` of `chat` back to `proposed` (its steps as approved): the reply
/// that was to carry it out got nowhere (refused by a spend cap, cancelled or failed before
/// anything streamed), so the user can approve it again. Nothing when it is not approved.
pub fn unapprove(chat: &mut Chat, id: &str) {
    if let Some(mut plan) = plans(chat)
        .into_iter()
        .find(|p| p.id == id && p.status == "approved")
    {
        plan.status = "proposed".into();
        store(chat, &plan);
    }
}

/// The proposed plan `id` of `chat`, or why it cannot be decided.
pub fn pending(chat: &Chat, id: &str) -> Result<Plan, PlanError> {
    let plan = plans(chat)
        .into_iter()
        .find(|p| p.id == id)
        .ok_or_else(|| PlanError::Unknown(id.to_string()))?;
    if plan.status != "proposed" {
        return Err(PlanError::Decided {
            id: plan.id,
            status: plan.status,
        });
    }
    Ok(plan)
}

/// The files an approved plan restricts edits to (`None` when it lists none), normalised as
/// project paths the way the edit tools normalise theirs.
pub fn plan_files(plan: &Plan, project_root: &std::path::Path) -> Option<BTreeSet<String>> {
    let files: BTreeSet<String> = plan
        .steps
        .iter()
        .flat_map(|s| s.files.iter())
        .map(
            |f| match crate::chat::paths::classify(f, Some(project_root)) {
                Ok(crate::chat::paths::ClientPath::Internal(rel)) => rel,
                _ => f.clone(),
            },
        )
        .collect();
    (!files.is_empty()).then_some(files)
}

/// The user message that starts carrying out `plan` (recorded in the chat like a sent message).
pub fn approval_message(plan: &Plan, restricted: bool) -> String {
    let mut out = format!(
        "I approve plan {}. Carry it out now with the edit tools.\n\nSummary: {}\n\nSteps:\n",
        plan.id, plan.summary
    );
    for (i, s) in plan.steps.iter().enumerate() {
        out.push_str(&format!("{}. {}\n", i + 1, s.title));
        if let Some(d) = &s.detail {
            out.push_str(&format!("   {d}\n"));
        }
        if !s.files.is_empty() {
            out.push_str(&format!("   Files: {}\n", s.files.join(", ")));
        }
    }
    if restricted {
        out.push_str("\nChange only the files the plan lists; edits to other files are refused.\n");
    }
    out
}

/// Marks the proposed plan `id` of `chat` rejected with `feedback`, and adds the system message
/// that tells the next request about it.
pub fn reject(chat: &mut Chat, id: &str, feedback: Option<&str>) -> Result<(), PlanError> {
    let mut plan = pending(chat, id)?;
    let feedback = match feedback.map(|f| printable(f).trim().to_string()) {
        Some(f) if f.chars().count() > MAX_TEXT => {
            return Err(PlanError::Invalid(format!(
                "Invalid field: feedback is longer than {MAX_TEXT} characters"
            )));
        }
        Some(f) if !f.is_empty() => Some(f),
        _ => None,
    };
    plan.status = "rejected".into();
    plan.feedback = feedback.clone();
    store(chat, &plan);
    let note = match &feedback {
        Some(f) => format!(
            "The user rejected plan {id} ({}). Their feedback: {f}",
            plan.summary
        ),
        None => format!(
            "The user rejected plan {id} ({}) without feedback.",
            plan.summary
        ),
    };
    chat.messages.push(Message::text(Role::System, &note));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposals_are_checked_against_the_schema() {
        let ok = json!({"summary": " s ", "steps": [{"title": "t", "files": ["a.rs", "a.rs"]}]});
        let (s, steps) = parse_proposal(&ok).unwrap();
        assert_eq!(s, "s");
        assert_eq!(steps[0].files, vec!["a.rs".to_string()]);
        for bad in [
            json!({"summary": "s"}),
            json!({"summary": "s", "steps": []}),
            json!({"summary": "", "steps": [{"title": "t"}]}),
            json!({"summary": "s", "steps": [{"title": " "}]}),
            json!({"summary": "s", "steps": [{"title": "t", "extra": 1}]}),
            json!({"summary": "s", "steps": [{"title": "t", "files": [""]}]}),
            json!({"summary": 3, "steps": [{"title": "t"}]}),
        ] {
            assert!(parse_proposal(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plan_mode_routes_edits_as_unknown() {
        let r = PlanRole::Propose;
        assert_eq!(r.route(PROPOSE_PLAN), Some(true));
        assert_eq!(r.route("write_file"), Some(false));
        assert_eq!(r.route("edit_file"), Some(false));
        assert_eq!(r.route("clarify_user"), Some(false));
        assert_eq!(r.route("read_file"), None);
        assert_eq!(PlanRole::None.route(PROPOSE_PLAN), None);
    }
}
