//! The system message: BB-7's system prompt (embedded, or the user's override) followed by the user's global
//! and project instruction files.
//!
//! Project instructions (`{project}/.bb7/instructions`) support two directives at column 0, outside fenced
//! code blocks: `@@` comment lines, which are dropped, and `@include <path>`, which inserts a project file
//! verbatim (one level: included text is not parsed). Included paths follow the project path rule of
//! [`crate::store::project`]: inside the project, no symlink on the way, nothing under `.git/` or `.bb7/`
//! (in any case), resolved from the handle opened at `init`, and (as for the agent's retrieval tools) not a
//! file with more than one hard link. The instructions file itself is read through the `.bb7/`
//! handle held since `init`, so replacing `.bb7` afterwards cannot redirect it.

use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::store::project::ProjectDir;
use crate::store::read_regular_path;

/// BB-7's built-in system prompt.
///
/// Lines `<!-- bb7:project -->` and `<!-- bb7:global -->` open a part sent only in project chats or only in
/// global chats; `<!-- bb7:end -->` closes it. [`render_system_prompt`] removes the marker lines.
pub const SYSTEM_PROMPT: &str = include_str!("../prompts/system.md");

/// The global instructions file's name inside the config dir.
pub const GLOBAL_INSTRUCTIONS_FILE: &str = "instructions.md";
/// The system prompt override's name inside the config dir.
pub const SYSTEM_PROMPT_FILE: &str = "system_prompt.txt";
/// The project instructions file, relative to the project root.
pub const PROJECT_INSTRUCTIONS_PATH: &str = ".bb7/instructions";
/// How the global instructions file is named to the model and the user.
pub const GLOBAL_INSTRUCTIONS_DISPLAY: &str = "~/.config/bb7/instructions.md";

/// Included files larger than this are rejected: instructions are sent with every request.
pub const MAX_INCLUDE_BYTES: u64 = 1024 * 1024;

const PROJECT_MARKER: &str = "<!-- bb7:project -->";
const GLOBAL_MARKER: &str = "<!-- bb7:global -->";
const END_MARKER: &str = "<!-- bb7:end -->";

const PROJECT_TEMPLATE: &str = "\
@@ BB-7 project instructions: sent to the model with every message in this project's chats.
@@ Lines starting with @@ are comments and are not sent.
@@ `@include <path>` at the start of a line inserts that file verbatim (path relative to the project root).
@@ Directives inside fenced code blocks are left as they are.
@@
@@ @include docs/CONVENTIONS.md
";

/// The user's instruction files, loaded for one request or one `chat` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instructions {
    /// `~/.config/bb7/instructions.md`, when it exists and is not blank.
    pub global: Option<String>,
    /// `.bb7/instructions` after directives are processed: `Ok(None)` when absent or blank, `Err` with the parse
    /// error(s) otherwise. An error blocks sends until fixed.
    pub project: Result<Option<String>, InstructionsError>,
}

/// Why `.bb7/instructions` cannot be used; the text is the message the client is shown (it blocks
/// sends until fixed).
#[derive(Debug, Clone, thiserror::Error)]
pub enum InstructionsError {
    /// The file is a symbolic link.
    #[error("{PROJECT_INSTRUCTIONS_PATH}: is a symbolic link, which BB-7 does not follow")]
    Symlink,
    /// The file cannot be read.
    #[error("{PROJECT_INSTRUCTIONS_PATH}: cannot read: {0}")]
    Read(#[source] Arc<io::Error>),
    /// The file is not UTF-8.
    #[error("{PROJECT_INSTRUCTIONS_PATH}: not valid UTF-8")]
    NotUtf8,
    /// Directives that failed, one per line of the message, each naming its line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Directives(Vec<DirectiveError>),
}

/// Two errors are equal when they tell the client the same thing (`io::Error` has no equality).
impl PartialEq for InstructionsError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for InstructionsError {}

/// One failed directive of `.bb7/instructions`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{PROJECT_INSTRUCTIONS_PATH} line {line}: @include: {error}")]
pub struct DirectiveError {
    /// The 1-based line.
    pub line: usize,
    /// Why the include failed.
    pub error: IncludeError,
}

/// Why an `@include` failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum IncludeError {
    /// `@include` without a path.
    #[error("missing path")]
    MissingPath,
    /// An absolute path.
    #[error("absolute paths are not allowed: {0}")]
    Absolute(String),
    /// A path whose `..` leave the project.
    #[error("path resolves outside the project root: {0}")]
    Escapes(String),
    /// A path that does not normalise; `reason` says why.
    #[error("invalid path {path}: {reason}")]
    Invalid {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// No such file.
    #[error("file not found: {0}")]
    NotFound(String),
    /// The file cannot be opened or read (a symlink out of the project among others).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        source: Arc<io::Error>,
    },
    /// A directory, FIFO or device.
    #[error("not a regular file: {0}")]
    NotRegular(String),
    /// A file with several hard links.
    #[error(
        "{0} has several hard links (it may be the same file as one outside the project), so it is not included"
    )]
    HardLinks(String),
    /// Larger than [`MAX_INCLUDE_BYTES`] by its metadata.
    #[error("file too large: {path} ({len} bytes, max {MAX_INCLUDE_BYTES})")]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        len: u64,
    },
    /// Grew past [`MAX_INCLUDE_BYTES`] while read.
    #[error("file too large: {0} (max {MAX_INCLUDE_BYTES} bytes)")]
    GrewTooLarge(String),
    /// Not UTF-8.
    #[error("file is not valid UTF-8: {0}")]
    NotUtf8(String),
}

