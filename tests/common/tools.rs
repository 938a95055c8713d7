//! Helpers of the tests that drive `bb7 tools …` with third-party components (components_generic,
//! components_size, toolchains): run the command in an isolated home, check how it ended, package
//! a component with a manifest, and the example components built once per test process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

/// Runs `bb7 tools <args>` as the user of `home`, in `cwd`, with the compiled-component cache
/// `cache`; nothing else of the environment but PATH.
pub fn run(home: &Path, cwd: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(super::bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BB7_CACHE_DIR", cache)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .arg("tools")
        .args(args)
        .output()
        .expect("spawn bb7")
}

/// The stdout of a run that succeeded (a failed one panics, with both outputs).
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "bb7 failed ({:?}):\nstdout: {}\nstderr: {}",
        o.status.code(),
        super::stdout(o),
        super::stderr(o)
    );
    super::stdout(o)
}

/// The stderr of a run that exited with `code` (any other ending panics, with both outputs).
pub fn refused(o: &Output, code: i32) -> String {
    assert_eq!(
        o.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        super::stdout(o),
        super::stderr(o)
    );
    super::stderr(o)
}

/// A path as a command-line argument.
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A directory holding a copy of `wasm` (as `c.wasm`) and `manifest` as `bb7-tool.toml`.
pub fn packaged(wasm: &Path, manifest: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(wasm, d.path().join("c.wasm")).unwrap();
    std::fs::write(d.path().join("bb7-tool.toml"), manifest).unwrap();
    d
}

/// The example component `wasm` of `examples/tool-components` (`word_count.wasm`,
/// `generic_types.wasm`, …), built once per test process.
pub fn example(wasm: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    built
        .entry(wasm.to_string())
        .or_insert_with(|| {
            super::wasm::build("examples/tool-components", "tool-examples-wasm", wasm)
        })
        .clone()
}

/// The hostile test component (`tests/hostile`), built once per test process.
pub fn hostile() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| super::wasm::build("tests/hostile", "hostile-wasm", "hostile.wasm"))
}

/// A user home and a project with `.bb7/` in a temporary directory, running `bb7 tools` with the
/// shared compile cache, or a cache of its own ([`World::with_own_cache`]).
pub struct World {
    /// The temporary directory holding `home/`, `proj/` (and `cache/`).
    pub root: tempfile::TempDir,
    own_cache: bool,
}

impl World {
    /// A new world using the compile cache every test shares.
    pub fn new() -> World {
        World::make(false)
    }

    /// A new world with a compile cache of its own (`cache/`): what it compiles is seen there.
    pub fn with_own_cache() -> World {
        World::make(true)
    }

    fn make(own_cache: bool) -> World {
        let root = tempfile::tempdir().unwrap();
        for d in ["home", "proj/.bb7", "cache"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        World { root, own_cache }
    }

    /// `rel` inside the world.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The user's home.
    pub fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// The project.
    pub fn proj(&self) -> PathBuf {
        self.path("proj")
    }

    /// `bb7 tools <args>` as this world's user, in the project.
    pub fn run(&self, args: &[&str]) -> Output {
        let cache = if self.own_cache {
            self.path("cache")
        } else {
            super::shared_cache().to_path_buf()
        };
        run(&self.home(), &self.proj(), &cache, args)
    }
}
