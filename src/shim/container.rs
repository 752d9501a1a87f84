//! One container of the shim, as containerd's runc shim holds one (`ContainerTemplate`):
//! it owns its processes, the init and the execs by `exec_id`, under a lock of its own,
//! and each Task call on it is a method here. Starting and exits are in `init.rs`,
//! `exec.rs` and `exits.rs`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use containerd_shim::api;
use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::protobuf::MessageField;
use containerd_shim::protos::topics;

use super::error::{Error, Result};
use super::process::{Proc, Status};
use super::runc::Streams;
use super::service::Inner;

/// The `Any` type of a process's details in a Pids answer, as `Any::pack` names it.
pub const PROCESS_DETAILS: &str = "type.googleapis.com/containerd.runc.v1.ProcessDetails";

pub struct Container {
    pub id: String,
    pub bundle: PathBuf,
    procs: Mutex<Processes>,
    /// Signalled whenever one of its processes exits or goes away.
    changed: Condvar,
    /// Its cgroup's figures, found at the first Stats and kept with their files open:
    /// containerd 2 asks for them every second.
    stats: Mutex<Option<Arc<podinit::cgroup::StatsReader>>>,
}

/// A container's processes and what the shim keeps of it beside them.
pub struct Processes {
    pub init: Proc,
    pub execs: HashMap<String, Proc>,
    /// The rootfs was mounted by this shim at `bundle/rootfs` (unmounted at delete).
    pub mounted_rootfs: bool,
    /// The cgroup's OOM-kill count when the container was made, and its file.
    pub oom: Option<(PathBuf, u64)>,
    /// Its processes can outlive its init (a shared pid namespace): kill them all when it
    /// exits, as containerd's runc shim does.
    pub kill_all_on_exit: bool,
    /// Deleted: a Wait still on it ends, the container is not found any more.
    pub deleted: bool,
    /// Its `delete` may run in the shim's own process (`Runc::delete`).
    pub delete_here: bool,
    /// The init's exit, held while an exec still runs: the init's is published last, as
    /// containerd's runc shim publishes it (`exits.rs`).
    pub held_init_exit: Option<super::reaper::Exit>,
}

/// How long the init's exit is waited for once the runtime has killed it (a created
/// container's, deleted; a container ended with its sandbox): a process in uninterruptible
/// sleep may take a while.
const EXIT_LIMIT: Duration = Duration::from_secs(5);

impl Processes {
    /// Whether an exec of the container still runs.
    pub fn exec_running(&self) -> bool {
        self.execs.values().any(|p| p.is_live())
    }

    /// The init (`exec` empty) or the exec of that id.
    pub fn get(&self, exec: &str) -> Result<&Proc> {
        if exec.is_empty() {
            return Ok(&self.init);
        }
        self.execs
            .get(exec)
            .ok_or_else(|| Error::ProcessNotFound(exec.to_string()))
    }

    pub fn get_mut(&mut self, exec: &str) -> Result<&mut Proc> {
        if exec.is_empty() {
            return Ok(&mut self.init);
        }
        self.execs
            .get_mut(exec)
            .ok_or_else(|| Error::ProcessNotFound(exec.to_string()))
    }

    /// Adds an exec of container `id`, not started yet; refused if its id is taken or the
    /// container is stopped.
    pub fn add_exec(
        &mut self,
        id: &str,
        exec: &str,
        paths: super::stdio::Paths,
        spec: Vec<u8>,
    ) -> Result<()> {
        if self.execs.contains_key(exec) {
            return Err(Error::ExecExists(exec.to_string()));
        }
        if self.init.status == Status::Stopped {
            return Err(Error::WrongState(format!("container {id}: is stopped")));
        }
        let mut p = Proc::new(paths);
        p.spec = Some(spec);
        self.execs.insert(exec.to_string(), p);
        Ok(())
    }

    /// The process with this host pid: `""` for init, else the exec's id.
    pub fn owner_of(&self, pid: i32) -> Option<String> {
        if self.init.pid == pid && self.init.exit.is_none() {
            return Some(String::new());
        }
        self.execs
            .iter()
            .find(|(_, p)| p.pid == pid && p.exit.is_none())
            .map(|(k, _)| k.clone())
    }
}

