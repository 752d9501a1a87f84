//! The container's `linux.seccomp`, chosen as kubelet and containerd's CRI choose it.
//!
//! - kubelet (`fieldSeccompProfile`): the container's `securityContext.seccompProfile`,
//!   else the pod's, else `Unconfined` (kubelet's `SeccompDefault` is off by default). A
//!   `Localhost` profile is `<seccomp root>/<localhostProfile>`.
//! - containerd (`generateSeccompSpecOpts`): a privileged container gets no filter whatever
//!   was asked; `Unconfined` none; `RuntimeDefault` its default profile, made for the final
//!   bounding set; `Localhost` the file's JSON, read at every container start (missing or
//!   invalid: the start fails, `CreateContainerError`, and is retried with backoff).
//!
//! The bundle's own `linux.seccomp` is always replaced: containerd builds a container's
//! spec from its defaults and the image config, which holds no seccomp, so the filter a
//! container gets depends on the pod alone — as in Kubernetes.

use k8s_openapi::api::core::v1::{Container, PodSpec, SeccompProfile};
use serde_json::Value;
use std::path::Path;

use super::seccomp_default;

/// Set `v`'s `linux.seccomp` (the spec's JSON, capabilities already final).
pub fn apply(v: &mut Value, pod: &PodSpec, c: &Container, root: &Path) -> Result<(), String> {
    let csc = c.security_context.as_ref();
    let privileged = csc.and_then(|s| s.privileged).unwrap_or(false);
    let chosen: Option<&SeccompProfile> =
        csc.and_then(|s| s.seccomp_profile.as_ref()).or_else(|| {
            pod.security_context
                .as_ref()
                .and_then(|s| s.seccomp_profile.as_ref())
        });
    let profile = match chosen.map(|p| (p.type_.as_str(), p)) {
        _ if privileged => None,
        None | Some(("Unconfined", _)) => None,
        Some(("RuntimeDefault", _)) => {
            let bounding: Vec<String> = v["process"]["capabilities"]["bounding"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect();
            Some(seccomp_default::profile(
                &bounding,
                seccomp_default::kernel_version(),
            ))
        }
        Some(("Localhost", p)) => Some(localhost(
            &root.join(p.localhost_profile.as_deref().unwrap_or_default()),
        )?),
        Some((t, _)) => return Err(format!("type: Unsupported value: {t:?}")),
    };
    let linux = &mut v["linux"];
    if !linux.is_object() {
        *linux = Value::Object(Default::default());
    }
    let linux = linux.as_object_mut().expect("an object");
    match profile {
        Some(p) => {
            linux.insert("seccomp".into(), p);
        }
        None => {
            linux.remove("seccomp");
        }
    }
    Ok(())
}

/// A Localhost profile: an OCI `LinuxSeccomp` in JSON. containerd's messages.
fn localhost(path: &Path) -> Result<Value, String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("cannot load seccomp profile {:?}: {e}", path.display()))?;
    let parsed: oci_spec::runtime::LinuxSeccomp = crate::tracked::from_slice(&text)
        .map_err(|e| format!("decoding seccomp profile failed {:?}: {e}", path.display()))?;
    // Refuse what the runtime cannot do now, naming the file, rather than at the start.
    crate::runtime::seccomp::compile(&parsed)
        .map_err(|e| format!("seccomp profile {:?}: {e}", path.display()))?;
    serde_json::to_value(&parsed).map_err(|e| e.to_string())
}
