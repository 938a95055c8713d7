//! Native code for WebAssembly, made by the separate `bb7-compile` program (`compiler/`): `bb7`
//! links wasmtime's runtime only, without a compiler (Cranelift would be a third of the binary),
//! and untrusted WebAssembly is compiled in a process of its own, killed at its time limit.
//!
//! The program is looked up as `$BB7_COMPILER` when that is set, else as `bb7-compile` beside the
//! running executable (where `host/build.rs` copies it), else where the build left it (only if no
//! other user can have placed a program there). It runs in a process group of its own, all of it
//! killed at the limit. Its output
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
    #[error("the WebAssembly compiler {} failed ({status}){}{}", .program.display(),
        if .stderr.is_empty() { String::new() } else { format!(": {}", .stderr) },
        if std::os::unix::process::ExitStatusExt::signal(status) == Some(9) {
            " (killed: out of memory?)"
        } else {
            ""
        })]
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
/// build left it — that last one only if no other user could have put it there (see [`trusted`]):
/// after a `cargo install` the build's directory is gone, and a path under a shared directory such
/// as `/tmp` could be taken by anyone.
pub fn program() -> Result<PathBuf, CompileError> {
    if let Some(p) = std::env::var_os("BB7_COMPILER").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let mut looked = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let beside = dir.join(PROGRAM);
        if beside.is_file() {
            return Ok(beside);
        }
        looked.push(beside);
    }
    let built = PathBuf::from(BUILT_AT);
    // The crate's own unit tests run from `<target>/release/deps/`, with nothing beside them, in
    // whatever checkout the tests were started in: they take the build's own compiler as is.
    if built.is_file() && (cfg!(test) || trusted(&built)) {
        return Ok(built);
    }
    looked.push(built);
    Err(CompileError::NotFound(looked))
}

/// Whether `path` and every directory above it belong to this user or root and are writable by no
/// one else (so no other user can have placed or replaced the program there). A directory others
/// may write to but not rename or remove in (sticky, as `/tmp`) is allowed above the program's own
/// directory: what lies below it is then ours alone.
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    // SAFETY: `geteuid` only reads the process's effective user id.
    let me = unsafe { libc::geteuid() };
    real.ancestors().enumerate().all(|(i, p)| {
        std::fs::metadata(p).is_ok_and(|m| {
            let owner = m.uid() == me || m.uid() == 0;
            let shared = m.mode() & 0o022 != 0;
            let sticky_dir = m.is_dir() && m.mode() & 0o1000 != 0;
            // The program itself (0) and its own directory (1): never writable by others.
            owner && (!shared || (sticky_dir && i >= 2))
        })
    })
}

/// The native code of `wasm`, made by the compiler within `limit` (past it the compiler is killed).
pub fn native_code(kind: Kind, wasm: &[u8], limit: Duration) -> Result<Vec<u8>, CompileError> {
    run(program()?, kind, wasm, limit)
}

/// A started compiler, killed and reaped if it is dropped before [`Running::wait`] (a panic on the
/// way must not leave it running).
struct Running(Option<std::process::Child>);

