//! `bb7 audit verify | head | show`: the audit chain (ECOSYSTEM-PROTOCOL.md §7) for a reviewer.
//! Reading commands never append.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use crate::audit::verify::{self, Pinned};
use crate::audit::{Actor, Chain, Entry, PUBKEY_FILE};

/// The `audit` subcommands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Walk the chain offline: every hash, every link, every checkpoint signature. Exits 1 naming
    /// the first record that was altered, removed, inserted or reordered, a checkpoint whose
    /// signature fails, or a head that differs from --head.
    Verify {
        /// The chain to verify (default: ~/.bb7/audit/log.jsonl).
        #[arg(long)]
        log: Option<PathBuf>,
        /// The public key checkpoints must be signed with (default: key.pub beside the log). Pin it
        /// somewhere the user cannot rewrite, and pass that copy here.
        #[arg(long)]
        pubkey: Option<PathBuf>,
        /// A head pinned earlier (`bb7 audit head` prints `SEQ HASH`; the hash alone also works):
        /// it must be a record of the chain, unchanged.
        #[arg(long)]
        head: Option<String>,
    },
    /// Print the chain's last `seq` and `hash` (to pin elsewhere).
    Head {
        /// The chain (default: ~/.bb7/audit/log.jsonl).
        #[arg(long)]
        log: Option<PathBuf>,
    },
    /// List the chain's records for people.
    Show {
        /// Only records of this project.
        #[arg(long)]
        project: Option<PathBuf>,
        /// Only records at or after TIME (RFC 3339, or a date YYYY-MM-DD, UTC).
        #[arg(long)]
        since: Option<String>,
        /// One JSON record per line, as stored.
        #[arg(long)]
        json: bool,
        /// The chain (default: ~/.bb7/audit/log.jsonl).
        #[arg(long)]
        log: Option<PathBuf>,
    },
    /// Development only (tests and benchmarks): append COUNT `test` records through the real writer.
    #[command(hide = true)]
    DevAppend {
        /// How many records.
        #[arg(long)]
        count: u64,
        /// A label stored in each record (`tag`), with the record's index (`n`).
        #[arg(long, default_value = "")]
        tag: String,
        /// The chain (default: ~/.bb7/audit/log.jsonl).
        #[arg(long)]
        log: Option<PathBuf>,
    },
}

/// Runs one `audit` subcommand: exit 0, 1 when verification fails, 2 when the command cannot run.
pub fn run(cmd: AuditCommand) -> ExitCode {
    let result = match cmd {
        AuditCommand::Verify { log, pubkey, head } => return verify_cmd(log, pubkey, head),
        AuditCommand::Head { log } => head_cmd(log),
        AuditCommand::Show {
            project,
            since,
            json,
            log,
        } => show_cmd(log, project, since, json),
        AuditCommand::DevAppend { count, tag, log } => dev_append(log, count, &tag),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bb7: {e}");
            ExitCode::from(2)
        }
    }
}

fn log_path(log: Option<PathBuf>) -> Result<PathBuf, String> {
    log.or_else(crate::paths::audit_log)
        .ok_or_else(|| "no audit chain: neither --log nor $HOME/$BB7_HOME is set".to_string())
}

