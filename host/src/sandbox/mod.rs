//! The tool sandbox: runs tool components in wasmtime with nothing but the directory grants a call
//! needs.
//!
//! - [`engine`]: the one process-wide engine (pooling allocator, epoch ticker).
//! - [`hook_engine`]: the hooks' engine (the same code generation, a smaller pool).
//! - [`compiler`]: native code made by the separate `bb7-compile` program, killed at its time limit.
//! - [`cache`]: compiled components on disk, keyed by engine and component sha256.
//! - [`registry`]: the built-in components (embedded in the binary) and third-party component files.
//! - [`api`]: the WIT versions the host speaks, behind one version-neutral surface.
//! - [`grant`] and [`limits`]: what one call may touch and use (a grant's `host:port` entries are
//!   checked in [`grant`]; an output-write call's meter is [`limits::OutputBudget`]).
//! - [`error`]: why a call failed ([`CallError`]) or a network entry is refused.
//! - [`runner`]: one call: fresh store, exact preopens, limits, audit record.
//! - [`outdir`]: an `output-write` call's directory: the bounded walk and the flat removal.
//! - [`http`]: `wasi:http` origins, and the request hook that allows only the granted ones.
//! - [`hostcalls`]: the host calls shadowed so that waits end at the deadline and output is metered.
//! - [`readdir`]: `read-directory` taking each entry's type from the listing (no `stat` per entry).
//! - [`fileread`]: `open-at` of one name for reading and `read` without wasmtime-wasi's extra work.
//! - [`dynamic`]: generic components: exported functions as tools, JSON ↔ component values.
//! - [`generic_tool`]: a generic component's tools, one exported function chosen per call.
//! - [`audit`]: the record every call leaves, and the audit log.

pub mod api;
pub mod audit;
pub mod cache;
pub mod cancel;
pub mod compiler;
pub mod dynamic;
pub mod engine;
pub mod error;
pub mod fileread;
pub mod generic_tool;
pub mod grant;
pub mod hints;
pub mod hook_engine;
pub mod hostcalls;
pub mod hostfiles;
pub mod http;
pub mod limits;
pub mod linking;
pub mod names;
pub mod outdir;
pub mod readdir;
pub mod registry;
pub mod runner;
pub mod state;
pub mod watchdog;

pub use audit::{AuditLog, CallRecord};
pub use error::CallError;
pub use grant::{Access, Grant};
pub use limits::{Limits, OutputLimit};
pub use registry::{Registry, ToolComponent};
pub use runner::Sandbox;

/// The sandbox the host uses (the CLI and the reply loop): default limits, the compiled-component
/// cache in its usual place, and bb7's global state dir protected from every read-write grant.
pub fn host_sandbox(audit: Option<AuditLog>) -> anyhow::Result<Sandbox> {
    let protected: Vec<std::path::PathBuf> = crate::paths::state_dir().into_iter().collect();
    Sandbox::new(
        Limits::default(),
        cache::ComponentCache::default_base(),
        audit,
        &protected,
    )
}
