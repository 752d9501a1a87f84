//! What the supervisor is given: the admitted pod, its containers with their cgroups, and
//! the options of `podinit run` that it needs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::pod_cgroup::{Made, PodCgroup};
use super::{Error, RunOptions, DEFAULT_SECCOMP_ROOT};
use crate::admission::Admission;
use crate::sandbox::statedir::StateDir;
use crate::supervisor::{self, containers::Ctr};

/// The supervisor's configuration for `adm`, its containers' cgroups below `made`.
/// Outside PID-1 mode each container's cgroup is recorded in `cgroup`, to be removed with
/// the pod's. The volumes, the pod's files and IPs are filled in by the supervisor, once
/// it is in the pod's namespaces. Not inlined: start-up's frame, gone before the pod's
/// wait (docs/architecture.md §2).
#[inline(never)]
pub(super) fn supervisor_config(
    adm: Admission,
    opts: &RunOptions,
    made: &Made,
    cgroup: &mut PodCgroup,
    sd: &StateDir,
    pid1: bool,
    puller: Option<std::os::fd::OwnedFd>,
) -> Result<supervisor::Config, Error> {
    let hostname = super::names::uts_hostname(&adm.pod)?;
    let without_cgroups = made.without.map(|why| {
        let spec = adm.pod.spec.as_ref().expect("admitted pod has a spec");
        crate::pod::rootless::without_message(why, &crate::pod::rootless::asked(spec))
    });
    let dirs = opts.dir_paths();
    // Under systemd the containers' scopes go with the pod's slice.
    let own_containers = !pid1 && cgroup.slice().is_none();
    if own_containers {
        cgroup.own_containers(&made.root);
    }
    let scopes = match cgroup.slice() {
        Some(s) => Some(supervisor::scopes::Scopes::new(s)?),
        None => None,
    };
    let mut ctrs = Vec::new();
    for (kind, c, b) in adm.containers {
        let dir = sd.container_dir(&c.name);
        if own_containers {
            cgroup.add_container(supervisor::containers::cgroup_name(&made.name, &c.name));
        }
        ctrs.push(Ctr::new(kind, &c, b, dir, &made.root, &made.name)?);
    }
    if pid1 && opts.netns.is_some() {
        return Err(Error::Refused(
            "--netns cannot be used in PID-1 mode: podinit uses the namespaces it was started in"
                .into(),
        ));
    }
    Ok(supervisor::Config {
        pod: adm.pod,
        plan: adm.plan,
        containers: ctrs,
        volumes: BTreeMap::new(),
        hostname,
        socket: opts
            .socket
            .clone()
            .unwrap_or_else(|| sd.root.join("pod.sock")),
        // Made here, in podinit's own network namespace: an abstract $NOTIFY_SOCKET is
        // only reachable from there.
        notifier: crate::status::notify::Notifier::new(
            opts.notify_socket.clone(),
            std::env::var("NOTIFY_SOCKET")
                .ok()
                .filter(|s| !s.is_empty()),
        ),
        bundles: dirs.bundles,
        images: dirs.images,
        puller,
        seccomp_root: opts
            .seccomp_root
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SECCOMP_ROOT)),
        cgroups: made.root.clone(),
        pod_cgroup: made.name.clone(),
        private_mounts: !pid1,
        pod_files: Vec::new(),
        missing_cluster_dns: false,
        pod_ips: Vec::new(),
        preset_conflict: adm.preset_conflict,
        without_cgroups,
        node_allocatable: adm
            .node_allocatable
            .unwrap_or_else(supervisor::node_capacity),
        config_maps: adm.config_maps,
        secrets: adm.secrets,
        unmounted: Vec::new(),
        userns: None,
        rro_supported: crate::sys::mount::setattr_supported(),
        image_volumes: adm.image_volumes,
        image_volume_holds: Vec::new(),
        scopes,
    })
}
