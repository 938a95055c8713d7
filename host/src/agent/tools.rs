//! The model's file tools inside one reply: which tools are offered (from the components' own
//! descriptions), and running each call in the sandbox against the reply's staging directory with
//! the rules of EDITS.md (read-only files, one tool per path, the base version of each file).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::Dir;
use serde_json::{Value, json};

use super::builtin::BuiltinTool;
use super::error::AgentError;
use super::staging::StagingDir;
use crate::chat::model::ContextFile;
use crate::chat::paths::{self, ClientPath};
use crate::chat::snapshots;
use crate::config::DiffMode;
use crate::llm::request::ToolSpec;
use crate::llm::tool_calls::ToolCall;
use crate::sandbox::{Access, CallError, Grant, Sandbox, ToolComponent};
use crate::store::publish::Outputs;
use crate::toolhost::{ToolHost, ToolHostError};

fn settings(mode: DiffMode) -> Vec<(String, String)> {
    vec![("diff-mode".to_string(), mode.as_str().to_string())]
}

/// The tools offered in project chats for `mode` (EDITS.md: `write_file`, plus `edit_file` unless
/// `off`), as the components describe themselves.
pub fn offered(mode: DiffMode) -> Result<Vec<ToolSpec>, AgentError> {
    BuiltinTool::edit_tools(mode)
        .iter()
        .map(|&tool| describe_builtin(tool, &settings(mode)))
        .collect()
}

/// What built-in tool `name` tells the model under `settings`. Computed natively by the very code
/// the component runs for `describe` (`bb7_tool_logic::tools::describe`, which its WIT export
/// forwards to unchanged; a test holds the two equal), so offering the tools loads no component:
/// one is loaded only when the model calls it.
pub fn describe_builtin(
    tool: BuiltinTool,
    settings: &[(String, String)],
) -> Result<ToolSpec, AgentError> {
    let name = tool.name();
    let parsed = bb7_tool_logic::Settings::from_pairs(
        settings.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
    .map_err(|e| {
        AgentError::Describe(format!(
            "The {name} tool cannot describe itself: {}",
            e.message
        ))
    })?;
    let info = bb7_tool_logic::tools::describe(name, &parsed)
        .ok_or_else(|| AgentError::Describe(format!("unknown built-in tool {name}")))?;
    Ok(ToolSpec {
        name: info.name,
        description: info.description,
        parameters: info.parameters,
    })
}

/// How a reply changed a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Written whole by `write_file`.
    Write,
    /// Changed by `edit_file`.
    Edit,
}

/// A path the reply changed, in the order first changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Touched {
    /// The normalised project-relative path.
    pub path: String,
    /// The tool that changed it (a reply never mixes both on one path).
    pub change: Change,
    /// The id of the version the reply started from (output, else context), if there was one.
    pub base_id: Option<String>,
    /// Whether the path is in the chat's context (as a whole file).
    pub in_context: bool,
}

/// A file written to `output/` by a committed reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The project-relative path.
    pub path: String,
    /// The file id of the content written.
    pub version: String,
    /// The file id of the version the reply started from; `None` when there was none.
    pub prev_version: Option<String>,
    /// The bytes written (shared with the runner that kept them: never copied).
    pub content: Arc<[u8]>,
    /// Agent mode, a project file not in context that the reply edited from what `read_file`
    /// returned: its context entry, whose snapshot (that content) is already stored. Recorded with
    /// the reply, it makes the read the output's base, so the file shows `M` with its real change.
    pub adopted: Option<ContextFile>,
}

/// What one successful call did, for the status chunk.
pub struct CallDone {
    /// The status chunk streamed for the call (`[Assistant modified: …]`).
    pub status: String,
    /// The tool result's `notes` (edit_file, issue 32: occurrences left inside longer words, a
    /// file an empty old_string created): what the model should check. Agent mode gives them
    /// back to the model with the status.
    pub notes: Vec<String>,
}

/// Why a tool call failed: the message the model reads (it names the tool first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError(message)
    }
}

/// Why a reply's changes could not be committed to its output (nothing of it was published).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CommitError(pub String);

