//! Per-hunk review, checkpoints and rollback (AGENT-PROTOCOL.md §2–3) through the real `bb7`
//! binary: `get_hunks`, `apply_hunks`, `reject_hunks`, `checkpoint_list`, `checkpoint_diff3`,
//! `checkpoint_rollback`, the checkpoints `apply_file` / `apply_file_as` record, the stale-context
//! warning of `send`, and `kill -9` during `apply_hunks` and rollbacks (the kill point is random; a
//! seed is printed, replay a failure with `BB7_TEST_SEED=<seed>`).

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::thread;
use std::time::Duration;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::*;
use common::seed::Rng;
use serde_json::{Value, json};

fn start_chat() -> (Env, Bb7, String) {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let r = s.ok(json!({"action": "chat_new", "name": "review"}));
    let id = r["id"].as_str().expect("chat id").to_string();
    (env, s, id)
}

fn hash(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

fn write_bytes(path: &std::path::Path, bytes: &[u8]) {
    if let Some(p) = path.parent() {
        fs::create_dir_all(p).unwrap();
    }
    fs::write(path, bytes).unwrap();
}

fn hunks(s: &mut Bb7, path: &str) -> (String, Vec<Value>) {
    let r = s.ok(json!({"action": "get_hunks", "path": path}));
    assert_eq!(r["type"], "hunks", "{r}");
    assert_eq!(r["path"], path, "{r}");
    (
        r["base_hash"].as_str().expect("base_hash").to_string(),
        list(&r["hunks"]),
    )
}

fn ids(hs: &[Value], pick: &[usize]) -> Vec<String> {
    pick.iter()
        .map(|&i| hs[i]["id"].as_str().unwrap().to_string())
        .collect()
}

fn checkpoints(s: &mut Bb7) -> Vec<Value> {
    let r = s.ok(json!({"action": "checkpoint_list"}));
    assert_eq!(r["type"], "checkpoints", "{r}");
    list(&r["checkpoints"])
}

fn local(env: &Env, rel: &str) -> Vec<u8> {
    fs::read(env.proj().join(rel)).unwrap()
}

/// 40 lines; lines 3, 12, 25 and 36 (1-based) differ between the two versions.
fn four_change_pair() -> (String, String) {
    let old: String = (1..=40).map(|i| format!("line {i}\n")).collect();
    let new: String = (1..=40)
        .map(|i| match i {
            3 => "line three\n".to_string(),
            12 => "line 12\nline 12b\n".to_string(),
            25 => String::new(),
            36 => "LINE 36\n".to_string(),
            _ => format!("line {i}\n"),
        })
        .collect();
    (old, new)
}

#[test]
fn accept_some_hunks_and_reject_others() {
    let (env, mut s, id) = start_chat();
    let (old, new) = four_change_pair();
    env.write_local("m.txt", &old);
    s.ok(json!({"action": "context_add", "path": "m.txt", "content": old}));
    env.write_output(&id, "m.txt", &new);

    let (base, hs) = hunks(&mut s, "m.txt");
    assert_eq!(base, hash(old.as_bytes()));
    assert_eq!(hs.len(), 4, "{hs:?}");
    assert_eq!(
        (hs[0]["old_start"].as_u64(), hs[0]["old_lines"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(hs[0]["patch"], "@@ -3,1 +3,1 @@\n-line 3\n+line three\n");
    assert_eq!(hs[1]["patch"], "@@ -12,0 +13,1 @@\n+line 12b\n");
    assert_eq!(hs[2]["patch"], "@@ -25,1 +25,0 @@\n-line 25\n");
    assert!(hs.iter().all(|h| h.get("oversized").is_none()), "{hs:?}");
    // Same content, same ids.
    assert_eq!(hunks(&mut s, "m.txt").1, hs);

    // Accept the first and the third.
    let r = s.ok(json!({"action": "apply_hunks", "path": "m.txt",
        "hunk_ids": ids(&hs, &[0, 2]), "base_hash": base}));
    assert_eq!(r["remaining"], 2, "{r}");
    let cp1 = r["checkpoint_id"]
        .as_str()
        .expect("checkpoint id")
        .to_string();
    let want: String = old
        .replace("line 3\n", "line three\n")
        .replace("line 25\n", "");
    assert_eq!(String::from_utf8(local(&env, "m.txt")).unwrap(), want);
    assert_eq!(r["content"], want);
    // The output keeps the rest; the snapshot follows the local file.
    assert_eq!(
        fs::read_to_string(env.output_path(&id, "m.txt")).unwrap(),
        new
    );
    assert_eq!(
        fs::read_to_string(env.chat_dir(&id).join("context/m.txt")).unwrap(),
        want
    );
    event(&env.chat_json(&id), "UserPartialApplyFile", "m.txt");

    // The hunks left keep their ids.
    let (base2, left) = hunks(&mut s, "m.txt");
    assert_eq!(base2, hash(want.as_bytes()));
    assert_eq!(ids(&left, &[0, 1]), ids(&hs, &[1, 3]));

    // Reject one: the model's version loses it.
    let r = s.ok(json!({"action": "reject_hunks", "path": "m.txt", "hunk_ids": ids(&hs, &[1])}));
    assert_eq!(r["remaining"], 1, "{r}");
    let out_now = fs::read_to_string(env.output_path(&id, "m.txt")).unwrap();
    assert!(!out_now.contains("line 12b"), "{out_now}");
    assert!(out_now.contains("LINE 36"));
    let (_, left) = hunks(&mut s, "m.txt");
    assert_eq!(ids(&left, &[0]), ids(&hs, &[3]));
    // An unknown id is an error and changes nothing.
    s.err_has(
        json!({"action": "reject_hunks", "path": "m.txt", "hunk_ids": ["hnope"]}),
        "Unknown hunk",
    );

    // Accept the last: everything is taken, the output goes, as apply_file does.
    let r = s.ok(json!({"action": "apply_hunks", "path": "m.txt",
        "hunk_ids": ids(&hs, &[3]), "base_hash": base2}));
    assert_eq!(r["remaining"], 0, "{r}");
    assert!(!env.output_path(&id, "m.txt").exists());
    let fin = want.replace("line 36\n", "LINE 36\n");
    assert_eq!(String::from_utf8(local(&env, "m.txt")).unwrap(), fin);
    event(&env.chat_json(&id), "UserApplyFile", "m.txt");
    let st = list(&s.ok(json!({"action": "get_file_statuses"}))["files"]);
    assert_eq!(st[0]["status"], "", "{st:?}");
    s.err_has(json!({"action": "get_hunks", "path": "m.txt"}), "No output");

    // Two checkpoints, newest first, with the files' hashes.
    let cps = checkpoints(&mut s);
    assert_eq!(cps.len(), 2, "{cps:?}");
    assert_eq!(cps[1]["id"], cp1.as_str());
    assert_eq!(cps[0]["kind"], "apply_hunks");
    assert_eq!(cps[0]["chat_id"], id.as_str());
    assert_eq!(
        cps[0]["files"],
        json!([{"path": "m.txt", "before_hash": hash(want.as_bytes()), "after_hash": hash(fin.as_bytes())}])
    );
    assert_rfc3339(cps[0]["created"].as_str().unwrap());
    s.shutdown();

    // Checkpoints survive a restart.
    let mut s = env.start();
    assert_eq!(checkpoints(&mut s).len(), 2);
    let r = s.ok(json!({"action": "checkpoint_list", "chat_id": "someone-else"}));
    assert_eq!(list(&r["checkpoints"]).len(), 0);
    s.shutdown();
}

#[test]
fn apply_hunks_after_a_local_change_is_a_conflict_and_writes_nothing() {
    let (env, mut s, id) = start_chat();
    let (old, new) = four_change_pair();
    env.write_local("m.txt", &old);
    env.write_output(&id, "m.txt", &new);
    let (base, hs) = hunks(&mut s, "m.txt");
    let edited = format!("{old}user line\n");
    env.write_local("m.txt", &edited);
    let msg = s.err(json!({"action": "apply_hunks", "path": "m.txt",
        "hunk_ids": ids(&hs, &[0]), "base_hash": base}));
    assert!(msg.starts_with("Conflict:"), "{msg}");
    assert_eq!(local(&env, "m.txt"), edited.as_bytes());
    assert_eq!(checkpoints(&mut s).len(), 0);
    assert_eq!(
        fs::read_to_string(env.output_path(&id, "m.txt")).unwrap(),
        new
    );
    // Unknown ids and bad fields are errors too, with nothing written.
    let (base, _) = hunks(&mut s, "m.txt");
    s.err_has(
        json!({"action": "apply_hunks", "path": "m.txt", "hunk_ids": ["h0"], "base_hash": base}),
        "Unknown hunk: h0",
    );
    s.err_has(
        json!({"action": "apply_hunks", "path": "m.txt", "hunk_ids": "h0", "base_hash": base}),
        "Invalid field: hunk_ids",
    );
    s.err_has(
        json!({"action": "apply_hunks", "path": "m.txt", "hunk_ids": []}),
        "Missing required field: base_hash",
    );
    assert_eq!(local(&env, "m.txt"), edited.as_bytes());
    s.shutdown();
}

/// Issue 23 item 1: the file is edited elsewhere during a review. The refused apply is never
/// followed by one that undoes that edit: `get_hunks` carries the output onto the edited file (its
/// hunks are the model's changes only), and `apply_hunks` refuses while the file differs from the
/// output's base, whatever `base_hash` a client sends.
#[test]
fn an_edit_made_elsewhere_during_review_is_never_undone() {
    let (env, mut s, id) = start_chat();
    let (old, new) = four_change_pair();
    env.write_local("m.txt", &old);
    s.ok(json!({"action": "context_add", "path": "m.txt", "content": old}));
    env.write_output(&id, "m.txt", &new);
    let (base, hs) = hunks(&mut s, "m.txt");
    assert_eq!(hs.len(), 4, "{hs:?}");
    let r = s.ok(json!({"action": "get_hunks", "path": "m.txt"}));
    assert!(r.get("rebased").is_none(), "nothing to carry yet: {r}");

    // Another line is changed from a shell; the stale apply is refused.
    let edited = old.replace("line 20\n", "line 20, edited outside\n");
    env.write_local("m.txt", &edited);
    let msg = s.err(json!({"action": "apply_hunks", "path": "m.txt",
        "hunk_ids": ids(&hs, &[0, 1, 2, 3]), "base_hash": base}));
    assert!(msg.starts_with("Conflict:"), "{msg}");
    assert_eq!(local(&env, "m.txt"), edited.as_bytes());

    // The client gets the hunks again and accepts all of them: the edit stays.
    let r = s.ok(json!({"action": "get_hunks", "path": "m.txt"}));
    assert_eq!(r["rebased"], true, "{r}");
    let (base2, hs2) = (
        r["base_hash"].as_str().unwrap().to_string(),
        list(&r["hunks"]),
    );
    assert_eq!(base2, hash(edited.as_bytes()));
    assert_eq!(hs2.len(), 4, "only the model's changes: {hs2:?}");
    assert!(
        hs2.iter()
            .all(|h| !h["patch"].as_str().unwrap().contains("line 20")),
        "{hs2:?}"
    );
    // The snapshot is now the edited file (the output's new base).
    assert_eq!(
        fs::read_to_string(env.chat_dir(&id).join("context/m.txt")).unwrap(),
        edited
    );
    // A neighbouring hunk alone first, then the rest.
    let r = s.ok(json!({"action": "apply_hunks", "path": "m.txt",
        "hunk_ids": ids(&hs2, &[1]), "base_hash": base2}));
    assert_eq!(r["remaining"], 3, "{r}");
    assert!(
        String::from_utf8(local(&env, "m.txt"))
            .unwrap()
            .contains("line 20, edited outside\n")
    );
    let (base3, hs3) = hunks(&mut s, "m.txt");
    s.ok(json!({"action": "apply_hunks", "path": "m.txt",
        "hunk_ids": ids(&hs3, &[0, 1, 2]), "base_hash": base3}));
    let want = new.replace("line 20\n", "line 20, edited outside\n");
    assert_eq!(String::from_utf8(local(&env, "m.txt")).unwrap(), want);
    assert!(!env.output_path(&id, "m.txt").exists());

    // A change of the model the file already has (made the same way since) is no clash.
    let (old, new) = four_change_pair();
    env.write_local("o.txt", &old);
    s.ok(json!({"action": "context_add", "path": "o.txt", "content": old}));
    env.write_output(&id, "o.txt", &new);
    let by_hand = old
        .replace("line 3\n", "line three\n")
        .replace("line 20\n", "line 20 (mine)\n");
    env.write_local("o.txt", &by_hand);
    let r = s.ok(json!({"action": "get_hunks", "path": "o.txt"}));
    assert_eq!(r["rebased"], true, "{r}");
    let left = list(&r["hunks"]);
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(
        left.iter().all(|h| {
            let p = h["patch"].as_str().unwrap();
            !p.contains("line 20") && !p.contains("line three")
        }),
        "{left:?}"
    );

    // Whatever base_hash a client sends, hunks not carried onto an edit are refused.
    let (old, new) = four_change_pair();
    env.write_local("n.txt", &old);
    s.ok(json!({"action": "context_add", "path": "n.txt", "content": old}));
    env.write_output(&id, "n.txt", &new);
    let (_, hs) = hunks(&mut s, "n.txt");
    let edited = old.replace("line 30\n", "line 30 (mine)\n");
    env.write_local("n.txt", &edited);
    let msg = s.err(json!({"action": "apply_hunks", "path": "n.txt",
        "hunk_ids": ids(&hs, &[0]), "base_hash": hash(edited.as_bytes())}));
    assert!(msg.starts_with("Conflict:"), "{msg}");
    assert!(
        msg.contains("changed since the model's output was made"),
        "{msg}"
    );
    assert_eq!(local(&env, "n.txt"), edited.as_bytes());
    assert_eq!(
        fs::read_to_string(env.output_path(&id, "n.txt")).unwrap(),
        new
    );

    // An edit on a line the model changes too cannot be carried: refused, nothing written.
    let clash = edited.replace("line 3\n", "line 3 (mine)\n");
    env.write_local("n.txt", &clash);
    let msg = s.err(json!({"action": "get_hunks", "path": "n.txt"}));
    assert!(msg.starts_with("Conflict:"), "{msg}");
    assert!(msg.contains("where the output changes it too"), "{msg}");
    assert_eq!(local(&env, "n.txt"), clash.as_bytes());
    assert_eq!(
        fs::read_to_string(env.output_path(&id, "n.txt")).unwrap(),
        new
    );
    assert_eq!(
        fs::read_to_string(env.chat_dir(&id).join("context/n.txt")).unwrap(),
        old
    );
    s.shutdown();
}

#[test]
fn crlf_and_no_final_newline_round_trip_byte_exact() {
    let (env, mut s, id) = start_chat();
    let old = b"alpha\r\nbeta\r\ngamma\r\ndelta\r\nomega";
    let new = b"alpha\nBETA\ngamma\ndelta\nomega\nextra\n";
    write_bytes(&env.proj().join("w.txt"), old);
    write_bytes(&env.output_path(&id, "w.txt"), new);
    let (base, hs) = hunks(&mut s, "w.txt");
    assert_eq!(hs.len(), 2, "{hs:?}");
    // Nothing chosen: nothing written, no checkpoint.
    let r =
        s.ok(json!({"action": "apply_hunks", "path": "w.txt", "hunk_ids": [], "base_hash": base}));
    assert_eq!(r["checkpoint_id"], Value::Null);
    assert_eq!(local(&env, "w.txt"), old);
    // The changed line takes the file's CRLF.
    s.ok(json!({"action": "apply_hunks", "path": "w.txt", "hunk_ids": ids(&hs, &[0]), "base_hash": base}));
    assert_eq!(
        local(&env, "w.txt"),
        b"alpha\r\nBETA\r\ngamma\r\ndelta\r\nomega"
    );
    // The appended line too, and the file still has no final newline.
    let (base, hs2) = hunks(&mut s, "w.txt");
    s.ok(json!({"action": "apply_hunks", "path": "w.txt", "hunk_ids": ids(&hs2, &[0]), "base_hash": base}));
    assert_eq!(
        local(&env, "w.txt"),
        b"alpha\r\nBETA\r\ngamma\r\ndelta\r\nomega\r\nextra"
    );
    // A hard rollback restores the exact bytes.
    let cps = checkpoints(&mut s);
    let oldest = cps.last().unwrap()["id"].as_str().unwrap().to_string();
    s.ok(json!({"action": "checkpoint_rollback", "checkpoint_id": oldest, "mode": "hard_all"}));
    assert_eq!(local(&env, "w.txt"), old);

    // Rejecting keeps the output's own line endings and final newline.
    write_bytes(&env.proj().join("r.txt"), b"one\r\n2\r\nthree\r\nfour\r\n");
    write_bytes(&env.output_path(&id, "r.txt"), b"ONE\n2\nthree\nFOUR");
    let (_, hs) = hunks(&mut s, "r.txt");
    assert_eq!(hs.len(), 2, "{hs:?}");
    s.ok(json!({"action": "reject_hunks", "path": "r.txt", "hunk_ids": ids(&hs, &[0])}));
    assert_eq!(
        fs::read(env.output_path(&id, "r.txt")).unwrap(),
        b"one\n2\nthree\nFOUR"
    );
    assert_eq!(local(&env, "r.txt"), b"one\r\n2\r\nthree\r\nfour\r\n");
    s.shutdown();
}

#[test]
fn big_changes_are_split_at_blank_lines_or_marked_oversized() {
    let (env, mut s, id) = start_chat();
    env.write_local("big.txt", "top\n");
    let paras: String = (0..20)
        .map(|p| (0..9).map(|i| format!("p{p} l{i}\n")).collect::<String>() + "\n")
        .collect();
    env.write_output(&id, "big.txt", &format!("top\n{paras}"));
    let (_, hs) = hunks(&mut s, "big.txt");
    assert!(hs.len() >= 3, "{}", hs.len());
    for h in &hs {
        let n = h["old_lines"].as_u64().unwrap() + h["new_lines"].as_u64().unwrap();
        assert!(
            n <= 80 && h["patch"].as_str().unwrap().len() <= 8192 + 64,
            "{h}"
        );
        assert!(h.get("oversized").is_none(), "{h}");
    }
    // Applying them all gives the output.
    let (base, _) = hunks(&mut s, "big.txt");
    let all: Vec<usize> = (0..hs.len()).collect();
    s.ok(json!({"action": "apply_hunks", "path": "big.txt", "hunk_ids": ids(&hs, &all), "base_hash": base}));
    assert_eq!(
        String::from_utf8(local(&env, "big.txt")).unwrap(),
        format!("top\n{paras}")
    );

    // No blank line to cut at: one hunk, oversized.
    let solid: String = (0..120).map(|i| format!("solid {i}\n")).collect();
    env.write_local("solid.txt", "a\n");
    env.write_output(&id, "solid.txt", &format!("a\n{solid}"));
    let (_, hs) = hunks(&mut s, "solid.txt");
    assert_eq!(hs.len(), 1);
    assert_eq!(hs[0]["oversized"], true, "{}", hs[0]);
    assert_eq!(hs[0]["new_lines"], 120);
    s.shutdown();
}

#[test]
fn binary_and_invalid_utf8_files_are_refused_clearly() {
    let (env, mut s, id) = start_chat();
    write_bytes(&env.proj().join("bin.dat"), b"\x00\x01\x02");
    env.write_output(&id, "bin.dat", "text\n");
    s.err_has(json!({"action": "get_hunks", "path": "bin.dat"}), "binary");
    env.write_local("lat.txt", "ok\n");
    write_bytes(&env.output_path(&id, "lat.txt"), b"caf\xe9\n");
    s.err_has(
        json!({"action": "get_hunks", "path": "lat.txt"}),
        "not valid UTF-8",
    );
    s.err_has(
        json!({"action": "apply_hunks", "path": "lat.txt", "hunk_ids": [], "base_hash": hash(b"ok\n")}),
        "not valid UTF-8",
    );
    assert_eq!(local(&env, "lat.txt"), b"ok\n");
    s.ok(json!({"action": "ping"}));
    s.shutdown();
}

#[test]
fn scoped_rollback_keeps_unrelated_edits_and_reports_overlaps() {
    let (env, mut s, id) = start_chat();
    let (old, new) = four_change_pair();
    env.write_local("m.txt", &old);
    s.ok(json!({"action": "context_add", "path": "m.txt", "content": old}));
    env.write_output(&id, "m.txt", &new);
    let r = s.ok(json!({"action": "apply_file", "path": "m.txt"}));
    let cp = r["checkpoint_id"]
        .as_str()
        .expect("apply_file records a checkpoint")
        .to_string();
    assert_eq!(local(&env, "m.txt"), new.as_bytes());

    let d = s.ok(json!({"action": "checkpoint_diff3", "checkpoint_id": cp, "path": "m.txt"}));
    assert_eq!(d["type"], "diff3");
    assert_eq!(d["base"], old);
    assert_eq!(d["proposed"], new);
    assert_eq!(d["current"], new);
    let hs = list(&d["hunks"]);
    assert_eq!(hs.len(), 4);

    // Later user edits: an unrelated line (line 20) and one inside the LINE 36 hunk.
    let edited = new
        .replace("line 20\n", "line 20 (user)\n")
        .replace("LINE 36\n", "LINE 36 (user)\n");
    env.write_local("m.txt", &edited);
    let d = s.ok(json!({"action": "checkpoint_diff3", "checkpoint_id": cp, "path": "m.txt"}));
    assert_eq!(d["current"], edited);

    let r = s.ok(json!({"action": "checkpoint_rollback", "checkpoint_id": cp,
        "mode": "scoped_selected", "hunk_ids": ids(&hs, &[0, 3])}));
    assert_eq!(r["type"], "rollback", "{r}");
    assert_eq!(r["files"], json!(["m.txt"]));
    let conflicts = list(&r["conflicts"]);
    assert_eq!(conflicts.len(), 1, "{r}");
    assert_eq!(conflicts[0]["path"], "m.txt");
    assert_eq!(conflicts[0]["hunk_id"], hs[3]["id"]);
    let want = edited.replace("line three\n", "line 3\n");
    assert_eq!(String::from_utf8(local(&env, "m.txt")).unwrap(), want);
    let rb = r["checkpoint_id"]
        .as_str()
        .expect("a rollback is a checkpoint")
        .to_string();
    let cps = checkpoints(&mut s);
    assert_eq!(cps[0]["id"], rb.as_str());
    assert_eq!(cps[0]["kind"], "rollback");
    assert_eq!(cps[0]["rollback_of"], cp.as_str());
    // Unknown hunk ids and modes are errors; scoped needs ids.
    s.err_has(
        json!({"action": "checkpoint_rollback", "checkpoint_id": cp, "mode": "scoped_selected", "hunk_ids": ["hx"]}),
        "Unknown hunk",
    );
    s.err_has(
        json!({"action": "checkpoint_rollback", "checkpoint_id": cp, "mode": "scoped_selected"}),
        "hunk_ids",
    );
    s.err_has(
        json!({"action": "checkpoint_rollback", "checkpoint_id": cp, "mode": "soft"}),
        "Invalid field: mode",
    );
    s.err_has(
        json!({"action": "checkpoint_rollback", "checkpoint_id": "../../x", "mode": "hard_all"}),
        "Invalid checkpoint id",
    );
    s.err_has(
        json!({"action": "checkpoint_diff3", "checkpoint_id": "20990101-000000-000000-0000", "path": "m.txt"}),
        "Unknown checkpoint",
    );
    assert_eq!(String::from_utf8(local(&env, "m.txt")).unwrap(), want);
    s.shutdown();
}

#[test]
fn hard_rollback_and_rollback_of_a_rollback() {
    let (env, mut s, id) = start_chat();
    env.write_local("a.txt", "a1\n");
    s.ok(json!({"action": "context_add", "path": "a.txt", "content": "a1\n"}));
    env.write_output(&id, "a.txt", "a2\n");
    env.write_output(&id, "new.txt", "created\n");
    let cp_a = s.ok(json!({"action": "apply_file", "path": "a.txt"}))["checkpoint_id"]
        .as_str()
        .unwrap()
        .to_string();
    let cp_new =
        s.ok(json!({"action": "apply_file_as", "path": "new.txt", "destination": "sub/made.txt"}))
            ["checkpoint_id"]
            .as_str()
            .unwrap()
            .to_string();
    assert_eq!(local(&env, "sub/made.txt"), b"created\n");
    let cps = checkpoints(&mut s);
    assert_eq!(cps[0]["kind"], "apply_file_as");
    assert_eq!(cps[0]["files"][0]["before_hash"], Value::Null);

    // Later user edit, then a hard rollback: the file is as before the apply.
    env.write_local("a.txt", "a2 + user\n");
    let r =
        s.ok(json!({"action": "checkpoint_rollback", "checkpoint_id": cp_a, "mode": "hard_all"}));
    assert_eq!(r["files"], json!(["a.txt"]));
    assert_eq!(list(&r["conflicts"]).len(), 0);
    assert_eq!(local(&env, "a.txt"), b"a1\n");
    let rb = r["checkpoint_id"].as_str().unwrap().to_string();
    // Undoing the rollback brings the user's edit back.
    let r = s.ok(json!({"action": "checkpoint_rollback", "checkpoint_id": rb, "mode": "hard_all"}));
    assert_eq!(local(&env, "a.txt"), b"a2 + user\n");
    assert_eq!(checkpoints(&mut s)[0]["rollback_of"], rb.as_str());
    let d = s.ok(
        json!({"action": "checkpoint_diff3", "checkpoint_id": r["checkpoint_id"], "path": "a.txt"}),
    );
    assert_eq!(d["base"], "a1\n");
    assert_eq!(d["proposed"], "a2 + user\n");
    // Rolling back a file the apply created removes it; a rollback with nothing to do writes nothing.
    s.ok(json!({"action": "checkpoint_rollback", "checkpoint_id": cp_new, "mode": "hard_all"}));
    assert!(!env.proj().join("sub/made.txt").exists());
    let r =
        s.ok(json!({"action": "checkpoint_rollback", "checkpoint_id": cp_new, "mode": "hard_all"}));
    assert_eq!(r["checkpoint_id"], Value::Null);
    assert_eq!(r["files"], json!([]));
    s.shutdown();
}

#[test]
fn paths_through_symlinks_are_refused() {
    let (env, mut s, id) = start_chat();
    fs::write(env.outside().join("t.txt"), "outside\n").unwrap();
    symlink(env.outside(), env.proj().join("linkdir")).unwrap();
    symlink(env.outside().join("t.txt"), env.proj().join("link.txt")).unwrap();
    let before = env.outside_state();
    for path in ["linkdir/t.txt", "link.txt"] {
        env.write_output(&id, path, "changed\n");
        s.err_has(
            json!({"action": "get_hunks", "path": path}),
            "symbolic link",
        );
        s.err_has(
            json!({"action": "apply_hunks", "path": path, "hunk_ids": [], "base_hash": hash(b"outside\n")}),
            "symbolic link",
        );
        s.err(json!({"action": "apply_file", "path": path}));
    }
    assert_same_tree(&before, &env.outside_state());
    assert_eq!(
        fs::read_to_string(env.outside().join("t.txt")).unwrap(),
        "outside\n"
    );
    // A checkpoint whose file became a link since is not rolled back through it.
    env.write_local("f.txt", "one\n");
    env.write_output(&id, "f.txt", "two\n");
    let cp = s.ok(json!({"action": "apply_file", "path": "f.txt"}))["checkpoint_id"].clone();
    fs::remove_file(env.proj().join("f.txt")).unwrap();
    symlink(env.outside().join("t.txt"), env.proj().join("f.txt")).unwrap();
    s.err_has(
        json!({"action": "checkpoint_rollback", "checkpoint_id": cp, "mode": "hard_all"}),
        "symbolic link",
    );
    assert_eq!(
        fs::read_to_string(env.outside().join("t.txt")).unwrap(),
        "outside\n"
    );
    // A planted .bb7/checkpoints link is refused too.
    fs::remove_dir_all(env.bb7().join("checkpoints")).unwrap();
    symlink(env.outside(), env.bb7().join("checkpoints")).unwrap();
    s.err(json!({"action": "checkpoint_list"}));
    env.write_local("g.txt", "g\n");
    env.write_output(&id, "g.txt", "g2\n");
    s.err(json!({"action": "apply_file", "path": "g.txt"}));
    assert_eq!(local(&env, "g.txt"), b"g\n");
    assert_eq!(fs::read_dir(env.outside()).unwrap().count(), 1);
    s.shutdown();
}

#[test]
fn send_warns_about_context_files_changed_since_their_snapshot() {
    let server = MockServer::start(Script::new(vec![Reply::text(["ok"])]));
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url(), "title_model": "mock/title"})
            .to_string(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "chat_new", "name": "stale"}));
    for f in ["same.txt", "changed.txt", "gone.txt"] {
        env.write_local(f, "v1\n");
        s.ok(json!({"action": "context_add", "path": f, "content": "v1\n"}));
    }
    env.write_local("changed.txt", "v2\n");
    fs::remove_file(env.proj().join("gone.txt")).unwrap();
    s.send(&json!({"action": "send", "content": "hi", "model": "mock/model", "request_id": "s1"}));
    let mut warning = None;
    loop {
        let v = s.recv_where("a send event", |v| v["request_id"] == "s1");
        match v["type"].as_str() {
            Some("warning") => warning = Some(v),
            Some("done" | "error" | "diff_error") => {
                assert_eq!(v["type"], "done", "the send proceeds: {v}");
                break;
            }
            _ => {}
        }
    }
    let w = warning.expect("a stale_context warning");
    assert_eq!(w["kind"], "stale_context");
    // A file that is not on disk is not listed (context may come from an unsaved buffer).
    assert_eq!(w["files"], json!(["changed.txt"]));
    s.shutdown_noisy();
}

