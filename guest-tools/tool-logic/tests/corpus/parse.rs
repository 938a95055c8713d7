//! The edit corpus format (`edits.txt`), shared by the native runner
//! (guest-tools/tool-logic/tests/edit_corpus.rs) and the sandboxed one (tests/edit_corpus.rs), so
//! both run exactly the same cases.
//!
//! ```text
//! ### case name
//! category: token-guard          (required)
//! expect: refuse                 (default: ok)
//! pass: substring                (ok cases: the pass expected to match, optional)
//! error: text the error contains (refuse cases, repeatable)
//! result: text the result contains (ok cases, repeatable; e.g. its notes)
//! mode: anchored                 (default: search_replace_multi)
//! replace_all: true              (default: false)
//! --- file (crlf, no-eol)          (`absent`: no file at all; `bytes`: `\xNN` escapes are bytes)
//! ...lines...
//! --- old (no-eol)
//! --- new
//! --- changes                    (anchored: the JSON array of changes)
//! --- expected                   (ok cases: the exact bytes written)
//! ```
//!
//! A section holds the lines up to the next `--- ` or `### ` line, each ending in `\n`; `no-eol`
//! drops the final `\n`, `crlf` writes every `\n` as `\r\n`, `cr-marked` turns a literal `\r` at
//! the end of a line into a carriage return (for files that mix line endings). Trailing empty lines
//! of a case's last section are dropped. Lines starting with `#` before the first case, and in a
//! case's header (before its first section), are comments.

#![allow(dead_code)]

/// One corpus case.
#[derive(Debug, Clone, Default)]
pub struct Case {
    pub name: String,
    pub category: String,
    /// Whether the edit must succeed (else it must be refused and the file left alone).
    pub expect_ok: bool,
    pub pass: Option<String>,
    pub errors: Vec<String>,
    /// Texts the success result must contain.
    pub results: Vec<String>,
    /// `search_replace_multi` or `anchored`.
    pub mode: String,
    pub replace_all: bool,
    pub file: String,
    /// The file does not exist before the edit.
    pub absent: bool,
    /// The file's bytes when they are not UTF-8 (`bytes` section).
    pub file_raw: Option<Vec<u8>>,
    pub old: String,
    pub new: String,
    pub changes: Option<String>,
    pub expected: Option<String>,
}

impl Case {
    /// The file's bytes before the edit (`None`: no file).
    pub fn file_bytes(&self) -> Option<Vec<u8>> {
        if self.absent {
            None
        } else {
            Some(
                self.file_raw
                    .clone()
                    .unwrap_or_else(|| self.file.as_bytes().to_vec()),
            )
        }
    }

    /// The `edit_file` arguments for this case, for file `path` with id `file_id`.
    pub fn args(&self, path: &str, file_id: &str) -> String {
        if self.mode == "anchored" {
            let changes: serde_json::Value =
                serde_json::from_str(self.changes.as_deref().unwrap_or("[]"))
                    .unwrap_or_else(|e| panic!("{}: changes are not JSON: {e}", self.name));
            serde_json::json!({"path": path, "file_id": file_id, "changes": changes}).to_string()
        } else {
            serde_json::json!({"edits": [{
                "path": path, "file_id": file_id,
                "old_string": self.old, "new_string": self.new,
                "replace_all": self.replace_all,
            }]})
            .to_string()
        }
    }
}

fn section_text(lines: &[&str], mods: &str, last: bool) -> String {
    let mut lines = lines.to_vec();
    if last {
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
    }
    let mut s: String = lines.iter().map(|l| format!("{l}\n")).collect();
    if mods.contains("no-eol") && s.ends_with('\n') {
        s.pop();
    }
    if mods.contains("crlf") {
        s = s.replace('\n', "\r\n");
    }
    if mods.contains("cr-marked") {
        s = s.replace("\\r\n", "\r\n");
        if let Some(t) = s.strip_suffix("\\r") {
            s = format!("{t}\r");
        }
    }
    s
}

/// `s` with every `\xNN` turned into that byte.
fn unescape_bytes(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.get(i + 1) == Some(&b'x')
            && i + 4 <= b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 2..i + 4], 16)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Parses the corpus; panics with the case name on a malformed case.
pub fn parse(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let all: Vec<&str> = text.split('\n').collect();
    let mut i = 0;
    while i < all.len() && !all[i].starts_with("### ") {
        i += 1;
    }
    while i < all.len() {
        let mut case = Case {
            name: all[i][4..].trim().to_string(),
            expect_ok: true,
            mode: "search_replace_multi".into(),
            ..Case::default()
        };
        i += 1;
        while i < all.len() && !all[i].starts_with("--- ") && !all[i].starts_with("### ") {
            let line = all[i].trim();
            if line.starts_with('#') {
                // a comment in the header (e.g. where the case comes from)
            } else if let Some((k, v)) = line.split_once(':') {
                let v = v.trim().to_string();
                match k.trim() {
                    "category" => case.category = v,
                    "expect" => case.expect_ok = v == "ok",
                    "pass" => case.pass = Some(v),
                    "error" => case.errors.push(v),
                    "result" => case.results.push(v),
                    "mode" => case.mode = v,
                    "replace_all" => case.replace_all = v == "true",
                    other => panic!("{}: unknown key {other}", case.name),
                }
            } else if !line.is_empty() {
                panic!("{}: bad header line {line:?}", case.name);
            }
            i += 1;
        }
        while i < all.len() && all[i].starts_with("--- ") {
            let head = all[i][4..].trim();
            let (name, mods) = match head.split_once(' ') {
                Some((n, m)) => (n, m),
                None => (head, ""),
            };
            i += 1;
            let from = i;
            while i < all.len() && !all[i].starts_with("--- ") && !all[i].starts_with("### ") {
                i += 1;
            }
            let last = i >= all.len() || all[i].starts_with("### ");
            let body = section_text(&all[from..i], mods, last);
            match name {
                "file" if mods.contains("absent") => case.absent = true,
                "file" if mods.contains("bytes") => case.file_raw = Some(unescape_bytes(&body)),
                "file" => case.file = body,
                "old" => case.old = body,
                "new" => case.new = body,
                "changes" => case.changes = Some(body),
                "expected" => case.expected = Some(body),
                other => panic!("{}: unknown section {other}", case.name),
            }
        }
        assert!(!case.category.is_empty(), "{}: no category", case.name);
        assert!(
            !case.expect_ok || case.expected.is_some(),
            "{}: an ok case needs an expected section",
            case.name
        );
        assert!(
            case.expect_ok || !case.errors.is_empty(),
            "{}: a refuse case needs an error line",
            case.name
        );
        cases.push(case);
    }
    cases
}

