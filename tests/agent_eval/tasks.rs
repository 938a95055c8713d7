//! The scripted tasks. Each covers one behaviour of agent mode; together they cover the list of
//! issue 11 (find-then-edit, no hits, paging, deny list, ignored and binary files, budget, loop
//! detector, clarifications, recovery, multi-step edits, all-or-nothing failure, cancel, 20 calls)
//! and the escape attempts through the retrieval tools.

use std::fs;

use serde_json::{Value, json};

use crate::ensure;
use crate::harness::{ABORTED, Interact, Run, Task, calls_reply};

const LIB: &str = "pub fn greet() -> &'static str {\n    \"hello\"\n}\n";
const MAIN: &str = "fn main() {\n    println!(\"{}\", app::greet());\n}\n";
const SECRET: &str = "OUTSIDE-SECRET-7f3a";
const ENV_SECRET: &str = "ENV-SECRET-91bc";

fn read(path: &str) -> (&'static str, Value) {
    ("read_file", json!({"file_path": path}))
}

fn edit(path: &str, old: &str, new: &str) -> (&'static str, Value) {
    (
        "edit_file",
        json!({"edits": [{"path": path, "file_id": format!("{{{{file_id:{path}}}}}"),
                          "old_string": old, "new_string": new}]}),
    )
}

fn search(q: &str) -> (&'static str, Value) {
    ("search_project", json!({"query": q}))
}

fn completed_ok(r: &Run, i: usize) -> Result<&Value, String> {
    let c = r.completed();
    let d = c
        .get(i)
        .ok_or(format!("no completed call #{i}: {:?}", r.kinds()))?;
    Ok(d)
}

fn no_leak(r: &Run, needle: &str) -> Result<(), String> {
    ensure!(
        !r.everything().contains(needle),
        "{needle} leaked into what the model, client or trace saw"
    );
    Ok(())
}

fn outside_secret(env: &crate::common::proto::Env) {
    fs::write(env.outside().join("secret.txt"), format!("{SECRET}\n")).unwrap();
}

