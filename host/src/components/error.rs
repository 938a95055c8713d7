//! Why a third-party component operation failed: [`ComponentError`], and [`FieldError`] for one
//! field of a manifest or a grant. Each message is the one `bb7 tools …` prints and the protocol's
//! `error` carries; none quotes a file's content.

use std::path::PathBuf;

use crate::sandbox::error::CallError;
use crate::sandbox::error::HostPortError;

/// Why one field of a manifest or a grant is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// A component name that is not lower snake case of at most 32 characters.
    #[error(
        "name {name:?} must be 1 to {max} characters of a-z, 0-9 and _, start with a letter, and contain no \"__\" nor end with \"_\""
    )]
    Name {
        /// The name given.
        name: String,
        /// The longest name allowed.
        max: usize,
    },
    /// An empty or overlong version.
    #[error("version must be non-empty text of at most 64 bytes")]
    Version,
    /// A contract version this bb7 does not serve.
    #[error("wit = {wit:?} is not a contract version this bb7 serves (it serves {supported})")]
    Wit {
        /// The version given.
        wit: String,
        /// The versions served, comma-separated.
        supported: String,
    },
    /// A description over 1024 bytes.
    #[error("description must be at most 1024 bytes")]
    DescriptionLength,
    /// A `hook` list that is empty or names an unknown point (empty text: the list was empty).
    #[error(
        "hook points must be one or more of pre_send, pre_tool_call, post_tool_call, pre_apply (got {0:?})"
    )]
    HookPoint(String),
    /// A control, bidirectional or invisible character in a text field.
    #[error(
        "{field} must not contain control, bidirectional or invisible characters (found U+{code:04X})"
    )]
    Invisible {
        /// The field (`version`, `description`).
        field: &'static str,
        /// The character's code point.
        code: u32,
    },
    /// A `files` value that is none of the three.
    #[error("files must be \"none\", \"project-read\" or \"output-write\", not {0:?}")]
    Files(String),
    /// A `host:port` entry that is refused.
    #[error(transparent)]
    Network(#[from] HostPortError),
    /// An `http` origin that is refused.
    #[error(transparent)]
    Origin(#[from] crate::sandbox::http::OriginError),
    /// An environment entry that is not a variable name.
    #[error("env entry {0:?} must be a variable name (letters, digits and _)")]
    Env(String),
    /// A limit outside 1 and the host's own.
    #[error("limits.{field} must be between 1 and {max}")]
    Limit {
        /// The key (`memory_mib`, `wall_time_ms`, `result_kib`).
        field: &'static str,
        /// The largest value allowed.
        max: u64,
    },
}

/// Why `bb7 tools add` refuses a component.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// It cannot be compiled or linked under what its manifest requests.
    #[error("{0:#}")]
    Load(anyhow::Error),
    /// Its manifest and its exports name different contract versions.
    #[error("its manifest says wit = {manifest:?}, but the component exports {exports}")]
    WitMismatch {
        /// The manifest's `wit`.
        manifest: String,
        /// The interface the component exports.
        exports: &'static str,
    },
    /// Its `describe` call failed.
    #[error("describe failed: {0}")]
    Describe(CallError),
    /// Its manifest names hook points, but it does not export `decide` of `bb7:hook/hook@0.1.0`,
    /// or it does and its manifest names none.
    #[error(
        "a hook's manifest names its points (hook = [...]) and the component exports bb7:hook/hook@0.1.0's decide; {0}"
    )]
    Hook(&'static str),
    /// Its tool name is not lower snake case.
    #[error(
        "its tool name {0:?} must be lower snake case (a-z, 0-9, _; at most 64 characters; no \"__\")"
    )]
    ToolName(String),
    /// `<component>__<tool>` is longer than a function name may be.
    #[error(
        "the model would call it {function:?}, longer than {max} characters (shorten the component or tool name)"
    )]
    FunctionName {
        /// The name the model would call.
        function: String,
        /// The longest function name.
        max: usize,
    },
    /// Its description or schema is too long.
    #[error(
        "its tool description (at most {description} bytes) or parameters schema (at most {schema} bytes) is too long; both go into every request"
    )]
    TooLong {
        /// The longest description.
        description: usize,
        /// The longest schema.
        schema: usize,
    },
    /// Its description holds a control, bidirectional or invisible character.
    #[error(
        "its tool description contains the control, bidirectional or invisible character U+{0:04X}"
    )]
    Invisible(u32),
    /// Its parameters schema is not a JSON object.
    #[error("its parameters schema is not a JSON object")]
    Schema,
}

