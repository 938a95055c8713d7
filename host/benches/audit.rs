//! The audit chain's costs (ECOSYSTEM-PROTOCOL.md §7). Run: `cargo bench -p bb7 --bench audit`.
//! Prints figures with their targets; asserts nothing about timings.
//!
//! 1. Append cost per record: a `tool_call`-sized record (the fields a call leaves: tool,
//!    component sha256, a grant, args/result sha256, outcome, durations) appended through the real
//!    writer (`Chain::append`: lock, head, canonical JSON, sha256, one `write`, unlock) to a chain
//!    in a temporary directory, 20,000 times; min / median / p99 / max of the per-record wall time.
//!    fsync is batched: `fdatasync` at every checkpoint (one per 100 records, which is also
//!    signed: those appends are the slow tail) and at process exit; target ≤ 50 µs median.
//! 2. Verify throughput: that chain (20,000 records and their checkpoints) verified with its
//!    public key (`verify::verify`: parse, canonical JSON, sha256, links, one Ed25519 check per
//!    checkpoint), best of 5, as wall time and as the thread's CPU time (on a machine shared with
//!    builds the wall figure includes waiting for a core); target ≥ 100,000 records/s.

use std::time::Instant;

use bb7::audit::verify;
use bb7::audit::{Actor, Chain, Entry};
use serde_json::json;

const RECORDS: usize = 20_000;

/// This thread's CPU time in seconds (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("audit").join("log.jsonl");
    let chain = Chain::shared(&log);
    let project = dir.path().join("project");
    let mut times = Vec::with_capacity(RECORDS);
    for i in 0..RECORDS {
        let entry = Entry::new("tool_call", &Actor::Model, Some(&project))
            .set("tool", "read_file")
            .set(
                "component_sha256",
                "5f0c6f0e1b8a4a3c9d2e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c",
            )
            .set(
                "grants",
                json!([{"path": project.to_string_lossy(), "access": "read-only"}]),
            )
            .set("network", "none")
            .set("env", "none")
            .set("wit_version", "0.1.0")
            .set("started", "2026-11-25T19:00:00.000Z")
            .set("duration_ms", 1.234 + i as f64 / 1000.0)
            .set("compile_ms", 0.0)
            .set("outcome", "ok")
            .set(
                "args_sha256",
                "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            )
            .set(
                "result_sha256",
                "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
            );
        let t = Instant::now();
        chain.append(entry).expect("append");
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    chain.exit_checkpoint().expect("checkpoint");
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!(
        "append, per record ({RECORDS} tool_call records, fdatasync per checkpoint = per 100): min {:.1} µs, median {:.1} µs, p99 {:.1} µs, max {:.1} µs  (target: median ≤ 50 µs)",
        times[0],
        pct(0.5),
        pct(0.99),
        times[times.len() - 1]
    );

    let size = std::fs::metadata(&log).expect("log").len();
    let public = verify::read_public(&dir.path().join("audit").join("key.pub")).expect("key.pub");
    let mut best = f64::MAX;
    let mut best_cpu = f64::MAX;
    let mut records = 0;
    for _ in 0..5 {
        let f = verify::open(&log).expect("open");
        let t = Instant::now();
        let c = thread_cpu();
        let report = verify::verify(f, Some(&public), None).expect("the chain verifies");
        best_cpu = best_cpu.min(thread_cpu() - c);
        best = best.min(t.elapsed().as_secs_f64());
        records = report.records;
        assert!(report.checkpoints >= (RECORDS / 100) as u64);
    }
    println!(
        "verify: {records} records ({:.1} MiB), best of 5: wall {:.1} ms = {:.0} records/s; CPU {:.1} ms = {:.0} records/s  (target: ≥ 100,000 records/s; on a loaded machine the CPU figure is the one that does not count waiting for a core)",
        size as f64 / (1 << 20) as f64,
        best * 1e3,
        records as f64 / best,
        best_cpu * 1e3,
        records as f64 / best_cpu
    );
}
