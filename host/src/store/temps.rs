//! Stale temporaries of atomic writes: a `kill -9` (or a power cut) between writing
//! `.<name>.tmp-<pid>-<n>` and renaming it over `<name>` leaves the temporary behind.
//!
//! A temporary is its writer's until the writer renames or removes it, so only one whose writer is
//! gone may go ([`writer_gone`]): its pid names no process, or names one that started after the
//! file was last written (the pid was reused: a container's processes get the same small pids on
//! every start, so "the pid is alive" alone would keep them forever). Two `bb7` processes may
//! serve one project (and every one shares `~/.bb7/`), so [`sweep_in_background`] also leaves
//! every temporary written after this process started: it cannot be a crashed writer's leftover
//! from before, and a live writer in another pid namespace (whose pid means nothing here) is
//! covered. It looks at the state directories and their direct subdirectories only ([`DEPTH`]);
//! a chat's own directory is swept when the chat is opened ([`super::sweep_dead_temps`]). Only
//! regular files with exactly that name pattern are touched; symlinks are never followed.

use std::io;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use cap_std::fs::{Dir, Metadata};

/// How far apart two clocks (the file's modification time; a process's start, from the boot
/// clock) may be and still be called ordered.
const MARGIN: Duration = Duration::from_secs(2);

/// How deep [`sweep_in_background`] looks: the state directory and its subdirectories (`chats/`,
/// where the index is written; `spend/`, `audit/`, ...), a few directories whatever the number of
/// chats. A chat's own directory (its `chat.json`, snapshots, outputs) is swept when the chat is
/// opened ([`super::sweep_dead_temps`], under its lock): `init` reopens the last active chat, the
/// one a crash mid-send leaves a temporary in. Walking every chat's directory at `init` was
/// measured at about 35 µs of system time per chat (0.18 s for 5,000), too much beside `chat_list`
/// on two cores.
const DEPTH: usize = 1;

/// The pid in a temporary file name of an atomic write (`.<name>.tmp-<pid>-<n>`).
pub(super) fn temp_owner(name: &str) -> Option<i32> {
    if !name.starts_with('.') {
        return None;
    }
    let (_, tail) = name.rsplit_once(".tmp-")?;
    let (pid, seq) = tail.split_once('-')?;
    seq.parse::<u64>().ok()?;
    pid.parse().ok().filter(|p| *p > 0)
}

/// Whether the writer of temporary `name`, last modified at `modified`, is gone: no process has its
/// pid, or the one that has it started after the file was last written. A name that is not a
/// temporary's, or a process whose start cannot be read, is never gone.
pub(super) fn writer_gone(name: &str, modified: SystemTime) -> bool {
    let Some(pid) = temp_owner(name) else {
        return false;
    };
    // Ours is never gone: a temporary of this process may be in flight (a chat's sweep can run
    // while a reply of that chat writes), and the start-time test below leans on the wall clock,
    // which a step (NTP, a resumed VM) can move past what we wrote. A leftover of an earlier
    // process that had our pid is removed by the next process with another one.
    if pid == std::process::id() as i32 {
        return false;
    }
    if !process_alive(pid) {
        return true;
    }
    process_start(pid).is_some_and(|start| modified + MARGIN < start)
}

fn process_alive(pid: i32) -> bool {
    if pid == std::process::id() as i32 {
        return true;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// When process `pid` started, on the wall clock: its start in clock ticks after boot
/// (`/proc/<pid>/stat`, field 22), moved onto the wall clock through the boot clock.
fn process_start(pid: i32) -> Option<SystemTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|h| *h > 0)?;
    let since_boot = Duration::from_nanos(ticks.checked_mul(1_000_000_000 / hz)?);
    let mut boot = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `boot` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut boot) } != 0 {
        return None;
    }
    let now_since_boot = Duration::new(
        u64::try_from(boot.tv_sec).ok()?,
        u32::try_from(boot.tv_nsec).ok()?,
    );
    let ago = now_since_boot.checked_sub(since_boot)?;
    SystemTime::now().checked_sub(ago)
}

/// Whether a directory entry is a stale temporary for a sweep that may only remove what was
/// written before `before`: a regular file (not followed), named as a temporary, last written
/// before `before`, whose writer is gone.
fn stale(name: &str, meta: &Metadata, before: SystemTime) -> bool {
    if !meta.is_file() || temp_owner(name).is_none() {
        return false;
    }
    let Ok(modified) = meta.modified().map(|m| m.into_std()) else {
        return false;
    };
    modified + MARGIN < before && writer_gone(name, modified)
}

/// Removes the stale temporaries under `dir`, `depth` directory levels deep (0: `dir` alone), of
/// files last written before `before`. Best effort: what cannot be listed or removed is left for
/// the next time. Returns how many were removed.
pub fn sweep(dir: &Dir, depth: usize, before: SystemTime) -> usize {
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let Ok(ft) = e.file_type() else {
            continue;
        };
        if ft.is_dir() {
            if depth > 0
                && let Ok(sub) = super::project::open_dir_nofollow(dir, &name, &name)
            {
                removed += sweep(&sub, depth - 1, before);
            }
        } else if ft.is_file()
            && temp_owner(&name).is_some()
            && e.metadata().is_ok_and(|m| stale(&name, &m, before))
        {
            removed += usize::from(dir.remove_file(&name).is_ok());
        }
    }
    removed
}

