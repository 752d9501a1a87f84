//! With `--cgroup-driver systemd` every run of a container is a transient scope in the
//! pod's slice, `podinit-<id>.scope` with the run's container id, as containerd's CRI
//! under kubelet's systemd driver makes `cri-containerd-<id>.scope`
//! (docs/interface.md §The systemd cgroup driver). As the runc front-end does, the
//! scope's directory is made first, the process is cloned into it, and systemd is then
//! asked for the unit with that process, which it takes over with the directory.
//!
//! systemd knows processes by their pids in its own (the host's) pid namespace, which the
//! supervisor has left: the outer process opens the host's /proc for it, where a pidfd's
//! fdinfo gives that pid.

use oci_spec::runtime::LinuxResources;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::error::{Error, Result};
use crate::cgroup::systemd::{self, Unit};
use crate::sys::devices::Rule;

/// The pod's slice, and the host's /proc to name processes to systemd.
pub struct Scopes {
    slice: String,
    host_proc: OwnedFd,
}

impl Scopes {
    /// For the pod's slice `slice`; in the outer process, before the supervisor leaves the
    /// host's pid namespace.
    pub fn new(slice: &str) -> Result<Scopes> {
        let host_proc = nix::fcntl::open(
            "/proc",
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| Error::sys("opening /proc", e))?;
        Ok(Scopes {
            slice: slice.to_string(),
            host_proc,
        })
    }

    /// The pod's slice.
    pub fn slice(&self) -> &str {
        &self.slice
    }

    /// The unit of the run with container id `id`.
    pub fn unit(&self, id: &str) -> Result<Unit> {
        Ok(systemd::scope(&self.slice, "podinit", id)?)
    }

    /// Ask systemd for `u` holding the process of `pidfd`, with its limits and devices.
    pub fn start(
        &self,
        u: &Unit,
        pidfd: BorrowedFd,
        r: &LinuxResources,
        devices: &[Rule],
    ) -> Result<()> {
        let pid = crate::sys::pidfd::pid_in(self.host_proc.as_fd(), pidfd).map_err(|e| {
            Error::io(
                format_args!("systemd unit {}: the process's host pid", u.name),
                e,
            )
        })?;
        Ok(systemd::start_scope(u, pid, r, devices)?)
    }
}
