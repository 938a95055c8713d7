//! `edit_file`: targeted edits to existing files (EDITS.md). `settings.diff_mode` picks the schema
//! that [`describe`] offers and [`call`] accepts:
//!
//! - `search_replace_multi` (default, and `off`): `{edits: [{path, file_id, old_string, new_string,
//!   replace_all?}]}` — edits apply in order, each seeing the result of the previous ones, across any
//!   number of files; no-op edits are dropped;
//! - `search_replace`: `{path, file_id, old_string, new_string, replace_all?}`;
//! - `anchored`: `{path, file_id, changes: [{start, end?, content}]}`.
//!
//! The base version of a path is the file in the root (the host places the right version there).
//! `file_id` must equal `file_id(path, base bytes)`. Matching is [`crate::edit`]. A call is all or
//! nothing: files are written (atomically, each with [`fsio::write_atomic`]) only after every edit
//! succeeded, and a file whose text did not change is not rewritten.
//!
//! Result: `{"files": [{"path", "file_id" (of the new version), "edits": n}], "edits_applied": total}`,
//! files in the order they were first edited, plus `"notes": [...]` when there is something the
//! model should check (issue 32): occurrences of old_string left inside longer words, a file that an
//! empty old_string created. A missing file with an empty old_string is created, as write_file
//! would; a file that is not UTF-8 is refused naming the encoding it looks like.

use std::fs;
use std::io::ErrorKind as IoKind;

use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolInfo;
use crate::edit::{self, AnchorErrorKind, Change, MatchError};
use crate::file_id::file_id;
use crate::settings::DiffMode;
use crate::{ErrorKind, Root, Settings, ToolError, fsio, paths};

const TOOL: &str = "edit_file";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    file_id: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MultiArgs {
    edits: Vec<EditArgs>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeArgs {
    start: Vec<String>,
    #[serde(default)]
    end: Option<Vec<String>>,
    content: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnchoredArgs {
    path: String,
    file_id: String,
    changes: Vec<ChangeArgs>,
}

// ---- describe -----------------------------------------------------------------------------------

const PATH_DESC: &str =
    "Path of the file to edit, relative to the project root, e.g. `src/main.rs`.";
const FILE_ID_DESC: &str = "The 8-character id shown with this file in the context (or returned by your \
    last write_file/edit_file of this path in this reply). It proves you are editing the version you saw.";
const OLD_DESC: &str = "Text to replace, copied exactly from the current file (same whitespace and \
    indentation, no line numbers, no `...`). Must occur exactly once unless replace_all is set; include a few \
    surrounding lines to make it unique.";
const NEW_DESC: &str = "The replacement text (empty string to delete old_string). Write it with the file's \
    indentation.";
const REPLACE_ALL_DESC: &str = "Replace every occurrence of old_string instead of requiring exactly one \
    (e.g. to rename something). Default false.";

const SEARCH_REPLACE_RULES: &str = "How old_string is matched:\n\
    - It must match the file's current text exactly, including whitespace and indentation, and occur \
    exactly once; otherwise the edit fails with `old_string not found in file` or `old_string not unique \
    (N matches at lines ...)`. Copy it from the file; don't retype it from memory.\n\
    - Include enough surrounding lines to make it unique, but keep it short: the lines you change plus a \
    little context, not a whole function.\n\
    - Small differences in trailing whitespace or indentation are tolerated (the replacement is then \
    re-indented to the file's indentation), but don't rely on that.\n\
    - An empty old_string is only allowed when the file is empty or contains only whitespace.\n\
    - Line endings (LF/CRLF) and a missing final newline are preserved; write new_string with `\\n`.";

fn search_replace_intro(multi: bool) -> String {
    let what = if multi {
        "Edit existing files by exact search and replace. Each edit replaces `old_string` with `new_string` \
         in the file at `path`.\n\
         \n\
         Edits are applied in order and each sees the result of the previous ones; one call can edit several \
         files, and several places in one file (give every edit of a file the same file_id, the id of the \
         version you saw). If any edit fails, none is applied. Edits whose old_string equals new_string are \
         ignored."
    } else {
        "Edit an existing file by exact search and replace: `old_string` is replaced with `new_string` in \
         the file at `path`. One edit per call; call the tool again for further edits (later calls see the \
         result of earlier ones)."
    };
    format!(
        "{what}\n\n\
         Use edit_file to change part of an existing file; use write_file to create a file or to rewrite most \
         of one. Only files in the context, or changed earlier in this reply, can be edited. `file_id` is the \
         id shown with the file in the context; after a file was changed in this reply, use the new file_id \
         the tool returned.\n\n\
         {SEARCH_REPLACE_RULES}\n\n\
         Returns `{{files: [{{path, file_id, edits}}], edits_applied}}` with the new file_id of each file."
    )
}

fn edit_item_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": PATH_DESC},
            "file_id": {"type": "string", "description": FILE_ID_DESC},
            "old_string": {"type": "string", "description": OLD_DESC},
            "new_string": {"type": "string", "description": NEW_DESC},
            "replace_all": {"type": "boolean", "description": REPLACE_ALL_DESC}
        },
        "required": ["path", "file_id", "old_string", "new_string"],
        "additionalProperties": false
    })
}

