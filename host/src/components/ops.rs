//! What `bb7 tools add | grant | revoke | remove | enable | disable` and the protocol's `tool_*`
//! actions do, in one place: each changes the user's state, and every verb but `add` rewrites the
//! project's lockfile.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::installed::{ComponentStore, Status, ToolsState};
use super::lock;
use super::manifest::{self, Capabilities, Files};
use crate::sandbox::grant::CallCaps;
use crate::sandbox::registry::{GrantPolicy, Linking};
use crate::sandbox::{Access, Grant, Sandbox, ToolComponent};

/// What a component says of its tool (from `describe`, taken once at `add`): what the model sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDescription {
    /// The function name the component gives (the model sees `<component>__<name>`).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its JSON Schema, as text.
    pub parameters_schema: String,
}

/// The name the model calls a component's tool by.
pub fn function_name(component: &str, tool: &str) -> String {
    format!("{component}__{tool}")
}

/// The longest name the model may call a tool by (OpenAI-compatible function names).
const MAX_FUNCTION_NAME: usize = 64;
/// The longest tool description accepted (it goes into every agent request).
const MAX_TOOL_DESCRIPTION: usize = 4096;
/// The longest parameters schema accepted.
const MAX_TOOL_SCHEMA: usize = 16 << 10;

/// What `add` did.
#[derive(Debug, Clone)]
pub struct Added {
    /// The installed component's name.
    pub name: String,
    /// Its sha256.
    pub sha256: String,
    /// The binary the name pointed to before, when it was another one (its grant no longer holds).
    pub replaced: Option<String>,
    /// Where the manifest came from.
    pub manifest_origin: String,
    /// The component's state afterwards.
    pub status: Status,
}

/// The project the CLI acts on: the nearest ancestor of `cwd` holding `.bb7/`, else `cwd`.
pub fn cli_project(cwd: &Path) -> PathBuf {
    let global = crate::paths::state_dir().and_then(|d| d.canonicalize().ok());
    cwd.ancestors()
        .find(|d| {
            let state = d.join(".bb7");
            // A real directory (not a link), and not bb7's own global state directory (`~/.bb7`
            // makes `~` no project).
            std::fs::symlink_metadata(&state).is_ok_and(|m| m.is_dir())
                && state.canonicalize().ok() != global
        })
        .unwrap_or(cwd)
        .to_path_buf()
}

