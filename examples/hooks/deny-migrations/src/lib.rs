//! `deny_migrations`: an example hook. It denies any tool call whose arguments name a path under
//! `migrations/` (as resolved by the host, the event's `paths`, or as written), and any apply of a
//! file under it. It needs no grant at all: everything it decides
//! on is in the event.

use hook_common::Decision;
use serde_json::Value;

/// Whether `path` (relative to the project, or absolute inside it) lies under `migrations/`.
fn in_migrations(path: &str, project: &str) -> bool {
    let p = path.strip_prefix(project).unwrap_or(path);
    let p = p.trim_start_matches("./").trim_start_matches('/');
    p == "migrations" || p.starts_with("migrations/")
}

/// Every string under a `path`-like key of the tool's arguments.
fn paths(args: &Value, out: &mut Vec<String>) {
    match args {
        Value::Object(m) => {
            for (k, v) in m {
                match v {
                    Value::String(s) if k.contains("path") || k == "destination" => {
                        out.push(s.clone())
                    }
                    _ => paths(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| paths(v, out)),
        _ => {}
    }
}

/// The decision on `event`.
fn decide(event: String) -> Decision {
    let Ok(e) = serde_json::from_str::<Value>(&event) else {
        return Decision::Deny("the event is not JSON".into());
    };
    let project = e["project"].as_str().unwrap_or_default();
    let mut found = Vec::new();
    match e["point"].as_str() {
        Some("pre_tool_call") => {
            // `paths`: what the call names, resolved as the tools resolve it
            // (`<project>/src/../migrations/a.sql` → `migrations/a.sql`); the raw arguments too,
            // for third-party tools whose path keys the host does not know.
            if let Some(resolved) = e["paths"].as_array() {
                found.extend(
                    resolved
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string),
                );
            }
            paths(&e["arguments"], &mut found);
        }
        Some("pre_apply") => {
            found.extend(e["path"].as_str().map(str::to_string));
            found.extend(e["destination"].as_str().map(str::to_string));
        }
        _ => {}
    }
    match found.iter().find(|p| in_migrations(p, project)) {
        Some(p) => Decision::Deny(format!(
            "{p} is under migrations/, which only people change"
        )),
        None => Decision::Pass,
    }
}

hook_common::hook!(decide);
