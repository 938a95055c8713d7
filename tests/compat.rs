//! Compatibility with chats already on disk: a chat.json in exactly SPEC.md's version-2 format (as
//! the existing Go backend writes it, with its snapshot layout), unknown fields surviving a re-save,
//! and the lazy migration of legacy version-0/1 chats (messages with a top-level `content`).

mod common;

use std::fs;
use std::path::Path;

use common::proto::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const MATH: &str =
    "public static class MathUtil {\n    public static void Add(ref int a, int b) { a += b; }\n}\n";
const PHYSICS: &str = "// reference physics\nclass Body { }\n";
const UTILS_SECTION: &str = "    public static float Clamp(float v) {\n        return v;\n    }\n";
const EXT_PATH: &str = "/home/user/reference/physics.cs";

/// Where the Go backend keeps a section snapshot: `_sections/{sha256("path:start:end")[:16 hex]}{ext}`.
fn go_section_name(path: &str, start: u32, end: u32) -> String {
    let h = hex::encode(Sha256::digest(format!("{path}:{start}:{end}").as_bytes()));
    format!("{}{}", &h[..16], ext(path))
}

/// Where the Go backend keeps an external snapshot: `_external/{sha256(abs path)[:16 hex]}{ext}`.
fn go_external_name(abs: &str) -> String {
    let h = hex::encode(Sha256::digest(abs.as_bytes()));
    format!("{}{}", &h[..16], ext(abs))
}

fn ext(path: &str) -> String {
    Path::new(path)
        .extension()
        .map(|e| format!(".{}", e.to_str().unwrap()))
        .unwrap_or_default()
}

/// A project initialised by bb7 itself, with no server running.
fn project() -> Env {
    let env = Env::new();
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.shutdown();
    env
}

/// Writes `{chats}/{id}/chat.json` verbatim plus snapshot files relative to the chat dir.
fn plant(chats: &Path, id: &str, chat_json: &str, files: &[(String, &str)]) {
    let dir = chats.join(id);
    write_file(&dir.join("chat.json"), chat_json);
    for (rel, content) in files {
        write_file(&dir.join(rel), content);
    }
    serde_json::from_str::<Value>(chat_json).expect("the planted chat.json is valid JSON");
}

/// index.json as the Go backend writes it.
fn plant_index(chats: &Path, entries: &[(&str, &str, &str)]) {
    let chats_json: Vec<Value> = entries
        .iter()
        .map(|(id, name, created)| json!({"id": id, "name": name, "created": created}))
        .collect();
    write_file(
        &chats.join("index.json"),
        &serde_json::to_string_pretty(&json!({"version": 1, "chats": chats_json})).unwrap(),
    );
}

fn v_math() -> String {
    fid("src/math.cs", MATH)
}
fn v_phys() -> String {
    fid(EXT_PATH, PHYSICS)
}
fn v_sec() -> String {
    fid("src/utils.cs:10:50", UTILS_SECTION)
}

/// SPEC.md's chat.json example, verbatim except for real file ids and `extra` spliced in.
fn spec_chat(extra_top: &str, extra_cf: &str, extra_msg: &str, extra_part: &str) -> String {
    let text = r#"{
  "version": 2,
  "id": "abc123",
  "name": "physics-refactor",
  "created": "2025-01-19T22:00:00Z",
  "model": "anthropic/claude-sonnet-4",
  "draft": "",EXTRA_TOP
  "context_files": [
    {"path": "src/math.cs", "readonly": false, "external": false, "version": "V_MATH"EXTRA_CF},
    {"path": "/home/user/reference/physics.cs", "readonly": true, "external": true, "version": "V_PHYS"},
    {"path": "src/utils.cs", "readonly": true, "external": false, "version": "V_SEC", "start_line": 10, "end_line": 50}
  ],
  "messages": [
    {
      "role": "user",
      "parts": [{"type": "text", "content": "Refactor to use ref parameters"}],
      "model": "anthropic/claude-sonnet-4",
      "timestamp": "2025-01-19T22:01:00Z",
      "context_snapshot": [
        {"path": "src/math.cs", "file_id": "V_MATH"},
        {"path": "src/utils.cs", "file_id": "V_SEC", "start_line": 10, "end_line": 50}
      ]EXTRA_MSG
    },
    {
      "role": "assistant",
      "model": "anthropic/claude-sonnet-4",
      "timestamp": "2025-01-19T22:01:05Z",
      "output_files": ["math.cs"],
      "parts": [
        {"type": "text", "content": "The issue is..."},
        {"type": "context_event", "action": "AssistantWriteFile", "path": "math.cs", "version": "abcd1234"EXTRA_PART}
      ]
    }
  ]
}
"#;
    text.replace("V_MATH", &v_math())
        .replace("V_PHYS", &v_phys())
        .replace("V_SEC", &v_sec())
        .replace("EXTRA_TOP", extra_top)
        .replace("EXTRA_CF", extra_cf)
        .replace("EXTRA_MSG", extra_msg)
        .replace("EXTRA_PART", extra_part)
}

