//! `descriptor.open-at` and `descriptor.read` for reading files, without the work wasmtime-wasi
//! adds to each.
//!
//! A tool that reads a tree (`search_project` over 20,000 files) makes an `open-at`, a `read` and
//! a `drop` per file. wasmtime-wasi runs each of its filesystem calls through a tokio `block_on`
//! (`in_tokio`), opens through a general path resolver (`openat2` with `RESOLVE_BENEATH`, meant for
//! paths of many components) and zero-fills a fresh buffer of the size asked for on every `read`;
//! and its `read` reports the end of the file only on a read that returns nothing, so every small
//! file costs a second `read` call to find its end. The versions here:
//!
//! - **`open-at` of one name for reading** — a single path component (no `/`, not `.` or `..`),
//!   no `symlink-follow`, no `create`/`truncate`/`exclusive`, no write or sync flag — is opened by
//!   `names::open_name` (shared with `hostfiles.rs`): a directory is one
//!   `openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)`; otherwise the name is looked at
//!   first (`fstatat` without following links) and only a regular file is opened (`O_RDONLY |
//!   O_NOFOLLOW | O_NONBLOCK`, then `fstat`ed to check it is still the inode looked at). Anything
//!   else (a FIFO, a device, a socket) is not opened here but by wasmtime-wasi, as any guest asked.
//!   A single name relative to the
//!   directory's own descriptor, with no link followed, cannot reach outside that directory; the
//!   descriptor made is wasmtime-wasi's own (`Descriptor::File`/`Dir`, the parent's permissions,
//!   opened for reading), so every later call on it is wasmtime-wasi's. Every other `open-at` —
//!   any path of more than one name, `symlink-follow`, creation, writing — goes to wasmtime-wasi's
//!   implementation, after charging a `create` to the call's output budget as `hostcalls.rs` does.
//! - **`read`** fills as much of the requested length as the file holds (positioned reads until
//!   the length is reached or one returns nothing, into a buffer that is not zero-filled first),
//!   and says `end-of-file` when the file ended within it: a file smaller than the request is one
//!   call. At most [`MAX_READ`] bytes per call (wasmtime-wasi: 64 KiB).
//!
//! Errors are wasmtime-wasi's for the same failures (`error_code`).

use std::os::fd::AsFd;
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{
    Descriptor as FsDescriptor, Dir, File, FsPerms, OpenMode, WasiFilesystemView as _,
};
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{
    Descriptor, DescriptorFlags, ErrorCode, Host as _, HostDescriptor, OpenFlags, PathFlags,
};

use super::names::Opened;
use super::state::CallState;

/// The most one `read` returns.
pub const MAX_READ: u64 = 1 << 20;

/// Replaces `open-at` and `read` of `linker` (which already holds wasmtime-wasi's
/// `wasi:filesystem/types` and the metered `open-at` of `hostcalls.rs`) by the versions here.
pub fn shadow(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let r = define(linker);
    linker.allow_shadowing(false);
    r
}

fn define(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut types =
        linker.instance(&format!("wasi:filesystem/types@{}", super::hostcalls::WASI))?;
    types.func_wrap(
        "[method]descriptor.open-at",
        |mut cx: StoreContextMut<'_, CallState>,
         (fd, path_flags, path, oflags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            if let Some(fast) = ReadOpen::of(path_flags, &path, oflags, flags) {
                let table = cx.data_mut().table();
                let (dir, perms) = match table.get(&fd)? {
                    FsDescriptor::Dir(d) => (Arc::clone(&d.dir), d.perms),
                    FsDescriptor::File(_) => return Ok((Err(ErrorCode::NotDirectory),)),
                };
                match fast.open(&dir, perms) {
                    Ok(Some(opened)) => return Ok((Ok(table.push(opened)?),)),
                    Ok(None) => {}
                    Err(e) => return Ok((Err(e),)),
                }
            }
            // As `hostcalls.rs`'s `open-at`: a creation is charged to the output budget first.
            if oflags.contains(OpenFlags::CREATE)
                && let Some(budget) = cx.data().output_budget()
            {
                budget.entry()?;
            }
            let mut v = cx.data_mut().filesystem();
            Ok((
                match HostDescriptor::open_at(&mut v, fd, path_flags, path, oflags, flags) {
                    Ok(d) => Ok(d),
                    Err(e) => Err(v.convert_error_code(e)?),
                },
            ))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.read",
        |mut cx: StoreContextMut<'_, CallState>,
         (fd, len, offset): (Resource<Descriptor>, u64, u64)| {
            let file = match cx.data_mut().table().get(&fd)? {
                FsDescriptor::File(f) => Arc::clone(&f.file),
                // As wasmtime-wasi: reading a directory descriptor is a bad descriptor.
                FsDescriptor::Dir(_) => return Ok((Err(ErrorCode::BadDescriptor),)),
            };
            let deadline = cx.data().deadline();
            Ok((read_filled(&file, len, offset, deadline).map_err(error_code),))
        },
    )?;
    Ok(())
}

/// An `open-at` the fast path takes: one name, opened for reading (`directory`: it must be one).
#[derive(Debug, PartialEq, Eq)]
struct ReadOpen<'a> {
    name: &'a str,
    directory: bool,
}

