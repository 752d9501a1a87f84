//! Image volumes (KEP-4639): `volumes[].image.reference` resolved as a container's
//! `image` is: a bundle, mounted with the sandbox; else an image, which kubelet's image
//! manager finds in the store or pulls, with the volume's `pullPolicy`, when a container
//! that mounts it starts (`supervisor::images`). Its root filesystem is then mounted
//! read-only by `sandbox::image_volume`. The layers are the store's own, so every pod that
//! mounts one image shares them.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use std::path::PathBuf;

use super::Dirs;
use crate::pod::image_pull::Policy;

/// One image volume of the pod.
#[derive(Clone, Debug)]
pub struct ImageVolume {
    pub name: String,
    /// As the volume writes it (kubelet's messages quote it so).
    pub reference: String,
    pub policy: Policy,
    /// The reference normalised, as the store names images (the written one for a bundle).
    pub normalised: String,
    /// The root filesystem as read-only layers, uppermost first: a bundle's from
    /// admission; an image's once a container that mounts it has it (`None` until then).
    pub lowers: Option<Vec<PathBuf>>,
    /// An image (of the store, or to pull), not a bundle.
    pub stored: bool,
    /// A start may pull it: an image under `Always`, or under `IfNotPresent` while the
    /// store lacked it at admission.
    pub may_pull: bool,
}

/// Every image volume of `spec`, in order, or the one-line error naming the volume.
pub fn resolve_all(spec: &PodSpec, dirs: Dirs) -> Result<Vec<ImageVolume>, super::Error> {
    let mut out = Vec::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let Some(src) = &v.image else { continue };
        let field = format!("spec.volumes[{i}].image");
        let reference = src.reference.clone().unwrap_or_default();
        // The container a kubelet would pull for: the same lookup, the same words.
        let as_container = Container {
            name: v.name.clone(),
            image: Some(reference.clone()),
            image_pull_policy: src.pull_policy.clone(),
            ..Default::default()
        };
        let base = super::container_base(&as_container, &format!("spec.volumes[{i}]"), dirs)?;
        let policy = Policy::of(src.pull_policy.as_deref());
        let normalised = match base.image.as_ref().map(|n| &n.reference) {
            Some(Err(e)) => {
                return Err(super::Error::field(
                    format!("{field}.reference"),
                    format!("Invalid value: {reference:?}: {e}"),
                ))
            }
            Some(Ok(r)) => r.to_string(),
            None => reference.clone(),
        };
        let may_pull = base.may_pull();
        let stored = base.image.is_some();
        out.push(ImageVolume {
            name: v.name.clone(),
            reference,
            policy,
            normalised,
            lowers: base.bundle.filter(|_| !stored).map(|b| b.lowers),
            stored,
            may_pull,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(volumes: &str) -> PodSpec {
        serde_yaml_ng::from_str(&format!(
            "containers: [{{name: c, image: busybox}}]\nvolumes: {volumes}"
        ))
        .unwrap()
    }

    #[test]
    fn a_bundle_is_mounted_with_the_sandbox_and_an_image_waits_for_the_image_manager() {
        let dir = super::super::test_bundles("podinit-imagevol", "tools");
        let dirs = Dirs {
            bundles: &dir,
            images: &dir.join("no-store"),
        };
        let got = resolve_all(
            &spec("[{name: t, image: {reference: tools, pullPolicy: IfNotPresent}}, {name: e, emptyDir: {}}]"),
            dirs,
        )
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "t");
        assert_eq!(
            got[0].lowers.as_deref(),
            Some(&[dir.join("tools/rootfs").canonicalize().unwrap()][..])
        );
        assert!(!got[0].stored && !got[0].may_pull);
        let got = resolve_all(
            &spec("[{name: t, image: {reference: 'example.com/none:1', pullPolicy: Never}}]"),
            dirs,
        )
        .unwrap();
        assert!(got[0].lowers.is_none() && got[0].stored);
        assert_eq!(got[0].policy, Policy::Never);
        assert!(!got[0].may_pull);
        // Not on this machine: pulled when a container that mounts it starts.
        let got = resolve_all(
            &spec("[{name: e, emptyDir: {}}, {name: t, image: {reference: 'example.com/none:1', pullPolicy: IfNotPresent}}]"),
            dirs,
        )
        .unwrap();
        assert_eq!(got[0].normalised, "example.com/none:1");
        assert!(got[0].lowers.is_none() && got[0].stored && got[0].may_pull);
        let got = resolve_all(
            &spec("[{name: t, image: {reference: 'busybox', pullPolicy: Always}}]"),
            dirs,
        )
        .unwrap();
        assert_eq!(got[0].normalised, "docker.io/library/busybox:latest");
        assert!(got[0].may_pull);
        let e = resolve_all(
            &spec("[{name: t, image: {reference: 'Bad:Name', pullPolicy: IfNotPresent}}]"),
            dirs,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("spec.volumes[0].image.reference: Invalid value: \"Bad:Name\""),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
