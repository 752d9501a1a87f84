//! The pause of a pod whose containers share a pid namespace in the pod's user namespace
//! (`pod::userns::PidNamespace::Pause`): PID 1 of that namespace, as Kubernetes' pause is,
//! made when the first container that joins it starts, and again at the next start after
//! it died (the kernel kills every process of a pid namespace whose init exits: the
//! containers then restart as their restart policy says). It is our child; killed and
//! reaped after the containers when the pod ends. If we are killed, it dies with our own
//! pid namespace.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::error::{Error, Result};
use super::Supervisor;
use crate::pod;

/// The pause process, as the supervisor holds it.
pub struct Pause {
    pid: i32,
    pidfd: OwnedFd,
    /// Killed by us at the pod's end: its exit is not news.
    ending: bool,
}

/// Make the pause in the user namespace `userns`: once this returns it runs, as the pod's
/// root, or it has failed and said why.
fn make(userns: std::os::fd::BorrowedFd) -> Result<Pause> {
    let (ready_r, pipe_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::sys("pipe", e))?;
    // Above stdio, which the pause replaces and keeps open: its closing all the others is
    // its ready.
    let ready_w = crate::sys::fd::dup_above_stdio(pipe_w.as_fd())
        .map_err(|e| Error::io("dup of a pipe", e))?;
    drop(pipe_w);
    let child = crate::runtime::spawn_pid1(
        userns,
        crate::sys::pause::run_in_user_namespace,
        ready_w.as_raw_fd(),
    )
    .map_err(|e| Error::from(e).within("making the pod's pause"))?;
    drop(ready_w);
    // Until it has closed its copy (ready) or written why it could not: it only makes
    // system calls on its own process before either.
    let mut buf = [0u8; 512];
    let n = nix::unistd::read(&ready_r, &mut buf).unwrap_or(0);
    if n > 0 {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child.pid), None);
        return Err(Error::Pause(
            String::from_utf8_lossy(&buf[..n]).into_owned(),
        ));
    }
    Ok(Pause {
        pid: child.pid,
        pidfd: child.pidfd,
        ending: false,
    })
}

impl Supervisor<'_> {
    /// A pidfd of the pause whose pid namespace a starting container joins; made now when
    /// there is none, or the last one has died or is dying (its namespace takes no new
    /// process).
    pub(super) fn pause_pidfd(&mut self) -> Result<OwnedFd> {
        if let Some(p) = &self.pause {
            if crate::sys::proc::exiting(p.pid) {
                // Reaped later as any orphan is.
                self.pause_died(None);
            }
        }
        if self.pause.is_none() {
            let userns = self.cfg.userns.as_ref().ok_or_else(|| {
                Error::Pause("the pod has no user namespace for its pause".into())
            })?;
            self.pause = Some(make(userns.user_fd())?);
        }
        let p = self.pause.as_ref().expect("made above");
        p.pidfd
            .try_clone()
            .map_err(|e| Error::io("dup of the pause's pidfd", e))
    }

    /// `pid` was reaped with wait status `status`: if it was the pause, it is forgotten
    /// (said when the pod did not end it).
    pub(super) fn pause_reaped(&mut self, pid: i32, status: i32) -> bool {
        match &self.pause {
            Some(p) if p.pid == pid => {
                self.pause_died(Some(status));
                true
            }
            _ => false,
        }
    }

    /// The pause died (`status`, when reaped) while the pod runs: said in the log and as
    /// kubelet's event for a sandbox that must be made again.
    fn pause_died(&mut self, status: Option<i32>) {
        let Some(p) = self.pause.take() else { return };
        if p.ending {
            return;
        }
        let how = match status.map(crate::pod::termination::exit_code) {
            Some((_, Some(sig))) => format!(" (signal {sig})"),
            Some((code, None)) => format!(" (exit code {code})"),
            None => String::new(),
        };
        crate::log::warn(&format!(
            "the pod's pause, PID 1 of its shared pid namespace, exited{how}: every process in that namespace died with it; a new pause is made for the next container start"
        ));
        self.event(pod::events::sandbox_changed());
    }

    /// At the pod's end, after its containers: kill the pause and reap it (bounded).
    pub(super) fn end_pause(&mut self) {
        let Some(p) = &mut self.pause else { return };
        p.ending = true;
        let _ = crate::sys::pidfd::send_signal(&p.pidfd, libc::SIGKILL);
        // Its exit waits for every process of its namespace to be reaped (by us: execs
        // still running there), so the reaping is ours as usual.
        if !self.reap_until(|s| s.pause.is_none()) {
            crate::log::warn("the pod's pause did not exit within 5s of SIGKILL");
        }
    }
}
