//! containerd 2's Sandbox API (`containerd.runtime.sandbox.v1.Sandbox`, served beside the
//! Task service on the pod's socket; docs/cri.md §6). With a runtime whose
//! `sandboxer = "shim"`, containerd asks the shim itself for the pod's sandbox: podinit
//! makes it with no container and no image, as a PID 1 (`sys::pause`) in the network
//! namespace containerd's CNI made, with pid, IPC and UTS namespaces of its own, in the pod's
//! cgroup. The pod's containers then come through the Task service and join its
//! namespaces by `/proc/<pid>/ns` paths, as they join a pause container's.
//!
//! `config.rs` reads the CRI's PodSandboxConfig; `files.rs` makes the pod's `/etc` files
//! and `/dev/shm` for its containers; `start.rs` starts the PID 1; `api.rs` is the ttrpc
//! surface; this file is the table of sandboxes and their lives.

mod api;
mod config;
mod files;
mod record;
mod start;

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use podinit::cgroup::{CgroupRoot, Group, StatsReader};
use podinit::sys::pause::SandboxCgroup;

use super::error::{Error, Result};
use super::orphan;
use super::reaper::Exit;
use super::service::Inner;
use config::PodConfig;

pub use start::init_main;

/// The shim's `delete` after a killed shim: its sandbox's PID 1, cgroup and shm go; the
/// PID 1's pid, when there was one. `root` is the shim's container state (`paths::runc_root`)
/// and `id` the sandbox's.
pub fn cleanup(bundle: &Path, root: &Path, id: &str) -> Option<i32> {
    let pid = record::cleanup(bundle);
    files::unmount(&super::paths::shm_dir(root, id));
    files::unmount_in_bundle(bundle);
    pid
}

/// A sandbox of this shim: made by CreateSandbox, its PID 1 started by StartSandbox.
struct Sandbox {
    config: PodConfig,
    /// Where containerd made the sandbox's bundle (the shim's working directory).
    bundle: PathBuf,
    /// The mount point of its `/dev/shm`, outside the bundle (`files.rs`).
    shm: PathBuf,
    netns: String,
    created_at: SystemTime,
    /// The sandbox's own cgroup (`<cgroup parent>/<id>`), once started.
    cgroup: Option<Group>,
    /// The pod cgroup's figures, found at the first SandboxMetrics and kept with their
    /// files open: containerd 2 asks for them every second.
    stats: Option<Arc<StatsReader>>,
    /// The handler's options say `SystemdCgroup = true`: the sandbox's cgroup is the
    /// transient scope `cri-containerd-<id>.scope` in the pod's slice, as a pause's is
    /// under runc's systemd driver.
    systemd: bool,
    /// Its scope, once started under the systemd driver.
    unit: Option<String>,
    pid: Option<i32>,
    exit: Option<Exit>,
}

impl Sandbox {
    /// What `crictl inspectp` shows of the sandbox, named as containerd's podsandbox
    /// controller names it: the pid, the process's status, and the namespaces as the
    /// runtime spec of a pause container would list them.
    fn info(&self, id: &str) -> serde_json::Value {
        let ns = self.config.namespaces_for(&self.netns);
        let mut namespaces = Vec::new();
        match &ns.netns {
            Some(p) => namespaces.push(serde_json::json!({"type": "network", "path": p})),
            None if self.config.network != config::Mode::Node => {
                namespaces.push(serde_json::json!({"type": "network"}))
            }
            None => {}
        }
        for (new, kind) in [
            (ns.new_pid, "pid"),
            (ns.new_ipc, "ipc"),
            (ns.new_uts, "uts"),
        ] {
            if new {
                namespaces.push(serde_json::json!({ "type": kind }));
            }
        }
        let status = match (self.pid, self.exit) {
            (None, _) => "created",
            (Some(_), None) => "running",
            (Some(_), Some(_)) => "stopped",
        };
        // The CRI's annotations of a sandbox, with the pod's own: what the sandbox was
        // made with.
        let c = &self.config;
        let mut annotations: serde_json::Map<String, serde_json::Value> = c
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        for (k, v) in [
            ("io.kubernetes.cri.container-type", "sandbox"),
            ("io.kubernetes.cri.sandbox-id", id),
            ("io.kubernetes.cri.sandbox-name", &c.name),
            ("io.kubernetes.cri.sandbox-namespace", &c.namespace),
            ("io.kubernetes.cri.sandbox-uid", &c.uid),
        ] {
            annotations.insert(k.into(), v.into());
        }
        serde_json::json!({
            "pid": self.pid.unwrap_or(0),
            "processStatus": status,
            "runtimeType": super::boot::RUNTIME_ID,
            "sandboxer": "shim",
            "runtimeSpec": {
                "hostname": ns.hostname,
                "annotations": annotations,
                "linux": {"namespaces": namespaces},
            },
        })
    }

