//! chat.json, version 2 (SPEC.md "Data Model"). Every struct keeps the fields it does not know in
//! `extra`, so a chat written by another BB-7 backend survives a load and save unchanged.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};

/// The current chat format.
pub const CHAT_VERSION: u64 = 2;

/// One message part (`text`, `thinking`, `code`, `file`, `context_event`, `raw`), kept as a JSON
/// object so unknown part types and fields round-trip.
pub type Part = Map<String, Value>;

/// A chat as stored in `chats/<id>/chat.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Chat {
    /// The format version; loading an older one raises it to [`CHAT_VERSION`].
    #[serde(default)]
    pub version: u64,
    /// The chat's id, also its directory name under `chats/`.
    pub id: String,
    /// The name shown in chat lists.
    #[serde(default)]
    pub name: String,
    /// When the chat was created, RFC 3339 UTC.
    #[serde(default)]
    pub created: String,
    /// The model selected in the chat's settings; empty when none was chosen.
    #[serde(default)]
    pub model: String,
    /// Unsent input text, kept across sessions; cleared when a message is sent.
    #[serde(default)]
    pub draft: String,
    /// The reasoning effort sent with requests; empty sends none (and is not written).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning_effort: String,
    /// The files and sections in the chat's context.
    #[serde(default, deserialize_with = "null_as_default")]
    pub context_files: Vec<ContextFile>,
    /// The conversation, oldest first.
    #[serde(default, deserialize_with = "null_as_default")]
    pub messages: Vec<Message>,
    /// Fields this version does not know, kept so they round-trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A file (or section) in the chat's context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextFile {
    /// Project-relative for internal files, absolute for external ones.
    pub path: String,
    /// Whether the model may not modify it (always so for external files and sections).
    #[serde(default)]
    pub readonly: bool,
    /// Whether the file is outside the project (`path` is then absolute).
    #[serde(default)]
    pub external: bool,
    /// The snapshot's file id.
    #[serde(default)]
    pub version: String,
    /// A section's first line (1-based); `None` for a whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// A section's last line (1-based, inclusive); `None` for a whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
    /// Fields this version does not know, kept so they round-trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ContextFile {
    /// Whether this entry is a section (a line range) rather than a whole file.
    pub fn is_section(&self) -> bool {
        self.start_line.is_some()
    }
}

/// One entry of a user message's `context_snapshot`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotEntry {
    /// The entry's path, as in [`ContextFile::path`].
    pub path: String,
    /// The entry's `version` (its file id) when the message was sent.
    pub file_id: String,
    /// A section's first line (1-based); `None` for a whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// A section's last line (1-based, inclusive); `None` for a whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
    /// Fields this version does not know, kept so they round-trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Who wrote a message. A role this version does not know is kept as written, so it round-trips.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Role {
    /// The user.
    #[default]
    User,
    /// The model (also the role of recorded context events).
    Assistant,
    /// The host: errors, cancels, fork warnings, notes the client adds.
    System,
    /// A role written by some other backend, kept verbatim.
    Other(String),
}

impl Role {
    /// The role as chat.json and the wire spell it.
    pub fn as_str(&self) -> &str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Other(s) => s,
        }
    }
}

impl From<String> for Role {
    fn from(s: String) -> Self {
        match s.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            _ => Role::Other(s),
        }
    }
}

impl From<Role> for String {
    fn from(r: Role) -> Self {
        match r {
            Role::Other(s) => s,
            known => known.as_str().to_string(),
        }
    }
}

impl SnapshotEntry {
    /// The entry recording context entry `cf` as it is now.
    pub fn of(cf: &ContextFile) -> Self {
        SnapshotEntry {
            path: cf.path.clone(),
            file_id: cf.version.clone(),
            start_line: cf.start_line,
            end_line: cf.end_line,
            extra: Map::new(),
        }
    }
}

/// A message: `user`, `assistant` or `system`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The message's content, in order.
    #[serde(default, deserialize_with = "null_as_default")]
    pub parts: Vec<Part>,
    /// The model a user message was sent with, or that wrote an assistant reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When the message was stored, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// On user messages: the context at send time (what fork and edit restore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_snapshot: Option<Vec<SnapshotEntry>>,
    /// On assistant replies: the files the reply wrote; `None` when it wrote none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_files: Option<Vec<String>>,
    /// Legacy (version 0/1) message text; moved into `parts` on load, never written.
    #[serde(default, skip_serializing)]
    pub content: Option<Value>,
    /// Fields this version does not know, kept so they round-trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Message {
    /// A message of `role` with one text part.
    pub fn text(role: Role, text: &str) -> Self {
        Message {
            role,
            parts: vec![text_part(text)],
            timestamp: Some(now()),
            ..Default::default()
        }
    }

    /// The concatenated text parts (what `chat` replies call `content`).
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if p.get("type").and_then(Value::as_str) == Some("text")
                && let Some(c) = p.get("content").and_then(Value::as_str)
            {
                out.push_str(c);
            }
        }
        out
    }
}

