//! A reply as the workspace sees it: starting one in the active chat (the job set up by
//! [`ReplyJob::prepare`], then the user message recorded before anything is sent), recording its
//! outcome in its chat when it ends (whichever chat is active by then), and the decision whether the
//! chat gets an automatic title.

use crate::agent::job::{AgentError, ReplyJob, ReplyOutcome};
use crate::agent::prepare::{ChatView, ReplyRequest};
use crate::chat::turn;

use super::{ChatRef, Workspace, WorkspaceError};

/// Why a reply could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    /// The reply could not be set up.
    #[error(transparent)]
    Setup(#[from] AgentError),
    /// The chat refused (no active chat, or the user message could not be saved).
    #[error(transparent)]
    Chat(#[from] WorkspaceError),
    /// The chat directory could not be held for the reply.
    #[error("Cannot open chat: {0}")]
    ChatDir(std::io::Error),
}

/// A reply ready to run, and what its end needs.
pub struct StartedReply {
    /// The job to run.
    pub job: ReplyJob,
    /// The chat the reply belongs to.
    pub target: ChatRef,
    /// The model it asks.
    pub model: String,
    /// Whether this is the chat's first exchange.
    pub first_exchange: bool,
    /// The user's message.
    pub first_message: String,
    /// The chat with the user message, written but not yet fsynced or in place: for
    /// [`Workspace::publish_message`] once the reply is started (taken out before).
    pub message: Option<crate::store::Staged>,
}

impl Workspace {
    /// Files in the active chat's context whose local copy changed since their snapshot (the user
    /// may want to update them; a send goes on). `None` without an active chat.
    ///
    /// The snapshots it reads are kept for the reply [`Self::start_reply`] starts next (under the
    /// same hold of the workspace), so a send reads each once.
    pub fn stale_context(&mut self) -> Option<Vec<String>> {
        self.forget_snapshots();
        let mut memo = crate::chat::snapshots::Memo::default();
        let a = self.active().ok()?;
        // Read as the context itself is: the project path rule, and external files only when this
        // user added them.
        let stale =
            crate::chat::review::stale_files(a.dir.dir(), &a.chat.context_files, &mut memo, |p| {
                self.read_local(p, a.global)
            });
        self.snapshot_memo = memo;
        Some(stale)
    }

    /// Drops the snapshots [`Self::stale_context`] kept (a send that did not start its reply).
    pub fn forget_snapshots(&mut self) {
        self.snapshot_memo = Default::default();
    }

    /// Sets up the reply `req` asks for in the active chat and records the user message (with its
    /// context snapshot) before anything is sent: a crash from here on loses at most the reply.
    pub fn start_reply(&mut self, req: ReplyRequest) -> Result<StartedReply, ReplyError> {
        let first_message = req.content.clone();
        let mut snapshots = std::mem::take(&mut self.snapshot_memo);
        let a = self.active().map_err(ReplyError::Chat)?;
        let prepared = ReplyJob::prepare(
            req,
            ChatView {
                id: &a.id,
                chat: &a.chat,
                dir: a.dir.dir(),
                global: a.global,
                project: self.project.as_ref(),
                config: &self.config,
                tools: &self.tools,
                snapshots: &mut snapshots,
            },
        )?;
        if likely_to_edit(&prepared.job, &a.chat) {
            self.tools.prewarm(&["edit_file"]);
        }
        let target = ChatRef {
            id: a.id.clone(),
            global: a.global,
            dir: a.dir.dir().try_clone().map_err(ReplyError::ChatDir)?,
        };
        let msg = turn::user_message(&a.chat, &first_message, &prepared.model, &prepared.effort);
        let a = self.active_mut().map_err(ReplyError::Chat)?;
        turn::record_user_message(&mut a.chat, msg);
        // Written now (a full disk refuses the send before anything is sent), fsynced and put in
        // place by `publish_message` while the model request goes out; not fsynced into the
        // directory: the reply's record (or `record_reply`'s sync when it records nothing) makes
        // the message durable before its `done` is sent.
        let message = match self.stage_active() {
            Ok(m) => m,
            Err(e) => {
                if let Ok(a) = self.active_mut() {
                    turn::unrecord_user_message(&mut a.chat);
                }
                return Err(ReplyError::Chat(e));
            }
        };
        Ok(StartedReply {
            job: prepared.job,
            target,
            model: prepared.model,
            first_exchange: prepared.first_exchange,
            first_message,
            message: Some(message),
        })
    }

    /// Puts a started reply's user message in place ([`StartedReply::message`]): called once the
    /// reply is under way, by the holder of the workspace, so the reply's record (which needs the
    /// workspace) comes after it. A failure is logged, not returned: the message is in the active
    /// chat, and the save recording the reply writes it durably (also when the reply records
    /// nothing), or that save's error is the reply's.
    pub fn publish_message(&mut self, message: crate::store::Staged) {
        if let Err(e) = message.publish() {
            tracing::warn!("cannot save the user message before the reply: {e}");
            self.message_unsaved = true;
        }
    }

    /// Records the outcome of a reply by `model` in its chat `target` (nothing when it left
    /// nothing to record).
    ///
    /// A reply whose files are not published yet ([`ReplyOutcome::publish`], chat mode) has them
    /// published together with its record ([`crate::store::publish::Outputs::publish_with_record`]):
    /// the new chat is made on a copy, and the chat held in memory becomes it only once the
    /// files and chat.json are in place and durable. Should that fail, nothing of it stays (the
    /// files are rolled back, chat.json and the chat in memory are as before), the reply fails
    /// with the reason (a cancelled one stays cancelled) and is recorded as such, naming no file.
    pub fn record_reply(
        &mut self,
        target: &ChatRef,
        model: &str,
        outcome: &mut ReplyOutcome,
    ) -> Result<(), WorkspaceError> {
        if let Some(outputs) = outcome.publish.take() {
            match self.record_with_outputs(target, model, outcome, outputs) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!("cannot publish the reply's files: {e}");
                    outcome.written.clear();
                    if outcome.ending == crate::agent::job::Ending::Done {
                        outcome.ending = crate::agent::job::Ending::Failed(e.to_string());
                    }
                }
            }
        }
        // A plan approval whose reply got nowhere is undone: the plan can be approved again.
        let unapprove = unapproving(outcome);
        if refused_before_sending(outcome) {
            // Nothing was sent, so nothing of it stays: the client sends the same message again
            // with `override_cap` (which records it once) or puts it back in its input.
            return self.update_chat(target, |chat| {
                if chat
                    .messages
                    .last()
                    .is_some_and(|m| m.role == crate::chat::model::Role::User)
                {
                    turn::unrecord_user_message(chat);
                }
                if let Some(id) = unapprove {
                    crate::agent::plan::unapprove(chat, id);
                }
            });
        }
        let record = outcome.record(model);
        let message_unsaved = std::mem::take(&mut self.message_unsaved);
        if record.messages_are_empty() && unapprove.is_none() && !message_unsaved {
            // The user message start_reply saved without the directory fsync becomes durable.
            crate::store::sync_dir(&target.dir);
            return Ok(());
        }
        self.update_chat(target, |chat| record_in(chat, record, outcome))
    }

    /// Records `outcome` (whose files `outputs` holds, unpublished) in chat `target`, publishing
    /// the files and chat.json together; the chat in memory changes only once both are durable.
    fn record_with_outputs(
        &mut self,
        target: &ChatRef,
        model: &str,
        outcome: &ReplyOutcome,
        outputs: crate::store::publish::Outputs,
    ) -> Result<(), WorkspaceError> {
        let record = outcome.record(model);
        let key = target.key();
        let Some(a) = self.active_if(&key) else {
            // Not the active chat any more: its chat.json is the only copy.
            let bytes = crate::store::read_regular(&target.dir, "chat.json").map_err(
                crate::chat::error::ChatError::io(format!("Cannot read chat {}", target.id)),
            )?;
            let (mut chat, _) = crate::chat::model::Chat::parse(&bytes)
                .map_err(crate::chat::error::ChatError::Corrupt)?;
            record_in(&mut chat, record, outcome);
            outputs
                .publish_with_record(&target.dir, "chat.json", &chat.to_json())
                .map_err(WorkspaceError::Publish)?;
            // As the record without files does: the flag is this reply's, now settled.
            self.message_unsaved = false;
            return Ok(());
        };
        let mut chat = a.chat.clone();
        record_in(&mut chat, record, outcome);
        outputs
            .publish_with_record(a.dir.dir(), "chat.json", &chat.to_json())
            .map_err(WorkspaceError::Publish)?;
        // The whole chat, user message included, is durable now.
        self.message_unsaved = false;
        if let Some(a) = self.active_if_mut(&key) {
            a.chat = chat;
        }
        Ok(())
    }

    /// Whether the chat `target` gets an automatic title after a reply: after its first exchange,
    /// when the reply got through and the chat still has a default name. `Some` with the context
    /// paths to name it from (those of the active chat only if it is this one).
    pub fn wants_title(
        &mut self,
        target: &ChatRef,
        first_exchange: bool,
        outcome: &ReplyOutcome,
    ) -> Option<Vec<String>> {
        if !first_exchange || !outcome.ending.answered() {
            return None;
        }
        // The active chat only if it is this one, in this store (ids are unique per store only).
        let files = self.context_paths_if_active(&target.key());
        self.current_name(target.global, &target.id)
            .is_some_and(|n| crate::chat::naming::is_default_name(&n))
            .then_some(files)
    }
}

