//! containerd's Task service over the task table: each call as containerd's runc shim
//! answers it (its statuses, errors and events), the work done by podinit's runc
//! front-end (`runc.rs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use containerd_shim::api;
use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::protobuf::{MessageDyn, MessageField};
use containerd_shim::protos::topics;
use containerd_shim::protos::ttrpc::{self, Code};
use containerd_shim::publisher::RemotePublisher;
use containerd_shim::{Context, ExitSignal, TtrpcContext, TtrpcResult};

use super::reaper::{Exit, Reaper};
use super::runc::Runc;
use super::stdio::{self, Paths};
use super::tasks::{self, Container, Proc, Status};
use super::{metrics, sandbox};

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

fn err(code: Code, msg: impl ToString) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code, msg))
}

fn not_found(what: &str, id: &str) -> ttrpc::Error {
    err(Code::NOT_FOUND, format!("{what} {id}: not found"))
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Container>> {
        self.containers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A container's bundle directory.
    fn bundle_of(&self, id: &str) -> Result<PathBuf, ttrpc::Error> {
        let map = self.lock();
        let c = map.get(id).ok_or_else(|| not_found("container", id))?;
        Ok(c.bundle.clone())
    }

    pub fn publish(&self, topic: &'static str, e: Box<dyn MessageDyn>) {
        let _ = self.events.lock().unwrap().send((topic, e));
    }

    fn log(&self, bundle: &Path) -> PathBuf {
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

    fn create(self: &Arc<Self>, req: &api::CreateTaskRequest) -> Result<u32, ttrpc::Error> {
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
            mount_rootfs(&req.rootfs, &rootfs).map_err(|e| err(Code::INTERNAL, e))?;
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
        let ann = sandbox::annotations(bundle)?;
        if sandbox::is_sandbox(&ann) {
            sandbox::use_podinit_pause(bundle, &self.exe)?;
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
        let mut args = vec!["create", "--bundle", &bundle_s, "--pid-file", &pid_s];
        let console = pre
            .console
            .as_ref()
            .map(|(_, p)| p.to_string_lossy().into_owned());
        if let Some(c) = &console {
            args.extend(["--console-socket", c]);
        }
        args.push(id);
        let streams = std::mem::replace(&mut pre.streams, super::runc::Streams::none());
        let run = self.runc.run(&self.log(bundle), &args, streams);
        if let Some((_, p)) = &pre.console {
            if run.is_err() {
                let _ = std::fs::remove_file(p);
            }
        }
        run?;
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

    fn start(self: &Arc<Self>, id: &str, exec: &str) -> Result<u32, ttrpc::Error> {
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
        let mut args = vec![
            "exec",
            "--detach",
            "--process",
            &spec_s,
            "--pid-file",
            &pid_s,
        ];
        let console = pre
            .console
            .as_ref()
            .map(|(_, p)| p.to_string_lossy().into_owned());
        if let Some(c) = &console {
            args.extend(["--console-socket", c]);
        }
        args.push(id);
        let streams = std::mem::replace(&mut pre.streams, super::runc::Streams::none());
        let run = self.runc.run(&self.log(bundle), &args, streams);
        let _ = std::fs::remove_file(&spec_file);
        if let Err(e) = run {
            if let Some((_, p)) = &pre.console {
                let _ = std::fs::remove_file(p);
            }
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

    fn kill(&self, req: &api::KillRequest) -> Result<(), ttrpc::Error> {
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
                .map_err(|e| err(Code::UNKNOWN, e));
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

    fn delete(&self, id: &str, exec: &str) -> Result<api::DeleteResponse, ttrpc::Error> {
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

    fn wait(&self, id: &str, exec: &str) -> Result<api::WaitResponse, ttrpc::Error> {
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

    fn set_paused(&self, id: &str, pause: bool) -> Result<(), ttrpc::Error> {
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

/// Mounts containerd's rootfs mounts at `target`, in order (an overlay from the
/// snapshotter, or a bind). Done here rather than with the shim crate's helper, which
/// forks and waits through a reaper this shim replaces.
fn mount_rootfs(
    mounts: &[containerd_shim::protos::api::Mount],
    target: &Path,
) -> Result<(), String> {
    use nix::mount::{mount, MsFlags};
    std::fs::create_dir_all(target).map_err(|e| format!("creating {}: {e}", target.display()))?;
    for m in mounts {
        let p = podinit::runtime::mounts::plan(
            target,
            Some(&m.type_),
            Some(Path::new(&m.source)),
            &m.options,
        );
        let flags = MsFlags::from_bits_truncate(p.flags);
        let fstype = (m.type_ != "bind").then_some(m.type_.as_str());
        let data = (!p.data.is_empty()).then_some(p.data.as_str());
        let what = |e: nix::Error| {
            format!(
                "mounting the rootfs ({} {}) at {}: {e}",
                m.type_,
                m.source,
                target.display()
            )
        };
        mount(
            Some(m.source.as_str()),
            target,
            fstype,
            flags & !MsFlags::MS_RDONLY
                | if p.remount {
                    MsFlags::empty()
                } else {
                    flags & MsFlags::MS_RDONLY
                },
            data,
        )
        .map_err(what)?;
        if p.remount {
            mount(
                None::<&str>,
                target,
                None::<&str>,
                flags | MsFlags::MS_REMOUNT | MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(what)?;
        }
    }
    Ok(())
}

fn status_of(s: Status) -> api::Status {
    match s {
        Status::Created => api::Status::CREATED,
        Status::Running => api::Status::RUNNING,
        Status::Paused => api::Status::PAUSED,
        Status::Stopped => api::Status::STOPPED,
    }
}

impl containerd_shim::Task for Service {
    fn create(
        &self,
        _: &TtrpcContext,
        req: api::CreateTaskRequest,
    ) -> TtrpcResult<api::CreateTaskResponse> {
        let pid = self.0.create(&req)?;
        Ok(api::CreateTaskResponse {
            pid,
            ..Default::default()
        })
    }

    fn start(&self, _: &TtrpcContext, req: api::StartRequest) -> TtrpcResult<api::StartResponse> {
        let pid = self.0.start(&req.id, &req.exec_id)?;
        Ok(api::StartResponse {
            pid,
            ..Default::default()
        })
    }

    fn delete(
        &self,
        _: &TtrpcContext,
        req: api::DeleteRequest,
    ) -> TtrpcResult<api::DeleteResponse> {
        self.0.delete(&req.id, &req.exec_id)
    }

    fn state(&self, _: &TtrpcContext, req: api::StateRequest) -> TtrpcResult<api::StateResponse> {
        let map = self.0.lock();
        let c = map
            .get(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        let p = c
            .proc(&req.exec_id)
            .ok_or_else(|| not_found("process", &req.exec_id))?;
        let e = p.exit;
        Ok(api::StateResponse {
            id: if req.exec_id.is_empty() {
                req.id.clone()
            } else {
                req.exec_id.clone()
            },
            bundle: c.bundle.to_string_lossy().into_owned(),
            pid: p.pid as u32,
            status: status_of(p.status).into(),
            stdin: p.paths.stdin.clone(),
            stdout: p.paths.stdout.clone(),
            stderr: p.paths.stderr.clone(),
            terminal: p.paths.terminal,
            exit_status: e.map_or(0, |e| e.status),
            exited_at: e.map_or(MessageField::none(), |e| {
                MessageField::some(tasks::timestamp(e.at))
            }),
            exec_id: req.exec_id.clone(),
            ..Default::default()
        })
    }

    fn pids(&self, _: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        let bundle = self.0.bundle_of(&req.id)?;
        let out = self
            .0
            .runc
            .output(&self.0.log(&bundle), &["ps", "--format", "json", &req.id])
            .map_err(|e| err(Code::UNKNOWN, e))?;
        let pids: Vec<u32> = serde_json::from_str(out.trim()).unwrap_or_default();
        let map = self.0.lock();
        let execs: HashMap<u32, String> = map
            .get(&req.id)
            .map(|c| {
                c.execs
                    .iter()
                    .map(|(k, p)| (p.pid as u32, k.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let processes = pids
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
                    if let Ok(a) =
                        containerd_shim::protos::protobuf::well_known_types::any::Any::pack(&d)
                    {
                        info.info = MessageField::some(a);
                    }
                }
                info
            })
            .collect();
        Ok(api::PidsResponse {
            processes,
            ..Default::default()
        })
    }

    fn pause(&self, _: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<api::Empty> {
        self.0.set_paused(&req.id, true)?;
        Ok(api::Empty::default())
    }

    fn resume(&self, _: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<api::Empty> {
        self.0.set_paused(&req.id, false)?;
        Ok(api::Empty::default())
    }

    fn kill(&self, _: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<api::Empty> {
        self.0.kill(&req)?;
        Ok(api::Empty::default())
    }

    fn exec(&self, _: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<api::Empty> {
        let mut map = self.0.lock();
        let c = map
            .get_mut(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        if c.execs.contains_key(&req.exec_id) {
            return Err(err(
                Code::ALREADY_EXISTS,
                format!("id {}: already exists", req.exec_id),
            ));
        }
        if c.init.status == Status::Stopped {
            return Err(err(
                Code::FAILED_PRECONDITION,
                format!("container {}: is stopped", req.id),
            ));
        }
        let mut p = Proc::new(Paths {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        });
        p.spec = Some(
            req.spec
                .as_ref()
                .map(|a| a.value.clone())
                .unwrap_or_default(),
        );
        c.execs.insert(req.exec_id.clone(), p);
        drop(map);
        self.0.publish(
            topics::TASK_EXEC_ADDED_EVENT_TOPIC,
            Box::new(ev::TaskExecAdded {
                container_id: req.id.clone(),
                exec_id: req.exec_id.clone(),
                ..Default::default()
            }),
        );
        Ok(api::Empty::default())
    }

    fn resize_pty(&self, _: &TtrpcContext, req: api::ResizePtyRequest) -> TtrpcResult<api::Empty> {
        use std::os::fd::AsRawFd;
        let map = self.0.lock();
        let c = map
            .get(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        let p = c
            .proc(&req.exec_id)
            .ok_or_else(|| not_found("process", &req.exec_id))?;
        let Some(m) = &p.io.console else {
            return Err(err(
                Code::FAILED_PRECONDITION,
                "the process has no terminal",
            ));
        };
        podinit::sys::pty::set_size(m.as_raw_fd(), req.height as u16, req.width as u16)
            .map_err(|e| err(Code::UNKNOWN, format!("resizing the terminal: {e}")))?;
        Ok(api::Empty::default())
    }

    fn close_io(&self, _: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<api::Empty> {
        // containerd closes its end of the stdin FIFO before this call: the copy into the
        // process's stdin then ends, and the process reads end-of-file.
        let map = self.0.lock();
        let c = map
            .get(&req.id)
            .ok_or_else(|| not_found("container", &req.id))?;
        c.proc(&req.exec_id)
            .ok_or_else(|| not_found("process", &req.exec_id))?;
        Ok(api::Empty::default())
    }

    fn update(&self, _: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<api::Empty> {
        let bundle = self.0.bundle_of(&req.id)?;
        let json = req
            .resources
            .as_ref()
            .map(|a| a.value.clone())
            .unwrap_or_default();
        let file = self.0.runc.root.join(format!("update-{}.json", req.id));
        std::fs::write(&file, &json)
            .map_err(|e| err(Code::UNKNOWN, format!("writing {}: {e}", file.display())))?;
        let f = file.to_string_lossy().into_owned();
        let r = self.0.runc.run(
            &self.0.log(&bundle),
            &["update", "--resources", &f, &req.id],
            super::runc::Streams::none(),
        );
        let _ = std::fs::remove_file(&file);
        r.map_err(|e| err(Code::UNKNOWN, e))?;
        Ok(api::Empty::default())
    }

    fn wait(&self, _: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        self.0.wait(&req.id, &req.exec_id)
    }

    fn stats(&self, _: &TtrpcContext, req: api::StatsRequest) -> TtrpcResult<api::StatsResponse> {
        if !self.0.lock().contains_key(&req.id) {
            return Err(not_found("container", &req.id));
        }
        let root = podinit::runc::state::Root(self.0.runc.root.clone());
        let s = podinit::runc::state::load(&root, &req.id).map_err(|e| err(Code::NOT_FOUND, e))?;
        let group =
            podinit::runc::cgroup::open(&req.id, s.cgroups_path.as_deref(), &s.cgroup_paths)
                .map_err(|e| err(Code::UNKNOWN, e))?;
        let any = metrics::to_any(&group.stats(), podinit::sys::cgroup::unified())
            .map_err(|e| err(Code::UNKNOWN, e))?;
        Ok(api::StatsResponse {
            stats: MessageField::some(any),
            ..Default::default()
        })
    }

    fn connect(
        &self,
        _: &TtrpcContext,
        req: api::ConnectRequest,
    ) -> TtrpcResult<api::ConnectResponse> {
        let task_pid = self.0.lock().get(&req.id).map_or(0, |c| c.init.pid as u32);
        Ok(api::ConnectResponse {
            shim_pid: std::process::id(),
            task_pid,
            version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        })
    }

    fn shutdown(&self, _: &TtrpcContext, _: api::ShutdownRequest) -> TtrpcResult<api::Empty> {
        if self.0.lock().is_empty() {
            self.0.exit.signal();
        }
        Ok(api::Empty::default())
    }
}

/// Publishes events in the order they were made. Every change to a task publishes one,
/// so this thread also knows when the shim has been quiet for a second: then it gives
/// code pages back (a pod's shim spends its life waiting, and what ran for a create or a
/// start is mapped again from the page cache if it runs again; `sys::pages`, as podinit's
/// supervisor does).
pub fn publisher_thread(rx: mpsc::Receiver<Event>, publisher: RemotePublisher, namespace: String) {
    std::thread::spawn(move || {
        let mut busy = true;
        loop {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok((topic, e)) => {
                    let _ = publisher.publish(Context::default(), topic, &namespace, e);
                    busy = true;
                }
                Err(mpsc::RecvTimeoutError::Timeout) if busy => {
                    podinit::sys::pages::release_startup_pages();
                    busy = false;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    });
}
