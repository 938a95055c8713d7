//! The project tree as the host touches it, under one rule for every project path.
//!
//! A project path is relative, has no `.`/`..`/empty component, names no `.git` or `.bb7` component
//! (in any case: nested repositories have their own `.git/`), and is resolved **without following
//! any symbolic link**, one component at a time from a directory handle opened at `init`
//! (`openat(…, O_NOFOLLOW)` on each step). Nothing is checked by name and then opened by name, so a
//! process that swaps a directory for a symlink between two steps cannot redirect a read or a write.
//!
//! The `.bb7/` directory is held as a handle from `init` too: instructions are read and created
//! through it, so replacing `.bb7` by a symlink afterwards changes nothing the host reads or writes.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;
use rustix::fs::{Mode, OFlags};

/// The opened project: its canonical root and handles to the root and to `.bb7/`.
#[derive(Debug)]
pub struct ProjectDir {
    root: PathBuf,
    dir: Dir,
    state: Dir,
    /// (device, inode) of `.bb7/` when it was opened.
    state_id: (u64, u64),
}

/// Refuses a project path that breaks the rule (see the module docs); returns its components.
pub fn check_rel(rel: &str) -> io::Result<Vec<&str>> {
    let refuse = |why: String| Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    if rel.is_empty() || rel.starts_with('/') {
        return refuse(format!("{rel:?} is not a relative project path"));
    }
    if rel.contains('\0') {
        return refuse(format!("{rel:?} contains a NUL byte"));
    }
    let parts: Vec<&str> = rel.split('/').collect();
    for p in &parts {
        if p.is_empty() || *p == "." || *p == ".." {
            return refuse(format!("{rel} is not a normalised project path"));
        }
        if p.eq_ignore_ascii_case(".git") || p.eq_ignore_ascii_case(".bb7") {
            return refuse(format!("{rel} is inside {p}/, which BB-7 does not touch"));
        }
    }
    Ok(parts)
}

fn symlink_error(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{what} is a symbolic link, which BB-7 does not follow in a project"),
    )
}

/// Opens directory `name` (one component) inside `dir` without following a symlink.
pub(crate) fn open_dir_nofollow(dir: &impl AsFd, name: &str, shown: &str) -> io::Result<Dir> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => symlink_error(shown),
        rustix::io::Errno::NOTDIR => {
            match rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if rustix::fs::FileType::from_raw_mode(st.st_mode).is_symlink() => {
                    symlink_error(shown)
                }
                _ => io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{shown} is not a directory"),
                ),
            }
        }
        e => io::Error::from(e),
    })?;
    Ok(Dir::from_std_file(std::fs::File::from(fd)))
}

fn open_file_nofollow(dir: &Dir, name: &str, shown: &str) -> io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => symlink_error(shown),
        e => io::Error::from(e),
    })
}

/// The `.bb7/.gitignore` written when bb7 creates `.bb7/`: chats, checkpoints and every other
/// file stay out of git (delete the file to commit chats), except `tools.lock`, which is meant to
/// be committed (`bb7 tools audit --check` compares it in CI).
pub const STATE_GITIGNORE: &str = "# BB-7 chats are private by default; delete this file to commit them.\n*\n# The tools lockfile is meant to be committed (`bb7 tools audit --check`).\n!/tools.lock\n";

/// What `:BB7Init` wrote before the lockfile existed (`*` alone): it ignores `tools.lock` too.
const OLD_STATE_GITIGNORE: &str =
    "# BB-7 chats are private by default; delete this file to commit them.\n*\n";

/// Writes [`STATE_GITIGNORE`] as `.gitignore` in `state` (a fresh `.bb7/` handle) unless one is
/// there; an earlier default (which ignored `tools.lock`) is replaced. A file the user wrote or
/// changed, a link or anything else at that name is left alone. Returns whether it wrote.
pub fn ensure_state_gitignore(state: &Dir, create: bool) -> io::Result<bool> {
    match super::read_regular_nofollow(state, ".gitignore") {
        Ok(b) if b == OLD_STATE_GITIGNORE.as_bytes() => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {}
        _ => return Ok(false),
    }
    super::write_atomic(state, ".gitignore", STATE_GITIGNORE.as_bytes())?;
    Ok(true)
}