/// Why an instructions or prompt file cannot be prepared for editing.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// No home directory.
    #[error("Cannot locate ~/.config/bb7: HOME is not set")]
    NoConfigDir,
    /// Project instructions in global-only mode.
    #[error("No project: project instructions are not available in global-only mode")]
    NoProject,
    /// A level other than project, global or system.
    #[error("Invalid level: {0} (must be project, global or system)")]
    BadLevel(String),
    /// The file (or its directory) cannot be created.
    #[error("Cannot create {what}: {source}")]
    Create {
        /// The path, as shown.
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The path has no parent directory or file name.
    #[error("Cannot create {0}")]
    BadPath(String),
    /// The project file was created but its path cannot be handed out.
    #[error("Cannot open {PROJECT_INSTRUCTIONS_PATH}: {0}")]
    Open(#[source] io::Error),
}

/// Loads the global and project instructions. `home_config_dir` is `~/.config/bb7`; `project_root` is `None`
/// in global-only mode.
pub fn load(home_config_dir: Option<&Path>, project_root: Option<&ProjectDir>) -> Instructions {
    Instructions {
        global: home_config_dir.and_then(load_global),
        project: match project_root {
            Some(root) => load_project(root),
            None => Ok(None),
        },
    }
}

/// Reads `{config_dir}/instructions.md` as is; `None` when missing, unreadable or blank.
pub fn load_global(config_dir: &Path) -> Option<String> {
    let path = config_dir.join(GLOBAL_INSTRUCTIONS_FILE);
    match read_regular_path(&path) {
        Ok(bytes) => {
            let text = strip_comments(&String::from_utf8_lossy(&bytes));
            (!text.trim().is_empty()).then_some(text)
        }
        Err(e) => {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!("cannot read {}: {e}", path.display());
            }
            None
        }
    }
}

/// Reads and processes `{project_root}/.bb7/instructions`: `Ok(None)` when missing or blank after processing.
pub fn load_project(project: &ProjectDir) -> Result<Option<String>, InstructionsError> {
    // The file ships with the repository: a symlink could point anywhere (an SSH key) and its
    // content would go to the model, so it is not followed (and a FIFO cannot hang the host).
    let bytes = match crate::store::read_regular_nofollow(project.state(), "instructions") {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(InstructionsError::Symlink);
        }
        Err(e) => return Err(InstructionsError::Read(Arc::new(e))),
    };
    let text = String::from_utf8(bytes).map_err(|_| InstructionsError::NotUtf8)?;
    let processed = process_project(&text, project)?;
    Ok((!processed.trim().is_empty()).then_some(processed))
}

/// Applies the project directives to `source` (the text of `.bb7/instructions`), resolving includes against
/// `project_root`. Returns every error, one per line, each naming its line.
pub fn process_project(source: &str, project: &ProjectDir) -> Result<String, InstructionsError> {
    let mut out = String::with_capacity(source.len());
    let mut errors = Vec::new();
    let mut in_fence = false;
    for (index, raw) in source.split_inclusive('\n').enumerate() {
        let line = raw.trim_end_matches(['\n', '\r']);
        let fence = line.trim_start_matches([' ', '\t']);
        if fence.starts_with("```") || fence.starts_with("~~~") {
            in_fence = !in_fence;
            out.push_str(raw);
            continue;
        }
        if in_fence {
            out.push_str(raw);
            continue;
        }
        if line.starts_with("@@") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("@include")
            && (rest.is_empty() || rest.starts_with([' ', '\t']))
        {
            // A path with spaces may be quoted: `@include "docs/my notes.md"`.
            let path = rest.trim();
            let path = match path.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
                Some(inner) if !inner.is_empty() => inner,
                _ => path,
            };
            match include(project, path) {
                Ok(text) => {
                    out.push_str(&text);
                    if !text.is_empty() && !text.ends_with('\n') {
                        out.push('\n');
                    }
                }
                Err(error) => errors.push(DirectiveError {
                    line: index + 1,
                    error,
                }),
            }
            continue;
        }
        out.push_str(raw);
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(InstructionsError::Directives(errors))
    }
}

