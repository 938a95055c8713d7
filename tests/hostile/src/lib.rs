//! A hostile `bb7:tool@0.1.0` component: the fixture of the sandbox escape tests (`tests/escape.rs`).
//! Never shipped.
//!
//! `call` takes `{"attack": "<name>", ...}` and tries to break out of the sandbox with plain Rust
//! `std`, dropping to the wasi-libc functions `std` is built on only where `std` has no API (symlinks,
//! raw `open` flags, `utimensat`, `linkat` with `AT_SYMLINK_FOLLOW`). It never decides whether an
//! attack worked: it reports what it observed as JSON and the test judges.
//!
//! Attacks:
//! - `fs`: `{"ops": [{"op": ..., "path": ..., ...}, ...]}` runs filesystem operations in order and
//!   returns `{"results": [{"op", "path", "ok", "error"?, "data"?}, ...]}` (see [`fs_op`]).
//! - `env`, `stdin`, `stdio`, `net` (`tcp_port`, `udp_port`), `fds`: what the ambient world offers.
//! - `loop`, `sleep` (`secs`), `memory_bomb`, `huge_result` (`mib`), `huge_error` (`mib`),
//!   `recursion` (`depth`), `panic`, `invalid_utf8`, `error` (`kind`, `message`), `raw_result`
//!   (`result`, returned verbatim), `ok`.
//! - `fd_bomb` (`path`, `max`): holds descriptors until the host refuses; `race` (`path`,
//!   `millis`, `write`): reads and writes one path in a loop while the test swaps its directory.
//! - `hold` (`files`, `mib`, `secs`): creates `held.txt` and holds `files` descriptors of it, fills
//!   `mib` MiB of memory, then blocks in a host call (a sleep) for `secs`.
//! - `write_big` (`mib`, `via`): writes `mib` MiB to `big.bin` in 1 MiB writes (`via`: `file`,
//!   std's `File::write_all`; `stream`, the raw `write` on a descriptor opened with `O_APPEND`),
//!   going on past failed writes; reports the bytes written and the first error.
//! - `deep_chain` (`depth`): creates a chain of nested directories `d/d/d/…`, each level made and
//!   opened relative to the previous one's descriptor (no path grows), until `depth` or an error.

wit_bindgen::generate!({
    path: "../../wit/v0.1.0",
    world: "tool-component",
});

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::hint::black_box;
use std::io::{Read, Write};
use std::time::{Duration, SystemTime};

use bb7::tool::types::ErrorKind;
use exports::bb7::tool::tool::{Guest, Setting, ToolError, ToolInfo};
use serde_json::{Value, json};

struct Hostile;

impl Guest for Hostile {
    fn describe(_settings: Vec<Setting>) -> Result<ToolInfo, ToolError> {
        Ok(ToolInfo {
            name: "hostile".into(),
            description: "A test fixture that attacks its sandbox. Never shipped.".into(),
            parameters_schema: r#"{"type":"object","properties":{"attack":{"type":"string"}},"required":["attack"]}"#
                .into(),
        })
    }

