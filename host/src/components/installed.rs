//! The user's third-party components: what is installed (`~/.bb7/components/<sha256>.wasm`), what
//! each was granted (pinned to its sha256) and where it is enabled, kept in `~/.bb7/tools.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::manifest::{Capabilities, Manifest, ManifestLimits};
use crate::store::{self, StateDir};

/// The state file, in the global state directory.
const STATE_FILE: &str = "tools.json";
/// Where component binaries are kept, by sha256, in the global state directory.
const COMPONENTS_DIR: &str = "components";

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
    pub tool: Option<super::ops::ToolDescription>,
}

impl Installed {
    /// The limits its calls run under.
    pub fn effective_limits(&self) -> crate::sandbox::Limits {
        self.limits
            .apply(crate::sandbox::Limits::default())
            .unwrap_or_default()
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
    pub fn open_default() -> Result<ComponentStore, String> {
        let dir = crate::paths::state_dir()
            .ok_or("no home directory: set HOME or BB7_HOME to install tool components")?;
        ComponentStore::open(&dir)
    }

    /// The store under `dir`.
    pub fn open(dir: &Path) -> Result<ComponentStore, String> {
        let home = StateDir::open(dir, true).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(ComponentStore { home })
    }

    /// Reads the state (empty when there is none yet).
    pub fn load(&self) -> Result<ToolsState, String> {
        match store::read_regular(self.home.dir(), STATE_FILE) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!(
                    "{} is damaged ({e}); fix or remove it",
                    self.home.path().join(STATE_FILE).display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ToolsState::default()),
            Err(e) => Err(format!(
                "{}: {e}",
                self.home.path().join(STATE_FILE).display()
            )),
        }
    }

    /// Writes the state atomically.
    pub fn save(&self, state: &ToolsState) -> Result<(), String> {
        let mut bytes = serde_json::to_vec_pretty(state).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        store::write_atomic(self.home.dir(), STATE_FILE, &bytes)
            .map_err(|e| format!("{}: {e}", self.home.path().join(STATE_FILE).display()))
    }

    /// The path of the stored binary with `sha256`.
    pub fn wasm_path(&self, sha256: &str) -> PathBuf {
        self.home
            .path()
            .join(COMPONENTS_DIR)
            .join(format!("{sha256}.wasm"))
    }

    /// Stores `bytes` (whose hash is `sha256`) as `components/<sha256>.wasm`, read-only.
    pub fn put_binary(&self, sha256: &str, bytes: &[u8]) -> Result<(), String> {
        let rel = format!("{COMPONENTS_DIR}/{sha256}.wasm");
        store::write_atomic(self.home.dir(), &rel, bytes)
            .map_err(|e| format!("storing the component: {e}"))?;
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
            },
        );
    }

    /// The installed component `name`, or an error naming the installed ones.
    pub fn component(&self, name: &str) -> Result<&Installed, String> {
        self.components.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.components.keys().map(String::as_str).collect();
            if names.is_empty() {
                format!("no tool component named {name:?} is installed (none is; add one with `bb7 tools add`)")
            } else {
                format!(
                    "no tool component named {name:?} is installed (installed: {})",
                    names.join(", ")
                )
            }
        })
    }

    /// Grants `caps` to `name`'s installed binary; refuses anything beyond its request.
    pub fn grant(&mut self, name: &str, caps: Capabilities) -> Result<&Installed, String> {
        let installed = self.component(name)?.clone();
        let excess = caps.excess(&installed.requested);
        if !excess.is_empty() {
            return Err(format!(
                "{name} did not request {}; a grant can only give what the component asks for ({})",
                excess.join(", "),
                installed.requested.summary()
            ));
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
    pub fn revoke(&mut self, name: &str) -> Result<(), String> {
        self.component(name)?;
        self.grants
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| format!("{name} has no grant to revoke"))
    }

    /// Uninstalls `name`: its grant and every project's enabling go with it.
    pub fn remove(&mut self, name: &str) -> Result<(), String> {
        self.component(name)?;
        self.components.remove(name);
        self.grants.remove(name);
        for p in self.projects.values_mut() {
            p.enabled.retain(|n| n != name);
        }
        Ok(())
    }

    /// Enables or disables `name` for `project`.
    pub fn set_enabled(&mut self, project: &Path, name: &str, enabled: bool) -> Result<(), String> {
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
