//! Paths a client sends, classified, and where each kind of file lives in a chat directory.

use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

/// A file path from the client, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientPath {
    /// Inside the project: normalised, `/`-separated, relative to the project root.
    Internal(String),
    /// Outside the project (always read-only): a normalised absolute path.
    External(String),
}

impl ClientPath {
    /// The path as stored in chat.json.
    pub fn as_str(&self) -> &str {
        match self {
            ClientPath::Internal(p) | ClientPath::External(p) => p,
        }
    }

    /// Whether the path is outside the project.
    pub fn is_external(&self) -> bool {
        matches!(self, ClientPath::External(_))
    }
}

/// Why a path is not acceptable; each message is the one the client is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// An empty path.
    #[error("Invalid path: empty")]
    Empty,
    /// A path holding a NUL byte.
    #[error("Invalid path: contains a NUL byte")]
    Nul,
    /// A relative path where there is no project to resolve it against.
    #[error("Invalid path: {0} (global chats take absolute paths)")]
    RelativeWithoutProject(String),
    /// A path that does not normalise (the reason), or a stored external path that is not absolute.
    #[error("Invalid path: {0}")]
    Invalid(String),
    /// A path inside `.bb7/` or `.git/`.
    #[error("Invalid path: {path} is inside {dir}/, which BB-7 does not touch")]
    Reserved {
        /// The path as given.
        path: String,
        /// The reserved directory it names, as spelled in the path.
        dir: String,
    },
}

/// Classifies `path`: absolute paths inside `project` become relative; other absolute paths are
/// external; relative paths must stay inside the project (no `..`) and may not name BB-7's own state
/// (`.bb7/`) or git's (`.git/`).
pub fn classify(path: &str, project: Option<&Path>) -> Result<ClientPath, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.contains('\0') {
        return Err(PathError::Nul);
    }
    let p = Path::new(path);
    if p.is_absolute() {
        let abs = lexical_normalize(p);
        if let Some(root) = project
            && let Ok(rel) = abs.strip_prefix(root)
        {
            let rel = rel.to_string_lossy().replace('\\', "/");
            return internal(&rel, path);
        }
        return Ok(ClientPath::External(abs.to_string_lossy().into_owned()));
    }
    if project.is_none() {
        return Err(PathError::RelativeWithoutProject(path.to_string()));
    }
    internal(path, path)
}

fn internal(rel: &str, original: &str) -> Result<ClientPath, PathError> {
    let norm = bb7_tool_logic::paths::normalize("path", rel, false)
        .map_err(|e| PathError::Invalid(e.message))?;
    // Any component, in any case (case-insensitive filesystems): nested repositories have their own
    // `.git/` too.
    if let Some(c) = norm
        .split('/')
        .find(|c| c.eq_ignore_ascii_case(".bb7") || c.eq_ignore_ascii_case(".git"))
    {
        return Err(PathError::Reserved {
            path: original.to_string(),
            dir: c.to_string(),
        });
    }
    Ok(ClientPath::Internal(norm))
}

/// Resolves `.` and `..` without touching the filesystem (`/a/b/../c` → `/a/c`).
pub fn lexical_normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The first 16 hex digits of sha256(`text`), followed by the path's extension (`.rs`), as the Go
/// backend names snapshot files, so chats written by either load in the other.
fn hashed_name(text: &str, path: &str) -> String {
    let h = hex::encode(Sha256::digest(text.as_bytes()));
    // Go's filepath.Ext: from the last `.` of the last path element (`.env` for `.env`).
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rfind('.').map(|i| &name[i..]).unwrap_or("");
    format!("{}{ext}", &h[..16])
}

/// Where a whole-file snapshot lives, relative to the chat directory: `context/<path>` for internal
/// files, `context/_external/<hash of the path><ext>` for external ones.
pub fn snapshot_rel(path: &ClientPath) -> String {
    match path {
        ClientPath::Internal(p) => format!("context/{p}"),
        ClientPath::External(p) => format!("context/_external/{}", hashed_name(p, p)),
    }
}

/// Where a section snapshot lives: `context/_sections/<hash of "path:start:end"><ext>`.
pub fn section_rel(path: &str, start: u64, end: u64) -> String {
    format!(
        "context/_sections/{}",
        hashed_name(&format!("{path}:{start}:{end}"), path)
    )
}

/// Where the model's version of an internal file lives: `output/<path>`.
pub fn output_rel(path: &str) -> String {
    format!("output/{path}")
}

/// The stored form of a context file's path, re-classified (paths in chat.json were validated when
/// added, but a hand-edited or foreign chat.json is input like any other).
pub fn stored(path: &str, external: bool) -> Result<ClientPath, PathError> {
    if external {
        let p = Path::new(path);
        if !p.is_absolute() {
            return Err(PathError::Invalid(path.to_string()));
        }
        Ok(ClientPath::External(
            lexical_normalize(p).to_string_lossy().into_owned(),
        ))
    } else {
        internal(path, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let root = Path::new("/proj");
        assert_eq!(
            classify("src/a.rs", Some(root)).unwrap(),
            ClientPath::Internal("src/a.rs".into())
        );
        assert_eq!(
            classify("/proj/src/./a.rs", Some(root)).unwrap(),
            ClientPath::Internal("src/a.rs".into())
        );
        assert_eq!(
            classify("/proj/../etc/passwd", Some(root)).unwrap(),
            ClientPath::External("/etc/passwd".into())
        );
        assert_eq!(
            classify("/other/x", Some(root)).unwrap(),
            ClientPath::External("/other/x".into())
        );
        for bad in [
            ".GIT/config",
            "vendor/x/.git/hooks/a",
            "",
            "../x",
            "a/../../x",
            ".bb7/chats/x",
            ".git/config",
            "a\0b",
        ] {
            assert!(classify(bad, Some(root)).is_err(), "{bad:?}");
        }
        assert_eq!(
            classify("src/a.rs", None)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("Invalid path: src/a.rs (global chats take absolute paths)")
        );
        assert!(classify("/x/a.rs", None).unwrap().is_external());
    }

    #[test]
    fn layout_matches_the_reference_backend() {
        // Go: filepath.Ext(".env") == ".env", filepath.Ext("Makefile") == "".
        assert!(snapshot_rel(&ClientPath::External("/x/.env".into())).ends_with(".env"));
        assert!(!snapshot_rel(&ClientPath::External("/x/Makefile".into())).contains('.'));
        assert!(section_rel("src/a.rs", 1, 2).ends_with(".rs"));
        assert_eq!(
            snapshot_rel(&ClientPath::Internal("a/b.rs".into())),
            "context/a/b.rs"
        );
        assert!(
            snapshot_rel(&ClientPath::External("/x/y".into())).starts_with("context/_external/")
        );
        assert_ne!(section_rel("a", 1, 2), section_rel("a", 1, 3));
    }
}