    fn call(_settings: Vec<Setting>, arguments: String) -> Result<String, ToolError> {
        let args: Value = serde_json::from_str(&arguments).map_err(|e| ToolError {
            kind: ErrorKind::InvalidArguments,
            message: format!("hostile: bad arguments: {e}"),
        })?;
        let attack = args["attack"].as_str().unwrap_or("");
        let out = match attack {
            "ok" => json!({"ok": true}),
            "raw_result" => return Ok(args["result"].as_str().unwrap_or("").to_string()),
            "fs" => {
                let ops = args["ops"].as_array().cloned().unwrap_or_default();
                json!({"results": ops.iter().map(fs_op).collect::<Vec<_>>()})
            }
            "env" => env(),
            "stdin" => stdin(),
            "stdio" => stdio(),
            "net" => net(&args),
            "fds" => fds(),
            "loop" => endless_loop(),
            "sleep" => {
                std::thread::sleep(Duration::from_secs(args["secs"].as_u64().unwrap_or(3600)));
                json!({"slept": true})
            }
            "memory_bomb" => memory_bomb(),
            "fd_bomb" => fd_bomb(&args),
            "hold" => hold(&args),
            "write_big" => write_big(&args),
            "deep_chain" => deep_chain(&args),
            "race" => race(&args),
            "huge_result" => return Ok("x".repeat(mib(&args) << 20)),
            "huge_error" => {
                return Err(ToolError {
                    kind: ErrorKind::Io,
                    message: "E".repeat(mib(&args) << 20),
                });
            }
            "recursion" => {
                let depth = args["depth"].as_u64().unwrap_or(100_000_000);
                json!({"depth_reached": recurse(black_box(depth))})
            }
            "panic" => panic!("hostile: deliberate panic"),
            "invalid_utf8" => {
                // SAFETY: deliberately not UTF-8 — the host must reject the string when it lifts it,
                // not trust it. (Undefined behaviour only as far as this fixture is concerned.)
                return Ok(unsafe {
                    String::from_utf8_unchecked(vec![b'{', 0xff, 0xfe, 0xc0, b'}'])
                });
            }
            "error" => {
                let kind = match args["kind"].as_str().unwrap_or("io") {
                    "invalid-arguments" => ErrorKind::InvalidArguments,
                    "not-found" => ErrorKind::NotFound,
                    "permission-denied" => ErrorKind::PermissionDenied,
                    "conflict" => ErrorKind::Conflict,
                    "too-large" => ErrorKind::TooLarge,
                    "not-text" => ErrorKind::NotText,
                    _ => ErrorKind::Io,
                };
                return Err(ToolError {
                    kind,
                    message: args["message"].as_str().unwrap_or("").to_string(),
                });
            }
            other => {
                return Err(ToolError {
                    kind: ErrorKind::InvalidArguments,
                    message: format!("hostile: unknown attack {other:?}"),
                });
            }
        };
        Ok(out.to_string())
    }
}

export!(Hostile);

fn mib(args: &Value) -> usize {
    args["mib"].as_u64().unwrap_or(64) as usize
}

/// Up to this many bytes of anything read are reported back.
const REPORT_BYTES: usize = 4096;

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(REPORT_BYTES)]).into_owned()
}

fn io_err(e: &std::io::Error) -> String {
    format!("{:?}: {e}", e.kind())
}

fn last_os_error() -> String {
    io_err(&std::io::Error::last_os_error())
}

fn cstr(s: &str) -> CString {
    CString::new(s.as_bytes()).unwrap_or_else(|_| CString::new("nul-in-path").unwrap())
}

fn open_flags(flags: &Value) -> libc::c_int {
    let mut f = 0;
    for name in flags
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str())
    {
        f |= match name {
            "rdonly" => libc::O_RDONLY,
            "wronly" => libc::O_WRONLY,
            "rdwr" => libc::O_RDWR,
            "creat" => libc::O_CREAT,
            "trunc" => libc::O_TRUNC,
            "excl" => libc::O_EXCL,
            "append" => libc::O_APPEND,
            "directory" => libc::O_DIRECTORY,
            "nofollow" => libc::O_NOFOLLOW,
            "sync" => libc::O_SYNC,
            _ => 0,
        };
    }
    f
}

/// After a successful raw open: writes `data` when asked (failing the op if the write fails),
/// reads what it can, closes.
fn use_raw_fd(fd: libc::c_int, data: Option<&str>) -> Result<Value, String> {
    let mut wrote = Value::Null;
    let mut write_error = None;
    if let Some(d) = data {
        // SAFETY: fd is an open descriptor; the buffer is valid for its length.
        let n = unsafe { libc::write(fd, d.as_ptr().cast(), d.len()) };
        if n < 0 {
            write_error = Some(last_os_error());
        } else {
            wrote = json!(n);
        }
    }
    let mut buf = vec![0u8; REPORT_BYTES];
    // SAFETY: as above.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    let read = if n < 0 {
        json!({"error": last_os_error()})
    } else {
        json!(lossy(&buf[..n as usize]))
    };
    // SAFETY: fd is ours to close.
    unsafe { libc::close(fd) };
    match write_error {
        Some(e) => Err(format!("opened, but the write failed: {e} (read: {read})")),
        None => Ok(json!({"wrote": wrote, "read": read})),
    }
}

