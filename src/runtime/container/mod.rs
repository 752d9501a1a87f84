//! A container of its own, as runc makes one (docs/architecture.md §5, "A container of
//! its own"): no supervisor waits for it. [`create`] leaves its process set up and
//! blocked before exec until `start` opens the exec fifo for reading; the caller may exit
//! meanwhile and the process is re-parented to the caller's subreaper. [`exec`] starts a
//! further process in a running container, joining its namespaces through its pidfd.

mod cgroup_mount;
mod id_maps;
mod namespaces;

use nix::sys::socket;
use oci_spec::runtime::Spec;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::Path;

use super::prepare::{Namespaces, Prepared, Standalone};
use super::sync::Sync;
use super::Error;
use crate::sys;
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
    runtime_hooks: &mut dyn FnMut(i32) -> super::Result<()>,
) -> super::Result<Created> {
    let linux = c.spec.linux().clone().unwrap_or_default();
    let ns = namespaces::Plan::of(&linux)?;
    let mut p = Prepared::from_spec_with(c.spec, [0, 1, 2], Namespaces::Any)?;
    if ns.shared_mount && p.root_readonly {
        // Remounting the root read-only would remount the creator's mount holding it.
        return Err(Error::Spec(
            "root.readonly: needs a mount namespace of the container's own, and \
             linux.namespaces has none"
                .into(),
        ));
    }
    p.shared_mount_ns = ns.shared_mount;
    let created = create_prepared(c, &linux, ns, p, runtime_hooks);
    if created.is_err() && c.spec.linux().as_ref().is_some_and(shares_mounts) {
        // What the set-up mounted before it failed is in our mount namespace.
        release_shared_mounts(
            &c.spec
                .root()
                .as_ref()
                .map(|r| r.path().clone())
                .unwrap_or_default(),
        );
    }
    created
}

/// Whether a container of this `linux` section has no mount namespace of its own, and so
/// leaves its mounts in its creator's until [`release_shared_mounts`].
pub fn shares_mounts(linux: &oci_spec::runtime::Linux) -> bool {
    !linux
        .namespaces()
        .iter()
        .flatten()
        .any(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::Mount)
}

/// Detach what a container that shared our mount namespace mounted under its `rootfs`,
/// deepest first: `delete`'s part, which runc leaves undone. Best effort: a mount that is
/// gone already is what we want.
pub fn release_shared_mounts(rootfs: &Path) {
    let Ok(root) = std::fs::canonicalize(rootfs) else {
        return;
    };
    let Ok(info) = crate::sys::proc::own_mountinfo() else {
        return;
    };
    for point in below(&root, info.into_iter().map(|m| m.mount_point)) {
        let _ = sys::mount::detach(&point);
    }
}

/// The mount points strictly below `root`, deepest first (a point mounted twice comes
/// twice, to be unmounted twice).
fn below(root: &Path, points: impl Iterator<Item = std::path::PathBuf>) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = points
        .filter(|p| p != root && p.starts_with(root))
        .collect();
    v.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    v
}

