//! The sandbox's namespaces: the outer process clones the supervisor as PID 1 of new
//! pid/ipc/uts/mount namespaces and a network namespace (its own, `--netns`, or the
//! node's), or, in PID-1 mode, podinit finishes the namespaces a runtime gave it.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use super::{Error, RunOptions};
use crate::sandbox::statedir::StateDir;
use crate::supervisor::{self, EXIT_SANDBOX};
use crate::sys::cgroup::Placement;
use crate::sys::clone::Cloned;

/// The supervisor, cloned, as the outer process holds it.
pub(super) struct Supervisor {
    pub child: Cloned,
    /// Where the supervisor writes its exit status once the pod's end is written and its
    /// containers are gone, just before it exits: the pod's cgroups and state are removed
    /// while the kernel tears its namespaces and mounts down, instead of after.
    pub done: OwnedFd,
    /// Held open by the outer process for as long as it lives: the supervisor checks it
    /// for a hangup once its parent-death signal is set, in case we died before that.
    pub alive: OwnedFd,
}

/// Clone the supervisor into the pod's namespaces and the cgroup `placement`; it runs
/// `cfg` there and exits, this returns in the outer process only. The signals to relay
/// must be blocked already: the supervisor inherits the mask.
pub(super) fn clone_supervisor(
    cfg: supervisor::Config,
    sd: &StateDir,
    opts: &RunOptions,
    placement: &Placement,
) -> Result<Supervisor, Error> {
    let (alive_r, alive_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::errno("pipe", e))?;
    let (done_r, done_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::errno("pipe", e))?;
    let host = HostNamespaces::of(cfg.pod.spec.as_ref().expect("admitted pod has a spec"));
    if host.network && opts.netns.is_some() {
        return Err(Error::Refused(
            "--netns cannot be used with spec.hostNetwork: true".into(),
        ));
    }
    let netns = match &opts.netns {
        Some(p) => Some(std::fs::File::open(p).map_err(|e| {
            Error::io(format_args!("opening network namespace {}", p.display()), e)
        })?),
        None => None,
    };
    // A pod in a user namespace joins the network, IPC and UTS namespaces it owns after
    // the clone; its pid namespace stays the node's user namespace's (the supervisor is
    // host root), its containers' are the pod's (`runtime::Launch::user_ns`).
    let owned = cfg.userns.is_some();
    let cloned = crate::sys::clone::fork(
        clone_flags(host, netns.is_some(), owned),
        placement.dir.as_ref().map(|d| d.as_fd()),
    )
    .map_err(|e| Error::io("creating the pod namespaces (clone3)", e))?;
    let Some(child) = cloned else {
        drop((alive_w, done_r));
        if let Err(e) = crate::sys::cgroup::join_self(&placement.tasks) {
            crate::log::error(&format!("setting up the sandbox: {e}"));
            std::process::exit(EXIT_SANDBOX);
        }
        let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
        if outer_is_gone(alive_r) {
            std::process::exit(EXIT_SANDBOX);
        }
        if let Some(u) = &cfg.userns {
            if let Err(e) = crate::sandbox::userns::join_owned(u) {
                crate::log::error(&format!("setting up the sandbox: {e}"));
                std::process::exit(EXIT_SANDBOX);
            }
        }
        if let Some(ns) = &netns {
            if let Err(e) = nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET) {
                crate::log::error(&format!(
                    "setting up the sandbox: joining network namespace {}: {}",
                    opts.netns.as_deref().unwrap_or(Path::new("")).display(),
                    std::io::Error::from(e)
                ));
                std::process::exit(EXIT_SANDBOX);
            }
        }
        // A network namespace of our own making has loopback only: no address to read.
        let own_netns = netns.is_none() && !host.network;
        let code = super::supervise::supervise(cfg, sd, false, own_netns);
        let _ = nix::unistd::write(&done_w, &[code as u8]);
        std::process::exit(code);
    };
    drop((alive_r, done_w));
    Ok(Supervisor {
        child,
        done: done_r,
        alive: alive_w,
    })
}

