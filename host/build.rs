//! Builds the built-in tool components (guest-tools/, for wasm32-wasip2) and embeds them in `bb7`.
//!
//! The guest workspace is built by a nested cargo into `<target>/wasm-guest` (a separate target dir:
//! sharing the outer one would deadlock on cargo's lock), with the outer build's flags scrubbed from
//! its environment. The one component holding all five built-in tools (guest-tools/builtins) is
//! embedded with its sha256 (`$OUT_DIR/builtin_components.rs`) and its native code, precompiled here
//! by `bb7-compile` (compiler/: wasmtime with Cranelift and exactly the host's engine configuration,
//! `src/sandbox/engine_config.rs`), so that no run of `bb7` — not even the first one after an
//! install — compiles a built-in tool. (The per-tool crates are built too: they are examples, and
//! tests load them as files.)
//! The component's WebAssembly bytes are only needed when that native code cannot be used, so they are
//! embedded zstd-compressed.
//!
//! `bb7-compile` is its own workspace (in this one cargo would unify wasmtime's features and link
//! Cranelift into `bb7`, a third of its size), built here by a nested cargo into `<target>/compiler`
//! and copied beside `bb7` (`<target>/<profile>/bb7-compile`), where `bb7` runs it to compile
//! third-party components and hooks (`src/sandbox/compiler.rs`).
//!
//! It also turns the `cl100k_base` ranks file (host/assets/, base64 tokens) into the compact table
//! `src/tokens/bpe.rs` reads: every token's bytes in rank order, then one length byte per token,
//! zstd-compressed (`$OUT_DIR/cl100k.rs`).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// The built-in tools, in the order they are offered to the model. All five live in one component
/// (guest-tools/builtins): they share tool-logic, serde_json and std instead of carrying them five
/// times, and the host names the tool of each call in the component's `builtin` setting.
const TOOLS: [&str; 5] = [
    "write_file",
    "edit_file",
    "search_project",
    "read_file",
    "list_files",
];

/// The component file the guest build leaves for the all-in-one crate (`bb7-builtin-tools`).
const BUILTINS_WASM: &str = "bb7_builtin_tools.wasm";

/// The zstd level the embedded blobs are compressed with (decompression speed is the same at every level).
const ZSTD_LEVEL: i32 = 19;

