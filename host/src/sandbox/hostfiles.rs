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
//! The name is opened as `names.rs` opens one name for every host call that takes one: a link in
//! its place is `loop`, never followed; a FIFO, device or socket is `invalid` and never read. The
//! built-in walk asks for a name only when its listing (or a look at it) reported a regular file, so the name is
//! opened directly (`names::open_listed_file`: read-only, `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`)
//! and `fstat`ed, without a look first; something swapped in since the listing is closed unread.
//! A regular file is read only when it holds at most `max` bytes, itself at most
//! [`MAX_FILE`]; the host never allocates more than that for a call. The listing is `names.rs`'s
//! too (types from the listing, links not followed), at most [`MAX_ENTRIES`] entries and
//! [`MAX_NAME_BYTES`] bytes of names: a larger directory is `overflow`, with nothing returned and
//! no more read than the caps. Both calls stop at the call's deadline, as the waits of
//! `hostcalls.rs` do: a call past it traps as a time-limit failure (checked before each call and
//! every 1,024 entries of a listing). Like wasmtime-wasi's `open-at` and `read-directory`, neither
//! checks the descriptor's permissions: every descriptor a call holds may be read.
//!
//! The host links this interface for its own built-in component only (`linking.rs`): a
//! third-party component importing it is refused at `add` (ECOSYSTEM-PROTOCOL.md §5).

use std::ops::ControlFlow;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, WasmStr};
use wasmtime_wasi::filesystem::Descriptor as FsDescriptor;
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{Descriptor, DirectoryEntry, ErrorCode};

use super::names::{self, Opened};
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
         (fd, name, max): (Resource<Descriptor>, WasmStr, u64)| {
            cx.data_mut().check_deadline()?;
            let dir = match dir_of(cx.data_mut(), &fd)? {
                Ok(dir) => dir,
                Err(e) => return Ok((Err(e),)),
            };
            let deadline = cx.data().deadline();
            // The name is read where it lies in the guest's memory, not copied.
            let name = name.to_str(&cx)?;
            match read_file_at(&dir, &name, max, deadline) {
                Ok(read) => Ok((Ok(read),)),
                Err(Stopped::Error(e)) => Ok((Err(e),)),
                Err(Stopped::Deadline) => {
                    drop(name);
                    Err(cx.data_mut().deadline_passed())
                }
            }
        },
    )?;
    files.func_wrap(
        "read-directory-entries",
        |mut cx: StoreContextMut<'_, CallState>, (fd,): (Resource<Descriptor>,)| {
            cx.data_mut().check_deadline()?;
            let dir = match dir_of(cx.data_mut(), &fd)? {
                Ok(dir) => dir,
                Err(e) => return Ok((Err(e),)),
            };
            let deadline = cx.data().deadline();
            match read_directory_entries(&dir, deadline) {
                Ok(entries) => Ok((Ok(entries),)),
                Err(Stopped::Error(e)) => Ok((Err(e),)),
                Err(Stopped::Deadline) => Err(cx.data_mut().deadline_passed()),
            }
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

/// See `read-file-at` in `wit/host-v0.1.0/host.wit`. Only a regular file is ever read
/// (`names::open_listed_file`): a FIFO, device or socket is refused unread.
/// A read interrupted by a signal (the watchdog's, for a call past its time) is retried until
/// `deadline`, then stops the call.
fn read_file_at(
    dir: &std::fs::File,
    name: &str,
    max: u64,
    deadline: Instant,
) -> Result<Option<Vec<u8>>, Stopped> {
    if max > MAX_FILE {
        return Err(Stopped::Error(ErrorCode::Invalid));
    }
    let name = names::one_name(name).ok_or(Stopped::Error(ErrorCode::Invalid))?;
    let opened = names::open_listed_file(dir.as_fd(), name);
    let (fd, size) = match opened.map_err(|e| Stopped::Error(error_code(e)))? {
        Opened::File(fd, size) => (fd, size),
        Opened::Dir(_) => return Err(Stopped::Error(ErrorCode::IsDirectory)),
        Opened::Special(_) => return Err(Stopped::Error(ErrorCode::Invalid)),
    };
    if size > max {
        return Ok(None);
    }
    read_capped(&fd, size, max, deadline)
}

/// Reads `fd` from its start: all of it when it holds at most `max` bytes (`size`, its length
/// when it was opened, sizes the buffer and the first read), `None` when it turns out to hold
/// more (a file that grew). A read that returns less than asked ends the file when the length
/// read is `size` (a regular file reads short only at its end); otherwise reads go on until one
/// returns nothing.
fn read_capped(
    fd: &OwnedFd,
    size: u64,
    max: u64,
    deadline: Instant,
) -> Result<Option<Vec<u8>>, Stopped> {
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
            Err(rustix::io::Errno::INTR) if Instant::now() < deadline => continue,
            Err(rustix::io::Errno::INTR) => return Err(Stopped::Deadline),
            Err(e) => return Err(Stopped::Error(error_code(e))),
        }
    }
    if buf.len() as u64 > max {
        return Ok(None);
    }
    Ok(Some(buf))
}

/// The most entries `read-directory-entries` returns: past it the call is `overflow` and returns
/// nothing (a component then lists the directory entry by entry through WASI's `read-directory`).
pub const MAX_ENTRIES: usize = 65_536;

/// The most bytes of names `read-directory-entries` returns (past it: `overflow`, as for
/// [`MAX_ENTRIES`]).
pub const MAX_NAME_BYTES: usize = 4 << 20;

