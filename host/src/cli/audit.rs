//! `bb7 audit verify | head | show`: the audit chain (ECOSYSTEM-PROTOCOL.md §7) for a reviewer.
//! Reading commands never append.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use crate::audit::verify::{self, Pinned, PinnedError};
use crate::audit::{AuditError, PUBKEY_FILE};

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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bb7: {e}");
            ExitCode::from(2)
        }
    }
}

/// Why an `audit` command cannot run (exit 2).
#[derive(Debug, thiserror::Error)]
enum CmdError {
    /// Neither `--log` nor a state directory.
    #[error("no audit chain: neither --log nor $HOME/$BB7_HOME is set")]
    NoChain,
    /// A file cannot be read, or is not what it should be.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// `--head` is not a head.
    #[error(transparent)]
    Pinned(#[from] PinnedError),
    /// `--since` is not a time.
    #[error("--since {0:?}: not an RFC 3339 time or a YYYY-MM-DD date")]
    Since(String),
}

fn log_path(log: Option<PathBuf>) -> Result<PathBuf, CmdError> {
    log.or_else(crate::paths::audit_log)
        .ok_or(CmdError::NoChain)
}

fn read_error(path: &Path, source: std::io::Error) -> CmdError {
    CmdError::Audit(AuditError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn verify_cmd(log: Option<PathBuf>, pubkey: Option<PathBuf>, head: Option<String>) -> ExitCode {
    let run = || -> Result<Result<verify::Report, verify::Failure>, CmdError> {
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
        let file = verify::open(&path).map_err(|e| read_error(&path, e))?;
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

fn head_cmd(log: Option<PathBuf>) -> Result<(), CmdError> {
    let head = verify::read_head(&log_path(log)?)?;
    println!("{} {}", head.seq, head.hash);
    Ok(())
}

fn show_cmd(
    log: Option<PathBuf>,
    project: Option<PathBuf>,
    since: Option<String>,
    json: bool,
) -> Result<(), CmdError> {
    let path = log_path(log)?;
    let since = since.as_deref().map(parse_since).transpose()?;
    let project = project.map(|p| p.canonicalize().unwrap_or(p));
    let file = match verify::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(read_error(&path, e)),
    };
    let records = verify::records(file).map_err(|e| read_error(&path, e))?;
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

fn parse_since(s: &str) -> Result<chrono::DateTime<chrono::FixedOffset>, CmdError> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t);
    }
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc().fixed_offset())
        .ok_or_else(|| CmdError::Since(s.to_string()))
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
