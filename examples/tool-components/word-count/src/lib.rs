//! `wordcount`: an example third-party `bb7:tool@0.1.0` component with one tool, `count_words`.
//!
//! A pure tool: it reads the project through the read-only view the host mounts at `/` (its
//! manifest requests `files = "project-read"` and nothing else) and returns counts as JSON. It does
//! not need to know what the view leaves out (`.git/`, `.bb7/`, ignored and secret files, links):
//! those files are simply not there.
//!
//! Arguments: `{"path": "<file or directory relative to the project root>"}`, default `"."`.
//! Result: `{"files", "lines", "words", "bytes", "per_file": [{"path", "lines", "words", "bytes"}],
//! "skipped_not_text", "truncated"}`. `per_file` lists the first [`MAX_PER_FILE`] files in path order;
//! the totals cover every file counted.

wit_bindgen::generate!({
    path: "../../../wit/v0.1.0",
    world: "tool-component",
});

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use bb7::tool::types::ErrorKind;
use exports::bb7::tool::tool::{Guest, Setting, ToolError, ToolInfo};
use serde_json::{Value, json};

/// The manifest, embedded as the custom section `bb7-manifest` so the `.wasm` file alone carries it.
/// `bb7 tools add` reads it when no `bb7-tool.toml` lies beside the file, and checks that the two
/// agree when both exist. (`#[used]` keeps it although no code reads it.)
const MANIFEST_LEN: usize = include_bytes!("../bb7-tool.toml").len();
#[unsafe(link_section = "bb7-manifest")]
#[used]
static MANIFEST: [u8; MANIFEST_LEN] = *include_bytes!("../bb7-tool.toml");

/// At most this many files are counted; the rest set `truncated`.
const MAX_FILES: usize = 2_000;
/// At most this many bytes are read in one call; the rest set `truncated`.
const MAX_READ_BYTES: u64 = 8 << 20;
/// At most this many entries are listed in `per_file`.
const MAX_PER_FILE: usize = 200;

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "A file or directory relative to the project root, e.g. \"src\" or \"README.md\". Default \".\": the whole project."
    }
  },
  "additionalProperties": false
}"#;

struct WordCount;

impl Guest for WordCount {
    fn describe(_settings: Vec<Setting>) -> Result<ToolInfo, ToolError> {
        Ok(ToolInfo {
            name: "count_words".into(),
            description: "Counts lines, words (whitespace-separated) and bytes of the text files \
                          under a project path, like `wc`. Binary and non-UTF-8 files are skipped. \
                          Counts at most 2000 files and 8 MiB per call; `truncated` says when it \
                          stopped early. Lists per-file counts for the first 200 files."
                .into(),
            parameters_schema: SCHEMA.into(),
        })
    }

    fn call(_settings: Vec<Setting>, arguments: String) -> Result<String, ToolError> {
        let args: Value = serde_json::from_str(&arguments).map_err(|e| {
            err(
                ErrorKind::InvalidArguments,
                format!("arguments are not JSON: {e}"),
            )
        })?;
        let Some(obj) = args.as_object() else {
            return Err(err(
                ErrorKind::InvalidArguments,
                "arguments must be a JSON object",
            ));
        };
        if let Some(key) = obj.keys().find(|k| *k != "path") {
            return Err(err(
                ErrorKind::InvalidArguments,
                format!("unknown argument `{key}`; the only argument is `path`"),
            ));
        }
        let path = match obj.get("path") {
            None | Some(Value::Null) => ".",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(err(ErrorKind::InvalidArguments, "`path` must be a string")),
        };
        let rel = relative_path(path)?;
        let mut counter = Counter::default();
        counter.start(&rel, path)?;
        Ok(counter.into_json().to_string())
    }
}

export!(WordCount);

fn err(kind: ErrorKind, message: impl Into<String>) -> ToolError {
    ToolError {
        kind,
        message: message.into(),
    }
}

