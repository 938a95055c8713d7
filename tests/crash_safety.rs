//! Crash safety: `kill -9` the host again and again in the middle of bursts of state-changing
//! requests. Afterwards every chat.json and index.json parses, every change whose reply the host
//! wrote before it died is on disk, stale locks of the dead process do not block the next one, and
//! a chat being moved between the project and the global store is never lost.
//!
//! The kill point is random (a seed is printed; replay a failure with `BB7_TEST_SEED=<seed>`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::thread;
use std::time::Duration;

use common::proto::*;
use common::seed::Rng;
use serde_json::{Value, json};

fn short(s: &str) -> String {
    if s.len() > 40 {
        format!("{}…({} bytes)", &s[..40], s.len())
    } else {
        s.to_string()
    }
}

/// A value the bursts set again and again: the values in the order sent and the latest one acknowledged.
#[derive(Default)]
struct Field {
    initial: Option<String>,
    sent: Vec<String>,
    acked: Option<usize>,
}

impl Field {
    fn new(initial: Option<&str>) -> Field {
        Field {
            initial: initial.map(str::to_string),
            ..Field::default()
        }
    }

    fn send(&mut self, v: String) -> usize {
        self.sent.push(v);
        self.sent.len() - 1
    }

    fn ack(&mut self, i: usize) {
        if self.acked.is_none_or(|a| i > a) {
            self.acked = Some(i);
        }
    }

    /// What may be on disk: the latest acknowledged value or one sent after it; with no
    /// acknowledgement yet, the initial value or anything sent.
    fn allowed(&self) -> Vec<String> {
        match self.acked {
            Some(i) => self.sent[i..].to_vec(),
            None => self
                .initial
                .iter()
                .cloned()
                .chain(self.sent.iter().cloned())
                .collect(),
        }
    }

    fn check(&self, what: &str, got: &str) {
        if self.acked.is_none() && self.initial.is_none() {
            return;
        }
        let ok = self.allowed();
        assert!(
            ok.iter().any(|v| v == got),
            "{what}: on disk {:?}, but the acknowledged value (or a later one) is one of {:?}",
            short(got),
            ok.iter().map(|v| short(v)).collect::<Vec<_>>()
        );
    }
}

struct Chat {
    id: Option<String>,
    name: Field,
    draft: Field,
    model: Field,
    /// Acknowledged adds with no remove sent after them: path → content.
    files: BTreeMap<String, String>,
    /// Acknowledged removes.
    gone: BTreeSet<String>,
    /// Acknowledged system messages.
    notes: Vec<String>,
    /// None: never deleted; Some(false): delete sent, not acknowledged; Some(true): deleted.
    deleted: Option<bool>,
}

impl Chat {
    fn new(name: &str) -> Chat {
        Chat {
            id: None,
            name: Field::new(Some(name)),
            draft: Field::new(Some("")),
            model: Field::new(None),
            files: BTreeMap::new(),
            gone: BTreeSet::new(),
            notes: Vec::new(),
            deleted: None,
        }
    }

    fn live(&self) -> bool {
        self.id.is_some() && self.deleted.is_none()
    }
}

enum Op {
    New(usize),
    Draft(usize, usize),
    Model(usize, usize),
    Add(usize, String, String),
    Remove(usize, String),
    Note(usize, String),
    Rename(usize, usize),
    Delete(usize),
}

/// The burst of one round, in send order.
struct Burst {
    reqs: Vec<Value>,
    ops: Vec<(String, Op)>,
}

impl Burst {
    fn push(&mut self, round: usize, mut req: Value, op: Op) {
        let rid = format!("r{round}-{}", self.reqs.len());
        req["request_id"] = json!(rid);
        self.reqs.push(req);
        self.ops.push((rid, op));
    }
}

fn check_all_state_parses(env: &Env) {
    let Ok(rd) = fs::read_dir(env.chats()) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            let cj = p.join("chat.json");
            if cj.exists() {
                let v = read_json(&cj);
                assert!(v.is_object(), "{} is not a chat: {v}", cj.display());
            }
        }
    }
    let idx = env.chats().join("index.json");
    if idx.exists() {
        index_entries(&idx);
    }
}

