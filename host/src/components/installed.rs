//! The user's third-party components: what is installed (`~/.bb7/components/<sha256>.wasm`), what
//! each was granted (pinned to its sha256) and where it is enabled, kept in `~/.bb7/tools.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::ComponentError;
use super::manifest::{Capabilities, Manifest, ManifestLimits};
use crate::sandbox::limits::Limits;
use crate::store::{self, StateDir};

/// The state file, in the global state directory.
pub const STATE_FILE: &str = "tools.json";
/// The lock every change to the state file holds, in the global state directory.
const STATE_LOCK: &str = "tools.json.lock";
/// Where component binaries are kept, by sha256, in the global state directory.
const COMPONENTS_DIR: &str = "components";

/// What a component says of its tool (from `describe`, taken once at `add`): what the model sees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDescription {
    /// The function name the component gives (the model sees `<component>__<name>`).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its JSON Schema, as text.
    pub parameters_schema: String,
    /// A generic component's tool: the exported function it calls, as WIT names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<String>,
    /// A generic component's tool with no description from its manifest or its `package-docs`
    /// (the model sees only its name and schema).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undocumented: bool,
}

/// An exported function of a generic component that is not offered, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedTool {
    /// The export as WIT names it.
    pub export: String,
    /// Why it is not offered.
    pub reason: String,
}

/// The name the model calls a component's tool by.
pub fn function_name(component: &str, tool: &str) -> String {
    format!("{component}__{tool}")
}

/// One installed component: the binary its name points to and what its manifest says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Installed {
    /// Hex sha256 of the component binary.
    pub sha256: String,
    /// The manifest's version.
    pub version: String,
    /// The contract version.
    pub wit: String,
    /// The manifest's description.
    pub description: String,
    /// What it requests.
    pub requested: Capabilities,
    /// Tighter limits it asked for.
    #[serde(default)]
    pub limits: ManifestLimits,
    /// Every interface it imports.
    pub imports: Vec<String>,
    /// Its size in bytes.
    pub size: u64,
    /// The file it was added from.
    pub source: String,
    /// When it was added (RFC 3339).
    pub added: String,
    /// The tool it described at `add` (what the model is offered).
    #[serde(default)]
    pub tool: Option<ToolDescription>,
    /// A generic component's tools (one per exported function), from `add`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDescription>,
    /// A generic component's exported functions that are not offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedTool>,
    /// A hook's points (its manifest's `hook`); empty for a tool component.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook: Vec<String>,
}

impl Installed {
    /// Every tool it offers: the one a `bb7:tool` component described, or a generic component's.
    pub fn offered_tools(&self) -> Vec<&ToolDescription> {
        self.tool.iter().chain(self.tools.iter()).collect()
    }

    /// Whether it is a hook (ECOSYSTEM-PROTOCOL.md §8): asked at its points, offered to no model.
    pub fn is_hook(&self) -> bool {
        !self.hook.is_empty()
    }

    /// Whether it is a generic component (its exported functions are its tools).
    pub fn is_generic(&self) -> bool {
        self.wit == "generic"
    }

    /// The limits its calls run under.
    pub fn effective_limits(&self) -> Limits {
        self.limits.apply(Limits::default()).unwrap_or_default()
    }
}

/// What the user approved for one component, pinned to the binary it was approved for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrantRecord {
    /// The sha256 the grant holds for; any other binary under the name has no grant.
    pub sha256: String,
    /// The capabilities granted.
    pub granted: Capabilities,
    /// When (RFC 3339).
    pub at: String,
}

/// Per-project settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjectTools {
    /// Components enabled for the project, sorted.
    #[serde(default)]
    pub enabled: Vec<String>,
}

/// The whole state file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsState {
    /// Installed components by name.
    #[serde(default)]
    pub components: BTreeMap<String, Installed>,
    /// Grants by component name.
    #[serde(default)]
    pub grants: BTreeMap<String, GrantRecord>,
    /// Per-project settings by canonical project path.
    #[serde(default)]
    pub projects: BTreeMap<String, ProjectTools>,
}

