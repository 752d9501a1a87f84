//! A container's process cloned inside a user namespace, so that the namespaces its
//! clone makes (mount, pid, …) are owned by it: the creator cannot join a user namespace
//! and come back, so a short-lived vfork-like child of it (the hop) joins it and clones
//! the process with `CLONE_PARENT`, which makes it the creator's child as any
//! container's process is (runc's nsexec joins the user namespace before it unshares the
//! rest, for the same reason). A pod's container is cloned vfork-like in turn
//! ([`vfork_in`]); a container of its own fork-like, since its creator talks to it while
//! it waits for `start` ([`fork_in`]). The pause of a pod whose containers share a pid
//! namespace is made the same way, fork-like, as PID 1 of a new one ([`pid1_in`]): the first
//! process of a pid namespace owned by a user namespace must be made from inside it.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::prepare::Prepared;
use super::{Error, Result};
use crate::sys::clone::Cloned;

/// Runs `main(hop)` in a hop, vfork-like and placed in `cgroup`, until it has exited; what
/// it did is in `hop`.
///
/// # Safety
/// As [`crate::sys::clone::clone3_vfork`].
unsafe fn run_hop<T>(
    cgroup: Option<BorrowedFd>,
    main: extern "C" fn(*mut libc::c_void) -> !,
    hop: &mut T,
) -> Result<()> {
    let h = crate::sys::clone::clone3_vfork(
        crate::sys::clone::CLONE_CLEAR_SIGHAND,
        cgroup,
        main,
        hop as *mut T as *mut libc::c_void,
    )
    .map_err(|e| Error::os("clone3", e))?;
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(h.pid), None);
    Ok(())
}

/// What the hop of [`vfork_in`] needs, in the waiting parent's memory.
struct Hop<'a, 'b> {
    userns: RawFd,
    /// A target container's pidfd, whose pid namespace the process joins.
    pid_ns: Option<RawFd>,
    /// The container's clone flags (its mount and pid namespaces).
    flags: u64,
    child: &'a mut super::VforkChild<'b>,
    /// Set by the hop: the container's pid, or 0 if the hop failed (its error is on the
    /// start-result socket).
    pid: i32,
}

/// A pod's new container in the pod's user namespace `userns` (and the pid namespace of
/// the target whose pidfd is `pid_ns`), cloned with `flags` to run `child`. The hop is
/// placed in the container's cgroup and the process inherits it; the hop has exited, and
/// the process exec'd or failed, when this returns.
///
/// # Safety
/// As [`crate::sys::clone::clone3_vfork`].
pub(super) unsafe fn vfork_in(
    userns: BorrowedFd,
    pid_ns: Option<RawFd>,
    flags: u64,
    cgroup: Option<BorrowedFd>,
    child: &mut super::VforkChild,
) -> Result<Cloned> {
    let mut hop = Hop {
        userns: userns.as_raw_fd(),
        pid_ns,
        flags,
        child,
        pid: 0,
    };
    let ours = hop.child.other;
    run_hop(cgroup, hop_child, &mut hop)?;
    if hop.pid <= 0 {
        let mut buf = [0u8; 1024];
        // SAFETY: recv into a live buffer; not waiting: the hop has exited.
        let n = libc::recv(ours, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT);
        // The hop's own failure, or its child's, is the line it wrote.
        return Err(match n {
            n if n > 0 => Error::Start(String::from_utf8_lossy(&buf[..n as usize]).into_owned()),
            _ => Error::Setup("the hop into the pod's user namespace exited".to_string()),
        });
    }
    pidfd_of(hop.pid)
}

/// The pidfd of our child `pid` (CLONE_PARENT): its pid stays its own until we reap it.
/// Without one the process is killed and reaped.
fn pidfd_of(pid: i32) -> Result<Cloned> {
    match crate::sys::pidfd::open(pid) {
        Ok(pidfd) => Ok(Cloned { pid, pidfd }),
        Err(e) => {
            // SAFETY: our child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
            Err(Error::os("pidfd_open of the container's process", e))
        }
    }
}

extern "C" fn hop_child(arg: *mut libc::c_void) -> ! {
    // SAFETY: `vfork_in` passes a live Hop and waits until we exit.
    let h = unsafe { &mut *(arg as *mut Hop) };
    let sock = h.child.sock;
    let fail = |what: &str, e: std::io::Error| -> ! {
        let msg = format!("{what}: {e}");
        // SAFETY: writing a message to the start-result socket, then exiting.
        unsafe {
            libc::write(sock, msg.as_ptr().cast(), msg.len());
            libc::_exit(128)
        }
    };
    // The pid namespace first, as host root: joining by pidfd takes ptrace access to the
    // process, which a pod's shared namespace's pause, undumpable, gives nobody in the
    // pod's user namespace.
    if let Some(fd) = h.pid_ns {
        // SAFETY: setns with a pidfd and one namespace flag (our children only).
        if unsafe { libc::setns(fd, libc::CLONE_NEWPID) } != 0 {
            fail(
                "joining the pid namespace it shares",
                std::io::Error::last_os_error(),
            );
        }
    }
    // SAFETY: setns with the fd of a user namespace.
    if unsafe { libc::setns(h.userns, libc::CLONE_NEWUSER) } != 0 {
        fail(
            "joining the pod's user namespace",
            std::io::Error::last_os_error(),
        );
    }
    let child = &mut *h.child as *mut super::VforkChild as *mut libc::c_void;
    // SAFETY: we are single-threaded and our parent waits; `vfork_child` ends in exec or
    // _exit, and we wait for that before going on.
    match unsafe {
        crate::sys::clone::clone3_vfork_nested(
            h.flags | libc::CLONE_PARENT as u64,
            super::vfork_child,
            child,
        )
    } {
        Ok(c) => {
            h.pid = c.pid;
            // SAFETY: our work is done; the pidfd closes with us.
            unsafe { libc::_exit(0) }
        }
        Err(e) => fail("clone3 in the pod's user namespace", e),
    }
}