impl Workspace {
    /// Starts setting up the sandbox for `edit_file` ([`crate::toolhost::ToolHost::prewarm`]) when
    /// a file the model may edit joins the context (`context_add` of `path`, not `readonly`, in a
    /// project chat, which offers the edit tools): the reply that follows would start it at its
    /// send anyway ([`likely_to_edit`]), and starting here overlaps it with the rest of the
    /// `context_add` and the send's own preparation too.
    pub(super) fn prewarm_for_context(
        &self,
        path: &crate::chat::paths::ClientPath,
        readonly: bool,
    ) {
        let project_chat = self.active().is_ok_and(|a| !a.global);
        if project_chat && !readonly && matches!(path, crate::chat::paths::ClientPath::Internal(_))
        {
            self.tools.prewarm(&["edit_file"]);
        }
    }
}

/// Whether a reply's first tool call is likely near, so its sandbox is set up while the model is
/// asked ([`crate::toolhost::ToolHost::prewarm`]): tools are offered, and it is an agent reply or
/// the chat has a file in context it may edit. A reply in a chat without one (a question) sets up
/// nothing unless it calls a tool.
fn likely_to_edit(job: &ReplyJob, chat: &crate::chat::model::Chat) -> bool {
    job.tools.is_some()
        && (job.agent.is_some()
            || chat
                .context_files
                .iter()
                .any(|f| !f.readonly && !f.external))
}