fn meta_json(m: &fs::Metadata) -> Value {
    json!({"len": m.len(), "is_dir": m.is_dir(), "is_file": m.is_file(), "is_symlink": m.file_type().is_symlink()})
}

/// Lists `dir` recursively, following symlinks the way a naive tool would, reading every file.
/// Fails only when `dir` itself cannot be listed.
fn walk(dir: &str, depth: u32, out: &mut Vec<Value>) -> std::io::Result<()> {
    if depth > 8 || out.len() > 2000 {
        return Ok(());
    }
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if depth == 0 => return Err(e),
        Err(e) => {
            out.push(json!({"path": dir, "error": io_err(&e)}));
            return Ok(());
        }
    };
    for entry in entries.flatten() {
        let path = format!(
            "{}/{}",
            dir.trim_end_matches('/'),
            entry.file_name().to_string_lossy()
        );
        match fs::metadata(&path) {
            Ok(m) if m.is_dir() => {
                out.push(json!({"path": path, "dir": true}));
                walk(&path, depth + 1, out)?;
            }
            Ok(m) if m.is_file() => {
                let data = fs::read(&path)
                    .map(|b| lossy(&b))
                    .unwrap_or_else(|e| io_err(&e));
                out.push(json!({"path": path, "data": data}));
            }
            Ok(_) => out.push(json!({"path": path, "other": true})),
            Err(e) => out.push(json!({"path": path, "error": io_err(&e)})),
        }
    }
    Ok(())
}

