//! Per-hunk review and checkpoints (AGENT-PROTOCOL.md §2–3): `get_hunks`, `apply_hunks`,
//! `reject_hunks`, `checkpoint_list`, `checkpoint_diff3`, `checkpoint_rollback`. Each handler parses
//! the request, calls [`crate::chat::review`] and shapes the reply.

use serde_json::{Value, json};

use super::Handled;
use crate::chat::checkpoints::Record;
use crate::chat::paths::ClientPath;
use crate::chat::review;
use crate::protocol::request::Request;
use crate::protocol::{Ctx, Outcome, events, reply};
use crate::workspace::Workspace;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn project(s: &Workspace) -> Result<&cap_std::fs::Dir, String> {
    s.project_or("checkpoints and hunks need a project with .bb7/")
        .map(|p| p.dir())
}

/// A list of strings (`hunk_ids`); `required` makes a missing one an error.
fn string_list(req: &Request, name: &str, required: bool) -> Result<Vec<String>, String> {
    match req.fields.get(name) {
        None | Some(Value::Null) if !required => Ok(Vec::new()),
        None | Some(Value::Null) => Err(format!("Missing required field: {name}")),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("Invalid field: {name} (expected a list of strings)"))
            })
            .collect(),
        Some(_) => Err(format!(
            "Invalid field: {name} (expected a list of strings)"
        )),
    }
}

/// A checkpoint as replies show it.
fn record_json(r: &Record) -> Value {
    let mut v = json!({
        "id": r.id, "created": r.created, "chat_id": r.chat_id, "kind": r.kind,
        "files": r.files.iter().map(|f| json!({
            "path": f.path, "before_hash": f.before_hash, "after_hash": f.after_hash,
        })).collect::<Vec<_>>(),
    });
    if let Some(of) = &r.rollback_of {
        v["rollback_of"] = json!(of);
    }
    v
}

/// `get_hunks` runs off the protocol loop (a diff of a large file must not hold the next request):
/// under the lock the output is first carried onto edits made to the file since it was made (the
/// rebase's diffs are bounded like every hunk diff), the handles are taken, then the hunks are
/// computed on a blocking thread and the reply written from there (it may come after the replies to
/// later requests).
pub fn get_hunks(ctx: &Ctx, req: &Request) -> Handled {
    let (project, chat_dir, path, rebased) = {
        let mut guard = ctx.lock();
        let s = &mut *guard;
        let path = s.active_internal_path(req.nonempty("path")?)?;
        project(s)?;
        // Edits made to the file since the output was made stay: the output is carried onto them.
        let rebased = s.rebase_output(&path)?;
        let chat_dir = s.active()?.dir.dir().try_clone();
        let project = project(s)?.try_clone();
        let clone_err = |e: std::io::Error| format!("Cannot read {path}: {e}");
        (
            project.map_err(clone_err)?,
            chat_dir.map_err(clone_err)?,
            path,
            rebased,
        )
    };
    let (ctx2, id) = (ctx.clone(), req.id.clone());
    ctx.rt.spawn_blocking(move || {
        let shaped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            review::get_hunks(&project, &chat_dir, &path)
                .map_err(|e| e.to_string())
                .and_then(|h| serde_json::to_value(h).map_err(|e| e.to_string()))
        }))
        .unwrap_or_else(|_| {
            Err("Internal error while handling get_hunks; the request was not completed".into())
        });
        match shaped {
            Ok(mut h) => {
                if rebased {
                    h["rebased"] = json!(true);
                }
                events::emit(&ctx2, &events::event("hunks", id.as_deref(), h))
            }
            Err(e) => events::error_later(&ctx2, id.as_deref(), e),
        }
    });
    Ok(Outcome::Later)
}

pub fn apply_hunks(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    let ids = string_list(req, "hunk_ids", true)?;
    let base_hash = req.nonempty("base_hash")?.to_string();
    let cps = s.checkpoints()?;
    let base = s.output_base(&path)?;
    let a = s.active()?;
    let applied = review::apply_hunks(
        project(s)?,
        a.dir.dir(),
        &cps,
        &a.id,
        &path,
        &ids,
        &base_hash,
        base.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    if applied.checkpoint.is_some() {
        if applied.remaining == 0 {
            // Everything is taken: as apply_file does, the output goes and the snapshot follows.
            s.settle_applied(&path, &applied.content)?;
        } else {
            // Part of it: the snapshot becomes what the user has now; the output keeps the rest.
            s.record_partial_apply(&path, &applied.content)?;
        }
    }
    Ok(reply(
        "ok",
        json!({
            "path": path,
            "content": text(&applied.content),
            "checkpoint_id": applied.checkpoint.as_ref().map(|r| r.id.clone()),
            "remaining": applied.remaining,
        }),
    ))
}

pub fn reject_hunks(s: &mut Workspace, req: &Request) -> Handled {
    let path = s.active_internal_path(req.nonempty("path")?)?;
    let ids = string_list(req, "hunk_ids", true)?;
    let a = s.active()?;
    let before = crate::chat::snapshots::read_output(a.dir.dir(), &path);
    let rejected =
        review::reject_hunks(project(s)?, a.dir.dir(), &path, &ids).map_err(|e| e.to_string())?;
    if rejected.output.is_none() {
        // Nothing left to apply: recorded as output_delete records it.
        s.record_rejected(&path, before.as_deref())?;
    }
    Ok(reply(
        "ok",
        json!({
            "path": path,
            "output_content": rejected.output.as_deref().map(text),
            "remaining": rejected.remaining,
        }),
    ))
}

pub fn checkpoint_list(s: &mut Workspace, req: &Request) -> Handled {
    let chat_id = req.opt_str("chat_id")?;
    let cps = s.checkpoints()?;
    let list: Vec<Value> = cps
        .list(project(s)?, chat_id)
        .iter()
        .map(record_json)
        .collect();
    Ok(reply("checkpoints", json!({ "checkpoints": list })))
}

pub fn checkpoint_diff3(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("checkpoint_id")?;
    let raw = req.nonempty("path")?;
    let root = s.project.as_ref().map(|p| p.root());
    let path = match crate::chat::paths::classify(raw, root)? {
        ClientPath::Internal(p) => p,
        ClientPath::External(p) => {
            return Err(format!("File not found: {p} is outside the project"));
        }
    };
    let cps = s.checkpoints()?;
    let d = review::diff3(project(s)?, &cps, id, &path).map_err(|e| e.to_string())?;
    Ok(reply(
        "diff3",
        serde_json::to_value(d).map_err(|e| e.to_string())?,
    ))
}

pub fn checkpoint_rollback(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("checkpoint_id")?;
    let mode = req.nonempty("mode")?;
    let ids = string_list(req, "hunk_ids", false)?;
    let cps = s.checkpoints()?;
    let r = review::rollback(project(s)?, &cps, id, mode, &ids).map_err(|e| e.to_string())?;
    Ok(reply(
        "rollback",
        json!({
            "checkpoint_id": r.checkpoint.as_ref().map(|c| c.id.clone()),
            "files": r.files,
            "conflicts": r.conflicts,
        }),
    ))
}
