//! The state of every file a chat knows (`get_file_statuses`): in context, with the model's output,
//! or added by the model, each with its token count.

use std::collections::HashSet;

use cap_std::fs::Dir;
use serde::Serialize;

use super::model::Chat;
use super::snapshots;
use bb7_tool_logic::file_id::file_id;

/// One file's state.
#[derive(Debug, Clone, Serialize)]
pub struct FileState {
    /// The file's path.
    pub path: String,
    /// `S` a section, `M` modified by an output, `A` added by the model, `!A` added where a local
    /// file exists, empty otherwise.
    pub status: &'static str,
    /// Whether the file is in the chat's context.
    pub in_context: bool,
    /// Whether the model's output for it waits for review.
    pub has_output: bool,
    /// Whether the model may not modify it.
    pub readonly: bool,
    /// Whether it is outside the project.
    pub external: bool,
    /// Tokens it adds to a request (snapshot plus a differing output).
    pub tokens: usize,
    /// The snapshot's tokens, when an output differs from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_tokens: Option<usize>,
    /// The output's tokens, when it has one that counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<usize>,
    /// The snapshot's text, for files in context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_content: Option<String>,
    /// The output's text, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_content: Option<String>,
    /// A section's first line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// A section's last line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The state of every file of `chat` (directory `dir`). `count` counts a text's tokens given its
/// file id; `exists_locally` says whether a project file exists.
pub fn file_states(
    chat: &Chat,
    dir: &Dir,
    count: &mut dyn FnMut(&str, &str) -> usize,
    exists_locally: &dyn Fn(&str) -> bool,
) -> Vec<FileState> {
    let mut files = Vec::new();
    let mut in_context = HashSet::new();
    for cf in &chat.context_files {
        let ctx_bytes = snapshots::read(dir, cf).unwrap_or_default();
        let ctx = text(&ctx_bytes);
        let ctx_tokens = count(&cf.version, &ctx);
        let mut st = FileState {
            path: cf.path.clone(),
            status: "",
            in_context: true,
            has_output: false,
            readonly: cf.readonly,
            external: cf.external,
            tokens: ctx_tokens,
            original_tokens: None,
            output_tokens: None,
            context_content: None,
            output_content: None,
            start_line: None,
            end_line: None,
        };
        if cf.is_section() {
            st.status = "S";
            st.readonly = true;
            st.start_line = cf.start_line;
            st.end_line = cf.end_line;
        } else {
            in_context.insert(cf.path.clone());
            let out = if cf.external {
                None
            } else {
                snapshots::read_output(dir, &cf.path)
            };
            if let Some(out) = out {
                st.has_output = true;
                let out_text = text(&out);
                if !snapshots::same_text(&out, &ctx_bytes) {
                    let out_tokens = count(&file_id(&cf.path, &out), &out_text);
                    st.status = "M";
                    st.tokens = ctx_tokens + out_tokens;
                    st.original_tokens = Some(ctx_tokens);
                    st.output_tokens = Some(out_tokens);
                }
                st.output_content = Some(out_text);
            }
        }
        st.context_content = Some(ctx);
        files.push(st);
    }
    for path in snapshots::output_files(dir) {
        if in_context.contains(&path) {
            continue;
        }
        let Some(out) = snapshots::read_output(dir, &path) else {
            continue;
        };
        let out_text = text(&out);
        let tokens = count(&file_id(&path, &out), &out_text);
        files.push(FileState {
            status: if exists_locally(&path) { "!A" } else { "A" },
            path,
            in_context: false,
            has_output: true,
            readonly: false,
            external: false,
            tokens,
            original_tokens: None,
            output_tokens: Some(tokens),
            context_content: None,
            output_content: Some(out_text),
            start_line: None,
            end_line: None,
        });
    }
    files
}
