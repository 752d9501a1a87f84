//! Process file descriptors: a handle on a process that a reused pid cannot fool.

use std::io;

/// `pidfd_send_signal(2)`: signal a process through its pidfd, immune to pid reuse.
pub fn send_signal(pidfd: &std::os::fd::OwnedFd, sig: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
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
