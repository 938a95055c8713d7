//! The edit corpus (guest-tools/tool-logic/tests/corpus/edits.txt, issue 13, and peers.txt, issue
//! 32) through the real binary: every case is one `bb7 tools call edit_file` in the wasm sandbox,
//! judged on the exact bytes left in the file (or its absence), the refusal printed, and the text
//! the result must contain. The native runner (guest-tools/tool-logic/tests/edit_corpus.rs) reads
//! the same files, so the two cannot drift.

mod common;

#[path = "../guest-tools/tool-logic/tests/corpus/parse.rs"]
mod parse;

use std::fs;

use common::{Home, file_id, stderr};
use parse::{Outcome, judge, parse, table};

const CORPUS: &str = include_str!("../guest-tools/tool-logic/tests/corpus/edits.txt");
const PEERS: &str = include_str!("../guest-tools/tool-logic/tests/corpus/peers.txt");

#[test]
fn corpus_through_bb7_tools_call() {
    let mut cases = parse(CORPUS);
    cases.extend(parse(PEERS));
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let home = Home::new();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for c in &cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.txt");
        let before = c.file_bytes();
        if let Some(b) = &before {
            fs::write(&path, b).expect("write");
        }
        let args = c.args(
            "f.txt",
            &file_id("f.txt", before.as_deref().unwrap_or_default()),
        );
        let extra: &[&str] = if c.mode == "anchored" {
            &["--mode", "anchored"]
        } else {
            &[]
        };
        let o = home.call("edit_file", dir.path(), &args, extra);
        let result = if o.status.success() {
            assert!(
                o.stderr.is_empty(),
                "{}: stderr on success: {}",
                c.name,
                stderr(&o)
            );
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            assert_eq!(o.status.code(), Some(1), "{}: {}", c.name, stderr(&o));
            assert!(o.stdout.is_empty(), "{}: stdout on failure", c.name);
            Err(stderr(&o))
        };
        let after = fs::read(&path).ok();
        let outcome = judge(c, result, after.as_deref());
        if outcome != Outcome::Pass {
            failures.push(format!("{}: {outcome:?}", c.name));
        }
        // the pass is reported by the native runner; here only bytes and refusals count
        let label = c.expect_ok.then(|| "sandboxed".to_string());
        rows.push((c, outcome, label));
    }
    println!(
        "edit corpus through `bb7 tools call edit_file` ({} cases):\n{}",
        cases.len(),
        table(&rows)
    );
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
