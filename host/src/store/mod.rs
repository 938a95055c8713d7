//! On-disk state through capability handles: a [`StateDir`] is a `cap_std::fs::Dir` for `.bb7/` (or
//! `~/.bb7/`), so no path a client sends can make the host read or write outside it, whatever `..`,
//! absolute paths or planted symlinks it contains.
//!
//! - [`StateDir`]: the handle, plus atomic writes (temp file, fsync, rename, fsync the directory).
//!   What needs no directory fsync (state whose loss in a power cut is harmless: the last active
//!   chat, a send's user message before its reply is recorded) uses [`write_atomic_relaxed`], and a
//!   chat's PID lock none at all (a lock does not outlive the machine's crash anyway).
//! - [`lock`]: per-chat PID locks with stale-lock recovery.
//! - [`index`]: `chats/index.json`, kept in step with the chat directories.

pub mod index;
pub mod lock;
pub mod project;
pub mod publish;
pub mod temps;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

/// A directory the host owns, opened as a capability.
#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
    dir: Dir,
}

impl StateDir {
    /// Opens `path` (creating it when `create` is set).
    pub fn open(path: &Path, create: bool) -> io::Result<Self> {
        if create {
            std::fs::create_dir_all(path)?;
        }
        let dir = Dir::open_ambient_dir(path, ambient_authority())?;
        Ok(StateDir {
            path: path.to_path_buf(),
            dir,
        })
    }

    /// The directory's absolute path (for replies that must name files, e.g. `get_diff_paths`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The capability handle.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A sub-directory as its own handle (created when `create`).
    pub fn sub(&self, rel: &str, create: bool) -> io::Result<StateDir> {
        if create {
            self.dir.create_dir_all(rel)?;
        }
        Ok(StateDir {
            path: self.path.join(rel),
            dir: self.dir.open_dir(rel)?,
        })
    }
}

/// Writes `rel` inside `dir` atomically: the bytes go to a new temporary file in the same directory,
/// which is fsynced and renamed over `rel`; then the directory is fsynced. A crash at any point leaves
/// the old file or the new one, never a torn one. Missing parent directories are created.
pub fn write_atomic(dir: &Dir, rel: impl AsRef<Path>, bytes: &[u8]) -> io::Result<()> {
    prepare_atomic(dir, rel, bytes)?.commit()
}

/// [`write_atomic`] without the directory fsync: the new file is fsynced before its rename, so a
/// crash never leaves it torn or empty, but a power cut right after may bring back the previous
/// version. For state whose last change may be lost but never corrupted (the last active chat; a
/// send's user message, which the reply's own durable save makes durable when it ends). A process
/// crash (`kill -9`) loses nothing: the rename is in the kernel already.
pub fn write_atomic_relaxed(dir: &Dir, rel: impl AsRef<Path>, bytes: &[u8]) -> io::Result<()> {
    prepare(dir, rel.as_ref(), bytes, Durability::Relaxed)?.commit()
}

/// [`write_atomic`] with no fsync at all: atomic for readers and for a `kill -9` (the rename is in the
/// kernel when this returns), but a power cut may leave the previous version, or a torn or empty
/// file. Only for a summary that is rebuilt from durable state whenever it does not match it (the
/// spend ledger's per-day totals, recounted from the ledger).
pub fn write_atomic_scratch(dir: &Dir, rel: impl AsRef<Path>, bytes: &[u8]) -> io::Result<()> {
    prepare(dir, rel.as_ref(), bytes, Durability::Scratch)?.commit()
}

/// A file written under a temporary name, neither fsynced nor in place yet: [`Staged::publish`]
/// fsyncs it and renames it over its name (no directory fsync, as [`write_atomic_relaxed`]).
/// Dropped unpublished, the temporary file is removed. The write, which is where a full disk
/// shows, is done before the caller starts slow work (a send's model request); the fsync runs
/// while that work is under way.
#[derive(Debug)]
pub struct Staged(Prepared);

/// Writes `rel` inside `dir` under a temporary name (missing parent directories are created) for
/// [`Staged::publish`] to fsync and put in place.
pub fn stage_relaxed(dir: &Dir, rel: impl AsRef<Path>, bytes: &[u8]) -> io::Result<Staged> {
    prepare(dir, rel.as_ref(), bytes, Durability::Scratch).map(Staged)
}