/// Sweeps the state directories `dirs` (a project's `.bb7/`, `~/.bb7/`; each once per process) on
/// a thread of its own, removing what crashed writers left before this process started (see the
/// module notes). Nothing waits for it: a session's requests are served meanwhile, and an exit cuts it
/// short harmlessly (each removal is one `unlink` of a file nobody will rename).
pub fn sweep_in_background(mut dirs: Vec<PathBuf>) {
    // Each directory once per process (a session may `init` again and again).
    static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        dirs.retain(|d| !swept.contains(d));
        swept.extend(dirs.iter().cloned());
    }
    if dirs.is_empty() {
        return;
    }
    let Some(started) = process_start(std::process::id() as i32) else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("bb7-sweep".into())
        .spawn(move || {
            for path in dirs {
                if let Ok(dir) = Dir::open_ambient_dir(&path, cap_std::ambient_authority()) {
                    let n = sweep(&dir, DEPTH, started);
                    if n > 0 {
                        tracing::info!(
                            "removed {n} stale temporary files under {}",
                            path.display()
                        );
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::debug!("no sweep of stale temporary files: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planted(d: &Dir, name: &str, age: Duration) {
        d.write(name, b"x").expect("write");
        let f = d.open(name).expect("open").into_std();
        let when = SystemTime::now() - age;
        f.set_times(
            std::fs::FileTimes::new()
                .set_modified(when)
                .set_accessed(when),
        )
        .expect("set times");
    }

    /// A temporary goes when its writer is gone and it was written before the sweep's start:
    /// a dead pid's, or one named for a live pid whose process started after it was written
    /// (the pid was reused). A live writer's stays, old or fresh, and so does anything written
    /// after the start, anything not named as a temporary, and anything not a regular file.
    #[test]
    fn only_temporaries_whose_writer_is_gone_are_removed() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = Dir::open_ambient_dir(t.path(), cap_std::ambient_authority()).expect("dir");
        d.create_dir_all("chats/c1/context").expect("dirs");
        let me = std::process::id();
        // A process started now: its pid on a file written before names an earlier process.
        let mut later = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let reused = later.id();
        let hour = Duration::from_secs(3600);
        // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
        let dead = 99_999_999;
        let gone = [
            format!(".index.json.tmp-{dead}-1"),
            format!("chats/.index.json.tmp-{dead}-2"),
            format!("chats/.a.json.tmp-{dead}-3"),
            // A live pid's, older than its process: an earlier process with the same pid.
            format!("chats/.b.json.tmp-{reused}-4"),
        ];
        for name in &gone {
            planted(&d, name, 2 * hour);
        }
        let kept_old = [
            // Too deep for this sweep (a chat's directory is swept when it is opened).
            format!("chats/c1/.chat.json.tmp-{dead}-5"),
            // Not our pattern.
            "chats/.index.json.tmp-x-6".to_string(),
            format!("chats/index.json.tmp-{dead}-7"),
            "chats/c1/chat.json".to_string(),
            // This process's own is never taken for a leftover, however old it looks.
            format!("chats/.c.json.tmp-{me}-12"),
        ];
        for name in &kept_old {
            planted(&d, name, 2 * hour);
        }
        // A live writer's (this process's), fresh; and a dead one's written after the start.
        let kept_fresh = [
            format!("chats/.index.json.tmp-{me}-8"),
            format!("chats/.index.json.tmp-{dead}-9"),
        ];
        for name in &kept_fresh {
            planted(&d, name, Duration::ZERO);
        }
        d.create_dir(format!("chats/.x.tmp-{dead}-10"))
            .expect("dir");
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            t.path().join("chats/c1/chat.json"),
            t.path().join(format!("chats/.l.tmp-{dead}-11")),
        )
        .expect("symlink");

        let before = SystemTime::now() - Duration::from_secs(60);
        assert_eq!(sweep(&d, DEPTH, before), gone.len());
        for name in &gone {
            assert!(!d.exists(name), "{name}");
        }
        for name in kept_old.iter().chain(&kept_fresh) {
            assert!(d.exists(name), "{name}");
        }
        assert!(d.is_dir(format!("chats/.x.tmp-{dead}-10")));
        assert!(
            d.symlink_metadata(format!("chats/.l.tmp-{dead}-11"))
                .is_ok()
        );
        let _ = later.kill();
        let _ = later.wait();
    }

    /// A pid names the writer only if its process started before the file was last written.
    #[test]
    fn a_reused_pid_is_no_writer() {
        let mut later = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let theirs = format!(".a.json.tmp-{}-1", later.id());
        let mine = format!(".a.json.tmp-{}-1", std::process::id());
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        assert!(writer_gone(&theirs, hour_ago));
        assert!(!writer_gone(&theirs, SystemTime::now() + MARGIN));
        // Ours never, whatever the clock says.
        assert!(!writer_gone(&mine, hour_ago));
        let _ = later.kill();
        let _ = later.wait();
        assert!(writer_gone(".a.json.tmp-99999999-1", SystemTime::now()));
        assert!(!writer_gone(
            "a.json.tmp-99999999-1",
            SystemTime::UNIX_EPOCH
        ));
    }

    #[test]
    fn this_process_started_in_the_past() {
        let start = process_start(std::process::id() as i32).expect("start");
        let now = SystemTime::now();
        assert!(start <= now + MARGIN, "{start:?} {now:?}");
        assert!(
            now.duration_since(start)
                .is_ok_and(|d| d < Duration::from_secs(24 * 3600))
        );
    }
}
