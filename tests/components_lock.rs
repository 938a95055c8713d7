//! Changes to the components state (`~/.bb7/tools.json`) from several processes at once (issue 24):
//! `bb7 tools grant | enable | …`, every editor's host and `bb7 mcp` load, change and save the same
//! file, so each change holds a lock on it that holds across processes, and no change is lost.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// The example `wordcount` component (its manifest is embedded).
fn word_count() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        common::wasm::build(
            "examples/tool-components",
            "tool-examples-wasm",
            "word_count.wasm",
        )
    })
}

/// `bb7 tools <args>` as the user of `home`, in `cwd`, not yet waited for.
fn spawn_tools(home: &Path, cwd: &Path, args: &[&str]) -> Child {
    Command::new(common::bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("BB7_CACHE_DIR", common::shared_cache())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .arg("tools")
        .args(args)
        .spawn()
        .expect("spawn bb7")
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "bb7 failed ({:?}):\nstdout: {}\nstderr: {}",
        o.status.code(),
        common::stdout(&o),
        common::stderr(&o)
    );
    // Silent but for `add`'s progress lines (compiling takes seconds for a large component).
    let err: Vec<String> = common::stderr(&o)
        .lines()
        .filter(|l| !l.starts_with("bb7: compiling ") && !l.starts_with("bb7: compiled in "))
        .map(str::to_string)
        .collect();
    assert!(err.is_empty(), "stderr is silent on success: {err:?}");
    common::stdout(&o)
}

/// A user home with `wordcount` installed, and `n` projects (each with `.bb7/`).
struct World {
    root: tempfile::TempDir,
}

impl World {
    fn new(projects: usize) -> World {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        for i in 0..projects {
            std::fs::create_dir_all(root.path().join(format!("p{i}/.bb7"))).unwrap();
        }
        let w = World { root };
        let word_count = word_count().to_str().unwrap();
        ok(spawn_tools(&w.home(), &w.project(0), &["add", word_count])
            .wait_with_output()
            .unwrap());
        w
    }
    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    fn project(&self, i: usize) -> PathBuf {
        self.root.path().join(format!("p{i}"))
    }
    fn state_path(&self) -> PathBuf {
        self.home().join(".bb7/tools.json")
    }
    fn state(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.state_path()).unwrap()).unwrap()
    }
    /// The projects `wordcount` is enabled in, by canonical path.
    fn enabled_in(&self) -> Vec<String> {
        let state = self.state();
        let mut out: Vec<String> = state["projects"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(_, p)| {
                        p["enabled"]
                            .as_array()
                            .is_some_and(|e| e.iter().any(|n| n == "wordcount"))
                    })
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }
    fn key(&self, i: usize) -> String {
        self.project(i)
            .canonicalize()
            .unwrap()
            .display()
            .to_string()
    }
}

/// Whether process `pid` waits for a file lock (`/proc/locks` lists a waiter as `-> FLOCK …`).
fn waits_for_a_lock(pid: u32) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"->") && f.get(5) == Some(&pid.to_string().as_str())
    })
}

/// A change made by another process while it holds the state's lock is neither overwritten nor
/// interleaved: `bb7 tools enable` waits for the lock (it is seen waiting in `/proc/locks`), then
/// loads the state the other process saved and adds its own change to it. Before the lock held
/// across processes (a Mutex inside one process), `enable` went ahead, and whichever save came
/// last erased the other's change.
#[test]
fn a_change_waits_for_another_process_holding_the_state_lock_and_loses_nothing() {
    let w = World::new(2);
    let lock_path = w.home().join(".bb7/tools.json.lock");
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();

    let mut child = spawn_tools(&w.home(), &w.project(0), &["enable", "wordcount"]);
    let pid = child.id();
    // Wait until bb7 waits for the lock; if it exits first, it changed the state without it.
    loop {
        if waits_for_a_lock(pid) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "bb7 tools enable finished ({status}) while another process held the state lock:\n{}{}",
                common::stdout(&out),
                common::stderr(&out)
            );
        }
        std::thread::yield_now();
    }
    // The other process's change, saved while it holds the lock: enabled in project 1.
    let mut state = w.state();
    state["projects"][w.key(1)] = serde_json::json!({"enabled": ["wordcount"]});
    std::fs::write(w.state_path(), serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    drop(held);

    let out = ok(child.wait_with_output().unwrap());
    assert!(out.contains("wordcount: enabled"), "{out}");
    let mut want = vec![w.key(0), w.key(1)];
    want.sort();
    assert_eq!(w.enabled_in(), want, "both changes are in the state");
}

/// Many processes granting and enabling at once: every change is in the state afterwards.
#[test]
fn parallel_grants_and_enables_lose_no_change() {
    const N: usize = 8;
    let w = World::new(N);
    let mut children: Vec<Child> = (0..N)
        .map(|i| spawn_tools(&w.home(), &w.project(i), &["enable", "wordcount"]))
        .collect();
    children.push(spawn_tools(
        &w.home(),
        &w.project(0),
        &["grant", "wordcount", "--all"],
    ));
    for c in children {
        ok(c.wait_with_output().unwrap());
    }
    let mut want: Vec<String> = (0..N).map(|i| w.key(i)).collect();
    want.sort();
    assert_eq!(w.enabled_in(), want, "every enable is in the state");
    assert_eq!(
        w.state()["grants"]["wordcount"]["granted"]["files"],
        "project-read",
        "the grant is in the state"
    );
    // Each project's lockfile was written whole (what it lists depends on whether the grant
    // landed before the enable there).
    for i in 0..N {
        let lock = std::fs::read_to_string(w.project(i).join(".bb7/tools.lock")).unwrap();
        assert!(lock.starts_with("# The tool components approved"), "{lock}");
    }
}