/// Installs the component at `path` (a `.wasm` or a directory). It is compiled and linked under
/// what its manifest requests — a component importing an interface its request does not allow is
/// refused here, naming the import — and asked to describe itself. Nothing is granted; with
/// `enable_in`, it is also enabled for that project (offered once granted). The lockfile is not
/// written.
pub fn add(sandbox: &Sandbox, path: &Path, enable_in: Option<&Path>) -> Result<Added, String> {
    let (found, bytes) = manifest::locate(path, |p| {
        crate::sandbox::registry::read_component(p).map_err(|e| format!("{e:#}"))
    })?;
    let m = &found.manifest;
    let sha = hex::encode(Sha256::digest(&bytes));
    let linking = Linking {
        network: !m.requested.network.is_empty(),
        limits: Some(m.effective_limits()),
        third_party: true,
    };
    let component = sandbox
        .registry()
        .load_third_party(
            &m.name,
            &found.wasm,
            &bytes,
            &sha,
            policy(m.requested.files),
            linking,
        )
        .map_err(|e| format!("{} is refused: {e:#}", found.wasm.display()))?;
    if component.wit_version.as_str() != m.wit {
        return Err(format!(
            "{} is refused: its manifest says wit = {:?}, but the component exports {}",
            found.wasm.display(),
            m.wit,
            component.wit_version.export_name()
        ));
    }
    let component = Arc::new(component);
    let info = sandbox
        .describe(&component, &[])
        .map_err(|e| format!("{} is refused: describe failed: {e}", found.wasm.display()))?;
    if !valid_tool_name(&info.name) {
        return Err(format!(
            "{} is refused: its tool name {:?} must be lower snake case (a-z, 0-9, _; at most 64 characters; no \"__\")",
            found.wasm.display(),
            info.name
        ));
    }
    let function = function_name(&m.name, &info.name);
    if function.len() > MAX_FUNCTION_NAME {
        return Err(format!(
            "{} is refused: the model would call it {function:?}, longer than {MAX_FUNCTION_NAME} characters (shorten the component or tool name)",
            found.wasm.display()
        ));
    }
    if info.description.len() > MAX_TOOL_DESCRIPTION
        || info.parameters_schema.len() > MAX_TOOL_SCHEMA
    {
        return Err(format!(
            "{} is refused: its tool description (at most {MAX_TOOL_DESCRIPTION} bytes) or parameters schema (at most {MAX_TOOL_SCHEMA} bytes) is too long; both go into every request",
            found.wasm.display()
        ));
    }
    if let Some(c) = info
        .description
        .chars()
        .find(|c| (c.is_control() && *c != '\n' && *c != '\t') || manifest::invisible(*c))
    {
        return Err(format!(
            "{} is refused: its tool description contains the control, bidirectional or invisible character U+{:04X}",
            found.wasm.display(),
            c as u32
        ));
    }
    if serde_json::from_str::<serde_json::Value>(&info.parameters_schema)
        .map(|v| !v.is_object())
        .unwrap_or(true)
    {
        return Err(format!(
            "{} is refused: its parameters schema is not a JSON object",
            found.wasm.display()
        ));
    }
    let store = ComponentStore::open_default()?;
    store.put_binary(&sha, &bytes)?;
    let _guard = state_lock();
    let mut state = store.load()?;
    let replaced = state
        .components
        .get(&m.name)
        .map(|c| c.sha256.clone())
        .filter(|old| *old != sha);
    state.install(
        m,
        &sha,
        component.imports.clone(),
        bytes.len() as u64,
        &found.wasm,
    );
    descriptions_put(&mut state, &m.name, &info);
    if let Some(project) = enable_in {
        state.set_enabled(project, &m.name, true)?;
    }
    store.save(&state)?;
    store.prune(&state);
    crate::audit::admin("add", &m.name, enable_in);
    let status = state
        .statuses(enable_in)
        .into_iter()
        .find(|s| s.name == m.name)
        .ok_or("the component vanished after install")?;
    Ok(Added {
        name: m.name.clone(),
        sha256: sha,
        replaced,
        manifest_origin: found.manifest_origin,
        status,
    })
}

/// The tool a component described at `add`, kept in the state file beside the component.
fn descriptions_put(state: &mut ToolsState, name: &str, info: &crate::sandbox::api::ToolInfo) {
    if let Some(c) = state.components.get_mut(name) {
        c.tool = Some(ToolDescription {
            name: info.name.clone(),
            description: info.description.clone(),
            parameters_schema: info.parameters_schema.clone(),
        });
    }
}

fn valid_tool_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !n.contains("__")
}

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

/// Grants `name` `caps` (`None`: everything it requests) and rewrites `project`'s lockfile.
pub fn grant(
    name: &str,
    caps: Option<Capabilities>,
    project: Option<&Path>,
) -> Result<Status, String> {
    change(project, |state| {
        let installed = state.component(name)?.clone();
        let caps = match caps {
            Some(c) => c.validated()?,
            None => installed.requested.clone(),
        };
        if caps.network.is_empty() && caps.within(&installed.requested) {
            if let Some(i) = installed
                .imports
                .iter()
                .find(|i| i.starts_with("wasi:sockets/"))
            {
                return Err(format!(
                    "{name} imports {i}: it cannot run without a network grant (grant --network, or --all)"
                ));
            }
        }
        state.grant(name, caps)?;
        Ok(())
    })?;
    crate::audit::admin("grant", name, project);
    status_of(name, project)
}

/// Withdraws `name`'s grant and rewrites `project`'s lockfile.
pub fn revoke(name: &str, project: Option<&Path>) -> Result<Status, String> {
    change(project, |state| state.revoke(name))?;
    crate::audit::admin("revoke", name, project);
    status_of(name, project)
}

/// Uninstalls `name` and rewrites `project`'s lockfile.
pub fn remove(name: &str, project: Option<&Path>) -> Result<(), String> {
    change(project, |state| state.remove(name))?;
    crate::audit::admin("remove", name, project);
    if let Ok(store) = ComponentStore::open_default() {
        if let Ok(state) = store.load() {
            store.prune(&state);
        }
    }
    Ok(())
}

