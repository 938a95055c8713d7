//! Regression tests for the holes an outside review found (issue 10), each through the real `bb7`
//! binary, and what else the same causes allowed:
//!
//! 1. a project rooted at `$HOME` (whose `.bb7/` is the global store) must not delete global chats;
//! 2. a chat.json shipped by a repository must not make the host read files outside the project;
//! 3. symlinks in the project must not reach `.git/` or outside (diff paths, diff_local_done, apply,
//!    `@include`), nor may a hard link (`@include`, issue 23);
//! 4. `.bb7` replaced by a symlink after `init` must not be followed;
//! 6. FIFOs and huge files in `.bb7/` must not hang or abort the host;
//! 7. operations are all-or-nothing or say exactly what happened;
//! 8. oversized third-party components are refused before compiling, and compile time is audited;
//! 9. a tampered compiled-component cache entry is recompiled, never loaded.
//!
//! (5, the memory cap over all of a call's memories, is tested in `host/src/sandbox/runner.rs`
//! with a real multi-memory component.)

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use common::proto::*;
use serde_json::{Value, json};

const SECRET: &str = "TOPSECRET-must-never-leak";

fn start() -> (Env, Bb7) {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    (env, s)
}

fn new_chat(s: &mut Bb7, name: &str) -> String {
    let r = s.ok(json!({"action": "chat_new", "name": name}));
    r["id"].as_str().expect("chat id").to_string()
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {p:?}"
    );
}

fn no_leak(v: &Value, what: &str) {
    assert!(!v.to_string().contains(SECRET), "{what} leaks: {v}");
}

// ---------------------------------------------------------------------------------------------
// 1. A project rooted at $HOME
// ---------------------------------------------------------------------------------------------

#[test]
fn a_project_rooted_at_home_serves_global_chats_and_deletes_none() {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "init"}));
    let mut ids = Vec::new();
    for n in ["one", "two", "three"] {
        ids.push(new_chat(&mut s, n));
    }
    s.close_stdin();
    s.wait_exit();
    for id in &ids {
        assert!(env.global_chat_dir(id).join("chat.json").is_file());
    }

    // Neovim started in ~: the project root is the home directory, whose .bb7/ is the global store.
    let home = env.home().to_str().unwrap().to_string();
    let mut s = env.spawn();
    let r = s.ok(json!({"action": "init", "project_root": home}));
    assert_eq!(r["global_only"], true, "{r}");
    let r = s.ok(json!({"action": "chat_list", "global": true}));
    let listed: Vec<&str> = r["chats"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    for id in &ids {
        assert!(listed.contains(&id.as_str()), "{id} missing from {r}");
        assert!(
            env.global_chat_dir(id).join("chat.json").is_file(),
            "{id} deleted"
        );
    }
    // bb7_init there is refused (it exists) rather than making the global store a project store.
    s.err(json!({"action": "bb7_init", "project_root": home}));
}

#[test]
fn the_interrupted_move_clean_up_deletes_only_proven_duplicates() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "mine");
    s.close_stdin();
    s.wait_exit();
    // A chat with the same id in the global store, but with its own history and a newer move mark:
    // not provably a copy of the project's chat, so neither may be deleted.
    let mut other = env.chat_json(&id);
    other["messages"] =
        json!([{"role": "user", "parts": [{"type": "text", "content": "only here"}]}]);
    other["moved_at"] = json!("2099-01-01T00:00:00.000000000Z");
    let dir = env.global_chat_dir(&id);
    fs::create_dir_all(dir.join("context")).unwrap();
    fs::write(dir.join("chat.json"), other.to_string()).unwrap();
    let mut s = env.start();
    s.ok(json!({"action": "ping"}));
    assert!(
        env.chat_dir(&id).join("chat.json").is_file(),
        "project copy deleted"
    );
    assert!(dir.join("chat.json").is_file(), "global copy deleted");

    // A real interrupted move (same history, the copy marked newer) is still resolved.
    s.close_stdin();
    s.wait_exit();
    let mut copy = env.chat_json(&id);
    copy["moved_at"] = json!("2099-01-01T00:00:00.000000000Z");
    fs::write(dir.join("chat.json"), copy.to_string()).unwrap();
    let mut s = env.start();
    s.ok(json!({"action": "ping"}));
    assert!(
        !env.chat_dir(&id).exists(),
        "the older copy of a proven duplicate stays"
    );
    assert!(dir.join("chat.json").is_file());
}

