//! A container's making and its init's start: runc's `create` with containerd's streams,
//! then `start` in the shim itself when it can, with TaskCreate and TaskStart in
//! containerd's order.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use containerd_shim::api;
use containerd_shim::protos::events::task as ev;
use containerd_shim::protos::protobuf::MessageField;
use containerd_shim::protos::topics;

use super::container::{Container, Processes};
use super::error::{Error, Result};
use super::exits::{early_exit, finish};
use super::process::{Proc, Status};
use super::runc::Streams;
use super::sandbox;
use super::service::Inner;
use super::stdio::{self, Paths};
use super::tasks;

impl Inner {
    /// Makes the container (mounting containerd's rootfs first, if it gave one) and adds
    /// it to the table; its init's pid.
    pub(super) fn create(self: &Arc<Self>, req: &api::CreateTaskRequest) -> Result<u32> {
        let id = req.id.as_str();
        if self.contains(id) {
            return Err(Error::ContainerExists(id.to_string()));
        }
        let bundle = PathBuf::from(&req.bundle);
        let rootfs = bundle.join("rootfs");
        let mounted = !req.rootfs.is_empty();
        if mounted {
            super::rootfs::mount_rootfs(&req.rootfs, &rootfs)?;
        }
        let mut procs = match self.create_in(req, &bundle) {
            Ok(p) => p,
            Err(e) => {
                if mounted {
                    let _ = nix::mount::umount2(&rootfs, nix::mount::MntFlags::MNT_DETACH);
                }
                return Err(e);
            }
        };
        procs.mounted_rootfs = mounted;
        let pid = procs.init.pid;
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
                pid: pid as u32,
                ..Default::default()
            }),
        );
        let c = Arc::new(Container::new(id.to_string(), bundle, procs));
        self.insert(Arc::clone(&c));
        early_exit(self, &c, &mut c.lock(), "", pid);
        Ok(pid as u32)
    }

    fn create_in(&self, req: &api::CreateTaskRequest, bundle: &Path) -> Result<Processes> {
        let id = req.id.as_str();
        let mut spec = sandbox::load(bundle)?;
        sandbox::for_create(id, &mut spec, &self.exe, |pod| self.pod_files(pod))?;
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
        // containerd hands each task the handler's options, as to its runc shim.
        let systemd = req
            .options
            .as_ref()
            .is_some_and(|o| super::bootstrap::systemd_cgroup(&o.type_url, &o.value));
        let mut args = vec!["create", "--bundle", &bundle_s, "--pid-file", &pid_s];
        if systemd {
            args.insert(0, "--systemd-cgroup");
        }
        self.run_with_stdio(bundle, &args, id, Some(&spec), &mut pre)?;
        // From here a failure must not leave the created container behind.
        let made = (|| {
            stdio::attach_console(&mut pre, &paths)?;
            let pid = read_pid(&pid_file)?;
            let root = podinit::runc::state::Root(self.runc.root.clone());
            let state =
                podinit::runc::state::load(&root, id).map_err(|e| Error::Other(e.to_string()))?;
            Ok::<_, Error>((pid, state))
        })();
        let (pid, state) = match made {
            Ok(m) => m,
            Err(e) => {
                let log = bundle.join("log.json");
                let _ = self
                    .runc
                    .run(&log, &["delete", "--force", id], Streams::none());
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
        Ok(Processes {
            init,
            execs: HashMap::new(),
            mounted_rootfs: false,
            oom,
            kill_all_on_exit: !own_pid_ns,
            deleted: false,
            delete_here: !podinit::runc::delete::waits_for_others(&state),
            held_init_exit: None,
        })
    }

    /// Runs `create` (with its `spec`) or `exec` (`args`, then the console socket if any,
    /// then `id`) with the process's streams; a console socket that got no terminal is
    /// removed.
    pub(super) fn run_with_stdio(
        &self,
        bundle: &Path,
        args: &[&str],
        id: &str,
        spec: Option<&oci_spec::runtime::Spec>,
        pre: &mut stdio::Prepared,
    ) -> Result<()> {
        let console = pre
            .console
            .as_ref()
            .map(|(_, p)| p.to_string_lossy().into_owned());
        let mut all = args.to_vec();
        if let Some(c) = &console {
            all.extend(["--console-socket", c]);
        }
        all.push(id);
        let streams = std::mem::replace(&mut pre.streams, Streams::none());
        let log = bundle.join("log.json");
        let run = match spec {
            Some(spec) => self.runc.create(&log, &all, streams, spec),
            None => self.runc.run(&log, &all, streams),
        };
        if let (Err(_), Some((_, p))) = (&run, &pre.console) {
            let _ = std::fs::remove_file(p);
        }
        run
    }
}

impl Container {
    /// Starts the init (`exec` empty) or an exec; only a created process starts.
    pub fn start(self: &Arc<Self>, inner: &Arc<Inner>, exec: &str) -> Result<u32> {
        {
            let mut procs = self.lock();
            let p = procs.get_mut(exec)?;
            if p.status != Status::Created {
                let who = if exec.is_empty() { &self.id } else { exec };
                return Err(Error::WrongState(format!(
                    "process {who}: cannot start a {} process",
                    p.status.name()
                )));
            }
            p.starting = exec.is_empty();
        }
        if exec.is_empty() {
            self.start_init(inner)
        } else {
            self.start_exec(inner, exec)
        }
    }

    /// In the shim itself when it can: `start` clones nothing (it opens the exec fifo),
    /// which saves a process. Poststart hooks are waited for with waitpid, which the
    /// reaper thread would race: those run `start` as a verb.
    fn start_init(self: &Arc<Self>, inner: &Arc<Inner>) -> Result<u32> {
        let root = podinit::runc::state::Root(inner.runc.root.clone());
        let loaded =
            podinit::runc::state::load(&root, &self.id).map_err(|e| Error::Runc(e.to_string()));
        let ran = loaded.and_then(|st| {
            let hooks = st.config.hooks().as_ref();
            if hooks
                .and_then(|h| h.poststart().as_ref())
                .is_some_and(|p| !p.is_empty())
            {
                self.verb(inner, &["start", &self.id])
            } else {
                podinit::runc::start::start(&root, &st).map_err(|e| Error::Runc(e.to_string()))
            }
        });
        let mut procs = self.lock();
        procs.init.starting = false;
        let pending = procs.init.pending.take();
        if let Err(e) = ran {
            if let Some(exit) = pending {
                finish(inner, self, &mut procs, "", exit);
            }
            return Err(e);
        }
        if procs.init.status == Status::Created {
            procs.init.status = Status::Running;
        }
        let pid = procs.init.pid as u32;
        // Under the lock, so that the reaper's TaskExit cannot come first.
        inner.publish(
            topics::TASK_START_EVENT_TOPIC,
            Box::new(ev::TaskStart {
                container_id: self.id.clone(),
                pid,
                ..Default::default()
            }),
        );
        if let Some(exit) = pending {
            finish(inner, self, &mut procs, "", exit);
        }
        Ok(pid)
    }
}

/// A pid file's pid, as runc's `--pid-file` writes it.
pub(super) fn read_pid(file: &Path) -> Result<i32> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Error::io(format_args!("reading {}", file.display()), e))?;
    text.trim()
        .parse()
        .map_err(|e| Error::Other(format!("pid file {}: {e}", file.display())))
}
