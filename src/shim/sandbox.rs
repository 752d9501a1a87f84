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

pub fn annotation<'a>(spec: &'a Spec, key: &str) -> Option<&'a str> {
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
    grouping_by(id, annotation(spec, SANDBOX_ID))
}

/// The shim of task `id` whose sandbox-id annotation is `sandbox_id`: the sandbox's when
/// it names one, else the task's own.
fn grouping_by(id: &str, sandbox_id: Option<&str>) -> String {
    sandbox_id
        .filter(|s| !s.is_empty())
        .unwrap_or(id)
        .to_string()
}

/// [`grouping`] of the task whose bundle is `bundle`, from config.json's annotations
/// alone: `start` needs no more of the spec, which Create reads whole.
pub fn grouping_in(id: &str, bundle: &Path) -> Result<String, Error> {
    let annotations = podinit::spec::annotations(bundle).map_err(Error::Spec)?;
    Ok(grouping_by(
        id,
        annotations.get(SANDBOX_ID).map(String::as_str),
    ))
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

    #[test]
    fn start_finds_the_pods_shim_from_the_annotations_alone() {
        let dir = std::env::temp_dir().join(format!("podinit-grouping-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |v: serde_json::Value| {
            std::fs::write(dir.join("config.json"), v.to_string()).unwrap();
        };
        write(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sleep"], "cwd": "/"},
            "annotations": {CONTAINER_TYPE: "container", SANDBOX_ID: "pod1"}
        }));
        assert_eq!(grouping_in("c1", &dir).unwrap(), "pod1");
        write(serde_json::json!({"ociVersion": "1.0.2", "annotations": {SANDBOX_ID: ""}}));
        assert_eq!(grouping_in("c1", &dir).unwrap(), "c1");
        write(serde_json::json!({"ociVersion": "1.0.2"}));
        assert_eq!(grouping_in("c1", &dir).unwrap(), "c1");
        std::fs::write(dir.join("config.json"), "{").unwrap();
        let e = grouping_in("c1", &dir).unwrap_err().to_string();
        assert!(e.contains("config.json"), "{e}");
        std::fs::remove_file(dir.join("config.json")).unwrap();
        let e = grouping_in("c1", &dir).unwrap_err().to_string();
        assert!(e.starts_with("reading "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