// ---------------------------------------------------------------------------------------------
// 2. A committed chat.json naming external files
// ---------------------------------------------------------------------------------------------

/// Plants a chat in the project (as a repository would ship it) whose context and history name
/// `paths` (absolute, outside the project), and makes it the active chat.
fn plant_chat(env: &Env, id: &str, paths: &[String]) {
    let files: Vec<Value> = paths
        .iter()
        .map(|p| json!({"path": p, "readonly": true, "external": true, "version": "0123456789abcdef"}))
        .collect();
    let snapshot: Vec<Value> = paths
        .iter()
        .map(|p| json!({"path": p, "file_id": "fedcba9876543210"}))
        .collect();
    let chat = json!({
        "version": 2, "id": id, "name": "planted", "created": "2025-01-01T00:00:00Z",
        "model": DEFAULT_MODEL, "context_files": files, "draft": "",
        "messages": [
            {"role": "user", "parts": [{"type": "text", "content": "q"}], "context_snapshot": snapshot},
            {"role": "assistant", "parts": [{"type": "text", "content": "a"}]}
        ]
    });
    let dir = env.chat_dir(id);
    fs::create_dir_all(dir.join("context")).unwrap();
    fs::write(dir.join("chat.json"), chat.to_string()).unwrap();
    fs::write(
        env.chats().join("index.json"),
        json!({"chats": [{"id": id, "name": "planted"}], "active_chat_id": id}).to_string(),
    )
    .unwrap();
}