/// The identity of an open handle.
fn identity(dir: &Dir) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(dir)?;
    Ok((st.st_dev, st.st_ino))
}

impl ProjectDir {
    /// Opens the project at `root` (canonicalised) and its `.bb7/` directory, which must be a real
    /// directory (not a symlink).
    pub fn open(root: &Path) -> io::Result<Self> {
        let root = root.canonicalize()?;
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())?;
        let state = open_dir_nofollow(&dir, ".bb7", ".bb7")?;
        let state_id = identity(&state)?;
        Ok(ProjectDir {
            root,
            dir,
            state,
            state_id,
        })
    }

    /// The canonical project root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The project root handle.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The `.bb7/` handle held since `init`.
    pub fn state(&self) -> &Dir {
        &self.state
    }

    /// The absolute path of `.bb7/<rel>`, for replies that hand a path to the editor, after checking
    /// that `.bb7` is still the directory opened at `init` (not replaced, e.g. by a symlink).
    pub fn state_path(&self, rel: &str) -> io::Result<PathBuf> {
        let st = rustix::fs::statat(&self.dir, ".bb7", rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
        if !ft.is_dir() || (st.st_dev, st.st_ino) != self.state_id {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} was replaced since the project was opened; run init again",
                    self.root.join(".bb7").display()
                ),
            ));
        }
        Ok(self.root.join(".bb7").join(rel))
    }

    fn parent<'a>(&self, rel: &'a str, create: bool) -> io::Result<(Dir, &'a str)> {
        let parts = check_rel(rel)?;
        parent_nofollow(&self.dir, parts, create)
    }

    /// Opens `rel` for reading (non-blocking, so a FIFO cannot hang the host).
    pub fn open_read(&self, rel: &str) -> io::Result<std::fs::File> {
        let (parent, name) = self.parent(rel, false)?;
        Ok(std::fs::File::from(open_file_nofollow(&parent, name, rel)?))
    }

    /// Reads `rel`: a regular file of at most [`super::MAX_READ`] bytes.
    pub fn read(&self, rel: &str) -> io::Result<Vec<u8>> {
        super::check_and_read(self.open_read(rel)?)
    }

    /// Whether anything (a file, a directory, a symlink) is at `rel`, without following a symlink.
    pub fn exists(&self, rel: &str) -> bool {
        self.parent(rel, false)
            .and_then(|(p, name)| p.symlink_metadata(name))
            .is_ok()
    }

    /// Checks that `rel` can be handed to the editor by absolute path: every existing directory on
    /// the way is real (no symlink), and the file, if it exists, is a regular file. Returns the path.
    pub fn checked_path(&self, rel: &str) -> io::Result<PathBuf> {
        match self.parent(rel, false) {
            Ok((parent, name)) => match parent.symlink_metadata(name) {
                Ok(m) if m.file_type().is_symlink() => return Err(symlink_error(rel)),
                Ok(m) if !m.is_file() => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{rel} is not a regular file"),
                    ));
                }
                _ => {}
            },
            // A missing directory: nothing below it exists, so nothing below it is a link.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(self.root.join(rel))
    }

    /// Writes `rel` atomically (see [`write_nofollow`]).
    pub fn write(&self, rel: &str, bytes: &[u8]) -> io::Result<()> {
        let parts = check_rel(rel)?;
        write_nofollow(&self.dir, rel, parts, bytes, super::Durability::Durable)
    }
}

/// The directory holding the last of `parts`, walked from `root` one component at a time without
/// following a symlink; missing directories are created when `create`. Returns it with the name.
pub(crate) fn parent_nofollow<'a>(
    root: &Dir,
    parts: Vec<&'a str>,
    create: bool,
) -> io::Result<(Dir, &'a str)> {
    let Some((name, dirs)) = parts.split_last() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a file path is required",
        ));
    };
    let mut cur = root.try_clone()?;
    for (i, d) in dirs.iter().enumerate() {
        let shown = dirs[..=i].join("/");
        cur = match open_dir_nofollow(&cur, d, &shown) {
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                match rustix::fs::mkdirat(&cur, *d, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                open_dir_nofollow(&cur, d, &shown)?
            }
            r => r?,
        };
    }
    Ok((cur, name))
}