impl From<String> for CommitError {
    fn from(message: String) -> Self {
        CommitError(message)
    }
}

/// Runs the tool calls of one reply.
pub struct ToolRunner {
    /// Runs the calls (its sandbox is created on the first call).
    host: Arc<ToolHost>,
    mode: DiffMode,
    staging: StagingDir,
    project_root: PathBuf,
    /// The chat directory (read-only use: output and snapshots, the base versions).
    chat_dir: Dir,
    /// Writable whole files in context, by path.
    writable: HashMap<String, ContextFile>,
    /// The snapshots of `writable` files the send already read (its stale check and request),
    /// by path: an edit's base without reading the snapshot again.
    snapshots: HashMap<String, snapshots::Kept>,
    /// Paths the model may not change: read-only files and paths present only as sections.
    read_only: BTreeSet<String>,
    touched: Vec<Touched>,
    /// Paths whose base version is in staging.
    placed: BTreeSet<String>,
    /// The file id of what is in staging now, by path, hashed here (natively, with the CPU's SHA
    /// instructions): the edit tools are told these ids and leave result ids to the host, instead
    /// of hashing whole files in the sandbox (several times slower there).
    ids: HashMap<String, String>,
    /// The staged content whose id is in `ids`, by path, as read back after the call that left it
    /// (or as placed): the commit publishes it without reading and hashing every file again.
    /// Nothing writes to staging between calls (an abandoned call taints the reply instead).
    contents: HashMap<String, Arc<[u8]>>,
    /// A call was abandoned while it held the staging directory read-write: its thread could still
    /// write there, so nothing in staging is trusted any more (no further call, no commit).
    tainted: bool,
    /// Agent mode: project files read whole by `read_file` (the base of a later edit), by path.
    project_reads: HashMap<String, Vec<u8>>,
    agent: bool,
    /// The sandbox record of the latest call (for the agent's trace).
    last_record: Option<crate::sandbox::CallRecord>,
}

/// Why a tainted reply cannot go on (see `ToolRunner::tainted`).
const TAINTED: &str = "a tool call was abandoned while it could still write to this reply's staging directory, so the reply's file changes are discarded";

impl ToolRunner {
    /// A runner with a new staging directory, running its calls on `host`; `context` decides
    /// which paths are writable and which read-only. Sets up no sandbox: `host` does that on the
    /// first call.
    pub fn new(
        host: Arc<ToolHost>,
        mode: DiffMode,
        project_root: &Path,
        chat_dir: Dir,
        context: &[ContextFile],
    ) -> Result<ToolRunner, AgentError> {
        let staging = StagingDir::new().map_err(AgentError::Staging)?;
        let mut writable = HashMap::new();
        let mut read_only = BTreeSet::new();
        let mut sections = BTreeSet::new();
        for cf in context.iter().filter(|cf| !cf.external) {
            if cf.is_section() {
                sections.insert(cf.path.clone());
            } else if cf.readonly {
                read_only.insert(cf.path.clone());
            } else {
                writable.insert(cf.path.clone(), cf.clone());
            }
        }
        read_only.extend(sections.into_iter().filter(|p| !writable.contains_key(p)));
        Ok(ToolRunner {
            host,
            mode,
            staging,
            project_root: project_root.to_path_buf(),
            chat_dir,
            writable,
            snapshots: HashMap::new(),
            read_only,
            touched: Vec::new(),
            placed: BTreeSet::new(),
            ids: HashMap::new(),
            contents: HashMap::new(),
            tainted: false,
            project_reads: HashMap::new(),
            agent: false,
            last_record: None,
        })
    }

    /// Keeps the snapshots of the writable files in context that `memo` holds (what the request
    /// shows the model), as the base of their edits.
    pub fn keep_snapshots(&mut self, memo: &snapshots::Memo) {
        for (path, cf) in &self.writable {
            if let Some(c) = memo.get(cf) {
                self.snapshots.insert(path.clone(), c);
            }
        }
    }

    /// Agent mode: edits may also start from a project file the model read with `read_file`.
    pub fn set_agent(&mut self, agent: bool) {
        self.agent = agent;
    }

