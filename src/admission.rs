//! Admission: a manifest (`podinit run`, `podinit validate`) or an ephemeral container
//! added to the running pod (the supervisor's `POST /v1/ephemeralcontainers`) becomes
//! containers with their bundles, or one line that says which field is wrong. Both routes
//! resolve an image the same way, here; it stands on `manifest`, `bundle` and `pod` only,
//! so `run` and `supervisor` can both use it.

use k8s_openapi::api::core::v1::{ConfigMap, Container, EphemeralContainer, Pod, PodSpec, Secret};
use std::path::{Path, PathBuf};

use crate::bundle::{self, Bundle};
use crate::pod::{Kind, PodPlan};

/// A manifest that passed admission, with every image resolved to a loaded bundle.
pub struct Admission {
    pub pod: Pod,
    pub plan: PodPlan,
    /// In plan order (init containers, then app containers).
    pub containers: Vec<(Kind, Container, Bundle)>,
    /// The manifest's ConfigMaps and Secrets (sources of env and volumes).
    pub config_maps: Vec<ConfigMap>,
    pub secrets: Vec<Secret>,
    /// Why no PodPreset was applied, when matching ones conflicted (a Warning event).
    pub preset_conflict: Option<String>,
    /// The node's allocatable CPU (millicores) and memory (bytes) once the pod is bound to
    /// it: the downward API's default for a container without a limit.
    pub node_allocatable: Option<(i64, i64)>,
}

/// `--bundles`, else `$PODINIT_BUNDLES`, else `./oci-bundles`.
pub fn bundles_dir(opt: Option<&Path>) -> PathBuf {
    opt.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("PODINIT_BUNDLES").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("oci-bundles"))
}

/// Load, default and validate the manifest and resolve every image. The error is the one
/// line to print (the field path first).
pub fn admit(
    manifest: &Path,
    bundles: &Path,
    presets: Option<&Path>,
    max_backoff_secs: u64,
) -> Result<Admission, String> {
    let a = crate::manifest::load_with_presets(manifest, presets).map_err(|e| e.to_string())?;
    let pod = a.pod;
    let spec = pod.spec.as_ref().ok_or("spec: Required value")?;
    let plan = PodPlan::from_pod(&pod, max_backoff_secs.saturating_mul(1000));
    let mut containers = Vec::new();
    for ((field, c), p) in container_fields(spec).zip(&plan.containers) {
        debug_assert_eq!(c.name, p.name);
        let b = container_bundle(c, &field, bundles)?;
        bundle::stop_signal(&b, c).map_err(|e| format!("{field}.lifecycle.stopSignal: {e}"))?;
        containers.push((p.kind, c.clone(), b));
    }
    Ok(Admission {
        pod,
        plan,
        containers,
        config_maps: a.config_maps,
        secrets: a.secrets,
        preset_conflict: a.presets.conflict,
        node_allocatable: None,
    })
}

/// Admit `ec` as the `index`-th ephemeral container of the running pod
/// (`POST /v1/ephemeralcontainers`): the container, defaulted, and its bundle. The error
/// is one line, the field path first.
pub fn admit_ephemeral(
    ec: &EphemeralContainer,
    spec: &PodSpec,
    index: usize,
    bundles: &Path,
) -> Result<(Container, Bundle), String> {
    let c = crate::manifest::ephemeral::admit(ec, spec, index)
        .map_err(|e| format!("{}: {}", e.field, e.message))?;
    let b = container_bundle(&c, &format!("spec.ephemeralContainers[{index}]"), bundles)?;
    Ok((c, b))
}

/// The bundle of container `c`'s image; `field` is the container's path in the pod
/// (`spec.containers[1]`), for the error.
fn container_bundle(c: &Container, field: &str, bundles: &Path) -> Result<Bundle, String> {
    let image = c.image.as_deref().unwrap_or_default();
    bundle::resolve(image, bundles)
        .and_then(|dir| bundle::load(&dir))
        .map_err(|e| format!("{field}.image: {e}"))
}

/// Every init and app container of `spec` with its field path, in plan order.
fn container_fields(spec: &PodSpec) -> impl Iterator<Item = (String, &Container)> {
    let init = spec.init_containers.iter().flatten().enumerate();
    let app = spec.containers.iter().enumerate();
    init.map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
        .chain(app.map(|(i, c)| (format!("spec.containers[{i}]"), c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_named_by_their_field_in_plan_order() {
        let spec: PodSpec = serde_yaml_ng::from_str(
            "initContainers: [{name: i0}, {name: i1}]\ncontainers: [{name: a0}]",
        )
        .unwrap();
        let got: Vec<(String, &str)> = container_fields(&spec)
            .map(|(f, c)| (f, c.name.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("spec.initContainers[0]".to_string(), "i0"),
                ("spec.initContainers[1]".to_string(), "i1"),
                ("spec.containers[0]".to_string(), "a0"),
            ]
        );
    }

    #[test]
    fn an_image_without_a_bundle_names_its_field() {
        let dir = std::env::temp_dir().join(format!("podinit-admission-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let spec: PodSpec =
            serde_yaml_ng::from_str("containers: [{name: web, image: busybox}]").unwrap();
        let ec: EphemeralContainer =
            serde_yaml_ng::from_str("{name: dbg, image: no-such-image}").unwrap();
        let e = admit_ephemeral(&ec, &spec, 2, &dir).unwrap_err();
        assert!(e.starts_with("spec.ephemeralContainers[2].image: "), "{e}");
        let e = admit_ephemeral(
            &serde_yaml_ng::from_str("{name: web, image: x}").unwrap(),
            &spec,
            0,
            &dir,
        )
        .unwrap_err();
        assert!(
            e.starts_with("spec.ephemeralContainers[0].name: Duplicate value"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
