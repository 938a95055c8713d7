//! The structured error every tool returns: a kind the host can act on and a message for the model.

use std::fmt;

/// What went wrong, coarsely. Mirrors `error-kind` in `wit/v0.1.0/tool.wit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The arguments do not match the tool's schema, or a value in them is unusable (bad path, no-op edit).
    InvalidArguments,
    /// A file or directory the call names does not exist.
    NotFound,
    /// The call needs access the grant does not give (e.g. writing into a read-only grant).
    PermissionDenied,
    /// The file is not what the caller expected: `file_id` mismatch, `old_string` not found or not unique.
    Conflict,
    /// A limit was exceeded (file too large, too many results asked for).
    TooLarge,
    /// The file is binary or not valid UTF-8.
    NotText,
    /// Any other filesystem failure.
    Io,
}

impl ErrorKind {
    /// The kebab-case name used in WIT and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArguments => "invalid-arguments",
            ErrorKind::NotFound => "not-found",
            ErrorKind::PermissionDenied => "permission-denied",
            ErrorKind::Conflict => "conflict",
            ErrorKind::TooLarge => "too-large",
            ErrorKind::NotText => "not-text",
            ErrorKind::Io => "io",
        }
    }
}

/// A failed tool call: the kind plus a message written for the model (and the user) to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ToolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArguments, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }
    /// Maps an I/O error on `path` to a tool error with a message naming the path.
    pub fn io(path: &str, err: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        match err.kind() {
            K::NotFound => Self::not_found(format!("file not found: {path}")),
            K::PermissionDenied | K::ReadOnlyFilesystem => Self::new(
                ErrorKind::PermissionDenied,
                format!("permission denied: {path}"),
            ),
            _ => Self::new(ErrorKind::Io, format!("{path}: {err}")),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}
