//! Clean-up: once the pod is down, the outer process removes what it created, whatever
//! happened, and has the last word on the exit status.

use super::relay::wait_supervisor;
use super::{Error, Sandbox};
use crate::supervisor::EXIT_SANDBOX;

impl Sandbox {
    /// Remove everything and wait for a supervisor that is still exiting; `code` is the
    /// run's exit status so far, the process's exit status is returned.
    pub(super) fn clean_up(mut self, code: i32) -> i32 {
        if let Some(p) = self.puller.take() {
            // A pull in flight is abandoned with the pod; the store keeps nothing half-made.
            let _ = crate::sys::pidfd::send_signal(&p.pidfd, libc::SIGKILL);
            let _ = wait_supervisor(p.pid);
        }
        let mut removed = self.remove(code != EXIT_SANDBOX);
        // A supervisor that announced its end is waited for now: its exit status has the
        // last word, and `podinit run` never outlives a process of its pod.
        let code = match self.exiting.take() {
            Some(child) => {
                let code = wait_supervisor(child.pid);
                // What it held until now: its own leaf cgroup (--cgroup-parent).
                let rest = self.remove(code != EXIT_SANDBOX);
                removed = match (removed, rest) {
                    (Ok(()), r) | (r, Ok(())) => r,
                    (Err(Error::Cleanup(mut a)), Err(Error::Cleanup(b))) => {
                        a.extend(b);
                        Err(Error::Cleanup(a))
                    }
                    (Err(a), Err(b)) => Err(Error::Cleanup(vec![a, b])),
                };
                code
            }
            None => code,
        };
        // Once no process of the pod is left: its ids are free for another pod.
        if let Some(b) = self.userns.take() {
            b.release();
        }
        if let Err(e) = removed {
            crate::log::error(&format!("cleaning up the sandbox: {e}"));
            if code == 0 {
                return EXIT_SANDBOX;
            }
        }
        code
    }

    /// Remove everything the outer process created: the pod cgroup tree (killing anything
    /// left in it) and the private part of the state dir; the supervisor's leaf cgroup only
    /// once the supervisor is gone (`exiting` is None), so call again after waiting for it.
    /// `ran`: the pod ran, so its status, events and logs stay.
    fn remove(&mut self, ran: bool) -> Result<(), Error> {
        let mut errs = Vec::new();
        self.cgroup.remove(self.exiting.is_none(), &mut errs);
        if let Some(sd) = self.sd.take() {
            if let Err(e) = sd.finish(ran, super::pid1_mode()) {
                errs.push(Error::Os(e));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(Error::Cleanup(errs))
        }
    }
}
