//! The components' state as hooks read it at every point: `~/.bb7/tools.json` parsed once and kept
//! while the file is unchanged. Each ask looks at the file (one `statx` of its path: a look, not a
//! read; the state is only ever read through [`ComponentStore`]'s safe reader) and reads it again
//! only when it is another file or was written since: another device or inode (the state is
//! replaced by an atomic rename), length, or modification or change time. So an `add`, `grant`,
//! `enable` or `remove` by any process is seen by the next ask. A point no installed component
//! hooks is answered from the kept state alone (no project path resolved, no status built).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rustix::fs::{AtFlags, CWD, StatxFlags};

use super::Point;
use crate::components::error::ComponentError;
use crate::components::installed::{ComponentStore, STATE_FILE, Status, ToolsState};

/// What tells one version of the state file from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: (u32, u32),
    ino: u64,
    len: u64,
    mtime: (i64, u32),
    ctime: (i64, u32),
}

/// The state last read, and the file it was read from.
static KEPT: Mutex<Option<(Stamp, Arc<ToolsState>)>> = Mutex::new(None);

/// The components enabled for `project` whose manifest hooks `point`, granted or not (see
/// [`super::at`]), from the kept state when the file is unchanged.
pub(super) fn hooks_at(project: &Path, point: Point) -> Result<Vec<Status>, ComponentError> {
    let dir = crate::paths::state_dir().ok_or(ComponentError::NoHome)?;
    let looked = rustix::fs::statx(
        CWD,
        dir.join(STATE_FILE),
        AtFlags::empty(),
        StatxFlags::BASIC_STATS,
    );
    let stamp = match looked {
        Ok(m) => Some(Stamp {
            dev: (m.stx_dev_major, m.stx_dev_minor),
            ino: m.stx_ino,
            len: m.stx_size,
            mtime: (m.stx_mtime.tv_sec, m.stx_mtime.tv_nsec),
            ctime: (m.stx_ctime.tv_sec, m.stx_ctime.tv_nsec),
        }),
        // No state directory or no state file: nothing is installed (what reading it would say).
        Err(rustix::io::Errno::NOENT) => return Ok(Vec::new()),
        // One that cannot be looked at: read as before, uncached (its error is the answer).
        Err(_) => None,
    };
    let kept = stamp.and_then(|stamp| {
        let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        kept.as_ref()
            .filter(|(s, _)| *s == stamp)
            .map(|(_, state)| Arc::clone(state))
    });
    let state = match kept {
        Some(state) => state,
        None => {
            // Stamped before it is read: a change in between makes the next ask read it again.
            let state = Arc::new(ComponentStore::open(&dir)?.load()?);
            if let Some(stamp) = stamp {
                *KEPT.lock().unwrap_or_else(|p| p.into_inner()) = Some((stamp, Arc::clone(&state)));
            }
            state
        }
    };
    let hooks =
        |s: &crate::components::installed::Installed| s.hook.iter().any(|p| p == point.as_str());
    if !state.components.values().any(hooks) {
        return Ok(Vec::new());
    }
    Ok(state
        .statuses(Some(project))
        .into_iter()
        .filter(|s| s.enabled && hooks(&s.installed))
        .collect())
}
