//! Process file descriptors: a handle on a process that a reused pid cannot fool. A pidfd
//! comes from `clone3` (`sys::clone`) for our children, or from [`open`] for a process
//! found by its pid; it turns readable when the process exits.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `pidfd_open(2)`: a pidfd for the process `pid` (of our pid namespace), close-on-exec.
pub fn open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd it returns is ours alone.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that only we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The pid of `pidfd`'s process as the procfs at `proc_dir` numbers it: the `Pid:` line
/// of the pidfd's fdinfo there, which the kernel gives in that procfs's pid namespace. A
/// supervisor in the pod's pid namespace names its containers to systemd so, through the
/// host's /proc opened before it left the host's namespace.
pub fn pid_in(proc_dir: BorrowedFd, pidfd: BorrowedFd) -> io::Result<i32> {
    let fd = nix::fcntl::openat(
        proc_dir,
        format!("self/fdinfo/{}", pidfd.as_raw_fd()).as_str(),
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    let text = io::read_to_string(std::fs::File::from(fd))?;
    fdinfo_pid(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "no pid in the pidfd's fdinfo (the process has exited, or the kernel is older than 5.4)",
        )
    })
}

/// The `Pid:` of a pidfd's fdinfo; none when it is `-1` (exited) or `0` (not in that pid
/// namespace).
fn fdinfo_pid(text: &str) -> Option<i32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
        .filter(|p: &i32| *p > 0)
}

/// `pidfd_send_signal(2)`: signal a process through its pidfd, immune to pid reuse.
pub fn send_signal(pidfd: &OwnedFd, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall on an fd we own; no siginfo.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether the process has exited, waiting at most `timeout_ms` (0: just look, -1: until
/// it does). It may still have to be reaped.
pub fn exited(pidfd: &OwnedFd, timeout_ms: i32) -> io::Result<bool> {
    let mut fds = [libc::pollfd {
        fd: pidfd.as_fd().as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: poll on one pollfd of ours.
    match unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout_ms) } {
        n if n < 0 => Err(io::Error::last_os_error()),
        n => Ok(n > 0 && fds[0].revents & libc::POLLIN != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pidfd_names_its_process_as_a_procfs_numbers_it() {
        let child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let fd = open(child.id() as i32).unwrap();
        let proc_dir = std::fs::File::open("/proc").unwrap();
        let pid = pid_in(proc_dir.as_fd(), fd.as_fd());
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(pid.unwrap(), child.id() as i32);
        assert_eq!(fdinfo_pid("pos:\t0\nPid:\t-1\nNSpid:\t-1\n"), None);
        assert_eq!(fdinfo_pid("Pid:\t0\n"), None);
        assert_eq!(fdinfo_pid("flags:\t02000002\nPid:\t4242\n"), Some(4242));
    }

    #[test]
    fn a_pidfd_signals_its_process_and_turns_readable_when_it_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = open(child.id() as i32).unwrap();
        assert!(!exited(&fd, 0).unwrap());
        send_signal(&fd, libc::SIGKILL).unwrap();
        assert!(exited(&fd, 5000).unwrap());
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(open(-1).is_err());
    }
}
