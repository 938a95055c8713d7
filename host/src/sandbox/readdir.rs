//! `descriptor.read-directory` without a `stat` per entry.
//!
//! wasmtime-wasi lists a directory by reading it and then `stat`ing every entry (by path) for its
//! type, and opens the directory twice more to read it: a walk over 20,000 files made 20,000
//! `statx` calls nothing needed, since the kernel's directory listing already says what each entry
//! is (`d_type`, without following links, like the `lstat` wasmtime-wasi makes). The shadow here
//! takes the type from the listing and `stat`s (without following links) only an entry whose type
//! the file system does not report. Names, types and errors are as wasmtime-wasi gives them: `.`
//! and `..` are left out, a name that is not UTF-8 is an `illegal-byte-sequence` entry.
//!
//! The listing is read whole when `read-directory` is called (as wasmtime-wasi does) and held in
//! the call's resource table under the `directory-entry-stream` handle the guest gets; the stream's
//! methods and its destructor are shadowed with it, so no code of wasmtime-wasi sees it.

use std::os::fd::AsFd;
use std::sync::Arc;

use rustix::fs::FileType;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{
    Descriptor, DescriptorType, DirectoryEntry, DirectoryEntryStream, ErrorCode,
};

use super::state::CallState;

/// A directory's entries, as `read-directory` read them, handed out one by one.
struct Listing(std::vec::IntoIter<Result<DirectoryEntry, ErrorCode>>);

/// Replaces `read-directory`, `read-directory-entry` and the entry stream's destructor of
/// `linker` (which already holds wasmtime-wasi's `wasi:filesystem/types`) by the versions here.
pub fn shadow(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let r = define(linker);
    linker.allow_shadowing(false);
    r
}

fn define(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut types =
        linker.instance(&format!("wasi:filesystem/types@{}", super::hostcalls::WASI))?;
    types.resource(
        "directory-entry-stream",
        ResourceType::host::<DirectoryEntryStream>(),
        |mut cx, rep| {
            cx.data_mut()
                .table()
                .delete(Resource::<Listing>::new_own(rep))?;
            Ok(())
        },
    )?;
    types.func_wrap(
        "[method]descriptor.read-directory",
        |mut cx: StoreContextMut<'_, CallState>, (fd,): (Resource<Descriptor>,)| {
            let deadline = cx.data().deadline();
            let table = cx.data_mut().table();
            let dir = match table.get(&fd)? {
                wasmtime_wasi::filesystem::Descriptor::Dir(d) => Arc::clone(&d.dir),
                wasmtime_wasi::filesystem::Descriptor::File(_) => {
                    return Ok((Err(ErrorCode::NotDirectory),));
                }
            };
            let Some(entries) = list(&dir, deadline) else {
                return Err(cx.data_mut().deadline_passed());
            };
            let listing = cx.data_mut().table().push(Listing(entries.into_iter()))?;
            Ok((Ok(Resource::<DirectoryEntryStream>::new_own(listing.rep())),))
        },
    )?;
    types.func_wrap(
        "[method]directory-entry-stream.read-directory-entry",
        |mut cx: StoreContextMut<'_, CallState>, (s,): (Resource<DirectoryEntryStream>,)| {
            let listing = cx
                .data_mut()
                .table()
                .get_mut(&Resource::<Listing>::new_borrow(s.rep()))?;
            Ok((listing.0.next().transpose(),))
        },
    )?;
    Ok(())
}

/// At most this many entries of one directory are held for a guest (about 100 MB of host memory
/// at most): past it the stream ends with `overflow` after them.
const MAX_ENTRIES: usize = 1 << 20;

/// How many entries are listed between two looks at the call's deadline.
const DEADLINE_EVERY: usize = 1024;

