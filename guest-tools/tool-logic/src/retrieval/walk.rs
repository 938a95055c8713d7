//! Walking the project in sorted path order, honouring `.gitignore`, and resolving one path the
//! way a walk would see it.
//!
//! Cost model: inside a component each filesystem call crosses into the host, so a walk makes one
//! directory listing per directory and takes every entry's type from the listing itself (a
//! symbolic link is reported as such and skipped, never followed or `stat`ed). A directory's
//! `.gitignore` is opened only when its listing contains one, and `.git/info/exclude` is tried once
//! per walk. Files are read by the caller through a [`FileBuf`]: one open, reads into a reused
//! buffer, no metadata call.

use std::io;
use std::ops::ControlFlow;

use super::dirlist::{EntryType, OpenFile, Tree};
use super::glob::PathGlob;
use super::rules::{Ignored, MAX_IGNORE_FILE_BYTES, Rules};
use super::{is_reserved, join_rel};
use crate::error::{ErrorKind, ToolError};
use crate::paths::Root;

/// A reusable read buffer: whole files are read into it without asking for their size first.
#[derive(Default)]
pub struct FileBuf {
    buf: Vec<u8>,
}

impl FileBuf {
    pub fn new() -> FileBuf {
        FileBuf::default()
    }

    /// Reads all of file `rel` of `tree` if it holds at most `cap` bytes (`Ok(None)` when it
    /// holds more; at most `cap + 1` bytes are read to find out). No link is followed on the way.
    pub fn read(&mut self, tree: &mut Tree, rel: &str, cap: usize) -> io::Result<Option<&[u8]>> {
        let len = tree.read_capped(rel, cap, &mut self.buf)?;
        Ok(len.map(|n| &self.buf[..n]))
    }
}

/// What a path is, as far as the tools are concerned (symbolic links are never either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
}

/// Why a path named by the model is not available. [`Refusal::into_error`] words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A segment is `.git` or `.bb7`.
    Reserved { name: &'static str },
    /// `path` (the path or one of its directories) does not exist.
    NotFound { path: String },
    /// `path`, a directory of the requested path, is a file.
    NotADirectory { path: String },
    /// `path` (the path or one of its directories) is a symbolic link.
    Symlink { path: String },
    /// `path` (the path or one of its directories) is ignored.
    Ignored { path: String, why: Ignored },
    /// `path` (the path or one of its directories) matches the secret deny list.
    Denied { path: String, pattern: String },
    /// The path is neither a regular file nor a directory (a socket, a FIFO, a device).
    Special,
    /// Any other filesystem failure.
    Io(ToolError),
}

impl Refusal {
    /// The error for the model about `full`, the path it asked for. `want_file` words the
    /// not-found message for a file (`read_file`) rather than any path (`list_files`' prefix).
    pub fn into_error(self, full: &str, want_file: bool) -> ToolError {
        match self {
            Refusal::Reserved { name: ".bb7" } => ToolError::new(
                ErrorKind::PermissionDenied,
                format!("`{full}` is in `.bb7/`, BB-7's private data, which tools may not access"),
            ),
            Refusal::Reserved { name } => ToolError::new(
                ErrorKind::PermissionDenied,
                format!("`{full}` is in `{name}/`, git's internal data, which tools do not access"),
            ),
            Refusal::NotFound { .. } if want_file => {
                ToolError::not_found(format!("file not found: {full}"))
            }
            Refusal::NotFound { .. } => {
                ToolError::not_found(format!("no such file or directory: {full}"))
            }
            Refusal::NotADirectory { path } => ToolError::not_found(format!(
                "`{path}` is a file, not a directory, so `{full}` does not exist"
            )),
            Refusal::Symlink { path } if path == full => ToolError::new(
                ErrorKind::PermissionDenied,
                format!("`{full}` is a symbolic link; tools do not follow symbolic links"),
            ),
            Refusal::Symlink { path } => ToolError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "`{path}` (in `{full}`) is a symbolic link; tools do not follow symbolic links"
                ),
            ),
            Refusal::Ignored { path, why } if path == full => ToolError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "`{full}` is ignored (pattern `{}` in `{}`); tools do not see ignored files",
                    why.pattern, why.source
                ),
            ),
            Refusal::Ignored { path, why } => ToolError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "`{full}` is inside `{path}/`, which is ignored (pattern `{}` in `{}`); tools do not see ignored files",
                    why.pattern, why.source
                ),
            ),
            Refusal::Denied { path, pattern } if path == full => ToolError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "`{full}` is hidden by the deny list (agent.deny, pattern `{pattern}`); its content is not available to tools"
                ),
            ),
            Refusal::Denied { path, pattern } => ToolError::new(
                ErrorKind::PermissionDenied,
                format!(
                    "`{full}` is inside `{path}/`, which is hidden by the deny list (agent.deny, pattern `{pattern}`); its content is not available to tools"
                ),
            ),
            Refusal::Special => {
                ToolError::invalid(format!("`{full}` is not a regular file or directory"))
            }
            Refusal::Io(e) => e,
        }
    }
}

