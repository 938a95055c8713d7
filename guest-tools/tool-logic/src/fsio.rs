//! File reads and atomic writes inside a [`Root`].

use std::fs::{self, OpenOptions};
use std::io::ErrorKind as IoKind;

use crate::error::{ErrorKind, ToolError};
use crate::paths::Root;

/// Reads `rel` (already normalised) as UTF-8 text. Binary (a NUL byte) and invalid UTF-8 are
/// refused with [`ErrorKind::NotText`].
pub fn read_text(root: &Root, rel: &str) -> Result<String, ToolError> {
    let bytes = read_file(&root.join(rel)).map_err(|e| ToolError::io(rel, &e))?;
    into_text(rel, bytes)
}

/// Reads a whole file. Inside the component this is one positioned read per call (`pread`, WASI
/// `descriptor.read`) instead of std's stream reads, each of which is a host round trip of at most
/// 64 KiB.
fn read_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    #[cfg(target_os = "wasi")]
    {
        let f = fs::File::open(path)?;
        let len = f.metadata().map(|m| m.len() as usize).unwrap_or(0);
        wasi_io::read_all(&f, len)
    }
    #[cfg(not(target_os = "wasi"))]
    {
        fs::read(path)
    }
}

/// Writes all of `data` to `file` (at the start: the file is fresh). Inside the component one
/// positioned write (`pwrite`, WASI `descriptor.write`) instead of stream writes of 4 KiB each.
fn write_file(file: &mut fs::File, data: &[u8]) -> std::io::Result<()> {
    #[cfg(target_os = "wasi")]
    {
        wasi_io::write_all(file, data)
    }
    #[cfg(not(target_os = "wasi"))]
    {
        std::io::Write::write_all(file, data)
    }
}

/// Positioned reads and writes through wasi-libc (`pread`/`pwrite` map to WASI p2's
/// `descriptor.read`/`descriptor.write`, one host call for the whole buffer).
#[cfg(target_os = "wasi")]
mod wasi_io {
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;

    unsafe extern "C" {
        fn pread(fd: i32, buf: *mut u8, n: usize, off: i64) -> isize;
        fn pwrite(fd: i32, buf: *const u8, n: usize, off: i64) -> isize;
    }

    pub fn read_all(f: &File, hint: usize) -> io::Result<Vec<u8>> {
        let fd = f.as_raw_fd();
        let mut buf: Vec<u8> = vec![0; hint.max(4096)];
        let mut len = 0usize;
        loop {
            if len == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let spare = &mut buf[len..];
            // SAFETY: `spare` is a valid, writable buffer of `spare.len()` bytes for the call.
            let n = unsafe { pread(fd, spare.as_mut_ptr(), spare.len(), len as i64) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                buf.truncate(len);
                return Ok(buf);
            }
            len += n as usize;
        }
    }

    pub fn write_all(f: &File, data: &[u8]) -> io::Result<()> {
        let fd = f.as_raw_fd();
        let mut done = 0usize;
        while done < data.len() {
            let rest = &data[done..];
            // SAFETY: `rest` is a valid, readable buffer of `rest.len()` bytes for the call.
            let n = unsafe { pwrite(fd, rest.as_ptr(), rest.len(), done as i64) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "pwrite wrote nothing",
                ));
            }
            done += n as usize;
        }
        Ok(())
    }
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
        let written = write_file(&mut file, content).and_then(|_| file.sync_all());
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
