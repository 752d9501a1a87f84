//! A process's end: the reaper's exits given to the processes they belong to, and the
//! TaskOOM and TaskExit events, in containerd's order.

use std::sync::Arc;

use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::protobuf::MessageField;
use containerd_shim::protos::topics;

use super::container::{Container, Processes};
use super::reaper::Exit;
use super::service::Inner;
use super::tasks;

impl Inner {
    /// The reaper's exits, given to the processes they belong to (on the reaper's thread).
    pub fn on_exits(self: &Arc<Self>, exits: &[(i32, Exit)]) {
        let all = self.containers();
        for (pid, _) in exits {
            if self.on_watched_exit(*pid) {
                continue;
            }
            for c in &all {
                let mut procs = c.lock();
                let Some(exec) = procs.owner_of(*pid) else {
                    continue;
                };
                if let Some(exit) = self.reaper.take(*pid) {
                    match procs.get_mut(&exec) {
                        Ok(p) if p.starting => p.pending = Some(exit),
                        _ => finish(self, c, &mut procs, &exec, exit),
                    }
                }
                break;
            }
        }
    }
}

/// Ends a process whose exit was reaped. Its output is copied through first, and an
/// init's exit ends every process left in the container when its pid namespace is the
/// pod's; either is done by a thread of its own, as the reaper's thread must never wait
/// for a runc verb (it reaps them).
pub fn finish(
    inner: &Arc<Inner>,
    c: &Arc<Container>,
    procs: &mut Processes,
    exec: &str,
    exit: Exit,
) {
    let kill_all = exec.is_empty() && procs.kill_all_on_exit;
    let copiers: Vec<_> = match procs.get_mut(exec) {
        Ok(p) => p.io.copiers.drain(..).collect(),
        Err(_) => return,
    };
    if copiers.is_empty() && !kill_all {
        record_exit(inner, c, procs, exec, exit);
        return;
    }
    let (inner, c, exec) = (Arc::clone(inner), Arc::clone(c), exec.to_string());
    std::thread::spawn(move || {
        if kill_all {
            let _ = inner.runc.kill(&c.id, libc::SIGKILL as u32, true);
        }
        for t in copiers {
            let _ = t.join();
        }
        let mut procs = c.lock();
        if !procs.deleted {
            record_exit(&inner, &c, &mut procs, &exec, exit);
        }
    });
}

/// Takes an exit that came before the process was recorded.
pub fn early_exit(
    inner: &Arc<Inner>,
    c: &Arc<Container>,
    procs: &mut Processes,
    exec: &str,
    pid: i32,
) {
    if let Some(exit) = inner.reaper.take(pid) {
        finish(inner, c, procs, exec, exit);
    }
}

/// Marks a process exited and wakes its waiters; an OOM kill of the container is
/// published before its init's exit, so that the CRI's status says OOMKilled. The init's
/// exit is the container's last: while an exec still runs (killed with the init, its exit
/// not reaped yet), the init's is held, and recorded after the last exec's.
fn record_exit(inner: &Inner, c: &Container, procs: &mut Processes, exec: &str, exit: Exit) {
    let id = c.id.clone();
    if exec.is_empty() && procs.exec_running() {
        procs.held_init_exit = Some(exit);
        return;
    }
    if exec.is_empty() {
        if let Some((file, before)) = &procs.oom {
            if tasks::oom_kills(file).is_some_and(|n| n > *before) {
                inner.publish(
                    topics::TASK_OOM_EVENT_TOPIC,
                    Box::new(ev::TaskOOM {
                        container_id: id.clone(),
                        ..Default::default()
                    }),
                );
            }
        }
    }
    let Ok(p) = procs.get_mut(exec) else { return };
    p.set_exited(exit);
    inner.publish(
        topics::TASK_EXIT_EVENT_TOPIC,
        Box::new(ev::TaskExit {
            container_id: id.clone(),
            id: if exec.is_empty() {
                id
            } else {
                exec.to_string()
            },
            pid: p.pid as u32,
            exit_status: exit.status,
            exited_at: MessageField::some(tasks::timestamp(exit.at)),
            ..Default::default()
        }),
    );
    if !exec.is_empty() && !procs.exec_running() {
        if let Some(held) = procs.held_init_exit.take() {
            record_exit(inner, c, procs, "", held);
        }
    }
    c.notify();
}