#[test]
fn a_committed_chat_cannot_make_the_host_read_external_files() {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.close_stdin();
    s.wait_exit();
    let secret = env.outside().join("id_rsa");
    fs::write(&secret, format!("{SECRET}\n")).unwrap();
    let present = secret.to_str().unwrap().to_string();
    let absent = env.outside().join("nope").to_str().unwrap().to_string();
    let id = "20250101-000000-planted";
    plant_chat(&env, id, &[present.clone(), absent.clone()]);

    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": id}));
    let warnings_of = |r: &Value| -> Vec<Value> {
        r["context_warnings"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    for req in [
        json!({"action": "fork_chat", "chat_id": id, "fork_message_index": 0}),
        json!({"action": "chat_new_with_context", "source_chat_id": id}),
        json!({"action": "chat_edit", "chat_id": id, "message_index": 0, "content": "again"}),
    ] {
        if req["action"] != "fork_chat" && req["action"] != "chat_new_with_context" {
            s.ok(json!({"action": "chat_select", "id": id}));
        }
        let r = s.ok(req.clone());
        no_leak(&r, &req.to_string());
        // An existing and a missing file get the same warning: existence is not revealed.
        let w = warnings_of(&r);
        if !w.is_empty() {
            let strip = |v: &Value, p: &str| v.to_string().replace(p, "P");
            let a = w.iter().find(|x| x["path"] == present.as_str()).unwrap();
            let b = w.iter().find(|x| x["path"] == absent.as_str()).unwrap();
            assert_eq!(strip(a, &present), strip(b, &absent), "{r}");
        }
        let ctx = s.ok(json!({"action": "context_list"}));
        no_leak(&ctx, "context_list");
        for f in ctx["files"].as_array().unwrap() {
            let c = s.req(json!({"action": "get_context_file", "path": f["path"]}));
            no_leak(&c, "get_context_file");
        }
        let est = s.ok(json!({"action": "estimate_tokens"}));
        no_leak(&est, "estimate_tokens");
    }
    // context_sync of the planted path re-reads nothing either.
    s.ok(json!({"action": "chat_select", "id": id}));
    s.req(json!({"action": "context_sync", "path": present}));
    no_secret_under(&env.bb7());
}

/// A planted chat whose in-project context file is a symlink out of the project (`leak ->
/// ~/.ssh/id_rsa`) is moved to the global store: the file becomes an absolute path there, and must
/// not become one the host re-reads (which would follow the link), because the project rule never
/// read it in the first place.
#[test]
fn a_planted_project_link_is_not_trusted_after_a_move_to_global() {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.close_stdin();
    s.wait_exit();
    let secret = env.outside().join("id_rsa");
    fs::write(&secret, format!("{SECRET}\n")).unwrap();
    symlink(&secret, env.proj().join("leak")).unwrap();
    fs::write(env.proj().join("real.txt"), "a real project file\n").unwrap();
    let id = "20250101-000000-linked";
    let chat = json!({
        "version": 2, "id": id, "name": "planted", "created": "2025-01-01T00:00:00Z",
        "model": DEFAULT_MODEL, "draft": "",
        "context_files": [
            {"path": "leak", "readonly": false, "external": false, "version": "0123456789abcdef"},
            {"path": "real.txt", "readonly": false, "external": false, "version": "0123456789abcdef"}
        ],
        "messages": []
    });
    let dir = env.chat_dir(id);
    fs::create_dir_all(dir.join("context")).unwrap();
    fs::write(dir.join("context/leak"), "planted snapshot\n").unwrap();
    fs::write(dir.join("context/real.txt"), "old snapshot\n").unwrap();
    fs::write(dir.join("chat.json"), chat.to_string()).unwrap();
    fs::write(
        env.chats().join("index.json"),
        json!({"chats": [{"id": id, "name": "planted"}], "active_chat_id": id}).to_string(),
    )
    .unwrap();

    let mut s = env.start();
    s.ok(json!({"action": "chat_move", "id": id, "to": "global"}));
    let r = s.ok(json!({"action": "chat_new_with_context", "source_chat_id": id, "global": true}));
    no_leak(&r, "chat_new_with_context");
    let ctx = s.ok(json!({"action": "context_list"}));
    no_leak(&ctx, "context_list");
    let mut real_reread = false;
    for f in ctx["files"].as_array().unwrap() {
        let c = s.req(json!({"action": "get_context_file", "path": f["path"]}));
        no_leak(&c, "get_context_file");
        real_reread |= c["content"] == "a real project file\n";
    }
    assert!(
        real_reread,
        "a real project file is still re-read after the move: {ctx}"
    );
    let est = s.ok(json!({"action": "estimate_tokens"}));
    no_leak(&est, "estimate_tokens");
    no_secret_under(&env.home().join(".bb7"));
}

#[test]
fn external_files_the_user_added_are_still_re_read() {
    let (env, mut s) = start();
    let _id = new_chat(&mut s, "ext");
    let ext = env.outside().join("notes.txt");
    fs::write(&ext, "v1\n").unwrap();
    let p = ext.to_str().unwrap().to_string();
    s.ok(json!({"action": "context_add", "path": p, "content": "v1\n"}));
    fs::write(&ext, "v2\n").unwrap();
    let id = s.ok(json!({"action": "chat_active"}))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.ok(json!({"action": "chat_new_with_context", "source_chat_id": id}));
    let _ = r;
    let c = s.ok(json!({"action": "get_context_file", "path": p}));
    assert_eq!(c["content"], "v2\n", "{c}");
}

/// Fails when any file under `dir` holds [`SECRET`].
fn no_secret_under(dir: &Path) {
    for entry in walk(dir) {
        if entry.is_file() {
            let bytes = fs::read(&entry).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(SECRET),
                "{} holds the secret",
                entry.display()
            );
        }
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// 3. Symlinks in the project
// ---------------------------------------------------------------------------------------------

#[test]
fn diff_paths_apply_and_diff_local_done_follow_no_link() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "links");
    fs::create_dir_all(env.proj().join(".git/hooks")).unwrap();
    fs::write(env.proj().join(".git/config"), "[core]\n").unwrap();
    symlink(env.outside(), env.proj().join("out")).unwrap();
    symlink(".git/hooks", env.proj().join("hooks")).unwrap();
    symlink(".git/config", env.proj().join("cfg")).unwrap();
    let before = env.outside_state();
    for (rel, content) in [
        ("out/x.txt", "MODEL\n"),
        ("hooks/pre-commit", "#!/bin/sh\n"),
        ("cfg", "[evil]\n"),
    ] {
        env.write_output(&id, rel, content);
        let r = s.req(json!({"action": "get_diff_paths", "path": rel}));
        assert_eq!(r["type"], "error", "{rel}: {r}");
        assert!(
            r["message"].as_str().unwrap().contains("symbolic link"),
            "{r}"
        );
        let r = s.req(json!({"action": "apply_file", "path": rel}));
        assert_eq!(r["type"], "error", "{rel}: {r}");
        let r = s.req(json!({"action": "apply_file_as", "path": rel, "destination": rel}));
        assert_eq!(r["type"], "error", "{rel}: {r}");
    }
    // The user "saves" the output through the link (what the editor would do): not an apply.
    fs::write(env.outside().join("x.txt"), "MODEL\n").unwrap();
    let r = s.ok(json!({"action": "diff_local_done", "path": "out/x.txt"}));
    assert_eq!(r["outcome"], "none", "{r}");
    fs::remove_file(env.outside().join("x.txt")).unwrap();
    assert_eq!(before, env.outside_state());
    assert!(!env.proj().join(".git/hooks/pre-commit").exists());
    assert_eq!(
        fs::read_to_string(env.proj().join(".git/config")).unwrap(),
        "[core]\n"
    );
    let chat = env.chat_json(&id);
    assert!(!chat.to_string().contains("UserApplyFile"), "{chat}");
    // A real directory still works, and a new folder is fine for the editor to create.
    env.write_output(&id, "src/new/a.txt", "A\n");
    let r = s.ok(json!({"action": "get_diff_paths", "path": "src/new/a.txt"}));
    assert_eq!(
        r["local_path"],
        env.proj().join("src/new/a.txt").to_str().unwrap()
    );
}

/// A racing local process swaps a project directory for a symlink into `.git/` (rename-exchange,
/// atomically) again and again while applies run: every apply either lands in the real directory or
/// is refused; none is redirected into `.git/` (the walk opens each directory with `O_NOFOLLOW`
/// from the one before, never check-then-open by name).
#[test]
fn an_apply_racing_a_directory_swap_never_lands_in_git() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (env, mut s) = start();
    let id = new_chat(&mut s, "race");
    fs::create_dir_all(env.proj().join(".git/hooks")).unwrap();
    fs::create_dir_all(env.proj().join("sub")).unwrap();
    symlink(".git/hooks", env.proj().join("alt")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = {
        let (stop, proj) = (stop.clone(), env.proj());
        std::thread::spawn(move || {
            let a = std::ffi::CString::new(proj.join("sub").into_os_string().into_encoded_bytes())
                .unwrap();
            let b = std::ffi::CString::new(proj.join("alt").into_os_string().into_encoded_bytes())
                .unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let r = unsafe {
                    libc::renameat2(
                        libc::AT_FDCWD,
                        a.as_ptr(),
                        libc::AT_FDCWD,
                        b.as_ptr(),
                        libc::RENAME_EXCHANGE,
                    )
                };
                assert_eq!(r, 0, "renameat2: {}", std::io::Error::last_os_error());
                n += 1;
            }
            n
        })
    };
    let (mut applied, mut refused) = (0, 0);
    for i in 0..300 {
        let content = format!("#!/bin/sh\necho {i}\n");
        env.write_output(&id, "sub/pre-commit", &content);
        let r = s.req(json!({"action": "apply_file", "path": "sub/pre-commit"}));
        if r["type"] == "error" {
            refused += 1;
        } else {
            applied += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let n = swaps.join().unwrap();
    assert!(n > 100, "the race must actually run ({n} swaps)");
    assert!(
        !env.proj().join(".git/hooks/pre-commit").exists(),
        "an apply was redirected into .git/ through the swapped-in symlink ({applied} applied, {refused} refused)"
    );
    assert!(
        applied > 0,
        "no apply succeeded in {} tries",
        applied + refused
    );
}

#[test]
fn instructions_include_no_link_and_nothing_under_git() {
    let (env, mut s) = start();
    new_chat(&mut s, "inst");
    fs::create_dir_all(env.proj().join(".git")).unwrap();
    fs::write(
        env.proj().join(".git/config"),
        format!("[remote] url = https://{SECRET}@example.invalid/x\n"),
    )
    .unwrap();
    fs::write(env.proj().join("docs.md"), "DOCS\n").unwrap();
    symlink(".git/config", env.proj().join("cfg")).unwrap();
    symlink(".git", env.proj().join("g")).unwrap();
    for inc in [
        "cfg",
        ".git/config",
        "g/config",
        "./.git/config",
        "docs.md/../.git/config",
    ] {
        fs::write(env.bb7().join("instructions"), format!("@include {inc}\n")).unwrap();
        let r = s.ok(json!({"action": "get_customization_info"}));
        no_leak(&r, inc);
        assert_eq!(r["project_instructions"], false, "{inc}: {r}");
        assert!(
            !r["project_instructions_error"]
                .as_str()
                .unwrap_or("")
                .is_empty(),
            "{inc}: {r}"
        );
        let est = s.ok(json!({"action": "estimate_tokens"}));
        no_leak(&est, inc);
    }
    fs::write(env.bb7().join("instructions"), "@include docs.md\n").unwrap();
    let r = s.ok(json!({"action": "get_customization_info"}));
    assert_eq!(r["project_instructions"], true, "{r}");
}

/// Issue 23: `@include` of a hard link to a file outside the project reached the model. The agent's
/// retrieval tools refuse a file with more than one link (it may be the same file as one outside
/// the project); `@include` now uses the same rule.
#[test]
fn instructions_include_refuses_a_hard_link_to_an_outside_file() {
    let (env, mut s) = start();
    new_chat(&mut s, "inst");
    let outside = env.outside().join("credentials");
    fs::write(&outside, format!("token = {SECRET}\n")).unwrap();
    fs::hard_link(&outside, env.proj().join("notes.md")).unwrap();
    fs::write(env.bb7().join("instructions"), "@include notes.md\n").unwrap();
    let r = s.ok(json!({"action": "get_customization_info"}));
    no_leak(&r, "@include of a hard link");
    assert_eq!(r["project_instructions"], false, "{r}");
    let err = r["project_instructions_error"].as_str().unwrap_or("");
    assert!(err.contains("hard link"), "{r}");
    let est = s.ok(json!({"action": "estimate_tokens"}));
    no_leak(&est, "@include of a hard link");
    // Control: once the file has a single link again it is included.
    fs::remove_file(&outside).unwrap();
    let r = s.ok(json!({"action": "get_customization_info"}));
    assert_eq!(r["project_instructions"], true, "{r}");
}

// ---------------------------------------------------------------------------------------------
// 4. .bb7 replaced after init
// ---------------------------------------------------------------------------------------------

#[test]
fn a_state_dir_replaced_after_init_is_not_followed() {
    let (env, mut s) = start();
    new_chat(&mut s, "x");
    fs::write(env.bb7().join("instructions"), "MINE\n").unwrap();
    let evil = env.outside().join("evil");
    fs::create_dir_all(&evil).unwrap();
    fs::write(evil.join("instructions"), format!("{SECRET}\n")).unwrap();
    fs::rename(env.bb7(), env.proj().join("real-state")).unwrap();
    symlink(&evil, env.bb7()).unwrap();
    let r = s.ok(json!({"action": "estimate_tokens"}));
    no_leak(&r, "estimate_tokens");
    let r = s.ok(json!({"action": "get_customization_info"}));
    assert_eq!(
        r["project_instructions"], true,
        "the held directory is still used: {r}"
    );
    fs::remove_file(evil.join("instructions")).unwrap();
    let before = env.outside_state();
    let r = s.req(json!({"action": "prepare_instructions", "level": "project"}));
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(before, env.outside_state(), "nothing created outside");
}

// ---------------------------------------------------------------------------------------------
// 6. Special and huge files in .bb7/
// ---------------------------------------------------------------------------------------------

#[test]
fn fifos_in_the_state_dir_never_block_the_host() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "fifo");
    s.ok(json!({"action": "context_add", "path": "a.txt", "content": "A\n"}));
    let other = new_chat(&mut s, "other");
    let locked = new_chat(&mut s, "locked");
    s.close_stdin();
    s.wait_exit();
    mkfifo(&env.chat_dir(&locked).join("lock"));
    let dir = env.chat_dir(&id);
    for rel in ["context/a.txt", "output/b.txt"] {
        let p = dir.join(rel);
        let _ = fs::remove_file(&p);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        mkfifo(&p);
    }
    let od = env.chat_dir(&other);
    fs::remove_file(od.join("chat.json")).unwrap();
    mkfifo(&od.join("chat.json"));
    fs::remove_file(env.chats().join("index.json")).unwrap();
    mkfifo(&env.chats().join("index.json"));

    // Every request is answered within the client's timeout (10 s per reply): a host blocked on
    // a FIFO would fail that wait, so no clock is needed here.
    let mut s = env.start();
    s.ok(json!({"action": "chat_list"}));
    s.ok(json!({"action": "chat_select", "id": id}));
    s.ok(json!({"action": "get_file_statuses"}));
    s.ok(json!({"action": "estimate_tokens"}));
    s.req(json!({"action": "chat_select", "id": other}));
    s.req(json!({"action": "chat_select", "id": locked}));
    s.ok(json!({"action": "ping"}));
    s.shutdown_noisy();
}

