//! Fuzz target `edit`: the `edit_file` tool through its public entry point
//! ([`bb7_tool_logic::tools::call`]), in all three diff modes, against a real directory, exactly as
//! the component and `bb7 tools call` run it.
//!
//! Input: byte 0 picks the mode (search/replace multi, single, anchored) and `replace_all`; the rest
//! is split at `0xFF` bytes (never part of UTF-8 text) into the file's bytes and the edit's strings.
//! Invariants:
//! - nothing panics;
//! - an error leaves the directory exactly as it was (the file's bytes, no other entry): the matcher
//!   never produces output when it reports an error;
//! - a success reports `edits_applied` ≥ 1 and, for each file, the `file_id` of the bytes now on disk;
//!   the file was UTF-8 text before and is after;
//! - an LF-only file edited with LF-only strings stays free of `\r`.

use std::fs;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use bb7_tool_logic::file_id::file_id;
use bb7_tool_logic::{DiffMode, Root, Settings};
use serde_json::json;

const FILE: &str = "f.txt";

fn workdir() -> &'static Mutex<tempfile::TempDir> {
    static DIR: OnceLock<Mutex<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| Mutex::new(super::scratch_dir()))
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read workdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn lines(part: &[u8]) -> Vec<String> {
    let s = String::from_utf8_lossy(part);
    if s.is_empty() {
        return Vec::new();
    }
    s.split('\n').map(str::to_string).collect()
}

pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let parts: Vec<&[u8]> = rest.split(|&b| b == 0xFF).collect();
    let original = parts[0];
    let part = |i: usize| parts.get(i).copied().unwrap_or(b"");
    let text = |i: usize| String::from_utf8_lossy(part(i)).into_owned();
    let id = file_id(FILE, original);
    let replace_all = sel & 0x10 != 0;
    let (mode, args) = match sel % 3 {
        0 => {
            // Up to three edits; the third names a second (missing) path when bit 5 is set.
            let mut edits = Vec::new();
            for k in 0..3 {
                let (o, n) = (1 + 2 * k, 2 + 2 * k);
                if k > 0 && parts.len() <= o {
                    break;
                }
                let path = if k == 2 && sel & 0x20 != 0 {
                    "g.txt"
                } else {
                    FILE
                };
                edits.push(json!({"path": path, "file_id": id, "old_string": text(o),
                    "new_string": text(n), "replace_all": replace_all}));
            }
            (DiffMode::SearchReplaceMulti, json!({ "edits": edits }))
        }
        1 => (
            DiffMode::SearchReplace,
            json!({"path": FILE, "file_id": id, "old_string": text(1), "new_string": text(2),
                "replace_all": replace_all}),
        ),
        _ => {
            // Changes of (start, end, content) triples.
            let mut changes = Vec::new();
            let mut i = 1;
            while i < parts.len() && changes.len() < 4 {
                let mut c = json!({"start": lines(part(i)), "content": lines(part(i + 2))});
                if sel & 0x20 != 0 || !part(i + 1).is_empty() {
                    c["end"] = json!(lines(part(i + 1)));
                }
                changes.push(c);
                i += 3;
            }
            (
                DiffMode::Anchored,
                json!({"path": FILE, "file_id": id, "changes": changes}),
            )
        }
    };
    let settings = Settings {
        diff_mode: mode,
        ..Settings::default()
    };

    let guard = workdir().lock().unwrap_or_else(|p| p.into_inner());
    let dir = guard.path();
    for name in listing(dir) {
        let p = dir.join(&name);
        if p.is_dir() {
            fs::remove_dir_all(&p).expect("clean workdir");
        } else {
            fs::remove_file(&p).expect("clean workdir");
        }
    }
    fs::write(dir.join(FILE), original).expect("write the file");
    let before = listing(dir);

    let result =
        bb7_tool_logic::tools::call("edit_file", &Root::at(dir), &settings, &args.to_string());
    let after = fs::read(dir.join(FILE)).expect("the file is still there");
    match result {
        Err(e) => {
            assert!(!e.message.is_empty(), "an error without a message");
            assert_eq!(
                after, original,
                "the file changed although the edit failed: {}",
                e.message
            );
            assert_eq!(
                listing(dir),
                before,
                "entries appeared although the edit failed"
            );
        }
        Ok(v) => {
            let orig_text = std::str::from_utf8(original).expect("a non-UTF-8 file was edited");
            let new_text = std::str::from_utf8(&after).expect("an edit wrote non-UTF-8 bytes");
            assert!(
                v["edits_applied"].as_u64().is_some_and(|n| n >= 1),
                "no edits applied: {v}"
            );
            let files = v["files"].as_array().expect("files in the result");
            for f in files {
                let path = f["path"].as_str().expect("path");
                let on_disk = fs::read(dir.join(path)).expect("an edited file exists");
                assert_eq!(
                    f["file_id"].as_str(),
                    Some(file_id(path, &on_disk).as_str()),
                    "the reported file_id is not the file's"
                );
            }
            let strings_lf = !args.to_string().contains("\\r");
            if !orig_text.contains('\r') && strings_lf {
                assert!(
                    !new_text.contains('\r'),
                    "a \\r appeared in an LF file: {new_text:?}"
                );
            }
        }
    }
}
