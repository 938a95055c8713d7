//! Per-hunk review of a chat's output against the local file, checkpointed writes, rollback and the
//! stale-context check (AGENT-PROTOCOL.md §2–3). Protocol handlers parse requests, call these and
//! shape the replies; everything here works on handles (the project root, the chat directory,
//! `.bb7/checkpoints/`).

use std::collections::{BTreeSet, HashMap};
use std::io;

use cap_std::fs::Dir;
use serde::Serialize;

use super::checkpoints::{self, Change, CheckpointError, Checkpoints, Meta, Record};
use super::hunks::{self, Hunk, Lines, TextError};
use super::model::ContextFile;
use super::{paths, projfs, snapshots};

/// Why a hunk review, checkpointed write, diff3 or rollback failed.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The file is not text, so it has no hunks.
    #[error(transparent)]
    Text(#[from] TextError),
    /// A checkpoint cannot be opened, read or written.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The chat has no output for the file (by path).
    #[error("No output: {0} has no output to review")]
    NoOutput(String),
    /// The local file (by path) no longer matches the `base_hash` sent.
    #[error(
        "Conflict: {0} changed since its hunks were computed (base_hash differs); nothing was written, get the hunks again"
    )]
    Conflict(String),
    /// The local file (by path) changed since the output was made from its snapshot, and the hunks
    /// were not carried onto it yet: applying them would undo that change.
    #[error(
        "Conflict: {0} changed since the model's output was made; nothing was written, get the hunks again (they are carried onto the change)"
    )]
    NotRebased(String),
    /// The local file (by path) changed since the output was made, on lines the output changes too
    /// (or it was removed): the hunks cannot be carried onto it.
    #[error(
        "Conflict: {0} {1} since the model's output was made, where the output changes it too; nothing was written. Merge it by hand (the side-by-side diff with the local file) or reject the output"
    )]
    Overlap(String, &'static str),
    /// A requested hunk id that names no hunk of the file or checkpoint.
    #[error("Unknown hunk: {0} (get the hunks again)")]
    UnknownHunk(String),
    /// A project file (by path) cannot be read.
    #[error("Cannot read {0}: {1}")]
    Read(String, std::io::Error),
    /// The chat's output file (by its path in the chat directory) cannot be written
    /// or removed.
    #[error("Cannot write {0}: {1}")]
    Write(String, std::io::Error),
    /// A rollback `mode` other than `hard_all` or `scoped_selected`.
    #[error("Invalid field: mode (expected \"hard_all\" or \"scoped_selected\")")]
    BadMode,
    /// A `scoped_selected` rollback without `hunk_ids`.
    #[error("Missing required field: hunk_ids (scoped_selected names the hunks to revert)")]
    NoHunkIds,
}

/// One hunk as `get_hunks` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct HunkView {
    /// The hunk's id (the same for the same content).
    pub id: String,
    /// Where the old lines start, as [`Hunk::start_1based`] counts.
    pub old_start: usize,
    /// How many old lines the hunk replaces.
    pub old_lines: usize,
    /// Where the new lines start, counted as `old_start` is.
    pub new_start: usize,
    /// How many new lines replace them.
    pub new_lines: usize,
    /// The hunk as a unified diff without context.
    pub patch: String,
    /// Whether it is over the size limits even after splitting (left out of the JSON
    /// when false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub oversized: bool,
}

fn view(h: &Hunk, old: &Lines, new: &Lines) -> HunkView {
    HunkView {
        id: h.id.clone(),
        old_start: Hunk::start_1based(&h.old),
        old_lines: h.old.len(),
        new_start: Hunk::start_1based(&h.new),
        new_lines: h.new.len(),
        patch: h.patch(old, new),
        oversized: h.oversized,
    }
}

/// The hunks of one file.
#[derive(Debug, Serialize)]
pub struct FileHunks {
    /// The file, relative to the project root.
    pub path: String,
    /// `sha256:` + hex of the local file (of no bytes when it is absent); `apply_hunks`
    /// must send it back.
    pub base_hash: String,
    /// The hunks between the local file and the output, in file order.
    pub hunks: Vec<HunkView>,
    /// The files were too large to diff: `hunks` is one whole-file hunk whose patch is its
    /// header only (left out of the JSON when false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub oversized: bool,
}

