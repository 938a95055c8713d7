//! Native code for WebAssembly, made by the separate `bb7-compile` program (`compiler/`): `bb7`
//! links wasmtime's runtime only, without a compiler (Cranelift would be a third of the binary),
//! and untrusted WebAssembly is compiled in a process of its own, killed at its time limit.
//!
//! The program is looked up as `$BB7_COMPILER` when that is set, else as `bb7-compile` beside the
//! running executable (where `host/build.rs` copies it), else where the build left it. Its output
//! is loaded with wasmtime's `deserialize`, which checks that it was made for this engine
//! (wasmtime version, target, CPU features, every setting that affects code generation).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use wasmtime::Engine;
use wasmtime::component::Component;

/// The compiler's file name.
pub const PROGRAM: &str = "bb7-compile";

/// Where `host/build.rs` built the compiler (the last place looked).
const BUILT_AT: &str = env!("BB7_COMPILER_BUILT");

/// The largest native code read back (a 64 MiB component compiles to well under this).
const MAX_OUTPUT: u64 = 1 << 30;

/// The most of the compiler's error text kept.
const MAX_ERROR: u64 = 64 << 10;

/// What to compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A component (every tool and hook).
    Component,
    /// A core module (the sandbox's own tests of the engine).
    Module,
}

impl Kind {
    fn arg(self) -> &'static str {
        match self {
            Kind::Component => "component",
            Kind::Module => "module",
        }
    }
}

/// Why no native code was made.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// No compiler program was found.
    #[error(
        "the WebAssembly compiler `{PROGRAM}` was not found (looked for {}); it is built with bb7 \
         (`cargo build --release -p bb7` leaves it beside `bb7`): keep the two together, or set \
         BB7_COMPILER to its path",
        .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotFound(Vec<PathBuf>),
    /// The compiler could not be started or spoken to.
    #[error("cannot run the WebAssembly compiler {}: {error}", .program.display())]
    Io {
        /// The program run.
        program: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// The compiler ran past the time limit and was stopped.
    #[error("compiling took longer than {} s and was stopped", .0.as_secs())]
    TimedOut(Duration),
    /// wasmtime refused the input: its causes, outermost first.
    #[error("{}", super::hints::explained(super::hints::chain_of(.0.iter().map(String::as_str))))]
    Refused(Vec<String>),
    /// The compiler failed in a way it does not report (a crash, a signal).
    #[error("the WebAssembly compiler {} failed ({status}){}", .program.display(),
        if .stderr.is_empty() { String::new() } else { format!(": {}", .stderr) })]
    Failed {
        /// The program run.
        program: PathBuf,
        /// How it ended.
        status: std::process::ExitStatus,
        /// What it wrote to stderr.
        stderr: String,
    },
}

/// The compiler program: `$BB7_COMPILER`, else `bb7-compile` beside this executable, else where the
/// build left it.
pub fn program() -> Result<PathBuf, CompileError> {
    if let Some(p) = std::env::var_os("BB7_COMPILER").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let mut looked = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        looked.push(dir.join(PROGRAM));
    }
    looked.push(PathBuf::from(BUILT_AT));
    match looked.iter().find(|p| p.is_file()) {
        Some(p) => Ok(p.clone()),
        None => Err(CompileError::NotFound(looked)),
    }
}

/// The native code of `wasm`, made by the compiler within `limit` (past it the compiler is killed).
pub fn native_code(kind: Kind, wasm: &[u8], limit: Duration) -> Result<Vec<u8>, CompileError> {
    run(program()?, kind, wasm, limit)
}

/// [`native_code`] made by `program`.
fn run(
    program: PathBuf,
    kind: Kind,
    wasm: &[u8],
    limit: Duration,
) -> Result<Vec<u8>, CompileError> {
    let io = |error| CompileError::Io {
        program: program.clone(),
        error,
    };
    let mut child = Command::new(&program)
        .arg(kind.arg())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io)?;
    let pid = child.id();
    let (mut stdin, stdout, stderr) = (
        child.stdin.take(),
        child.stdout.take().expect("piped"),
        child.stderr.take().expect("piped"),
    );
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let (out, err, killed) = std::thread::scope(|s| {
        // Stops the compiler at the limit. The child is reaped only after this thread has been
        // joined (below, it is only waited for without reaping), so the pid it signals is still
        // the compiler's.
        let watchdog = s.spawn(move || match finished.recv_timeout(limit) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                // SAFETY: `kill` only sends a signal to the process `pid`, our unreaped child.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                true
            }
            _ => false,
        });
        let writer = s.spawn(move || {
            // A compiler that stops reading (it failed, or was killed) ends the write with EPIPE;
            // its exit status says why.
            if let Some(mut stdin) = stdin.take() {
                let _ = stdin.write_all(wasm);
            }
        });
        let errors = s.spawn(move || {
            let mut text = Vec::new();
            let _ = stderr.take(MAX_ERROR).read_to_end(&mut text);
            text
        });
        let mut code = Vec::new();
        let read = stdout.take(MAX_OUTPUT).read_to_end(&mut code);
        let _ = writer.join();
        let text = errors.join().unwrap_or_default();
        // Its output is closed; until it has exited (or the watchdog has stopped it), wait
        // without reaping.
        while !exited(pid) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = done.send(());
        let killed = watchdog.join().unwrap_or(false);
        (read.map(|_| code), text, killed)
    });
    let status = child.wait().map_err(io)?;
    if killed {
        return Err(CompileError::TimedOut(limit));
    }
    if status.success() {
        return out.map_err(io);
    }
    if status.code() == Some(2) {
        let causes: Vec<String> = err
            .split(|&b| b == 0)
            .filter(|c| !c.is_empty())
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        if !causes.is_empty() {
            return Err(CompileError::Refused(causes));
        }
    }
    Err(CompileError::Failed {
        program,
        status,
        stderr: String::from_utf8_lossy(&err).trim().to_string(),
    })
}

