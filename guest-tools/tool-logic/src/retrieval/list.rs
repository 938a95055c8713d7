//! `list_files`: the project's files (not directories) in sorted order, optionally under a
//! directory and filtered by a glob.

use std::ops::ControlFlow;

use super::glob;
use super::walk::{Kind, Walker, narrow};
use crate::error::ToolError;
use crate::paths::{Root, normalize};

/// Sorted relative paths, and whether more files matched than `files` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOutput {
    pub files: Vec<String>,
    pub truncated: bool,
}

/// Lists files under `prefix` (a directory, or a single file; `None`, empty or `.` for the whole
/// project) whose paths match `glob`, at most `max` of them.
pub fn list(
    root: &Root,
    prefix: Option<&str>,
    glob: Option<&str>,
    max: usize,
) -> Result<ListOutput, ToolError> {
    let prefix = match prefix {
        Some(p) if !p.is_empty() => normalize("prefix", p, true)?,
        _ => String::new(),
    };
    let glob = glob::compile(glob)?;
    let mut walker = Walker::new(root);
    let kind = walker
        .resolve(&prefix)
        .map_err(|r| r.into_error(&prefix, false))?;
    let mut out = ListOutput {
        files: Vec::new(),
        truncated: false,
    };
    let Some((start, kind)) = narrow(&mut walker, &prefix, kind, glob.as_ref()) else {
        return Ok(out);
    };
    let (files, truncated) = (&mut out.files, &mut out.truncated);
    let walked = walker.walk(&start, kind, glob.as_ref(), |_, rel| {
        if files.len() >= max {
            *truncated = true;
            return ControlFlow::Break(());
        }
        files.push(rel.to_string());
        ControlFlow::Continue(())
    });
    walked.map_err(|e| {
        if kind == Kind::Dir && start.is_empty() {
            ToolError::io(".", &e)
        } else {
            ToolError::io(&start, &e)
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::put;
    use super::*;
    use crate::ErrorKind;

    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for f in [
            "b.md",
            "a/z.rs",
            "a/b/c.rs",
            "a.rs",
            "notes/team/x.md",
            ".github/ci.yml",
            "target/out.o",
        ] {
            put(d, f, "");
        }
        put(d, ".gitignore", "target/\n");
        put(d, ".bb7/k", "");
        put(d, ".git/HEAD", "");
        t
    }

    #[test]
    fn lists_sorted_filtered_and_capped() {
        let t = tree();
        let root = Root::at(t.path());
        let o = list(&root, None, None, 100).unwrap();
        assert_eq!(
            o.files,
            [
                ".github/ci.yml",
                ".gitignore",
                "a.rs",
                "a/b/c.rs",
                "a/z.rs",
                "b.md",
                "notes/team/x.md"
            ]
        );
        assert!(!o.truncated);
        let o = list(&root, Some("a/"), None, 100).unwrap();
        assert_eq!(o.files, ["a/b/c.rs", "a/z.rs"]);
        assert_eq!(list(&root, Some("."), None, 100).unwrap().files.len(), 7);
        assert_eq!(list(&root, Some(""), None, 100).unwrap().files.len(), 7);
        let o = list(&root, None, Some("**/*.rs"), 100).unwrap();
        assert_eq!(o.files, ["a.rs", "a/b/c.rs", "a/z.rs"]);
        let o = list(&root, Some("a"), Some("a/b/**"), 100).unwrap();
        assert_eq!(o.files, ["a/b/c.rs"]);
        let o = list(&root, Some("notes"), Some("a/**"), 100).unwrap();
        assert!(o.files.is_empty());
        let o = list(&root, Some("a/z.rs"), None, 100).unwrap();
        assert_eq!(o.files, ["a/z.rs"]);
        let o = list(&root, None, None, 3).unwrap();
        assert_eq!(o.files, [".github/ci.yml", ".gitignore", "a.rs"]);
        assert!(o.truncated);
        let o = list(&root, None, Some("*.md"), 2).unwrap();
        assert_eq!(o.files, ["b.md", "notes/team/x.md"]);
        assert!(!o.truncated);
    }

    #[test]
    fn refusals() {
        let t = tree();
        let root = Root::at(t.path());
        let e = list(&root, Some("nope"), None, 100).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::NotFound, "no such file or directory: nope")
        );
        let e = list(&root, Some("target"), None, 100).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        let e = list(&root, Some(".bb7"), None, 100).unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        for bad in ["/", "/abs", "../up", "a/../../x"] {
            let e = list(&root, Some(bad), None, 100).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArguments, "{bad}");
        }
        let e = list(&root, None, Some("{a,"), 100).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArguments);
        assert!(
            list(&root, None, Some(".git/**"), 100)
                .unwrap()
                .files
                .is_empty()
        );
    }
}
