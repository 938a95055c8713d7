//! The fuzz targets (fuzz/src/, driven by libFuzzer through `scripts/fuzz`) as a regression test:
//! every input in `fuzz/corpus/<target>/` (the seeds, and every crash ever found, minimised) runs
//! through the same code with the same invariants, then a few thousand cheap deterministic mutations of
//! them (no coverage guidance; `BB7_FUZZ_MUTATIONS=<n>` per target, default 2000). A failure names
//! the input file, or the seed and mutation to reproduce.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code, unexpected_cfgs)]
mod bb7_fuzz;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read corpus file");
            (p, bytes)
        })
        .collect()
}

/// xorshift64*: the mutations are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// One libFuzzer-like mutation: flip, insert, delete, duplicate a range, or splice in another input.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                const BYTES: &[u8] = b"\n\r\"\\{}[]:,@ \t0-\xFF\x00";
                v.insert(at, BYTES[rng.below(BYTES.len())]);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                let n = 1 + rng.below((v.len() - i).min(16));
                v.drain(i..i + n);
            }
            3 if !v.is_empty() => {
                let i = rng.below(v.len());
                let n = 1 + rng.below((v.len() - i).min(32));
                let piece = v[i..i + n].to_vec();
                v.splice(at..at, piece);
            }
            4 if !other.is_empty() => {
                let i = rng.below(other.len());
                let n = 1 + rng.below((other.len() - i).min(64));
                v.splice(at..at, other[i..i + n].iter().copied());
            }
            _ => v.truncate(at),
        }
    }
    v
}

fn run_target(target: &str, run: fn(&[u8])) {
    let inputs = corpus(target);
    assert!(!inputs.is_empty(), "fuzz/corpus/{target}/ is empty");
    for (path, bytes) in &inputs {
        if catch_unwind(AssertUnwindSafe(|| run(bytes))).is_err() {
            panic!("fuzz target {target} fails on {}", path.display());
        }
    }
    let rounds: usize = std::env::var("BB7_FUZZ_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let seed = 0x5EED_0000_0000_0001u64 ^ target.len() as u64;
    let mut rng = Rng(seed);
    for round in 0..rounds {
        let (_, a) = &inputs[rng.below(inputs.len())];
        let (_, b) = &inputs[rng.below(inputs.len())];
        let m = mutate(&mut rng, a, b);
        if catch_unwind(AssertUnwindSafe(|| run(&m))).is_err() {
            panic!(
                "fuzz target {target} fails on mutation {round} (seed {seed:#x}); input ({} bytes): {:?}",
                m.len(),
                String::from_utf8_lossy(&m)
            );
        }
    }
    eprintln!(
        "{target}: {} corpus inputs and {rounds} mutations passed",
        inputs.len()
    );
}

#[test]
fn codec() {
    run_target("codec", bb7_fuzz::codec::run);
}

#[test]
fn sse() {
    run_target("sse", bb7_fuzz::sse::run);
}

#[test]
fn edit() {
    run_target("edit", bb7_fuzz::edit::run);
}

#[test]
fn chat_json() {
    run_target("chat_json", bb7_fuzz::chat_json::run);
}

#[test]
fn instructions() {
    run_target("instructions", bb7_fuzz::instructions::run);
}
