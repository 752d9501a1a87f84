//! The node, as kubelet describes it to its admit handlers: its name and labels
//! (`Kubelet.initialNode`) and its allocatable resources (capacity less what
//! `--system-reserved` keeps back), from the machine and `podinit run`'s flags.

use std::collections::BTreeMap;
use std::path::Path;

use super::Error;
use crate::pod::admit::{Node, OS};

/// kubelet's default `maxPods`.
const MAX_PODS: i128 = 110;

/// The labels `--node-labels` may set in the `kubernetes.io` and `k8s.io` namespaces
/// (kubelet's `kubeletapis.KubeletLabels` and allowed prefixes).
const ALLOWED_KUBERNETES_LABELS: &[&str] = &[
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];

/// The node's flags, checked before anything is created.
#[derive(Clone, Debug, Default)]
pub(super) struct Flags {
    name: Option<String>,
    labels: BTreeMap<String, String>,
    reserved: BTreeMap<String, i128>,
    resources: BTreeMap<String, i128>,
}

/// `k=v,k2=v2` as pairs; `flag` names the option in the error.
fn pairs<'a>(flag: &str, text: &'a str) -> Result<Vec<(&'a str, &'a str)>, Error> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            item.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| Error::Options(format!("--{flag}: {item:?}: must be name=value")))
        })
        .collect()
}

impl Flags {
    /// `--node-name`, `--node-labels`, `--system-reserved`, `--node-resources`.
    pub(super) fn parse(opts: &super::RunOptions) -> Result<Flags, Error> {
        let mut f = Flags {
            name: opts.node_name.as_deref().map(|n| n.trim().to_lowercase()),
            ..Flags::default()
        };
        if let Some(n) = &f.name {
            crate::manifest::validate_dns1123_subdomain("--node-name", n)
                .map_err(|e| Error::Options(e.to_string()))?;
        }
        for (k, v) in pairs("node-labels", opts.node_labels.as_deref().unwrap_or(""))? {
            let (prefix, _) = k.split_once('/').unwrap_or(("", k));
            let restricted = ["kubernetes.io", "k8s.io"]
                .iter()
                .any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")));
            let allowed = ["kubelet.kubernetes.io", "node.kubernetes.io"]
                .iter()
                .any(|d| prefix == *d || prefix.ends_with(&format!(".{d}")))
                || ALLOWED_KUBERNETES_LABELS.contains(&k);
            if restricted && !allowed {
                return Err(Error::Options(format!(
                    "--node-labels: {k:?}: labels in the 'kubernetes.io' namespace must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io) or be in the specifically allowed set ({})",
                    ALLOWED_KUBERNETES_LABELS.join(", ")
                )));
            }
            f.labels.insert(k.to_string(), v.to_string());
        }
        for (k, v) in pairs(
            "system-reserved",
            opts.system_reserved.as_deref().unwrap_or(""),
        )? {
            if !["cpu", "memory", "ephemeral-storage"].contains(&k) {
                return Err(Error::Options(format!(
                    "--system-reserved: {k:?}: only cpu, memory and ephemeral-storage can be reserved"
                )));
            }
            let q = crate::quantity::parse(v)
                .ok()
                .filter(|q| q.milli() >= 0)
                .ok_or_else(|| {
                    Error::Options(format!("--system-reserved: {k}={v:?}: not a quantity"))
                })?;
            f.reserved
                .insert(k.into(), if k == "cpu" { q.milli() } else { q.value() });
        }
        for (k, v) in pairs(
            "node-resources",
            opts.node_resources.as_deref().unwrap_or(""),
        )? {
            if !crate::manifest::is_extended_resource_name(k) {
                return Err(Error::Options(format!(
                    "--node-resources: {k:?}: not an extended resource name (a domain, '/', a name, outside kubernetes.io)"
                )));
            }
            let n: u32 = v.parse().map_err(|_| {
                Error::Options(format!(
                    "--node-resources: {k}={v:?}: must be a whole count"
                ))
            })?;
            f.resources.insert(k.into(), n.into());
        }
        Ok(f)
    }

    /// The node: the machine as it is now, these flags applied. `storage` is where the
    /// pod's writable layers, volumes and logs go (its ephemeral storage). Not inlined:
    /// start-up's frame, gone before the pod's wait (docs/architecture.md §2).
    #[inline(never)]
    pub(super) fn node(&self, storage: &Path) -> Result<Node, Error> {
        let name = match &self.name {
            Some(n) => n.clone(),
            None => nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().trim().to_lowercase())
                .map_err(|e| Error::errno("reading the node's hostname", e))?,
        };
        let arch = go_arch(std::env::consts::ARCH);
        let mut labels: BTreeMap<String, String> = [
            ("kubernetes.io/hostname", name.as_str()),
            ("kubernetes.io/os", OS),
            ("kubernetes.io/arch", arch),
            ("beta.kubernetes.io/os", OS),
            ("beta.kubernetes.io/arch", arch),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        // As kubelet: --node-labels overwrite the defaults.
        labels.extend(self.labels.clone());
        let mut allocatable = capacity(storage);
        for (k, v) in &self.reserved {
            if let Some(a) = allocatable.get_mut(k) {
                *a = (*a - v).max(0);
            }
        }
        allocatable.extend(self.resources.clone());
        Ok(Node {
            name,
            labels,
            allocatable,
            used: BTreeMap::new(),
            apparmor: apparmor_enabled(),
        })
    }
}