    /// The CRI's `PodSandboxState` name, which containerd's CRI passes on as it is.
    fn state(&self) -> &'static str {
        match (self.pid, self.exit) {
            (Some(_), None) => "SANDBOX_READY",
            _ => "SANDBOX_NOTREADY",
        }
    }
}

/// The shim's sandboxes, by id, and what their calls share with the Task service.
pub struct Sandboxer {
    inner: Arc<Inner>,
    table: Mutex<HashMap<String, Sandbox>>,
    /// Woken when a sandbox's PID 1 exits.
    exited: Condvar,
    /// Held by whatever starts or ends a sandbox (StartSandbox, StopSandbox,
    /// ShutdownSandbox, the shim ending itself), so that a stop never runs half-way
    /// through a start: what the start makes would be left behind.
    life: Mutex<()>,
}

/// How long StopSandbox waits for the PID 1 after SIGKILL (it cannot ignore it).
const KILL_LIMIT: Duration = Duration::from_secs(10);

impl Sandboxer {
    pub fn new(inner: Arc<Inner>) -> Arc<Sandboxer> {
        Arc::new(Sandboxer {
            inner,
            table: Mutex::new(HashMap::new()),
            exited: Condvar::new(),
            life: Mutex::new(()),
        })
    }

    fn life(&self) -> MutexGuard<'_, ()> {
        self.life.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn table(&self) -> MutexGuard<'_, HashMap<String, Sandbox>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn not_found(id: &str) -> Error {
        Error::ContainerNotFound(format!("sandbox {id}"))
    }

    /// CreateSandbox: the sandbox's config is read and kept; nothing runs yet.
    pub fn create(
        &self,
        id: &str,
        bundle: &str,
        options: (&str, &[u8]),
        netns: &str,
    ) -> Result<()> {
        if id.is_empty() {
            return Err(Error::Invalid("CreateSandbox: no sandbox_id".into()));
        }
        let config = PodConfig::from_options(options.0, options.1)
            .map_err(|e| Error::Invalid(format!("sandbox {id}: {e}")))?;
        if config.user_namespace {
            return Err(Error::Unsupported(format!(
                "sandbox {id}: a pod's user namespace (hostUsers: false) is not supported by \
                 the podinit handler's Sandbox mode (docs/cri.md §6)"
            )));
        }
        if !netns.is_empty() && !std::path::Path::new(netns).exists() {
            return Err(Error::Missing(format!(
                "sandbox {id}: the network namespace {netns} does not exist"
            )));
        }
        let bundle = match bundle {
            "" => std::env::current_dir().unwrap_or_default(),
            b => PathBuf::from(b),
        };
        let systemd = super::bootstrap::kept_systemd_cgroup(&bundle);
        let shm = super::paths::shm_dir(&self.inner.runc.root, id);
        let mut t = self.table();
        if t.contains_key(id) {
            return Err(Error::ContainerExists(format!("sandbox {id}")));
        }
        t.insert(
            id.to_string(),
            Sandbox {
                config,
                bundle,
                shm,
                netns: netns.to_string(),
                created_at: SystemTime::now(),
                cgroup: None,
                stats: None,
                systemd,
                unit: None,
                pid: None,
                exit: None,
            },
        );
        self.inner.hold_sandbox(true);
        Ok(())
    }

    /// StartSandbox: the pod's cgroup and PID 1; its pid and when the sandbox was made.
    /// What it made is undone when it fails.
    pub fn start(self: &Arc<Self>, id: &str) -> Result<(u32, SystemTime)> {
        let _life = self.life();
        let (config, ns, path, created_at, bundle, shm, systemd) = {
            let t = self.table();
            let sb = t.get(id).ok_or_else(|| Self::not_found(id))?;
            if sb.pid.is_some() {
                return Err(Error::WrongState(format!("sandbox {id}: already started")));
            }
            (
                sb.config.clone(),
                sb.config.namespaces_for(&sb.netns),
                sb.config.cgroups_path(id),
                sb.created_at,
                sb.bundle.clone(),
                sb.shm.clone(),
                sb.systemd,
            )
        };
        let pod_files = files::make(&bundle, &shm, &config).map_err(|e| {
            files::unmount(&shm);
            Error::Setup(format!("sandbox {id}: {e}"))
        })?;
        let resolved = if systemd {
            let slice_path = format!("{}:cri-containerd:{id}", config.cgroup_parent);
            podinit::cgroup::systemd::resolve(Some(&slice_path), id)
                .map(|(u, g)| (g, u.cgroup.clone(), Some(u)))
        } else {
            CgroupRoot::for_oci_path(Some(&path), id).map(|g| (g, path.clone(), None))
        };
        let cgroup_err = |err| Error::Cgroup {
            what: format!("sandbox {id}"),
            err,
        };
        let (group, path, unit) = resolved.map_err(|err| {
            files::unmount(&shm);
            cgroup_err(err)
        })?;
        // The record before the cgroup it names exists, and again once the PID 1 is known:
        // a shim killed at any point leaves its `delete` what to remove.
        let record = |pid: i32| {
            let mut r = record::Record::new(id, pid, &path);
            r.systemd_unit = unit.as_ref().map(|u| u.name.clone());
            r.write(&bundle)
        };
        let made = record(0).map_err(|e| Error::Setup(format!("sandbox {id}: {e}")));
        if let Err(e) = made.and_then(|()| group.create_all().map_err(cgroup_err)) {
            let _ = group.remove();
            record::forget(&bundle);
            files::unmount(&shm);
            return Err(e);
        }
        let mut ns = ns;
        ns.cgroup = (!group.dirs().is_empty()).then(|| SandboxCgroup {
            v2: group.is_v2(),
            dirs: group.dirs().to_vec(),
        });
        // sandbox-init puts the PID 1 in the cgroup as it makes it.
        let pid1 = match start::pid1(&self.inner, &ns) {
            Ok(p) => p,
            Err(e) => {
                if let Some(u) = &unit {
                    let _ = podinit::cgroup::systemd::stop(&u.name);
                }
                let _ = group.remove();
                record::forget(&bundle);
                files::unmount(&shm);
                return Err(Error::Setup(format!("sandbox {id}: {e}")));
            }
        };
        // The PID 1 waits for the word that all is done, and ends if the shim dies first.
        let pid = pid1.pid;
        let placed = record(pid)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                // Asked of systemd with the PID 1 in the scope's directory already, as
                // podinit's runtime starts a container's scope.
                unit.as_ref().map_or(Ok(()), |u| {
                    podinit::cgroup::systemd::start(u, pid, None, None).map_err(|e| e.to_string())
                })
            })
            .and_then(|()| {
                pid1.recorded()
                    .map_err(|e| format!("telling its PID 1 {pid} to go on: {e}"))
            });
        if let Err(e) = placed {
            // Its cgroup goes only once the PID 1 has left it: killed, then reaped.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = self.inner.reaper.wait_for(pid, KILL_LIMIT);
            if let Some(u) = &unit {
                let _ = podinit::cgroup::systemd::stop(&u.name);
            }
            let _ = group.destroy();
            record::forget(&bundle);
            files::unmount(&shm);
            return Err(Error::Setup(format!("sandbox {id}: {e}")));
        }
        self.inner.set_pod_files(id, Some(pod_files));
        {
            let mut t = self.table();
            let sb = t.get_mut(id).ok_or_else(|| Self::not_found(id))?;
            sb.pid = Some(pid);
            sb.cgroup = Some(group);
            sb.unit = unit.map(|u| u.name);
        }
        let (me, sid) = (Arc::clone(self), id.to_string());
        self.inner
            .watch(pid, Box::new(move |exit| me.on_exit(&sid, exit)));
        Ok((pid as u32, created_at))
    }

    fn on_exit(&self, id: &str, exit: Exit) {
        if let Some(sb) = self.table().get_mut(id) {
            sb.exit = Some(exit);
        }
        self.exited.notify_all();
    }

    /// Blocks until the sandbox's PID 1 has exited (or `limit` passes); its exit.
    fn wait_exit(&self, id: &str, limit: Option<Duration>) -> Result<Option<Exit>> {
        let deadline = limit.map(|l| std::time::Instant::now() + l);
        let mut t = self.table();
        loop {
            let sb = t.get(id).ok_or_else(|| Self::not_found(id))?;
            if sb.pid.is_none() || sb.exit.is_some() {
                return Ok(sb.exit);
            }
            t = match deadline {
                None => self.exited.wait(t).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let Some(left) = d.checked_duration_since(std::time::Instant::now()) else {
                        return Ok(None);
                    };
                    self.exited
                        .wait_timeout(t, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// WaitSandbox: the PID 1's exit status and time, once it has exited.
    pub fn wait(&self, id: &str) -> Result<(u32, SystemTime)> {
        let exit = self.wait_exit(id, None)?;
        // Never started: it ended at its creation, as containerd counts a sandbox that
        // never ran.
        Ok(exit.map_or((0, SystemTime::now()), |e| (e.status, e.at)))
    }

    /// StopSandbox: SIGTERM (pause ends on it with 0), SIGKILL once `timeout` has passed,
    /// then the sandbox's cgroup goes. Stopping a stopped sandbox is no error.
    pub fn stop(&self, id: &str, timeout: Duration) -> Result<()> {
        let _life = self.life();
        self.stop_now(id, timeout)
    }

    /// StopSandbox's work, with the life lock held.
    fn stop_now(&self, id: &str, timeout: Duration) -> Result<()> {
        let pid = {
            let t = self.table();
            let sb = t.get(id).ok_or_else(|| Self::not_found(id))?;
            sb.pid.filter(|_| sb.exit.is_none())
        };
        if let Some(pid) = pid {
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            if self.wait_exit(id, Some(timeout))?.is_none() {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                if self.wait_exit(id, Some(KILL_LIMIT))?.is_none() {
                    return Err(Error::Setup(format!(
                        "sandbox {id}: its PID 1 {pid} did not exit on SIGKILL"
                    )));
                }
            }
        }
        self.remove_cgroup(id)
    }

    /// The sandbox's cgroup, its shm (as containerd's podsandbox controller unmounts a
    /// pause's at stop) and its record for a dead shim's `delete` go once it has stopped.
    fn remove_cgroup(&self, id: &str) -> Result<()> {
        let (group, bundle, shm, unit) = match self.table().get_mut(id) {
            Some(sb) => {
                sb.stats = None;
                (
                    sb.cgroup.take(),
                    sb.bundle.clone(),
                    sb.shm.clone(),
                    sb.unit.take(),
                )
            }
            None => return Ok(()),
        };
        files::unmount(&shm);
        // runc's order: the unit first, then what is left of its cgroup.
        if let Some(unit) = unit {
            podinit::cgroup::systemd::stop(&unit).map_err(|err| Error::Cgroup {
                what: format!("sandbox {id}"),
                err,
            })?;
        }
        if let Some(g) = group {
            g.destroy().map_err(|err| Error::Cgroup {
                what: format!("sandbox {id}: removing its cgroup"),
                err,
            })?;
            record::forget(&bundle);
        }
        Ok(())
    }

    /// SandboxStatus: pid, state, creation and exit times.
    pub fn status(&self, id: &str) -> Result<Status> {
        let t = self.table();
        let sb = t.get(id).ok_or_else(|| Self::not_found(id))?;
        Ok(Status {
            pid: sb.pid.unwrap_or(0) as u32,
            state: sb.state(),
            created_at: sb.created_at,
            exited_at: sb.exit.map(|e| e.at),
            info: sb.info(id),
        })
    }

    pub fn exists(&self, id: &str) -> Result<()> {
        self.table()
            .contains_key(id)
            .then_some(())
            .ok_or_else(|| Self::not_found(id))
    }

    /// SandboxMetrics: the pod cgroup's figures (the parent's, where the containers are
    /// too), as the Task service's Stats gives a container's.
    pub fn metrics(
        &self,
        id: &str,
    ) -> Result<containerd_shim::protos::protobuf::well_known_types::any::Any> {
        let (kept, path) = {
            let t = self.table();
            let sb = t.get(id).ok_or_else(|| Self::not_found(id))?;
            let path = match sb.config.cgroup_parent.as_str() {
                "" => sb.config.cgroups_path(id),
                // The pod's slice, by its cgroup's path.
                parent if sb.systemd => {
                    podinit::cgroup::systemd::expand_slice(parent).map_err(|err| Error::Cgroup {
                        what: format!("sandbox {id}"),
                        err,
                    })?
                }
                parent => parent.to_string(),
            };
            (sb.stats.clone(), path)
        };
        let reader = match kept {
            Some(r) => r,
            None => {
                let group =
                    CgroupRoot::for_oci_path(Some(&path), id).map_err(|err| Error::Cgroup {
                        what: format!("sandbox {id}"),
                        err,
                    })?;
                if !group.exists() {
                    return Err(Error::NoState(format!("sandbox {id}: no cgroup {path}")));
                }
                let r = Arc::new(group.metrics_reader());
                if let Some(sb) = self.table().get_mut(id) {
                    sb.stats = Some(Arc::clone(&r));
                }
                r
            }
        };
        let v2 = podinit::sys::cgroup::unified();
        reader
            .with_usage(|u| super::metrics::to_any(u, v2))
            .ok_or_else(|| {
                if let Some(sb) = self.table().get_mut(id) {
                    sb.stats = None;
                }
                Error::NoState(format!("sandbox {id}: no cgroup {path}"))
            })?
            .map_err(|e| Error::Setup(format!("sandbox {id}: {e}")))
    }

    /// ShutdownSandbox: the sandbox's containers that are still in the shim are ended (the
    /// CRI removes every container it knows before, so these are ones a containerd restart
    /// made it lose, as kata's runtime-rs ends them too), the sandbox is stopped if it
    /// still runs and forgotten, and the shim exits, after its answer has reached the
    /// caller on connection `conn` (`Inner::exit_once_answered`).
    pub fn shutdown(&self, id: &str, conn: Option<RawFd>) -> Result<()> {
        let life = self.life();
        // A shim holds one pod's sandbox (containerd groups its tasks by sandbox id); its
        // containers are ended only when no other sandbox is left in it.
        if self.table().keys().all(|k| k == id) {
            self.inner.end_containers();
        }
        if self.exists(id).is_ok() {
            self.stop_now(id, Duration::ZERO)?;
            self.table().remove(id);
            self.inner.set_pod_files(id, None);
        }
        drop(life);
        if self.table().is_empty() {
            self.inner.hold_sandbox(false);
            if self.inner.is_empty() {
                self.inner.exit_once_answered(conn);
            }
        }
        Ok(())
    }
}

impl Sandboxer {
    /// What the shim ending itself looks at (`orphan.rs`), with `bundle` the shim's.
    fn seen(&self, bundle: &Path) -> orphan::Seen {
        orphan::Seen {
            tasks: !self.inner.is_empty(),
            live_sandbox: self
                .table()
                .values()
                .any(|sb| sb.pid.is_some() && sb.exit.is_none()),
            bundle_gone: orphan::bundle_gone(bundle),
        }
    }

    /// Called once no connection has been open for the grace period: when the rule says
    /// containerd has dropped the shim, every container left is ended, every sandbox is
    /// stopped (its PID 1, cgroup, shm and record go), the shim's own files in the bundle are removed, and the shim ends (its
    /// socket goes as it exits). True when it ends.
    fn end_if_abandoned(&self, bundle: &Path) -> bool {
        let life = self.life();
        let seen = self.seen(bundle);
        if !orphan::abandoned(seen) {
            return false;
        }
        let ids: Vec<String> = self.table().keys().cloned().collect();
        let containers: Vec<String> = self
            .inner
            .containers()
            .iter()
            .map(|c| c.id.clone())
            .collect();
        self.inner.end_containers();
        super::say::warn(format_args!(
            "no connection from containerd for {} s and {}: ending the shim of {}",
            orphan::grace().as_secs(),
            if seen.bundle_gone {
                "its bundle is gone"
            } else {
                "nothing of its pod runs"
            },
            match (ids.is_empty(), containers.is_empty()) {
                (false, _) => format!("sandbox {}", ids.join(", ")),
                (true, false) => format!("container {}", containers.join(", ")),
                (true, true) => "no sandbox or container".to_string(),
            }
        ));
        for id in &ids {
            if let Err(e) = self.stop_now(id, Duration::ZERO) {
                super::say::warn(format_args!("{e}"));
            }
            self.table().remove(id);
            self.inner.set_pod_files(id, None);
        }
        // Relative to the working directory, which is the bundle even once containerd
        // has renamed it: the pod's files, and the address and options `start` wrote.
        files::remove_own(Path::new("."));
        for own in ["address", "options.json"] {
            let _ = std::fs::remove_file(own);
        }
        drop(life);
        self.inner.hold_sandbox(false);
        self.inner.exit.signal();
        true
    }
}

/// What SandboxStatus answers.
pub struct Status {
    pub pid: u32,
    pub state: &'static str,
    pub created_at: SystemTime,
    pub exited_at: Option<SystemTime>,
    /// The verbose status's `info`, in the keys of containerd's own sandbox info.
    pub info: serde_json::Value,
}

/// The sandbox service's ttrpc methods, to be served beside the Task service's. Every shim
/// ends itself once containerd has dropped it (`orphan.rs`): a Sandbox API shim, and a
/// task-mode one alike (containerd's podsandbox controller, cut short by a restart, leaves
/// its shim as the sandbox controller does; its table then holds tasks, or none).
pub fn service(
    inner: Arc<Inner>,
) -> HashMap<String, Box<dyn containerd_shim::protos::ttrpc::MethodHandler + Send + Sync>> {
    let sandboxer = Sandboxer::new(inner);
    let bundle = orphan::bundle_dir();
    let s = Arc::clone(&sandboxer);
    let peers = Arc::clone(&s.inner.peers);
    orphan::watch(peers, orphan::grace(), move || s.end_if_abandoned(&bundle));
    api::methods(sandboxer)
}
