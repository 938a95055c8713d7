//! File actions: snapshots and outputs, statuses, applying the model's changes to the project, and
//! token estimates.

use serde_json::json;

use super::Handled;
use crate::chat::model::{ContextFile, event_part};
use crate::chat::paths::{self, ClientPath};
use crate::chat::snapshots;
use crate::protocol::request::Request;
use crate::protocol::{ok, reply};
use crate::workspace::Workspace;
use bb7_tool_logic::file_id::file_id;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An internal path of the active chat (outputs exist only for files inside the project).
fn internal_path(s: &Workspace, path: &str) -> Result<String, String> {
    let global = s.active()?.global;
    match s.classify(path, global)? {
        ClientPath::Internal(p) => Ok(p),
        ClientPath::External(p) => Err(format!(
            "File not found: {p} has no output (external files are read-only)"
        )),
    }
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
                && range.map_or(true, |(st, en)| {
                    c.start_line == Some(st) && c.end_line == Some(en)
                })
        })
        .ok_or("File not found in context")?;
    let content = snapshots::read(a.dir.dir(), cf).map_err(|_| "File not found".to_string())?;
    Ok(reply(
        "file_content",
        json!({"path": cf.path, "content": text(&content)}),
    ))
}

pub fn output_file(s: &mut Workspace, req: &Request) -> Handled {
    let path = internal_path(s, req.nonempty("path")?)?;
    let content = snapshots::read_output(s.active()?.dir.dir(), &path).ok_or("File not found")?;
    Ok(reply(
        "file_content",
        json!({"path": path, "content": text(&content)}),
    ))
}

pub fn diff_paths(s: &mut Workspace, req: &Request) -> Handled {
    let path = internal_path(s, req.nonempty("path")?)?;
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
    let a = s.active()?;
    let mut files = Vec::new();
    let mut in_context = std::collections::HashSet::new();
    for cf in &a.chat.context_files {
        let ctx = snapshots::read(a.dir.dir(), cf).unwrap_or_default();
        let ctx_tokens = s.tokens.count_file(&cf.version, &text(&ctx));
        let mut v = json!({
            "path": cf.path, "in_context": true, "readonly": cf.readonly, "external": cf.external,
            "context_content": text(&ctx),
        });
        if cf.is_section() {
            v["status"] = json!("S");
            v["has_output"] = json!(false);
            v["readonly"] = json!(true);
            v["tokens"] = json!(ctx_tokens);
            v["start_line"] = json!(cf.start_line);
            v["end_line"] = json!(cf.end_line);
        } else {
            in_context.insert(cf.path.clone());
            let out = if cf.external {
                None
            } else {
                snapshots::read_output(a.dir.dir(), &cf.path)
            };
            match out {
                Some(out) if !snapshots::same_text(&out, &ctx) => {
                    let out_tokens = s.tokens.count_file(&file_id(&cf.path, &out), &text(&out));
                    v["status"] = json!("M");
                    v["has_output"] = json!(true);
                    v["tokens"] = json!(ctx_tokens + out_tokens);
                    v["original_tokens"] = json!(ctx_tokens);
                    v["output_tokens"] = json!(out_tokens);
                    v["output_content"] = json!(text(&out));
                }
                Some(out) => {
                    v["status"] = json!("");
                    v["has_output"] = json!(true);
                    v["tokens"] = json!(ctx_tokens);
                    v["output_content"] = json!(text(&out));
                }
                None => {
                    v["status"] = json!("");
                    v["has_output"] = json!(false);
                    v["tokens"] = json!(ctx_tokens);
                }
            }
        }
        files.push(v);
    }
    for path in snapshots::output_files(a.dir.dir()) {
        if in_context.contains(&path) {
            continue;
        }
        let Some(out) = snapshots::read_output(a.dir.dir(), &path) else {
            continue;
        };
        let exists_locally = s.project.as_ref().is_some_and(|p| p.exists(&path));
        let tokens = s.tokens.count_file(&file_id(&path, &out), &text(&out));
        files.push(json!({
            "path": path, "status": if exists_locally { "!A" } else { "A" }, "in_context": false,
            "has_output": true, "readonly": false, "external": false, "tokens": tokens,
            "output_tokens": tokens, "output_content": text(&out),
        }));
    }
    Ok(reply("file_statuses", json!({"files": files})))
}

