//! `write_file {path, content}`: creates a file or rewrites it whole (EDITS.md, "write_file").
//!
//! - `path` is normalised ([`paths::normalize`]); absolute paths and `..` are refused.
//! - `content` is written byte-exact, except that when the file already exists with CRLF line endings
//!   (most of its line breaks are `\r\n`) and `content` uses bare `\n` only, the content is written
//!   with `\r\n` (the file keeps its native line endings).
//! - An existing file that is not text (binary or not UTF-8) is simply overwritten: a write replaces
//!   the whole file, so there is nothing to preserve (no line-ending conversion is done).
//! - Missing parent directories are created; the write is atomic ([`fsio::write_atomic`]).
//!
//! Result: `{"path": <normalised>, "status": "added"|"modified", "file_id": <id of the new bytes>,
//! "bytes": <bytes written>}`.

use std::fs;

use memchr::{memchr_iter, memmem};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolInfo;
use crate::file_id::file_id;
use crate::settings::DiffMode;
use crate::{Root, Settings, ToolError, fsio, paths};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
}

pub fn describe(settings: &Settings) -> ToolInfo {
    let edits = settings.diff_mode != DiffMode::Off;
    let mut description = String::from(
        "Create a new file, or replace the entire content of an existing file.\n\
         \n\
         - `content` is the complete file, exactly as it should be saved. Never abbreviate it: no \
         placeholders such as `// ... rest unchanged ...`, since everything not written is lost.\n\
         - `path` is relative to the project root (e.g. `src/main.rs`); absolute paths and `..` are \
         rejected. Missing directories are created.\n",
    );
    description.push_str(if edits {
        "- Write each path at most once per reply, and do not combine write_file and edit_file on \
         the same path in one reply.\n"
    } else {
        "- Write each path at most once per reply.\n"
    });
    description.push_str(
        "- If the existing file uses CRLF line endings, content written with LF is converted to \
         CRLF; otherwise the content is written byte for byte.\n",
    );
    if edits {
        description.push_str(
            "\nUse write_file to create files or when rewriting most of a file. To change part of an \
             existing file, prefer edit_file: it is shorter and cannot drop code by accident.\n\
             \n\
             Returns `{path, status: \"added\"|\"modified\", file_id, bytes}`; `file_id` identifies \
             the new version (use it for a later edit_file of this path in the same reply).",
        );
    } else {
        description.push_str(
            "\nReturns `{path, status: \"added\"|\"modified\", file_id, bytes}`; `file_id` identifies \
             the new version.",
        );
    }
    ToolInfo {
        name: "write_file".into(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path of the file, relative to the project root, e.g. `src/main.rs`."
                },
                "content": {
                    "type": "string",
                    "description": "The complete new content of the file."
                }
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
    }
}

pub fn call(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    let args: Args = super::parse_args("write_file", args)?;
    let rel = paths::normalize("path", &args.path, false).map_err(prefix)?;
    let target = root.join(&rel);
    let existed = match fs::metadata(&target) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::invalid(format!(
                "write_file: {rel} is a directory"
            )));
        }
        Ok(_) => true,
        Err(_) => false,
    };
    let mut content = args.content;
    if existed && uses_bare_lf(&content) {
        // An unreadable existing file simply gets no conversion; the write below reports real errors.
        if let Ok(old) = fs::read(&target)
            && !fsio::looks_binary(&old)
            && std::str::from_utf8(&old).is_ok()
            && mostly_crlf(&old)
        {
            content = content.replace('\n', "\r\n");
        }
    }
    fsio::write_atomic(root, &rel, content.as_bytes()).map_err(prefix)?;
    let mut out = json!({
        "path": rel,
        "status": if existed { "modified" } else { "added" },
        "bytes": content.len(),
    });
    if settings.result_file_ids {
        out["file_id"] = json!(file_id(&rel, content.as_bytes()));
    }
    Ok(out)
}

/// Prefixes an error message with the tool name.
fn prefix(e: ToolError) -> ToolError {
    ToolError::new(e.kind, format!("write_file: {}", e.message))
}

/// Whether `s` has line breaks and all of them are bare `\n`.
fn uses_bare_lf(s: &str) -> bool {
    s.contains('\n') && memmem::find(s.as_bytes(), b"\r\n").is_none()
}

