//! Project retrieval for the read-only tools (AGENT-PLAN.md "Concrete Spec v0" §1, §2, §5):
//! walking the project ([`walk`]), `.gitignore` rules ([`rules`]), path globs ([`glob`]), and the
//! three operations built on them: [`search`], [`read`] and [`list`].
//!
//! What every operation sees of the project:
//! - `.git` and `.bb7` (at any depth, in any case) are skipped when walking and refused when named;
//! - paths ignored by a `.gitignore` (the root's and nested ones, with negations and directory
//!   patterns, deeper files taking precedence) or by `.git/info/exclude` are skipped or refused;
//! - symbolic links are never followed, reported or descended into: every path is opened one
//!   component at a time from the root without following links ([`dirlist::Tree`]), so what is
//!   read is what was checked, even while the tree changes;
//! - other hidden files (`.github/`, `.env.example`, …) are ordinary files.
//!
//! Inside a component every filesystem call is a host call, so the walker is frugal: one directory
//! listing per directory (sorted, using the entry's own file type, no extra `stat`), `.gitignore`
//! opened only where the listing contains one, and files opened and read once into a reused buffer
//! with no metadata call (see [`dirlist::Tree`]).

pub mod deny;
pub mod dirlist;
pub mod glob;
pub mod list;
pub mod read;
pub mod rules;
pub mod search;
pub mod walk;

/// Entry names that are never walked, listed, searched or read, at any depth and in any case (on a
/// case-insensitive file system `.GIT/config` is `.git/config`): git's internals and BB-7's own data
/// (which may hold secrets).
pub const RESERVED_NAMES: [&str; 2] = [".git", ".bb7"];

/// Files larger than this are skipped by `search_project`.
pub const MAX_SEARCH_FILE_BYTES: usize = 2 * 1024 * 1024;

/// The entry of [`RESERVED_NAMES`] that `name` (one path segment) is, ignoring ASCII case.
pub fn reserved_name(name: &str) -> Option<&'static str> {
    RESERVED_NAMES
        .into_iter()
        .find(|r| r.eq_ignore_ascii_case(name))
}

/// Whether `name` (one path segment) is in [`RESERVED_NAMES`], ignoring ASCII case.
pub fn is_reserved(name: &str) -> bool {
    reserved_name(name).is_some()
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

#[cfg(all(test, unix))]
mod race_tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::testutil::put;
    use crate::{Root, Settings};

    /// Issue 23 item 5: `sub/` flips between a real directory and a symbolic link to `.git` while
    /// `read_file sub/config` and `search_project` run: what is opened is checked, not the path
    /// string, so `.git/config` never comes back.
    #[test]
    fn a_directory_swapped_for_a_link_to_git_is_never_read_through() {
        const SECRET: &str = "GIT-SECRET-7d41";
        let t = tempfile::tempdir().unwrap();
        let d = t.path().to_path_buf();
        put(&d, ".git/config", format!("[remote] token = {SECRET}\n"));
        put(&d, "sub/config", "INSIDE\n");
        std::os::unix::fs::symlink(".git", d.join("sub_link")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        // Exchanged atomically: `sub` always exists, a directory one moment, a link the next.
        let flipper = {
            let (stop, d) = (stop.clone(), d.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        d.join("sub"),
                        rustix::fs::CWD,
                        d.join("sub_link"),
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap();
                }
            })
        };
        let s = Settings::default();
        let root = Root::at(&d).with_settings(&s);
        let (mut inside, mut leaks) = (0, Vec::new());
        for _ in 0..3000 {
            if let Ok(v) = crate::tools::read_file::call(&root, &s, r#"{"file_path":"sub/config"}"#)
            {
                let text = v.to_string();
                if text.contains(SECRET) {
                    leaks.push(text);
                } else if text.contains("INSIDE") {
                    inside += 1;
                }
            }
            if let Ok(v) = crate::tools::search_project::call(&root, &s, r#"{"query":"token"}"#) {
                if v.to_string().contains(SECRET) {
                    leaks.push(v.to_string());
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        flipper.join().unwrap();
        assert!(
            leaks.is_empty(),
            "{} of 6000 calls returned .git/config through the swapped link: {}",
            leaks.len(),
            leaks[0]
        );
        // The race was run: some reads found the real directory.
        assert!(inside > 0, "no read of sub/config ever succeeded");
    }
}
