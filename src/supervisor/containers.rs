//! The kernel side of one container's runs: root filesystem, cgroup, log pipes, process
//! creation, stop and kill, and what is left to read after it exits. Decisions about *when*
//! are `pod`'s; this module only carries them out.

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::error::{Error, Result};
use crate::admission::{Base, ImageName};
use crate::bundle::{self, Bundle, HostVolume};
use crate::cgroup::{CgroupRoot, Group};
use crate::logs::{LogFile, Stream};
use crate::pod::{termination, Exit, Kind};
use crate::probe::exec::ExecCheck;
use crate::runtime;
use crate::sandbox::rootfs;

/// One container of the pod, across its runs. Its spec is the pod spec's entry of its
/// `kind` and `name` (`spec`), the one copy; only the resources it was allocated are kept
/// here, apart from the desired ones a resize writes into the pod's spec, as kubelet's
/// allocation manager keeps them.
pub struct Ctr {
    pub name: String,
    pub kind: Kind,
    /// The resources kubelet allocated: the spec's at admission, a resize's once admitted.
    pub allocated: Option<ResourceRequirements>,
    /// What it runs on: a bundle, or an image of the store; `None` while its image is
    /// still to be pulled.
    pub bundle: Option<Bundle>,
    /// An image that is not a bundle: looked up in the store (and pulled) at each start.
    pub image: Option<ImageState>,
    pub stop_signal: i32,
    /// Private directory: overlay layers, termination-log file.
    pub dir: PathBuf,
    pub cgroup: Group,
    cgroup_created: bool,
    /// With the systemd driver: the current run's scope, whose properties hold its
    /// limits.
    pub scope: Option<String>,
    /// Runs started so far: the next run's log is `logs/<name>/<runs>.log` (= restartCount).
    pub runs: u32,
    pub run: Option<Run>,
    /// `podinit://<64 hex>` of the current or last run.
    pub container_id: Option<String>,
    /// An ephemeral container's `targetContainerName`, as an index: it joins that one's
    /// pid namespace.
    pub target: Option<usize>,
    /// The uid, gid and groups of the last run's process, for `status.user.linux`.
    pub user: Option<(u32, u32, Vec<u32>)>,
    /// Whether the run was started in the pod's user namespace (its execs join it).
    pub in_user_ns: bool,
}

/// A container's image that is not a bundle, and kubelet's image manager's view of it.
pub struct ImageState {
    pub name: ImageName,
    pub gate: crate::pod::image_pull::ImageGate,
    /// The image's layers held (shared locks) while the container may run on them, so
    /// that `podinit images rm` refuses to remove them.
    pub held: Option<crate::image::store::Held>,
}

/// One run of a container: its main process and where its output goes.
pub struct Run {
    pub pid: i32,
    pub pidfd: OwnedFd,
    /// Setup or exec failed with this error (the process exits next); the exit reports it.
    pub start_error: Option<String>,
    pub log: Rc<RefCell<LogFile>>,
    /// The merged OCI spec it runs: processes exec'd into it use its process settings.
    pub spec: oci_spec::runtime::Spec,
    /// Where `podinit attach -i` writes (`stdin: true`): the write end of the stdin pipe, or
    /// the terminal's master with `tty: true`. Non-blocking; dropped to close stdin.
    pub stdin: Option<OwnedFd>,
    /// The terminal's master (`tty: true`), for window size changes.
    pub console: Option<OwnedFd>,
}

/// Output pipe of a run, read by the event loop until EOF.
pub struct OutPipe {
    /// Index of the container (in plan order).
    pub ctr: usize,
    pub fd: OwnedFd,
    pub stream: Stream,
    pub split: crate::logs::LineSplitter,
    pub log: Rc<RefCell<LogFile>>,
    /// The last piece sent to followers was part of a longer line (its time was sent).
    pub mid_line: bool,
}