impl Container {
    pub fn new(id: String, bundle: PathBuf, procs: Processes) -> Container {
        Container {
            id,
            bundle,
            procs: Mutex::new(procs),
            changed: Condvar::new(),
            stats: Mutex::new(None),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Processes> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes whoever waits for a process of this container.
    pub fn notify(&self) {
        self.changed.notify_all();
    }

    /// The file runc logs this container's verbs to (its last error is a failure's reason).
    pub fn log(&self) -> PathBuf {
        self.bundle.join("log.json")
    }

    /// Runs a runc verb on this container, without streams.
    pub fn verb(&self, inner: &Inner, args: &[&str]) -> Result<()> {
        inner.runc.run(&self.log(), args, Streams::none())
    }

    pub fn state(&self, exec: &str) -> Result<api::StateResponse> {
        let procs = self.lock();
        let bundle = self.bundle.to_string_lossy();
        Ok(procs.get(exec)?.state(&self.id, exec, &bundle))
    }

    /// Waits until the process has exited; a process or container removed meanwhile is not
    /// found.
    pub fn wait(&self, exec: &str) -> Result<api::WaitResponse> {
        let mut procs = self.lock();
        loop {
            if procs.deleted {
                return Err(Error::ContainerNotFound(self.id.clone()));
            }
            if let Some(r) = procs.get(exec)?.wait_response() {
                return Ok(r);
            }
            procs = self.changed.wait(procs).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The init through runc's `kill` (with `--all`, every process of the container), an
    /// exec by its pid.
    pub fn kill(&self, inner: &Inner, exec: &str, signal: u32, all: bool) -> Result<()> {
        let pid = {
            let procs = self.lock();
            let p = procs.get(exec)?;
            if p.status == Status::Stopped || p.pid == 0 {
                return Err(Error::ProcessFinished);
            }
            p.pid
        };
        if exec.is_empty() {
            return inner
                .runc
                .kill(&self.id, signal, all)
                .map_err(Error::of_kill);
        }
        let sig = nix::sys::signal::Signal::try_from(signal as i32)
            .map_err(|_| Error::InvalidSignal(signal))?;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).map_err(|e| match e {
            nix::errno::Errno::ESRCH => Error::ProcessFinished,
            e => Error::Other(format!("signalling process {exec}: {e}")),
        })
    }

    /// Adds an exec, not started yet, with its process spec (OCI `process` JSON).
    pub fn add_exec(
        &self,
        inner: &Inner,
        exec: &str,
        paths: super::stdio::Paths,
        spec: Vec<u8>,
    ) -> Result<()> {
        self.lock().add_exec(&self.id, exec, paths, spec)?;
        inner.publish(
            topics::TASK_EXEC_ADDED_EVENT_TOPIC,
            Box::new(ev::TaskExecAdded {
                container_id: self.id.clone(),
                exec_id: exec.to_string(),
                ..Default::default()
            }),
        );
        Ok(())
    }

    /// Removes an exec that is not running.
    pub fn delete_exec(&self, exec: &str) -> Result<api::DeleteResponse> {
        let mut procs = self.lock();
        if procs.get(exec)?.is_live() {
            return Err(Error::WrongState(format!(
                "process {exec}: cannot delete a running process"
            )));
        }
        let p = procs.execs.remove(exec).expect("found above");
        // A Wait on it ends: the process is not found any more.
        self.notify();
        Ok(p.delete_response())
    }

    /// Deletes the container with runc and takes it out of the shim; a created one's init
    /// was killed by that, and its exit is the status reported.
    pub fn delete(&self, inner: &Inner) -> Result<api::DeleteResponse> {
        let (created, pid, here) = {
            let procs = self.lock();
            if procs.init.is_live() {
                return Err(Error::WrongState(format!(
                    "container {}: cannot delete a running container",
                    self.id
                )));
            }
            (
                procs.init.status == Status::Created,
                procs.init.pid,
                procs.delete_here,
            )
        };
        // The cgroup goes with the container: no file of it stays open here.
        self.forget_stats();
        inner.runc.delete(&self.log(), &self.id, here)?;
        let mut procs = self.lock();
        if created {
            // Its exit is not routed to it: taken from the reaper, looked for every 50 ms.
            let every = Duration::from_millis(50);
            procs = self
                .wait_until(procs, EXIT_LIMIT, every, |p| {
                    if p.init.exit.is_none() {
                        if let Some(exit) = inner.reaper.take(pid) {
                            p.init.set_exited(exit);
                        }
                    }
                    p.init.exit.is_some()
                })
                .0;
        }
        if procs.deleted {
            return Err(Error::ContainerNotFound(self.id.clone()));
        }
        procs.deleted = true;
        self.notify();
        let r = procs.init.delete_response();
        let mounted = procs.mounted_rootfs;
        drop(procs);
        inner.remove(&self.id);
        if mounted {
            let _ = nix::mount::umount2(
                &self.bundle.join("rootfs"),
                nix::mount::MntFlags::MNT_DETACH,
            );
        }
        inner.publish(
            topics::TASK_DELETE_EVENT_TOPIC,
            Box::new(ev::TaskDelete {
                container_id: self.id.clone(),
                pid: r.pid,
                exit_status: r.exit_status,
                exited_at: r.exited_at.clone(),
                id: self.id.clone(),
                ..Default::default()
            }),
        );
        Ok(r)
    }

    /// Ends the container whatever its state, as a sandbox that goes takes its containers
    /// with it (kata's runtime-rs ShutdownSandbox does the same): thawed if paused, every
    /// process SIGKILLed and its init's exit awaited, then deleted as Delete deletes it (a
    /// created one's init is killed by that).
    pub fn end(&self, inner: &Inner) -> Result<()> {
        let status = self.lock().init.status;
        if status == Status::Paused {
            self.set_paused(inner, false)?;
        }
        if matches!(status, Status::Running | Status::Paused) {
            match self.kill(inner, "", nix::libc::SIGKILL as u32, true) {
                Ok(()) | Err(Error::ProcessFinished) => {}
                Err(e) => return Err(e),
            }
            let (procs, exited) =
                self.wait_until(self.lock(), EXIT_LIMIT, EXIT_LIMIT, |p| !p.init.is_live());
            // Delete takes the lock again.
            drop(procs);
            if !exited {
                return Err(Error::WrongState(format!(
                    "container {}: still running {} ms after SIGKILL",
                    self.id,
                    EXIT_LIMIT.as_millis()
                )));
            }
        }
        self.delete(inner).map(drop)
    }

    /// Waits until `done` says so or `limit` has passed, looking again whenever the
    /// processes change and at least every `every`; the lock, and whether `done` said so.
    fn wait_until<'a>(
        &'a self,
        mut procs: MutexGuard<'a, Processes>,
        limit: Duration,
        every: Duration,
        mut done: impl FnMut(&mut Processes) -> bool,
    ) -> (MutexGuard<'a, Processes>, bool) {
        let deadline = Instant::now() + limit;
        loop {
            if done(&mut procs) {
                return (procs, true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (procs, false);
            }
            procs = self
                .changed
                .wait_timeout(procs, left.min(every))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub fn set_paused(&self, inner: &Inner, pause: bool) -> Result<()> {
        let verb = if pause { "pause" } else { "resume" };
        self.verb(inner, &[verb, &self.id])?;
        {
            let mut procs = self.lock();
            if procs.init.status != Status::Stopped {
                procs.init.status = if pause {
                    Status::Paused
                } else {
                    Status::Running
                };
            }
        }
        let id = self.id.clone();
        if pause {
            inner.publish(
                topics::TASK_PAUSED_EVENT_TOPIC,
                Box::new(ev::TaskPaused {
                    container_id: id,
                    ..Default::default()
                }),
            );
        } else {
            inner.publish(
                topics::TASK_RESUMED_EVENT_TOPIC,
                Box::new(ev::TaskResumed {
                    container_id: id,
                    ..Default::default()
                }),
            );
        }
        Ok(())
    }

    pub fn resize_pty(&self, exec: &str, width: u32, height: u32) -> Result<()> {
        use std::os::fd::AsRawFd;
        let procs = self.lock();
        let Some(m) = &procs.get(exec)?.io.console else {
            return Err(Error::NoTerminal);
        };
        podinit::sys::pty::set_size(m.as_raw_fd(), height as u16, width as u16)
            .map_err(|e| Error::Other(format!("resizing the terminal: {e}")))
    }

    /// containerd closes its end of the stdin FIFO before this call: the copy into the
    /// process's stdin then ends, and the process reads end-of-file.
    pub fn close_io(&self, exec: &str) -> Result<()> {
        self.lock().get(exec).map(drop)
    }

    /// New resources (the JSON of OCI `LinuxResources`) through runc's `update`.
    pub fn update(&self, inner: &Inner, resources: &[u8]) -> Result<()> {
        let file = inner.runc.root.join(format!("update-{}.json", self.id));
        std::fs::write(&file, resources)
            .map_err(|e| Error::io(format_args!("writing {}", file.display()), e))?;
        let f = file.to_string_lossy().into_owned();
        let r = self.verb(inner, &["update", "--resources", &f, &self.id]);
        let _ = std::fs::remove_file(&file);
        r
    }

    /// The container's processes (runc's `ps`), an exec's with its id.
    pub fn pids(&self, inner: &Inner) -> Result<Vec<containerd_shim::protos::api::ProcessInfo>> {
        let out = inner
            .runc
            .output(&self.log(), &["ps", "--format", "json", &self.id])?;
        let pids: Vec<u32> = serde_json::from_str(out.trim()).unwrap_or_default();
        let execs: HashMap<u32, String> = self
            .lock()
            .execs
            .iter()
            .map(|(k, p)| (p.pid as u32, k.clone()))
            .collect();
        Ok(pids
            .into_iter()
            .map(|pid| {
                let mut info = containerd_shim::protos::api::ProcessInfo {
                    pid,
                    ..Default::default()
                };
                if let Some(exec) = execs.get(&pid) {
                    let d = containerd_shim::protos::shim::oci::ProcessDetails {
                        exec_id: exec.clone(),
                        ..Default::default()
                    };
                    if let Ok(a) = super::pack::any(PROCESS_DETAILS, &d) {
                        info.info = MessageField::some(a);
                    }
                }
                info
            })
            .collect())
    }

    /// The cgroup's figures as containerd's metrics.
    pub fn stats(
        &self,
        inner: &Inner,
    ) -> Result<containerd_shim::protos::protobuf::well_known_types::any::Any> {
        let reader = self.stats_reader(inner)?;
        let v2 = podinit::sys::cgroup::unified();
        reader
            .with_usage(|u| super::metrics::to_any(u, v2))
            .ok_or_else(|| {
                self.forget_stats();
                Error::NoState(format!("container {}: its cgroup is gone", self.id))
            })?
    }

    /// The reader of the container's cgroup figures: kept from the first Stats on.
    fn stats_reader(&self, inner: &Inner) -> Result<Arc<podinit::cgroup::StatsReader>> {
        let mut kept = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = kept.as_ref() {
            return Ok(Arc::clone(r));
        }
        let root = podinit::runc::state::Root(inner.runc.root.clone());
        let s = podinit::runc::state::load(&root, &self.id)
            .map_err(|e| Error::NoState(e.to_string()))?;
        let group =
            podinit::cgroup::recorded::open(&self.id, s.cgroups_path.as_deref(), &s.cgroup_paths)
                .map_err(|e| Error::Other(e.to_string()))?;
        let r = Arc::new(group.metrics_reader());
        *kept = Some(Arc::clone(&r));
        Ok(r)
    }

    /// Closes the cgroup files Stats kept open (the container is deleted, or its cgroup).
    pub fn forget_stats(&self) {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The init's pid (0 before it is made).
    pub fn init_pid(&self) -> u32 {
        self.lock().init.pid as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shim::stdio::Paths;

    fn procs() -> Processes {
        Processes {
            init: Proc::new(Paths::default()),
            execs: HashMap::new(),
            mounted_rootfs: false,
            oom: None,
            kill_all_on_exit: false,
            deleted: false,
            delete_here: true,
            held_init_exit: None,
        }
    }

    /// The hand-packed name is the one `Any::pack` gives (reflection, in the test only).
    #[test]
    fn process_details_are_named_as_any_pack_names_them() {
        let d = containerd_shim::protos::shim::oci::ProcessDetails::default();
        let any = containerd_shim::protos::protobuf::well_known_types::any::Any::pack(&d).unwrap();
        assert_eq!(any.type_url, PROCESS_DETAILS);
    }

    #[test]
    fn processes_are_found_by_exec_id_and_pid() {
        let mut p = procs();
        p.init.pid = 10;
        let mut e = Proc::new(Paths::default());
        e.pid = 11;
        p.execs.insert("e1".into(), e);
        assert_eq!(p.get("").unwrap().pid, 10);
        assert_eq!(p.get("e1").unwrap().pid, 11);
        assert!(matches!(p.get("e2"), Err(Error::ProcessNotFound(id)) if id == "e2"));
        assert_eq!(p.owner_of(10).as_deref(), Some(""));
        assert_eq!(p.owner_of(11).as_deref(), Some("e1"));
        assert_eq!(p.owner_of(12), None);
    }

    #[test]
    fn a_wrong_state_is_refused_before_any_verb_runs() {
        let c = Container::new("c1".into(), PathBuf::from("/nonexistent"), procs());
        c.lock().init.status = Status::Stopped;
        let e = c
            .lock()
            .add_exec("c1", "e1", Paths::default(), Vec::new())
            .expect_err("a stopped container takes no exec");
        assert_eq!(e.to_string(), "container c1: is stopped");
        c.lock().init.status = Status::Running;
        c.lock()
            .add_exec("c1", "e1", Paths::default(), Vec::new())
            .unwrap();
        let e = c
            .lock()
            .add_exec("c1", "e1", Paths::default(), Vec::new())
            .unwrap_err();
        assert_eq!(e.to_string(), "id e1: already exists");
        c.lock().execs.get_mut("e1").unwrap().status = Status::Running;
        let e = c.delete_exec("e1").unwrap_err();
        assert_eq!(e.to_string(), "process e1: cannot delete a running process");
        let e = c.delete_exec("nope").unwrap_err();
        assert!(matches!(e, Error::ProcessNotFound(_)));
    }
}
