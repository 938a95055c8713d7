//! Context actions: add files and sections, update, remove, list, read-only, sync with the local file.

use serde_json::json;

use super::Handled;
use crate::chat::model::{ContextFile, event_part};
use crate::chat::paths::ClientPath;
use crate::chat::snapshots;
use crate::protocol::request::Request;
use crate::protocol::{ok, reply};
use crate::workspace::Workspace;
use bb7_tool_logic::file_id::file_id;

/// Classifies a path from the client for the active chat.
fn classify(s: &Workspace, path: &str) -> Result<ClientPath, String> {
    let global = s.active()?.global;
    s.classify(path, global)
}

/// The index of the whole-file entry for `path` in the active chat.
fn find_file(s: &Workspace, path: &ClientPath) -> Result<Option<usize>, String> {
    let a = s.active()?;
    Ok(a.chat
        .context_files
        .iter()
        .position(|c| !c.is_section() && c.path == path.as_str()))
}

pub fn add(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let content = req.str("content")?;
    let readonly = req.flag("readonly")?;
    let cp = classify(s, path)?;
    if find_file(s, &cp)?.is_some() {
        return Err("Context file already exists".into());
    }
    let cf = ContextFile {
        path: cp.as_str().to_string(),
        readonly: readonly || cp.is_external(),
        external: cp.is_external(),
        version: file_id(cp.as_str(), content.as_bytes()),
        ..Default::default()
    };
    record_external(s, &cp)?;
    let a = s.active_mut()?;
    snapshots::write(a.dir.dir(), &cf, content.as_bytes())
        .map_err(|e| format!("Failed to add file: {e}"))?;
    a.chat.record_event(event_part(
        "UserAddFile",
        &cf.path,
        &cf.version,
        None,
        cf.readonly,
        cf.external,
    ));
    a.chat.context_files.push(cf);
    s.save_active()?;
    Ok(ok())
}

/// Records an external file the user adds, so that later re-reads of it are allowed (see
/// [`crate::chat::external`]).
fn record_external(s: &Workspace, cp: &ClientPath) -> Result<(), String> {
    let ClientPath::External(abs) = cp else {
        return Ok(());
    };
    let scope = s.external_scope(s.active()?.global);
    crate::chat::external::ExternalRecord::of_user()
        .add(&scope, [abs.as_str()])
        .map_err(|e| format!("Failed to add file: cannot record it in ~/.bb7: {e}"))
}

fn lines(req: &Request) -> Result<(u64, u64), String> {
    let start = req.uint("start_line")?;
    let end = req.uint("end_line")?;
    if start == 0 || end < start {
        return Err(format!(
            "Invalid line range {start}-{end} (lines are 1-based and start_line <= end_line)"
        ));
    }
    Ok((start, end))
}

/// A `UserAddSection` / `UserRemoveSection` event for section `cf`, with its line range.
fn section_event(action: &str, cf: &ContextFile) -> crate::chat::model::Part {
    let mut ev = event_part(action, &cf.path, &cf.version, None, true, cf.external);
    ev.insert("start_line".into(), json!(cf.start_line));
    ev.insert("end_line".into(), json!(cf.end_line));
    ev
}

pub fn add_section(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let content = req.str("content")?;
    let (start, end) = lines(req)?;
    let cp = classify(s, path)?;
    record_external(s, &cp)?;
    let a = s.active_mut()?;
    if a.chat
        .context_files
        .iter()
        .any(|c| c.path == cp.as_str() && c.start_line == Some(start) && c.end_line == Some(end))
    {
        return Err("Context file already exists (this section is already in context)".into());
    }
    let cf = ContextFile {
        path: cp.as_str().to_string(),
        readonly: true,
        external: cp.is_external(),
        version: snapshots::version(cp.as_str(), Some(start), Some(end), content.as_bytes()),
        start_line: Some(start),
        end_line: Some(end),
        ..Default::default()
    };
    snapshots::write(a.dir.dir(), &cf, content.as_bytes())
        .map_err(|e| format!("Failed to add section: {e}"))?;
    a.chat.record_event(section_event("UserAddSection", &cf));
    a.chat.context_files.push(cf);
    s.save_active()?;
    Ok(ok())
}

