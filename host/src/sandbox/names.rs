//! One name in a directory a call holds, opened or listed the same way by every host call that
//! takes one: `bb7:host/files` (`hostfiles.rs`), the `read-directory` shadow (`readdir.rs`) and
//! the one-name `open-at` shadow (`fileread.rs`), so that their refusals cannot drift apart.
//!
//! - [`open_name`] never opens anything but a directory or a regular file. A directory is opened
//!   with `O_DIRECTORY | O_NOFOLLOW` (the kernel refuses anything that is not a directory before
//!   opening it: `ENOTDIR`, and `ELOOP` for a link, as everywhere here). Otherwise the name is first looked at without
//!   opening it (`fstatat` with `AT_SYMLINK_NOFOLLOW`): a link is `ELOOP`, a FIFO, device or
//!   socket is reported as [`Opened::Special`] and never opened (the open of some devices has side
//!   effects, and a FIFO's can block); only a regular file is then opened, read-only,
//!   `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`, and `fstat`ed: if the name now leads to another inode
//!   (it was swapped between the look and the open) the descriptor is closed unread and the open
//!   fails with `EAGAIN`. What is read is therefore always the regular file that was looked at.
//! - [`open_listed_file`] is for a name a listing of the same directory just reported as a
//!   regular file (`read-file-at`: the built-in walk calls it only for a name its listing typed,
//!   or that it looked at first, as a regular file): it skips the look
//!   (one path lookup per file fewer: `search_project` reads every file of a tree this way) and
//!   opens the name directly with the same flags, then `fstat`s it. A FIFO, device or socket put
//!   in its place since the listing is then opened — `O_NONBLOCK`, so a FIFO's open never waits,
//!   and `O_NOCTTY` — but closed unread and reported as [`Opened::Special`]; a link is `ELOOP`;
//!   a directory is reported as one, unread.
//! - [`each_entry`] lists a directory with `getdents64` on the directory's own descriptor (rewound
//!   first; no second descriptor of it), taking each entry's type from the listing and looking
//!   (without following a link) only at an entry whose type the file system does not report. A
//!   preopened directory is held `O_PATH`, which cannot be listed: only then is `.` opened
//!   relative to it for reading.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, SeekFrom};
use rustix::io::Errno;

/// `name` if it is a single name of a directory: not empty, not `.` or `..`, no `/`, no NUL;
/// `None` for anything else. (Names are passed to the kernel as they are: rustix copies a short one
/// into a buffer on the stack, so no call here allocates for it.)
pub fn one_name(name: &str) -> Option<&str> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return None;
    }
    Some(name)
}

/// What [`open_name`] found.
#[derive(Debug)]
pub enum Opened {
    /// A regular file, opened for reading, and its size when it was opened.
    File(OwnedFd, u64),
    /// A directory, opened for reading.
    Dir(OwnedFd),
    /// A FIFO, a device or a socket: never opened.
    Special(FileType),
}

/// The flags a regular file is opened with for reading.
const FILE_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// The flags a directory is opened with for reading (and listing).
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens `name`, one name of `dir` (checked by [`one_name`]), for reading without following a link
/// (see the module docs): only a directory when `directory` (anything else is `ENOTDIR`, a link
/// `ELOOP`).
pub fn open_name(dir: BorrowedFd<'_>, name: &str, directory: bool) -> Result<Opened, Errno> {
    open_name_checked(dir, name, directory, || {})
}

/// Opens `name`, one name of `dir` (checked by [`one_name`]) that a listing of `dir` reported as
/// a regular file, for reading, without the look [`open_name`] makes first (see the module docs):
/// what is not a regular file by now is closed unread (`Special`, or `Dir`).
pub fn open_listed_file(dir: BorrowedFd<'_>, name: &str) -> Result<Opened, Errno> {
    let fd = rustix::fs::openat(dir, name, FILE_FLAGS, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    Ok(match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Opened::File(fd, u64::try_from(st.st_size).unwrap_or(0)),
        FileType::Directory => Opened::Dir(fd),
        other => Opened::Special(other),
    })
}

/// [`open_name`], running `between` after the name was looked at and before it is opened (tests
/// swap the name there).
fn open_name_checked(
    dir: BorrowedFd<'_>,
    name: &str,
    directory: bool,
    between: impl FnOnce(),
) -> Result<Opened, Errno> {
    if directory {
        return match rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(Opened::Dir(fd)),
            // The kernel checks `O_DIRECTORY` before it refuses a link: a link is `ELOOP`, as for
            // any other open here.
            Err(Errno::NOTDIR) => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    Err(Errno::LOOP)
                }
                _ => Err(Errno::NOTDIR),
            },
            Err(e) => Err(e),
        };
    }
    let seen = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    match FileType::from_raw_mode(seen.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => {
            return rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()).map(Opened::Dir);
        }
        FileType::Symlink => return Err(Errno::LOOP),
        other => return Ok(Opened::Special(other)),
    }
    between();
    let fd = rustix::fs::openat(dir, name, FILE_FLAGS, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    if st.st_ino != seen.st_ino
        || st.st_dev != seen.st_dev
        || FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
    {
        // Swapped between the look and the open: closed unread.
        return Err(Errno::AGAIN);
    }
    Ok(Opened::File(fd, u64::try_from(st.st_size).unwrap_or(0)))
}

