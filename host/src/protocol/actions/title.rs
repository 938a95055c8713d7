//! Titles: `generate_title`, and the automatic title after a chat's first exchange. The title is
//! generated in the background and announced with `title_updated`.

use std::sync::Arc;

use serde_json::json;

use super::Handled;
use crate::chat::naming::is_default_name;
use crate::config::Config;
use crate::llm::Provider;
use crate::protocol::events::{self, kind};
use crate::protocol::request::Request;
use crate::protocol::{Ctx, ok};

/// A chat to title: which one, and what it is about.
pub struct TitleJob {
    /// The chat's id.
    pub id: String,
    /// Whether it is in the global store.
    pub global: bool,
    /// Its first message.
    pub first_message: String,
    /// The paths in its context.
    pub files: Vec<String>,
    /// The automatic title: rename only if the chat still has a default name when the title
    /// arrives (a name the user chose meanwhile wins).
    pub only_if_unnamed: bool,
}

/// `generate_title {chat_id, content, global?}`: acknowledged at once; `title_updated` follows
/// when the title is set.
pub fn generate_title(ctx: &Ctx, req: &Request) -> Handled {
    let chat_id = req.nonempty("chat_id")?.to_string();
    let content = req.nonempty("content")?.to_string();
    let global = req.global()?;
    let (p, config, job) = {
        let mut s = ctx.lock();
        let inner: Arc<dyn Provider> = Arc::new(crate::llm::LlmClient::from_config(&s.config)?);
        // A title is a model request too: it passes the spend caps and is recorded in the ledger.
        let c = s.config.config();
        let p = crate::spend::Capped::wrap(inner, c.spend, &c.base_url, &chat_id, false);
        if !s.store(global)?.exists(&chat_id) {
            return Err(crate::chat::ChatError::NotFound.to_string());
        }
        let key = s.key(&chat_id, global);
        let job = TitleJob {
            files: s.context_paths_if_active(&key),
            id: chat_id,
            global: key.global,
            first_message: content,
            only_if_unnamed: false,
        };
        (p, s.config.config().clone(), job)
    };
    let ctx2 = ctx.clone();
    ctx.rt()?
        .spawn(async move { run(ctx2, p, config, job).await });
    Ok(ok())
}

/// Generates a title for the chat, renames it, and announces it with `title_updated`. Failures are
/// logged, never shown: the chat keeps its name.
pub async fn run(ctx: Ctx, provider: Arc<dyn Provider>, config: Config, job: TitleJob) {
    let input = if job.files.is_empty() {
        job.first_message
    } else {
        format!(
            "{}\n\nFiles in context: {}",
            job.first_message,
            job.files.join(", ")
        )
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
        if job.only_if_unnamed
            && !s
                .current_name(job.global, &job.id)
                .is_some_and(|n| is_default_name(&n))
        {
            return;
        }
        s.rename_chat(job.global, &job.id, &title)
    };
    match renamed {
        Ok(()) => events::emit(
            &ctx,
            &events::event(
                kind::TITLE_UPDATED,
                None,
                json!({"chat_id": job.id, "title": title}),
            ),
        ),
        Err(e) => tracing::warn!("cannot set the generated title: {e}"),
    }
}