/// The guest crates (directories under guest-tools/) whose sources the build depends on.
const GUEST_CRATES: [&str; 8] = [
    "builtins",
    "tool-logic",
    "guest-glue",
    "write-file",
    "edit-file",
    "search-project",
    "read-file",
    "list-files",
];

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().expect("host/ has a parent").to_path_buf();
    let guests = root.join("guest-tools");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));

    for p in ["Cargo.toml", "Cargo.lock", ".cargo"]
        .into_iter()
        .chain(GUEST_CRATES)
    {
        println!("cargo:rerun-if-changed={}", guests.join(p).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("src/sandbox/engine_config.rs").display()
    );
    for p in ["Cargo.toml", "Cargo.lock", "src"] {
        println!(
            "cargo:rerun-if-changed={}",
            root.join("compiler").join(p).display()
        );
    }

    cl100k_table(&manifest, &out);
    check_wasm_target();
    link_for_fast_start();

    let compiler = build_compiler(&root, &target_dir(&out));
    println!("cargo:rustc-env=BB7_COMPILER_BUILT={}", compiler.display());
    println!("cargo:rustc-env=BB7_ENGINE_DIGEST={}", digest(&compiler));
    beside_bb7(&compiler, &out);

    let guest_target = target_dir(&out).join("wasm-guest");
    // Two builds: the built-in component's tool-logic has the feature `host-files` (the host links
    // `bb7:host/files` for it only), and cargo would turn that feature on for every crate built in
    // the same run; the single-tool components are built without it.
    build_guests(&guests, &guest_target, &["-p", "bb7-builtin-tools"]);
    build_guests(
        &guests,
        &guest_target,
        &["--workspace", "--exclude", "bb7-builtin-tools"],
    );

    let wasm_dir = guest_target.join("wasm32-wasip2").join("release");
    let bytes = fs::read(wasm_dir.join(BUILTINS_WASM))
        .unwrap_or_else(|e| panic!("missing component {BUILTINS_WASM} after the guest build: {e}"));
    let sha = hex::encode(Sha256::digest(&bytes));
    let dest = out.join(format!("{BUILTINS_WASM}.zst"));
    let packed = zstd::bulk::compress(&bytes, ZSTD_LEVEL)
        .unwrap_or_else(|e| panic!("compressing {BUILTINS_WASM}: {e}"));
    fs::write(&dest, &packed).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
    let native = precompile(&compiler, &bytes);
    let cwasm = out.join(format!("{BUILTINS_WASM}.cwasm"));
    fs::write(&cwasm, &native).unwrap_or_else(|e| panic!("writing {}: {e}", cwasm.display()));
    let mut generated = format!(
        "/// The component holding every built-in tool: its WebAssembly bytes, zstd-compressed (read\n\
         /// only when this engine cannot run [`BUILTIN_PRECOMPILED`]).\n\
         pub static BUILTIN_WASM_ZST: &[u8] = include_bytes!({dest:?});\n\
         /// The length of the component's WebAssembly bytes (decompressed [`BUILTIN_WASM_ZST`]).\n\
         pub const BUILTIN_WASM_LEN: usize = {len};\n\
         /// Hex sha256 of the component's WebAssembly bytes, computed at build time.\n\
         pub const BUILTIN_SHA256: &str = {sha:?};\n\
         /// The component's native code, precompiled at build time by `bb7-compile` for the host's\n\
         /// engine configuration; page-aligned in the binary's read-only data, so that it can run\n\
         /// where it is (`sandbox::engine::host_engine`).\n\
         pub static BUILTIN_PRECOMPILED: &[u8] = &PRECOMPILED_PAGES.0;\n\
         static PRECOMPILED_PAGES: PageAligned<[u8; {native_len}]> = PageAligned(*include_bytes!({cwasm:?}));\n\
         /// The built-in tools, all in that one component, in the order they are offered.\n\
         pub static BUILTIN_COMPONENTS: &[EmbeddedComponent] = &[\n",
        len = bytes.len(),
        dest = dest.display().to_string(),
        cwasm = cwasm.display().to_string(),
        native_len = native.len(),
    );
    for tool in TOOLS {
        generated.push_str(&format!(
            "    EmbeddedComponent {{ tool: {tool:?}, sha256: BUILTIN_SHA256 }},\n"
        ));
    }
    generated.push_str("];\n");
    fs::write(out.join("builtin_components.rs"), generated).expect("writing builtin_components.rs");
}

/// Builds `bb7-compile` (compiler/, a workspace of its own) into `<target>/compiler`; its path.
///
/// Only for a `bb7` that runs where it is built: the compiler runs here (it precompiles the
/// built-ins) and beside `bb7` (it compiles third-party components), so both must be this
/// machine's target; a cross build is refused with what to do instead.
fn build_compiler(root: &Path, target: &Path) -> PathBuf {
    let host = env::var("HOST").expect("HOST");
    let for_target = env::var("TARGET").expect("TARGET");
    if host != for_target {
        panic!(
            "\n\nbb7 cannot be cross-compiled (building on {host} for {for_target}): its build runs \
             the WebAssembly compiler it builds, bb7-compile, to precompile the built-in tools, and \
             bb7 runs that same compiler beside it.\nFix: build bb7 on a {for_target} machine \
             (`cargo build --release -p bb7`).\n\n"
        );
    }
    let dir = target.join("compiler");
    // `--target` made explicit: a `[build] target` in the user's cargo configuration must not
    // move the binary.
    nested_build(
        &root.join("compiler"),
        &host,
        &[],
        &dir,
        "the WebAssembly compiler (compiler/)",
    );
    dir.join(&host).join("release").join("bb7-compile")
}

