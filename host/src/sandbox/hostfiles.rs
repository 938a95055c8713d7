//! `bb7:host/files@0.1.0` (`wit/host-v0.1.0`): a whole small file, or a whole directory listing,
//! in one host call.
//!
//! A tool that reads a tree (`search_project` over 20,000 files) pays per file for crossing the
//! sandbox boundary more than for the system calls: through WASI a file is an `open-at`, a `read`
//! and the descriptor's drop (three crossings, a resource-table entry, a descriptor wasmtime-wasi
//! wraps), and a directory one `read-directory-entry` per entry. Here a file is one call and a
//! directory one call.
//!
//! No capability is added. Both calls take a directory descriptor the component already holds
//! (looked up in the call's own resource table, so a component can only name its own grant or a
//! directory it opened below it) and at most one name in it: not empty, not `.`/`..`, no `/`.
//! The file is opened relative to that descriptor with `O_NOFOLLOW` (a link in its place is
//! `loop`, never followed), `O_NONBLOCK` (a FIFO's open does not wait for a writer; a FIFO or
//! device is then refused without being read), read-only, and `fstat`ed: only a regular file is
//! read, and only when it holds at most `max` bytes, itself at most [`MAX_FILE`]; the host never
//! allocates more than that for a call. What is read is what `open-at` without `symlink-follow`
//! and `read` would give; the listing is `readdir.rs`'s (types from the listing, links not
//! followed). Like wasmtime-wasi's `open-at` and `read-directory`, neither checks the
//! descriptor's permissions: every descriptor a call holds may be read.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::Descriptor as FsDescriptor;
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{Descriptor, DirectoryEntry, ErrorCode};

use super::state::CallState;

/// The interface's name, as components import it.
pub const INTERFACE: &str = "bb7:host/files@0.1.0";

/// The largest `max` `read-file-at` takes (4 MiB).
pub const MAX_FILE: u64 = 4 << 20;

/// Adds `bb7:host/files` to `linker` (which already holds `wasi:filesystem/types`, whose
/// `descriptor` the calls borrow).
pub fn add(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut files = linker.instance(INTERFACE)?;
    files.func_wrap(
        "read-file-at",
        |mut cx: StoreContextMut<'_, CallState>,
         (fd, name, max): (Resource<Descriptor>, String, u64)| {
            let dir = match dir_of(cx.data_mut(), &fd)? {
                Ok(dir) => dir,
                Err(e) => return Ok((Err(e),)),
            };
            Ok((read_file_at(&dir, &name, max),))
        },
    )?;
    files.func_wrap(
        "read-directory-entries",
        |mut cx: StoreContextMut<'_, CallState>, (fd,): (Resource<Descriptor>,)| {
            let dir = match dir_of(cx.data_mut(), &fd)? {
                Ok(dir) => dir,
                Err(e) => return Ok((Err(e),)),
            };
            Ok((read_directory_entries(&dir),))
        },
    )?;
    Ok(())
}

/// The open directory behind descriptor `fd` of this call (`not-directory` for a file; a handle
/// that is not the call's own is a trap, as for any WASI call).
fn dir_of(
    state: &mut CallState,
    fd: &Resource<Descriptor>,
) -> wasmtime::Result<Result<Arc<std::fs::File>, ErrorCode>> {
    Ok(match state.table().get(fd)? {
        FsDescriptor::Dir(d) => Ok(Arc::clone(&d.dir)),
        FsDescriptor::File(_) => Err(ErrorCode::NotDirectory),
    })
}

/// `name` as one name of a directory, or `invalid`.
fn one_name(name: &str) -> Result<CString, ErrorCode> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(ErrorCode::Invalid);
    }
    CString::new(name).map_err(|_| ErrorCode::Invalid)
}

