//! On-disk state through capability handles: a [`StateDir`] is a `cap_std::fs::Dir` for `.bb7/` (or
//! `~/.bb7/`), so no path a client sends can make the host read or write outside it, whatever `..`,
//! absolute paths or planted symlinks it contains.
//!
//! - [`StateDir`]: the handle, plus atomic writes (temp file, fsync, rename, fsync the directory).
//! - [`lock`]: per-chat PID locks with stale-lock recovery.
//! - [`index`]: `chats/index.json`, kept in step with the chat directories.

pub mod index;
pub mod lock;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

/// A directory the host owns, opened as a capability.
#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
    dir: Dir,
}

impl StateDir {
    /// Opens `path` (creating it when `create` is set).
    pub fn open(path: &Path, create: bool) -> io::Result<Self> {
        if create {
            std::fs::create_dir_all(path)?;
        }
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        Ok(StateDir {
            path: path.to_path_buf(),
            dir,
        })
    }

    /// The directory's absolute path (for replies that must name files, e.g. `get_diff_paths`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The capability handle.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A sub-directory as its own handle (created when `create`).
    pub fn sub(&self, rel: &str, create: bool) -> io::Result<StateDir> {
        if create {
            self.dir.create_dir_all(rel)?;
        }
        Ok(StateDir {
            path: self.path.join(rel),
            dir: self.dir.open_dir(rel)?,
        })
    }
}

/// Reads `rel` inside `dir`.
pub fn read(dir: &Dir, rel: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    dir.read(rel)
}

/// Writes `rel` inside `dir` atomically: the bytes go to a new temporary file in the same directory,
/// which is fsynced and renamed over `rel`; then the directory is fsynced. A crash at any point leaves
/// the old file or the new one, never a torn one. Missing parent directories are created.
pub fn write_atomic(dir: &Dir, rel: impl AsRef<Path>, bytes: &[u8]) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let rel = rel.as_ref();
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a file path is required"))?;
    let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(p) = parent {
        dir.create_dir_all(p)?;
    }
    let tmp_name = format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = match parent {
        Some(p) => p.join(&tmp_name),
        None => PathBuf::from(&tmp_name),
    };
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    let mut f = dir.open_with(&tmp, &opts)?;
    let written = f.write_all(bytes).and_then(|_| f.sync_all());
    drop(f);
    if let Err(e) = written.and_then(|_| dir.rename(&tmp, dir, rel)) {
        let _ = dir.remove_file(&tmp);
        return Err(e);
    }
    // Make the rename itself durable.
    let parent_dir = match parent {
        Some(p) => dir.open(p),
        None => dir.open("."),
    };
    if let Ok(d) = parent_dir {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes `rel` (a file) if present.
pub fn remove_file_if_exists(dir: &Dir, rel: impl AsRef<Path>) -> io::Result<()> {
    match dir.remove_file(rel) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_files() {
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(t.path(), false).unwrap();
        write_atomic(s.dir(), "a/b/c.json", b"one").unwrap();
        write_atomic(s.dir(), "a/b/c.json", b"two").unwrap();
        assert_eq!(std::fs::read(t.path().join("a/b/c.json")).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(t.path().join("a/b")).unwrap().count(), 1);
    }

    #[test]
    fn escapes_are_refused_by_the_capability() {
        let outside = tempfile::tempdir().unwrap();
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(t.path(), false).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("link")).unwrap();
        assert!(write_atomic(s.dir(), "../x", b"x").is_err());
        assert!(write_atomic(s.dir(), "/tmp/x", b"x").is_err());
        assert!(write_atomic(s.dir(), "link/x", b"x").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
