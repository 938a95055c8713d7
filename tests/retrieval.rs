//! The agent's retrieval tools through the real `bb7` binary, for issue 23:
//!
//! - item 8: `search_project` searches a file to its real end (2 MiB), not to the end of the
//!   first short read (it stopped at 176 KiB inside the component);
//! - item 4: on a real case-insensitive file system (exFAT through `exfat-fuse`), `.GIT/config`,
//!   `.ENV` and `server.PEM` are `.git/config`, `.env` and a key: the retrieval tools (called
//!   directly and by a scripted model in agent mode), `@include` and apply refuse them in any case.
//!
//! The exFAT tests mount a file system, which needs root: they are `#[ignore]`d so that a plain
//! `cargo test` as a user skips them visibly, and `scripts/test` runs them with `--ignored` when it
//! runs as root (as CI does), after installing `exfat-fuse` and `exfatprogs` if they are missing.
//! Run as root, a test that cannot mount fails loudly; it never passes without the mount.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::{Bb7, Env, write_file};
use common::{Home, ok_json, stderr, stdout};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Item 8: search to the end of the file
// ---------------------------------------------------------------------------------------------

#[test]
fn search_project_finds_matches_to_the_end_of_a_2_mib_file() {
    const MAX: usize = 2 * 1024 * 1024;
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = vec![b'x'; MAX];
    for i in (63..MAX).step_by(64) {
        bytes[i] = b'\n';
    }
    let needle = b"NEEDLE";
    // Matches at 100 KiB, 1 MiB and ending on the file's last byte (2 MiB - 1).
    let offsets = [100 * 1024, 1024 * 1024, MAX - needle.len()];
    for at in offsets {
        bytes[at..at + needle.len()].copy_from_slice(needle);
    }
    std::fs::write(dir.path().join("big.txt"), &bytes).unwrap();
    let line = |at: usize| bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let v = ok_json(&home.call("search_project", dir.path(), r#"{"query":"NEEDLE"}"#, &[]));
    // One snippet per match, each around its line.
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), offsets.len(), "{v}");
    for (r, at) in results.iter().zip(offsets) {
        let n = line(at) as u64;
        assert_eq!(r["file_path"], "big.txt", "{v}");
        let (start, end) = (
            r["start_line"].as_u64().unwrap(),
            r["end_line"].as_u64().unwrap(),
        );
        assert!(start <= n && n <= end, "match at byte {at} (line {n}): {r}");
        assert!(r["snippet"].as_str().unwrap().contains("NEEDLE"), "{r}");
    }
    // read_file reads the end of the same file too.
    let v = ok_json(&home.call(
        "read_file",
        dir.path(),
        &json!({"file_path": "big.txt", "start_line": line(MAX - 1)}).to_string(),
        &[],
    ));
    assert!(v["content"].as_str().unwrap().ends_with("NEEDLE"), "{v}");
}

// ---------------------------------------------------------------------------------------------
// Item 4: a real case-insensitive file system
// ---------------------------------------------------------------------------------------------

const NEEDS_ROOT: &str = "mounts an exFAT image (exfat-fuse on a loop device), which needs root: \
                          scripts/test runs it with --ignored as root";

const SECRET: &str = "CASELESS-SECRET-5e0b";

/// An exFAT file system mounted (through `exfat-fuse`) on a directory for one test; unmounted and
/// its loop device detached when dropped.
struct Exfat {
    _image: tempfile::TempDir,
    device: String,
    mountpoint: PathBuf,
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| {
        panic!(
            "cannot run {cmd} ({e}); scripts/test installs exfat-fuse and exfatprogs when it runs as root"
        )
    });
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Exfat {
    /// Mounts a fresh 64 MiB exFAT file system on `mountpoint` (an empty directory), and checks that
    /// it really is case-insensitive. Panics with the reason when it cannot.
    fn mount(mountpoint: &Path) -> Exfat {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "this test {NEEDS_ROOT}; it runs as uid {euid}");
        let image = tempfile::tempdir().unwrap();
        let file = image.path().join("exfat.img");
        std::fs::File::create(&file)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let file = file.to_str().unwrap();
        run("mkfs.exfat", &[file]);
        let device = run("losetup", &["-f", "--show", file]);
        let fs = Exfat {
            _image: image,
            device,
            mountpoint: mountpoint.to_path_buf(),
        };
        run(
            "mount.exfat-fuse",
            &[&fs.device, mountpoint.to_str().unwrap()],
        );
        // Positive control: the mount is there and ignores case.
        std::fs::write(mountpoint.join("Probe.txt"), "x").unwrap();
        assert!(
            mountpoint.join("PROBE.TXT").is_file(),
            "{} is not a case-insensitive mount",
            mountpoint.display()
        );
        std::fs::remove_file(mountpoint.join("probe.txt")).unwrap();
        fs
    }
}

impl Drop for Exfat {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.mountpoint)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.mountpoint)
                .status();
        }
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