/// Replaces the snapshot of whole-file entry `i` with `content`, recording `action`.
fn resnapshot(s: &mut Workspace, i: usize, content: &[u8], action: &str) -> Result<(), String> {
    let a = s.active_mut()?;
    let cf = &mut a.chat.context_files[i];
    let prev = cf.version.clone();
    cf.version = file_id(&cf.path, content);
    snapshots::write(a.dir.dir(), cf, content)
        .map_err(|e| format!("Failed to update {}: {e}", cf.path))?;
    let ev = event_part(
        action,
        &cf.path,
        &cf.version,
        Some(&prev),
        cf.readonly,
        cf.external,
    );
    a.chat.record_event(ev);
    s.save_active()
}

pub fn update(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let content = req.str("content")?.to_string();
    let cp = classify(s, path)?;
    let i = find_file(s, &cp)?.ok_or("File not found in context")?;
    resnapshot(s, i, content.as_bytes(), "UserWriteFile")?;
    Ok(ok())
}

pub fn remove(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let cp = classify(s, path)?;
    let i = find_file(s, &cp)?.ok_or("File not found in context")?;
    let a = s.active_mut()?;
    let cf = a.chat.context_files.remove(i);
    a.chat.record_event(event_part(
        "UserRemoveFile",
        &cf.path,
        &cf.version,
        None,
        cf.readonly,
        cf.external,
    ));
    s.save_active()?;
    Ok(ok())
}

pub fn remove_section(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let (start, end) = lines(req)?;
    let cp = classify(s, path)?;
    let a = s.active_mut()?;
    let i = a
        .chat
        .context_files
        .iter()
        .position(|c| {
            c.path == cp.as_str() && c.start_line == Some(start) && c.end_line == Some(end)
        })
        .ok_or("Section not found in context")?;
    let cf = a.chat.context_files.remove(i);
    a.chat.record_event(section_event("UserRemoveSection", &cf));
    s.save_active()?;
    Ok(ok())
}

pub fn list(s: &mut Workspace) -> Handled {
    let files = &s.active()?.chat.context_files;
    Ok(reply("context_list", json!({"files": files})))
}

pub fn set_readonly(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let readonly = req.bool("readonly")?;
    let cp = classify(s, path)?;
    let i = find_file(s, &cp)?.ok_or("File not found in context")?;
    if cp.is_external() && !readonly {
        return Err("External files are always read-only".into());
    }
    let a = s.active_mut()?;
    if readonly && snapshots::read_output(a.dir.dir(), cp.as_str()).is_some() {
        return Err("Cannot set read-only on a file with pending output".into());
    }
    let cf = &mut a.chat.context_files[i];
    if cf.readonly == readonly {
        return Ok(ok());
    }
    cf.readonly = readonly;
    let ev = event_part(
        "UserSetReadOnly",
        &cf.path,
        &cf.version,
        None,
        readonly,
        cf.external,
    );
    a.chat.record_event(ev);
    s.save_active()?;
    Ok(ok())
}

pub fn sync(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let cp = classify(s, path)?;
    // The client sends this after every apply, whatever the file; like the reference backend, a file
    // that is not in context (or no longer on disk) is nothing to sync, not an error.
    let Some(i) = find_file(s, &cp)? else {
        return Ok(ok());
    };
    let global = s.active()?.global;
    let Ok(local) = s.read_local(&cp, global) else {
        return Ok(ok());
    };
    let a = s.active()?;
    let snapshot = snapshots::read(a.dir.dir(), &a.chat.context_files[i]).unwrap_or_default();
    if !snapshots::same_text(&snapshot, &local) {
        resnapshot(s, i, &local, "UserWriteFile")?;
    }
    Ok(ok())
}