/// The local file (`None`: absent) and the chat's output for `path`.
fn local_and_output(
    project: &Dir,
    chat_dir: &Dir,
    path: &str,
) -> Result<(Option<Vec<u8>>, Vec<u8>), ReviewError> {
    let local = projfs::read(project, path).map_err(|e| ReviewError::Read(path.to_string(), e))?;
    let out = snapshots::read_output(chat_dir, path)
        .ok_or_else(|| ReviewError::NoOutput(path.to_string()))?;
    Ok((local, out))
}

/// `get_hunks`: the hunks between the local file and the chat's output.
pub fn get_hunks(project: &Dir, chat_dir: &Dir, path: &str) -> Result<FileHunks, ReviewError> {
    let (local, out) = local_and_output(project, chat_dir, path)?;
    let local = local.unwrap_or_default();
    let (lt, ot) = (hunks::as_text(path, &local)?, hunks::as_text(path, &out)?);
    let (ll, ol) = (Lines::parse(lt), Lines::parse(ot));
    let hs = hunks::hunks(path, &ll, &ol);
    Ok(FileHunks {
        path: path.to_string(),
        base_hash: hunks::hash(&local),
        hunks: hs.iter().map(|h| view(h, &ll, &ol)).collect(),
        oversized: hs.iter().any(|h| h.whole),
    })
}

/// The output of a file carried onto the local file, which changed since the output was made.
pub struct Rebased {
    /// The model's changes applied to the local file: the new output.
    pub output: Vec<u8>,
    /// The local file it was carried onto: the output's new base (the snapshot).
    pub local: Vec<u8>,
}

/// Whether the local file `local` (`None`: absent) is the output's `base` (ignoring CRLF vs LF).
fn is_base(local: &Option<Vec<u8>>, base: &[u8]) -> bool {
    local
        .as_deref()
        .is_some_and(|l| snapshots::same_text(l, base))
}

/// When the local file changed since the output of `path` was made from `base` (its context
/// snapshot), carries the model's changes (`base` → output) onto the local file, so that the hunks
/// between the local file and the output hold only the model's changes, never the undoing of an
/// edit made since. `Ok(None)`: the local file is still the base, nothing to carry. A change of
/// the model on lines edited since (or a local file removed since) is [`ReviewError::Overlap`].
pub fn rebase(
    project: &Dir,
    chat_dir: &Dir,
    path: &str,
    base: &[u8],
) -> Result<Option<Rebased>, ReviewError> {
    let (local, out) = local_and_output(project, chat_dir, path)?;
    // Still the base, or already the output (taken by hand): nothing to carry.
    if is_base(&local, base) || is_base(&local, &out) {
        return Ok(None);
    }
    let Some(local) = local else {
        return Err(ReviewError::Overlap(path.to_string(), "was removed"));
    };
    let (bt, lt, ot) = (
        hunks::as_text(path, base)?,
        hunks::as_text(path, &local)?,
        hunks::as_text(path, &out)?,
    );
    let (lb, ll, lo) = (Lines::parse(bt), Lines::parse(lt), Lines::parse(ot));
    // The model's changes as hunks from the output back to the base: "reverting" them onto the
    // local file puts the output's lines where the local file still has the base's. A change the
    // local file already has (made the same way since, e.g. an apply whose chat record was cut
    // short) is left out rather than taken for a clash.
    let back = hunks::hunks(path, &lo, &lb);
    let since = hunks::hunks(path, &lb, &ll);
    let carried: Vec<&Hunk> = back
        .iter()
        .filter(|h| {
            !since
                .iter()
                .any(|u| u.old == h.new && ll.lines[u.new.clone()] == lo.lines[h.old.clone()])
        })
        .collect();
    let (output, clashes) = hunks::revert_onto(&lo, &lb, &ll, &carried);
    if !clashes.is_empty() {
        return Err(ReviewError::Overlap(path.to_string(), "changed"));
    }
    Ok(Some(Rebased { output, local }))
}

/// `hunks` picked by `ids`, in file order; an unknown id is an error.
fn pick<'a>(hs: &'a [Hunk], ids: &[String]) -> Result<Vec<&'a Hunk>, ReviewError> {
    let by_id: HashMap<&str, usize> = hs
        .iter()
        .enumerate()
        .map(|(i, h)| (h.id.as_str(), i))
        .collect();
    let mut idx = BTreeSet::new();
    for id in ids {
        idx.insert(
            *by_id
                .get(id.as_str())
                .ok_or_else(|| ReviewError::UnknownHunk(id.clone()))?,
        );
    }
    Ok(idx.into_iter().map(|i| &hs[i]).collect())
}