/// Where a component stands for one project.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    /// The component's name.
    pub name: String,
    /// What is installed.
    pub installed: Installed,
    /// The grant, when it holds for the installed binary.
    pub granted: Option<Capabilities>,
    /// A grant exists but for another binary: the component changed since it was approved.
    pub grant_stale: bool,
    /// Whether it is enabled for the project.
    pub enabled: bool,
}

impl Status {
    /// Whether the model is offered it in this project: enabled and granted for this binary.
    pub fn offered(&self) -> bool {
        self.enabled && self.granted.is_some()
    }

    /// One word for people: `offered`, `disabled`, `needs-approval` or `changed`.
    pub fn state(&self) -> &'static str {
        match (self.granted.is_some(), self.grant_stale, self.enabled) {
            (true, _, true) => "offered",
            (true, _, false) => "disabled",
            (false, true, _) => "changed",
            (false, false, _) => "needs-approval",
        }
    }
}

/// The user's component store: `~/.bb7` (or `$BB7_HOME`).
pub struct ComponentStore {
    home: StateDir,
}

impl ComponentStore {
    /// The store under the global state directory, created when missing.
    pub fn open_default() -> Result<ComponentStore, ComponentError> {
        let dir = crate::paths::state_dir().ok_or(ComponentError::NoHome)?;
        ComponentStore::open(&dir)
    }

    /// The store under `dir`.
    pub fn open(dir: &Path) -> Result<ComponentStore, ComponentError> {
        let home = StateDir::open(dir, true).map_err(|e| ComponentError::io(dir, e))?;
        Ok(ComponentStore { home })
    }

    /// Reads the state (empty when there is none yet).
    pub fn load(&self) -> Result<ToolsState, ComponentError> {
        match store::read_regular(self.home.dir(), STATE_FILE) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).map_err(|err| ComponentError::StateDamaged {
                    path: self.home.path().join(STATE_FILE),
                    err,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ToolsState::default()),
            Err(e) => Err(ComponentError::io(self.home.path().join(STATE_FILE), e)),
        }
    }

    /// Holds the state for one change (load, change, save, lockfile) until dropped: a lock on
    /// `tools.json.lock` beside the state file, which every bb7 process takes — the CLI, each
    /// editor's host, `bb7 mcp` — so no two changes interleave and none is lost. Blocks while
    /// another process holds it; released when dropped or when the process ends.
    pub fn lock(&self) -> Result<store::lock::FileLock, ComponentError> {
        store::lock::exclusive(self.home.dir(), STATE_LOCK)
            .map_err(|e| ComponentError::io(self.home.path().join(STATE_LOCK), e))
    }

    /// Writes the state atomically.
    pub fn save(&self, state: &ToolsState) -> Result<(), ComponentError> {
        let mut bytes = serde_json::to_vec_pretty(state).map_err(ComponentError::Serialize)?;
        bytes.push(b'\n');
        store::write_atomic(self.home.dir(), STATE_FILE, &bytes)
            .map_err(|e| ComponentError::io(self.home.path().join(STATE_FILE), e))
    }

    /// The path of the stored binary with `sha256`.
    pub fn wasm_path(&self, sha256: &str) -> PathBuf {
        self.home
            .path()
            .join(COMPONENTS_DIR)
            .join(format!("{sha256}.wasm"))
    }

    /// Stores `bytes` (whose hash is `sha256`) as `components/<sha256>.wasm`, read-only.
    pub fn put_binary(&self, sha256: &str, bytes: &[u8]) -> Result<(), ComponentError> {
        let rel = format!("{COMPONENTS_DIR}/{sha256}.wasm");
        store::write_atomic(self.home.dir(), &rel, bytes).map_err(ComponentError::StoreBinary)?;
        use std::os::unix::fs::PermissionsExt;
        let _ = self.home.dir().set_permissions(
            &rel,
            cap_std::fs::Permissions::from_std(std::fs::Permissions::from_mode(0o444)),
        );
        Ok(())
    }

    /// Removes stored binaries no installed component points to.
    pub fn prune(&self, state: &ToolsState) {
        let Ok(entries) = self.home.dir().read_dir(COMPONENTS_DIR) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(sha) = name.to_str().and_then(|n| n.strip_suffix(".wasm")) else {
                continue;
            };
            if !state.components.values().any(|c| c.sha256 == sha) {
                let _ = self
                    .home
                    .dir()
                    .remove_file(format!("{COMPONENTS_DIR}/{}", name.to_string_lossy()));
            }
        }
    }
}

