//! The filesystem calls a walk makes — list a directory, look at one entry, read a file — made
//! through directory handles opened **one component at a time without following any symbolic
//! link**, and as cheaply as the sandbox allows.
//!
//! Why handles: the walk decides what may be read by name (`.git`, `.bb7`, `.gitignore`, the deny
//! list). If the file were then opened by its path string, a directory swapped for a link to
//! `.git` between the check and the open would be followed, and `sub/config` would be
//! `.git/config` (issue 23). A [`Tree`] opens each directory of a path by its single name relative
//! to its parent's handle with no link followed (`openat(O_NOFOLLOW)`, or WASI `open-at` without
//! `symlink-follow`), and the file likewise, so what is read is reached through exactly the names
//! that were checked, each a real directory. A link swapped in makes the open fail; it is never
//! followed. Opened directories are kept along the current path (a walk visits files in sorted
//! order, so each directory is opened once), which also keeps the cost of a walk at about one
//! open per directory and one per file.
//!
//! Why not `std::fs` inside a component: wasi-libc fills in `d_ino` for every directory entry with
//! a `metadata-hash-at` call, which makes the host `stat` the entry by path, and its `open` asks the
//! host for the new descriptor's type — host calls and `stat`s nothing here uses (a 20,000-file
//! search made ~48,000 `statx` calls). Inside a component this module therefore goes through the
//! WASI Preview 2 interface directly: `open-at` without following links and positioned `read`s;
//! and, since each host call costs more than the system calls behind it, through bb7's own
//! `bb7:host/files` (wit/host-v0.1.0) for the two things a walk does most: a directory's whole
//! listing (`read-directory-entries`, one call instead of one per entry) and a small file read
//! whole (`read-file-at`: open without following a link, read, close in one call instead of
//! three) — in the built-in component only (feature `host-files`: the host links that interface
//! for no other component); the single-tool builds list and read through WASI alone, with the same
//! results. Natively (the host's project view, tests, benchmarks) it is `openat(2)`
//! through rustix.

use std::io;
use std::path::{Path, PathBuf};

use super::walk::Kind;

/// What a directory entry is, seen without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryType {
    File,
    Dir,
    Symlink,
    /// A socket, a FIFO, a device.
    Other,
}

/// Why an open failed: a directory or the file turned out to be a symbolic link.
#[derive(Debug)]
struct LinkRefused;

impl std::fmt::Display for LinkRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a symbolic link; tools do not follow symbolic links")
    }
}

impl std::error::Error for LinkRefused {}

/// The error for a directory or file that turned out to be a symbolic link when opened.
fn link_error() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, LinkRefused)
}

/// Whether `e` is an open refused because a symbolic link was in the way.
pub fn is_link_error(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<LinkRefused>())
}

/// A project tree opened from its root (see the module docs). One per tool call: the handles it
/// keeps are released when it is dropped.
pub struct Tree {
    root: PathBuf,
    base: Option<sys::Handle>,
    /// The directories opened below the root along the current path: `chain[i]` is at depth `i + 1`.
    chain: Vec<(String, sys::Handle)>,
    /// The names of `chain` joined by `/` (`""` for none): the directory whose handle is last.
    chain_path: String,
}

impl Tree {
    /// A tree at `root` (opened on first use; the root itself is trusted, links in its own path
    /// are followed).
    pub fn new(root: &Path) -> Tree {
        Tree {
            root: root.to_path_buf(),
            base: None,
            chain: Vec::new(),
            chain_path: String::new(),
        }
    }

    /// Directory `rel` (normalised, `""` for the root), opened name by name without following
    /// links, reusing the directories already open along the way.
    fn dir(&mut self, rel: &str) -> io::Result<&sys::Handle> {
        if self.base.is_none() {
            self.base = Some(sys::open_root(&self.root)?);
        }
        // Most calls ask for the directory last asked for (every file of a directory in turn).
        if rel != self.chain_path {
            self.open_chain(rel)?;
        }
        match self.chain.last() {
            Some((_, h)) => Ok(h),
            None => self
                .base
                .as_ref()
                .ok_or_else(|| io::Error::other("no root")),
        }
    }