impl Staged {
    /// fsyncs the file and renames it into place: then it is as [`write_atomic_relaxed`] leaves
    /// it (whole after a power cut, maybe the previous version until its directory is fsynced).
    pub fn publish(self) -> io::Result<()> {
        let f = self.0.dir.open(&self.0.tmp)?;
        fsync(&f)?;
        drop(f);
        self.0.commit()
    }
}

/// `fdatasync` of an appended file (its bytes and length, not its other metadata); counted with the
/// fsyncs in tests (see [`fsyncs`]).
pub fn sync_data(f: &cap_std::fs::File) -> io::Result<()> {
    #[cfg(test)]
    FSYNCS.with(|n| n.set(n.get() + 1));
    f.sync_data()
}

/// Writes `rel` (a `/`-separated relative path) under `root` without following any symbolic link:
/// every directory on the way is opened with `O_NOFOLLOW` from the previous one's handle (missing ones
/// are created) and the target, if it exists, must be a regular file, whose permissions the new file
/// keeps. See [`project`] for the project's own, stricter rule.
pub fn write_no_follow(root: &Dir, rel: &str, bytes: &[u8]) -> io::Result<()> {
    no_follow(root, rel, bytes, Durability::Durable)
}

/// [`write_no_follow`] for a scratch directory that does not outlive the process (a reply's
/// staging copy): the same checks, temporary file and rename, but no fsync — nothing there has to
/// survive a crash, and an fsync of a large file costs milliseconds.
pub fn write_no_follow_scratch(root: &Dir, rel: &str, bytes: &[u8]) -> io::Result<()> {
    no_follow(root, rel, bytes, Durability::Scratch)
}

fn no_follow(root: &Dir, rel: &str, bytes: &[u8], durability: Durability) -> io::Result<()> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{rel} is not a normalised path"),
        ));
    }
    project::write_nofollow(root, rel, parts, bytes, durability)
}

/// Whether a write is made durable (fsync of the file before its rename, of the directory after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Survives a crash of the machine once the write returns.
    Durable,
    /// The file is fsynced before its rename (never torn), the directory is not: a crash of the
    /// machine may bring back the previous version.
    Relaxed,
    /// Atomic for readers, but not synced: for files that do not outlive the process.
    Scratch,
}

/// Replaces file `name` in `dir` with `bytes`: a fresh temporary file (given `perms` before any byte
/// is written), fsync, rename, fsync of the directory.
fn replace_in(
    dir: &Dir,
    name: &str,
    bytes: &[u8],
    perms: Option<cap_std::fs::Permissions>,
    durability: Durability,
) -> io::Result<()> {
    Prepared::new(dir.try_clone()?, name, bytes, perms, durability)?.commit()
}

/// A file written and fsynced under a temporary name, waiting for [`Prepared::commit`] to rename it
/// into place. Dropped uncommitted, the temporary file is removed: nothing changed. This lets an
/// operation that changes several files do every fallible write first and publish them last.
#[derive(Debug)]
pub struct Prepared {
    dir: Dir,
    tmp: String,
    name: String,
    done: bool,
    durability: Durability,
    /// The file's bytes are fsynced (or need not be): [`Prepared::commit`] fsyncs them first
    /// otherwise (see [`publish::Outputs`]).
    synced: bool,
}

impl Prepared {
    fn new(
        dir: Dir,
        name: &str,
        bytes: &[u8],
        perms: Option<cap_std::fs::Permissions>,
        durability: Durability,
    ) -> io::Result<Self> {
        Self::write(dir, name, bytes, perms, durability, true)
    }

    fn write(
        dir: Dir,
        name: &str,
        bytes: &[u8],
        perms: Option<cap_std::fs::Permissions>,
        durability: Durability,
        sync_now: bool,
    ) -> io::Result<Self> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let tmp = format!(
            ".{name}.tmp-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let mut f = dir.open_with(&tmp, &opts)?;
        let sync = sync_now && durability != Durability::Scratch;
        let mut p = Prepared {
            dir,
            tmp,
            name: name.to_string(),
            done: false,
            durability,
            synced: sync || durability == Durability::Scratch,
        };
        let written = perms
            .map_or(Ok(()), |perm| f.set_permissions(perm))
            .and_then(|_| f.write_all(bytes))
            .and_then(|_| if sync { fsync(&f) } else { Ok(()) });
        drop(f);
        if let Err(e) = written {
            p.discard();
            return Err(e);
        }
        Ok(p)
    }

