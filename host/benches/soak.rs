//! Soak: many sends through one `bb7` process against the mock model server, sampling the process's
//! resident memory (`VmRSS` in /proc/<pid>/status) and open file descriptors (/proc/<pid>/fd), then
//! a verdict on growth. Run: `cargo bench -p bb7 --bench soak [-- <sends>]` (default 10,000).
//!
//! Every send streams a short reply; every 10th reply also makes a `write_file` tool call (a sandboxed
//! component call and a commit into `output/`). A new chat is started every 100 sends so that the
//! chat's own history (which is legitimately kept and re-sent) stays bounded: what must not grow is
//! the process, over 100 chats.
//!
//! Verdict: after a warm-up of 20% of the sends, the least-squares slope of RSS must stay under
//! 64 KiB per 1,000 sends and the last samples within 8 MiB of the warm-up level; the most descriptors
//! open in the last quarter must not exceed the most open in the first 40%.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use serde_json::{Value, json};

const MODEL: &str = "mock/model";
const PER_CHAT: usize = 100;
const SAMPLE_EVERY: usize = 250;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Least-squares slope of y over x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

struct Bb7 {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<Value>,
    seq: u64,
}

impl Bb7 {
    fn start(home: &Path, cache: &Path) -> Bb7 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bb7"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("BB7_CACHE_DIR", cache)
            .current_dir(home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn bb7");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        Bb7 {
            child,
            stdin,
            lines: rx,
            seq: 0,
        }
    }

    /// Sends `req` and returns the first reply with its request id whose type is in `terminal`
    /// (any type when empty).
    fn call(&mut self, mut req: Value, terminal: &[&str]) -> Value {
        self.seq += 1;
        let rid = format!("s{}", self.seq);
        req["request_id"] = json!(rid);
        let mut line = serde_json::to_vec(&req).expect("json");
        line.push(b'\n');
        self.stdin.write_all(&line).expect("write to bb7");
        self.stdin.flush().expect("flush");
        loop {
            let v = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("bb7 did not answer {req}"));
            if v["request_id"] != rid.as_str() {
                continue;
            }
            let t = v["type"].as_str().unwrap_or("");
            if terminal.is_empty() || terminal.contains(&t) {
                assert_ne!(t, "error", "{req} failed: {v}");
                return v;
            }
        }
    }
}

fn main() {
    let sends: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let server = MockServer::start(Script::new([]).with_fallback(Reply::text([
        "soak ",
        "reply ",
        "in chunks",
    ])));
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let proj = dir.path().join("proj");
    let cache = dir.path().join("cache");
    for d in [&home, &proj, &cache] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let cfg = home.join(".config/bb7");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    std::fs::write(
        cfg.join("config.json"),
        json!({"api_key": "k", "base_url": server.base_url(), "title_model": "mock/title"})
            .to_string(),
    )
    .expect("config");

    let mut b = Bb7::start(&home, &cache);
    let pid = b.child.id();
    let root = proj.to_str().expect("utf-8").to_string();
    b.call(json!({"action": "bb7_init", "project_root": root}), &[]);
    b.call(json!({"action": "init", "project_root": root}), &[]);

    println!(
        "bb7 soak: {sends} sends against the mock server, one process (pid {pid}), a new chat every {PER_CHAT} sends, every 10th reply with a write_file call"
    );
    println!("{:>7} {:>10} {:>5} {:>9}", "sends", "RSS KiB", "fds", "s");
    let started = Instant::now();
    let mut samples: Vec<(usize, u64, usize)> = Vec::new();
    let sample = |n: usize, samples: &mut Vec<(usize, u64, usize)>| {
        let (r, f) = (rss_kib(pid), fds(pid));
        println!(
            "{n:>7} {r:>10} {f:>5} {:>9.1}",
            started.elapsed().as_secs_f64()
        );
        samples.push((n, r, f));
    };
    sample(0, &mut samples);
    for i in 0..sends {
        if i % PER_CHAT == 0 {
            b.call(
                json!({"action": "chat_new", "name": format!("soak {}", i / PER_CHAT)}),
                &[],
            );
        }
        if i % 10 == 9 {
            server.push(Reply::tool_calls([ToolCall::new(
                0,
                format!("c{i}"),
                "write_file",
                json!({"path": format!("out{}.txt", i % 30), "content": format!("send {i}\n")})
                    .to_string(),
            )]));
        }
        let r = b.call(
            json!({"action": "send", "content": format!("message {i}"), "model": MODEL}),
            &["done", "diff_error", "error"],
        );
        assert_eq!(r["type"], "done", "send {i}: {r}");
        if (i + 1) % SAMPLE_EVERY == 0 {
            sample(i + 1, &mut samples);
        }
    }
    let elapsed = started.elapsed();
    let _ = b.call(json!({"action": "ping"}), &[]);
    let open: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|t| t.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    println!("open at the end ({}): {}", open.len(), open.join(", "));
    let _ = b.child.kill();
    let _ = b.child.wait();

    let warm = sends / 5;
    let after: Vec<&(usize, u64, usize)> = samples.iter().filter(|s| s.0 >= warm).collect();
    let Some(first) = after.first() else {
        println!("too few sends for a verdict");
        return;
    };
    let pts: Vec<(f64, f64)> = after.iter().map(|s| (s.0 as f64, s.1 as f64)).collect();
    let kib_per_1000 = slope(&pts) * 1000.0;
    let tail: Vec<u64> = after.iter().rev().take(4).map(|s| s.1).collect();
    let last_rss = tail.iter().sum::<u64>() / tail.len() as u64;
    // Descriptors come and go (the HTTP connection, a title request, a file being written), so a
    // single sample may catch one in flight; a leak keeps them open. Compare the fewest open in the
    // last quarter with the most open in the warm-up window.
    let warm_fds = samples
        .iter()
        .filter(|s| s.0 <= warm.max(sends * 2 / 5))
        .map(|s| s.2)
        .max()
        .unwrap_or(0);
    let last_fds = samples
        .iter()
        .filter(|s| s.0 >= sends * 3 / 4)
        .map(|s| s.2)
        .min()
        .unwrap_or(0);
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let rss_ok = kib_per_1000 < 64.0 && last_rss <= first.1 + 8 * 1024;
    let fds_ok = last_fds <= warm_fds;
    println!(
        "{sends} sends in {:.1} s ({:.2} ms per send); RSS after warm-up (send {}) {} KiB, at the end {} KiB (mean of the last {}), peak {} KiB; slope {:.1} KiB per 1,000 sends; open fds: at most {} in the first 40%, at least {} in the last 25%",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / sends.max(1) as f64,
        first.0,
        first.1,
        last_rss,
        tail.len(),
        peak,
        kib_per_1000,
        warm_fds,
        last_fds
    );
    println!(
        "verdict: RSS {}, file descriptors {}",
        if rss_ok { "no growth" } else { "GROWS" },
        if fds_ok { "no growth" } else { "GROW" }
    );
    if !(rss_ok && fds_ok) {
        std::process::exit(1);
    }
}