/// Why a component operation (install, grant, enable, the lockfile, loading one to run, its
/// project view) failed.
#[derive(Debug, thiserror::Error)]
pub enum ComponentError {
    /// Reading or writing a file or directory failed.
    #[error("{}: {err}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        err: std::io::Error,
    },
    /// There is no global state directory to keep components in.
    #[error("no home directory: set HOME or BB7_HOME to install tool components")]
    NoHome,
    /// `~/.bb7/tools.json` cannot be parsed.
    #[error("{} is damaged ({err}); fix or remove it", .path.display())]
    StateDamaged {
        /// The state file.
        path: PathBuf,
        /// The parse error.
        err: serde_json::Error,
    },
    /// The state cannot be serialised.
    #[error("{0}")]
    Serialize(serde_json::Error),
    /// The lockfile cannot be serialised.
    #[error("{0}")]
    LockText(toml::ser::Error),
    /// Storing a component binary failed.
    #[error("storing the component: {0}")]
    StoreBinary(std::io::Error),
    /// No component by that name is installed (with the installed names, for the message).
    #[error(
        "no tool component named {name:?} is installed ({})",
        if installed.is_empty() {
            "none is; add one with `bb7 tools add`".to_string()
        } else {
            format!("installed: {}", installed.join(", "))
        }
    )]
    NotInstalled {
        /// The name asked for.
        name: String,
        /// Every installed component's name.
        installed: Vec<String>,
    },
    /// The component went away between the change and reading its state back.
    #[error("no tool component named {0:?} is installed")]
    Gone(String),
    /// The component vanished while it was being installed.
    #[error("the component vanished after install")]
    Vanished,
    /// A grant asks for more than the component requests.
    #[error(
        "{name} did not request {}; a grant can only give what the component asks for ({requested})",
        excess.join(", ")
    )]
    BeyondRequest {
        /// The component.
        name: String,
        /// What the grant has beyond the request, worded for the user.
        excess: Vec<String>,
        /// The request, summarised.
        requested: String,
    },
    /// `revoke` of a component that has no grant.
    #[error("{0} has no grant to revoke")]
    NoGrant(String),
    /// Loading a component to run that is not granted.
    #[error("{0} is not granted")]
    NotGranted(String),
    /// The stored binary no longer hashes to the approved sha256.
    #[error(
        "{} was changed on disk (sha256 {actual}, approved {approved}); it is not run — add and grant it again",
        .path.display()
    )]
    ChangedOnDisk {
        /// The stored binary.
        path: PathBuf,
        /// Its sha256 now.
        actual: String,
        /// The sha256 approved.
        approved: String,
    },
    /// A component file cannot be read (too large, not a regular file, an I/O error).
    #[error("{0:#}")]
    Read(anyhow::Error),
    /// A granted component cannot be compiled or linked.
    #[error("{name}: {err:#}")]
    Load {
        /// The component.
        name: String,
        /// Why.
        err: anyhow::Error,
    },
    /// `bb7 tools add` refuses the component at `path`.
    #[error("{} is refused: {why}", .path.display())]
    Refused {
        /// The component file.
        path: PathBuf,
        /// Why.
        why: Refusal,
    },
    /// A field of a grant is refused.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// A field of a manifest is refused.
    #[error("{origin}: {err}")]
    Manifest {
        /// Where the manifest came from.
        origin: String,
        /// The field's problem.
        err: FieldError,
    },
    /// A manifest is not valid TOML or has an unknown key (its content is not shown).
    #[error("{origin}: line {line}, column {column}: {reason}")]
    ManifestSyntax {
        /// Where the manifest came from.
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's one-line reason.
        reason: String,
    },
    /// A manifest file is not UTF-8.
    #[error("{} is not UTF-8", .0.display())]
    ManifestNotUtf8(PathBuf),
    /// The manifest custom section is not UTF-8.
    #[error("the {section} custom section is not UTF-8")]
    SectionNotUtf8 {
        /// The section's name.
        section: &'static str,
    },
    /// The component holds more than one manifest section.
    #[error("the component holds more than one {section} custom section")]
    ManySections {
        /// The section's name.
        section: &'static str,
    },
    /// The component is not WebAssembly.
    #[error("the component is not valid WebAssembly: {0}")]
    NotWasm(wasmparser::BinaryReaderError),
    /// A manifest file and the custom section disagree.
    #[error(
        "{origin} and the component's {section} custom section disagree; make them the same (or remove one)"
    )]
    ManifestsDisagree {
        /// The manifest file.
        origin: String,
        /// The section's name.
        section: &'static str,
    },
    /// The component has no manifest.
    #[error(
        "{} has no manifest: put {file} beside it, or embed it in a custom section named {section}",
        .wasm.display()
    )]
    NoManifest {
        /// The component file.
        wasm: PathBuf,
        /// The manifest file name.
        file: &'static str,
        /// The section's name.
        section: &'static str,
    },
    /// A directory named for `add` holds no `.wasm`.
    #[error("{} holds no .wasm file", .0.display())]
    NoWasm(PathBuf),
    /// A directory named for `add` holds several `.wasm` files.
    #[error("{} holds {count} .wasm files; name the one to add", .path.display())]
    ManyWasm {
        /// The directory.
        path: PathBuf,
        /// How many.
        count: usize,
    },
    /// The lockfile cannot be read.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// `.bb7` is a symbolic link: the lockfile is not written through it.
    #[error("{} is a symbolic link; the lockfile is not written through it", .0.display())]
    LockLink(PathBuf),
    /// The project view's settings are invalid.
    #[error("the project view's settings: {0}")]
    ViewSettings(String),
    /// Listing the project for the view failed.
    #[error("listing the project for the view: {0}")]
    ViewList(String),
    /// The project has too many readable files for a view.
    #[error(
        "the project has more than {0} readable files; a project-read tool cannot be given all of it"
    )]
    ViewTooManyFiles(usize),
    /// The project's readable files are too large for a view.
    #[error(
        "the project's readable files hold more than {0} MiB; a project-read tool cannot be given all of it"
    )]
    ViewTooLarge(u64),
    /// Creating the view's directory or a file in it failed.
    #[error("creating the project view: {0}")]
    ViewCreate(std::io::Error),
    /// The view's directory cannot be granted.
    #[error("cannot grant the project view: {0}")]
    ViewGrant(std::io::Error),
    /// An output-write call's fresh directory cannot be made or granted.
    #[error("cannot create its output directory: {0}")]
    OutputDirCreate(std::io::Error),
    /// The directory named for an output-write call is not empty.
    #[error(
        "an output-write component gets an empty directory: --dir {} must be empty (the files it writes are left there)",
        .0.display()
    )]
    OutputNotEmpty(PathBuf),
    /// A directory cannot be granted.
    #[error("cannot grant {}: {err}", .path.display())]
    Grant {
        /// The directory.
        path: PathBuf,
        /// Why.
        err: std::io::Error,
    },
}