/// Checks a path from the model and returns it as a relative path ("" for the root).
fn relative_path(path: &str) -> Result<PathBuf, ToolError> {
    let bad = |why: &str| err(ErrorKind::InvalidArguments, format!("path `{path}` {why}"));
    if path.starts_with('/') {
        return Err(bad(
            "is absolute; paths are relative to the project root (e.g. `src`)",
        ));
    }
    if path.contains('\\') || path.contains('\0') {
        return Err(bad(
            "contains a backslash or NUL byte; use `/` between directories",
        ));
    }
    let mut rel = PathBuf::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                return Err(bad(
                    "contains `..`; paths must stay inside the project root",
                ));
            }
            s => rel.push(s),
        }
    }
    Ok(rel)
}

/// The project root as mounted inside the component.
fn root() -> &'static Path {
    Path::new("/")
}

#[derive(Default)]
struct Counter {
    files: usize,
    lines: u64,
    words: u64,
    bytes: u64,
    read: u64,
    skipped_not_text: usize,
    truncated: bool,
    per_file: Vec<Value>,
}

impl Counter {
    /// Counts the file or directory `rel` names (`shown` is the path as the model wrote it).
    fn start(&mut self, rel: &Path, shown: &str) -> Result<(), ToolError> {
        let meta = fs::symlink_metadata(root().join(rel)).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => err(
                ErrorKind::NotFound,
                format!("`{shown}` does not exist in the project (or is not visible to tools)"),
            ),
            _ => err(ErrorKind::Io, format!("cannot read `{shown}`: {e}")),
        })?;
        if meta.is_dir() {
            self.walk(rel);
            Ok(())
        } else if meta.is_file() {
            match self.count_file(rel, meta.len()) {
                Some(true) | None => Ok(()),
                Some(false) => Err(err(
                    ErrorKind::NotText,
                    format!("`{shown}` is binary or not UTF-8; only text files are counted"),
                )),
            }
        } else {
            Err(err(
                ErrorKind::NotFound,
                format!("`{shown}` is neither a file nor a directory"),
            ))
        }
    }

    /// Walks a directory depth-first in name order. Unreadable entries are skipped.
    fn walk(&mut self, rel: &Path) {
        let Ok(entries) = fs::read_dir(root().join(rel)) else {
            return;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if self.truncated {
                return;
            }
            let child = rel.join(entry.file_name());
            // Not `entry.metadata()`'s target: a link is never followed (the host's view has none).
            let Ok(meta) = fs::symlink_metadata(root().join(&child)) else {
                continue;
            };
            if meta.is_dir() {
                self.walk(&child);
            } else if meta.is_file() {
                self.count_file(&child, meta.len());
            }
        }
    }

    /// Counts one file. Returns `Some(true)` if counted, `Some(false)` if not text, `None` if a cap
    /// stopped the count (which sets `truncated`) or the file could not be read.
    fn count_file(&mut self, rel: &Path, len: u64) -> Option<bool> {
        if self.files >= MAX_FILES || self.read + len > MAX_READ_BYTES {
            self.truncated = true;
            return None;
        }
        let mut data = Vec::with_capacity(len as usize);
        // `take` bounds the read even if the file grew since `len` was taken.
        let file = fs::File::open(root().join(rel)).ok()?;
        file.take(MAX_READ_BYTES - self.read)
            .read_to_end(&mut data)
            .ok()?;
        self.read += data.len() as u64;
        let Ok(text) = std::str::from_utf8(&data) else {
            self.skipped_not_text += 1;
            return Some(false);
        };
        if text.contains('\0') {
            self.skipped_not_text += 1;
            return Some(false);
        }
        // Lines as an editor counts them: a last line without a newline still counts.
        let lines = text.matches('\n').count() as u64
            + u64::from(!text.is_empty() && !text.ends_with('\n'));
        let words = text.split_whitespace().count() as u64;
        let bytes = data.len() as u64;
        self.files += 1;
        self.lines += lines;
        self.words += words;
        self.bytes += bytes;
        if self.per_file.len() < MAX_PER_FILE {
            let path = rel.to_string_lossy().into_owned();
            self.per_file
                .push(json!({"path": path, "lines": lines, "words": words, "bytes": bytes}));
        }
        Some(true)
    }

    fn into_json(self) -> Value {
        json!({
            "files": self.files,
            "lines": self.lines,
            "words": self.words,
            "bytes": self.bytes,
            "per_file": self.per_file,
            "skipped_not_text": self.skipped_not_text,
            "truncated": self.truncated,
        })
    }
}