/// What the pod needs to start any container.
pub struct StartContext<'a> {
    pub pod_spec: &'a PodSpec,
    /// The container's spec at its allocated resources (`Ctr::allocated_spec`).
    pub container: &'a Container,
    pub volumes: &'a BTreeMap<String, HostVolume>,
    pub hostname: &'a str,
    pub logs_dir: &'a Path,
    /// Join this process's pid namespace instead of making one (see `target`; or the
    /// pod's pause).
    pub pid_ns_of: Option<&'a OwnedFd>,
    /// The container's environment, resolved (`manifest::env`).
    pub env: &'a [(String, String)],
    /// `/etc/hosts` and `/etc/resolv.conf` of the pod.
    pub pod_files: &'a [(PathBuf, &'static str)],
    /// Where `Localhost` seccomp profiles are.
    pub seccomp_root: &'a Path,
    /// The pod's user namespace and the first host id it maps (`hostUsers: false`).
    pub user_ns: Option<(BorrowedFd<'a>, u32)>,
    /// Each of the container's `volumeMounts` recursively read-only or not.
    pub recursive_read_only: &'a [bool],
    /// Each of the container's `volumeMounts`' sub-path, `subPathExpr` expanded.
    pub sub_paths: &'a [Option<String>],
    /// With the systemd driver: each run is a scope in the pod's slice.
    pub scopes: Option<&'a super::scopes::Scopes>,
}

/// A container's cgroup, below the pod's.
pub fn cgroup_name(pod_cgroup: &str, container: &str) -> String {
    format!("{pod_cgroup}/c_{container}")
}

impl Ctr {
    /// Container `spec` of the pod's spec, as admitted: its allocated resources are the
    /// ones it asks for.
    pub fn new(
        kind: Kind,
        spec: &Container,
        base: Base,
        dir: PathBuf,
        cgroups: &CgroupRoot,
        pod_cgroup: &str,
    ) -> Result<Ctr> {
        let stop_signal = stop_signal_of(base.bundle.as_ref(), spec)?;
        let name = spec.name.clone();
        let cgroup = cgroups.group(&cgroup_name(pod_cgroup, &name));
        let image = base.image.map(|n| ImageState {
            gate: crate::pod::image_pull::ImageGate::new(&n.written, n.policy),
            name: n,
            held: None,
        });
        Ok(Ctr {
            name,
            kind,
            allocated: spec.resources.clone(),
            bundle: base.bundle,
            image,
            stop_signal,
            dir,
            cgroup,
            cgroup_created: false,
            scope: None,
            runs: 0,
            run: None,
            container_id: None,
            target: None,
            user: None,
            in_user_ns: false,
        })
    }

