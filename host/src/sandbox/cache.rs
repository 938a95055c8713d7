//! Compiled components on disk, so that only the first start after an install pays for compilation
//! (by `bb7-compile`: [`super::compiler`]).
//!
//! Layout: `<cache dir>/components/<engine digest>/<component sha256>.cwasm`. The engine digest
//! covers the wasmtime version and the compiler's settings; wasmtime checks each artifact's header
//! against the engine (target, CPU features, code-generation settings) when it loads it, and one
//! that fails to load is recompiled and replaced. The cache lives under the user's cache
//! directory, which no tool is ever granted.
//!
//! Integrity: a `.cwasm` is native code the host maps and runs, so it is loaded only when its
//! HMAC-SHA256 tag (`<sha256>.cwasm.tag`, keyed with a random key made on first use, `<cache
//! base>/integrity.key`, mode 0600) matches. A tampered, truncated or foreign artifact is never
//! deserialised: it is recompiled from the component's bytes and replaced. (Whoever can read the key
//! can forge a tag: that is a local attacker with the user's own rights, who could as well replace
//! `bb7` itself; out of scope.)

use std::fs;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

type HmacSha256 = Hmac<Sha256>;

/// What the compiler's code depends on (`bb7-compile digest` at build time: the wasmtime version,
/// target and CPU features, code-generation settings): the cache directory's name.
const ENGINE_DIGEST: &str = env!("BB7_ENGINE_DIGEST");

/// Where compiled components are kept for an engine.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    /// Where the integrity key lives (`None`: no key, so no artifact is trusted or written).
    key_dir: Option<PathBuf>,
}

/// How a component came to be ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Deserialised from a cached artifact.
    Hit,
    /// Compiled now (and stored, when the cache is writable).
    Compiled,
    /// A built-in's native code, precompiled when `bb7` was built and embedded in it.
    Embedded,
}

impl ComponentCache {
    /// The cache under `base` (`$BB7_CACHE_DIR`, else `$XDG_CACHE_HOME/bb7`, else
    /// `~/.cache/bb7`). `None` disables caching.
    pub fn new(base: Option<PathBuf>) -> Self {
        let key_dir = base.clone();
        let dir = base.map(|b| b.join("components").join(ENGINE_DIGEST));
        ComponentCache { key_dir, dir }
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

    /// Loads the component whose bytes hash to `sha256`: from the cache when an artifact with a valid
    /// tag is there, else compiles `bytes` (stopped past `limit`) and stores the result with its tag
    /// (a failure to store is not an error: the next start compiles again).
    pub fn load(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: &[u8],
        limit: std::time::Duration,
    ) -> anyhow::Result<(Component, CacheOutcome)> {
        let key = self.key();
        if let (Some(path), Some(key)) = (self.artifact(sha256), &key)
            && let Some(artifact) = read_verified(&path, key)
        {
            // SAFETY: the artifact carries a valid HMAC under this user's key, so it is exactly
            // what this program's compiler made (the directory is keyed by the compiler's
            // configuration digest). wasmtime additionally checks the header's version, target,
            // CPU features and configuration, and we fall back to compiling on error.
            if let Ok(c) = unsafe { Component::deserialize(engine, &artifact) } {
                return Ok((c, CacheOutcome::Hit));
            }
        }
        let (component, serialized) = super::compiler::component(engine, bytes, limit)
            .map_err(|e| anyhow::anyhow!("compiling component: {e:#}"))?;
        if let (Some(path), Some(key)) = (self.artifact(sha256), &key) {
            // The tag first: an artifact without its matching tag is never loaded.
            let _ = write_atomic(&tag_path(&path), tag(key, &serialized).as_bytes())
                .and_then(|_| write_atomic(&path, &serialized));
        }
        Ok((component, CacheOutcome::Compiled))
    }

    /// The per-user integrity key, created on first use.
    fn key(&self) -> Option<Vec<u8>> {
        let dir = self.key_dir.as_ref()?;
        let state = crate::store::StateDir::open(dir, true).ok()?;
        if let Ok(k) = crate::store::read_regular(state.dir(), KEY_FILE)
            && k.len() == 64
        {
            return Some(k);
        }
        let mut key = vec![0u8; 32];
        rand::fill(&mut key[..]);
        let key = hex::encode(key).into_bytes();
        use std::os::unix::fs::PermissionsExt;
        crate::store::write_atomic(state.dir(), KEY_FILE, &key).ok()?;
        let _ = state.dir().set_permissions(
            KEY_FILE,
            cap_std::fs::Permissions::from_std(fs::Permissions::from_mode(0o600)),
        );
        // Another process may have created one at the same time: use whichever won.
        crate::store::read_regular(state.dir(), KEY_FILE).ok()
    }
}

const KEY_FILE: &str = "integrity.key";

fn tag_path(artifact: &Path) -> PathBuf {
    let mut p = artifact.as_os_str().to_owned();
    p.push(".tag");
    PathBuf::from(p)
}

fn tag(key: &[u8], bytes: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any size");
    mac.update(bytes);
    hex::encode(mac.finalize().into_bytes())
}

/// The artifact at `path` if it is a regular file whose tag verifies under `key`.
fn read_verified(path: &Path, key: &[u8]) -> Option<Vec<u8>> {
    let expected = crate::store::read_regular_path(&tag_path(path)).ok()?;
    let bytes = read_artifact(path)?;
    let expected = hex::decode(expected.trim_ascii()).ok()?;
    let mut mac = HmacSha256::new_from_slice(key).ok()?;
    mac.update(&bytes);
    mac.verify_slice(&expected).ok()?;
    Some(bytes)
}

/// Reads an artifact (regular file, non-blocking open, at most 256 MiB).
fn read_artifact(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    const MAX: u64 = 256 << 20;
    if !meta.is_file() || meta.len() > MAX {
        return None;
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    f.take(MAX).read_to_end(&mut out).ok()?;
    Some(out)
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
