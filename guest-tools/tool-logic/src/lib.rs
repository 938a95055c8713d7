//! The logic of BB-7's built-in tools.
//!
//! Every built-in tool component (`write_file`, `edit_file`, `search_project`, `read_file`,
//! `list_files`) is a thin WIT wrapper around [`tools::describe`] and [`tools::call`]. The same code
//! compiles natively, so the host's tests and benchmarks run exactly what the sandbox runs.
//!
//! Inside a component the tool's single directory grant is mounted at `/`, and the tool works
//! relative to [`Root::sandboxed`]. Natively, [`Root::at`] points the same code at a real directory.
//! Confinement is the sandbox's job (the component has no handle to anything else); the path rules
//! in [`paths`] exist so that a model's mistakes (absolute paths, `..`) fail loudly instead of being
//! silently re-rooted inside the grant.

pub mod edit;
pub mod error;
pub mod file_id;
pub mod fsio;
pub mod paths;
pub mod retrieval;
pub mod settings;
pub mod tools;

pub use error::{ErrorKind, ToolError};
pub use paths::Root;
pub use settings::{DiffMode, Settings};
