//! The empty directory an `output-write` call is granted, what it left there, and its removal.
//!
//! Nothing here recurses and nothing holds more than a bounded number of descriptors, whatever the
//! call left: the walk stops at [`MAX_DEPTH`] and [`MAX_ENTRIES`], and removal flattens the tree
//! (each subdirectory is renamed up to the top before it is emptied), so a directory chain of any
//! depth is removed with three descriptors open and no path longer than one name.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;

use cap_std::fs::Dir;

/// The deepest directory whose files are taken.
pub const MAX_DEPTH: usize = 32;
/// The most entries (files and directories) the walk looks at.
pub const MAX_ENTRIES: usize = 4096;
/// Entries read from one directory before they are acted on (removal re-reads until empty).
const BATCH: usize = 256;

/// Why the files a call left are not taken.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The directory could not be read.
    #[error("cannot read the tool's output directory: {0}")]
    Io(#[from] io::Error),
    /// Directories nested deeper than [`MAX_DEPTH`].
    #[error("the tool left directories nested deeper than {MAX_DEPTH}; nothing is proposed")]
    TooDeep,
    /// More than [`MAX_ENTRIES`] entries, more than the file limit or the byte limit.
    #[error("the tool left more than {files} files or {} MiB; nothing is proposed", .bytes >> 20)]
    TooMuch {
        /// The most files taken.
        files: usize,
        /// The most bytes taken.
        bytes: u64,
    },
    /// A symbolic link or special file.
    #[error("the tool left {0}, which is not a regular file; nothing is proposed")]
    NotRegular(String),
}

/// A fresh empty private directory under the system temporary directory, removed (whatever it
/// holds) when dropped.
pub struct OutputDir {
    tmp: Option<tempfile::TempDir>,
}

impl OutputDir {
    /// Creates the empty directory (mode 0700).
    pub fn new() -> io::Result<OutputDir> {
        let tmp = tempfile::Builder::new()
            .prefix("bb7-output-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir()?;
        Ok(OutputDir { tmp: Some(tmp) })
    }

    /// The directory's host path (what the call is granted).
    pub fn path(&self) -> &Path {
        self.tmp.as_ref().map(|t| t.path()).unwrap_or(Path::new(""))
    }

    /// The regular files left in the directory, as (relative path, content), sorted by path: at most
    /// `max_files` files of at most `max_bytes` together, in directories at most [`MAX_DEPTH`]
    /// deep, among at most [`MAX_ENTRIES`] entries. A symbolic link or special file refuses the
    /// lot. Directories wait as names, so at most a few descriptors are open at once.
    pub fn collect(
        &self,
        max_files: usize,
        max_bytes: u64,
    ) -> Result<Vec<(String, Vec<u8>)>, OutputError> {
        let too_much = || OutputError::TooMuch {
            files: max_files,
            bytes: max_bytes,
        };
        let root = Dir::open_ambient_dir(self.path(), cap_std::ambient_authority())?;
        let mut out = Vec::new();
        let mut total = 0u64;
        let mut seen = 0usize;
        // Directories still to read: (path from the top, depth).
        let mut stack: Vec<(String, usize)> = vec![(String::new(), 0)];
        while let Some((prefix, depth)) = stack.pop() {
            let dir = open_nofollow(&root, &prefix)?;
            for entry in dir.entries()? {
                let entry = entry?;
                seen += 1;
                if seen > MAX_ENTRIES {
                    return Err(too_much());
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                let rel = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}/{name}")
                };
                let meta = dir.symlink_metadata(&name)?;
                if meta.is_dir() {
                    if depth + 1 > MAX_DEPTH {
                        return Err(OutputError::TooDeep);
                    }
                    stack.push((rel, depth + 1));
                } else if meta.is_file() {
                    total = total.saturating_add(meta.len());
                    if out.len() >= max_files || total > max_bytes {
                        return Err(too_much());
                    }
                    let bytes = crate::store::read_regular_nofollow(&dir, &name)?;
                    out.push((rel, bytes));
                } else {
                    return Err(OutputError::NotRegular(rel));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

/// The directory at `rel` under `root`, opened one component at a time, never through a link.
fn open_nofollow(root: &Dir, rel: &str) -> io::Result<Dir> {
    let mut dir = root.try_clone()?;
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        dir = open_dir_nofollow(&dir, OsStr::new(part))?;
    }
    Ok(dir)
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        let Some(tmp) = self.tmp.take() else { return };
        if let Err(e) = remove_tree(tmp.path()) {
            tracing::warn!(
                "cannot remove the tool output directory {}: {e}",
                tmp.path().display()
            );
        }
        // The directory is empty now (or the error was reported); TempDir removes what is left.
        drop(tmp);
    }
}

/// Empties `path` (which stays), without recursion and with at most three descriptors open: a
/// subdirectory is renamed to a fresh name at the top, then emptied the same way and removed;
/// symbolic links are removed, never followed.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let root = Dir::open_ambient_dir(path, cap_std::ambient_authority())?;
    let mut fresh = 0u64;
    // A few rounds, in case something was added while the top was read.
    for _ in 0..4 {
        // The top: files go, subdirectories stay where they are, to be emptied below.
        let mut pending: Vec<OsString> = Vec::new();
        for entry in root.entries()? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                pending.push(entry.file_name());
            } else {
                root.remove_file(entry.file_name())?;
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        while let Some(name) = pending.pop() {
            let dir = open_dir_nofollow(&root, &name)?;
            loop {
                let mut batch = Vec::new();
                for entry in dir.entries()? {
                    let entry = entry?;
                    batch.push((entry.file_name(), entry.file_type()?.is_dir()));
                    if batch.len() >= BATCH {
                        break;
                    }
                }
                if batch.is_empty() {
                    break;
                }
                for (entry, is_dir) in batch {
                    if is_dir {
                        let moved = fresh_name(&root, &mut fresh)?;
                        dir.rename(&entry, &root, &moved)?;
                        pending.push(moved.into());
                    } else {
                        dir.remove_file(&entry)?;
                    }
                }
            }
            drop(dir);
            root.remove_dir(&name)?;
        }
    }
    Ok(())
}

/// Directory `name` (one component) in `dir`, never through a symbolic link.
fn open_dir_nofollow(dir: &Dir, name: &OsStr) -> io::Result<Dir> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )?;
    Ok(Dir::from_std_file(std::fs::File::from(fd)))
}

