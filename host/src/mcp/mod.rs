//! `bb7 mcp`: the Model Context Protocol over stdio (ECOSYSTEM-PROTOCOL.md §6), with the official
//! `rmcp` crate.
//!
//! It offers what agent mode offers a model, under the same grants and with the same results:
//! `search_project`, `read_file` and `list_files` (the built-in components, the project read-only,
//! the deny list and ignore rules applied, the agent's limits) and every third-party component
//! enabled and granted for the project, under its agent-mode name (`<component>__<tool>`). The
//! list is fixed when the server starts (`listChanged: false`); nothing a client can call
//! installs, grants, enables or revokes anything. Every call that reaches the sandbox is a record
//! of the audit chain with `actor: "mcp:<client name>"`.
//!
//! With `--stage` it also offers `write_file` and `edit_file`, staged into the project's chat
//! `mcp: <client name>` and committed to its output on every successful call (see [`stage`]); the
//! project itself is never written.
//!
//! The calls run exactly as agent mode runs them ([`crate::agent::retrieval::run`],
//! [`crate::agent::third_party::ThirdParty::run`]), each on a blocking thread, so several calls of
//! one client (or of several clients, each its own process) run at once.

mod args;
mod project;
mod server;
mod stage;

use std::path::PathBuf;
use std::process::ExitCode;

pub use project::{ProjectError, resolve};
pub use server::{McpError, Server};

/// Runs `bb7 mcp` until stdin closes (exit 0); a project that cannot be served is reported on
/// stderr before anything is read (exit 1).
pub fn main(project: Option<PathBuf>, stage: bool) -> ExitCode {
    let root = match resolve(project.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bb7 mcp: {e}");
            return ExitCode::FAILURE;
        }
    };
    let server = match Server::new(&root, stage) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bb7 mcp: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bb7 mcp: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server.serve_stdio()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bb7 mcp: {e}");
            ExitCode::FAILURE
        }
    }
}
