//! podinit's own low-level runtime: create a container process from an OCI spec, and
//! nothing more. It knows no pod, manifest or supervisor; it stands on `sys`.
//!
//! The caller calls [`spawn`]: everything the child needs is computed first
//! (`prepare::Prepared`), then one `clone3` makes the child directly in a new mount (and
//! pid) namespace — PID 1 of its own pid namespace and the caller's direct child, with no
//! intermediate process. It is born in its cgroup (v2) or moves itself there first thing
//! (v1): see [`Placement`]. The child sets up its root filesystem and credentials
//! (`init`) and execs. The clone is vfork-like (`sys::clone::clone3_vfork`): the child
//! runs in the caller's memory on a stack of its own while the caller waits until it has
//! exec'd or failed, so no address space is copied for a process that replaces it at
//! once. The wait adds no new way to hang: the filesystems the child's setup touches (the
//! bundle's, under the overlay, and the volumes' host paths) the caller has just read,
//! stat'ed or mounted itself. The start result is decided when the clone returns: a
//! failing child writes its error on a CLOEXEC SOCK_SEQPACKET pair before it exits, and a
//! child that execs releases us only past exec's point of no return. Waiting for the
//! socket's EOF instead (the close-on-exec, later in exec) would make every start wait
//! for the new program to run first, since the scheduler wakes the caller on the child's
//! CPU.

mod caps_set;
pub mod container;
mod error;
pub mod hooks;
mod hop;
mod init;
pub mod mounts;
mod prepare;
pub mod seccomp;
mod sync;
mod syscall_table;

pub use error::{Error, Result};

use crate::sys::cgroup::Placement;
use oci_spec::runtime::Spec;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub struct Launch<'a> {
    /// The container's name, whole: the errors of a process joining it say which container
    /// (a new container's errors are named by the caller, who knows which it started).
    pub name: &'a str,
    /// The merged spec: `root.path` absolute; network, ipc and uts namespaces removed (the
    /// child inherits the pod's from the supervisor).
    pub spec: &'a Spec,
    /// The supervisor's fds that become the container's 0, 1 and 2.
    pub stdio: [RawFd; 3],
    /// Where the process goes before it runs anything of its own.
    pub cgroup: &'a Placement,
    /// Instead of a new pid namespace, join the one of this process (a pidfd): an
    /// ephemeral container with a `targetContainerName`, or a container of a pod whose
    /// shared pid namespace is its pause's.
    pub pid_ns_of: Option<&'a OwnedFd>,
    /// The pod's user namespace (`hostUsers: false`): a new container's mount and pid
    /// namespaces are made inside it, owned by it; an exec joins it with the container's.
    pub user_ns: Option<BorrowedFd<'a>>,
}

pub struct Spawned {
    pub pid: nix::unistd::Pid,
    pub pidfd: OwnedFd,
    /// Why setup or exec failed in the child, which exits with 128 after writing it; None:
    /// the process exec'd and runs the spec's program.
    pub start_error: Option<String>,
    /// The master of the process's terminal (`process.terminal`), non-blocking.
    pub console: Option<OwnedFd>,
}

/// Create the container's process and release it once it is in its cgroups. An error
/// means nothing runs (the spec could not be prepared, clone failed, or the process could
/// not be placed in its cgroup and was killed: the caller reaps it as usual).
pub fn spawn(l: &Launch) -> Result<Spawned> {
    start(l, None)
}

/// Make the binary this process runs unwritable from any container it will start, by
/// running it again from a read-only mount of itself (`sys::exe`): called by each
/// front-end before it makes a container process, once. Returns only when it did not
/// re-exec; EPERM (no CAP_SYS_ADMIN, as podinit in another runtime's container) is not an
/// error, since the runtime that made that container guards the host's binary.
pub fn seal_own_binary() -> std::io::Result<()> {
    match crate::sys::exe::reexec_sealed() {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(()),
        r => r,
    }
}