/// The namespaces the supervisor is cloned into: a mount namespace always, and each of
/// the others unless the pod uses the node's (a joined `--netns` is set after the clone)
/// or they are owned by the pod's user namespace (`owned`: joined after the clone).
fn clone_flags(host: HostNamespaces, join_netns: bool, owned: bool) -> u64 {
    let mut flags = libc::CLONE_NEWNS as u64;
    if !host.pid {
        flags |= libc::CLONE_NEWPID as u64;
    }
    if owned {
        return flags;
    }
    if !host.ipc {
        flags |= libc::CLONE_NEWIPC as u64;
    }
    if !host.network {
        flags |= libc::CLONE_NEWUTS as u64;
        if !join_netns {
            flags |= libc::CLONE_NEWNET as u64;
        }
    }
    flags
}

/// In the supervisor: whether the outer process died before our parent-death signal was
/// set (its end of the pipe is then closed).
fn outer_is_gone(alive: OwnedFd) -> bool {
    let mut fds = [nix::poll::PollFd::new(
        alive.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO);
    fds[0]
        .revents()
        .is_some_and(|r| r.intersects(nix::poll::PollFlags::POLLHUP))
}

/// Which of the caller's namespaces the pod uses instead of its own (`hostNetwork`, which
/// brings the node's UTS namespace with it, `hostPID`, `hostIPC`).
#[derive(Clone, Copy)]
pub(super) struct HostNamespaces {
    pub network: bool,
    pub pid: bool,
    pub ipc: bool,
}

impl HostNamespaces {
    pub fn of(spec: &k8s_openapi::api::core::v1::PodSpec) -> HostNamespaces {
        HostNamespaces {
            network: spec.host_network == Some(true),
            pid: spec.host_pid == Some(true),
            ipc: spec.host_ipc == Some(true),
        }
    }
}

/// PID-1 mode: the runtime made the namespaces and mounted /proc. The hostname is set when
/// the UTS namespace lets us (it is the sandbox's own); loopback is brought up.
pub(super) fn given_namespaces(hostname: &str, host: HostNamespaces) -> Result<(), Error> {
    let _ = nix::sys::prctl::set_dumpable(false);
    if host.network {
        return Ok(());
    }
    let current = nix::unistd::gethostname().ok();
    if current.as_ref().and_then(|h| h.to_str()) != Some(hostname) {
        match nix::unistd::sethostname(hostname) {
            Ok(()) | Err(nix::errno::Errno::EPERM) => {}
            Err(e) => {
                return Err(Error::errno(
                    format_args!("setting hostname {hostname:?}"),
                    e,
                ))
            }
        }
    }
    crate::sys::net::loopback_up().map_err(Error::Os)
}

/// The supervisor's own view: private mount propagation, a /proc of the pod's pid
/// namespace, the hostname, loopback up; it is not dumpable (CVE-2019-5736 class). (Its
/// parent-death signal is set right after the clone.)
pub(super) fn setup_namespaces(hostname: &str, host: HostNamespaces) -> Result<(), Error> {
    use nix::mount::{mount, MsFlags};
    let _ = nix::sys::prctl::set_dumpable(false);
    if host.pid {
        // Not PID 1 of anything: the containers' orphans still come to us to reap.
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|e| Error::errno("making / rslave", e))?;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| Error::errno("mounting /proc for the pod's pid namespace", e))?;
    if host.network {
        return Ok(());
    }
    nix::unistd::sethostname(hostname)
        .map_err(|e| Error::errno(format_args!("setting hostname {hostname:?}"), e))?;
    crate::sys::net::loopback_up().map_err(Error::Os)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: HostNamespaces = HostNamespaces {
        network: false,
        pid: false,
        ipc: false,
    };

    #[test]
    fn a_pod_gets_every_namespace_it_does_not_share_with_the_node() {
        let all = (libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWNET) as u64;
        assert_eq!(clone_flags(NONE, false, false), all);
        // A joined network namespace replaces the pod's own; the UTS one stays.
        assert_eq!(
            clone_flags(NONE, true, false),
            all & !(libc::CLONE_NEWNET as u64)
        );
        let host = HostNamespaces {
            network: true,
            pid: true,
            ipc: true,
        };
        assert_eq!(clone_flags(host, false, false), libc::CLONE_NEWNS as u64);
        // In a user namespace: net, ipc and uts are the ones it owns, joined after.
        assert_eq!(
            clone_flags(NONE, false, true),
            (libc::CLONE_NEWNS | libc::CLONE_NEWPID) as u64
        );
        let host_pid = HostNamespaces { pid: true, ..NONE };
        assert_eq!(
            clone_flags(host_pid, false, false) & libc::CLONE_NEWPID as u64,
            0
        );
    }
}
