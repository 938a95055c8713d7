//! Clarifying questions (`clarify_user`, AGENT-PLAN.md §21): the reply pauses on one pending
//! question until the client answers it with the `clarify` action, skips it (`no_user_answer`), or
//! cancels the send.
//!
//! The pending question is process-wide: one host process serves one client, which has at most one
//! send in flight, so there is at most one question at a time.

use std::sync::Mutex;

use serde_json::json;
use tokio::sync::oneshot;

use crate::llm::request::ToolSpec;

/// The answer that skips a question.
pub const NO_USER_ANSWER: &str = "no_user_answer";

/// Why a `clarify` action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClarifyError {
    /// No question with this id is waiting for an answer.
    #[error(
        "Unknown or stale question_id: {0} (no question with that id is waiting for an answer)"
    )]
    Unknown(String),
}

struct Pending {
    question_id: String,
    tx: oneshot::Sender<String>,
}

static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

/// A question waiting for its answer; dropping it withdraws the question.
pub struct Waiting {
    /// The id the client's `clarify` action answers with.
    pub question_id: String,
    rx: oneshot::Receiver<String>,
}

impl Waiting {
    /// The answer, once given (`None` if the question was withdrawn).
    pub async fn answer(&mut self) -> Option<String> {
        (&mut self.rx).await.ok()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Ok(mut p) = PENDING.lock()
            && p.as_ref()
                .is_some_and(|p| p.question_id == self.question_id)
        {
            *p = None;
        }
    }
}

/// Registers a new pending question (replacing any stale one) and returns its handle.
pub fn ask(question_id: String) -> Waiting {
    let (tx, rx) = oneshot::channel();
    if let Ok(mut p) = PENDING.lock() {
        *p = Some(Pending {
            question_id: question_id.clone(),
            tx,
        });
    }
    Waiting { question_id, rx }
}

/// Delivers `answer` to the pending question `question_id`.
pub fn answer(question_id: &str, answer: &str) -> Result<(), ClarifyError> {
    let mut p = PENDING
        .lock()
        .map_err(|_| ClarifyError::Unknown(question_id.to_string()))?;
    match p.take() {
        Some(pending) if pending.question_id == question_id => pending
            .tx
            .send(answer.to_string())
            .map_err(|_| ClarifyError::Unknown(question_id.to_string())),
        other => {
            *p = other;
            Err(ClarifyError::Unknown(question_id.to_string()))
        }
    }
}

/// The `clarify_user` tool as offered to the model.
pub fn spec() -> ToolSpec {
    ToolSpec {
        name: super::builtin::BuiltinTool::ClarifyUser.name().into(),
        description: "Ask the user one short question when the request is ambiguous and a wrong guess \
            would waste work. The reply pauses until the user answers; the answer is this call's \
            result. If the result is `no_user_answer` the user chose not to answer: proceed with your \
            best judgment and say what you assumed. Ask at most what you need; do not ask for things \
            you can find with the other tools."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "minLength": 1, "description": "The question for the user."}
            },
            "required": ["question"],
            "additionalProperties": false
        }),
    }
}