/// Copies the compiler beside `bb7` (`<target>/<profile>/`, where cargo puts `bb7`): renamed into
/// place, so a `bb7` running it meanwhile sees the old one or the new one, whole.
fn beside_bb7(compiler: &Path, out: &Path) {
    let Some(profile) = out
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent())
    else {
        return;
    };
    let tmp = profile.join(".bb7-compile.tmp");
    fs::copy(compiler, &tmp)
        .and_then(|_| fs::rename(&tmp, profile.join("bb7-compile")))
        .unwrap_or_else(|e| panic!("copying bb7-compile to {}: {e}", profile.display()));
}

/// `bb7-compile digest`: what the code it makes depends on (the compiled-component cache's key).
fn digest(compiler: &Path) -> String {
    let output = Command::new(compiler)
        .arg("digest")
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", compiler.display()));
    let digest = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if !output.status.success() || digest.len() != 16 {
        panic!(
            "{} digest failed ({}): {}",
            compiler.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    digest
}

/// The native code of component `wasm`, from `compiler`.
fn precompile(compiler: &Path, wasm: &[u8]) -> Vec<u8> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(compiler)
        .arg("component")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", compiler.display()));
    let mut stdin = child.stdin.take().expect("piped");
    let wasm = wasm.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&wasm));
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("running {}: {e}", compiler.display()));
    let written = writer.join().expect("the writer thread");
    if !output.status.success() {
        panic!(
            "precompiling {BUILTINS_WASM} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).replace('\0', ": ")
        );
    }
    written.unwrap_or_else(|e| panic!("writing {BUILTINS_WASM} to the compiler: {e}"));
    output.stdout
}

/// Builds the guest crates `select` names (cargo's package selection) for wasm32-wasip2 into
/// `guest_target`.
fn build_guests(guests: &Path, guest_target: &Path, select: &[&str]) {
    nested_build(
        guests,
        "wasm32-wasip2",
        select,
        guest_target,
        "the tool components (guest-tools/, wasm32-wasip2)",
    );
}

