//! The size of the `bb7` binary (issue 30): the large parts it embeds are embedded compressed, and
//! the (stripped) release binary stays within a budget. Reads the binary; runs nothing.

use std::path::{Path, PathBuf};

/// The release binary's budget, in bytes: issue 30's 20 MB. `bb7` links wasmtime's runtime only;
/// the compiler third-party components need is `bb7-compile`, a program of its own (compiler/),
/// which was 9.9 MB of this binary. With the size-oriented release profile (root Cargo.toml: one
/// code unit per dependency, rarely used crates optimised for size), the guest dependencies
/// optimised for size (guest-tools/Cargo.toml), reqwest without HTTP/2 and tracing's debug and
/// trace events compiled out, it is 19.73 MB (`cargo build -p bb7`; 19.76 MB as `cargo test
/// --workspace` builds it, cargo unifying its dependencies' features). Raise it only deliberately: a
/// regression like an
/// embedded part stored uncompressed (+1 MB), the profile lost (+4 MB) or Cranelift linked back
/// in (+9.9 MB) fails here.
const BUDGET_BYTES: u64 = 20_000_000;

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_bb7"))
}

fn bin_bytes() -> Vec<u8> {
    std::fs::read(bin()).expect("the bb7 binary")
}

/// `<target>`: `<target>/release/bb7`'s grandparent.
fn target_dir() -> PathBuf {
    bin().ancestors().nth(2).expect("<target>").to_path_buf()
}

/// Whether `hay` holds `needle`'s bytes anywhere.
fn holds(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// No compiler in `bb7`: the root workspace's lock (bb7 and the mock server) holds no Cranelift
/// code generator; it is in `compiler/Cargo.lock` only.
#[test]
fn no_webassembly_compiler_is_linked_into_bb7() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).expect("Cargo.lock");
    for compiler in [
        "cranelift-codegen",
        "wasmtime-internal-cranelift",
        "winch-codegen",
    ] {
        assert!(
            !lock.contains(&format!("name = \"{compiler}\"")),
            "{compiler} is in the root workspace's lock: cargo would link it into bb7"
        );
    }
    let compiler_lock =
        std::fs::read_to_string(root.join("compiler/Cargo.lock")).expect("compiler/Cargo.lock");
    assert!(compiler_lock.contains("name = \"cranelift-codegen\""));
}

#[test]
fn the_binary_is_within_its_size_budget() {
    let len = std::fs::metadata(bin()).expect("the bb7 binary").len();
    assert!(
        len <= BUDGET_BYTES,
        "bb7 is {len} bytes, over its budget of {BUDGET_BYTES}"
    );
}

/// The built-in component's WebAssembly bytes are only compiled when its precompiled native code
/// cannot be used, so the binary holds them compressed: no 4 KiB run of them appears as is.
#[test]
fn the_builtin_component_is_not_embedded_uncompressed() {
    let wasm = target_dir().join("wasm-guest/wasm32-wasip2/release/bb7_builtin_tools.wasm");
    let wasm =
        std::fs::read(&wasm).expect("the build leaves the built-in component under <target>");
    let bin = bin_bytes();
    for at in [wasm.len() / 4, wasm.len() / 2, wasm.len() * 3 / 4] {
        assert!(
            !holds(&bin, &wasm[at..at + 4096]),
            "bytes {at}.. of the built-in component are in the binary uncompressed"
        );
    }
}

/// The cl100k ranks file (1.7 MB of base64 text) is embedded as a compressed binary table.
#[test]
fn the_cl100k_ranks_file_is_not_embedded_as_text() {
    let ranks = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cl100k_base.tiktoken");
    let ranks = std::fs::read(ranks).expect("the ranks file");
    let bin = bin_bytes();
    for at in [ranks.len() / 4, ranks.len() / 2, ranks.len() * 3 / 4] {
        assert!(
            !holds(&bin, &ranks[at..at + 4096]),
            "bytes {at}.. of cl100k_base.tiktoken are in the binary as text"
        );
    }
}
