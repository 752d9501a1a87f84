//! The names a pod is known by on the node: its hostname, its state dir and its cgroup.

use k8s_openapi::api::core::v1::Pod;
use std::path::{Path, PathBuf};

/// The pod's hostname (`GeneratePodHostNameAndDomain`): `spec.hostnameOverride`
/// (KEP-4762), else `spec.hostname`, else the pod name, cut to 63 characters (kubelet
/// also drops trailing '-' and '.' after cutting).
pub fn hostname(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    if let Some(h) = spec.and_then(|s| s.hostname_override.as_deref()) {
        return truncated(h);
    }
    if let Some(h) = spec.and_then(|s| s.hostname.clone()) {
        return h;
    }
    truncated(pod.metadata.name.as_deref().unwrap_or_default())
}

/// kubelet's `truncatePodHostnameIfNeeded`.
fn truncated(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_string();
    }
    name[..63].trim_end_matches(['-', '.']).to_string()
}

/// `spec.hostnameOverride` is set: the pod has no domain (kubelet's hostDomain is empty),
/// so neither `subdomain` nor `setHostnameAsFQDN` makes an FQDN of it.
pub fn overridden(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    spec.is_some_and(|s| s.hostname_override.is_some())
}

/// The UTS hostname: with `setHostnameAsFQDN` and a `subdomain`, the pod's FQDN (at most
/// 64 characters, as kubelet allows).
pub fn uts_hostname(pod: &Pod) -> Result<String, super::Error> {
    let spec = pod.spec.clone().unwrap_or_default();
    if spec.host_network == Some(true) {
        // The node's UTS namespace comes with its network: the node's name.
        return nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .map_err(|e| super::Error::errno("reading the node's hostname", e));
    }
    let short = hostname(pod);
    if overridden(pod) {
        return Ok(short);
    }
    let Some(sub) = spec.subdomain.filter(|s| !s.is_empty()) else {
        return Ok(short);
    };
    if spec.set_hostname_as_fqdn != Some(true) {
        return Ok(short);
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let fqdn = format!(
        "{short}.{sub}.{ns}.svc.{}",
        crate::sandbox::etc_files::CLUSTER_DOMAIN
    );
    if fqdn.len() > 64 {
        return Err(super::Error::Name(format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long (64 characters is the max, {} characters requested)",
            fqdn.len()
        )));
    }
    Ok(fqdn)
}

/// Where each pod's state dir is by default, and where the client commands find pods by
/// name (docs/interface.md §2).
pub const STATE_ROOT: &str = "/run/podinit";

/// Where pods are by default: [`STATE_ROOT`] as root, the user's runtime directory
/// without (docs/interface.md §Without root).
pub fn state_root() -> PathBuf {
    if crate::sys::rootless::rootless() {
        crate::sys::rootless::runtime_dir()
    } else {
        PathBuf::from(STATE_ROOT)
    }
}

/// `<state root>/<namespace>_<name>`.
pub fn default_state_dir(pod: &Pod) -> PathBuf {
    state_root().join(format!(
        "{}_{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    ))
}

/// `--state-dir`, else the default one, which must fit a file name.
pub(super) fn state_dir(pod: &Pod, given: Option<&Path>) -> Result<PathBuf, super::Error> {
    if let Some(d) = given {
        return Ok(d.to_path_buf());
    }
    let d = default_state_dir(pod);
    let leaf = d.file_name().unwrap_or_default().len();
    if leaf > 255 {
        // A 253-character name is valid; a file name cannot hold it with the namespace.
        return Err(super::Error::Name(format!(
            "the default state dir {} has a last component of {leaf} bytes, more than the 255 a file name may have: give --state-dir",
            d.display()
        )));
    }
    Ok(d)
}

/// The pod cgroup's name below the parent.
pub(super) fn pod_cgroup_name(pod: &Pod) -> String {
    format!(
        "podinit_{}_{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, hostname: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                hostname: hostname.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn hostname_is_the_pod_name_cut_to_63() {
        assert_eq!(hostname(&pod("web", None)), "web");
        assert_eq!(hostname(&pod("web", Some("h1"))), "h1");
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        assert_eq!(hostname(&pod(&long, None)), "a".repeat(62));
    }

    /// The KEP's table: an override is the hostname whatever `hostname` and `subdomain`
    /// say, and no FQDN is made of it.
    #[test]
    fn hostname_override_wins_and_has_no_domain() {
        let mut p = pod("web", Some("aa"));
        let spec = p.spec.as_mut().unwrap();
        spec.subdomain = Some("bb".into());
        spec.hostname_override = Some("xx.yy.zz".into());
        assert_eq!(hostname(&p), "xx.yy.zz");
        assert_eq!(uts_hostname(&p).unwrap(), "xx.yy.zz");
        let long = format!("{}.b", "a".repeat(62));
        p.spec.as_mut().unwrap().hostname_override = Some(long);
        assert_eq!(hostname(&p), "a".repeat(62));
    }

    #[test]
    fn state_dir_and_cgroup_names() {
        let mut p = pod("web", None);
        p.metadata.namespace = Some("prod".into());
        assert_eq!(
            default_state_dir(&p),
            PathBuf::from("/run/podinit/prod_web")
        );
        assert_eq!(pod_cgroup_name(&p), "podinit_prod_web");
    }

    #[test]
    fn a_default_state_dir_must_fit_a_file_name() {
        let mut p = pod(&"a".repeat(253), None);
        p.metadata.namespace = Some("b".repeat(10));
        let e = state_dir(&p, None).unwrap_err().to_string();
        assert!(
            e.contains("264 bytes") && e.ends_with("give --state-dir"),
            "{e}"
        );
        let given = Path::new("/tmp/x");
        assert_eq!(state_dir(&p, Some(given)).unwrap(), given);
    }

    #[test]
    fn the_fqdn_is_the_hostname_with_set_hostname_as_fqdn() {
        let mut p = pod("web", None);
        let spec = p.spec.as_mut().unwrap();
        spec.subdomain = Some("sub".into());
        assert_eq!(uts_hostname(&p).unwrap(), "web");
        p.spec.as_mut().unwrap().set_hostname_as_fqdn = Some(true);
        let want = format!(
            "web.sub.default.svc.{}",
            crate::sandbox::etc_files::CLUSTER_DOMAIN
        );
        assert_eq!(uts_hostname(&p).unwrap(), want);
        p.metadata.name = Some("a".repeat(60));
        assert!(uts_hostname(&p)
            .unwrap_err()
            .to_string()
            .contains("is too long"));
    }
}