    /// Renames the file into place and makes the rename durable (fsyncing the file first when it
    /// was written unsynced).
    pub fn commit(mut self) -> io::Result<()> {
        if !self.synced {
            fsync(&self.dir.open(&self.tmp)?)?;
            self.synced = true;
        }
        self.dir.rename(&self.tmp, &self.dir, &self.name)?;
        self.done = true;
        if self.durability == Durability::Durable {
            sync_dir(&self.dir);
        }
        Ok(())
    }

    /// fsyncs the file's bytes (once: nothing when they are synced already or need not be).
    fn sync_file(&mut self) -> io::Result<()> {
        if self.synced {
            return Ok(());
        }
        #[cfg(test)]
        faults::hit(faults::Op::Fsync, &self.name)?;
        fsync(&self.dir.open(&self.tmp)?)?;
        self.synced = true;
        Ok(())
    }

    /// Renames the file over its name, fsyncing nothing (the caller fsyncs its bytes first and
    /// its directory after, see [`publish`]).
    fn rename_into_place(&mut self) -> io::Result<()> {
        #[cfg(test)]
        faults::hit(faults::Op::Rename, &self.name)?;
        self.dir.rename(&self.tmp, &self.dir, &self.name)?;
        self.done = true;
        Ok(())
    }

    fn discard(&mut self) {
        if !self.done {
            let _ = self.dir.remove_file(&self.tmp);
            self.done = true;
        }
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        self.discard();
    }
}

/// [`write_atomic`] up to the rename: `rel` inside `dir` is written under a temporary name (missing
/// parent directories are created) and published by [`Prepared::commit`].
pub fn prepare_atomic(dir: &Dir, rel: impl AsRef<Path>, bytes: &[u8]) -> io::Result<Prepared> {
    prepare(dir, rel.as_ref(), bytes, Durability::Durable)
}

fn parent_and_name(dir: &Dir, rel: &Path) -> io::Result<(Dir, String)> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a file path is required"))?
        .to_string_lossy()
        .into_owned();
    let parent = match rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => {
            dir.create_dir_all(p)?;
            dir.open_dir(p)?
        }
        None => dir.try_clone()?,
    };
    Ok((parent, name))
}

fn prepare(dir: &Dir, rel: &Path, bytes: &[u8], durability: Durability) -> io::Result<Prepared> {
    let (parent, name) = parent_and_name(dir, rel)?;
    Prepared::new(parent, &name, bytes, None, durability)
}

/// A per-user secret of 32 random bytes (hex) in the global state directory (`~/.bb7/<name>`,
/// mode 0600), made on first use; loaded once per process. It lets the host recognise what it
/// wrote itself in places a repository can also write (`.bb7/checkpoints/`): a repository cannot
/// read the user's home, so it cannot forge a tag made with it. Without a state directory the key
/// lives only as long as the process.
pub fn user_key(name: &str) -> Vec<u8> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static KEYS: OnceLock<Mutex<HashMap<String, Vec<u8>>>> = OnceLock::new();
    let keys = KEYS.get_or_init(Default::default);
    let mut keys = keys.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(k) = keys.get(name) {
        return k.clone();
    }
    let key = crate::paths::state_dir()
        .and_then(|d| load_or_make_key(&d, name).ok())
        .unwrap_or_else(|| {
            let mut k = [0u8; 32];
            rand::fill(&mut k[..]);
            hex::encode(k).into_bytes()
        });
    keys.insert(name.to_string(), key.clone());
    key
}