impl ComponentError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, err: std::io::Error) -> ComponentError {
        ComponentError::Io {
            path: path.into(),
            err,
        }
    }
}

/// Why `.bb7/tools.lock` cannot be read. The lockfile is input (a repository ships it), so no
/// message quotes its content: a link to `~/.git-credentials` or a secret pasted into it must never
/// reach a CI log. Errors name the file and, for a parse error, the line and column only.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `.bb7` or `.bb7/tools.lock` is a symbolic link (never followed).
    #[error(
        "{} is a symbolic link; bb7 does not follow it (replace it with the file `bb7 tools enable` writes)",
        .0.display()
    )]
    Link(PathBuf),
    /// It exists but cannot be read (not a regular file, too large, an I/O error).
    #[error("{0}: {1}")]
    Read(PathBuf, std::io::Error),
    /// It is not UTF-8.
    #[error("{} is not UTF-8 text (its content is not shown)", .0.display())]
    NotUtf8(PathBuf),
    /// It is not a lockfile: invalid TOML, an unknown key or a value of the wrong type.
    #[error(
        "{}: not a valid bb7 lockfile (at line {line}, column {column}; its content is not shown)",
        .path.display()
    )]
    Parse {
        /// The lockfile.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
    },
    /// Its `format` is not one this bb7 reads.
    #[error("{}: its format is not one this bb7 reads (format {expected})", .path.display())]
    Format {
        /// The lockfile.
        path: PathBuf,
        /// The format this bb7 reads.
        expected: u32,
    },
}