    /// Makes the open chain lead to `rel`: the names of `rel` it already holds are kept, the rest
    /// opened. On an error the chain holds a part of the way (and `chain_path` says which).
    fn open_chain(&mut self, rel: &str) -> io::Result<()> {
        let mut rest = rel;
        let mut common = 0;
        while let Some((name, _)) = self.chain.get(common) {
            let Some((seg, tail)) = first_name(rest) else {
                break;
            };
            if name != seg {
                break;
            }
            common += 1;
            rest = tail;
        }
        self.chain.truncate(common);
        // The first `common` names of `rel` are those of the chain.
        let kept = match common {
            0 => 0,
            _ if rest.is_empty() => rel.len(),
            _ => rel.len() - rest.len() - 1,
        };
        self.chain_path.truncate(kept);
        while let Some((seg, tail)) = first_name(rest) {
            rest = tail;
            let opened = {
                let parent = match self.chain.last() {
                    Some((_, h)) => h,
                    None => self
                        .base
                        .as_ref()
                        .ok_or_else(|| io::Error::other("no root"))?,
                };
                sys::open_dir(parent, seg)?
            };
            self.chain.push((seg.to_string(), opened));
            if !self.chain_path.is_empty() {
                self.chain_path.push('/');
            }
            self.chain_path.push_str(seg);
        }
        Ok(())
    }

    /// The entries of directory `rel`: `(name, Some(kind))` for regular files and directories,
    /// `(name, None)` for anything else (symbolic links are never followed). Names that are not
    /// UTF-8 are skipped.
    pub fn list(&mut self, rel: &str) -> io::Result<Vec<(String, Option<Kind>)>> {
        let dir = self.dir(rel)?;
        sys::list(dir)
    }

    /// What `rel` (not the root) is, without following a link in its place or on the way.
    pub fn entry_type(&mut self, rel: &str) -> io::Result<EntryType> {
        let (parent, name) = split(rel);
        let dir = self.dir(parent)?;
        sys::entry_type(dir, name)
    }

    /// Opens file `rel` for reading: every directory on the way and the file itself opened
    /// without following links. A FIFO, a device or a socket is refused without being opened
    /// (natively it is opened without blocking and refused before any read).
    pub fn open_file(&mut self, rel: &str) -> io::Result<OpenFile> {
        let (parent, name) = split(rel);
        let dir = self.dir(parent)?;
        sys::open_file(dir, name)
    }

    /// Reads file `rel` into `buf` (replacing its contents) if it holds at most `cap` bytes:
    /// `Some(len)`, or `None` when it holds more (at most `cap + 1` bytes are read to find out).
    /// Reads go on until the real end of the file, however short each read comes back. Inside a
    /// component a file of at most 4 MiB is one host call (`bb7:host/files`' `read-file-at`).
    pub fn read_capped(
        &mut self,
        rel: &str,
        cap: usize,
        buf: &mut Vec<u8>,
    ) -> io::Result<Option<usize>> {
        let (parent, name) = split(rel);
        let dir = self.dir(parent)?;
        if let Some(read) = sys::read_whole(dir, name, cap, buf) {
            return read;
        }
        let mut file = sys::open_file(dir, name)?;
        buf.clear();
        let limit = (cap as u64).saturating_add(1);
        let mut want = FIRST_READ;
        let mut first = true;
        loop {
            let have = buf.len() as u64;
            if have >= limit {
                break;
            }
            let ask = want.min(limit - have);
            let (n, at_end) = file.read_into(buf, ask)?;
            // The host said the file ended within this read (bb7's `read` does, for a read that
            // came back short): no read is needed to find the end.
            if n == 0 || at_end {
                break;
            }
            // A first read that came back short almost always ended the file: the read that
            // confirms it asks for little, so the host allocates little. Data after it is read on
            // at full size.
            want = if first && (n as u64) < ask {
                PROBE_READ
            } else if want == PROBE_READ {
                FIRST_READ
            } else {
                (want * 2).min(MAX_READ)
            };
            first = false;
        }
        Ok((buf.len() <= cap).then_some(buf.len()))
    }
}

