//! Reply benchmarks (issue 4). Run: `cargo bench -p bb7 --bench reply`. Prints numbers.
//!
//! 1. Host overhead per streamed chunk: a local SSE server in this process writes 4,000 chunks at
//!    2,000 chunks/s to the real `bb7` binary; for each chunk, the time from the server's write to
//!    the bench reading the matching `chunk` line from bb7's stdout (the same clock, so the number
//!    includes the loopback socket and the stdout pipe). Also bb7's CPU use while streaming.
//! 2. Sandbox time of one reply with 10 `edit_file` calls on 10 files of 100 KiB (the library's
//!    tool runner: base placement, the sandboxed call, and the commit into `output/`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const CHUNKS: usize = 4000;
const INTERVAL: Duration = Duration::from_micros(500);

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    println!("bb7 reply benchmarks (release build)");
    if want("chunk") {
        chunk_overhead();
    }
    if want("edit") {
        edit_reply();
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Per-chunk overhead
// ---------------------------------------------------------------------------------------------

/// Reads one HTTP request (headers and a Content-Length body).
fn read_request(s: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 65536];
    loop {
        let n = s.read(&mut tmp).unwrap_or(0);
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut tmp).unwrap_or(0);
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            return;
        }
    }
}

fn serve_stream(listener: TcpListener, sent: Arc<Mutex<Vec<Option<Instant>>>>) {
    let (mut s, _) = listener.accept().expect("accept");
    s.set_nodelay(true).unwrap();
    read_request(&mut s);
    s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        .unwrap();
    s.write_all(b": OPENROUTER PROCESSING\n\n").unwrap();
    let t0 = Instant::now();
    for i in 0..CHUNKS {
        let due = t0 + INTERVAL * i as u32;
        while Instant::now() < due {
            let left = due - Instant::now();
            if left > Duration::from_micros(200) {
                std::thread::sleep(left - Duration::from_micros(150));
            } else {
                std::hint::spin_loop();
            }
        }
        let line = format!(
            "data: {{\"id\":\"gen\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{i} \"}}}}]}}\n\n"
        );
        let at = Instant::now();
        s.write_all(line.as_bytes()).unwrap();
        sent.lock().unwrap()[i] = Some(at);
    }
    s.write_all(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
        .unwrap();
    s.write_all(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4000,\"total_tokens\":4010,\"cost\":0.0}}\n\ndata: [DONE]\n\n").unwrap();
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime) are the 12th and 13th after the command name.
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

fn chunk_overhead() {
    let home = tempfile::tempdir().unwrap();
    let proj = home.path().join("proj");
    std::fs::create_dir_all(proj.join(".bb7/chats")).unwrap();
    std::fs::create_dir_all(home.path().join(".config/bb7")).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::fs::write(
        home.path().join(".config/bb7/config.json"),
        json!({"api_key": "bench", "base_url": format!("http://127.0.0.1:{port}/api/v1")})
            .to_string(),
    )
    .unwrap();
    let sent = Arc::new(Mutex::new(vec![None; CHUNKS]));
    let server = {
        let sent = sent.clone();
        std::thread::spawn(move || serve_stream(listener, sent))
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_bb7"))
        .env_clear()
        .env("HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("bb7");
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let call = |stdin: &mut std::process::ChildStdin, v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut line = String::new();
    let mut next = |stdout: &mut BufReader<_>| -> Value {
        line.clear();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    call(
        &mut stdin,
        json!({"request_id": "1", "action": "init", "project_root": proj}),
    );
    next(&mut stdout);
    // A named chat: no title request after the reply.
    call(
        &mut stdin,
        json!({"request_id": "2", "action": "chat_new", "name": "bench"}),
    );
    next(&mut stdout);
    call(
        &mut stdin,
        json!({"request_id": "3", "action": "send", "content": "stream"}),
    );
    let mut recv: Vec<Option<Instant>> = vec![None; CHUNKS];
    // CPU is counted from the first chunk (the send's set-up, e.g. loading the tool components
    // on a process's first send, is not streaming).
    let mut cpu0 = None;
    let mut w0 = Instant::now();
    loop {
        let v = next(&mut stdout);
        let at = Instant::now();
        match v["type"].as_str() {
            Some("chunk") => {
                if cpu0.is_none() {
                    cpu0 = Some(cpu_ticks(pid));
                    w0 = at;
                }
                for tok in v["content"].as_str().unwrap_or("").split_whitespace() {
                    if let Ok(i) = tok.parse::<usize>()
                        && i < CHUNKS
                        && recv[i].is_none()
                    {
                        recv[i] = Some(at);
                    }
                }
            }
            Some("done") => break,
            Some("error") => panic!("bb7 failed: {v}"),
            _ => {}
        }
    }
    let wall = w0.elapsed();
    let cpu = Duration::from_millis((cpu_ticks(pid) - cpu0.unwrap_or(0)) * 10);
    server.join().unwrap();
    let sent = sent.lock().unwrap();
    let mut lat: Vec<Duration> = sent
        .iter()
        .zip(&recv)
        .filter_map(|(s, r)| Some(r.as_ref()?.saturating_duration_since(*s.as_ref()?)))
        .collect();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    println!(
        "per-chunk overhead, socket write -> stdout line read ({} chunks at 2,000/s): median {}, p90 {}, p99 {}, max {}",
        lat.len(),
        us(pct(0.5)),
        us(pct(0.9)),
        us(pct(0.99)),
        us(*lat.last().unwrap())
    );
    println!(
        "bb7 CPU while streaming: {:.0} ms over {:.2} s wall = {:.1}% of one core",
        cpu.as_secs_f64() * 1e3,
        wall.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64()
    );
    let _ = stdin.write_all(b"{\"action\":\"shutdown\"}\n");
    let _ = child.wait();
}

// ---------------------------------------------------------------------------------------------
// 2. Ten edit_file calls on 100 KiB files
// ---------------------------------------------------------------------------------------------

fn file_text(n: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 100 * 1024 {
        s.push_str(&format!(
            "fn f{n}_{i}(x: u64) -> u64 {{\n    x.wrapping_mul({i}) ^ {n}\n}}\n\n"
        ));
        i += 1;
    }
    s
}

fn edit_reply() {
    use bb7::agent::tools::ToolRunner;
    use bb7::chat::model::ContextFile;
    use bb7::config::DiffMode;
    use bb7::llm::tool_calls::ToolCall;

    let root = tempfile::tempdir().unwrap();
    let proj = root.path().join("proj");
    let chat = root.path().join("chat");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::create_dir_all(&chat).unwrap();
    let chat_dir = cap_std::fs::Dir::open_ambient_dir(&chat, cap_std::ambient_authority()).unwrap();
    let mut context = Vec::new();
    let mut calls = Vec::new();
    for n in 0..10 {
        let path = format!("src/m{n}.rs");
        let text = file_text(n);
        let cf = ContextFile {
            path: path.clone(),
            readonly: false,
            external: false,
            version: bb7_tool_logic::file_id::file_id(&path, text.as_bytes()),
            start_line: None,
            end_line: None,
            extra: Default::default(),
        };
        bb7::chat::snapshots::write(&chat_dir, &cf, text.as_bytes()).unwrap();
        // Edit a line near the end of the file (the whole file is searched).
        let last = text
            .lines()
            .rev()
            .find(|l| l.contains("wrapping_mul"))
            .unwrap()
            .to_string();
        let args = json!({"edits": [{"path": path, "file_id": cf.version, "old_string": last,
            "new_string": last.replace("wrapping_mul", "wrapping_add")}]});
        calls.push(ToolCall {
            id: format!("c{n}"),
            name: "edit_file".into(),
            arguments_raw: args.to_string(),
            arguments: Ok(args),
        });
        context.push(cf);
    }
    let host = std::sync::Arc::new(bb7::toolhost::ToolHost::new());
    let run = |calls: &[ToolCall]| -> (Duration, Duration) {
        let out = tempfile::tempdir().unwrap();
        let out_dir =
            cap_std::fs::Dir::open_ambient_dir(out.path(), cap_std::ambient_authority()).unwrap();
        let t0 = Instant::now();
        let mut runner = ToolRunner::new(
            std::sync::Arc::clone(&host),
            DiffMode::SearchReplaceMulti,
            &proj,
            chat_dir.try_clone().unwrap(),
            &context,
        )
        .unwrap();
        for c in calls {
            runner.run(c).unwrap_or_else(|e| panic!("{e}"));
        }
        let calls_done = t0.elapsed();
        runner.commit(&out_dir).unwrap();
        (calls_done, t0.elapsed())
    };
    run(&calls[..1]); // compile / load the component once
    let mut totals = Vec::new();
    let mut call_times = Vec::new();
    for _ in 0..15 {
        let (c, t) = run(&calls);
        call_times.push(c);
        totals.push(t);
    }
    totals.sort();
    call_times.sort();
    // The same ten edits natively (the tool logic outside the sandbox), for comparison.
    let mut native = Vec::new();
    for _ in 0..15 {
        let dir = tempfile::tempdir().unwrap();
        for cf in &context {
            let p = dir.path().join(&cf.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bb7::chat::snapshots::read(&chat_dir, cf).unwrap()).unwrap();
        }
        let rootp = bb7_tool_logic::paths::Root::at(dir.path());
        let settings = bb7_tool_logic::settings::Settings::default();
        let t0 = Instant::now();
        for c in &calls {
            bb7_tool_logic::tools::call("edit_file", &rootp, &settings, &c.arguments_raw).unwrap();
        }
        native.push(t0.elapsed());
    }
    native.sort();
    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    println!(
        "reply with 10 edit_file calls on 100 KiB files: sandbox time {} (median of 15; calls {}, + commit), native tool logic {}",
        ms(totals[7]),
        ms(call_times[7]),
        ms(native[7])
    );
    let _ = Path::new("");
}
