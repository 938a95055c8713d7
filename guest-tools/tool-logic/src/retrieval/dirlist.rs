//! The two filesystem calls a walk makes per entry — list a directory, read a file — made as
//! cheaply as the sandbox allows.
//!
//! Why not `std::fs` inside a component: wasi-libc fills in `d_ino` for every directory entry with
//! a `metadata-hash-at` call, which makes the host `stat` the entry by path, and its `open` asks the
//! host for the new descriptor's type — host calls and `stat`s nothing here uses (a 20,000-file
//! search made ~48,000 `statx` calls). Inside a component this module therefore goes through the
//! WASI Preview 2 interface directly: `open-at` without following links, `read-directory`, and
//! positioned `read`s. Natively (tests, benchmarks) it is `std::fs`.

use std::io;
use std::path::Path;

use super::walk::Kind;

/// The entries of directory `path`: `(name, Some(kind))` for regular files and directories,
/// `(name, None)` for anything else (symbolic links are never followed). Names that are not UTF-8
/// are skipped.
pub fn list(path: &Path) -> io::Result<Vec<(String, Option<Kind>)>> {
    #[cfg(all(target_os = "wasi", target_env = "p2"))]
    if let Some(r) = wasi::list(path) {
        return r;
    }
    let mut out = Vec::new();
    for ent in std::fs::read_dir(path)? {
        let Ok(ent) = ent else { continue };
        let Ok(ft) = ent.file_type() else { continue };
        let kind = if ft.is_dir() {
            Some(Kind::Dir)
        } else if ft.is_file() {
            Some(Kind::File)
        } else {
            None
        };
        let Ok(name) = ent.file_name().into_string() else {
            continue;
        };
        out.push((name, kind));
    }
    Ok(out)
}

/// Reads the file at `path` into `buf` (replacing its contents) if it holds at most `cap` bytes:
/// `Some(len)`, or `None` when it holds more (at most about `cap` + 64 KiB are read to find out).
/// Inside a component a symbolic link in the file's place is refused, never followed.
pub fn read_capped(path: &Path, cap: usize, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
    #[cfg(all(target_os = "wasi", target_env = "p2"))]
    if let Some(r) = wasi::read_capped(path, cap, buf) {
        return r;
    }
    use std::io::Read;
    buf.clear();
    let file = std::fs::File::open(path)?;
    file.take((cap as u64).saturating_add(1)).read_to_end(buf)?;
    Ok((buf.len() <= cap).then_some(buf.len()))
}

/// First read request: most source files fit in one.
#[cfg(all(target_os = "wasi", target_env = "p2"))]
const FIRST_READ: u64 = 16 * 1024;
/// Largest single read request.
#[cfg(all(target_os = "wasi", target_env = "p2"))]
const MAX_READ: u64 = 256 * 1024;

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod wasi {
    use std::io;
    use std::path::{Component, Path};

    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{
        Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
    };

    use super::Kind;

    thread_local! {
        /// The component's preopened directories, asked for once (each call would hand out new
        /// descriptors).
        static PREOPENS: Vec<(Descriptor, String)> = get_directories();
    }

    /// Lists `path` through the preopen it lies in; `None` when it lies in none (the caller falls
    /// back to `std`, which reports the error).
    pub fn list(path: &Path) -> Option<io::Result<Vec<(String, Option<Kind>)>>> {
        locate(path, list_in)
    }

    /// The preopen `path` lies in and the path relative to it, split into its segments.
    fn locate<R>(
        path: &Path,
        f: impl FnOnce(&Descriptor, &str) -> io::Result<R>,
    ) -> Option<io::Result<R>> {
        PREOPENS.with(|pre| {
            let (dir, rel) = pre.iter().find_map(|(d, name)| {
                let rel = path.strip_prefix(name).ok()?;
                Some((d, rel))
            })?;
            Some(relative(rel).and_then(|rel| f(dir, &rel)))
        })
    }

    /// `rel` as a `/`-joined string of normal segments.
    fn relative(rel: &Path) -> io::Result<String> {
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(p) => parts.push(
                    p.to_str()
                        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not UTF-8"))?,
                ),
                Component::CurDir => {}
                // Paths here are normalised by the tools; anything else is not ours to touch.
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "unexpected path",
                    ));
                }
            }
        }
        Ok(parts.join("/"))
    }

    pub fn read_capped(
        path: &Path,
        cap: usize,
        buf: &mut Vec<u8>,
    ) -> Option<io::Result<Option<usize>>> {
        locate(path, |pre, rel| {
            // No SYMLINK_FOLLOW: a link in the file's place is refused, never followed.
            let f = pre
                .open_at(
                    PathFlags::empty(),
                    rel,
                    OpenFlags::empty(),
                    DescriptorFlags::READ,
                )
                .map_err(to_io)?;
            buf.clear();
            let limit = (cap as u64).saturating_add(1);
            let mut want = super::FIRST_READ;
            loop {
                let have = buf.len() as u64;
                if have >= limit {
                    break;
                }
                let (data, eof) = f.read(want.min(limit - have), have).map_err(to_io)?;
                if data.is_empty() || eof {
                    buf.extend_from_slice(&data);
                    break;
                }
                let short = (data.len() as u64) < want.min(limit - have);
                buf.extend_from_slice(&data);
                // A positioned read of a regular file comes back short only at its end: no
                // second call to confirm it.
                if short {
                    break;
                }
                want = (want * 2).min(super::MAX_READ);
            }
            Ok((buf.len() <= cap).then_some(buf.len()))
        })
    }

    fn list_in(preopen: &Descriptor, rel: &str) -> io::Result<Vec<(String, Option<Kind>)>> {
        let opened;
        let dir = if rel.is_empty() {
            preopen
        } else {
            // No SYMLINK_FOLLOW: a link in place of the directory is refused, never followed.
            opened = preopen
                .open_at(
                    PathFlags::empty(),
                    rel,
                    OpenFlags::DIRECTORY,
                    DescriptorFlags::READ,
                )
                .map_err(to_io)?;
            &opened
        };
        let stream = dir.read_directory().map_err(to_io)?;
        let mut out = Vec::new();
        while let Some(ent) = stream.read_directory_entry().map_err(to_io)? {
            let kind = match ent.type_ {
                DescriptorType::Directory => Some(Kind::Dir),
                DescriptorType::RegularFile => Some(Kind::File),
                _ => None,
            };
            out.push((ent.name, kind));
        }
        Ok(out)
    }

    fn to_io(e: ErrorCode) -> io::Error {
        let kind = match e {
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
            ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
            ErrorCode::Loop => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, format!("{e:?}"))
    }
}
