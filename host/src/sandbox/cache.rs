//! Compiled components on disk, so that only the first start after an install pays for compilation.
//!
//! Layout: `<cache dir>/components/<engine hash>/<component sha256>.cwasm`. The engine hash covers the
//! wasmtime version and every setting that affects code generation, so a stale artifact is never
//! loaded; one that fails to load anyway is recompiled and replaced. The cache lives under the user's
//! cache directory, which no tool is ever granted.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components are kept for an engine.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

/// How a component came to be ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Deserialised from a cached artifact.
    Hit,
    /// Compiled now (and stored, when the cache is writable).
    Compiled,
}

impl ComponentCache {
    /// The cache for `engine` under `base` (`$BB7_CACHE_DIR`, else `$XDG_CACHE_HOME/bb7`, else
    /// `~/.cache/bb7`). `None` disables caching.
    pub fn new(engine: &Engine, base: Option<PathBuf>) -> Self {
        let dir = base.map(|b| {
            let mut h = DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut h);
            b.join("components").join(format!("{:016x}", h.finish()))
        });
        ComponentCache { dir }
    }

    /// The default cache base directory for this user.
    pub fn default_base() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("BB7_CACHE_DIR").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(d));
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(d).join("bb7"));
        }
        std::env::var_os("HOME")
            .filter(|d| !d.is_empty())
            .map(|h| PathBuf::from(h).join(".cache").join("bb7"))
    }

    /// The artifact path for a component, if caching is on.
    pub fn artifact(&self, sha256: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{sha256}.cwasm")))
    }

    /// Loads the component whose bytes hash to `sha256`: from the cache when possible, else compiles
    /// `bytes` and stores the result (a failure to store is not an error: the next start compiles again).
    pub fn load(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: &[u8],
    ) -> anyhow::Result<(Component, CacheOutcome)> {
        if let Some(path) = self.artifact(sha256) {
            if path.is_file() {
                // SAFETY: the artifact was written by this program with this engine configuration
                // (the directory is keyed by the engine's compatibility hash) into the user's own
                // cache directory, which no tool component can reach. wasmtime additionally checks
                // the header's version and configuration, and we fall back to compiling on error.
                if let Ok(c) = unsafe { Component::deserialize_file(engine, &path) } {
                    return Ok((c, CacheOutcome::Hit));
                }
            }
        }
        let component = Component::new(engine, bytes)
            .map_err(|e| anyhow::anyhow!("compiling component: {e}"))?;
        if let Some(path) = self.artifact(sha256) {
            if let Ok(serialized) = component.serialize() {
                let _ = write_atomic(&path, &serialized);
            }
        }
        Ok((component, CacheOutcome::Compiled))
    }
}

/// Writes an artifact with the host's atomic write (temp file, fsync, rename): a crash never leaves a
/// torn artifact.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("artifact path has no parent"));
    };
    fs::create_dir_all(dir)?;
    let dir = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())?;
    crate::store::write_atomic(&dir, name, bytes)
}