/// What `apply_hunks` did.
pub struct Applied {
    /// The local file now.
    pub content: Vec<u8>,
    /// The checkpoint recorded (none when the chosen hunks changed nothing).
    pub checkpoint: Option<Record>,
    /// Hunks left between the local file and the output.
    pub remaining: usize,
}

/// `apply_hunks`: writes the local file with just `ids` applied, after checking `base_hash`, and
/// that the local file is still the output's `base` (its context snapshot, when it has one): were
/// it not, the hunks would undo what changed since ([`rebase`] first, as `get_hunks` does).
#[allow(clippy::too_many_arguments)]
pub fn apply_hunks(
    project: &Dir,
    chat_dir: &Dir,
    cps: &Checkpoints,
    chat_id: &str,
    path: &str,
    ids: &[String],
    base_hash: &str,
    base: Option<&[u8]>,
) -> Result<Applied, ReviewError> {
    let (local, out) = local_and_output(project, chat_dir, path)?;
    let local_bytes = local.clone().unwrap_or_default();
    if hunks::hash(&local_bytes) != base_hash {
        return Err(ReviewError::Conflict(path.to_string()));
    }
    if base.is_some_and(|b| !is_base(&local, b)) {
        return Err(ReviewError::NotRebased(path.to_string()));
    }
    let (lt, ot) = (
        hunks::as_text(path, &local_bytes)?,
        hunks::as_text(path, &out)?,
    );
    let (ll, ol) = (Lines::parse(lt), Lines::parse(ot));
    let hs = hunks::hunks(path, &ll, &ol);
    let chosen = pick(&hs, ids)?;
    let content = hunks::apply(&ll, &ol, &chosen);
    // Applying some hunks leaves exactly the others between the file and the output.
    let remaining = hs.len() - chosen.len();
    let checkpoint = checkpoints::apply_changes(
        project,
        cps,
        Meta {
            chat_id: Some(chat_id),
            kind: "apply_hunks",
            rollback_of: None,
        },
        vec![Change {
            path: path.to_string(),
            before: local,
            after: Some(content.clone()),
        }],
    )?;
    Ok(Applied {
        content,
        checkpoint,
        remaining,
    })
}

/// What `reject_hunks` did.
pub struct Rejected {
    /// The output now (`None`: nothing is left to apply and the output was removed).
    pub output: Option<Vec<u8>>,
    /// Hunks left between the local file and the output (0 when it was removed).
    pub remaining: usize,
}

/// `reject_hunks`: reverts `ids` in the chat's output (the model's version loses them). When no
/// hunk is left the output is removed.
pub fn reject_hunks(
    project: &Dir,
    chat_dir: &Dir,
    path: &str,
    ids: &[String],
) -> Result<Rejected, ReviewError> {
    let (local, out) = local_and_output(project, chat_dir, path)?;
    let local = local.unwrap_or_default();
    let (lt, ot) = (hunks::as_text(path, &local)?, hunks::as_text(path, &out)?);
    let (ll, ol) = (Lines::parse(lt), Lines::parse(ot));
    let hs = hunks::hunks(path, &ll, &ol);
    let chosen = pick(&hs, ids)?;
    let new_out = hunks::revert(&ll, &ol, &chosen);
    let remaining = hs.len() - chosen.len();
    let rel = paths::output_rel(path);
    if remaining == 0 {
        crate::store::remove_file_if_exists(chat_dir, &rel)
            .map_err(|e| ReviewError::Write(rel.clone(), e))?;
        return Ok(Rejected {
            output: None,
            remaining,
        });
    }
    crate::store::write_atomic(chat_dir, &rel, &new_out)
        .map_err(|e| ReviewError::Write(rel.clone(), e))?;
    Ok(Rejected {
        output: Some(new_out),
        remaining,
    })
}

/// A checkpointed write of whole files (`apply_file`, `apply_file_as`): the content before each
/// write is read (without following links) and kept.
pub fn checkpointed_write(
    project: &Dir,
    cps: &Checkpoints,
    chat_id: Option<&str>,
    kind: &str,
    files: &[(&str, &[u8])],
) -> Result<Option<Record>, ReviewError> {
    let mut changes = Vec::new();
    for (path, content) in files {
        let before =
            projfs::read(project, path).map_err(|e| ReviewError::Read(path.to_string(), e))?;
        changes.push(Change {
            path: path.to_string(),
            before,
            after: Some(content.to_vec()),
        });
    }
    Ok(checkpoints::apply_changes(
        project,
        cps,
        Meta {
            chat_id,
            kind,
            rollback_of: None,
        },
        changes,
    )?)
}

