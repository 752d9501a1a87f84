//! Admission: a manifest (`podinit run`, `podinit validate`) or an ephemeral container
//! added to the running pod (the supervisor's `POST /v1/ephemeralcontainers`) becomes
//! containers with their bases, or one line that says which field is wrong. Both routes
//! resolve an image the same way, here: a bundle, else an image in the store (`--images`),
//! else an image to pull when the container starts (`pod::image_pull` decides, with
//! `imagePullPolicy`). It stands on `manifest`, `bundle`, `image` and `pod` only, so `run`
//! and `supervisor` can both use it.

mod error;
pub mod image_volumes;
pub mod pull_logins;

pub use error::Error;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EphemeralContainer, Pod, PodSpec, Secret};
use std::path::{Path, PathBuf};

use crate::bundle::{self, Bundle};
use crate::image::reference::Reference;
use crate::image::store::Store;
use crate::pod::image_pull::Policy;
use crate::pod::{Kind, PodPlan};

/// A manifest that passed admission, with every image resolved to a loaded bundle, an
/// image of the store, or a name to pull.
pub struct Admission {
    pub pod: Pod,
    pub plan: PodPlan,
    /// In plan order (init containers, then app containers).
    pub containers: Vec<(Kind, Container, Base)>,
    /// The manifest's ConfigMaps and Secrets (sources of env and volumes).
    pub config_maps: Vec<ConfigMap>,
    pub secrets: Vec<Secret>,
    /// Why no PodPreset was applied, when matching ones conflicted (a Warning event).
    pub preset_conflict: Option<String>,
    /// The node's allocatable CPU (millicores) and memory (bytes) once the pod is bound to
    /// it: the downward API's default for a container without a limit.
    pub node_allocatable: Option<(i64, i64)>,
    /// The pod's image volumes (`volumes[].image`), each resolved as a container's image.
    pub image_volumes: Vec<image_volumes::ImageVolume>,
}

/// What a container runs on.
#[derive(Clone, Debug)]
pub struct Base {
    /// The bundle, or the image as the store had it at admission; `None` until pulled.
    pub bundle: Option<Bundle>,
    /// Not a bundle: the image, looked up in the store (and pulled) at each start.
    pub image: Option<ImageName>,
}

impl Base {
    /// A start of the container may pull: its image is not a bundle, and either the store
    /// lacked it at admission, or its pull records may make the pod verify its
    /// credentials (`pod::image_access`), or `imagePullPolicy` is `Always`.
    pub fn may_pull(&self) -> bool {
        self.image.as_ref().is_some_and(|n| {
            n.reference.is_ok()
                && match n.policy {
                    Policy::Always => true,
                    Policy::IfNotPresent => self.bundle.is_none() || n.recorded,
                    Policy::Never => false,
                }
        })
    }
}

/// A container's image that is not a bundle.
#[derive(Clone, Debug)]
pub struct ImageName {
    /// As the container writes it (kubelet's messages quote it so).
    pub written: String,
    /// Normalised, or why it is not a reference (the container then waits in
    /// `InvalidImageName`, as under kubelet: the API server takes any non-empty name).
    pub reference: Result<Reference, InvalidName>,
    pub policy: Policy,
    /// The store had it at admission with pull records that do not open it to every pod:
    /// a start may have to pull it to verify the pod's credentials.
    pub recorded: bool,
}

/// Why a container's image is not a reference: the image layer's line, kept as text since
/// an [`ImageName`] is cloned with its container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidName(pub String);

impl std::fmt::Display for InvalidName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where images are looked for: the bundles directory and the image store.
#[derive(Clone, Copy, Debug)]
pub struct Dirs<'a> {
    pub bundles: &'a Path,
    /// `--images`: looked in only if it exists (admission creates nothing).
    pub images: &'a Path,
}

/// The bundles directory and the image store, worked out once from their options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirPaths {
    pub bundles: PathBuf,
    pub images: PathBuf,
}

impl DirPaths {
    /// `--bundles` and `--images`, with their defaults ([`bundles_dir`], [`images_dir`]).
    pub fn of(bundles: Option<&Path>, images: Option<&Path>) -> DirPaths {
        DirPaths {
            bundles: bundles_dir(bundles),
            images: images_dir(images),
        }
    }

    pub fn dirs(&self) -> Dirs<'_> {
        Dirs {
            bundles: &self.bundles,
            images: &self.images,
        }
    }
}

/// `--images`, else the store's default.
pub fn images_dir(opt: Option<&Path>) -> PathBuf {
    opt.map(Path::to_path_buf)
        .unwrap_or_else(crate::image::store::default_root)
}

