//! Protocol benchmarks (issue 3). Run: `cargo bench -p bb7 --bench protocol`. Prints medians.
//!
//! 1. process start to the reply to `ping`; and to `init` in a project with 5,000 chats;
//! 2. `chat_list` and `search_chats` (title and content) with 5,000 chats (~50 MB of history);
//! 3. `estimate_tokens` over 2 MiB of context in 8 files: first call and repeat.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Host {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    seq: u64,
}

impl Host {
    fn start(home: &Path) -> Host {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bb7"))
            .env_clear()
            .env("HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("bb7");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Host {
            child,
            stdin,
            stdout,
            seq: 0,
        }
    }

    fn call(&mut self, mut req: Value) -> Value {
        self.seq += 1;
        req["request_id"] = json!(self.seq.to_string());
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
        loop {
            let mut buf = String::new();
            if self.stdout.read_line(&mut buf).unwrap() == 0 {
                panic!("bb7 closed stdout");
            }
            let v: Value = serde_json::from_str(&buf).unwrap();
            if v["request_id"] == json!(self.seq.to_string()) {
                assert_ne!(v["type"], "error", "{v}");
                return v;
            }
        }
    }

    fn stop(mut self) {
        let _ = self.stdin.write_all(b"{\"action\":\"shutdown\"}\n");
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let home = tempfile::tempdir().unwrap();
    println!("bb7 protocol benchmarks (release build, medians)");

    if want("ping") {
        let samples = (0..50)
            .map(|_| {
                let t = Instant::now();
                let mut h = Host::start(home.path());
                h.call(json!({"action": "ping"}));
                let d = t.elapsed();
                h.stop();
                d
            })
            .collect();
        println!(
            "process start to the reply to ping: {}",
            ms(median(samples))
        );
    }

    let project = tempfile::tempdir().unwrap();
    let root = project.path().canonicalize().unwrap();
    if want("chats") || want("init") {
        let t = Instant::now();
        let bytes = generate_chats(&root, 5000);
        println!(
            "(generated 5,000 chats, {:.1} MB of chat.json, in {:.1} s)",
            bytes as f64 / 1e6,
            t.elapsed().as_secs_f64()
        );
        let init = json!({"action": "init", "project_root": root});
        let samples = (0..10)
            .map(|_| {
                let t = Instant::now();
                let mut h = Host::start(home.path());
                h.call(init.clone());
                let d = t.elapsed();
                h.stop();
                d
            })
            .collect();
        println!(
            "process start to the reply to init, 5,000 chats: {}",
            ms(median(samples))
        );

        let mut h = Host::start(home.path());
        h.call(init.clone());
        let list = median(
            (0..20)
                .map(|_| time(|| drop(h.call(json!({"action": "chat_list"})))))
                .collect(),
        );
        let title = median(
            (0..20)
                .map(|_| {
                    time(|| drop(h.call(json!({"action": "search_chats", "query": "topic 4242"}))))
                })
                .collect(),
        );
        let first = time(|| {
            let r = h.call(json!({"action": "search_chats", "query": "needle-in-chat-4999"}));
            assert_eq!(r["results"].as_array().unwrap().len(), 1, "{r}");
        });
        let again = median(
            (0..10)
                .map(|_| {
                    time(|| {
                        drop(h.call(
                            json!({"action": "search_chats", "query": "needle-in-chat-4999"}),
                        ))
                    })
                })
                .collect(),
        );
        let miss = median(
            (0..10)
                .map(|_| {
                    time(|| {
                        drop(h.call(json!({"action": "search_chats", "query": "absent phrase"})))
                    })
                })
                .collect(),
        );
        println!("chat_list, 5,000 chats: {}", ms(list));
        println!(
            "search_chats, 5,000 chats: title match {}, content search first {}, after the first {} (no match: {})",
            ms(title),
            ms(first),
            ms(again),
            ms(miss)
        );
        h.stop();
    }

    if want("tokens") {
        let p2 = tempfile::tempdir().unwrap();
        let root2 = p2.path().canonicalize().unwrap();
        std::fs::create_dir_all(root2.join(".bb7/chats")).unwrap();
        let mut h = Host::start(home.path());
        h.call(json!({"action": "init", "project_root": root2}));
        h.call(json!({"action": "chat_new", "name": "tokens"}));
        for i in 0..8 {
            let mut text = String::with_capacity(256 << 10);
            let mut n = 0;
            while text.len() < (256 << 10) {
                text.push_str(&format!("fn function_{i}_{n}(value: usize) -> usize {{ value.wrapping_mul({n}) ^ 0x{n:x} }} // {n}\n"));
                n += 1;
            }
            h.call(json!({"action": "context_add", "path": format!("src/file{i}.rs"), "content": text}));
        }
        let first = time(|| drop(h.call(json!({"action": "estimate_tokens"}))));
        let repeat = median(
            (0..20)
                .map(|_| time(|| drop(h.call(json!({"action": "estimate_tokens"})))))
                .collect(),
        );
        let r = h.call(json!({"action": "estimate_tokens"}));
        println!(
            "estimate_tokens, 2 MiB in 8 files ({} tokens): first {}, repeat {}",
            r["context_files"],
            ms(first),
            ms(repeat)
        );
        h.stop();
    }
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// `n` chats of ~10 KB each, with an index, as the host writes them.
fn generate_chats(root: &Path, n: usize) -> usize {
    let chats = root.join(".bb7/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let mut index = Vec::new();
    let mut total = 0;
    for i in 0..n {
        let id = format!("20250101-000000-{i:06x}");
        let mut messages = Vec::new();
        for m in 0..10 {
            let role = if m % 2 == 0 { "user" } else { "assistant" };
            let mut text = format!("Message {m} of chat {i} about topic {i}. ");
            while text.len() < 900 {
                text.push_str("The quick brown fox refactors the physics engine with care. ");
            }
            if i == n - 1 && m == 5 {
                text.push_str(" needle-in-chat-4999 ");
            }
            messages.push(json!({"role": role, "parts": [{"type": "text", "content": text}], "timestamp": "2025-01-01T00:00:00Z"}));
        }
        let chat = json!({"version": 2, "id": id, "name": format!("Chat about topic {i}"), "created": "2025-01-01T00:00:00Z",
            "model": "anthropic/claude-sonnet-4", "draft": "", "context_files": [], "messages": messages});
        std::fs::create_dir_all(chats.join(&id)).unwrap();
        let bytes = serde_json::to_vec_pretty(&chat).unwrap();
        total += bytes.len();
        std::fs::write(chats.join(&id).join("chat.json"), bytes).unwrap();
        index.push(json!({"id": id, "name": format!("Chat about topic {i}"), "created": "2025-01-01T00:00:00Z"}));
    }
    std::fs::write(
        chats.join("index.json"),
        serde_json::to_vec(&json!({"chats": index})).unwrap(),
    )
    .unwrap();
    total
}
