//! BB-7's native host: the tool sandbox, and (as the issues land) the stdio protocol, chat state and
//! model client. `main.rs` is a thin command-line front end over this library.

pub mod cli;
pub mod paths;
pub mod sandbox;

/// The host's version, as `bb7 --version` and the `version` action report it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