impl ToolsState {
    /// The key a project is filed under.
    pub fn project_key(project: &Path) -> String {
        project
            .canonicalize()
            .unwrap_or_else(|_| project.to_path_buf())
            .display()
            .to_string()
    }

    /// Records `manifest`'s component (binary `sha256`) under its name, replacing what the name
    /// pointed to. A grant for another binary stays on file but no longer holds.
    pub fn install(
        &mut self,
        manifest: &Manifest,
        sha256: &str,
        imports: Vec<String>,
        size: u64,
        source: &Path,
    ) {
        self.components.insert(
            manifest.name.clone(),
            Installed {
                sha256: sha256.to_string(),
                version: manifest.version.clone(),
                wit: manifest.wit.clone(),
                description: manifest.description.clone(),
                requested: manifest.requested.clone(),
                limits: manifest.limits,
                imports,
                size,
                source: source.display().to_string(),
                added: now(),
                tool: None,
                tools: Vec::new(),
                skipped: Vec::new(),
                hook: manifest.hook.clone(),
            },
        );
    }

    /// The installed component `name`, or an error naming the installed ones.
    pub fn component(&self, name: &str) -> Result<&Installed, ComponentError> {
        self.components
            .get(name)
            .ok_or_else(|| ComponentError::NotInstalled {
                name: name.to_string(),
                installed: self.components.keys().cloned().collect(),
            })
    }

    /// Grants `caps` to `name`'s installed binary; refuses anything beyond its request.
    pub fn grant(&mut self, name: &str, caps: Capabilities) -> Result<&Installed, ComponentError> {
        let installed = self.component(name)?.clone();
        let excess = caps.excess(&installed.requested);
        if !excess.is_empty() {
            return Err(ComponentError::BeyondRequest {
                name: name.to_string(),
                excess,
                requested: installed.requested.summary(),
            });
        }
        self.grants.insert(
            name.to_string(),
            GrantRecord {
                sha256: installed.sha256.clone(),
                granted: caps,
                at: now(),
            },
        );
        self.component(name)
    }

    /// Withdraws `name`'s grant. Errors when it has none.
    pub fn revoke(&mut self, name: &str) -> Result<(), ComponentError> {
        self.component(name)?;
        self.grants
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| ComponentError::NoGrant(name.to_string()))
    }

    /// Uninstalls `name`: its grant and every project's enabling go with it.
    pub fn remove(&mut self, name: &str) -> Result<(), ComponentError> {
        self.component(name)?;
        self.components.remove(name);
        self.grants.remove(name);
        for p in self.projects.values_mut() {
            p.enabled.retain(|n| n != name);
        }
        Ok(())
    }

    /// Enables or disables `name` for `project`.
    pub fn set_enabled(
        &mut self,
        project: &Path,
        name: &str,
        enabled: bool,
    ) -> Result<(), ComponentError> {
        self.component(name)?;
        let p = self.projects.entry(Self::project_key(project)).or_default();
        p.enabled.retain(|n| n != name);
        if enabled {
            p.enabled.push(name.to_string());
            p.enabled.sort();
        }
        Ok(())
    }

    /// Every installed component as it stands for `project` (`None`: no project), by name.
    pub fn statuses(&self, project: Option<&Path>) -> Vec<Status> {
        let enabled: Vec<String> = project
            .and_then(|p| self.projects.get(&Self::project_key(p)))
            .map(|p| p.enabled.clone())
            .unwrap_or_default();
        self.components
            .iter()
            .map(|(name, installed)| {
                let grant = self.grants.get(name);
                let holds = grant.filter(|g| g.sha256 == installed.sha256);
                Status {
                    name: name.clone(),
                    installed: installed.clone(),
                    granted: holds.map(|g| g.granted.clone()),
                    grant_stale: grant.is_some() && holds.is_none(),
                    enabled: enabled.contains(name),
                }
            })
            .collect()
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