const ANCHORED_DESC: &str = "Edit an existing file by replacing regions of whole lines, located by anchor lines \
    copied from the file.\n\
    \n\
    Each change has:\n\
    - `start`: 1 to 10 consecutive lines copied exactly from the file, where the region begins;\n\
    - `end` (optional): up to 10 consecutive lines where the region ends (the region includes them); \
    without `end` the region is exactly the `start` lines;\n\
    - `content`: the lines that replace the whole region, anchors included (so repeat anchor lines you \
    want to keep); an empty array deletes the region.\n\
    \n\
    Lines are given without newline characters, with their indentation. Each anchor must occur exactly once \
    in the file (`anchor not found` / `anchor not unique (lines ...)` otherwise), so pick distinctive lines \
    and add lines to an anchor to make it unique. All changes refer to the file as it is now, before any of \
    them is applied, and must not overlap. If any change fails, none is applied. Use write_file to create a \
    file or rewrite most of one. `file_id` is the id shown with the file in the context (or returned by your \
    last write_file/edit_file of it in this reply). Line endings and a missing final newline are preserved.\n\
    \n\
    Returns `{files: [{path, file_id, edits}], edits_applied}` with the new file_id.";

pub fn describe(settings: &Settings) -> ToolInfo {
    let (description, parameters) = match settings.diff_mode {
        DiffMode::SearchReplaceMulti | DiffMode::Off => (
            search_replace_intro(true),
            json!({
                "type": "object",
                "properties": {
                    "edits": {
                        "type": "array",
                        "description": "The edits, applied in order (at least one).",
                        "items": edit_item_schema()
                    }
                },
                "required": ["edits"],
                "additionalProperties": false
            }),
        ),
        DiffMode::SearchReplace => (search_replace_intro(false), edit_item_schema()),
        DiffMode::Anchored => {
            let lines = |desc: &str| json!({"type": "array", "items": {"type": "string"}, "description": desc});
            let mut start = lines(
                "1-10 consecutive lines copied exactly from the file; the region starts here.",
            );
            start["minItems"] = json!(1);
            start["maxItems"] = json!(edit::MAX_ANCHOR_LINES);
            let mut end = lines(
                "Optional: up to 10 consecutive lines from the file where the region ends (inclusive).",
            );
            end["maxItems"] = json!(edit::MAX_ANCHOR_LINES);
            (
                ANCHORED_DESC.to_string(),
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": PATH_DESC},
                        "file_id": {"type": "string", "description": FILE_ID_DESC},
                        "changes": {
                            "type": "array",
                            "description": "The changes (at least one), all located in the file as it is now; they must not overlap.",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "start": start,
                                    "end": end,
                                    "content": lines("The new lines replacing the whole region, anchors included; [] deletes the region.")
                                },
                                "required": ["start", "content"],
                                "additionalProperties": false
                            }
                        }
                    },
                    "required": ["path", "file_id", "changes"],
                    "additionalProperties": false
                }),
            )
        }
    };
    ToolInfo {
        name: TOOL.into(),
        description,
        parameters,
    }
}

// ---- call -----------------------------------------------------------------------------------------

pub fn call(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    match settings.diff_mode {
        DiffMode::SearchReplaceMulti | DiffMode::Off => call_multi(root, settings, args),
        DiffMode::SearchReplace => call_single(root, settings, args),
        DiffMode::Anchored => call_anchored(root, settings, args),
    }
}

/// A file being edited in this call.
struct Staged {
    path: String,
    base_id: String,
    /// The base version's text.
    original: String,
    /// The text after this call's edits so far; `None` until the first edit (the text is then
    /// `original`, which is not copied).
    edited: Option<String>,
    edits: usize,
    /// The file did not exist: an edit with an empty old_string creates it (as write_file would).
    created: bool,
}

impl Staged {
    /// The file's text as this call's edits so far left it.
    fn text(&self) -> &str {
        self.edited.as_deref().unwrap_or(&self.original)
    }

    /// Whether the file must be written: it is new, or its text differs from the base version's.
    fn changed(&self) -> bool {
        self.created
            || self
                .edited
                .as_ref()
                .is_some_and(|t| !edit::scan::same(t.as_bytes(), self.original.as_bytes()))
    }
}

/// Prefixes `e`'s message with `ctx` (e.g. `edit_file: edits[2]: `).
fn with(ctx: &str, e: ToolError) -> ToolError {
    ToolError::new(e.kind, format!("{ctx}{}", e.message))
}

fn not_found(rel: &str) -> ToolError {
    ToolError::not_found(format!(
        "file not found: {rel} (only files in context or already written in this reply can be edited; use write_file to create a file)"
    ))
}

