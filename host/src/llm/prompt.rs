//! Request assembly (SPEC.md "LLM Request Assembly"): the one structured user message that carries
//! the read-only files, the history, the latest message with a summary of the files, any retry
//! context, and the writable files, in that order.
//!
//! Everything here is pure text rendering. Rendering is append-only: the text for message `i` never
//! depends on anything after it, so the request prefix (system message, read-only files, history)
//! stays byte-identical from one send to the next and provider prompt caches keep hitting.

use std::fmt::Write as _;

use serde_json::Value;

use crate::chat::model::Message;

/// Where a file block's content comes from and what it is relative to the user's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStatus {
    /// The context snapshot the user added.
    Original,
    /// The model's not-yet-applied version of a file in context (edit this one).
    PendingOutput,
    /// A file the model created that is not in context.
    AddedOutput,
}

impl FileStatus {
    fn as_str(self) -> &'static str {
        match self {
            FileStatus::Original => "original",
            FileStatus::PendingOutput => "pending_output",
            FileStatus::AddedOutput => "added_output",
        }
    }
}

/// One file as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileBlock {
    /// The path the model uses (relative for project files, absolute for external ones).
    pub path: String,
    /// The file id (`sha256(path + "\0" + content)`, 8 hex digits) of exactly this content.
    pub id: String,
    /// Whether the model may change the file (`mode=rw`).
    pub writable: bool,
    /// Where the content comes from.
    pub status: FileStatus,
    /// The line range of a section (1-based, inclusive).
    pub lines: Option<(u64, u64)>,
    /// Outside the project (always read-only).
    pub external: bool,
    /// The text sent between `@file` and `@end_file`.
    pub content: String,
}

impl FileBlock {
    /// The model's output for project file `path` (`content`), with its file id: `writable` unless
    /// the file is read-only in context; `status` says whether the file was in context.
    pub fn output(path: &str, content: &[u8], writable: bool, status: FileStatus) -> FileBlock {
        FileBlock {
            path: path.to_string(),
            id: bb7_tool_logic::file_id::file_id(path, content),
            writable,
            status,
            lines: None,
            external: false,
            content: String::from_utf8_lossy(content).into_owned(),
        }
    }

    fn source(&self) -> &'static str {
        match self.status {
            FileStatus::Original => "context",
            FileStatus::PendingOutput | FileStatus::AddedOutput => "output",
        }
    }
}

/// The failed tool calls of the previous reply, sent back so the model can repair them
/// (EDITS.md: `retry_context`). Rendered into the request, never stored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RetryContext {
    /// The error messages of the failed calls.
    pub errors: Vec<String>,
    /// The calls' `diff_error` records (`{tool, id, args | args_raw, path?, error?}`).
    pub tool_calls: Vec<Value>,
    /// The host's own hidden retry: the successful changes were kept and are shown as pending.
    pub partial: bool,
}

/// Why a client's `retry_context` is not usable; the text is the client's error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryContextError {
    /// `retry_context` is not an object.
    #[error("Invalid field: retry_context must be an object")]
    NotAnObject,
    /// `retry_context.<field>` is not an array.
    #[error("Invalid field: retry_context.{0} must be an array")]
    NotAnArray(&'static str),
}

impl RetryContext {
    /// Parses a client's `retry_context` object; `None` when it carries nothing.
    pub fn from_json(v: &Value) -> Result<Option<RetryContext>, RetryContextError> {
        if v.is_null() {
            return Ok(None);
        }
        let obj = v.as_object().ok_or(RetryContextError::NotAnObject)?;
        let errors = match obj.get("errors") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|e| match e {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(_) => return Err(RetryContextError::NotAnArray("errors")),
        };
        let tool_calls = match obj.get("tool_calls") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a.clone(),
            Some(_) => {
                return Err(RetryContextError::NotAnArray("tool_calls"));
            }
        };
        if errors.is_empty() && tool_calls.is_empty() {
            return Ok(None);
        }
        Ok(Some(RetryContext {
            errors,
            tool_calls,
            partial: false,
        }))
    }
}