// ---------------------------------------------------------------------------------------------
// kill -9
// ---------------------------------------------------------------------------------------------

/// After a kill: every checkpoint's contents match its hashes (diff3 checks them on read), no
/// record is left pending, and the newest checkpoint of the file names its current content.
fn check_records(env: &Env, s: &mut Bb7, path: &str) -> Vec<Value> {
    let cps = checkpoints(s);
    for c in &cps {
        for f in list(&c["files"]) {
            s.ok(
                json!({"action": "checkpoint_diff3", "checkpoint_id": c["id"], "path": f["path"]}),
            );
        }
        let rec = read_json(
            &env.bb7()
                .join("checkpoints")
                .join(c["id"].as_str().unwrap())
                .join("checkpoint.json"),
        );
        assert_eq!(rec["state"], "done", "{rec}");
    }
    if let Some(c) = cps.first() {
        let cur = fs::read(env.proj().join(path)).unwrap();
        assert_eq!(
            c["files"][0]["after_hash"],
            hash(&cur),
            "newest checkpoint vs the file"
        );
    }
    cps
}

#[test]
fn kill9_during_apply_hunks_and_rollback_never_tears_files_or_records() {
    let mut rng = Rng::from_env("review kill -9");
    let (env, mut s, id) = start_chat();
    // About 0.6 MiB, 80 changed regions.
    let old: String = (0..16_000)
        .map(|i| format!("line {i:06} of the big file\n"))
        .collect();
    let new: String = (0..16_000)
        .map(|i| {
            if i % 200 == 7 {
                format!("changed {i:06} by the model\n")
            } else {
                format!("line {i:06} of the big file\n")
            }
        })
        .collect();
    env.write_local("big.txt", &old);
    s.ok(json!({"action": "context_add", "path": "big.txt", "content": old}));
    env.write_output(&id, "big.txt", &new);
    // How long an apply and a rollback take here: the kills land anywhere within that.
    let (base, hs) = hunks(&mut s, "big.txt");
    let t = std::time::Instant::now();
    let r = s.ok(json!({"action": "apply_hunks", "path": "big.txt", "hunk_ids": ids(&hs, &[0]), "base_hash": base}));
    let apply_time = t.elapsed();
    let t = std::time::Instant::now();
    s.ok(json!({"action": "checkpoint_rollback", "checkpoint_id": r["checkpoint_id"], "mode": "hard_all"}));
    let span = apply_time.max(t.elapsed()).as_micros() as u64 + 500;
    eprintln!("apply {apply_time:?}, kills within {span} µs of the request");
    s.shutdown();

    let rounds = std::env::var("BB7_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let (mut landed, mut not_landed, mut mid) = (0, 0, 0);
    // The kills must land where intended: some before the write, some after it, and some inside
    // an apply (a record left pending). Random kill points may miss one kind in `rounds`
    // rounds; up to four times as many are run until each kind was seen, then it is asserted.
    let mut round = 0;
    while round < rounds || ((landed == 0 || not_landed == 0 || mid == 0) && round < rounds * 4) {
        let mut s = env.start();
        s.ok(json!({"action": "chat_select", "id": id}));
        let cps_before = check_records(&env, &mut s, "big.txt").len();
        let pre = fs::read(env.proj().join("big.txt")).unwrap();
        let (base, hs) = hunks(&mut s, "big.txt");
        let rollback = hs.len() <= 4 || round % 3 == 2;
        let mut chosen = Vec::new();
        let req = if rollback && cps_before > 0 {
            let cps = checkpoints(&mut s);
            let target = cps[rng.below(cps.len().min(3) as u64) as usize]["id"].clone();
            json!({"action": "checkpoint_rollback", "checkpoint_id": target, "mode": "hard_all"})
        } else {
            let n = 1 + rng.below(3) as usize;
            chosen = (0..n)
                .map(|_| rng.below(hs.len() as u64 - 1) as usize)
                .collect();
            chosen.sort();
            chosen.dedup();
            json!({"action": "apply_hunks", "path": "big.txt", "hunk_ids": ids(&hs, &chosen), "base_hash": base})
        };
        let is_rollback = req["action"] == "checkpoint_rollback";
        s.send(&req);
        thread::sleep(Duration::from_micros(rng.below(span)));
        s.kill9();
        drop(s);
        // A record still pending: this kill landed inside an apply (recovered on the next read).
        let pending = fs::read_dir(env.bb7().join("checkpoints"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        fs::read(e.path().join("checkpoint.json"))
                            .ok()
                            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                            .is_some_and(|v| v["state"] == "pending")
                    })
                    .count()
            })
            .unwrap_or(0);
        mid += pending;

        let mut s = env.start();
        let cps = check_records(&env, &mut s, "big.txt");
        let now = fs::read(env.proj().join("big.txt")).unwrap();
        if now == pre {
            not_landed += 1;
            assert_eq!(
                cps.len(),
                cps_before,
                "nothing written, no checkpoint: round {round}"
            );
        } else {
            landed += 1;
            assert_eq!(cps.len(), cps_before + 1, "round {round}");
            assert_eq!(cps[0]["files"][0]["before_hash"], hash(&pre));
            if is_rollback {
                assert_eq!(cps[0]["kind"], "rollback");
                assert_eq!(cps[0]["rollback_of"], req["checkpoint_id"]);
                let d = s.ok(json!({"action": "checkpoint_diff3", "checkpoint_id": req["checkpoint_id"], "path": "big.txt"}));
                assert_eq!(
                    d["base"].as_str().unwrap().as_bytes(),
                    now.as_slice(),
                    "a rollback restores the checkpoint's base exactly"
                );
            } else {
                // Exactly the chosen hunks are gone, the rest keep their ids: not torn.
                s.ok(json!({"action": "chat_select", "id": id}));
                let (_, left) = hunks(&mut s, "big.txt");
                let mut want: Vec<Value> = hs
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !chosen.contains(i))
                    .map(|(_, h)| h["id"].clone())
                    .collect();
                let mut got: Vec<Value> = left.iter().map(|h| h["id"].clone()).collect();
                want.sort_by_key(|v| v.to_string());
                got.sort_by_key(|v| v.to_string());
                assert_eq!(got, want, "round {round}");
            }
        }
        s.shutdown_noisy();
        round += 1;
    }
    let figures = format!(
        "kill -9 rounds: {round}: {landed} landed, {not_landed} did not; {mid} killed inside an apply (pending record recovered)"
    );
    eprintln!("{figures}");
    assert!(
        landed > 0 && not_landed > 0 && mid > 0,
        "the kills did not land where intended (after the write, before it, inside an apply): {figures}"
    );
    // Leftover temp files of interrupted writes never pass for project files.
    let names: Vec<String> = fs::read_dir(env.proj())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"big.txt".to_string()));
}

