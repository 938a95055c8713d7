//! Why a workspace operation failed. Each message is the one the client is told: the protocol edge
//! passes `Display` through unchanged (see `crate::protocol::actions`).

use std::io;
use std::path::PathBuf;

use crate::chat::ChatError;
use crate::chat::checkpoints::CheckpointError;
use crate::chat::paths::PathError;
use crate::chat::review::ReviewError;

/// A failed workspace operation.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// A chat operation failed.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// A checkpoint cannot be opened, made or read.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A hunk review, diff3 or rollback failed.
    #[error(transparent)]
    Review(#[from] ReviewError),
    /// A path the client gave is not acceptable.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A reply's files and the record naming them could not be published (nothing of them stays).
    #[error(transparent)]
    Publish(#[from] crate::store::publish::PublishError),
    /// The request needs an active chat and there is none.
    #[error("No active chat")]
    NoActiveChat,
    /// The request needs a project (`.bb7/`) and the session has none; the text says what needs it.
    #[error("No project: {0}")]
    NoProject(&'static str),
    /// A request before `init`.
    #[error("Not initialized: send init first")]
    NotInitialized,
    /// A store that should be open is not (the session is between states).
    #[error("Not initialized")]
    StoreClosed,
    /// There is no home directory, so no global store.
    #[error("Cannot find the home directory for global chats")]
    NoHome,
    /// The project root cannot be resolved or opened.
    #[error("Cannot open project {}: {source}", path.display())]
    OpenProject {
        /// The root as given (or resolved).
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The project root is not a directory.
    #[error("Cannot open project {}: not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// The project's `.bb7` is a symbolic link.
    #[error(
        "{} is a symbolic link; BB-7 keeps its state only in a real .bb7/ directory",
        .0.display()
    )]
    StateIsSymlink(PathBuf),
    /// A chat store (its `.bb7/` directory) cannot be opened.
    #[error("Cannot open {}: {source}", path.display())]
    OpenStore {
        /// The state directory.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// An external file has no output (only project files do).
    #[error("File not found: {0} has no output (external files are read-only)")]
    ExternalHasNoOutput(String),
    /// A path that must be in the project (by its absolute form) is outside it.
    #[error("File not found: {0} is outside the project")]
    OutsideProject(String),
    /// A save-as destination outside the project.
    #[error("Invalid destination: {0} is outside the project")]
    DestinationOutsideProject(String),
    /// `chat_move` in a session without a project.
    #[error("Moving chats needs a project (started without a project root)")]
    MoveNeedsProject,
    /// A file in a chat or project directory cannot be written (`what` names it).
    #[error("Cannot write {what}: {source}")]
    Write {
        /// What was written.
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// A handle cannot be duplicated to read `path` off the session lock.
    #[error("Cannot read {path}: {source}")]
    Read {
        /// The project path.
        path: String,
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
        reason: Box<WorkspaceError>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the client's messages (they were literal strings in the handlers before the
    /// errors were typed): a change here is a protocol change.
    #[test]
    fn messages_are_the_ones_clients_are_told() {
        let cases: Vec<(WorkspaceError, &str)> = vec![
            (WorkspaceError::NoActiveChat, "No active chat"),
            (
                WorkspaceError::NoProject("checkpoints and hunks need a project with .bb7/"),
                "No project: checkpoints and hunks need a project with .bb7/",
            ),
            (
                WorkspaceError::NotInitialized,
                "Not initialized: send init first",
            ),
            (WorkspaceError::StoreClosed, "Not initialized"),
            (
                WorkspaceError::NotADirectory(PathBuf::from("/p/f")),
                "Cannot open project /p/f: not a directory",
            ),
            (
                WorkspaceError::StateIsSymlink(PathBuf::from("/p/.bb7")),
                "/p/.bb7 is a symbolic link; BB-7 keeps its state only in a real .bb7/ directory",
            ),
            (
                WorkspaceError::ExternalHasNoOutput("/etc/x".into()),
                "File not found: /etc/x has no output (external files are read-only)",
            ),
            (
                WorkspaceError::OutsideProject("/etc/x".into()),
                "File not found: /etc/x is outside the project",
            ),
            (
                WorkspaceError::DestinationOutsideProject("/etc/x".into()),
                "Invalid destination: /etc/x is outside the project",
            ),
            (
                WorkspaceError::MoveNeedsProject,
                "Moving chats needs a project (started without a project root)",
            ),
            (ChatError::NotFound.into(), "Chat not found"),
            (PathError::Empty.into(), "Invalid path: empty"),
            (
                CheckpointError::Unknown("c1".into()).into(),
                "Unknown checkpoint: c1",
            ),
            (
                ReviewError::UnknownHunk("h1".into()).into(),
                "Unknown hunk: h1 (get the hunks again)",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }

    /// A failure after the project write names the path and the wrapped reason, as one sentence.
    #[test]
    fn half_applied_wraps_its_reason() {
        let reason = ChatError::io("removing the output failed")(io::Error::other("disk full"));
        let e = WorkspaceError::HalfApplied {
            path: "src/a.rs".into(),
            reason: Box::new(reason.into()),
        };
        assert_eq!(
            e.to_string(),
            "src/a.rs was written to the project, but removing the output failed: disk full"
        );
    }
}