fn load_or_make_key(dir: &Path, name: &str) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let state = StateDir::open(dir, true)?;
    let valid = |k: &[u8]| k.len() == 64 && k.iter().all(u8::is_ascii_hexdigit);
    match read_regular_nofollow(state.dir(), name) {
        Ok(k) if valid(&k) => return Ok(k),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a key bb7 made", dir.join(name).display()),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut key = [0u8; 32];
    rand::fill(&mut key[..]);
    let key = hex::encode(key).into_bytes();
    // Written private under a temporary name, then linked into place: the link fails when another
    // process made the key first, and then that one is used.
    let perms = cap_std::fs::Permissions::from_std(std::fs::Permissions::from_mode(0o600));
    let p = Prepared::new(
        state.dir().try_clone()?,
        name,
        &key,
        Some(perms),
        Durability::Durable,
    )?;
    match state.dir().hard_link(&p.tmp, state.dir(), name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    drop(p);
    sync_dir(state.dir());
    let k = read_regular_nofollow(state.dir(), name)?;
    if valid(&k) {
        Ok(k)
    } else {
        Err(io::Error::new(io::ErrorKind::InvalidData, "bad key"))
    }
}

/// Runs `side` on a thread of its own while `main` runs on this one, and returns both results: two
/// writes that each end in an fsync wait for the disk at the same time instead of one after the
/// other. (In tests, the side thread's fsyncs are added to this thread's count, see [`fsyncs`].)
/// A panic in `side` is passed on.
pub fn both<A: Send, B>(side: impl FnOnce() -> A + Send, main: impl FnOnce() -> B) -> (A, B) {
    // `side` is shared with the spawn: if no thread can be made, it runs here after `main`.
    let side = std::sync::Mutex::new(Some(side));
    std::thread::scope(|s| {
        #[cfg(test)]
        let plan = faults::current();
        let spawned = std::thread::Builder::new().spawn_scoped(s, || {
            #[cfg(test)]
            faults::install(plan);
            let side = side.lock().ok().and_then(|mut f| f.take());
            (side.map(|f| f()), thread_fsyncs())
        });
        let b = main();
        let a = match spawned {
            Ok(h) => {
                let (a, n) = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                count_fsyncs(n);
                a
            }
            Err(_) => None,
        };
        let a = match a {
            Some(a) => a,
            None => {
                let f = side.lock().unwrap_or_else(|e| e.into_inner()).take();
                match f {
                    Some(f) => f(),
                    // Unreachable: the thread that took `side` ran it and returned `Some`.
                    None => unreachable!("both: the side closure ran and returned nothing"),
                }
            }
        };
        (a, b)
    })
}

/// The fsyncs this thread made (counted in tests only, else 0).
fn thread_fsyncs() -> u64 {
    #[cfg(test)]
    {
        fsyncs()
    }
    #[cfg(not(test))]
    {
        0
    }
}

/// Adds `n` fsyncs another thread made for this one to this thread's count (tests only).
fn count_fsyncs(n: u64) {
    #[cfg(test)]
    FSYNCS.with(|c| c.set(c.get() + n));
    #[cfg(not(test))]
    let _ = n;
}

/// fsyncs a directory (best effort: a rename is already atomic, this makes it durable).
pub fn sync_dir(dir: &Dir) {
    if let Ok(d) = dir.open(".") {
        let _ = fsync(&d);
    }
}

/// `fsync` of an open file or directory; counted per thread in tests (see [`fsyncs`]).
fn fsync(f: &cap_std::fs::File) -> io::Result<()> {
    #[cfg(test)]
    FSYNCS.with(|n| n.set(n.get() + 1));
    f.sync_all()
}

#[cfg(test)]
thread_local! {
    static FSYNCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Injected failures of the store's own fsyncs and renames (tests only): a test makes the next
/// fsync or rename of a file of some name fail once, on its own thread and on the threads the
/// store starts for it ([`both`]), never on another test's.
#[cfg(test)]
pub(crate) mod faults {
    use std::cell::RefCell;
    use std::sync::{Arc, Mutex};

    /// What fails.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Op {
        /// The fsync of a file written under a temporary name.
        Fsync,
        /// Its rename over its name.
        Rename,
    }

    type Plan = Arc<Mutex<Vec<(Op, String)>>>;

    thread_local! {
        static PLAN: RefCell<Option<Plan>> = const { RefCell::new(None) };
    }

    /// The next `op` on a file named `name` fails once (EIO).
    pub(crate) fn fail_once(op: Op, name: &str) {
        PLAN.with(|p| {
            let mut p = p.borrow_mut();
            let plan = p.get_or_insert_with(Plan::default);
            plan.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((op, name.to_string()));
        });
    }

    /// This thread's plan, for a thread it starts.
    pub(super) fn current() -> Option<Plan> {
        PLAN.with(|p| p.borrow().clone())
    }

    /// Takes on the plan of the thread that started this one.
    pub(super) fn install(plan: Option<Plan>) {
        PLAN.with(|p| *p.borrow_mut() = plan);
    }

    /// Fails when the plan says `op` on `name` fails (once).
    pub(super) fn hit(op: Op, name: &str) -> std::io::Result<()> {
        let Some(plan) = current() else {
            return Ok(());
        };
        let mut plan = plan.lock().unwrap_or_else(|e| e.into_inner());
        match plan.iter().position(|(o, n)| *o == op && n == name) {
            Some(i) => {
                plan.remove(i);
                Err(std::io::Error::from_raw_os_error(libc::EIO))
            }
            None => Ok(()),
        }
    }
}

/// How many fsyncs the state writes of this thread have made so far (tests count what one
/// operation costs).
#[cfg(test)]
pub(crate) fn fsyncs() -> u64 {
    FSYNCS.with(std::cell::Cell::get)
}

/// Where a reply's staging directory (the copy its edit tools work on) is made:
/// `TMPDIR` when it is set (the user's choice); else a memory file system, `XDG_RUNTIME_DIR` or
/// else `/dev/shm`, when it is a tmpfs with at least [`SCRATCH_MIN_FREE`] bytes free, so the
/// fsync a tool makes of each file it writes costs nothing and the copies never reach the disk
/// (a 1 MiB edit's fsync on ext4 is milliseconds); else the system's temporary directory.
/// Decided once per process.
pub fn scratch_base() -> PathBuf {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        if std::env::var_os("TMPDIR").is_some_and(|v| !v.is_empty()) {
            return std::env::temp_dir();
        }
        let runtime = std::env::var_os("XDG_RUNTIME_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        runtime
            .into_iter()
            .chain([PathBuf::from("/dev/shm")])
            .find(|d| roomy_tmpfs(d))
            .unwrap_or_else(std::env::temp_dir)
    })
    .clone()
}