/// See `read-file-at` in `wit/host-v0.1.0/host.wit`.
fn read_file_at(dir: &std::fs::File, name: &str, max: u64) -> Result<Option<Vec<u8>>, ErrorCode> {
    if max > MAX_FILE {
        return Err(ErrorCode::Invalid);
    }
    let name = one_name(name)?;
    let fd: OwnedFd = rustix::fs::openat(
        dir.as_fd(),
        name.as_c_str(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(error_code)?;
    let st = rustix::fs::fstat(&fd).map_err(error_code)?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(ErrorCode::IsDirectory),
        _ => return Err(ErrorCode::Invalid),
    }
    let size = u64::try_from(st.st_size).unwrap_or(0);
    if size > max {
        return Ok(None);
    }
    read_capped(&fd, size, max)
}

/// Reads `fd` from its start: all of it when it holds at most `max` bytes (`size`, its length
/// when it was opened, sizes the buffer and the first read), `None` when it turns out to hold
/// more (a file that grew). A read that returns less than asked ends the file when the length
/// read is `size` (a regular file reads short only at its end); otherwise reads go on until one
/// returns nothing.
fn read_capped(fd: &OwnedFd, size: u64, max: u64) -> Result<Option<Vec<u8>>, ErrorCode> {
    // One byte more than the file held, to see whether it grew, up to `max + 1`.
    let limit = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
    let first = usize::try_from(size.saturating_add(1))
        .unwrap_or(usize::MAX)
        .min(limit);
    let mut buf: Vec<u8> = Vec::with_capacity(first);
    loop {
        if buf.len() == buf.capacity() {
            if buf.len() >= limit {
                return Ok(None);
            }
            let more = buf.len().max(4096).min(limit - buf.len());
            buf.reserve_exact(more);
        }
        let room = buf.capacity().min(limit) - buf.len();
        let at = buf.len() as u64;
        let spare = &mut buf.spare_capacity_mut()[..room];
        match rustix::io::pread(fd, spare, at).map(|(filled, _)| filled.len()) {
            Ok(0) => break,
            Ok(n) => {
                // SAFETY: `pread` initialised the first `n` bytes of the spare capacity.
                unsafe { buf.set_len(buf.len() + n) };
                if n < room && buf.len() as u64 == size {
                    break;
                }
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(error_code(e)),
        }
    }
    if buf.len() as u64 > max {
        return Ok(None);
    }
    Ok(Some(buf))
}

/// See `read-directory-entries` in `wit/host-v0.1.0/host.wit`.
fn read_directory_entries(dir: &std::fs::File) -> Result<Vec<DirectoryEntry>, ErrorCode> {
    // Its own descriptor of the directory, opened for reading: `dir` may be a preopen, opened
    // `O_PATH` (which cannot be listed), and a listing moves the descriptor's position.
    let fd = rustix::fs::openat(
        dir.as_fd(),
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(error_code)?;
    let mut entries = rustix::fs::Dir::new(fd).map_err(error_code)?;
    let mut out = Vec::new();
    while let Some(entry) = entries.read() {
        let entry = entry.map_err(error_code)?;
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(raw) else {
            continue;
        };
        let file_type = match entry.file_type() {
            FileType::Unknown => {
                match rustix::fs::statat(dir.as_fd(), entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                {
                    Ok(st) => FileType::from_raw_mode(st.st_mode),
                    Err(_) => continue,
                }
            }
            t => t,
        };
        out.push(DirectoryEntry {
            type_: super::readdir::descriptor_type(file_type),
            name: name.to_string(),
        });
    }
    Ok(out)
}

/// The WASI error for `e`, as wasmtime-wasi words it.
fn error_code(e: rustix::io::Errno) -> ErrorCode {
    wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode::from(std::io::Error::from(e)).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_wasi::p2::bindings::sync::filesystem::types::DescriptorType;

    fn dir(p: &std::path::Path) -> std::fs::File {
        std::fs::File::open(p).unwrap()
    }

    /// A file is read whole when it holds at most `max` bytes, and not at all when it holds more;
    /// `max` over the limit, and anything but one name, are `invalid`.
    #[test]
    fn read_file_at_reads_whole_files_within_max() {
        let t = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(t.path().join("f"), &data).unwrap();
        std::fs::write(t.path().join("empty"), b"").unwrap();
        let d = dir(t.path());
        assert_eq!(read_file_at(&d, "f", 100_000), Ok(Some(data.clone())));
        assert_eq!(read_file_at(&d, "f", MAX_FILE), Ok(Some(data)));
        assert_eq!(read_file_at(&d, "f", 99_999), Ok(None));
        assert_eq!(read_file_at(&d, "empty", 0), Ok(Some(Vec::new())));
        assert_eq!(read_file_at(&d, "f", MAX_FILE + 1), Err(ErrorCode::Invalid));
        for name in ["", ".", "..", "a/f", "/f", "../f", "f\0"] {
            assert_eq!(
                read_file_at(&d, name, 10),
                Err(ErrorCode::Invalid),
                "{name:?}"
            );
        }
        assert_eq!(read_file_at(&d, "missing", 10), Err(ErrorCode::NoEntry));
    }

    /// No link is followed (to a file or directory, dangling), a directory is `is-directory`, and
    /// a FIFO is refused at once (its open does not wait for a writer).
    #[test]
    fn read_file_at_follows_no_link_and_reads_only_regular_files() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::create_dir(p.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), p.join("l")).unwrap();
        std::os::unix::fs::symlink(outside.path(), p.join("ld")).unwrap();
        std::os::unix::fs::symlink(p.join("missing"), p.join("dangling")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p.join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let d = dir(p);
        for link in ["l", "ld", "dangling"] {
            assert_eq!(read_file_at(&d, link, 10), Err(ErrorCode::Loop), "{link}");
        }
        assert_eq!(read_file_at(&d, "sub", 10), Err(ErrorCode::IsDirectory));
        assert_eq!(read_file_at(&d, "pipe", 10), Err(ErrorCode::Invalid));
    }

    /// A listing gives each entry's own type (a link is a link), without `.`/`..`, and leaves out
    /// a name that is not UTF-8.
    #[test]
    fn read_directory_entries_lists_own_types() {
        use std::os::unix::ffi::OsStrExt;
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::write(p.join("file"), "x").unwrap();
        std::fs::create_dir(p.join("dir")).unwrap();
        std::os::unix::fs::symlink(p.join("dir"), p.join("link")).unwrap();
        std::fs::write(p.join(std::ffi::OsStr::from_bytes(b"bad\xff")), "").unwrap();
        // A preopen is an `O_PATH` descriptor: it is listed too.
        let path_only = std::fs::File::from(
            rustix::fs::open(p, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap(),
        );
        assert_eq!(read_directory_entries(&path_only).unwrap().len(), 3);
        let mut got: Vec<(String, DescriptorType)> = read_directory_entries(&dir(p))
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.type_))
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["dir", "file", "link"]);
        assert!(matches!(
            got.iter().map(|(_, t)| *t).collect::<Vec<_>>()[..],
            [
                DescriptorType::Directory,
                DescriptorType::RegularFile,
                DescriptorType::SymbolicLink
            ]
        ));
    }
}