/// The secrets planted on the mount, as they are written, and other spellings that name them there.
fn plant(dir: &Path) -> Vec<&'static str> {
    for (rel, content) in [
        (".git/config", format!("[remote] token = {SECRET}\n")),
        (".env", format!("TOKEN={SECRET}\n")),
        ("certs/server.PEM", format!("token {SECRET}\n")),
        (".aws/credentials", format!("token = {SECRET}\n")),
        ("a.txt", "token = visible\n".to_string()),
    ] {
        write_file(&dir.join(rel), &content);
    }
    vec![
        ".GIT/config",
        ".Git/CONFIG",
        ".ENV",
        "certs/server.PEM",
        "CERTS/SERVER.pem",
        ".AWS/Credentials",
    ]
}

#[test]
#[ignore = "mounts an exFAT image, which needs root: scripts/test runs it with --ignored as root"]
fn exfat_retrieval_tools_refuse_git_and_secrets_in_any_case() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let _fs = Exfat::mount(&mnt);
    let spellings = plant(&mnt);
    let home = Home::new();
    for p in &spellings {
        let out = home.call(
            "read_file",
            &mnt,
            &json!({ "file_path": p }).to_string(),
            &[],
        );
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(!out.status.success(), "read_file {p} succeeded: {text}");
        assert!(!text.contains(SECRET), "read_file {p}: {text}");
    }
    // Control: the mount answers any case for an ordinary file.
    let v = ok_json(&home.call("read_file", &mnt, r#"{"file_path":"A.TXT"}"#, &[]));
    assert_eq!(v["content"], "token = visible\n", "{v}");
    let v = ok_json(&home.call("search_project", &mnt, r#"{"query":"token"}"#, &[]));
    assert!(!v.to_string().contains(SECRET), "{v}");
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1), "{v}");
    let v = ok_json(&home.call("list_files", &mnt, "{}", &[]));
    assert_eq!(v["files"], json!(["a.txt"]), "{v}");
}

/// Agent mode on a project whose `vendor/` is an exFAT file system (bb7's own `.bb7/` stays on the
/// ordinary one: bb7 cannot create a chat on exFAT, which refuses its `Operation not permitted`):
/// a scripted model asks for `vendor/.GIT/config`, `vendor/.ENV`, `vendor/CERTS/SERVER.pem` and
/// searches; `@include vendor/.GIT/config` is refused; an apply to `vendor/.GIT/config` is refused.
/// Nothing of the secrets reaches the model or the client.
#[test]
#[ignore = "mounts an exFAT image, which needs root: scripts/test runs it with --ignored as root"]
fn exfat_agent_mode_include_and_apply_refuse_git_and_secrets_in_any_case() {
    let env = Env::new();
    let vendor = env.proj().join("vendor");
    std::fs::create_dir(&vendor).unwrap();
    let _fs = Exfat::mount(&vendor);
    let spellings = plant(&vendor);
    let mut calls: Vec<ToolCall> = spellings
        .iter()
        .enumerate()
        .map(|(i, p)| {
            ToolCall::new(
                i as u32,
                format!("r{i}"),
                "read_file",
                json!({ "file_path": format!("vendor/{p}") }).to_string(),
            )
        })
        .collect();
    let n = calls.len() as u32;
    calls.push(ToolCall::new(
        n,
        "s",
        "search_project",
        r#"{"query":"token"}"#,
    ));
    calls.push(ToolCall::new(n + 1, "l", "list_files", "{}"));
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls(calls),
        Reply::text(["done"]),
    ]));
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url()}).to_string(),
    );
    let mut s: Bb7 = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "chat_new", "name": "t"}));

    // @include in another case.
    write_file(
        &env.bb7().join("instructions"),
        "@include vendor/.GIT/config\n",
    );
    let r = s.ok(json!({"action": "get_customization_info"}));
    assert!(!r.to_string().contains(SECRET), "{r}");
    assert_eq!(r["project_instructions"], false, "{r}");
    write_file(&env.bb7().join("instructions"), "Be brief.\n");

    let rid = s.next_id();
    s.send(
        &json!({"action": "send", "content": "look", "model": "mock/agent",
                   "mode": "agent", "request_id": rid}),
    );
    let want = json!(rid);
    let mut seen = Vec::new();
    let done = loop {
        let v = s.recv_where_for("send event", std::time::Duration::from_secs(120), |v| {
            v.get("request_id") == Some(&want)
        });
        if matches!(v["type"].as_str(), Some("done" | "diff_error" | "error")) {
            break v;
        }
        seen.push(v);
    };
    assert_eq!(done["type"], "done", "{done}");
    for v in &seen {
        assert!(!v.to_string().contains(SECRET), "an event leaks: {v}");
    }
    let requests: Vec<Value> = server.chat_requests().into_iter().map(|r| r.body).collect();
    assert_eq!(requests.len(), 2);
    let second = requests[1].to_string();
    assert!(
        !second.contains(SECRET),
        "the model read a secret: {second}"
    );
    // Control: the tools ran and the visible file was found.
    assert!(second.contains("token = visible"), "{second}");

    // Apply in another case: a chat output for `.GIT/config` is refused.
    let e = s.err(json!({"action": "apply_file", "path": "vendor/.GIT/config"}));
    assert!(e.contains(".GIT"), "{e}");
    assert_eq!(
        std::fs::read_to_string(vendor.join(".git/config")).unwrap(),
        format!("[remote] token = {SECRET}\n")
    );
    s.shutdown();
}