/// What a fork-like hop ([`fork_in`], [`pid1_in`]) needs, in the waiting creator's memory.
struct ForkHop<'a> {
    userns: RawFd,
    flags: u64,
    what: Forked<'a>,
    /// Set by the hop: the process's pid, or why there is none. Plain values: what the
    /// hop allocates is gone once it has exited (`sys::child_heap`).
    out: HopOut,
}

/// What a fork-like hop did.
#[derive(Clone, Copy)]
enum HopOut {
    /// It exited without a word.
    Exited,
    Cloned(i32),
    /// The step that failed and its errno.
    Failed(&'static str, i32),
}

/// What the hop's child runs.
enum Forked<'a> {
    /// A container's set-up, `init::run(p)` on the socket end `ends[0]` (`ends[1]`, the
    /// creator's, closed in the child).
    Init { p: &'a Prepared, ends: [RawFd; 2] },
    /// `main(arg)`, which never returns.
    Main { main: fn(RawFd) -> !, arg: RawFd },
}

/// Runs `hop` in a hop placed in `cgroup`; the pidfd of the process it cloned.
///
/// # Safety
/// Single-threaded caller.
unsafe fn fork_hop(cgroup: Option<BorrowedFd>, mut hop: ForkHop) -> Result<Cloned> {
    run_hop(cgroup, fork_hop_main, &mut hop)?;
    match hop.out {
        HopOut::Cloned(pid) => pidfd_of(pid),
        HopOut::Failed(what, errno) => {
            Err(Error::os(what, std::io::Error::from_raw_os_error(errno)))
        }
        HopOut::Exited => Err(Error::Setup(
            "the hop into the user namespace exited".into(),
        )),
    }
}

/// Clone the container's process with `flags` (its new namespaces) from inside `userns`,
/// in the cgroup `cgroup`; it runs `init::run(p)` on the socket end `ends[0]`.
///
/// # Safety
/// Single-threaded caller.
pub unsafe fn fork_in(
    userns: BorrowedFd,
    flags: u64,
    cgroup: Option<BorrowedFd>,
    p: &Prepared,
    ends: [RawFd; 2],
) -> Result<Cloned> {
    let hop = ForkHop {
        userns: userns.as_raw_fd(),
        flags,
        what: Forked::Init { p, ends },
        out: HopOut::Exited,
    };
    fork_hop(cgroup, hop)
}

/// Our child, PID 1 of a new pid namespace owned by `userns`, running `main(arg)` with a
/// copy of our memory (fork-like) in our cgroup.
///
/// # Safety
/// Single-threaded caller; `main` must not return (it ends in `_exit` or runs for good).
pub unsafe fn pid1_in(userns: BorrowedFd, main: fn(RawFd) -> !, arg: RawFd) -> Result<Cloned> {
    let hop = ForkHop {
        userns: userns.as_raw_fd(),
        flags: libc::CLONE_NEWPID as u64,
        what: Forked::Main { main, arg },
        out: HopOut::Exited,
    };
    fork_hop(None, hop)
}

extern "C" fn fork_hop_main(arg: *mut libc::c_void) -> ! {
    // SAFETY: `fork_hop` passes a live Hop and waits until we exit.
    let h = unsafe { &mut *(arg as *mut ForkHop) };
    // SAFETY: setns with the fd of a user namespace.
    if unsafe { libc::setns(h.userns, libc::CLONE_NEWUSER) } != 0 {
        h.out = HopOut::Failed("joining the user namespace", errno());
        // SAFETY: exiting the hop.
        unsafe { libc::_exit(1) }
    }
    // SAFETY: fork-like: the child has its own copy of our memory and ends in exec or
    // _exit, or runs for good.
    match unsafe { crate::sys::clone::clone3(h.flags | libc::CLONE_PARENT as u64, None) } {
        Ok(None) => match h.what {
            Forked::Init { p, ends } => {
                // SAFETY: the creator's end, our copy of it.
                unsafe { libc::close(ends[1]) };
                // SAFETY: our copy of the child's end, ours to own.
                let sock = unsafe { OwnedFd::from_raw_fd(ends[0]) };
                crate::runtime::init::run(p, &[], sock)
            }
            Forked::Main { main, arg } => main(arg),
        },
        Ok(Some(c)) => h.out = HopOut::Cloned(c.pid),
        Err(e) => {
            h.out = HopOut::Failed(
                "clone3 in the user namespace",
                e.raw_os_error().unwrap_or(libc::EIO),
            )
        }
    }
    // SAFETY: exiting the hop; the pidfd closes with it.
    unsafe { libc::_exit(0) }
}

/// This thread's errno, as a plain value.
fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
