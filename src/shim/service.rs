//! The task table and what each Task call does to it, as containerd's runc shim does it
//! (its statuses, errors and events); the work of making processes is podinit's runc
//! front-end's (`runc.rs`), the ttrpc surface is `task_api.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use containerd_shim::api;
use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::protobuf::{MessageDyn, MessageField};
use containerd_shim::protos::topics;
use containerd_shim::protos::ttrpc::{self, Code};
use containerd_shim::ExitSignal;

use super::reaper::{Exit, Reaper};
use super::runc::Runc;
use super::sandbox;
use super::stdio::{self, Paths};
use super::tasks::{self, Container, Proc, Status};

/// An event for containerd, published in order by one thread.
pub type Event = (&'static str, Box<dyn MessageDyn>);

pub struct Inner {
    pub containers: Mutex<HashMap<String, Container>>,
    /// Signalled whenever a process exits.
    pub exited: Condvar,
    pub runc: Runc,
    pub reaper: Arc<Reaper>,
    pub events: Mutex<mpsc::Sender<Event>>,
    pub exit: Arc<ExitSignal>,
    pub exe: PathBuf,
}

#[derive(Clone)]
pub struct Service(pub Arc<Inner>);

pub(super) fn err(code: Code, msg: impl ToString) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code, msg))
}