/// One entry of a directory listing that the walk may visit.
struct Entry {
    name: String,
    kind: Kind,
}

/// Sorts so that the depth-first walk yields paths in byte order of the full relative path: a
/// directory `a` sorts as `a/`, after `a.txt` and before `a0`.
fn entry_order(a: &Entry, b: &Entry) -> std::cmp::Ordering {
    let (x, y) = (a.name.as_bytes(), b.name.as_bytes());
    let n = x.len().min(y.len());
    match x[..n].cmp(&y[..n]) {
        std::cmp::Ordering::Equal => {}
        other => return other,
    }
    // One name starts the other: the keys differ from byte `n` on, where a name that ends has
    // its `/` if it is a directory (no name holds a `/`, so that never ties with a byte).
    let next = |e: &Entry, bytes: &[u8]| {
        bytes
            .get(n)
            .copied()
            .or((e.kind == Kind::Dir).then_some(b'/'))
    };
    next(a, x).cmp(&next(b, y))
}

/// A directory being walked.
struct Level {
    dir: String,
    entries: std::vec::IntoIter<Entry>,
    pushed_rules: bool,
}

/// Walks one root. Holds the ignore rules in force, the tree's open directories and a buffer for
/// reading ignore files.
pub struct Walker<'r> {
    root: &'r Root,
    rules: Rules,
    buf: FileBuf,
    tree: Tree,
}

impl<'r> Walker<'r> {
    /// A walker for `root`, with the root's `.git/info/exclude` (if any) loaded.
    pub fn new(root: &'r Root) -> Walker<'r> {
        let mut w = Walker {
            root,
            rules: Rules::default(),
            buf: FileBuf::new(),
            tree: Tree::new(root.dir()),
        };
        // Looked at first (no listing typed it): only a regular file is opened, never a FIFO or a
        // device node someone put there.
        if matches!(w.tree.entry_type(".git/info/exclude"), Ok(EntryType::File))
            && let Ok(Some(bytes)) =
                w.buf
                    .read(&mut w.tree, ".git/info/exclude", MAX_IGNORE_FILE_BYTES)
        {
            w.rules.set_exclude(bytes);
        }
        w
    }

    /// Reads the `.gitignore` of directory `dir` and pushes its rules.
    fn push_ignore_file(&mut self, dir: &str) -> bool {
        let rel = join_rel(dir, ".gitignore");
        match self.buf.read(&mut self.tree, &rel, MAX_IGNORE_FILE_BYTES) {
            Ok(Some(bytes)) => self.rules.push(dir, bytes),
            _ => false,
        }
    }

    /// Opens file `rel` (as resolved by [`Walker::resolve`]) for reading, each directory on the way
    /// and the file itself without following a link: a link swapped in since `resolve` is refused.
    pub fn open_file(&mut self, rel: &str) -> Result<OpenFile, ToolError> {
        self.tree.open_file(rel).map_err(|e| {
            if super::dirlist::is_link_error(&e) {
                Refusal::Symlink {
                    path: rel.to_string(),
                }
                .into_error(rel, true)
            } else {
                ToolError::io(rel, &e)
            }
        })
    }

    /// Lists directory `dir`: visible entries (no `.git`/`.bb7`, no symbolic links or special
    /// files) in walk order, with the directory's `.gitignore` pushed if it has one.
    fn open_dir(&mut self, dir: &str) -> io::Result<Level> {
        let mut entries = Vec::new();
        let mut has_ignore_file = false;
        for (name, kind) in self.tree.list(dir)? {
            let Some(kind) = kind else { continue };
            if kind == Kind::File && name == ".gitignore" {
                has_ignore_file = true;
            }
            if is_reserved(&name) {
                continue;
            }
            if self
                .root
                .deny()
                .check_entry(dir, &name, kind == Kind::Dir)
                .is_some()
            {
                continue;
            }
            entries.push(Entry { name, kind });
        }
        let pushed_rules = has_ignore_file && self.push_ignore_file(dir);
        entries.sort_unstable_by(entry_order);
        Ok(Level {
            dir: dir.to_string(),
            entries: entries.into_iter(),
            pushed_rules,
        })
    }

    /// Resolves `rel` (normalised; `""` is the root) the way a walk from the root would reach it:
    /// no `.git`/`.bb7` segment, every directory on the way a real directory (not a symbolic link)
    /// that is not ignored, and the path itself neither ignored nor a symbolic link. Leaves the
    /// rules of the directories above `rel` in force, ready for [`Walker::walk`] from `rel`.
    pub fn resolve(&mut self, rel: &str) -> Result<Kind, Refusal> {
        self.rules.clear();
        if rel.is_empty() {
            return Ok(Kind::Dir);
        }
        if let Some(name) = rel.split('/').find_map(super::reserved_name) {
            return Err(Refusal::Reserved { name });
        }
        self.load_ignore_file_of("");
        let parts: Vec<&str> = rel.split('/').collect();
        let mut cur = String::with_capacity(rel.len());
        for (i, part) in parts.iter().enumerate() {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(part);
            // Looked at from its parent's handle, opened link by link: a directory on the way
            // that became a link since it was looked at is refused here, never followed.
            let kind = match self.tree.entry_type(&cur) {
                Ok(EntryType::File) => Kind::File,
                Ok(EntryType::Dir) => Kind::Dir,
                Ok(EntryType::Symlink) => return Err(Refusal::Symlink { path: cur }),
                Ok(EntryType::Other) => return Err(Refusal::Special),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(Refusal::NotFound { path: cur });
                }
                Err(e) if super::dirlist::is_link_error(&e) => {
                    let parent = cur.rsplit_once('/').map_or("", |(p, _)| p).to_string();
                    return Err(Refusal::Symlink { path: parent });
                }
                Err(e) => return Err(Refusal::Io(ToolError::io(&cur, &e))),
            };
            if let Some(pattern) = self.root.deny().check(&cur, kind == Kind::Dir) {
                return Err(Refusal::Denied { path: cur, pattern });
            }
            if let Some(why) = self.rules.check(&cur, kind == Kind::Dir) {
                return Err(Refusal::Ignored { path: cur, why });
            }
            if i + 1 == parts.len() {
                return Ok(kind);
            }
            if kind != Kind::Dir {
                return Err(Refusal::NotADirectory { path: cur });
            }
            self.load_ignore_file_of(&cur);
        }
        Ok(Kind::Dir)
    }