/// A file that is not UTF-8 text: says which encoding it looks like, and that only UTF-8 is
/// edited (issue 32). Binary files keep their message.
fn not_utf8(root: &Root, rel: &str, e: ToolError) -> ToolError {
    let Ok(bytes) = fs::read(root.join(rel)) else {
        return e;
    };
    if fsio::looks_binary(&bytes) {
        return e;
    }
    let what = match edit::encoding::guess(&bytes) {
        Some(enc) => format!("{rel} is not UTF-8 text: it looks like {enc}"),
        None => format!("{rel} is not UTF-8 text (its encoding could not be told)"),
    };
    ToolError::new(
        ErrorKind::NotText,
        format!(
            "{what}; edit_file only edits UTF-8 files, so it was left unchanged (converting it to \
             UTF-8 is the user's decision)"
        ),
    )
}

/// The base of an edit with an empty old_string on a path that does not exist: an empty file that
/// the edit creates, as write_file would (issue 32). Its id is the one the model gave, so further
/// edits of the same call that repeat it apply to the new file.
fn create(root: &Root, rel: &str, given_id: &str) -> Result<Staged, ToolError> {
    match fs::symlink_metadata(root.join(rel)) {
        Err(e) if matches!(e.kind(), IoKind::NotFound | IoKind::NotADirectory) => {}
        Ok(_) => return Err(not_found(rel)),
        Err(e) => return Err(ToolError::io(rel, &e)),
    }
    Ok(Staged {
        path: rel.to_string(),
        base_id: given_id.trim().to_string(),
        original: String::new(),
        edited: None,
        edits: 0,
        created: true,
    })
}

/// Reads the base version of `rel` (normalised) and checks `given_id` against it.
fn load(root: &Root, settings: &Settings, rel: &str, given_id: &str) -> Result<Staged, ToolError> {
    match fs::metadata(root.join(rel)) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::invalid(format!(
                "{rel} is a directory, not a file"
            )));
        }
        Ok(_) => {}
        Err(e) if matches!(e.kind(), IoKind::NotFound | IoKind::NotADirectory) => {
            return Err(not_found(rel));
        }
        Err(e) => return Err(ToolError::io(rel, &e)),
    }
    let text = fsio::read_text(root, rel).map_err(|e| match e.kind {
        ErrorKind::NotFound => not_found(rel),
        ErrorKind::NotText => not_utf8(root, rel, e),
        _ => e,
    })?;
    // The host staged this file and hashed it natively: no need to hash the same bytes here.
    let base_id = match settings.known_file_id(rel) {
        Some(id) => id.to_string(),
        None => file_id(rel, text.as_bytes()),
    };
    let staged = Staged {
        path: rel.to_string(),
        base_id,
        original: text,
        edited: None,
        edits: 0,
        created: false,
    };
    check_id(&staged, given_id)?;
    Ok(staged)
}

/// `file_id` must name the base version (hex case and surrounding spaces are forgiven).
fn check_id(staged: &Staged, given: &str) -> Result<(), ToolError> {
    if given.trim().eq_ignore_ascii_case(&staged.base_id) {
        Ok(())
    } else {
        Err(ToolError::conflict(format!(
            "file_id mismatch for {}: expected {} (the current version), got {}",
            staged.path, staged.base_id, given
        )))
    }
}

fn match_error(ctx: &str, e: MatchError) -> ToolError {
    let kind = match e {
        MatchError::EmptyOldString => ErrorKind::InvalidArguments,
        MatchError::NotFound { .. } | MatchError::NotUnique { .. } | MatchError::Refused(_) => {
            ErrorKind::Conflict
        }
    };
    ToolError::new(kind, format!("{ctx}{e}"))
}

/// Writes every changed file (only now: all edits succeeded) and builds the result.
fn commit(
    root: &Root,
    settings: &Settings,
    files: Vec<Staged>,
    notes: Vec<String>,
) -> Result<Value, ToolError> {
    for f in &files {
        if f.changed() {
            fsio::write_atomic(root, &f.path, f.text().as_bytes())
                .map_err(|e| with("edit_file: ", e))?;
        }
    }
    let total: usize = files.iter().map(|f| f.edits).sum();
    let files: Vec<Value> = files
        .iter()
        .map(|f| {
            let mut v = json!({"path": f.path, "edits": f.edits});
            if settings.result_file_ids {
                v["file_id"] = json!(file_id(&f.path, f.text().as_bytes()));
            }
            v
        })
        .collect();
    let mut out = json!({"files": files, "edits_applied": total});
    if !notes.is_empty() {
        out["notes"] = json!(notes);
    }
    Ok(out)
}