pub(super) fn not_found(what: &str, id: &str) -> ttrpc::Error {
    err(Code::NOT_FOUND, format!("{what} {id}: not found"))
}

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, Container>> {
        self.containers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `create` or `exec` (`args`, then the console socket if any, then `id`) with
    /// the process's streams; a console socket that got no terminal is removed.
    fn run_with_stdio(
        &self,
        bundle: &Path,
        args: &[&str],
        id: &str,
        pre: &mut stdio::Prepared,
    ) -> Result<(), String> {
        let console = pre
            .console
            .as_ref()
            .map(|(_, p)| p.to_string_lossy().into_owned());
        let mut all = args.to_vec();
        if let Some(c) = &console {
            all.extend(["--console-socket", c]);
        }
        all.push(id);
        let streams = std::mem::replace(&mut pre.streams, super::runc::Streams::none());
        let run = self.runc.run(&self.log(bundle), &all, streams);
        if let (Err(_), Some((_, p))) = (&run, &pre.console) {
            let _ = std::fs::remove_file(p);
        }
        run
    }

    /// A container's bundle directory.
    pub(super) fn bundle_of(&self, id: &str) -> Result<PathBuf, ttrpc::Error> {
        let map = self.lock();
        let c = map.get(id).ok_or_else(|| not_found("container", id))?;
        Ok(c.bundle.clone())
    }

    pub fn publish(&self, topic: &'static str, e: Box<dyn MessageDyn>) {
        let _ = self.events.lock().unwrap().send((topic, e));
    }

    pub(super) fn log(&self, bundle: &Path) -> PathBuf {
        bundle.join("log.json")
    }

    /// The reaper's exits, given to the processes they belong to (on the reaper's thread).
    pub fn on_exits(self: &Arc<Self>, exits: &[(i32, Exit)]) {
        let mut map = self.lock();
        for (pid, _) in exits {
            let Some((cid, exec)) = map
                .iter()
                .find_map(|(id, c)| c.owner_of(*pid).map(|e| (id.clone(), e)))
            else {
                continue;
            };
            let Some(exit) = self.reaper.take(*pid) else {
                continue;
            };
            let c = map.get_mut(&cid).expect("found above");
            if let Some(p) = c.proc_mut(&exec).filter(|p| p.starting) {
                p.pending = Some(exit);
                continue;
            }
            self.finish(c, &exec, exit);
        }
        self.exited.notify_all();
    }

    /// Ends a process whose exit was reaped. Its output is copied through first, and an
    /// init's exit ends every process left in the container when its pid namespace is
    /// the pod's; either is done by a thread of its own, as the reaper's thread must never
    /// wait for a runc verb (it reaps them).
    fn finish(self: &Arc<Self>, c: &mut Container, exec: &str, exit: Exit) {
        let kill_all = exec.is_empty() && c.kill_all_on_exit;
        let copiers: Vec<_> = match c.proc_mut(exec) {
            Some(p) => p.io.copiers.drain(..).collect(),
            None => return,
        };
        if copiers.is_empty() && !kill_all {
            self.record_exit(c, exec, exit);
            self.exited.notify_all();
            return;
        }
        let me = Arc::clone(self);
        let (cid, exec, bundle) = (c.id.clone(), exec.to_string(), c.bundle.clone());
        std::thread::spawn(move || {
            if kill_all {
                let _ = me.runc.run(
                    &me.log(&bundle),
                    &["kill", "--all", &cid, "KILL"],
                    super::runc::Streams::none(),
                );
            }
            for t in copiers {
                let _ = t.join();
            }
            let mut map = me.lock();
            if let Some(c) = map.get_mut(&cid) {
                me.record_exit(c, &exec, exit);
            }
            me.exited.notify_all();
        });
    }

    /// Marks a process exited; an OOM kill of the container is published before its
    /// init's exit, so that the CRI's status says OOMKilled.
    fn record_exit(&self, c: &mut Container, exec: &str, exit: Exit) {
        let id = c.id.clone();
        if exec.is_empty() {
            if let Some((file, before)) = &c.oom {
                if tasks::oom_kills(file).is_some_and(|n| n > *before) {
                    self.publish(
                        topics::TASK_OOM_EVENT_TOPIC,
                        Box::new(ev::TaskOOM {
                            container_id: id.clone(),
                            ..Default::default()
                        }),
                    );
                }
            }
        }
        let Some(p) = c.proc_mut(exec) else { return };
        p.exit = Some(exit);
        p.status = Status::Stopped;
        self.publish(
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
    }

    /// Takes an exit that came before the process was recorded.
    fn early_exit(self: &Arc<Self>, c: &mut Container, exec: &str, pid: i32) {
        if let Some(exit) = self.reaper.take(pid) {
            self.finish(c, exec, exit);
        }
    }

    pub(super) fn create(
        self: &Arc<Self>,
        req: &api::CreateTaskRequest,
    ) -> Result<u32, ttrpc::Error> {
        let id = req.id.as_str();
        if self.lock().contains_key(id) {
            return Err(err(
                Code::ALREADY_EXISTS,
                format!("container {id}: already exists"),
            ));
        }
        let bundle = PathBuf::from(&req.bundle);
        let rootfs = bundle.join("rootfs");
        let mounted = !req.rootfs.is_empty();
        if mounted {
            super::rootfs::mount_rootfs(&req.rootfs, &rootfs)
                .map_err(|e| err(Code::INTERNAL, e))?;
        }
        let undo_mount = |m: bool| {
            if m {
                let _ = nix::mount::umount2(&rootfs, nix::mount::MntFlags::MNT_DETACH);
            }
        };
        let made = self.create_in(req, &bundle);
        match made {
            Ok(c) => {
                let pid = c.init.pid as u32;
                let mut map = self.lock();
                // TaskCreate first: an init that is already gone reports its exit after.
                self.publish(
                    topics::TASK_CREATE_EVENT_TOPIC,
                    Box::new(ev::TaskCreate {
                        container_id: id.to_string(),
                        bundle: req.bundle.clone(),
                        rootfs: req.rootfs.clone(),
                        io: MessageField::some(ev::TaskIO {
                            stdin: req.stdin.clone(),
                            stdout: req.stdout.clone(),
                            stderr: req.stderr.clone(),
                            terminal: req.terminal,
                            ..Default::default()
                        }),
                        pid,
                        ..Default::default()
                    }),
                );
                let c = map.entry(id.to_string()).or_insert(Container {
                    mounted_rootfs: mounted,
                    ..c
                });
                let init_pid = c.init.pid;
                self.early_exit(c, "", init_pid);
                Ok(pid)
            }
            Err(e) => {
                undo_mount(mounted);
                Err(err(Code::UNKNOWN, e))
            }
        }
    }

    fn create_in(&self, req: &api::CreateTaskRequest, bundle: &Path) -> Result<Container, String> {
        let id = req.id.as_str();
        let mut spec = sandbox::load(bundle)?;
        if sandbox::is_sandbox(&spec) {
            sandbox::use_podinit_pause(bundle, &mut spec, &self.exe)?;
        }
        let paths = Paths {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        };
        let mut pre = stdio::prepare(&paths, &self.runc.root)?;
        let pid_file = bundle.join("init.pid");
        let bundle_s = bundle.to_string_lossy();
        let pid_s = pid_file.to_string_lossy();
        let args = ["create", "--bundle", &bundle_s, "--pid-file", &pid_s];
        self.run_with_stdio(bundle, &args, id, &mut pre)?;
        // From here a failure must not leave the created container behind.
        let made = (|| {
            stdio::attach_console(&mut pre, &paths)?;
            let pid = read_pid(&pid_file)?;
            let root = podinit::runc::state::Root(self.runc.root.clone());
            Ok::<_, String>((pid, podinit::runc::state::load(&root, id)?))
        })();
        let (pid, state) = match made {
            Ok(m) => m,
            Err(e) => {
                let log = self.log(bundle);
                let _ = self.runc.run(
                    &log,
                    &["delete", "--force", id],
                    super::runc::Streams::none(),
                );
                return Err(e);
            }
        };
        let oom = tasks::oom_file(&state.cgroup_paths)
            .map(|f| (tasks::oom_kills(&f).unwrap_or(0), f))
            .map(|(n, f)| (f, n));
        let own_pid_ns = state
            .config
            .linux()
            .as_ref()
            .and_then(|l| l.namespaces().as_ref())
            .is_some_and(|ns| {
                ns.iter().any(|n| {
                    n.typ() == oci_spec::runtime::LinuxNamespaceType::Pid && n.path().is_none()
                })
            });
        let mut init = Proc::new(paths);
        init.pid = pid;
        init.io = pre.io;
        Ok(Container {
            id: id.to_string(),
            bundle: bundle.to_path_buf(),
            init,
            execs: HashMap::new(),
            mounted_rootfs: false,
            oom,
            kill_all_on_exit: !own_pid_ns,
        })
    }

    pub(super) fn start(self: &Arc<Self>, id: &str, exec: &str) -> Result<u32, ttrpc::Error> {
        let (bundle, status) = {
            let mut map = self.lock();
            let c = map.get_mut(id).ok_or_else(|| not_found("container", id))?;
            let bundle = c.bundle.clone();
            let p = c.proc_mut(exec).ok_or_else(|| not_found("process", exec))?;
            if p.status == Status::Created && exec.is_empty() {
                p.starting = true;
            }
            (bundle, p.status)
        };
        if status != Status::Created {
            return Err(err(
                Code::FAILED_PRECONDITION,
                format!(
                    "process {}: cannot start a {:?} process",
                    if exec.is_empty() { id } else { exec },
                    status
                )
                .to_lowercase(),
            ));
        }
        if exec.is_empty() {
            // In the shim itself when it can: `start` clones nothing (it opens the exec
            // fifo), which saves a process. Poststart hooks are waited for with waitpid,
            // which the reaper thread would race: those run `start` as a verb.
            let root = podinit::runc::state::Root(self.runc.root.clone());
            let ran = podinit::runc::state::load(&root, id).and_then(|st| {
                let hooks = st.config.hooks().as_ref();
                if hooks
                    .and_then(|h| h.poststart().as_ref())
                    .is_some_and(|p| !p.is_empty())
                {
                    self.runc.run(
                        &self.log(&bundle),
                        &["start", id],
                        super::runc::Streams::none(),
                    )
                } else {
                    podinit::runc::start::start(&root, &st)
                }
            });
            let mut map = self.lock();
            let c = map.get_mut(id).ok_or_else(|| not_found("container", id))?;
            c.init.starting = false;
            let pending = c.init.pending.take();
            if let Err(e) = ran {
                if let Some(exit) = pending {
                    self.finish(c, "", exit);
                }
                return Err(err(Code::UNKNOWN, e));
            }
            if c.init.status == Status::Created {
                c.init.status = Status::Running;
            }
            let pid = c.init.pid as u32;
            // Under the lock, so that the reaper's TaskExit cannot come first.
            self.publish(
                topics::TASK_START_EVENT_TOPIC,
                Box::new(ev::TaskStart {
                    container_id: id.to_string(),
                    pid,
                    ..Default::default()
                }),
            );
            if let Some(exit) = pending {
                self.finish(c, "", exit);
            }
            return Ok(pid);
        }
        self.start_exec(id, exec, &bundle)
    }

    fn start_exec(
        self: &Arc<Self>,
        id: &str,
        exec: &str,
        bundle: &Path,
    ) -> Result<u32, ttrpc::Error> {
        let (spec, paths) = {
            let map = self.lock();
            let p = map
                .get(id)
                .and_then(|c| c.execs.get(exec))
                .ok_or_else(|| not_found("process", exec))?;
            (p.spec.clone().unwrap_or_default(), p.paths.clone())
        };
        let fail = |e: String| err(Code::UNKNOWN, e);
        let name = format!("{id}-{exec}");
        let dir = &self.runc.root;
        let spec_file = dir.join(format!("exec-{name}.json"));
        let pid_file = dir.join(format!("exec-{name}.pid"));
        std::fs::write(&spec_file, &spec)
            .map_err(|e| fail(format!("writing {}: {e}", spec_file.display())))?;
        let mut pre = stdio::prepare(&paths, dir).map_err(fail)?;
        let (spec_s, pid_s) = (spec_file.to_string_lossy(), pid_file.to_string_lossy());
        let args = [
            "exec",
            "--detach",
            "--process",
            &spec_s,
            "--pid-file",
            &pid_s,
        ];
        let run = self.run_with_stdio(bundle, &args, id, &mut pre);
        let _ = std::fs::remove_file(&spec_file);
        if let Err(e) = run {
            // As containerd's runc shim: an exec that never ran is over, so a Wait made
            // before Start returns (the CRI's ExecSync waits so).
            if let Some(p) = self.lock().get_mut(id).and_then(|c| c.execs.get_mut(exec)) {
                p.status = Status::Stopped;
                p.exit = Some(Exit {
                    status: 0,
                    at: SystemTime::now(),
                });
            }
            self.exited.notify_all();
            return Err(fail(e));
        }
        stdio::attach_console(&mut pre, &paths).map_err(fail)?;
        let pid = read_pid(&pid_file).map_err(fail)?;
        let _ = std::fs::remove_file(&pid_file);
        let mut map = self.lock();
        let c = map.get_mut(id).ok_or_else(|| not_found("container", id))?;
        let p = c
            .execs
            .get_mut(exec)
            .ok_or_else(|| not_found("process", exec))?;
        p.pid = pid;
        p.status = Status::Running;
        p.io = pre.io;
        self.publish(
            topics::TASK_EXEC_STARTED_EVENT_TOPIC,
            Box::new(ev::TaskExecStarted {
                container_id: id.to_string(),
                exec_id: exec.to_string(),
                pid: pid as u32,
                ..Default::default()
            }),
        );
        self.early_exit(c, exec, pid);
        Ok(pid as u32)
    }

    pub(super) fn kill(&self, req: &api::KillRequest) -> Result<(), ttrpc::Error> {
        let (bundle, pid, status) = {
            let map = self.lock();
            let c = map
                .get(&req.id)
                .ok_or_else(|| not_found("container", &req.id))?;
            let p = c
                .proc(&req.exec_id)
                .ok_or_else(|| not_found("process", &req.exec_id))?;
            (c.bundle.clone(), p.pid, p.status)
        };
        if status == Status::Stopped || pid == 0 {
            return Err(err(Code::NOT_FOUND, "process already finished: not found"));
        }
        if req.exec_id.is_empty() {
            let sig = req.signal.to_string();
            let mut args = vec!["kill"];
            if req.all {
                args.push("--all");
            }
            args.extend([req.id.as_str(), sig.as_str()]);
            return self
                .runc
                .run(&self.log(&bundle), &args, super::runc::Streams::none())
                .map_err(kill_error);
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::try_from(req.signal as i32).map_err(|_| {
                err(
                    Code::INVALID_ARGUMENT,
                    format!("signal {}: invalid", req.signal),
                )
            })?,
        )
        .map_err(|e| match e {
            nix::errno::Errno::ESRCH => err(Code::NOT_FOUND, "process already finished: not found"),
            e => err(
                Code::UNKNOWN,
                format!("signalling process {}: {e}", req.exec_id),
            ),
        })
    }

    pub(super) fn delete(&self, id: &str, exec: &str) -> Result<api::DeleteResponse, ttrpc::Error> {
        let mut map = self.lock();
        let c = map.get_mut(id).ok_or_else(|| not_found("container", id))?;
        if !exec.is_empty() {
            let p = c
                .execs
                .get(exec)
                .ok_or_else(|| not_found("process", exec))?;
            if p.status == Status::Running || p.status == Status::Paused {
                return Err(err(
                    Code::FAILED_PRECONDITION,
                    format!("process {exec}: cannot delete a running process"),
                ));
            }
            let p = c.execs.remove(exec).expect("found above");
            // A Wait on it ends: the process is not found any more.
            self.exited.notify_all();
            return Ok(response(&p));
        }
        if c.init.status == Status::Running || c.init.status == Status::Paused {
            return Err(err(
                Code::FAILED_PRECONDITION,
                format!("container {id}: cannot delete a running container"),
            ));
        }
        let bundle = c.bundle.clone();
        let created = c.init.status == Status::Created;
        let pid = c.init.pid;
        drop(map);
        self.runc
            .run(
                &self.log(&bundle),
                &["delete", "--force", id],
                super::runc::Streams::none(),
            )
            .map_err(|e| err(Code::UNKNOWN, e))?;
        let mut map = self.lock();
        if created {
            // Its process was killed by delete: its exit is the status to report.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while map.get(id).is_some_and(|c| c.init.exit.is_none()) {
                if let Some(exit) = self.reaper.take(pid) {
                    let c = map.get_mut(id).expect("checked");
                    c.init.exit = Some(exit);
                    c.init.status = Status::Stopped;
                    break;
                }
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                map = self
                    .exited
                    .wait_timeout(map, left.min(Duration::from_millis(50)))
                    .unwrap()
                    .0;
            }
        }
        let c = map.remove(id).ok_or_else(|| not_found("container", id))?;
        self.exited.notify_all();
        drop(map);
        if c.mounted_rootfs {
            let _ = nix::mount::umount2(&c.bundle.join("rootfs"), nix::mount::MntFlags::MNT_DETACH);
        }
        let r = response(&c.init);
        self.publish(
            topics::TASK_DELETE_EVENT_TOPIC,
            Box::new(ev::TaskDelete {
                container_id: id.to_string(),
                pid: r.pid,
                exit_status: r.exit_status,
                exited_at: r.exited_at.clone(),
                id: id.to_string(),
                ..Default::default()
            }),
        );
        Ok(r)
    }

    pub(super) fn wait(&self, id: &str, exec: &str) -> Result<api::WaitResponse, ttrpc::Error> {
        let mut map = self.lock();
        loop {
            let c = map.get(id).ok_or_else(|| not_found("container", id))?;
            let p = c.proc(exec).ok_or_else(|| not_found("process", exec))?;
            if let Some(e) = p.exit {
                return Ok(api::WaitResponse {
                    exit_status: e.status,
                    exited_at: MessageField::some(tasks::timestamp(e.at)),
                    ..Default::default()
                });
            }
            map = self.exited.wait(map).unwrap();
        }
    }

    pub(super) fn set_paused(&self, id: &str, pause: bool) -> Result<(), ttrpc::Error> {
        let bundle = self.bundle_of(id)?;
        let verb = if pause { "pause" } else { "resume" };
        self.runc
            .run(
                &self.log(&bundle),
                &[verb, id],
                super::runc::Streams::none(),
            )
            .map_err(|e| err(Code::UNKNOWN, e))?;
        if let Some(c) = self.lock().get_mut(id) {
            if c.init.status != Status::Stopped {
                c.init.status = if pause {
                    Status::Paused
                } else {
                    Status::Running
                };
            }
        }
        if pause {
            self.publish(
                topics::TASK_PAUSED_EVENT_TOPIC,
                Box::new(ev::TaskPaused {
                    container_id: id.into(),
                    ..Default::default()
                }),
            );
        } else {
            self.publish(
                topics::TASK_RESUMED_EVENT_TOPIC,
                Box::new(ev::TaskResumed {
                    container_id: id.into(),
                    ..Default::default()
                }),
            );
        }
        Ok(())
    }
}