/// One directory entry as [`each_entry`] hands it out: its name (never `.` or `..`) and its own
/// type (a link is a link), or the error looking at it gave.
pub struct Entry<'a> {
    /// The entry's name as the file system stores it (not necessarily UTF-8).
    pub name: &'a CStr,
    /// Its type, from the listing or, when the file system does not say, from a look at it that
    /// follows no link.
    pub file_type: Result<FileType, Errno>,
}

/// The size of the buffer each `getdents64` fills.
const LISTING_BUFFER: usize = 32 * 1024;

/// Calls `f` with every entry of directory `dir` in the order the file system lists them, until it
/// breaks (see the module docs). An entry that vanishes while its type is looked at is left out.
pub fn each_entry(
    dir: BorrowedFd<'_>,
    mut f: impl FnMut(Entry<'_>) -> ControlFlow<()>,
) -> Result<(), Errno> {
    let reopened;
    let fd = match rustix::fs::seek(dir, SeekFrom::Start(0)) {
        Ok(_) => dir,
        // An `O_PATH` descriptor (a preopen): a descriptor that can be listed.
        Err(Errno::BADF) => {
            reopened = rustix::fs::openat(dir, c".", DIR_FLAGS, Mode::empty())?;
            reopened.as_fd()
        }
        Err(e) => return Err(e),
    };
    let mut buf = vec![MaybeUninit::<u8>::uninit(); LISTING_BUFFER];
    let mut entries = RawDir::new(fd, &mut buf);
    while let Some(entry) = entries.next() {
        let entry = entry?;
        let name = entry.file_name();
        let raw = name.to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        let file_type = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => Ok(FileType::from_raw_mode(st.st_mode)),
                Err(Errno::NOENT) => continue,
                Err(e) => Err(e),
            },
            t => Ok(t),
        };
        if f(Entry { name, file_type }).is_break() {
            break;
        }
    }
    Ok(())
}