fn create_prepared(
    c: &Create,
    linux: &oci_spec::runtime::Linux,
    ns: namespaces::Plan,
    mut p: Prepared,
    runtime_hooks: &mut dyn FnMut(i32) -> super::Result<()>,
) -> super::Result<Created> {
    let spec = c.spec;
    if p.terminal {
        p.console_sock = console_sock(c.console_socket)?;
    }
    // A cgroup namespace given by path is joined by the creator; a new one is made by the
    // child once it is in its cgroup, so that it is rooted there.
    p.new_cgroup_ns = ns.new_cgroup;
    p.keep_fds = c.preserve_fds;
    p.mounts = cgroup_mount::expand(std::mem::take(&mut p.mounts), spec, c.cgroup);
    let hooks = spec.hooks().clone().unwrap_or_default();
    let fifo = nix::fcntl::open(
        c.exec_fifo,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| sys::Error::syscall("opening the exec fifo", c.exec_fifo.display(), e))?;
    let (parent_end, child_end) = socket::socketpair(
        socket::AddressFamily::Unix,
        socket::SockType::SeqPacket,
        None,
        socket::SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| sys::Error::syscall("socketpair", "", e))?;
    p.standalone = Some(Standalone {
        sync: child_end.as_raw_fd(),
        fifo: fifo.as_raw_fd(),
        keep: [
            Some(child_end.as_raw_fd()),
            Some(fifo.as_raw_fd()),
            ns.user_path.as_ref().map(|f| f.as_raw_fd()),
            c.console_socket.map(|s| s.as_raw_fd()),
        ]
        .into_iter()
        .flatten()
        .collect(),
        user_ns: ns.user_path.as_ref().map(|f| f.as_raw_fd()),
        become_root: ns.new_user || ns.user_path.is_some(),
        runtime_hooks: hooks.prestart().as_ref().is_some_and(|h| !h.is_empty())
            || hooks
                .create_runtime()
                .as_ref()
                .is_some_and(|h| !h.is_empty()),
        create_container_hooks: hooks.create_container().clone().unwrap_or_default(),
        start_container_hooks: hooks.start_container().clone().unwrap_or_default(),
        no_pivot: c.no_pivot,
        keyring: if c.no_new_keyring {
            None
        } else {
            Some(
                CString::new(c.id)
                    .map_err(|_| Error::Spec("the container ID contains a NUL byte".into()))?,
            )
        },
    });
    // v1: a child still in our user namespace moves itself (see `Placement`); one born
    // in a new user namespace may not write the host's cgroup files, so we place it, at
    // the cost of the kernel's global lock.
    let tasks = &c.cgroup.tasks[..];
    let (self_placed, creator_placed) = if ns.new_user || ns.user_path.is_some() {
        (&[][..], tasks)
    } else {
        (tasks, &[][..])
    };
    // The child is born in the namespaces given by path (joined here for the clone and
    // left after it) and makes the others with the clone.
    let joined = ns.enter()?;
    let flags = crate::sys::clone::CLONE_CLEAR_SIGHAND | ns.clone_flags as u64;
    let cgroup = c.cgroup.dir.as_ref().map(|d| d.as_fd());
    let cloned = match ns.user_path.as_ref() {
        // New namespaces inside a user namespace given by path are made by a process
        // already in it, so that it owns them (a pid namespace of its own lets the
        // container mount /proc): a hop joins it and clones the child for us.
        Some(userns) if ns.clone_flags != 0 => {
            if let Some(s) = p.standalone.as_mut() {
                s.user_ns = None;
            }
            let ends = [child_end.as_raw_fd(), parent_end.as_raw_fd()];
            // SAFETY: single-threaded; the hop ends in _exit, its child in `init::run`.
            unsafe { super::hop::fork_in(userns.as_fd(), flags, cgroup, &p, ends) }
        }
        _ => {
            // SAFETY: the creating process is single-threaded; the child only runs
            // `init::run`, which ends in exec or _exit.
            match unsafe { crate::sys::clone::clone3(flags, cgroup) } {
                Ok(None) => {
                    drop(parent_end);
                    super::init::run(&p, self_placed, child_end)
                }
                Ok(Some(child)) => Ok(child),
                Err(e) => Err(Error::os("clone3", e)),
            }
        }
    };
    let left = joined.leave();
    let child = cloned?;
    drop(child_end);
    let kill = |why: Error| -> Error {
        let _ = crate::sys::pidfd::send_signal(&child.pidfd, libc::SIGKILL);
        reap(child.pid);
        why
    };
    left.map_err(&kill)?;
    for tasks in creator_placed {
        std::fs::write(tasks, child.pid.to_string())
            .map_err(|e| kill(sys::Error::file("placing the process in", tasks, e).into()))?;
    }
    if ns.new_user {
        id_maps::write(child.pid, linux).map_err(&kill)?;
    }
    let go = Sync::Go {
        creating: (c.state_json)(child.pid, "creating"),
        created: (c.state_json)(child.pid, "created"),
    }
    .encode();
    let setup = |what: &str, e: std::io::Error| Error::os(what, e);
    send(&parent_end, &go).map_err(|e| kill(setup("starting the container's set-up", e)))?;
    loop {
        let msg =
            recv(&parent_end).map_err(|e| kill(setup("waiting for the container's set-up", e)))?;
        match Sync::decode(&msg) {
            Some(Sync::Ready) => {
                return Ok(Created {
                    pid: child.pid,
                    pidfd: child.pidfd,
                })
            }
            Some(Sync::Hooks) => {
                runtime_hooks(child.pid).map_err(&kill)?;
                send(&parent_end, &Sync::Continue.encode())
                    .map_err(|e| kill(setup("resuming after the runtime hooks", e)))?;
            }
            Some(Sync::Failed(why)) => {
                reap(child.pid);
                return Err(Error::Start(why));
            }
            _ => {
                return Err(kill(Error::Start(
                    "the container's process exited during its set-up".to_string(),
                )))
            }
        }
    }
}

