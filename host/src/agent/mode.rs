//! A chat's mode (AGENT-PROTOCOL.md §1): `chat` (the default: the model sees only what the user
//! added), `agent` (the model explores the project with the retrieval tools) or `plan`
//! (ECOSYSTEM-PROTOCOL.md §9: the model explores and proposes a plan, changing nothing; see
//! [`super::plan`]). Stored as `mode` in chat.json; absent means `chat`, so older chat files need
//! no migration.

use serde_json::json;

use crate::chat::model::Chat;

/// The error for a bad `mode` value.
pub const MODE_ERROR: &str = r#"Invalid field: mode must be "chat", "agent" or "plan""#;

/// A `mode` value that is not `chat`, `agent` or `plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", MODE_ERROR)]
pub struct ModeError;

/// The protocol edge's message (handlers return their error as the client's text).
impl From<ModeError> for String {
    fn from(e: ModeError) -> String {
        e.to_string()
    }
}

/// A chat's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The model sees only what the user added (the default).
    Chat,
    /// The model explores the project with the retrieval tools.
    Agent,
    /// The model explores the project and proposes a plan; it cannot change files.
    Plan,
}

impl Mode {
    /// The mode's name as stored in chat.json and sent to the client.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Chat => "chat",
            Mode::Agent => "agent",
            Mode::Plan => "plan",
        }
    }

    /// Parses a client's value.
    pub fn parse(s: &str) -> Result<Mode, ModeError> {
        match s {
            "chat" => Ok(Mode::Chat),
            "agent" => Ok(Mode::Agent),
            "plan" => Ok(Mode::Plan),
            _ => Err(ModeError),
        }
    }

    /// The mode stored in `chat` (anything unknown reads as `chat`).
    pub fn of(chat: &Chat) -> Mode {
        match chat.extra.get("mode").and_then(|v| v.as_str()) {
            Some("agent") => Mode::Agent,
            Some("plan") => Mode::Plan,
            _ => Mode::Chat,
        }
    }

    /// Stores the mode in `chat` (`chat` removes the key, keeping older files byte-identical).
    pub fn store(self, chat: &mut Chat) {
        match self {
            Mode::Chat => {
                chat.extra.remove("mode");
            }
            Mode::Agent | Mode::Plan => {
                chat.extra.insert("mode".into(), json!(self.as_str()));
            }
        }
    }
}

/// The error for agent mode in a global chat.
pub const GLOBAL_AGENT_ERROR: &str =
    "Agent mode needs a project: global chats have no project for the model to explore";

/// The error for plan mode in a global chat.
pub const GLOBAL_PLAN_ERROR: &str =
    "Plan mode needs a project: global chats have no project for the model to explore";

impl Mode {
    /// Why this mode cannot be used in a global chat; `None`: it can (chat mode).
    pub fn global_error(self) -> Option<&'static str> {
        match self {
            Mode::Chat => None,
            Mode::Agent => Some(GLOBAL_AGENT_ERROR),
            Mode::Plan => Some(GLOBAL_PLAN_ERROR),
        }
    }
}
