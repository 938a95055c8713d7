//! The `agent` object of config.json (AGENT-PROTOCOL.md §1): the tool-call budget, the retrieval
//! limits handed to the retrieval components, and the secret deny list.

use serde_json::Value;

/// Agent-mode settings, with the defaults of AGENT-PROTOCOL.md §1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// Tool calls one reply may make, every call counted (`max_tool_calls_per_job`).
    pub max_tool_calls_per_job: usize,
    /// Results `search_project` returns when the model gives no `limit`
    /// (`max_search_results_default`).
    pub max_search_results_default: usize,
    /// The largest `limit` `search_project` honours (`max_search_results_cap`).
    pub max_search_results_cap: usize,
    /// Lines in one `search_project` snippet (`max_search_snippet_lines`).
    pub max_search_snippet_lines: usize,
    /// The cap and the default of `read_file`'s `max_bytes` (`max_read_bytes_default`).
    pub max_read_bytes_default: usize,
    /// The most lines one `read_file` returns (`max_read_lines_default`).
    pub max_read_lines_default: usize,
    /// `.gitignore`-style patterns of files retrieval never shows (`deny`).
    pub deny: Vec<String>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_tool_calls_per_job: 12,
            max_search_results_default: 20,
            max_search_results_cap: 50,
            max_search_snippet_lines: 20,
            max_read_bytes_default: 65536,
            max_read_lines_default: 800,
            deny: bb7_tool_logic::retrieval::deny::DEFAULT_DENY
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// The numeric keys, their largest accepted value, and where they go.
const LIMITS: [(&str, usize); 6] = [
    ("max_tool_calls_per_job", 200),
    ("max_search_results_default", 1000),
    ("max_search_results_cap", 1000),
    ("max_search_snippet_lines", 1000),
    ("max_read_bytes_default", 4 << 20),
    ("max_read_lines_default", 100_000),
];

impl AgentConfig {
    /// Parses the `agent` value of config.json; every problem names its key (`agent.…`).
    pub fn parse(v: &Value) -> Result<AgentConfig, Vec<String>> {
        let mut c = AgentConfig::default();
        let Value::Object(map) = v else {
            return Err(vec!["agent must be an object".to_string()]);
        };
        let mut problems = Vec::new();
        for (key, max) in LIMITS {
            match map.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Number(n))
                    if n.as_u64().is_some_and(|n| n >= 1 && n as usize <= max) =>
                {
                    let n = n.as_u64().unwrap_or(1) as usize;
                    *c.limit_mut(key) = n;
                }
                Some(_) => problems.push(format!(
                    "agent.{key} must be an integer between 1 and {max}"
                )),
            }
        }
        match map.get("deny") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) if items.iter().all(|i| i.is_string()) => {
                c.deny = items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty() && !s.contains('\n'))
                    .collect();
            }
            Some(_) => problems.push("agent.deny must be an array of strings".to_string()),
        }
        for key in map.keys() {
            if key != "deny" && !LIMITS.iter().any(|(k, _)| k == key) {
                problems.push(format!("agent.{key} is not a known setting"));
            }
        }
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(problems)
        }
    }

    fn limit_mut(&mut self, key: &str) -> &mut usize {
        match key {
            "max_tool_calls_per_job" => &mut self.max_tool_calls_per_job,
            "max_search_results_default" => &mut self.max_search_results_default,
            "max_search_results_cap" => &mut self.max_search_results_cap,
            "max_search_snippet_lines" => &mut self.max_search_snippet_lines,
            "max_read_bytes_default" => &mut self.max_read_bytes_default,
            _ => &mut self.max_read_lines_default,
        }
    }

    /// The settings handed to the retrieval components.
    pub fn tool_settings(&self) -> Vec<(String, String)> {
        let n = |k: &str, v: usize| (k.to_string(), v.to_string());
        vec![
            n(
                "max-search-results-default",
                self.max_search_results_default,
            ),
            n("max-search-results-cap", self.max_search_results_cap),
            n("max-search-snippet-lines", self.max_search_snippet_lines),
            n("max-read-bytes-default", self.max_read_bytes_default),
            n("max-read-lines-default", self.max_read_lines_default),
            ("deny".to_string(), self.deny.join("\n")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_overrides() {
        let c = AgentConfig::parse(&json!({})).unwrap();
        assert_eq!(c, AgentConfig::default());
        assert_eq!(c.max_tool_calls_per_job, 12);
        assert!(c.deny.contains(&".env".to_string()));
        let c = AgentConfig::parse(&json!({"max_tool_calls_per_job": 3, "deny": ["*.secret"]}))
            .unwrap();
        assert_eq!(c.max_tool_calls_per_job, 3);
        assert_eq!(c.deny, vec!["*.secret"]);
        let e = AgentConfig::parse(&json!({"max_tool_calls_per_job": 0, "deny": "x", "nope": 1}))
            .unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].contains("agent.max_tool_calls_per_job"));
    }
}
