//! The tool components a host can run: the five built-ins embedded in the binary, and third-party
//! component files. Components are compiled at most once (see [`super::cache`]) and linked against
//! WASI only.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::api::{ToolPre, WitVersion};
use super::cache::{CacheOutcome, ComponentCache};
use super::grant::Access;
use super::limits::Limits;
use super::state::CallState;

/// A built-in tool as embedded by `build.rs`: every built-in lives in the one component
/// [`BUILTIN_WASM_ZST`] (precompiled: [`BUILTIN_PRECOMPILED`]), which runs the tool a call names.
#[derive(Debug)]
pub struct EmbeddedComponent {
    /// The tool name (the function the model calls).
    pub tool: &'static str,
    /// Hex sha256 of the component the tool lives in ([`BUILTIN_SHA256`], computed at build time).
    pub sha256: &'static str,
}

/// Bytes aligned to a 4 KiB page, as the built-ins' precompiled code is embedded (its executable
/// section starts on a page boundary within it, so it can be made executable where it is).
#[repr(C, align(4096))]
pub struct PageAligned<T: ?Sized>(pub T);

include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));

/// A component's WebAssembly bytes as [`Registry::prepare`] gets them.
#[derive(Clone, Copy)]
enum WasmBytes<'a> {
    /// Read from a file (or given by the caller).
    Plain(&'a [u8]),
    /// The built-in component, zstd-compressed in the binary: decompressed only if it must be
    /// compiled (its precompiled code does not fit this engine).
    Builtin,
}

impl<'a> WasmBytes<'a> {
    /// The length of the WebAssembly bytes.
    fn len(self) -> usize {
        match self {
            WasmBytes::Plain(b) => b.len(),
            WasmBytes::Builtin => BUILTIN_WASM_LEN,
        }
    }

    /// The WebAssembly bytes (the built-in's decompressed: about 1.4 MB, a few milliseconds).
    fn get(self) -> anyhow::Result<std::borrow::Cow<'a, [u8]>> {
        match self {
            WasmBytes::Plain(b) => Ok(std::borrow::Cow::Borrowed(b)),
            WasmBytes::Builtin => Ok(std::borrow::Cow::Owned(builtin_wasm()?)),
        }
    }
}

/// The built-in component's WebAssembly bytes, decompressed from [`BUILTIN_WASM_ZST`] and checked
/// against the digest the build script computed ([`BUILTIN_SHA256`]).
fn builtin_wasm() -> Result<Vec<u8>, EmbeddedError> {
    unpack(BUILTIN_WASM_ZST, BUILTIN_WASM_LEN, BUILTIN_SHA256)
}

/// Why the embedded built-in component cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// zstd refused the embedded bytes.
    #[error("decompressing the built-in component: {0}")]
    Decompress(std::io::Error),
    /// They decompressed to another length than the build script's.
    #[error("the built-in component decompressed to {got} bytes, not {want}")]
    Length {
        /// The length found.
        got: usize,
        /// The length recorded at build time.
        want: usize,
    },
    /// They decompressed to other bytes than the build script embedded.
    #[error("the built-in component is corrupted: its sha256 is {got}, not {want} (reinstall bb7)")]
    Digest {
        /// The digest found.
        got: String,
        /// The digest recorded at build time.
        want: &'static str,
    },
}

/// `packed` decompressed, if it is exactly `len` bytes whose hex sha256 is `sha256`.
fn unpack(packed: &[u8], len: usize, sha256: &'static str) -> Result<Vec<u8>, EmbeddedError> {
    let bytes = zstd::bulk::decompress(packed, len).map_err(EmbeddedError::Decompress)?;
    if bytes.len() != len {
        return Err(EmbeddedError::Length {
            got: bytes.len(),
            want: len,
        });
    }
    let got = hex::encode(Sha256::digest(&bytes));
    if got != sha256 {
        return Err(EmbeddedError::Digest { got, want: sha256 });
    }
    Ok(bytes)
}

/// Where a component came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Embedded in this `bb7` binary, with its precompiled native code.
    Builtin(&'static [u8]),
    /// Loaded from a file the user named.
    File(PathBuf),
}

/// The directory a tool's calls receive, as policy: what it is and how it may be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantPolicy {
    /// What the directory is, for the audit (e.g. "the reply's staging directory").
    pub directory: &'static str,
    /// How the tool's calls may use the directory.
    pub access: Access,
}

