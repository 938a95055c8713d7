//! Directory grants: the only filesystem capability a tool call receives.

use std::path::PathBuf;

use serde::Serialize;

/// How a granted directory may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list directories; every mutation is refused.
    ReadOnly,
    /// Read, create, replace and delete files and directories inside the directory.
    ReadWrite,
}

impl Access {
    /// The access's name, as the audit writes it: `read-only` or `read-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        }
    }
}

/// One directory handed to a call, mounted at `/` inside the component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// The host directory (canonicalised when the grant is made).
    pub path: PathBuf,
    /// How the call may use the directory.
    pub access: Access,
}

impl Grant {
    /// Grants `dir`, resolved to its canonical path so the audit record names the real directory.
    pub fn new(dir: impl Into<PathBuf>, access: Access) -> std::io::Result<Self> {
        let dir = dir.into();
        let path = dir.canonicalize()?;
        if !path.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(Grant { path, access })
    }
}

/// Everything one call receives: at most one directory, and the network and environment its
/// component was granted (built-in tools: neither).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCaps {
    /// The directory mounted at `/`, if any.
    pub dir: Option<Grant>,
    /// `host:port` pairs the call may connect to over TCP.
    pub network: Vec<String>,
    /// Host environment variables the call may read.
    pub env: Vec<String>,
}

impl CallCaps {
    /// Nothing at all (what `describe` gets).
    pub fn none() -> CallCaps {
        CallCaps::default()
    }

    /// One directory and nothing else (every built-in call).
    pub fn dir(grant: Grant) -> CallCaps {
        CallCaps {
            dir: Some(grant),
            ..CallCaps::default()
        }
    }
}
