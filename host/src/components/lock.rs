//! `.bb7/tools.lock`: what the user approved for a project — every third-party component the model
//! would be offered there, with its exact binary, imports, grants and limits — and the comparison
//! `bb7 tools audit --check` makes between it and what would be offered now.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::ComponentError;
pub use super::error::LockError;
use super::installed::Status;
use super::manifest::Capabilities;
use crate::store::{self, StateDir};

/// The lockfile's name inside `.bb7/`.
pub const LOCK_FILE: &str = "tools.lock";
/// The lockfile format version.
const FORMAT: u32 = 1;

/// The engine every component is run by, as the lockfile records it.
pub fn engine() -> String {
    "wasmtime 48.0.8 (component model, WASI Preview 2)".to_string()
}

/// One approved component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedComponent {
    /// The component's name (the model sees `<name>__<tool>`).
    pub name: String,
    /// Its manifest version.
    pub version: String,
    /// Hex sha256 of the binary approved.
    pub sha256: String,
    /// The contract version.
    pub wit: String,
    /// Every interface it imports.
    pub imports: Vec<String>,
    /// The capabilities granted.
    pub granted: Capabilities,
    /// Memory limit, bytes.
    pub memory_bytes: u64,
    /// Wall time per call, milliseconds.
    pub wall_time_ms: u64,
    /// Result size limit, bytes.
    pub result_bytes: u64,
    /// The points it is asked at as a hook (omitted when it is no hook, so a lockfile without
    /// hooks reads and writes as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook: Vec<String>,
}

/// The lockfile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// The format version.
    pub format: u32,
    /// The engine that runs the components.
    pub engine: String,
    /// The approved components, by name.
    #[serde(default, rename = "component")]
    pub components: Vec<LockedComponent>,
}

impl Lock {
    /// The lock for what `statuses` would offer now.
    pub fn current(statuses: &[Status]) -> Lock {
        let mut components: Vec<LockedComponent> = statuses
            .iter()
            .filter(|s| s.offered())
            .map(|s| {
                let l = s.installed.effective_limits();
                LockedComponent {
                    name: s.name.clone(),
                    version: s.installed.version.clone(),
                    sha256: s.installed.sha256.clone(),
                    wit: s.installed.wit.clone(),
                    imports: s.installed.imports.clone(),
                    granted: s.granted.clone().unwrap_or_default(),
                    memory_bytes: l.memory_bytes,
                    wall_time_ms: l.wall_time.as_millis() as u64,
                    result_bytes: l.result_bytes as u64,
                    hook: s.installed.hook.clone(),
                }
            })
            .collect();
        components.sort_by(|a, b| a.name.cmp(&b.name));
        Lock {
            format: FORMAT,
            engine: engine(),
            components,
        }
    }

    /// The TOML text, with a header saying what the file is.
    pub fn to_text(&self) -> Result<String, ComponentError> {
        let body = toml::to_string_pretty(self).map_err(ComponentError::LockText)?;
        Ok(format!(
            "# The tool components approved for this project, as `bb7 tools grant`, `revoke`, `remove`,\n# `enable` and `disable` left them. Commit it; `bb7 tools audit --check` fails when what would\n# be offered to the model differs.\n{body}"
        ))
    }

    /// Parses lockfile text (errors name the line and column, never the content).
    pub fn parse(text: &str) -> Result<Lock, LockError> {
        parse_at(Path::new(LOCK_FILE), text)
    }