/// Issue 23 item 7: a repository that ships 50 checkpoint directories whose names sort last must
/// not make an apply prune its own checkpoint; what it shipped is never deleted, never listed
/// (even when its record claims the user's chat) and never rolled back (a shipped `hard_all`
/// record would delete a tracked file).
#[test]
fn shipped_checkpoints_neither_evict_ours_nor_are_offered() {
    let (env, mut s, id) = start_chat();
    env.write_local("tracked.txt", "tracked\n");
    let tracked_hash = hash(b"tracked\n");
    let shipped: Vec<String> = (0..50)
        .map(|i| format!("99991231-235959-999999-{i:04x}"))
        .collect();
    for sid in &shipped {
        let dir = env.bb7().join("checkpoints").join(sid);
        fs::create_dir_all(&dir).unwrap();
        write_bytes(&dir.join("0.after"), b"tracked\n");
        let rec = json!({
            "id": sid, "created": "9999-12-31T23:59:59Z", "chat_id": id, "kind": "apply_file",
            "state": "done", "pid": 1,
            "files": [{"path": "tracked.txt", "before_hash": null, "after_hash": tracked_hash, "blob": 0}],
        });
        write_bytes(&dir.join("checkpoint.json"), rec.to_string().as_bytes());
    }
    // Nothing shipped is offered, even under the user's chat.
    assert_eq!(checkpoints(&mut s), Vec::<Value>::new());
    let r = s.ok(json!({"action": "checkpoint_list", "chat_id": id}));
    assert_eq!(list(&r["checkpoints"]).len(), 0, "{r}");
    let e = s.err(
        json!({"action": "checkpoint_rollback", "checkpoint_id": shipped[0], "mode": "hard_all"}),
    );
    assert!(e.contains("Unknown checkpoint"), "{e}");
    assert_eq!(local(&env, "tracked.txt"), b"tracked\n");

    // Each apply keeps its own checkpoint, and a rollback restores the content before it.
    env.write_local("a.txt", "v0\n");
    s.ok(json!({"action": "context_add", "path": "a.txt", "content": "v0\n"}));
    let mut ours = Vec::new();
    for v in 1..=3 {
        env.write_output(&id, "a.txt", &format!("v{v}\n"));
        let r = s.ok(json!({"action": "apply_file", "path": "a.txt"}));
        let cp = r["checkpoint_id"]
            .as_str()
            .expect("a checkpoint")
            .to_string();
        assert!(
            env.bb7()
                .join("checkpoints")
                .join(&cp)
                .join("checkpoint.json")
                .exists(),
            "apply {v} pruned its own checkpoint {cp}"
        );
        ours.push(cp);
    }
    let listed: Vec<String> = checkpoints(&mut s)
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, ours.iter().rev().cloned().collect::<Vec<_>>());
    let r = s
        .ok(json!({"action": "checkpoint_rollback", "checkpoint_id": ours[2], "mode": "hard_all"}));
    assert_eq!(r["files"], json!(["a.txt"]));
    assert_eq!(local(&env, "a.txt"), b"v2\n");
    // What the repository shipped is all still there.
    for sid in &shipped {
        assert!(
            env.bb7()
                .join("checkpoints")
                .join(sid)
                .join("checkpoint.json")
                .exists(),
            "{sid} was deleted"
        );
    }
    // A record of ours altered on disk (another chat claimed, a file added) is no longer offered.
    let path = env
        .bb7()
        .join("checkpoints")
        .join(&ours[0])
        .join("checkpoint.json");
    let mut rec = read_json(&path);
    rec["chat_id"] = json!("someone-else");
    write_bytes(&path, rec.to_string().as_bytes());
    assert!(
        !checkpoints(&mut s)
            .iter()
            .any(|c| c["id"] == ours[0].as_str()),
        "an altered record is offered"
    );
    s.shutdown();
}

