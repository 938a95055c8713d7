//! Third-party tool components: the manifest they ship, installing them, the user's grants pinned
//! to each binary, per-project enabling, the project's lockfile, the read-only project view a
//! `project-read` grant receives, and running one under its grant. The sandbox runs them (it
//! knows nothing of this module); agent mode offers them to the model (`agent/third_party.rs`).
//!
//! - [`manifest`]: `bb7-tool.toml`: who a component is and what it requests.
//! - [`installed`]: `~/.bb7/tools.json` and the stored binaries: installs, grants, enabling.
//! - [`manage`]: the verbs (`add`, `grant`, `revoke`, `remove`, `enable`/`disable`, `audit --check`)
//!   shared by the CLI and the protocol, each under the state's lock held across processes.
//! - [`load`]: a granted component loaded to run, and what one call of it receives.
//! - [`lock`]: the project's `.bb7/tools.lock`.
//! - [`view`]: the project-read view.
//! - [`error`]: [`ComponentError`](error::ComponentError), why any of it failed.

pub mod error;
pub mod installed;
pub mod load;
pub mod lock;
pub mod manage;
pub mod manifest;
pub mod view;