fn fs_time(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

/// Runs one filesystem operation and reports `{op, path, ok, error?, data?}`.
///
/// `path` is the operand; `to` the second path (rename, links, copy); `target` a symlink's
/// contents; `data` bytes to write; `flags` raw open flags; `dir` the directory a raw `openat`
/// starts from.
fn fs_op(op: &Value) -> Value {
    let name = op["op"].as_str().unwrap_or("");
    let path = op["path"].as_str().unwrap_or("");
    let to = op["to"].as_str().unwrap_or("");
    let data = op["data"].as_str().unwrap_or("HOSTILE-WRITE");
    let result: Result<Value, String> = (|| {
        let io = |e: std::io::Error| io_err(&e);
        match name {
            "read" => fs::read(path).map(|b| json!(lossy(&b))).map_err(io),
            "read_dir" => fs::read_dir(path)
                .map(|rd| {
                    let mut names: Vec<String> = rd
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    json!(names)
                })
                .map_err(io),
            "walk" => {
                let mut out = Vec::new();
                walk(path, 0, &mut out).map(|_| json!(out)).map_err(io)
            }
            "metadata" => fs::metadata(path).map(|m| meta_json(&m)).map_err(io),
            "symlink_metadata" => fs::symlink_metadata(path)
                .map(|m| meta_json(&m))
                .map_err(io),
            "read_link" => fs::read_link(path)
                .map(|p| json!(p.to_string_lossy()))
                .map_err(io),
            "write" => fs::write(path, data).map(|_| Value::Null).map_err(io),
            "write_existing" => OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|mut f| f.write_all(data.as_bytes()))
                .map(|_| Value::Null)
                .map_err(io),
            "append" => OpenOptions::new()
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(data.as_bytes()))
                .map(|_| Value::Null)
                .map_err(io),
            "create_new" => OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .and_then(|mut f| f.write_all(data.as_bytes()))
                .map(|_| Value::Null)
                .map_err(io),
            "open_write" => OpenOptions::new()
                .write(true)
                .open(path)
                .map(|_| Value::Null)
                .map_err(io),
            "open_trunc" => OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .map(|_| Value::Null)
                .map_err(io),
            "write_via_read_fd" => File::open(path)
                .and_then(|mut f| f.write_all(data.as_bytes()))
                .map(|_| Value::Null)
                .map_err(io),
            "set_len_via_read_fd" => File::open(path)
                .and_then(|f| f.set_len(0))
                .map(|_| Value::Null)
                .map_err(io),
            "set_len" => OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_len(0))
                .map(|_| Value::Null)
                .map_err(io),
            "set_times_via_read_fd" => File::open(path)
                .and_then(|f| f.set_modified(fs_time(1000)))
                .map(|_| Value::Null)
                .map_err(io),
            "set_times" => OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|f| f.set_modified(fs_time(1000)))
                .map(|_| Value::Null)
                .map_err(io),
            "set_readonly" => fs::metadata(path)
                .and_then(|m| {
                    let mut p = m.permissions();
                    p.set_readonly(!p.readonly());
                    fs::set_permissions(path, p)
                })
                .map(|_| Value::Null)
                .map_err(io),
            "mkdir" => fs::create_dir(path).map(|_| Value::Null).map_err(io),
            "mkdir_all" => fs::create_dir_all(path).map(|_| Value::Null).map_err(io),
            "remove_file" => fs::remove_file(path).map(|_| Value::Null).map_err(io),
            "remove_dir" => fs::remove_dir(path).map(|_| Value::Null).map_err(io),
            "remove_dir_all" => fs::remove_dir_all(path).map(|_| Value::Null).map_err(io),
            "rename" => fs::rename(path, to).map(|_| Value::Null).map_err(io),
            "hard_link" => fs::hard_link(path, to).map(|_| Value::Null).map_err(io),
            "copy" => fs::copy(path, to).map(|n| json!(n)).map_err(io),
            "symlink" => {
                let target = op["target"].as_str().unwrap_or("");
                // SAFETY: both are valid NUL-terminated strings.
                let r = unsafe { libc::symlink(cstr(target).as_ptr(), cstr(path).as_ptr()) };
                if r == 0 {
                    Ok(Value::Null)
                } else {
                    Err(last_os_error())
                }
            }
            "link_follow" => {
                // linkat(AT_SYMLINK_FOLLOW): hard-link whatever a symlink points at.
                // SAFETY: valid strings; AT_FDCWD resolves through the preopens.
                let r = unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        cstr(path).as_ptr(),
                        libc::AT_FDCWD,
                        cstr(to).as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                };
                if r != 0 {
                    return Err(last_os_error());
                }
                // wasi-libc may drop AT_SYMLINK_FOLLOW and link the symlink itself: then the
                // attack (a new name for the link's target) did not happen.
                match fs::symlink_metadata(to) {
                    Ok(m) if m.file_type().is_symlink() => Err(
                        "linked the symlink itself, not its target (AT_SYMLINK_FOLLOW not honoured)".into(),
                    ),
                    Ok(m) => Ok(meta_json(&m)),
                    Err(e) => Err(format!("linkat succeeded but the new name is unusable: {}", io_err(&e))),
                }
            }
            "truncate" => {
                // SAFETY: valid string.
                let r = unsafe { libc::truncate(cstr(path).as_ptr(), 0) };
                if r == 0 {
                    Ok(Value::Null)
                } else {
                    Err(last_os_error())
                }
            }
            "chmod" => {
                // SAFETY: valid string.
                let r = unsafe { libc::chmod(cstr(path).as_ptr(), 0o777) };
                if r == 0 {
                    Ok(Value::Null)
                } else {
                    Err(last_os_error())
                }
            }
            "utimensat" | "utimensat_nofollow" => {
                let t = libc::timespec {
                    tv_sec: 1000,
                    tv_nsec: 0,
                };
                let times = [t, t];
                let flags = if name == "utimensat" {
                    0
                } else {
                    libc::AT_SYMLINK_NOFOLLOW
                };
                // SAFETY: valid string and a two-element timespec array.
                let r = unsafe {
                    libc::utimensat(libc::AT_FDCWD, cstr(path).as_ptr(), times.as_ptr(), flags)
                };
                if r == 0 {
                    Ok(Value::Null)
                } else {
                    Err(last_os_error())
                }
            }
            "raw_open" => {
                // SAFETY: valid string; the mode argument is what open(2) expects.
                let fd = unsafe {
                    libc::open(
                        cstr(path).as_ptr(),
                        open_flags(&op["flags"]),
                        0o666 as libc::c_uint,
                    )
                };
                if fd < 0 {
                    Err(last_os_error())
                } else {
                    use_raw_fd(fd, op["data"].as_str())
                }
            }
            "raw_openat" => {
                let dir = op["dir"].as_str().unwrap_or(".");
                // SAFETY: valid strings; the directory descriptor is closed below.
                let dfd =
                    unsafe { libc::open(cstr(dir).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
                if dfd < 0 {
                    return Err(format!("opening {dir}: {}", last_os_error()));
                }
                let fd = unsafe {
                    libc::openat(
                        dfd,
                        cstr(path).as_ptr(),
                        open_flags(&op["flags"]),
                        0o666 as libc::c_uint,
                    )
                };
                let r = if fd < 0 {
                    Err(last_os_error())
                } else {
                    use_raw_fd(fd, op["data"].as_str())
                };
                unsafe { libc::close(dfd) };
                r
            }
            other => Err(format!("unknown op {other:?}")),
        }
    })();
    match result {
        Ok(data) => json!({"op": name, "path": path, "to": to, "ok": true, "data": data}),
        Err(error) => json!({"op": name, "path": path, "to": to, "ok": false, "error": error}),
    }
}

