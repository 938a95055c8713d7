//! Agent-mode benchmarks (issue 11). Run: `cargo bench -p bb7 --bench agent`. Prints numbers; no
//! assertions on time.
//!
//! 1. Host time per retrieval round trip, excluding the model: the library's agent path
//!    (`agent::retrieval::run`: path checks, the sandboxed component call with the project granted
//!    read-only, the base read and the result text) for `read_file` of 64 KiB, `list_files` on a
//!    20,000-file tree and `search_project` on the same tree, with `grep -rn` on the same tree in
//!    the same run for comparison.
//! 2. A whole 12-call agent job through `agent::reply::run` against an in-process provider that
//!    answers instantly: total host overhead (no model time exists), and the process's memory.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bb7::agent::events::AgentEvent;
use bb7::agent::retrieval::{self, Project};
use bb7::agent::tools::ToolRunner;
use bb7::agent::{AgentJob, ReplyJob, ReplySink, RequestBuilder};
use bb7::config::{Config, DiffMode};
use bb7::llm::tool_calls::ToolCall;
use bb7::llm::{LlmError, Provider, StreamEvent, StreamSummary, Usage};
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

fn main() {
    println!("bb7 agent benchmarks (release build)");
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path().canonicalize().unwrap();
    build_tree(&root);
    round_trips(&root);
    job(&root);
}

fn build_tree(root: &Path) {
    let t0 = Instant::now();
    for i in 0..20_000u32 {
        let p = root.join(format!("d{:03}/s{:02}/f{i:05}.txt", i % 200, i % 13));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut s = String::new();
        for l in 0..20 {
            s.push_str(&format!("line {l} of file {i} with some ordinary text\n"));
        }
        if i % 997 == 0 {
            s.push_str("the NEEDLE_TOKEN is here\n");
        }
        std::fs::write(p, s).unwrap();
    }
    let big: String = (0..2000)
        .map(|i| format!("{i:05} {}\n", "x".repeat(94)))
        .collect();
    std::fs::write(root.join("big.txt"), &big[..65536]).unwrap();
    println!(
        "tree: 20,000 files + big.txt (64 KiB) built in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: "c".into(),
        name: name.into(),
        arguments_raw: args.to_string(),
        arguments: Ok(args),
    }
}

fn runner(root: &Path) -> (ToolRunner, tempfile::TempDir) {
    let chat = tempfile::tempdir().unwrap();
    let dir =
        cap_std::fs::Dir::open_ambient_dir(chat.path(), cap_std::ambient_authority()).unwrap();
    // One tool host for the process, as one session has.
    static HOST: std::sync::OnceLock<Arc<bb7::toolhost::ToolHost>> = std::sync::OnceLock::new();
    let host = HOST.get_or_init(|| Arc::new(bb7::toolhost::ToolHost::new()));
    let mut r = ToolRunner::new(
        Arc::clone(host),
        DiffMode::SearchReplaceMulti,
        root,
        dir,
        &[],
    )
    .unwrap();
    r.set_agent(true);
    (r, chat)
}

fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[0]), ms(v[v.len() / 2]), ms(v[v.len() - 1]))
}

fn round_trips(root: &Path) {
    let settings = Config::default().agent.tool_settings();
    let project = Project::open(root, settings).unwrap();
    let (mut r, _chat) = runner(root);
    let mut bench = |label: &str, c: ToolCall, n: usize| -> f64 {
        let o = retrieval::run(&mut r, &project, &c);
        assert!(o.ok, "{label}: {:?}", o.error);
        let bytes = o.content.len();
        let mut times = Vec::new();
        for _ in 0..n {
            let t0 = Instant::now();
            let o = retrieval::run(&mut r, &project, &c);
            times.push(t0.elapsed());
            assert!(o.ok);
        }
        let (min, med, max) = stats(times);
        println!(
            "{label:<44} median {med:8.3} ms  (min {min:.3}, max {max:.3}, {n} runs, {bytes} bytes to the model)"
        );
        med
    };
    println!("\n1. host time per retrieval round trip (no model)");
    bench(
        "read_file 64 KiB",
        call("read_file", json!({"file_path": "big.txt"})),
        200,
    );
    bench(
        "list_files on 20,000 files (max-list-files 1000)",
        call("list_files", json!({})),
        20,
    );
    bench(
        "list_files on 20,000 files (full walk, no match)",
        call("list_files", json!({"glob": "**/*.nomatch"})),
        20,
    );
    let search = bench(
        "search_project on 20,000 files",
        call("search_project", json!({"query": "NEEDLE_TOKEN"})),
        10,
    );
    let mut grep = Vec::new();
    for _ in 0..10 {
        let t0 = Instant::now();
        let out = Command::new("grep")
            .args(["-rn", "NEEDLE_TOKEN", "."])
            .current_dir(root)
            .output()
            .expect("grep");
        grep.push(t0.elapsed());
        assert!(!out.stdout.is_empty());
    }
    let (_, g, _) = stats(grep);
    println!(
        "{:<44} median {g:8.3} ms  → search_project / grep = {:.2}x",
        "grep -rn on the same tree",
        search / g
    );
}

