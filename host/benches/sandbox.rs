//! Sandbox benchmarks (issue 2). Run: `cargo bench -p bb7 --bench sandbox`. Prints medians; asserts nothing.
//!
//! 1. per-call overhead: fresh store + instantiate + a trivial call (`describe`, and `list_files` on an
//!    empty directory, which adds the preopen);
//! 2. `edit_file` on a 1 MiB file, sandboxed vs the same logic natively;
//! 3. process start to all built-in components ready (`bb7 tools list`), warm and cold cache;
//! 4. `search_project` over 20,000 files vs `grep -rn` (and `rg` when installed): the built-in
//!    component (which reads through `bb7:host/files`) and the single-tool build (WASI alone).
//!    `BB7_BENCH_ONLY=sandboxed` (or `native`, `wasi-walk`) runs that one alone, for a profiler.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bb7::sandbox::{Access, Grant, Limits, Sandbox};
use bb7_tool_logic::{Root, Settings, file_id::file_id};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<F: FnMut()>(n: usize, mut f: F) -> Duration {
    let samples = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    median(samples)
}

fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

fn main() {
    // `cargo bench` passes --bench; a filter argument selects sections by name.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let cache = tempfile::tempdir().expect("cache dir");
    let sb = Sandbox::new(
        Limits::default(),
        Some(cache.path().to_path_buf()),
        None,
        &[],
    )
    .expect("sandbox");
    println!("bb7 sandbox benchmarks (release build, medians)");

    if want("overhead") {
        let tool = sb.registry().builtin("list_files").expect("list_files");
        let empty = tempfile::tempdir().unwrap();
        let grant = Grant::new(empty.path(), Access::ReadOnly).unwrap();
        for _ in 0..200 {
            let _ = sb.describe(&tool, &[]);
        }
        let d = time(5000, || {
            sb.describe(&tool, &[]).expect("describe");
        });
        println!(
            "per-call overhead, fresh store + instantiate + describe:       {}",
            fmt(d)
        );
        let d = time(5000, || {
            sb.call(&tool, &grant, &[], "{}").0.expect("list");
        });
        println!(
            "per-call overhead, + directory preopen, list_files on empty dir: {}",
            fmt(d)
        );
    }

    if want("edit") {
        let dir = tempfile::tempdir().unwrap();
        let mut content = String::with_capacity(1 << 20);
        let mut i: usize = 0;
        while content.len() < (1 << 20) - 100 {
            content.push_str(&format!(
                "    let value_{i} = compute(value_{}, {i}); // line {i}\n",
                i.saturating_sub(1)
            ));
            i += 1;
        }
        content.push_str("    MARKER_A\n");
        let path = dir.path().join("big.rs");
        let tool = sb.registry().builtin("edit_file").expect("edit_file");
        let grant = Grant::new(dir.path(), Access::ReadWrite).unwrap();
        let settings = Settings::default();
        let root = Root::at(dir.path());
        /// How an edit is run: the logic natively; the component hashing ids itself (as
        /// `bb7 tools call` runs it); or as a reply runs it (agent/tools.rs: the host hashes the
        /// staged file natively, tells the component its id and hashes the result itself, all of
        /// it inside the timing).
        #[derive(Clone, Copy, PartialEq)]
        enum Run {
            Native,
            Sandboxed,
            AsReply,
        }
        let bench = |run: Run| {
            let mut samples = Vec::new();
            for k in 0..20 {
                let (from, to) = if k % 2 == 0 {
                    ("MARKER_A", "MARKER_B")
                } else {
                    ("MARKER_B", "MARKER_A")
                };
                if k == 0 {
                    fs::write(&path, &content).unwrap();
                }
                let current = fs::read(&path).unwrap();
                let args = serde_json::json!({"edits": [{"path": "big.rs", "file_id": file_id("big.rs", &current),
                    "old_string": from, "new_string": to}]})
                .to_string();
                let t = Instant::now();
                match run {
                    Run::Native => {
                        bb7_tool_logic::tools::edit_file::call(&root, &settings, &args)
                            .expect("native edit");
                    }
                    Run::Sandboxed => {
                        sb.call(&tool, &grant, &[], &args)
                            .0
                            .expect("sandboxed edit");
                    }
                    Run::AsReply => {
                        let known = file_id("big.rs", &current);
                        let host_ids = [
                            ("known-file-ids".to_string(), format!("big.rs\t{known}\n")),
                            ("result-file-ids".to_string(), "omit".to_string()),
                        ];
                        sb.call(&tool, &grant, &host_ids, &args)
                            .0
                            .expect("sandboxed edit, host ids");
                        let after = fs::read(&path).unwrap();
                        std::hint::black_box(file_id("big.rs", &after));
                    }
                }
                samples.push(t.elapsed());
            }
            median(samples)
        };
        let native = bench(Run::Native);
        let sandboxed = bench(Run::Sandboxed);
        let as_reply = bench(Run::AsReply);
        println!(
            "edit_file on a 1 MiB file: native {}, sandboxed {} ({:.2}x native; the component hashes, as `bb7 tools call` runs it)",
            fmt(native),
            fmt(sandboxed),
            sandboxed.as_secs_f64() / native.as_secs_f64()
        );
        println!(
            "edit_file on a 1 MiB file as a reply runs it (ids hashed by the host): {} ({:.2}x native)",
            fmt(as_reply),
            as_reply.as_secs_f64() / native.as_secs_f64()
        );
    }

    if want("startup") {
        let bin = env!("CARGO_BIN_EXE_bb7");
        let home = tempfile::tempdir().unwrap();
        let run = |cache: &Path| {
            let t = Instant::now();
            let o = Command::new(bin)
                .args(["tools", "list"])
                .env("HOME", home.path())
                .env("BB7_CACHE_DIR", cache)
                .output()
                .expect("bb7");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            t.elapsed()
        };
        let warm_cache = tempfile::tempdir().unwrap();
        run(warm_cache.path());
        let warm = time(20, || {
            run(warm_cache.path());
        });
        let cold = median(
            (0..3)
                .map(|_| {
                    let c = tempfile::tempdir().unwrap();
                    run(c.path())
                })
                .collect(),
        );
        let version = time(20, || {
            Command::new(bin).arg("--version").output().expect("bb7");
        });
        println!(
            "process start to all 5 components ready (`bb7 tools list`): warm cache {}, cold cache {}",
            fmt(warm),
            fmt(cold)
        );
        println!(
            "  (for scale: `bb7 --version`, no components: {})",
            fmt(version)
        );
    }

    if want("search") {
        search_bench(&sb);
    }
}

