//! The cost of hooks (ECOSYSTEM-PROTOCOL.md §8). Run: `cargo bench -p bb7 --bench hooks`.
//! Prints figures with their target; asserts nothing about timings.
//!
//! A state directory of its own (`BB7_HOME` in a temporary directory) with the test hook
//! `hook_pass` (`examples/hooks`, built here with a nested cargo) installed, granted and enabled for
//! a project. Then `bb7::hooks::check` at `pre_tool_call` for a `read_file` call, as the agent loop
//! makes it, 2,000 times after 50 warm-up calls: look at the components' state (parsed again only
//! when `tools.json` changed), load the hook (kept after the first), build the event, instantiate
//! the component in a fresh store and call `decide` under the limits (on the calling thread: the
//! hook is granted nothing; on the hook engine, which resets a dropped instance's written pages in
//! place), read the answer, append the `hook` record to the audit chain. Before
//! it, the same with no hook (the cost every tool call pays when a project has none). min / median
//! / p99 of the wall-clock time, and of the process's CPU time per call, and the calling thread's
//! page faults per call; then each part on its own (the parts' `call_metered` runs on the tools'
//! engine and a worker thread, as a granted hook does).
//! Target: a trivial hook ≤ 100 µs median per `pre_tool_call`.

#[path = "../../tests/common/wasm.rs"]
mod wasm;

use std::time::Instant;

use bb7::audit::Actor;
use bb7::components::manage::HOOK_EXPORT;
use bb7::hooks::{self, Point};
use serde_json::{Map, Value, json};

const CALLS: usize = 2_000;
const WARM_UP: usize = 50;

fn event() -> Map<String, Value> {
    match json!({"tool": "read_file", "component": null, "arguments": {"path": "src/lib.rs"}}) {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The process's CPU time (every thread's, user and system), in µs.
fn cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe {
        libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// The minor page faults of this thread so far (a hook granted nothing runs on it).
fn faults() -> i64 {
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid `rusage` to write to.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    usage.ru_minflt
}

/// `check` timed: wall-clock per call, and the process's CPU time per call (which a loaded
/// machine barely moves), both sorted (µs); and the page faults per call of the calling thread.
fn measure(project: &std::path::Path) -> (Vec<f64>, Vec<f64>, f64) {
    for _ in 0..WARM_UP {
        hooks::check(project, Point::PreToolCall, &Actor::Model, event).expect("pass");
    }
    let mut times = Vec::with_capacity(CALLS);
    let mut cpu = Vec::with_capacity(CALLS);
    let faulted = faults();
    for _ in 0..CALLS {
        let c = cpu_us();
        let t = Instant::now();
        hooks::check(project, Point::PreToolCall, &Actor::Model, event).expect("pass");
        times.push(t.elapsed().as_secs_f64() * 1e6);
        cpu.push(cpu_us() - c);
    }
    let faulted = (faults() - faulted) as f64 / CALLS as f64;
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    (times, cpu, faulted)
}

/// `f` timed `CALLS` times after `WARM_UP` calls, sorted (µs).
fn timed(mut f: impl FnMut()) -> Vec<f64> {
    for _ in 0..WARM_UP {
        f();
    }
    let mut times = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    times
}

/// Where a call's time goes: each part of `check` timed on its own, through the public API.
fn parts(project: &std::path::Path) {
    let status = hooks::at(project, Point::PreToolCall)
        .expect("state")
        .pop()
        .expect("hook_pass");
    line(
        "  part: the hooks at the point (the components' state read)",
        &timed(|| {
            std::hint::black_box(hooks::at(project, Point::PreToolCall).expect("state"));
        }),
    );
    line(
        "  part: the event JSON",
        &timed(|| {
            let mut m = Map::new();
            m.insert("point".into(), "pre_tool_call".into());
            m.insert(
                "project".into(),
                project.to_string_lossy().into_owned().into(),
            );
            m.extend(event());
            std::hint::black_box(Value::Object(m).to_string());
        }),
    );
    let workers = bb7::sandbox::watchdog::Workers::new();
    line(
        "  part: a hand-off to a worker thread and back (nothing run)",
        &timed(|| {
            workers
                .run(std::time::Duration::from_secs(5), |_| ((), ()))
                .expect("ran");
        }),
    );
    let host = bb7::toolhost::ToolHost::with_audit(None);
    let component = host.load_granted(&status).expect("load");
    line(
        "  part: the loaded hook looked up (kept after the first)",
        &timed(|| {
            std::hint::black_box(host.load_granted(&status).expect("load"));
        }),
    );
    let tool = component
        .generic()
        .and_then(|g| g.functions.iter().find(|f| f.export == HOOK_EXPORT))
        .map(|f| f.tool.clone())
        .expect("decide");
    let decide = std::sync::Arc::new(component.function(&tool).expect("decide"));
    let sandbox = host.sandbox().expect("sandbox");
    let args = json!({"event": "{}"}).to_string();
    let caps = bb7::sandbox::grant::CallCaps::none();
    line(
        "  part: Sandbox::call_metered of decide (WASI context, worker, fresh instance, call)",
        &timed(|| {
            let (r, _) = sandbox.call_metered(&decide, &caps, None, &[], &args);
            r.expect("decided");
        }),
    );
    line(
        "  part: the `hook` record appended to the audit chain",
        &timed(|| {
            bb7::audit::record(
                bb7::audit::Entry::new("hook", &Actor::Model, Some(project))
                    .set("component", "hook_pass")
                    .set("component_sha256", status.installed.sha256.clone())
                    .set("point", "pre_tool_call")
                    .set("args_sha256", bb7::audit::sha256_hex(b"{}"))
                    .set("decision", "pass"),
            );
        }),
    );
}

fn line(what: &str, times: &[f64]) {
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!(
        "{what}: min {:.1} µs, median {:.1} µs, p99 {:.1} µs  ({} calls)",
        times[0],
        pct(0.5),
        pct(0.99),
        times.len()
    );
}

fn main() {
    let wasm = wasm::build("examples/hooks", "hook-examples-wasm", "hook_pass.wasm");
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join(".bb7")).expect("project");
    // SAFETY: set before any other thread exists (the bench is single-threaded up to here).
    unsafe {
        std::env::set_var("BB7_HOME", dir.path().join("state"));
    }
    let empty = measure(&project);
    let sandbox = bb7::sandbox::host_sandbox(None).expect("sandbox");
    bb7::components::manage::add(&sandbox, &wasm, Some(project.as_path())).expect("add");
    bb7::components::manage::grant("hook_pass", None, Some(project.as_path())).expect("grant");
    let pass = measure(&project);
    line("pre_tool_call, no hook in the project", &empty.0);
    line("  CPU time (process)", &empty.1);
    line(
        "pre_tool_call, one trivial hook (hook_pass; audit record included)  (target: median ≤ 100 µs)",
        &pass.0,
    );
    line("  CPU time (process)", &pass.1);
    println!(
        "  page faults per call (calling thread): no hook {:.2}, one trivial hook {:.2}",
        empty.2, pass.2
    );
    parts(&project);
}
