//! Chat actions: create, list, select, get, delete, rename, search, edit, fork, move, locks, drafts,
//! settings. Each parses its request, calls the workspace (which runs the chat domain) and shapes
//! the reply.

use serde_json::{Value, json};

use super::Handled;
use crate::chat::model::{Message, Role};
use crate::protocol::request::Request;
use crate::protocol::{Outcome, ok, reply};
use crate::store::lock::LockState;
use crate::workspace::Workspace;

pub fn new(s: &mut Workspace, req: &Request) -> Handled {
    let global = req.global()?;
    let id = s.new_chat(global, req.opt_str("name")?, req.opt_str("model")?)?;
    Ok(reply("ok", json!({"id": id})))
}

pub fn list(s: &mut Workspace, req: &Request) -> Handled {
    let global = req.global()?;
    let store = s.store(global)?;
    store
        .refresh_if_changed()
        .map_err(|e| format!("Cannot list chats: {e}"))?;
    // Serialised straight from the index (keys in the order a JSON map gives them), not built as
    // a JSON tree of thousands of small maps first.
    #[derive(serde::Serialize)]
    struct Entry<'a> {
        created: &'a str,
        id: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        locked: bool,
        name: &'a str,
    }
    #[derive(serde::Serialize)]
    struct ChatList<'a> {
        chats: Vec<Entry<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        request_id: Option<&'a str>,
        #[serde(rename = "type")]
        kind: &'static str,
    }
    let chats = store
        .newest_first()
        .into_iter()
        .map(|e| Entry {
            created: &e.created,
            id: &e.id,
            locked: matches!(store.lock_state(&e.id), LockState::Other(_)),
            name: &e.name,
        })
        .collect();
    let list = ChatList {
        chats,
        request_id: req.id.as_deref(),
        kind: "chat_list",
    };
    serde_json::to_string(&list)
        .map(Outcome::Line)
        .map_err(|e| format!("Cannot list chats: {e}"))
}

pub fn select(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    s.select_chat(id, req.global()?)?;
    details(s)
}

pub fn get(s: &mut Workspace) -> Handled {
    details(s)
}

/// The `chat` reply for the active chat.
fn details(s: &mut Workspace) -> Handled {
    let a = s.active()?;
    let messages: Vec<Value> = a
        .chat
        .messages
        .iter()
        .map(|m| {
            let mut v = serde_json::to_value(m).unwrap_or_else(|_| json!({}));
            v["content"] = json!(m.text_content());
            v
        })
        .collect();
    let mut fields = json!({
        "id": a.chat.id,
        "name": a.chat.name,
        "created": a.chat.created,
        "model": a.chat.current_model(),
        // The model last chosen for this chat (`save_chat_settings`, else the one it was created
        // with); `model` above is the one of the last user message.
        "settings_model": a.chat.model,
        "draft": a.chat.draft,
        "reasoning_effort": a.chat.reasoning_effort,
        "mode": crate::agent::mode::Mode::of(&a.chat).as_str(),
        "plans": crate::agent::plan::plans(&a.chat),
        "routing": crate::llm::routing::Routing::of(&a.chat).as_str(),
        "messages": messages,
        "instructions_info": super::misc::instructions_info(s, a.global),
    });
    if a.global {
        fields["global"] = json!(true);
    }
    Ok(reply("chat", fields))
}

pub fn delete(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    s.delete_chat(id, req.global()?)?;
    Ok(ok())
}

pub fn rename(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    let name = req.str("name")?.trim().to_string();
    if name.is_empty() {
        return Err("Missing required field: name".into());
    }
    s.rename_checked(id, req.global()?, &name)?;
    Ok(ok())
}

pub fn active(s: &mut Workspace) -> Handled {
    let mut fields = json!({});
    if let Some(a) = &s.active {
        fields["id"] = json!(a.id);
        if a.global {
            fields["global"] = json!(true);
        }
    }
    Ok(reply("chat_active", fields))
}

pub fn search(s: &mut Workspace, req: &Request) -> Handled {
    let query = req.str("query")?.trim().to_string();
    let global = req.global()?;
    let is_global = s.is_global(global);
    s.store(global)?
        .refresh_if_changed()
        .map_err(|e| format!("Cannot search chats: {e}"))?;
    // Split borrows: the store and its search index live in different fields.
    let mut index = std::mem::take(s.search_index(is_global));
    let results = index.search(s.store(global)?, &query);
    *s.search_index(is_global) = index;
    Ok(reply("search_results", json!({"results": results})))
}

pub fn edit(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.opt_str("chat_id")?.filter(|i| !i.is_empty());
    let index = req.uint("message_index")? as usize;
    let content = req.str("content")?.to_string();
    let warnings = s.edit_chat(id, req.global()?, index, content)?;
    Ok(reply("ok", json!({"context_warnings": warnings})))
}

pub fn fork(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("chat_id")?;
    let index = req.uint("fork_message_index")? as usize;
    let forked = s.fork_chat(id, req.global()?, index)?;
    Ok(reply(
        "fork_result",
        json!({"new_chat_id": forked.chat.id, "fork_message_content": forked.content,
               "context_warnings": forked.warnings}),
    ))
}

pub fn new_with_context(s: &mut Workspace, req: &Request) -> Handled {
    let source_id = req.nonempty("source_chat_id")?;
    let id = s.new_chat_with_context(source_id, req.global()?)?;
    Ok(reply("ok", json!({"id": id})))
}

pub fn move_chat(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    let to_global = match req.opt_str("to")? {
        Some("global") => true,
        Some("project") => false,
        _ => return Err("Missing or invalid field: to (must be 'global' or 'project')".into()),
    };
    s.move_chat(id, to_global)?;
    Ok(ok())
}

pub fn force_unlock(s: &mut Workspace, req: &Request) -> Handled {
    let id = req.nonempty("id")?;
    s.force_unlock(id, req.global()?)?;
    Ok(ok())
}

pub fn save_draft(s: &mut Workspace, req: &Request) -> Handled {
    let draft = req.str("draft")?.to_string();
    s.active_mut()?.chat.draft = draft;
    s.save_active()?;
    Ok(ok())
}

pub fn save_settings(s: &mut Workspace, req: &Request) -> Handled {
    let model = req.opt_str("model")?.map(str::to_string);
    let effort = req.opt_str("reasoning_effort")?.map(str::to_string);
    let mode = req
        .opt_str("mode")?
        .map(crate::agent::mode::Mode::parse)
        .transpose()?;
    if let Some(e) = mode.and_then(|m| m.global_error())
        && s.active()?.global
    {
        return Err(e.to_string());
    }
    let routing = req
        .opt_str("routing")?
        .map(crate::llm::routing::Routing::parse)
        .transpose()?;
    let a = s.active_mut()?;
    if let Some(mode) = mode {
        mode.store(&mut a.chat);
    }
    if let Some(r) = routing {
        r.store(&mut a.chat);
    }
    if let Some(m) = model.filter(|m| !m.is_empty()) {
        a.chat.model = m;
    }
    if let Some(e) = effort {
        a.chat.reasoning_effort = e;
    }
    s.save_active()?;
    Ok(ok())
}

pub fn add_system_message(s: &mut Workspace, req: &Request) -> Handled {
    let message = req.str("message")?.to_string();
    if message.trim().is_empty() {
        s.active()?;
        return Ok(ok());
    }
    s.active_mut()?
        .chat
        .messages
        .push(Message::text(Role::System, &message));
    s.save_active()?;
    Ok(ok())
}
