//! Workspace-level actions: start-up (`bb7_init`, `init`), liveness, instructions and customization,
//! and text token counts.

use std::path::Path;

use serde_json::{Value, json};

use super::Handled;
use crate::protocol::request::{FieldError, Request};
use crate::protocol::{ok, reply};
use crate::workspace::Workspace;

pub fn ping() -> Handled {
    Ok(ok())
}

pub fn version() -> Handled {
    Ok(reply("version", json!({"version": crate::VERSION})))
}

/// The project root of a request: absolute, or `None` for global-only mode.
fn project_root(req: &Request) -> Result<Option<&Path>, FieldError> {
    match req.opt_str("project_root")? {
        None | Some("") => Ok(None),
        Some(p) if Path::new(p).is_absolute() => Ok(Some(Path::new(p))),
        Some(p) => Err(FieldError::RelativeRoot(p.to_string())),
    }
}

pub fn bb7_init(req: &Request) -> Handled {
    let root = project_root(req)?.ok_or("Missing required field: project_root")?;
    if !root.is_dir() {
        return Err(format!("Project root not found: {}", root.display()));
    }
    let state = root.join(".bb7");
    match std::fs::symlink_metadata(&state) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(format!(
                "{} is a symbolic link; refusing to initialize through it",
                state.display()
            ));
        }
        Ok(_) => return Err("Already initialized".into()),
        Err(_) => {}
    }
    std::fs::create_dir_all(state.join("chats"))
        .map_err(|e| format!("Failed to initialize {}: {e}", state.display()))?;
    // Chats are private by default; the tools lockfile stays committable.
    crate::store::StateDir::open(&state, false)
        .and_then(|d| crate::store::project::ensure_state_gitignore(d.dir(), true))
        .map_err(|e| format!("Failed to initialize {}: {e}", state.display()))?;
    Ok(ok())
}

pub fn init(s: &mut Workspace, req: &Request) -> Handled {
    let root = project_root(req)?;
    s.init(root)?;
    let mut fields = json!({});
    if s.global_only() {
        fields["global_only"] = json!(true);
    }
    if let Some(m) = &s.config.config.default_model {
        fields["default_model"] = json!(m);
    }
    Ok(reply("ok", fields))
}

fn project_path(s: &Workspace) -> Option<&crate::store::project::ProjectDir> {
    s.project.as_ref()
}

/// The system prompt and the instruction blocks of a chat exactly as they are sent, for token estimates.
pub fn prompt_texts(s: &Workspace, global_chat: bool) -> (String, String) {
    let config_dir = crate::config::config_dir();
    let (system, _) = crate::instructions::system_prompt(config_dir.as_deref());
    let project = if global_chat { None } else { project_path(s) };
    let inst = crate::instructions::load(config_dir.as_deref(), project);
    (
        crate::instructions::render_system_prompt(&system, global_chat),
        crate::instructions::render_instructions(&inst, global_chat),
    )
}

/// The `instructions_info` object of a `chat` reply.
pub fn instructions_info(
    s: &Workspace,
    global_chat: bool,
) -> crate::instructions::InstructionsInfo {
    let config_dir = crate::config::config_dir();
    let project = if global_chat { None } else { project_path(s) };
    crate::instructions::info(config_dir.as_deref(), project).instructions()
}

pub fn prepare_instructions(s: &mut Workspace, req: &Request) -> Handled {
    let level = req.nonempty("level")?;
    let config_dir = crate::config::config_dir();
    let path = crate::instructions::prepare(level, config_dir.as_deref(), project_path(s))?;
    Ok(reply("instructions_path", json!({"path": path})))
}

pub fn customization_info(s: &mut Workspace) -> Handled {
    let config_dir = crate::config::config_dir();
    // A global chat uses no project instructions, so none are reported for it.
    let global_chat = s.active.as_ref().is_some_and(|a| a.global);
    let project = if global_chat { None } else { project_path(s) };
    let info = crate::instructions::info(config_dir.as_deref(), project).customization();
    Ok(reply("customization_info", json!(info)))
}

pub fn estimate_text_tokens(s: &mut Workspace, req: &Request) -> Handled {
    let texts = match req.fields.get("texts") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Err("Missing or empty 'texts' array".into()),
    };
    let mut tokens = Vec::with_capacity(texts.len());
    for t in texts {
        let t = t
            .as_str()
            .ok_or("Invalid field: texts (expected an array of strings)")?;
        tokens.push(s.tokens.count(t));
    }
    Ok(reply("text_token_estimate", json!({"tokens": tokens})))
}