/// `--bundles`, else `$PODINIT_BUNDLES`, else `./oci-bundles`.
pub fn bundles_dir(opt: Option<&Path>) -> PathBuf {
    opt.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("PODINIT_BUNDLES").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("oci-bundles"))
}

/// Load, default and validate the manifest and resolve every image. The error is the one
/// line to print (the field path first).
pub fn admit_manifest(
    manifest: &Path,
    dirs: Dirs,
    presets: Option<&Path>,
    max_backoff_secs: u64,
) -> Result<Admission, Error> {
    let a = crate::manifest::load_with_presets(manifest, presets)
        .map_err(|e| Error::Manifest(e.to_string()))?;
    let pod = a.pod;
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| Error::field("spec", "Required value"))?;
    let plan = PodPlan::from_pod(&pod, max_backoff_secs.saturating_mul(1000));
    let mut containers = Vec::new();
    for ((field, c), p) in container_fields(spec).zip(&plan.containers) {
        debug_assert_eq!(c.name, p.name);
        let b = container_base(c, &field, dirs)?;
        if let Some(b) = &b.bundle {
            bundle::stop_signal(b, c).map_err(|err| Error::Bundle {
                field: format!("{field}.lifecycle.stopSignal"),
                err,
            })?;
        }
        containers.push((p.kind, c.clone(), b));
    }
    let image_volumes = image_volumes::resolve_all(spec, dirs)?;
    Ok(Admission {
        pod,
        plan,
        containers,
        config_maps: a.config_maps,
        secrets: a.secrets,
        preset_conflict: a.presets.conflict,
        node_allocatable: None,
        image_volumes,
    })
}

/// Admit `ec` as the `index`-th ephemeral container of the running pod
/// (`POST /v1/ephemeralcontainers`): the container, defaulted, and its base. The error
/// is one line, the field path first.
pub fn admit_ephemeral(
    ec: &EphemeralContainer,
    spec: &PodSpec,
    index: usize,
    dirs: Dirs,
) -> Result<(Container, Base), Error> {
    let c = crate::manifest::ephemeral::validate(ec, spec, index)
        .map_err(|e| Error::field(e.field, e.message))?;
    let b = container_base(&c, &format!("spec.ephemeralContainers[{index}]"), dirs)?;
    Ok((c, b))
}

/// The base of container `c`'s image (docs/interface.md §1): a path is a bundle or an
/// error; a name is a bundle under `dirs.bundles` if there is one, else an image. `field`
/// is the container's path in the pod (`spec.containers[1]`), for the error.
pub(crate) fn container_base(c: &Container, field: &str, dirs: Dirs) -> Result<Base, Error> {
    let image = c.image.as_deref().unwrap_or_default();
    let ctx = |err| Error::Bundle {
        field: format!("{field}.image"),
        err,
    };
    let dir = if bundle::is_path(image) {
        Some(bundle::resolve(image, dirs.bundles).map_err(ctx)?)
    } else {
        bundle::find(image, dirs.bundles).map_err(ctx)?
    };
    if let Some(dir) = dir {
        let b = bundle::load(&dir).map_err(ctx)?;
        return Ok(Base {
            bundle: Some(b),
            image: None,
        });
    }
    let reference = Reference::parse(image);
    let found = match &reference {
        Ok(r) => stored(dirs.images, &r.to_string()).map_err(|err| Error::Store {
            field: format!("{field}.image"),
            err,
        })?,
        Err(_) => None,
    };
    let recorded = match (&found, &reference) {
        (Some(img), Ok(r)) => verified(dirs.images, r, img),
        _ => false,
    };
    let bundle = found
        .map(|img| bundle::image::from_image(&img))
        .transpose()
        .map_err(ctx)?;
    Ok(Base {
        bundle,
        image: Some(ImageName {
            written: image.to_string(),
            reference: reference.map_err(|e| InvalidName(e.to_string())),
            policy: Policy::of(c.image_pull_policy.as_deref()),
            recorded,
        }),
    })
}

/// Whether a pod that presents no login would have to verify its credentials for `img`
/// (of the store at `root`, named `name`): its pull records, read as kubelet's default
/// policy reads them, do not open it to every pod.
fn verified(root: &Path, name: &Reference, img: &crate::image::store::Image) -> bool {
    use crate::pod::image_access::{must_attempt_pull, Known, DEFAULT_POLICY};
    let records = crate::image::pull_records::Records::of(root);
    let Ok(record) = records.pulled(&img.digest.to_string()) else {
        return true;
    };
    let known = Known {
        record: record.as_ref(),
        intent: records.intent(&name.to_string()),
    };
    must_attempt_pull(&DEFAULT_POLICY, &name.repository(), known, &[]).pull
}