fn send(fd: &OwnedFd, msg: &[u8]) -> std::io::Result<()> {
    crate::sys::packet::send(fd.as_raw_fd(), msg)
}

/// One message (the child's error line at most); empty when the child has gone.
fn recv(fd: &OwnedFd) -> std::io::Result<Vec<u8>> {
    crate::sys::packet::recv(fd.as_raw_fd(), 64 << 10)
}

/// Collect a child that failed, so that no zombie outlives `create`.
fn reap(pid: i32) {
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
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
pub fn exec(e: &Exec) -> super::Result<super::Spawned> {
    let mut p = Prepared::from_spec_with(e.spec, e.stdio, Namespaces::Any)?;
    // Only the namespaces the container does not share with us: joining one's own user
    // namespace is an error.
    p.join_flags &= namespaces::differing(e.target)?;
    if p.join_flags & libc::CLONE_NEWNS == 0 {
        // The container shares our mount namespace: its root is where its init chroot'ed.
        let pid = namespaces::pid_of(e.target)?;
        p.exec_root = Some(
            CString::new(format!("/proc/{pid}/root"))
                .map_err(|_| Error::Spec("a NUL byte in a /proc path".into()))?,
        );
    }
    p.new_cgroup_ns = p.join_flags & libc::CLONE_NEWCGROUP != 0;
    p.keep_fds = e.preserve_fds;
    if p.terminal {
        p.console_sock = console_sock(e.console_socket)?;
    }
    super::start_prepared(
        &super::Launch {
            // The caller names the container in its errors.
            name: "",
            spec: e.spec,
            stdio: e.stdio,
            cgroup: e.cgroup,
            pid_ns_of: None,
            user_ns: None,
        },
        p,
        Some(e.target),
    )
}

/// The console socket a process with a terminal sends its master on.
fn console_sock(s: Option<BorrowedFd>) -> super::Result<RawFd> {
    s.map(|s| s.as_raw_fd()).ok_or_else(|| {
        Error::Spec(
            "process.terminal is true but no console socket was given (--console-socket)".into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_shared_namespace_releases_the_mounts_below_the_rootfs_deepest_first() {
        let points = [
            "/",
            "/b/rootfs",
            "/b/rootfs/dev",
            "/b/rootfs/proc",
            "/b/rootfs/dev/pts",
            "/b/rootfsx",
            "/b/rootfs/dev",
        ]
        .map(PathBuf::from);
        let got = below(Path::new("/b/rootfs"), points.into_iter());
        assert_eq!(got[0], PathBuf::from("/b/rootfs/dev/pts"));
        let mut rest: Vec<_> = got[1..].to_vec();
        rest.sort();
        assert_eq!(
            rest,
            ["/b/rootfs/dev", "/b/rootfs/dev", "/b/rootfs/proc"].map(PathBuf::from)
        );
    }

    #[test]
    fn only_a_spec_without_a_mount_namespace_shares_mounts() {
        let l = |v| serde_json::from_value::<oci_spec::runtime::Linux>(v).unwrap();
        assert!(shares_mounts(&l(
            serde_json::json!({"namespaces": [{"type": "pid"}]})
        )));
        assert!(!shares_mounts(&l(
            serde_json::json!({"namespaces": [{"type": "mount", "path": "/proc/1/ns/mnt"}]})
        )));
    }
}