/// What the model should know about an applied edit (issue 32): a file it created, occurrences of
/// old_string inside longer words that were left unchanged. `ctx` names the edit.
fn edit_notes(
    ctx: &str,
    created: bool,
    r: &edit::Replaced,
    replace_all: bool,
    notes: &mut Vec<String>,
) {
    if created {
        notes.push(format!(
            "{ctx}the file did not exist and was created with new_string (empty old_string)"
        ));
    }
    let w = &r.in_words;
    if w.count == 0 {
        return;
    }
    let lines = edit::list_lines(&w.lines);
    let line_s = if w.lines.len() == 1 { "line" } else { "lines" };
    notes.push(if replace_all {
        format!(
            "{ctx}replaced {} whole-word occurrence(s) of old_string; {} more occurrence(s) inside \
             longer words were left unchanged ({line_s} {lines}): edit them separately if they \
             should change too",
            r.count, w.count
        )
    } else {
        format!(
            "{ctx}replaced 1 occurrence; old_string also occurs {} time(s) inside longer words \
             ({line_s} {lines}), left unchanged: check they should not change too",
            w.count
        )
    });
}

fn call_multi(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    let args: MultiArgs = super::parse_args(TOOL, args)?;
    if args.edits.is_empty() {
        return Err(ToolError::invalid("edit_file: no edits"));
    }
    let active: Vec<(usize, &EditArgs)> = args
        .edits
        .iter()
        .enumerate()
        .filter(|(_, e)| !edit::is_noop(&e.old_string, &e.new_string))
        .collect();
    if active.is_empty() {
        return Err(ToolError::invalid("edit_file: all edits are no-ops"));
    }
    let mut files: Vec<Staged> = Vec::new();
    let mut notes = Vec::new();
    for (i, e) in active {
        let ctx = format!("edit_file: edits[{i}]: ");
        let rel = paths::normalize("path", &e.path, false).map_err(|err| with(&ctx, err))?;
        let idx = match files.iter().position(|f| f.path == rel) {
            Some(idx) => {
                check_id(&files[idx], &e.file_id).map_err(|err| with(&ctx, err))?;
                idx
            }
            None => {
                let f = match load(root, settings, &rel, &e.file_id) {
                    Err(err) if err.kind == ErrorKind::NotFound && e.old_string.is_empty() => {
                        create(root, &rel, &e.file_id)
                    }
                    other => other,
                };
                files.push(f.map_err(|err| with(&ctx, err))?);
                files.len() - 1
            }
        };
        let f = &mut files[idx];
        let replace_all = e.replace_all.unwrap_or(false);
        let r = edit::replace(f.text(), &e.old_string, &e.new_string, replace_all)
            .map_err(|m| match_error(&format!("edit_file: edits[{i}] ({rel}): "), m))?;
        edit_notes(
            &format!("edits[{i}] ({rel}): "),
            f.created && f.edits == 0,
            &r,
            replace_all,
            &mut notes,
        );
        f.edited = Some(r.text);
        f.edits += 1;
    }
    commit(root, settings, files, notes)
}

fn call_single(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    let e: EditArgs = super::parse_args(TOOL, args)?;
    if edit::is_noop(&e.old_string, &e.new_string) {
        return Err(ToolError::invalid(
            "edit_file: old_string and new_string are identical (no-op)",
        ));
    }
    let ctx = "edit_file: ";
    let rel = paths::normalize("path", &e.path, false).map_err(|err| with(ctx, err))?;
    let mut f = match load(root, settings, &rel, &e.file_id) {
        Err(err) if err.kind == ErrorKind::NotFound && e.old_string.is_empty() => {
            create(root, &rel, &e.file_id)
        }
        other => other,
    }
    .map_err(|err| with(ctx, err))?;
    let replace_all = e.replace_all.unwrap_or(false);
    let r = edit::replace(f.text(), &e.old_string, &e.new_string, replace_all)
        .map_err(|m| match_error(&format!("edit_file: {rel}: "), m))?;
    let mut notes = Vec::new();
    edit_notes(&format!("{rel}: "), f.created, &r, replace_all, &mut notes);
    f.edited = Some(r.text);
    f.edits = 1;
    commit(root, settings, vec![f], notes)
}

