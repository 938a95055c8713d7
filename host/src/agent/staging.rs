//! The staging directory of one reply: a fresh private temporary directory that is the only thing
//! the edit tools can see. The host places base versions in it before a call and, when the whole
//! reply succeeds, reads the changed files back out without following anything the guest created.

use std::io;
use std::path::Path;

use cap_std::fs::Dir;

/// A reply's staging directory; removed when dropped.
pub struct StagingDir {
    tmp: tempfile::TempDir,
    dir: Dir,
}

impl StagingDir {
    /// Creates an empty staging directory (mode 0700) under [`crate::store::scratch_base`] (a
    /// memory file system when there is one), never inside bb7's state dirs (which no read-write
    /// grant may overlap).
    pub fn new() -> io::Result<StagingDir> {
        let tmp = tempfile::Builder::new()
            .prefix("bb7-staging-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(crate::store::scratch_base())?;
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())?;
        Ok(StagingDir { tmp, dir })
    }

    /// The directory's host path (what the tool call is granted).
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// Puts `bytes` at `rel` (a normalised relative path), creating parent directories (not
    /// fsynced: the directory is removed with the reply).
    pub fn place(&self, rel: &str, bytes: &[u8]) -> io::Result<()> {
        crate::store::write_no_follow_scratch(&self.dir, rel, bytes)
    }

    /// Reads the file at `rel` back. Every directory on the way must be a real directory and the
    /// file a regular file: a symbolic link a tool left behind is never followed.
    pub fn read(&self, rel: &str) -> io::Result<Vec<u8>> {
        self.check(rel)?;
        crate::store::read_regular(&self.dir, rel)
    }

    /// [`StagingDir::read`] into shared memory, without copying the bytes once read.
    pub fn read_shared(&self, rel: &str) -> io::Result<std::sync::Arc<[u8]>> {
        self.check(rel)?;
        crate::store::read_regular_shared(&self.dir, rel)
    }

    /// Refuses `rel` unless every directory on the way is a real directory and the file a
    /// regular file.
    fn check(&self, rel: &str) -> io::Result<()> {
        let refuse = |what: String| io::Error::new(io::ErrorKind::PermissionDenied, what);
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let mut prefix = String::new();
        for (i, part) in parts.iter().enumerate() {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            let meta = self.dir.symlink_metadata(&prefix)?;
            let last = i + 1 == parts.len();
            if meta.file_type().is_symlink() {
                return Err(refuse(format!("{prefix} is a symbolic link")));
            }
            if last && !meta.is_file() {
                return Err(refuse(format!("{prefix} is not a regular file")));
            }
            if !last && !meta.is_dir() {
                return Err(refuse(format!("{prefix} is not a directory")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staging dir (possibly in a shared /dev/shm) is its owner's alone: other local users
    /// cannot list it or read the project copies staged in it.
    #[test]
    fn the_staging_dir_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let s = StagingDir::new().unwrap();
        let mode = std::fs::metadata(s.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    #[test]
    fn place_read_and_refuse_links() {
        let s = StagingDir::new().unwrap();
        s.place("src/a.rs", b"fn a() {}\n").unwrap();
        assert_eq!(s.read("src/a.rs").unwrap(), b"fn a() {}\n");
        std::os::unix::fs::symlink("/etc/passwd", s.path().join("src/evil")).unwrap();
        std::os::unix::fs::symlink("a.rs", s.path().join("src/inner")).unwrap();
        let refused = |rel: &str, why: &str| {
            let e = s.read(rel).expect_err("refused");
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{rel}: {e}");
            assert_eq!(e.to_string(), why, "{rel}");
        };
        refused("src/evil", "src/evil is a symbolic link");
        refused("src/inner", "src/inner is a symbolic link");
        std::os::unix::fs::symlink("/etc", s.path().join("etc")).unwrap();
        refused("etc/passwd", "etc is a symbolic link");
        let p = s.path().to_path_buf();
        drop(s);
        assert!(!p.exists());
    }
}