/// The free space a memory file system needs to hold staging directories (a reply stages at most
/// a few files of at most [`MAX_READ`] bytes each).
pub const SCRATCH_MIN_FREE: u64 = 256 << 20;

/// Whether `dir` is a writable directory on a tmpfs with [`SCRATCH_MIN_FREE`] bytes free.
fn roomy_tmpfs(dir: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let Ok(fs) = rustix::fs::statfs(dir) else {
        return false;
    };
    #[allow(clippy::unnecessary_cast)]
    let (kind, free) = (
        fs.f_type as i64,
        (fs.f_bavail as u64).saturating_mul(fs.f_bsize as u64),
    );
    kind == TMPFS_MAGIC
        && free >= SCRATCH_MIN_FREE
        && rustix::fs::access(
            dir,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )
        .is_ok()
}

/// The most a user file may have for the host to read it (the protocol's own line limit).
pub const MAX_READ: u64 = 16 << 20;

/// Reads `rel` inside `dir` if it is a regular file of at most [`MAX_READ`] bytes: every read of
/// state goes through here. Opened non-blocking, so a FIFO cannot hang the host, and checked on the
/// open handle, so a device (`/dev/zero`) or a huge sparse file cannot exhaust memory.
pub fn read_regular(dir: &Dir, rel: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    use cap_std::fs::OpenOptionsExt;
    let mut opts = OpenOptions::new();
    opts.read(true).custom_flags(libc::O_NONBLOCK);
    check_and_read(dir.open_with(rel, &opts)?.into_std())
}

/// [`read_regular`] of `name` directly inside `dir`, refusing a symlink there (`ELOOP`).
pub fn read_regular_nofollow(dir: &Dir, name: &str) -> io::Result<Vec<u8>> {
    let fd = rustix::fs::openat(
        dir,
        name,
        rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::NONBLOCK
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    check_and_read(std::fs::File::from(fd))
}

/// [`read_regular`] for an absolute path outside every handle (external context files: only ever
/// read, never written).
pub fn read_regular_path(path: &Path) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    check_and_read(
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?,
    )
}

/// [`read_regular_path`] with its own limit of `max` bytes instead of [`MAX_READ`] (component
/// files, which may be larger than any state file).
pub fn read_regular_path_max(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    check_and_read_max(
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?,
        max,
    )
}

fn check_and_read(f: std::fs::File) -> io::Result<Vec<u8>> {
    check_and_read_max(f, MAX_READ)
}

fn check_and_read_max(f: std::fs::File, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let len = checked_len(&f, max)?;
    let mut out = Vec::with_capacity(len);
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

/// The length of `f` if it is a regular file of at most `max` bytes.
fn checked_len(f: &std::fs::File, max: u64) -> io::Result<usize> {
    checked_meta(f, max).map(|(len, _)| len)
}

/// [`checked_len`], with the metadata it looked at (one `fstat`).
fn checked_meta(f: &std::fs::File, max: u64) -> io::Result<(usize, std::fs::Metadata)> {
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("larger than {} MiB", max >> 20),
        ));
    }
    let len = usize::try_from(meta.len()).map_err(io::Error::other)?;
    Ok((len, meta))
}

