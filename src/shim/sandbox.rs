//! The sandbox task (`io.kubernetes.cri.container-type: sandbox`): made from its
//! config.json like any container, with every namespace, the cgroup, hostname, sysctls
//! and security settings it asks for, but running podinit's pause (`sys::pause`) in
//! place of the image's program (`podinit::spec::sandbox`).

use oci_spec::runtime::Spec;
use podinit::spec::pod_files::PodFiles;
use std::path::Path;

use super::error::Error;

pub const CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";
pub const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

/// A bundle's config.json, read once for the verb.
pub fn load(bundle: &Path) -> Result<Spec, Error> {
    podinit::spec::load(bundle).map_err(Error::Spec)
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

/// The spec the runtime's create gets for a task: a sandbox's program becomes
/// podinit's pause, from `exe`; a container of a Sandbox API pod gets the pod's own files
/// bound in where the CRI left them out. config.json itself stays as containerd wrote it,
/// as containerd's runc shim leaves it.
pub fn for_create(
    id: &str,
    spec: &mut Spec,
    exe: &Path,
    pod_files: impl FnOnce(&str) -> Option<PodFiles>,
) -> Result<(), Error> {
    if is_sandbox(spec) {
        return podinit::spec::sandbox::with_podinit_pause(spec, exe).map_err(Error::SandboxSpec);
    }
    if let Some(files) = pod_files(&grouping(id, spec)) {
        podinit::spec::pod_files::with_pod_files(spec, &files);
    }
    Ok(())
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
