//! Why a chat operation failed. Each message is the one the spec (or the reference backend) gives
//! the client, so the protocol passes `Display` through unchanged.

use std::io;

/// A failed chat operation.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// No chat with that id in the store.
    #[error("Chat not found")]
    NotFound,
    /// Another live process holds the chat's lock.
    #[error("chat is locked by another process")]
    Locked,
    /// A message index past the end of the chat (`field` is the request field that gave it).
    #[error("Invalid {field}: {index} (the chat has {len} messages)")]
    BadIndex {
        /// The request field.
        field: &'static str,
        /// The index given.
        index: usize,
        /// How many messages the chat has.
        len: usize,
    },
    /// Fork and edit continue from a user message only.
    #[error("Message {0} is not a user message")]
    NotUserMessage(usize),
    /// A chat name holding a control character.
    #[error(
        "Invalid chat name: it contains the control character {0:?} (a name is one line of text)"
    )]
    BadName(char),
    /// A chat with outputs waiting for review cannot move.
    #[error("chat has pending file modifications — apply or reject changes before moving")]
    PendingOutputs,
    /// The destination store already has a chat with this id.
    #[error("A chat with this id already exists there")]
    Exists,
    /// The file is not (as a whole file) in the chat's context.
    #[error("File not found in context")]
    NotInContext,
    /// The chat has no output for this path.
    #[error("No output to apply: {0} not found in output")]
    NoOutput(String),
    /// A file operation failed; `what` says which, as the client is told ("Failed to fork chat").
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The project file was written, but settling the chat afterwards failed: never reported as a
    /// plain failure, since the project did change.
    #[error("{path} was written to the project, but {reason}")]
    HalfApplied {
        /// The project path written.
        path: String,
        /// What failed after the write.
        reason: String,
    },
    /// An error from a lower layer whose message is already the client's (paths, the store).
    #[error("{0}")]
    Other(String),
}

impl ChatError {
    /// Maps an I/O error to [`ChatError::Io`] saying `what` was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> ChatError {
        let what = what.into();
        move |source| ChatError::Io { what, source }
    }
}

impl From<String> for ChatError {
    fn from(s: String) -> Self {
        ChatError::Other(s)
    }
}

impl From<ChatError> for String {
    fn from(e: ChatError) -> Self {
        e.to_string()
    }
}
