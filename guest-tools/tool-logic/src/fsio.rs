//! File reads and atomic writes inside a [`Root`].

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind as IoKind, Write};

use crate::error::{ErrorKind, ToolError};
use crate::paths::Root;

/// Reads `rel` (already normalised) as UTF-8 text. Binary (a NUL byte) and invalid UTF-8 are
/// refused with [`ErrorKind::NotText`].
pub fn read_text(root: &Root, rel: &str) -> Result<String, ToolError> {
    let bytes = fs::read(root.join(rel)).map_err(|e| ToolError::io(rel, &e))?;
    into_text(rel, bytes)
}

/// Checks that `bytes` are text and converts them.
pub fn into_text(rel: &str, bytes: Vec<u8>) -> Result<String, ToolError> {
    if looks_binary(&bytes) {
        return Err(ToolError::new(
            ErrorKind::NotText,
            format!("{rel} is a binary file"),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| ToolError::new(ErrorKind::NotText, format!("{rel} is not valid UTF-8 text")))
}

/// A file is treated as binary when its first 8 KiB contain a NUL byte (as git and grep do).
pub fn looks_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(8192)]).is_some()
}

/// Replaces (or creates) `rel` with `content` atomically: the bytes go to a fresh temporary file in
/// the same directory, which is then renamed over the target. A reader sees the old or the new file,
/// never a torn one, and a hard link planted at `rel` is replaced rather than written through.
/// Missing parent directories are created.
pub fn write_atomic(root: &Root, rel: &str, content: &[u8]) -> Result<(), ToolError> {
    let target = root.join(rel);
    let (dir_rel, name) = match rel.rfind('/') {
        Some(i) => (&rel[..i], &rel[i + 1..]),
        None => ("", rel),
    };
    if !dir_rel.is_empty() {
        fs::create_dir_all(root.join(dir_rel)).map_err(|e| ToolError::io(dir_rel, &e))?;
    }
    if let Ok(meta) = fs::symlink_metadata(&target) {
        if meta.is_dir() {
            return Err(ToolError::invalid(format!("{rel} is a directory")));
        }
    }
    // create_new never follows or reuses an existing entry, so a planted file or symlink at the
    // temporary name cannot redirect the write.
    let mut last_err = None;
    for n in 0..64u32 {
        let tmp_rel = if dir_rel.is_empty() {
            format!(".{name}.bb7-tmp{n}")
        } else {
            format!("{dir_rel}/.{name}.bb7-tmp{n}")
        };
        let tmp = root.join(&tmp_rel);
        let mut file = match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => f,
            Err(e) if e.kind() == IoKind::AlreadyExists => continue,
            Err(e) => return Err(ToolError::io(rel, &e)),
        };
        let written = file.write_all(content).and_then(|_| file.sync_all());
        drop(file);
        if let Err(e) = written.and_then(|_| fs::rename(&tmp, &target)) {
            let _ = fs::remove_file(&tmp);
            last_err = Some(e);
            break;
        }
        return Ok(());
    }
    Err(match last_err {
        Some(e) => ToolError::io(rel, &e),
        None => ToolError::new(
            ErrorKind::Io,
            format!("{rel}: could not create a temporary file"),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_hard_links_instead_of_writing_through() {
        let outside = tempfile::tempdir().unwrap();
        let grant = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, "keep").unwrap();
        fs::hard_link(&secret, grant.path().join("link")).unwrap();
        let root = Root::at(grant.path());
        write_atomic(&root, "link", b"new").unwrap();
        assert_eq!(fs::read_to_string(&secret).unwrap(), "keep");
        assert_eq!(
            fs::read_to_string(grant.path().join("link")).unwrap(),
            "new"
        );
        write_atomic(&root, "a/b/c.txt", b"x").unwrap();
        assert_eq!(
            fs::read_to_string(grant.path().join("a/b/c.txt")).unwrap(),
            "x"
        );
        let leftovers: Vec<_> = fs::read_dir(grant.path().join("a/b")).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }

    #[test]
    fn binary_and_invalid_utf8_are_refused() {
        assert_eq!(
            into_text("a", vec![b'a', 0, b'b']).unwrap_err().kind,
            ErrorKind::NotText
        );
        assert_eq!(
            into_text("a", vec![0xff, 0xfe]).unwrap_err().kind,
            ErrorKind::NotText
        );
        assert_eq!(into_text("a", b"ok".to_vec()).unwrap(), "ok");
    }
}
