//! The record every tool call leaves, and the audit chain it goes to.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::grant::Grant;
use crate::audit::{Actor, AuditError, Chain, Entry, sha256_hex};

/// What one call did, for a security reviewer: which component ran, with what access, for how long,
/// and how it ended.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallRecord {
    /// When the call started, RFC 3339 UTC.
    pub started: String,
    /// The name of the tool called.
    pub tool: String,
    /// Hex sha256 of the component that ran.
    pub component_sha256: String,
    /// The contract version the component speaks, e.g. `0.1.0`.
    pub wit_version: String,
    /// The third-party component's name (built-in tools: absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// Exactly the directories the call received.
    pub grants: Vec<Grant>,
    /// The network access the call had: `"none"`, or the granted `host:port` pairs.
    pub network: serde_json::Value,
    /// The environment variables the call could read: `"none"`, or their names.
    pub env: serde_json::Value,
    /// How long the call took, in milliseconds of wall time (loading the component excluded).
    pub duration_ms: f64,
    /// How long compiling the component (or loading it from the cache) took before its first call
    /// in this process; 0 for later calls.
    pub compile_ms: f64,
    /// `ok`, or the error kind (`conflict`, `time-limit`, `memory-limit`, `trap`, …).
    pub outcome: String,
    /// The error message, when the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why the sandbox refused what a call asked for, decided by the host (never read from a message a
/// component wrote).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A built-in tool was refused a path the deny list hides: `pattern` is the deny-list pattern
    /// that hides it (checked by the host against the call's settings and arguments).
    DenyList {
        /// The pattern.
        pattern: String,
    },
}

/// The deny-list pattern that hides a path a built-in tool call names (`file_path`, `prefix` or
/// `path` in `arguments`), under the call's `settings` (their `deny`, else the default list).
pub fn deny_list_refusal(settings: &[(String, String)], arguments: &str) -> Option<Refusal> {
    use bb7_tool_logic::retrieval::deny::DenyList;
    let s = bb7_tool_logic::settings::Settings::from_pairs(
        settings.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
    .ok()?;
    let deny = DenyList::new(s.deny.iter().map(String::as_str));
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    ["file_path", "prefix", "path"].iter().find_map(|field| {
        let raw = args.get(*field)?.as_str()?;
        let rel = bb7_tool_logic::paths::normalize(field, raw, true).ok()?;
        let pattern = deny
            .check_path(&rel, false)
            .or_else(|| deny.check_path(&rel, true))?;
        Some(Refusal::DenyList { pattern })
    })
}

/// A granted list as the record writes it: `"none"` when empty, else the entries.
pub fn granted_list(entries: &[String]) -> serde_json::Value {
    if entries.is_empty() {
        serde_json::Value::from("none")
    } else {
        serde_json::Value::from(entries.to_vec())
    }
}

/// The audit chain (`crate::audit`, ECOSYSTEM-PROTOCOL.md §7) as the sandbox writes it: every call
/// becomes one `tool_call` record carrying the [`CallRecord`]'s fields, and a call refused because it
/// asked for a path the deny list hides is also a `refusal` record.
#[derive(Debug, Clone)]
pub struct AuditLog {
    chain: Arc<Chain>,
    actor: Actor,
}

impl AuditLog {
    /// The chain at `path` (normally `~/.bb7/audit/log.jsonl`); its directory, file and signing key
    /// are made on the first append. Records name the user as their actor unless [`AuditLog::actor`]
    /// says otherwise.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        AuditLog {
            chain: Chain::shared(&path.into()),
            actor: Actor::User,
        }
    }

    /// The same log, with `actor` named in its records (agent mode: [`Actor::Model`]).
    pub fn actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// The chain file's path.
    pub fn path(&self) -> &Path {
        self.chain.path()
    }

    /// Appends a `refusal` record: `what` (`socket`, `call`, …) was denied with `reason`. A chain
    /// that cannot be written is reported (see [`crate::audit::take_trouble`]), never turned into a
    /// failure of what it records.
    pub fn refusal(&self, project: Option<&Path>, what: &str, reason: &str) {
        let entry = Entry::new("refusal", &self.actor, project)
            .set("refused", what)
            .failed(reason);
        if let Err(e) = self.chain.append(entry) {
            tracing::warn!("{e}");
        }
    }

    /// Appends `record` (without the hashes of the arguments and the result).
    pub fn append(&self, record: &CallRecord) -> Result<(), AuditError> {
        self.append_call(record, None, None, None)
    }

    /// Appends `record` as a `tool_call` record, with the sha256 of the call's `arguments` and of
    /// its JSON `result` (when it succeeded); a `refusal` record follows when the host refused
    /// what the call asked for.
    pub fn append_call(
        &self,
        record: &CallRecord,
        arguments: Option<&str>,
        result: Option<&serde_json::Value>,
        refusal: Option<&Refusal>,
    ) -> Result<(), AuditError> {
        let project = record.grants.first().map(|g| g.path.clone());
        let mut entry = Entry::new("tool_call", &self.actor, project.as_deref());
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(record) {
            for (k, v) in fields {
                entry = entry.set(&k, v);
            }
        }
        let entry = entry
            .set("ok", record.outcome == "ok")
            .set_opt("args_sha256", arguments.map(|a| sha256_hex(a.as_bytes())))
            .set_opt(
                "result_sha256",
                result.map(|r| sha256_hex(r.to_string().as_bytes())),
            );
        self.chain.append(entry)?;
        if let Some(Refusal::DenyList { pattern }) = refusal {
            let refusal = Entry::new("refusal", &self.actor, project.as_deref())
                .set("refused", "deny_list")
                .set("pattern", pattern.clone())
                .set("tool", record.tool.clone())
                .set_opt("component", record.component.clone())
                .failed(record.error.clone().unwrap_or_default());
            self.chain.append(refusal)?;
        }
        Ok(())
    }
}