fn env() -> Value {
    let vars: Vec<String> = std::env::vars_os()
        .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        .collect();
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|e| io_err(&e));
    let home = std::env::var("HOME").ok();
    json!({"vars": vars, "args": args, "cwd": cwd, "home": home})
}

fn stdin() -> Value {
    let mut buf = Vec::new();
    match std::io::stdin().read_to_end(&mut buf) {
        Ok(n) => json!({"ok": true, "len": n, "data": lossy(&buf)}),
        Err(e) => json!({"ok": false, "error": io_err(&e)}),
    }
}

/// Writes markers (and a fake JSON result line) to stdout and stderr, through `std` and raw fds.
fn stdio() -> Value {
    let mut errors = Vec::new();
    for i in 0..100 {
        if let Err(e) = writeln!(
            std::io::stdout(),
            "{{\"guest_stdout\":\"GUEST-STDOUT-MARKER\",\"i\":{i}}}"
        ) {
            errors.push(io_err(&e));
            break;
        }
    }
    let _ = std::io::stdout().flush();
    for _ in 0..100 {
        if let Err(e) = writeln!(
            std::io::stderr(),
            "bb7: hostile failed [trap]: GUEST-STDERR-MARKER"
        ) {
            errors.push(io_err(&e));
            break;
        }
    }
    for fd in [1, 2] {
        let msg = format!("RAW-FD{fd}-GUEST-MARKER\n");
        // SAFETY: valid buffer; a bad fd just fails.
        let n = unsafe { libc::write(fd, msg.as_ptr().cast(), msg.len()) };
        if n < 0 {
            errors.push(format!("fd {fd}: {}", last_os_error()));
        }
    }
    json!({"stdio": "done", "errors": errors})
}