fn verify_cmd(log: Option<PathBuf>, pubkey: Option<PathBuf>, head: Option<String>) -> ExitCode {
    let run = || -> Result<Result<verify::Report, verify::Failure>, String> {
        let path = log_path(log)?;
        let pinned = head.as_deref().map(Pinned::parse).transpose()?;
        let public = match pubkey {
            Some(p) => Some(verify::read_public(&p)?),
            None => {
                let beside = path.parent().unwrap_or(Path::new(".")).join(PUBKEY_FILE);
                match verify::open(&beside) {
                    Ok(_) => Some(verify::read_public(&beside)?),
                    Err(_) => None,
                }
            }
        };
        let file =
            verify::open(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(verify::verify(file, public.as_ref(), pinned.as_ref()))
    };
    match run() {
        Err(e) => {
            eprintln!("bb7: {e}");
            ExitCode::from(2)
        }
        Ok(Err(failure)) => {
            println!("FAILED: {failure}");
            ExitCode::from(1)
        }
        Ok(Ok(r)) => {
            println!(
                "ok: {} records, head {} {}",
                r.records, r.head.seq, r.head.hash
            );
            match &r.signed_by {
                Some(id) => println!("{} checkpoints signed by key {id}", r.checkpoints),
                None => println!(
                    "signatures NOT checked: no public key (pass --pubkey, or keep {PUBKEY_FILE} beside the log)"
                ),
            }
            if let Some(n) = r.after_pinned {
                println!("the pinned head is in the chain; {n} records follow it");
            }
            if let Some(b) = r.torn_bytes {
                println!(
                    "a torn last line ({b} bytes: a write cut short by a crash) is not part of the chain; the next append cuts it and records that"
                );
            }
            ExitCode::SUCCESS
        }
    }
}

fn head_cmd(log: Option<PathBuf>) -> Result<(), String> {
    let head = verify::read_head(&log_path(log)?)?;
    println!("{} {}", head.seq, head.hash);
    Ok(())
}

fn show_cmd(
    log: Option<PathBuf>,
    project: Option<PathBuf>,
    since: Option<String>,
    json: bool,
) -> Result<(), String> {
    let path = log_path(log)?;
    let since = since.as_deref().map(parse_since).transpose()?;
    let project = project.map(|p| p.canonicalize().unwrap_or(p));
    let file = match verify::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let records =
        verify::records(file).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = String::new();
    for r in records {
        if let Some(p) = &project {
            let under = r["project"]
                .as_str()
                .is_some_and(|rp| Path::new(rp).starts_with(p));
            if !under {
                continue;
            }
        }
        if let Some(t) = &since {
            let at = r["time"]
                .as_str()
                .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok());
            if at.is_none_or(|at| at < *t) {
                continue;
            }
        }
        if json {
            out.push_str(&String::from_utf8_lossy(&crate::audit::canonical::to_vec(
                &r,
            )));
        } else {
            out.push_str(&human(&r));
        }
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}

fn parse_since(s: &str) -> Result<chrono::DateTime<chrono::FixedOffset>, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t);
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().fixed_offset())
        .ok_or_else(|| format!("--since {s:?}: not an RFC 3339 time or a YYYY-MM-DD date"))
}

/// One record on one line: seq, time, kind, actor, what, outcome.
fn human(r: &Value) -> String {
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    let what = match s("kind").as_str() {
        "tool_call" => {
            let c = s("component");
            if c.is_empty() {
                s("tool")
            } else {
                format!("{} ({c})", s("tool"))
            }
        }
        "refusal" => format!("{} {}", s("refused"), s("tool")).trim().to_string(),
        "checkpoint" => format!("key {}", s("key_id")),
        "recovered" => format!("cut {} torn bytes", r["cut_bytes"]),
        _ => s("component"),
    };
    let outcome = if r["ok"] == Value::Bool(false) {
        format!("FAILED: {}", s("error").lines().next().unwrap_or(""))
    } else {
        "ok".to_string()
    };
    let project = s("project");
    format!(
        "{:>6} {} {:<10} {:<6} {}{}  {}",
        r["seq"],
        s("time"),
        s("kind"),
        s("actor"),
        what,
        if project.is_empty() {
            String::new()
        } else {
            format!("  [{project}]")
        },
        outcome
    )
}

fn dev_append(log: Option<PathBuf>, count: u64, tag: &str) -> Result<(), String> {
    let path = log_path(log)?;
    let chain = Chain::shared(&path);
    for n in 0..count {
        chain
            .append(
                Entry::new("test", &Actor::User, None)
                    .set("tag", tag)
                    .set("n", n),
            )
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
