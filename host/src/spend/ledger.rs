//! The usage ledger: one line per model request, under the global state dir (`~/.bb7/spend/`),
//! shared by every host process of the user (caps are per user, not per project).
//!
//! - `ledger-YYYY-MM.jsonl`: the requests of one UTC month, appended (one `write` of one line,
//!   fdatasynced; the directory too when the append made the file) under the file lock
//!   `spend/lock`, so concurrent hosts never interleave or lose lines.
//! - `days.json`: the totals per UTC day (cost and requests), rewritten atomically under the same
//!   lock after each append, so a cap check reads one small file instead of the ledger. It also
//!   records how many bytes of each month's ledger it covers: after a crash between the append and
//!   the rewrite, the next append finds the ledger longer than that and recounts the month. Being a
//!   summary of the ledger, it is not fsynced when only the totals change (one fsync per request,
//!   the ledger line's): a power cut that takes its last rewrite back, or tears it, leaves a file
//!   that does not match the ledger (or does not parse), and the month is recounted. A change to
//!   the holds is fsynced (file and directory), as holds are not in the ledger.
//! - Holds: a request checked against a day or month cap holds its worst case in `days.json`
//!   ([`Ledger::hold`]: the check and the hold in one step under the lock), so two hosts cannot
//!   both pass a cap with the same money; the hold counts as spent until the request is settled
//!   ([`Ledger::settle`]: the hold dropped and the real usage appended, in one step). A hold left
//!   by a host that died is dropped after [`HOLD_TTL_SECS`].

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use cap_std::fs::{Dir, OpenOptions};
use chrono::{DateTime, Datelike, Utc};
use serde::{Deserialize, Serialize};

use crate::store::StateDir;

/// The ledger's directory under the global state dir.
pub const DIR: &str = "spend";
const DAYS: &str = "days.json";
const LOCK: &str = "lock";
/// How long a hold counts (seconds): longer than any one model request.
pub const HOLD_TTL_SECS: i64 = 3600;

/// Why the ledger could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Neither `$BB7_HOME` nor `$HOME` is set.
    #[error("no state directory (set HOME or BB7_HOME)")]
    NoStateDir,
    /// A file of the ledger could not be read or written.
    #[error("the usage ledger ({path}): {source}")]
    Io {
        /// The file or directory, as shown to the user.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

/// One model request, as the ledger records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When the request finished (RFC 3339, UTC).
    pub time: String,
    /// The model asked.
    pub model: String,
    /// The chat the request was for (empty for requests outside a chat).
    pub chat: String,
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Input tokens read from the provider's cache.
    pub cached_tokens: u64,
    /// The cost the provider reported (US dollars; 0 when it reported none, e.g. a local model).
    pub cost: f64,
    /// The request was cancelled or failed before it finished: the usage is what the provider
    /// reported before that, else bb7's estimate (the prompt and what streamed, counted, at the
    /// model's price when known).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

impl Entry {
    fn when(&self) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(&self.time)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}

/// The totals of one day in `days.json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DayTotal {
    /// Dollars spent.
    pub cost: f64,
    /// Requests made.
    pub requests: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Days {
    /// `YYYY-MM-DD` → totals.
    days: BTreeMap<String, DayTotal>,
    /// Ledger file → the bytes of it counted in `days`.
    covered: BTreeMap<String, u64>,
    /// Requests in flight → the worst case each holds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    held: BTreeMap<String, Held>,
}

/// The worst case a request in flight holds against the caps.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Held {
    /// Its UTC day, `YYYY-MM-DD`.
    day: String,
    /// Dollars.
    cost: f64,
    /// When it was taken (RFC 3339).
    at: String,
}

impl Days {
    /// Spent on the day of `now` and in its month, holds included.
    fn spent_with_holds(&self, now: &DateTime<Utc>) -> (f64, f64) {
        let today = now.format("%Y-%m-%d").to_string();
        let month = now.format("%Y-%m-").to_string();
        let mut day = self.days.get(&today).map(|d| d.cost).unwrap_or(0.0);
        let mut in_month = self
            .days
            .iter()
            .filter(|(k, _)| k.starts_with(&month))
            .fold(0.0, |total, (_, d)| total + d.cost);
        for h in self.held.values() {
            if h.day == today {
                day += h.cost;
            }
            if h.day.starts_with(&month) {
                in_month += h.cost;
            }
        }
        (day, in_month)
    }

    /// Drops the holds taken more than [`HOLD_TTL_SECS`] before `now` (their host died).
    fn expire(&mut self, now: &DateTime<Utc>) {
        self.held.retain(|_, h| {
            DateTime::parse_from_rfc3339(&h.at)
                .is_ok_and(|t| (*now - t.with_timezone(&Utc)).num_seconds() < HOLD_TTL_SECS)
        });
    }
}