/// Reads an included file under the project path rule.
fn include(project: &ProjectDir, path: &str) -> Result<String, IncludeError> {
    if path.is_empty() {
        return Err(IncludeError::MissingPath);
    }
    let rel = Path::new(path);
    if rel.is_absolute() || rel.has_root() {
        return Err(IncludeError::Absolute(path.to_string()));
    }
    if escapes_lexically(rel) {
        return Err(IncludeError::Escapes(path.to_string()));
    }
    let norm = bb7_tool_logic::paths::normalize("path", path, false).map_err(|e| {
        IncludeError::Invalid {
            path: path.to_string(),
            reason: e.message,
        }
    })?;
    let read_err = |source| IncludeError::Read {
        path: path.to_string(),
        source: Arc::new(source),
    };
    let file = project.open_read(&norm).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => IncludeError::NotFound(path.to_string()),
        _ => read_err(e),
    })?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(IncludeError::NotRegular(path.to_string()));
    }
    // The agent's retrieval rule: a hard link inside the project may be the same file as one
    // outside it (checked on the opened file, so a link made after a check cannot slip through).
    if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
        return Err(IncludeError::HardLinks(path.to_string()));
    }
    if meta.len() > MAX_INCLUDE_BYTES {
        return Err(IncludeError::TooLarge {
            path: path.to_string(),
            len: meta.len(),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_INCLUDE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_INCLUDE_BYTES {
        return Err(IncludeError::GrewTooLarge(path.to_string()));
    }
    String::from_utf8(bytes).map_err(|_| IncludeError::NotUtf8(path.to_string()))
}

/// Whether `..` components take `path` above its starting directory, ignoring symlinks.
fn escapes_lexically(path: &Path) -> bool {
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                if depth == 0 {
                    return true;
                }
                depth -= 1;
            }
            Component::RootDir | Component::Prefix(_) => return true,
        }
    }
    false
}