/// `checkpoint_diff3`: the content before the apply, the file now, what was applied, and the hunks
/// of the apply (their ids are what `scoped_selected` takes).
#[derive(Debug, Serialize)]
pub struct Diff3 {
    /// The file, relative to the project root.
    pub path: String,
    /// Its content before the apply (lossy UTF-8; empty when it did not exist).
    pub base: String,
    /// Its content now (lossy UTF-8; empty when it does not exist).
    pub current: String,
    /// The content the apply wrote (lossy UTF-8; empty when the apply removed it).
    pub proposed: String,
    /// Whether the file existed before the apply.
    pub base_exists: bool,
    /// Whether the file exists now.
    pub current_exists: bool,
    /// Whether the apply left the file in place (false when it removed it).
    pub proposed_exists: bool,
    /// The hunks from `base` to `proposed`; empty when either side is not text.
    pub hunks: Vec<HunkView>,
}

fn lossy(b: &Option<Vec<u8>>) -> String {
    String::from_utf8_lossy(b.as_deref().unwrap_or_default()).into_owned()
}

/// The hunks of one file of a checkpoint (before → after), if both sides are text.
fn checkpoint_hunks(
    path: &str,
    before: &Option<Vec<u8>>,
    after: &Option<Vec<u8>>,
) -> Option<Vec<HunkView>> {
    let b = hunks::as_text(path, before.as_deref().unwrap_or_default()).ok()?;
    let a = hunks::as_text(path, after.as_deref().unwrap_or_default()).ok()?;
    let (lb, la) = (Lines::parse(b), Lines::parse(a));
    Some(
        hunks::hunks(path, &lb, &la)
            .iter()
            .map(|h| view(h, &lb, &la))
            .collect(),
    )
}

/// `checkpoint_diff3`: file `path` of checkpoint `id` before the apply, now, and as
/// applied.
pub fn diff3(project: &Dir, cps: &Checkpoints, id: &str, path: &str) -> Result<Diff3, ReviewError> {
    let rec = cps.load(project, id)?;
    let f = rec
        .files
        .iter()
        .find(|f| f.path == path)
        .ok_or_else(|| CheckpointError::NoFile(id.to_string(), path.to_string()))?;
    let before = cps.content(&rec, f, false)?;
    let after = cps.content(&rec, f, true)?;
    let current =
        projfs::read(project, path).map_err(|e| ReviewError::Read(path.to_string(), e))?;
    Ok(Diff3 {
        path: path.to_string(),
        base: lossy(&before),
        current: lossy(&current),
        proposed: lossy(&after),
        base_exists: before.is_some(),
        current_exists: current.is_some(),
        proposed_exists: after.is_some(),
        hunks: checkpoint_hunks(path, &before, &after).unwrap_or_default(),
    })
}

/// A hunk a scoped rollback left alone because its lines changed since.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct RollbackConflict {
    /// The file, relative to the project root.
    pub path: String,
    /// The hunk left alone.
    pub hunk_id: String,
    /// Why: the file was removed, is no longer text, or its lines changed.
    pub reason: String,
}

/// What `checkpoint_rollback` did.
pub struct RolledBack {
    /// The rollback's own checkpoint (none when nothing needed writing).
    pub checkpoint: Option<Record>,
    /// The files written.
    pub files: Vec<String>,
    /// The hunks left alone (only a `scoped_selected` rollback has any).
    pub conflicts: Vec<RollbackConflict>,
}

