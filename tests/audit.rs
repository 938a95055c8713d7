//! The audit chain (ECOSYSTEM-PROTOCOL.md §7) through the real binary: what `bb7 tools call` and
//! the component verbs leave in `~/.bb7/audit/log.jsonl`, and `bb7 audit verify` catching each kind
//! of tampering while passing a crash's torn tail and many concurrent writers.
//!
//! Chains of many records are made through the real writer in processes of their own: this test
//! binary re-run as its `dev_append_helper` (nothing of it ships in the user's `bb7`).

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Home, ok_json, stderr, stdout};
use serde_json::Value;
use sha2::{Digest, Sha256};

const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

fn log_of(home: &Home) -> PathBuf {
    home.state_dir().join("audit").join("log.jsonl")
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn records(path: &Path) -> Vec<Value> {
    lines(path)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(path, text).unwrap();
}

/// Canonical JSON as §7 defines it, written here independently of the host: keys sorted (serde_json's
/// map is a BTreeMap), no whitespace.
fn canonical(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

fn rehash(mut v: Value) -> Value {
    v.as_object_mut().unwrap().remove("hash");
    let h = format!("sha256:{}", hex::encode(Sha256::digest(canonical(&v))));
    v["hash"] = h.into();
    v
}

/// A process that appends `count` `test` records (`tag`, and each one's index `n`) to `log`
/// through the real writer ([`bb7::audit::Chain`]), then exits (writing its exit checkpoint): this
/// test binary, running only [`dev_append_helper`].
fn appender(home: &Home, log: &Path, count: u64, tag: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "dev_append_helper",
        "--exact",
        "--ignored",
        "--quiet",
        "--test-threads=1",
    ])
    .env("HOME", home.path())
    .env("BB7_HOME", home.state_dir())
    .env("BB7_TEST_APPEND_COUNT", count.to_string())
    .env("BB7_TEST_APPEND_TAG", tag)
    .env("BB7_TEST_APPEND_LOG", log);
    c
}

fn dev_append(home: &Home, log: &Path, count: u64, tag: &str) -> Output {
    appender(home, log, count, tag).output().unwrap()
}

/// Not a test: the body of [`appender`]'s processes (does nothing unless run by one).
#[test]
#[ignore = "run by other tests, in a process of its own"]
fn dev_append_helper() {
    let Ok(count) = std::env::var("BB7_TEST_APPEND_COUNT") else {
        return;
    };
    let count: u64 = count.parse().unwrap();
    let tag = std::env::var("BB7_TEST_APPEND_TAG").unwrap();
    let log = PathBuf::from(std::env::var_os("BB7_TEST_APPEND_LOG").unwrap());
    let chain = bb7::audit::Chain::shared(&log);
    for n in 0..count {
        chain
            .append(
                bb7::audit::Entry::new("test", &bb7::audit::Actor::User, None)
                    .set("tag", tag.as_str())
                    .set("n", n),
            )
            .expect("append");
    }
}

fn verify(home: &Home, extra: &[&str]) -> Output {
    let mut a = vec!["audit", "verify"];
    a.extend_from_slice(extra);
    home.run(&a)
}

fn verify_log(home: &Home, log: &Path, extra: &[&str]) -> Output {
    let mut a = vec!["audit", "verify", "--log", log.to_str().unwrap()];
    a.extend_from_slice(extra);
    home.run(&a)
}

/// Asserts `o` is a verification failure (exit 1) whose message contains every one of `needles`.
fn assert_fails(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(o), stderr(o));
    let out = stdout(o);
    assert!(out.starts_with("FAILED: "), "{out}");
    for n in needles {
        assert!(out.contains(n), "expected {n:?} in: {out}");
    }
}

fn assert_verifies(o: &Output) -> String {
    assert!(o.status.success(), "{}{}", stdout(o), stderr(o));
    assert!(stderr(o).is_empty(), "{}", stderr(o));
    stdout(o)
}

/// A home whose chain holds 250 `test` records (and the checkpoints after seq 100 and 200, and at
/// the writer's exit).
fn chain_of_250() -> (Home, PathBuf) {
    let home = Home::new();
    let log = log_of(&home);
    let o = dev_append(&home, &log, 250, "t");
    assert!(o.status.success(), "{}", stderr(&o));
    (home, log)
}