/// The image the store at `root` has under `name`, if the store exists and has it.
pub fn stored(
    root: &Path,
    name: &str,
) -> Result<Option<crate::image::store::Image>, crate::image::Error> {
    if !root.is_dir() {
        return Ok(None);
    }
    Store::open(root)?.get(name)
}

/// Every init and app container of `spec` with its field path, in plan order.
fn container_fields(spec: &PodSpec) -> impl Iterator<Item = (String, &Container)> {
    let init = spec.init_containers.iter().flatten().enumerate();
    let app = spec.containers.iter().enumerate();
    init.map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
        .chain(app.map(|(i, c)| (format!("spec.containers[{i}]"), c)))
}

/// A bundles directory, unique to this process and `tag`, holding one bundle `name` of a
/// minimal spec: for tests, which remove it.
#[cfg(test)]
fn test_bundles(tag: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join(name).join("rootfs")).unwrap();
    std::fs::write(
        dir.join(name).join("config.json"),
        r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}}}"#,
    )
    .unwrap();
    dir
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
    fn a_path_without_a_bundle_names_its_field_and_a_bundle_wins_over_images() {
        let dir = test_bundles("podinit-admission", "busybox");
        let dirs = Dirs {
            bundles: &dir,
            images: &dir.join("no-store"),
        };
        let spec: PodSpec =
            serde_yaml_ng::from_str("containers: [{name: web, image: busybox}]").unwrap();
        // A path is only ever a bundle: never looked up in the store nor pulled.
        let ec: EphemeralContainer =
            serde_yaml_ng::from_str("{name: dbg, image: ./no-such-bundle}").unwrap();
        let e = admit_ephemeral(&ec, &spec, 2, dirs)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "spec.ephemeralContainers[2].image: image \"./no-such-bundle\" not found"
            ),
            "{e}"
        );
        let ec: EphemeralContainer =
            serde_yaml_ng::from_str("{name: dbg, image: \"busybox:1.36\"}").unwrap();
        let (c, b) = admit_ephemeral(&ec, &spec, 1, dirs).unwrap();
        assert!(
            b.image.is_none() && b.bundle.is_some(),
            "the bundle, not an image"
        );
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        let e = admit_ephemeral(
            &serde_yaml_ng::from_str("{name: web, image: x}").unwrap(),
            &spec,
            0,
            dirs,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("spec.ephemeralContainers[0].name: Duplicate value"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_a_container_that_may_pull_needs_the_puller() {
        let r = Reference {
            domain: "docker.io".into(),
            path: "library/busybox".into(),
            tag: Some("1.36".into()),
            digest: None,
        };
        let stored = Bundle::of_dir("/l".into(), "/l".into(), Default::default());
        let with =
            |policy, present: bool, reference: Result<Reference, InvalidName>, recorded| Base {
                bundle: present.then(|| stored.clone()),
                image: Some(ImageName {
                    written: "busybox:1.36".into(),
                    reference,
                    policy,
                    recorded,
                }),
            };
        let base = |policy, present, reference| with(policy, present, reference, false);
        assert!(base(Policy::Always, true, Ok(r.clone())).may_pull());
        assert!(base(Policy::IfNotPresent, false, Ok(r.clone())).may_pull());
        assert!(!base(Policy::IfNotPresent, true, Ok(r.clone())).may_pull());
        // Pulled before with a Secret: a pod may have to pull it again to verify its own.
        assert!(with(Policy::IfNotPresent, true, Ok(r.clone()), true).may_pull());
        assert!(!with(Policy::Never, true, Ok(r.clone()), true).may_pull());
        assert!(!base(Policy::Never, false, Ok(r)).may_pull());
        assert!(!base(Policy::Always, false, Err(InvalidName("bad".into()))).may_pull());
        let bundle = Base {
            bundle: Some(stored),
            image: None,
        };
        assert!(!bundle.may_pull());
    }

    #[test]
    fn a_store_that_does_not_exist_has_nothing_and_is_not_made() {
        let root = std::env::temp_dir().join(format!("podinit-nostore-{}", std::process::id()));
        assert!(stored(&root, "docker.io/library/busybox:latest")
            .unwrap()
            .is_none());
        assert!(!root.exists());
        assert_eq!(
            images_dir(None),
            PathBuf::from(crate::image::store::DEFAULT_ROOT)
        );
    }
}
