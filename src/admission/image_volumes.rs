//! Image volumes (KEP-4639): `volumes[].image.reference` resolved as a container's
//! `image` is (a bundle, else the image store), its root filesystem then mounted
//! read-only by `sandbox::image_volume`. The layers are the store's own, so every pod that
//! mounts one image shares them.
//!
//! podinit does not pull image volumes yet: one that is in neither the bundles nor the
//! store is refused here, unless its `pullPolicy` is `Never`, under which kubelet would not
//! pull either (the containers that mount it wait in `ErrImageNeverPull`).

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
    /// The image's root filesystem as read-only layers, uppermost first; `None` when it
    /// is not on this machine (`pullPolicy: Never`).
    pub lowers: Option<Vec<PathBuf>>,
    /// The layers are the image store's (not a bundle's).
    pub stored: bool,
}

/// Every image volume of `spec`, in order, or the one-line error naming the volume.
pub fn resolve_all(spec: &PodSpec, dirs: Dirs) -> Result<Vec<ImageVolume>, String> {
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
        if let Some(Err(e)) = base.image.as_ref().map(|n| &n.reference) {
            return Err(format!(
                "{field}.reference: Invalid value: {reference:?}: {e}"
            ));
        }
        let stored = base.bundle.as_ref().is_some_and(|b| b.image.is_some());
        let lowers = base.bundle.map(|b| b.lowers);
        if lowers.is_none() && policy != Policy::Never {
            return Err(format!(
                "{field}.reference: image {reference:?} is in neither the bundles nor the image store, and podinit does not pull image volumes (`podinit images pull` it first)"
            ));
        }
        out.push(ImageVolume {
            name: v.name.clone(),
            reference,
            policy,
            lowers,
            stored,
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
    fn a_bundle_is_an_image_volume_and_a_missing_image_is_refused_unless_never_pulled() {
        let dir = std::env::temp_dir().join(format!("podinit-imagevol-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("tools/rootfs")).unwrap();
        std::fs::write(
            dir.join("tools/config.json"),
            r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}}}"#,
        )
        .unwrap();
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
        let got = resolve_all(
            &spec("[{name: t, image: {reference: 'example.com/none:1', pullPolicy: Never}}]"),
            dirs,
        )
        .unwrap();
        assert!(got[0].lowers.is_none());
        assert_eq!(got[0].policy, Policy::Never);
        let e = resolve_all(
            &spec("[{name: e, emptyDir: {}}, {name: t, image: {reference: 'example.com/none:1', pullPolicy: IfNotPresent}}]"),
            dirs,
        )
        .unwrap_err();
        assert!(
            e.starts_with("spec.volumes[1].image.reference: image \"example.com/none:1\" is in neither the bundles nor the image store"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
