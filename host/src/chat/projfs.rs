//! Reading and removing project files through the project handle without following symbolic links
//! (the counterpart of [`crate::store::write_no_follow`] for review and rollback): every directory
//! on the way must be a real directory and the file a regular one.

use std::io;

use cap_std::fs::{Dir, OpenOptions};

fn refuse(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, what)
}

/// Opens the directory holding `rel` under the project path rule ([`crate::store::project`]: no
/// `..`, nothing under `.git/` or `.bb7/`, every directory opened with `O_NOFOLLOW` from the one
/// before) and returns it with the file name; `Ok(None)` when a directory on the way does not exist.
fn parent<'a>(root: &Dir, rel: &'a str) -> io::Result<Option<(Dir, &'a str)>> {
    let parts = crate::store::project::check_rel(rel)?;
    match crate::store::project::parent_nofollow(root, parts, false) {
        Ok(found) => Ok(Some(found)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The content of project file `rel`, or `None` when it does not exist. A symbolic link anywhere on
/// the path, or anything but a regular file, is refused; so is a file over [`crate::store::MAX_READ`].
pub fn read(root: &Dir, rel: &str) -> io::Result<Option<Vec<u8>>> {
    let Some((dir, name)) = parent(root, rel)? else {
        return Ok(None);
    };
    match dir.symlink_metadata(name) {
        Ok(m) if m.file_type().is_symlink() => Err(refuse(format!("{rel} is a symbolic link"))),
        Ok(m) if m.is_file() => {
            use cap_std::fs::OpenOptionsExt;
            let mut opts = OpenOptions::new();
            opts.read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
            let f = dir.open_with(name, &opts)?;
            let meta = f.metadata()?;
            if !meta.is_file() {
                return Err(refuse(format!("{rel} is not a regular file")));
            }
            if meta.len() > crate::store::MAX_READ {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{rel} is larger than {} MiB", crate::store::MAX_READ >> 20),
                ));
            }
            let mut out = Vec::with_capacity(meta.len() as usize);
            use std::io::Read;
            f.into_std()
                .take(crate::store::MAX_READ)
                .read_to_end(&mut out)?;
            Ok(Some(out))
        }
        Ok(_) => Err(refuse(format!("{rel} is not a regular file"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes project file `rel` if it exists (never through a symbolic link).
pub fn remove(root: &Dir, rel: &str) -> io::Result<()> {
    let Some((dir, name)) = parent(root, rel)? else {
        return Ok(());
    };
    match dir.symlink_metadata(name) {
        Ok(m) if m.file_type().is_symlink() => Err(refuse(format!("{rel} is a symbolic link"))),
        Ok(m) if m.is_file() => {
            dir.remove_file(name)?;
            crate::store::sync_dir(&dir);
            Ok(())
        }
        Ok(_) => Err(refuse(format!("{rel} is not a regular file"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Hard-links project file `rel` as `dst_name` in `dst` when it is a regular file with no other
/// link (never through a symbolic link). Checkpoints use it to keep a file's content before it is
/// replaced without copying it: the project file is replaced by a rename, so the old inode, from
/// then on reachable only from the checkpoint, keeps that content.
pub fn link_into(root: &Dir, rel: &str, dst: &Dir, dst_name: &str) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some((dir, name)) = parent(root, rel)? else {
        return Err(io::Error::new(io::ErrorKind::NotFound, rel.to_string()));
    };
    use cap_std::fs::OpenOptionsExt;
    let mut opts = OpenOptions::new();
    opts.read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    let meta = dir.open_with(name, &opts)?.into_std().metadata()?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(refuse(format!("{rel} is not a singly linked regular file")));
    }
    dir.hard_link(name, dst, dst_name)
}
