//! Generic components through the real binary (issue 25, ECOSYSTEM-PROTOCOL.md §5): a component
//! that does not export `bb7:tool/tool` offers every exported function as a tool, its JSON Schema
//! derived from the WIT types, called dynamically. The components: the generic-types example
//! (`examples/tool-components/generic-types`, built here as CI builds it) and wassette's filesystem
//! component, unchanged (`tests/fixtures/wassette/`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use bb7_mock_llm::{MockServer, Reply, Script, ToolCall};
use common::proto::*;
use serde_json::{Value, json};

use common::tools::{World, ok, p, packaged, refused as failed};

fn generic_types() -> PathBuf {
    common::tools::example("generic_types.wasm")
}

fn wassette_fs() -> PathBuf {
    common::wasm::repo_root().join("tests/fixtures/wassette/filesystem.wasm")
}

/// The manifest the wassette component is installed with (it ships none).
const WASSETTE_MANIFEST: &str = r#"name = "fs"
version = "0.1.0"
description = "wassette's filesystem example component"
files = "project-read"

[tools.list_directory]
description = "Lists a directory."
[tools.list_directory.params]
path = "An absolute path; / is the project."

[tools.read_file]
description = "Reads a file."
"#;

impl World {
    fn call(&self, tool: &str, args: Value) -> Output {
        self.run(&[
            "call",
            tool,
            "--dir",
            p(&self.proj()),
            "--args",
            &args.to_string(),
        ])
    }
    fn call_ok(&self, tool: &str, args: Value) -> Value {
        serde_json::from_str(ok(&self.call(tool, args)).trim()).unwrap()
    }
    fn audit_json(&self) -> Value {
        serde_json::from_str(&ok(&self.run(&["audit", "--json"]))).unwrap()
    }
    /// `name`'s entry in `tools audit --json`'s `third_party`.
    fn audited(&self, name: &str) -> Value {
        self.audit_json()["third_party"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not in tools audit"))
    }
}

/// The generic example installed and granted as `gen`.
fn with_gen() -> World {
    let w = World::new();
    let out = ok(&w.run(&["add", p(&generic_types()), "--project"]));
    assert!(out.contains("gen__add_u8"), "{out}");
    ok(&w.run(&["grant", "gen", "--all"]));
    w
}

#[test]
fn every_exported_function_is_a_tool_with_its_schema() {
    let w = with_gen();
    let comp = w.audited("gen");
    assert_eq!(comp["wit_version"], "generic");
    let tools: Vec<&Value> = comp["tools"].as_array().unwrap().iter().collect();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in [
        "gen__add_u8",
        "gen__echo",
        "gen__code_point",
        "gen__largest",
        // The interface's `echo` shares the world's name: interface-prefixed.
        "gen__types_echo",
        "gen__translate",
        "gen__swap",
        "gen__sum",
        "gen__next_color",
        "gen__invert",
        "gen__area",
        "gen__maybe_double",
        "gen__divide",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // The resource's function, constructor and method are skipped, with the reason.
    assert!(!names.iter().any(|n| n.contains("bump")), "{names:?}");
    let skipped = comp["skipped"].as_array().unwrap();
    let bump = skipped
        .iter()
        .find(|s| s["export"].as_str().unwrap().ends_with("#bump"))
        .unwrap_or_else(|| panic!("{skipped:?}"));
    assert!(
        bump["reason"].as_str().unwrap().contains("resource"),
        "{bump}"
    );
    let schema = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .map(|t| t["parameters"].clone())
            .unwrap()
    };
    let s = schema("gen__add_u8");
    assert_eq!(s["type"], "object");
    assert_eq!(s["required"], json!(["a", "b"]));
    assert_eq!(
        s["properties"]["a"],
        json!({"type": "integer", "minimum": 0, "maximum": 255, "description": "The first byte."})
    );
    assert_eq!(
        schema("gen__largest")["properties"]["n"]["maximum"],
        json!(u64::MAX)
    );
    assert_eq!(
        schema("gen__sum")["properties"]["xs"],
        json!({"type": "array", "items": {"type": "number"}})
    );
    assert_eq!(
        schema("gen__code_point")["properties"]["c"],
        json!({"type": "string", "minLength": 1, "maxLength": 1})
    );
    let point = &schema("gen__translate")["properties"]["p"];
    assert_eq!(point["type"], "object");
    assert_eq!(point["required"], json!(["x", "y"]));
    assert_eq!(point["properties"]["x"]["minimum"], json!(i32::MIN));
    let t = &schema("gen__swap")["properties"]["t"];
    assert_eq!(t["type"], "array");
    assert_eq!(t["prefixItems"][0], json!({"type": "string"}));
    assert_eq!(t["minItems"], 2);
    assert_eq!(
        schema("gen__next_color")["properties"]["c"],
        json!({"type": "string", "enum": ["red", "green", "blue"]})
    );
    let perms = &schema("gen__invert")["properties"]["p"];
    assert_eq!(perms["properties"]["exec"], json!({"type": "boolean"}));
    let shape = &schema("gen__area")["properties"]["s"]["oneOf"];
    assert_eq!(shape[0]["properties"]["tag"], json!({"const": "circle"}));
    assert_eq!(shape[0]["properties"]["val"], json!({"type": "number"}));
    assert_eq!(shape[2]["required"], json!(["tag"]));
    assert_eq!(
        schema("gen__maybe_double")["properties"]["n"]["anyOf"][0],
        json!({"type": "null"})
    );
    // Descriptions: from the manifest; `swap` has none and is marked.
    let desc = |n: &str| (*tools.iter().find(|t| t["name"] == n).unwrap()).clone();
    assert_eq!(
        desc("gen__divide")["description"],
        "Integer division; dividing by zero is an error."
    );
    assert_eq!(desc("gen__divide")["undocumented"], false);
    assert_eq!(desc("gen__swap")["undocumented"], true);
    let text = ok(&w.run(&["audit"]));
    assert!(text.contains("gen__swap (undocumented"), "{text}");
    assert!(
        text.contains("skipped       example:generic-types/types@0.1.0#bump"),
        "{text}"
    );
    // The header counts what the audit lists: 5 built-ins and 1 third-party component.
    assert!(
        text.contains("5 built-in and 1 third-party tool components"),
        "{text}"
    );
}

#[test]
fn values_convert_type_by_type_and_bad_arguments_are_refused_naming_the_parameter() {
    let w = with_gen();
    assert_eq!(
        w.call_ok("gen__add_u8", json!({"a": 200, "b": 50})),
        json!(250)
    );
    assert_eq!(
        w.call_ok("gen__echo", json!({"s": "héllo"})),
        json!("héllo")
    );
    assert_eq!(w.call_ok("gen__types_echo", json!({"s": "x"})), json!("x"));
    assert_eq!(w.call_ok("gen__code_point", json!({"c": "é"})), json!(233));
    assert_eq!(
        w.call_ok("gen__largest", json!({"n": u64::MAX})),
        json!(u64::MAX)
    );
    assert_eq!(
        w.call_ok(
            "gen__translate",
            json!({"p": {"x": 1, "y": -2}, "dx": 10, "dy": 20})
        ),
        json!({"x": 11, "y": 18})
    );
    assert_eq!(
        w.call_ok("gen__swap", json!({"t": ["a", -5]})),
        json!([-5, "a"])
    );
    assert_eq!(
        w.call_ok("gen__sum", json!({"xs": [1.5, 2.5, 3]})),
        json!(7.0)
    );
    assert_eq!(
        w.call_ok("gen__next_color", json!({"c": "blue"})),
        json!("red")
    );
    assert_eq!(
        w.call_ok("gen__invert", json!({"p": {"read": true, "write": false}})),
        json!({"write": true, "exec": true})
    );
    assert_eq!(
        w.call_ok("gen__area", json!({"s": {"tag": "square", "val": 3.0}})),
        json!(9.0)
    );
    assert_eq!(
        w.call_ok("gen__area", json!({"s": {"tag": "empty"}})),
        json!(0.0)
    );
    assert_eq!(w.call_ok("gen__maybe_double", json!({"n": 21})), json!(42));
    assert_eq!(
        w.call_ok("gen__maybe_double", json!({"n": null})),
        Value::Null
    );
    // result: the ok value is the result; the err value a tool error.
    assert_eq!(w.call_ok("gen__divide", json!({"a": 7, "b": 2})), json!(3));
    let e = failed(&w.call("gen__divide", json!({"a": 7, "b": 0})), 1);
    assert!(e.contains("division by zero"), "{e}");

    // Refusals, each naming the parameter.
    for (tool, args, want) in [
        (
            "gen__add_u8",
            json!({"a": 300, "b": 1}),
            "parameter a: 300 is out of range for u8 (0..=255)",
        ),
        (
            "gen__add_u8",
            json!({"a": -1, "b": 1}),
            "parameter a: -1 is out of range for u8",
        ),
        (
            "gen__add_u8",
            json!({"a": 1.5, "b": 1}),
            "parameter a: expected an integer (u8)",
        ),
        (
            "gen__add_u8",
            json!({"a": "1", "b": 1}),
            "parameter a: expected an integer (u8), got a string",
        ),
        ("gen__add_u8", json!({"a": 1}), "missing parameter b"),
        (
            "gen__add_u8",
            json!({"a": 1, "b": 2, "c": 3}),
            "unknown parameter c",
        ),
        (
            "gen__echo",
            json!({"s": 5}),
            "parameter s: expected a string",
        ),
        (
            "gen__code_point",
            json!({"c": "ab"}),
            "parameter c: expected exactly one character",
        ),
        (
            "gen__translate",
            json!({"p": {"x": 1}, "dx": 0, "dy": 0}),
            "parameter p: missing field y",
        ),
        (
            "gen__translate",
            json!({"p": {"x": 1, "y": 2, "z": 3}, "dx": 0, "dy": 0}),
            "parameter p: unknown field z",
        ),
        (
            "gen__swap",
            json!({"t": ["a"]}),
            "parameter t: expected an array of 2 items",
        ),
        (
            "gen__sum",
            json!({"xs": [1, "two"]}),
            "parameter xs[1]: expected a number",
        ),
        (
            "gen__next_color",
            json!({"c": "purple"}),
            "parameter c: \"purple\" is not one of: red, green, blue",
        ),
        (
            "gen__invert",
            json!({"p": {"sudo": true}}),
            "parameter p: unknown flag sudo",
        ),
        (
            "gen__area",
            json!({"s": {"tag": "hexagon"}}),
            "parameter s: unknown tag \"hexagon\"",
        ),
        (
            "gen__area",
            json!({"s": {"tag": "circle"}}),
            "parameter s: tag circle needs a val",
        ),
        (
            "gen__maybe_double",
            json!({"n": 40000}),
            "parameter n: 40000 is out of range for s16",
        ),
    ] {
        let e = failed(&w.call(tool, args.clone()), 1);
        assert!(e.contains("invalid-arguments"), "{tool} {args}: {e}");
        assert!(e.contains(want), "{tool} {args}: want {want:?} in {e}");
    }
    // A component with several tools is called by the tool's name; the component's alone is
    // refused, listing them.
    let e = failed(&w.call("gen", json!({})), 2);
    assert!(e.contains("name one") && e.contains("gen__divide"), "{e}");
    let e = failed(&w.call("gen__nope", json!({})), 2);
    assert!(e.contains("no such tool"), "{e}");
}

/// wassette's filesystem component, unchanged: installs with a manifest beside it, is granted
/// project-read, lists and reads project files through `tools call` — and cannot see `.git/`,
/// `.env` or anything outside the project. Its `wasi:sockets` import (Rust's standard library) is
/// linked with every operation denied and shown so by the audit.
#[test]
fn wassette_filesystem_component_reads_the_project_view_through_tools_call() {
    let w = World::new();
    std::fs::write(w.proj().join("a.txt"), "hello from a").unwrap();
    std::fs::create_dir_all(w.proj().join("src")).unwrap();
    std::fs::write(w.proj().join("src/b.rs"), "fn b() {}").unwrap();
    std::fs::create_dir_all(w.proj().join(".git")).unwrap();
    std::fs::write(w.proj().join(".git/config"), "GITSECRET").unwrap();
    std::fs::write(w.proj().join(".env"), "ENVSECRET=1").unwrap();
    std::fs::write(w.root.path().join("outside.txt"), "OUTSIDESECRET").unwrap();
    let d = packaged(&wassette_fs(), WASSETTE_MANIFEST);
    let out = ok(&w.run(&["add", p(d.path()), "--project"]));
    assert!(out.contains("fs__read_file"), "{out}");
    assert!(out.contains("fs__list_directory"), "{out}");
    ok(&w.run(&["grant", "fs", "--files", "project-read"]));
    let audit = ok(&w.run(&["audit"]));
    assert!(audit.contains("(imported, denied)"), "{audit}");
    assert!(audit.contains("fs__search_file (undocumented"), "{audit}");

    let listed = w.call_ok("fs__list_directory", json!({"path": "/"}));
    let listed = listed.to_string();
    assert!(
        listed.contains("a.txt") && listed.contains("src"),
        "{listed}"
    );
    assert!(
        !listed.contains(".git") && !listed.contains(".env"),
        "{listed}"
    );
    assert_eq!(
        w.call_ok("fs__read_file", json!({"path": "/a.txt"})),
        json!("hello from a")
    );
    assert_eq!(
        w.call_ok("fs__read_file", json!({"path": "/src/b.rs"})),
        json!("fn b() {}")
    );
    for path in [
        "/.git/config",
        "/.env",
        "/../outside.txt",
        &w.root.path().join("outside.txt").display().to_string(),
    ] {
        let o = w.call("fs__read_file", json!({"path": path}));
        let all = format!("{}{}", common::stdout(&o), common::stderr(&o));
        assert_eq!(o.status.code(), Some(1), "{path}: {all}");
        assert!(
            !all.contains("SECRET"),
            "{path} must not be readable: {all}"
        );
    }
}

/// The same component through agent mode against the mock server.
#[test]
fn wassette_filesystem_component_in_agent_mode() {
    let server = MockServer::start(Script::new(vec![
        Reply::tool_calls([
            ToolCall::new(0, "c1", "fs__list_directory", r#"{"path":"/"}"#),
            ToolCall::new(1, "c2", "fs__read_file", r#"{"path":"/src/a.txt"}"#),
            ToolCall::new(2, "c3", "fs__read_file", r#"{"path":"/.env"}"#),
        ]),
        Reply::text(["read"]),
    ]));
    let env = Env::new();
    write_file(
        &env.home().join(".config/bb7/config.json"),
        &json!({"api_key": "k", "base_url": server.base_url()}).to_string(),
    );
    env.write_local("src/a.txt", "agent can read this\n");
    env.write_local(".env", "SECRET=hunter2\n");
    let mut s = env.spawn();
    s.ok(json!({"action": "bb7_init", "project_root": env.proj_str()}));
    s.ok(json!({"action": "init", "project_root": env.proj_str()}));
    let d = packaged(&wassette_fs(), WASSETTE_MANIFEST);
    ok(&common::tools::run(
        &env.home(),
        &env.proj(),
        common::shared_cache(),
        &["add", p(d.path()), "--project"],
    ));
    ok(&common::tools::run(
        &env.home(),
        &env.proj(),
        common::shared_cache(),
        &["grant", "fs", "--all"],
    ));
    s.ok(json!({"action": "chat_new", "name": "t"}));
    let rid = s.next_id();
    s.send(&json!({"action": "send", "content": "read", "model": "mock/agent", "mode": "agent", "request_id": rid}));
    let want = json!(rid);
    let mut evs = Vec::new();
    let end = loop {
        let v = s.recv_where_for("send event", Duration::from_secs(120), |v| {
            v.get("request_id") == Some(&want)
        });
        match v["type"].as_str() {
            Some("done" | "diff_error" | "error") => break v,
            _ => evs.push(v),
        }
    };
    assert_eq!(end["type"], "done", "{end}");
    let done: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "agent_event" && e["kind"] == "tool.call.completed")
        .collect();
    assert_eq!(done.len(), 3, "{evs:?}");
    assert_eq!(done[0]["data"]["ok"], true, "{:?}", done[0]);
    assert_eq!(done[1]["data"]["ok"], true, "{:?}", done[1]);
    assert_eq!(done[2]["data"]["ok"], false, "{:?}", done[2]);
    let reqs = server.requests();
    let offered: Vec<String> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    for f in [
        "fs__list_directory",
        "fs__read_file",
        "fs__search_file",
        "fs__get_file_info",
    ] {
        assert!(offered.contains(&f.to_string()), "{f} not in {offered:?}");
    }
    let result = |id: &str| {
        reqs[1].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .and_then(|m| m["content"].as_str())
            .unwrap()
            .to_string()
    };
    assert!(result("c1").contains("src"), "{}", result("c1"));
    assert!(!result("c1").contains(".env"), "{}", result("c1"));
    assert!(
        result("c2").contains("agent can read this"),
        "{}",
        result("c2")
    );
    assert!(!result("c3").contains("hunter2"), "{}", result("c3"));
}

/// `generic_types.wasm` with a `package-docs` custom section appended (`wit-docs-inject`'s
/// format: a version byte, then JSON) documenting the interface's `swap`, which the manifest
/// leaves undescribed.
fn with_package_docs(dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(generic_types()).unwrap();
    let docs = json!({"interfaces": {"types": {"funcs": {"swap": "Swaps the pair."}}}});
    let name = b"package-docs";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.push(1);
    payload.extend_from_slice(docs.to_string().as_bytes());
    bytes.push(0);
    let mut n = payload.len();
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            bytes.push(b);
            break;
        }
        bytes.push(b | 0x80);
    }
    bytes.extend_from_slice(&payload);
    let out = dir.join("generic_types.wasm");
    std::fs::write(&out, bytes).unwrap();
    out
}

#[test]
fn package_docs_describe_a_tool_the_manifest_does_not() {
    let w = World::new();
    let wasm = with_package_docs(w.root.path());
    ok(&w.run(&["add", p(&wasm)]));
    let audit = w.audit_json();
    let swap = audit["third_party"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "gen__swap")
        .cloned()
        .unwrap();
    assert_eq!(swap["description"], "Swaps the pair.", "{swap}");
    assert_eq!(swap["undocumented"], false, "{swap}");
    assert!(!ok(&w.run(&["audit"])).contains("undocumented"));
}

/// Issue 25 leftover: the host's `tools_list` (what `:BB7Tools` shows) lists every tool of a
/// generic component, `<component>__<function>` with its description, and the functions it
/// skipped with the reason, as `bb7 tools audit` does — not only the first tool.
#[test]
fn tools_list_names_every_tool_of_a_generic_component_and_the_skipped_ones() {
    let w = with_gen();
    let want = w.audited("gen");
    let mut s = Bb7::spawn(&w.home(), &w.proj());
    let list = s.ok(json!({"action": "tools_list"}));
    s.shutdown();
    let gen_ = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["component"] == "gen")
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    let tools = gen_["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools list: {gen_}"));
    let pairs = |ts: &[Value]| -> Vec<(String, String)> {
        ts.iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_string(),
                    t["description"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(pairs(tools), pairs(want["tools"].as_array().unwrap()));
    assert!(tools.len() >= 13, "{tools:?}");
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for n in ["gen__add_u8", "gen__types_echo", "gen__divide"] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let add = tools.iter().find(|t| t["name"] == "gen__add_u8").unwrap();
    assert!(
        !add["description"].as_str().unwrap().is_empty(),
        "the manifest's description: {add}"
    );
    assert_eq!(gen_["skipped"], want["skipped"]);
    let skipped = gen_["skipped"].as_array().unwrap();
    let bump = skipped
        .iter()
        .find(|s| s["export"].as_str().unwrap().ends_with("#bump"))
        .unwrap_or_else(|| panic!("{skipped:?}"));
    assert!(
        bump["reason"].as_str().unwrap().contains("resource"),
        "{bump}"
    );
}
