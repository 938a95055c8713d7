//! Managing the user's components: what `bb7 tools add | grant | revoke | remove | enable |
//! disable` and the protocol's `tool_*` actions do, in one place. Each changes the user's state
//! under the state file's lock (held across processes), and every verb but `add` rewrites the
//! project's lockfile. Running a component is [`super::load`]'s job.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::error::{ComponentError, Refusal};
use super::installed::{
    ComponentStore, SkippedTool, Status, ToolDescription, ToolsState, function_name,
};
use super::load::policy;
use super::lock;
use super::manifest::{self, Capabilities};
use crate::sandbox::api::ToolInfo;
use crate::sandbox::registry::Linking;
use crate::sandbox::runner::Sandbox;

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
    /// How long compiling it took, in milliseconds (its native code is cached, so the first call
    /// does not compile again).
    pub compile_ms: f64,
    /// What the author should know: a request the component cannot use (see [`files_note`]).
    pub note: Option<String>,
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
pub fn add(
    sandbox: &Sandbox,
    path: &Path,
    enable_in: Option<&Path>,
) -> Result<Added, ComponentError> {
    let (found, bytes) = manifest::locate(path)?;
    let refused = |why: Refusal| ComponentError::Refused {
        path: found.wasm.clone(),
        why,
    };
    let m = &found.manifest;
    let sha = hex::encode(Sha256::digest(&bytes));
    let linking = Linking {
        network: !m.requested.network.is_empty(),
        http: !m.requested.http.is_empty(),
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
        .map_err(|e| refused(Refusal::Load(e)))?;
    let component = Arc::new(component);
    // A hook is not offered to the model: its one export is asked at its points (hooks/).
    if let Some(why) = hook_mismatch(m, &component) {
        return Err(refused(Refusal::Hook(why)));
    }
    let tools = match component.generic() {
        _ if !m.hook.is_empty() => Vec::new(),
        Some(exports) => {
            if !m.wit.is_empty() {
                return Err(refused(Refusal::WitMismatch {
                    manifest: m.wit.clone(),
                    exports: component.wit_version.export_name(),
                }));
            }
            generic_tools(&m.name, m, exports).map_err(refused)?
        }
        None => {
            if component.wit_version.as_str() != m.wit {
                return Err(refused(Refusal::WitMismatch {
                    manifest: m.wit.clone(),
                    exports: component.wit_version.export_name(),
                }));
            }
            let info = sandbox
                .describe(&component, &[])
                .map_err(|e| refused(Refusal::Describe(e)))?;
            check_tool(&m.name, &info).map_err(refused)?;
            vec![ToolDescription {
                name: info.name,
                description: info.description,
                parameters_schema: info.parameters_schema,
                export: None,
                undocumented: false,
            }]
        }
    };
    let store = ComponentStore::open_default()?;
    // Under the lock: a `remove` elsewhere prunes binaries no installed component points to yet.
    let _guard = store.lock()?;
    store.put_binary(&sha, &bytes)?;
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
    if let Some(c) = state.components.get_mut(&m.name) {
        c.wit = component.wit_version.as_str().to_string();
        c.hook = m.hook.clone();
        if !m.hook.is_empty() {
            c.tools = Vec::new();
        } else if component.generic().is_some() {
            c.tools = tools;
            c.skipped = component
                .generic()
                .map(|g| {
                    g.skipped
                        .iter()
                        .map(|s| SkippedTool {
                            export: s.export.clone(),
                            reason: s.reason.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
        } else {
            c.tool = tools.into_iter().next();
        }
    }
    if let Some(project) = enable_in {
        state.set_enabled(project, &m.name, true)?;
    }
    store.save(&state)?;
    store.prune(&state);
    audit_change("add", &m.name, enable_in);
    let status = state
        .statuses(enable_in)
        .into_iter()
        .find(|s| s.name == m.name)
        .ok_or(ComponentError::Vanished)?;
    Ok(Added {
        name: m.name.clone(),
        sha256: sha,
        replaced,
        manifest_origin: found.manifest_origin,
        status,
        compile_ms: component.load_ms,
        note: files_note(m.requested.files, &component.imports),
    })
}

/// The export a hook answers through (ECOSYSTEM-PROTOCOL.md §8).
pub const HOOK_EXPORT: &str = "bb7:hook/hook@0.1.0#decide";

/// Why a component and its manifest disagree about being a hook, if they do.
fn hook_mismatch(
    m: &manifest::Manifest,
    component: &crate::sandbox::ToolComponent,
) -> Option<&'static str> {
    let exports_hook = component
        .generic()
        .is_some_and(|g| g.functions.iter().any(|f| f.export == HOOK_EXPORT));
    match (m.hook.is_empty(), exports_hook) {
        (false, false) => {
            Some("this manifest names hook points but the component does not export it")
        }
        (true, true) => Some("this component exports it but its manifest names no hook points"),
        _ => None,
    }
}

/// A component that requests a directory but imports no `wasi:filesystem/preopens` can never see
/// it: the usual cause is a JavaScript world without `wasi:filesystem`. Says how to fix it.
pub fn files_note(files: manifest::Files, imports: &[String]) -> Option<String> {
    if files == manifest::Files::None
        || imports
            .iter()
            .any(|i| i.starts_with("wasi:filesystem/preopens@"))
    {
        return None;
    }
    Some(format!(
        "it requests files = \"{}\" but imports no wasi:filesystem/preopens, so it can never see them: a JavaScript (jco / componentize-js) component needs a world that includes `import wasi:filesystem/preopens@0.2.x;` and `import wasi:filesystem/types@0.2.x;` (doc/components.md, JavaScript); otherwise drop `files` from the manifest",
        files.as_str()
    ))
}

/// Checks the tool a `bb7:tool` component described: its name, the name the model calls, and
/// the sizes and characters of its description and schema.
fn check_tool(component: &str, info: &ToolInfo) -> Result<(), Refusal> {
    if !valid_tool_name(&info.name) {
        return Err(Refusal::ToolName(info.name.clone()));
    }
    check_description(
        component,
        &info.name,
        &info.description,
        &info.parameters_schema,
    )
}

fn check_description(
    component: &str,
    tool: &str,
    description: &str,
    schema: &str,
) -> Result<(), Refusal> {
    let function = function_name(component, tool);
    if function.len() > MAX_FUNCTION_NAME {
        return Err(Refusal::FunctionName {
            function,
            max: MAX_FUNCTION_NAME,
        });
    }
    if description.len() > MAX_TOOL_DESCRIPTION || schema.len() > MAX_TOOL_SCHEMA {
        return Err(Refusal::TooLong {
            description: MAX_TOOL_DESCRIPTION,
            schema: MAX_TOOL_SCHEMA,
        });
    }
    if let Some(c) = description
        .chars()
        .find(|c| (c.is_control() && *c != '\n' && *c != '\t') || manifest::invisible(*c))
    {
        return Err(Refusal::Invisible(c as u32));
    }
    if serde_json::from_str::<serde_json::Value>(schema)
        .map(|v| !v.is_object())
        .unwrap_or(true)
    {
        return Err(Refusal::Schema);
    }
    Ok(())
}

/// A generic component's tools: one per offered exported function, described by the manifest's
/// `[tools.<function>]` (the tool's snake_case name or the WIT name), else by the component's
/// `package-docs`; parameter descriptions from `[tools.<function>.params]`.
fn generic_tools(
    component: &str,
    m: &manifest::Manifest,
    exports: &crate::sandbox::dynamic::GenericExports,
) -> Result<Vec<ToolDescription>, Refusal> {
    let mut out = Vec::new();
    for f in &exports.functions {
        let wit_name = f.export.rsplit('#').next().unwrap_or(&f.export);
        let doc = m.tools.get(&f.tool).or_else(|| m.tools.get(wit_name));
        let description = doc
            .and_then(|d| d.description.clone())
            .or_else(|| f.docs.clone())
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty());
        let mut schema = f.schema.clone();
        if let (Some(doc), Some(props)) = (
            doc,
            schema.get_mut("properties").and_then(|p| p.as_object_mut()),
        ) {
            for (param, text) in &doc.params {
                if let Some(p) = props.get_mut(param).and_then(|p| p.as_object_mut()) {
                    p.insert("description".into(), serde_json::json!(text));
                }
            }
        }
        let t = ToolDescription {
            name: f.tool.clone(),
            undocumented: description.is_none(),
            description: description.unwrap_or_else(|| format!("{} (no description)", f.export)),
            parameters_schema: schema.to_string(),
            export: Some(f.export.clone()),
        };
        if !valid_tool_name(&t.name) {
            return Err(Refusal::ToolName(t.name));
        }
        check_description(component, &t.name, &t.description, &t.parameters_schema)?;
        out.push(t);
    }
    Ok(out)
}

fn valid_tool_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !n.contains("__")
}

/// Grants `name` `caps` (`None`: everything it requests) and rewrites `project`'s lockfile.
pub fn grant(
    name: &str,
    caps: Option<Capabilities>,
    project: Option<&Path>,
) -> Result<Status, ComponentError> {
    change(project, |state| {
        let installed = state.component(name)?.clone();
        let caps = match caps {
            Some(c) => c.validated()?,
            None => installed.requested.clone(),
        };
        state.grant(name, caps)?;
        Ok(())
    })?;
    audit_change("grant", name, project);
    status_of(name, project)
}

/// Withdraws `name`'s grant and rewrites `project`'s lockfile.
pub fn revoke(name: &str, project: Option<&Path>) -> Result<Status, ComponentError> {
    change(project, |state| state.revoke(name))?;
    audit_change("revoke", name, project);
    status_of(name, project)
}

/// Uninstalls `name` and rewrites `project`'s lockfile.
pub fn remove(name: &str, project: Option<&Path>) -> Result<(), ComponentError> {
    change(project, |state| state.remove(name))?;
    audit_change("remove", name, project);
    if let Ok(store) = ComponentStore::open_default()
        && let (Ok(_guard), Ok(state)) = (store.lock(), store.load())
    {
        store.prune(&state);
    }
    Ok(())
}

/// Enables or disables `name` for `project` and rewrites its lockfile (creating `.bb7/`).
pub fn set_enabled(name: &str, project: &Path, enabled: bool) -> Result<Status, ComponentError> {
    let store = ComponentStore::open_default()?;
    let _guard = store.lock()?;
    let mut state = store.load()?;
    state.set_enabled(project, name, enabled)?;
    store.save(&state)?;
    lock::write(project, &state.statuses(Some(project)), true)?;
    drop(_guard);
    audit_change(
        if enabled { "enable" } else { "disable" },
        name,
        Some(project),
    );
    status_of(name, Some(project))
}

/// Every installed component as it stands for `project`.
pub fn statuses(project: Option<&Path>) -> Result<Vec<Status>, ComponentError> {
    let store = ComponentStore::open_default()?;
    Ok(store.load()?.statuses(project))
}

/// The sha256 each component's grant was given for (whether or not it still holds), by name.
pub fn grant_shas() -> Result<std::collections::BTreeMap<String, String>, ComponentError> {
    let store = ComponentStore::open_default()?;
    Ok(store
        .load()?
        .grants
        .into_iter()
        .map(|(n, g)| (n, g.sha256))
        .collect())
}

fn status_of(name: &str, project: Option<&Path>) -> Result<Status, ComponentError> {
    statuses(project)?
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ComponentError::Gone(name.to_string()))
}

/// Loads, changes and saves the state under its lock, then rewrites `project`'s lockfile when it
/// has `.bb7/` or anything is enabled there.
fn change(
    project: Option<&Path>,
    f: impl FnOnce(&mut ToolsState) -> Result<(), ComponentError>,
) -> Result<(), ComponentError> {
    let store = ComponentStore::open_default()?;
    let _guard = store.lock()?;
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

/// `audit --check`: every difference between `project`'s lockfile and what would be offered now.
/// A missing lockfile is a difference when anything would be offered.
pub fn check(project: &Path) -> Result<Vec<String>, ComponentError> {
    let now = lock::Lock::current(&statuses(Some(project))?);
    match lock::read(project)? {
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

/// Records a change to the installed components (`add`, `grant`, `revoke`, `remove`, `enable`,
/// `disable`) of `component` in the audit chain, made by the user: what the component now is
/// (`component_sha256`), what it holds (`grants`, null when nothing), whether it is enabled for
/// `project`, and the sha256 of `project`'s lockfile afterwards (`lock_sha256`). Called once the
/// change is saved.
fn audit_change(verb: &str, component: &str, project: Option<&Path>) {
    use crate::audit::{Actor, Entry};
    let mut e = Entry::new(verb, &Actor::User, project).set("component", component);
    if let Ok(statuses) = statuses(project)
        && let Some(s) = statuses.iter().find(|s| s.name == component)
    {
        e = e
            .set("component_sha256", s.installed.sha256.clone())
            .set(
                "grants",
                s.granted
                    .as_ref()
                    .and_then(|g| serde_json::to_value(g).ok())
                    .unwrap_or(serde_json::Value::Null),
            )
            .set("enabled", s.enabled);
    }
    if let Some(p) = project {
        let lock = p.join(".bb7").join(lock::LOCK_FILE);
        if let Ok(bytes) = crate::store::read_regular_path(&lock) {
            e = e.set("lock_sha256", crate::audit::sha256_hex(&bytes));
        }
    }
    crate::audit::record(e);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_request_without_a_filesystem_import_names_the_js_world_fix() {
        let none: Vec<String> = vec!["wasi:cli/stdout@0.2.3".into()];
        let note = files_note(manifest::Files::ProjectRead, &none).expect("a note");
        assert!(note.contains("wasi:filesystem/preopens"), "{note}");
        assert!(note.contains("JavaScript"), "{note}");
        let fs = vec!["wasi:filesystem/preopens@0.2.0".to_string()];
        assert_eq!(files_note(manifest::Files::ProjectRead, &fs), None);
        assert_eq!(files_note(manifest::Files::None, &none), None);
    }
}
