//! A chat's mode (AGENT-PROTOCOL.md §1): `chat` (the default: the model sees only what the user
//! added) or `agent` (the model explores the project with the retrieval tools). Stored as `mode`
//! in chat.json; absent means `chat`, so older chat files need no migration.

use serde_json::json;

use crate::chat::model::Chat;

/// The error for a bad `mode` value.
pub const MODE_ERROR: &str = r#"Invalid field: mode must be "chat" or "agent""#;

/// A `mode` value that is neither `chat` nor `agent`.
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
}

impl Mode {
    /// The mode's name as stored in chat.json and sent to the client.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Chat => "chat",
            Mode::Agent => "agent",
        }
    }

    /// Parses a client's value.
    pub fn parse(s: &str) -> Result<Mode, ModeError> {
        match s {
            "chat" => Ok(Mode::Chat),
            "agent" => Ok(Mode::Agent),
            _ => Err(ModeError),
        }
    }

    /// The mode stored in `chat` (anything unknown reads as `chat`).
    pub fn of(chat: &Chat) -> Mode {
        match chat.extra.get("mode").and_then(|v| v.as_str()) {
            Some("agent") => Mode::Agent,
            _ => Mode::Chat,
        }
    }

    /// Stores the mode in `chat` (`chat` removes the key, keeping older files byte-identical).
    pub fn store(self, chat: &mut Chat) {
        match self {
            Mode::Chat => {
                chat.extra.remove("mode");
            }
            Mode::Agent => {
                chat.extra.insert("mode".into(), json!("agent"));
            }
        }
    }
}

/// The error for agent mode in a global chat.
pub const GLOBAL_AGENT_ERROR: &str =
    "Agent mode needs a project: global chats have no project for the model to explore";