/// As [`seal_own_binary`], for `podinit runc`'s verbs that start a container process:
/// where the binary may not be mounted (EPERM: a user without root, or a container
/// without CAP_SYS_ADMIN) it runs again from a sealed copy in memory, as runc 1.2 does,
/// rather than stay writable; a runc verb lives only as long as its container's set-up
/// (or its `run`), so the copy's memory is short-lived.
pub fn seal_own_binary_or_copy() -> std::io::Result<()> {
    match crate::sys::exe::reexec_sealed() {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => crate::sys::exe::reexec_sealed_copy(),
        r => r,
    }
}

/// Our child, PID 1 of a new pid namespace owned by the user namespace `userns`, running
/// `main(arg)` on a copy of our memory: the first process of such a namespace must be made
/// from inside the user namespace, which we cannot join and leave (`hop`).
/// The caller must be single-threaded (the supervisor is): checked, an error otherwise.
pub fn spawn_pid1(
    userns: BorrowedFd,
    main: fn(RawFd) -> !,
    arg: RawFd,
) -> Result<crate::sys::clone::Cloned> {
    crate::sys::clone::single_threaded("making a pid namespace's first process")
        .map_err(|e| Error::Setup(e.to_string()))?;
    // SAFETY: checked just now: this is the only thread; `main` never returns.
    unsafe { hop::pid1_in(userns, main, arg) }
}

/// Start `l.spec.process` inside the running container whose main process `target` (a
/// pidfd) is: exec hooks and probes, `podinit exec`. It joins the container's pid, mount
/// and cgroup namespaces (the pod's net, ipc and uts it shares already) and is written to
/// `l.cgroup` (the container's cgroup) before it runs. Like [`spawn`], it is the
/// supervisor's direct child and its start result is decided when this returns.
pub fn spawn_in(target: &OwnedFd, l: &Launch) -> Result<Spawned> {
    start(l, Some(target))
}

fn start(l: &Launch, join: Option<&OwnedFd>) -> Result<Spawned> {
    let prepared = prepare::Prepared::from_spec(l.spec, l.stdio)
        .map_err(|e| e.named(l.name, join.is_some()))?;
    start_prepared(l, prepared, join)
}