fn spec_snapshots() -> Vec<(String, &'static str)> {
    vec![
        ("context/src/math.cs".to_string(), MATH),
        (
            format!(
                "context/_sections/{}",
                go_section_name("src/utils.cs", 10, 50)
            ),
            UTILS_SECTION,
        ),
        (
            format!("context/_external/{}", go_external_name(EXT_PATH)),
            PHYSICS,
        ),
    ]
}

fn plant_spec_chat(env: &Env, text: &str) {
    plant(&env.chats(), "abc123", text, &spec_snapshots());
    plant_index(
        &env.chats(),
        &[("abc123", "physics-refactor", "2025-01-19T22:00:00Z")],
    );
}

#[test]
fn spec_v2_chat_loads_messages_and_context() {
    let env = project();
    plant_spec_chat(&env, &spec_chat("", "", "", ""));
    let mut s = env.start();

    let listed = list(&s.ok(json!({"action": "chat_list"}))["chats"]);
    let e = listed
        .iter()
        .find(|e| e["id"] == "abc123")
        .unwrap_or_else(|| panic!("the chat is listed: {listed:?}"));
    assert_eq!(e["name"], "physics-refactor");
    assert!(
        e["created"]
            .as_str()
            .unwrap()
            .starts_with("2025-01-19T22:00:00"),
        "{e}"
    );

    s.ok(json!({"action": "chat_select", "id": "abc123"}));
    assert_eq!(
        fs::read_to_string(env.chat_dir("abc123").join("lock"))
            .unwrap()
            .trim(),
        s.pid.to_string()
    );
    let c = s.ok(json!({"action": "chat_get"}));
    assert_eq!(c["type"], "chat");
    assert_eq!(c["id"], "abc123");
    assert_eq!(c["name"], "physics-refactor");
    assert_eq!(c["model"], "anthropic/claude-sonnet-4");
    assert_eq!(c["draft"], "");
    let msgs = list(&c["messages"]);
    assert_eq!(msgs.len(), 2, "{c}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msg_text(&msgs[0]), "Refactor to use ref parameters");
    assert_eq!(
        msgs[0]["context_snapshot"],
        json!([
            {"path": "src/math.cs", "file_id": v_math()},
            {"path": "src/utils.cs", "file_id": v_sec(), "start_line": 10, "end_line": 50}
        ])
    );
    assert_eq!(msgs[0]["model"], "anthropic/claude-sonnet-4");
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["model"], "anthropic/claude-sonnet-4");
    assert_eq!(msgs[1]["output_files"], json!(["math.cs"]));
    let parts = list(&msgs[1]["parts"]);
    assert!(
        parts.contains(&json!({"type": "text", "content": "The issue is..."})),
        "{parts:?}"
    );
    let ev = parts
        .iter()
        .find(|p| p["type"] == "context_event")
        .unwrap_or_else(|| panic!("{parts:?}"));
    assert_eq!(ev["action"], "AssistantWriteFile");
    assert_eq!(ev["path"], "math.cs");
    assert_eq!(ev["version"], "abcd1234");

    let files = list(&s.ok(json!({"action": "context_list"}))["files"]);
    assert_eq!(files.len(), 3, "{files:?}");
    let find = |p: &str| {
        files
            .iter()
            .find(|f| f["path"] == p)
            .cloned()
            .unwrap_or_else(|| panic!("{p} missing: {files:?}"))
    };
    let f = find("src/math.cs");
    assert_eq!(
        (&f["readonly"], &f["external"], &f["version"]),
        (&json!(false), &json!(false), &json!(v_math()))
    );
    let f = find(EXT_PATH);
    assert_eq!(
        (&f["readonly"], &f["external"], &f["version"]),
        (&json!(true), &json!(true), &json!(v_phys()))
    );
    let f = find("src/utils.cs");
    assert_eq!(
        (&f["readonly"], &f["external"], &f["version"]),
        (&json!(true), &json!(false), &json!(v_sec()))
    );
    assert_eq!((&f["start_line"], &f["end_line"]), (&json!(10), &json!(50)));

    let r = s.ok(json!({"action": "get_context_file", "path": "src/math.cs"}));
    assert_eq!(r["content"], MATH);
    s.shutdown();
    let on_disk = env.chat_json("abc123");
    assert_eq!(list(&on_disk["messages"]).len(), 2);
}

