//! Dispatch of actions to handlers, one module per concern.

mod agent;
mod chats;
mod context;
mod files;
mod misc;
mod plan;
mod remote;
mod review;
mod send;
mod spend;
mod title;
mod tools;

use super::request::Request;
use super::{Ctx, Outcome};

/// The result of one action: a reply, or an error message for the client.
pub type Handled = Result<Outcome, String>;

// The protocol edge: the one place a typed error becomes the client's message, through `Display`
// (each error's text is the message the client is told).

impl From<crate::protocol::request::FieldError> for String {
    fn from(e: crate::protocol::request::FieldError) -> Self {
        e.to_string()
    }
}

impl From<crate::llm::LlmError> for String {
    fn from(e: crate::llm::LlmError) -> Self {
        e.to_string()
    }
}

impl From<crate::llm::prompt::RetryContextError> for String {
    fn from(e: crate::llm::prompt::RetryContextError) -> Self {
        e.to_string()
    }
}

impl From<crate::protocol::inflight::Busy> for String {
    fn from(e: crate::protocol::inflight::Busy) -> Self {
        e.to_string()
    }
}

impl From<crate::instructions::PrepareError> for String {
    fn from(e: crate::instructions::PrepareError) -> Self {
        e.to_string()
    }
}

impl From<crate::workspace::WorkspaceError> for String {
    fn from(e: crate::workspace::WorkspaceError) -> Self {
        e.to_string()
    }
}

/// Runs `req`: the model-backed actions and `get_hunks` (a diff can take a while) start
/// background work; every other action runs against the locked session.
pub fn dispatch(ctx: &Ctx, req: &Request) -> Handled {
    match req.action.as_str() {
        "send" => return send::send(ctx, req),
        "cancel" => return send::cancel(ctx, req),
        "clarify" => return agent::clarify(req),
        "plan_approve" => return plan::approve(ctx, req),
        "get_models" => return remote::get_models(ctx, req),
        "get_balance" => return remote::get_balance(ctx, req),
        "get_usage" => return spend::get_usage(ctx, req),
        "generate_title" => return title::generate_title(ctx, req),
        "get_hunks" => return review::get_hunks(ctx, req),
        _ => {}
    }
    let mut guard = ctx.lock();
    let s = &mut *guard;
    match req.action.as_str() {
        "ping" => misc::ping(),
        "version" => misc::version(),
        "shutdown" => Ok(Outcome::Shutdown),
        "bb7_init" => misc::bb7_init(req),
        "init" => misc::init(s, req),
        "prepare_instructions" => misc::prepare_instructions(s, req),
        "get_customization_info" => misc::customization_info(s),
        "estimate_text_tokens" => misc::estimate_text_tokens(s, req),
        "estimate_tokens" => files::estimate_tokens(s, req),

        "chat_new" => chats::new(s, req),
        "chat_list" => chats::list(s, req),
        "chat_select" => chats::select(s, req),
        "chat_get" => chats::get(s),
        "chat_delete" => chats::delete(s, req),
        "chat_rename" => chats::rename(s, req),
        "chat_active" => chats::active(s),
        "search_chats" => chats::search(s, req),
        "chat_edit" => chats::edit(s, req),
        "fork_chat" => chats::fork(s, req),
        "chat_new_with_context" => chats::new_with_context(s, req),
        "chat_move" => chats::move_chat(s, req),
        "chat_force_unlock" => chats::force_unlock(s, req),
        "save_draft" => chats::save_draft(s, req),
        "save_chat_settings" => chats::save_settings(s, req),
        "add_system_message" => chats::add_system_message(s, req),
        "plan_reject" => plan::reject(s, req),

        "context_add" => context::add(s, req),
        "context_add_section" => context::add_section(s, req),
        "context_update" => context::update(s, req),
        "context_remove" => context::remove(s, req),
        "context_remove_section" => context::remove_section(s, req),
        "context_list" => context::list(s),
        "context_set_readonly" => context::set_readonly(s, req),
        "sync_context" => context::sync(s, req),

        "get_context_file" => files::context_file(s, req),
        "get_output_file" => files::output_file(s, req),
        "get_diff_paths" => files::diff_paths(s, req),
        "get_file_statuses" => files::statuses(s),
        "apply_file" => files::apply(s, req),
        "apply_file_as" => files::apply_as(s, req),
        "output_delete" => files::output_delete(s, req),
        "diff_local_done" => files::diff_local_done(s, req),

        "apply_hunks" => review::apply_hunks(s, req),
        "reject_hunks" => review::reject_hunks(s, req),
        "checkpoint_list" => review::checkpoint_list(s, req),
        "checkpoint_diff3" => review::checkpoint_diff3(s, req),
        "checkpoint_rollback" => review::checkpoint_rollback(s, req),

        "tools_list" => tools::list(s),
        "tool_set_enabled" => tools::set_enabled(s, req),
        "tool_grant" => tools::grant(s, req),
        "tool_revoke" => tools::revoke(s, req),

        other => Err(format!("Unknown action: {other}")),
    }
}
