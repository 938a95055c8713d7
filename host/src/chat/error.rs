//! Why a chat operation failed. Each message is the one the spec (or the reference backend) gives
//! the client, so the protocol passes `Display` through unchanged.

use std::io;

use super::paths::PathError;

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
    /// A path the client gave, or one stored in chat.json, that is not acceptable.
    #[error(transparent)]
    Path(#[from] PathError),
    /// chat.json does not parse.
    #[error("invalid chat.json: {0}")]
    Corrupt(#[source] serde_json::Error),
    /// The chat's lock could not be taken (held by another live process, or not a lock file).
    #[error("{0}")]
    Lock(#[source] io::Error),
    /// The whole file is already in the context.
    #[error("Context file already exists")]
    AlreadyInContext,
    /// That section of the file is already in the context.
    #[error("Context file already exists (this section is already in context)")]
    SectionAlreadyInContext,
    /// No such section in the context.
    #[error("Section not found in context")]
    SectionNotInContext,
    /// External files cannot be made writable.
    #[error("External files are always read-only")]
    ExternalReadOnly,
    /// A file with an output waiting for review cannot be made read-only.
    #[error("Cannot set read-only on a file with pending output")]
    PendingOutput,
    /// `output_delete` of a path with no output.
    #[error("No output: {0} not found in output")]
    NothingToReject(String),
}

impl ChatError {
    /// Maps an I/O error to [`ChatError::Io`] saying `what` was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> ChatError {
        let what = what.into();
        move |source| ChatError::Io { what, source }
    }
}