#[test]
fn go_layout_section_and_external_snapshots_are_read() {
    let env = project();
    plant_spec_chat(&env, &spec_chat("", "", "", ""));
    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": "abc123"}));
    let r = s.ok(json!({"action": "get_context_file", "path": EXT_PATH}));
    assert_eq!(r["content"], PHYSICS);
    let st = list(&s.ok(json!({"action": "get_file_statuses"}))["files"]);
    let sec = st
        .iter()
        .find(|f| f["status"] == "S")
        .unwrap_or_else(|| panic!("no section status: {st:?}"));
    assert_eq!(sec["path"], "src/utils.cs");
    assert_eq!(sec["start_line"], 10);
    assert_eq!(sec["end_line"], 50);
    assert_eq!(sec["context_content"], UTILS_SECTION);
    let ext = st
        .iter()
        .find(|f| f["path"] == EXT_PATH)
        .unwrap_or_else(|| panic!("{st:?}"));
    assert_eq!(ext["external"], true);
    assert_eq!(ext["context_content"], PHYSICS);
    s.shutdown();
}

#[test]
fn unknown_fields_survive_a_resave() {
    let env = project();
    plant_spec_chat(
        &env,
        &spec_chat(
            "\n  \"x_future_top\": {\"keep\": [1, 2, 3]},",
            ", \"x_future_cf\": \"cf-extra\"",
            ",\n      \"x_future_msg\": 7",
            ", \"x_future_part\": true",
        ),
    );
    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": "abc123"}));
    s.ok(json!({"action": "save_draft", "draft": "re-saved by bb7"}));
    s.shutdown();
    let chat = env.chat_json("abc123");
    assert_eq!(draft_of(&chat), "re-saved by bb7", "the chat was re-saved");
    assert_eq!(
        chat["x_future_top"],
        json!({"keep": [1, 2, 3]}),
        "top level"
    );
    let cfs = list(&chat["context_files"]);
    assert_eq!(cfs.len(), 3);
    let math = cfs.iter().find(|f| f["path"] == "src/math.cs").unwrap();
    assert_eq!(math["x_future_cf"], "cf-extra", "context file entry");
    let msgs = list(&chat["messages"]);
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["x_future_msg"], 7, "message");
    assert_eq!(
        msgs[0]["context_snapshot"],
        json!([
            {"path": "src/math.cs", "file_id": v_math()},
            {"path": "src/utils.cs", "file_id": v_sec(), "start_line": 10, "end_line": 50}
        ])
    );
    let parts = list(&msgs[1]["parts"]);
    let ev = parts.iter().find(|p| p["type"] == "context_event").unwrap();
    assert_eq!(ev["x_future_part"], true, "message part");
    assert_eq!(ev["version"], "abcd1234");
}