/// What running one case produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The edit succeeded and wrote the expected bytes (or, for a refuse case, nothing changed and
    /// the error said what it should).
    Pass,
    /// The file changed to something else than expected: a wrong write.
    WrongWrite(String),
    /// Refused where it should have succeeded, or refused with another message.
    Mismatch(String),
}

/// Judges a run: `result` is the tool's result text or error message, `after` the file's bytes
/// after (`None`: there is no file).
pub fn judge(case: &Case, result: Result<String, String>, after: Option<&[u8]>) -> Outcome {
    let before = case.file_bytes();
    let unchanged = after.map(<[u8]>::to_vec) == before;
    let show = |b: Option<&[u8]>| match b {
        Some(b) => format!("{:?}", String::from_utf8_lossy(b)),
        None => "no file".to_string(),
    };
    match (case.expect_ok, result) {
        (true, Ok(text)) => {
            let want = case.expected.as_deref().unwrap_or_default().as_bytes();
            if after != Some(want) {
                Outcome::WrongWrite(format!(
                    "wrote {}, expected {:?}",
                    show(after),
                    String::from_utf8_lossy(want)
                ))
            } else if let Some(missing) = case.results.iter().find(|w| !text.contains(w.as_str())) {
                Outcome::Mismatch(format!("result lacks {missing:?}: {text}"))
            } else {
                Outcome::Pass
            }
        }
        (true, Err(e)) => {
            if !unchanged {
                Outcome::WrongWrite(format!("failed ({e}) but changed the file"))
            } else {
                Outcome::Mismatch(format!("refused: {e}"))
            }
        }
        (false, Ok(_)) => {
            if !unchanged {
                Outcome::WrongWrite(format!("should be refused, wrote {}", show(after)))
            } else {
                Outcome::Mismatch("should be refused, succeeded without a change".into())
            }
        }
        (false, Err(e)) => {
            if !unchanged {
                Outcome::WrongWrite(format!("refused ({e}) but changed the file"))
            } else if let Some(missing) = case.errors.iter().find(|w| !e.contains(w.as_str())) {
                Outcome::Mismatch(format!("error lacks {missing:?}: {e}"))
            } else {
                Outcome::Pass
            }
        }
    }
}

/// Per-category table: cases, correct writes by pass, refusals as expected, wrong writes,
/// mismatches. `rows` are (case, outcome, pass name if the edit succeeded).
pub fn table(rows: &[(&Case, Outcome, Option<String>)]) -> String {
    use std::collections::BTreeMap;
    #[derive(Default)]
    struct Row {
        cases: usize,
        passes: BTreeMap<String, usize>,
        refused: usize,
        wrong: usize,
        mismatch: usize,
    }
    let mut by: BTreeMap<&str, Row> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for (c, o, pass) in rows {
        if !by.contains_key(c.category.as_str()) {
            order.push(&c.category);
        }
        let r = by.entry(&c.category).or_default();
        r.cases += 1;
        match o {
            Outcome::Pass if c.expect_ok => {
                *r.passes
                    .entry(pass.clone().unwrap_or_else(|| "?".into()))
                    .or_default() += 1
            }
            Outcome::Pass => r.refused += 1,
            Outcome::WrongWrite(_) => r.wrong += 1,
            Outcome::Mismatch(_) => r.mismatch += 1,
        }
    }
    let mut out = format!(
        "{:<14} {:>5}  {:<44} {:>7} {:>6} {:>8}\n",
        "category", "cases", "written correctly, by pass", "refused", "wrong", "mismatch"
    );
    let mut tot = (0, 0, 0, 0, 0);
    for cat in order {
        let r = &by[cat];
        let passes = r
            .passes
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let written: usize = r.passes.values().sum();
        out.push_str(&format!(
            "{:<14} {:>5}  {:<44} {:>7} {:>6} {:>8}\n",
            cat,
            r.cases,
            if passes.is_empty() {
                "-".to_string()
            } else {
                passes
            },
            r.refused,
            r.wrong,
            r.mismatch
        ));
        tot.0 += r.cases;
        tot.1 += written;
        tot.2 += r.refused;
        tot.3 += r.wrong;
        tot.4 += r.mismatch;
    }
    out.push_str(&format!(
        "{:<14} {:>5}  {:<44} {:>7} {:>6} {:>8}\n",
        "total",
        tot.0,
        format!("{} written", tot.1),
        tot.2,
        tot.3,
        tot.4
    ));
    out
}