/// The grant policy of a built-in tool: the file tools write into the reply's staging copy, the
/// retrieval tools read the project.
pub fn builtin_policy(tool: &str) -> GrantPolicy {
    match tool {
        "write_file" | "edit_file" => GrantPolicy {
            directory: "the reply's staging directory (a fresh copy of the files the reply may change)",
            access: Access::ReadWrite,
        },
        _ => GrantPolicy {
            directory: "the project root (skipping .git/, .bb7/ and ignored files)",
            access: Access::ReadOnly,
        },
    }
}

/// A component ready to run.
pub struct ToolComponent {
    /// The tool name (for built-ins, the function the model calls).
    pub name: String,
    /// Where the component came from.
    pub origin: Origin,
    /// Hex sha256 of the component bytes.
    pub sha256: String,
    /// Size of the component in bytes.
    pub size: usize,
    /// The contract version the component exports.
    pub wit_version: WitVersion,
    /// The directory the tool's calls receive, and how they may use it.
    pub policy: GrantPolicy,
    /// Every interface the component imports, as `package/interface@version`: WASI, plus the
    /// contract's own types-only interface (which carries no functions).
    pub imports: Vec<String>,
    /// Whether it was compiled now or loaded from the cache.
    pub cache: CacheOutcome,
    /// Tighter limits its calls run under (a third-party manifest's); `None`: the sandbox's.
    pub limits: Option<Limits>,
    /// For a third-party component, its installed name (the audit records it).
    pub third_party: Option<String>,
    /// How long compiling (or loading from the cache) took, in milliseconds.
    pub load_ms: f64,
    /// Whether a call record already carried `load_ms`.
    pub(crate) load_reported: std::sync::atomic::AtomicBool,
    pub(crate) pre: ToolPre<CallState>,
}

impl std::fmt::Debug for ToolComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolComponent")
            .field("name", &self.name)
            .field("sha256", &self.sha256)
            .field("wit_version", &self.wit_version)
            .finish_non_exhaustive()
    }
}

/// The engine, the WASI linker and the components, loaded lazily.
pub struct Registry {
    engine: Engine,
    /// WASI without `wasi:sockets`: every component without a network grant.
    linker: Linker<CallState>,
    /// All of WASI p2, for components granted network access; built on first use.
    linker_net: OnceLock<Result<Linker<CallState>, Arc<anyhow::Error>>>,
    /// All of WASI p2 and `wasi:http`, for components requesting `http` origins (`http.rs`).
    linker_http: OnceLock<Result<Linker<CallState>, Arc<anyhow::Error>>>,
    cache: ComponentCache,
    /// The component holding every built-in tool, loaded and linked once for all of them.
    shared: OnceLock<Result<ToolComponent, Arc<anyhow::Error>>>,
    /// Whether a built-in tool already reported the shared component's load time.
    shared_load_reported: std::sync::atomic::AtomicBool,
    builtins: Vec<OnceLock<Result<Arc<ToolComponent>, Arc<anyhow::Error>>>>,
    /// Whether to load the built-ins' precompiled code (wasmtime refuses it if it does not fit the
    /// engine, and they are then compiled, once, through the cache); off only in tests, to take
    /// that path.
    try_precompiled: bool,
}

impl Registry {
    /// A registry over the shared `engine`, caching compiled components under `cache_base`.
    pub fn new(engine: Engine, cache_base: Option<PathBuf>) -> anyhow::Result<Self> {
        let linker = super::linking::linker(&engine, false)?;
        let cache = ComponentCache::new(cache_base);
        let builtins = BUILTIN_COMPONENTS.iter().map(|_| OnceLock::new()).collect();
        Ok(Registry {
            engine,
            linker,
            linker_net: OnceLock::new(),
            linker_http: OnceLock::new(),
            cache,
            shared: OnceLock::new(),
            shared_load_reported: Default::default(),
            builtins,
            try_precompiled: true,
        })
    }