/// `rel`'s parent directory (`""` for the root) and its last name.
fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

/// The first name of `rel` and the path after it (`None` for `""`).
fn first_name(rel: &str) -> Option<(&str, &str)> {
    if rel.is_empty() {
        return None;
    }
    Some(rel.split_once('/').unwrap_or((rel, "")))
}

/// First read request: most source files fit in one.
const FIRST_READ: u64 = 16 * 1024;
/// Largest single read request.
const MAX_READ: u64 = 256 * 1024;
/// The read after a short first read, which finds the end of the file (the host allocates and
/// zeroes a buffer of the size asked for on every read).
const PROBE_READ: u64 = 512;

/// A file opened by [`Tree::open_file`], read sequentially.
pub struct OpenFile {
    inner: sys::File,
    pos: u64,
}

impl OpenFile {
    /// Appends up to `want` bytes at the current position to `buf` (without zeroing them first):
    /// how many, `0` at the end of the file, and whether the read is known to have reached the end.
    fn read_into(&mut self, buf: &mut Vec<u8>, want: u64) -> io::Result<(usize, bool)> {
        let want = usize::try_from(want).unwrap_or(usize::MAX);
        let (n, at_end) = sys::append_at(&self.inner, buf, want, self.pos)?;
        self.pos += n as u64;
        Ok((n, at_end))
    }
}

