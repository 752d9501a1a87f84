//! A container's process made inside a user namespace given by path, with new namespaces
//! owned by it: the creator cannot join a user namespace and come back, so a short-lived
//! vfork-like child (the hop) joins it and clones the process with CLONE_PARENT, which
//! makes it the creator's child as any container's process is (runc's nsexec joins the
//! user namespace before it unshares the rest, for the same reason).

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::runtime::prepare::Prepared;
use crate::sys::clone::Cloned;

struct Hop<'a> {
    userns: RawFd,
    flags: u64,
    p: &'a Prepared,
    /// The child's end of the sync socket, and the creator's (closed in the child).
    ends: [RawFd; 2],
    /// Set by the hop: the process's pid, or why there is none.
    out: Result<i32, String>,
}

/// Clone the container's process with `flags` (its new namespaces) from inside `userns`,
/// in the cgroup `cgroup`; it runs `init::run(p)` on the socket end `ends[0]`.
///
/// # Safety
/// Single-threaded caller.
pub(super) unsafe fn clone_in(
    userns: BorrowedFd,
    flags: u64,
    cgroup: Option<BorrowedFd>,
    p: &Prepared,
    ends: [RawFd; 2],
) -> Result<Cloned, String> {
    const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;
    let mut hop = Hop {
        userns: userns.as_raw_fd(),
        flags,
        p,
        ends,
        out: Err("the hop into the user namespace exited".into()),
    };
    let h = crate::sys::clone::clone3_vfork(
        CLONE_CLEAR_SIGHAND,
        cgroup,
        hop_main,
        &mut hop as *mut Hop as *mut libc::c_void,
    )
    .map_err(|e| format!("clone3: {e}"))?;
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(h.pid), None);
    let pid = std::mem::replace(&mut hop.out, Ok(0))?;
    match crate::sys::pidfd::open(pid) {
        Ok(pidfd) => Ok(Cloned { pid, pidfd }),
        Err(e) => {
            // SAFETY: our child (CLONE_PARENT), not yet reaped: the pid is still its own.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            Err(format!("pidfd_open of the container's process: {e}"))
        }
    }
}

extern "C" fn hop_main(arg: *mut libc::c_void) -> ! {
    // SAFETY: `clone_in` passes a live Hop and waits until we exit.
    let h = unsafe { &mut *(arg as *mut Hop) };
    // SAFETY: setns with the fd of a user namespace.
    if unsafe { libc::setns(h.userns, libc::CLONE_NEWUSER) } != 0 {
        h.out = Err(format!(
            "joining the user namespace: {}",
            std::io::Error::last_os_error()
        ));
        // SAFETY: exiting the hop.
        unsafe { libc::_exit(1) }
    }
    // SAFETY: fork-like: the child has its own copy of our memory and runs `init::run`,
    // which ends in exec or _exit.
    match unsafe { crate::sys::clone::clone3(h.flags | libc::CLONE_PARENT as u64, None) } {
        Ok(None) => {
            // SAFETY: the creator's end, our copy of it.
            unsafe { libc::close(h.ends[1]) };
            // SAFETY: our copy of the child's end, ours to own.
            let sock = unsafe { OwnedFd::from_raw_fd(h.ends[0]) };
            crate::runtime::init::run(h.p, &[], sock)
        }
        Ok(Some(c)) => h.out = Ok(c.pid),
        Err(e) => h.out = Err(format!("clone3 in the user namespace: {e}")),
    }
    // SAFETY: exiting the hop; the pidfd closes with it.
    unsafe { libc::_exit(0) }
}
