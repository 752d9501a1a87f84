//! Reaping: the only `waitpid` in podinit. A container's main process becomes an
//! observation; an exec handler's process ends its check; the pause's exit is said;
//! anything else (an orphan in a shared pid namespace) is just collected.

use super::Supervisor;
use crate::pod::{self, StartFailure};

impl Supervisor<'_> {
    /// Reap until `done` holds or 5 s have passed: a blocking wait, only for once the
    /// event loop has ended (teardown). Whether `done` holds.
    pub(super) fn reap_until(&mut self, done: impl Fn(&Self) -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done(self) && std::time::Instant::now() < deadline {
            self.reap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        done(self)
    }

    /// Reap every exited child: container main processes become observations, anything
    /// else (an orphan re-parented to us in a shared pid namespace) is just collected.
    pub(super) fn reap(&mut self) {
        // The supervisor's only collector of exits: a wait elsewhere would steal them.
        while let Some((pid, status)) = crate::sys::wait::reap_any() {
            self.reaped += 1;
            if self.check_exited(pid, status) || self.pause_reaped(pid, status) {
                continue;
            }
            let Some(i) = self
                .containers
                .iter()
                .position(|m| m.ctr.run.as_ref().is_some_and(|r| r.pid == pid))
            else {
                continue;
            };
            let now = self.now();
            // Everything the process wrote is in its pipes now: log it before the exit is
            // judged (FallbackToLogsOnError reads the log).
            let own: Vec<usize> = (0..self.pipes.len())
                .filter(|&k| self.pipes[k].ctr == i)
                .collect();
            self.read_pipes(&own);
            self.drop_checks(i);
            let policy = self.containers[i]
                .ctr
                .spec(self.cfg.pod_spec())
                .termination_message_policy
                .clone();
            match self.containers[i].ctr.exited(status, policy.as_deref()) {
                Ok(exit) => {
                    if exit.oom_killed {
                        self.event(pod::events::oom_killing(&self.cfg.plan, i));
                    }
                    self.st.on_exited(&self.cfg.plan, i, exit, now);
                }
                // Said by the `Failed` event it records.
                Err(e) => {
                    let msg = e.to_string();
                    self.st
                        .on_start_failed(&self.cfg.plan, i, StartFailure::Exec, &msg, now);
                }
            }
            self.end_followers_when_done(i);
        }
    }
}