impl io::Read for OpenFile {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = sys::read_at(&self.inner, out, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
mod sys {
    use std::ffi::CStr;
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{AtFlags, FileType, Mode, OFlags};

    use super::{EntryType, Kind, link_error};

    pub type Handle = OwnedFd;
    pub type File = OwnedFd;

    fn nofollow_error(e: rustix::io::Errno, dir: &OwnedFd, name: &str) -> io::Error {
        match e {
            rustix::io::Errno::LOOP => link_error(),
            rustix::io::Errno::NOTDIR
                if matches!(entry_type(dir, name), Ok(EntryType::Symlink)) =>
            {
                link_error()
            }
            e => io::Error::from(e),
        }
    }

    pub fn open_root(root: &Path) -> io::Result<Handle> {
        Ok(rustix::fs::open(
            root,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    pub fn open_dir(parent: &Handle, name: &str) -> io::Result<Handle> {
        rustix::fs::openat(
            parent,
            name,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| nofollow_error(e, parent, name))
    }

    fn kind_of(ft: FileType) -> EntryType {
        match ft {
            FileType::RegularFile => EntryType::File,
            FileType::Directory => EntryType::Dir,
            FileType::Symlink => EntryType::Symlink,
            _ => EntryType::Other,
        }
    }

    pub fn entry_type(dir: &Handle, name: &str) -> io::Result<EntryType> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(kind_of(FileType::from_raw_mode(st.st_mode)))
    }

    pub fn list(dir: &Handle) -> io::Result<Vec<(String, Option<Kind>)>> {
        let mut entries = rustix::fs::Dir::read_from(dir)?;
        let mut out = Vec::new();
        while let Some(ent) = entries.read() {
            let ent = ent?;
            let raw: &CStr = ent.file_name();
            let Ok(name) = raw.to_str() else { continue };
            if name == "." || name == ".." {
                continue;
            }
            let ty = match ent.file_type() {
                FileType::Unknown => match entry_type(dir, name) {
                    Ok(t) => t,
                    Err(_) => continue,
                },
                ft => kind_of(ft),
            };
            let kind = match ty {
                EntryType::File => Some(Kind::File),
                EntryType::Dir => Some(Kind::Dir),
                _ => None,
            };
            out.push((name.to_string(), kind));
        }
        Ok(out)
    }

    /// Natively a file is read through [`open_file`] and reads (`None`: not done here).
    pub fn read_whole(
        _dir: &Handle,
        _name: &str,
        _cap: usize,
        _buf: &mut Vec<u8>,
    ) -> Option<io::Result<Option<usize>>> {
        None
    }

    pub fn open_file(dir: &Handle, name: &str) -> io::Result<super::OpenFile> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(|e| nofollow_error(e, dir, name))?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        Ok(super::OpenFile { inner: fd, pos: 0 })
    }

    /// Appends at least `want` bytes (or up to the end of the file) read at `pos` to `buf`, into
    /// its spare capacity (not zeroed; it may take more than `want`: callers only cap a file's
    /// length, which a longer read still finds). The end is known only from a read of nothing.
    pub fn append_at(
        f: &File,
        buf: &mut Vec<u8>,
        want: usize,
        pos: u64,
    ) -> io::Result<(usize, bool)> {
        buf.reserve(want.max(1));
        loop {
            match rustix::io::pread(f, rustix::buffer::spare_capacity(buf), pos) {
                Ok(n) => return Ok((n, n == 0)),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    pub fn read_at(f: &File, out: &mut [u8], pos: u64) -> io::Result<usize> {
        loop {
            match rustix::io::pread(f, &mut *out, pos) {
                Ok(n) => return Ok(n),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod sys {
    use std::io;
    use std::path::{Component, Path};

    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{
        Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
    };

    use super::{EntryType, Kind, link_error};

    pub type Handle = Descriptor;
    pub type File = Descriptor;

    /// Bindings of `bb7:host/files` (wit/host-v0.1.0), over wasip2's WASI types: only in the
    /// built-in component (feature `host-files`), the one component the host links them for.
    #[cfg(feature = "host-files")]
    mod host {
        wit_bindgen::generate!({
            path: "../../wit/host-v0.1.0",
            world: "host-files",
            with: {
                "wasi:filesystem/types@0.2.12": wasip2::filesystem::types,
                "wasi:io/streams@0.2.12": wasip2::io::streams,
                "wasi:io/error@0.2.12": wasip2::io::error,
                "wasi:io/poll@0.2.12": wasip2::io::poll,
                "wasi:clocks/wall-clock@0.2.12": wasip2::clocks::wall_clock,
            },
        });
    }
    #[cfg(feature = "host-files")]
    use host::bb7::host::files;

    /// The largest file `read-file-at` reads (its `max` limit).
    #[cfg(feature = "host-files")]
    const READ_FILE_AT_MAX: u64 = 4 << 20;

    thread_local! {
        /// The component's preopened directories, asked for once (each call would hand out new
        /// descriptors).
        static PREOPENS: Vec<(Descriptor, String)> = get_directories();
    }

    fn to_io(e: ErrorCode) -> io::Error {
        let kind = match e {
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
            ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
            ErrorCode::Loop => return link_error(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, format!("{e:?}"))
    }

    fn nofollow_error(e: ErrorCode, dir: &Descriptor, name: &str) -> io::Error {
        match e {
            ErrorCode::NotDirectory if matches!(entry_type(dir, name), Ok(EntryType::Symlink)) => {
                link_error()
            }
            e => to_io(e),
        }
    }

    /// The root: the preopen it lies in, reopened (`.`), then each component below it opened
    /// without following links.
    pub fn open_root(root: &Path) -> io::Result<Handle> {
        PREOPENS.with(|pre| {
            let (dir, rel) = pre
                .iter()
                .find_map(|(d, name)| Some((d, root.strip_prefix(name).ok()?)))
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "not inside a granted directory")
                })?;
            let mut cur = dir
                .open_at(
                    PathFlags::empty(),
                    ".",
                    OpenFlags::DIRECTORY,
                    DescriptorFlags::READ,
                )
                .map_err(to_io)?;
            for c in rel.components() {
                match c {
                    Component::Normal(p) => {
                        let p = p.to_str().ok_or_else(|| {
                            io::Error::new(io::ErrorKind::InvalidInput, "not UTF-8")
                        })?;
                        cur = open_dir(&cur, p)?;
                    }
                    Component::CurDir => {}
                    _ => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "unexpected path",
                        ));
                    }
                }
            }
            Ok(cur)
        })
    }

    pub fn open_dir(parent: &Handle, name: &str) -> io::Result<Handle> {
        // No SYMLINK_FOLLOW and a single name: a link in place of the directory is refused.
        parent
            .open_at(
                PathFlags::empty(),
                name,
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            )
            .map_err(|e| nofollow_error(e, parent, name))
    }

    fn kind_of(t: DescriptorType) -> EntryType {
        match t {
            DescriptorType::RegularFile => EntryType::File,
            DescriptorType::Directory => EntryType::Dir,
            DescriptorType::SymbolicLink => EntryType::Symlink,
            _ => EntryType::Other,
        }
    }

    pub fn entry_type(dir: &Handle, name: &str) -> io::Result<EntryType> {
        let st = dir.stat_at(PathFlags::empty(), name).map_err(to_io)?;
        Ok(kind_of(st.type_))
    }

    fn kind_of_entry(t: DescriptorType) -> Option<Kind> {
        match t {
            DescriptorType::Directory => Some(Kind::Dir),
            DescriptorType::RegularFile => Some(Kind::File),
            _ => None,
        }
    }

    /// The whole listing in one host call (`read-directory-entries`; names that are not UTF-8
    /// are left out, as natively). A directory too large for that call (`overflow`: the host caps
    /// it) is listed entry by entry through WASI instead.
    #[cfg(feature = "host-files")]
    pub fn list(dir: &Handle) -> io::Result<Vec<(String, Option<Kind>)>> {
        match files::read_directory_entries(dir) {
            Ok(entries) => Ok(entries
                .into_iter()
                .map(|ent| (ent.name, kind_of_entry(ent.type_)))
                .collect()),
            Err(ErrorCode::Overflow) => list_wasi(dir),
            Err(e) => Err(to_io(e)),
        }
    }

    /// The listing through WASI's `read-directory`, one host call per entry.
    #[cfg(not(feature = "host-files"))]
    pub fn list(dir: &Handle) -> io::Result<Vec<(String, Option<Kind>)>> {
        list_wasi(dir)
    }

    /// The listing through WASI's `read-directory` (an entry whose name is not UTF-8 is an
    /// `illegal-byte-sequence` error there: it is left out, as natively and by
    /// `read-directory-entries`).
    fn list_wasi(dir: &Handle) -> io::Result<Vec<(String, Option<Kind>)>> {
        let stream = dir.read_directory().map_err(to_io)?;
        let mut out = Vec::new();
        loop {
            match stream.read_directory_entry() {
                Ok(Some(ent)) => out.push((ent.name, kind_of_entry(ent.type_))),
                Ok(None) => break,
                Err(ErrorCode::IllegalByteSequence) => continue,
                Err(e) => return Err(to_io(e)),
            }
        }
        Ok(out)
    }

    /// Reads regular file `name` of `dir` whole into `buf` in one host call (`read-file-at`: opened
    /// without following a link, only a regular file) when `cap` is within what that call takes:
    /// `Some(len)`, or `None` when it holds more than `cap` bytes. `None` (not done here) for a
    /// larger `cap`.
    #[cfg(feature = "host-files")]
    pub fn read_whole(
        dir: &Handle,
        name: &str,
        cap: usize,
        buf: &mut Vec<u8>,
    ) -> Option<io::Result<Option<usize>>> {
        let max = u64::try_from(cap).ok().filter(|&m| m <= READ_FILE_AT_MAX)?;
        Some(match files::read_file_at(dir, name, max) {
            Ok(Some(data)) => {
                let n = data.len();
                // Its bytes are kept where the host put them.
                *buf = data;
                Ok(Some(n))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(nofollow_error(e, dir, name)),
        })
    }

    /// Without `bb7:host/files` a file is read through [`open_file`] and reads (`None`: not done
    /// here).
    #[cfg(not(feature = "host-files"))]
    pub fn read_whole(
        _dir: &Handle,
        _name: &str,
        _cap: usize,
        _buf: &mut Vec<u8>,
    ) -> Option<io::Result<Option<usize>>> {
        None
    }

    pub fn open_file(dir: &Handle, name: &str) -> io::Result<super::OpenFile> {
        // A FIFO, device or socket is refused as natively, without asking the host to open it
        // (the open of some devices has side effects; a FIFO's may wait for a writer).
        if entry_type(dir, name)? == EntryType::Other {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        // No SYMLINK_FOLLOW: a link in the file's place is refused, never followed.
        let f = dir
            .open_at(
                PathFlags::empty(),
                name,
                OpenFlags::empty(),
                DescriptorFlags::READ,
            )
            .map_err(|e| nofollow_error(e, dir, name))?;
        Ok(super::OpenFile { inner: f, pos: 0 })
    }

    /// Appends up to `want` bytes read at `pos` to `buf`: one host call, whose result is copied
    /// once (no zeroed staging buffer), and whether it reached the end of the file (bb7's host
    /// reads on until `want` bytes or the end, and says so; wasmtime-wasi only on an empty read).
    pub fn append_at(
        f: &File,
        buf: &mut Vec<u8>,
        want: usize,
        pos: u64,
    ) -> io::Result<(usize, bool)> {
        let (data, eof) = f.read(want as u64, pos).map_err(to_io)?;
        let n = data.len().min(want);
        if buf.is_empty() && data.len() == n {
            // The first read of a file: its bytes are kept where the host put them.
            *buf = data;
        } else {
            buf.extend_from_slice(&data[..n]);
        }
        Ok((n, eof))
    }

    pub fn read_at(f: &File, out: &mut [u8], pos: u64) -> io::Result<usize> {
        // A positioned read may come back short anywhere (wasmtime caps each one); only an empty
        // read ends the file.
        let (data, _eof) = f.read(out.len() as u64, pos).map_err(to_io)?;
        let n = data.len().min(out.len());
        out[..n].copy_from_slice(&data[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::put;
    use super::*;

    /// Files read in any order of directories — deeper, back up, across, into one that is
    /// missing and then one that exists — each come from their own directory.
    #[test]
    fn the_open_chain_follows_every_move() {
        let t = tempfile::tempdir().unwrap();
        let files = [
            "top", "a/f", "a/b/f", "a/b/c/f", "a/bb/f", "ab/f", "b/f", "b/a/f", "a/b/c/g",
        ];
        for f in files {
            put(t.path(), f, f);
        }
        let mut tree = Tree::new(t.path());
        let mut buf = Vec::new();
        let order = [
            "a/b/c/f",
            "a/b/f",
            "a/f",
            "top",
            "a/bb/f",
            "ab/f",
            "a/b/c/g",
            "b/a/f",
            "b/f",
            "a/b/c/f",
            "missing/x/f",
            "a/b/f",
            "top",
        ];
        for rel in order {
            let got = tree.read_capped(rel, 100, &mut buf);
            if rel.starts_with("missing") {
                assert_eq!(got.unwrap_err().kind(), io::ErrorKind::NotFound);
                continue;
            }
            assert_eq!(got.unwrap(), Some(rel.len()), "{rel}");
            assert_eq!(&buf[..], rel.as_bytes(), "{rel}");
            let parent = rel.rsplit_once('/').map_or("", |(p, _)| p);
            assert_eq!(tree.chain_path, parent, "{rel}");
        }
    }
}