#[test]
fn a_tool_call_is_a_chained_record_and_the_chain_verifies() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let o = home.call("list_files", dir.path(), "{}", &[]);
    let result = ok_json(&o);
    let recs = records(&log_of(&home));
    assert_eq!(recs.len(), 2, "{recs:?}");
    let call = &recs[0];
    assert_eq!(call["seq"], 1);
    assert_eq!(call["prev"], GENESIS);
    assert_eq!(call["kind"], "tool_call");
    assert_eq!(call["actor"], "user");
    assert_eq!(call["tool"], "list_files");
    assert_eq!(call["ok"], true);
    assert_eq!(call["outcome"], "ok");
    assert_eq!(call["component_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(
        call["project"],
        dir.path().canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(call["args_sha256"], hex::encode(Sha256::digest(b"{}")));
    assert_eq!(
        call["result_sha256"],
        hex::encode(Sha256::digest(result.to_string().as_bytes()))
    );
    // hash = sha256 of the canonical JSON without `hash`, and the line is stored canonical.
    assert_eq!(rehash(call.clone())["hash"], call["hash"]);
    assert_eq!(lines(&log_of(&home))[0], canonical(call));
    // The process signed its head as it exited.
    let cp = &recs[1];
    assert_eq!(cp["kind"], "checkpoint");
    assert_eq!(cp["seq"], 2);
    assert_eq!(cp["prev"], call["hash"]);
    assert_eq!(cp["signature"].as_str().unwrap().len(), 128);
    let key = home.state_dir().join("audit/key");
    assert_eq!(
        fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        fs::read_to_string(home.state_dir().join("audit/key.pub"))
            .unwrap()
            .trim()
            .len(),
        64
    );
    let out = assert_verifies(&verify(&home, &[]));
    assert!(out.contains("ok: 2 records"), "{out}");
    assert!(out.contains("1 checkpoints signed by key"), "{out}");
    let head = home.run(&["audit", "head"]);
    assert_eq!(
        stdout(&head).trim(),
        format!("2 {}", cp["hash"].as_str().unwrap())
    );
    // The legacy file is not written any more.
    assert!(!home.state_dir().join("tool-calls.jsonl").exists());
}

#[test]
fn checkpoints_come_every_100_records_and_reading_commands_never_append() {
    let (home, log) = chain_of_250();
    let recs = records(&log);
    // 250 records, a checkpoint after each record whose seq is a multiple of 100 (so at seq 101 and
    // 201), and one at exit.
    assert_eq!(recs.len(), 253);
    let cps: Vec<u64> = recs
        .iter()
        .filter(|r| r["kind"] == "checkpoint")
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(cps, vec![101, 201, 253]);
    let before = fs::read(&log).unwrap();
    assert_verifies(&verify(&home, &[]));
    let head = stdout(&home.run(&["audit", "head"]));
    assert!(head.starts_with("253 sha256:"), "{head}");
    assert_verifies(&verify(&home, &["--head", head.trim()]));
    let shown = home.run(&["audit", "show", "--json"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert_eq!(stdout(&shown).lines().count(), 253);
    assert_eq!(
        fs::read(&log).unwrap(),
        before,
        "a reading command appended"
    );
}

#[test]
fn verify_catches_an_edited_field() {
    let (home, log) = chain_of_250();
    let mut l = lines(&log);
    l[4] = l[4].replace("\"n\":4", "\"n\":40");
    assert_ne!(l[4], lines(&log)[4]);
    write_lines(&log, &l);
    assert_fails(&verify(&home, &[]), &["line 5 (seq 5)", "altered"]);
}

#[test]
fn verify_catches_a_removed_record() {
    let (home, log) = chain_of_250();
    let mut l = lines(&log);
    l.remove(4);
    write_lines(&log, &l);
    assert_fails(
        &verify(&home, &[]),
        &["line 5 (seq 6)", "seq 5 belongs", "removed"],
    );
}

#[test]
fn verify_catches_an_inserted_record() {
    let (home, log) = chain_of_250();
    let mut l = lines(&log);
    // A well-formed record, correctly hashed and chained after seq 4: only what follows betrays it.
    let prev: Value = serde_json::from_str(&l[3]).unwrap();
    let mut forged: Value = serde_json::from_str(&l[4]).unwrap();
    forged["tag"] = "forged".into();
    forged["prev"] = prev["hash"].clone();
    let forged = rehash(forged);
    l.insert(4, canonical(&forged));
    write_lines(&log, &l);
    assert_fails(&verify(&home, &[]), &["line 6 (seq 5)", "inserted"]);
}

#[test]
fn verify_catches_two_swapped_records() {
    let (home, log) = chain_of_250();
    let mut l = lines(&log);
    l.swap(4, 5);
    write_lines(&log, &l);
    assert_fails(&verify(&home, &[]), &["line 5 (seq 6)", "reordered"]);
}

#[test]
fn verify_catches_a_truncated_chain_against_the_pinned_head() {
    let (home, log) = chain_of_250();
    let pinned = stdout(&home.run(&["audit", "head"]));
    let mut l = lines(&log);
    l.truncate(150);
    write_lines(&log, &l);
    // Without a pin a cut at a line boundary is indistinguishable from a shorter history...
    assert_verifies(&verify(&home, &[]));
    // ...with one it is caught, by hash alone or as `bb7 audit head` printed it.
    let hash = pinned.split_whitespace().nth(1).unwrap().to_string();
    assert_fails(
        &verify(&home, &["--head", &hash]),
        &["differs from --head", "ends at seq 150"],
    );
    assert_fails(
        &verify(&home, &["--head", pinned.trim()]),
        &["differs from --head"],
    );
}

#[test]
fn verify_catches_a_truncated_chain_with_a_head_signed_by_another_key() {
    let (home, log) = chain_of_250();
    let pubkey = home.state_dir().join("audit/key.pub");
    // The attacker cuts the chain and writes a new head with a checkpoint, in a directory where the
    // writer makes its own key (the user's secret key is not theirs).
    let forger = tempfile::tempdir().unwrap();
    let forged = forger.path().join("log.jsonl");
    let mut l = lines(&log);
    l.truncate(150);
    write_lines(&forged, &l);
    let o = dev_append(&home, &forged, 1, "forged");
    assert!(o.status.success(), "{}", stderr(&o));
    let recs = records(&forged);
    assert_eq!(recs.last().unwrap()["kind"], "checkpoint");
    assert_eq!(recs.last().unwrap()["seq"], 152);
    // Against the pinned public key the forged checkpoint fails...
    assert_fails(
        &verify_log(&home, &forged, &["--pubkey", pubkey.to_str().unwrap()]),
        &["line 152 (seq 152)", "signed with another key"],
    );
    // ...and against the forger's key, the user's own checkpoint (seq 101) does.
    assert_fails(
        &verify_log(&home, &forged, &[]),
        &["line 101 (seq 101)", "signed with another key"],
    );
}

#[test]
fn verify_catches_a_checkpoint_signed_with_another_key_even_when_rehashed() {
    let (home, log) = chain_of_250();
    let other = Home::new();
    let other_log = log_of(&other);
    assert!(dev_append(&other, &other_log, 1, "x").status.success());
    // Take the other key's checkpoint signature and key id into our checkpoint at seq 101, and fix
    // its hash and every later link so only the signature can tell.
    let theirs = records(&other_log).pop().unwrap();
    let mut recs = records(&log);
    recs[100]["signature"] = theirs["signature"].clone();
    recs[100]["key_id"] = theirs["key_id"].clone();
    for i in 100..recs.len() {
        recs[i]["prev"] = recs[i - 1]["hash"].clone();
        recs[i] = rehash(recs[i].clone());
    }
    write_lines(&log, &recs.iter().map(canonical).collect::<Vec<_>>());
    assert_fails(
        &verify(&home, &[]),
        &["line 101 (seq 101)", "checkpoint signature fails"],
    );
}

#[test]
fn a_torn_tail_from_a_kill_9_is_cut_and_noted_never_reported_as_tampering() {
    let home = Home::new();
    let log = log_of(&home);
    assert!(dev_append(&home, &log, 10, "before").status.success());
    // A writer killed mid-way: wait until it has written something, then SIGKILL it.
    let mut child = appender(&home, &log, 100_000_000, "killed")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start_len = fs::metadata(&log).unwrap().len();
    while fs::metadata(&log).unwrap().len() < start_len + 100_000 {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the writer ended before it was killed: {st}");
        }
        std::thread::yield_now();
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    // Whatever the kill left verifies (a line it cut short is a torn tail, not tampering); the next
    // append settles it. Then make the tail torn exactly as a kill inside write(2) leaves it.
    assert_verifies(&verify(&home, &[]));
    assert!(dev_append(&home, &log, 1, "settle").status.success());
    assert_verifies(&verify(&home, &[]));
    let intact = records(&log).len();
    let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(br#"{"actor":"user","kind":"test","n":99,"ok":tr"#)
        .unwrap();
    drop(f);
    let out = assert_verifies(&verify(&home, &[]));
    assert!(out.contains("torn last line (44 bytes"), "{out}");
    let torn_head = stdout(&home.run(&["audit", "head"]));
    assert!(torn_head.starts_with(&format!("{intact} ")), "{torn_head}");
    // The next append cuts it, says so, and chains on: nothing before it is lost.
    assert!(dev_append(&home, &log, 1, "after").status.success());
    let recs = records(&log);
    let recovered = &recs[intact];
    assert_eq!(recovered["kind"], "recovered", "{recovered}");
    assert_eq!(recovered["cut_bytes"], 44);
    assert_eq!(recs[intact + 1]["tag"], "after");
    let out = assert_verifies(&verify(&home, &[]));
    assert!(!out.contains("torn"), "{out}");
    let seqs: Vec<u64> = recs.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=recs.len() as u64).collect::<Vec<_>>());
}

#[test]
fn eight_processes_appending_500_records_each_make_one_linear_chain() {
    let home = Home::new();
    let log = log_of(&home);
    let children: Vec<_> = (0..8)
        .map(|p| {
            appender(&home, &log, 500, &format!("p{p}"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(o.stderr.is_empty(), "{}", stderr(&o));
    }
    let out = assert_verifies(&verify(&home, &[]));
    let recs = records(&log);
    let seqs: Vec<u64> = recs.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=recs.len() as u64).collect::<Vec<_>>(), "a gap");
    let tests: BTreeSet<(String, u64)> = recs
        .iter()
        .filter(|r| r["kind"] == "test")
        .map(|r| {
            (
                r["tag"].as_str().unwrap().to_string(),
                r["n"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recs.iter().filter(|r| r["kind"] == "test").count(),
        4000,
        "{out}"
    );
    for p in 0..8 {
        for n in 0..500 {
            assert!(tests.contains(&(format!("p{p}"), n)), "p{p} #{n} missing");
        }
    }
    // One checkpoint after each multiple of 100 and one per exiting process.
    let cps = recs.iter().filter(|r| r["kind"] == "checkpoint").count();
    assert!(cps > 40, "{cps} checkpoints");
}

#[test]
fn tool_calls_jsonl_moves_into_the_chain_on_first_use() {
    let home = Home::new();
    fs::create_dir_all(home.state_dir()).unwrap();
    let legacy = home.state_dir().join("tool-calls.jsonl");
    let old = r#"{"started":"2025-01-01T00:00:00.000Z","tool":"read_file","component_sha256":"ab","wit_version":"0.1.0","grants":[{"path":"/p","access":"read-only"}],"network":"none","env":"none","duration_ms":1.5,"compile_ms":0.0,"outcome":"ok"}"#;
    fs::write(&legacy, format!("{old}\nnot json\n")).unwrap();
    let legacy_sha = hex::encode(Sha256::digest(fs::read(&legacy).unwrap()));
    let dir = tempfile::tempdir().unwrap();
    ok_json(&home.call("list_files", dir.path(), "{}", &[]));
    assert!(!legacy.exists(), "the old log stays");
    let recs = records(&log_of(&home));
    assert_eq!(recs[0]["kind"], "tool_call");
    assert_eq!(recs[0]["migrated"], true);
    assert_eq!(recs[0]["started"], "2025-01-01T00:00:00.000Z");
    assert_eq!(recs[0]["project"], "/p");
    assert_eq!(recs[0]["ok"], true);
    assert_eq!(recs[1]["migrated"], true);
    assert_eq!(recs[1]["legacy_line"], "not json");
    assert_eq!(recs[2]["kind"], "migration");
    assert_eq!(recs[2]["records"], 2);
    assert_eq!(recs[2]["legacy_sha256"], legacy_sha);
    assert_eq!(recs[3]["tool"], "list_files");
    assert_verifies(&verify(&home, &[]));
}

/// A process stopped after the old log's records were chained but before the old file was removed
/// leaves both; the next process removes the old file and chains nothing twice.
#[test]
fn a_migration_cut_short_before_the_old_file_went_is_not_repeated() {
    let home = Home::new();
    fs::create_dir_all(home.state_dir()).unwrap();
    let legacy = home.state_dir().join("tool-calls.jsonl");
    let old = r#"{"started":"2025-01-01T00:00:00.000Z","tool":"read_file","component_sha256":"ab","wit_version":"0.1.0","grants":[{"path":"/p","access":"read-only"}],"network":"none","env":"none","duration_ms":1.5,"compile_ms":0.0,"outcome":"ok"}"#;
    fs::write(&legacy, format!("{old}\n")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    ok_json(&home.call("list_files", dir.path(), "{}", &[]));
    assert!(!legacy.exists());
    // As if the first process had been killed between its fsync and the removal.
    fs::write(&legacy, format!("{old}\n")).unwrap();
    ok_json(&home.call("list_files", dir.path(), "{}", &[]));
    assert!(!legacy.exists(), "the old log stays");
    let recs = records(&log_of(&home));
    let migrated = recs.iter().filter(|r| r["migrated"] == true).count();
    let migrations = recs.iter().filter(|r| r["kind"] == "migration").count();
    assert_eq!((migrated, migrations), (1, 1), "{recs:?}");
    assert_verifies(&verify(&home, &[]));
}

/// A chain whose last line is not a record cannot take another: the record is not dropped (it goes
/// to `log.jsonl.unchained`), and the command says so and exits 3 (its work is done).
#[test]
fn a_record_the_chain_cannot_take_is_kept_and_the_command_fails() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    ok_json(&home.call("list_files", dir.path(), "{}", &[]));
    let log = log_of(&home);
    let mut f = fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(b"{\"not\":\"a record\"}\n").unwrap();
    drop(f);
    let o = home.call("list_files", dir.path(), "{}", &[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("is not a record"), "{err}");
    assert!(err.contains("log.jsonl.unchained"), "{err}");
    let kept = records(&log.with_file_name("log.jsonl.unchained"));
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0]["kind"], "tool_call");
    assert_eq!(kept[0]["tool"], "list_files");
    // The chain itself is left as it was: verify names the line that is not a record.
    assert_fails(&verify(&home, &[]), &["line 3", "altered"]);
}

#[test]
fn show_lists_records_by_project_and_time() {
    let home = Home::new();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    ok_json(&home.call("list_files", a.path(), "{}", &[]));
    ok_json(&home.call("list_files", b.path(), "{}", &[]));
    let o = home.run(&[
        "audit",
        "show",
        "--json",
        "--project",
        a.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["tool"], "list_files");
    let people = stdout(&home.run(&["audit", "show"]));
    assert_eq!(people.lines().count(), 4, "{people}");
    assert!(
        people.lines().next().unwrap().contains("tool_call"),
        "{people}"
    );
    let future = stdout(&home.run(&["audit", "show", "--since", "2999-01-01"]));
    assert_eq!(future, "");
    let bad = home.run(&["audit", "show", "--since", "yesterday"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--since"), "{}", stderr(&bad));
}

/// The user's binary has no command that appends arbitrary records (tests append through the
/// library, see [`appender`]).
#[test]
fn the_binary_has_no_dev_command() {
    let home = Home::new();
    let o = home.run(&["audit", "--help"]);
    let help = stdout(&o);
    for c in ["verify", "head", "show"] {
        assert!(help.contains(c), "{help}");
    }
    assert!(!help.contains("dev-append"), "{help}");
    let log = log_of(&home);
    let o = home.run(&[
        "audit",
        "dev-append",
        "--count",
        "1",
        "--log",
        log.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!log.exists(), "a record was appended");
}

#[test]
fn verify_reports_a_missing_or_bad_key_file_clearly() {
    let (home, log) = chain_of_250();
    let bad = home.path().join("bad.pub");
    fs::write(&bad, "not a key").unwrap();
    let o = verify_log(&home, &log, &["--pubkey", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.pub"), "{}", stderr(&o));
    let o = verify(&home, &["--head", "nonsense"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a head hash"), "{}", stderr(&o));
    // Without any public key the chain is still walked, and the output says signatures were not checked.
    fs::remove_file(home.state_dir().join("audit/key.pub")).unwrap();
    let out = assert_verifies(&verify(&home, &[]));
    assert!(out.contains("signatures NOT checked"), "{out}");
}

fn recs_but_checkpoints(path: &Path) -> Vec<Value> {
    records(path)
        .into_iter()
        .filter(|r| r["kind"] != "checkpoint")
        .collect()
}

#[test]
fn component_verbs_are_recorded_with_what_the_component_is_and_holds() {
    let home = Home::new();
    let proj = home.path().join("proj");
    fs::create_dir_all(proj.join(".bb7")).unwrap();
    let wasm = common::wasm::build(
        "examples/tool-components",
        "tool-examples-wasm",
        "word_count.wasm",
    );
    let sha = hex::encode(Sha256::digest(fs::read(&wasm).unwrap()));
    let tools = |args: &[&str]| {
        let o = home
            .cmd()
            .current_dir(&proj)
            .arg("tools")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    };
    tools(&["add", wasm.to_str().unwrap(), "--project"]);
    tools(&["grant", "wordcount", "--all"]);
    let lock_after_grant = hex::encode(Sha256::digest(
        fs::read(proj.join(".bb7/tools.lock")).unwrap(),
    ));
    tools(&["disable", "wordcount"]);
    tools(&["enable", "wordcount"]);
    tools(&["revoke", "wordcount"]);
    tools(&["remove", "wordcount"]);
    let recs = recs_but_checkpoints(&log_of(&home));
    let kinds: Vec<&str> = recs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["add", "grant", "disable", "enable", "revoke", "remove"]
    );
    for r in &recs {
        assert_eq!(r["actor"], "user", "{r}");
        assert_eq!(r["component"], "wordcount", "{r}");
        assert!(r["project"].as_str().unwrap().ends_with("/proj"), "{r}");
        assert_eq!(r["ok"], true, "{r}");
    }
    for r in &recs[..5] {
        assert_eq!(r["component_sha256"], sha.as_str(), "{r}");
    }
    assert!(recs[0]["grants"].is_null(), "{}", recs[0]);
    assert_eq!(recs[1]["grants"]["files"], "project-read", "{}", recs[1]);
    assert_eq!(recs[1]["lock_sha256"], lock_after_grant.as_str());
    assert_eq!(recs[2]["enabled"], false);
    assert_eq!(recs[3]["enabled"], true);
    assert!(recs[4]["grants"].is_null(), "{}", recs[4]);
    assert!(recs[5].get("component_sha256").is_none(), "{}", recs[5]);
    assert_verifies(&verify(&home, &[]));
}

#[test]
fn a_path_hidden_by_the_deny_list_is_recorded_as_a_refusal() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("token.secret"), "s3cr3t").unwrap();
    let o = home.call(
        "read_file",
        dir.path(),
        r#"{"file_path":"token.secret"}"#,
        &["--setting", "deny=*.secret"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let recs = recs_but_checkpoints(&log_of(&home));
    assert_eq!(recs.len(), 2, "{recs:?}");
    assert_eq!(recs[0]["kind"], "tool_call");
    assert_eq!(recs[0]["ok"], false);
    let r = &recs[1];
    assert_eq!(r["kind"], "refusal");
    assert_eq!(r["refused"], "deny_list");
    assert_eq!(r["actor"], "user");
    assert_eq!(r["tool"], "read_file");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("hidden by the deny list"),
        "{r}"
    );
    assert_verifies(&verify(&home, &[]));
}

#[test]
fn a_connection_outside_the_network_grant_is_recorded_as_a_refusal() {
    let home = Home::new();
    let proj = home.path().join("proj");
    fs::create_dir_all(proj.join(".bb7")).unwrap();
    let granted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gp = granted.local_addr().unwrap().port();
    let op = other.local_addr().unwrap().port();
    let hostile = common::wasm::build("tests/hostile", "hostile-wasm", "hostile.wasm");
    let pkg = tempfile::tempdir().unwrap();
    fs::copy(&hostile, pkg.path().join("c.wasm")).unwrap();
    fs::write(
        pkg.path().join("bb7-tool.toml"),
        format!(
            "name = \"probe\"\nversion = \"1.0\"\nwit = \"0.1.0\"\nnetwork = [\"127.0.0.1:{gp}\"]\n"
        ),
    )
    .unwrap();
    let tools = |args: &[&str]| {
        let o = home
            .cmd()
            .current_dir(&proj)
            .arg("tools")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    };
    tools(&["add", pkg.path().to_str().unwrap()]);
    tools(&["grant", "probe", "--network", &format!("127.0.0.1:{gp}")]);
    let args = serde_json::json!({"attack": "net", "tcp_port": op, "udp_port": op}).to_string();
    tools(&[
        "call",
        "probe",
        "--dir",
        proj.to_str().unwrap(),
        "--args",
        &args,
    ]);
    let refusals: Vec<Value> = records(&log_of(&home))
        .into_iter()
        .filter(|r| r["kind"] == "refusal")
        .collect();
    // The component tries several addresses outside its grant; each distinct one is recorded once
    // (with the call's project when it has one; this call has no directory) (at most 16 per call, then one `and N more` record: a component
    // looping on connects must not flood the chain).
    assert!(
        (1..=17).contains(&refusals.len()),
        "socket refusals per call: {refusals:?}"
    );
    let errors: std::collections::BTreeSet<&str> = refusals
        .iter()
        .filter_map(|r| r["error"].as_str())
        .collect();
    assert_eq!(
        errors.len(),
        refusals.len(),
        "one record per target: {refusals:?}"
    );
    for r in &refusals {
        assert_eq!(r["refused"], "socket", "{r}");
        assert_eq!(r["actor"], "user", "{r}");
        assert_eq!(r["ok"], false, "{r}");
    }
    let r = &refusals[0];
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{op}")),
        "{r}"
    );
    assert_verifies(&verify(&home, &[]));
}

/// `bb7 tools call --audit-log L`: a connection refused for lying outside the grant is recorded in
/// L, with the call, not in the default chain.
#[test]
fn a_socket_refusal_goes_to_the_chain_given_with_audit_log() {
    let home = Home::new();
    let proj = home.path().join("proj");
    fs::create_dir_all(proj.join(".bb7")).unwrap();
    let granted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gp = granted.local_addr().unwrap().port();
    let op = other.local_addr().unwrap().port();
    let hostile = common::wasm::build("tests/hostile", "hostile-wasm", "hostile.wasm");
    let pkg = tempfile::tempdir().unwrap();
    fs::copy(&hostile, pkg.path().join("c.wasm")).unwrap();
    fs::write(
        pkg.path().join("bb7-tool.toml"),
        format!(
            "name = \"probe\"\nversion = \"1.0\"\nwit = \"0.1.0\"\nnetwork = [\"127.0.0.1:{gp}\"]\n"
        ),
    )
    .unwrap();
    let tools = |args: &[&str]| {
        let o = home
            .cmd()
            .current_dir(&proj)
            .arg("tools")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    };
    tools(&["add", pkg.path().to_str().unwrap()]);
    tools(&["grant", "probe", "--network", &format!("127.0.0.1:{gp}")]);
    let given = home.path().join("elsewhere").join("log.jsonl");
    let args = serde_json::json!({"attack": "net", "tcp_port": op, "udp_port": op}).to_string();
    tools(&[
        "call",
        "probe",
        "--dir",
        proj.to_str().unwrap(),
        "--args",
        &args,
        "--audit-log",
        given.to_str().unwrap(),
    ]);
    let refusals = |log: &Path| -> Vec<Value> {
        if !log.exists() {
            return Vec::new();
        }
        records(log)
            .into_iter()
            .filter(|r| r["kind"] == "refusal")
            .collect()
    };
    let here = refusals(&given);
    assert!(!here.is_empty(), "{here:?}");
    assert!(here.iter().all(|r| r["refused"] == "socket"), "{here:?}");
    assert!(
        refusals(&log_of(&home)).is_empty(),
        "a refusal went to the default chain"
    );
    assert!(
        records(&given).iter().any(|r| r["kind"] == "tool_call"),
        "the call itself is in the given chain"
    );
}

/// A deny-list refusal is the host's own finding (the deny list checked against the call's path),
/// never read from the error text: a failure whose message merely says "hidden by the deny list"
/// (here the name of a file that does not exist) is not recorded as one.
#[test]
fn only_a_path_the_deny_list_hides_is_recorded_as_a_deny_list_refusal() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let o = home.call(
        "read_file",
        dir.path(),
        r#"{"file_path":"hidden by the deny list (agent.deny, pattern `x`)"}"#,
        &["--setting", "deny=*.secret"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let recs = recs_but_checkpoints(&log_of(&home));
    assert!(
        recs.iter().all(|r| r["kind"] != "refusal"),
        "a refusal from the message text: {recs:?}"
    );
    // The real thing still is one, naming the pattern.
    fs::write(dir.path().join("token.secret"), "s3cr3t").unwrap();
    let o = home.call(
        "read_file",
        dir.path(),
        r#"{"file_path":"./token.secret"}"#,
        &["--setting", "deny=*.secret"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let recs = recs_but_checkpoints(&log_of(&home));
    let refusals: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "refusal").collect();
    assert_eq!(refusals.len(), 1, "{recs:?}");
    assert_eq!(refusals[0]["refused"], "deny_list");
    assert_eq!(refusals[0]["pattern"], "*.secret");
}

/// Issue 25 leftover: a component that imports `wasi:sockets` but requests no network (linked with
/// every socket use denied) is refused its sockets like a call outside a network grant is — and
/// the refusal is recorded, once per call, in the chain the call is given; the chain verifies.
/// The net-probe example: an IP address is a TCP socket it may not create; a name, a lookup it
/// may not make.
#[test]
fn a_socket_use_without_a_network_grant_is_a_refusal_in_the_given_chain() {
    let home = Home::new();
    let proj = home.path().join("proj");
    fs::create_dir_all(proj.join(".bb7")).unwrap();
    let probe = common::wasm::build(
        "examples/tool-components",
        "tool-examples-wasm",
        "net_probe.wasm",
    );
    let pkg = tempfile::tempdir().unwrap();
    fs::copy(&probe, pkg.path().join("c.wasm")).unwrap();
    fs::copy(
        common::wasm::repo_root().join("examples/tool-components/net-probe/bb7-tool.toml"),
        pkg.path().join("bb7-tool.toml"),
    )
    .unwrap();
    let tools = |args: &[&str]| {
        home.cmd()
            .current_dir(&proj)
            .arg("tools")
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        vec!["add", pkg.path().to_str().unwrap()],
        vec!["grant", "netprobe", "--all"],
    ] {
        let o = tools(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let given = home.path().join("elsewhere").join("log.jsonl");
    for host in ["127.0.0.1", "localhost"] {
        let args = serde_json::json!({"host": host, "port": port}).to_string();
        let o = tools(&[
            "call",
            "netprobe",
            "--dir",
            proj.to_str().unwrap(),
            "--args",
            &args,
            "--audit-log",
            given.to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "{host}: the connection is refused");
    }
    let refusals: Vec<Value> = records(&given)
        .into_iter()
        .filter(|r| r["kind"] == "refusal")
        .collect();
    assert_eq!(refusals.len(), 2, "one refusal per call: {refusals:?}");
    for r in &refusals {
        assert_eq!(r["refused"], "socket", "{r}");
        assert_eq!(r["ok"], false, "{r}");
        assert!(
            r["error"].as_str().unwrap().contains("no network grant"),
            "{r}"
        );
    }
    assert!(
        refusals[0]["error"]
            .as_str()
            .unwrap()
            .contains("create-tcp-socket"),
        "{}",
        refusals[0]
    );
    assert!(
        refusals[1]["error"].as_str().unwrap().contains("localhost"),
        "{}",
        refusals[1]
    );
    assert!(
        !log_of(&home).exists()
            || records(&log_of(&home))
                .iter()
                .all(|r| r["kind"] != "refusal"),
        "a refusal went to the default chain"
    );
    assert_verifies(&verify_log(&home, &given, &[]));
}