impl<'a> ReadOpen<'a> {
    /// The fast open for these arguments, or `None` when wasmtime-wasi must handle them.
    fn of(
        path_flags: PathFlags,
        path: &'a str,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Option<ReadOpen<'a>> {
        if path_flags.contains(PathFlags::SYMLINK_FOLLOW)
            || !OpenFlags::DIRECTORY.contains(oflags)
            || !DescriptorFlags::READ.contains(flags)
        {
            return None;
        }
        Some(ReadOpen {
            // Not one name, or a NUL in it: wasmtime-wasi words that error.
            name: super::names::one_name(path)?,
            directory: oflags.contains(OpenFlags::DIRECTORY),
        })
    }

    /// Opens the name in `dir` (whose descriptor carries `perms`) without following a link, as
    /// wasmtime-wasi's descriptor: a directory or a regular file, opened for reading
    /// (`names::open_name`, shared with `hostfiles.rs`). `None` for anything else (a FIFO, a
    /// device, a socket), which is looked at, never opened, here: wasmtime-wasi opens those,
    /// blocking as it does.
    fn open(&self, dir: &std::fs::File, perms: FsPerms) -> Result<Option<FsDescriptor>, ErrorCode> {
        let opened = super::names::open_name(dir.as_fd(), self.name, self.directory)
            .map_err(|e| error_code(e.into()))?;
        // Every call's context allows blocking the current thread (`state.rs`), as each
        // descriptor wasmtime-wasi opens for it records.
        Ok(Some(match opened {
            Opened::Dir(fd) => FsDescriptor::Dir(Dir::new(
                std::fs::File::from(fd),
                perms,
                OpenMode::READ,
                true,
            )),
            Opened::File(fd, _) => FsDescriptor::File(File::new(
                std::fs::File::from(fd),
                perms,
                OpenMode::READ,
                true,
            )),
            Opened::Special(_) => return Ok(None),
        }))
    }
}

/// Reads up to `len` bytes (at most [`MAX_READ`]) of `file` from `offset`, reading on after a
/// short read; `true` with them when the file ended before `len` bytes.
/// A read interrupted by a signal (the watchdog's, for a call past its time) is retried until
/// `deadline`; past it the interruption is handed back, so the guest code runs again and is stopped
/// there.
fn read_filled(
    file: &std::fs::File,
    len: u64,
    offset: u64,
    deadline: std::time::Instant,
) -> std::io::Result<(Vec<u8>, bool)> {
    if len == 0 {
        // As wasmtime-wasi: a read of nothing reads nothing, which it reports as the end.
        return Ok((Vec::new(), true));
    }
    let want = usize::try_from(len.min(MAX_READ)).unwrap_or(0);
    let mut buf: Vec<u8> = Vec::with_capacity(want);
    while buf.len() < want {
        let at = offset.saturating_add(buf.len() as u64);
        let room = want - buf.len();
        let spare = &mut buf.spare_capacity_mut()[..room];
        match rustix::io::pread(file.as_fd(), spare, at).map(|(filled, _)| filled.len()) {
            Ok(0) => return Ok((buf, true)),
            Ok(n) => {
                // SAFETY: `pread` initialised the first `n` bytes of the spare capacity.
                unsafe { buf.set_len(buf.len() + n) };
            }
            Err(rustix::io::Errno::INTR) if std::time::Instant::now() < deadline => continue,
            // What was read stands; the next read meets the error again.
            Err(_) if !buf.is_empty() => return Ok((buf, false)),
            Err(e) => return Err(e.into()),
        }
    }
    Ok((buf, false))
}

/// The WASI error for `e`, as wasmtime-wasi words it.
fn error_code(e: std::io::Error) -> ErrorCode {
    wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode::from(e).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{FileType, Mode};
    use std::io::Write as _;

    /// A deadline no test reaches.
    fn far() -> std::time::Instant {
        std::time::Instant::now() + std::time::Duration::from_secs(3600)
    }

    fn read_open(path: &str, oflags: OpenFlags, flags: DescriptorFlags) -> Option<ReadOpen<'_>> {
        ReadOpen::of(PathFlags::empty(), path, oflags, flags)
    }

