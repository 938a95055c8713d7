//! The model-backed actions beside `send`: `get_models`, `get_balance`, `generate_title`, and the
//! automatic title after a chat's first exchange. Each runs in the background; its reply may come
//! out of order.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::Handled;
use super::send::provider;
use crate::config::Config;
use crate::llm::Provider;
use crate::protocol::request::Request;
use crate::protocol::{Ctx, Outcome, ok};
use crate::workspace::{ChatKey, Workspace};

/// Writes `fields` (with `type`) as the reply to `id`.
fn reply_later(ctx: &Ctx, id: Option<String>, fields: Value) {
    let mut m = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(id) = id {
        m.insert("request_id".into(), json!(id));
    }
    let _ = ctx.out.send(&m);
}

fn error_later(ctx: &Ctx, id: Option<String>, message: String) {
    reply_later(ctx, id, json!({"type": "error", "message": message}));
}

pub fn get_models(ctx: &Ctx, req: &Request) -> Handled {
    let (p, base_url) = {
        let s = ctx.lock();
        (provider(&s)?, s.config.config().base_url.clone())
    };
    let (ctx2, id) = (ctx.clone(), req.id.clone());
    ctx.rt.spawn(async move {
        let state = crate::paths::state_dir();
        match crate::llm::meta::models(&*p, &base_url, state.as_deref()).await {
            Ok(models) => reply_later(&ctx2, id, json!({"type": "models", "models": models})),
            Err(e) => error_later(&ctx2, id, format!("Failed to fetch models: {e}")),
        }
    });
    Ok(Outcome::Later)
}

pub fn get_balance(ctx: &Ctx, req: &Request) -> Handled {
    let p = provider(&ctx.lock())?;
    let (ctx2, id) = (ctx.clone(), req.id.clone());
    ctx.rt.spawn(async move {
        match crate::llm::meta::balance(&*p).await {
            Ok(mut b) => {
                b["type"] = json!("balance");
                reply_later(&ctx2, id, b)
            }
            Err(e) => error_later(&ctx2, id, format!("Failed to fetch balance: {e}")),
        }
    });
    Ok(Outcome::Later)
}

/// `generate_title {chat_id, content, global?}`: acknowledged at once; `title_updated` follows
/// when the title is set.
pub fn generate_title(ctx: &Ctx, req: &Request) -> Handled {
    let chat_id = req.nonempty("chat_id")?.to_string();
    let content = req.nonempty("content")?.to_string();
    let global = req.global()?;
    let (p, config, is_global, files) = {
        let mut s = ctx.lock();
        let p = provider(&s)?;
        let is_global = s.is_global(global);
        if !s.store(global)?.exists(&chat_id) {
            return Err("Chat not found".into());
        }
        let files = s
            .active_if(&s.key(&chat_id, global))
            .map(|a| {
                a.chat
                    .context_files
                    .iter()
                    .map(|c| c.path.clone())
                    .collect()
            })
            .unwrap_or_default();
        (p, s.config.config().clone(), is_global, files)
    };
    let ctx2 = ctx.clone();
    ctx.rt.spawn(async move {
        auto_title(ctx2, p, config, chat_id, is_global, content, files, false).await;
    });
    Ok(ok())
}

/// Generates a title for chat `id`, renames it, and announces it with `title_updated`. Failures are
/// logged, never shown: the chat keeps its name. With `only_if_unnamed` (the automatic title) the
/// chat is renamed only if it still has a default name when the title arrives: a name the user
/// chose while the title was being generated wins.
#[allow(clippy::too_many_arguments)]
pub async fn auto_title(
    ctx: Ctx,
    provider: Arc<dyn Provider>,
    config: Config,
    id: String,
    global: bool,
    first_message: String,
    files: Vec<String>,
    only_if_unnamed: bool,
) {
    let input = if files.is_empty() {
        first_message
    } else {
        format!("{first_message}\n\nFiles in context: {}", files.join(", "))
    };
    let title =
        match crate::llm::meta::generate_title(&*provider, &config, &config.title_model, &input)
            .await
        {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("title generation failed: {e}");
                return;
            }
        };
    let renamed = {
        let mut s = ctx.lock();
        if only_if_unnamed
            && !current_name(&mut s, global, &id).is_some_and(|n| super::send::is_default_name(&n))
        {
            return;
        }
        s.rename_chat(global, &id, &title)
    };
    match renamed {
        Ok(()) => reply_later(
            &ctx,
            None,
            json!({"type": "title_updated", "chat_id": id, "title": title}),
        ),
        Err(e) => tracing::warn!("cannot set the generated title: {e}"),
    }
}

/// The current name of chat `id`: the in-memory one when it is active, else the stored one.
pub fn current_name(s: &mut Workspace, global: bool, id: &str) -> Option<String> {
    let key = ChatKey {
        id: id.to_string(),
        global,
    };
    if let Some(a) = s.active_if(&key) {
        return Some(a.chat.name.clone());
    }
    s.store(global).ok()?.load(id).ok().map(|c| c.name)
}