fn call_anchored(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    let args: AnchoredArgs = super::parse_args(TOOL, args)?;
    if args.changes.is_empty() {
        return Err(ToolError::invalid("edit_file: no edits"));
    }
    let ctx = "edit_file: ";
    let rel = paths::normalize("path", &args.path, false).map_err(|err| with(ctx, err))?;
    let mut f = load(root, settings, &rel, &args.file_id).map_err(|err| with(ctx, err))?;
    let changes: Vec<Change> = args
        .changes
        .into_iter()
        .map(|c| Change {
            start: c.start,
            end: c.end.unwrap_or_default(),
            content: c.content,
        })
        .collect();
    let out = edit::apply_anchored(f.text(), &changes).map_err(|e| {
        let kind = match e.kind {
            AnchorErrorKind::NotFound(_)
            | AnchorErrorKind::NotUnique(..)
            | AnchorErrorKind::EndNotAfterStart { .. } => ErrorKind::Conflict,
            _ => ErrorKind::InvalidArguments,
        };
        let which = e
            .anchor()
            .map(|a| format!(".{}", a.as_str()))
            .unwrap_or_default();
        ToolError::new(
            kind,
            match &e.hint {
                Some(h) => format!(
                    "edit_file: changes[{}]{which} ({rel}): {}; {h}",
                    e.change, e.kind
                ),
                None => format!(
                    "edit_file: changes[{}]{which} ({rel}): {}",
                    e.change, e.kind
                ),
            },
        )
    })?;
    f.edited = Some(out);
    f.edits = changes.len();
    commit(root, settings, vec![f], Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn settings(mode: DiffMode) -> Settings {
        Settings {
            diff_mode: mode,
            ..Settings::default()
        }
    }

    fn setup(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        for (p, c) in files {
            let path = dir.path().join(p);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, c).unwrap();
        }
        let root = Root::at(dir.path());
        (dir, root)
    }

    fn read(dir: &Path, p: &str) -> String {
        fs::read_to_string(dir.join(p)).unwrap()
    }

    fn id(p: &str, c: &str) -> String {
        file_id(p, c.as_bytes())
    }

    fn multi(root: &Root, edits: Value) -> Result<Value, ToolError> {
        call(
            root,
            &settings(DiffMode::SearchReplaceMulti),
            &json!({ "edits": edits }).to_string(),
        )
    }

    fn ed(path: &str, fid: &str, old: &str, new: &str) -> Value {
        json!({"path": path, "file_id": fid, "old_string": old, "new_string": new})
    }

    #[test]
    fn host_vouched_ids_are_taken_and_result_ids_can_be_left_to_the_host() {
        let (dir, root) = setup(&[("a.txt", "one\ntwo\n")]);
        let s = Settings {
            known_file_ids: vec![("a.txt".into(), id("a.txt", "one\ntwo\n"))],
            result_file_ids: false,
            ..settings(DiffMode::SearchReplaceMulti)
        };
        let args =
            json!({"edits": [ed("a.txt", &id("a.txt", "one\ntwo\n"), "two", "TWO")]}).to_string();
        let out = call(&root, &s, &args).unwrap();
        assert_eq!(read(dir.path(), "a.txt"), "one\nTWO\n");
        assert_eq!(
            out,
            json!({"edits_applied": 1, "files": [{"path": "a.txt", "edits": 1}]})
        );
        // The vouched id is what the call is checked against (a stale one is still refused).
        let stale =
            json!({"edits": [ed("a.txt", &id("a.txt", "one\ntwo\n"), "one", "ONE")]}).to_string();
        let s = Settings {
            known_file_ids: vec![("a.txt".into(), id("a.txt", "one\nTWO\n"))],
            ..settings(DiffMode::SearchReplaceMulti)
        };
        let e = call(&root, &s, &stale).unwrap_err();
        assert!(e.message.contains("file_id mismatch"), "{}", e.message);
        // Without the settings the tool hashes and reports ids itself.
        let out = multi(
            &root,
            json!([ed("a.txt", &id("a.txt", "one\nTWO\n"), "one", "ONE")]),
        )
        .unwrap();
        assert_eq!(out["files"][0]["file_id"], json!(id("a.txt", "ONE\nTWO\n")));
    }

    #[test]
    fn multi_edits_apply_in_order_across_files() {
        let a = "fn a() {\n    one();\n}\n";
        let b = "x = 1\r\ny = 2\r\n";
        let (dir, root) = setup(&[("src/a.rs", a), ("b.py", b)]);
        let (ia, ib) = (id("src/a.rs", a), id("b.py", b));
        let out = multi(
            &root,
            json!([
                ed("src/a.rs", &ia, "one();", "two();"),
                ed("b.py", &ib, "y = 2\n", "y = 3\nz = 4\n"),
                // sees the result of the first edit
                ed(
                    "./src//a.rs",
                    &ia,
                    "    two();\n",
                    "    two();\n    three();\n"
                ),
            ]),
        )
        .unwrap();
        let a2 = "fn a() {\n    two();\n    three();\n}\n";
        let b2 = "x = 1\r\ny = 3\r\nz = 4\r\n";
        assert_eq!(read(dir.path(), "src/a.rs"), a2);
        assert_eq!(read(dir.path(), "b.py"), b2);
        assert_eq!(
            out,
            json!({
                "files": [
                    {"path": "src/a.rs", "file_id": id("src/a.rs", a2), "edits": 2},
                    {"path": "b.py", "file_id": id("b.py", b2), "edits": 1}
                ],
                "edits_applied": 3
            })
        );
    }

    #[test]
    fn all_or_nothing() {
        let (dir, root) = setup(&[("a.txt", "alpha\n"), ("b.txt", "beta\n")]);
        let e = multi(
            &root,
            json!([
                ed("a.txt", &id("a.txt", "alpha\n"), "alpha", "ALPHA"),
                ed("b.txt", &id("b.txt", "beta\n"), "gamma", "GAMMA"),
            ]),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert_eq!(
            e.message,
            "edit_file: edits[1] (b.txt): old_string not found in file"
        );
        assert_eq!(read(dir.path(), "a.txt"), "alpha\n");
        assert_eq!(read(dir.path(), "b.txt"), "beta\n");
        // a later edit of the same file failing also leaves it untouched
        let e = multi(
            &root,
            json!([
                ed("a.txt", &id("a.txt", "alpha\n"), "alpha", "x"),
                ed("a.txt", &id("a.txt", "alpha\n"), "alpha", "y"),
            ]),
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "edit_file: edits[1] (a.txt): old_string not found in file"
        );
        assert_eq!(read(dir.path(), "a.txt"), "alpha\n");
    }

    #[test]
    fn file_id_mismatch_names_expected_id() {
        let (dir, root) = setup(&[("src/a.rs", "x\n")]);
        let expected = id("src/a.rs", "x\n");
        let e = multi(&root, json!([ed("src/a.rs", "deadbeef", "x", "y")])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert_eq!(
            e.message,
            format!(
                "edit_file: edits[0]: file_id mismatch for src/a.rs: expected {expected} (the current version), got deadbeef"
            )
        );
        // the same file edited twice: the second edit must also carry the base id
        let e = multi(
            &root,
            json!([
                ed("src/a.rs", &expected, "x", "y"),
                ed("src/a.rs", "0badc0de", "y", "z")
            ]),
        )
        .unwrap_err();
        assert!(
            e.message
                .starts_with("edit_file: edits[1]: file_id mismatch for src/a.rs: expected ")
        );
        // single mode
        let s = settings(DiffMode::SearchReplace);
        let args = json!({"path": "src/a.rs", "file_id": "deadbeef", "old_string": "x", "new_string": "y"});
        let e = call(&root, &s, &args.to_string()).unwrap_err();
        assert_eq!(
            e.message,
            format!(
                "edit_file: file_id mismatch for src/a.rs: expected {expected} (the current version), got deadbeef"
            )
        );
        assert_eq!(read(dir.path(), "src/a.rs"), "x\n");
        // upper-case hex is accepted
        let ok = ed("src/a.rs", &expected.to_uppercase(), "x", "y");
        multi(&root, json!([ok])).unwrap();
        assert_eq!(read(dir.path(), "src/a.rs"), "y\n");
    }

    #[test]
    fn missing_file_and_bad_paths() {
        let (_dir, root) = setup(&[("a.txt", "a\n"), ("bin.dat", "a\0b")]);
        let e = multi(&root, json!([ed("nope/x.rs", "00000000", "a", "b")])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert_eq!(
            e.message,
            "edit_file: edits[0]: file not found: nope/x.rs (only files in context or already written in this reply can be edited; use write_file to create a file)"
        );
        let s = settings(DiffMode::SearchReplace);
        let args = json!({"path": "x.rs", "file_id": "0", "old_string": "a", "new_string": "b"});
        let e = call(&root, &s, &args.to_string()).unwrap_err();
        assert_eq!(
            e.message,
            "edit_file: file not found: x.rs (only files in context or already written in this reply can be edited; use write_file to create a file)"
        );
        // a file under a path component that is a file
        let e = multi(&root, json!([ed("a.txt/b", "00000000", "a", "b")])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound);
        for bad in [
            "/etc/passwd",
            "../a.txt",
            "a/../../a.txt",
            "~/a.txt",
            "dir/",
        ] {
            let e = multi(&root, json!([ed(bad, "00000000", "a", "b")])).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArguments, "{bad}");
            assert!(
                e.message.starts_with("edit_file: edits[0]: path"),
                "{}",
                e.message
            );
        }
        let e = multi(
            &root,
            json!([ed("bin.dat", &id("bin.dat", "a\0b"), "a", "b")]),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotText);
        let e = multi(&root, json!([ed(".", "00000000", "a", "b")])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArguments);
    }

    #[test]
    fn directory_is_refused() {
        let (_dir, root) = setup(&[("d/a.txt", "a\n")]);
        let e = multi(&root, json!([ed("d", "00000000", "a", "b")])).unwrap_err();
        assert_eq!(
            e.message,
            "edit_file: edits[0]: d is a directory, not a file"
        );
    }

    #[test]
    fn no_edits_and_no_ops() {
        let (dir, root) = setup(&[("a.txt", "a\n")]);
        let e = multi(&root, json!([])).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::InvalidArguments, "edit_file: no edits")
        );
        let ia = id("a.txt", "a\n");
        let e = multi(
            &root,
            json!([ed("a.txt", &ia, "a", "a"), ed("a.txt", &ia, "x\r\n", "x\n")]),
        )
        .unwrap_err();
        assert_eq!(e.message, "edit_file: all edits are no-ops");
        // no-ops are dropped (even one naming a missing file); the rest applies
        let out = multi(
            &root,
            json!([ed("missing", "0", "q", "q"), ed("a.txt", &ia, "a", "b")]),
        )
        .unwrap();
        assert_eq!(out["edits_applied"], 1);
        assert_eq!(read(dir.path(), "a.txt"), "b\n");
        let s = settings(DiffMode::SearchReplace);
        let args = json!({"path": "a.txt", "file_id": "x", "old_string": "b", "new_string": "b"});
        let e = call(&root, &s, &args.to_string()).unwrap_err();
        assert_eq!(
            e.message,
            "edit_file: old_string and new_string are identical (no-op)"
        );
    }

    #[test]
    fn errors_name_edit_and_path() {
        let text = "x\ny\nx\n";
        let (_dir, root) = setup(&[("f.txt", text), ("e.txt", "")]);
        let i = id("f.txt", text);
        let e = multi(
            &root,
            json!([ed("f.txt", &i, "y", "Y"), ed("f.txt", &i, "x", "z")]),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert_eq!(
            e.message,
            "edit_file: edits[1] (f.txt): old_string not unique (2 matches at lines 1, 3)"
        );
        let e = multi(&root, json!([ed("f.txt", &i, "", "z")])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArguments);
        assert!(
            e.message
                .starts_with("edit_file: edits[0] (f.txt): old_string is empty;")
        );
        let s = settings(DiffMode::SearchReplace);
        let args = json!({"path": "f.txt", "file_id": i, "old_string": "q", "new_string": "r"});
        let e = call(&root, &s, &args.to_string()).unwrap_err();
        assert_eq!(e.message, "edit_file: f.txt: old_string not found in file");
    }

    #[test]
    fn replace_all_and_empty_file() {
        let text = "x\ny\nx\n";
        let (dir, root) = setup(&[("f.txt", text), ("e.txt", "")]);
        let mut e = ed("f.txt", &id("f.txt", text), "x", "z");
        e["replace_all"] = json!(true);
        let out = multi(
            &root,
            json!([e, ed("e.txt", &id("e.txt", ""), "", "new\n")]),
        )
        .unwrap();
        assert_eq!(read(dir.path(), "f.txt"), "z\ny\nz\n");
        assert_eq!(read(dir.path(), "e.txt"), "new\n");
        assert_eq!(out["edits_applied"], 2);
    }

    #[test]
    fn unchanged_file_is_not_rewritten() {
        let text = "x  \n";
        let (dir, root) = setup(&[("f.txt", text)]);
        // pass 2 turns "x  " into "x  ": nothing changes, the file keeps its bytes and id
        let out = multi(&root, json!([ed("f.txt", &id("f.txt", text), "x", "x  ")])).unwrap();
        assert_eq!(read(dir.path(), "f.txt"), text);
        assert_eq!(out["files"][0]["file_id"], json!(id("f.txt", text)));
    }

    #[test]
    fn single_mode() {
        let text = "a\r\nb\r\n";
        let (dir, root) = setup(&[("f.txt", text)]);
        let s = settings(DiffMode::SearchReplace);
        let args = json!({"path": "f.txt", "file_id": id("f.txt", text), "old_string": "b", "new_string": "c\nd"});
        let out = call(&root, &s, &args.to_string()).unwrap();
        let new = "a\r\nc\r\nd\r\n";
        assert_eq!(read(dir.path(), "f.txt"), new);
        assert_eq!(
            out,
            json!({"files": [{"path": "f.txt", "file_id": id("f.txt", new), "edits": 1}], "edits_applied": 1})
        );
        // the multi schema is not accepted in single mode, and vice versa
        let e = call(&root, &s, &json!({"edits": []}).to_string()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArguments);
        let e = multi(&root, json!(null)).unwrap_err();
        assert!(e.message.starts_with("edit_file: invalid arguments:"));
        // file_id is required; unknown fields are refused
        let e = call(
            &root,
            &s,
            &json!({"path": "f.txt", "old_string": "a", "new_string": "b"}).to_string(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("missing field `file_id`"),
            "{}",
            e.message
        );
        let args = json!({"path": "f.txt", "file_id": "x", "old_string": "a", "new_string": "b", "replaceAll": true});
        let e = call(&root, &s, &args.to_string()).unwrap_err();
        assert!(
            e.message.contains("unknown field `replaceAll`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn off_mode_uses_the_multi_schema() {
        let (dir, root) = setup(&[("f.txt", "a\n")]);
        let s = settings(DiffMode::Off);
        let out = call(
            &root,
            &s,
            &json!({"edits": [ed("f.txt", &id("f.txt", "a\n"), "a", "b")]}).to_string(),
        )
        .unwrap();
        assert_eq!(out["edits_applied"], 1);
        assert_eq!(read(dir.path(), "f.txt"), "b\n");
        assert_eq!(
            describe(&s).parameters,
            describe(&Settings::default()).parameters
        );
    }

    #[test]
    fn anchored_mode() {
        let text = "def a():\n    return 1\n\ndef b():\n    return 2\n";
        let (dir, root) = setup(&[("m.py", text)]);
        let s = settings(DiffMode::Anchored);
        let i = id("m.py", text);
        let args = json!({"path": "m.py", "file_id": i, "changes": [
            {"start": ["def b():"], "end": ["    return 2"], "content": ["def b():", "    return 3"]},
            {"start": ["    return 1"], "content": []}
        ]});
        let out = call(&root, &s, &args.to_string()).unwrap();
        let new = "def a():\n\ndef b():\n    return 3\n";
        assert_eq!(read(dir.path(), "m.py"), new);
        assert_eq!(
            out,
            json!({"files": [{"path": "m.py", "file_id": id("m.py", new), "edits": 2}], "edits_applied": 2})
        );
    }

    #[test]
    fn anchored_mode_errors() {
        let text = "a\nb\na\n";
        let (dir, root) = setup(&[("m.txt", text)]);
        let s = settings(DiffMode::Anchored);
        let i = id("m.txt", text);
        let run = |changes: Value| {
            call(
                &root,
                &s,
                &json!({"path": "m.txt", "file_id": i, "changes": changes}).to_string(),
            )
            .unwrap_err()
        };
        let e = run(json!([{"start": ["b"], "content": ["B"]}, {"start": ["a"], "content": []}]));
        assert_eq!(
            (e.kind, e.message.as_str()),
            (
                ErrorKind::Conflict,
                "edit_file: changes[1].start (m.txt): anchor not unique (lines 1, 3)"
            )
        );
        let e = run(json!([{"start": ["b"], "end": ["zz"], "content": []}]));
        assert_eq!(
            e.message,
            "edit_file: changes[0].end (m.txt): anchor not found"
        );
        let e = run(json!([{"start": [], "content": []}]));
        assert_eq!(
            (e.kind, e.message.as_str()),
            (
                ErrorKind::InvalidArguments,
                "edit_file: changes[0] (m.txt): empty start anchor"
            )
        );
        let e = run(json!([{"start": vec!["b"; 11], "content": []}]));
        assert_eq!(
            e.message,
            "edit_file: changes[0] (m.txt): start anchor too long (11 lines, max 10)"
        );
        let e = run(json!([{"start": ["b"], "end": vec!["a"; 12], "content": []}]));
        assert_eq!(
            e.message,
            "edit_file: changes[0] (m.txt): end anchor too long (12 lines, max 10)"
        );
        let e = run(json!([{"start": ["b"], "content": []}, {"start": ["b"], "content": ["c"]}]));
        assert!(
            e.message
                .starts_with("edit_file: changes[1] (m.txt): region (lines 2-2) overlaps"),
            "{}",
            e.message
        );
        let e = run(json!([]));
        assert_eq!(e.message, "edit_file: no edits");
        assert_eq!(read(dir.path(), "m.txt"), text);
        // file_id is checked in anchored mode too
        let e = call(
            &root,
            &s,
            &json!({"path": "m.txt", "file_id": "x", "changes": [{"start": ["b"], "content": []}]})
                .to_string(),
        )
        .unwrap_err();
        assert!(
            e.message
                .starts_with("edit_file: file_id mismatch for m.txt")
        );
    }

    #[test]
    fn describe_matches_the_mode() {
        let d = describe(&Settings::default());
        assert_eq!(d.name, "edit_file");
        assert_eq!(d.parameters["required"], json!(["edits"]));
        assert_eq!(
            d.parameters["properties"]["edits"]["items"]["required"],
            json!(["path", "file_id", "old_string", "new_string"])
        );
        assert!(d.description.contains("file_id"));
        let d = describe(&settings(DiffMode::SearchReplace));
        assert_eq!(d.parameters["type"], "object");
        assert_eq!(
            d.parameters["required"],
            json!(["path", "file_id", "old_string", "new_string"])
        );
        assert_eq!(d.parameters["properties"]["replace_all"]["type"], "boolean");
        let d = describe(&settings(DiffMode::Anchored));
        assert_eq!(
            d.parameters["required"],
            json!(["path", "file_id", "changes"])
        );
        assert_eq!(
            d.parameters["properties"]["changes"]["items"]["required"],
            json!(["start", "content"])
        );
        assert_eq!(
            d.parameters["properties"]["changes"]["items"]["properties"]["start"]["maxItems"],
            10
        );
        for mode in [
            DiffMode::SearchReplaceMulti,
            DiffMode::SearchReplace,
            DiffMode::Anchored,
            DiffMode::Off,
        ] {
            let d = describe(&settings(mode));
            assert_eq!(d.parameters["additionalProperties"], false);
            assert!(d.description.contains("write_file"));
        }
    }

    /// Its timing is in the host's bench (`cargo bench -p bb7 --bench edit`).
    #[test]
    fn large_file_edit_is_fast() {
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 1 << 20 {
            text.push_str(&format!("line {i}: some ordinary text here\n"));
            i += 1;
        }
        let (dir, root) = setup(&[("big.txt", &text)]);
        let fid = id("big.txt", &text);
        let target = format!("line {}: some ordinary text here\n", i / 2);
        multi(
            &root,
            json!([
                ed("big.txt", &fid, &target, "changed\n"),
                ed("big.txt", &fid, "line 7:", "line seven:")
            ]),
        )
        .unwrap();
        let out = read(dir.path(), "big.txt");
        assert!(out.contains("\nchanged\n") && out.contains("line seven: some"));
    }
}
