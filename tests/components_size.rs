//! Component size, compile at `add`, and errors that say what to do (issue 25), through the real
//! binary: a 40 MiB component installs (compiled once, at `add`, with a progress line) and runs;
//! a file over 64 MiB is refused; a compile error keeps its whole cause chain and names the fix
//! for the component-model async ABI; a trap keeps its cause.

mod common;

use std::path::{Path, PathBuf};

use serde_json::json;
use sha2::{Digest, Sha256};

use common::tools::{World, hostile, ok, p, refused};

fn word_count() -> PathBuf {
    common::tools::example("word_count.wasm")
}

impl World {
    /// Every compiled artifact in this world's cache.
    fn artifacts(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let Ok(engines) = std::fs::read_dir(self.path("cache/components")) else {
            return out;
        };
        for e in engines.flatten() {
            for f in std::fs::read_dir(e.path()).unwrap().flatten() {
                if f.path().extension().is_some_and(|x| x == "cwasm") {
                    out.push(f.path());
                }
            }
        }
        out
    }
}

fn leb(mut n: u64, out: &mut Vec<u8>) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A core module with one memory and an active data segment of `data` bytes (not a custom
/// section: code and data the engine compiles and keeps).
fn module_with_data(data: usize) -> Vec<u8> {
    use wasm_encoder::{ConstExpr, DataSection, MemorySection, MemoryType, Module};
    let mut m = Module::new();
    let mut mem = MemorySection::new();
    mem.memory(MemoryType {
        minimum: (data as u64).div_ceil(65536) + 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    m.section(&mem);
    let mut ds = DataSection::new();
    // Not one repeated byte, so nothing along the way can treat it as zeroes.
    let bytes: Vec<u8> = (0..data).map(|i| (i * 7 + i / 4093) as u8).collect();
    ds.active(0, &ConstExpr::i32_const(0), bytes);
    m.section(&ds);
    m.finish()
}

/// `word_count.wasm` with a core module of `data` bytes of data appended (component section 1,
/// a core module): the same tool in a component that large.
fn padded_word_count(dir: &Path, data: usize) -> PathBuf {
    let mut bytes = std::fs::read(word_count()).unwrap();
    let module = module_with_data(data);
    bytes.push(1);
    leb(module.len() as u64, &mut bytes);
    bytes.extend_from_slice(&module);
    let path = dir.join("word_count_big.wasm");
    std::fs::write(&path, &bytes).unwrap();
    path
}

#[test]
fn a_40_mib_component_installs_compiled_once_at_add_and_runs() {
    let w = World::with_own_cache();
    std::fs::write(w.path("proj/a.txt"), "one two three\n").unwrap();
    let wasm = padded_word_count(w.root.path(), 40 << 20);
    let size = std::fs::metadata(&wasm).unwrap().len();
    assert!(size > 40 << 20, "{size}");
    let o = w.run(&["add", p(&wasm), "--project"]);
    let out = ok(&o);
    assert!(out.contains("wordcount__count_words"), "{out}");
    let err = common::stderr(&o);
    assert!(err.contains("compiling"), "no progress line: {err}");
    assert!(err.contains("compiled in"), "{err}");
    // Compiled at add, and the native code kept for the first call.
    let sha = hex::encode(Sha256::digest(std::fs::read(&wasm).unwrap()));
    let artifacts = w.artifacts();
    assert!(
        artifacts
            .iter()
            .any(|a| a.file_name().unwrap() == format!("{sha}.cwasm").as_str()),
        "no cached artifact for {sha}: {artifacts:?}"
    );
    ok(&w.run(&["grant", "wordcount", "--all"]));
    let out = ok(&w.run(&[
        "call",
        "wordcount",
        "--dir",
        p(&w.path("proj")),
        "--args",
        &json!({"path": "a.txt"}).to_string(),
    ]));
    assert!(out.contains('3'), "{out}");
    // The call found the artifact: no second one was written.
    assert_eq!(w.artifacts().len(), artifacts.len());
}

#[test]
fn a_component_over_64_mib_is_refused_naming_the_limit() {
    let w = World::with_own_cache();
    let big = w.path("big.wasm");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len((64 << 20) + 1).unwrap();
    let dir = w.path("pkg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::rename(&big, dir.join("c.wasm")).unwrap();
    std::fs::write(
        dir.join("bb7-tool.toml"),
        "name = \"big\"\nversion = \"1.0\"\nwit = \"0.1.0\"\n",
    )
    .unwrap();
    let e = refused(&w.run(&["add", p(&dir)]), 2);
    assert!(e.contains("at most 64 MiB"), "{e}");
}

/// A component using a component-model async built-in (`canon subtask.drop`).
fn async_component() -> Vec<u8> {
    use wasm_encoder::{CanonicalFunctionSection, Component};
    let mut c = Component::new();
    let mut canon = CanonicalFunctionSection::new();
    canon.subtask_drop();
    c.section(&canon);
    c.finish()
}

#[test]
fn a_compile_error_keeps_its_cause_and_the_async_abi_names_the_sync_build() {
    let w = World::with_own_cache();
    let dir = w.path("pkg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("c.wasm"), async_component()).unwrap();
    std::fs::write(
        dir.join("bb7-tool.toml"),
        "name = \"asyncabi\"\nversion = \"1.0\"\nwit = \"0.1.0\"\n",
    )
    .unwrap();
    let e = refused(&w.run(&["add", p(&dir)]), 2);
    // The cause (wasmparser's words), not only "failed to parse WebAssembly module".
    assert!(e.contains("async"), "{e}");
    assert!(e.contains("sync ABI") && e.contains("--sync"), "{e}");
}

#[test]
fn a_trap_keeps_its_cause() {
    let w = World::with_own_cache();
    let dir = w.path("pkg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(hostile(), dir.join("c.wasm")).unwrap();
    std::fs::write(
        dir.join("bb7-tool.toml"),
        "name = \"crash\"\nversion = \"1.0\"\nwit = \"0.1.0\"\nnetwork = [\"127.0.0.1:9\"]\n",
    )
    .unwrap();
    ok(&w.run(&["add", p(&dir)]));
    ok(&w.run(&["grant", "crash", "--all"]));
    let o = w.run(&[
        "call",
        "crash",
        "--dir",
        p(&w.path("proj")),
        "--args",
        &json!({"attack": "panic"}).to_string(),
    ]);
    assert!(!o.status.success());
    let all = format!("{}{}", common::stdout(&o), common::stderr(&o));
    assert!(all.contains("the tool crashed"), "{all}");
    // The trap itself, not only wasmtime's "error while executing at wasm backtrace:".
    assert!(all.contains("unreachable"), "the cause is dropped: {all}");
}