/// Makes `content` the snapshot of whole file `path` (adding it to the context, writable, when the
/// model created it). Returns the new version and the previous one, if the file was in context.
pub(super) fn resnapshot_whole_file(
    a: &mut crate::workspace::Active,
    path: &str,
    content: &[u8],
) -> Result<(String, Option<String>), String> {
    let version = file_id(path, content);
    let prev = match a
        .chat
        .context_files
        .iter()
        .position(|c| !c.is_section() && c.path == path)
    {
        Some(i) => Some(std::mem::replace(
            &mut a.chat.context_files[i].version,
            version.clone(),
        )),
        None => {
            let cf = ContextFile {
                path: path.to_string(),
                version: version.clone(),
                ..Default::default()
            };
            a.chat.context_files.push(cf);
            None
        }
    };
    let cf = a
        .chat
        .context_files
        .iter()
        .find(|c| !c.is_section() && c.path == path)
        .ok_or("File not found in context")?;
    snapshots::write(a.dir.dir(), cf, content)
        .map_err(|e| format!("Failed to update snapshot: {e}"))?;
    Ok((version, prev))
}

/// Writes `content` (the output of `source`) to project file `dest` with `write` (which records the
/// checkpoint) and settles the chat: the snapshot of `dest` follows (adding it to the context,
/// writable, when it was not there), the output of `source` goes, and `action` is recorded.
///
/// All or nothing up to the project write: the new snapshot is written under a temporary name first,
/// so a chat directory that cannot take it fails the apply before the project changes. A failure
/// after the project file was written is reported as exactly that, never as a plain error.
fn apply_content<T>(
    s: &mut Workspace,
    source: &str,
    dest: &str,
    content: &[u8],
    action: &str,
    original_path: Option<&str>,
    write: impl FnOnce(&Workspace) -> Result<T, String>,
) -> Result<T, String> {
    let a = s.active()?;
    let version = file_id(dest, content);
    let existing = a
        .chat
        .context_files
        .iter()
        .position(|c| !c.is_section() && c.path == dest);
    let cf = match existing {
        Some(i) => ContextFile {
            version: version.clone(),
            ..a.chat.context_files[i].clone()
        },
        None => ContextFile {
            path: dest.to_string(),
            version: version.clone(),
            ..Default::default()
        },
    };
    let rel = snapshots::location(&cf)?;
    let pending = crate::store::prepare_atomic(a.dir.dir(), &rel, content)
        .map_err(|e| format!("Failed to update snapshot: {e}"))?;
    let written = write(s)?;
    let settle = |s: &mut Workspace| -> Result<(), String> {
        pending
            .commit()
            .map_err(|e| format!("updating the snapshot failed: {e}"))?;
        let a = s.active_mut()?;
        let prev = match existing {
            Some(i) => Some(std::mem::replace(&mut a.chat.context_files[i], cf).version),
            None => {
                a.chat.context_files.push(cf);
                None
            }
        };
        let mut ev = event_part(action, dest, &version, prev.as_deref(), false, false);
        if let Some(orig) = original_path {
            ev.insert("original_path".into(), json!(orig));
        }
        a.chat.record_event(ev);
        let removed = crate::store::remove_file_if_exists(a.dir.dir(), paths::output_rel(source));
        s.save_active()?;
        removed.map_err(|e| format!("removing the output failed: {e}"))
    };
    settle(s).map_err(|e| format!("{dest} was written to the project, but {e}"))?;
    Ok(written)
}

/// After the project file `path` became `content` (a whole-file `apply_hunks`): the snapshot
/// follows, the output goes and `action` is recorded, as [`apply_content`] does after its write.
pub(super) fn settle_applied(
    s: &mut Workspace,
    path: &str,
    content: &[u8],
    action: &str,
) -> Result<(), String> {
    apply_content(s, path, path, content, action, None, |_| Ok(()))
}

pub fn apply(s: &mut Workspace, req: &Request) -> Handled {
    let path = internal_path(s, req.nonempty("path")?)?;
    let out = snapshots::read_output(s.active()?.dir.dir(), &path)
        .ok_or_else(|| format!("No output to apply: {path} not found in output"))?;
    let cp = apply_content(s, &path, &path, &out, "UserApplyFile", None, |s| {
        super::review::write_checkpointed(s, "apply_file", &path, &out)
    })?;
    Ok(reply(
        "ok",
        json!({"content": text(&out), "checkpoint_id": cp}),
    ))
}