fn net(args: &Value) -> Value {
    use std::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
    let tcp_port = args["tcp_port"].as_u64().unwrap_or(9) as u16;
    let udp_port = args["udp_port"].as_u64().unwrap_or(9) as u16;
    let mut results = Vec::new();
    let mut record = |what: &str, r: Result<String, std::io::Error>| {
        results.push(match r {
            Ok(d) => json!({"what": what, "ok": true, "data": d}),
            Err(e) => json!({"what": what, "ok": false, "error": io_err(&e)}),
        });
    };
    record(
        "tcp_connect_127.0.0.1",
        TcpStream::connect(("127.0.0.1", tcp_port)).and_then(|mut s| {
            s.write_all(b"HOSTILE-TCP\n")?;
            Ok("connected".into())
        }),
    );
    record(
        "tcp_connect_timeout_127.0.0.1",
        TcpStream::connect_timeout(&([127, 0, 0, 1], tcp_port).into(), Duration::from_secs(2))
            .map(|_| "connected".into()),
    );
    record(
        "tcp_connect_localhost",
        TcpStream::connect(("localhost", tcp_port)).map(|_| "connected".into()),
    );
    record(
        "tcp_connect_::1",
        TcpStream::connect(("::1", tcp_port)).map(|_| "connected".into()),
    );
    record(
        "tcp_listen",
        TcpListener::bind("127.0.0.1:0").map(|l| format!("{:?}", l.local_addr())),
    );
    record(
        "udp_send",
        UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.send_to(b"HOSTILE-UDP", ("127.0.0.1", udp_port)))
            .map(|n| n.to_string()),
    );
    record(
        "udp_bind",
        UdpSocket::bind("127.0.0.1:0").map(|s| format!("{:?}", s.local_addr())),
    );
    record(
        "lookup_localhost",
        "localhost:80"
            .to_socket_addrs()
            .map(|a| format!("{:?}", a.collect::<Vec<_>>())),
    );
    record(
        "lookup_example.com",
        "example.com:80"
            .to_socket_addrs()
            .map(|a| format!("{:?}", a.collect::<Vec<_>>())),
    );
    json!({"results": results})
}

/// Which file descriptors exist, and which of them are directories (preopens).
fn fds() -> Value {
    let mut open = Vec::new();
    let mut dirs = Vec::new();
    for fd in 0..256 {
        // SAFETY: fstat on any integer is safe; it fails for closed descriptors.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } == 0 {
            open.push(fd);
            if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                dirs.push(fd);
            }
        }
    }
    json!({"open": open, "dirs": dirs})
}

fn endless_loop() -> Value {
    let mut x = 0u64;
    loop {
        x = black_box(x.wrapping_add(1));
    }
}

fn memory_bomb() -> Value {
    let mut held: Vec<Vec<u8>> = Vec::new();
    loop {
        // Allocate and touch every page, so nothing is left lazily unmapped.
        let chunk = vec![0xA5u8; 1 << 20];
        held.push(black_box(chunk));
        if held.len() > 1 << 20 {
            return json!({"allocated_mib": held.len()});
        }
    }
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    let frame = black_box([n as u8; 512]);
    if n == 0 {
        return frame[0] as u64;
    }
    recurse(black_box(n - 1)).wrapping_add(frame[(n % 512) as usize] as u64)
}

/// Opens one file again and again, holding every descriptor, until the host refuses.
fn fd_bomb(args: &Value) -> Value {
    let path = args["path"].as_str().unwrap_or("inside.txt");
    let max = args["max"].as_u64().unwrap_or(100_000) as usize;
    let mut held = Vec::new();
    let mut error = Value::Null;
    while held.len() < max {
        match File::open(path) {
            Ok(f) => held.push(f),
            Err(e) => {
                error = json!(io_err(&e));
                break;
            }
        }
    }
    json!({"opened": held.len(), "error": error})
}

/// Reads (and, with `write`, writes) `path` in a loop for `millis` while the test swaps the
/// directory it lies in for a symlink to the outside: reports every distinct content it saw.
fn race(args: &Value) -> Value {
    let path = args["path"].as_str().unwrap_or("racy/f");
    let millis = args["millis"].as_u64().unwrap_or(2000);
    let write = args["write"].as_bool().unwrap_or(false);
    let start = std::time::Instant::now();
    let (mut reads_ok, mut reads_err, mut writes_ok, mut writes_err) = (0u64, 0u64, 0u64, 0u64);
    let mut distinct: Vec<String> = Vec::new();
    while start.elapsed() < Duration::from_millis(millis) {
        match fs::read(path) {
            Ok(b) => {
                reads_ok += 1;
                let s = lossy(&b[..b.len().min(200)]);
                if distinct.len() < 20 && !distinct.contains(&s) {
                    distinct.push(s);
                }
            }
            Err(_) => reads_err += 1,
        }
        if write {
            match fs::write(path, "RACE-WRITE") {
                Ok(()) => writes_ok += 1,
                Err(_) => writes_err += 1,
            }
        }
    }
    json!({"reads_ok": reads_ok, "reads_err": reads_err, "writes_ok": writes_ok, "writes_err": writes_err, "distinct": distinct})
}