/// A `text` part.
pub fn text_part(text: &str) -> Part {
    let mut p = Part::new();
    p.insert("type".into(), json!("text"));
    p.insert("content".into(), json!(text));
    p
}

/// What a recorded context event says happened (the `action` of a `context_event` part; the
/// names are the reference backend's, which the existing client renders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The user added a whole file.
    UserAddFile,
    /// The user added a section (a line range).
    UserAddSection,
    /// The user replaced a file's snapshot (update, or a sync with the local file).
    UserWriteFile,
    /// The user removed a whole file.
    UserRemoveFile,
    /// The user removed a section.
    UserRemoveSection,
    /// The user changed a file's read-only flag.
    UserSetReadOnly,
    /// The user applied the model's output to the project.
    UserApplyFile,
    /// The user applied part of the model's output (per hunk, or by merging in a diff).
    UserPartialApplyFile,
    /// The user saved the model's output under another path.
    UserSaveAs,
    /// The user rejected (deleted) the model's output.
    UserRejectOutput,
    /// The model wrote a file's output.
    AssistantWriteFile,
    /// Since the message a fork or edit continues from, the file changed.
    ForkWarningModified,
    /// Since the message a fork or edit continues from, the file was deleted.
    ForkWarningDeleted,
}

impl EventKind {
    /// The `action` string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::UserAddFile => "UserAddFile",
            EventKind::UserAddSection => "UserAddSection",
            EventKind::UserWriteFile => "UserWriteFile",
            EventKind::UserRemoveFile => "UserRemoveFile",
            EventKind::UserRemoveSection => "UserRemoveSection",
            EventKind::UserSetReadOnly => "UserSetReadOnly",
            EventKind::UserApplyFile => "UserApplyFile",
            EventKind::UserPartialApplyFile => "UserPartialApplyFile",
            EventKind::UserSaveAs => "UserSaveAs",
            EventKind::UserRejectOutput => "UserRejectOutput",
            EventKind::AssistantWriteFile => "AssistantWriteFile",
            EventKind::ForkWarningModified => "ForkWarningModified",
            EventKind::ForkWarningDeleted => "ForkWarningDeleted",
        }
    }
}

/// One context event: what happened to which file, from which version to which. Built with
/// [`ContextEvent::new`] and the setters, stored with [`ContextEvent::part`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextEvent {
    /// What happened.
    pub kind: EventKind,
    /// The file's path, as in [`ContextFile::path`].
    pub path: String,
    /// The version after the event; empty writes none.
    pub version: String,
    /// The version before it, if there was one.
    pub prev_version: Option<String>,
    /// The file's read-only flag after the event.
    pub readonly: bool,
    /// Whether the file is outside the project.
    pub external: bool,
    /// A section's line range.
    pub lines: Option<(u64, u64)>,
    /// For a save-as: the path whose output was saved.
    pub original_path: Option<String>,
}

impl ContextEvent {
    /// An event of `kind` on `path`, with no versions, writable, internal.
    pub fn new(kind: EventKind, path: &str) -> Self {
        ContextEvent {
            kind,
            path: path.to_string(),
            version: String::new(),
            prev_version: None,
            readonly: false,
            external: false,
            lines: None,
            original_path: None,
        }
    }

    /// The event about context entry `cf` as it is now (its version, flags and line range).
    pub fn about(kind: EventKind, cf: &ContextFile) -> Self {
        ContextEvent {
            version: cf.version.clone(),
            readonly: cf.readonly,
            external: cf.external,
            lines: cf.start_line.zip(cf.end_line),
            ..Self::new(kind, &cf.path)
        }
    }

    /// Sets the version after the event.
    pub fn version(mut self, v: &str) -> Self {
        self.version = v.to_string();
        self
    }

    /// Sets the version before the event (an empty one is none).
    pub fn prev(mut self, v: Option<&str>) -> Self {
        self.prev_version = v.filter(|v| !v.is_empty()).map(str::to_string);
        self
    }

    /// Sets the read-only and external flags.
    pub fn flags(mut self, readonly: bool, external: bool) -> Self {
        self.readonly = readonly;
        self.external = external;
        self
    }

