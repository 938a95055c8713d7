//! `bb7-compile component|module`: reads WebAssembly on stdin and writes the native code wasmtime
//! makes of it on stdout, compiled with exactly the engine configuration `bb7` runs components with
//! (`host/src/sandbox/engine_config.rs`, included below). `bb7` loads the result with
//! `Component::deserialize`/`Module::deserialize`, which checks that it was made for its engine.
//!
//! `bb7-compile digest` prints a digest (16 hex digits) of what the code it makes depends on: the
//! wasmtime version, the target and CPU features, every setting that affects code generation
//! (`Engine::precompile_compatibility_hash`); `bb7` keys its compiled-component cache with it.
//!
//! Exit status: 0 with the native code on stdout; 2 when wasmtime refuses the input, with the
//! error's causes on stderr, outermost first, each ended by a NUL byte; 3 when this program itself
//! fails (no engine, the input or output pipe broke), with the causes the same way; 64 for a usage
//! error.

use std::io::{Read, Write};
use std::process::ExitCode;

/// The host's engine configuration (its other items are the host's).
#[allow(dead_code)]
mod config {
    include!("../../host/src/sandbox/engine_config.rs");
}
use config::engine_config;

/// The largest input read (`bb7` refuses components over 64 MiB before they get here).
const MAX_INPUT: u64 = 256 << 20;

/// The memory limit the configuration is made for: any value compiles the same code (it sizes the
/// pooling allocator, which does not affect compiled code), so this is `bb7`'s default.
const MEMORY_BYTES: usize = 256 << 20;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let kind = match (args.next().as_deref(), args.next()) {
        (Some("component"), None) => Kind::Component,
        (Some("module"), None) => Kind::Module,
        (Some("digest"), None) => Kind::Digest,
        _ => {
            eprintln!(
                "usage: bb7-compile component|module < input.wasm > output.cwasm, or bb7-compile digest"
            );
            return ExitCode::from(64);
        }
    };
    // On demand, not pooled: no address space reserved for instances that are never made here.
    let engine = match wasmtime::Engine::new(&engine_config(MEMORY_BYTES, false)) {
        Ok(e) => e,
        Err(e) => return failed(3, &causes(&e)),
    };
    let component = match kind {
        Kind::Component => true,
        Kind::Module => false,
        Kind::Digest => {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut h);
            println!("{:016x}", h.finish());
            return ExitCode::SUCCESS;
        }
    };
    let mut wasm = Vec::new();
    if let Err(e) = std::io::stdin()
        .lock()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut wasm)
    {
        return failed(3, &[format!("reading the input: {e}")]);
    }
    if wasm.len() as u64 > MAX_INPUT {
        return failed(2, &[format!("the input is larger than {MAX_INPUT} bytes")]);
    }
    let native = if component {
        engine.precompile_component(&wasm)
    } else {
        engine.precompile_module(&wasm)
    };
    match native {
        Ok(native) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(&native).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => failed(3, &[format!("writing the native code: {e}")]),
            }
        }
        Err(e) => failed(2, &causes(&e)),
    }
}

/// What to do.
enum Kind {
    Component,
    Module,
    Digest,
}

/// Every cause of `e`, outermost first.
fn causes(e: &wasmtime::Error) -> Vec<String> {
    e.chain().map(|c| c.to_string()).collect()
}

/// Exit status `status` with `causes` on stderr, each ended by a NUL byte.
fn failed(status: u8, causes: &[String]) -> ExitCode {
    let mut err = std::io::stderr().lock();
    for c in causes {
        let _ = err.write_all(c.replace('\0', " ").as_bytes());
        let _ = err.write_all(b"\0");
    }
    ExitCode::from(status)
}
