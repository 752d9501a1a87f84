//! Starting a container when `pod` says so: the environment resolved at each start (as
//! kubelet does), the target's or the pause's pid namespace, the run itself,
//! and what its start tells `pod`; and the volumes the containers need, set up before.

use k8s_openapi::api::core::v1::Volume;

use super::containers::StartContext;
use super::Supervisor;
use crate::bundle::HostVolume;
use crate::pod::{self, StartFailure};
use crate::sandbox::statedir::StateDir;

/// The machine's CPU (millicores) and memory (bytes): kubelet computes OOM scores from the
/// memory capacity, not the allocatable.
pub fn node_capacity() -> (i64, i64) {
    // Asked for every container (its OOM score, its downward API defaults); read once, as
    // kubelet reads the machine's capacity once.
    static NODE: std::sync::OnceLock<(i64, i64)> = std::sync::OnceLock::new();
    *NODE.get_or_init(|| {
        use crate::sys::proc::sysconf;
        let cpus = sysconf(libc::_SC_NPROCESSORS_ONLN).max(1);
        let pages = sysconf(libc::_SC_PHYS_PAGES).max(0);
        let page = sysconf(libc::_SC_PAGESIZE).max(0);
        (cpus * 1000, pages * page)
    })
}

/// Set up the pod's volumes named in `names` (every one when `None`), in the supervisor's
/// mount namespace: those set up join `cfg.volumes`; the others are returned with why, in
/// the volume plugin's words (`configmap "x" not found`).
pub fn set_up_volumes(
    cfg: &mut super::Config,
    sd: &StateDir,
    names: Option<&[String]>,
) -> Vec<(String, String)> {
    let (made, failed) = {
        let (cpu, mem) = cfg.node_allocatable;
        let sources = crate::manifest::env::Sources {
            pod: &cfg.pod,
            config_maps: &cfg.config_maps,
            secrets: &cfg.secrets,
            pod_ips: &cfg.pod_ips,
            host_ips: &cfg.pod_ips,
            node_cpu_milli: cpu,
            node_memory: mem,
            env_file: &crate::manifest::env::no_env_files,
        };
        let files_of = |v: &Volume| {
            crate::manifest::files::of_volume(v, &sources)
                .map_err(|e| crate::sandbox::Error::Files(e.to_string()))
        };
        let spec = cfg.pod_spec();
        let wanted = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| v.image.is_none())
            .filter(|v| names.is_none_or(|n| n.contains(&v.name)));
        crate::sandbox::volumes::prepare(wanted, spec, sd, mem, &files_of)
    };
    let (mut made, mut failed) = (made, failed);
    // An image's volume has no layers until a container that mounts it has the image
    // (`image_volumes_ready`), which mounts it then.
    let images = cfg
        .image_volumes
        .iter()
        .filter(|iv| names.is_none_or(|n| n.contains(&iv.name)));
    let mut holds = Vec::new();
    for iv in images {
        let Some(lowers) = &iv.lowers else { continue };
        let held = iv.stored.then(|| hold_stored(&cfg.images, &iv.reference));
        if let Some(h) = held.flatten() {
            holds.push(h);
        }
        match crate::sandbox::image_volume::mount(lowers, &sd.volume_dir(&iv.name)) {
            Ok(path) => {
                made.insert(iv.name.clone(), (path, true));
            }
            Err(e) => failed.push((iv.name.clone(), e.to_string())),
        }
    }
    cfg.image_volume_holds.extend(holds);
    for (name, (host_path, read_only)) in made {
        let v = match &cfg.userns {
            // Seen through the pod's idmap: what host root owns, container root owns.
            Some(ns) => {
                let mapped = sd.work().join("idmap").join("volumes").join(&name);
                match idmapped(&host_path, &mapped, ns.user_fd()) {
                    Ok(()) => HostVolume {
                        host_path: mapped,
                        read_only,
                        made_at: Some(host_path),
                    },
                    Err(e) => {
                        failed.push((name, e.to_string()));
                        continue;
                    }
                }
            }
            None => HostVolume {
                host_path,
                read_only,
                made_at: None,
            },
        };
        cfg.volumes.insert(name, v);
    }
    failed
}

