//! A Sandbox API pod's own files in each of its containers (docs/cri.md §6). containerd's
//! CRI binds a sandbox's `/etc/hostname`, `/etc/hosts`, `/etc/resolv.conf` and `/dev/shm`
//! into a container only where its podsandbox controller made them; under a sandboxer of
//! the shim it leaves them to the sandboxer (containerd's `linuxContainerMounts`), so the
//! shim binds its own, as the CRI would have.

use oci_spec::runtime::{Mount, Spec};
use std::path::{Path, PathBuf};

/// The host's files of one pod, as the shim's sandboxer made them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFiles {
    pub hostname: PathBuf,
    pub hosts: PathBuf,
    pub resolv_conf: PathBuf,
    /// The pod's `/dev/shm` tmpfs; none with the node's IPC namespace, whose `/dev/shm`
    /// the CRI binds itself.
    pub shm: Option<PathBuf>,
}

/// A bind mount as the CRI's `WithMounts` writes one: `rbind`, `rprivate`, `ro` or `rw`.
fn bind(source: &Path, destination: &str, readonly: bool) -> Mount {
    let mut m = Mount::default();
    m.set_destination(destination.into());
    m.set_typ(Some("bind".into()));
    m.set_source(Some(source.to_path_buf()));
    m.set_options(Some(
        ["rbind", "rprivate", if readonly { "ro" } else { "rw" }]
            .map(String::from)
            .to_vec(),
    ));
    m
}

/// Adds the pod's files to a container's mounts; whether the spec changed. A destination
/// that a mount of the container's own already covers keeps it (a CRI mount, such as
/// kubelet's `/etc/hosts`). The `/etc` files are read-only with a read-only root, as the
/// CRI mounts them; `/dev/shm` replaces the spec's default tmpfs there, so that the
/// pod's containers share one.
pub fn with_pod_files(spec: &mut Spec, files: &PodFiles) -> bool {
    let readonly = spec
        .root()
        .as_ref()
        .and_then(|r| r.readonly())
        .unwrap_or(false);
    let mounts = spec.mounts_mut().get_or_insert_with(Vec::new);
    let mut changed = false;
    for (source, destination) in [
        (&files.hostname, "/etc/hostname"),
        (&files.hosts, "/etc/hosts"),
        (&files.resolv_conf, "/etc/resolv.conf"),
    ] {
        if !mounts
            .iter()
            .any(|m| m.destination() == Path::new(destination))
        {
            mounts.push(bind(source, destination, readonly));
            changed = true;
        }
    }
    if let Some(shm) = &files.shm {
        let pod_shm = bind(shm, "/dev/shm", false);
        match mounts
            .iter_mut()
            .find(|m| m.destination() == Path::new("/dev/shm"))
        {
            None => mounts.push(pod_shm),
            Some(m) if m.typ().as_deref() == Some("tmpfs") => *m = pod_shm,
            Some(_) => return changed,
        }
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(shm: bool) -> PodFiles {
        let d = Path::new("/run/b/sandbox");
        PodFiles {
            hostname: d.join("hostname"),
            hosts: d.join("hosts"),
            resolv_conf: d.join("resolv.conf"),
            shm: shm.then(|| d.join("shm")),
        }
    }

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(v).unwrap()
    }

    fn mounts(s: &Spec) -> Vec<(String, String, String)> {
        s.mounts()
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m.destination().display().to_string(),
                    m.source()
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    m.options()
                        .as_ref()
                        .map(|o| o.join(","))
                        .unwrap_or_default(),
                )
            })
            .collect()
    }

    #[test]
    fn the_pods_files_are_bound_as_the_cri_binds_them() {
        let mut s = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "root": {"path": "rootfs", "readonly": true},
            "mounts": [
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
                {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
                 "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}
            ]
        }));
        assert!(with_pod_files(&mut s, &files(true)));
        let t = |d: &str, s: &str, o: &str| (d.to_string(), s.to_string(), o.to_string());
        assert_eq!(
            mounts(&s),
            [
                t("/dev", "tmpfs", ""),
                t("/dev/shm", "/run/b/sandbox/shm", "rbind,rprivate,rw"),
                t(
                    "/etc/hostname",
                    "/run/b/sandbox/hostname",
                    "rbind,rprivate,ro"
                ),
                t("/etc/hosts", "/run/b/sandbox/hosts", "rbind,rprivate,ro"),
                t(
                    "/etc/resolv.conf",
                    "/run/b/sandbox/resolv.conf",
                    "rbind,rprivate,ro"
                ),
            ],
            "the pod's shm in place of the default, the /etc files read-only with the root"
        );
        assert!(!with_pod_files(&mut s, &files(true)), "twice is once");
    }

    #[test]
    fn a_containers_own_mounts_win() {
        let mut s = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "mounts": [
                {"destination": "/etc/hosts", "type": "bind", "source": "/var/lib/kubelet/pods/u/etc-hosts"},
                {"destination": "/dev/shm", "type": "bind", "source": "/dev/shm"}
            ]
        }));
        assert!(with_pod_files(&mut s, &files(true)));
        let m = mounts(&s);
        assert_eq!(m[0].1, "/var/lib/kubelet/pods/u/etc-hosts");
        assert_eq!(m[1].1, "/dev/shm", "the node's /dev/shm (hostIPC) stays");
        assert_eq!(
            m[2..].iter().map(|m| m.0.as_str()).collect::<Vec<_>>(),
            ["/etc/hostname", "/etc/resolv.conf"]
        );
        assert!(m[2].2.ends_with(",rw"), "a writable root: writable files");
        let mut none = spec(serde_json::json!({"ociVersion": "1.0.2"}));
        assert!(with_pod_files(&mut none, &files(false)));
        assert_eq!(mounts(&none).len(), 3, "no shm of the pod's: none bound");
    }
}
