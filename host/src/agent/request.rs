//! The request bodies of one reply: everything assembled once at `send`, re-rendered for a hidden
//! retry with the retry context and the reply's pending changes.

use std::collections::HashSet;
use std::sync::Arc;

use cap_std::fs::Dir;
use serde_json::Value;

use super::tools::Touched;
use crate::chat::model::{Chat, Message};
use crate::chat::snapshots;
use crate::config::Config;
use crate::llm::prompt::{self, FileBlock, FileStatus, RetryContext};
use crate::llm::request::{self, RequestParts, ToolSpec, Turn};

/// The parts of a reply's request that do not change between its attempts.
pub struct RequestBuilder {
    /// The config the body is built with (provider preferences, cache key).
    pub config: Config,
    /// The model id to request.
    pub model: String,
    /// The reasoning effort to request; empty sends no reasoning settings.
    pub reasoning_effort: String,
    /// The chat's id, sent as the cache key when `explicit_cache_key` is set.
    pub chat_id: String,
    /// The system message (prompt + instructions).
    pub system: String,
    /// Read-only files and sections in context.
    pub read_only: Vec<FileBlock>,
    /// The messages before the latest user message.
    pub history: Vec<Message>,
    /// The latest user message's text.
    pub latest: String,
    /// Writable files in context and the chat's outputs, before this reply's changes.
    pub writable: Vec<FileBlock>,
    /// Empty in global chats.
    pub tools: Vec<ToolSpec>,
}

impl RequestBuilder {
    /// The user message: with `retry` rendered, and `pending` (the reply's staged changes) shown as
    /// the newest versions of their files.
    pub fn user_message(
        &self,
        retry: Option<&RetryContext>,
        pending: &[(Touched, std::sync::Arc<[u8]>)],
    ) -> String {
        let mut writable = self.writable.clone();
        for (t, content) in pending {
            writable.retain(|b| !(b.path == t.path && b.status != FileStatus::Original));
            let status = if t.in_context {
                FileStatus::PendingOutput
            } else {
                FileStatus::AddedOutput
            };
            writable.push(FileBlock::output(&t.path, content, true, status));
        }
        prompt::render_user_message(prompt::Prompt {
            read_only: self.read_only.clone(),
            history: &self.history,
            latest: &self.latest,
            retry,
            writable,
        })
    }

    /// The JSON body. `reasoning: false` drops the reasoning settings (a hidden retry only repairs
    /// tool calls).
    pub fn body(
        &self,
        retry: Option<&RetryContext>,
        pending: &[(Touched, std::sync::Arc<[u8]>)],
        reasoning: bool,
    ) -> Value {
        let user = self.user_message(retry, pending);
        request::body(
            &self.config,
            &RequestParts {
                model: &self.model,
                system: &self.system,
                user: &user,
                tools: &self.tools,
                reasoning_effort: if reasoning {
                    &self.reasoning_effort
                } else {
                    ""
                },
                chat_id: &self.chat_id,
            },
        )
    }

    /// The JSON body of one agent step: the user message `user` (rendered once per reply), then
    /// every earlier step's calls and results; `final_note` ends the tool phase.
    pub fn agent_body(&self, user: &str, turns: &[Turn], final_note: Option<&str>) -> Value {
        request::agent_body(
            &self.config,
            &RequestParts {
                model: &self.model,
                system: &self.system,
                user,
                tools: &self.tools,
                reasoning_effort: &self.reasoning_effort,
                chat_id: &self.chat_id,
            },
            turns,
            final_note,
        )
    }
}

/// The file blocks of a request for `chat` (directory `dir`): the read-only files and sections, and
/// the writable files, each followed by its pending output, then the files the model added. A
/// global chat's files are all read-only, and its outputs are not shown. Snapshots are read
/// through `memo` (once per send).
pub fn file_blocks(
    dir: &Dir,
    chat: &Chat,
    global: bool,
    memo: &mut snapshots::Memo,
) -> (Vec<FileBlock>, Vec<FileBlock>) {
    let mut read_only = Vec::new();
    let mut writable = Vec::new();
    let mut in_context = HashSet::new();
    for cf in &chat.context_files {
        let content = memo.read(dir, cf).unwrap_or_else(|_| Arc::from(&[][..]));
        let lines = cf.start_line.zip(cf.end_line);
        let is_writable = !global && !cf.readonly && !cf.external && lines.is_none();
        let block = FileBlock {
            path: cf.path.clone(),
            id: cf.version.clone(),
            writable: is_writable,
            status: FileStatus::Original,
            lines,
            external: cf.external,
            content: String::from_utf8_lossy(&content).into_owned(),
        };
        if !is_writable {
            read_only.push(block);
            continue;
        }
        in_context.insert(cf.path.clone());
        writable.push(block);
        if let Some(out) = snapshots::read_output(dir, &cf.path).filter(|o| o[..] != content[..]) {
            writable.push(FileBlock::output(
                &cf.path,
                &out,
                true,
                FileStatus::PendingOutput,
            ));
        }
    }
    if !global {
        for path in snapshots::output_files(dir) {
            if in_context.contains(&path) {
                continue;
            }
            let Some(out) = snapshots::read_output(dir, &path) else {
                continue;
            };
            // A read-only file's output (made before it became read-only) stays visible as such.
            let ro = chat
                .context_files
                .iter()
                .any(|cf| cf.path == path && !cf.external);
            if ro {
                read_only.push(FileBlock::output(
                    &path,
                    &out,
                    false,
                    FileStatus::PendingOutput,
                ));
            } else {
                writable.push(FileBlock::output(
                    &path,
                    &out,
                    true,
                    FileStatus::AddedOutput,
                ));
            }
        }
    }
    (read_only, writable)
}