/// What tells one version of a file that is replaced atomically from the next: its device and
/// inode (a rename puts another inode in place), its length and its modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

impl Stamp {
    /// The stamp of a file's metadata (std's and cap-std's name the same fields differently).
    fn new(dev: u64, ino: u64, len: u64, mtime: (i64, i64)) -> Stamp {
        Stamp {
            dev,
            ino,
            len,
            mtime,
        }
    }
}

/// The [`Stamp`] of `rel` in `dir` now (a final symlink is not followed).
pub fn stamp(dir: &Dir, rel: impl AsRef<Path>) -> io::Result<Stamp> {
    use cap_std::fs::MetadataExt;
    let m = dir.symlink_metadata(rel)?;
    Ok(Stamp::new(
        m.dev(),
        m.ino(),
        m.len(),
        (m.mtime(), m.mtime_nsec()),
    ))
}

/// [`read_regular_shared`], with the [`Stamp`] of the file it read.
pub fn read_regular_shared_stamped(
    dir: &Dir,
    rel: impl AsRef<Path>,
) -> io::Result<(Arc<[u8]>, Stamp)> {
    use std::os::unix::fs::MetadataExt;
    let (content, m) = read_shared(dir, rel)?;
    Ok((
        content,
        Stamp::new(m.dev(), m.ino(), m.len(), (m.mtime(), m.mtime_nsec())),
    ))
}

/// [`read_regular`] straight into shared memory: the bytes are read into the `Arc` that keeps
/// them, not into a buffer copied into one afterwards (a 1 MiB staged edit was copied once
/// more that way). For files nothing writes to while they are read (a reply's staging copy):
/// one that changes length meanwhile is an error.
pub fn read_regular_shared(dir: &Dir, rel: impl AsRef<Path>) -> io::Result<Arc<[u8]>> {
    read_shared(dir, rel).map(|(content, _)| content)
}

/// [`read_regular_shared`], with the metadata of the file it read (taken when it was opened).
fn read_shared(dir: &Dir, rel: impl AsRef<Path>) -> io::Result<(Arc<[u8]>, std::fs::Metadata)> {
    use cap_std::fs::OpenOptionsExt;
    use std::io::Read;
    let mut opts = OpenOptions::new();
    opts.read(true).custom_flags(libc::O_NONBLOCK);
    let mut f = dir.open_with(rel, &opts)?.into_std();
    let (len, meta) = checked_meta(&f, MAX_READ)?;
    let mut out: Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
    // Just made, so not shared: never `None` (an error rather than zeros if it ever were).
    let buf =
        Arc::get_mut(&mut out).ok_or_else(|| io::Error::other("the read buffer is shared"))?;
    f.read_exact(buf)?;
    let mut more = [0u8; 1];
    if f.read(&mut more)? != 0 {
        return Err(io::Error::other("the file grew while it was read"));
    }
    Ok((out, meta))
}