/// Holds descriptors and memory, then blocks in a host call: what an abandoned call must release.
fn hold(args: &Value) -> Value {
    let files = args["files"].as_u64().unwrap_or(1000) as usize;
    let mib = args["mib"].as_u64().unwrap_or(0) as usize;
    let secs = args["secs"].as_u64().unwrap_or(3600);
    let mut held = Vec::new();
    let mut error = Value::Null;
    if files > 0 {
        if let Err(e) = fs::write("held.txt", "held") {
            error = json!(io_err(&e));
        }
    }
    while error.is_null() && held.len() < files {
        match File::open("held.txt") {
            Ok(f) => held.push(f),
            Err(e) => error = json!(io_err(&e)),
        }
    }
    // Every page written, so the memory is really resident in the host.
    let filled = vec![0x5au8; mib << 20];
    std::thread::sleep(Duration::from_secs(secs));
    json!({"held": black_box(&held).len(), "filled": black_box(&filled).len(), "error": error})
}

/// Writes `mib` MiB in 1 MiB writes, going on after failures; reports what was written.
fn write_big(args: &Value) -> Value {
    let mib = args["mib"].as_u64().unwrap_or(256) as usize;
    let via = args["via"].as_str().unwrap_or("file");
    let chunk = vec![0x42u8; 1 << 20];
    let mut written = 0u64;
    let mut first_error = Value::Null;
    let mut note = |e: String| {
        if first_error.is_null() {
            first_error = json!(e);
        }
    };
    match via {
        "stream" => {
            let fd = unsafe {
                libc::open(
                    cstr("big.bin").as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
                    0o644,
                )
            };
            if fd < 0 {
                note(last_os_error());
            } else {
                // Each chunk until it is all written (a stream takes a little at a time) or
                // refused; then the next.
                for _ in 0..mib {
                    let mut rest = &chunk[..];
                    while !rest.is_empty() {
                        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
                        if n <= 0 {
                            note(last_os_error());
                            break;
                        }
                        written += n as u64;
                        rest = &rest[n as usize..];
                    }
                }
                unsafe { libc::close(fd) };
            }
        }
        _ => match File::create("big.bin") {
            Ok(mut f) => {
                for _ in 0..mib {
                    match f.write_all(&chunk) {
                        Ok(()) => written += chunk.len() as u64,
                        Err(e) => note(io_err(&e)),
                    }
                }
            }
            Err(e) => note(io_err(&e)),
        },
    }
    json!({"written": written, "error": first_error})
}

/// A chain of nested directories made through descriptors, so no path ever grows.
fn deep_chain(args: &Value) -> Value {
    let depth = args["depth"].as_u64().unwrap_or(200_000);
    let name = cstr("d");
    let mut fd = unsafe { libc::open(cstr(".").as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    if fd < 0 {
        return json!({"made": 0, "error": last_os_error()});
    }
    let mut made = 0u64;
    let mut error = Value::Null;
    while made < depth {
        if unsafe { libc::mkdirat(fd, name.as_ptr(), 0o755) } != 0 {
            error = json!(last_os_error());
            break;
        }
        let next = unsafe { libc::openat(fd, name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        unsafe { libc::close(fd) };
        if next < 0 {
            error = json!(last_os_error());
            fd = -1;
            break;
        }
        fd = next;
        made += 1;
    }
    if fd >= 0 {
        unsafe { libc::close(fd) };
    }
    json!({"made": made, "error": error})
}