/// The entries of `dir`, each with the type its listing gives (`names::each_entry`: an entry of
/// unknown type is looked at without following a link; one that vanished in between is left out;
/// a preopen, held `O_PATH`, is listed too), at most [`MAX_ENTRIES`]; `None` when `deadline`
/// passed while listing (checked every [`DEADLINE_EVERY`] entries).
fn list(
    dir: &std::fs::File,
    deadline: std::time::Instant,
) -> Option<Vec<Result<DirectoryEntry, ErrorCode>>> {
    let mut out = Vec::new();
    let mut late = false;
    let listed = super::names::each_entry(dir.as_fd(), |entry| {
        if out.len().is_multiple_of(DEADLINE_EVERY) && std::time::Instant::now() >= deadline {
            late = true;
            return std::ops::ControlFlow::Break(());
        }
        if out.len() == MAX_ENTRIES {
            out.push(Err(ErrorCode::Overflow));
            return std::ops::ControlFlow::Break(());
        }
        out.push(match (entry.name.to_str(), entry.file_type) {
            (_, Err(e)) => Err(error_code(e.into())),
            (Ok(name), Ok(file_type)) => Ok(DirectoryEntry {
                type_: descriptor_type(file_type),
                name: name.to_string(),
            }),
            (Err(_), Ok(_)) => Err(ErrorCode::IllegalByteSequence),
        });
        std::ops::ControlFlow::Continue(())
    });
    if late {
        return None;
    }
    if let Err(e) = listed {
        // The entries read before the error stand; the error ends the stream.
        out.push(Err(error_code(e.into())));
    }
    Some(out)
}

/// The WASI error for `e`, as wasmtime-wasi words it.
fn error_code(e: std::io::Error) -> ErrorCode {
    wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode::from(e).into()
}

/// The WASI type of a file type.
pub(super) fn descriptor_type(t: FileType) -> DescriptorType {
    match t {
        FileType::RegularFile => DescriptorType::RegularFile,
        FileType::Directory => DescriptorType::Directory,
        FileType::Symlink => DescriptorType::SymbolicLink,
        FileType::Fifo => DescriptorType::Fifo,
        FileType::Socket => DescriptorType::Socket,
        FileType::CharacterDevice => DescriptorType::CharacterDevice,
        FileType::BlockDevice => DescriptorType::BlockDevice,
        FileType::Unknown => DescriptorType::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deadline no test reaches.
    fn later() -> std::time::Instant {
        std::time::Instant::now() + std::time::Duration::from_secs(3600)
    }

    /// A listing stops at the call's deadline: nothing is handed out, the call is stopped.
    #[test]
    fn a_listing_stops_at_the_deadline() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), "x").unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        assert!(list(&dir, std::time::Instant::now()).is_none());
        assert_eq!(list(&dir, later()).map(|v| v.len()), Some(1));
    }
    use std::os::unix::ffi::OsStrExt;

    /// The listing gives what wasmtime-wasi's `stat` per entry gave: each entry's own type (a link
    /// is a link, not what it points to), no `.`/`..`, and an error entry for a name that is not
    /// UTF-8.
    #[test]
    fn entries_carry_their_own_types() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(d.join("file"), "x").unwrap();
        std::fs::create_dir(d.join("dir")).unwrap();
        std::os::unix::fs::symlink(d.join("dir"), d.join("link-to-dir")).unwrap();
        std::os::unix::fs::symlink(d.join("missing"), d.join("dangling")).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
        std::fs::write(d.join(std::ffi::OsStr::from_bytes(b"bad\xff")), "").unwrap();
        let dir = std::fs::File::open(d).unwrap();
        let mut got: Vec<(String, DescriptorType)> = Vec::new();
        let mut errors = Vec::new();
        for e in list(&dir, later()).unwrap() {
            match e {
                Ok(e) => got.push((e.name, e.type_)),
                Err(e) => errors.push(e),
            }
        }
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["dangling", "dir", "file", "link-to-dir", "sock"]);
        let types: Vec<DescriptorType> = got.iter().map(|(_, t)| *t).collect();
        assert!(matches!(
            types[..],
            [
                DescriptorType::SymbolicLink,
                DescriptorType::Directory,
                DescriptorType::RegularFile,
                DescriptorType::SymbolicLink,
                DescriptorType::Socket
            ]
        ));
        assert!(matches!(errors[..], [ErrorCode::IllegalByteSequence]));
    }

    /// A preopen is held `O_PATH`: it is listed as any directory (it was an error: the listing
    /// reopened `.` with the descriptor's own flags).
    #[test]
    fn a_preopened_directory_is_listed() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("file"), "x").unwrap();
        let path_only = std::fs::File::from(
            rustix::fs::open(
                t.path(),
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .unwrap(),
        );
        let got = list(&path_only, later()).unwrap();
        assert!(matches!(&got[..], [Ok(e)] if e.name == "file"), "{got:?}");
    }
}