#[test]
fn go_written_fields_load_and_survive() {
    let env = project();
    let text = r#"{
  "version": 2,
  "id": "go0000001",
  "name": "From the Go backend",
  "created": "2025-03-02T09:15:42.123456789Z",
  "model": "openai/gpt-4o",
  "reasoning_effort": "high",
  "draft": "half-written",
  "context_files": [
    {"path": "main.go", "readonly": false, "external": false, "version": "V_MAIN"}
  ],
  "messages": [
    {"role": "assistant", "timestamp": "2025-03-02T09:15:50.5Z",
     "parts": [{"type": "context_event", "action": "UserAddFile", "path": "main.go",
                "readonly": false, "external": false, "version": "V_MAIN"}]},
    {"role": "user", "model": "openai/gpt-4o", "timestamp": "2025-03-02T09:16:00.000000001Z",
     "parts": [{"type": "text", "content": "Add a flag"}],
     "context_snapshot": [{"path": "main.go", "file_id": "V_MAIN"}]},
    {"role": "assistant", "model": "openai/gpt-4o", "timestamp": "2025-03-02T09:16:09Z",
     "reasoning_effort": "high",
     "usage": {"prompt_tokens": 4200, "completion_tokens": 890, "cached_tokens": 3500,
               "total_tokens": 5090, "cost": 0.012, "duration": 8.25},
     "output_files": ["main.go"],
     "parts": [
       {"type": "thinking", "content": "Let me think."},
       {"type": "text", "content": "Added it."},
       {"type": "code", "language": "go", "content": "flag.Bool(\"v\", false, \"\")"},
       {"type": "context_event", "action": "AssistantWriteFile", "path": "main.go",
        "readonly": false, "external": false, "version": "abcd1234", "added": false}
     ]},
    {"role": "system", "timestamp": "2025-03-02T09:17:00Z",
     "parts": [{"type": "text", "content": "Response aborted by user."}]}
  ]
}
"#
    .replace("V_MAIN", &fid("main.go", "package main\n"));
    plant(
        &env.chats(),
        "go0000001",
        &text,
        &[("context/main.go".to_string(), "package main\n")],
    );
    write_file(
        &env.chats().join("index.json"),
        &serde_json::to_string_pretty(&json!({"version": 1, "active_chat_id": "go0000001",
            "chats": [{"id": "go0000001", "name": "From the Go backend",
                       "created": "2025-03-02T09:15:42.123456789Z"}]}))
        .unwrap(),
    );
    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": "go0000001"}));
    let c = s.ok(json!({"action": "chat_get"}));
    assert_eq!(c["draft"], "half-written");
    assert_eq!(c["reasoning_effort"], "high");
    assert_eq!(c["model"], "openai/gpt-4o");
    let msgs = list(&c["messages"]);
    assert_eq!(msgs.len(), 4, "{c}");
    assert_eq!(msg_text(&msgs[1]), "Add a flag");
    let parts = list(&msgs[2]["parts"]);
    assert!(parts.iter().any(|p| p["type"] == "thinking"), "{parts:?}");
    assert!(
        parts
            .iter()
            .any(|p| p["type"] == "code" && p["language"] == "go"),
        "{parts:?}"
    );
    assert_eq!(msgs[3]["role"], "system");
    let r = s.ok(json!({"action": "get_context_file", "path": "main.go"}));
    assert_eq!(r["content"], "package main\n");
    s.ok(json!({"action": "save_draft", "draft": "done"}));
    s.shutdown();
    let chat = env.chat_json("go0000001");
    assert_eq!(draft_of(&chat), "done");
    let m = &list(&chat["messages"])[2];
    assert_eq!(m["usage"]["prompt_tokens"], 4200, "{m}");
    assert_eq!(m["usage"]["cost"], 0.012);
    assert_eq!(m["reasoning_effort"], "high");
    let ev = list(&m["parts"])
        .into_iter()
        .find(|p| p["type"] == "context_event")
        .unwrap();
    assert_eq!(ev["added"], false);
    assert_eq!(ev["readonly"], false);
}

/// A version-0 (no `version` key) or version-1 chat whose messages carry a top-level `content`.
fn legacy_chat(version: Option<u32>) -> String {
    let mut chat = json!({
        "id": "legacy01",
        "name": "Old chat",
        "created": "2024-06-01T10:00:00Z",
        "model": "openai/gpt-4o",
        "context_files": [],
        "messages": [
            {"role": "user", "content": "How do I sort a slice?", "model": "openai/gpt-4o",
             "timestamp": "2024-06-01T10:01:00Z"},
            {"role": "assistant", "content": "Use sort.Slice.", "model": "openai/gpt-4o",
             "timestamp": "2024-06-01T10:01:05Z"},
            {"role": "system", "content": "Response aborted by user.",
             "timestamp": "2024-06-01T10:02:00Z"}
        ]
    });
    if let Some(v) = version {
        chat["version"] = json!(v);
    }
    serde_json::to_string_pretty(&chat).unwrap()
}