/// Writes `rel` (split into `parts`) under `root` atomically (temporary file, fsync, rename, fsync of
/// the directory), keeping an existing file's permissions. Missing directories are created; no
/// symlink is followed, and an existing symlink or non-regular file at `rel` is refused. Without the
/// fsyncs for a [`super::Durability::Scratch`] write.
pub(super) fn write_nofollow(
    root: &Dir,
    rel: &str,
    parts: Vec<&str>,
    bytes: &[u8],
    durability: super::Durability,
) -> io::Result<()> {
    let (parent, name) = parent_nofollow(root, parts, true)?;
    let perms = match parent.symlink_metadata(name) {
        Ok(m) if m.file_type().is_symlink() => return Err(symlink_error(rel)),
        Ok(m) if m.is_file() => Some(m.permissions()),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{rel} is not a regular file"),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    // Between the check and the rename the name can only be swapped for another entry of this same
    // directory; the rename replaces that entry itself and never writes through it.
    super::replace_in(&parent, name, bytes, perms, durability)
}

/// A project root named on a command line (`bb7 mcp --project DIR`), canonicalised; it must be a
/// directory.
pub fn canonical_dir(dir: &Path) -> io::Result<PathBuf> {
    let root = dir.canonicalize()?;
    if !root.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", root.display()),
        ));
    }
    Ok(root)
}

/// The nearest ancestor of `start` (itself included, canonicalised first) holding a `.bb7/`
/// directory (a real one, not a link to one) that is not the global state directory (`~/.bb7`
/// marks no project); `None` when there is none.
pub fn nearest_project(start: &Path) -> io::Result<Option<PathBuf>> {
    let start = start.canonicalize()?;
    let state = crate::paths::state_dir().and_then(|d| d.canonicalize().ok());
    Ok(start
        .ancestors()
        .find(|d| {
            let marker = d.join(".bb7");
            marker
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_dir())
                && state.as_deref() != Some(marker.as_path())
        })
        .map(Path::to_path_buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn project() -> (tempfile::TempDir, ProjectDir) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join(".bb7")).unwrap();
        std::fs::create_dir_all(t.path().join(".git/hooks")).unwrap();
        std::fs::write(t.path().join(".git/config"), "keep").unwrap();
        let p = ProjectDir::open(t.path()).unwrap();
        (t, p)
    }

    #[test]
    fn the_rule_refuses_links_and_state_dirs() {
        let (t, p) = project();
        let root = t.path();
        symlink(".git/hooks", root.join("hooks")).unwrap();
        symlink(".git/config", root.join("cfg")).unwrap();
        symlink("/etc", root.join("etc")).unwrap();
        for bad in [
            "hooks/pre-commit",
            "cfg",
            "etc/passwd",
            ".git/config",
            "a/.GIT/x",
            ".bb7/instructions",
            "../x",
            "a//b",
            "/etc/passwd",
        ] {
            assert!(p.write(bad, b"x").is_err(), "write {bad}");
            assert!(p.read(bad).is_err(), "read {bad}");
            assert!(p.checked_path(bad).is_err(), "path {bad}");
        }
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), b"keep");
        p.write("a/b/c.txt", b"c").unwrap();
        assert_eq!(p.read("a/b/c.txt").unwrap(), b"c");
        assert!(p.exists("cfg") && p.exists("a/b") && !p.exists("zz"));
        assert_eq!(
            p.checked_path("new/dir/f").unwrap(),
            p.root().join("new/dir/f")
        );
    }

    #[test]
    fn a_replaced_state_dir_is_noticed() {
        let (t, p) = project();
        let root = t.path();
        assert!(p.state_path("instructions").is_ok());
        std::fs::rename(root.join(".bb7"), root.join("old")).unwrap();
        symlink("old", root.join(".bb7")).unwrap();
        let e = p.state_path("instructions").expect_err("replaced");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(
            e.to_string()
                .ends_with("was replaced since the project was opened; run init again"),
            "{e}"
        );
    }
}
