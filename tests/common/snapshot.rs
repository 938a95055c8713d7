//! One snapshot of a directory tree for the "nothing outside changed" checks of every suite (the
//! escape suite and the protocol suites): paths, contents, modes, mtimes and symlink targets, never
//! following a symlink and never opening anything but regular files. Nothing is skipped silently: an
//! entry that cannot be read fails the test.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File {
        content: Vec<u8>,
        mode: u32,
        mtime: (i64, i64),
    },
    Dir {
        mode: u32,
        mtime: (i64, i64),
    },
    Symlink {
        target: PathBuf,
    },
    Other {
        mode: u32,
        mtime: (i64, i64),
    },
}

pub type Snapshot = BTreeMap<PathBuf, Node>;

/// Paths (relative to `dir`, `""` for `dir` itself), contents, modes, mtimes and symlink targets of
/// everything under `dir` but the `skip` paths. `dir_mtimes: false` leaves directories' mtimes out
/// (for suites that create and remove files of their own outside between two snapshots).
pub fn snapshot(dir: &Path, skip: &[&Path], dir_mtimes: bool) -> Snapshot {
    fn visit(base: &Path, path: &Path, skip: &[&Path], dir_mtimes: bool, out: &mut Snapshot) {
        if skip.contains(&path) {
            return;
        }
        let rel = path.strip_prefix(base).unwrap().to_path_buf();
        let meta = std::fs::symlink_metadata(path)
            .unwrap_or_else(|e| panic!("stat {}: {e}", path.display()));
        let mtime = (meta.mtime(), meta.mtime_nsec());
        let ft = meta.file_type();
        if ft.is_symlink() {
            out.insert(
                rel,
                Node::Symlink {
                    target: std::fs::read_link(path).unwrap(),
                },
            );
        } else if ft.is_file() {
            let content =
                std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            out.insert(
                rel,
                Node::File {
                    content,
                    mode: meta.mode(),
                    mtime,
                },
            );
        } else if ft.is_dir() {
            out.insert(
                rel,
                Node::Dir {
                    mode: meta.mode(),
                    mtime: if dir_mtimes { mtime } else { (0, 0) },
                },
            );
            let mut children: Vec<PathBuf> = std::fs::read_dir(path)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            children.sort();
            for c in children {
                visit(base, &c, skip, dir_mtimes, out);
            }
        } else {
            out.insert(
                rel,
                Node::Other {
                    mode: meta.mode(),
                    mtime,
                },
            );
        }
    }
    let mut out = BTreeMap::new();
    visit(dir, dir, skip, dir_mtimes, &mut out);
    out
}

pub fn describe_node(n: Option<&Node>) -> String {
    match n {
        None => "absent".into(),
        Some(Node::File {
            content,
            mode,
            mtime,
        }) => format!(
            "file {:?} mode {mode:o} mtime {mtime:?}",
            String::from_utf8_lossy(&content[..content.len().min(200)])
        ),
        Some(Node::Dir { mode, mtime }) => format!("dir mode {mode:o} mtime {mtime:?}"),
        Some(Node::Symlink { target }) => format!("symlink -> {}", target.display()),
        Some(Node::Other { mode, mtime }) => format!("special mode {mode:o} mtime {mtime:?}"),
    }
}

/// The differences between two snapshots, one line each ("  path: before => after").
pub fn differences(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut diffs = Vec::new();
    for key in before
        .keys()
        .chain(after.keys().filter(|k| !before.contains_key(*k)))
    {
        let (b, a) = (before.get(key), after.get(key));
        if b != a {
            diffs.push(format!(
                "  {}: {} => {}",
                key.display(),
                describe_node(b),
                describe_node(a)
            ));
        }
    }
    diffs
}