    /// The shared engine the components are compiled for and run on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The built-in tool names, in the order they are offered to the model.
    pub fn builtin_names(&self) -> impl Iterator<Item = &'static str> {
        BUILTIN_COMPONENTS.iter().map(|c| c.tool)
    }

    /// The built-in tool `name`, loading it on first use.
    pub fn builtin(&self, name: &str) -> anyhow::Result<Arc<ToolComponent>> {
        let idx = BUILTIN_COMPONENTS
            .iter()
            .position(|c| c.tool == name)
            .ok_or_else(|| {
                anyhow::anyhow!("unknown tool: {name} (built-in tools: {})", builtin_list())
            })?;
        let slot = &self.builtins[idx];
        let loaded = slot.get_or_init(|| {
            self.builtin_of_shared(BUILTIN_COMPONENTS[idx].tool)
                .map(Arc::new)
                .map_err(Arc::new)
        });
        loaded
            .clone()
            .map_err(|e| anyhow::anyhow!("built-in tool {name}: {e:#}"))
    }

    /// Built-in tool `tool` of the shared component (loaded and linked on first use): the same
    /// native code and linking for every built-in, its own name, grant policy and selection.
    fn builtin_of_shared(&self, tool: &'static str) -> anyhow::Result<ToolComponent> {
        let shared = self
            .shared
            .get_or_init(|| {
                self.prepare(
                    "builtins",
                    Origin::Builtin(BUILTIN_PRECOMPILED),
                    WasmBytes::Builtin,
                    BUILTIN_SHA256.to_string(),
                    builtin_policy(tool),
                    Linking::default(),
                )
                .map_err(Arc::new)
            })
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let ToolPre::V0_1_0(pre) = &shared.pre else {
            anyhow::bail!("the built-in component does not export bb7:tool/tool@0.1.0");
        };
        // The first tool made from the shared component carries its load time; the others loaded
        // nothing.
        let first = !self
            .shared_load_reported
            .swap(true, std::sync::atomic::Ordering::Relaxed);
        Ok(ToolComponent {
            name: tool.to_string(),
            origin: shared.origin.clone(),
            sha256: shared.sha256.clone(),
            size: shared.size,
            wit_version: shared.wit_version,
            policy: builtin_policy(tool),
            imports: shared.imports.clone(),
            cache: shared.cache,
            limits: None,
            third_party: None,
            load_ms: if first { shared.load_ms } else { 0.0 },
            load_reported: Default::default(),
            pre: ToolPre::Builtin(pre.clone(), tool),
        })
    }

    /// Every built-in tool, loaded.
    pub fn all_builtins(&self) -> anyhow::Result<Vec<Arc<ToolComponent>>> {
        self.builtin_names().map(|n| self.builtin(n)).collect()
    }

    /// A third-party component from `path`, named `name`, whose calls get one directory with `access`.
    ///
    /// A third-party component is bounded before it costs anything: at most
    /// [`MAX_COMPONENT_BYTES`], and compiled within [`COMPILE_TIME_LIMIT`] (past it the compiler
    /// process is killed and the load fails).
    pub fn load_file(
        &self,
        name: &str,
        path: &Path,
        access: Access,
    ) -> anyhow::Result<ToolComponent> {
        let bytes = read_component(path)?;
        let sha = hex::encode(Sha256::digest(&bytes));
        let policy = GrantPolicy {
            directory: "the directory named with --dir",
            access,
        };
        self.prepare(
            name,
            Origin::File(path.to_path_buf()),
            WasmBytes::Plain(&bytes),
            sha,
            policy,
            // Run by hand without a manifest: all of WASI is linked, but the call is granted
            // nothing beyond its directory (socket use is refused at run time).
            Linking {
                network: true,
                ..Linking::default()
            },
        )
    }

    /// A third-party component from `bytes` (already read and hashed to `sha256`), linked as
    /// `linking` allows.
    pub fn load_third_party(
        &self,
        name: &str,
        path: &Path,
        bytes: &[u8],
        sha256: &str,
        policy: GrantPolicy,
        linking: Linking,
    ) -> anyhow::Result<ToolComponent> {
        self.prepare(
            name,
            Origin::File(path.to_path_buf()),
            WasmBytes::Plain(bytes),
            sha256.to_string(),
            policy,
            linking,
        )
    }

    fn linker_for(&self, network: bool) -> anyhow::Result<&Linker<CallState>> {
        if !network {
            return Ok(&self.linker);
        }
        self.linker_net
            .get_or_init(|| super::linking::linker(&self.engine, true).map_err(Arc::new))
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e:#}"))
    }

    /// Loads from the cache, or compiles within [`COMPILE_TIME_LIMIT`].
    fn load_compiled(
        &self,
        sha256: &str,
        bytes: &[u8],
    ) -> anyhow::Result<(Component, CacheOutcome)> {
        self.cache
            .load(&self.engine, sha256, bytes, COMPILE_TIME_LIMIT)
    }

    fn prepare(
        &self,
        name: &str,
        origin: Origin,
        bytes: WasmBytes<'_>,
        sha256: String,
        policy: GrantPolicy,
        linking: Linking,
    ) -> anyhow::Result<ToolComponent> {
        let t0 = Instant::now();
        let (component, cache) = match &origin {
            Origin::Builtin(native) if self.try_precompiled => {
                match load_embedded(&self.engine, native) {
                    Ok(c) => (c, CacheOutcome::Embedded),
                    Err(refused) => self.load_compiled(&sha256, &bytes.get()?).map_err(|e| {
                        e.context(format!(
                            "the built-in tools' precompiled code does not fit this engine \
                             ({refused}), so they must be compiled"
                        ))
                    })?,
                }
            }
            Origin::Builtin(_) | Origin::File(_) => self.load_compiled(&sha256, &bytes.get()?)?,
        };
        let load_ms = t0.elapsed().as_secs_f64() * 1000.0;
        // No bb7:tool interface: a generic component, every exported function a tool.
        let wit_version =
            WitVersion::detect(&self.engine, &component).unwrap_or(WitVersion::Generic);
        let generic = match wit_version {
            WitVersion::Generic => Some(
                super::dynamic::inspect(&self.engine, &component, &bytes.get()?).map_err(|e| {
                    anyhow::anyhow!(
                        "{e} (a bb7:tool component exports one of: {})",
                        WitVersion::SUPPORTED
                            .iter()
                            .map(|v| v.export_name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?,
            ),
            _ => None,
        };
        let imports = imports_of(&self.engine, &component);
        let own_types = wit_version.types_name();
        // `wasi:sockets` imported without a network request (standard libraries import it: Rust's
        // std::net, componentize-py's interpreter) is linked, and every operation is denied: the
        // call's WASI context allows no socket use at all without a network grant.
        let network = linking.network || imports.iter().any(|i| i.starts_with("wasi:sockets/"));
        let offer = super::linking::Offer {
            network,
            http: linking.http,
            own_types,
            builtin: matches!(origin, Origin::Builtin(_)),
        };
        if let Some(why) = imports
            .iter()
            .find_map(|i| super::linking::refusal(i, offer))
        {
            anyhow::bail!("{why}");
        }
        let linker = match linking.http {
            true => self
                .linker_http
                .get_or_init(|| super::linking::linker_http(&self.engine).map_err(Arc::new))
                .as_ref()
                .map_err(|e| anyhow::anyhow!("{e:#}"))?,
            false => self.linker_for(network)?,
        };
        let mut pre = ToolPre::new(linker, &component, wit_version)
            .map_err(|e| anyhow::anyhow!("linking the component: {e}"))?;
        if let (ToolPre::Generic(g), Some(exports)) = (&mut pre, generic) {
            g.exports = Arc::new(exports);
        }
        Ok(ToolComponent {
            name: name.to_string(),
            origin,
            sha256,
            size: bytes.len(),
            wit_version,
            policy,
            imports,
            cache,
            limits: linking.limits,
            third_party: linking.third_party.then(|| name.to_string()),
            load_ms,
            load_reported: Default::default(),
            pre,
        })
    }
}

/// How a component is linked and bounded: with the network interfaces or not, and its own limits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Linking {
    /// Link `wasi:sockets` (only for a network grant).
    pub network: bool,
    /// Link `wasi:http` (only for a manifest requesting `http` origins; the call's grant decides
    /// which requests pass).
    pub http: bool,
    /// Tighter limits for its calls.
    pub limits: Option<Limits>,
    /// An installed third-party component (recorded by name in every call's audit record).
    pub third_party: bool,
}

/// The largest third-party component file accepted (a componentize-py component carries the
/// Python interpreter: about 18.5 MB; componentize-js's about 13 MB).
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;
/// How long compiling a third-party component may take. A componentize-js component (12.7 MB)
/// compiles in about 8 s on an idle machine and took more than 60 s on a loaded two-core one; the
/// limit leaves room for that (the native code is cached, so only `add` or a cache miss pays it).
pub const COMPILE_TIME_LIMIT: Duration = Duration::from_secs(180);

/// Reads a component file: a regular file of at most [`MAX_COMPONENT_BYTES`].
pub fn read_component(path: &Path) -> anyhow::Result<Vec<u8>> {
    let meta =
        std::fs::metadata(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    if meta.is_file() && meta.len() > MAX_COMPONENT_BYTES {
        anyhow::bail!(
            "{} is {} bytes; components may be at most {} MiB",
            path.display(),
            meta.len(),
            MAX_COMPONENT_BYTES >> 20
        );
    }
    crate::store::read_regular_path_max(path, MAX_COMPONENT_BYTES)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))
}

/// The built-ins' component as loaded in place, with the engine that loaded it. wasmtime registers
/// loaded code process-wide by its address, so one address can hold one live load at a time: the
/// in-place load is made once and shared by every registry on that engine (the process-wide one,
/// [`super::engine::shared`]); a registry on another engine gets a copy.
static IN_PLACE: std::sync::Mutex<Option<(Engine, Component)>> = std::sync::Mutex::new(None);

/// The built-ins' precompiled code `native` (embedded in the binary) as a component of `engine`: run
/// where it is when `engine` is the process-wide one (which publishes code in place: see
/// [`super::engine::host_engine`], and is never dropped) and no other engine holds it there
/// ([`IN_PLACE`]), else copied.
fn load_embedded(engine: &Engine, native: &'static [u8]) -> wasmtime::Result<Component> {
    if super::engine::runs_in_place(native)
        && super::engine::is_shared(engine)
        && let Ok(mut held) = IN_PLACE.lock()
    {
        match &*held {
            Some((e, c)) if Engine::same(e, engine) => return Ok(c.clone()),
            Some(_) => {}
            None => {
                // SAFETY: `native` was produced by `Engine::precompile_component` (`bb7-compile`,
                // run by this binary's build script) for the host's engine configuration;
                // wasmtime checks its header against this engine (version, target, CPU features,
                // settings) and refuses it otherwise. It is a
                // `'static` in the binary's read-only data: it lives as long as the process and
                // no mapping of it is ever writable, so nothing (no tool, no user file) can change
                // it while the component uses it.
                let raw = std::ptr::NonNull::from(native);
                if let Ok(c) = unsafe { Component::deserialize_raw(engine, raw) } {
                    *held = Some((engine.clone(), c.clone()));
                    return Ok(c);
                }
            }
        }
    }
    // SAFETY: as above; wasmtime copies the bytes into memory of its own.
    unsafe { Component::deserialize(engine, native) }
}

fn imports_of(engine: &Engine, component: &Component) -> Vec<String> {
    let mut v: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(n, _)| n.to_string())
        .collect();
    v.sort();
    v
}

