//! `list_files`: the project's files in sorted order (AGENT-PLAN.md §5).

use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolInfo;
use crate::retrieval::list::list;
use crate::{Root, Settings, ToolError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    glob: Option<String>,
}

pub fn describe(settings: &Settings) -> ToolInfo {
    let max = settings.max_list_files;
    let description = format!(
        "List the project's files (not directories) as paths relative to the project root, in \
         sorted order. `prefix` limits the listing to one directory (e.g. `src/net`); `glob` \
         keeps only paths matching it. Returns `files` (at most {max}) and `truncated`, true when \
         more files matched: narrow with `prefix` or `glob`. Skipped: `.git/` and `.bb7/`, files \
         ignored by `.gitignore` or `.git/info/exclude`, and symbolic links; other hidden files \
         such as `.github/` are listed."
    );
    ToolInfo {
        name: "list_files".into(),
        description,
        parameters: json!({
            "type": "object",
            "properties": {
                "prefix": {
                    "type": "string",
                    "description": "A directory relative to the project root (e.g. `src` or `notes/team`; no leading `/`, no `..`) to list instead of the whole project. A file path lists just that file."
                },
                "glob": {
                    "type": "string",
                    "description": "Keep only files whose path relative to the project root matches this glob: `*` and `?` stay within one directory, `**` spans directories, `{a,b}` and `[abc]` are supported (e.g. `src/**/*.rs`, `docs/*.md`). A glob without `/` matches the file name at any depth (`*.md`)."
                }
            },
            "additionalProperties": false
        }),
    }
}

pub fn call(root: &Root, settings: &Settings, args: &str) -> Result<Value, ToolError> {
    let args: Args = super::parse_args("list_files", args)?;
    let out = list(
        root,
        args.prefix.as_deref(),
        args.glob.as_deref(),
        settings.max_list_files,
    )?;
    Ok(json!({ "files": out.files, "truncated": out.truncated }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retrieval::testutil::put;

    #[test]
    fn call_shapes_and_errors() {
        let t = tempfile::tempdir().unwrap();
        for f in ["b.txt", "a/x.rs", "a/y.md"] {
            put(t.path(), f, "");
        }
        let root = Root::at(t.path());
        let s = Settings::default();
        let v = call(&root, &s, "{}").unwrap();
        assert_eq!(
            v,
            json!({"files": ["a/x.rs", "a/y.md", "b.txt"], "truncated": false})
        );
        let v = call(&root, &s, r#"{"prefix":"a","glob":"*.rs"}"#).unwrap();
        assert_eq!(v, json!({"files": ["a/x.rs"], "truncated": false}));
        let s1 = Settings {
            max_list_files: 1,
            ..Settings::default()
        };
        let v = call(&root, &s1, r#"{"prefix":null}"#).unwrap();
        assert_eq!(v, json!({"files": ["a/x.rs"], "truncated": true}));
        for bad in [
            r#"{"prefix":"/a"}"#,
            r#"{"prefix":"../a"}"#,
            r#"{"glob":"[x"}"#,
            r#"{"path":"a"}"#,
        ] {
            let e = call(&root, &s, bad).unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::InvalidArguments, "{bad}");
        }
        assert_eq!(
            call(&root, &s, r#"{"prefix":"zz"}"#).unwrap_err().kind,
            crate::ErrorKind::NotFound
        );
        assert_eq!(describe(&s).name, "list_files");
    }
}