/// Issue 23 item 10: `get_hunks` on a 2M-line model output must not hold the protocol loop: the
/// diff work is bounded (the file is answered `oversized`, one hunk for the whole file whose patch
/// carries its header only) and a ping sent right after it is answered without waiting for it.
#[test]
fn get_hunks_on_a_huge_output_answers_oversized_and_pings_are_served() {
    let (env, mut s, id) = start_chat();
    let local: String = (0..30_000).map(|i| format!("{i}\n")).collect();
    let out: String = (0..2_000_000u64)
        .map(|i| format!("{}\n", (i * 7919) % 30_000))
        .collect();
    env.write_local("big.txt", &local);
    env.write_output(&id, "big.txt", &out);
    let g = s.next_id();
    s.send(&json!({"action": "get_hunks", "path": "big.txt", "request_id": g}));
    let p = s.next_id();
    s.send(&json!({"action": "ping", "request_id": p}));
    let (g, p) = (json!(g), json!(p));
    let pong = s.recv_where("the ping's reply", |v| v["request_id"] == p);
    assert_eq!(pong["type"], "ok", "{pong}");
    let r = s.recv_where("the get_hunks reply", |v| v["request_id"] == g);
    assert_eq!(r["type"], "hunks", "{r}");
    assert_eq!(r["oversized"], true, "{}", brief(&r));
    let hs = list(&r["hunks"]);
    assert_eq!(hs.len(), 1);
    assert_eq!(hs[0]["oversized"], true);
    assert_eq!(
        (hs[0]["old_lines"].as_u64(), hs[0]["new_lines"].as_u64()),
        (Some(30_000), Some(2_000_000))
    );
    assert!(
        hs[0]["patch"].as_str().unwrap().len() < 100,
        "{}",
        brief(&hs[0])
    );
    // The one hunk is the whole file: applying it writes the output as it is.
    let base = r["base_hash"].clone();
    let a = s.ok(json!({"action": "apply_hunks", "path": "big.txt",
        "hunk_ids": [hs[0]["id"].clone()], "base_hash": base}));
    assert_eq!(a["remaining"], 0, "{}", brief(&a));
    assert_eq!(local_len(&env, "big.txt"), out.len());
    s.shutdown();
}