fn check_legacy_migration(version: Option<u32>) {
    let env = project();
    plant(&env.chats(), "legacy01", &legacy_chat(version), &[]);
    plant_index(
        &env.chats(),
        &[("legacy01", "Old chat", "2024-06-01T10:00:00Z")],
    );
    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": "legacy01"}));
    let c = s.ok(json!({"action": "chat_get"}));
    let msgs = list(&c["messages"]);
    let texts: Vec<String> = msgs.iter().map(msg_text).collect();
    assert_eq!(
        texts,
        vec![
            "How do I sort a slice?",
            "Use sort.Slice.",
            "Response aborted by user."
        ],
        "{c}"
    );
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[2]["role"], "system");

    // Lazily migrated on load: version 2 and parts, no top-level content (check_chat_v2).
    let chat = env.chat_json("legacy01");
    let on_disk = list(&chat["messages"]);
    assert_eq!(on_disk.len(), 3);
    for (m, want) in on_disk.iter().zip(&texts) {
        let parts = list(&m["parts"]);
        assert_eq!(parts.len(), 1, "{m}");
        assert_eq!(parts[0]["type"], "text");
        assert_eq!(&parts[0]["content"], want);
    }
    assert_eq!(chat["name"], "Old chat");
    assert_eq!(chat["model"], "openai/gpt-4o");
    s.shutdown();
    env.chat_json("legacy01");
}

#[test]
fn legacy_version_0_chat_is_migrated_on_load() {
    check_legacy_migration(None);
}

#[test]
fn legacy_version_1_chat_is_migrated_on_load() {
    check_legacy_migration(Some(1));
}

#[test]
fn legacy_context_file_without_version_loads() {
    let env = project();
    let chat = json!({
        "id": "legacy02", "name": "Older", "created": "2024-05-01T10:00:00Z", "model": "openai/gpt-4o",
        "context_files": [{"path": "main.go", "readonly": false, "external": false}],
        "messages": [{"role": "user", "content": "hi", "timestamp": "2024-05-01T10:01:00Z"}]
    });
    plant(
        &env.chats(),
        "legacy02",
        &serde_json::to_string_pretty(&chat).unwrap(),
        &[("context/main.go".to_string(), "package main\n")],
    );
    plant_index(
        &env.chats(),
        &[("legacy02", "Older", "2024-05-01T10:00:00Z")],
    );
    let mut s = env.start();
    s.ok(json!({"action": "chat_select", "id": "legacy02"}));
    let files = list(&s.ok(json!({"action": "context_list"}))["files"]);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0]["path"], "main.go");
    let r = s.ok(json!({"action": "get_context_file", "path": "main.go"}));
    assert_eq!(r["content"], "package main\n");
    s.shutdown();
    assert_eq!(env.chat_json("legacy02")["version"], 2);
}

#[test]
fn go_global_chat_loads_in_global_only_mode() {
    let env = Env::new();
    let abs = env.outside().join("notes.md");
    let abs = abs.to_str().unwrap().to_string();
    let text = serde_json::to_string_pretty(&json!({
        "version": 2, "id": "glob0001", "name": "Global notes", "created": "2025-02-01T08:00:00Z",
        "model": "anthropic/claude-sonnet-4", "global": true,
        "context_files": [{"path": abs, "readonly": true, "external": true,
                           "version": fid(&abs, "# notes\n")}],
        "messages": [{"role": "user", "parts": [{"type": "text", "content": "Summarise"}],
                      "timestamp": "2025-02-01T08:01:00Z",
                      "context_snapshot": [{"path": abs, "file_id": fid(&abs, "# notes\n")}]}]
    }))
    .unwrap();
    plant(
        &env.global_chats(),
        "glob0001",
        &text,
        &[(
            format!("context/_external/{}", go_external_name(&abs)),
            "# notes\n",
        )],
    );
    plant_index(
        &env.global_chats(),
        &[("glob0001", "Global notes", "2025-02-01T08:00:00Z")],
    );
    let mut s = env.spawn();
    let r = s.ok(json!({"action": "init"}));
    assert_eq!(r["global_only"], true);
    let listed = list(&s.ok(json!({"action": "chat_list"}))["chats"]);
    assert!(listed.iter().any(|e| e["id"] == "glob0001"), "{listed:?}");
    s.ok(json!({"action": "chat_select", "id": "glob0001"}));
    let c = s.ok(json!({"action": "chat_get"}));
    assert_eq!(c["global"], true);
    assert_eq!(msg_text(&list(&c["messages"])[0]), "Summarise");
    let r = s.ok(json!({"action": "get_context_file", "path": abs}));
    assert_eq!(r["content"], "# notes\n");
    s.shutdown();
}