    /// Pushes the rules of `dir/.gitignore` if it is a regular file (one `stat` when there is none;
    /// used only on the few directories above a resolved path).
    fn load_ignore_file_of(&mut self, dir: &str) {
        if matches!(
            self.tree.entry_type(&join_rel(dir, ".gitignore")),
            Ok(EntryType::File)
        ) {
            self.push_ignore_file(dir);
        }
    }

    /// Visits, in sorted path order, every file at or below `start` (as returned by
    /// [`Walker::resolve`], which must have been called for it unless it is the root) that is not
    /// ignored and matches `glob`. `visit` gets the tree (to read the file through, see
    /// [`FileBuf::read`]) and the file's relative path, and may stop the walk.
    /// Only a failure to list `start` itself is an error; unreadable subdirectories are skipped.
    pub fn walk(
        &mut self,
        start: &str,
        kind: Kind,
        glob: Option<&PathGlob>,
        mut visit: impl FnMut(&mut Tree, &str) -> ControlFlow<()>,
    ) -> io::Result<()> {
        let wanted = |rel: &str| glob.is_none_or(|g| g.is_match(rel));
        if kind == Kind::File {
            if wanted(start) {
                let _ = visit(&mut self.tree, start);
            }
            return Ok(());
        }
        let mut stack = vec![self.open_dir(start)?];
        while let Some(level) = stack.last_mut() {
            let Some(entry) = level.entries.next() else {
                if level.pushed_rules {
                    self.rules.pop();
                }
                stack.pop();
                continue;
            };
            let rel = join_rel(&level.dir, &entry.name);
            if self.rules.check(&rel, entry.kind == Kind::Dir).is_some() {
                continue;
            }
            match entry.kind {
                Kind::Dir => {
                    if let Ok(sub) = self.open_dir(&rel) {
                        stack.push(sub);
                    }
                }
                Kind::File => {
                    if wanted(&rel) && visit(&mut self.tree, &rel).is_break() {
                        break;
                    }
                }
            }
        }
        // Leave the rules as `resolve` set them up, whether or not the walk was cut short.
        for level in stack {
            if level.pushed_rules {
                self.rules.pop();
            }
        }
        Ok(())
    }
}