/// Whether child `pid` has exited (or cannot be waited for), leaving it unreaped.
fn exited(pid: u32) -> bool {
    // SAFETY: `waitid` with WNOWAIT only reads the child's state into `info`, a plain C struct
    // zeroed here; the child stays a zombie until `Child::wait` reaps it.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
        );
        r != 0 || info.si_pid() != 0
    }
}

/// `wasm` compiled by the compiler within `limit` and loaded on `engine`; also the native code,
/// for the cache.
pub fn component(
    engine: &Engine,
    wasm: &[u8],
    limit: Duration,
) -> anyhow::Result<(Component, Vec<u8>)> {
    load(engine, native_code(Kind::Component, wasm, limit)?)
}

/// `native`, from the compiler, loaded on `engine`.
fn load(engine: &Engine, native: Vec<u8>) -> anyhow::Result<(Component, Vec<u8>)> {
    // SAFETY: the bytes were made just now by the compiler `bb7` was built with (the program is
    // ours: found beside bb7, where the build put it, or named by the user); wasmtime checks the
    // header (version, target, CPU features, code-generation settings) against this engine.
    let component = unsafe { Component::deserialize(engine, &native) }
        .map_err(|e| anyhow::anyhow!("loading the compiled component: {e:#}"))?;
    Ok((component, native))
}

/// A core module compiled by the compiler and loaded on `engine` (the engine's own tests).
#[cfg(test)]
pub fn module(engine: &Engine, wasm: &[u8]) -> wasmtime::Module {
    let native = native_code(Kind::Module, wasm, Duration::from_secs(120)).expect("compiles");
    // SAFETY: as in `component`.
    unsafe { wasmtime::Module::deserialize(engine, &native) }.expect("loads")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiler_is_found_and_its_refusals_keep_every_cause() {
        assert!(program().expect("the build leaves the compiler").is_file());
        let e = native_code(
            Kind::Component,
            b"\0asm not really",
            Duration::from_secs(60),
        )
        .expect_err("not WebAssembly");
        let CompileError::Refused(causes) = &e else {
            panic!("not a refusal: {e:?}")
        };
        assert!(!causes.is_empty(), "{e}");
        assert!(e.to_string().len() > 10, "{e}");
    }

    /// A fake compiler: a shell script with `body`.
    fn fake(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("fake-compile");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn a_compiler_past_its_limit_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = std::time::Instant::now();
        let e = run(
            fake(dir.path(), "exec sleep 30"),
            Kind::Component,
            b"x",
            Duration::from_millis(300),
        )
        .expect_err("stopped");
        assert!(matches!(e, CompileError::TimedOut(_)), "{e:?}");
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the compiler was waited for"
        );
    }

    #[test]
    fn a_compiler_that_closes_its_output_and_hangs_is_killed_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(
            fake(dir.path(), "exec >&- 2>&- <&-; exec sleep 30"),
            Kind::Component,
            b"x",
            Duration::from_millis(300),
        )
        .expect_err("stopped");
        assert!(matches!(e, CompileError::TimedOut(_)), "{e:?}");
    }

    #[test]
    fn what_a_compiler_makes_is_loaded_only_if_wasmtime_accepts_it() {
        let engine = super::super::engine::new_engine(64 << 20).expect("engine");
        let dir = tempfile::tempdir().unwrap();
        // A "compiler" that echoes its input: not native code for this engine.
        let echoed = run(
            fake(dir.path(), "exec cat"),
            Kind::Component,
            b"\0asm\r\0\x01\0",
            Duration::from_secs(60),
        )
        .expect("cat succeeds");
        let e = load(&engine, echoed).expect_err("refused");
        assert!(
            e.to_string().contains("loading the compiled component"),
            "{e:#}"
        );
        // One that crashes, and one that fails without saying why.
        let crashed = run(
            fake(dir.path(), "kill -SEGV $$"),
            Kind::Component,
            b"x",
            Duration::from_secs(60),
        )
        .expect_err("crashed");
        assert!(
            matches!(crashed, CompileError::Failed { .. }),
            "{crashed:?}"
        );
        let silent = run(
            fake(dir.path(), "exit 2"),
            Kind::Component,
            b"x",
            Duration::from_secs(60),
        )
        .expect_err("failed");
        assert!(silent.to_string().contains("failed"), "{silent}");
    }

    #[test]
    fn a_compiled_module_runs_on_the_host_engine() {
        let engine = super::super::engine::new_engine(64 << 20).expect("engine");
        let wat = b"\0asm\x01\0\0\0";
        let module = module(&engine, wat);
        assert_eq!(module.imports().count(), 0);
    }
}
