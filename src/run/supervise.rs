//! In the new namespaces, as PID 1 of the pod: the supervisor finishes the sandbox
//! (volumes, sysctls, /etc files), then runs the pod.

use k8s_openapi::api::core::v1::Pod;

use super::namespaces::{given_namespaces, setup_namespaces, HostNamespaces};
use crate::bundle::HostVolume;
use crate::sandbox::statedir::StateDir;
use crate::supervisor::{self, EXIT_SANDBOX};

/// In the new namespaces, as PID 1: finish the sandbox, then run the pod. `pid1`: the
/// namespaces are the runtime's (PID-1 mode). `own_netns`: the pod's network namespace
/// was made with the supervisor (no `--netns`), so it has no address yet.
pub(super) fn supervise(
    mut cfg: supervisor::Config,
    sd: &StateDir,
    pid1: bool,
    own_netns: bool,
) -> i32 {
    // The pause container's rank: the OOM killer takes any container before the supervisor.
    // Containers and execs set their own score as they start.
    if let Err(e) = std::fs::write(
        "/proc/self/oom_score_adj",
        crate::pod::oom_score::SANDBOX.to_string(),
    ) {
        crate::log::warn(&format!(
            "the supervisor keeps its OOM score: writing {} to /proc/self/oom_score_adj: {e}",
            crate::pod::oom_score::SANDBOX
        ));
    }
    if let Err(e) = finish_sandbox(&mut cfg, sd, pid1, own_netns) {
        crate::log::error(&format!("setting up the sandbox: {e}"));
        return EXIT_SANDBOX;
    }
    supervisor::run(cfg, sd)
}

/// The namespaces made the pod's (hostname, loopback, /proc), then its volumes, sysctls
/// and /etc files, recorded in `cfg`: the volumes once the mount namespace is the pod's,
/// the addresses once its network namespace is.
fn finish_sandbox(
    cfg: &mut supervisor::Config,
    sd: &StateDir,
    pid1: bool,
    own_netns: bool,
) -> Result<(), String> {
    let host = HostNamespaces::of(cfg.pod.spec.as_ref().expect("admitted pod has a spec"));
    if pid1 {
        given_namespaces(&cfg.hostname, host)?;
    } else {
        setup_namespaces(&cfg.hostname, host)?;
    }
    let spec = cfg.pod.spec.clone().unwrap_or_default();
    let pod_ips = if own_netns {
        Vec::new()
    } else {
        crate::sandbox::net::pod_ips()
    };
    let (cpu, mem) = crate::supervisor::node_allocatable();
    let sources = crate::manifest::env::Sources {
        pod: &cfg.pod,
        config_maps: &cfg.config_maps,
        secrets: &cfg.secrets,
        pod_ips: &pod_ips,
        host_ips: &pod_ips,
        node_cpu_milli: cpu,
        node_memory: mem,
    };
    let files_of =
        |v: &k8s_openapi::api::core::v1::Volume| crate::manifest::files::of_volume(v, &sources);
    let volumes =
        crate::sandbox::volumes::prepare(&spec, sd, mem, &files_of).map_err(|e| e.to_string())?;
    cfg.volumes = volumes
        .into_iter()
        .map(|(k, (host_path, read_only))| {
            let v = HostVolume {
                host_path,
                read_only,
            };
            (k, v)
        })
        .collect();
    let sysctls: Vec<(String, String)> = spec
        .security_context
        .iter()
        .flat_map(|s| s.sysctls.iter().flatten())
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect();
    crate::sandbox::sysctls::apply(&sysctls)?;
    let (files, missing_dns) = pod_files(&cfg.pod, &pod_ips, &cfg.hostname, sd)?;
    cfg.pod_files = files;
    cfg.missing_cluster_dns = missing_dns;
    cfg.pod_ips = pod_ips;
    Ok(())
}

/// Write the pod's /etc/hosts and /etc/resolv.conf into the state dir; returns them with
/// their destinations, and whether `ClusterFirst` fell back to the node's DNS.
fn pod_files(
    pod: &Pod,
    pod_ips: &[String],
    hostname: &str,
    sd: &StateDir,
) -> Result<(crate::sandbox::etc_files::PodFiles, bool), String> {
    use crate::sandbox::etc_files;
    let dir = sd.work().join("etc");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let host_resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    let (resolv, missing_dns) = etc_files::resolv_conf(pod, &host_resolv);
    let mut out = Vec::new();
    for (name, text, dest) in [
        (
            "hosts",
            etc_files::hosts(
                pod,
                pod_ips,
                &super::names::hostname(pod),
                &std::fs::read_to_string("/etc/hosts").unwrap_or_default(),
            ),
            "/etc/hosts",
        ),
        ("resolv.conf", resolv, "/etc/resolv.conf"),
        ("hostname", format!("{hostname}\n"), "/etc/hostname"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("writing {}: {e}", p.display()))?;
        // Readable by every container user, as kubelet's are.
        let _ = std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644));
        out.push((p, dest));
    }
    Ok((out, missing_dns))
}
