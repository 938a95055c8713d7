//! The `glob` argument of `search_project` and `list_files`.
//!
//! A glob is matched against a file's path relative to the project root, `*` and `?` never crossing
//! a `/` and `**` spanning directories (`**/*.rs`, `src/**`, `docs/*.md`). A glob without any `/` is
//! matched against the file name alone, so `*.rs` finds Rust files at any depth (as in
//! `.gitignore` and ripgrep's `-g`). A leading `./` or `/` is ignored.

use globset::{GlobBuilder, GlobMatcher};

use crate::error::ToolError;

/// A compiled `glob` argument.
#[derive(Debug, Clone)]
pub struct PathGlob {
    matcher: GlobMatcher,
    /// Match the file name only (the glob has no `/`).
    name_only: bool,
    /// The directory every match must lie in: the glob's leading components without wildcards
    /// (`src/net` for `src/net/**/*.rs`); `""` when there is none. The walk starts there.
    base: String,
}

/// Characters that make a glob component a pattern rather than a literal name.
const META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

impl PathGlob {
    /// Compiles `glob`. A syntax error is an `InvalidArguments` error carrying the parser's message.
    pub fn new(glob: &str) -> Result<PathGlob, ToolError> {
        let trimmed = glob.strip_prefix("./").unwrap_or(glob);
        let trimmed = trimmed.trim_start_matches('/');
        if trimmed.is_empty() {
            return Err(ToolError::invalid(format!(
                "glob `{glob}` matches nothing; omit glob to include every file"
            )));
        }
        let matcher = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::invalid(format!("invalid glob `{glob}`: {e}")))?
            .compile_matcher();
        let name_only = !trimmed.contains('/');
        let mut base = String::new();
        if !name_only {
            let parts: Vec<&str> = trimmed.split('/').collect();
            for part in &parts[..parts.len() - 1] {
                if part.contains(META) || part.is_empty() || *part == "." || *part == ".." {
                    break;
                }
                if !base.is_empty() {
                    base.push('/');
                }
                base.push_str(part);
            }
        }
        Ok(PathGlob {
            matcher,
            name_only,
            base,
        })
    }

    /// Whether file `rel` (relative to the project root) matches.
    pub fn is_match(&self, rel: &str) -> bool {
        if self.name_only {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(rel)
        }
    }

    /// The directory every match lies in (`""`: anywhere).
    pub fn base(&self) -> &str {
        &self.base
    }
}

/// Compiles an optional glob argument; an absent, `null` or empty glob matches every file.
pub fn compile(glob: Option<&str>) -> Result<Option<PathGlob>, ToolError> {
    glob.filter(|g| !g.is_empty())
        .map(PathGlob::new)
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantics() {
        let g = PathGlob::new("**/*.rs").unwrap();
        assert!(g.is_match("a.rs") && g.is_match("src/x/a.rs") && !g.is_match("a.rsx"));
        assert_eq!(g.base(), "");
        let g = PathGlob::new("*.rs").unwrap();
        assert!(g.is_match("a.rs") && g.is_match("src/x/a.rs"));
        let g = PathGlob::new("src/**").unwrap();
        assert!(g.is_match("src/a") && g.is_match("src/x/y.md") && !g.is_match("srcx/a"));
        assert_eq!(g.base(), "src");
        let g = PathGlob::new("./src/net/*.rs").unwrap();
        assert!(g.is_match("src/net/a.rs") && !g.is_match("src/net/deep/a.rs"));
        assert_eq!(g.base(), "src/net");
        let g = PathGlob::new("src/{a,b}/*.md").unwrap();
        assert_eq!(g.base(), "src");
        assert!(g.is_match("src/b/x.md"));
        let g = PathGlob::new("docs/readme.md").unwrap();
        assert_eq!(g.base(), "docs");
        assert!(g.is_match("docs/readme.md"));
    }

    #[test]
    fn bad_globs() {
        let e = PathGlob::new("src/[a").unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::InvalidArguments);
        assert!(
            e.message.starts_with("invalid glob `src/[a`: "),
            "{}",
            e.message
        );
        let msg = |g: &str| PathGlob::new(g).err().expect("refused").message;
        assert!(
            msg("{a,b").starts_with("invalid glob `{a,b`: "),
            "{}",
            msg("{a,b")
        );
        assert_eq!(
            msg(""),
            "glob `` matches nothing; omit glob to include every file"
        );
        assert_eq!(
            msg("/"),
            "glob `/` matches nothing; omit glob to include every file"
        );
        assert!(compile(None).unwrap().is_none());
        assert!(compile(Some("")).unwrap().is_none());
    }
}
