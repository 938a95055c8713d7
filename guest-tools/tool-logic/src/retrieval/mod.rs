//! Project retrieval for the read-only tools (AGENT-PLAN.md "Concrete Spec v0" §1, §2, §5):
//! walking the project ([`walk`]), `.gitignore` rules ([`rules`]), path globs ([`glob`]), and the
//! three operations built on them: [`search`], [`read`] and [`list`].
//!
//! What every operation sees of the project:
//! - `.git` and `.bb7` (at any depth) are skipped when walking and refused when named;
//! - paths ignored by a `.gitignore` (the root's and nested ones, with negations and directory
//!   patterns, deeper files taking precedence) or by `.git/info/exclude` are skipped or refused;
//! - symbolic links are never followed, reported or descended into;
//! - other hidden files (`.github/`, `.env.example`, …) are ordinary files.
//!
//! Inside a component every filesystem call is a host call, so the walker is frugal: one directory
//! listing per directory (sorted, using the entry's own file type, no extra `stat`), `.gitignore`
//! opened only where the listing contains one, and files opened and read once into a reused buffer
//! with no metadata call (see [`walk::FileBuf`]).

pub mod deny;
pub mod dirlist;
pub mod glob;
pub mod list;
pub mod read;
pub mod rules;
pub mod search;
pub mod walk;

/// Entry names that are never walked, listed, searched or read, at any depth: git's internals and
/// BB-7's own data (which may hold secrets).
pub const RESERVED_NAMES: [&str; 2] = [".git", ".bb7"];

/// Files larger than this are skipped by `search_project`.
pub const MAX_SEARCH_FILE_BYTES: usize = 2 * 1024 * 1024;

/// Whether `name` (one path segment) is in [`RESERVED_NAMES`].
pub fn is_reserved(name: &str) -> bool {
    RESERVED_NAMES.contains(&name)
}

/// Joins a directory's relative path (`""` for the root) and an entry name.
pub(crate) fn join_rel(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        let mut s = String::with_capacity(dir.len() + 1 + name.len());
        s.push_str(dir);
        s.push('/');
        s.push_str(name);
        s
    }
}

/// Whether normalised relative path `path` is `dir` or lies inside it (`""` contains everything).
pub(crate) fn is_within(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/')
}

/// The largest index `<= i` that does not split a UTF-8 sequence in `bytes` (for valid UTF-8, a
/// char boundary).
pub(crate) fn floor_boundary(bytes: &[u8], i: usize) -> usize {
    let mut i = i.min(bytes.len());
    let mut steps = 0;
    while i > 0 && i < bytes.len() && (bytes[i] & 0xC0) == 0x80 && steps < 3 {
        i -= 1;
        steps += 1;
    }
    i
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::fs;
    use std::path::Path;

    /// Creates `rel` under `dir` with `content`, making parent directories.
    pub fn put(dir: &Path, rel: &str, content: impl AsRef<[u8]>) {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(p, content).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_and_join() {
        assert!(is_within("src/a.rs", "src"));
        assert!(is_within("src", "src"));
        assert!(is_within("x", ""));
        assert!(!is_within("srcx/a.rs", "src"));
        assert!(!is_within("sr", "src"));
        assert_eq!(join_rel("", "a"), "a");
        assert_eq!(join_rel("d", "a"), "d/a");
    }

    #[test]
    fn boundaries() {
        let s = "aé€".as_bytes(); // a, é (2 bytes), € (3 bytes)
        assert_eq!(floor_boundary(s, 2), 1);
        assert_eq!(floor_boundary(s, 3), 3);
        assert_eq!(floor_boundary(s, 5), 3);
        assert_eq!(floor_boundary(s, 6), 6);
        assert_eq!(floor_boundary(s, 100), 6);
        assert_eq!(floor_boundary(b"", 0), 0);
    }
}
