//! End-to-end tests of `bb7 tools list | audit | call` through the real binary: each built-in tool,
//! the audit a security reviewer reads, and the audit record every call leaves.

mod common;

use std::fs;

use common::{Home, file_id, ok_json, stderr, stdout, tool_error};
use serde_json::Value;
use sha2::{Digest, Sha256};

const TOOLS: [&str; 5] = [
    "write_file",
    "edit_file",
    "search_project",
    "read_file",
    "list_files",
];

#[test]
fn version_flag_prints_name_and_version() {
    let home = Home::new();
    let o = home.run(&["--version"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), format!("bb7 {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn list_names_the_five_tools_with_descriptions() {
    let home = Home::new();
    let o = home.run(&["tools", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    for (line, tool) in lines.iter().zip(TOOLS) {
        assert!(line.starts_with(tool), "{line}");
        assert!(
            line.len() > tool.len() + 20,
            "one-line description missing: {line}"
        );
    }
}

/// The component the build embedded (all five built-ins live in one), hashed independently of the
/// host, for each tool.
fn built_component_hashes() -> Vec<(String, String)> {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/wasm-guest/wasm32-wasip2/release/bb7_builtin_tools.wasm");
    let bytes = fs::read(file).expect("built component");
    let sha = hex::encode(Sha256::digest(&bytes));
    TOOLS.iter().map(|t| (t.to_string(), sha.clone())).collect()
}

#[test]
fn audit_json_pins_every_component_and_its_grants() {
    let home = Home::new();
    let doc = ok_json(&home.run(&["tools", "audit", "--json"]));
    let comps = doc["components"].as_array().expect("components");
    assert_eq!(comps.len(), 5);
    let hashes = built_component_hashes();
    for (c, (tool, sha)) in comps.iter().zip(&hashes) {
        assert_eq!(c["name"], tool.as_str());
        assert_eq!(
            c["sha256"],
            sha.as_str(),
            "audit must pin the exact embedded bytes"
        );
        assert_eq!(c["wit_version"], "0.1.0");
        assert_eq!(c["wit_interface"], "bb7:tool/tool@0.1.0");
        assert!(c["size"].as_u64().unwrap() > 1000);
        let grants = &c["grants"];
        assert_eq!(grants["network"], "none");
        assert_eq!(grants["env"], "none");
        assert_eq!(grants["stdio"], "none");
        let dirs = grants["directories"].as_array().unwrap();
        assert_eq!(dirs.len(), 1, "exactly one directory per call");
        let want = if matches!(tool.as_str(), "write_file" | "edit_file") {
            "read-write"
        } else {
            "read-only"
        };
        assert_eq!(dirs[0]["access"], want, "{tool}");
        assert_eq!(dirs[0]["mount"], "/");
        let imports = c["imports"].as_array().unwrap();
        assert!(!imports.is_empty());
        assert!(
            imports
                .iter()
                .map(|i| i.as_str().unwrap())
                .all(|i| i.starts_with("wasi:")
                    || i == "bb7:tool/types@0.1.0"
                    || i == "bb7:host/files@0.1.0"),
            "only WASI, the contract's types-only interface and bb7:host/files (linked for the built-in component only): {imports:?}"
        );
        assert!(
            !imports
                .iter()
                .any(|i| i.as_str().unwrap().starts_with("wasi:sockets")),
            "built-in tools must not even import sockets: {imports:?}"
        );
        assert_eq!(c["limits"]["memory_bytes"], 256u64 << 20);
        assert!(c["limits"]["wall_time_ms"].as_u64().unwrap() > 0);
        assert!(c["limits"]["result_bytes"].as_u64().unwrap() > 0);
    }
}

#[test]
fn audit_text_is_complete_for_a_reviewer() {
    let home = Home::new();
    let o = home.run(&["tools", "audit"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for (tool, sha) in built_component_hashes() {
        assert!(out.contains(&format!("\n{tool}\n")), "{tool} missing");
        assert!(out.contains(&sha), "sha256 of {tool} missing");
    }
    assert_eq!(out.matches("network       none").count(), 5);
    assert_eq!(out.matches("environment   none").count(), 5);
    assert_eq!(out.matches("access        read-write").count(), 2);
    assert_eq!(out.matches("access        read-only").count(), 3);
}

/// Third-party components are compiled once and cached on disk (with an integrity tag); a warm
/// start loads the artifact and behaves the same.
#[test]
fn third_party_components_are_cached_on_disk() {
    let home = Home::new();
    let cache = home.path().join("own-cache");
    let component = home.path().join("reader.wasm");
    fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/wasm-guest/wasm32-wasip2/release/bb7_tool_read_file.wasm"),
        &component,
    )
    .unwrap();
    let work = home.path().join("w");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("a.txt"), "hello\n").unwrap();
    let run = || {
        let o = read_a_txt_with(&home, &component, &work)
            .env("BB7_CACHE_DIR", &cache)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let first = run();
    assert!(first.contains("hello"), "{first}");
    let files = walk(&cache);
    let artifacts = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .count();
    let tags = files
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".cwasm.tag"))
        .count();
    assert_eq!((artifacts, tags), (1, 1), "{files:?}");
    assert_eq!(run(), first, "a warm start behaves the same");
}

/// `bb7` links no compiler: a third-party component is compiled by `bb7-compile` (beside `bb7`, or
/// `$BB7_COMPILER`) in a process of its own, and without one the call fails saying what to do.
#[test]
fn third_party_components_are_compiled_by_bb7_compile_in_a_process_of_its_own() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new();
    let beside = std::path::Path::new(env!("CARGO_BIN_EXE_bb7")).with_file_name("bb7-compile");
    assert!(beside.is_file(), "the build leaves bb7-compile beside bb7");
    let work = home.path().join("w");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("a.txt"), "hello\n").unwrap();
    let component = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/wasm-guest/wasm32-wasip2/release/bb7_tool_read_file.wasm");
    let call = |compiler: &std::path::Path, cache: &str| {
        read_a_txt_with(&home, &component, &work)
            .env("BB7_COMPILER", compiler)
            .env("BB7_CACHE_DIR", home.path().join(cache))
            .output()
            .unwrap()
    };
    let missing = home.path().join("no-such-compiler");
    let o = call(&missing, "c1");
    assert!(!o.status.success(), "compiled without a compiler");
    let e = stderr(&o);
    assert!(
        e.contains("WebAssembly compiler")
            && e.contains("no-such-compiler")
            && !e.contains("panicked"),
        "{e}"
    );
    // A wrapper that leaves a mark, then runs the real compiler.
    let mark = home.path().join("compiled");
    let wrapper = home.path().join("wrapped-compile");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$$ $1\" >> '{}'\nexec '{}' \"$@\"\n",
            mark.display(),
            beside.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    let o = call(&wrapper, "c2");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("hello"), "{}", stdout(&o));
    let runs = fs::read_to_string(&mark).unwrap();
    assert_eq!(runs.lines().count(), 1, "{runs}");
    assert!(runs.ends_with(" component\n"), "{runs}");
    // Cached: the next start compiles nothing.
    assert!(call(&wrapper, "c2").status.success());
    assert_eq!(fs::read_to_string(&mark).unwrap().lines().count(), 1);
}

