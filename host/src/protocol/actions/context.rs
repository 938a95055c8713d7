//! Context actions: add files and sections, update, remove, list, read-only, sync with the local
//! file. Each parses its request and calls the workspace ([`crate::chat::context`] does the work).

use serde_json::json;

use super::Handled;
use crate::protocol::request::Request;
use crate::protocol::{ok, reply};
use crate::workspace::Workspace;

pub fn add(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    s.add_context_file(path, req.str("content")?, req.flag("readonly")?)?;
    Ok(ok())
}

pub fn add_section(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    let content = req.str("content")?;
    s.add_context_section(path, content, req.line_range()?)?;
    Ok(ok())
}

pub fn update(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    s.update_context_file(path, req.str("content")?)?;
    Ok(ok())
}

pub fn remove(s: &mut Workspace, req: &Request) -> Handled {
    s.remove_context_file(req.nonempty("path")?)?;
    Ok(ok())
}

pub fn remove_section(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    s.remove_context_section(path, req.line_range()?)?;
    Ok(ok())
}

pub fn list(s: &mut Workspace) -> Handled {
    let files = &s.active()?.chat.context_files;
    Ok(reply("context_list", json!({"files": files})))
}

pub fn set_readonly(s: &mut Workspace, req: &Request) -> Handled {
    let path = req.nonempty("path")?;
    s.set_context_readonly(path, req.bool("readonly")?)?;
    Ok(ok())
}

pub fn sync(s: &mut Workspace, req: &Request) -> Handled {
    s.sync_context_file(req.nonempty("path")?)?;
    Ok(ok())
}