    /// Every difference between `self` (the lockfile) and `now` (what would be offered), worded
    /// for a reviewer; empty when they agree.
    pub fn differences(&self, now: &Lock) -> Vec<String> {
        let mut out = Vec::new();
        if self.engine != now.engine {
            out.push(format!(
                "engine: locked {:?}, now {:?}",
                self.engine, now.engine
            ));
        }
        for n in &now.components {
            let Some(l) = self.components.iter().find(|l| l.name == n.name) else {
                out.push(format!(
                    "{}: new component, not in the lockfile (sha256 {}, granted {})",
                    n.name,
                    n.sha256,
                    n.granted.summary()
                ));
                continue;
            };
            if l.sha256 != n.sha256 {
                out.push(format!(
                    "{}: sha256 changed: locked {}, now {}",
                    n.name, l.sha256, n.sha256
                ));
            }
            let widened = n.granted.excess(&l.granted);
            if !widened.is_empty() {
                out.push(format!(
                    "{}: grant widened: {} (locked: {})",
                    n.name,
                    widened.join(", "),
                    l.granted.summary()
                ));
            }
            let narrowed = l.granted.excess(&n.granted);
            if !narrowed.is_empty() {
                out.push(format!(
                    "{}: grant narrowed: no longer {}",
                    n.name,
                    narrowed.join(", ")
                ));
            }
            if l.version != n.version || l.wit != n.wit {
                out.push(format!(
                    "{}: version changed: locked {} (wit {}), now {} (wit {})",
                    n.name, l.version, l.wit, n.version, n.wit
                ));
            }
            if l.hook != n.hook {
                let points = |p: &[String]| {
                    if p.is_empty() {
                        "none".to_string()
                    } else {
                        p.join(", ")
                    }
                };
                out.push(format!(
                    "{}: hook points changed: locked {}, now {}",
                    n.name,
                    points(&l.hook),
                    points(&n.hook)
                ));
            }
            if l.imports != n.imports {
                out.push(format!(
                    "{}: imports changed: now {}",
                    n.name,
                    n.imports.join(", ")
                ));
            }
            if (l.memory_bytes, l.wall_time_ms, l.result_bytes)
                != (n.memory_bytes, n.wall_time_ms, n.result_bytes)
            {
                out.push(format!(
                    "{}: limits changed: locked memory {} B, wall {} ms, result {} B; now memory {} B, wall {} ms, result {} B",
                    n.name,
                    l.memory_bytes,
                    l.wall_time_ms,
                    l.result_bytes,
                    n.memory_bytes,
                    n.wall_time_ms,
                    n.result_bytes
                ));
            }
        }
        for l in &self.components {
            if !now.components.iter().any(|n| n.name == l.name) {
                out.push(format!(
                    "{}: missing: in the lockfile but not offered now (removed, disabled, revoked, or its binary changed)",
                    l.name
                ));
            }
        }
        out
    }
}

/// The 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut at = offset.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Parses lockfile `text` read from `path`; errors never quote the text.
fn parse_at(path: &Path, text: &str) -> Result<Lock, LockError> {
    let lock: Lock = toml::from_str(text).map_err(|e| {
        let (line, column) = line_col(text, e.span().map_or(0, |s| s.start));
        LockError::Parse {
            path: path.to_path_buf(),
            line,
            column,
        }
    })?;
    if lock.format != FORMAT {
        return Err(LockError::Format {
            path: path.to_path_buf(),
            expected: FORMAT,
        });
    }
    Ok(lock)
}

/// Reads `<project>/.bb7/tools.lock`; `Ok(None)` when there is none. Neither `.bb7` nor the
/// lockfile is followed when it is a symbolic link, and a FIFO or device is refused without
/// blocking.
pub fn read(project: &Path) -> Result<Option<Lock>, LockError> {
    let state = project.join(".bb7");
    let path = state.join(LOCK_FILE);
    let root = match StateDir::open(project, false) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LockError::Read(project.to_path_buf(), e)),
    };
    let dir = match store::project::open_dir_nofollow(root.dir(), ".bb7", ".bb7") {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // `open_dir_nofollow` words a link as PermissionDenied.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(LockError::Link(state));
        }
        Err(e) => return Err(LockError::Read(state, e)),
    };
    let bytes = match store::read_regular_nofollow(&dir, LOCK_FILE) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(LockError::Link(path)),
        Err(e) => return Err(LockError::Read(path, e)),
    };
    let text = String::from_utf8(bytes).map_err(|_| LockError::NotUtf8(path.clone()))?;
    parse_at(&path, &text).map(Some)
}

/// Writes `<project>/.bb7/tools.lock` (atomically) for `statuses`, when the project has a `.bb7/`
/// (or `create`). Returns whether it wrote.
pub fn write(project: &Path, statuses: &[Status], create: bool) -> Result<bool, ComponentError> {
    let state = project.join(".bb7");
    let existed = match std::fs::symlink_metadata(&state) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(ComponentError::LockLink(state));
        }
        Ok(m) if m.is_dir() => true,
        _ if !create => return Ok(false),
        _ => false,
    };
    let dir = StateDir::open(&state, create).map_err(|e| ComponentError::io(&state, e))?;
    // A `.bb7/` made here gets the default `.gitignore` (chats private, the lockfile committable);
    // an older default that ignored the lockfile is brought up to date.
    if let Err(e) = store::project::ensure_state_gitignore(dir.dir(), !existed) {
        tracing::warn!("cannot write {}/.gitignore: {e}", state.display());
    }
    let text = Lock::current(statuses).to_text()?;
    store::write_atomic(dir.dir(), LOCK_FILE, text.as_bytes())
        .map_err(|e| ComponentError::io(state.join(LOCK_FILE), e))?;
    Ok(true)
}