/// Test helpers.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
    use rustix::io::Errno;

    /// Whether anything opened `path` (not `O_PATH`, not a `stat`) while `f` ran: an inotify
    /// `IN_OPEN` event on its inode.
    pub fn opened_during(path: &Path, f: impl FnOnce()) -> bool {
        let watch = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&watch, path, WatchFlags::OPEN).unwrap();
        f();
        let mut buf = [0u8; 4096];
        match rustix::io::read(&watch, &mut buf) {
            Ok(n) => n > 0,
            Err(Errno::AGAIN) => false,
            Err(e) => panic!("reading inotify events: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::opened_during;
    use super::*;

    fn list(dir: BorrowedFd<'_>) -> Vec<(String, FileType)> {
        let mut got = Vec::new();
        each_entry(dir, |e| {
            got.push((e.name.to_string_lossy().into_owned(), e.file_type.unwrap()));
            ControlFlow::Continue(())
        })
        .unwrap();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        got
    }

    /// A preopen (`O_PATH`) and a directory opened for reading list the same, and listing the same
    /// descriptor twice lists everything twice (it is rewound).
    #[test]
    fn a_directory_lists_through_a_path_descriptor_and_twice_through_the_same_one() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        std::os::unix::fs::symlink("f", t.path().join("l")).unwrap();
        let want = vec![
            ("d".to_string(), FileType::Directory),
            ("f".to_string(), FileType::RegularFile),
            ("l".to_string(), FileType::Symlink),
        ];
        let path_only =
            rustix::fs::open(t.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        assert_eq!(list(path_only.as_fd()), want);
        let read = rustix::fs::open(t.path(), DIR_FLAGS, Mode::empty()).unwrap();
        assert_eq!(list(read.as_fd()), want);
        assert_eq!(list(read.as_fd()), want);
    }

    /// A device node is looked at, never opened: opened, `/dev/null` would succeed; here the
    /// answer is `Special` (and `ENOTDIR` for a directory open). A FIFO likewise, a link is
    /// `ELOOP`, a file and a directory open.
    #[test]
    fn only_regular_files_and_directories_are_opened() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::write(p.join("f"), "x").unwrap();
        std::fs::create_dir(p.join("d")).unwrap();
        std::os::unix::fs::symlink("f", p.join("l")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p.join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let dir = rustix::fs::open(p, DIR_FLAGS, Mode::empty()).unwrap();
        let open = |n: &str, d| open_name(dir.as_fd(), n, d);
        // The control: the helper sees an open of the FIFO.
        assert!(opened_during(&p.join("pipe"), || {
            drop(rustix::fs::open(
                p.join("pipe"),
                OFlags::RDONLY | OFlags::NONBLOCK,
                Mode::empty(),
            ))
        }));
        assert!(!opened_during(&p.join("pipe"), || {
            assert!(matches!(
                open("pipe", false),
                Ok(Opened::Special(FileType::Fifo))
            ));
            assert!(matches!(open("pipe", true), Err(Errno::NOTDIR)));
        }));
        assert!(matches!(open("f", false), Ok(Opened::File(..))));
        assert!(matches!(open("d", false), Ok(Opened::Dir(_))));
        assert!(matches!(open("d", true), Ok(Opened::Dir(_))));
        assert!(matches!(open("l", false), Err(Errno::LOOP)));
        assert!(matches!(open("l", true), Err(Errno::LOOP)));
        assert!(matches!(
            open("pipe", false),
            Ok(Opened::Special(FileType::Fifo))
        ));
        assert!(matches!(open("pipe", true), Err(Errno::NOTDIR)));
        assert!(matches!(open("f", true), Err(Errno::NOTDIR)));
        // A character device (needs root to make; skipped otherwise).
        if rustix::fs::mknodat(
            rustix::fs::CWD,
            p.join("null"),
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o666),
            rustix::fs::makedev(1, 3),
        )
        .is_ok()
        {
            assert!(!opened_during(&p.join("null"), || {
                assert!(matches!(
                    open("null", false),
                    Ok(Opened::Special(FileType::CharacterDevice))
                ));
                assert!(matches!(open("null", true), Err(Errno::NOTDIR)));
            }));
        }
    }

    /// A regular file swapped for another file, a FIFO or a link between the look and the open is
    /// not read: the open fails (`EAGAIN`, or `ELOOP` for the link), never handing out the new one.
    #[test]
    fn a_name_swapped_between_the_look_and_the_open_is_not_read() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().to_path_buf();
        let dir = rustix::fs::open(&p, DIR_FLAGS, Mode::empty()).unwrap();
        for (i, swap_in) in ["file", "fifo", "link"].into_iter().enumerate() {
            let victim = p.join(format!("v{i}"));
            std::fs::write(&victim, "inside").unwrap();
            let name = format!("v{i}");
            // Made beside it, then renamed over it: the new inode never reuses the old number.
            let next = p.join(format!("next{i}"));
            let got = open_name_checked(dir.as_fd(), &name, false, || {
                match swap_in {
                    "file" => std::fs::write(&next, "swapped").unwrap(),
                    "fifo" => rustix::fs::mknodat(
                        rustix::fs::CWD,
                        &next,
                        FileType::Fifo,
                        Mode::from_raw_mode(0o600),
                        0,
                    )
                    .unwrap(),
                    _ => std::os::unix::fs::symlink("/etc/passwd", &next).unwrap(),
                }
                std::fs::rename(&next, &victim).unwrap();
            });
            let want = if swap_in == "link" {
                Errno::LOOP
            } else {
                Errno::AGAIN
            };
            assert!(matches!(got, Err(e) if e == want), "{swap_in}: {got:?}");
        }
    }

    /// A name the listing called a regular file is opened directly; whatever is there by then
    /// that is not a regular file is handed back unread: a FIFO (its open does not wait for a
    /// writer), a directory, a link (`ELOOP`, not followed).
    #[test]
    fn a_listed_file_is_opened_directly_and_anything_else_comes_back_unread() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::write(p.join("f"), "xyz").unwrap();
        std::fs::create_dir(p.join("d")).unwrap();
        std::os::unix::fs::symlink("f", p.join("l")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            p.join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let dir = rustix::fs::open(p, DIR_FLAGS, Mode::empty()).unwrap();
        let open = |n: &str| open_listed_file(dir.as_fd(), n);
        assert!(matches!(open("f"), Ok(Opened::File(_, 3))));
        assert!(matches!(open("d"), Ok(Opened::Dir(_))));
        assert!(matches!(open("l"), Err(Errno::LOOP)));
        assert!(matches!(open("pipe"), Ok(Opened::Special(FileType::Fifo))));
        assert!(matches!(open("missing"), Err(Errno::NOENT)));
    }

    #[test]
    fn one_name_refuses_paths() {
        for bad in ["", ".", "..", "a/b", "/a", "../a", "a\0"] {
            assert!(one_name(bad).is_none(), "{bad:?}");
        }
        assert!(one_name("a.txt").is_some());
    }
}
