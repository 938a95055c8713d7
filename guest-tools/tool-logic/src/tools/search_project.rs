//! `search_project`: literal, smart-case search across the project (AGENT-PLAN.md §5).

use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolInfo;
use crate::retrieval::search::{CONTEXT_LINES, search};
use crate::retrieval::{MAX_SEARCH_FILE_BYTES, search::MAX_SNIPPET_LINE_BYTES};
use crate::{Root, Settings, ToolError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    query: String,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    limit: Option<u64>,
}

pub fn describe(settings: &Settings) -> ToolInfo {
    let default = settings
        .max_search_results_default
        .min(settings.max_search_results_cap);
    let cap = settings.max_search_results_cap;
    let lines = settings.max_search_snippet_lines;
    let description = format!(
        "Search the project's files for a literal string (not a regular expression) and return the \
         matching lines with a little context. Smart case: the search ignores case when the query \
         has no uppercase letter (`config` finds `Config` and `CONFIG`) and is case-sensitive when \
         it has one (`Config` finds only `Config`). Files are searched in sorted path order and \
         each result gives `file_path`, `start_line` and `end_line` (1-based, inclusive) and \
         `snippet`: those lines, the matching line with up to {CONTEXT_LINES} lines of context \
         on each side, at most {lines} lines per result; nearby matches in one file share a \
         result, and lines longer than {MAX_SNIPPET_LINE_BYTES} bytes are shortened around the \
         match with `…`. Returns at most `limit` results (default {default}, at most {cap}); \
         `truncated` is true when there were more matches, so narrow the query or the glob. \
         Skipped: `.git/` and `.bb7/`, files ignored by `.gitignore` or `.git/info/exclude`, \
         symbolic links, binary files and files over {} MiB. Use read_file to see more of a file.",
        MAX_SEARCH_FILE_BYTES / (1024 * 1024)
    );
    ToolInfo {
        name: "search_project".into(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The exact text to find (no regex; `.`, `*`, `(` match themselves). Case-insensitive unless it contains an uppercase letter. May span lines with `\\n`."
                },
                "glob": {
                    "type": "string",
                    "description": "Only search files whose path relative to the project root matches this glob: `*` and `?` stay within one directory, `**` spans directories, `{a,b}` and `[abc]` are supported (e.g. `src/**`, `**/*.rs`, `docs/*.md`). A glob without `/` matches the file name at any depth (`*.toml`). Omit to search every file."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": cap,
                    "description": format!("Most results to return (default {default}, larger values are reduced to {cap}).")
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

pub fn call(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    let args: Args = super::parse_args("search_project", args)?;
    let limit = match args.limit {
        None => settings.max_search_results_default,
        Some(0) => return Err(ToolError::invalid("limit must be at least 1")),
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    }
    .min(settings.max_search_results_cap);
    let out = search(
        root,
        &args.query,
        args.glob.as_deref(),
        limit,
        settings.max_search_snippet_lines,
    )?;
    let results: Vec<Value> = out
        .results
        .into_iter()
        .map(|r| {
            json!({
                "file_path": r.file_path,
                "start_line": r.start_line,
                "end_line": r.end_line,
                "snippet": r.snippet,
            })
        })
        .collect();
    Ok(json!({ "results": results, "truncated": out.truncated }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::testutil::put;

    #[test]
    fn call_shapes_and_errors() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..60 {
            put(t.path(), &format!("f{i:02}.txt"), "a\nhit\nb\n");
        }
        let root = Root::at(t.path());
        let s = Settings::default();
        let v = call(&root, &s, r#"{"query":"hit"}"#).unwrap();
        assert_eq!(v["results"].as_array().unwrap().len(), 20);
        assert_eq!(v["truncated"], true);
        assert_eq!(
            v["results"][0],
            json!({"file_path": "f00.txt", "start_line": 1, "end_line": 3, "snippet": "a\nhit\nb"})
        );
        let v = call(&root, &s, r#"{"query":"hit","limit":1000,"glob":null}"#).unwrap();
        assert_eq!(v["results"].as_array().unwrap().len(), 50);
        let v = call(&root, &s, r#"{"query":"hit","glob":"f5*.txt"}"#).unwrap();
        assert_eq!(v["results"].as_array().unwrap().len(), 10);
        assert_eq!(v["truncated"], false);
        for bad in [
            r#"{"query":""}"#,
            r#"{"query":"x","limit":0}"#,
            r#"{"query":"x","glob":"[z"}"#,
            r#"{"q":"x"}"#,
            "[]",
            r#"{"query":"x","limit":-1}"#,
        ] {
            let e = call(&root, &s, bad).unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::InvalidArguments, "{bad}");
        }
        let info = describe(&s);
        assert_eq!(info.name, "search_project");
        assert_eq!(info.parameters["properties"]["limit"]["maximum"], 50);
        assert!(info.description.contains("default 20, at most 50"));
        assert!(info.description.contains("at most 20 lines per result"));
    }
}
