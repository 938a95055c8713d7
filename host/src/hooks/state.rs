//! The components' state as hooks read it at every point: `~/.bb7/tools.json` parsed once and kept
//! while the file is unchanged. Each ask looks at the file (one `stat` through the state
//! directory's handle) and reads it again only when it is another file or was written since:
//! another device or inode (the state is replaced by an atomic rename), length, or modification or
//! change time. So an `add`, `grant`, `enable` or `remove` by any process is seen by the next ask.

use std::path::Path;
use std::sync::{Arc, Mutex};

use cap_std::fs::MetadataExt as _;

use crate::components::error::ComponentError;
use crate::components::installed::{ComponentStore, STATE_FILE, Status, ToolsState};
use crate::store::StateDir;

/// What tells one version of the state file from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The state last read, and the file it was read from.
static KEPT: Mutex<Option<(Stamp, Arc<ToolsState>)>> = Mutex::new(None);

/// Every component's status for `project`, as [`crate::components::manage::statuses`] gives it,
/// from the kept state when the file is unchanged.
pub(super) fn statuses(project: &Path) -> Result<Vec<Status>, ComponentError> {
    let dir = crate::paths::state_dir().ok_or(ComponentError::NoHome)?;
    let looked = StateDir::open(&dir, false).and_then(|home| home.dir().metadata(STATE_FILE));
    let stamp = match looked {
        Ok(m) => Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }),
        // No state directory or no state file: nothing is installed (what reading it would say).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        // One that cannot be looked at: read as before, uncached (its error is the answer).
        Err(_) => None,
    };
    if let Some(stamp) = stamp {
        let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((s, state)) = kept
            && s == stamp
        {
            return Ok(state.statuses(Some(project)));
        }
    }
    // Stamped before it is read: a change in between makes the next ask read it again.
    let state = Arc::new(ComponentStore::open(&dir)?.load()?);
    let statuses = state.statuses(Some(project));
    if let Some(stamp) = stamp {
        *KEPT.lock().unwrap_or_else(|p| p.into_inner()) = Some((stamp, state));
    }
    Ok(statuses)
}