pub fn apply_as(s: &mut Workspace, req: &Request) -> Handled {
    let path = internal_path(s, req.nonempty("path")?)?;
    let destination = req.nonempty("destination")?;
    let root = s
        .project
        .as_ref()
        .map(|p| p.root().to_path_buf())
        .ok_or("No project: global chats cannot apply files")?;
    let dest = match paths::classify(destination, Some(&root))? {
        ClientPath::Internal(d) => d,
        ClientPath::External(d) => {
            return Err(format!("Invalid destination: {d} is outside the project"));
        }
    };
    let a = s.active()?;
    let out = snapshots::read_output(a.dir.dir(), &path)
        .ok_or_else(|| format!("No output to apply: {path} not found in output"))?;
    // The saved file joins the context (it is now the user's file); the source's output is used up,
    // and an output the destination has of its own stays for the user to review.
    let cp = apply_content(s, &path, &dest, &out, "UserSaveAs", Some(&path), |s| {
        super::review::write_checkpointed(s, "apply_file_as", &dest, &out)
    })?;
    Ok(reply(
        "ok",
        json!({"content": text(&out), "checkpoint_id": cp}),
    ))
}

pub fn output_delete(s: &mut Workspace, req: &Request) -> Handled {
    let path = internal_path(s, req.nonempty("path")?)?;
    let a = s.active_mut()?;
    let Some(out) = snapshots::read_output(a.dir.dir(), &path) else {
        return Err(format!("No output: {path} not found in output"));
    };
    crate::store::remove_file_if_exists(a.dir.dir(), paths::output_rel(&path))
        .map_err(|e| format!("Failed to remove output: {e}"))?;
    a.chat.record_event(event_part(
        "UserRejectOutput",
        &path,
        "",
        Some(&file_id(&path, &out)),
        false,
        false,
    ));
    s.save_active()?;
    Ok(ok())
}

pub fn diff_local_done(s: &mut Workspace, req: &Request) -> Handled {
    let path = internal_path(s, req.nonempty("path")?)?;
    let a = s.active()?;
    let cf = a
        .chat
        .context_files
        .iter()
        .find(|c| !c.is_section() && c.path == path);
    let ctx = cf.and_then(|cf| snapshots::read(a.dir.dir(), cf).ok());
    let out = snapshots::read_output(a.dir.dir(), &path);
    // Nothing merged: no local file, no output to merge from, or the file is as the context has it.
    let Ok(local) = s.read_local(&ClientPath::Internal(path.clone()), false) else {
        return Ok(reply("ok", json!({"outcome": "none"})));
    };
    let Some(out) = out else {
        return Ok(reply("ok", json!({"outcome": "none"})));
    };
    if ctx
        .as_deref()
        .is_some_and(|c| snapshots::same_text(c, &local))
    {
        return Ok(reply("ok", json!({"outcome": "none"})));
    }
    if snapshots::same_text(&out, &local) {
        // Everything was taken: as if applied.
        let a = s.active_mut()?;
        let (version, prev) = resnapshot_whole_file(a, &path, &local)?;
        crate::store::remove_file_if_exists(a.dir.dir(), paths::output_rel(&path))
            .map_err(|e| format!("Failed to remove output: {e}"))?;
        let ev = event_part(
            "UserApplyFile",
            &path,
            &version,
            prev.as_deref(),
            false,
            false,
        );
        a.chat.record_event(ev);
        s.save_active()?;
        return Ok(reply("ok", json!({"outcome": "full"})));
    }
    // Some of it was taken: the snapshot becomes what the user has (added to context when the model
    // created the file), the output stays for the rest.
    let a = s.active_mut()?;
    let (version, prev) = resnapshot_whole_file(a, &path, &local)?;
    let readonly = a
        .chat
        .context_files
        .iter()
        .any(|c| !c.is_section() && c.path == path && c.readonly);
    let ev = event_part(
        "UserPartialApplyFile",
        &path,
        &version,
        prev.as_deref(),
        readonly,
        false,
    );
    a.chat.record_event(ev);
    s.save_active()?;
    Ok(reply("ok", json!({"outcome": "partial"})))
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
