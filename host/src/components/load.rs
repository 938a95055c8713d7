//! Running an installed component under its grant: the component loaded and checked against the
//! approved sha256 ([`load_granted`]), the one mapping from a `files` grant to the directory a call
//! receives ([`call_dir`], shared by agent mode and `bb7 tools call`), and the capabilities of one
//! call ([`call_caps`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::error::ComponentError;
use super::installed::{ComponentStore, Status};
use super::manifest::{Capabilities, Files};
use super::view::ViewSlot;
use crate::sandbox::grant::{Access, CallCaps, Grant};
use crate::sandbox::limits::OutputLimit;
use crate::sandbox::outdir::OutputDir;
use crate::sandbox::registry::{GrantPolicy, Linking, ToolComponent, read_component};
use crate::sandbox::runner::Sandbox;

/// The most files one `output-write` call may leave.
pub const MAX_OUTPUT_FILES: usize = 100;
/// The most bytes they may hold together.
pub const MAX_OUTPUT_BYTES: u64 = 16 << 20;
/// What one `output-write` call may write while it runs: the file bytes it may keep, and entries
/// (files, directories, links) enough for the files it may keep and their directories. Enforced per
/// write, so the disk never holds more.
pub const OUTPUT_LIMIT: OutputLimit = OutputLimit {
    bytes: MAX_OUTPUT_BYTES,
    entries: 1024,
};

/// How a grant's directory is described and accessed.
pub fn policy(files: Files) -> GrantPolicy {
    match files {
        Files::None => GrantPolicy {
            directory: "none",
            access: Access::ReadOnly,
        },
        Files::ProjectRead => GrantPolicy {
            directory: "a read-only view of the project (no .git/, .bb7/, ignored or deny-listed files, no links)",
            access: Access::ReadOnly,
        },
        Files::OutputWrite => GrantPolicy {
            directory: "an empty directory whose files become the reply's proposed files",
            access: Access::ReadWrite,
        },
    }
}

/// The component of an offered `status`, ready to run under its grant: the stored binary is read
/// and must still hash to the approved sha256 (a replaced file is refused), and it is linked with
/// exactly the interfaces the grant allows. Loaded components are kept in `loaded` (the
/// [`crate::toolhost::ToolHost`]'s, which calls this).
pub fn load_granted(
    sandbox: &Sandbox,
    status: &Status,
    loaded: &Mutex<HashMap<String, Arc<ToolComponent>>>,
) -> Result<Arc<ToolComponent>, ComponentError> {
    let granted = status
        .granted
        .clone()
        .ok_or_else(|| ComponentError::NotGranted(status.name.clone()))?;
    let sha = &status.installed.sha256;
    let limits = status.installed.effective_limits();
    let network = !granted.network.is_empty();
    // wasi:http is linked for a component whose manifest requests origins (`add` refused any
    // other importer); the grant decides which requests pass (`sandbox/http.rs`).
    let http = !status.installed.requested.http.is_empty();
    let key = format!("{sha}/{network}/{http}/{limits:?}/{:?}", granted.files);
    if let Some(c) = loaded.lock().ok().and_then(|m| m.get(&key).cloned())
        && c.name == status.name
    {
        return Ok(c);
    }
    let store = ComponentStore::open_default()?;
    let path = store.wasm_path(sha);
    let bytes = read_component(&path).map_err(ComponentError::Read)?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if &actual != sha {
        return Err(ComponentError::ChangedOnDisk {
            path,
            actual,
            approved: sha.clone(),
        });
    }
    let linking = Linking {
        network,
        http,
        limits: Some(limits),
        third_party: true,
    };
    let c = sandbox
        .registry()
        .load_third_party(
            &status.name,
            &path,
            &bytes,
            sha,
            policy(granted.files),
            linking,
        )
        .map_err(|err| ComponentError::Load {
            name: status.name.clone(),
            err,
        })?;
    let c = Arc::new(c);
    if let Ok(mut m) = loaded.lock() {
        m.insert(key, Arc::clone(&c));
    }
    Ok(c)
}

/// Where an `output-write` call writes.
#[derive(Debug, Clone, Copy)]
pub enum OutputTo<'a> {
    /// A fresh private directory, whose files the caller collects after the call (agent mode: they
    /// become the reply's proposed files).
    Fresh,
    /// A directory the user named, which must be empty (so the component sees nothing of what is
    /// there); the files are left in it (`bb7 tools call --dir`).
    Dir(&'a Path),
}

/// The directory one call receives, and what must outlive the call.
#[derive(Default)]
pub struct CallDir {
    /// The directory mounted at `/` (none for `files = none`).
    pub grant: Option<Grant>,
    /// A fresh output directory ([`OutputTo::Fresh`]), to collect the call's files from.
    pub output: Option<OutputDir>,
    /// What the call may write as it runs: [`OUTPUT_LIMIT`] for `output-write`, else nothing.
    pub limit: Option<OutputLimit>,
}

/// The one mapping from a `files` grant to the directory a call receives, for agent mode and the
/// CLI alike: nothing for `none`; for `project-read`, a read-only view of `project` under the deny
/// list of `settings` (built once per `views`); for `output-write`, an empty directory granted
/// read-write whose writes are metered ([`OUTPUT_LIMIT`]).
pub fn call_dir(
    files: Files,
    project: &Path,
    settings: impl FnOnce() -> Vec<(String, String)>,
    views: &ViewSlot,
    output: OutputTo<'_>,
) -> Result<CallDir, ComponentError> {
    match files {
        Files::None => Ok(CallDir::default()),
        Files::ProjectRead => Ok(CallDir {
            grant: Some(views.grant(project, settings)?),
            ..CallDir::default()
        }),
        Files::OutputWrite => {
            let (grant, output) = match output {
                OutputTo::Fresh => {
                    let d = OutputDir::new().map_err(ComponentError::OutputDirCreate)?;
                    let g = Grant::new(d.path(), Access::ReadWrite)
                        .map_err(ComponentError::OutputDirCreate)?;
                    (g, Some(d))
                }
                OutputTo::Dir(dir) => {
                    let empty = std::fs::read_dir(dir)
                        .map_err(|e| ComponentError::io(dir, e))?
                        .next()
                        .is_none();
                    if !empty {
                        return Err(ComponentError::OutputNotEmpty(dir.to_path_buf()));
                    }
                    let g = Grant::new(dir, Access::ReadWrite).map_err(|err| {
                        ComponentError::Grant {
                            path: dir.to_path_buf(),
                            err,
                        }
                    })?;
                    (g, None)
                }
            };
            Ok(CallDir {
                grant: Some(grant),
                output,
                limit: Some(OUTPUT_LIMIT),
            })
        }
    }
}

/// What one call of a granted component receives: `dir` as its directory (when its grant has
/// one), its network and its environment.
pub fn call_caps(granted: &Capabilities, dir: Option<Grant>) -> CallCaps {
    CallCaps {
        dir: if granted.files == Files::None {
            None
        } else {
            dir
        },
        network: granted.network.clone(),
        env: granted.env.clone(),
        http: granted.http.clone(),
    }
}
