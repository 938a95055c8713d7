//! The external files (outside the project) this user added to a chat, per project: the only ones
//! the host ever re-reads from disk.
//!
//! A repository can ship `.bb7/chats/<id>/chat.json` naming any absolute path (`~/.ssh/id_rsa`,
//! `/proc/self/environ`). Forking, editing or syncing such a chat must not read those files. The record
//! lives in the global state directory (`~/.bb7/external-files.json`), which no repository writes, and
//! gains an entry only when this user adds an external file (or moves a chat whose files it trusts).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::store::{StateDir, read_regular, write_atomic};

const FILE: &str = "external-files.json";
/// Held while the record is read, changed and written.
const LOCK_FILE: &str = "external-files.json.lock";

/// The scope of a chat: `"global"` for global chats, else the project root.
pub fn scope(global_chat: bool, project_root: Option<&std::path::Path>) -> String {
    match (global_chat, project_root) {
        (false, Some(root)) => root.to_string_lossy().into_owned(),
        _ => "global".to_string(),
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    #[serde(default)]
    scopes: BTreeMap<String, BTreeSet<String>>,
}

/// The record in the global state directory.
#[derive(Debug, Clone)]
pub struct ExternalRecord {
    dir: Option<PathBuf>,
}

impl ExternalRecord {
    /// The record of this user (`$BB7_HOME` or `~/.bb7`).
    pub fn of_user() -> Self {
        ExternalRecord {
            dir: crate::paths::state_dir(),
        }
    }

    fn load(&self) -> Record {
        self.dir
            .as_ref()
            .and_then(|d| StateDir::open(d, false).ok())
            .and_then(|d| read_regular(d.dir(), FILE).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Whether this user added `path` to a chat of `scope`.
    pub fn allows(&self, scope: &str, path: &str) -> bool {
        self.load()
            .scopes
            .get(scope)
            .is_some_and(|s| s.contains(path))
    }

    /// Records that this user added `paths` to a chat of `scope`.
    pub fn add<'a>(&self, scope: &str, paths: impl IntoIterator<Item = &'a str>) -> io::Result<()> {
        let Some(dir) = &self.dir else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no home directory for the record of external files",
            ));
        };
        // Read, change and write under the record's lock: several host processes of one user
        // (the inline edit's, a second chat's while a reply streams) may add at once.
        let state = StateDir::open(dir, true)?;
        let _lock = crate::store::lock::exclusive(state.dir(), LOCK_FILE)?;
        let mut rec = self.load();
        let set = rec.scopes.entry(scope.to_string()).or_default();
        let before = set.len();
        set.extend(paths.into_iter().map(str::to_string));
        if set.len() == before {
            return Ok(());
        }
        let bytes = serde_json::to_vec_pretty(&rec).map_err(io::Error::other)?;
        write_atomic(state.dir(), FILE, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Several writers at once (two host processes of one user: the inline edit's, a second chat's)
    /// lose no entry: each read-modify-write runs under the record's lock.
    #[test]
    fn concurrent_adds_lose_nothing() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().to_path_buf();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let r = ExternalRecord { dir: Some(dir) };
                    for j in 0..25 {
                        r.add("global", [format!("/f/{i}/{j}").as_str()]).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let r = ExternalRecord { dir: Some(dir) };
        let missing: Vec<String> = (0..8)
            .flat_map(|i| (0..25).map(move |j| format!("/f/{i}/{j}")))
            .filter(|p| !r.allows("global", p))
            .collect();
        assert!(missing.is_empty(), "lost entries: {missing:?}");
    }

    #[test]
    fn scopes_are_separate() {
        let t = tempfile::tempdir().unwrap();
        let r = ExternalRecord {
            dir: Some(t.path().to_path_buf()),
        };
        assert!(!r.allows("/p", "/etc/hosts"));
        r.add("/p", ["/etc/hosts"]).unwrap();
        assert!(r.allows("/p", "/etc/hosts"));
        assert!(!r.allows("/q", "/etc/hosts"));
        assert!(!r.allows("global", "/etc/hosts"));
    }
}
