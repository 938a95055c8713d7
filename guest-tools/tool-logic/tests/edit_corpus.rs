//! The edit corpus (tests/corpus/edits.txt and peers.txt) run natively through `tools::edit_file::call`, the same
//! code the sandboxed component runs (tests/edit_corpus.rs at the repository root runs it through
//! `bb7 tools call edit_file`). Prints the per-category table; fails on any wrong write or mismatch.

#[path = "corpus/parse.rs"]
mod parse;

use std::fs;

use bb7_tool_logic::edit;
use bb7_tool_logic::file_id::file_id;
use bb7_tool_logic::settings::DiffMode;
use bb7_tool_logic::tools::edit_file;
use bb7_tool_logic::{Root, Settings};
use parse::{Case, Outcome, judge, parse, table};

const CORPUS: &str = include_str!("corpus/edits.txt");
/// Cases translated from other tools' edit test suites (issue 32).
const PEERS: &str = include_str!("corpus/peers.txt");

/// Every case: ours, then the peers'.
fn all_cases() -> Vec<Case> {
    let mut cases = parse(CORPUS);
    cases.extend(parse(PEERS));
    cases
}

/// The pass that applies the case (search/replace cases that succeed), from the pure pipeline.
fn pass_of(c: &Case) -> Option<String> {
    if c.mode == "anchored" {
        return Some("anchored".into());
    }
    if c.file_raw.is_some() {
        return None;
    }
    // an absent file is edited as an empty one
    edit::replace(&c.file, &c.old, &c.new, c.replace_all)
        .ok()
        .map(|r| r.pass.name().to_string())
}

fn run(c: &Case) -> (Outcome, Option<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let before = c.file_bytes();
    if let Some(b) = &before {
        fs::write(dir.path().join("f.txt"), b).expect("write");
    }
    let settings = Settings {
        diff_mode: if c.mode == "anchored" {
            DiffMode::Anchored
        } else {
            DiffMode::SearchReplaceMulti
        },
        ..Settings::default()
    };
    let id = file_id("f.txt", before.as_deref().unwrap_or_default());
    let args = c.args("f.txt", &id);
    let result = edit_file::call(&Root::at(dir.path()), &settings, &args)
        .map(|v| v.to_string())
        .map_err(|e| e.message);
    let after = fs::read(dir.path().join("f.txt")).ok();
    let mut outcome = judge(c, result, after.as_deref());
    let pass = pass_of(c);
    if outcome == Outcome::Pass && c.expect_ok {
        if let Some(want) = &c.pass {
            if pass.as_deref() != Some(want.as_str()) {
                outcome = Outcome::Mismatch(format!("matched by {pass:?}, expected {want}"));
            }
        }
    }
    (outcome, pass)
}

#[test]
fn corpus_native() {
    let cases = all_cases();
    assert!(
        cases.len() >= 60,
        "the corpus must hold at least 60 cases, has {}",
        cases.len()
    );
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for c in &cases {
        let (o, pass) = run(c);
        if o != Outcome::Pass {
            failures.push(format!("{}: {o:?}", c.name));
        }
        rows.push((c, o, pass));
    }
    println!(
        "edit corpus, native ({} cases):\n{}",
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

#[test]
fn corpus_names_are_unique() {
    let cases = all_cases();
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate case names");
}
