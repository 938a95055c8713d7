#![warn(missing_docs)]
//! BB-7's native host: the tool sandbox, and (as the issues land) the stdio protocol, chat state and
//! model client. `main.rs` is a thin command-line front end over this library.

pub mod agent;
pub mod audit;
pub mod chat;
pub mod cli;
pub mod components;
pub mod config;
pub mod hooks;
pub mod instructions;
pub mod llm;
pub mod mcp;
pub mod paths;
pub mod protocol;
pub mod sandbox;
pub mod spend;
pub mod store;
pub mod tokens;
pub mod toolhost;
pub mod workspace;

/// The host's version, as `bb7 --version` and the `version` action report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