    /// Its spec in the pod's `pod`: an init or app container as written there (desired
    /// resources), an ephemeral one as the container it runs as.
    pub fn spec<'a>(&self, pod: &'a PodSpec) -> Cow<'a, Container> {
        let found = match self.kind {
            Kind::Ephemeral => pod
                .ephemeral_containers
                .iter()
                .flatten()
                .find(|c| c.name == self.name)
                .map(|c| Cow::Owned(crate::manifest::ephemeral::as_container(c))),
            Kind::Init | Kind::Sidecar | Kind::App => pod
                .init_containers
                .iter()
                .flatten()
                .chain(&pod.containers)
                .find(|c| c.name == self.name)
                .map(Cow::Borrowed),
        };
        // The supervisor adds a container to the pod's spec before its record, and no
        // patch removes one.
        found.expect("every container of the supervisor is in the pod's spec")
    }

    /// Its spec at the resources it was allocated: what each start runs (kubelet starts
    /// containers from the allocated pod).
    pub fn allocated_spec(&self, pod: &PodSpec) -> Container {
        Container {
            resources: self.allocated.clone(),
            ..self.spec(pod).into_owned()
        }
    }

    /// Run on `b` from the next start on (the image the store has now); `spec` is its
    /// spec.
    pub fn set_base(&mut self, b: Bundle, spec: &Container) -> Result<()> {
        self.stop_signal = stop_signal_of(Some(&b), spec)?;
        self.bundle = Some(b);
        Ok(())
    }

    /// Start a new run. On success the process exists and its output pipes are returned;
    /// whether it exec'd is in `run.start_error`. On error nothing of the run is left.
    pub fn start(&mut self, cx: &StartContext) -> Result<Vec<OutPipe>> {
        let res = self.try_start(cx);
        if res.is_err() {
            rootfs::release(&self.dir);
        }
        res
    }

    fn try_start(&mut self, cx: &StartContext) -> Result<Vec<OutPipe>> {
        fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(format_args!("creating {}", self.dir.display()), e))?;
        let term_log = self.dir.join("termination-log");
        fs::write(&term_log, b"")
            .map_err(|e| Error::io(format_args!("creating {}", term_log.display()), e))?;
        // Any container user may write its termination message.
        fs::set_permissions(&term_log, fs::Permissions::from_mode(0o666))
            .map_err(|e| Error::io(format_args!("chmod {}", term_log.display()), e))?;

        let base = self.bundle.as_ref().ok_or_else(|| Error::NotInStore {
            image: cx.container.image.clone().unwrap_or_default(),
        })?;
        let mut spec = crate::spec::for_container(
            base,
            cx.pod_spec,
            cx.container,
            &crate::spec::PodContext {
                volumes: cx.volumes,
                termination_log: Some(&term_log),
                // hostPID: the container stays in the supervisor's pid namespace, the host's.
                // A pause's shared namespace is joined as a target's is (`pid_ns_of`).
                share_process_namespace: crate::pod::userns::pid_namespace(cx.pod_spec)
                    == crate::pod::userns::PidNamespace::Supervisor,
                hostname: cx.hostname,
                env: cx.env,
                pod_files: cx.pod_files,
                seccomp_root: cx.seccomp_root,
                recursive_read_only: cx.recursive_read_only,
                sub_paths: cx.sub_paths,
                oom_score_adj: Some(crate::pod::oom_score::container(
                    cx.pod_spec,
                    cx.container,
                    self.kind == Kind::Sidecar,
                    super::node_capacity().1,
                )),
            },
        )?;
        let rootfs = rootfs::prepare(&base.lowers, &self.dir, cx.user_ns).map_err(Error::Os)?;
        if let Some(root) = spec.root_mut() {
            root.set_path(rootfs);
        }

        let id = crate::util::random_hex(32);
        let scope = match cx.scopes {
            Some(scopes) => {
                // A scope of its own for every run, named by its id; the last run's goes
                // with its processes (systemd removes an empty scope and its directory).
                let u = scopes.unit(&id)?;
                let fresh = self.cgroup.root().group(u.cgroup.trim_start_matches('/'));
                self.cgroup = fresh;
                self.cgroup_created = false;
                self.scope = Some(u.name.clone());
                Some((scopes, u))
            }
            None => None,
        };
        if self.cgroup_created {
            // A fresh cgroup for every run, as containerd gives every container instance.
            // It also matters on v2: some kernels (Debian's 6.1) SIGKILL every process born
            // with CLONE_INTO_CGROUP into a cgroup that `cgroup.kill` was ever written to.
            self.cgroup.renew();
            self.cgroup_created = false;
        }
        self.cgroup.create()?;
        self.cgroup_created = true;
        if let Some(r) = spec.linux().as_ref().and_then(|l| l.resources().as_ref()) {
            self.cgroup.set(r)?;
        }
        // Once per cgroup: v2 would stack one more program for each call.
        let device_rules = crate::spec::cgroup_rules(&spec);
        self.cgroup.confine_devices(&device_rules)?;

        let log_path = LogFile::path_for(cx.logs_dir, &self.name, self.runs);
        if let (Some(dir), Some(previous)) = (log_path.parent(), self.runs.checked_sub(1)) {
            crate::logs::prune_runs(dir, previous, crate::logs::GC_PERIOD);
        }
        let log = Rc::new(RefCell::new(LogFile::create(log_path).map_err(Error::Os)?));
        let devnull = fs::File::open("/dev/null").map_err(|e| Error::io("opening /dev/null", e))?;
        let flags = nix::fcntl::OFlag::O_CLOEXEC;
        let (out_r, out_w) = nix::unistd::pipe2(flags).map_err(|e| Error::sys("pipe", e))?;
        let (err_r, err_w) = nix::unistd::pipe2(flags).map_err(|e| Error::sys("pipe", e))?;
        for fd in [&out_r, &err_r] {
            set_nonblocking(fd);
        }
        let tty = cx.container.tty == Some(true);
        // `stdin: true` without a terminal: a pipe kept open by us for the container's
        // life, as the CRI keeps it; with a terminal, input goes through its master.
        let (in_r, in_w) = if cx.container.stdin == Some(true) && !tty {
            let (r, w) = nix::unistd::pipe2(flags).map_err(|e| Error::sys("pipe", e))?;
            set_nonblocking(&w);
            (Some(r), Some(w))
        } else {
            (None, None)
        };
        let stdin_fd = in_r.as_ref().map_or(devnull.as_raw_fd(), |r| r.as_raw_fd());

        let placement = self.cgroup.placement()?;
        let spawned = runtime::spawn(&runtime::Launch {
            name: &self.name,
            spec: &spec,
            stdio: [stdin_fd, out_w.as_raw_fd(), err_w.as_raw_fd()],
            cgroup: &placement,
            pid_ns_of: cx.pid_ns_of,
            user_ns: cx.user_ns.map(|(fd, _)| fd),
        })?;
        // Our copies of the write ends must go, or the pipes never reach EOF.
        drop((out_w, err_w, devnull, in_r));
        if let Some((scopes, u)) = &scope {
            let r = spec
                .linux()
                .as_ref()
                .and_then(|l| l.resources().clone())
                .unwrap_or_default();
            let started = scopes
                .start(u, spawned.pidfd.as_fd(), &r, &device_rules)
                .and_then(|()| {
                    // runc's Set after the properties: what systemd has no property for.
                    self.cgroup.set(&r).map_err(Error::from)
                });
            if let Err(e) = started {
                // Nothing of the run is left: its process is killed (and reaped as any).
                let _ = crate::sys::pidfd::send_signal(&spawned.pidfd, libc::SIGKILL);
                self.cgroup.kill_all();
                return Err(e);
            }
        }

        // With a terminal everything the container writes comes through its master, as
        // one stream: the CRI logs it all as stdout.
        let (console, stdin, outputs) = match spawned.console {
            Some(master) if tty => {
                let reader = master.try_clone().map_err(|e| Error::io("dup", e))?;
                let writer = if cx.container.stdin == Some(true) {
                    Some(master.try_clone().map_err(|e| Error::io("dup", e))?)
                } else {
                    None
                };
                drop((out_r, err_r));
                (Some(master), writer, vec![(reader, Stream::Stdout)])
            }
            _ => (
                None,
                in_w,
                vec![(out_r, Stream::Stdout), (err_r, Stream::Stderr)],
            ),
        };

        self.runs += 1;
        self.in_user_ns = cx.user_ns.is_some();
        self.container_id = Some(format!("podinit://{id}"));
        self.user = spec.process().as_ref().map(|p| {
            let u = p.user();
            (
                u.uid(),
                u.gid(),
                u.additional_gids().clone().unwrap_or_default(),
            )
        });
        self.run = Some(Run {
            pid: spawned.pid.as_raw(),
            pidfd: spawned.pidfd,
            start_error: spawned.start_error,
            log: log.clone(),
            spec,
            stdin,
            console,
        });
        Ok(outputs
            .into_iter()
            .map(|(fd, stream)| OutPipe {
                ctr: usize::MAX,
                fd,
                stream,
                split: Default::default(),
                mid_line: false,
                log: log.clone(),
            })
            .collect())
    }

    /// Start `command` inside the running container (exec probes and hooks): the
    /// container's user, capabilities, environment and cwd, its namespaces and cgroup;
    /// stdout and stderr both into one pipe, stdin from /dev/null. `pod_user_ns`: the
    /// pod's user namespace, joined when the run was started in it.
    pub fn exec(
        &self,
        command: &[String],
        pod_user_ns: Option<BorrowedFd>,
    ) -> std::result::Result<ExecCheck, runtime::Error> {
        self.exec_with(command, false, crate::probe::exec::MAX_OUTPUT, pod_user_ns)
    }

    /// [`Ctr::exec`] with stderr on a pipe of its own when `split`, keeping `limit` bytes
    /// of each stream (`podinit exec`).
    pub fn exec_with(
        &self,
        command: &[String],
        split: bool,
        limit: usize,
        pod_user_ns: Option<BorrowedFd>,
    ) -> std::result::Result<ExecCheck, runtime::Error> {
        let run = self.run.as_ref().ok_or_else(|| {
            runtime::Error::Exited(format!("container {} is not running", self.name))
        })?;
        if command.is_empty() {
            return Err(runtime::Error::spec("exec: no command"));
        }
        let mut spec = run.spec.clone();
        if let Some(p) = spec.process_mut() {
            p.set_args(Some(command.to_vec()));
            p.set_terminal(Some(false));
        }
        let devnull =
            fs::File::open("/dev/null").map_err(|e| runtime::Error::os("opening /dev/null", e))?;
        let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| runtime::Error::errno("pipe", e))?;
        set_nonblocking(&out_r);
        let (err_r, err_w) = if split {
            let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
                .map_err(|e| runtime::Error::errno("pipe", e))?;
            set_nonblocking(&r);
            (Some(r), Some(w))
        } else {
            (None, None)
        };
        let err_fd = err_w.as_ref().map_or(out_w.as_raw_fd(), |w| w.as_raw_fd());
        let placement = self.cgroup.placement()?;
        let spawned = runtime::spawn_in(
            &run.pidfd,
            &runtime::Launch {
                name: &self.name,
                spec: &spec,
                stdio: [devnull.as_raw_fd(), out_w.as_raw_fd(), err_fd],
                cgroup: &placement,
                pid_ns_of: None,
                user_ns: pod_user_ns.filter(|_| self.in_user_ns),
            },
        )?;
        drop((out_w, err_w, devnull));
        Ok(ExecCheck::new(spawned, out_r, err_r, limit, command))
    }

    /// Send `sig` to the run's main process (through its pidfd: immune to pid reuse).
    pub fn signal(&self, sig: i32) {
        if let Some(run) = &self.run {
            let _ = crate::sys::pidfd::send_signal(&run.pidfd, sig);
        }
    }

    /// SIGKILL the main process and everything else in the container's cgroup.
    pub fn kill(&self) {
        self.signal(libc::SIGKILL);
        if self.cgroup_created {
            self.cgroup.kill_all();
        }
    }

    /// The main process was reaped with wait status `status`. Returns the start error if the
    /// process never got to exec the container's program, else how it exited. Kills what
    /// the run left in the cgroup. Its root filesystem stays, as an exited container's does
    /// under kubelet, until the next run replaces it or the pod ends. `message_policy`: its
    /// spec's `terminationMessagePolicy`.
    pub fn exited(&mut self, status: i32, message_policy: Option<&str>) -> Result<Exit> {
        let Some(mut run) = self.run.take() else {
            return Err(Error::NoRun);
        };
        self.cgroup.kill_all();
        if let Some(msg) = run.start_error.take() {
            return Err(Error::Start(msg));
        }
        let (exit_code, signal) = termination::exit_code(status);
        // Every run has a cgroup of its own, made just before it: any OOM kill counted
        // there is this run's.
        let oom_killed = self.cgroup.oom_kills() > 0;
        let message = self.termination_message(exit_code, &run, message_policy);
        Ok(Exit {
            exit_code,
            signal,
            oom_killed,
            message,
        })
    }

    /// Read what `pod::termination::message` chooses from: the termination-log file and,
    /// only if it asks, the log's tail.
    fn termination_message(
        &self,
        exit_code: i32,
        run: &Run,
        policy: Option<&str>,
    ) -> Option<String> {
        let from_file = read_tail(
            &self.dir.join("termination-log"),
            termination::MESSAGE_MAX_BYTES,
        );
        termination::message(from_file, policy, exit_code, || {
            crate::logs::tail_text(
                run.log.borrow().path(),
                termination::FALLBACK_LINES,
                termination::FALLBACK_BYTES,
            )
        })
    }

    /// Unmount the container's root filesystem and remove its cgroup (pod teardown in
    /// PID-1 mode, where the mount namespace outlives us). Otherwise the mounts go with
    /// the supervisor's namespace, all at once, and the outer process removes the
    /// directories and the cgroups.
    pub fn teardown(&mut self) -> io::Result<()> {
        rootfs::release(&self.dir);
        if self.cgroup_created {
            self.cgroup.destroy()?;
            self.cgroup_created = false;
        }
        Ok(())
    }
}

