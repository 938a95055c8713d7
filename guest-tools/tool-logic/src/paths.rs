//! Paths from the model: validated, normalised, and joined onto the tool's root.

use std::path::{Path, PathBuf};

use crate::error::ToolError;

/// The directory a tool works in: inside a component, the grant mounted at `/`; natively, any directory.
#[derive(Debug, Clone)]
pub struct Root {
    base: PathBuf,
    /// Files the retrieval tools never see (the secret deny list).
    deny: crate::retrieval::deny::DenyList,
}

impl Root {
    /// The root inside a component: the tool's single preopened directory, mounted at `/`.
    pub fn sandboxed() -> Self {
        Root {
            base: PathBuf::from("/"),
            deny: Default::default(),
        }
    }

    /// A root at a real directory (native tests and benchmarks).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Root {
            base: dir.into(),
            deny: Default::default(),
        }
    }

    /// The same root with `settings`' deny list in force for the retrieval tools.
    pub fn with_settings(mut self, settings: &crate::Settings) -> Self {
        self.deny = crate::retrieval::deny::DenyList::new(settings.deny.iter().map(String::as_str));
        self
    }

    /// The deny list in force.
    pub fn deny(&self) -> &crate::retrieval::deny::DenyList {
        &self.deny
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