fn verify(env: &Env, chats: &[Chat], round: usize) {
    check_all_state_parses(env);
    let any_acked = chats.iter().any(|c| c.id.is_some());
    let index = if any_acked {
        assert!(
            env.chats().join("index.json").exists(),
            "round {round}: index.json is missing"
        );
        env.index()
    } else {
        vec![]
    };
    for c in chats {
        let Some(id) = &c.id else { continue };
        let dir = env.chat_dir(id);
        match c.deleted {
            Some(true) => {
                assert!(!dir.exists(), "round {round}: deleted chat {id} is back");
                assert!(
                    !index.iter().any(|e| e["id"] == id.as_str()),
                    "round {round}: deleted chat {id} still indexed"
                );
                continue;
            }
            Some(false) => continue,
            None => {}
        }
        let what = |f: &str| format!("round {round}, chat {id}, {f}");
        let chat = env.chat_json(id);
        assert_eq!(chat["id"], id.as_str());
        c.name.check(&what("name"), chat["name"].as_str().unwrap());
        c.draft.check(&what("draft"), &draft_of(&chat));
        c.model
            .check(&what("model"), chat["model"].as_str().unwrap());
        let cfs = list(&chat["context_files"]);
        for (path, content) in &c.files {
            assert!(
                cfs.iter().any(|e| e["path"] == path.as_str()),
                "{}: acknowledged file missing from context_files",
                what(path)
            );
            let snap = dir.join("context").join(path);
            assert_eq!(
                fs::read_to_string(&snap).ok().as_deref(),
                Some(content.as_str()),
                "{}: acknowledged snapshot lost",
                what(path)
            );
        }
        for path in &c.gone {
            assert!(
                !cfs.iter().any(|e| e["path"] == path.as_str()),
                "{}: acknowledged remove lost",
                what(path)
            );
        }
        let texts: Vec<String> = list(&chat["messages"]).iter().map(msg_text).collect();
        for n in &c.notes {
            assert!(
                texts.iter().any(|t| t == n),
                "{}: acknowledged system message lost",
                what(n)
            );
        }
        let e = index
            .iter()
            .find(|e| e["id"] == id.as_str())
            .unwrap_or_else(|| panic!("{}: not in index.json", what("index")));
        c.name
            .check(&what("index name"), e["name"].as_str().unwrap_or(""));
    }
}

