//! Which project `bb7 mcp` serves: `--project DIR`, else the nearest ancestor of the current
//! directory holding `.bb7/`. The home directory and the global state directory are never projects.

use std::path::{Path, PathBuf};

/// Why there is no project to serve.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// `--project DIR` names nothing usable.
    #[error("cannot use {dir} as the project: {source}")]
    Dir {
        /// The directory as given.
        dir: String,
        /// Why.
        source: std::io::Error,
    },
    /// The current directory cannot be read.
    #[error("cannot read the current directory: {0}")]
    Cwd(std::io::Error),
    /// No ancestor of the current directory holds `.bb7/`.
    #[error(
        "no project: neither {0} nor any directory above it holds .bb7/ (run :BB7Init in Neovim there, or pass --project DIR)"
    )]
    NotFound(String),
    /// The home directory or the global state directory was named (or found).
    #[error("{0} cannot be served as a project: {1}")]
    Refused(String, &'static str),
}

/// The project's canonical root.
pub fn resolve(dir: Option<&Path>) -> Result<PathBuf, ProjectError> {
    let root = match dir {
        Some(d) => crate::store::project::canonical_dir(d).map_err(|source| ProjectError::Dir {
            dir: d.display().to_string(),
            source,
        })?,
        None => {
            let cwd = std::env::current_dir().map_err(ProjectError::Cwd)?;
            crate::store::project::nearest_project(&cwd)
                .map_err(ProjectError::Cwd)?
                .ok_or_else(|| ProjectError::NotFound(cwd.display().to_string()))?
        }
    };
    let canonical = |p: PathBuf| crate::store::project::canonical_dir(&p).unwrap_or(p);
    if let Some(home) = crate::paths::home().map(canonical)
        && root == home
    {
        return Err(ProjectError::Refused(
            root.display().to_string(),
            "it is the home directory",
        ));
    }
    if let Some(state) = crate::paths::state_dir().map(canonical)
        && root.starts_with(&state)
    {
        return Err(ProjectError::Refused(
            root.display().to_string(),
            "it is bb7's global state directory",
        ));
    }
    if root == Path::new("/") {
        return Err(ProjectError::Refused(
            root.display().to_string(),
            "it is the root directory",
        ));
    }
    Ok(root)
}