/// The ledger at `dir` (normally `~/.bb7/spend`).
pub struct Ledger {
    dir: StateDir,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> LedgerError + '_ {
    move |source| LedgerError::Io {
        path: crate::config::display_path(path),
        source,
    }
}

/// The ledger file of the month of `t`.
fn month_file(t: &DateTime<Utc>) -> String {
    format!("ledger-{:04}-{:02}.jsonl", t.year(), t.month())
}

impl Ledger {
    /// The user's ledger under the global state dir (created when missing).
    pub fn open_global() -> Result<Ledger, LedgerError> {
        let root = crate::paths::state_dir().ok_or(LedgerError::NoStateDir)?;
        Ledger::open(&root.join(DIR))
    }

    /// The ledger in `path` (created when missing).
    pub fn open(path: &Path) -> Result<Ledger, LedgerError> {
        let dir = StateDir::open(path, true).map_err(io_err(path))?;
        Ok(Ledger { dir })
    }

    fn d(&self) -> &Dir {
        self.dir.dir()
    }

    /// Appends `e` and adds it to its day's total, under the lock.
    pub fn append(&self, e: &Entry) -> Result<(), LedgerError> {
        self.settle(None, Some(e))
    }

    /// Checks a request's worst case `worst` against the caps and holds it, in one step under the
    /// lock: `check` gets what was spent on the day of `now` and in its month (every host's holds
    /// included); when it passes, `worst` is held under `id` until [`Ledger::settle`].
    pub fn hold<E>(
        &self,
        now: &DateTime<Utc>,
        id: &str,
        worst: f64,
        check: impl FnOnce(f64, f64) -> Result<(), E>,
    ) -> Result<Result<(), E>, LedgerError> {
        let _lock = self.lock()?;
        let mut days = self.current_days()?;
        days.expire(now);
        let (day, month) = days.spent_with_holds(now);
        if let Err(e) = check(day, month) {
            return Ok(Err(e));
        }
        days.held.insert(
            id.to_string(),
            Held {
                day: now.format("%Y-%m-%d").to_string(),
                cost: worst,
                at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            },
        );
        self.write_days(&days).map(Ok)
    }

    /// Ends a request, in one step under the lock: drops its hold `id` (if any) and appends its
    /// usage `e` (if any) to the ledger and its day's total.
    pub fn settle(&self, id: Option<&str>, e: Option<&Entry>) -> Result<(), LedgerError> {
        let _lock = self.lock()?;
        let mut days = self.current_days()?;
        let dropped = id.is_some_and(|id| days.held.remove(id).is_some());
        if let Some(e) = e {
            self.append_line(&mut days, e)?;
        }
        if dropped {
            self.write_days(&days)
        } else {
            self.write_totals(&days)
        }
    }

    fn lock(&self) -> Result<crate::store::lock::FileLock, LedgerError> {
        crate::store::lock::exclusive(self.d(), LOCK).map_err(io_err(&self.dir.path().join(LOCK)))
    }

    /// Writes `days` durably (a hold was taken or dropped).
    fn write_days(&self, days: &Days) -> Result<(), LedgerError> {
        self.write_days_with(days, true)
    }

    /// Writes `days` whose holds did not change: atomically but not fsynced, as the totals are
    /// recounted from the (fsynced) ledger whenever they do not match it (see the module docs).
    fn write_totals(&self, days: &Days) -> Result<(), LedgerError> {
        self.write_days_with(days, false)
    }

    fn write_days_with(&self, days: &Days, durable: bool) -> Result<(), LedgerError> {
        let path = self.dir.path().join(DAYS);
        let body = serde_json::to_vec(days).map_err(|x| io_err(&path)(x.into()))?;
        if durable {
            crate::store::write_atomic(self.d(), DAYS, &body)
        } else {
            crate::store::write_atomic_scratch(self.d(), DAYS, &body)
        }
        .map_err(io_err(&path))
    }

    /// Appends `e`'s line to its month's file and adds it to `days` (the caller holds the lock).
    fn append_line(&self, days: &mut Days, e: &Entry) -> Result<(), LedgerError> {
        let when = e.when().unwrap_or_else(Utc::now);
        let file = month_file(&when);
        let path = self.dir.path().join(&file);
        let existing = self.d().metadata(&file).ok();
        let len = existing.as_ref().map_or(0, |m| m.len());
        let mut line = Vec::new();
        // A line torn by a crash: end it, so this entry is a line of its own (the torn one is
        // skipped when the month is read).
        if len > 0 && !self.ends_with_newline(&file, len) {
            line.push(b'\n');
        }
        line.extend(serde_json::to_vec(e).map_err(|x| io_err(&path)(x.into()))?);
        line.push(b'\n');
        let mut opts = OpenOptions::new();
        opts.create(true).append(true);
        let mut f = self.d().open_with(&file, &opts).map_err(io_err(&path))?;
        f.write_all(&line).map_err(io_err(&path))?;
        crate::store::sync_data(&f).map_err(io_err(&path))?;
        if existing.is_none() {
            // A new month's file: its name in the directory is made durable too.
            crate::store::sync_dir(self.d());
        }
        let day = days
            .days
            .entry(when.format("%Y-%m-%d").to_string())
            .or_default();
        day.cost += e.cost;
        day.requests += 1;
        *days.covered.entry(file).or_default() = len + line.len() as u64;
        Ok(())
    }