fn builtin_list() -> String {
    BUILTIN_COMPONENTS
        .iter()
        .map(|c| c.tool)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_component_decompresses_to_the_bytes_its_digest_names() {
        let bytes = builtin_wasm().expect("decompresses");
        assert_eq!(bytes.len(), BUILTIN_WASM_LEN);
        assert_eq!(hex::encode(Sha256::digest(&bytes)), BUILTIN_SHA256);
        assert!(bytes.starts_with(b"\0asm"), "a WebAssembly binary");
        assert!(
            BUILTIN_WASM_ZST.len() < bytes.len() / 2,
            "embedded compressed: {} of {} bytes",
            BUILTIN_WASM_ZST.len(),
            bytes.len()
        );
    }

    /// The decompressed built-in component is checked against the digest computed at build time,
    /// not only its length: bytes of the right length that are not the component are refused.
    #[test]
    fn a_corrupted_embedding_is_refused() {
        let mut bytes = builtin_wasm().expect("the embedded component is intact");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x5a;
        let packed = zstd::bulk::compress(&bytes, 1).expect("compresses");
        let refused = unpack(&packed, BUILTIN_WASM_LEN, BUILTIN_SHA256);
        assert!(
            matches!(refused, Err(EmbeddedError::Digest { .. })),
            "a corrupted component of the right length: {refused:?}"
        );
        let short = zstd::bulk::compress(&bytes[..mid], 1).expect("compresses");
        assert!(matches!(
            unpack(&short, BUILTIN_WASM_LEN, BUILTIN_SHA256),
            Err(EmbeddedError::Length { .. })
        ));
        assert!(unpack(BUILTIN_WASM_ZST, BUILTIN_WASM_LEN, BUILTIN_SHA256).is_ok());
    }

    /// Where the embedded native code does not fit the engine, the built-ins are compiled from the
    /// compressed WebAssembly bytes, and they run.
    #[test]
    fn a_builtin_is_compiled_from_its_compressed_bytes_when_the_precompiled_code_does_not_fit() {
        let engine = super::super::engine::new_engine(64 << 20).expect("engine");
        let mut registry = Registry::new(engine, None).expect("registry");
        registry.try_precompiled = false;
        let tool = registry.builtin("read_file").expect("compiles");
        assert_eq!(tool.cache, CacheOutcome::Compiled);
        assert_eq!(tool.size, BUILTIN_WASM_LEN);
        assert_eq!(tool.sha256, BUILTIN_SHA256);
        assert!(matches!(tool.pre, ToolPre::Builtin(_, "read_file")));
    }
}