/// CPU time (user + system) this process has used so far (`children`: that its reaped children
/// have), for CPU figures that a loaded machine barely moves.
fn cpu_time(children: bool) -> Duration {
    let who = if children {
        libc::RUSAGE_CHILDREN
    } else {
        libc::RUSAGE_SELF
    };
    // SAFETY: getrusage only writes the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage for the call to fill.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// `search_project` over 20,000 files: the logic natively, the sandboxed component, `grep -rn`
/// and `rg` (when installed), in interleaved rounds; medians of wall-clock and CPU time (the
/// in-process runs count every thread of this process, the external ones their process, spawn
/// included). Native and sandboxed runs use the same (default) deny list.
fn search_bench(sb: &Sandbox) {
    const ROUNDS: usize = 15;
    let tree = tempfile::tempdir().unwrap();
    generate_tree(tree.path(), 20_000);
    let tool = sb
        .registry()
        .builtin("search_project")
        .expect("search_project");
    // The single-tool build: the same logic walking through WASI alone (no `bb7:host/files`).
    let wasi_walk = sb
        .registry()
        .load_file(
            "search_project",
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/wasm-guest/wasm32-wasip2/release/bb7_tool_search_project.wasm"),
            Access::ReadOnly,
        )
        .map(std::sync::Arc::new)
        .expect("the single-tool search_project component");
    let grant = Grant::new(tree.path(), Access::ReadOnly).unwrap();
    let args = r#"{"query":"needle_marker","limit":50}"#;
    let settings = Settings::default();
    let root = Root::at(tree.path()).with_settings(&settings);
    let available = |prog: &str| Command::new(prog).arg("--version").output().is_ok();
    let have_rg = available("rg");
    let external = |prog: &str, args: &[&str]| {
        Command::new(prog)
            .args(args)
            .arg(tree.path())
            .output()
            .expect("search tool");
    };
    // `BB7_BENCH_ONLY=sandboxed|native|wasi-walk`: that contender alone, 100 calls, for a
    // profiler (`perf record -g`) to see nothing else; prints its median.
    if let Ok(only) = std::env::var("BB7_BENCH_ONLY") {
        let mut run: Box<dyn FnMut() + Send> = match only.as_str() {
            "sandboxed" => Box::new(|| {
                sb.call(&tool, &grant, &[], args)
                    .0
                    .expect("sandboxed search");
            }),
            "native" => Box::new(|| {
                bb7_tool_logic::tools::search_project::call(&root, &settings, args)
                    .expect("native search");
            }),
            "wasi-walk" => Box::new(|| {
                sb.call(&wasi_walk, &grant, &[], args)
                    .0
                    .expect("sandboxed search (WASI walk)");
            }),
            other => panic!("BB7_BENCH_ONLY: {other}? (sandboxed, native or wasi-walk)"),
        };
        // On a thread of its own, named `bench-only`: `perf report --comm bench-only` leaves out
        // making the tree.
        let d = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("bench-only".into())
                .spawn_scoped(s, || {
                    run();
                    time(100, &mut *run)
                })
                .expect("thread")
                .join()
                .expect("bench-only run")
        });
        println!(
            "search_project over 20,000 files, {only} alone: median {}",
            fmt(d)
        );
        return;
    }
    // Wall and CPU samples per contender: native, sandboxed, grep, rg, sandboxed WASI walk.
    let mut wall: [Vec<Duration>; 5] = Default::default();
    let mut cpu: [Vec<Duration>; 5] = Default::default();
    let mut record = |i: usize, children: bool, f: &mut dyn FnMut()| {
        let (c0, t) = (cpu_time(children), Instant::now());
        f();
        wall[i].push(t.elapsed());
        cpu[i].push(cpu_time(children).saturating_sub(c0));
    };
    // One warm-up round (page cache, the component's first instantiation), not counted.
    for _ in 0..=ROUNDS {
        let mut native = || {
            bb7_tool_logic::tools::search_project::call(&root, &settings, args)
                .expect("native search");
        };
        let mut sandboxed = || {
            sb.call(&tool, &grant, &[], args)
                .0
                .expect("sandboxed search");
        };
        let mut sandboxed_wasi = || {
            sb.call(&wasi_walk, &grant, &[], args)
                .0
                .expect("sandboxed search (WASI walk)");
        };
        let mut grep = || external("grep", &["-rn", "needle_marker"]);
        let mut rg = || external("rg", &["-n", "needle_marker"]);
        record(0, false, &mut native);
        record(1, false, &mut sandboxed);
        record(4, false, &mut sandboxed_wasi);
        record(2, true, &mut grep);
        if have_rg {
            record(3, true, &mut rg);
        }
    }
    // Sample 0 of each is the warm-up.
    let med = |v: &[Duration]| median(v[1..].to_vec());
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!(
        "search_project over 20,000 files, {ROUNDS} interleaved rounds, medians (wall / CPU):"
    );
    println!(
        "  sandboxed {} / {}, native logic {} / {}, grep -rn {} / {} (sandboxed = {:.2}x grep wall, {:.2}x CPU)",
        fmt(med(&wall[1])),
        fmt(med(&cpu[1])),
        fmt(med(&wall[0])),
        fmt(med(&cpu[0])),
        fmt(med(&wall[2])),
        fmt(med(&cpu[2])),
        ratio(med(&wall[1]), med(&wall[2])),
        ratio(med(&cpu[1]), med(&cpu[2])),
    );
    println!(
        "  sandboxed, WASI walk (single-tool build) {} / {} ({:.2}x grep wall, {:.2}x CPU)",
        fmt(med(&wall[4])),
        fmt(med(&cpu[4])),
        ratio(med(&wall[4]), med(&wall[2])),
        ratio(med(&cpu[4]), med(&cpu[2])),
    );
    if have_rg {
        println!("  rg {} / {}", fmt(med(&wall[3])), fmt(med(&cpu[3])));
    } else {
        println!("  rg not installed");
    }
}

/// 20,000 small source-like files in 200 directories; one in 500 contains the needle.
fn generate_tree(root: &Path, files: usize) {
    for i in 0..files {
        let dir = root.join(format!("pkg{:03}/mod{}", i / 100, (i / 10) % 10));
        if i % 10 == 0 {
            fs::create_dir_all(&dir).unwrap();
        }
        let mut body = String::new();
        for l in 0..30 {
            body.push_str(&format!(
                "fn item_{i}_{l}(x: u32) -> u32 {{ x.wrapping_mul({l}) + {i} }}\n"
            ));
        }
        if i % 500 == 7 {
            body.push_str("// needle_marker here\n");
        }
        fs::write(dir.join(format!("f{i}.rs")), body).unwrap();
    }
}
