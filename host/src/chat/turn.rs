//! Recording one turn in a chat: the user message (with its context snapshot) before anything is
//! sent, and the reply, or the error or cancel that ended it, afterwards.

use cap_std::fs::Dir;
use serde_json::{Value, json};

use super::error::ChatError;
use super::model::{
    Chat, ContextEvent, ContextFile, EventKind, Message, Part, Role, SnapshotEntry, now,
};

/// The user message of a send: its text, the model and reasoning effort it is sent with, and the
/// context at this moment (what fork and edit restore).
pub fn user_message(chat: &Chat, content: &str, model: &str, effort: &str) -> Message {
    let mut msg = Message::text(Role::User, content);
    msg.model = Some(model.to_string());
    msg.context_snapshot = Some(chat.context_files.iter().map(SnapshotEntry::of).collect());
    if !effort.is_empty() {
        msg.extra.insert("reasoning_effort".into(), json!(effort));
    }
    msg
}

/// Appends the user message and clears the draft (it was sent). The caller saves the chat, and
/// takes the message back with [`unrecord_user_message`] if that fails.
pub fn record_user_message(chat: &mut Chat, msg: Message) {
    chat.messages.push(msg);
    chat.draft.clear();
}

/// Undoes [`record_user_message`] (the draft stays cleared: the client holds the text).
pub fn unrecord_user_message(chat: &mut Chat) {
    chat.messages.pop();
}

/// Whether the chat has had a real reply yet (a recorded context event is not one).
pub fn has_reply(chat: &Chat) -> bool {
    chat.messages.iter().any(|m| {
        m.role == Role::Assistant
            && m.parts
                .iter()
                .any(|p| p.get("type").and_then(Value::as_str) != Some("context_event"))
    })
}

/// A file the reply wrote to the chat's output.
#[derive(Debug, Clone)]
pub struct WrittenFile {
    /// The project-relative path.
    pub path: String,
    /// The file id of the content written.
    pub version: String,
    /// The file id the reply started from, if any.
    pub prev_version: Option<String>,
    /// Agent mode: the context entry of a project file the reply read and edited (its snapshot,
    /// the read content, is stored), which joins the context with the reply.
    pub adopted: Option<ContextFile>,
}

/// What a finished reply leaves in its chat.
#[derive(Debug, Clone, Default)]
pub struct ReplyRecord {
    /// The reasoning text; empty when the model sent none.
    pub thinking: String,
    /// The reply's parts (text, or the agent loop's parts).
    pub parts: Vec<Part>,
    /// The files written to the output.
    pub written: Vec<WrittenFile>,
    /// The model that wrote it.
    pub model: String,
    /// Its token accounting.
    pub usage: Value,
    /// Agent mode: the job summary stored on the message.
    pub agent: Option<Value>,
    /// A system message to add after it (the error that ended it, or the cancel).
    pub system_note: Option<String>,
}

impl ReplyRecord {
    /// Records the reply in `chat`: the files the reply read and edited join the context (their
    /// read is the base of the output), then the messages follow.
    pub fn record_in(self, chat: &mut Chat) {
        for cf in self.written.iter().filter_map(|w| w.adopted.clone()) {
            let known = chat
                .context_files
                .iter()
                .any(|c| c.path == cf.path && !c.is_section());
            if !known {
                chat.context_files.push(cf);
            }
        }
        chat.messages.extend(self.messages());
    }

    /// Whether there is nothing to record (no part, no file, no note).
    pub fn messages_are_empty(&self) -> bool {
        self.thinking.is_empty()
            && self.parts.is_empty()
            && self.written.is_empty()
            && self.system_note.is_none()
    }

    /// The messages to append: the reply (when it has any part) and the system note.
    pub fn messages(self) -> Vec<Message> {
        let mut parts = Vec::new();
        if !self.thinking.is_empty() {
            let mut p = Part::new();
            p.insert("type".into(), json!("thinking"));
            p.insert("content".into(), json!(self.thinking));
            parts.push(p);
        }
        parts.extend(self.parts);
        for w in &self.written {
            parts.push(
                ContextEvent::new(EventKind::AssistantWriteFile, &w.path)
                    .version(&w.version)
                    .prev(w.prev_version.as_deref())
                    .part(),
            );
        }
        let mut messages = Vec::new();
        if !parts.is_empty() {
            let mut m = Message {
                role: Role::Assistant,
                parts,
                model: Some(self.model),
                timestamp: Some(now()),
                ..Default::default()
            };
            if !self.written.is_empty() {
                m.output_files = Some(self.written.iter().map(|w| w.path.clone()).collect());
            }
            m.extra.insert("usage".into(), self.usage);
            if let Some(a) = self.agent {
                m.extra.insert("agent".into(), a);
            }
            messages.push(m);
        }
        if let Some(note) = self.system_note {
            messages.push(Message::text(Role::System, &note));
        }
        messages
    }
}

/// Applies `f` to chat `id`'s chat.json through its held directory handle (a chat that is no longer
/// the active one when its reply ends), writing it back atomically.
pub fn update_stored(dir: &Dir, id: &str, f: impl FnOnce(&mut Chat)) -> Result<(), ChatError> {
    let bytes = crate::store::read_regular(dir, "chat.json")
        .map_err(ChatError::io(format!("Cannot read chat {id}")))?;
    let (mut chat, _) = Chat::parse(&bytes).map_err(ChatError::Corrupt)?;
    f(&mut chat);
    crate::store::write_atomic(dir, "chat.json", &chat.to_json())
        .map_err(ChatError::io("Failed to save chat"))
}
