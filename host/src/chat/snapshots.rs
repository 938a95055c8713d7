//! The stored content of context entries: whole-file snapshots and sections, and output files.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use cap_std::fs::Dir;

use super::model::ContextFile;
use super::paths::{self, ClientPath, PathError};
use crate::store::{Stamp, write_atomic};

/// Where `cf`'s snapshot lives in the chat directory.
pub fn location(cf: &ContextFile) -> Result<String, PathError> {
    match (cf.start_line, cf.end_line) {
        (Some(s), Some(e)) => Ok(paths::section_rel(&cf.path, s, e)),
        _ => Ok(paths::snapshot_rel(&paths::stored(&cf.path, cf.external)?)),
    }
}

/// Reads `cf`'s snapshot.
pub fn read(chat_dir: &Dir, cf: &ContextFile) -> io::Result<Vec<u8>> {
    let rel = location(cf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    crate::store::read_regular(chat_dir, rel)
}

/// Snapshots read at most once each, shared: a send's stale check, its request and its reply's
/// edit base read each snapshot once between them (a 1 MiB file in context was read three
/// times per send, four with an edit). Keyed by where the snapshot lives and the entry's
/// `version`, so an entry whose snapshot was replaced is read again.
#[derive(Debug, Default)]
pub struct Memo(HashMap<(String, String), Kept>);

/// A snapshot as read, with the [`Stamp`] of the file it was read from.
pub type Kept = (Arc<[u8]>, Stamp);

impl Memo {
    /// `cf`'s snapshot: as read before, else read now and kept.
    pub fn read(&mut self, chat_dir: &Dir, cf: &ContextFile) -> io::Result<Arc<[u8]>> {
        let rel = location(cf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let key = (rel, cf.version.clone());
        if let Some((c, _)) = self.0.get(&key) {
            return Ok(Arc::clone(c));
        }
        let (c, stamp) = crate::store::read_regular_shared_stamped(chat_dir, &key.0)?;
        self.0.insert(key, (Arc::clone(&c), stamp));
        Ok(c)
    }

    /// `cf`'s snapshot if it was read through this memo, with the [`Stamp`] of the file read
    /// (to tell later whether the snapshot on disk is still that one: [`unchanged`]).
    pub fn get(&self, cf: &ContextFile) -> Option<Kept> {
        let rel = location(cf).ok()?;
        self.0.get(&(rel, cf.version.clone())).cloned()
    }
}

/// Whether `cf`'s snapshot on disk is still the file `stamp` was taken of (a snapshot is
/// replaced atomically, so a replaced one has another inode).
pub fn unchanged(chat_dir: &Dir, cf: &ContextFile, stamp: &Stamp) -> bool {
    location(cf)
        .ok()
        .and_then(|rel| crate::store::stamp(chat_dir, rel).ok())
        .is_some_and(|now| now == *stamp)
}

/// Writes `cf`'s snapshot atomically.
pub fn write(chat_dir: &Dir, cf: &ContextFile, content: &[u8]) -> io::Result<()> {
    let rel = location(cf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    write_atomic(chat_dir, rel, content)
}

/// The model's version of internal file `path`, if any.
pub fn read_output(chat_dir: &Dir, path: &str) -> Option<Vec<u8>> {
    crate::store::read_regular(chat_dir, paths::output_rel(path)).ok()
}

/// Every output file of a chat (relative paths, sorted).
pub fn output_files(chat_dir: &Dir) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(d) = chat_dir.open_dir("output") {
        walk(&d, "", &mut out);
    }
    out.sort();
    out
}

fn walk(dir: &Dir, prefix: &str, out: &mut Vec<String>) {
    let Ok(entries) = dir.entries() else { return };
    for e in entries.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let Ok(ft) = e.file_type() else { continue };
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if ft.is_dir() {
            if let Ok(sub) = dir.open_dir(&name) {
                walk(&sub, &rel, out);
            }
        } else if ft.is_file() && !is_temp_file(&name) {
            out.push(rel);
        }
    }
}

/// A temporary file of an interrupted atomic write (`.<name>.tmp-<pid>-<n>`), not a model output.
fn is_temp_file(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp-")
}

/// Lines `start..=end` (1-based) of `content`, with their line endings.
pub fn section_lines(content: &[u8], start: u64, end: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, line) in content.split_inclusive(|b| *b == b'\n').enumerate() {
        let n = i as u64 + 1;
        if n > end {
            break;
        }
        if n >= start {
            out.extend_from_slice(line);
        }
    }
    out
}

/// Whether two texts are equal ignoring CRLF vs LF.
pub fn same_text(a: &[u8], b: &[u8]) -> bool {
    a == b || strip_cr(a) == strip_cr(b)
}

fn strip_cr(a: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(a.len());
    let mut i = 0;
    while i < a.len() {
        if a[i] == b'\r' && a.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        v.push(a[i]);
        i += 1;
    }
    v
}

/// The id of `content` as the version of a context entry: `file_id(path, content)` for whole files,
/// `file_id("path:start:end", content)` for sections (as the reference backend computes it).
pub fn version(path: &str, start: Option<u64>, end: Option<u64>, content: &[u8]) -> String {
    match (start, end) {
        (Some(a), Some(b)) => bb7_tool_logic::file_id::file_id(&format!("{path}:{a}:{b}"), content),
        _ => bb7_tool_logic::file_id::file_id(path, content),
    }
}

/// Makes every context entry's `version` the id of its snapshot as it is on disk. A snapshot is
/// replaced before chat.json is saved (there is no order of the two writes without a window), so a
/// crash in between leaves chat.json naming the old version of a file whose snapshot is already the
/// new one; a model edit against that id would then be refused forever. Only snapshots written no
/// earlier than chat.json are read and hashed (the one a crash can have left is newer; the others
/// cost a `stat`); entries whose snapshot is missing or unreadable are left alone. Returns whether
/// anything changed (the caller saves).
pub fn heal_versions(chat_dir: &Dir, files: &mut [ContextFile]) -> bool {
    let saved = chat_dir
        .metadata("chat.json")
        .and_then(|m| m.modified())
        .ok();
    let mut changed = false;
    for cf in files {
        let Ok(rel) = location(cf) else { continue };
        let written = chat_dir.metadata(&rel).and_then(|m| m.modified()).ok();
        if let (Some(saved), Some(written)) = (saved, written)
            && written < saved
        {
            continue;
        }
        let Ok(content) = crate::store::read_regular(chat_dir, &rel) else {
            continue;
        };
        let actual = version(&cf.path, cf.start_line, cf.end_line, &content);
        if actual != cf.version {
            cf.version = actual;
            changed = true;
        }
    }
    changed
}

/// The classified path of a context entry.
pub fn client_path(cf: &ContextFile) -> Result<ClientPath, PathError> {
    paths::stored(&cf.path, cf.external)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_line_endings() {
        assert_eq!(section_lines(b"a\nb\nc\n", 2, 3), b"b\nc\n");
        assert_eq!(section_lines(b"a\nb", 2, 9), b"b");
        assert!(same_text(b"a\r\nb\r\n", b"a\nb\n"));
        assert!(!same_text(b"a\n", b"b\n"));
    }
}