#[test]
fn kill9_mid_burst_never_corrupts_or_loses_acknowledged_state() {
    let env = Env::new();
    let mut rng = Rng::from_env("crash safety");
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.shutdown();
    let mut chats: Vec<Chat> = Vec::new();
    // Rounds whose kill landed inside the burst: some of its requests answered, not all.
    let mut inside = 0;

    for round in 0..30 {
        let mut s = env.start();
        // The previous process died holding a lock: it must be stale now.
        let live: Vec<usize> = (0..chats.len()).filter(|&i| chats[i].live()).collect();
        let selected = if live.is_empty() {
            None
        } else {
            let i = live[rng.below(live.len() as u64) as usize];
            s.ok(json!({"action": "chat_select", "id": chats[i].id.clone().unwrap()}));
            Some(i)
        };

        let me = chats.len();
        chats.push(Chat::new(&format!("round-{round}")));
        let mut b = Burst {
            reqs: vec![],
            ops: vec![],
        };
        b.push(
            round,
            json!({"action": "chat_new", "name": format!("round-{round}")}),
            Op::New(me),
        );
        let sizes = [16usize, 2_000, 60_000, 250_000, 500_000];
        let draft = |c: &mut Chat, b: &mut Burst, k: usize| {
            let text = format!("round{round}-draft{k}:{}", "x".repeat(sizes[k]));
            let i = c.draft.send(text.clone());
            b.push(
                round,
                json!({"action": "save_draft", "draft": text}),
                Op::Draft(me, i),
            );
        };
        let file = |k: usize| {
            (
                format!("f{round}_{k}.txt"),
                format!("file {k} of round {round}\n{}", "y".repeat(8_000 * (k + 1))),
            )
        };
        draft(&mut chats[me], &mut b, 0);
        for k in 0..3 {
            let (p, c) = file(k);
            b.push(
                round,
                json!({"action": "context_add", "path": p, "content": c}),
                Op::Add(me, p, c),
            );
            draft(&mut chats[me], &mut b, k + 1);
        }
        let note = format!("note of round {round}");
        b.push(
            round,
            json!({"action": "add_system_message", "message": note}),
            Op::Note(me, note),
        );
        let m = chats[me].model.send(format!("vendor/model-{round}"));
        b.push(
            round,
            json!({"action": "save_chat_settings", "model": format!("vendor/model-{round}")}),
            Op::Model(me, m),
        );
        let (p1, _) = file(1);
        b.push(
            round,
            json!({"action": "context_remove", "path": p1}),
            Op::Remove(me, p1),
        );
        let others: Vec<usize> = live
            .iter()
            .copied()
            .filter(|&i| Some(i) != selected)
            .collect();
        if !others.is_empty() {
            let o = others[rng.below(others.len() as u64) as usize];
            let name = format!("renamed-in-round-{round}");
            let i = chats[o].name.send(name.clone());
            b.push(
                round,
                json!({"action": "chat_rename", "id": chats[o].id.clone().unwrap(), "name": name}),
                Op::Rename(o, i),
            );
            if round % 4 == 3 && others.len() > 1 {
                let d = others
                    .iter()
                    .copied()
                    .find(|&x| x != o)
                    .expect("another chat");
                chats[d].deleted = Some(false);
                b.push(
                    round,
                    json!({"action": "chat_delete", "id": chats[d].id.clone().unwrap()}),
                    Op::Delete(d),
                );
            }
        }
        draft(&mut chats[me], &mut b, 4);

        for r in &b.reqs {
            s.send(r);
        }
        let n = rng.below(b.reqs.len() as u64 + 1) as usize;
        let mut replies = Vec::new();
        for _ in 0..n {
            replies.push(s.recv_any());
        }
        if rng.below(2) == 0 {
            thread::sleep(Duration::from_micros(rng.below(2_000)));
        }
        s.kill9();
        replies.extend(s.drain());
        eprintln!(
            "round {round}: killed after reading {n} replies; {} of {} requests answered",
            replies.len(),
            b.reqs.len()
        );
        let answered = replies
            .iter()
            .filter(|r| r.get("request_id").is_some())
            .count();
        if answered > 0 && answered < b.reqs.len() {
            inside += 1;
        }

        let by_rid: BTreeMap<String, Value> = replies
            .into_iter()
            .filter_map(|r| {
                r["request_id"]
                    .as_str()
                    .map(|id| (id.to_string(), r.clone()))
            })
            .collect();
        let mut prefix_open = true;
        for (rid, op) in b.ops {
            let reply = by_rid.get(&rid);
            if let Some(r) = reply {
                assert!(
                    prefix_open,
                    "round {round}: {rid} answered although an earlier request was not"
                );
                assert_ne!(r["type"], "error", "round {round}: {rid} failed: {r}");
            } else {
                prefix_open = false;
            }
            let acked = reply.is_some();
            match op {
                Op::New(c) => {
                    if acked {
                        chats[c].id = Some(chat_id(reply.unwrap()));
                    }
                }
                Op::Draft(c, i) => {
                    if acked {
                        chats[c].draft.ack(i)
                    }
                }
                Op::Model(c, i) => {
                    if acked {
                        chats[c].model.ack(i)
                    }
                }
                Op::Rename(c, i) => {
                    if acked {
                        chats[c].name.ack(i)
                    }
                }
                Op::Add(c, p, content) => {
                    if acked {
                        chats[c].files.insert(p, content);
                    }
                }
                Op::Remove(c, p) => {
                    chats[c].files.remove(&p);
                    if acked {
                        chats[c].gone.insert(p);
                    }
                }
                Op::Note(c, text) => {
                    if acked {
                        chats[c].notes.push(text)
                    }
                }
                Op::Delete(c) => {
                    if acked {
                        chats[c].deleted = Some(true)
                    }
                }
            }
        }
        verify(&env, &chats, round);
    }
    assert!(
        inside > 0,
        "no kill landed inside a burst (some requests answered, not all) in 30 rounds"
    );

    // A clean process sees every acknowledged chat and can take each one (stale locks).
    let mut s = env.start();
    let listed = list(&s.ok(json!({"action": "chat_list"}))["chats"]);
    for c in chats.iter().filter(|c| c.live()) {
        let id = c.id.clone().unwrap();
        assert!(
            listed.iter().any(|e| e["id"] == id.as_str()),
            "chat_list lost {id}"
        );
        s.ok(json!({"action": "chat_select", "id": id}));
        let g = s.ok(json!({"action": "chat_get"}));
        c.draft.check(
            &format!("final chat_get of {id}"),
            g["draft"].as_str().unwrap(),
        );
    }
    s.shutdown();
}

fn chat_id(r: &Value) -> String {
    r["id"]
        .as_str()
        .unwrap_or_else(|| panic!("chat_new reply without id: {r}"))
        .to_string()
}