/// Removes `rel` (a file) if present.
pub fn remove_file_if_exists(dir: &Dir, rel: impl AsRef<Path>) -> io::Result<()> {
    match dir.remove_file(rel) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes, under `dir` (recursively, never through symlinks), the temporary files of atomic writes
/// (`.<name>.tmp-<pid>-<n>`) whose writer is gone ([`temps::writer_gone`]: its process died, or
/// its pid now names a later process): what a crash between writing and renaming leaves.
/// Best effort: a file that cannot be listed or removed is left for the next time. Returns how many
/// were removed.
pub fn sweep_dead_temps(dir: &Dir) -> usize {
    let mut removed = 0;
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    for e in entries.flatten() {
        let (Ok(ft), Some(name)) = (e.file_type(), e.file_name().to_str().map(str::to_string))
        else {
            continue;
        };
        if ft.is_dir() {
            if let Ok(sub) = project::open_dir_nofollow(dir, &name, &name) {
                removed += sweep_dead_temps(&sub);
            }
        } else if ft.is_file()
            && temps::temp_owner(&name).is_some()
            && e.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|m| temps::writer_gone(&name, m.into_std()))
        {
            removed += usize::from(dir.remove_file(&name).is_ok());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_removes_only_dead_processes_temp_files() {
        let t = tempfile::tempdir().unwrap();
        let d = Dir::open_ambient_dir(t.path(), cap_std::ambient_authority()).unwrap();
        d.create_dir_all("output/src").unwrap();
        // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
        let dead = ".a.rs.tmp-99999999-3";
        let live = format!(".b.rs.tmp-{}-0", std::process::id());
        for name in [
            format!("output/src/{dead}"),
            format!("output/{live}"),
            "output/.c.tmp-x-1".into(),
            "output/src/a.rs".into(),
        ] {
            d.write(&name, b"x").unwrap();
        }
        assert_eq!(sweep_dead_temps(&d), 1);
        assert!(!d.exists(format!("output/src/{dead}")));
        assert!(d.exists(format!("output/{live}")));
        assert!(d.exists("output/.c.tmp-x-1"));
        assert!(d.exists("output/src/a.rs"));
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp_files() {
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(t.path(), false).unwrap();
        write_atomic(s.dir(), "a/b/c.json", b"one").unwrap();
        write_atomic(s.dir(), "a/b/c.json", b"two").unwrap();
        assert_eq!(std::fs::read(t.path().join("a/b/c.json")).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(t.path().join("a/b")).unwrap().count(), 1);
    }

    /// A scratch write (a reply's staging copy) skips only the fsyncs: it still follows no
    /// symbolic link a tool left, replaces atomically and keeps an existing file's mode.
    #[test]
    fn scratch_writes_follow_no_symlink_either() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("elsewhere", root.join("sub")).unwrap();
        std::os::unix::fs::symlink("elsewhere/x", root.join("f")).unwrap();
        let d = StateDir::open(root, false).unwrap();
        for rel in ["sub/a.txt", "f"] {
            let e = write_no_follow_scratch(d.dir(), rel, b"x").expect_err("refused");
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{rel}: {e}");
        }
        assert_eq!(
            std::fs::read_dir(root.join("elsewhere")).unwrap().count(),
            0
        );
        write_no_follow_scratch(d.dir(), "a/b.sh", b"one").unwrap();
        std::fs::set_permissions(root.join("a/b.sh"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        write_no_follow_scratch(d.dir(), "a/b.sh", b"two").unwrap();
        assert_eq!(std::fs::read(root.join("a/b.sh")).unwrap(), b"two");
        let mode = std::fs::metadata(root.join("a/b.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o750);
        assert_eq!(std::fs::read_dir(root.join("a")).unwrap().count(), 1);
    }

    #[test]
    fn project_writes_follow_no_symlink() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", root.join("hooks")).unwrap();
        std::os::unix::fs::symlink(".git/config", root.join("cfg")).unwrap();
        std::fs::write(root.join(".git/config"), "keep").unwrap();
        let d = StateDir::open(root, false).unwrap();
        for (rel, link) in [("hooks/pre-commit", "hooks"), ("cfg", "cfg")] {
            let e = write_no_follow(d.dir(), rel, b"x").expect_err("refused");
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{rel}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("{link} is a symbolic link")),
                "{rel}: {e}"
            );
        }
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert_eq!(std::fs::read(root.join(".git/config")).unwrap(), b"keep");
        // Real directories are created; an existing file keeps its mode.
        std::fs::write(root.join("run.sh"), "old").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        write_no_follow(d.dir(), "run.sh", b"new").unwrap();
        assert_eq!(
            std::fs::metadata(root.join("run.sh"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o750
        );
        write_no_follow(d.dir(), "a/b/c.txt", b"c").unwrap();
        assert_eq!(std::fs::read(root.join("a/b/c.txt")).unwrap(), b"c");
    }

    #[test]
    fn escapes_are_refused_by_the_capability() {
        let outside = tempfile::tempdir().unwrap();
        let t = tempfile::tempdir().unwrap();
        let s = StateDir::open(t.path(), false).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("link")).unwrap();
        for rel in ["../x", "/tmp/x"] {
            let e = write_atomic(s.dir(), rel, b"x").expect_err("refused");
            // cap-std's refusal of a path that leaves the directory.
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{rel}: {e}");
            assert!(
                e.to_string().contains("outside of the filesystem"),
                "{rel}: {e}"
            );
        }
        // The missing parents are created without following the link: `link` exists, and is no
        // directory to create.
        let e = write_atomic(s.dir(), "link/x", b"x").expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "link/x: {e}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