/// How many distinct refusals of one kind one call records one by one; past them the rest are
/// counted and recorded as one `and N more` record when the call ends (a component looping on
/// denied requests must not flood the chain, and must not hide a second target behind its first).
pub const MAX_REFUSALS_PER_CALL: usize = 16;

/// The refusals of one kind (`socket`, `http`) one call meets: each distinct target recorded once,
/// with the call's project, up to [`MAX_REFUSALS_PER_CALL`]; the others counted, and recorded as one
/// record when this is dropped (the call's end).
#[derive(Debug)]
pub struct CallRefusals {
    log: AuditLog,
    project: Option<PathBuf>,
    refused: &'static str,
    seen: std::collections::HashSet<String>,
    more: usize,
}

impl CallRefusals {
    /// Refusals of kind `refused` recorded in `log` for a call in `project` (when known).
    pub fn new(log: AuditLog, project: Option<&Path>, refused: &'static str) -> Self {
        CallRefusals {
            log,
            project: project.map(Path::to_path_buf),
            refused,
            seen: std::collections::HashSet::new(),
            more: 0,
        }
    }

    /// Records that `target` was refused with `reason`, the first time `target` is: once per
    /// distinct target, up to [`MAX_REFUSALS_PER_CALL`], then only counted.
    pub fn record(&mut self, target: &str, reason: &str) {
        if self.seen.contains(target) {
            return;
        }
        if self.seen.len() >= MAX_REFUSALS_PER_CALL {
            self.more += 1;
            return;
        }
        self.seen.insert(target.to_string());
        self.log
            .refusal(self.project.as_deref(), self.refused, reason);
    }
}

impl Drop for CallRefusals {
    fn drop(&mut self) {
        if self.more > 0 {
            self.log.refusal(
                self.project.as_deref(),
                self.refused,
                &format!(
                    "and {} more refused in this call, not recorded one by one",
                    self.more
                ),
            );
        }
    }
}

/// The socket use of one call whose component imports `wasi:sockets` but holds no network grant:
/// its WASI context refuses every socket and every name lookup (`state.rs`), and each distinct
/// attempt is a `refusal` record in the chain ([`CallRefusals`]), like a connection refused outside
/// a network grant.
#[derive(Debug)]
pub struct SocketDenials(CallRefusals);

impl SocketDenials {
    /// Denials recorded in `log` for a call in `project` (when known).
    pub fn new(log: AuditLog, project: Option<&Path>) -> Self {
        SocketDenials(CallRefusals::new(log, project, "socket"))
    }

    /// Records that the call tried `what` (`create-tcp-socket ipv4`, `resolve-addresses x`), once
    /// per distinct `what`.
    pub fn record(&mut self, what: &str) {
        self.0.record(
            what,
            &format!("{what}: not granted (the component has no network grant)"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_distinct_refusal_is_recorded_once_with_the_project_then_counted() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::new(dir.path().join("audit/log.jsonl"));
        let project = dir.path().join("proj");
        {
            let mut r = CallRefusals::new(log.clone(), Some(&project), "http");
            r.record("http://a", "GET http://a: origin not granted");
            r.record("http://a", "GET http://a: origin not granted");
            r.record("http://b", "GET http://b: origin not granted");
            for i in 0..20 {
                r.record(&format!("http://c{i}"), "not granted");
            }
        }
        let text = std::fs::read_to_string(log.path()).unwrap();
        let records: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), MAX_REFUSALS_PER_CALL + 1, "{text}");
        assert!(records.iter().all(|r| r["kind"] == "refusal"
            && r["refused"] == "http"
            && r["project"] == project.to_string_lossy().as_ref()));
        assert_eq!(records[0]["error"], "GET http://a: origin not granted");
        assert_eq!(records[1]["error"], "GET http://b: origin not granted");
        assert_eq!(
            records[MAX_REFUSALS_PER_CALL]["error"],
            "and 6 more refused in this call, not recorded one by one"
        );
    }
}
