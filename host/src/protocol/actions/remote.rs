//! The model-backed actions beside `send` and titles: `get_models` and `get_balance`. Each runs in
//! the background; its reply may come out of order.

use serde_json::json;

use super::Handled;
use crate::llm::LlmClient;
use crate::protocol::events::{self, error_later};
use crate::protocol::request::Request;
use crate::protocol::{Ctx, Outcome};

pub fn get_models(ctx: &Ctx, req: &Request) -> Handled {
    let (p, base_url) = {
        let s = ctx.lock();
        (
            LlmClient::from_config(&s.config)?,
            s.config.config().base_url.clone(),
        )
    };
    let (ctx2, id) = (ctx.clone(), req.id.clone());
    ctx.rt()?.spawn(async move {
        let state = crate::paths::state_dir();
        match crate::llm::meta::models(&p, &base_url, state.as_deref()).await {
            Ok(models) => events::emit(
                &ctx2,
                &events::event("models", id.as_deref(), json!({"models": models})),
            ),
            Err(e) => error_later(&ctx2, id.as_deref(), format!("Failed to fetch models: {e}")),
        }
    });
    Ok(Outcome::Later)
}

pub fn get_balance(ctx: &Ctx, req: &Request) -> Handled {
    let p = LlmClient::from_config(&ctx.lock().config)?;
    let (ctx2, id) = (ctx.clone(), req.id.clone());
    ctx.rt()?.spawn(async move {
        match crate::llm::meta::balance(&p).await {
            Ok(b) => events::emit(&ctx2, &events::event("balance", id.as_deref(), json!(b))),
            Err(e) => error_later(
                &ctx2,
                id.as_deref(),
                format!("Failed to fetch balance: {e}"),
            ),
        }
    });
    Ok(Outcome::Later)
}