/// `bb7 tools call read_file` of the component file `component`, reading `a.txt` in `work`.
fn read_a_txt_with(
    home: &Home,
    component: &std::path::Path,
    work: &std::path::Path,
) -> std::process::Command {
    let mut c = home.cmd();
    c.args(["tools", "call", "read_file", "--component"])
        .arg(component)
        .args(["--access", "read-only", "--dir"])
        .arg(work)
        .args(["--args", r#"{"file_path":"a.txt"}"#]);
    c
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p))
            } else {
                out.push(p)
            }
        }
    }
    out
}

#[test]
fn write_file_creates_and_replaces_and_records_the_call() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let log = home.path().join("audit.jsonl");
    let log_s = log.to_str().unwrap();
    let v = ok_json(&home.call(
        "write_file",
        dir.path(),
        r#"{"path":"src/new.rs","content":"fn main() {}\n"}"#,
        &["--audit-log", log_s],
    ));
    assert_eq!(v["path"], "src/new.rs");
    assert_eq!(v["status"], "added");
    assert_eq!(v["file_id"], file_id("src/new.rs", b"fn main() {}\n"));
    assert_eq!(
        fs::read_to_string(dir.path().join("src/new.rs")).unwrap(),
        "fn main() {}\n"
    );

    let v = ok_json(&home.call(
        "write_file",
        dir.path(),
        r#"{"path":"src/new.rs","content":"x"}"#,
        &["--audit-log", log_s],
    ));
    assert_eq!(v["status"], "modified");
    assert_eq!(
        fs::read_to_string(dir.path().join("src/new.rs")).unwrap(),
        "x"
    );

    // The audit chain also holds each process's exit checkpoint: the call records.
    let records: Vec<Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "tool_call")
        .collect();
    assert_eq!(records.len(), 2);
    let canon = dir.path().canonicalize().unwrap();
    for r in &records {
        assert_eq!(r["tool"], "write_file");
        assert_eq!(r["outcome"], "ok");
        assert_eq!(r["network"], "none");
        assert_eq!(r["env"], "none");
        assert_eq!(r["wit_version"], "0.1.0");
        assert_eq!(r["component_sha256"].as_str().unwrap().len(), 64);
        assert_eq!(
            r["grants"],
            serde_json::json!([{"path": canon, "access": "read-write"}])
        );
        assert!(r["duration_ms"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn failed_calls_are_recorded_with_their_error() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let o = home.call(
        "write_file",
        dir.path(),
        r#"{"path":"/etc/passwd","content":"x"}"#,
        &[],
    );
    let err = tool_error(&o, "invalid-arguments");
    assert!(err.contains("absolute"), "{err}");
    let log =
        fs::read_to_string(home.state_dir().join("audit/log.jsonl")).expect("default audit log");
    let r: Value = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|r| r["kind"] == "tool_call")
        .unwrap();
    assert_eq!(r["outcome"], "invalid-arguments");
    assert!(r["error"].as_str().unwrap().contains("absolute"));
    assert!(
        !dir.path().join("etc").exists(),
        "an absolute path must not be re-rooted into the grant"
    );
}

#[test]
fn edit_file_keeps_a_crlf_file_crlf() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let original = b"fn main() {\r\n    println!(\"hi\");\r\n}\r\n";
    fs::write(dir.path().join("main.rs"), original).unwrap();
    let id = file_id("main.rs", original);
    let args = serde_json::json!({"edits": [{
        "path": "main.rs", "file_id": id,
        "old_string": "    println!(\"hi\");\n",
        "new_string": "    println!(\"hello\");\n    println!(\"world\");\n"
    }]});
    let v = ok_json(&home.call("edit_file", dir.path(), &args.to_string(), &[]));
    let after = fs::read(dir.path().join("main.rs")).unwrap();
    assert_eq!(
        after,
        b"fn main() {\r\n    println!(\"hello\");\r\n    println!(\"world\");\r\n}\r\n"
    );
    assert_eq!(v["edits_applied"], 1);
    assert_eq!(v["files"][0]["path"], "main.rs");
    assert_eq!(v["files"][0]["file_id"], file_id("main.rs", &after));
}

