//! `bb7 mcp --stage`: `write_file` and `edit_file` staged into the project's chat
//! `mcp: <client name>` (created on first use, reused by later sessions of that client), for
//! review in Neovim. Each successful call is committed to the chat's output at once, exactly as an
//! agent reply commits its staged changes ([`ToolRunner::commit`]), and recorded in chat.json as a
//! one-call reply. The project itself is never written.
//!
//! The file-id rules of agent mode hold: an `edit_file` of a file without output in the chat
//! starts from the project file as `read_file` returns it (read here first, under the same deny
//! list and limits), and its `file_id` must be that version's; a file with output starts from the
//! output (which is what `read_file` returns in this mode).
//!
//! Concurrency: chat creation is serialised between processes by a file lock on `chats/`, and each
//! call holds the chat's PID lock while it stages and records, so a Neovim host that has the chat
//! open is never written under: the call is refused with a clear message instead.

use std::path::Path;
use std::sync::Arc;

use cap_std::fs::Dir;
use serde_json::{Value, json};

use crate::agent::retrieval::{self, CallOutcome, Project};
use crate::agent::tools::ToolRunner;
use crate::chat::error::ChatError;
use crate::chat::store::ChatStore;
use crate::chat::turn::{ReplyRecord, WrittenFile};
use crate::llm::tool_calls::ToolCall;
use crate::toolhost::ToolHost;

/// Why a staged call could not reach or record in its chat.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The project's chats cannot be opened or the chat created.
    #[error("cannot open the chat {name:?}: {source}")]
    Open {
        /// The chat's name.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// Another process (a Neovim host) has the chat open.
    #[error(
        "the chat {0:?} is open in another bb7 process (Neovim); switch to another chat there (or close it) and call again"
    )]
    Locked(String),
    /// The chat cannot be read, locked or saved.
    #[error("the chat {name:?}: {source}")]
    Chat {
        /// The chat's name.
        name: String,
        /// Why.
        source: ChatError,
    },
}

/// The name of the chat a client's edits are staged into.
pub fn chat_name(client: &str) -> String {
    format!("mcp: {client}")
}

/// The id of the project's chat `name`, created when there is none.
fn find_or_create(store: &mut ChatStore, name: &str, model: &str) -> std::io::Result<String> {
    let _guard = crate::store::lock::exclusive(store.chats.dir(), ".mcp-create.lock")?;
    store.refresh()?;
    if let Some(e) = store.newest_first().into_iter().find(|e| e.name == name) {
        return Ok(e.id.clone());
    }
    Ok(store.create(Some(name), model)?.id)
}

/// The chat of `client` in `root`, opened (created on first use): its store and id.
fn open_chat(root: &Path, client: &str) -> Result<(ChatStore, String), StageError> {
    let name = chat_name(client);
    let open = |source| StageError::Open {
        name: name.clone(),
        source,
    };
    let mut store = ChatStore::open(&root.join(".bb7"), false).map_err(open)?;
    let model = crate::config::load()
        .config()
        .default_model
        .clone()
        .unwrap_or_default();
    let id = find_or_create(&mut store, &name, &model).map_err(open)?;
    Ok((store, id))
}

/// The chat of `client` in `root` if it exists already (reads never create it): its directory.
pub fn existing_chat_dir(root: &Path, client: &str) -> Option<Dir> {
    let name = chat_name(client);
    let store = ChatStore::open(&root.join(".bb7"), false).ok()?;
    let id = store
        .newest_first()
        .into_iter()
        .find(|e| e.name == name)?
        .id
        .clone();
    chat_dir(&store, &id, &name).ok()
}

/// The chat's directory handle (for reads of its output).
pub fn chat_dir(store: &ChatStore, id: &str, name: &str) -> Result<Dir, StageError> {
    store
        .chat_dir(id)
        .and_then(|d| d.dir().try_clone())
        .map_err(|source| StageError::Open {
            name: name.to_string(),
            source,
        })
}

/// The paths an edit call names (`path`, each `edits[].path`).
fn named_paths(args: &Value) -> Vec<String> {
    let mut out: Vec<String> = args
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_string)
        .into_iter()
        .collect();
    if let Some(edits) = args.get("edits").and_then(Value::as_array) {
        out.extend(
            edits
                .iter()
                .filter_map(|e| e.get("path").and_then(Value::as_str).map(str::to_string)),
        );
    }
    out
}