fn response(p: &Proc) -> api::DeleteResponse {
    let e = p.exit.unwrap_or(Exit {
        status: 0,
        at: SystemTime::now(),
    });
    api::DeleteResponse {
        pid: p.pid as u32,
        exit_status: e.status,
        exited_at: MessageField::some(tasks::timestamp(e.at)),
        ..Default::default()
    }
}

fn read_pid(file: &Path) -> Result<i32, String> {
    let text =
        std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    text.trim()
        .parse()
        .map_err(|e| format!("pid file {}: {e}", file.display()))
}

/// runc's `kill` of a container that has just exited (before the reaper marked it): not
/// found, as containerd's runc shim words it (its checkKillError), so that a StopContainer
/// racing the exit succeeds.
fn kill_error(e: String) -> ttrpc::Error {
    let lower = e.to_lowercase();
    if lower.contains("container not running") || lower.contains("no such process") {
        err(Code::NOT_FOUND, format!("process already finished: {e}"))
    } else if lower.contains("does not exist") {
        err(Code::NOT_FOUND, format!("no such container: {e}"))
    } else {
        err(Code::UNKNOWN, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: ttrpc::Error) -> Code {
        match e {
            ttrpc::Error::RpcStatus(s) => s.code(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_kill_that_races_the_exit_is_not_found_as_runc_s_shim_says() {
        for gone in [
            "container not running",
            "kill: No such process",
            "container c1 does not exist",
        ] {
            assert_eq!(code(kill_error(gone.into())), Code::NOT_FOUND, "{gone}");
        }
        assert_eq!(code(kill_error("permission denied".into())), Code::UNKNOWN);
    }
}