/// A hold on the store's image `reference` (an image volume's), if the store still has it.
fn hold_stored(images: &std::path::Path, reference: &str) -> Option<crate::image::store::Held> {
    let name = crate::image::reference::Reference::parse(reference)
        .ok()?
        .to_string();
    let image = crate::admission::stored(images, &name).ok()??;
    let held = crate::image::store::Store::open(images).and_then(|s| s.hold(&image));
    held.map_err(|e| crate::log::warn(&format!("image volume {reference}: {e}")))
        .ok()
}

/// `src` idmapped with the pod's user namespace at `target` (one made earlier there, for
/// a volume set up again, replaced).
pub fn idmapped(
    src: &std::path::Path,
    target: &std::path::Path,
    userns: std::os::fd::BorrowedFd,
) -> Result<(), super::Error> {
    while crate::sys::mount::detach(target).is_ok() {}
    crate::sys::idmap::bind(src, target, userns).map_err(|e| {
        super::Error::io(
            format_args!(
                "idmapped mount of {} at {}",
                src.display(),
                target.display()
            ),
            e,
        )
    })
}

impl Supervisor<'_> {
    /// The pod's user namespace, which the execs of a container started in it join.
    pub(super) fn pod_user_ns(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.cfg.userns.as_ref().map(|u| u.user_fd())
    }

    /// `pod` asked to try these volumes again: report how each went.
    pub(super) fn mount_volumes(&mut self, names: &[String]) {
        let failed = set_up_volumes(&mut self.cfg, self.sd, Some(names));
        let now = self.now();
        for n in names {
            match failed.iter().find(|(v, _)| v == n) {
                Some((_, e)) => self.st.on_mount_failed(n, e, now),
                None => self.st.on_mounted(n),
            }
        }
    }

    pub(super) fn start(&mut self, i: usize) {
        self.release_later();
        let now = self.now();
        self.containers[i].start_requested = Some(now);
        // kubelet has the pod's image volumes before the container's own image
        // (`SyncPod`); a start that waits for its image's pull has its volumes already.
        if !self.containers[i].volumes_ready {
            if !self.image_volumes_ready(i, now) {
                return;
            }
            self.containers[i].volumes_ready = true;
        }
        if !self.image_ready(i, now) {
            let pulling = self.containers[i]
                .ctr
                .image
                .as_ref()
                .is_some_and(|m| m.gate.pulling_since.is_some());
            self.containers[i].volumes_ready = pulling;
            return;
        }
        self.containers[i].volumes_ready = false;
        // An ephemeral container with a target joins the target's pid namespace (the
        // pause's too when the pod shares one).
        let target_pidfd = match self.containers[i].ctr.target {
            Some(t) => match self.containers[t].ctr.run.as_ref() {
                Some(r) => Ok(r.pidfd.try_clone().ok()),
                None => Err(format!(
                    "target container {:?} is not running",
                    self.containers[t].ctr.name
                )),
            },
            // The others of a pod whose shared pid namespace is its pause's join that one.
            None if pod::userns::pid_namespace(self.cfg.pod_spec())
                == pod::userns::PidNamespace::Pause =>
            {
                self.pause_pidfd().map(Some).map_err(|e| e.to_string())
            }
            None => Ok(None),
        };
        let target_pidfd = match target_pidfd {
            Ok(fd) => fd,
            Err(msg) => {
                self.st
                    .on_start_failed(&self.cfg.plan, i, StartFailure::Create, &msg, now);
                return;
            }
        };
        // What it runs: its spec at the resources allocated to it.
        let container = self.containers[i].ctr.allocated_spec(self.cfg.pod_spec());
        // The environment, resolved at each start as kubelet does: a missing key keeps the
        // container waiting in CreateContainerConfigError.
        let env = {
            let (cpus, mem) = self.cfg.node_allocatable;
            let volumes = &self.cfg.volumes;
            let env_file = |vol: &str, path: &str| {
                super::env_files::read(volumes, vol, path)
                    .map_err(|e| crate::manifest::env::ConfigError(e.to_string()))
            };
            let sources = crate::manifest::env::Sources {
                pod: &self.cfg.pod,
                config_maps: &self.cfg.config_maps,
                secrets: &self.cfg.secrets,
                pod_ips: &self.cfg.pod_ips,
                host_ips: &self.cfg.pod_ips,
                node_cpu_milli: cpus,
                node_memory: mem,
                env_file: &env_file,
            };
            match crate::manifest::env::resolve(&container, &sources) {
                Ok(r) => r,
                Err(crate::manifest::env::ConfigError(msg)) => {
                    self.st
                        .on_start_failed(&self.cfg.plan, i, StartFailure::Config, &msg, now);
                    return;
                }
            }
        };
        for w in &env.warnings {
            self.event(pod::events::invalid_env_names(i, w));
        }
        // kubelet resolves each mount's recursive read-only mode as it makes the mounts
        // (`makeMounts`): a mode it cannot have is a configuration error.
        let mounts = container.volume_mounts.as_deref();
        let rro = match pod::recursive_read_only::resolve_all(
            mounts.unwrap_or_default(),
            self.cfg.rro_supported,
        ) {
            Ok(r) => r,
            Err(e) => {
                let msg = e.to_string();
                self.st
                    .on_start_failed(&self.cfg.plan, i, StartFailure::Config, &msg, now);
                return;
            }
        };
        // `subPathExpr` expands against the environment just resolved (`makeMounts`).
        let sub_paths = match pod::sub_path::resolve_all(mounts.unwrap_or_default(), &env.env) {
            Ok(s) => s,
            Err(e) => {
                let msg = e.to_string();
                self.st
                    .on_start_failed(&self.cfg.plan, i, StartFailure::Config, &msg, now);
                return;
            }
        };
        let cx = StartContext {
            pod_spec: self.cfg.pod_spec(),
            container: &container,
            volumes: &self.cfg.volumes,
            hostname: &self.cfg.hostname,
            logs_dir: &self.sd.logs(),
            pid_ns_of: target_pidfd.as_ref(),
            env: &env.env,
            pod_files: &self.cfg.pod_files,
            seccomp_root: &self.cfg.seccomp_root,
            user_ns: self.cfg.userns.as_ref().map(|u| (u.user_fd(), u.base)),
            recursive_read_only: &rro,
            sub_paths: &sub_paths,
            scopes: self.cfg.scopes.as_ref(),
        };
        match self.containers[i].ctr.start(&cx) {
            Ok(pipes) => {
                self.pipes.extend(pipes.into_iter().map(|mut p| {
                    p.ctr = i;
                    p
                }));
                // Decided when the clone returned: the process is running before anything
                // else is seen of it (its exit), and `decide` goes on to the next start, as
                // kubelet starts a pod's containers in one sync and then reports them. One
                // that failed exits next, and its exit reports the error.
                if self.containers[i]
                    .ctr
                    .run
                    .as_ref()
                    .is_some_and(|r| r.start_error.is_none())
                {
                    self.started(i);
                }
            }
            // Said by the `Failed` event it records.
            Err(e) => {
                let msg = e.to_string();
                self.st
                    .on_start_failed(&self.cfg.plan, i, StartFailure::Create, &msg, now);
            }
        }
    }

    /// Container `i`'s process exec'd.
    pub(super) fn started(&mut self, i: usize) {
        let now = self.now();
        if let Some(t) = self.containers[i].start_requested.take() {
            let name = self.containers[i].ctr.name.clone();
            self.metrics
                .started(&name, now.saturating_sub(t) as f64 / 1000.0);
        }
        // What the runtime reports of the new run's resources (the status's `resources`).
        self.containers[i].observed =
            Some(super::resize::read_back(&self.containers[i].ctr.cgroup));
        self.st.on_started(&self.cfg.plan, i, now);
    }
}
