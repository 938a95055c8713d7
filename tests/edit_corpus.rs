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

/// Files of many 16-byte blocks are edited inside the sandbox exactly as the same logic edits them
/// natively. The component scans a file 16 bytes at a time (`edit/scan.rs`: every newline, the
/// ASCII check before UTF-8 validation, the check that an edit changed the file), natively the
/// scans are memchr's and std's: every case puts what those scans look for — a CRLF, a non-ASCII
/// character, invalid UTF-8, the one changed byte of a same-length edit — at the start, inside a
/// block, across a block boundary or in the bytes after the last whole block.
#[test]
fn large_files_are_edited_in_the_sandbox_as_natively() {
    let home = Home::new();
    let body = |lines: usize| -> String {
        (0..lines)
            .map(|i| format!("line {i}: the quick brown fox jumps over the lazy dog\n"))
            .collect()
    };
    let big = body(2000);
    // (name, file bytes, old_string, new_string)
    let mut cases: Vec<(String, Vec<u8>, String, String)> = vec![
        (
            "same length, last line".into(),
            big.clone().into_bytes(),
            "line 1999: the quick".into(),
            "line 1999: THE QUICK".into(),
        ),
        (
            "shorter, middle".into(),
            big.clone().into_bytes(),
            "line 1000: the quick brown fox".into(),
            "line 1000: a fox".into(),
        ),
        (
            "CRLF only on the last line".into(),
            format!("{}tail line\r\n", body(1500)).into_bytes(),
            "line 3: the quick".into(),
            "line 3: THE QUICK".into(),
        ),
        (
            "CRLF only on the first line".into(),
            format!("head line\r\n{big}").into_bytes(),
            "line 1998: the".into(),
            "line 1998: a".into(),
        ),
        (
            "non-ASCII only at the end".into(),
            format!("{big}último: ñandú €").into_bytes(),
            "line 10: the".into(),
            "line 10: a".into(),
        ),
        (
            "non-ASCII in the edit".into(),
            format!("{big}fin\n").into_bytes(),
            "fin".into(),
            "fín — ☃".into(),
        ),
    ];
    // A non-ASCII character and an edited byte at every offset of a block and across the
    // boundary into the next one, and one in the bytes after the last whole 64-byte group.
    let base = body(40);
    for at in (1024..1024 + 34).chain([base.len() - 3]) {
        let mut t = base.clone();
        let pos = (at..).find(|&p| t.is_char_boundary(p)).unwrap_or(at);
        t.insert(pos, 'é');
        cases.push((
            format!("é at {pos}"),
            t.into_bytes(),
            "line 0: the".into(),
            "line 0: THE".into(),
        ));
    }
    // A same-length edit whose one changed byte is at every offset of a 64-byte group and at every
    // byte after the last whole group: the component's vector check that the edit changed the
    // file must see each (a miss would skip the write the tool reports).
    let tail_start = base.len() - base.len() % 64;
    for at in (1024..1024 + 64).chain(tail_start..base.len()) {
        if base.as_bytes()[at] == b'\n' {
            continue;
        }
        let start = base[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = base[at..].find('\n').map_or(base.len(), |i| at + i);
        let line = &base[start..end];
        let mut changed = line.as_bytes().to_vec();
        changed[at - start] = if changed[at - start] == b'#' {
            b'%'
        } else {
            b'#'
        };
        cases.push((
            format!("same length, byte {at} changed"),
            base.clone().into_bytes(),
            line.to_string(),
            String::from_utf8(changed).unwrap(),
        ));
    }
    for (name, bytes, old, new) in cases {
        let (sandboxed, native) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for d in [&sandboxed, &native] {
            fs::write(d.path().join("f.txt"), &bytes).unwrap();
        }
        let args = serde_json::json!({"edits": [{"path": "f.txt",
            "file_id": file_id("f.txt", &bytes), "old_string": old, "new_string": new}]})
        .to_string();
        let o = home.call("edit_file", sandboxed.path(), &args, &[]);
        let want = bb7_tool_logic::tools::edit_file::call(
            &bb7_tool_logic::Root::at(native.path()),
            &bb7_tool_logic::Settings::default(),
            &args,
        )
        .unwrap_or_else(|e| panic!("{name}: native: {}", e.message));
        assert_eq!(common::ok_json(&o), want, "{name}");
        let (got, expected) = (
            fs::read(sandboxed.path().join("f.txt")).unwrap(),
            fs::read(native.path().join("f.txt")).unwrap(),
        );
        assert!(got == expected, "{name}: the files differ");
        assert_ne!(got, bytes, "{name}: nothing was edited");
    }
    // Invalid UTF-8 anywhere (the last byte, or inside a block of an otherwise ASCII file) is
    // refused as natively, and the file left as it was.
    for at in [big.len() - 1, 1030, 17] {
        let mut bytes = big.clone().into_bytes();
        bytes[at] = 0xff;
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.txt"), &bytes).unwrap();
        let args = serde_json::json!({"edits": [{"path": "f.txt",
            "file_id": file_id("f.txt", &bytes), "old_string": "line 5: the", "new_string": "x"}]})
        .to_string();
        let err = common::tool_error(&home.call("edit_file", dir.path(), &args, &[]), "not-text");
        assert!(err.contains("not UTF-8"), "{at}: {err}");
        assert!(fs::read(dir.path().join("f.txt")).unwrap() == bytes);
    }
}