#[test]
fn a_huge_sparse_output_file_does_not_abort_the_host() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "huge");
    let p = env.output_path(&id, "big.log");
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    let f = fs::File::create(&p).unwrap();
    f.set_len(2 << 30).unwrap();
    s.ok(json!({"action": "get_file_statuses"}));
    s.ok(json!({"action": "estimate_tokens"}));
    s.req(json!({"action": "get_output_file", "path": "big.log"}));
    s.req(json!({"action": "apply_file", "path": "big.log"}));
    assert!(!env.proj().join("big.log").exists());
    s.ok(json!({"action": "ping"}));
}

// ---------------------------------------------------------------------------------------------
// 7. All or nothing
// ---------------------------------------------------------------------------------------------

#[test]
fn an_apply_whose_snapshot_cannot_be_written_changes_nothing() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "atomic");
    env.write_local("src/a.txt", "old\n");
    s.ok(json!({"action": "context_add", "path": "src/a.txt", "content": "old\n"}));
    env.write_output(&id, "src/a.txt", "new\n");
    // The snapshot's directory is made unusable (a file where the directory must be).
    let ctx = env.chat_dir(&id).join("context/src");
    fs::remove_dir_all(&ctx).unwrap();
    fs::write(&ctx, "not a directory").unwrap();
    let r = s.req(json!({"action": "apply_file", "path": "src/a.txt"}));
    assert_eq!(r["type"], "error", "{r}");
    assert_eq!(
        fs::read_to_string(env.proj().join("src/a.txt")).unwrap(),
        "old\n"
    );
    assert!(
        env.output_path(&id, "src/a.txt").is_file(),
        "the output stays"
    );
    // apply_file_as likewise, to a new name under the broken directory.
    let r =
        s.req(json!({"action": "apply_file_as", "path": "src/a.txt", "destination": "src/b.txt"}));
    assert_eq!(r["type"], "error", "{r}");
    assert!(!env.proj().join("src/b.txt").exists());
}