fn start_prepared(
    l: &Launch,
    mut prepared: prepare::Prepared,
    join: Option<&OwnedFd>,
) -> Result<Spawned> {
    prepared.join = join.map(|fd| fd.as_raw_fd());
    if l.user_ns.is_some() {
        prepared.user_ns_root = true;
        if join.is_some() {
            // Into the container's user namespace first: the kernel then joins its mount
            // namespace with the credentials of that namespace.
            prepared.join_flags |= libc::CLONE_NEWUSER;
        }
    }
    let (parent_end, child_end) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| crate::sys::Error::syscall("socketpair", "", e))?;
    if prepared.console_sock < 0 {
        prepared.console_sock = child_end.as_raw_fd();
    }
    // The supervisor's signal handlers are not the child's: reset by the kernel, so that
    // none of them can run in the child (ignored signals the child resets itself).
    let mut flags = crate::sys::clone::CLONE_CLEAR_SIGHAND;
    // Joining: the container's pid namespace becomes ours for children just for this
    // clone (setns to a descendant pid namespace and back is allowed; only
    // pid_for_children changes).
    let mut restore_pid_ns = None;
    // A new container in the pod's user namespace is cloned by a hop, which joins a
    // target's pid namespace itself: born there, it would see the container's pid as
    // that namespace numbers it, not as we do.
    let hop = join.is_none() && l.user_ns.is_some();
    let mut hop_pid_ns = None;
    match join.or(l.pid_ns_of) {
        None => {
            flags |= libc::CLONE_NEWNS as u64;
            if prepared.new_pid_ns {
                flags |= libc::CLONE_NEWPID as u64;
            }
        }
        Some(target) if prepared.new_pid_ns => {
            if join.is_none() {
                // A new container in another one's pid namespace: its own mounts.
                flags |= libc::CLONE_NEWNS as u64;
            }
            if hop {
                hop_pid_ns = Some(target.as_raw_fd());
            } else {
                let own = std::fs::File::open("/proc/self/ns/pid")
                    .map_err(|e| crate::sys::Error::file("opening", "/proc/self/ns/pid", e))?;
                // SAFETY: setns with a pidfd and one namespace flag.
                if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWPID) } != 0 {
                    let errno = nix::errno::Errno::last();
                    let what = if join.is_some() {
                        "joining the container's pid namespace"
                    } else {
                        "joining the pid namespace of its target container"
                    };
                    let e = Error::from(crate::sys::Error::syscall(what, "", errno));
                    return Err(e.named(l.name, join.is_some()));
                }
                restore_pid_ns = Some(own);
            }
        }
        Some(_) => {
            if join.is_none() {
                flags |= libc::CLONE_NEWNS as u64;
            }
        }
    }
    let cgroup = l.cgroup.dir.as_ref().map(|d| d.as_fd());
    // vfork-like: no page tables to copy, no page copied on write, no copied address space
    // to tear down at exec. The child's setup (mounts, credentials) waits for nothing of
    // ours, and we only resume once it has exec'd or failed.
    let mut args = VforkChild {
        prepared: &prepared,
        tasks: &l.cgroup.tasks,
        sock: child_end.as_raw_fd(),
        other: parent_end.as_raw_fd(),
    };
    let cloned = match l.user_ns.filter(|_| hop) {
        // SAFETY: as below.
        Some(userns) => unsafe { hop::vfork_in(userns, hop_pid_ns, flags, cgroup, &mut args) },
        // SAFETY: the supervisor is single-threaded; `vfork_child` only runs `init::run`,
        // which ends in exec or _exit and frees nothing of ours; `args` outlives the call.
        None => unsafe {
            crate::sys::clone::clone3_vfork(
                flags,
                cgroup,
                vfork_child,
                &mut args as *mut VforkChild as *mut libc::c_void,
            )
        }
        .map_err(|e| Error::os("clone3", e)),
    };
    if let Some(own) = restore_pid_ns {
        // SAFETY: back to our own pid namespace for later children.
        if unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWPID) } != 0 {
            crate::log::warn(&format!(
                "restoring the supervisor's pid namespace: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    let child = cloned?;
    drop(child_end);
    let (console, start_error) = start_result(&parent_end);
    Ok(Spawned {
        pid: nix::unistd::Pid::from_raw(child.pid),
        pidfd: child.pidfd,
        start_error,
        console,
    })
}

/// What a vfork-like child of [`start`] needs, borrowed from the waiting parent.
struct VforkChild<'a> {
    prepared: &'a prepare::Prepared,
    tasks: &'a [std::path::PathBuf],
    /// The child's end of the start-result socket (the fd number is the same in the
    /// child's copy of the fd table).
    sock: std::os::fd::RawFd,
    /// The parent's end, closed in the child.
    other: std::os::fd::RawFd,
}

extern "C" fn vfork_child(arg: *mut libc::c_void) -> ! {
    // SAFETY: `start` passes a live VforkChild and waits until we exec or exit.
    let a = unsafe { &*(arg as *const VforkChild) };
    // SAFETY: our copies of the fds; the parent's stay open in its own table.
    unsafe { libc::close(a.other) };
    // SAFETY: the child's copy of the fd is its own to own and close.
    let sock = unsafe { OwnedFd::from_raw_fd(a.sock) };
    init::run(a.prepared, a.tasks, sock)
}

/// The start result, once the vfork-like clone has returned: the terminal's master if the
/// child sent one, and a message if it failed; none (the child's end is still open until
/// its close-on-exec) means it exec'd.
fn start_result(fd: &OwnedFd) -> (Option<OwnedFd>, Option<String>) {
    let mut console = None;
    loop {
        match crate::sys::pty::recv_fd(fd.as_raw_fd()) {
            Ok(Some((_, Some(master)))) => {
                let _ = nix::fcntl::fcntl(
                    &master,
                    nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
                );
                console = Some(master);
            }
            Ok(Some((msg, None))) => {
                return (console, Some(String::from_utf8_lossy(&msg).into_owned()))
            }
            Ok(None) => return (console, None),
            Err(e) => return (console, Some(format!("reading the start result: {e}"))),
        }
    }
}
