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

/// Reads a whole file of expected size `hint` with positioned reads: `pread(spare, offset)` fills
/// (part of) the uninitialised `spare` from `offset` and returns how many bytes it wrote, 0 at the
/// end. The buffer is reserved once for exactly `hint` bytes plus one (so the read that finds the
/// end needs no larger buffer) and is never zero-filled; only a file that grew past `hint` makes it
/// grow. Interrupted reads are retried.
#[cfg_attr(not(target_os = "wasi"), allow(dead_code))]
fn read_to_end_at(
    hint: usize,
    mut pread: impl FnMut(&mut [std::mem::MaybeUninit<u8>], u64) -> std::io::Result<usize>,
) -> std::io::Result<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::with_capacity(hint.saturating_add(1));
    loop {
        if buf.len() == buf.capacity() {
            buf.reserve(buf.capacity().max(4096));
        }
        let len = buf.len();
        let spare = buf.spare_capacity_mut();
        let room = spare.len();
        let n = match pread(spare, len as u64) {
            Ok(n) => n.min(room),
            Err(e) if e.kind() == IoKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(buf);
        }
        // SAFETY: `pread` initialised the first `n` spare bytes (`n <= room`).
        unsafe { buf.set_len(len + n) };
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

    /// Reads all of `f`, whose size is expected to be `hint` bytes (see [`super::read_to_end_at`]).
    pub fn read_all(f: &File, hint: usize) -> io::Result<Vec<u8>> {
        let fd = f.as_raw_fd();
        super::read_to_end_at(hint, |spare, offset| {
            // SAFETY: `spare` is valid for writes of `spare.len()` bytes for the call; `pread`
            // writes at most that many and returns how many it wrote.
            let n = unsafe { pread(fd, spare.as_mut_ptr().cast(), spare.len(), offset as i64) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        })
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
    // Most files are ASCII: one vector pass proves them UTF-8 (inside the component several
    // times faster than the general check, which reads 4-byte words there).
    if crate::edit::scan::is_ascii(&bytes) {
        // SAFETY: every byte is ASCII, and ASCII is valid UTF-8.
        return Ok(unsafe { String::from_utf8_unchecked(bytes) });
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

    /// The whole-file read reserves the file's size plus one byte once: no zero-filled buffer
    /// grown by doubling (a 1 MiB file used to take a 2 MiB buffer, copied into at exactly full),
    /// and two reads (the data, then the end).
    #[test]
    fn a_whole_file_read_reserves_its_size_once() {
        let file: Vec<u8> = (0..(1usize << 20) + 7).map(|i| (i % 251) as u8).collect();
        let mut reads = 0;
        let got = read_to_end_at(file.len(), |spare, offset| {
            reads += 1;
            let rest = &file[(offset as usize).min(file.len())..];
            let n = rest.len().min(spare.len()).min(300 << 10);
            for (d, s) in spare.iter_mut().zip(&rest[..n]) {
                d.write(*s);
            }
            Ok(n)
        })
        .unwrap();
        assert_eq!(got, file);
        assert_eq!(got.capacity(), file.len() + 1, "reserved exactly once");
        assert_eq!(reads, 5, "four reads of at most 300 KiB, then the end");
        // A file that grew past its size still reads whole; an interrupted read is retried.
        let (mut calls, grown) = (0, vec![7u8; 10_000]);
        let got = read_to_end_at(100, |spare, offset| {
            calls += 1;
            if calls == 1 {
                return Err(std::io::Error::from(IoKind::Interrupted));
            }
            let rest = &grown[offset as usize..];
            let n = rest.len().min(spare.len());
            for (d, s) in spare.iter_mut().zip(&rest[..n]) {
                d.write(*s);
            }
            Ok(n)
        })
        .unwrap();
        assert_eq!(got, grown);
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