    /// The sandbox record of the latest call that reached the sandbox, taken.
    pub fn take_record(&mut self) -> Option<crate::sandbox::CallRecord> {
        self.last_record.take()
    }

    /// The tool host the calls run on.
    pub fn host(&self) -> &Arc<ToolHost> {
        &self.host
    }

    /// The sandbox the calls run in (created by the first call that needs it).
    pub fn sandbox(&self) -> Result<Arc<Sandbox>, ToolHostError> {
        self.host.sandbox()
    }

    /// The project the runner's calls are for.
    pub fn project_root(&self) -> &Path {
        &self.project_root
    }

    /// The staging directory's host path.
    pub fn staging_path(&self) -> &Path {
        self.staging.path()
    }

    /// `raw` as a normalised project-relative path, or the message for the model.
    pub fn project_path(&self, tool: &str, raw: &str) -> Result<String, ToolError> {
        self.normalize(tool, raw)
    }

    /// Whether a read of `rel` should see the reply's own version: a path this reply changed or
    /// staged, or one with a base version (the chat's output, a writable context file), which is
    /// placed in staging first so that what is read is exactly what an edit will start from.
    pub fn stage_for_read(&mut self, rel: &str) -> bool {
        if self.placed.contains(rel) || self.touched.iter().any(|t| t.path == rel) {
            return true;
        }
        if self.read_only.contains(rel) {
            return false;
        }
        match self.base(rel) {
            Some(base) if self.staging.place(rel, &base.content).is_ok() => {
                self.placed.insert(rel.to_string());
                let id = base.id(rel);
                self.ids.insert(rel.to_string(), id);
                self.contents.insert(rel.to_string(), base.content);
                true
            }
            _ => false,
        }
    }

    /// The current staged content of `rel`.
    pub fn staged(&self, rel: &str) -> Option<Vec<u8>> {
        self.staging.read(rel).ok()
    }

    /// Records the whole content of a project file `read_file` returned (the base of an edit).
    pub fn note_project_read(&mut self, rel: &str, content: Vec<u8>) {
        self.project_reads.insert(rel.to_string(), content);
    }

    /// The paths changed so far, in order.
    pub fn touched(&self) -> &[Touched] {
        &self.touched
    }

    /// The current staged content of every changed path (for a hidden retry's request).
    pub fn pending(&self) -> Vec<(Touched, Arc<[u8]>)> {
        if self.tainted {
            return Vec::new();
        }
        self.touched
            .iter()
            .filter_map(|t| self.staged_now(&t.path).ok().map(|(c, _)| (t.clone(), c)))
            .collect()
    }

    /// The base version of `path`: the chat's output, else the writable context snapshot (whose
    /// id is known: the entry's `version`), else (agent mode) what `read_file` returned.
    fn base(&self, path: &str) -> Option<Base> {
        let unknown = |content| Base { content, id: None };
        crate::store::read_regular_shared(&self.chat_dir, paths::output_rel(path))
            .ok()
            .map(unknown)
            .or_else(|| {
                let cf = self.writable.get(path)?;
                // As the send read it, unless it was replaced since (an agent reply runs while
                // the user may update the context): then as it is now.
                let content = match self.snapshots.get(path) {
                    Some((c, stamp)) if snapshots::unchanged(&self.chat_dir, cf, stamp) => {
                        Arc::clone(c)
                    }
                    _ => snapshots::read(&self.chat_dir, cf).ok()?.into(),
                };
                Some(Base {
                    content,
                    id: Some(cf.version.clone()).filter(|v| !v.is_empty()),
                })
            })
            .or_else(|| {
                self.agent
                    .then(|| self.project_reads.get(path).map(|c| unknown(c[..].into())))
                    .flatten()
            })
    }