fn local_len(env: &Env, rel: &str) -> usize {
    fs::metadata(env.proj().join(rel)).unwrap().len() as usize
}

const AGENT_MODEL: &str = "mock/agent";

fn agent_send(s: &mut Bb7, content: &str) -> Value {
    let rid = s.next_id();
    s.send(
        &json!({"action": "send", "content": content, "model": AGENT_MODEL,
        "mode": "agent", "request_id": rid}),
    );
    let want = json!(rid);
    loop {
        let v = s.recv_where_for("send event", std::time::Duration::from_secs(120), |v| {
            v.get("request_id") == Some(&want)
        });
        if matches!(v["type"].as_str(), Some("done" | "diff_error" | "error")) {
            return v;
        }
    }
}

fn status_of<'a>(files: &'a [Value], path: &str) -> &'a Value {
    files
        .iter()
        .find(|f| f["path"] == path && f.get("start_line").is_none())
        .unwrap_or_else(|| panic!("{path} not in {files:?}"))
}

/// Issue 23 item 14: an agent-mode edit of a project file the chat did not have in context starts
/// from what `read_file` returned; that read is the output's base, so the file joins the context
/// with it as its snapshot and shows `M` with its real change (not `!A`, "added over an existing
/// file"): its hunks are the edit only, `apply_file` writes it and the snapshot follows.
#[test]
fn an_agent_edit_of_a_read_file_shows_its_real_change() {
    let original: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let replies = vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "r1",
            "read_file",
            r#"{"file_path":"notes.txt"}"#,
        )]),
        Reply::tool_calls([ToolCall::edit_file(
            0,
            "e1",
            &[(
                "notes.txt",
                "{{file_id:notes.txt}}",
                "line 15\n",
                "line fifteen\n",
            )],
        )]),
        Reply::text(["Changed line 15."]),
    ];
    let server = MockServer::start(Script::new(replies));
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url()}).to_string(),
    );
    env.write_local("notes.txt", &original);
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let id = s.ok(json!({"action": "chat_new", "name": "t"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let done = agent_send(&mut s, "Spell out line 15.");
    assert_eq!(done["type"], "done", "{done}");
    let edited = original.replace("line 15\n", "line fifteen\n");
    assert_eq!(
        std::fs::read_to_string(env.output_path(&id, "notes.txt")).unwrap(),
        edited
    );

    // M, in context, its snapshot the content that was read; the diff is the one line.
    let files = list(&s.ok(json!({"action": "get_file_statuses"}))["files"]);
    let f = status_of(&files, "notes.txt");
    assert_eq!(f["status"], "M", "{f}");
    assert_eq!(f["in_context"], true, "{f}");
    assert_eq!(f["readonly"], false, "{f}");
    assert_eq!(f["context_content"], original.as_str(), "{f}");
    let h = s.ok(json!({"action": "get_hunks", "path": "notes.txt"}));
    let hs = list(&h["hunks"]);
    assert_eq!(hs.len(), 1, "{h}");
    assert_eq!(
        hs[0]["patch"],
        "@@ -15,1 +15,1 @@\n-line 15\n+line fifteen\n"
    );
    assert!(h.get("rebased").is_none(), "{h}");
    // Stored: after a restart the chat still knows the file.
    s.shutdown();
    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": id}));
    let files = list(&s.ok(json!({"action": "get_file_statuses"}))["files"]);
    assert_eq!(status_of(&files, "notes.txt")["status"], "M");

    // Applying it writes the change and settles the file like any context file.
    let r = s.ok(json!({"action": "apply_file", "path": "notes.txt"}));
    assert_eq!(r["content"], edited.as_str(), "{r}");
    assert_eq!(
        std::fs::read_to_string(env.proj().join("notes.txt")).unwrap(),
        edited
    );
    let files = list(&s.ok(json!({"action": "get_file_statuses"}))["files"]);
    assert_eq!(status_of(&files, "notes.txt")["status"], "", "{files:?}");
    s.shutdown();
}

/// A file an agent reply created stays `A` (no base, not in context).
#[test]
fn an_agent_write_of_a_new_file_stays_added() {
    let replies = vec![
        Reply::tool_calls([ToolCall::new(
            0,
            "w1",
            "write_file",
            r#"{"path":"fresh.txt","content":"new\n"}"#,
        )]),
        Reply::text(["Added it."]),
    ];
    let server = MockServer::start(Script::new(replies));
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url()}).to_string(),
    );
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "chat_new", "name": "t"}));
    let done = agent_send(&mut s, "Add fresh.txt.");
    assert_eq!(done["type"], "done", "{done}");
    let files = list(&s.ok(json!({"action": "get_file_statuses"}))["files"]);
    let f = status_of(&files, "fresh.txt");
    assert_eq!(f["status"], "A", "{f}");
    assert_eq!(f["in_context"], false, "{f}");
    s.shutdown();
}