/// Go's `GOARCH` for Rust's architecture name: the value of `kubernetes.io/arch`.
fn go_arch(rust: &str) -> &str {
    match rust {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// The machine's capacity as kubelet's cAdvisor reports it: online CPUs, total memory, the
/// size of the filesystem under `storage`, each pre-allocated huge page size, and pods.
fn capacity(storage: &Path) -> BTreeMap<String, i128> {
    let mut c = BTreeMap::new();
    // The same figures the supervisor's OOM scores are computed from (sysinfo's total RAM
    // is /proc/meminfo's MemTotal).
    let (cpu_milli, memory) = crate::supervisor::node_capacity();
    c.insert("cpu".to_string(), i128::from(cpu_milli));
    c.insert("memory".to_string(), i128::from(memory));
    let fs = storage
        .ancestors()
        .find_map(|p| nix::sys::statvfs::statvfs(p).ok());
    if let Some(s) = fs {
        let bytes = i128::from(s.blocks()) * i128::from(s.fragment_size());
        c.insert("ephemeral-storage".to_string(), bytes);
    }
    for e in std::fs::read_dir("/sys/kernel/mm/hugepages")
        .into_iter()
        .flatten()
        .flatten()
    {
        let dir = e.file_name().to_string_lossy().into_owned();
        let Some(kb) = dir
            .strip_prefix("hugepages-")
            .and_then(|s| s.strip_suffix("kB"))
            .and_then(|s| s.parse::<i128>().ok())
        else {
            continue;
        };
        let pages = std::fs::read_to_string(e.path().join("nr_hugepages"))
            .ok()
            .and_then(|s| s.trim().parse::<i128>().ok())
            .unwrap_or(0);
        c.insert(
            format!("hugepages-{}", page_size_name(kb * 1024)),
            pages * kb * 1024,
        );
    }
    c.insert("pods".to_string(), MAX_PODS);
    c
}

/// A page size as kubelet names its resource (`2Mi`, `1Gi`).
fn page_size_name(bytes: i128) -> String {
    for (unit, name) in [(1i128 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")] {
        if bytes % unit == 0 {
            return format!("{}{name}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// AppArmor is enforced, as runc's `apparmor.IsEnabled` (which kubelet uses) detects it.
fn apparmor_enabled() -> bool {
    Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|b| b.len() > 1 && b[0] == b'Y')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(labels: &str, reserved: &str, resources: &str) -> super::super::RunOptions {
        super::super::RunOptions {
            node_name: Some("Box-1".into()),
            node_labels: Some(labels.into()),
            system_reserved: Some(reserved.into()),
            node_resources: Some(resources.into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_node_has_kubelets_labels_and_the_flags() {
        let f = Flags::parse(&opts(
            "disktype=ssd,topology.kubernetes.io/zone=z1",
            "cpu=500m,memory=1Gi",
            "example.com/dongle=2",
        ))
        .unwrap();
        let n = f.node(Path::new("/")).unwrap();
        assert_eq!(n.name, "box-1", "lowercased as kubelet does");
        assert_eq!(n.labels["kubernetes.io/hostname"], "box-1");
        assert_eq!(n.labels["kubernetes.io/os"], "linux");
        assert_eq!(n.labels["beta.kubernetes.io/os"], "linux");
        assert_eq!(
            n.labels["kubernetes.io/arch"],
            go_arch(std::env::consts::ARCH)
        );
        assert_eq!(n.labels["disktype"], "ssd");
        assert_eq!(n.labels["topology.kubernetes.io/zone"], "z1");
        assert_eq!(n.allocatable["example.com/dongle"], 2);
        assert_eq!(n.allocatable["pods"], 110);
        let cap = capacity(Path::new("/"));
        assert_eq!(n.allocatable["cpu"], (cap["cpu"] - 500).max(0));
        assert_eq!(n.allocatable["memory"], (cap["memory"] - (1 << 30)).max(0));
        assert!(cap["ephemeral-storage"] > 0);
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let e = Flags::parse(&opts("disktype", "", "")).unwrap_err();
        let line = "--node-labels: \"disktype\": must be name=value";
        assert!(matches!(&e, Error::Options(m) if m == line), "{e}");
        let e = Flags::parse(&opts("node-role.kubernetes.io/master=", "", ""))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--node-labels: \"node-role.kubernetes.io/master\": labels in the 'kubernetes.io' namespace"), "{e}");
        assert!(Flags::parse(&opts("node.kubernetes.io/pool=a", "", "")).is_ok());
        let e = Flags::parse(&opts("", "gpu=1", ""))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--system-reserved: \"gpu\""), "{e}");
        let e = Flags::parse(&opts("", "memory=lots", ""))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--system-reserved: memory=\"lots\""), "{e}");
        let e = Flags::parse(&opts("", "", "gpu=1"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--node-resources: \"gpu\""), "{e}");
        let e = Flags::parse(&opts("", "", "nvidia.com/gpu=0.5"))
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("must be a whole count"), "{e}");
    }

    #[test]
    fn page_sizes_are_named_as_kubelet_names_them() {
        assert_eq!(page_size_name(2 << 20), "2Mi");
        assert_eq!(page_size_name(1 << 30), "1Gi");
        assert_eq!(page_size_name(64 << 10), "64Ki");
    }
}
