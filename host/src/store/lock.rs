//! Per-chat PID locks: `<chat dir>/lock` holds the PID of the process using the chat. A lock whose
//! process is gone (or whose content is garbage) is stale and removed. And [`exclusive`]: a file
//! lock waited for, that serialises changes to a shared state file between processes.

use std::io;

use cap_std::fs::Dir;

/// Who holds a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// No live process: there is no lock, or only a stale one, which was removed.
    Free,
    /// This process.
    Ours,
    /// Another live process.
    Other(u32),
    /// Something that is not a regular file is at `lock` (a FIFO, a device, a directory, a
    /// symbolic link): bb7 never makes one, never opens it, and removes it only when told to
    /// (`chat_force_unlock`).
    NotAFile,
}

/// The error when a chat's lock is not a regular file.
fn not_a_file(chat: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "the chat's lock file (.bb7/chats/{chat}/lock) is not a regular file (a FIFO, device, directory or symbolic link that bb7 did not write); remove it with force-unlock (the chat_force_unlock action) to use the chat"
        ),
    )
}

/// The lock state of the chat directory `chat` (relative to `chats`), removing a stale lock.
/// `chats_path` is the directory's absolute path: listing thousands of chats first asks the kernel
/// whether a lock file exists at all (one `statx`, which follows nothing), and only reads it through
/// the capability when it does.
pub fn state_at(chats: &Dir, chats_path: &std::path::Path, chat: &str) -> LockState {
    if std::fs::symlink_metadata(chats_path.join(chat).join("lock")).is_err() {
        return LockState::Free;
    }
    state(chats, chat)
}

/// The lock state of the chat directory `chat` (relative to `chats`), removing a stale lock.
pub fn state(chats: &Dir, chat: &str) -> LockState {
    let path = format!("{chat}/lock");
    // Looked at, never opened, when it is not a regular file: a FIFO's open could block.
    match chats.symlink_metadata(&path) {
        Ok(m) if !m.is_file() => return LockState::NotAFile,
        Ok(_) => {}
        Err(_) => return LockState::Free,
    }
    let Ok(bytes) = super::read_regular(chats, &path) else {
        return LockState::Free;
    };
    let pid = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    match pid {
        Some(p) if p == std::process::id() => LockState::Ours,
        Some(p) if alive(p) => LockState::Other(p),
        _ => {
            let _ = chats.remove_file(&path);
            LockState::Free
        }
    }
}

/// Takes the lock for this process; fails with `chat is locked by another process` when a live
/// process holds it.
pub fn acquire(chats: &Dir, chat: &str) -> io::Result<()> {
    let locked = || {
        io::Error::new(
            io::ErrorKind::WouldBlock,
            "chat is locked by another process",
        )
    };
    // Two tries: the second after a stale lock was removed by `state`.
    for _ in 0..2 {
        match state(chats, chat) {
            LockState::Other(_) => return Err(locked()),
            LockState::NotAFile => return Err(not_a_file(chat)),
            LockState::Ours => return Ok(()),
            LockState::Free => {}
        }
        // The PID goes into a private temporary file, which is then hard-linked to `lock`: the link
        // fails if a lock exists, so two processes can never both take the chat, and a reader never
        // sees a half-written lock. Nothing is fsynced: a lock names a running process, and a
        // crash of the machine ends every process, so a lock lost (or left empty) by one is the
        // stale lock the next process would remove anyway.
        let tmp = format!("{chat}/.lock-{}", std::process::id());
        let _ = chats.remove_file(&tmp);
        write_new(chats, &tmp, std::process::id().to_string().as_bytes())?;
        let linked = chats.hard_link(&tmp, chats, format!("{chat}/lock"));
        let _ = chats.remove_file(&tmp);
        match linked {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(locked())
}

/// Creates `rel` in `chats` (it must not exist) holding `bytes`, without fsync.
fn write_new(chats: &Dir, rel: &str, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut opts = cap_std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    let mut f = chats.open_with(rel, &opts)?;
    f.write_all(bytes).inspect_err(|_| {
        let _ = chats.remove_file(rel);
    })
}

/// Releases the lock if this process holds it.
pub fn release(chats: &Dir, chat: &str) {
    if state(chats, chat) == LockState::Ours {
        let _ = chats.remove_file(format!("{chat}/lock"));
    }
}

/// Removes the lock whoever holds it.
pub fn force_remove(chats: &Dir, chat: &str) -> io::Result<()> {
    super::remove_file_if_exists(chats, format!("{chat}/lock"))
}

/// An exclusive lock on a file, held until dropped (or until the process ends: the kernel releases
/// it then, so a crash never leaves it held). Unlike a chat's PID lock it is waited for, not
/// refused: it serialises short changes to a shared state file between processes.
#[derive(Debug)]
pub struct FileLock {
    _file: std::fs::File,
}

/// Takes the exclusive lock on `name` directly inside `dir` (created when missing, never through a
/// symbolic link; it must be a regular file), waiting while another process holds it.
pub fn exclusive(dir: &Dir, name: &str) -> io::Result<FileLock> {
    use rustix::fs::{FlockOperation, Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    loop {
        match rustix::fs::flock(&file, FlockOperation::LockExclusive) {
            Ok(()) => return Ok(FileLock { _file: file }),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    #[test]
    fn stale_and_garbage_locks_are_free() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("c1")).unwrap();
        let d = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        assert_eq!(state(&d, "c1"), LockState::Free);
        acquire(&d, "c1").unwrap();
        assert_eq!(state(&d, "c1"), LockState::Ours);
        std::fs::write(t.path().join("c1/lock"), "garbage").unwrap();
        assert_eq!(state(&d, "c1"), LockState::Free);
        assert!(!t.path().join("c1/lock").exists());
        std::fs::write(t.path().join("c1/lock"), "999999999").unwrap();
        assert_eq!(state(&d, "c1"), LockState::Free);
        std::fs::write(t.path().join("c1/lock"), "1").unwrap(); // init: alive, not us
        assert_eq!(state(&d, "c1"), LockState::Other(1));
        let e = acquire(&d, "c1").expect_err("locked by pid 1");
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        assert_eq!(e.to_string(), "chat is locked by another process");
    }

    #[test]
    fn a_lock_that_is_not_a_file_is_named_never_opened() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("c1/lock")).unwrap();
        let d = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        assert_eq!(state(&d, "c1"), LockState::NotAFile);
        let e = acquire(&d, "c1").unwrap_err().to_string();
        assert!(
            e.contains("not a regular file") && e.contains("chat_force_unlock"),
            "{e}"
        );
        assert!(t.path().join("c1/lock").is_dir(), "left alone");
    }
}
