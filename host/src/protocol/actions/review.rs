//! Per-hunk review and checkpoints (AGENT-PROTOCOL.md §2–3): `get_hunks`, `apply_hunks`,
//! `reject_hunks`, `checkpoint_list`, `checkpoint_diff3`, `checkpoint_rollback`. Each handler parses
//! the request, calls the workspace (`crate::workspace`'s review methods, over
//! [`crate::chat::review`]) and shapes the reply.

use serde_json::{Value, json};

use super::Handled;
use crate::chat::checkpoints::Record;
use crate::chat::review;
use crate::protocol::request::Request;
use crate::protocol::{Ctx, Outcome, events, reply};
use crate::workspace::{HunkSource, Workspace};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
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
/// under the lock the workspace carries the output onto edits made to the file since it was made
/// (the rebase's diffs are bounded like every hunk diff) and hands over the handles, then the hunks
/// are computed on a blocking thread and the reply written from there (it may come after the
/// replies to later requests).
pub fn get_hunks(ctx: &Ctx, req: &Request) -> Handled {
    let (path, source) = {
        let mut guard = ctx.lock();
        let s = &mut *guard;
        let path = s.active_internal_path(req.nonempty("path")?)?;
        let source = s.hunk_source(&path)?;
        (path, source)
    };
    let HunkSource {
        project,
        chat_dir,
        rebased,
    } = source;
    let (ctx2, id) = (ctx.clone(), req.id.clone());
    ctx.rt()?.spawn_blocking(move || {
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
    let ids = req.string_list("hunk_ids", true)?;
    let base_hash = req.nonempty("base_hash")?;
    super::files::pre_apply(s, &path, &path, Some(ids.as_slice()))?;
    let applied = s.apply_hunks(&path, &ids, base_hash)?;
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
    let ids = req.string_list("hunk_ids", true)?;
    let rejected = s.reject_hunks(&path, &ids)?;
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
    let list: Vec<Value> = s
        .checkpoint_list(chat_id)?
        .iter()
        .map(record_json)
        .collect();
    Ok(reply("checkpoints", json!({ "checkpoints": list })))
}

pub fn checkpoint_diff3(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("checkpoint_id")?;
    let path = req.nonempty("path")?;
    let d = s.checkpoint_diff3(id, path)?;
    Ok(reply(
        "diff3",
        serde_json::to_value(d).map_err(|e| e.to_string())?,
    ))
}

pub fn checkpoint_rollback(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("checkpoint_id")?;
    let mode = req.nonempty("mode")?;
    let ids = req.string_list("hunk_ids", false)?;
    let r = s.checkpoint_rollback(id, mode, &ids)?;
    Ok(reply(
        "rollback",
        json!({
            "checkpoint_id": r.checkpoint.as_ref().map(|c| c.id.clone()),
            "files": r.files,
            "conflicts": r.conflicts,
        }),
    ))
}
