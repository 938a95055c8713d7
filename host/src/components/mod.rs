//! Third-party tool components: the manifest they ship, installing them, the user's grants pinned
//! to each binary, per-project enabling, the project's lockfile, and the read-only project view a
//! `project-read` grant receives. Running them is the sandbox's job (`crate::sandbox`); offering
//! them to the model is agent mode's (`crate::agent::third_party`).

pub mod installed;
pub mod lock;
pub mod manifest;
pub mod ops;
pub mod view;
