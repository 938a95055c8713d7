//! `read_file`: a range of lines of one text file (AGENT-PLAN.md §5).

use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolInfo;
use crate::retrieval::read::{ReadRequest, read};
use crate::{Root, Settings, ToolError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    file_path: String,
    #[serde(default)]
    start_line: Option<u64>,
    #[serde(default)]
    end_line: Option<u64>,
    #[serde(default)]
    max_bytes: Option<u64>,
}

pub fn describe(settings: &Settings) -> ToolInfo {
    let lines = settings.max_read_lines;
    let bytes = settings.max_read_bytes;
    let description = format!(
        "Read a UTF-8 text file of the project. Returns `content` (the file's exact text for the \
         returned lines, line endings included, no line numbers added), `start_line` and \
         `end_line` (1-based, inclusive: the lines in `content`), `total_lines` (the file's line \
         count) and `truncated`. Without `end_line` the read runs to the end of the file; either \
         way at most {lines} lines and {bytes} bytes (or `max_bytes`) are returned, cut at a line \
         boundary (a single line longer than the byte limit is cut inside, at a character \
         boundary). `truncated` is true when the limit stopped the read early: continue with \
         `start_line` = `end_line` + 1. Use search_project first to find the lines you need in a \
         large file. Refused: directories (use list_files), binary or non-UTF-8 files, symbolic \
         links, anything in `.git/` or `.bb7/`, and files ignored by `.gitignore`."
    );
    ToolInfo {
        name: "read_file".into(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {
                "file_path": {
                    "type": "string",
                    "description": "Path of the file relative to the project root, e.g. `src/main.rs` (no leading `/`, no `..`)."
                },
                "start_line": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "First line to return (1-based). Default 1."
                },
                "end_line": {
                    "type": "integer",
                    "minimum": 1,
                    "description": format!("Last line to return (inclusive). Default: the end of the file, within the {lines}-line limit.")
                },
                "max_bytes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": bytes,
                    "description": format!("Most bytes of content to return (default and maximum {bytes}).")
                }
            },
            "required": ["file_path"],
            "additionalProperties": false
        }),
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

pub fn call(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    let args: Args = super::parse_args("read_file", args)?;
    let max_bytes = match args.max_bytes {
        None => settings.max_read_bytes,
        Some(0) => return Err(ToolError::invalid("max_bytes must be at least 1")),
        Some(n) => to_usize(n).min(settings.max_read_bytes),
    };
    let out = read(
        root,
        &ReadRequest {
            file_path: &args.file_path,
            start_line: args.start_line.map(to_usize),
            end_line: args.end_line.map(to_usize),
            max_lines: settings.max_read_lines,
            max_bytes,
        },
    )?;
    Ok(json!({
        "file_path": out.file_path,
        "content": out.content,
        "start_line": out.start_line,
        "end_line": out.end_line,
        "total_lines": out.total_lines,
        "truncated": out.truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::testutil::put;

    #[test]
    fn call_shapes_and_errors() {
        let t = tempfile::tempdir().unwrap();
        let text: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        put(t.path(), "n.txt", &text);
        let root = Root::at(t.path());
        let s = Settings::default();
        let v = call(
            &root,
            &s,
            r#"{"file_path":"n.txt","start_line":2,"end_line":3}"#,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"file_path":"n.txt","content":"2\n3\n","start_line":2,"end_line":3,"total_lines":1000,"truncated":false})
        );
        let v = call(&root, &s, r#"{"file_path":"n.txt"}"#).unwrap();
        assert_eq!(
            (v["end_line"].as_u64(), v["truncated"].as_bool()),
            (Some(800), Some(true))
        );
        let v = call(
            &root,
            &s,
            r#"{"file_path":"n.txt","max_bytes":4,"end_line":null}"#,
        )
        .unwrap();
        assert_eq!(
            (v["content"].as_str(), v["end_line"].as_u64()),
            (Some("1\n2\n"), Some(2))
        );
        let v = call(
            &root,
            &s,
            r#"{"file_path":"n.txt","start_line":990,"max_bytes":99999999}"#,
        )
        .unwrap();
        assert_eq!(
            (v["end_line"].as_u64(), v["truncated"].as_bool()),
            (Some(1000), Some(false))
        );
        for bad in [
            r#"{"file_path":"n.txt","max_bytes":0}"#,
            r#"{"file_path":"n.txt","start_line":0}"#,
            r#"{"file_path":"n.txt","start_line":1001}"#,
            r#"{"file_path":"n.txt","start_line":-1}"#,
            r#"{"path":"n.txt"}"#,
            r#"{"file_path":"/n.txt"}"#,
        ] {
            let e = call(&root, &s, bad).unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::InvalidArguments, "{bad}");
        }
        let info = describe(&s);
        assert_eq!(info.parameters["required"], json!(["file_path"]));
        assert_eq!(info.parameters["properties"]["max_bytes"]["maximum"], 65536);
    }
}