impl Running {
    fn wait(mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.take().expect("waited once").wait()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `cmd`, retrying briefly while the program is busy being written (`ETXTBSY`: a file just
/// written may still be open for writing in a process another thread is forking).
fn spawn(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

/// [`native_code`] made by `program`.
fn run(
    program: PathBuf,
    kind: Kind,
    wasm: &[u8],
    limit: Duration,
) -> Result<Vec<u8>, CompileError> {
    use std::os::unix::process::CommandExt;
    let io = |error| CompileError::Io {
        program: program.clone(),
        error,
    };
    let mut child = spawn(
        Command::new(&program)
            .arg(kind.arg())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own, so that the limit stops whatever it started too.
            .process_group(0),
    )
    .map_err(io)?;
    let pid = child.id();
    let (mut stdin, stdout, stderr) = (
        child.stdin.take(),
        child.stdout.take().expect("piped"),
        child.stderr.take().expect("piped"),
    );
    let child = Running(Some(child));
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let (out, err, killed) = std::thread::scope(|s| -> std::io::Result<_> {
        // Stops the compiler and its group at the limit. The compiler (the group's leader) is
        // reaped only after this thread has been joined (below, it is only waited for without
        // reaping), so the group id it signals is still the compiler's.
        let watchdog = std::thread::Builder::new().spawn_scoped(s, move || {
            match finished.recv_timeout(limit) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    // SAFETY: `kill` only sends a signal to process group `pid`, our unreaped
                    // child's.
                    unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
                    true
                }
                _ => false,
            }
        })?;
        let writer = std::thread::Builder::new().spawn_scoped(s, move || {
            // A compiler that stops reading (it failed, or was killed) ends the write with EPIPE;
            // its exit status says why.
            if let Some(mut stdin) = stdin.take() {
                let _ = stdin.write_all(wasm);
            }
        })?;
        let errors = std::thread::Builder::new().spawn_scoped(s, move || {
            let mut text = Vec::new();
            let _ = stderr.take(MAX_ERROR).read_to_end(&mut text);
            text
        })?;
        let mut code = Vec::new();
        let read = stdout.take(MAX_OUTPUT + 1).read_to_end(&mut code);
        let _ = writer.join();
        let text = errors.join().unwrap_or_default();
        // Its output is closed; until it has exited (or the watchdog has stopped it), wait
        // without reaping.
        while !exited(pid) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = done.send(());
        let killed = watchdog.join().unwrap_or(false);
        Ok((read.map(|_| code), text, killed))
    })
    .map_err(io)?;
    let status = child.wait().map_err(io)?;
    if status.success() {
        let code = out.map_err(io)?;
        if code.len() as u64 > MAX_OUTPUT {
            return Err(CompileError::Failed {
                program,
                status,
                stderr: format!("its output is larger than {MAX_OUTPUT} bytes"),
            });
        }
        return Ok(code);
    }
    if killed {
        return Err(CompileError::TimedOut(limit));
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
    // SAFETY: the bytes were made just now by the compiler program: the one named by the user
    // ($BB7_COMPILER), the one beside bb7 (as trusted as bb7 itself), or the one the build left
    // where no other user can have placed it; wasmtime checks the header (version, target, CPU
    // features, code-generation settings) against this engine.
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
    fn the_compiler_is_found_and_refuses_what_is_not_webassembly() {
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
    fn a_refusal_keeps_every_cause_in_order_and_other_failures_are_not_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(
            fake(
                dir.path(),
                r"printf 'outer\000middle: x\000root\000' >&2; exit 2",
            ),
            Kind::Component,
            b"x",
            Duration::from_secs(60),
        )
        .expect_err("refused");
        let CompileError::Refused(causes) = &e else {
            panic!("not a refusal: {e:?}")
        };
        assert_eq!(causes, &["outer", "middle: x", "root"]);
        assert_eq!(e.to_string(), "outer: middle: x: root");
        // The compiler's own failures (exit 3) are not the component's fault.
        let own = run(
            fake(dir.path(), r"printf 'no engine\000' >&2; exit 3"),
            Kind::Component,
            b"x",
            Duration::from_secs(60),
        )
        .expect_err("failed");
        assert!(matches!(own, CompileError::Failed { .. }), "{own:?}");
    }

    #[test]
    fn the_cache_key_is_the_digest_of_the_compiler_beside_bb7() {
        let out = Command::new(program().unwrap())
            .arg("digest")
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            env!("BB7_ENGINE_DIGEST")
        );
    }

    #[test]
    fn only_a_program_no_other_user_can_have_placed_is_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        };
        let dir = tempfile::tempdir().unwrap();
        mode(dir.path(), 0o755);
        // A program directly in a directory others may write to (even a sticky one) is not
        // trusted; one in a directory of ours below a sticky one is.
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        mode(&shared, 0o1777);
        let in_shared = fake(&shared, "exit 0");
        assert!(!trusted(&in_shared), "{}", in_shared.display());
        let ours = shared.join("ours");
        std::fs::create_dir(&ours).unwrap();
        mode(&ours, 0o755);
        let below = fake(&ours, "exit 0");
        // Only meaningful where the temporary directory's own ancestors are safe.
        let parents_safe = dir.path().ancestors().skip(1).all(|a| {
            let m = a.metadata().unwrap().permissions().mode();
            m & 0o022 == 0 || m & 0o1000 != 0
        });
        if parents_safe {
            assert!(trusted(&below), "{}", below.display());
        }
        mode(&below, 0o777);
        assert!(!trusted(&below), "a program anyone may rewrite");
        mode(&below, 0o755);
        mode(&ours, 0o775);
        assert!(!trusted(&below), "a directory its group may write to");
        mode(&ours, 0o755);
        // A directory of another user above it: only root can make one to test.
        // SAFETY: `geteuid` only reads the process's effective user id.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&ours, Some(65534), None).unwrap();
            assert!(!trusted(&below), "a directory of another user");
        }
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