/// Records a reply's `record` in `chat`, with what its `outcome` changes beyond it: an approved
/// plan its reply got nowhere with is unapproved, a proposed plan stored.
fn record_in(
    chat: &mut crate::chat::model::Chat,
    record: turn::ReplyRecord,
    outcome: &ReplyOutcome,
) {
    record.record_in(chat);
    if let Some(id) = unapproving(outcome) {
        crate::agent::plan::unapprove(chat, id);
    }
    if let Some(plan) = outcome.proposed_plan() {
        crate::agent::plan::store(chat, plan);
    }
}

/// The approved plan a reply carried out and got nowhere with: undone, so the plan can be
/// approved again.
fn unapproving(outcome: &ReplyOutcome) -> Option<&str> {
    outcome
        .agent
        .as_ref()
        .and_then(|a| a.approving.as_deref())
        .filter(|_| nothing_streamed(outcome))
}

/// A reply that ended without an answer before anything streamed: no text, no usage, no call.
fn nothing_streamed(outcome: &ReplyOutcome) -> bool {
    !outcome.ending.answered()
        && outcome.text.is_empty()
        && outcome.thinking.is_empty()
        && outcome.usage == crate::llm::Usage::default()
        && outcome
            .agent
            .as_ref()
            .is_none_or(|a| a.parts.is_empty() && a.tool_calls == 0)
}