#[test]
fn edit_file_refuses_a_stale_file_id_and_changes_nothing() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    let args = r#"{"edits":[{"path":"a.txt","file_id":"deadbeef","old_string":"one","new_string":"uno"}]}"#;
    let err = tool_error(&home.call("edit_file", dir.path(), args, &[]), "conflict");
    assert!(err.contains("file_id mismatch"), "{err}");
    assert!(
        err.contains(&file_id("a.txt", b"one\ntwo\n")),
        "names the expected id: {err}"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
}

#[test]
fn edit_file_modes_pick_the_schema() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let content = "a\nb\nc\n";
    fs::write(dir.path().join("f.txt"), content).unwrap();
    let id = file_id("f.txt", content.as_bytes());

    let single = serde_json::json!({"path":"f.txt","file_id":id,"old_string":"b","new_string":"B"});
    ok_json(&home.call(
        "edit_file",
        dir.path(),
        &single.to_string(),
        &["--mode", "search_replace"],
    ));
    assert_eq!(
        fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "a\nB\nc\n"
    );

    let id = file_id("f.txt", b"a\nB\nc\n");
    let anchored = serde_json::json!({"path":"f.txt","file_id":id,"changes":[{"start":["B"],"content":["x","y"]}]});
    ok_json(&home.call(
        "edit_file",
        dir.path(),
        &anchored.to_string(),
        &["--mode", "anchored"],
    ));
    assert_eq!(
        fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "a\nx\ny\nc\n"
    );

    let err = tool_error(
        &home.call("edit_file", dir.path(), "{}", &["--mode", "fuzzy"]),
        "invalid-arguments",
    );
    assert!(err.contains("diff_mode must be"), "{err}");
}