/// Everything the user message is made of.
pub struct Prompt<'a> {
    /// Read-only files and sections (sorted here by path, then line range).
    pub read_only: Vec<FileBlock>,
    /// The messages before the latest user message.
    pub history: &'a [Message],
    /// The latest user message's text.
    pub latest: &'a str,
    /// The retry context, rendered after the summary; `None` renders nothing.
    pub retry: Option<&'a RetryContext>,
    /// Writable files: originals, pending outputs and added outputs (sorted here by path).
    pub writable: Vec<FileBlock>,
}

/// Renders the single user message of a request.
pub fn render_user_message(p: Prompt<'_>) -> String {
    let Prompt {
        mut read_only,
        history,
        latest,
        retry,
        mut writable,
    } = p;
    read_only.sort_by(|a, b| (&a.path, a.lines).cmp(&(&b.path, b.lines)));
    writable
        .sort_by(|a, b| (&a.path, status_rank(a.status)).cmp(&(&b.path, status_rank(b.status))));
    let mut out = String::new();
    if !read_only.is_empty() {
        out.push_str("@readonly_files\n");
        for f in &read_only {
            render_file(&mut out, f);
        }
        out.push('\n');
    }
    out.push_str(&render_history(history));
    out.push_str("@latest_user_message\n");
    out.push_str(latest.trim_end());
    out.push_str("\n\n");
    render_summary(&mut out, &read_only, &writable);
    if let Some(r) = retry {
        render_retry(&mut out, r);
    }
    if !writable.is_empty() {
        out.push_str("@writable_files\n");
        for f in &writable {
            render_file(&mut out, f);
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// The `@history` block exactly as [`render_user_message`] sends it (empty for no messages), so
/// that a token estimate counts what the model is sent.
pub fn render_history(history: &[Message]) -> String {
    let mut out = String::new();
    if !history.is_empty() {
        out.push_str("@history\n");
        for m in history {
            render_message(&mut out, m);
        }
        out.push('\n');
    }
    out
}

fn status_rank(s: FileStatus) -> u8 {
    match s {
        FileStatus::Original => 0,
        FileStatus::PendingOutput => 1,
        FileStatus::AddedOutput => 2,
    }
}

/// A value in a header line: bare when it is a simple token, else JSON-quoted.
fn attr(v: &str) -> String {
    if !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+'))
    {
        v.to_string()
    } else {
        Value::String(v.to_string()).to_string()
    }
}

fn file_header(f: &FileBlock) -> String {
    let mut h = format!(
        "id={} path={} mode={} source={} status={}",
        f.id,
        attr(&f.path),
        if f.writable { "rw" } else { "ro" },
        f.source(),
        f.status.as_str()
    );
    if let Some((a, b)) = f.lines {
        let _ = write!(h, " lines={a}-{b}");
    }
    if f.external {
        h.push_str(" external=true");
    }
    h
}

fn render_file(out: &mut String, f: &FileBlock) {
    let _ = writeln!(out, "@file {}", file_header(f));
    out.push_str(&f.content);
    if !f.content.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("@end_file\n");
}

fn render_message(out: &mut String, m: &Message) {
    let events_only = !m.parts.is_empty()
        && m.parts
            .iter()
            .all(|p| p.get("type").and_then(Value::as_str) == Some("context_event"));
    if events_only {
        for p in &m.parts {
            render_event(out, p);
        }
        return;
    }
    let role = match m.role.as_str() {
        "user" | "assistant" | "system" => m.role.as_str(),
        _ => "note",
    };
    match m
        .model
        .as_deref()
        .filter(|s| !s.is_empty() && role == "user")
    {
        Some(model) => {
            let _ = writeln!(out, "@message role={role} model={}", attr(model));
        }
        None => {
            let _ = writeln!(out, "@message role={role}");
        }
    }
    for p in &m.parts {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        let content = p.get("content").and_then(Value::as_str).unwrap_or("");
        match kind {
            "context_event" => render_event(out, p),
            "thinking" if !content.trim().is_empty() => {
                out.push_str("@reasoning\n");
                out.push_str(content.trim_end());
                out.push_str("\n@end_reasoning\n");
            }
            "code" if !content.is_empty() => {
                let lang = p.get("language").and_then(Value::as_str).unwrap_or("");
                let _ = writeln!(out, "```{lang}\n{}\n```", content.trim_end());
            }
            "file" => {
                if let Some(path) = p.get("path").and_then(Value::as_str) {
                    let _ = writeln!(out, "(file: {path})");
                }
            }
            "tool_call" => render_tool_call(out, p),
            _ if !content.trim().is_empty() => {
                out.push_str(content.trim_end());
                out.push('\n');
            }
            _ => {}
        }
    }
}

/// `s` without terminal control: escape sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ESC \\`,
/// other `ESC x`, and the C1 forms) are removed whole and every other control character is dropped,
/// except line feeds and tabs. Text that the model or a file produced goes through this before it is
/// shown to the client or repeated in `@history`.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\n' | '\t' => out.push(c),
            // CSI: parameters and intermediates, then one final byte in @..~.
            '\u{1b}' if it.peek() == Some(&'[') => {
                it.next();
                for d in it.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            '\u{9b}' => {
                for d in it.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            // OSC, DCS, SOS, PM, APC: up to BEL or ST (ESC \ or U+009C).
            '\u{1b}' if matches!(it.peek(), Some(']' | 'P' | 'X' | '^' | '_')) => {
                it.next();
                while let Some(d) = it.next() {
                    if d == '\u{7}' || d == '\u{9c}' {
                        break;
                    }
                    if d == '\u{1b}' {
                        if it.peek() == Some(&'\\') {
                            it.next();
                        }
                        break;
                    }
                }
            }
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => {
                for d in it.by_ref() {
                    if d == '\u{7}' || d == '\u{9c}' {
                        break;
                    }
                }
            }
            // Any other escape: ESC, its intermediate bytes (space../), and its final byte.
            '\u{1b}' => {
                while it.next_if(|d| (' '..='/').contains(d)).is_some() {}
                it.next();
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// How much of a tool result `@history` repeats.
pub const HISTORY_RESULT_CHARS: usize = 300;

/// An agent's tool call in `@history`: the tool, its arguments, and a short excerpt of the result.
fn render_tool_call(out: &mut String, p: &serde_json::Map<String, Value>) {
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
    let args = p.get("args").map(Value::to_string).unwrap_or_default();
    let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
    let _ = writeln!(
        out,
        "@tool_call tool={} ok={ok} args={args}",
        attr(s("tool"))
    );
    let excerpt = printable(s("excerpt"));
    let cut = match excerpt.char_indices().nth(HISTORY_RESULT_CHARS) {
        Some((i, _)) => format!("{}…", &excerpt[..i]),
        None => excerpt.to_string(),
    };
    if !cut.trim().is_empty() {
        out.push_str(cut.trim_end());
        out.push('\n');
    }
    out.push_str("@end_tool_call\n");
}

fn render_event(out: &mut String, p: &serde_json::Map<String, Value>) {
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("");
    let _ = write!(
        out,
        "@event action={} path={}",
        attr(s("action")),
        attr(s("path"))
    );
    for k in ["version", "prev_version"] {
        if !s(k).is_empty() {
            let _ = write!(out, " {k}={}", attr(s(k)));
        }
    }
    if p.get("readonly").and_then(Value::as_bool) == Some(true) {
        out.push_str(" readonly=true");
    }
    if p.get("external").and_then(Value::as_bool) == Some(true) {
        out.push_str(" external=true");
    }
    out.push('\n');
}

fn render_summary(out: &mut String, read_only: &[FileBlock], writable: &[FileBlock]) {
    out.push_str("@files_summary\n");
    if read_only.is_empty() && writable.is_empty() {
        out.push_str("(no files in context)\n\n");
        return;
    }
    for f in read_only.iter().chain(writable) {
        let what = match (f.writable, f.status, f.lines) {
            (_, _, Some(_)) => "read-only section",
            (false, _, None) => "read-only",
            (true, FileStatus::Original, _) => "writable, original",
            (true, FileStatus::PendingOutput, _) => {
                "writable, your pending changes (edit this version)"
            }
            (true, FileStatus::AddedOutput, _) => "writable, created by you, not applied yet",
        };
        let lines = f
            .lines
            .map(|(a, b)| format!(" lines {a}-{b}"))
            .unwrap_or_default();
        let _ = writeln!(out, "- {}{lines} (id {}, {what})", f.path, f.id);
    }
    out.push('\n');
}

fn render_retry(out: &mut String, r: &RetryContext) {
    out.push_str("@retry_context\n");
    out.push_str(if r.partial {
        "Some of your file changes in this reply failed. The ones that succeeded are kept and shown below as pending; \
         redo only the failed calls. Errors:\n"
    } else {
        "Your previous file changes failed, and none of them were applied. Errors:\n"
    });
    for e in &r.errors {
        let _ = writeln!(out, "- {}", e.trim_end());
    }
    out.push_str(
        "\nHow to fix them:\n\
         - `old_string not found`: copy `old_string` again, exactly, from the newest version of the file below \
         (a `status=pending_output` block when there is one), including indentation and blank lines.\n\
         - `old_string not unique`: add surrounding lines until it matches exactly one place, or set `replace_all` \
         if every occurrence should change.\n\
         - `file_id mismatch`: use the id shown on the newest version of the file below.\n\
         - Make every change with a tool call; text in your reply is never applied.\n",
    );
    if !r.partial {
        out.push_str("- Redo every change of the failed reply, not only the failed calls: nothing from it was kept.\n");
    }
    if !r.tool_calls.is_empty() {
        out.push_str("\nThe previous tool calls:\n");
        let calls = Value::Array(r.tool_calls.clone());
        out.push_str(&serde_json::to_string_pretty(&calls).unwrap_or_default());
        out.push('\n');
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::model::{Message, Role};

    fn block(path: &str, writable: bool, status: FileStatus, content: &str) -> FileBlock {
        FileBlock {
            path: path.into(),
            id: "abcd1234".into(),
            writable,
            status,
            lines: None,
            external: false,
            content: content.into(),
        }
    }

    #[test]
    fn order_of_blocks() {
        let history = vec![
            Message::text(Role::User, "first"),
            Message::text(Role::Assistant, "ok"),
        ];
        let retry = RetryContext {
            errors: vec!["old_string not found in file".into()],
            tool_calls: vec![serde_json::json!({"tool": "edit_file"})],
            partial: false,
        };
        let text = render_user_message(Prompt {
            read_only: vec![
                block("z.rs", false, FileStatus::Original, "z"),
                block("a.rs", false, FileStatus::Original, "a"),
            ],
            history: &history,
            latest: "second",
            retry: Some(&retry),
            writable: vec![
                block("m.rs", true, FileStatus::PendingOutput, "m2"),
                block("m.rs", true, FileStatus::Original, "m1"),
            ],
        });
        let pos = |s: &str| {
            text.find(s)
                .unwrap_or_else(|| panic!("{s} missing in\n{text}"))
        };
        assert!(pos("path=a.rs") < pos("path=z.rs"));
        assert!(pos("path=z.rs") < pos("@history"));
        assert!(pos("@history") < pos("first") && pos("first") < pos("@latest_user_message"));
        assert!(pos("second") < pos("@files_summary"));
        assert!(pos("@files_summary") < pos("@retry_context"));
        assert!(pos("@retry_context") < pos("@writable_files"));
        assert!(pos("status=original") < pos("status=pending_output"));
    }

    #[test]
    fn printable_drops_escape_sequences_and_controls() {
        assert_eq!(printable("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(
            printable(
                "a\u{1b}[31mred\u{1b}[0m b\u{7}\u{1b}]0;title\u{7}c\u{1b}]52;c;x\u{1b}\\d\u{9b}2Je\r\u{0}f\u{1b}(Bg"
            ),
            "ared bcdefg"
        );
        assert_eq!(printable("cut \u{1b}["), "cut ");
    }

    #[test]
    fn history_rendering_is_append_only() {
        let mut msgs = vec![
            Message::text(Role::User, "one"),
            Message::text(Role::Assistant, "two"),
        ];
        let render = |h: &[Message]| {
            render_user_message(Prompt {
                read_only: vec![],
                history: h,
                latest: "x",
                retry: None,
                writable: vec![],
            })
        };
        let a = render(&msgs);
        msgs.push(Message::text(Role::User, "three"));
        let b = render(&msgs);
        let prefix = &a[..a.find("\n@latest_user_message").unwrap()];
        assert!(b.starts_with(prefix));
    }

    #[test]
    fn paths_with_spaces_are_quoted() {
        assert_eq!(attr("src/a b.rs"), "\"src/a b.rs\"");
        assert_eq!(attr("src/a.rs"), "src/a.rs");
    }
}