/// The system prompt: `{config_dir}/system_prompt.txt` when it exists (then `true`), else [`SYSTEM_PROMPT`].
pub fn system_prompt(config_dir: Option<&Path>) -> (String, bool) {
    if let Some(dir) = config_dir {
        let path = dir.join(SYSTEM_PROMPT_FILE);
        match read_regular_path(&path) {
            // `@@` lines are comments; an override with nothing else falls back to the built-in.
            Ok(bytes) => {
                let text = strip_comments(&String::from_utf8_lossy(&bytes));
                if !text.trim().is_empty() {
                    return (text, true);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot read {}: {e}", path.display()),
        }
    }
    (SYSTEM_PROMPT.to_string(), false)
}

/// The system prompt for one kind of chat: keeps the parts marked for it, drops the parts marked for the other
/// kind, and removes the marker lines. Text outside markers is always kept.
pub fn render_system_prompt(system: &str, global_chat: bool) -> String {
    let mut out = String::with_capacity(system.len());
    let mut keep = true;
    for raw in system.split_inclusive('\n') {
        match raw.trim() {
            PROJECT_MARKER => keep = !global_chat,
            GLOBAL_MARKER => keep = global_chat,
            END_MARKER => keep = true,
            _ if keep => out.push_str(raw),
            _ => {}
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// The instruction blocks of the system message: the global instructions, then (project chats only) the
/// project instructions, each in `<user-instructions source="…">` tags. Empty when there are none; a project
/// parse error contributes nothing (the caller blocks the send).
pub fn render_instructions(inst: &Instructions, global_chat: bool) -> String {
    let mut blocks = Vec::new();
    if let Some(global) = &inst.global {
        blocks.push(wrap(
            "user-instructions",
            GLOBAL_INSTRUCTIONS_DISPLAY,
            global,
        ));
    }
    if !global_chat && let Ok(Some(project)) = &inst.project {
        blocks.push(wrap(
            "project-instructions",
            PROJECT_INSTRUCTIONS_PATH,
            project,
        ));
    }
    blocks.join("\n\n")
}

/// `<tag source="…">content</tag>`: `user-instructions` for the global file, `project-instructions`
/// for the project's (the reference backend's tags).
fn wrap(tag: &str, source: &str, content: &str) -> String {
    format!(
        "<{tag} source=\"{source}\">\n{}\n</{tag}>",
        content.trim_end()
    )
}

/// Drops `@@` comment lines (column 0), as in every instruction file and the prompt override.
fn strip_comments(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|l| !l.starts_with("@@"))
        .collect()
}

/// The whole system message: [`render_system_prompt`] followed by [`render_instructions`].
pub fn render_system_message(system: &str, inst: &Instructions, global_chat: bool) -> String {
    let mut message = render_system_prompt(system, global_chat);
    let instructions = render_instructions(inst, global_chat);
    if !instructions.is_empty() {
        if !message.is_empty() {
            message.push_str("\n\n");
        }
        message.push_str(&instructions);
    }
    message
}

/// Creates the file for `level` (`project`, `global` or `system`) if it is missing and returns its absolute
/// path. New files start as: project, a commented template; global, empty; system, the built-in prompt.
pub fn prepare(
    level: &str,
    home_config_dir: Option<&Path>,
    project: Option<&ProjectDir>,
) -> Result<PathBuf, PrepareError> {
    let no_config_dir = || PrepareError::NoConfigDir;
    let (path, seed) = match level {
        "project" => {
            let project = project.ok_or(PrepareError::NoProject)?;
            // Created through the .bb7/ handle held since init; the path handed to the editor is
            // checked to still lead to that directory.
            create_if_missing_in(project.state(), "instructions", PROJECT_TEMPLATE).map_err(
                |source| PrepareError::Create {
                    what: PROJECT_INSTRUCTIONS_PATH.to_string(),
                    source,
                },
            )?;
            return project
                .state_path("instructions")
                .map_err(PrepareError::Open);
        }
        "global" => {
            let dir = home_config_dir.ok_or_else(no_config_dir)?;
            create_dir(dir)?;
            (dir.join(GLOBAL_INSTRUCTIONS_FILE), "")
        }
        "system" => {
            let dir = home_config_dir.ok_or_else(no_config_dir)?;
            create_dir(dir)?;
            (dir.join(SYSTEM_PROMPT_FILE), SYSTEM_PROMPT)
        }
        other => {
            return Err(PrepareError::BadLevel(other.to_string()));
        }
    };
    let path = std::path::absolute(&path).unwrap_or(path);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Err(PrepareError::BadPath(path.display().to_string()));
    };
    cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())
        .and_then(|d| create_if_missing_in(&d, name, seed))
        .map_err(|source| PrepareError::Create {
            what: path.display().to_string(),
            source,
        })?;
    Ok(path)
}

fn create_dir(dir: &Path) -> Result<(), PrepareError> {
    std::fs::create_dir_all(dir).map_err(|source| PrepareError::Create {
        what: dir.display().to_string(),
        source,
    })
}

/// Creates `name` in `dir` with `content` unless something already exists there. The content is written to a
/// temporary file first and linked into place, so the file appears complete or not at all and an existing file
/// (or symlink) is never replaced or followed.
fn create_if_missing_in(dir: &cap_std::fs::Dir, name: &str, content: &str) -> io::Result<()> {
    if dir.symlink_metadata(name).is_ok() {
        return Ok(());
    }
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = format!(".{name}.{}-{seq}.tmp", std::process::id());
    let result = (|| {
        // create_new: a file or symlink planted at the temporary name is never opened or truncated.
        let mut opts = cap_std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        let mut file = dir.open_with(&tmp, &opts)?;
        file.write_all(content.as_bytes())?;
        file.sync_all()?;
        match dir.hard_link(&tmp, dir, name) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    })();
    let _ = dir.remove_file(&tmp);
    if result.is_ok() {
        crate::store::sync_dir(dir);
    }
    result
}

/// Which customization files exist, for `get_customization_info` and the `instructions_info` of `chat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// `~/.config/bb7/system_prompt.txt` exists and replaces the built-in prompt.
    pub system_override: bool,
    /// The global instructions path as shown to the user.
    pub global_path: String,
    /// The global instructions file exists.
    pub global_exists: bool,
    /// The project instructions path, relative to the project root.
    pub project_path: String,
    /// The project instructions file exists.
    pub project_exists: bool,
    /// The project file's parse errors; empty when none.
    pub project_error: String,
}

/// The `customization_info` reply's fields (PROTOCOL.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CustomizationInfo {
    /// `~/.config/bb7/system_prompt.txt` exists and replaces the built-in prompt.
    pub system_override: bool,
    /// The global instructions file exists.
    pub global_instructions: bool,
    /// True only when the project file exists and parses.
    pub project_instructions: bool,
    /// The project file's errors (reading or processing it); empty when none.
    pub project_instructions_error: String,
}

/// The `instructions_info` object of the `chat` reply (PROTOCOL.md); `project_error` is omitted when empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstructionsInfo {
    /// The global instructions path as shown to the user.
    pub global_path: String,
    /// The global instructions file exists.
    pub global_exists: bool,
    /// The project instructions path, relative to the project root.
    pub project_path: String,
    /// The project instructions file exists.
    pub project_exists: bool,
    /// The project file's errors (reading or processing it); empty, and then omitted, when none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub project_error: String,
}