    /// The per-day totals, recounted for every month whose file is not what they cover (a crash
    /// after an append but before its totals were written; a lost or unreadable `days.json`).
    /// The caller holds the lock.
    fn current_days(&self) -> Result<Days, LedgerError> {
        let mut days = self.read_days();
        for f in self.files()? {
            let len = self.d().metadata(&f).map(|m| m.len()).unwrap_or(0);
            if days.covered.get(&f).copied().unwrap_or(0) != len {
                self.recount(&mut days, &f);
            }
        }
        Ok(days)
    }

    /// Whether `file` (of `len` bytes) ends with a newline.
    fn ends_with_newline(&self, file: &str, len: u64) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let mut last = [0u8; 1];
        self.d()
            .open(file)
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(len - 1))?;
                f.read_exact(&mut last)
            })
            .is_ok_and(|()| last[0] == b'\n')
    }

    fn read_days(&self) -> Days {
        crate::store::read_regular(self.d(), DAYS)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Recounts the days of `file`'s month (`ledger-YYYY-MM.jsonl`) from the file itself.
    fn recount(&self, days: &mut Days, file: &str) {
        let prefix = format!(
            "{}-",
            file.trim_start_matches("ledger-")
                .trim_end_matches(".jsonl")
        );
        days.days.retain(|k, _| !k.starts_with(&prefix));
        let bytes = crate::store::read_regular(self.d(), file).unwrap_or_default();
        for e in parse_lines(&bytes) {
            if let Some(t) = e.when() {
                let d = days
                    .days
                    .entry(t.format("%Y-%m-%d").to_string())
                    .or_default();
                d.cost += e.cost;
                d.requests += 1;
            }
        }
        days.covered.insert(file.to_string(), bytes.len() as u64);
    }

    /// What was spent on the UTC day of `now` and in its month (from `days.json`).
    pub fn spent(&self, now: &DateTime<Utc>) -> Result<(f64, f64), LedgerError> {
        let _lock = self.lock()?;
        let days = self.current_days()?;
        let today = now.format("%Y-%m-%d").to_string();
        let month = now.format("%Y-%m-").to_string();
        let day = days.days.get(&today).map(|d| d.cost).unwrap_or(0.0);
        let month = days
            .days
            .iter()
            .filter(|(k, _)| k.starts_with(&month))
            // A fold from 0.0: an empty f64 `sum()` is -0.0, shown as "$-0.00".
            .fold(0.0, |total, (_, d)| total + d.cost);
        Ok((day, month))
    }

    /// The monthly ledger files, oldest first.
    fn files(&self) -> Result<Vec<String>, LedgerError> {
        let mut files: Vec<String> = Vec::new();
        let listing = self.d().entries().map_err(io_err(self.dir.path()))?;
        for ent in listing.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.starts_with("ledger-") && name.ends_with(".jsonl") {
                files.push(name);
            }
        }
        files.sort();
        Ok(files)
    }

    /// Every entry since `since` (all of them when `None`), oldest first; the months before
    /// `since` are not read.
    pub fn entries(&self, since: Option<&DateTime<Utc>>) -> Result<Vec<Entry>, LedgerError> {
        let first = since.map(month_file);
        let mut out = Vec::new();
        for f in self.files()? {
            if first.as_ref().is_some_and(|first| f < *first) {
                continue;
            }
            let bytes = match crate::store::read_regular(self.d(), &f) {
                Ok(b) => b,
                Err(e) => return Err(io_err(&self.dir.path().join(&f))(e)),
            };
            out.extend(
                parse_lines(&bytes)
                    .filter(|e| since.is_none_or(|s| e.when().is_some_and(|t| t >= *s))),
            );
        }
        Ok(out)
    }
}