#[test]
fn kill9_during_chat_moves_never_loses_the_chat_and_a_restart_leaves_one_copy() {
    let env = Env::new();
    let mut rng = Rng::from_env("crash safety");
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let id = chat_id(&s.ok(json!({"action": "chat_new", "name": "mover"})));
    env.write_local("a.txt", "payload\n");
    s.ok(json!({"action": "context_add", "path": "a.txt", "content": "payload\n"}));
    s.ok(json!({"action": "save_draft", "draft": "keep this draft"}));
    s.shutdown();
    let abs = env.proj().join("a.txt").to_str().unwrap().to_string();

    let mut expect_global: Option<bool> = Some(false);
    for round in 0..=12 {
        // Two stores cannot change in one atomic step: a crash between publishing the copy and
        // retiring the source may leave both, and the next start must resolve that. So the disk is
        // checked after the restart.
        let mut s = env.start();
        let in_proj = env.chat_dir(&id).join("chat.json").exists();
        let in_glob = env.global_chat_dir(&id).join("chat.json").exists();
        assert!(in_proj || in_glob, "round {round}: the chat was lost");
        assert!(
            !(in_proj && in_glob),
            "round {round}: after a crash and a restart the chat exists in both stores"
        );
        if let Some(g) = expect_global {
            assert_eq!(
                in_glob, g,
                "round {round}: the acknowledged last move is not on disk"
            );
        }
        let chat = if in_glob {
            env.global_chat_json(&id)
        } else {
            env.chat_json(&id)
        };
        assert_eq!(draft_of(&chat), "keep this draft", "round {round}");

        let listed = |s: &mut Bb7, global: bool| {
            list(&s.ok(json!({"action": "chat_list", "global": global}))["chats"])
                .iter()
                .any(|e| e["id"] == id.as_str())
        };
        assert_eq!(
            listed(&mut s, false),
            in_proj,
            "round {round}: project list"
        );
        assert_eq!(listed(&mut s, true), in_glob, "round {round}: global list");
        s.ok(json!({"action": "chat_select", "id": id, "global": in_glob}));
        let files = list(&s.ok(json!({"action": "context_list"}))["files"]);
        assert_eq!(files.len(), 1, "round {round}: {files:?}");
        let path = if in_glob { abs.as_str() } else { "a.txt" };
        assert_eq!(files[0]["path"], path, "round {round}");
        let r = s.ok(json!({"action": "get_context_file", "path": path}));
        assert_eq!(
            r["content"], "payload\n",
            "round {round}: snapshot lost in the move"
        );
        if round == 12 {
            s.shutdown();
            break;
        }

        let k = 6;
        let mut to_global = !in_glob;
        let mut rids = Vec::new();
        for i in 0..k {
            let rid = format!("m{round}-{i}");
            s.send(&json!({"request_id": rid, "action": "chat_move", "id": id,
                "to": if to_global { "global" } else { "project" }}));
            rids.push(rid);
            to_global = !to_global;
        }
        let final_global = !to_global;
        let n = rng.below(k as u64 + 1) as usize;
        let mut replies = Vec::new();
        for _ in 0..n {
            replies.push(s.recv_any());
        }
        if rng.below(2) == 0 {
            thread::sleep(Duration::from_micros(rng.below(2_000)));
        }
        s.kill9();
        replies.extend(s.drain());
        let answered: Vec<&String> = rids
            .iter()
            .filter(|rid| replies.iter().any(|r| r["request_id"] == rid.as_str()))
            .collect();
        for r in &replies {
            assert_ne!(r["type"], "error", "round {round}: a move failed: {r}");
        }
        assert!(
            answered.iter().enumerate().all(|(i, rid)| **rid == rids[i]),
            "round {round}: replies out of order: {answered:?}"
        );
        expect_global = (answered.len() == k).then_some(final_global);
    }
}

/// A snapshot is replaced before chat.json is saved: a crash in between leaves chat.json naming the
/// old version of a file whose snapshot is the new content. The next time the chat is opened its
/// versions follow the snapshots on disk, so the ids the model is shown match what it is shown.
#[test]
fn a_snapshot_replaced_before_a_crash_is_the_version_the_chat_reopens_with() {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let id = chat_id(&s.ok(json!({"action": "chat_new", "name": "healer"})));
    s.ok(json!({"action": "context_add", "path": "a.txt", "content": "one\n"}));
    s.ok(
        json!({"action": "context_add_section", "path": "b.txt", "content": "two\n",
                "start_line": 2, "end_line": 2}),
    );
    s.ok(json!({"action": "chat_new", "name": "other"}));
    s.shutdown();
    // The state a crash between the snapshot write and the chat.json save leaves.
    fs::write(env.chat_dir(&id).join("context/a.txt"), "one, updated\n").unwrap();
    let before = env.chat_json(&id);
    assert_eq!(
        before["context_files"][0]["version"],
        common::file_id("a.txt", b"one\n")
    );

    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": id}));
    let listed = s.ok(json!({"action": "context_list"}));
    let files = listed["files"].as_array().unwrap();
    let a = files.iter().find(|f| f["path"] == "a.txt").unwrap();
    assert_eq!(a["version"], common::file_id("a.txt", b"one, updated\n"));
    // The untouched section keeps its version.
    let b = files.iter().find(|f| f["path"] == "b.txt").unwrap();
    assert_eq!(
        b["version"], before["context_files"][1]["version"],
        "{listed}"
    );
    s.shutdown();
    // And it is saved, not only served.
    assert_eq!(
        env.chat_json(&id)["context_files"][0]["version"],
        common::file_id("a.txt", b"one, updated\n")
    );
}