/// How many entries are listed between two looks at the call's deadline.
const DEADLINE_EVERY: usize = 1024;

/// Why a listing stopped early.
#[derive(Debug, PartialEq, Eq)]
enum Stopped {
    /// The call's deadline passed.
    Deadline,
    /// An error, as WASI words it (`overflow` past the caps).
    Error(ErrorCode),
}

/// See `read-directory-entries` in `wit/host-v0.1.0/host.wit`: at most [`MAX_ENTRIES`] entries and
/// [`MAX_NAME_BYTES`] bytes of names (past either, `overflow`), listed until `deadline`.
fn read_directory_entries(
    dir: &std::fs::File,
    deadline: Instant,
) -> Result<Vec<DirectoryEntry>, Stopped> {
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let mut seen = 0usize;
    let mut stopped = None;
    names::each_entry(dir.as_fd(), |entry| {
        if seen.is_multiple_of(DEADLINE_EVERY) && Instant::now() >= deadline {
            stopped = Some(Stopped::Deadline);
            return ControlFlow::Break(());
        }
        seen += 1;
        // A name that is not UTF-8, or an entry that could not be looked at, is left out.
        let (Ok(name), Ok(file_type)) = (entry.name.to_str(), entry.file_type) else {
            return ControlFlow::Continue(());
        };
        bytes += name.len();
        if out.len() == MAX_ENTRIES || bytes > MAX_NAME_BYTES {
            stopped = Some(Stopped::Error(ErrorCode::Overflow));
            return ControlFlow::Break(());
        }
        out.push(DirectoryEntry {
            type_: super::readdir::descriptor_type(file_type),
            name: name.to_string(),
        });
        ControlFlow::Continue(())
    })
    .map_err(|e| Stopped::Error(error_code(e)))?;
    match stopped {
        Some(s) => Err(s),
        None => Ok(out),
    }
}

/// The WASI error for `e`, as wasmtime-wasi words it.
fn error_code(e: rustix::io::Errno) -> ErrorCode {
    wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode::from(std::io::Error::from(e)).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{FileType, Mode, OFlags};
    use std::time::Duration;
    use wasmtime_wasi::p2::bindings::sync::filesystem::types::DescriptorType;

    fn later() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

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
        assert_eq!(
            read_file_at(&d, "f", 100_000, later()),
            Ok(Some(data.clone()))
        );
        assert_eq!(read_file_at(&d, "f", MAX_FILE, later()), Ok(Some(data)));
        assert_eq!(read_file_at(&d, "f", 99_999, later()), Ok(None));
        assert_eq!(read_file_at(&d, "empty", 0, later()), Ok(Some(Vec::new())));
        assert_eq!(
            read_file_at(&d, "f", MAX_FILE + 1, later()),
            Err(Stopped::Error(ErrorCode::Invalid))
        );
        for name in ["", ".", "..", "a/f", "/f", "../f", "f\0"] {
            assert_eq!(
                read_file_at(&d, name, 10, later()),
                Err(Stopped::Error(ErrorCode::Invalid)),
                "{name:?}"
            );
        }
        assert_eq!(
            read_file_at(&d, "missing", 10, later()),
            Err(Stopped::Error(ErrorCode::NoEntry))
        );
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
            assert_eq!(
                read_file_at(&d, link, 10, later()),
                Err(Stopped::Error(ErrorCode::Loop)),
                "{link}"
            );
        }
        assert_eq!(
            read_file_at(&d, "sub", 10, later()),
            Err(Stopped::Error(ErrorCode::IsDirectory))
        );
        // Opened without waiting (`O_NONBLOCK`: no writer needed), refused unread.
        assert_eq!(
            read_file_at(&d, "pipe", 10, later()),
            Err(Stopped::Error(ErrorCode::Invalid))
        );
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
        assert_eq!(
            read_directory_entries(&path_only, later()).unwrap().len(),
            3
        );
        let mut got: Vec<(String, DescriptorType)> = read_directory_entries(&dir(p), later())
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

    /// A directory of more than [`MAX_ENTRIES`] entries is `overflow` (nothing returned); one of
    /// exactly that many is listed whole.
    #[test]
    fn read_directory_entries_is_capped() {
        let t = tempfile::tempdir().unwrap();
        let d = dir(t.path());
        for i in 0..MAX_ENTRIES {
            std::fs::File::create(t.path().join(format!("{i}"))).unwrap();
        }
        assert_eq!(
            read_directory_entries(&d, later()).unwrap().len(),
            MAX_ENTRIES
        );
        std::fs::File::create(t.path().join("one-more")).unwrap();
        assert_eq!(
            read_directory_entries(&d, later()).err(),
            Some(Stopped::Error(ErrorCode::Overflow))
        );
    }

    /// A listing stops at the call's deadline.
    #[test]
    fn read_directory_entries_stops_at_the_deadline() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        assert_eq!(
            read_directory_entries(&dir(t.path()), Instant::now()).err(),
            Some(Stopped::Deadline)
        );
    }

    /// A device node is refused unread: `invalid` (`/dev/zero`'s copy would fill the buffer).
    #[test]
    fn read_file_at_refuses_a_device_node() {
        let t = tempfile::tempdir().unwrap();
        if rustix::fs::mknodat(
            rustix::fs::CWD,
            t.path().join("zero"),
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o666),
            rustix::fs::makedev(1, 5),
        )
        .is_err()
        {
            return; // not root: no device node can be made
        }
        assert_eq!(
            read_file_at(&dir(t.path()), "zero", 10, later()),
            Err(Stopped::Error(ErrorCode::Invalid))
        );
    }
}
