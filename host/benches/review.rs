//! Review benchmarks (issue 15). Run: `cargo bench -p bb7 --bench review`. Prints medians; no
//! thresholds are asserted (targets: get_hunks ≤ 20 ms, apply_hunks ≤ 20 ms, checkpoint overhead
//! ≤ 5 ms per apply of a 1 MiB file).
//!
//! 1. `get_hunks` on a 10,000-line file with 200 changed regions (the real binary);
//! 2. `apply_hunks` of 100 of them (the real binary; the file is reset between runs);
//! 3. `apply_file` of a 1 MiB file (the real binary, checkpoint included), and the checkpoint's own
//!    cost in-process: a checkpointed write minus the plain atomic write of the same file.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    seq: u64,
}

impl Host {
    fn start(home: &Path) -> Host {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bb7"))
            .env_clear()
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("bb7");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Host {
            child,
            stdin,
            stdout,
            seq: 0,
        }
    }

    fn call(&mut self, mut req: Value) -> Value {
        self.seq += 1;
        req["request_id"] = json!(self.seq.to_string());
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut buf = String::new();
            if self.stdout.read_line(&mut buf).unwrap() == 0 {
                panic!("bb7 closed stdout");
            }
            let v: Value = serde_json::from_str(&buf).unwrap();
            if v["request_id"] == json!(self.seq.to_string()) {
                assert_ne!(v["type"], "error", "{v}");
                return v;
            }
        }
    }

    fn stop(mut self) {
        let _ = self.stdin.write_all(b"{\"action\":\"shutdown\"}\n");
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median and minimum (on a shared machine the minimum shows the cost without contention).
fn stats(v: Vec<Duration>) -> String {
    let min = v.iter().min().copied().unwrap_or_default();
    format!("{} (min {})", ms(median(v)), ms(min))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// CPU time (ns) all threads of process `pid` have used (`/proc/<pid>/task/*/schedstat`): unlike
/// wall time, it does not grow when other processes compete for the cores.
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// CPU time of this thread (ns).
fn own_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn cpu_ms(ns: u64, n: usize) -> String {
    format!("{:.2} ms", ns as f64 / n as f64 / 1e6)
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    println!("bb7 review benchmarks (release build, medians)");

    let mut h = Host::start(home.path());
    h.call(json!({"action": "bb7_init", "project_root": root}));
    h.call(json!({"action": "init", "project_root": root}));
    let id = h.call(json!({"action": "chat_new", "name": "bench"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out_dir = root.join(".bb7/chats").join(&id).join("output");
    std::fs::create_dir_all(&out_dir).unwrap();

    // 10,000 lines, a change every 50 lines: 200 regions.
    let old: String = (0..10_000)
        .map(|i| format!("    let value_{i} = compute({i}, \"some text on line {i}\");\n"))
        .collect();
    let new: String = (0..10_000)
        .map(|i| {
            if i % 50 == 25 {
                format!("    let value_{i} = compute_better({i}, \"changed line {i}\");\n")
            } else {
                format!("    let value_{i} = compute({i}, \"some text on line {i}\");\n")
            }
        })
        .collect();
    std::fs::write(root.join("big.rs"), &old).unwrap();
    std::fs::write(out_dir.join("big.rs"), &new).unwrap();

    let mut hunks = Vec::new();
    let pid = h.child.id();
    // The host warms up its tool components in the background after init: wait until it is idle so
    // its CPU time below is the requests' own.
    let idle_since = Instant::now();
    loop {
        let c = cpu_ns(pid);
        std::thread::sleep(Duration::from_millis(300));
        if cpu_ns(pid) - c < 3_000_000 || idle_since.elapsed() > Duration::from_secs(120) {
            break;
        }
    }
    let cpu0 = cpu_ns(pid);
    let samples: Vec<Duration> = (0..20)
        .map(|_| {
            let (d, r) = time(|| h.call(json!({"action": "get_hunks", "path": "big.rs"})));
            hunks = r["hunks"].as_array().unwrap().clone();
            d
        })
        .collect();
    assert_eq!(hunks.len(), 200);
    println!(
        "get_hunks, 10,000 lines, 200 changed regions: {}; host CPU per call {}",
        stats(samples),
        cpu_ms(cpu_ns(pid) - cpu0, 20)
    );

    let ids: Vec<Value> = hunks.iter().step_by(2).map(|h| h["id"].clone()).collect();
    assert_eq!(ids.len(), 100);
    let base = format!("sha256:{}", hex::encode(Sha256::digest(old.as_bytes())));
    let mut cpu = 0;
    let samples: Vec<Duration> = (0..15)
        .map(|_| {
            std::fs::write(root.join("big.rs"), &old).unwrap();
            let c0 = cpu_ns(pid);
            let (d, r) = time(|| {
                h.call(json!({"action": "apply_hunks", "path": "big.rs", "hunk_ids": ids, "base_hash": base}))
            });
            assert_eq!(r["remaining"], 100);
            cpu += cpu_ns(pid) - c0;
            d
        })
        .collect();
    println!(
        "apply_hunks, 100 of the 200 hunks (checkpoint included): {}; host CPU per call {}",
        stats(samples),
        cpu_ms(cpu, 15)
    );

    // 1 MiB, applied whole.
    let mib: String = (0..16_384).map(|i| format!("{:063}\n", i)).collect();
    assert_eq!(mib.len(), 1 << 20);
    cpu = 0;
    let samples: Vec<Duration> = (0..15)
        .map(|i| {
            std::fs::write(root.join("mib.txt"), format!("{i}\n")).unwrap();
            std::fs::write(out_dir.join("mib.txt"), &mib).unwrap();
            let c0 = cpu_ns(pid);
            let d = time(|| h.call(json!({"action": "apply_file", "path": "mib.txt"}))).0;
            cpu += cpu_ns(pid) - c0;
            d
        })
        .collect();
    println!(
        "apply_file, 1 MiB (write + checkpoint + snapshot + chat.json): {}; host CPU per call {}",
        stats(samples),
        cpu_ms(cpu, 15)
    );
    h.stop();

    // The checkpoint's own share, in-process on the same disk.
    let dir = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority()).unwrap();
    let cps = bb7::chat::checkpoints::Checkpoints::open(&dir).unwrap();
    let old_mib: String = mib.replace('0', "1");
    let mut plain = Vec::new();
    let mut with = Vec::new();
    let (mut plain_cpu, mut with_cpu) = (0, 0);
    for i in 0..21 {
        let (a, b) = if i % 2 == 0 {
            (&old_mib, &mib)
        } else {
            (&mib, &old_mib)
        };
        std::fs::write(root.join("cp.txt"), a).unwrap();
        let c0 = own_cpu_ns();
        plain.push(time(|| bb7::store::write_no_follow(&dir, "cp.txt", b.as_bytes()).unwrap()).0);
        plain_cpu += own_cpu_ns() - c0;
        std::fs::write(root.join("cp.txt"), a).unwrap();
        let c0 = own_cpu_ns();
        with.push(
            time(|| {
                bb7::chat::review::checkpointed_write(
                    &dir,
                    &cps,
                    Some("bench"),
                    "apply_file",
                    &[("cp.txt", b.as_bytes())],
                )
                .unwrap()
            })
            .0,
        );
        with_cpu += own_cpu_ns() - c0;
    }
    let (pm, wm) = (
        plain.iter().min().copied().unwrap_or_default(),
        with.iter().min().copied().unwrap_or_default(),
    );
    let (p, w) = (median(plain), median(with));
    println!(
        "1 MiB file: plain atomic write {}, checkpointed write {}, checkpoint overhead {} (medians; minimums {} / {} / {})",
        ms(p),
        ms(w),
        ms(w.saturating_sub(p)),
        ms(pm),
        ms(wm),
        ms(wm.saturating_sub(pm))
    );
    println!(
        "1 MiB file, CPU time of the writing thread: plain {}, checkpointed {}, checkpoint overhead {}",
        cpu_ms(plain_cpu, 21),
        cpu_ms(with_cpu, 21),
        cpu_ms(with_cpu.saturating_sub(plain_cpu), 21)
    );
    println!(
        "(load average while running: {})",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