/// Enables or disables `name` for `project` and rewrites its lockfile (creating `.bb7/`).
pub fn set_enabled(name: &str, project: &Path, enabled: bool) -> Result<Status, String> {
    let _guard = state_lock();
    let store = ComponentStore::open_default()?;
    let mut state = store.load()?;
    state.set_enabled(project, name, enabled)?;
    store.save(&state)?;
    lock::write(project, &state.statuses(Some(project)), true)?;
    drop(_guard);
    crate::audit::admin(
        if enabled { "enable" } else { "disable" },
        name,
        Some(project),
    );
    status_of(name, Some(project))
}

/// Every installed component as it stands for `project`.
pub fn statuses(project: Option<&Path>) -> Result<Vec<Status>, String> {
    let store = ComponentStore::open_default()?;
    Ok(store.load()?.statuses(project))
}

/// The sha256 each component's grant was given for (whether or not it still holds), by name.
pub fn grant_shas() -> Result<std::collections::BTreeMap<String, String>, String> {
    let store = ComponentStore::open_default()?;
    Ok(store
        .load()?
        .grants
        .into_iter()
        .map(|(n, g)| (n, g.sha256))
        .collect())
}

fn status_of(name: &str, project: Option<&Path>) -> Result<Status, String> {
    statuses(project)?
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| format!("no tool component named {name:?} is installed"))
}

/// Loads, changes and saves the state, then rewrites `project`'s lockfile when it has `.bb7/` or
/// anything is enabled there.
fn change(
    project: Option<&Path>,
    f: impl FnOnce(&mut ToolsState) -> Result<(), String>,
) -> Result<(), String> {
    let _guard = state_lock();
    let store = ComponentStore::open_default()?;
    let mut state = store.load()?;
    f(&mut state)?;
    store.save(&state)?;
    if let Some(p) = project {
        // A project where something is enabled gets its lockfile even without `.bb7/` yet (`add
        // --project` enables in any directory), so the next `audit --check` agrees with it.
        let statuses = state.statuses(Some(p));
        let create = statuses.iter().any(|s| s.enabled);
        lock::write(p, &statuses, create)?;
    }
    Ok(())
}

/// Serialises changes to the state file within this process.
fn state_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `audit --check`: every difference between `project`'s lockfile and what would be offered now.
/// A missing lockfile is a difference when anything would be offered.
pub fn check(project: &Path) -> Result<Vec<String>, String> {
    let now = lock::Lock::current(&statuses(Some(project))?);
    match lock::read(project).map_err(|e| e.to_string())? {
        Some(locked) => Ok(locked.differences(&now)),
        None if now.components.is_empty() => Ok(Vec::new()),
        None => {
            let mut out = vec![format!(
                "{} does not exist, but {} component(s) would be offered",
                project.join(".bb7").join(lock::LOCK_FILE).display(),
                now.components.len()
            )];
            let empty = lock::Lock {
                components: Vec::new(),
                ..now.clone()
            };
            out.extend(empty.differences(&now));
            Ok(out)
        }
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
) -> Result<Arc<ToolComponent>, String> {
    let granted = status
        .granted
        .clone()
        .ok_or_else(|| format!("{} is not granted", status.name))?;
    let sha = &status.installed.sha256;
    let limits = status.installed.effective_limits();
    let network = !granted.network.is_empty();
    let key = format!("{sha}/{network}/{limits:?}/{:?}", granted.files);
    if let Some(c) = loaded.lock().ok().and_then(|m| m.get(&key).cloned()) {
        if c.name == status.name {
            return Ok(c);
        }
    }
    let store = ComponentStore::open_default()?;
    let path = store.wasm_path(sha);
    let bytes = crate::sandbox::registry::read_component(&path).map_err(|e| format!("{e:#}"))?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if &actual != sha {
        return Err(format!(
            "{} was changed on disk (sha256 {actual}, approved {sha}); it is not run — add and grant it again",
            path.display()
        ));
    }
    let linking = Linking {
        network,
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
        .map_err(|e| format!("{}: {e:#}", status.name))?;
    let c = Arc::new(c);
    if let Ok(mut m) = loaded.lock() {
        m.insert(key, Arc::clone(&c));
    }
    Ok(c)
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
    }
}