    fn normalize(&self, tool: &str, raw: &str) -> Result<String, ToolError> {
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return Err(ToolError(format!(
                "{tool}: the path {raw:?} contains the control character {c:?}; file names must not contain line breaks or other control characters"
            )));
        }
        match paths::classify(raw, Some(&self.project_root)) {
            Ok(ClientPath::Internal(rel)) => Ok(rel),
            Ok(ClientPath::External(_)) => Err(ToolError(format!(
                "{tool}: {raw} is outside the project; only files inside the project can be changed"
            ))),
            Err(e) => Err(ToolError(format!("{tool}: {e}"))),
        }
    }

    /// Runs one call (blocking: call it from a blocking thread). `Err` is the message for the model.
    pub fn run(&mut self, call: &ToolCall) -> Result<CallDone, ToolError> {
        let tool = call.name.as_str();
        if self.tainted {
            return Err(ToolError(format!("{tool}: {TAINTED}")));
        }
        let args = call
            .arguments
            .as_ref()
            .map_err(|e| format!("{tool}: invalid arguments: {e}"))?;
        let change = match BuiltinTool::parse(tool) {
            Some(BuiltinTool::WriteFile) => Change::Write,
            Some(BuiltinTool::EditFile) if self.mode != DiffMode::Off => Change::Edit,
            _ => {
                let offered = BuiltinTool::edit_tools(self.mode)
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(ToolError(format!(
                    "unknown tool {tool:?}; the tools offered are {offered}"
                )));
            }
        };
        let mut paths = Vec::new();
        for raw in arg_paths(args) {
            let rel = self.normalize(tool, &raw)?;
            if !paths.contains(&rel) {
                paths.push(rel);
            }
        }
        for rel in &paths {
            if self.read_only.contains(rel) {
                return Err(ToolError(format!(
                    "{tool}: {rel} is read-only in this chat and cannot be changed; describe the change in your reply instead"
                )));
            }
            match (change, self.touched.iter().find(|t| &t.path == rel)) {
                (Change::Write, Some(_)) => {
                    return Err(ToolError(format!(
                        "write_file: {rel} was already changed by an earlier tool call in this reply; use one write_file call, or only edit_file calls, per file"
                    )));
                }
                (Change::Edit, Some(t)) if t.change == Change::Write => {
                    return Err(ToolError(format!(
                        "edit_file: {rel} was written with write_file earlier in this reply; do not mix write_file and edit_file on one file"
                    )));
                }
                _ => {}
            }
        }
        let mut bases = Vec::new();
        for rel in &paths {
            let prior = self.touched.iter().any(|t| &t.path == rel);
            let base = if prior { None } else { self.base(rel) };
            let base_id = base.as_ref().map(|b| b.id(rel));
            if change == Change::Edit && !prior && !self.placed.contains(rel) {
                let Some(Base { content, .. }) = &base else {
                    if self.agent {
                        return Err(ToolError(format!(
                            "edit_file: {rel} has not been read in this reply; call read_file on it first and use the file_id it returns, or create a new file with write_file"
                        )));
                    }
                    return Err(ToolError(format!(
                        "edit_file: {rel} is not in context and has no output; edit only files shown in the request, or create a new file with write_file"
                    )));
                };
                self.contents.remove(rel);
                self.staging
                    .place(rel, content)
                    .map_err(|e| format!("edit_file: cannot stage {rel}: {e}"))?;
                self.placed.insert(rel.clone());
                if let Some(id) = &base_id {
                    self.ids.insert(rel.clone(), id.clone());
                }
            }
            bases.push((rel.clone(), prior, base_id));
        }
        let sandbox = self.sandbox().map_err(|e| format!("{tool}: {e}"))?;
        let component = self.component(&sandbox, tool)?;
        let grant = Grant::new(self.staging.path(), component.policy.access)
            .map_err(|e| format!("{tool}: cannot grant the staging directory: {e}"))?;
        // The ids of the staged files this call starts from, and results without ids: the host
        // hashes natively what the sandbox would hash in software (see `ids`).
        let known: String = paths
            .iter()
            .filter_map(|p| self.ids.get(p).map(|id| format!("{p}\t{id}\n")))
            .collect();
        let mut call_settings = settings(self.mode);
        call_settings.push(("known-file-ids".to_string(), known));
        call_settings.push(("result-file-ids".to_string(), "omit".to_string()));
        let (result, record) =
            sandbox.call(&component, &grant, &call_settings, &call.arguments_raw);
        if matches!(result, Err(CallError::Abandoned(_))) && grant.access == Access::ReadWrite {
            self.tainted = true;
        }
        self.last_record = Some(record);
        // Whatever the outcome, the ids of what the call left in staging.
        for rel in &paths {
            self.refresh_id(rel);
        }
        let mut value = result.map_err(|e| prefixed(tool, &e.to_string()))?;
        self.fill_result_ids(&mut value);
        let mut any_new = false;
        for (rel, prior, base_id) in bases {
            if prior {
                continue;
            }
            any_new |= base_id.is_none();
            self.touched.push(Touched {
                in_context: self.writable.contains_key(&rel),
                path: rel,
                change,
                base_id,
            });
        }
        let notes = value
            .get("notes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Ok(CallDone {
            status: status_line(change, &paths, any_new, &value),
            notes,
        })
    }

    /// Takes the files an `output-write` component left as whole-file writes of this reply, by
    /// the rules of `write_file`: inside the project, not read-only, not already changed by this
    /// reply, and not refused by `refuse(tool, path)` (the approved plan's files: see
    /// `PlanRole::refuse_path`). All are checked before any is staged.
    pub fn adopt_written(
        &mut self,
        tool: &str,
        files: Vec<(String, Vec<u8>)>,
        refuse: &dyn Fn(&str, &str) -> Option<String>,
    ) -> Result<Vec<String>, ToolError> {
        if self.tainted {
            return Err(ToolError(format!("{tool}: {TAINTED}")));
        }
        let mut checked = Vec::new();
        for (raw, content) in files {
            let rel = self.normalize(tool, &raw)?;
            // An approved plan's files bound a component's writes as they bound the edit tools':
            // one file outside them refuses the whole call (none of its files is adopted).
            if let Some(e) = refuse(tool, &rel) {
                return Err(ToolError(e));
            }
            if self.read_only.contains(&rel) {
                return Err(ToolError(format!(
                    "{tool}: {rel} is read-only in this chat and cannot be changed"
                )));
            }
            if self.touched.iter().any(|t| t.path == rel) {
                return Err(ToolError(format!(
                    "{tool}: {rel} was already changed by an earlier tool call in this reply"
                )));
            }
            checked.push((rel, content));
        }
        let mut paths = Vec::new();
        for (rel, content) in checked {
            let base_id = self.base(&rel).map(|b| b.id(&rel));
            self.staging
                .place(&rel, &content)
                .map_err(|e| format!("{tool}: cannot stage {rel}: {e}"))?;
            self.placed.insert(rel.clone());
            self.refresh_id(&rel);
            self.touched.push(Touched {
                in_context: self.writable.contains_key(&rel),
                path: rel.clone(),
                change: Change::Write,
                base_id,
            });
            paths.push(rel);
        }
        Ok(paths)
    }

    /// Reads the staged `rel` back once and keeps its content and id (forgets both when it is
    /// not there).
    fn refresh_id(&mut self, rel: &str) {
        match self.staging.read_shared(rel) {
            Ok(c) => {
                self.ids
                    .insert(rel.to_string(), bb7_tool_logic::file_id::file_id(rel, &c));
                self.contents.insert(rel.to_string(), c);
            }
            Err(_) => {
                self.ids.remove(rel);
                self.contents.remove(rel);
            }
        }
    }

    /// The staged content of `rel` and its id: as kept after the call that left it, else read
    /// from staging (no links followed) and hashed.
    fn staged_now(&self, rel: &str) -> std::io::Result<(Arc<[u8]>, String)> {
        if let (Some(c), Some(id)) = (self.contents.get(rel), self.ids.get(rel)) {
            return Ok((Arc::clone(c), id.clone()));
        }
        let c = self.staging.read_shared(rel)?;
        let id = bb7_tool_logic::file_id::file_id(rel, &c);
        Ok((c, id))
    }

    /// Puts the `file_id` of each file an edit tool's result names (`files[].path`, or `path`).
    fn fill_result_ids(&mut self, value: &mut Value) {
        match value.get_mut("files").and_then(Value::as_array_mut) {
            Some(files) => files.iter_mut().for_each(|f| self.set_result_id(f)),
            None => self.set_result_id(value),
        }
    }

    /// Sets `obj["file_id"]` to the id of the staged file `obj["path"]` names, if any.
    fn set_result_id(&mut self, obj: &mut Value) {
        let Some(path) = obj.get("path").and_then(Value::as_str).map(str::to_string) else {
            return;
        };
        if !self.ids.contains_key(&path) {
            self.refresh_id(&path);
        }
        if let Some(id) = self.ids.get(&path) {
            obj["file_id"] = Value::String(id.clone());
        }
    }

    fn component(&self, sandbox: &Sandbox, tool: &str) -> Result<Arc<ToolComponent>, ToolError> {
        sandbox
            .registry()
            .builtin(tool)
            .map_err(|e| ToolError(format!("{tool}: the tool is unavailable: {e:#}")))
    }

    /// Writes every changed file (as kept after the call that left it) to the chat's `output/`,
    /// all or nothing ([`Outputs::publish`]): every file is first written under a temporary
    /// name, then all are fsynced and renamed into place; should a rename fail, the ones already
    /// renamed get their previous content back (or are removed when they had none).
    pub fn commit(&self, chat_dir: &Dir) -> Result<Vec<Written>, CommitError> {
        let (written, outputs) = self.prepare_commit(chat_dir)?;
        outputs.publish().map_err(|e| CommitError(e.to_string()))?;
        Ok(written)
    }

    /// [`ToolRunner::commit`] up to the fsyncs: the changed files are written under temporary
    /// names (a full disk shows here) and what the reply wrote is returned with them, for the
    /// caller to publish, e.g. together with the chat record naming them
    /// ([`Outputs::publish_with_record`]). Dropped unpublished, nothing of it stays.
    pub fn prepare_commit(&self, chat_dir: &Dir) -> Result<(Vec<Written>, Outputs), CommitError> {
        if self.tainted {
            return Err(CommitError(format!("Cannot commit: {TAINTED}")));
        }
        let mut staged = Vec::new();
        for t in &self.touched {
            let (content, version) = self
                .staged_now(&t.path)
                .map_err(|e| format!("Cannot read the staged {}: {e}", t.path))?;
            staged.push((t, content, version));
        }
        // Snapshots first: an output is never published without the base it was made from.
        let mut adopted = Vec::new();
        for (t, _, _) in &staged {
            let cf = self.adopted_base(chat_dir, t)?;
            adopted.push(cf);
        }
        let outputs = Outputs::prepare(
            chat_dir,
            staged
                .iter()
                .map(|(t, content, _)| (paths::output_rel(&t.path), &content[..])),
        )
        .map_err(|e| CommitError(e.to_string()))?;
        let written = staged
            .into_iter()
            .zip(adopted)
            .map(|((t, content, version), adopted)| Written {
                version,
                path: t.path.clone(),
                prev_version: t.base_id.clone(),
                content,
                adopted,
            })
            .collect();
        Ok((written, outputs))
    }

    /// Agent mode: when `t` is a project file outside the context, with no earlier output, whose
    /// edit started from what `read_file` returned, stores that content as its snapshot and returns
    /// the context entry to record (see [`Written::adopted`]).
    fn adopted_base(
        &self,
        chat_dir: &Dir,
        t: &Touched,
    ) -> Result<Option<ContextFile>, CommitError> {
        if !self.agent || t.in_context || snapshots::read_output(chat_dir, &t.path).is_some() {
            return Ok(None);
        }
        let Some(read) = self.project_reads.get(&t.path) else {
            return Ok(None);
        };
        let version = bb7_tool_logic::file_id::file_id(&t.path, read);
        if t.base_id.as_deref() != Some(version.as_str()) {
            return Ok(None);
        }
        let cf = ContextFile {
            path: t.path.clone(),
            version,
            ..Default::default()
        };
        snapshots::write(chat_dir, &cf, read)
            .map_err(|e| format!("Cannot write the snapshot of {}: {e}", t.path))?;
        Ok(Some(cf))
    }
}