impl Info {
    /// The `customization_info` view.
    pub fn customization(&self) -> CustomizationInfo {
        CustomizationInfo {
            system_override: self.system_override,
            global_instructions: self.global_exists,
            project_instructions: self.project_exists && self.project_error.is_empty(),
            project_instructions_error: self.project_error.clone(),
        }
    }

    /// The `instructions_info` view.
    pub fn instructions(&self) -> InstructionsInfo {
        InstructionsInfo {
            global_path: self.global_path.clone(),
            global_exists: self.global_exists,
            project_path: self.project_path.clone(),
            project_exists: self.project_exists,
            project_error: self.project_error.clone(),
        }
    }
}

/// Looks at the customization files (parsing the project file to report its errors). `project_root` is `None`
/// in global-only mode.
pub fn info(home_config_dir: Option<&Path>, project: Option<&ProjectDir>) -> Info {
    let exists = |p: PathBuf| std::fs::metadata(p).is_ok();
    let global_exists = home_config_dir.is_some_and(|d| exists(d.join(GLOBAL_INSTRUCTIONS_FILE)));
    let system_override = home_config_dir.is_some_and(|d| exists(d.join(SYSTEM_PROMPT_FILE)));
    let global_path = match home_config_dir {
        Some(d) => crate::config::display_path(&d.join(GLOBAL_INSTRUCTIONS_FILE)),
        None => GLOBAL_INSTRUCTIONS_DISPLAY.to_string(),
    };
    let (project_exists, project_error) = match project {
        Some(p) => (
            p.state().symlink_metadata("instructions").is_ok(),
            load_project(p)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default(),
        ),
        None => (false, String::new()),
    };
    Info {
        system_override,
        global_path,
        global_exists,
        project_path: PROJECT_INSTRUCTIONS_PATH.to_string(),
        project_exists,
        project_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _tmp: tempfile::TempDir,
        config: PathBuf,
        root: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config/bb7");
        let root = tmp.path().join("project");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::create_dir_all(root.join(".bb7")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.md"), "SECRET\n").unwrap();
        Fixture {
            _tmp: tmp,
            config,
            root,
            outside,
        }
    }

    impl Fixture {
        fn project_file(&self, text: &str) {
            std::fs::write(self.root.join(PROJECT_INSTRUCTIONS_PATH), text).unwrap();
        }
        fn file(&self, rel: &str, text: &str) {
            let p = self.root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        fn pd(&self) -> ProjectDir {
            ProjectDir::open(&self.root).unwrap()
        }
        fn project(&self) -> Result<Option<String>, InstructionsError> {
            load_project(&self.pd())
        }
        /// The project instructions' error as the user reads it.
        fn project_err(&self) -> String {
            self.project().unwrap_err().to_string()
        }
    }

    #[test]
    fn nothing_present() {
        let f = fixture();
        let inst = load(Some(&f.config), Some(&f.pd()));
        assert_eq!(inst.global, None);
        assert_eq!(inst.project, Ok(None));
        let inst = load(None, None);
        assert_eq!(inst.global, None);
        assert_eq!(inst.project, Ok(None));
        assert_eq!(render_instructions(&inst, false), "");
    }

    #[test]
    fn global_drops_comments_but_has_no_includes() {
        let f = fixture();
        let text = "Be terse.\n@@ a comment\n@include not/a/directive\n";
        std::fs::write(f.config.join("instructions.md"), text).unwrap();
        let inst = load(Some(&f.config), Some(&f.pd()));
        assert_eq!(
            inst.global.as_deref(),
            Some("Be terse.\n@include not/a/directive\n")
        );
        std::fs::write(f.config.join("instructions.md"), " \n\n@@ only a comment\n").unwrap();
        assert_eq!(load_global(&f.config), None);
    }

    #[test]
    fn an_override_of_only_comments_falls_back_to_the_built_in_prompt() {
        let f = fixture();
        std::fs::write(f.config.join(SYSTEM_PROMPT_FILE), "@@ edit below\n").unwrap();
        assert_eq!(
            system_prompt(Some(&f.config)),
            (SYSTEM_PROMPT.to_string(), false)
        );
        std::fs::write(
            f.config.join(SYSTEM_PROMPT_FILE),
            "@@ mine\nYou are terse.\n",
        )
        .unwrap();
        assert_eq!(
            system_prompt(Some(&f.config)),
            ("You are terse.\n".to_string(), true)
        );
    }

    #[test]
    fn comments_are_dropped_and_text_kept() {
        let f = fixture();
        f.project_file("@@ comment\nUse tabs.\n  @@ indented is text\n@@\nEnd.");
        assert_eq!(
            f.project().unwrap().as_deref(),
            Some("Use tabs.\n  @@ indented is text\nEnd.")
        );
    }

    #[test]
    fn include_inserts_verbatim_without_reparsing() {
        let f = fixture();
        f.file("docs/style.md", "@@ kept\n@include other.md\nno newline");
        f.project_file("Intro\n@include docs/style.md\nOutro\n@include   ./docs/style.md  \n");
        assert_eq!(
            f.project().unwrap().as_deref(),
            Some(
                "Intro\n@@ kept\n@include other.md\nno newline\nOutro\n@@ kept\n@include other.md\nno newline\n"
            )
        );
    }

    #[test]
    fn directives_inside_fences_are_text() {
        let f = fixture();
        f.project_file(
            "```sh\n@@ shown\n@include /etc/passwd\n```\n@@ hidden\n~~~\n@include x\n~~~\nafter\n",
        );
        assert_eq!(
            f.project().unwrap().as_deref(),
            Some("```sh\n@@ shown\n@include /etc/passwd\n```\n~~~\n@include x\n~~~\nafter\n")
        );
        f.project_file("```\n@@ unterminated fence\n");
        assert_eq!(
            f.project().unwrap().as_deref(),
            Some("```\n@@ unterminated fence\n")
        );
    }

    #[test]
    fn only_column_zero_and_whole_word_directives() {
        let f = fixture();
        f.project_file(" @include /etc/passwd\n@includes x\n@include\tdocs/a.md\n");
        f.file("docs/a.md", "A\n");
        assert_eq!(
            f.project().unwrap().as_deref(),
            Some(" @include /etc/passwd\n@includes x\nA\n")
        );
    }

    #[test]
    fn crlf_lines() {
        let f = fixture();
        f.file("a.md", "A\r\n");
        f.project_file("@@ c\r\nx\r\n@include a.md\r\n");
        assert_eq!(f.project().unwrap().as_deref(), Some("x\r\nA\r\n"));
    }

    #[test]
    fn include_errors_name_the_line() {
        let f = fixture();
        f.project_file("ok\n\n@include /etc/passwd\n");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 3: @include: absolute paths are not allowed: /etc/passwd"
        );
        f.project_file("@include ../x");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 1: @include: path resolves outside the project root: ../x"
        );
        f.project_file("@include docs/../../outside/secret.md");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 1: @include: path resolves outside the project root: docs/../../outside/secret.md"
        );
        f.project_file("@include docs/x.md");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 1: @include: file not found: docs/x.md"
        );
        f.project_file("@include\n@include   \n");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 1: @include: missing path\n.bb7/instructions line 2: @include: missing path"
        );
    }

    #[test]
    fn includes_that_are_not_regular_utf8_files() {
        let f = fixture();
        std::fs::create_dir_all(f.root.join("docs")).unwrap();
        f.project_file("@include docs");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 1: @include: not a regular file: docs"
        );
        std::fs::write(f.root.join("bin"), b"\xff\xfe").unwrap();
        f.project_file("@include bin");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 1: @include: file is not valid UTF-8: bin"
        );
        let big = vec![b'a'; MAX_INCLUDE_BYTES as usize + 1];
        std::fs::write(f.root.join("big"), big).unwrap();
        f.project_file("@include big");
        assert!(f.project_err().contains("file too large: big"));
    }

    #[test]
    fn fifos_are_refused_without_blocking() {
        let f = fixture();
        // A FIFO can always be made in a temporary directory: failing to is a failed test.
        let mkfifo = |p: &std::path::Path| {
            let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
            assert_eq!(
                r,
                0,
                "mkfifo {}: {}",
                p.display(),
                std::io::Error::last_os_error()
            );
        };
        mkfifo(&f.root.join("pipe"));
        f.project_file("@include pipe");
        assert_eq!(
            f.project_err(),
            ".bb7/instructions line 1: @include: not a regular file: pipe"
        );
        std::fs::remove_file(f.root.join(PROJECT_INSTRUCTIONS_PATH)).unwrap();
        mkfifo(&f.root.join(PROJECT_INSTRUCTIONS_PATH));
        assert!(f.project_err().contains("not a regular file"));
    }

    #[test]
    fn symlink_escapes_are_rejected() {
        let f = fixture();
        symlink(f.outside.join("secret.md"), f.root.join("link.md")).unwrap();
        symlink(&f.outside, f.root.join("outdir")).unwrap();
        symlink("../outside/secret.md", f.root.join("rel-link.md")).unwrap();
        f.project_file("@include link.md\n@include outdir/secret.md\n@include rel-link.md\n");
        let err = f.project_err();
        assert_eq!(err.lines().count(), 3, "{err}");
        for (path, line) in [("link.md", 1), ("outdir/secret.md", 2), ("rel-link.md", 3)] {
            let prefix = format!(".bb7/instructions line {line}: @include: cannot read {path}: ");
            assert!(
                err.lines()
                    .any(|l| l.starts_with(&prefix) && l.contains("symbolic link")),
                "{err}"
            );
            assert!(!err.contains("SECRET"));
        }
    }

    #[test]
    fn a_hard_link_is_not_included() {
        // The agent's retrieval rule (issue 23): a file with several links may be the same file as
        // one outside the project.
        let f = fixture();
        std::fs::write(f.outside.join("secret.md"), "SECRET\n").unwrap();
        std::fs::hard_link(f.outside.join("secret.md"), f.root.join("notes.md")).unwrap();
        f.project_file("@include notes.md\n");
        let err = f.project_err();
        assert_eq!(
            err,
            ".bb7/instructions line 1: @include: notes.md has several hard links (it may be the same file as one outside the project), so it is not included"
        );
        std::fs::remove_file(f.outside.join("secret.md")).unwrap();
        assert_eq!(f.project().unwrap().as_deref(), Some("SECRET\n"));
    }

    #[test]
    fn no_symlink_and_no_git_or_state_dir_even_inside_the_root() {
        // One rule for every project path: a link inside the project (to .git/config, say) is
        // refused like one leading outside, and so is naming .git/ or .bb7/ directly.
        let f = fixture();
        f.file("docs/real.md", "REAL\n");
        f.file(".git/config", "[remote] url = https://token@host/x\n");
        symlink("docs/real.md", f.root.join("alias.md")).unwrap();
        symlink(".git", f.root.join("g")).unwrap();
        for inc in [
            "alias.md",
            "g/config",
            ".git/config",
            ".GIT/config",
            ".bb7/instructions",
        ] {
            f.project_file(&format!("@include {inc}\n"));
            let err = f.project_err();
            assert!(!err.contains("token"), "{err}");
            assert!(err.contains(inc), "{err}");
        }
        f.project_file("@include docs/real.md");
        assert_eq!(f.project().unwrap().as_deref(), Some("REAL\n"));
    }

    #[test]
    fn a_replaced_state_dir_is_not_followed() {
        let f = fixture();
        let pd = f.pd();
        f.project_file("MINE\n");
        std::fs::rename(f.root.join(".bb7"), f.root.join("old")).unwrap();
        std::fs::create_dir_all(f.outside.join("evil")).unwrap();
        std::fs::write(f.outside.join("evil/instructions"), "EVIL\n").unwrap();
        symlink(f.outside.join("evil"), f.root.join(".bb7")).unwrap();
        assert_eq!(load_project(&pd), Ok(Some("MINE\n".to_string())));
        std::fs::remove_file(f.outside.join("evil/instructions")).unwrap();
        let e = prepare("project", Some(&f.config), Some(&pd))
            .expect_err("a replaced .bb7 is refused")
            .to_string();
        assert!(
            e.starts_with(&format!("Cannot open {PROJECT_INSTRUCTIONS_PATH}: "))
                && e.ends_with("was replaced since the project was opened; run init again"),
            "{e}"
        );
        assert!(!f.outside.join("evil/instructions").exists());
    }

    #[test]
    fn blank_project_file_is_none() {
        let f = fixture();
        f.project_file("@@ only comments\n@@\n\n");
        assert_eq!(f.project(), Ok(None));
    }

    #[test]
    fn system_prompt_override() {
        let f = fixture();
        assert_eq!(
            system_prompt(Some(&f.config)),
            (SYSTEM_PROMPT.to_string(), false)
        );
        assert_eq!(system_prompt(None), (SYSTEM_PROMPT.to_string(), false));
        std::fs::write(f.config.join("system_prompt.txt"), "Custom.").unwrap();
        assert_eq!(
            system_prompt(Some(&f.config)),
            ("Custom.".to_string(), true)
        );
        assert!(info(Some(&f.config), None).system_override);
    }

    #[test]
    fn embedded_prompt_sections_per_chat_kind() {
        let project = render_system_prompt(SYSTEM_PROMPT, false);
        let global = render_system_prompt(SYSTEM_PROMPT, true);
        for p in [&project, &global] {
            assert!(!p.contains("<!-- bb7:"), "{p}");
            assert!(!p.contains("\n\n\n"), "{p}");
            assert!(p.starts_with("You are BB-7"));
        }
        assert!(project.contains("edit_file") && project.contains("write_file"));
        assert!(!project.contains("you have no tools"));
        assert!(!global.contains("edit_file"));
        assert!(global.contains("you have no tools"));
        let lines = SYSTEM_PROMPT.lines().count();
        assert!((30..=80).contains(&lines), "{lines}");
    }

    #[test]
    fn render_system_message_layout() {
        let inst = Instructions {
            global: Some("G1\nG2\n\n".to_string()),
            project: Ok(Some("P1\n".to_string())),
        };
        assert_eq!(
            render_system_message("SYS\n", &inst, false),
            "SYS\n\n<user-instructions source=\"~/.config/bb7/instructions.md\">\nG1\nG2\n</user-instructions>\n\n<project-instructions source=\".bb7/instructions\">\nP1\n</project-instructions>"
        );
        assert_eq!(
            render_system_message("SYS", &inst, true),
            "SYS\n\n<user-instructions source=\"~/.config/bb7/instructions.md\">\nG1\nG2\n</user-instructions>"
        );
        let broken = Instructions {
            global: None,
            project: Err(InstructionsError::NotUtf8),
        };
        assert_eq!(render_system_message("SYS", &broken, false), "SYS");
        let custom = "A\n<!-- bb7:project -->\nP\n<!-- bb7:end -->\n<!-- bb7:global -->\nG\n<!-- bb7:end -->\nB\n";
        assert_eq!(render_system_prompt(custom, false), "A\nP\nB");
        assert_eq!(render_system_prompt(custom, true), "A\nG\nB");
    }

    #[test]
    fn prepare_creates_each_level_once() {
        let f = fixture();
        let p = prepare("project", Some(&f.config), Some(&f.pd())).unwrap();
        assert!(p.is_absolute());
        assert_eq!(p, f.root.join(".bb7/instructions"));
        let template = std::fs::read_to_string(&p).unwrap();
        assert!(template.lines().all(|l| l.starts_with("@@")), "{template}");
        assert_eq!(load_project(&f.pd()), Ok(None));

        let g = prepare("global", Some(&f.config), Some(&f.pd())).unwrap();
        assert_eq!(g, f.config.join("instructions.md"));
        assert_eq!(std::fs::read_to_string(&g).unwrap(), "");

        let s = prepare("system", Some(&f.config), None).unwrap();
        assert_eq!(s, f.config.join("system_prompt.txt"));
        assert_eq!(std::fs::read_to_string(&s).unwrap(), SYSTEM_PROMPT);

        std::fs::write(&p, "mine").unwrap();
        std::fs::write(&s, "mine too").unwrap();
        prepare("project", Some(&f.config), Some(&f.pd())).unwrap();
        prepare("system", Some(&f.config), None).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "mine");
        assert_eq!(std::fs::read_to_string(&s).unwrap(), "mine too");
        let leftovers: Vec<_> = std::fs::read_dir(&f.config)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn prepare_creates_the_config_dir() {
        let f = fixture();
        let dir = f.outside.join("fresh/bb7");
        let g = prepare("global", Some(&dir), None).unwrap();
        assert!(g.is_file());
    }

    #[test]
    fn prepare_errors() {
        let f = fixture();
        assert_eq!(
            prepare("user", Some(&f.config), Some(&f.pd()))
                .unwrap_err()
                .to_string(),
            "Invalid level: user (must be project, global or system)"
        );
        assert_eq!(
            prepare("project", Some(&f.config), None)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("No project: project instructions are not available in global-only mode")
        );
        assert!(
            ProjectDir::open(&f.outside).is_err(),
            "a project needs a .bb7 directory"
        );
        assert_eq!(
            prepare("global", None, Some(&f.pd()))
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("Cannot locate ~/.config/bb7: HOME is not set")
        );
    }

    #[test]
    fn info_reports_existence_and_errors() {
        let f = fixture();
        let i = info(Some(&f.config), Some(&f.pd()));
        assert_eq!(
            i.customization(),
            CustomizationInfo {
                system_override: false,
                global_instructions: false,
                project_instructions: false,
                project_instructions_error: String::new(),
            }
        );
        let json = serde_json::to_value(i.instructions()).unwrap();
        assert_eq!(json["project_path"], ".bb7/instructions");
        assert!(json.get("project_error").is_none());

        std::fs::write(f.config.join("instructions.md"), "g").unwrap();
        f.project_file("@include nope.md\n");
        let i = info(Some(&f.config), Some(&f.pd()));
        let c = i.customization();
        assert!(c.global_instructions);
        assert!(!c.project_instructions);
        assert_eq!(
            c.project_instructions_error,
            ".bb7/instructions line 1: @include: file not found: nope.md"
        );
        let json = serde_json::to_value(i.instructions()).unwrap();
        assert_eq!(json["global_exists"], true);
        assert_eq!(json["project_exists"], true);
        assert_eq!(json["project_error"], c.project_instructions_error);

        f.project_file("fine\n");
        assert!(
            info(Some(&f.config), Some(&f.pd()))
                .customization()
                .project_instructions
        );
        let none = info(None, None);
        assert_eq!(none.global_path, "~/.config/bb7/instructions.md");
        assert!(!none.project_exists);
    }
}