/// Whether most of the line breaks in `bytes` are `\r\n`.
fn mostly_crlf(bytes: &[u8]) -> bool {
    let mut lf = 0usize;
    let mut crlf = 0usize;
    for p in memchr_iter(b'\n', bytes) {
        lf += 1;
        if p > 0 && bytes[p - 1] == b'\r' {
            crlf += 1;
        }
    }
    crlf * 2 > lf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn setup() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path());
        (dir, root)
    }

    fn write(root: &Root, path: &str, content: &str) -> Result<Value, ToolError> {
        call(
            root,
            &Settings::default(),
            &json!({"path": path, "content": content}).to_string(),
        )
    }

    #[test]
    fn adds_then_modifies() {
        let (dir, root) = setup();
        let out = write(&root, "./src//new/a.rs", "fn main() {}\n").unwrap();
        assert_eq!(
            out,
            json!({"path": "src/new/a.rs", "status": "added", "file_id": file_id("src/new/a.rs", b"fn main() {}\n"), "bytes": 13})
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("src/new/a.rs")).unwrap(),
            "fn main() {}\n"
        );
        let out = write(&root, "src/new/a.rs", "x").unwrap();
        assert_eq!(out["status"], "modified");
        assert_eq!(out["bytes"], 1);
        assert_eq!(fs::read(dir.path().join("src/new/a.rs")).unwrap(), b"x");
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let (dir, root) = setup();
        fs::write(dir.path().join("w.txt"), "a\r\nb\r\n").unwrap();
        let out = write(&root, "w.txt", "x\ny\n").unwrap();
        let expected = b"x\r\ny\r\n";
        assert_eq!(fs::read(dir.path().join("w.txt")).unwrap(), expected);
        assert_eq!(out["file_id"], json!(file_id("w.txt", expected)));
        assert_eq!(out["bytes"], 6);
        // content that already has CRLF, or mixed, is written as given
        write(&root, "w.txt", "p\r\nq\n").unwrap();
        assert_eq!(fs::read(dir.path().join("w.txt")).unwrap(), b"p\r\nq\n");
    }

    #[test]
    fn lf_and_new_files_are_byte_exact() {
        let (dir, root) = setup();
        fs::write(dir.path().join("l.txt"), "a\nb\n").unwrap();
        write(&root, "l.txt", "x\r\ny").unwrap();
        assert_eq!(fs::read(dir.path().join("l.txt")).unwrap(), b"x\r\ny");
        write(&root, "n.txt", "x\ny").unwrap();
        assert_eq!(fs::read(dir.path().join("n.txt")).unwrap(), b"x\ny");
        write(&root, "e.txt", "").unwrap();
        assert_eq!(fs::read(dir.path().join("e.txt")).unwrap(), b"");
    }

    #[test]
    fn binary_files_are_overwritten_without_conversion() {
        let (dir, root) = setup();
        fs::write(dir.path().join("b.bin"), b"\0\r\n\r\n").unwrap();
        let out = write(&root, "b.bin", "text\n").unwrap();
        assert_eq!(out["status"], "modified");
        assert_eq!(fs::read(dir.path().join("b.bin")).unwrap(), b"text\n");
    }

    #[test]
    fn refusals() {
        let (dir, root) = setup();
        fs::create_dir(dir.path().join("d")).unwrap();
        for bad in ["/etc/x", "../x", "a/../../x", "~/x", "d/", "", "a\\b"] {
            let e = write(&root, bad, "x").unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArguments, "{bad}");
            assert!(e.message.starts_with("write_file: path"), "{}", e.message);
        }
        let e = write(&root, "d", "x").unwrap_err();
        assert_eq!(e.message, "write_file: d is a directory");
        let e = call(&root, &Settings::default(), r#"{"path":"a"}"#).unwrap_err();
        assert!(
            e.message.starts_with("write_file: invalid arguments:")
                && e.message.contains("content")
        );
        let e = call(
            &root,
            &Settings::default(),
            r#"{"path":"a","content":"","mode":1}"#,
        )
        .unwrap_err();
        assert!(e.message.contains("unknown field"));
        assert!(!dir.path().join("a").exists());
    }

    #[test]
    fn describe_schema() {
        let d = describe(&Settings::default());
        assert_eq!(d.name, "write_file");
        assert_eq!(d.parameters["type"], "object");
        assert_eq!(d.parameters["required"], json!(["path", "content"]));
        assert_eq!(d.parameters["additionalProperties"], false);
        assert!(d.description.contains("edit_file"));
        let off = describe(&Settings {
            diff_mode: DiffMode::Off,
            ..Settings::default()
        });
        assert!(!off.description.contains("edit_file"));
    }
}