/// The stop signal of a container on `b`; without a base yet, its own or SIGTERM (set
/// again once the image is there).
fn stop_signal_of(b: Option<&Bundle>, c: &Container) -> Result<i32> {
    match b {
        Some(b) => Ok(bundle::stop_signal(b, c)?),
        None => match c.lifecycle.as_ref().and_then(|l| l.stop_signal.as_deref()) {
            Some(s) => Ok(bundle::signal::parse(s)?),
            None => Ok(libc::SIGTERM),
        },
    }
}

fn read_tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > max {
        let _ = f.seek(SeekFrom::Start(len - max));
    }
    let mut buf = Vec::new();
    let _ = f.take(max).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

fn set_nonblocking(fd: &OwnedFd) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    if let Ok(fl) = fcntl(fd, FcntlArg::F_GETFL) {
        let _ = fcntl(
            fd,
            FcntlArg::F_SETFL(OFlag::from_bits_truncate(fl) | OFlag::O_NONBLOCK),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_of_a_file() {
        let p = std::env::temp_dir().join(format!("podinit-tail-{}", crate::util::random_hex(4)));
        fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_tail(&p, 4), "6789");
        assert_eq!(read_tail(&p, 100), "0123456789");
        fs::remove_file(&p).unwrap();
        assert_eq!(read_tail(&p, 4), "");
    }
}
