//! After the pod has ended: kill what is left (the pause last), drain the output, remove
//! each container's cgroup and private files.

use super::Supervisor;
use crate::api::server::Stream;

impl Supervisor<'_> {
    /// Kill anything left, drain and close output, remove every container's cgroup and
    /// private files. Runs once the event loop has returned, never from inside it.
    pub(super) fn teardown(&mut self) {
        for i in 0..self.containers.len() {
            self.drop_checks(i);
        }
        for m in &self.containers {
            m.ctr.kill();
        }
        // A blocking wait is fine here: the loop has ended, so no request, probe or output
        // is being served any more, and the pod's end waits for its processes to go.
        self.reap_until(|s| s.containers.iter().all(|m| m.ctr.run.is_none()));
        // Last: its death would kill the containers it holds before their stop signal.
        self.end_pause();
        let all: Vec<usize> = (0..self.pipes.len()).collect();
        self.read_pipes(&all);
        self.pipes.clear();
        if let Some(srv) = &mut self.server {
            srv.end_streams(&Stream::Pod);
            srv.end_streams(&Stream::Events);
        }
        if self.cfg.private_mounts {
            // The outer process removes the cgroups while we exit, and the mounts go with
            // our namespace.
            return;
        }
        for c in self.containers.iter_mut().map(|m| &mut m.ctr) {
            if let Err(e) = c.teardown() {
                crate::log::warn(&format!("container {}: {e}", c.name));
            }
        }
    }
}
