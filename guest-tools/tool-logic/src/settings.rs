//! Host-supplied settings for a describe or call: the `diff_mode` and the retrieval limits.
//!
//! They arrive as key/value strings (the WIT `setting` record) so that new keys never need a new
//! WIT version. Unknown keys are ignored; a known key with a bad value is an error.

use crate::error::ToolError;

/// Which `edit_file` schema the model sees (EDITS.md, "Tools and modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffMode {
    #[default]
    SearchReplaceMulti,
    SearchReplace,
    Anchored,
    /// `write_file` only; the host does not offer `edit_file`.
    Off,
}

impl DiffMode {
    pub fn parse(s: &str) -> Result<Self, ToolError> {
        match s {
            "search_replace_multi" => Ok(DiffMode::SearchReplaceMulti),
            "search_replace" => Ok(DiffMode::SearchReplace),
            "anchored" => Ok(DiffMode::Anchored),
            "off" => Ok(DiffMode::Off),
            _ => Err(ToolError::invalid(
                "diff_mode must be \"search_replace\", \"search_replace_multi\", \"anchored\", or \"off\"",
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DiffMode::SearchReplaceMulti => "search_replace_multi",
            DiffMode::SearchReplace => "search_replace",
            DiffMode::Anchored => "anchored",
            DiffMode::Off => "off",
        }
    }
}

/// All settings a built-in tool reads. Defaults follow EDITS.md and AGENT-PLAN.md §1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `diff-mode`
    pub diff_mode: DiffMode,
    /// `max-search-results-default`: results when the model gives no `limit`.
    pub max_search_results_default: usize,
    /// `max-search-results-cap`: the largest `limit` honoured.
    pub max_search_results_cap: usize,
    /// `max-search-snippet-lines`: lines in one search snippet.
    pub max_search_snippet_lines: usize,
    /// `max-read-bytes-default`: bytes `read_file` returns when the model gives no `max_bytes` (also the cap).
    pub max_read_bytes: usize,
    /// `max-read-lines-default`: lines `read_file` returns when the model gives no `end_line` (also the cap).
    pub max_read_lines: usize,
    /// `max-list-files`: entries `list_files` returns at most.
    pub max_list_files: usize,
    /// `deny`: the secret deny list, one `.gitignore`-style pattern per line (default
    /// [`crate::retrieval::deny::DEFAULT_DENY`]; an empty value denies nothing).
    pub deny: Vec<String>,
    /// `known-file-ids`: `path<TAB>id` lines, the ids of files in the grant as the host staged them
    /// (it hashed them natively, with the CPU's SHA instructions, which a component has not): the
    /// edit tools take these instead of hashing the same bytes again. Empty: hash everything.
    pub known_file_ids: Vec<(String, String)>,
    /// `result-file-ids`: `omit` leaves `file_id` out of the edit tools' results, for a host that
    /// computes them itself (natively) from the files the call left; default `include`.
    pub result_file_ids: bool,
}

impl Settings {
    /// The id the host gave for `path`, if any.
    pub fn known_file_id(&self, path: &str) -> Option<&str> {
        self.known_file_ids
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, id)| id.as_str())
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            diff_mode: DiffMode::default(),
            max_search_results_default: 20,
            max_search_results_cap: 50,
            max_search_snippet_lines: 20,
            max_read_bytes: 65536,
            max_read_lines: 800,
            max_list_files: 1000,
            deny: crate::retrieval::deny::DEFAULT_DENY
                .iter()
                .map(|s| s.to_string())
                .collect(),
            known_file_ids: Vec::new(),
            result_file_ids: true,
        }
    }
}

impl Settings {
    /// Builds settings from key/value pairs, starting from the defaults.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ToolError> {
        let mut s = Settings::default();
        for (key, value) in pairs {
            let num = |v: &str| {
                v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ToolError::invalid(format!(
                        "setting {key} must be a positive integer, got {v:?}"
                    ))
                })
            };
            match key {
                "diff-mode" => s.diff_mode = DiffMode::parse(value)?,
                "max-search-results-default" => s.max_search_results_default = num(value)?,
                "max-search-results-cap" => s.max_search_results_cap = num(value)?,
                "max-search-snippet-lines" => s.max_search_snippet_lines = num(value)?,
                "max-read-bytes-default" => s.max_read_bytes = num(value)?,
                "max-read-lines-default" => s.max_read_lines = num(value)?,
                "max-list-files" => s.max_list_files = num(value)?,
                "deny" => {
                    s.deny = value
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                "known-file-ids" => {
                    s.known_file_ids = value
                        .lines()
                        .filter_map(|l| l.split_once('\t'))
                        .map(|(p, id)| (p.to_string(), id.trim().to_ascii_lowercase()))
                        .collect()
                }
                "result-file-ids" => {
                    s.result_file_ids = match value {
                        "include" => true,
                        "omit" => false,
                        _ => {
                            return Err(ToolError::invalid(
                                "setting result-file-ids must be \"include\" or \"omit\"",
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates() {
        let s = Settings::from_pairs([
            ("diff-mode", "anchored"),
            ("max-search-results-cap", "10"),
            ("x", "y"),
        ])
        .unwrap();
        assert_eq!(s.diff_mode, DiffMode::Anchored);
        assert_eq!(s.max_search_results_cap, 10);
        let e = Settings::from_pairs([("diff-mode", "fuzzy")]).unwrap_err();
        assert!(e.message.starts_with("diff_mode must be"));
        let e = Settings::from_pairs([("max-read-lines-default", "0")])
            .err()
            .expect("0 lines");
        assert_eq!(
            e.message,
            "setting max-read-lines-default must be a positive integer, got \"0\""
        );
        let s = Settings::from_pairs([
            (
                "known-file-ids",
                "a.rs\tABCD1234\nsrc/b c.rs\t0000ffff\nno tab here\n",
            ),
            ("result-file-ids", "omit"),
        ])
        .unwrap();
        assert_eq!(s.known_file_id("a.rs"), Some("abcd1234"));
        assert_eq!(s.known_file_id("src/b c.rs"), Some("0000ffff"));
        assert_eq!(s.known_file_id("no tab here"), None);
        assert!(!s.result_file_ids);
        let e = Settings::from_pairs([("result-file-ids", "maybe")])
            .err()
            .expect("maybe");
        assert!(
            e.message
                .starts_with("setting result-file-ids must be \"include\" or \"omit\""),
            "{}",
            e.message
        );
    }
}