/// A provider answering instantly: step k (k < 12) makes one retrieval call, then a text answer.
struct Instant12;

impl Provider for Instant12 {
    fn stream<'a>(
        &'a self,
        body: &'a Value,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<StreamSummary, LlmError>> {
        Box::pin(async move {
            let step = body["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
            let calls = if step < 12 {
                let (name, args) = match step % 3 {
                    0 => (
                        "read_file",
                        json!({"file_path": "big.txt", "start_line": step + 1}),
                    ),
                    1 => ("list_files", json!({"prefix": format!("d{step:03}")})),
                    _ => (
                        "read_file",
                        json!({"file_path": format!("d{step:03}/s{:02}/f{step:05}.txt", step % 13)}),
                    ),
                };
                vec![ToolCall {
                    id: format!("c{step}"),
                    name: name.into(),
                    arguments_raw: args.to_string(),
                    arguments: Ok(args),
                }]
            } else {
                on_event(&StreamEvent::Text("done".into()));
                Vec::new()
            };
            Ok(StreamSummary {
                finish_reason: if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                }
                .into(),
                usage: Usage::default(),
                tool_calls: calls,
                reasoning_details: Vec::new(),
                dropped_tool_calls: 0,
            })
        })
    }

    fn get_json<'a>(&'a self, _path: &'a str) -> BoxFuture<'a, Result<Value, LlmError>> {
        Box::pin(async { Ok(Value::Null) })
    }
}

struct Quiet(usize);

impl ReplySink for Quiet {
    fn chunk(&mut self, _t: &str) {}
    fn thinking(&mut self, _t: &str) {}
    fn agent_event(&mut self, _c: u64, _e: &AgentEvent) {
        self.0 += 1;
    }
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn job(root: &Path) {
    println!("\n2. a 12-call agent job (instant provider: all time is the host's)");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = Config::default();
    let tools =
        bb7::agent::steps::offered(config.diff_mode, &config.agent, &Default::default()).unwrap();
    let one = |_: usize| -> (Duration, usize, u64) {
        let (r, chat) = runner(root);
        let chat_dir =
            cap_std::fs::Dir::open_ambient_dir(chat.path(), cap_std::ambient_authority()).unwrap();
        let (_tx, cancel) = tokio::sync::watch::channel(false);
        let job = ReplyJob {
            provider: Arc::new(Instant12),
            request: RequestBuilder {
                config: config.clone(),
                model: "m".into(),
                reasoning_effort: String::new(),
                chat_id: "c".into(),
                system: "sys".into(),
                read_only: vec![],
                history: vec![],
                latest: "explore".into(),
                writable: vec![],
                tools: tools.clone(),
            },
            retry: None,
            auto_retry: false,
            tools: Some(r),
            chat_dir: chat_dir.try_clone().unwrap(),
            cancel,
            agent: Some(AgentJob {
                config: config.agent.clone(),
                project: Project::open(root, config.agent.tool_settings()).unwrap(),
                third_party: Default::default(),
                plan: Default::default(),
            }),
        };
        let mut sink = Quiet(0);
        let t0 = Instant::now();
        let out = rt.block_on(bb7::agent::reply::run(job, &mut sink));
        let d = t0.elapsed();
        let a = out.agent.unwrap();
        assert_eq!(a.tool_calls, 12, "{:?}", out.ending);
        (d, sink.0, rss_kib("VmRSS:"))
    };
    let before = rss_kib("VmRSS:");
    one(0);
    let mut times = Vec::new();
    let mut peak_rss = 0;
    let mut events = 0;
    for i in 0..20 {
        let (d, e, rss) = one(i);
        times.push(d);
        events = e;
        peak_rss = peak_rss.max(rss);
    }
    let (min, med, max) = stats(times);
    println!(
        "12 calls (read 64 KiB ×4, list ×4, small read ×4), 13 steps, {events} events + trace: median {med:.2} ms (min {min:.2}, max {max:.2}, 20 jobs)"
    );
    println!(
        "memory: RSS before the jobs {} MiB, highest after a job {} MiB, peak (VmHWM) {} MiB",
        before / 1024,
        peak_rss / 1024,
        rss_kib("VmHWM:") / 1024
    );
}