/// A name not yet used at the top of `root`.
fn fresh_name(root: &Dir, counter: &mut u64) -> io::Result<String> {
    loop {
        *counter += 1;
        let name = format!(".bb7-rm-{}", *counter);
        match root.symlink_metadata(&name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(name),
            Err(e) => return Err(e),
            Ok(_) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output dir in the shared temp dir is its owner's alone.
    #[test]
    fn the_output_dir_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let d = OutputDir::new().unwrap();
        let mode = std::fs::metadata(d.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    #[test]
    fn a_deep_chain_and_links_are_removed_without_recursion() {
        let d = OutputDir::new().unwrap();
        let top = Dir::open_ambient_dir(d.path(), cap_std::ambient_authority()).unwrap();
        // 3,000 levels: far past any path length, and deep enough that recursion per level on a
        // 64 KiB stack would overflow.
        let mut cur = top.try_clone().unwrap();
        for _ in 0..3_000 {
            cur.create_dir("d").unwrap();
            cur.write("f", b"x").unwrap();
            cur = cur.open_dir("d").unwrap();
        }
        drop(cur);
        for i in 0..600 {
            top.write(format!("file{i}"), b"y").unwrap();
        }
        std::os::unix::fs::symlink("/etc", d.path().join("link")).unwrap();
        assert!(matches!(
            d.collect(100, 1 << 20),
            Err(OutputError::TooMuch { .. })
        ));
        let path = d.path().to_path_buf();
        // Dropped on a thread with a small stack: nothing may recurse per level.
        std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || drop(d))
            .unwrap()
            .join()
            .unwrap();
        assert!(!path.exists());
        assert!(Path::new("/etc/passwd").exists());
    }

    #[test]
    fn collect_takes_regular_files_and_refuses_depth_and_links() {
        let d = OutputDir::new().unwrap();
        let top = Dir::open_ambient_dir(d.path(), cap_std::ambient_authority()).unwrap();
        top.create_dir_all("a/b").unwrap();
        top.write("a/b/c.txt", b"c").unwrap();
        top.write("z.txt", b"z").unwrap();
        let files = d.collect(100, 1 << 20).unwrap();
        assert_eq!(
            files,
            vec![
                ("a/b/c.txt".to_string(), b"c".to_vec()),
                ("z.txt".to_string(), b"z".to_vec())
            ]
        );
        let deep = (0..=MAX_DEPTH).map(|_| "d").collect::<Vec<_>>().join("/");
        top.create_dir_all(&deep).unwrap();
        assert!(matches!(d.collect(100, 1 << 20), Err(OutputError::TooDeep)));
        top.remove_dir_all("d").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("p")).unwrap();
        assert!(matches!(
            d.collect(100, 1 << 20),
            Err(OutputError::NotRegular(_))
        ));
    }
}