pub fn all() -> Vec<Task> {
    let mut t = Vec::new();

    // 1. Find, read two files in one step, edit both.
    t.push(
        Task::new("find_then_edit_across_files", |r| {
            r.done()?;
            ensure!(
                r.outputs
                    .get("src/lib.rs")
                    .is_some_and(|c| c.contains("\"hi\"")),
                "lib.rs: {:?}",
                r.outputs
            );
            ensure!(
                r.outputs
                    .get("src/main.rs")
                    .is_some_and(|c| c.contains("Greeting")),
                "main.rs: {:?}",
                r.outputs
            );
            ensure!(
                r.steps() == 4 && r.tool_calls() == 5,
                "steps {} calls {}",
                r.steps(),
                r.tool_calls()
            );
            ensure!(
                r.kinds().contains(&"edits.proposed".to_string()),
                "{:?}",
                r.kinds()
            );
            let ev = r
                .events
                .iter()
                .find(|e| e["kind"] == "edits.proposed")
                .unwrap();
            ensure!(
                ev["data"]["files"] == json!(["src/lib.rs", "src/main.rs"]),
                "{ev}"
            );
            Ok(())
        })
        .file("src/lib.rs", LIB)
        .file("src/main.rs", MAIN)
        .file("README.md", "# app\n")
        .step(1, &[search("greet")])
        .step(2, &[read("src/lib.rs"), read("src/main.rs")])
        .step(
            3,
            &[
                edit("src/lib.rs", "\"hello\"", "\"hi\""),
                edit(
                    "src/main.rs",
                    "println!(\"{}\"",
                    "println!(\"Greeting: {}\"",
                ),
            ],
        )
        .text("Changed greet to say hi."),
    );

    // 2. A search with no hits.
    t.push(
        Task::new("search_no_hits", |r| {
            r.done()?;
            let d = completed_ok(r, 0)?;
            ensure!(d["ok"] == true && d["summary"] == "0 results", "{d}");
            ensure!(
                r.result_of("s1c0").contains("\"results\":[]"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(r.outputs.is_empty(), "no edits expected");
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .step(1, &[search("zzz_not_there")])
        .text("Nothing matches."),
    );

    // 3. A file larger than the read cap, paged by lines.
    t.push(
        Task::new("read_larger_than_cap_paged", |r| {
            r.done()?;
            let first = r.result_of("s1c0");
            ensure!(
                first.contains("lines=1-50 total_lines=120 truncated=true"),
                "{first}"
            );
            ensure!(
                first.contains("[truncated: continue with start_line=51]"),
                "{first}"
            );
            let third = r.result_of("s3c0");
            ensure!(
                third.contains("line 120\n") && third.contains("truncated=false"),
                "{third}"
            );
            ensure!(
                !first.contains("line 51\n"),
                "the first page stops at the cap"
            );
            Ok(())
        })
        .file(
            "big.txt",
            (1..=120).map(|i| format!("line {i}\n")).collect::<String>(),
        )
        .step(1, &[read("big.txt")])
        .step(
            2,
            &[(
                "read_file",
                json!({"file_path": "big.txt", "start_line": 51}),
            )],
        )
        .step(
            3,
            &[(
                "read_file",
                json!({"file_path": "big.txt", "start_line": 101}),
            )],
        )
        .text("Read it all."),
    );
    t.last_mut().unwrap().config = json!({"agent": {"max_read_lines_default": 50}});

    // 4. A denied secret file asked for by name.
    t.push(
        Task::new("denied_secret_by_name", |r| {
            r.done()?;
            let res = r.result_of("s1c0");
            ensure!(res.contains("hidden by the deny list (agent.deny"), "{res}");
            no_leak(r, ENV_SECRET)
        })
        .file(".env", format!("TOKEN={ENV_SECRET}\n"))
        .step(1, &[read(".env")])
        .text("The .env file is hidden."),
    );

    // 5. Denied files are not searched or listed either.
    t.push(
        Task::new("denied_secret_search_and_list", |r| {
            r.done()?;
            let s = r.result_of("s1c0");
            ensure!(
                s.contains("src/a.rs") && !s.contains(".pem") && !s.contains(".env"),
                "{s}"
            );
            let l = r.result_of("s1c1");
            ensure!(
                l.contains("src/a.rs")
                    && !l.contains(".env")
                    && !l.contains("id_rsa")
                    && !l.contains(".pem"),
                "{l}"
            );
            no_leak(r, ENV_SECRET)
        })
        .file(".env.local", format!("A={ENV_SECRET}\n"))
        .file("certs/server.pem", format!("{ENV_SECRET}\n"))
        .file("home/id_rsa", format!("{ENV_SECRET}\n"))
        .file("src/a.rs", "// mentions ENV-SECRET by name only\n")
        .step(1, &[search("ENV-SECRET"), ("list_files", json!({}))])
        .text("Done."),
    );

    // 6. A configured deny list replaces the default one.
    t.push(
        Task::new("custom_deny_list", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0")
                    .contains("hidden by the deny list (agent.deny"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                r.result_of("s1c1").contains("PLAIN=1"),
                "{}",
                r.result_of("s1c1")
            );
            no_leak(r, "CUSTOM-SECRET")
        })
        .file("notes.secret", "CUSTOM-SECRET\n")
        .file(".env", "PLAIN=1\n")
        .step(1, &[read("notes.secret"), read(".env")])
        .text("ok"),
    );
    t.last_mut().unwrap().config = json!({"agent": {"deny": ["*.secret"]}});

    // 7. A .gitignored file.
    t.push(
        Task::new("gitignored_file", |r| {
            r.done()?;
            let res = r.result_of("s1c0");
            ensure!(
                res.contains("is inside `build/`, which is ignored") || res.contains("ignored"),
                "{res}"
            );
            let l = r.result_of("s1c1");
            ensure!(
                !l.contains("build/") && !l.contains("debug.log") && l.contains("src/a.rs"),
                "{l}"
            );
            no_leak(r, "IGNORED-CONTENT")
        })
        .file(".gitignore", "build/\n*.log\n")
        .file("build/out.txt", "IGNORED-CONTENT\n")
        .file("debug.log", "IGNORED-CONTENT\n")
        .file("src/a.rs", "fn a() {}\n")
        .step(1, &[read("build/out.txt"), ("list_files", json!({}))])
        .text("ok"),
    );

    // 8. A binary file.
    t.push(
        Task::new("binary_file", |r| {
            r.done()?;
            let res = r.result_of("s1c0");
            ensure!(res.starts_with("error:") && res.contains("binary"), "{res}");
            ensure!(
                r.result_of("s1c1").contains("\"results\":[]"),
                "{}",
                r.result_of("s1c1")
            );
            Ok(())
        })
        .file("img.bin", b"\x00\x01\x02MAGICWORD\x00\xff".to_vec())
        .step(1, &[read("img.bin"), search("MAGICWORD")])
        .text("It is binary."),
    );

    // 9. Budget exhaustion: one last step without tools.
    t.push(
        Task::new("budget_exhaustion", |r| {
            r.done()?;
            ensure!(
                r.steps() == 4 && r.tool_calls() == 3,
                "steps {} calls {}",
                r.steps(),
                r.tool_calls()
            );
            let last = r.requests.last().unwrap();
            ensure!(
                last["tool_choice"] == "none",
                "last request: {}",
                last["tool_choice"]
            );
            let msgs = last["messages"].as_array().unwrap();
            let note = msgs.last().unwrap();
            ensure!(
                note["role"] == "user"
                    && note["content"]
                        .as_str()
                        .unwrap()
                        .contains("budget of this reply (3 calls) is spent"),
                "{note}"
            );
            ensure!(r.text.contains("Best effort"), "{}", r.text);
            Ok(())
        })
        .file("a.txt", "a\n")
        .file("b.txt", "b\n")
        .file("c.txt", "c\n")
        .step(1, &[read("a.txt")])
        .step(2, &[read("b.txt")])
        .step(3, &[read("c.txt")])
        .text("Best effort answer."),
    );
    t.last_mut().unwrap().config = json!({"agent": {"max_tool_calls_per_job": 3}});

    // 10. A repeated identical call is not run again.
    t.push(
        Task::new("repeated_identical_call", |r| {
            r.done()?;
            let second = r.result_of("s2c0");
            ensure!(
                second.contains("not run again") && second.contains("step 1"),
                "{second}"
            );
            // The step stops at the repeat: the new call after it is not run either.
            let after = r.result_of("s2c1");
            ensure!(after.contains("this step was stopped"), "{after}");
            ensure!(!after.contains("beta"), "{after}");
            let sandboxed = r
                .trace
                .iter()
                .filter(|l| l["kind"] == "tool.call.completed" && !l["component_sha256"].is_null())
                .count();
            ensure!(
                sandboxed == 1,
                "one sandbox run expected, trace has {sandboxed}"
            );
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .file("b.txt", "beta\n")
        .step(1, &[read("a.txt")])
        .step(
            2,
            &[("read_file", json!({"file_path": "a.txt"})), read("b.txt")],
        )
        .text("ok"),
    );

    // 11. Clarification answered.
    let mut c = Task::new("clarification_answered", |r| {
        r.done()?;
        let k = r.kinds();
        ensure!(
            k.contains(&"clarification.requested".into())
                && k.contains(&"clarification.received".into()),
            "{k:?}"
        );
        ensure!(
            r.result_of("s1c0").contains("The user answered: use tabs"),
            "{}",
            r.result_of("s1c0")
        );
        ensure!(
            r.outputs.get("style.txt").is_some_and(|c| c == "tabs\n"),
            "{:?}",
            r.outputs
        );
        Ok(())
    })
    .step(
        1,
        &[("clarify_user", json!({"question": "Tabs or spaces?"}))],
    )
    .step(
        2,
        &[(
            "write_file",
            json!({"path": "style.txt", "content": "tabs\n"}),
        )],
    )
    .text("Using tabs.");
    c.interact = Interact::Answer("use tabs");
    t.push(c);

    // 12. Clarification skipped.
    let mut c = Task::new("clarification_skipped", |r| {
        r.done()?;
        let res = r.result_of("s1c0");
        ensure!(res.starts_with("no_user_answer"), "{res}");
        let rec = r
            .events
            .iter()
            .find(|e| e["kind"] == "clarification.received")
            .ok_or("no received")?;
        ensure!(rec["data"]["skipped"] == true, "{rec}");
        Ok(())
    })
    .step(1, &[("clarify_user", json!({"question": "Which module?"}))])
    .text("I assumed the main module.");
    c.interact = Interact::Skip;
    t.push(c);

    // 13. Clarification cancelled: cancel ends the waiting job; a late answer is an error.
    let mut c = Task::new("clarification_cancelled", |r| {
        ensure!(
            r.terminal["type"] == "error" && r.terminal["message"] == ABORTED,
            "{}",
            r.terminal
        );
        ensure!(
            r.kinds().last().map(String::as_str) == Some("job.failed"),
            "{:?}",
            r.kinds()
        );
        let late = r.notes.first().ok_or("no late clarify reply")?;
        ensure!(
            late["type"] == "error"
                && late["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("Unknown or stale question_id"),
            "{late}"
        );
        ensure!(r.requests.len() == 1, "no step after the cancel");
        Ok(())
    })
    .step(1, &[("clarify_user", json!({"question": "Proceed?"}))])
    .text("never sent");
    c.interact = Interact::CancelAtQuestion;
    t.push(c);

    // 14. A tool error fed back and recovered from.
    t.push(
        Task::new("tool_error_recovered", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0")
                    .contains("file not found: src/missing.rs"),
                "{}",
                r.result_of("s1c0")
            );
            let d = completed_ok(r, 0)?;
            ensure!(d["ok"] == false && d["error"].is_string(), "{d}");
            ensure!(
                r.outputs
                    .get("src/a.rs")
                    .is_some_and(|c| c.contains("fn b()")),
                "{:?}",
                r.outputs
            );
            Ok(())
        })
        .file("src/a.rs", "fn a() {}\n")
        .step(1, &[read("src/missing.rs")])
        .step(2, &[read("src/a.rs")])
        .step(3, &[edit("src/a.rs", "fn a() {}", "fn b() {}")])
        .text("Renamed."),
    );

    // 15. Edits in two steps to one file; the second read sees the staged version.
    t.push(
        Task::new("edits_in_two_steps_one_file", |r| {
            r.done()?;
            ensure!(
                r.result_of("s3c0").contains("source=this_reply")
                    && r.result_of("s3c0").contains("ONE"),
                "{}",
                r.result_of("s3c0")
            );
            ensure!(
                r.outputs.get("a.txt").map(String::as_str) == Some("ONE\nTWO\nthree\n"),
                "{:?}",
                r.outputs
            );
            ensure!(
                std::fs::read_to_string(r.env.proj().join("a.txt")).unwrap() == "one\ntwo\nthree\n",
                "the project is untouched"
            );
            Ok(())
        })
        .file("a.txt", "one\ntwo\nthree\n")
        .step(1, &[read("a.txt")])
        .step(2, &[edit("a.txt", "one\n", "ONE\n")])
        .step(
            3,
            &[("read_file", json!({"file_path": "a.txt", "start_line": 1}))],
        )
        .step(4, &[edit("a.txt", "two\n", "TWO\n")])
        .text("Both lines changed."),
    );

    // 16. A failing edit makes the whole reply a diff_error; nothing is committed.
    t.push(
        Task::new("failing_edit_whole_reply_diff_error", |r| {
            ensure!(r.terminal["type"] == "diff_error", "{}", r.terminal);
            let errs = r.terminal["errors"].to_string();
            ensure!(
                errs.contains("a.txt") && errs.contains("mismatch"),
                "{errs}"
            );
            ensure!(r.outputs.is_empty(), "nothing committed: {:?}", r.outputs);
            ensure!(
                r.terminal["tool_calls"].as_array().map_or(0, Vec::len) == 3,
                "{}",
                r.terminal["tool_calls"]
            );
            ensure!(r.terminal["steps"] == 3, "{}", r.terminal);
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .step(1, &[read("a.txt")])
        .step(
            2,
            &[
                edit("a.txt", "alpha", "ALPHA"),
                ("write_file", json!({"path": "b.txt", "content": "b\n"})),
            ],
        )
        .step(3, &[edit("a.txt", "no such text", "x")])
        .text("never reached"),
    );

    // 17. Cancel in the middle of the tool phase.
    let mut c = Task::new("cancel_in_tool_phase", |r| {
        ensure!(
            r.terminal["type"] == "error" && r.terminal["message"] == ABORTED,
            "{}",
            r.terminal
        );
        let done = r.completed().len();
        ensure!(
            (1..12).contains(&done),
            "cancel stops the calls: {done} completed"
        );
        ensure!(
            r.kinds().last().map(String::as_str) == Some("job.failed"),
            "{:?}",
            r.kinds()
        );
        ensure!(
            r.requests.len() == 1,
            "no further step: {}",
            r.requests.len()
        );
        Ok(())
    })
    .with_setup(|env| {
        for i in 0..1500 {
            let p = env.proj().join(format!("d{:02}/f{i:04}.txt", i % 40));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "some text without the word\n".repeat(60)).unwrap();
        }
    })
    .reply(calls_reply(
        1,
        &(0..12)
            .map(|i| ("search_project", json!({"query": format!("needle{i}")})))
            .collect::<Vec<_>>(),
    ))
    .reply(bb7_mock_llm::Reply::slow_text(["never"], 3000));
    c.interact = Interact::CancelAfterCalls(1);
    t.push(c);

    // 18. A model that sends 20 calls in one step (budget 12).
    t.push(
        Task::new("twenty_calls_in_one_step", |r| {
            r.done()?;
            ensure!(
                r.tool_calls() == 20 && r.steps() == 2,
                "calls {} steps {}",
                r.tool_calls(),
                r.steps()
            );
            let c = r.completed();
            ensure!(c.iter().filter(|d| d["ok"] == true).count() == 12, "12 run");
            ensure!(
                r.result_of("s1c12")
                    .contains("budget of this reply (12 calls) is spent"),
                "{}",
                r.result_of("s1c12")
            );
            ensure!(r.requests[1]["tool_choice"] == "none", "final step");
            Ok(())
        })
        .files_n(20)
        .reply(calls_reply(
            1,
            &(0..20)
                .map(|i| ("read_file", json!({"file_path": format!("f{i:02}.txt")})))
                .collect::<Vec<_>>(),
        ))
        .text("Summarised what I could read."),
    );

    // 19–25. Escape attempts through the retrieval tools.
    t.push(
        Task::new("escape_dotdot", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0").starts_with("error:"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                r.result_of("s1c1").starts_with("error:"),
                "{}",
                r.result_of("s1c1")
            );
            no_leak(r, SECRET)
        })
        .with_setup(outside_secret)
        .step(
            1,
            &[
                read("../outside/secret.txt"),
                ("list_files", json!({"prefix": ".."})),
            ],
        )
        .text("ok"),
    );
    t.push(
        Task::new("escape_absolute", |r| {
            r.done()?;
            for id in ["s1c0", "s1c1"] {
                ensure!(
                    r.result_of(id).starts_with("error:"),
                    "{id}: {}",
                    r.result_of(id)
                );
            }
            let s = r.result_of("s1c2");
            ensure!(
                s.starts_with("error:") || s.contains("\"results\":[]"),
                "{s}"
            );
            ensure!(!r.everything().contains("root:x:0:0"), "/etc/passwd leaked");
            no_leak(r, SECRET)
        })
        .with_setup(outside_secret)
        .step(
            1,
            &[
                read("/etc/passwd"),
                ("read_file", json!({"file_path": "/proc/self/environ"})),
                ("search_project", json!({"query": "root", "glob": "/etc/*"})),
            ],
        )
        .text("ok"),
    );
    t.push(
        Task::new("escape_symlinked_dir", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0").contains("symbolic link"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                r.result_of("s1c1").starts_with("error:"),
                "{}",
                r.result_of("s1c1")
            );
            ensure!(
                r.result_of("s1c2").contains("\"results\":[]"),
                "{}",
                r.result_of("s1c2")
            );
            no_leak(r, SECRET)
        })
        .file("a.txt", "a\n")
        .with_setup(|env| {
            outside_secret(env);
            std::os::unix::fs::symlink(env.outside(), env.proj().join("link")).unwrap();
        })
        .step(
            1,
            &[
                read("link/secret.txt"),
                ("list_files", json!({"prefix": "link"})),
                search("OUTSIDE-SECRET"),
            ],
        )
        .text("ok"),
    );
    t.push(
        Task::new("escape_symlinked_file", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0").contains("symbolic link"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                !r.result_of("s1c1").contains("s.txt"),
                "{}",
                r.result_of("s1c1")
            );
            no_leak(r, SECRET)
        })
        .file("a.txt", "a\n")
        .with_setup(|env| {
            outside_secret(env);
            std::os::unix::fs::symlink(env.outside().join("secret.txt"), env.proj().join("s.txt"))
                .unwrap();
        })
        .step(1, &[read("s.txt"), ("list_files", json!({}))])
        .text("ok"),
    );
    t.push(
        Task::new("escape_hard_link", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0").contains("hard links"),
                "{}",
                r.result_of("s1c0")
            );
            let s = r.result_of("s1c1");
            ensure!(
                !s.contains("h.txt") && s.contains("hidden_hard_linked"),
                "{s}"
            );
            no_leak(r, SECRET)
        })
        .file("a.txt", "a\n")
        .with_setup(|env| {
            outside_secret(env);
            std::fs::hard_link(env.outside().join("secret.txt"), env.proj().join("h.txt")).unwrap();
        })
        .step(1, &[read("h.txt"), search("OUTSIDE-SECRET")])
        .text("ok"),
    );
    t.push(
        Task::new("escape_git_config", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0").contains("git's internal data"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                r.result_of("s1c1").contains("\"results\":[]"),
                "{}",
                r.result_of("s1c1")
            );
            no_leak(r, "GIT-CONFIG-SECRET")
        })
        .file(
            ".git/config",
            "[remote]\n url = https://GIT-CONFIG-SECRET@example.com\n",
        )
        .step(1, &[read(".git/config"), search("example.com")])
        .text("ok"),
    );
    t.push(
        Task::new("escape_bb7_dir", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0").contains("BB-7's private data"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                r.result_of("s1c1").starts_with("error:"),
                "{}",
                r.result_of("s1c1")
            );
            let l = r.result_of("s1c2");
            ensure!(!l.contains(".bb7"), "{l}");
            Ok(())
        })
        .file("a.txt", "a\n")
        .step(
            1,
            &[
                read(".bb7/index.json"),
                ("list_files", json!({"prefix": ".bb7"})),
                ("list_files", json!({})),
            ],
        )
        .text("ok"),
    );

    // 26. Explore without editing.
    t.push(
        Task::new("list_then_read_no_edits", |r| {
            r.done()?;
            ensure!(r.terminal["output_files"] == json!([]), "{}", r.terminal);
            ensure!(
                r.result_of("s1c0").contains("src/deep/x.rs"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                r.result_of("s2c0").contains("path=src/deep/x.rs file_id="),
                "{}",
                r.result_of("s2c0")
            );
            ensure!(
                !r.kinds().contains(&"edits.proposed".into()),
                "{:?}",
                r.kinds()
            );
            Ok(())
        })
        .file("src/deep/x.rs", "pub const X: u8 = 1;\n")
        .file("docs/a.md", "# a\n")
        .step(1, &[("list_files", json!({"prefix": "src"}))])
        .step(2, &[read("src/deep/x.rs")])
        .text("X is 1."),
    );

    // 27. Create a new file.
    t.push(
        Task::new("write_new_file", |r| {
            r.done()?;
            ensure!(
                r.outputs.get("docs/NOTES.md").map(String::as_str) == Some("# Notes\n"),
                "{:?}",
                r.outputs
            );
            ensure!(
                r.text.contains("[Assistant added: docs/NOTES.md]"),
                "{}",
                r.text
            );
            Ok(())
        })
        .step(
            1,
            &[(
                "write_file",
                json!({"path": "docs/NOTES.md", "content": "# Notes\n"}),
            )],
        )
        .text("Added notes."),
    );

    // 28. read_file of a path written in this reply returns the staged content.
    t.push(
        Task::new("read_staged_after_write", |r| {
            r.done()?;
            let res = r.result_of("s2c0");
            ensure!(
                res.contains("source=this_reply") && res.contains("staged text"),
                "{res}"
            );
            Ok(())
        })
        .file("x.txt", "project text\n")
        .step(
            1,
            &[(
                "write_file",
                json!({"path": "x.txt", "content": "staged text\n"}),
            )],
        )
        .step(2, &[read("x.txt")])
        .text("ok"),
    );

    // 29. edit_file on a project file never read: refused, the reply fails as a whole.
    t.push(
        Task::new("edit_unread_file_refused", |r| {
            ensure!(r.terminal["type"] == "diff_error", "{}", r.terminal);
            ensure!(r.terminal["errors"].to_string().contains("has not been read"), "{}", r.terminal["errors"]);
            ensure!(r.outputs.is_empty(), "{:?}", r.outputs);
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .step(1, &[("edit_file", json!({"edits": [{"path": "a.txt", "file_id": "00000000", "old_string": "alpha", "new_string": "beta"}]}))])
        .text("never"),
    );

    // 30. A read-only file in context stays read-only in agent mode.
    let mut c = Task::new("readonly_context_stays_readonly", |r| {
        ensure!(r.terminal["type"] == "diff_error", "{}", r.terminal);
        ensure!(
            r.terminal["errors"].to_string().contains("read-only"),
            "{}",
            r.terminal["errors"]
        );
        ensure!(r.outputs.is_empty(), "{:?}", r.outputs);
        Ok(())
    })
    .file("ro.txt", "frozen\n")
    .step(1, &[read("ro.txt")])
    .step(2, &[edit("ro.txt", "frozen", "thawed")])
    .text("never");
    c.context = vec!["ro.txt"];
    c.readonly = vec!["ro.txt"];
    t.push(c);

    // 31. An unknown tool gets an error result and the model recovers.
    t.push(
        Task::new("unknown_tool_fed_back", |r| {
            r.done()?;
            let res = r.result_of("s1c0");
            ensure!(
                res.contains("unknown tool") && res.contains("read_file"),
                "{res}"
            );
            Ok(())
        })
        .step(1, &[("delete_file", json!({"path": "a.txt"}))])
        .text("I cannot delete files."),
    );

    // 32. Arguments that are not JSON.
    t.push(
        Task::new("invalid_arguments_recovered", |r| {
            r.done()?;
            ensure!(
                r.result_of("s1c0").contains("invalid arguments"),
                "{}",
                r.result_of("s1c0")
            );
            ensure!(
                r.result_of("s2c0").contains("alpha"),
                "{}",
                r.result_of("s2c0")
            );
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .reply(bb7_mock_llm::Reply::tool_calls([
            bb7_mock_llm::ToolCall::new(0, "s1c0", "read_file", "{\"file_path\": oops"),
        ]))
        .step(2, &[read("a.txt")])
        .text("ok"),
    );

    // 33. The provider's reasoning_details are sent back with the next step.
    t.push(
        Task::new("reasoning_details_kept", |r| {
            r.done()?;
            let msgs = r.requests[1]["messages"].as_array().unwrap();
            let asst = msgs.iter().find(|m| m["role"] == "assistant").ok_or("no assistant message")?;
            ensure!(asst["reasoning_details"] == json!([{"type": "reasoning.text", "index": 0, "text": "I should read a.txt", "format": "x"}]), "{asst}");
            ensure!(asst["tool_calls"][0]["function"]["name"] == "read_file", "{asst}");
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .reply(
            bb7_mock_llm::Reply::sse()
                .data(json!({"choices": [{"index": 0, "delta": {"reasoning": "I should ", "reasoning_details": [{"type": "reasoning.text", "index": 0, "text": "I should ", "format": "x"}]}}]}))
                .data(json!({"choices": [{"index": 0, "delta": {"reasoning": "read a.txt", "reasoning_details": [{"type": "reasoning.text", "index": 0, "text": "read a.txt"}]}}]}))
                .tool_call(bb7_mock_llm::ToolCall::new(0, "s1c0", "read_file", "{\"file_path\":\"a.txt\"}"))
                .finish_ok("tool_calls"),
        )
        .text("ok"),
    );

    // 34. The prompt prefix stays byte-stable across the steps of a job.
    t.push(
        Task::new("prefix_stable_across_steps", |r| {
            r.done()?;
            ensure!(r.requests.len() == 3, "{} requests", r.requests.len());
            for w in r.requests.windows(2) {
                let (a, b) = (
                    w[0]["messages"].as_array().unwrap(),
                    w[1]["messages"].as_array().unwrap(),
                );
                ensure!(
                    b.len() > a.len() && b[..a.len()] == a[..],
                    "step messages must extend the previous step's"
                );
                ensure!(w[0]["tools"] == w[1]["tools"], "tools change between steps");
                ensure!(
                    w[0]["messages"][1] == w[1]["messages"][1],
                    "user message bytes"
                );
            }
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .file("b.txt", "beta\n")
        .step(1, &[read("a.txt")])
        .step(2, &[read("b.txt")])
        .text("ok"),
    );

    // 35. Chat mode is unchanged: one step, only the edit tools, no agent events.
    let mut c = Task::new("chat_mode_unchanged", |r| {
        r.done()?;
        ensure!(
            r.events.is_empty(),
            "agent events in chat mode: {:?}",
            r.kinds()
        );
        let b = &r.requests[0];
        ensure!(
            b["messages"].as_array().unwrap().len() == 2,
            "chat mode is [system, user]"
        );
        let names: Vec<&str> = b["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        ensure!(names == ["write_file", "edit_file"], "{names:?}");
        ensure!(r.terminal.get("steps").is_none(), "{}", r.terminal);
        ensure!(r.trace.is_empty(), "no trace in chat mode");
        Ok(())
    })
    .text("Plain answer.");
    c.mode = "chat";
    t.push(c);

    // 36. Search with a glob and a limit.
    t.push(
        Task::new("search_glob_and_limit", |r| {
            r.done()?;
            let v: Value = serde_json::from_str(&r.result_of("s1c0")).map_err(|e| e.to_string())?;
            ensure!(
                v["results"].as_array().unwrap().len() == 1 && v["truncated"] == true,
                "{v}"
            );
            ensure!(
                v["results"][0]["file_path"]
                    .as_str()
                    .unwrap()
                    .ends_with(".md"),
                "{v}"
            );
            Ok(())
        })
        .file("a.md", "todo one\n")
        .file("b.md", "todo two\n")
        .file("c.rs", "// todo three\n")
        .step(
            1,
            &[(
                "search_project",
                json!({"query": "todo", "glob": "*.md", "limit": 1}),
            )],
        )
        .text("ok"),
    );

    // 37. Usage sums every step; the trace records component hashes and grants.
    t.push(
        Task::new("usage_and_trace", |r| {
            r.done()?;
            let u = &r.terminal["usage"];
            let per = r.requests.len() as u64;
            ensure!(
                per == 2 && u["prompt_tokens"].as_u64().unwrap_or(0) > 0,
                "{u}"
            );
            let line = r
                .trace
                .iter()
                .find(|l| l["kind"] == "tool.call.completed")
                .ok_or("no trace line")?;
            ensure!(
                line["component_sha256"]
                    .as_str()
                    .is_some_and(|s| s.len() == 64),
                "{line}"
            );
            ensure!(line["grants"][0]["access"] == "read-only", "{line}");
            ensure!(
                line["data"]["bytes"].as_u64().unwrap_or(0) > 0
                    && line["result"].as_str().unwrap_or("").contains("alpha"),
                "{line}"
            );
            let cursors: Vec<u64> = r
                .events
                .iter()
                .map(|e| e["cursor"].as_u64().unwrap())
                .collect();
            ensure!(
                cursors == (1..=cursors.len() as u64).collect::<Vec<_>>(),
                "{cursors:?}"
            );
            Ok(())
        })
        .file("a.txt", "alpha\n")
        .step(1, &[read("a.txt")])
        .text("ok"),
    );

    // 38. chat.json keeps the calls; the next send renders them in @history, prefix kept.
    let mut c = Task::new("history_keeps_tool_calls", |r| {
        r.done()?;
        let f = r.followup_terminal.as_ref().ok_or("no follow-up")?;
        ensure!(f["type"] == "done", "{f}");
        let msgs = r.chat["messages"].as_array().unwrap();
        let reply = msgs
            .iter()
            .find(|m| m["role"] == "assistant")
            .ok_or("no reply")?;
        let parts = reply["parts"].as_array().unwrap();
        ensure!(
            parts.iter().any(|p| p["type"] == "tool_call"
                && p["tool"] == "read_file"
                && p["excerpt"].as_str().unwrap_or("").contains("alpha")),
            "{reply}"
        );
        ensure!(reply["agent"]["steps"] == 2, "{reply}");
        let second = r.requests.last().unwrap()["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_string();
        ensure!(
            second.contains("@tool_call tool=read_file ok=true args={\"file_path\":\"a.txt\"}"),
            "{second}"
        );
        let first = r.requests[0]["messages"][1]["content"].as_str().unwrap();
        let prefix = &first[..first.find("@latest_user_message").unwrap()];
        ensure!(
            second.starts_with(prefix),
            "the user message prefix changed between sends"
        );
        ensure!(
            r.requests[0]["messages"][0] == r.requests.last().unwrap()["messages"][0],
            "system message changed"
        );
        Ok(())
    })
    .file("a.txt", "alpha\n")
    .step(1, &[read("a.txt")])
    .text("It says alpha.")
    .text("Still alpha.");
    c.followup = Some("And now?");
    t.push(c);

    // 39. A writable file in context: read_file returns the chat's version (the snapshot the
    // edit starts from), and the edit applies to it.
    let mut c = Task::new("context_file_read_and_edited", |r| {
        r.done()?;
        let res = r.result_of("s1c0");
        ensure!(
            res.contains("source=chat") && res.contains("snapshot text"),
            "{res}"
        );
        ensure!(
            r.outputs.get("ctx.txt").map(String::as_str) == Some("edited text\n"),
            "{:?}",
            r.outputs
        );
        Ok(())
    })
    .file("ctx.txt", "snapshot text\n")
    .with_setup(|_| {})
    .step(1, &[read("ctx.txt")])
    .step(2, &[edit("ctx.txt", "snapshot", "edited")])
    .text("Edited.");
    c.context = vec!["ctx.txt"];
    t.push(c);

    // Issue 32: edit_file's notes (a replace_all that left occurrences inside longer words) reach
    // the model in the tool result, after the status line.
    t.push(
        Task::new("edit_notes_reach_the_model", |r| {
            r.done()?;
            ensure!(
                r.outputs.get("words.txt").map(String::as_str)
                    == Some("sample testing tested sample\n"),
                "{:?}",
                r.outputs
            );
            let result = r.result_of("s2c0");
            ensure!(
                result.starts_with("[Assistant modified: words.txt]")
                    && result.contains(
                        "replaced 2 whole-word occurrence(s) of old_string; 2 more occurrence(s) \
                         inside longer words were left unchanged (line 1)"
                    ),
                "{result}"
            );
            Ok(())
        })
        .file("words.txt", "test testing tested test\n")
        .step(1, &[read("words.txt")])
        .step(
            2,
            &[(
                "edit_file",
                json!({"edits": [{"path": "words.txt", "file_id": "{{file_id:words.txt}}",
                                  "old_string": "test", "new_string": "sample", "replace_all": true}]}),
            )],
        )
        .text("Renamed."),
    );

    t
}

impl Task {
    fn with_setup(mut self, f: fn(&crate::common::proto::Env)) -> Task {
        self.setup = Some(f);
        self
    }

    fn files_n(mut self, n: usize) -> Task {
        for i in 0..n {
            let name: &'static str = Box::leak(format!("f{i:02}.txt").into_boxed_str());
            self.files.push((name, format!("file {i}\n").into_bytes()));
        }
        self
    }
}
