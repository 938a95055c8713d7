//! File actions: snapshots and outputs, statuses, applying the model's changes to the project, and
//! token estimates. Each parses its request, calls the workspace and shapes the reply.

use serde_json::json;

use super::Handled;
use crate::audit::Actor;
use crate::chat::paths;
use crate::chat::snapshots;
use crate::hooks::{self, event};
use crate::protocol::request::Request;
use crate::protocol::{ok, reply};
use crate::workspace::Workspace;
use bb7_tool_logic::file_id::file_id;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn context_file(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let a = s.active()?;
    let cp = s.classify(path, a.global)?;
    let range = match (req.fields.get("start_line"), req.fields.get("end_line")) {
        (Some(_), Some(_)) => Some((req.uint("start_line")?, req.uint("end_line")?)),
        _ => None,
    };
    let cf = a
        .chat
        .context_files
        .iter()
        .find(|c| {
            c.path == cp.as_str()
                && range.is_none_or(|(st, en)| c.start_line == Some(st) && c.end_line == Some(en))
        })
        .ok_or("File not found in context")?;
    let content = snapshots::read(a.dir.dir(), cf).map_err(|_| "File not found".to_string())?;
    Ok(reply(
        "file_content",
        json!({"path": cf.path, "content": text(&content)}),
    ))
}

pub fn output_file(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    let content = snapshots::read_output(s.active()?.dir.dir(), &path).ok_or("File not found")?;
    Ok(reply(
        "file_content",
        json!({"path": path, "content": text(&content)}),
    ))
}

pub fn diff_paths(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    let a = s.active()?;
    if snapshots::read_output(a.dir.dir(), &path).is_none() {
        return Err("File not found: no output for this file".into());
    }
    // The editor opens local_path by name: it is handed out only when the path follows the
    // project rule (no symlink on the way, no .git/.bb7), and diff_local_done re-reads it under the
    // same rule, so a link cannot make a user's write count as an apply.
    let local = s
        .project
        .as_ref()
        .ok_or("No project")?
        .checked_path(&path)
        .map_err(|e| format!("Cannot diff {path}: {e}"))?;
    Ok(reply(
        "diff_paths",
        json!({
            "path": path,
            "output_path": a.dir.path().join(paths::output_rel(&path)),
            "local_path": local,
        }),
    ))
}

pub fn statuses(s: &mut Workspace) -> Handled {
    let files = s.file_states()?;
    Ok(reply("file_statuses", json!({"files": files})))
}

/// The project's `pre_apply` hooks on the active chat's output for `path`, about to be written to
/// `destination` whole, or as its hunks `hunks`: a deny is the request's error (`Denied by hook
/// <name>: <reason>`) and nothing is written.
pub(super) fn pre_apply(
    s: &mut Workspace,
    path: &str,
    destination: &str,
    hunks: Option<&[String]>,
) -> Result<(), String> {
    let Some(root) = s.project.as_ref().map(|p| p.root().to_path_buf()) else {
        return Ok(());
    };
    let a = s.active()?;
    let fields = || {
        let content = snapshots::read_output(a.dir.dir(), path).unwrap_or_default();
        let what = match hunks {
            Some(ids) => event::Apply::Hunks {
                ids,
                content: &content,
            },
            None => event::Apply::File {
                destination,
                content: &content,
            },
        };
        event::pre_apply(path, what)
    };
    hooks::check(&root, hooks::Point::PreApply, &Actor::User, fields).map_err(|d| d.to_string())
}

pub fn apply(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    pre_apply(s, &path, &path, None)?;
    let (content, cp) = s.apply_file(&path)?;
    Ok(reply(
        "ok",
        json!({"content": text(&content), "checkpoint_id": cp}),
    ))
}

pub fn apply_as(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    let destination = req.nonempty("destination")?;
    // Hooks judge where the file would really be written: the destination as the apply resolves it
    // (`<project>/x/../migrations/a.sql` → `migrations/a.sql`). One outside the project is refused
    // by the apply itself.
    let destination = match s.classify(destination, false)? {
        paths::ClientPath::Internal(rel) => rel,
        paths::ClientPath::External(_) => destination.to_string(),
    };
    pre_apply(s, &path, &destination, None)?;
    let (content, cp) = s.apply_file_as(&path, &destination)?;
    Ok(reply(
        "ok",
        json!({"content": text(&content), "checkpoint_id": cp}),
    ))
}

pub fn output_delete(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    s.reject_output(&path)?;
    Ok(ok())
}

pub fn diff_local_done(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    let merged = s.diff_done(&path)?;
    Ok(reply("ok", json!({"outcome": merged.as_str()})))
}

pub fn estimate_tokens(s: &mut Workspace, req: &Request) -> Handled {
    let input = req.opt_str("input_text")?.unwrap_or("").to_string();
    let a = s.active()?;
    let global = a.global;
    let (system_prompt, instructions) = super::misc::prompt_texts(s, global);
    // The instructions are re-read (they may have changed) but counted again only when they did;
    // the history is counted as the rendered `@history` block the model is sent.
    let system_tokens = s.tokens.count_cached(&system_prompt);
    let instruction_tokens = s.tokens.count_cached(&instructions);
    let history = s
        .tokens
        .count_cached(&crate::llm::prompt::render_history(&a.chat.messages));
    // Count every file's text once, in parallel where the counter can.
    let mut items: Vec<(String, String)> = Vec::new();
    let mut meta = Vec::new();
    for cf in &a.chat.context_files {
        let ctx = text(&snapshots::read(a.dir.dir(), cf).unwrap_or_default());
        let out = if cf.external || cf.is_section() {
            None
        } else {
            snapshots::read_output(a.dir.dir(), &cf.path)
        };
        let ctx_idx = items.len();
        items.push((cf.version.clone(), ctx));
        let out_idx = match out {
            Some(o) if o != items[ctx_idx].1.as_bytes() => {
                items.push((file_id(&cf.path, &o), text(&o)));
                Some(items.len() - 1)
            }
            _ => None,
        };
        meta.push((cf.path.clone(), ctx_idx, out_idx));
    }
    let refs: Vec<(&str, &str)> = items
        .iter()
        .map(|(id, t)| (id.as_str(), t.as_str()))
        .collect();
    let counts = s.tokens.count_files(&refs);
    let mut files = Vec::new();
    let mut context_total = 0;
    let mut savings = 0;
    for (path, ci, oi) in meta {
        let orig = counts[ci];
        match oi {
            Some(oi) => {
                let out = counts[oi];
                context_total += orig + out;
                savings += orig;
                files.push(json!({"path": path, "tokens": orig + out, "has_output": true, "original_tokens": orig, "output_tokens": out}));
            }
            None => {
                context_total += orig;
                files.push(json!({"path": path, "tokens": orig, "has_output": false}));
            }
        }
    }
    let input_tokens = if input.is_empty() {
        0
    } else {
        s.tokens.count(&input)
    };
    Ok(reply(
        "token_estimate",
        json!({
            "total": system_tokens + instruction_tokens + history + context_total + input_tokens,
            "context_files": context_total,
            "history": history,
            "instructions": instruction_tokens,
            "system_prompt": system_tokens,
            "input_text": input_tokens,
            "files": files,
            "potential_savings": savings,
        }),
    ))
}