/// Where a walk restricted to `prefix` (already resolved to `kind`) and `glob` should start: the
/// glob's literal base when it lies deeper inside `prefix`. `None` when no file can match (the base
/// lies elsewhere, or cannot be walked).
pub fn narrow(
    walker: &mut Walker<'_>,
    prefix: &str,
    kind: Kind,
    glob: Option<&PathGlob>,
) -> Option<(String, Kind)> {
    let base = glob.map_or("", |g| g.base());
    if kind == Kind::File || base.is_empty() || super::is_within(prefix, base) {
        return Some((prefix.to_string(), kind));
    }
    if !super::is_within(base, prefix) {
        return None;
    }
    let k = walker.resolve(base).ok()?;
    Some((base.to_string(), k))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::put;
    use super::*;

    fn collect(root: &Root, start: &str, glob: Option<&str>) -> Vec<String> {
        let glob = glob.map(|g| PathGlob::new(g).unwrap());
        let mut w = Walker::new(root);
        let kind = w.resolve(start).unwrap();
        let mut out = Vec::new();
        w.walk(start, kind, glob.as_ref(), |_, p| {
            out.push(p.to_string());
            ControlFlow::Continue(())
        })
        .unwrap();
        out
    }

    #[test]
    fn sorted_walk_with_ignores() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for f in [
            "a.txt",
            "a/b.txt",
            "a0",
            "B",
            "z/y/x",
            ".github/ci.yml",
            ".env.example",
        ] {
            put(d, f, "x");
        }
        put(d, ".gitignore", "*.log\n/build/\ncache/\n!keep.log\n");
        put(d, "x.log", "");
        put(d, "keep.log", "");
        put(d, "build/out", "");
        put(d, "sub/build/out", "");
        put(d, "sub/cache/c", "");
        put(d, "sub/.gitignore", "!x.log\nsecret*\n");
        put(d, "sub/x.log", "");
        put(d, "sub/secret.txt", "");
        put(d, ".git/config", "");
        put(d, ".git/info/exclude", "excluded.txt\n");
        put(d, "excluded.txt", "");
        put(d, ".bb7/key", "");
        put(d, "deep/.bb7/key", "");
        put(d, "deep/.git", "gitdir: x");
        let root = Root::at(d);
        let all = collect(&root, "", None);
        assert_eq!(
            all,
            [
                ".env.example",
                ".github/ci.yml",
                ".gitignore",
                "B",
                "a.txt",
                "a/b.txt",
                "a0",
                "keep.log",
                "sub/.gitignore",
                "sub/build/out",
                "sub/x.log",
                "z/y/x"
            ]
        );
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(all, sorted);
        assert_eq!(
            collect(&root, "sub", None),
            ["sub/.gitignore", "sub/build/out", "sub/x.log"]
        );
        assert_eq!(collect(&root, "", Some("*.log")), ["keep.log", "sub/x.log"]);
        assert_eq!(collect(&root, "sub/x.log", None), ["sub/x.log"]);
    }

    /// The walk order is the byte order of each entry's name with `/` after a directory's.
    #[test]
    fn entries_sort_as_their_paths_with_a_slash_after_directories() {
        let names = [
            "a", "a.txt", "a0", "a-", "ab", "a/", "b", "", "A", "a\u{e9}", "aa", "a.", ".",
        ];
        let mut entries = Vec::new();
        for n in names.iter().filter(|n| !n.contains('/')) {
            for kind in [Kind::File, Kind::Dir] {
                entries.push(Entry {
                    name: n.to_string(),
                    kind,
                });
            }
        }
        let key = |e: &Entry| {
            let mut k = e.name.clone().into_bytes();
            if e.kind == Kind::Dir {
                k.push(b'/');
            }
            k
        };
        for a in &entries {
            for b in &entries {
                assert_eq!(
                    entry_order(a, b),
                    key(a).cmp(&key(b)),
                    "{:?} {:?} / {:?} {:?}",
                    a.name,
                    a.kind,
                    b.name,
                    b.kind
                );
            }
        }
    }

    #[test]
    fn resolve_refusals() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        put(d, ".gitignore", "ignored/\n.env\n");
        put(d, "ignored/a", "");
        put(d, "src/.env", "");
        put(d, "src/ok.rs", "");
        let root = Root::at(d);
        let mut w = Walker::new(&root);
        assert_eq!(w.resolve("src/ok.rs"), Ok(Kind::File));
        assert_eq!(w.resolve("src"), Ok(Kind::Dir));
        assert!(
            matches!(w.resolve("src/.env"), Err(Refusal::Ignored { ref path, .. }) if path == "src/.env")
        );
        assert!(
            matches!(w.resolve("ignored/a"), Err(Refusal::Ignored { ref path, .. }) if path == "ignored")
        );
        assert!(
            matches!(w.resolve("nope/a"), Err(Refusal::NotFound { ref path }) if path == "nope")
        );
        assert!(
            matches!(w.resolve("src/ok.rs/x"), Err(Refusal::NotADirectory { ref path }) if path == "src/ok.rs")
        );
        assert_eq!(
            w.resolve("a/.bb7/x"),
            Err(Refusal::Reserved { name: ".bb7" })
        );
        assert_eq!(w.resolve(".git"), Err(Refusal::Reserved { name: ".git" }));
        let e = w
            .resolve("ignored/a")
            .unwrap_err()
            .into_error("ignored/a", true);
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert_eq!(
            e.message,
            "`ignored/a` is inside `ignored/`, which is ignored (pattern `ignored/` in `.gitignore`); tools do not see ignored files"
        );
    }

    /// Issue 23 item 4: on a case-insensitive file system `.GIT/config` is `.git/config`, and
    /// `server.PEM` a key: reserved names and the deny list match in any case.
    #[test]
    fn reserved_and_denied_names_match_in_any_case() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        for f in [
            ".GIT/config",
            ".Bb7/chats/c/chat.json",
            "sub/.Git/HEAD",
            "certs/server.PEM",
            ".ENV",
            "home/.AWS/credentials",
        ] {
            put(d, f, "SECRET");
        }
        put(d, "a.txt", "x");
        let root = Root::at(d).with_settings(&crate::Settings::default());
        assert_eq!(collect(&root, "", None), ["a.txt"]);
        let mut w = Walker::new(&root);
        assert_eq!(
            w.resolve(".GIT/config"),
            Err(Refusal::Reserved { name: ".git" })
        );
        assert_eq!(
            w.resolve("sub/.Git/HEAD"),
            Err(Refusal::Reserved { name: ".git" })
        );
        assert_eq!(
            w.resolve(".Bb7/chats/c/chat.json"),
            Err(Refusal::Reserved { name: ".bb7" })
        );
        for p in ["certs/server.PEM", ".ENV", "home/.AWS/credentials"] {
            assert!(
                matches!(w.resolve(p), Err(Refusal::Denied { .. })),
                "{p}: {:?}",
                w.resolve(p)
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_not_followed() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        put(d, "real/f.txt", "x");
        put(d, ".bb7/secret", "s");
        symlink(d.join("real"), d.join("linkdir")).unwrap();
        symlink(d.join("real/f.txt"), d.join("link.txt")).unwrap();
        symlink(d.join(".bb7"), d.join("cfg")).unwrap();
        symlink(d.join("missing"), d.join("dangling")).unwrap();
        let root = Root::at(d);
        assert_eq!(collect(&root, "", None), ["real/f.txt"]);
        let mut w = Walker::new(&root);
        assert!(
            matches!(w.resolve("cfg/secret"), Err(Refusal::Symlink { ref path }) if path == "cfg")
        );
        assert!(matches!(
            w.resolve("link.txt"),
            Err(Refusal::Symlink { .. })
        ));
        assert!(matches!(
            w.resolve("dangling"),
            Err(Refusal::Symlink { .. })
        ));
    }

    #[test]
    fn file_buf_reads_whole_files_and_enforces_the_cap() {
        use std::fs;
        let dir = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(dir.path().join("big"), &big).unwrap();
        fs::write(dir.path().join("abc"), b"abc").unwrap();
        fs::write(dir.path().join("empty"), b"").unwrap();
        fs::write(dir.path().join("a"), b"a").unwrap();
        let mut t = Tree::new(dir.path());
        let mut b = FileBuf::new();
        assert_eq!(b.read(&mut t, "big", 200_000).unwrap().unwrap(), &big[..]);
        assert_eq!(b.read(&mut t, "big", 100_000).unwrap().unwrap(), &big[..]);
        assert!(b.read(&mut t, "big", 99_999).unwrap().is_none());
        // The buffer is reused: a shorter file after a longer one is read exactly.
        assert_eq!(b.read(&mut t, "abc", 10).unwrap().unwrap(), b"abc");
        assert_eq!(b.read(&mut t, "empty", 0).unwrap().unwrap(), b"");
        assert!(b.read(&mut t, "a", 0).unwrap().is_none());
    }
}
