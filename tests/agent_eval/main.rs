//! `agent_eval`: the scripted evaluation of agent mode (issue 11). Every task runs the real `bb7`
//! against the mock server; the table printed at the end gives, per task, pass/fail, steps, tool
//! calls and the host's own time (the job's duration minus the time spent streaming from the model
//! and waiting for the user, from the job's trace). Run with `--nocapture` to see the table; it is
//! also written to `$CARGO_TARGET_TMPDIR/agent-eval.txt`.
//!
//! Then every task runs again under routing `local` and `hybrid_auto` (ECOSYSTEM-PROTOCOL.md §10)
//! against a weaker local mock (a schema mistake on the easy tasks; the hard ones do not fit its
//! context) beside the competent remote one, and the matrix of AGENT-PLAN.md §16 is added per
//! routing: task success, tool calls per success, p50/p95 host time, cost, fallback rate.

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
    let mut matrix = Vec::new();
    let mut remote_stats = Stats::default();
    for task in &tasks {
        if filter.as_deref().is_some_and(|f| !task.name.contains(f)) {
            continue;
        }
        let run = harness::run(task);
        remote_stats.add(&run, (task.check)(&run).is_ok());
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
    matrix.push((harness::Routing::Remote, remote_stats));
    for routing in [harness::Routing::Local, harness::Routing::HybridAuto] {
        let mut stats = Stats::default();
        for task in &tasks {
            if filter.as_deref().is_some_and(|f| !task.name.contains(f)) {
                continue;
            }
            let run = harness::run_routed(task, routing);
            let pass = (task.check)(&run).is_ok();
            stats.add(&run, pass);
            if routing == harness::Routing::Local && run.remote_requests > 0 {
                failures.push(format!(
                    "{} (local): the remote server was contacted",
                    task.name
                ));
            }
            if routing == harness::Routing::HybridAuto && harness::hard(task) {
                let fell_back = run
                    .provider_events
                    .iter()
                    .any(|e| e["kind"] == "provider.fallback");
                if !fell_back {
                    failures.push(format!(
                        "{} (hybrid_auto): a hard task did not fall back",
                        task.name
                    ));
                }
            }
        }
        matrix.push((routing, stats));
    }
    let _ = writeln!(
        table,
        "\n{:<12} {:>9} {:>13} {:>11} {:>11} {:>9} {:>9}",
        "routing", "success", "calls/success", "p50 host ms", "p95 host ms", "cost $", "fallback"
    );
    for (routing, s) in &matrix {
        let _ = writeln!(table, "{}", s.row(routing.name()));
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

/// One routing's column of the matrix.
#[derive(Default)]
struct Stats {
    runs: usize,
    passed: usize,
    calls_of_passed: u64,
    host_ms: Vec<f64>,
    cost: f64,
    fallbacks: usize,
}

impl Stats {
    fn add(&mut self, run: &harness::Run, pass: bool) {
        self.runs += 1;
        if pass {
            self.passed += 1;
            self.calls_of_passed += run.tool_calls();
        }
        let host = run.host_ms();
        if !host.is_nan() {
            self.host_ms.push(host);
        }
        self.cost += run.terminal["usage"]["cost"].as_f64().unwrap_or(0.0);
        if run
            .provider_events
            .iter()
            .any(|e| e["kind"] == "provider.fallback")
        {
            self.fallbacks += 1;
        }
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut v = self.host_ms.clone();
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(f64::total_cmp);
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v[i.min(v.len() - 1)]
    }

    fn row(&self, name: &str) -> String {
        let pct = |n: usize| 100.0 * n as f64 / self.runs.max(1) as f64;
        format!(
            "{:<12} {:>8.0}% {:>13.2} {:>11.2} {:>11.2} {:>9.4} {:>8.0}%",
            name,
            pct(self.passed),
            self.calls_of_passed as f64 / self.passed.max(1) as f64,
            self.percentile(50.0),
            self.percentile(95.0),
            self.cost,
            pct(self.fallbacks),
        )
    }
}