    /// The `context_event` part chat.json stores.
    pub fn part(&self) -> Part {
        let mut p = Part::new();
        p.insert("type".into(), json!("context_event"));
        p.insert("action".into(), json!(self.kind.as_str()));
        p.insert("path".into(), json!(self.path));
        if !self.version.is_empty() {
            p.insert("version".into(), json!(self.version));
        }
        if let Some(prev) = &self.prev_version {
            p.insert("prev_version".into(), json!(prev));
        }
        p.insert("readonly".into(), json!(self.readonly));
        p.insert("external".into(), json!(self.external));
        if let Some((a, b)) = self.lines {
            p.insert("start_line".into(), json!(a));
            p.insert("end_line".into(), json!(b));
        }
        if let Some(orig) = &self.original_path {
            p.insert("original_path".into(), json!(orig));
        }
        p
    }
}

/// Now, RFC 3339 UTC with seconds (`2025-01-19T22:00:00Z`).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Chat {
    /// Parses chat.json, migrating version 0/1 (legacy `content` → `parts`). Returns the chat and
    /// whether it was migrated (and so should be re-saved).
    pub fn parse(bytes: &[u8]) -> Result<(Chat, bool), serde_json::Error> {
        let mut chat: Chat = serde_json::from_slice(bytes)?;
        let mut migrated = false;
        for m in &mut chat.messages {
            if let Some(legacy) = m.content.take() {
                if m.parts.is_empty() {
                    match legacy {
                        Value::String(s) => m.parts.push(text_part(&s)),
                        Value::Null => {}
                        other => {
                            let mut p = Part::new();
                            p.insert("type".into(), json!("raw"));
                            p.insert("content".into(), json!(other.to_string()));
                            m.parts.push(p);
                        }
                    }
                }
                migrated = true;
            }
        }
        if chat.version < CHAT_VERSION {
            chat.version = CHAT_VERSION;
            migrated = true;
        }
        Ok((chat, migrated))
    }

    /// chat.json bytes.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// The model of the last user message, else the chat's model.
    pub fn current_model(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .filter(|m| m.role == Role::User)
            .find_map(|m| m.model.as_deref().filter(|s| !s.is_empty()))
            .unwrap_or(&self.model)
    }

    /// Appends a message holding one context event (how the model learns what the user did). Stored
    /// as an `assistant` message with a single `context_event` part, as the reference backend does
    /// and the existing client renders.
    pub fn record_event(&mut self, event: ContextEvent) {
        self.messages.push(Message {
            role: Role::Assistant,
            parts: vec![event.part()],
            timestamp: Some(now()),
            ..Default::default()
        });
    }
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_content_becomes_parts_and_unknown_fields_survive() {
        let v0 = br#"{"id":"x","name":"n","messages":[{"role":"user","content":"hi","mood":"ok"}],"custom":1}"#;
        let (chat, migrated) = Chat::parse(v0).unwrap();
        assert!(migrated);
        assert_eq!(chat.version, 2);
        assert_eq!(chat.messages[0].text_content(), "hi");
        let out: Value = serde_json::from_slice(&chat.to_json()).unwrap();
        assert_eq!(out["custom"], 1);
        assert_eq!(out["messages"][0]["mood"], "ok");
        assert!(out["messages"][0].get("content").is_none());
        assert_eq!(out["messages"][0]["parts"][0]["type"], "text");
    }

    #[test]
    fn nulls_are_empty_lists() {
        let (chat, _) =
            Chat::parse(br#"{"version":2,"id":"x","context_files":null,"messages":null}"#).unwrap();
        assert!(chat.messages.is_empty() && chat.context_files.is_empty());
    }

    #[test]
    fn roles_round_trip_including_unknown_ones() {
        let (chat, _) = Chat::parse(
            br#"{"version":2,"id":"x","messages":[{"role":"user"},{"role":"tool","parts":[]}]}"#,
        )
        .unwrap();
        assert_eq!(chat.messages[0].role, Role::User);
        assert_eq!(chat.messages[1].role, Role::Other("tool".into()));
        let out: Value = serde_json::from_slice(&chat.to_json()).unwrap();
        assert_eq!(out["messages"][1]["role"], "tool");
    }

    #[test]
    fn a_section_event_carries_its_lines_and_no_empty_version() {
        let cf = ContextFile {
            path: "a.rs".into(),
            readonly: true,
            version: "v1".into(),
            start_line: Some(3),
            end_line: Some(9),
            ..Default::default()
        };
        let p = ContextEvent::about(EventKind::UserAddSection, &cf).part();
        assert_eq!(p["action"], "UserAddSection");
        assert_eq!(
            (p["start_line"].clone(), p["end_line"].clone()),
            (json!(3), json!(9))
        );
        let p = ContextEvent::new(EventKind::UserRejectOutput, "a.rs")
            .prev(Some(""))
            .part();
        assert!(p.get("version").is_none() && p.get("prev_version").is_none());
    }
}
