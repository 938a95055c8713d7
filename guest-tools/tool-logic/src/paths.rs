//! Paths from the model: validated, normalised, and joined onto the tool's root.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::ToolError;

/// The directory a tool works in: inside a component, the grant mounted at `/`; natively, any directory.
#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
    /// The patterns of the secret deny list (the settings' `deny`), when given.
    deny_patterns: Option<Vec<String>>,
    /// Files the retrieval tools never see: [`Root::deny_patterns`] compiled, on first use only.
    /// Compiling builds glob matchers (inside a component, a few hundred microseconds), which
    /// the edit tools, working on files the host staged, never consult.
    deny: OnceLock<crate::retrieval::deny::DenyList>,
}

impl Root {
    /// The root inside a component: the tool's single preopened directory, mounted at `/`.
    pub fn sandboxed() -> Self {
        Root::at("/")
    }

    /// A root at a real directory (native tests and benchmarks).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Root {
            base: dir.into(),
            deny_patterns: None,
            deny: OnceLock::new(),
        }
    }

    /// The same root with `settings`' deny list in force for the retrieval tools.
    pub fn with_settings(mut self, settings: &crate::Settings) -> Self {
        self.deny_patterns = Some(settings.deny.clone());
        self.deny = OnceLock::new();
        self
    }

    /// The deny list in force (compiled on the first call).
    pub fn deny(&self) -> &crate::retrieval::deny::DenyList {
        self.deny.get_or_init(|| match &self.deny_patterns {
            Some(p) => crate::retrieval::deny::DenyList::new(p.iter().map(String::as_str)),
            None => Default::default(),
        })
    }

    /// Whether the deny list has been compiled (by a [`Root::deny`] call).
    #[cfg(test)]
    pub(crate) fn deny_compiled(&self) -> bool {
        self.deny.get().is_some()
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.base
    }

    /// Joins a validated relative path (see [`normalize`]) onto the root.
    pub fn join(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.base.clone()
        } else {
            self.base.join(rel)
        }
    }
}

/// Validates a path given by the model and returns its normal form: `/`-separated, no `.` segments,
/// no repeated or trailing slashes.
///
/// Rejected with a clear error: empty paths, absolute paths (a component would silently re-root them
/// inside its grant), `..` segments, NUL bytes, backslashes (ambiguous across platforms) and, unless
/// `allow_dir` is set, a trailing `/` (a file path that names a directory).
pub fn normalize(field: &str, path: &str, allow_dir: bool) -> Result<String, ToolError> {
    if path.is_empty() {
        return Err(ToolError::invalid(format!("{field} is empty")));
    }
    if path.contains('\0') {
        return Err(ToolError::invalid(format!("{field} contains a NUL byte")));
    }
    if path.contains('\\') {
        return Err(ToolError::invalid(format!(
            "{field} `{path}` contains a backslash; use `/` to separate directories"
        )));
    }
    if path.starts_with('/') || path.starts_with('~') {
        return Err(ToolError::invalid(format!(
            "{field} `{path}` is absolute; paths are relative to the project root (e.g. `src/main.rs`)"
        )));
    }
    if !allow_dir && path.ends_with('/') {
        return Err(ToolError::invalid(format!(
            "{field} `{path}` ends with `/`; it must name a file"
        )));
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                return Err(ToolError::invalid(format!(
                    "{field} `{path}` contains `..`; paths must stay inside the project root"
                )));
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() && !allow_dir {
        return Err(ToolError::invalid(format!(
            "{field} `{path}` does not name a file"
        )));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deny list is compiled when a retrieval tool first consults it, never for the edit tools,
    /// which only work on files the host staged: a call of theirs compiled it for nothing (glob
    /// matchers: a few hundred microseconds of every edit call inside the component).
    #[test]
    fn the_deny_list_is_compiled_only_when_consulted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        let settings = crate::Settings::default();
        let root = Root::sandboxed().with_settings(&settings);
        assert!(!root.deny_compiled());
        let root = Root::at(dir.path()).with_settings(&settings);
        let id = crate::file_id::file_id("a.txt", b"one\n");
        let edit = format!(
            r#"{{"edits": [{{"path": "a.txt", "file_id": "{id}", "old_string": "one", "new_string": "two"}}]}}"#
        );
        crate::tools::call("edit_file", &root, &settings, &edit).unwrap();
        let write = r#"{"path": "b.txt", "content": "x\n"}"#;
        crate::tools::call("write_file", &root, &settings, write).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "two\n"
        );
        assert!(!root.deny_compiled(), "an edit tool compiled the deny list");
        // The first look compiles it, with the patterns of the settings.
        assert!(root.deny().check(".env", false).is_some());
        assert!(root.deny_compiled());
        assert!(root.deny().check("a.txt", false).is_none());
        let open = Root::at(dir.path())
            .with_settings(&crate::Settings::from_pairs([("deny", "")]).unwrap());
        assert!(open.deny().check(".env", false).is_none());
    }

    #[test]
    fn normalises_harmless_forms() {
        assert_eq!(normalize("path", "./src//a.rs", false).unwrap(), "src/a.rs");
        assert_eq!(normalize("path", "a.rs", false).unwrap(), "a.rs");
        assert_eq!(normalize("prefix", "src/", true).unwrap(), "src");
        assert_eq!(normalize("prefix", ".", true).unwrap(), "");
    }

    #[test]
    fn rejects_escapes_and_ambiguity() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/..",
            "~/x",
            "a\\b",
            "a\0b",
            "dir/",
        ] {
            let e = normalize("path", bad, false).unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::InvalidArguments, "{bad:?}");
        }
        let e = normalize("path", ".", false)
            .err()
            .expect("`.` names no file");
        assert_eq!(e.kind, crate::ErrorKind::InvalidArguments);
        assert_eq!(e.message, "path `.` does not name a file");
    }
}