/// A base version of a path and, when it is known without hashing the content, its file id.
struct Base {
    content: Arc<[u8]>,
    id: Option<String>,
}

impl Base {
    /// The id of this base at `path`: the known one, else the content's hash.
    fn id(&self, path: &str) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| bb7_tool_logic::file_id::file_id(path, &self.content))
    }
}

/// The paths a call names (`path`, or each `edits[].path`); unreadable ones are left to the tool,
/// which reports them.
pub(crate) fn arg_paths(args: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = args.get("path").and_then(Value::as_str) {
        out.push(p.to_string());
    }
    if let Some(edits) = args.get("edits").and_then(Value::as_array) {
        for e in edits {
            if let Some(p) = e.get("path").and_then(Value::as_str) {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// A tool's message, starting with the tool's name so the model knows which call failed.
fn prefixed(tool: &str, message: &str) -> String {
    if message.starts_with(tool) {
        message.to_string()
    } else {
        format!("{tool}: {message}")
    }
}

/// The status chunk of EDITS.md for a successful call.
fn status_line(change: Change, paths: &[String], new_file: bool, result: &Value) -> String {
    match change {
        Change::Write => {
            let verb = if new_file { "added" } else { "modified" };
            format!(
                "\n[Assistant {verb}: {}]\n",
                paths.first().map(String::as_str).unwrap_or("?")
            )
        }
        Change::Edit if paths.len() == 1 => format!("\n[Assistant modified: {}]\n", paths[0]),
        Change::Edit => {
            let n = result
                .get("edits_applied")
                .and_then(Value::as_u64)
                .unwrap_or(paths.len() as u64);
            format!("\n[Assistant modified: {n} edit(s)]\n")
        }
    }
}

/// The `tool_calls` entry of a `diff_error` (and of a retry context) for one call.
pub fn call_record(call: &ToolCall, error: Option<&str>) -> Value {
    let mut v = json!({"tool": call.name, "id": call.id});
    match &call.arguments {
        Ok(args) => {
            v["args"] = args.clone();
            if let Some(p) = arg_paths(args).first() {
                v["path"] = json!(p);
            }
        }
        Err(_) => v["args_raw"] = json!(call.arguments_raw),
    }
    if let Some(e) = error {
        v["error"] = json!(e);
    }
    v
}

#[cfg(test)]
mod describe_tests {
    use super::*;

    /// The descriptions offered natively are exactly what each embedded component returns from
    /// its WIT `describe`, for every diff mode and for retrieval limits.
    #[test]
    fn native_descriptions_equal_the_components_own() {
        let sb = ToolHost::with_audit(None).sandbox().unwrap();
        let mut cases: Vec<Vec<(String, String)>> =
            ["search_replace_multi", "search_replace", "anchored", "off"]
                .iter()
                .map(|m| vec![("diff-mode".to_string(), m.to_string())])
                .collect();
        cases.push(vec![
            ("max-search-results-cap".to_string(), "7".to_string()),
            ("max-read-lines-default".to_string(), "33".to_string()),
            ("deny".to_string(), ".env\n*.pem".to_string()),
        ]);
        for settings in &cases {
            for name in bb7_tool_logic::tools::BUILTIN {
                let tool = BuiltinTool::parse(name).expect("a built-in tool");
                let native = describe_builtin(tool, settings).unwrap();
                let tool = sb.registry().builtin(name).unwrap();
                let info = sb.describe(&tool, settings).unwrap();
                assert_eq!(native.name, info.name);
                assert_eq!(native.description, info.description, "{name} {settings:?}");
                let schema: Value = serde_json::from_str(&info.parameters_schema).unwrap();
                assert_eq!(native.parameters, schema, "{name} {settings:?}");
            }
        }
    }
}

#[cfg(test)]
mod host_tests {
    use super::*;

    /// Setting up a reply's tools sets up no sandbox (a reply that calls no tool never pays for
    /// one); the first call makes it, on the host the runner was given.
    #[test]
    fn the_sandbox_is_made_by_the_first_call_not_by_the_runner() {
        let project = tempfile::tempdir().unwrap();
        let chat = tempfile::tempdir().unwrap();
        let chat_dir = Dir::open_ambient_dir(chat.path(), cap_std::ambient_authority()).unwrap();
        let host = Arc::new(ToolHost::with_audit(None));
        let mut runner = ToolRunner::new(
            Arc::clone(&host),
            DiffMode::SearchReplaceMulti,
            project.path(),
            chat_dir,
            &[],
        )
        .unwrap();
        assert!(!host.sandbox_created());
        let args = json!({"path": "new.txt", "content": "hello\n"});
        let done = runner
            .run(&ToolCall {
                id: "c1".into(),
                name: "write_file".into(),
                arguments_raw: args.to_string(),
                arguments: Ok(args),
            })
            .unwrap();
        assert!(host.sandbox_created());
        assert_eq!(done.status, "\n[Assistant added: new.txt]\n");
        assert_eq!(runner.staged("new.txt").unwrap(), b"hello\n");
    }

    /// The commit publishes the content the host read back (and hashed) once, right after the
    /// call that left it: the version the call's result named, without reading and hashing every
    /// staged file again (a 1 MiB edit read and hashed its file a third time at the commit).
    #[test]
    fn the_commit_publishes_what_the_call_left_without_reading_staging_again() {
        let project = tempfile::tempdir().unwrap();
        let chat = tempfile::tempdir().unwrap();
        let chat_dir = Dir::open_ambient_dir(chat.path(), cap_std::ambient_authority()).unwrap();
        let host = Arc::new(ToolHost::with_audit(None));
        let mut runner = ToolRunner::new(
            host,
            DiffMode::SearchReplaceMulti,
            project.path(),
            chat_dir.try_clone().unwrap(),
            &[],
        )
        .unwrap();
        let args = json!({"path": "new.txt", "content": "hello\n"});
        runner
            .run(&ToolCall {
                id: "c1".into(),
                name: "write_file".into(),
                arguments_raw: args.to_string(),
                arguments: Ok(args),
            })
            .unwrap();
        // Staging changed behind the runner's back after the call (nothing of bb7 does this).
        std::fs::write(runner.staging_path().join("new.txt"), "changed later\n").unwrap();
        let written = runner.commit(&chat_dir).unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!(&*written[0].content, b"hello\n");
        assert_eq!(
            written[0].version,
            bb7_tool_logic::file_id::file_id("new.txt", b"hello\n")
        );
        assert_eq!(
            std::fs::read(chat.path().join("output/new.txt")).unwrap(),
            b"hello\n"
        );
    }

    fn edit_call(path: &str, file_id: &str, old: &str, new: &str) -> ToolCall {
        let args = json!({"edits": [{"path": path, "file_id": file_id, "old_string": old,
                                     "new_string": new}]});
        ToolCall {
            id: "c1".into(),
            name: "edit_file".into(),
            arguments_raw: args.to_string(),
            arguments: Ok(args),
        }
    }

    /// Issue 30 (a 1 MB edit): the base of a file in context is staged with the id the request
    /// showed the model for it, its entry's `version` (the id of its snapshot), without hashing
    /// the whole snapshot again. Here the entry names a version its bytes do not hash to: the
    /// edit is checked against that version, and the reply records it as the output's base.
    #[test]
    fn a_context_file_is_staged_with_its_entry_s_version_without_hashing_it() {
        let project = tempfile::tempdir().unwrap();
        let chat = tempfile::tempdir().unwrap();
        let chat_dir = Dir::open_ambient_dir(chat.path(), cap_std::ambient_authority()).unwrap();
        let cf = ContextFile {
            path: "a.txt".into(),
            version: "0badc0de".into(),
            ..Default::default()
        };
        snapshots::write(&chat_dir, &cf, b"one\ntwo\n").unwrap();
        assert_ne!(
            bb7_tool_logic::file_id::file_id("a.txt", b"one\ntwo\n"),
            "0badc0de"
        );
        let mut runner = ToolRunner::new(
            Arc::new(ToolHost::with_audit(None)),
            DiffMode::SearchReplaceMulti,
            project.path(),
            chat_dir.try_clone().unwrap(),
            std::slice::from_ref(&cf),
        )
        .unwrap();
        runner
            .run(&edit_call("a.txt", "0badc0de", "two", "three"))
            .unwrap();
        let written = runner.commit(&chat_dir).unwrap();
        assert_eq!(&*written[0].content, b"one\nthree\n");
        assert_eq!(written[0].prev_version.as_deref(), Some("0badc0de"));
    }
}