    /// Only a single name opened for reading takes the fast path; everything else (paths of
    /// several names, `..`, links followed, creation, writing) is wasmtime-wasi's.
    #[test]
    fn only_one_name_opened_for_reading_is_fast() {
        let r = DescriptorFlags::READ;
        assert!(read_open("a.rs", OpenFlags::empty(), r).is_some());
        assert!(read_open("dir", OpenFlags::DIRECTORY, r).is_some());
        assert!(read_open("a.rs", OpenFlags::empty(), DescriptorFlags::empty()).is_some());
        for p in ["", ".", "..", "a/b", "../x", "/etc", "a\0b"] {
            assert_eq!(read_open(p, OpenFlags::empty(), r), None, "{p:?}");
        }
        assert_eq!(read_open("a", OpenFlags::CREATE, r), None);
        assert_eq!(read_open("a", OpenFlags::TRUNCATE, r), None);
        assert_eq!(read_open("a", OpenFlags::EXCLUSIVE, r), None);
        assert_eq!(
            read_open("a", OpenFlags::empty(), r | DescriptorFlags::WRITE),
            None
        );
        assert_eq!(
            read_open(
                "a",
                OpenFlags::empty(),
                DescriptorFlags::FILE_INTEGRITY_SYNC
            ),
            None
        );
        assert_eq!(
            ReadOpen::of(PathFlags::SYMLINK_FOLLOW, "a", OpenFlags::empty(), r),
            None
        );
    }

    /// The fast open never follows a link (a link to a file or a directory outside is `loop`),
    /// tells directories from files, and refuses a file where a directory is required.
    #[test]
    fn the_fast_open_follows_no_link() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("f"), "x").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), d.join("l")).unwrap();
        std::os::unix::fs::symlink(outside.path(), d.join("ld")).unwrap();
        let dir = std::fs::File::open(d).unwrap();
        let open = |p: &str, o: OpenFlags| {
            read_open(p, o, DescriptorFlags::READ)
                .unwrap()
                .open(&dir, FsPerms::ReadOnly)
                .map(|d| d.expect("a file or a directory"))
        };
        assert!(matches!(
            open("f", OpenFlags::empty()),
            Ok(FsDescriptor::File(f)) if f.perms == FsPerms::ReadOnly && f.open_mode == OpenMode::READ
        ));
        assert!(matches!(
            open("sub", OpenFlags::empty()),
            Ok(FsDescriptor::Dir(_))
        ));
        assert!(matches!(
            open("sub", OpenFlags::DIRECTORY),
            Ok(FsDescriptor::Dir(_))
        ));
        assert!(matches!(
            open("f", OpenFlags::DIRECTORY),
            Err(ErrorCode::NotDirectory)
        ));
        assert!(matches!(
            open("l", OpenFlags::empty()),
            Err(ErrorCode::Loop)
        ));
        assert!(matches!(
            open("ld", OpenFlags::DIRECTORY),
            Err(ErrorCode::Loop)
        ));
        assert!(matches!(
            open("missing", OpenFlags::empty()),
            Err(ErrorCode::NoEntry)
        ));
    }

    /// A FIFO is left to wasmtime-wasi (whose open blocks until a writer comes, within the call's
    /// deadline): the fast open neither blocks on it nor opens it (it is looked at, not opened).
    #[test]
    fn a_fifo_is_left_to_wasmtime_wasi() {
        let t = tempfile::tempdir().unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            t.path().join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let fast = read_open("pipe", OpenFlags::empty(), DescriptorFlags::READ).unwrap();
        let opened = crate::sandbox::names::testing::opened_during(&t.path().join("pipe"), || {
            assert!(matches!(fast.open(&dir, FsPerms::ReadOnly), Ok(None)));
        });
        assert!(!opened, "the fast open opened the FIFO");
    }

    /// A read returns as much as was asked for (or the rest of the file) in one call, and says
    /// the file ended when it did within the request; a read at or past the end is empty and at
    /// the end.
    #[test]
    fn reads_fill_the_request_and_report_the_end() {
        let mut f = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data).unwrap();
        assert_eq!(
            read_filled(&f, 1000, 0, far()).unwrap(),
            (data[..1000].to_vec(), false)
        );
        assert_eq!(
            read_filled(&f, 400_000, 0, far()).unwrap(),
            (data.clone(), true),
            "all of it, and the end, in one call"
        );
        assert_eq!(
            read_filled(&f, 100_000, 200_000, far()).unwrap(),
            (data[200_000..].to_vec(), false),
            "exactly the rest: the end is not known yet"
        );
        assert_eq!(
            read_filled(&f, 10, 300_000, far()).unwrap(),
            (Vec::new(), true)
        );
        assert_eq!(
            read_filled(&f, 10, 1 << 40, far()).unwrap(),
            (Vec::new(), true)
        );
        assert_eq!(read_filled(&f, 0, 0, far()).unwrap(), (Vec::new(), true));
        let big = read_filled(&f, u64::MAX, 0, far()).unwrap();
        assert_eq!(big.0.len(), 300_000);
    }
}