#[test]
fn edit_file_reports_not_unique_with_line_numbers() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let content = "x = 1\ny = 2\nx = 1\n";
    fs::write(dir.path().join("f.py"), content).unwrap();
    let args = serde_json::json!({"edits":[{"path":"f.py","file_id":file_id("f.py", content.as_bytes()),"old_string":"x = 1","new_string":"x = 3"}]});
    let err = tool_error(
        &home.call("edit_file", dir.path(), &args.to_string(), &[]),
        "conflict",
    );
    assert!(
        err.contains("old_string not unique (2 matches at lines 1, 3)"),
        "{err}"
    );
}

#[test]
fn retrieval_tools_read_the_project() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    fs::create_dir_all(p.join("src")).unwrap();
    fs::create_dir_all(p.join(".bb7/chats")).unwrap();
    fs::write(p.join("src/lib.rs"), "pub fn needle() {}\n// other\n").unwrap();
    fs::write(p.join("src/main.rs"), "fn main() { needle(); }\n").unwrap();
    fs::write(p.join(".bb7/chats/secret"), "needle in state\n").unwrap();
    fs::write(p.join(".gitignore"), "target/\n.env\n").unwrap();
    fs::create_dir_all(p.join("target")).unwrap();
    fs::write(p.join("target/out.rs"), "needle()\n").unwrap();
    fs::write(p.join(".env"), "KEY=needle\n").unwrap();

    let v = ok_json(&home.call("search_project", p, r#"{"query":"needle"}"#, &[]));
    let files: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["file_path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["src/lib.rs", "src/main.rs"], "{v}");
    assert_eq!(v["results"][0]["start_line"], 1);

    let v = ok_json(&home.call("list_files", p, r#"{}"#, &[]));
    assert_eq!(
        v["files"],
        serde_json::json!([".gitignore", "src/lib.rs", "src/main.rs"])
    );

    let v = ok_json(&home.call(
        "read_file",
        p,
        r#"{"file_path":"src/lib.rs","start_line":2}"#,
        &[],
    ));
    assert_eq!(v["content"], "// other\n");
    assert_eq!(v["start_line"], 2);

    tool_error(
        &home.call("read_file", p, r#"{"file_path":".bb7/chats/secret"}"#, &[]),
        "permission-denied",
    );
    tool_error(
        &home.call("read_file", p, r#"{"file_path":"../x"}"#, &[]),
        "invalid-arguments",
    );
}

#[test]
fn retrieval_grants_are_read_only() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let log = home.path().join("a.jsonl");
    ok_json(&home.call(
        "list_files",
        dir.path(),
        "{}",
        &["--audit-log", log.to_str().unwrap()],
    ));
    let r: Value =
        serde_json::from_str(fs::read_to_string(&log).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(r["grants"][0]["access"], "read-only");
}

#[test]
fn bad_invocations_fail_clearly() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let o = home.call("rm_rf", dir.path(), "{}", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown tool: rm_rf"), "{}", stderr(&o));

    let o = home.call("write_file", &dir.path().join("missing"), "{}", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot grant"), "{}", stderr(&o));

    let err = tool_error(
        &home.call("write_file", dir.path(), "not json", &[]),
        "invalid-arguments",
    );
    assert!(err.contains("invalid arguments"), "{err}");
    let err = tool_error(
        &home.call("write_file", dir.path(), r#"{"path":"a"}"#, &[]),
        "invalid-arguments",
    );
    assert!(err.contains("content"), "{err}");
}

#[test]
fn arguments_can_come_from_stdin() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(1 << 20);
    let args = serde_json::json!({"path": "big.txt", "content": big}).to_string();
    let mut child = home
        .cmd()
        .args([
            "tools",
            "call",
            "write_file",
            "--dir",
            dir.path().to_str().unwrap(),
            "--args",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(args.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let v = ok_json(&o);
    assert_eq!(v["bytes"], 1 << 20);
    assert_eq!(
        fs::metadata(dir.path().join("big.txt")).unwrap().len(),
        1 << 20
    );
}

#[test]
fn read_write_grants_never_reach_bb7_state() {
    let home = Home::new();
    fs::create_dir_all(home.state_dir()).unwrap();
    // The home holds the state dir (~/.bb7): granting it read-write would expose chats and the audit log.
    let o = home.call(
        "write_file",
        home.path(),
        r#"{"path":".bb7/tool-calls.jsonl","content":"forged"}"#,
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("overlaps"), "{}", stderr(&o));
    assert!(
        !home.state_dir().join("tool-calls.jsonl").exists()
            || !fs::read_to_string(home.state_dir().join("tool-calls.jsonl"))
                .unwrap()
                .contains("forged")
    );
    // Read-only access to the same directory is fine for the retrieval tools.
    ok_json(&home.call("list_files", home.path(), "{}", &[]));
}

/// The built-ins run the native code precompiled into the binary when it was built: a first run
/// with an empty cache compiles nothing (no artifact appears in the cache) and still works.
#[test]
fn builtins_never_compile_at_run_time() {
    let home = Home::new();
    let cache = home.path().join("fresh-cache");
    let work = home.path().join("w");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("a.txt"), "hello\n").unwrap();
    let edit = serde_json::json!({"edits": [{
        "path": "a.txt", "file_id": file_id("a.txt", b"hello\n"),
        "old_string": "hello", "new_string": "hi"
    }]})
    .to_string();
    let calls: [(&str, &str); 5] = [
        ("write_file", r#"{"path":"b.txt","content":"b\n"}"#),
        ("edit_file", &edit),
        ("search_project", r#"{"query":"hello"}"#),
        ("read_file", r#"{"file_path":"a.txt"}"#),
        ("list_files", r#"{}"#),
    ];
    for (tool, args) in calls {
        let mut c = home.cmd();
        // No compiler at all: a built-in that needed one would fail.
        c.env("BB7_COMPILER", home.path().join("no-such-compiler"));
        c.env("BB7_CACHE_DIR", &cache).args([
            "tools",
            "call",
            tool,
            "--dir",
            work.to_str().unwrap(),
            "--args",
            args,
        ]);
        let o = c.output().unwrap();
        assert!(o.status.success(), "{tool}: {}", stderr(&o));
    }
    let compiled: Vec<_> = walk(&cache)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert!(
        compiled.is_empty(),
        "a built-in was compiled at run time: {compiled:?}"
    );
}

/// Issue 23 item 6: a repository can ship `.bb7/tools.lock` as a link to a secret of the user's
/// (`~/.git-credentials`) or as a file whose lines are secrets; `audit --check` must neither follow
/// the link nor quote any of the file's content in its error (CI logs are public).
#[test]
fn audit_check_never_follows_a_lockfile_link_nor_quotes_its_content() {
    let home = Home::new();
    let secret = "https://alice:ghp_SECRETTOKEN1234@github.com";
    let creds = home.path().join(".git-credentials");
    fs::write(&creds, format!("{secret}\n")).unwrap();
    let proj = tempfile::tempdir().unwrap();
    fs::create_dir_all(proj.path().join(".bb7")).unwrap();
    let lock = proj.path().join(".bb7/tools.lock");
    std::os::unix::fs::symlink(&creds, &lock).unwrap();
    let check = || {
        home.cmd()
            .current_dir(proj.path())
            .args(["tools", "audit", "--check"])
            .output()
            .unwrap()
    };
    let o = check();
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        !out.contains("SECRETTOKEN") && !err.contains("SECRETTOKEN") && !err.contains("alice"),
        "the secret reached the output: {out}{err}"
    );
    assert!(err.contains("symbolic link"), "{err}");

    // A regular file bb7 did not write: the error says where, never what.
    fs::remove_file(&lock).unwrap();
    fs::write(&lock, format!("format = 1\n{secret}\n")).unwrap();
    let o = check();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        !err.contains("SECRETTOKEN") && !err.contains("alice"),
        "{err}"
    );
    assert!(err.contains("line 2"), "the error names the line: {err}");
    // A value of the wrong type is not quoted either.
    fs::write(&lock, "format = \"ghp_SECRETTOKEN1234\"\n").unwrap();
    let err = stderr(&check());
    assert!(!err.contains("SECRETTOKEN"), "{err}");
    // A `.bb7` that is itself a link is not followed for the lockfile.
    let elsewhere = tempfile::tempdir().unwrap();
    fs::write(elsewhere.path().join("tools.lock"), format!("{secret}\n")).unwrap();
    let proj2 = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), proj2.path().join(".bb7")).unwrap();
    let o = home
        .cmd()
        .current_dir(proj2.path())
        .args(["tools", "audit", "--check"])
        .output()
        .unwrap();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        !out.contains("SECRETTOKEN") && !err.contains("SECRETTOKEN"),
        "{out}{err}"
    );
}

/// A component file under `<target>/wasm-guest` (the build leaves every guest crate's there).
fn guest_wasm(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/wasm-guest/wasm32-wasip2/release")
        .join(name)
}

/// `bb7:host/files` is linked for bb7's own built-in component only (ECOSYSTEM-PROTOCOL.md §5: an
/// import outside WASI other than `bb7:tool/types` is refused at `add`, naming it). The built-in
/// component's wasm, which imports it, is a third-party component like any other once it is a
/// file: `tools add` refuses it naming the import, and so does running it by hand with
/// `--component`; the single-tool builds import no `bb7:host/files` and install.
#[test]
fn a_third_party_component_importing_bb7_host_files_is_refused_naming_it() {
    use common::tools::{World, ok, p, packaged, refused};
    let w = World::new();
    let manifest = |name: &str| {
        format!("name = \"{name}\"\nversion = \"1\"\nwit = \"0.1.0\"\nfiles = \"project-read\"\n")
    };
    let d = packaged(&guest_wasm("bb7_builtin_tools.wasm"), &manifest("sneaky"));
    let e = refused(&w.run(&["add", p(d.path())]), 2);
    assert!(e.contains("bb7:host/files@0.1.0"), "{e}");
    assert!(e.contains("only to its own built-in tools"), "{e}");
    // Run by hand as a file: refused before the call, naming the import.
    let home = Home::new();
    let work = home.path().join("w");
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("a.txt"), "hello\n").unwrap();
    let o = home
        .cmd()
        .args(["tools", "call", "read_file", "--component"])
        .arg(guest_wasm("bb7_builtin_tools.wasm"))
        .args(["--access", "read-only", "--dir"])
        .arg(&work)
        .args(["--args", r#"{"file_path":"a.txt"}"#])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(!stdout(&o).contains("hello"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("bb7:host/files@0.1.0"),
        "{}",
        stderr(&o)
    );
    // The single-tool builds read through WASI alone: they install.
    for (wasm, name) in [
        ("bb7_tool_search_project.wasm", "searcher"),
        ("bb7_tool_list_files.wasm", "lister"),
        ("bb7_tool_read_file.wasm", "reader"),
    ] {
        let d = packaged(&guest_wasm(wasm), &manifest(name));
        ok(&w.run(&["add", p(d.path())]));
    }
}

/// The single-tool builds list and read through WASI alone; the built-in component through
/// `bb7:host/files`. On the same tree — nested directories, links in and out, a FIFO, a name that
/// is not UTF-8, a binary file, an ignored file, a file over `read-file-at`'s 4 MiB — both give
/// the same results.
#[test]
fn the_wasi_walk_and_the_host_files_walk_give_identical_results() {
    use std::os::unix::ffi::OsStrExt;
    let home = Home::new();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("proj");
    for d in ["src/deep/er", "docs", "empty", "ignored_dir"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::write(root.join(".gitignore"), "ignored_dir/\n*.log\n").unwrap();
    fs::write(root.join("src/lib.rs"), "fn needle() {}\n// needle again\n").unwrap();
    fs::write(root.join("src/deep/er/x.rs"), "let needle = 1;\n").unwrap();
    fs::write(root.join("docs/a.md"), "no match here\nneedle in docs\n").unwrap();
    fs::write(root.join("ignored_dir/n.txt"), "needle ignored\n").unwrap();
    fs::write(root.join("run.log"), "needle log\n").unwrap();
    fs::write(root.join("bin.dat"), b"needle\0\x01\x02binary").unwrap();
    let mut big = "filler line\n".repeat((5 << 20) / 12);
    big.push_str("needle at the end\n");
    fs::write(root.join("big.txt"), big).unwrap();
    fs::write(
        root.join(std::ffi::OsStr::from_bytes(b"bad\xffname.txt")),
        "needle in a bad name\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("src", root.join("src_link")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc_link")).unwrap();
    std::os::unix::fs::symlink("src/lib.rs", root.join("file_link")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let calls = [
        (
            "search_project",
            "bb7_tool_search_project.wasm",
            r#"{"query":"needle"}"#,
        ),
        (
            "search_project",
            "bb7_tool_search_project.wasm",
            r#"{"query":"NEEDLE","glob":"**/*.rs"}"#,
        ),
        ("list_files", "bb7_tool_list_files.wasm", r#"{}"#),
        (
            "list_files",
            "bb7_tool_list_files.wasm",
            r#"{"prefix":"src"}"#,
        ),
        (
            "read_file",
            "bb7_tool_read_file.wasm",
            r#"{"file_path":"src/lib.rs"}"#,
        ),
        (
            "read_file",
            "bb7_tool_read_file.wasm",
            r#"{"file_path":"pipe"}"#,
        ),
        (
            "read_file",
            "bb7_tool_read_file.wasm",
            r#"{"file_path":"file_link"}"#,
        ),
    ];
    for (tool, wasm, args) in calls {
        let builtin = home.call(tool, &root, args, &[]);
        let single = home.call(
            tool,
            &root,
            args,
            &[
                "--component",
                guest_wasm(wasm).to_str().unwrap(),
                "--access",
                "read-only",
            ],
        );
        assert_eq!(
            (builtin.status.code(), stdout(&builtin), stderr(&builtin)),
            (single.status.code(), stdout(&single), stderr(&single)),
            "{tool} {args}: the built-in (host files) and the single-tool build (WASI) differ"
        );
        if tool == "search_project" && args.contains("needle") {
            let out = stdout(&builtin);
            assert!(out.contains("src/deep/er/x.rs"), "{out}");
            assert!(!out.contains("ignored"), "{out}");
        }
    }
}

/// The built-in a call runs is the one the host names: a `builtin` setting passed by the caller
/// cannot turn a read-only `read_file` call into a `write_file` call (or any other tool).
#[test]
fn a_callers_builtin_setting_cannot_pick_another_tool() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let args = r#"{"file_path":"a.txt"}"#;
    for other in ["write_file", "list_files", "nonsense"] {
        let setting = format!("builtin={other}");
        let r = ok_json(&home.call("read_file", dir.path(), args, &["--setting", &setting]));
        assert!(r.to_string().contains("hello"), "{other}: {r}");
    }
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A process's last act is its exit checkpoint (a libc `atexit` handler), which makes the chain's
/// signing key on a fresh install. By then glibc has destroyed the main thread's thread-locals,
/// and the key's seed came from `rand`'s thread-local generator: once `rand` was the one
/// wasmtime-wasi seeds each call's WASI context from (the same thread-local, so already made and
/// then destroyed), the key could not be made, the checkpoint was silently lost, and the panic
/// reached stderr. The seed now comes from the operating system directly.
#[test]
fn a_first_call_on_a_fresh_install_signs_its_exit_checkpoint() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let log = home.path().join("audit").join("log.jsonl");
    ok_json(&home.call(
        "write_file",
        dir.path(),
        r#"{"path":"a.txt","content":"x"}"#,
        &["--audit-log", log.to_str().unwrap()],
    ));
    let lines: Vec<Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(kinds, ["tool_call", "checkpoint"], "{lines:?}");
    assert_eq!(
        lines[1]["signature"].as_str().unwrap_or_default().len(),
        128
    );
    assert!(home.path().join("audit").join("key").is_file());
}
