//! What /proc says of a process, read with the `procfs` crate.

use procfs::process::{MountInfo, Process, Status};
use procfs::ProcError;
use std::io;

use super::error::{Error, Result};

pub use procfs::process::ProcState;

/// A constant of the C library and the machine (`sysconf(3)`, `name` a `libc::_SC_*`):
/// -1 when it has none.
pub fn sysconf(name: libc::c_int) -> i64 {
    // SAFETY: sysconf reads a constant; it has no memory effects.
    unsafe { libc::sysconf(name) }
}

/// The running kernel's release (`uname -r`), from uname(2).
pub fn kernel_release() -> Option<String> {
    // SAFETY: uname fills a zeroed struct of ours; its fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return None;
        }
        Some(
            std::ffi::CStr::from_ptr(u.release.as_ptr())
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// End this process at once with `code` (`_exit(2)`): no exit handlers, no buffers
/// flushed; for a forked child, whose buffers and handlers are its parent's.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit takes an integer and never returns.
    unsafe { libc::_exit(code) }
}

/// One malloc arena for every thread of this process (`mallopt(M_ARENA_MAX, 1)`): for a
/// process whose threads are few and idle, where an arena each is memory for nothing.
pub fn one_malloc_arena() {
    // SAFETY: mallopt takes plain integers and locks what it changes.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
}

/// `n` random bytes from the kernel: getrandom(2), one syscall and no file (a PID-1 podinit
/// may run where /dev has no urandom); never blocks after boot.
pub fn random_bytes(n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut done = 0;
    while done < n {
        let rest = &mut buf[done..];
        // SAFETY: getrandom writes at most `rest.len()` bytes into `rest`.
        let r = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
            continue;
        }
        done += r as usize;
    }
    Ok(buf)
}

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), None when there is no such process. With the pid it names a
/// process for good: a pid reused by a later process has another start time.
pub fn start_time(pid: i32) -> Option<u64> {
    Process::new(pid).ok()?.stat().ok().map(|s| s.starttime)
}

/// The scheduler state of process `pid` (the third field of its `stat`), None when
/// there is no such process.
pub fn state(pid: i32) -> Option<ProcState> {
    Process::new(pid).ok()?.stat().ok()?.state().ok()
}

/// Whether the process that had `start_time` as pid `pid` still runs. A zombie or a dead
/// one does not, as runc counts them: its container is stopped even before it is reaped.
pub fn is_running(pid: i32, start_time: u64) -> bool {
    let Ok(stat) = Process::new(pid).and_then(|p| p.stat()) else {
        return false;
    };
    stat.starttime == start_time
        && !matches!(
            stat.state(),
            Ok(ProcState::Zombie | ProcState::Dead) | Err(_)
        )
}

/// Whether process `pid` has begun to exit (PF_EXITING in its `stat` flags), a zombie
/// included, or is gone. A pid namespace's init that is exiting still runs until every
/// other process of the namespace has been reaped, and its namespace takes no new one.
pub fn exiting(pid: i32) -> bool {
    const PF_EXITING: u32 = 0x4;
    Process::new(pid)
        .and_then(|p| p.stat())
        .map_or(true, |s| s.flags & PF_EXITING != 0)
}

/// The parsed `/proc/<pid>/status` (names, ids, capability and signal masks).
pub fn status(pid: i32) -> Result<Status> {
    Process::new(pid)
        .and_then(|p| p.status())
        .map_err(|e| read_error(format!("/proc/{pid}/status"), e))
}

/// A failed read of a /proc file, with the errno procfs saw where it kept one.
fn read_error(path: String, e: ProcError) -> Error {
    let err = match e {
        ProcError::NotFound(_) => std::io::Error::from_raw_os_error(libc::ENOENT),
        ProcError::PermissionDenied(_) => std::io::Error::from_raw_os_error(libc::EACCES),
        ProcError::Io(e, _) => e,
        other => std::io::Error::other(other.to_string()),
    };
    Error::file("reading", path, err)
}

/// The mounts that process `pid` sees (`/proc/<pid>/mountinfo`), in their order there.
pub fn mountinfo(pid: i32) -> Result<Vec<MountInfo>> {
    Process::new(pid)
        .and_then(|p| p.mountinfo())
        .map(|m| m.0)
        .map_err(|e| read_error(format!("/proc/{pid}/mountinfo"), e))
}

/// The mounts this process sees (`/proc/self/mountinfo`: right in a new pid namespace
/// too, where our pid is not the one /proc knows us by).
pub fn own_mountinfo() -> Result<Vec<MountInfo>> {
    Process::myself()
        .and_then(|p| p.mountinfo())
        .map(|m| m.0)
        .map_err(|e| read_error("/proc/self/mountinfo".into(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exited_child_is_exiting_before_it_is_reaped() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        for _ in 0..1000 {
            if state(pid) == Some(ProcState::Zombie) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(state(pid), Some(ProcState::Zombie));
        assert!(exiting(pid));
        child.wait().unwrap();
    }

    #[test]
    fn this_process_is_running_until_its_start_time_differs() {
        let me = std::process::id() as i32;
        let t = start_time(me).expect("own start time");
        assert!(is_running(me, t));
        assert!(!is_running(me, t + 1), "another start time: a reused pid");
        // The test harness's main thread, whose state /proc/<pid>/stat shows, waits
        // (sleeping) while this test runs on another thread.
        assert!(matches!(
            state(me),
            Some(ProcState::Running | ProcState::Sleeping)
        ));
        assert_eq!(status(me).unwrap().pid, me);
        assert!(!exiting(me));
        assert!(mountinfo(me)
            .unwrap()
            .iter()
            .any(|m| m.mount_point == std::path::Path::new("/proc")));
    }

    #[test]
    fn a_missing_process_has_no_start_time() {
        // Above the kernel's pid_max ceiling (4194304): never a process.
        assert_eq!(start_time(i32::MAX), None);
        assert!(!is_running(i32::MAX, 0));
        let e = status(i32::MAX).unwrap_err().to_string();
        assert!(e.starts_with("reading /proc/2147483647/status: "), "{e}");
    }
}