/// Runs one `write_file`/`edit_file` call into `client`'s chat and commits it (blocking).
pub fn run(
    host: Arc<ToolHost>,
    mode: crate::config::DiffMode,
    project: &Project,
    client: &str,
    call: &ToolCall,
) -> CallOutcome {
    match run_locked(host, mode, project, client, call) {
        Ok(o) => o,
        Err(e) => CallOutcome::failed(format!("{}: {e}", call.name), None),
    }
}

fn run_locked(
    host: Arc<ToolHost>,
    mode: crate::config::DiffMode,
    project: &Project,
    client: &str,
    call: &ToolCall,
) -> Result<CallOutcome, StageError> {
    let name = chat_name(client);
    let (store, id) = open_chat(&project.root, client)?;
    let chat_err = |source| StageError::Chat {
        name: name.clone(),
        source,
    };
    match store.acquire(&id) {
        Ok(()) => {}
        Err(ChatError::Lock(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
            return Err(StageError::Locked(name));
        }
        Err(e) => return Err(chat_err(e)),
    }
    let outcome = staged_call(host, mode, project, &store, &id, &name, call);
    store.release(&id);
    outcome
}

fn staged_call(
    host: Arc<ToolHost>,
    mode: crate::config::DiffMode,
    project: &Project,
    store: &ChatStore,
    id: &str,
    name: &str,
    call: &ToolCall,
) -> Result<CallOutcome, StageError> {
    let chat_err = |source| StageError::Chat {
        name: name.to_string(),
        source,
    };
    let chat = store.load(id).map_err(chat_err)?;
    let dir = chat_dir(store, id, name)?;
    let mut runner = match ToolRunner::new(host, mode, &project.root, dir, &chat.context_files) {
        Ok(r) => r,
        Err(e) => return Ok(CallOutcome::failed(format!("{}: {e}", call.name), None)),
    };
    runner.set_agent(true);
    // The base of an edit of a file without output: the project file as read_file returns it
    // (deny list, ignore rules and limits applied), as in an agent reply that read it first.
    if call.name == "edit_file"
        && let Ok(args) = &call.arguments
    {
        for raw in named_paths(args) {
            let read = json!({ "file_path": raw });
            let read_call = ToolCall {
                id: format!("{}_base", call.id),
                name: "read_file".to_string(),
                arguments_raw: read.to_string(),
                arguments: Ok(read),
            };
            let o = retrieval::run(&mut runner, project, &read_call);
            if !o.ok {
                return Ok(CallOutcome::failed(
                    format!(
                        "edit_file: {}",
                        o.error
                            .unwrap_or(o.content)
                            .trim_start_matches("read_file: ")
                    ),
                    o.record,
                ));
            }
        }
    }
    let done = match runner.run(call) {
        Ok(d) => d,
        Err(e) => return Ok(CallOutcome::failed(e.0, runner.take_record())),
    };
    let record = runner.take_record();
    let dir = chat_dir(store, id, name)?;
    let written = match runner.commit(&dir) {
        Ok(w) => w,
        Err(e) => {
            return Ok(CallOutcome::failed(
                format!("{}: {}", call.name, e.0),
                record,
            ));
        }
    };
    // Recorded as a one-call reply, on the chat as it is now.
    let mut chat = store.load(id).map_err(chat_err)?;
    let status = done.status.trim().to_string();
    let reply = ReplyRecord {
        parts: vec![crate::chat::model::text_part(&format!("{status}\n"))],
        written: written
            .iter()
            .map(|w| WrittenFile {
                path: w.path.clone(),
                version: w.version.clone(),
                prev_version: w.prev_version.clone(),
                adopted: w.adopted.clone(),
            })
            .collect(),
        model: chat.model.clone(),
        ..Default::default()
    };
    reply.record_in(&mut chat);
    store
        .save(&chat)
        .map_err(|e| chat_err(ChatError::io("Failed to save chat")(e)))?;
    let mut content = std::iter::once(status.as_str())
        .chain(done.notes.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    for w in &written {
        content.push_str(&format!(
            "\npath={} file_id={} (staged in the bb7 chat {name:?} for review; the project file is unchanged)",
            w.path, w.version
        ));
    }
    Ok(CallOutcome {
        ok: true,
        summary: status.trim_matches(['[', ']']).to_string(),
        content,
        error: None,
        record,
    })
}
