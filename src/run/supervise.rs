//! In the new namespaces, as PID 1 of the pod: the supervisor finishes the sandbox
//! (volumes, sysctls, /etc files), then runs the pod.

use k8s_openapi::api::core::v1::Pod;

use super::namespaces::{given_namespaces, setup_namespaces, HostNamespaces};
use super::Error;
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
    set_oom_score(crate::pod::oom_score::SANDBOX);
    if let Err(e) = finish_sandbox(&mut cfg, sd, pid1, own_netns) {
        crate::log::error(&format!("setting up the sandbox: {e}"));
        return EXIT_SANDBOX;
    }
    supervisor::run(cfg, sd)
}

/// The marker of the refused OOM score told, under the state root: on tmpfs, so once per
/// boot.
const OOM_TOLD: &str = "oom-score-told";

/// Whether this is the first time `marker` is asked for on this machine (it is made now).
/// A marker that cannot be made answers yes: better said again than never.
fn first_on_this_machine(path: &std::path::Path) -> bool {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
    }
}

/// Give the supervisor OOM score `adj`. Refused for want of CAP_SYS_RESOURCE, it is said
/// once per machine, every time with `--verbose` (`pod::oom_score::refused`), and only
/// when the score it keeps is higher.
#[inline(never)]
fn set_oom_score(adj: i32) {
    const PATH: &str = "/proc/self/oom_score_adj";
    // Through a private procfs, as the runtime writes a container's: the supervisor's /proc
    // is the pod's, which a container that can mount might cover.
    let path = std::path::Path::new(PATH);
    match crate::sys::procfs::write(path, adj.to_string().as_bytes()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let kept = crate::sys::procfs::read(path)
                .ok()
                .and_then(|t| String::from_utf8_lossy(&t).trim().parse::<i32>().ok());
            if let Some(msg) = kept.and_then(|k| crate::pod::oom_score::refused(adj, k)) {
                // The marker is made either way: a run without --verbose stays silent after.
                let marker = super::state_root().join(OOM_TOLD);
                if first_on_this_machine(&marker) || crate::log::verbose() {
                    crate::log::warn(&msg);
                }
            }
        }
        Err(e) => crate::log::warn(&format!("writing {adj} to {PATH}: {e}")),
    }
}

/// The namespaces made the pod's (hostname, loopback, /proc), then its volumes, sysctls
/// and /etc files, recorded in `cfg`: the volumes once the mount namespace is the pod's,
/// the addresses once its network namespace is. Not inlined: its frame is given back
/// before the supervisor's loop starts under `supervise`'s.
#[inline(never)]
fn finish_sandbox(
    cfg: &mut supervisor::Config,
    sd: &StateDir,
    pid1: bool,
    own_netns: bool,
) -> Result<(), Error> {
    let host = HostNamespaces::of(cfg.pod.spec.as_ref().expect("admitted pod has a spec"));
    if pid1 {
        given_namespaces(&cfg.hostname, host)?;
    } else {
        setup_namespaces(&cfg.hostname, host)?;
    }
    let spec = cfg.pod.spec.clone().unwrap_or_default();
    cfg.pod_ips = if own_netns {
        Vec::new()
    } else {
        crate::sys::net::pod_ips()
    };
    // Volumes that fail to set up are kubelet's FailedMount (the pod waits, tried again),
    // never a sandbox error; one no container mounts is not waited for.
    let used = crate::pod::volumes::used(&spec);
    cfg.unmounted = supervisor::set_up_volumes(cfg, sd, None)
        .into_iter()
        .filter(|(v, _)| used.contains(v))
        .collect();
    let sysctls: Vec<(String, String)> = spec
        .security_context
        .iter()
        .flat_map(|s| s.sysctls.iter().flatten())
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect();
    crate::sandbox::sysctls::apply(&sysctls)?;
    let (files, missing_dns) = pod_files(&cfg.pod, &cfg.pod_ips, &cfg.hostname, sd)?;
    cfg.pod_files = match &cfg.userns {
        // Bound from an idmapped view of their directory: owned by the container's root.
        Some(ns) => {
            let mapped = sd.work().join("idmap").join("etc");
            supervisor::idmapped(&sd.work().join("etc"), &mapped, ns.user_fd())?;
            files
                .into_iter()
                .map(|(p, dest)| (mapped.join(p.file_name().unwrap_or_default()), dest))
                .collect()
        }
        None => files,
    };
    cfg.missing_cluster_dns = missing_dns;
    Ok(())
}

/// Write the pod's /etc/hosts and /etc/resolv.conf into the state dir; returns them with
/// their destinations, and whether `ClusterFirst` fell back to the node's DNS.
fn pod_files(
    pod: &Pod,
    pod_ips: &[String],
    hostname: &str,
    sd: &StateDir,
) -> Result<(crate::sandbox::etc_files::PodFiles, bool), Error> {
    use crate::sandbox::etc_files;
    let dir = sd.work().join("etc");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format_args!("creating {}", dir.display()), e))?;
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
        std::fs::write(&p, text)
            .map_err(|e| Error::io(format_args!("writing {}", p.display()), e))?;
        // Readable by every container user, as kubelet's are.
        let _ = std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644));
        out.push((p, dest));
    }
    Ok((out, missing_dns))
}