/// The entries of a ledger file; a line that does not parse (a torn write by a crashed host) is
/// skipped.
fn parse_lines(bytes: &[u8]) -> impl Iterator<Item = Entry> + '_ {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(time: &str, cost: f64) -> Entry {
        Entry {
            time: time.to_string(),
            model: "m".into(),
            chat: "c".into(),
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 0,
            cost,
            partial: false,
        }
    }

    #[test]
    fn totals_per_day_and_month_and_recount_after_a_lost_update() {
        let tmp = tempfile::tempdir().unwrap();
        let l = Ledger::open(tmp.path()).unwrap();
        l.append(&entry("2026-03-01T10:00:00Z", 0.25)).unwrap();
        l.append(&entry("2026-03-02T10:00:00Z", 0.5)).unwrap();
        l.append(&entry("2026-02-28T10:00:00Z", 4.0)).unwrap();
        let now = DateTime::parse_from_rfc3339("2026-03-02T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(l.spent(&now).unwrap(), (0.5, 0.75));
        // A crash between the append and the totals: the totals are recounted at the next append.
        std::fs::remove_file(tmp.path().join(DAYS)).unwrap();
        // A cap check recounts too: a lost days.json does not read as nothing spent.
        assert_eq!(l.spent(&now).unwrap(), (0.5, 0.75));
        std::fs::write(tmp.path().join(DAYS), b"{not json").unwrap();
        assert_eq!(l.spent(&now).unwrap(), (0.5, 0.75));
        l.append(&entry("2026-03-02T11:00:00Z", 1.0)).unwrap();
        assert_eq!(l.spent(&now).unwrap(), (1.5, 1.75));
        let feb = DateTime::parse_from_rfc3339("2026-02-28T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            l.spent(&feb).unwrap(),
            (4.0, 4.0),
            "every month is recounted"
        );
        let empty = Ledger::open(tmp.path().join("empty").as_path()).unwrap();
        let (_, month) = empty.spent(&now).unwrap();
        assert!(month.is_sign_positive(), "nothing spent is +0.0, not -0.0");
        let since = DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(l.entries(Some(&since)).unwrap().len(), 3);
        assert_eq!(l.entries(None).unwrap().len(), 4);
    }

    /// Issue 30: a request's usage costs one fsync, its ledger line's (the directory's too when the
    /// line starts a month's file); `days.json` is a summary recounted from the ledger, so it is
    /// fsynced only when a hold changes. A `days.json` a power cut took back or tore is recounted.
    #[test]
    fn a_request_costs_one_fsync_and_lost_totals_are_recounted() {
        let tmp = tempfile::tempdir().unwrap();
        let l = Ledger::open(tmp.path()).unwrap();
        let fsyncs = crate::store::fsyncs;
        let before = fsyncs();
        l.append(&entry("2026-03-01T10:00:00Z", 0.25)).unwrap();
        assert_eq!(
            fsyncs() - before,
            2,
            "the line and the new file's directory"
        );
        let before = fsyncs();
        l.append(&entry("2026-03-01T11:00:00Z", 0.5)).unwrap();
        assert_eq!(fsyncs() - before, 1, "the line only");
        let now = DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        // Holds are not in the ledger: taking and dropping one is durable (file and directory).
        let before = fsyncs();
        l.hold(&now, "h", 1.0, |_, _| Ok::<(), ()>(()))
            .unwrap()
            .unwrap();
        assert_eq!(fsyncs() - before, 2, "the hold");
        assert_eq!(l.spent(&now).unwrap(), (0.75, 0.75));
        let before = fsyncs();
        l.settle(Some("h"), Some(&entry("2026-03-01T12:00:00Z", 0.125)))
            .unwrap();
        assert_eq!(fsyncs() - before, 3, "the line and the dropped hold");
        assert_eq!(l.spent(&now).unwrap(), (0.875, 0.875));
        // A power cut brought back an older days.json (covering less of the ledger), or tore it.
        std::fs::write(
            tmp.path().join(DAYS),
            br#"{"days":{"2026-03-01":{"cost":0.25,"requests":1}},"covered":{"ledger-2026-03.jsonl":10}}"#,
        )
        .unwrap();
        assert_eq!(l.spent(&now).unwrap(), (0.875, 0.875));
        std::fs::write(tmp.path().join(DAYS), b"").unwrap();
        assert_eq!(l.spent(&now).unwrap(), (0.875, 0.875));
        l.append(&entry("2026-03-01T12:30:00Z", 1.0)).unwrap();
        assert_eq!(l.spent(&now).unwrap(), (1.875, 1.875));
    }

    #[test]
    fn an_entry_after_a_torn_line_is_a_line_of_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let l = Ledger::open(tmp.path()).unwrap();
        l.append(&entry("2026-03-01T10:00:00Z", 0.25)).unwrap();
        // A crash in the middle of the next append.
        let file = tmp.path().join("ledger-2026-03.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(br#"{"time":"2026-03-01T11:00"#).unwrap();
        drop(f);
        l.append(&entry("2026-03-01T12:00:00Z", 0.5)).unwrap();
        let costs: Vec<f64> = l.entries(None).unwrap().iter().map(|e| e.cost).collect();
        assert_eq!(costs, vec![0.25, 0.5]);
        let now = DateTime::parse_from_rfc3339("2026-03-01T13:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(l.spent(&now).unwrap(), (0.75, 0.75));
    }
}