/// `cargo build --release --locked --target <target> <select> --target-dir <target_dir>` in the
/// workspace at `dir`, with the outer build's configuration scrubbed; panics naming `what`.
fn nested_build(dir: &Path, target: &str, select: &[&str], target_dir: &Path, what: &str) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(dir)
        .args(["build", "--release", "--locked", "--target", target])
        .args(select)
        .arg("--target-dir")
        .arg(target_dir);
    scrub_env(&mut cmd);
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run cargo for {what}: {e}"));
    if !output.status.success() {
        panic!(
            "building {what} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The cl100k table for `src/tokens/bpe.rs`: the tokens' bytes in rank order, then each token's length
/// (one byte), zstd-compressed, with its sizes (`$OUT_DIR/cl100k.rs`). The ranks file lists every rank
/// once, in order, so a token's rank is its index (checked here).
fn cl100k_table(manifest: &Path, out: &Path) {
    let src = manifest.join("assets/cl100k_base.tiktoken");
    println!("cargo:rerun-if-changed={}", src.display());
    let text =
        fs::read_to_string(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut arena = Vec::with_capacity(700 << 10);
    let mut lens = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let (token, rank) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("cl100k line {i}: not `<base64> <rank>`: {line:?}"));
        assert_eq!(
            rank.parse::<usize>().ok(),
            Some(i),
            "cl100k line {i}: ranks must run 0, 1, …"
        );
        let before = arena.len();
        b64.decode_vec(token, &mut arena)
            .unwrap_or_else(|e| panic!("cl100k line {i}: {e}"));
        let len = u8::try_from(arena.len() - before)
            .unwrap_or_else(|_| panic!("cl100k line {i}: a token longer than 255 bytes"));
        lens.push(len);
    }
    let tokens = lens.len();
    arena.extend_from_slice(&lens);
    let packed = zstd::bulk::compress(&arena, ZSTD_LEVEL).expect("compressing the cl100k table");
    let dest = out.join("cl100k.bin.zst");
    fs::write(&dest, &packed).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
    let generated = format!(
        "/// The cl100k table (every token's bytes in rank order, then one length byte per token),\n\
         /// zstd-compressed by the build script.\n\
         static CL100K_ZST: &[u8] = include_bytes!({dest:?});\n\
         /// The table's decompressed length.\n\
         const CL100K_BYTES: usize = {bytes};\n\
         /// The number of tokens (ranks 0 to this − 1).\n\
         const CL100K_TOKENS: usize = {tokens};\n",
        dest = dest.display().to_string(),
        bytes = arena.len(),
    );
    fs::write(out.join("cl100k.rs"), generated).expect("writing cl100k.rs");
}

/// `bb7` answers its first request in a few milliseconds, and a third of that went to the dynamic
/// loader applying ~43,000 relative relocations from a 1 MiB table. Packed relative relocations
/// (RELR: glibc >= 2.36, binutils >= 2.38) keep the binary position-independent (ASLR intact) with a
/// table of a few KiB. Only on Linux with GNU ld, where the flag is known to be understood.
fn link_for_fast_start() {
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let gnu = env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|e| e == "gnu");
    if linux && gnu && linker_supports_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the system linker accepts `-z pack-relative-relocs` (asks `cc` to link an empty program).
fn linker_supports_relr() -> bool {
    let Ok(dir) = env::var("OUT_DIR") else {
        return false;
    };
    let src = PathBuf::from(&dir).join("relr_probe.c");
    if fs::write(&src, "int main(void) { return 0; }\n").is_err() {
        return false;
    }
    Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(PathBuf::from(&dir).join("relr_probe"))
        .arg("-Wl,-z,pack-relative-relocs")
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails the build with the exact fix when the wasm32-wasip2 standard library is not installed.
fn check_wasm_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let libdir = Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", "wasm32-wasip2"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = libdir
        .as_deref()
        .is_some_and(|d| d.is_dir() && has_rlibs(d));
    if !installed {
        panic!(
            "\n\nThe wasm32-wasip2 target is not installed, and bb7's tool components are built for it.\n\
             Fix: run `rustup target add wasm32-wasip2` in this repository, then build again.\n\n"
        );
    }
}

fn has_rlibs(dir: &Path) -> bool {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
        })
        .unwrap_or(false)
}

/// `<target>` for this build: the ancestor of OUT_DIR (`<target>[/<triple>]/<profile>/build/<pkg>/out`)
/// just above the profile directory.
fn target_dir(out: &Path) -> PathBuf {
    out.ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent())
        .and_then(|profile| profile.parent())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| out.join("wasm-target"))
}

/// Removes the outer build's configuration so it cannot leak into the nested wasm build.
fn scrub_env(cmd: &mut Command) {
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let drop = matches!(
            key,
            "RUSTFLAGS"
                | "CARGO_ENCODED_RUSTFLAGS"
                | "CARGO_BUILD_RUSTFLAGS"
                | "RUSTC_WRAPPER"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "CARGO_TARGET_DIR"
                | "CARGO_BUILD_TARGET"
                | "CARGO_PRIMARY_PACKAGE"
                | "RUSTC_LINKER"
                | "RUSTDOCFLAGS"
                | "CARGO_ENCODED_RUSTDOCFLAGS"
        ) || key.starts_with("CARGO_PROFILE_")
            || key.starts_with("CARGO_FEATURE_")
            || key.starts_with("CARGO_CFG_")
            || key.starts_with("CARGO_TARGET_")
            || key.starts_with("CARGO_PKG_")
            || key.starts_with("CARGO_MANIFEST_");
        if drop {
            cmd.env_remove(key);
        }
    }
}
