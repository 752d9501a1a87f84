//! Process file descriptors: a handle on a process that a reused pid cannot fool. A pidfd
//! comes from `clone3` (`sys::clone`) for our children, or from [`open`] for a process
//! found by its pid; it turns readable when the process exits.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

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