#[test]
fn apply_as_keeps_the_destination_s_own_output() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "as");
    env.write_output(&id, "a.txt", "A from model\n");
    env.write_output(&id, "b.txt", "B from model\n");
    s.ok(json!({"action": "apply_file_as", "path": "a.txt", "destination": "b.txt"}));
    assert_eq!(
        fs::read_to_string(env.proj().join("b.txt")).unwrap(),
        "A from model\n"
    );
    assert!(!env.output_path(&id, "a.txt").exists());
    assert_eq!(
        fs::read_to_string(env.output_path(&id, "b.txt")).unwrap(),
        "B from model\n"
    );
}

// ---------------------------------------------------------------------------------------------
// 8, 9. Components: size bound, compile time audited, tampered cache entries
// ---------------------------------------------------------------------------------------------

#[test]
fn an_oversized_component_is_refused_before_compiling() {
    let home = common::Home::new();
    let big = home.path().join("big.wasm");
    let f = fs::File::create(&big).unwrap();
    f.set_len(65 << 20).unwrap();
    fs::create_dir_all(home.path().join("d")).unwrap();
    let out = home.run(&[
        "tools",
        "call",
        "x",
        "--component",
        big.to_str().unwrap(),
        "--dir",
        home.path().join("d").to_str().unwrap(),
        "--args",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    // Refused by its size, before anything read or compiled it: 65 MiB of zeros is no
    // component, and compiling it would fail with another error.
    assert!(err.contains("at most 64 MiB"), "{err}");
    assert!(!err.contains("compil"), "{err}");
}

#[test]
fn a_tampered_cache_entry_is_recompiled_never_loaded() {
    let home = common::Home::new();
    let cache = home.path().join("cache");
    let run = |args: &[&str]| {
        let mut c = home.cmd();
        c.env("BB7_CACHE_DIR", &cache).args(args);
        c.output().unwrap()
    };
    let work = home.path().join("w");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("a.txt"), "hello\n").unwrap();
    // Built-ins run code precompiled into the binary and never touch the cache, so the cached
    // component here is a third-party one: the read_file component's file, loaded with --component.
    let target = Path::new(env!("CARGO_BIN_EXE_bb7"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf();
    let component = home.path().join("reader.wasm");
    fs::copy(
        target.join("wasm-guest/wasm32-wasip2/release/bb7_tool_read_file.wasm"),
        &component,
    )
    .expect("the build leaves the read_file component under <target>/wasm-guest");
    let call = |log: &str| {
        run(&[
            "tools",
            "call",
            "read_file",
            "--component",
            component.to_str().unwrap(),
            "--access",
            "read-only",
            "--dir",
            work.to_str().unwrap(),
            "--args",
            r#"{"file_path":"a.txt"}"#,
            "--audit-log",
            home.path().join(log).to_str().unwrap(),
        ])
    };
    let out = call("first.jsonl");
    assert!(out.status.success(), "{out:?}");
    // The audit chain's first record is the call (a signed checkpoint follows it).
    let first: Value = serde_json::from_str(
        fs::read_to_string(home.path().join("first.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(first["compile_ms"].as_f64().is_some(), "{first}");
    // Tamper with every artifact (flip a byte in the middle) and with one tag.
    let mut artifacts = Vec::new();
    for p in walk(&cache) {
        if p.extension().is_some_and(|e| e == "cwasm") {
            let mut b = fs::read(&p).unwrap();
            let mid = b.len() / 2;
            b[mid] ^= 0xff;
            fs::write(&p, &b).unwrap();
            artifacts.push((p, b));
        }
    }
    assert!(!artifacts.is_empty(), "the first run must fill the cache");
    let out = call("second.jsonl");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello"));
    // The read_file artifact was replaced by a fresh compile (its bytes differ from the tampered ones).
    let replaced = artifacts
        .iter()
        .filter(|(p, b)| fs::read(p).map(|now| &now != b).unwrap_or(true))
        .count();
    assert!(replaced >= 1, "a tampered artifact was kept");
}

// ---------------------------------------------------------------------------------------------
// Checkpoints are input too: a repository can ship .bb7/checkpoints/
// ---------------------------------------------------------------------------------------------

/// A planted checkpoint record whose files name `.git/hooks/pre-commit` or a path out of the
/// project: listing skips it and rolling it back writes nothing (a git hook would run code).
#[test]
fn a_planted_checkpoint_cannot_roll_back_into_git_or_outside() {
    use sha2::{Digest, Sha256};
    let (env, mut s) = start();
    new_chat(&mut s, "c");
    let hook = "#!/bin/sh\necho pwned > /tmp/bb7-pwned\n";
    let hash = format!("sha256:{}", hex::encode(Sha256::digest(hook.as_bytes())));
    for (id, path) in [
        ("20260101-000000-000000-aaaa", ".git/hooks/pre-commit"),
        ("20260101-000000-000000-bbbb", "../outside/planted.txt"),
        ("20260101-000000-000000-cccc", "sub/.GIT/config"),
    ] {
        let dir = env.bb7().join("checkpoints").join(id);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("0.before"), hook).unwrap();
        let rec = json!({
            "id": id, "created": "2026-01-01T00:00:00Z", "chat_id": null, "kind": "apply_file",
            "state": "done", "pid": 1,
            "files": [{"path": path, "before_hash": hash, "after_hash": null, "blob": 0}],
        });
        fs::write(dir.join("checkpoint.json"), rec.to_string()).unwrap();
        let e = s
            .err(json!({"action": "checkpoint_rollback", "checkpoint_id": id, "mode": "hard_all"}));
        assert!(!e.is_empty());
    }
    let r = s.ok(json!({"action": "checkpoint_list"}));
    assert_eq!(r["checkpoints"], json!([]), "{r}");
    assert!(!env.proj().join(".git/hooks/pre-commit").exists());
    assert!(!env.proj().join("sub").exists());
    assert!(
        !env.proj()
            .parent()
            .unwrap()
            .join("outside/planted.txt")
            .exists()
    );
}

/// `.bb7/checkpoints` replaced by a symlink to a directory elsewhere: no checkpoint is written
/// there (the checkpoints directory is opened without following links from the held `.bb7/`).
#[test]
fn a_symlinked_checkpoints_dir_is_refused() {
    let (env, mut s) = start();
    let id = new_chat(&mut s, "c");
    let elsewhere = env.home().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let _ = fs::remove_dir_all(env.bb7().join("checkpoints"));
    symlink(&elsewhere, env.bb7().join("checkpoints")).unwrap();
    env.write_local("a.txt", "old\n");
    env.write_output(&id, "a.txt", "new\n");
    let e = s.err(json!({"action": "apply_file", "path": "a.txt"}));
    assert!(e.contains("checkpoints"), "{e}");
    assert_eq!(
        fs::read_to_string(env.proj().join("a.txt")).unwrap(),
        "old\n"
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}