/// Writes `path` (creating its parents) and dates it `age` back.
fn plant(path: &std::path::Path, age: Duration) {
    write_file(path, "partial");
    let when = std::time::SystemTime::now() - age;
    fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(when))
        .expect("set mtime");
}

/// A `kill -9` between writing an atomic write's temporary (`.<name>.tmp-<pid>-<n>`) and renaming
/// it leaves the temporary, and they piled up (a chat's directory was swept when the chat was
/// opened, but only of dead pids: a container's reused pid kept them; nothing swept `.bb7/`,
/// `chats/` or `~/.bb7/`). `init` now removes, in the background, the ones whose writer is gone
/// (its pid is dead, or names a process that started after the file was written) and that were
/// written before this process started, in the project's `.bb7/` and `~/.bb7/` and their
/// subdirectories; opening a chat (here the last active one, which `init` reopens) sweeps its
/// directory, reused pids included. A concurrent writer's fresh temporary, anything else with a
/// similar name, a symlink or a directory stays.
#[test]
fn stale_temporaries_of_crashed_writers_are_removed_and_live_ones_kept() {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let a = chat_id(&s.ok(json!({"action": "chat_new", "name": "a"})));
    // The last active chat: `init` reopens it, sweeping its directory.
    let b = chat_id(&s.ok(json!({"action": "chat_new", "name": "b"})));
    s.shutdown();
    // A pid no process can have (above the kernel's limit of 2^22), and this test's own, which
    // is alive but started after the files dated two hours back.
    let (dead, me) = (99_999_999, std::process::id());
    let hours = Duration::from_secs(7200);
    let global = env.home().join(".bb7");
    let stale = [
        env.bb7().join(format!(".tools.json.tmp-{dead}-1")),
        env.chats().join(format!(".index.json.tmp-{dead}-2")),
        env.chat_dir(&b).join(format!(".chat.json.tmp-{dead}-3")),
        env.chat_dir(&b).join(format!(".chat.json.tmp-{me}-4")),
        global.join(format!(".external-files.json.tmp-{dead}-5")),
    ];
    for p in &stale {
        plant(p, hours);
    }
    let other = [
        env.chat_dir(&a).join(format!("chat.json.tmp-{dead}-6")),
        env.chat_dir(&a).join(".chat.json.tmp-x-7"),
    ];
    for p in &other {
        plant(p, hours);
    }
    let link = env.chats().join(format!(".l.tmp-{dead}-8"));
    std::os::unix::fs::symlink(env.chat_dir(&a).join("chat.json"), &link).unwrap();
    let dir = env.chat_dir(&a).join(format!(".d.tmp-{dead}-9"));
    fs::create_dir(&dir).unwrap();

    let mut s = env.spawn();
    // Written while the new process runs: a live writer's, and one whose pid means nothing here
    // (a writer in another pid namespace).
    let fresh = [
        env.chat_dir(&b).join(format!(".chat.json.tmp-{me}-10")),
        env.chats().join(format!(".index.json.tmp-{dead}-11")),
    ];
    for p in &fresh {
        plant(p, Duration::ZERO);
    }
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let sweeping = |pid: u32| {
        fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks.flatten().any(|t| {
                    fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "bb7-sweep")
                })
            })
            .unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (stale.iter().any(|p| p.exists()) || sweeping(s.pid))
        && std::time::Instant::now() < deadline
    {
        thread::sleep(Duration::from_millis(20));
    }
    for p in &stale {
        assert!(!p.exists(), "{} is left", p.display());
    }
    for p in other.iter().chain(&fresh) {
        assert!(p.exists(), "{} was removed", p.display());
    }
    assert!(link.symlink_metadata().is_ok() && dir.is_dir());
    // The session works as before.
    s.ok(json!({"action": "chat_select", "id": a}));
    s.shutdown();
}