/// `checkpoint_rollback`: `hard_all` restores every file of checkpoint `id` to its content before;
/// `scoped_selected` reverts only `hunk_ids`, keeping later edits, and reports the hunks whose
/// lines changed since as conflicts. The rollback is itself a checkpoint.
pub fn rollback(
    project: &Dir,
    cps: &Checkpoints,
    id: &str,
    mode: &str,
    hunk_ids: &[String],
) -> Result<RolledBack, ReviewError> {
    let hard = match mode {
        "hard_all" => true,
        "scoped_selected" => false,
        _ => return Err(ReviewError::BadMode),
    };
    if !hard && hunk_ids.is_empty() {
        return Err(ReviewError::NoHunkIds);
    }
    let rec = cps.load(project, id)?;
    let mut changes = Vec::new();
    let mut conflicts = Vec::new();
    let wanted: BTreeSet<&str> = hunk_ids.iter().map(String::as_str).collect();
    let mut found: BTreeSet<&str> = BTreeSet::new();
    for f in &rec.files {
        let before = cps.content(&rec, f, false)?;
        let after = cps.content(&rec, f, true)?;
        let current =
            projfs::read(project, &f.path).map_err(|e| ReviewError::Read(f.path.clone(), e))?;
        if hard {
            changes.push(Change {
                path: f.path.clone(),
                before: current,
                after: before,
            });
            continue;
        }
        let (Ok(bt), Ok(at)) = (
            hunks::as_text(&f.path, before.as_deref().unwrap_or_default()),
            hunks::as_text(&f.path, after.as_deref().unwrap_or_default()),
        ) else {
            continue;
        };
        let (lb, la) = (Lines::parse(bt), Lines::parse(at));
        let hs = hunks::hunks(&f.path, &lb, &la);
        let chosen: Vec<&Hunk> = hs
            .iter()
            .filter(|h| wanted.contains(h.id.as_str()))
            .collect();
        if chosen.is_empty() {
            continue;
        }
        found.extend(
            wanted
                .iter()
                .copied()
                .filter(|w| chosen.iter().any(|h| h.id == *w)),
        );
        let Some(cur) = current.as_deref() else {
            conflicts.extend(chosen.iter().map(|h| RollbackConflict {
                path: f.path.clone(),
                hunk_id: h.id.clone(),
                reason: "the file was removed since".into(),
            }));
            continue;
        };
        let ct = match hunks::as_text(&f.path, cur) {
            Ok(t) => t,
            Err(_) => {
                conflicts.extend(chosen.iter().map(|h| RollbackConflict {
                    path: f.path.clone(),
                    hunk_id: h.id.clone(),
                    reason: "the file is no longer text".into(),
                }));
                continue;
            }
        };
        let (content, clashes) = hunks::revert_onto(&lb, &la, &Lines::parse(ct), &chosen);
        conflicts.extend(clashes.into_iter().map(|id| RollbackConflict {
            path: f.path.clone(),
            hunk_id: id.to_string(),
            reason: "its lines changed since".into(),
        }));
        // A file the apply created and whose every line is reverted goes away again.
        let after_write = if before.is_none() && content.is_empty() {
            None
        } else {
            Some(content)
        };
        changes.push(Change {
            path: f.path.clone(),
            before: current.clone(),
            after: after_write,
        });
    }
    if let Some(missing) = wanted.iter().find(|w| !found.contains(*w)) {
        return Err(ReviewError::UnknownHunk(missing.to_string()));
    }
    let files: Vec<String> = changes
        .iter()
        .filter(|c| c.before != c.after)
        .map(|c| c.path.clone())
        .collect();
    let checkpoint = checkpoints::apply_changes(
        project,
        cps,
        Meta {
            chat_id: rec.chat_id.as_deref(),
            kind: "rollback",
            rollback_of: Some(&rec.id),
        },
        changes,
    )?;
    Ok(RolledBack {
        checkpoint,
        files,
        conflicts,
    })
}

/// The context entries whose local copy differs from their snapshot (changed since it was taken), by
/// path, each once. Files that are not on disk (or cannot be read) are not listed. The snapshots
/// are read through `memo`, which keeps them for the send's request.
pub fn stale_files(
    chat_dir: &Dir,
    files: &[ContextFile],
    memo: &mut snapshots::Memo,
    read_local: impl Fn(&paths::ClientPath) -> io::Result<Vec<u8>>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for cf in files {
        if out.contains(&cf.path) {
            continue;
        }
        let Ok(snap) = memo.read(chat_dir, cf) else {
            continue;
        };
        let local = match snapshots::client_path(cf) {
            Ok(p) => read_local(&p),
            Err(_) => continue,
        };
        // A file that is not on disk is not reported: context can come from an unsaved buffer.
        let stale = match local {
            Err(_) => false,
            Ok(local) => match (cf.start_line, cf.end_line) {
                (Some(s), Some(e)) => {
                    !snapshots::same_text(&snapshots::section_lines(&local, s, e), &snap)
                }
                _ => !snapshots::same_text(&local, &snap),
            },
        };
        if stale {
            out.push(cf.path.clone());
        }
    }
    out
}
