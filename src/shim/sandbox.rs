//! The sandbox task (`io.kubernetes.cri.container-type: sandbox`): made from its
//! config.json like any container, with every namespace, the cgroup, hostname, sysctls
//! and security settings it asks for, but running podinit's pause (`sys::pause`) in
//! place of the image's program (`podinit::spec::sandbox`).

use oci_spec::runtime::Spec;
use std::path::Path;

pub const CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";
pub const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

/// A bundle's config.json, read once for the verb.
pub fn load(bundle: &Path) -> Result<Spec, String> {
    podinit::spec::load(bundle).map_err(|e| e.to_string())
}

fn annotation<'a>(spec: &'a Spec, key: &str) -> Option<&'a str> {
    spec.annotations()
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Whether the bundle is a CRI sandbox.
pub fn is_sandbox(spec: &Spec) -> bool {
    annotation(spec, CONTAINER_TYPE) == Some("sandbox")
}

/// The shim that serves a task: its sandbox's, so that one shim serves the whole pod.
pub fn grouping(id: &str, spec: &Spec) -> String {
    annotation(spec, SANDBOX_ID)
        .filter(|s| !s.is_empty())
        .unwrap_or(id)
        .to_string()
}

/// Rewrites the sandbox's config.json: its program becomes podinit's pause, from `exe`.
pub fn use_podinit_pause(bundle: &Path, spec: &mut Spec, exe: &Path) -> Result<(), String> {
    podinit::spec::sandbox::with_podinit_pause(spec, exe)?;
    rewrite(bundle, spec)
}

/// Rewrites a container of a Sandbox API pod's config.json with the pod's own files bound
/// in, where the CRI left them out.
pub fn bind_pod_files(
    bundle: &Path,
    spec: &mut Spec,
    files: &podinit::spec::pod_files::PodFiles,
) -> Result<(), String> {
    match podinit::spec::pod_files::with_pod_files(spec, files) {
        true => rewrite(bundle, spec),
        false => Ok(()),
    }
}

/// The bundle's config.json replaced by `spec` (write and rename).
fn rewrite(bundle: &Path, spec: &Spec) -> Result<(), String> {
    let path = bundle.join("config.json");
    let tmp = bundle.join(".config.json.podinit");
    let text = serde_json::to_vec(spec).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::write(&tmp, text).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("replacing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_and_its_shim_are_named_by_annotations() {
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "annotations": {CONTAINER_TYPE: "sandbox", SANDBOX_ID: "abc"}
        }))
        .unwrap();
        assert!(is_sandbox(&spec));
        assert_eq!(grouping("x", &spec), "abc");
        let plain: Spec =
            serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2"})).unwrap();
        assert!(!is_sandbox(&plain));
        assert_eq!(grouping("x", &plain), "x");
    }
}
