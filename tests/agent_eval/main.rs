//! `agent_eval`: the scripted evaluation of agent mode (issue 11). Every task runs the real `bb7`
//! against the mock server; the table printed at the end gives, per task, pass/fail, steps, tool
//! calls and the host's own time (the job's duration minus the time spent streaming from the model
//! and waiting for the user, from the job's trace). Run with `--nocapture` to see the table; it is
//! also written to `$CARGO_TARGET_TMPDIR/agent-eval.txt`.

#[path = "../common/mod.rs"]
mod common;
mod harness;
mod tasks;

use std::fmt::Write as _;

#[test]
fn agent_eval() {
    let filter = std::env::var("AGENT_EVAL_TASK").ok();
    let tasks = tasks::all();
    assert!(tasks.len() >= 30, "the harness keeps at least 30 tasks");
    let mut table = String::new();
    let _ = writeln!(
        table,
        "{:<40} {:<5} {:>5} {:>10} {:>16} {:>9}",
        "task", "pass", "steps", "tool calls", "host ms (-model)", "wall ms"
    );
    let mut failures = Vec::new();
    for task in &tasks {
        if filter.as_deref().is_some_and(|f| !task.name.contains(f)) {
            continue;
        }
        let run = harness::run(task);
        let result = (task.check)(&run);
        let pass = result.is_ok();
        let host = run.host_ms();
        let _ = writeln!(
            table,
            "{:<40} {:<5} {:>5} {:>10} {:>16} {:>9.1}",
            task.name,
            if pass { "pass" } else { "FAIL" },
            run.steps(),
            run.tool_calls(),
            if host.is_nan() {
                "-".to_string()
            } else {
                format!("{host:.2}")
            },
            run.wall.as_secs_f64() * 1000.0
        );
        if let Err(e) = result {
            failures.push(format!("{}: {e}", task.name));
        }
    }
    print!("{table}");
    if let Some(dir) = option_env!("CARGO_TARGET_TMPDIR") {
        let _ = std::fs::write(std::path::Path::new(dir).join("agent-eval.txt"), &table);
    }
    assert!(
        failures.is_empty(),
        "failed tasks:\n{}",
        failures.join("\n")
    );
}
