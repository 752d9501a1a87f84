//! An exec's start: its process spec to a file, runc's `exec --detach` with its streams,
//! and TaskExecStarted. One that never ran is over, as containerd's runc shim has it.

use std::sync::Arc;
use std::time::SystemTime;

use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::topics;

use super::container::Container;
use super::error::{Error, Result};
use super::exits::early_exit;
use super::init::read_pid;
use super::process::Status;
use super::reaper::Exit;
use super::service::Inner;
use super::stdio;

impl Container {
    pub(super) fn start_exec(self: &Arc<Self>, inner: &Arc<Inner>, exec: &str) -> Result<u32> {
        let (spec, paths) = {
            let procs = self.lock();
            let p = procs.get(exec)?;
            (p.spec.clone().unwrap_or_default(), p.paths.clone())
        };
        // The process spec and pid file live in the bundle, as containerd's runc shim keeps
        // them: containerd removes the bundle with the task, even after a killed shim.
        let spec_file = self.bundle.join(format!("exec-{exec}.json"));
        let pid_file = self.bundle.join(format!("exec-{exec}.pid"));
        let mut pre = stdio::prepare(&paths, &inner.runc.root)?;
        std::fs::write(&spec_file, &spec)
            .map_err(|e| Error::io(format_args!("writing {}", spec_file.display()), e))?;
        let (spec_s, pid_s) = (spec_file.to_string_lossy(), pid_file.to_string_lossy());
        let args = [
            "exec",
            "--detach",
            "--process",
            &spec_s,
            "--pid-file",
            &pid_s,
        ];
        let run = inner.run_with_stdio(&self.bundle, &args, &self.id, None, &mut pre);
        let _ = std::fs::remove_file(&spec_file);
        if let Err(e) = run {
            let _ = std::fs::remove_file(&pid_file);
            // As containerd's runc shim: an exec that never ran is over, so a Wait made
            // before Start returns (the CRI's ExecSync waits so).
            if let Ok(p) = self.lock().get_mut(exec) {
                p.set_exited(Exit {
                    status: 0,
                    at: SystemTime::now(),
                });
            }
            self.notify();
            return Err(e);
        }
        let pid = read_pid(&pid_file);
        let _ = std::fs::remove_file(&pid_file);
        let pid = pid?;
        stdio::attach_console(&mut pre, &paths)?;
        let mut procs = self.lock();
        let p = procs.get_mut(exec)?;
        p.pid = pid;
        p.status = Status::Running;
        p.io = pre.io;
        inner.publish(
            topics::TASK_EXEC_STARTED_EVENT_TOPIC,
            Box::new(ev::TaskExecStarted {
                container_id: self.id.clone(),
                exec_id: exec.to_string(),
                pid: pid as u32,
                ..Default::default()
            }),
        );
        early_exit(inner, self, &mut procs, exec, pid);
        Ok(pid as u32)
    }
}
