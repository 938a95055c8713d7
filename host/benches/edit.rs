//! The edit pipeline on large and pathological inputs: the timings that the tool-logic tests
//! (`guest-tools/tool-logic/src/edit/tests.rs` `large_file_is_linear`, `tools/edit_file.rs`
//! `large_file_edit_is_fast`) check only for their results. Run:
//! `cargo bench -p bb7 --bench edit` (`BB7_EDIT_RUNS=N` for N runs per row instead of 5).
//! Prints min / median / max per row; asserts the results, nothing about timings.

use std::time::{Duration, Instant};

use bb7_tool_logic::edit::{Pass, replace};
use bb7_tool_logic::paths::Root;
use bb7_tool_logic::settings::Settings;

fn time(runs: usize, name: &str, mut f: impl FnMut()) {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    println!(
        "{name:<58} min {:>9.2?}  median {:>9.2?}  max {:>9.2?}",
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
}

fn main() {
    let runs: usize = std::env::var("BB7_EDIT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(5);
    println!("edit pipeline ({runs} runs per row)");

    // A 1 MiB file of near-identical lines (large_file_is_linear).
    let mut text = String::new();
    let mut i: usize = 0;
    while text.len() < 1 << 20 {
        text.push_str(&format!(
            "    let value_{i} = compute(value_{}, {i});\n",
            i.saturating_sub(1)
        ));
        i += 1;
    }
    let target = format!(
        "    let value_{} = compute(value_{}, {});\n",
        i - 3,
        i - 4,
        i - 3
    );
    time(runs, "1 MiB, exact line near the end", || {
        let r = replace(&text, &target, "    // replaced\n", false).expect("found");
        assert_eq!(r.pass, Pass::Exact);
    });
    let sub = format!("value_{}, {}", i - 5, i - 4);
    time(runs, "1 MiB, every pass to the substring one", || {
        let r = replace(&text, &sub, "x", false).expect("found");
        assert_eq!(r.pass, Pass::Substring);
    });
    time(runs, "1 MiB, not found (every pass over the file)", || {
        assert!(replace(&text, "not\nthere\nat all", "x", false).is_err());
    });
    let same = "x\n".repeat(200_000);
    let mut old = "x\n".repeat(500);
    old.push_str("y\n");
    time(runs, "400 KB of one repeated line, 501-line needle", || {
        assert!(replace(&same, &old, "z", false).is_err());
    });
    let aa = "-".repeat(1 << 20);
    let needle = "-".repeat(1000);
    time(runs, "1 MiB of '-', replace_all of 1000 '-'", || {
        let r = replace(&aa, &needle, "b", true).expect("found");
        assert_eq!(r.count, (1 << 20) / 1000);
    });

    // edit_file with two edits on a 1 MiB file (large_file_edit_is_fast), through the tool.
    let mut big = String::new();
    let mut n = 0;
    while big.len() < 1 << 20 {
        big.push_str(&format!("line {n}: some ordinary text here\n"));
        n += 1;
    }
    let settings = Settings::from_pairs([("diff-mode", "search_replace_multi")]).expect("settings");
    let target = format!("line {}: some ordinary text here\n", n / 2);
    time(runs, "edit_file, 2 edits in a 1 MiB file", || {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("big.txt"), &big).expect("write");
        let root = Root::at(dir.path());
        let fid = bb7_tool_logic::file_id::file_id("big.txt", big.as_bytes());
        let args = serde_json::json!({"edits": [
            {"path": "big.txt", "file_id": fid, "old_string": target, "new_string": "changed\n"},
            {"path": "big.txt", "file_id": fid, "old_string": "line 7:", "new_string": "line seven:"},
        ]})
        .to_string();
        bb7_tool_logic::tools::call("edit_file", &root, &settings, &args).expect("edited");
        let out = std::fs::read_to_string(dir.path().join("big.txt")).expect("read");
        assert!(out.contains("\nchanged\n") && out.contains("line seven: some"));
    });
}
