//! A container of its own, as runc makes one (docs/architecture.md §5): no supervisor
//! waits for it. [`create`] leaves its process set up and blocked before exec until
//! `start` opens the exec fifo for reading; the caller may exit meanwhile and the
//! process is re-parented to the caller's subreaper. [`exec`] starts a further process
//! in a running container, joining its namespaces through its pidfd.

use oci_spec::runtime::Spec;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::path::Path;

use crate::sys::cgroup::Placement;

/// What `create` needs beyond the spec.
pub struct Create<'a> {
    /// The container's ID, for error messages and the hooks' state.
    pub id: &'a str,
    /// config.json as read, `root.path` made absolute by the caller. Namespaces with a
    /// `path` are joined, the others made; the spec's hooks of the container's side
    /// (createContainer, startContainer) are run by the process itself.
    pub spec: &'a Spec,
    /// Where the process goes before it does anything of its own (made by the caller).
    pub cgroup: &'a Placement,
    /// The start gate, a FIFO the caller made: the process opens it for writing once set
    /// up, which blocks until `start` opens it for reading.
    pub exec_fifo: &'a Path,
    /// `--console-socket`, connected: with `process.terminal` the terminal's master is
    /// sent on it.
    pub console_socket: Option<BorrowedFd<'a>>,
    /// `--preserve-fds N`: fds 3..3+N are passed to the container's process.
    pub preserve_fds: u32,
    /// `--no-pivot`: move the root with MS_MOVE and chroot instead of pivot_root.
    pub no_pivot: bool,
    /// `--no-new-keyring`: keep the caller's session keyring.
    pub no_new_keyring: bool,
    /// The OCI state JSON the container's own hooks get on stdin, given the process's pid
    /// and the status to report ("creating" for createContainer, "created" for
    /// startContainer).
    pub state_json: &'a dyn Fn(i32, &str) -> String,
}

pub struct Created {
    pub pid: i32,
    pub pidfd: OwnedFd,
}

/// Create the container's process. `runtime_hooks(pid)` is called in the caller's
/// namespaces once the container's namespaces and mounts exist and before its root is
/// switched (prestart and createRuntime hooks); an error there, or any failure in the
/// process, kills it and is returned as one line. On success the process waits at the
/// exec fifo.
pub fn create(
    c: &Create,
    runtime_hooks: &mut dyn FnMut(i32) -> Result<(), String>,
) -> Result<Created, String> {
    let _ = (c, runtime_hooks);
    Err("runtime::container::create is not built yet".into())
}

/// A process to start in a running container.
pub struct Exec<'a> {
    /// The container's spec, whose `process` is replaced by the one to run; its
    /// `linux.namespaces` say which namespaces the container has of its own (joined).
    pub spec: &'a Spec,
    /// The pidfd of the container's init.
    pub target: &'a OwnedFd,
    /// The container's cgroup.
    pub cgroup: &'a Placement,
    /// 0–2 of the new process (ignored for a terminal).
    pub stdio: [RawFd; 3],
    pub console_socket: Option<BorrowedFd<'a>>,
    pub preserve_fds: u32,
}

/// Start `e.spec.process` in the container; returns once it has exec'd or failed, like
/// [`super::spawn_in`].
pub fn exec(e: &Exec) -> Result<super::Spawned, String> {
    let _ = e;
    Err("runtime::container::exec is not built yet".into())
}