/// A reply the spend caps refused before its first request (ECOSYSTEM-PROTOCOL.md §11: "Nothing
/// was sent"): nothing streamed, nothing used, no step made a call.
fn refused_before_sending(outcome: &ReplyOutcome) -> bool {
    matches!(&outcome.ending, crate::agent::job::Ending::Failed(m) if m.starts_with("Spend cap:"))
        && nothing_streamed(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fsyncs;

    /// A fresh workspace on a project (as `bb7_init` makes it) with an API key and chat `c`.
    fn with_chat() -> (tempfile::TempDir, Workspace) {
        let t = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(t.path().join(".bb7/chats")).expect("mkdir");
        let mut ws = Workspace::new();
        ws.init(Some(t.path())).expect("init");
        ws.config.status = crate::config::ConfigStatus::Valid;
        ws.config.config.api_key = Some("test-key".into());
        ws.new_chat(false, Some("c"), Some("m/x"))
            .expect("chat_new");
        (t, ws)
    }

    fn request(content: &str) -> ReplyRequest {
        let (_, cancel) = tokio::sync::watch::channel(false);
        ReplyRequest {
            content: content.into(),
            model: None,
            effort: None,
            retry: None,
            mode: None,
            cancel,
            override_cap: false,
            plan: None,
            routing: None,
            disable_fallback: false,
        }
    }

    /// The user message a send records costs one fsync (chat.json; not its directory: the save
    /// recording the reply makes both durable before `done`), and it is not made before the model
    /// request: `start_reply` only writes it (a full disk still refuses the send), and
    /// `publish_message`, called once the reply is under way, fsyncs it and puts it in place.
    /// Issue 30: `start_reply` made the fsync before the request went out.
    #[test]
    fn a_send_writes_its_user_message_before_and_fsyncs_it_after_the_request() {
        let (t, mut ws) = with_chat();
        let id = ws.active().expect("active").id.clone();
        let on_disk = || {
            let p = t.path().join(".bb7/chats").join(&id).join("chat.json");
            let chat: serde_json::Value =
                serde_json::from_slice(&std::fs::read(p).expect("chat.json")).expect("json");
            chat["messages"].as_array().map_or(0, Vec::len)
        };
        let before = fsyncs();
        let mut started = ws.start_reply(request("hello")).expect("start_reply");
        assert_eq!(fsyncs() - before, 0, "no fsync before the request");
        assert_eq!(ws.active().expect("active").chat.messages.len(), 1);
        assert!(!started.first_message.is_empty());
        assert_eq!(on_disk(), 0, "not in place yet");
        let before = fsyncs();
        ws.publish_message(started.message.take().expect("staged"));
        assert_eq!(fsyncs() - before, 1);
        assert_eq!(on_disk(), 1);
        let dir = t.path().join(".bb7/chats").join(&id);
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("chat dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.contains(".tmp-")),
            "no temporary file left: {names:?}"
        );
    }

    /// A user message that could not be put in place before the reply (here its staged file is
    /// gone) is saved by the reply's record even when the reply records nothing (an empty answer:
    /// no text, no note — a cancel or a failure records a note): it is on disk before `done`.
    #[test]
    fn a_message_not_put_in_place_is_saved_by_a_reply_that_records_nothing() {
        let (t, mut ws) = with_chat();
        let id = ws.active().expect("active").id.clone();
        let dir = t.path().join(".bb7/chats").join(&id);
        let on_disk = || {
            let chat: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("chat.json")).expect("chat.json"))
                    .expect("json");
            chat["messages"].as_array().map_or(0, Vec::len)
        };
        let mut started = ws.start_reply(request("hello")).expect("start_reply");
        for e in std::fs::read_dir(&dir).expect("chat dir") {
            let p = e.expect("entry").path();
            if p.to_string_lossy().contains(".tmp-") {
                std::fs::remove_file(p).expect("remove the staged file");
            }
        }
        ws.publish_message(started.message.take().expect("staged"));
        assert_eq!(on_disk(), 0, "the message could not be put in place");
        let mut outcome = crate::agent::job::ReplyOutcome {
            text: String::new(),
            thinking: String::new(),
            written: Vec::new(),
            publish: None,
            usage: crate::llm::Usage::default(),
            ending: crate::agent::job::Ending::Done,
            duration: 0.0,
            agent: None,
        };
        assert!(outcome.record("m").messages_are_empty());
        ws.record_reply(&started.target, "m", &mut outcome)
            .expect("record_reply");
        assert_eq!(on_disk(), 1, "the reply's record saved the message");
    }

    /// A done chat-mode reply writing `output/a.txt` ("new\n"), its file written under a
    /// temporary name and not yet published, and the chat it belongs to (the active one).
    fn unpublished_reply(ws: &Workspace) -> (ChatRef, crate::agent::job::ReplyOutcome) {
        let a = ws.active().expect("active");
        let target = ChatRef {
            id: a.id.clone(),
            global: a.global,
            dir: a.dir.dir().try_clone().expect("dir"),
        };
        let content: std::sync::Arc<[u8]> = std::sync::Arc::from(&b"new\n"[..]);
        let outputs = crate::store::publish::Outputs::prepare(
            a.dir.dir(),
            [("output/a.txt".to_string(), &content[..])],
        )
        .expect("prepare");
        let outcome = crate::agent::job::ReplyOutcome {
            text: "Changed it.".into(),
            thinking: String::new(),
            written: vec![crate::agent::tools::Written {
                path: "a.txt".into(),
                version: "v-new".into(),
                prev_version: None,
                content,
                adopted: None,
            }],
            publish: Some(outputs),
            usage: crate::llm::Usage::default(),
            ending: crate::agent::job::Ending::Done,
            duration: 0.0,
            agent: None,
        };
        (target, outcome)
    }

    /// The chat's directory, its chat.json as text, and whether the chat in memory names any
    /// output file.
    fn chat_state(t: &tempfile::TempDir, ws: &Workspace) -> (std::path::PathBuf, String, bool) {
        let a = ws.active().expect("active");
        let dir = t.path().join(".bb7/chats").join(&a.id);
        let json = std::fs::read_to_string(dir.join("chat.json")).expect("chat.json");
        let named = a.chat.messages.iter().any(|m| m.output_files.is_some());
        (dir, json, named)
    }

    /// A chat-mode reply's file is published with the record naming it: both in place, the chat
    /// in memory names it too, no temporary left.
    #[test]
    fn a_reply_s_files_are_published_with_its_record() {
        let (t, mut ws) = with_chat();
        let (target, mut outcome) = unpublished_reply(&ws);
        ws.record_reply(&target, "m", &mut outcome)
            .expect("record_reply");
        assert_eq!(outcome.ending, crate::agent::job::Ending::Done);
        let (dir, json, named) = chat_state(&t, &ws);
        assert_eq!(
            std::fs::read(dir.join("output/a.txt")).expect("output"),
            b"new\n"
        );
        assert!(json.contains("\"output_files\""), "{json}");
        assert!(named, "the chat in memory names the file");
        let leftovers: Vec<_> = std::fs::read_dir(dir.join("output"))
            .expect("output/")
            .map(|e| e.expect("entry").file_name())
            .filter(|n| n.to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    /// Issue 30 (the reverted background publish): when the file's fsync or rename, or
    /// chat.json's, fails, nothing names the file: not chat.json on disk, not the chat in memory
    /// (so the next action's save writes nothing naming it either); the file is not in place and
    /// the reply failed with the reason, recorded as such.
    #[test]
    fn a_failed_publish_leaves_no_record_naming_the_files() {
        use crate::store::faults::{self, Op};
        for (op, name, why) in [
            (
                Op::Fsync,
                "a.txt",
                "Cannot write the output file output/a.txt",
            ),
            (
                Op::Rename,
                "a.txt",
                "Cannot write the output file output/a.txt",
            ),
            (
                Op::Fsync,
                "chat.json",
                "Cannot save chat.json with the reply's files",
            ),
            (
                Op::Rename,
                "chat.json",
                "Cannot save chat.json with the reply's files",
            ),
        ] {
            let (t, mut ws) = with_chat();
            let (target, mut outcome) = unpublished_reply(&ws);
            faults::fail_once(op, name);
            ws.record_reply(&target, "m", &mut outcome)
                .expect("the failed reply is recorded");
            match &outcome.ending {
                crate::agent::job::Ending::Failed(m) => {
                    assert!(m.starts_with(why), "{op:?} {name}: {m}")
                }
                e => panic!("{op:?} {name}: the reply did not fail: {e:?}"),
            }
            assert!(outcome.written.is_empty());
            let (dir, json, named) = chat_state(&t, &ws);
            assert!(!dir.join("output/a.txt").exists(), "{op:?} {name}");
            assert!(!json.contains("output_files"), "{op:?} {name}: {json}");
            assert!(
                !json.contains("AssistantWriteFile"),
                "{op:?} {name}: {json}"
            );
            assert!(json.contains(why), "the failure is recorded: {json}");
            assert!(!named, "{op:?} {name}: the chat in memory names the file");
            // The next action's save writes the chat in memory: still nothing naming the file.
            ws.save_active().expect("save");
            let (_, json, _) = chat_state(&t, &ws);
            assert!(!json.contains("output_files"), "{op:?} {name}: {json}");
            assert!(
                !json.contains("AssistantWriteFile"),
                "{op:?} {name}: {json}"
            );
        }
    }

    /// Issue 30: a send reads each context snapshot once. The stale check's read is the one the
    /// request shows the model and the reply's edits start from: here the snapshot is replaced
    /// on disk (same entry, same version) between the stale check and the reply's start, and the
    /// request still holds what the stale check read (it read the file again, a third time with
    /// the local copy, before).
    #[test]
    fn a_send_reads_each_context_snapshot_once() {
        let (t, mut ws) = with_chat();
        std::fs::write(t.path().join("a.txt"), "one\n").expect("local file");
        ws.add_context_file("a.txt", "one\n", false)
            .expect("context_add");
        let a = ws.active().expect("active");
        let cf = a.chat.context_files[0].clone();
        let snapshot = t
            .path()
            .join(".bb7/chats")
            .join(&a.id)
            .join(crate::chat::snapshots::location(&cf).expect("location"));
        assert_eq!(ws.stale_context(), Some(Vec::new()));
        std::fs::write(&snapshot, "replaced behind the send\n").expect("replace");
        let started = ws.start_reply(request("change it")).expect("start_reply");
        let shown: Vec<&str> = started
            .job
            .request
            .writable
            .iter()
            .map(|b| b.content.as_str())
            .collect();
        assert_eq!(shown, ["one\n"]);
    }

    /// A file the model may edit joining a project chat's context starts setting up the sandbox
    /// at once, before any send (the send that follows would wait for less of it); a read-only
    /// file does not.
    #[test]
    fn an_editable_file_joining_the_context_sets_up_the_sandbox_ahead() {
        let (_t, mut ws) = with_chat();
        ws.add_context_file("notes.txt", "read me\n", true)
            .expect("context_add readonly");
        assert!(
            !ws.tools.sandbox_requested(),
            "a read-only file sets up nothing"
        );
        ws.add_context_file("a.txt", "hello\n", false)
            .expect("context_add");
        assert!(
            ws.tools.sandbox_requested(),
            "the sandbox is being set up once an editable file is in context"
        );
    }

    /// A send in a chat with a file it may edit sets up the sandbox (and loads `edit_file`) in
    /// the background while the model is asked; a send in a chat without one sets up nothing.
    #[test]
    fn a_send_that_may_edit_sets_up_the_sandbox_ahead_of_its_first_call() {
        let (_t, mut ws) = with_chat();
        let _question = ws
            .start_reply(request("what is rust?"))
            .expect("start_reply");
        assert!(!ws.tools.sandbox_requested());

        let (_t, mut ws) = with_chat();
        ws.add_context_file("a.txt", "hello\n", false)
            .expect("context_add");
        let _edit = ws.start_reply(request("change it")).expect("start_reply");
        // Made by the background thread, with no tool call: waited for (a bound, not a timing).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !ws.tools.sandbox_created() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(ws.tools.sandbox_created(), "no sandbox was set up ahead");
        let sandbox = ws.tools.sandbox().expect("sandbox");
        sandbox.registry().builtin("edit_file").expect("edit_file");
    }
}
