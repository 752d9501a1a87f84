//! OCI bundles: resolve an image name to a bundle, load its `config.json`, and the base a
//! container is laid over (a bundle, or an image of the store, `image`). How a Kubernetes
//! container is laid over its base is `spec`'s job.

mod error;
pub mod image;
pub mod signal;

use k8s_openapi::api::core::v1::Container;
use oci_spec::runtime::Spec;
use std::path::{Path, PathBuf};

pub use error::Error;

/// A container's base: a loaded bundle, or an image from the store (`image::from_image`).
#[derive(Clone, Debug)]
pub struct Bundle {
    /// Absolute path of the bundle directory (an image's lowest layer).
    pub dir: PathBuf,
    /// Absolute path of its root filesystem (an image's uppermost layer).
    pub rootfs: PathBuf,
    pub spec: Spec,
    /// The read-only lower layers of a run's overlay root, uppermost first: the bundle's
    /// rootfs alone, or an image's unpacked layers.
    pub lowers: Vec<PathBuf>,
    /// How many leading `process.args` are the ENTRYPOINT, which `args` alone keeps: the
    /// bundle's `args[0]`, or the image's Entrypoint.
    pub entrypoint_len: usize,
    /// The image it comes from, when not a bundle.
    pub image: Option<ImageRef>,
}

/// What a container's status says of an image from the store.
#[derive(Clone, Debug)]
pub struct ImageRef {
    /// The normalised name (`status.image`).
    pub name: String,
    /// `repository@sha256:…` (`status.imageID`).
    pub id: String,
    /// The image config's `User` could not be resolved: an error unless the container
    /// sets `runAsUser`, which replaces it.
    pub user_error: Option<String>,
}

impl Bundle {
    /// A bundle directory's base: its rootfs the one lower layer.
    pub fn of_dir(dir: PathBuf, rootfs: PathBuf, spec: Spec) -> Bundle {
        Bundle {
            lowers: vec![rootfs.clone()],
            dir,
            rootfs,
            spec,
            entrypoint_len: 1,
            image: None,
        }
    }

    /// The text of a file of the root filesystem (`etc/passwd`) as the container sees it.
    pub fn read_file(&self, rel: &str) -> Option<String> {
        image::read_layered(&self.lowers, rel)
    }

    /// `status.image` and `status.imageID`: an image's name and repo digest, or the
    /// image as written and the bundle's path.
    pub fn status_image(&self, written: &str) -> (String, String) {
        match &self.image {
            Some(i) => (i.name.clone(), i.id.clone()),
            None => (written.to_string(), self.dir.display().to_string()),
        }
    }
}

/// A volume as the sandbox made it available on the host.
#[derive(Clone, Debug)]
pub struct HostVolume {
    pub host_path: PathBuf,
    /// The volume itself is read-only (every mount of it is).
    pub read_only: bool,
    /// Where a `subPath` of it is made when `host_path` is not the volume itself but an
    /// idmapped mount of it (`hostUsers: false`), through which the supervisor, whose ids
    /// it does not map, may create nothing.
    pub made_at: Option<PathBuf>,
}

/// docs/interface.md §1: (1) a path (it starts with `/`, `./` or `../`) is the bundle;
/// (2) `BUNDLES/<image>`, a name with `/` as nested directories; (3) `BUNDLES/<image
/// without :tag or @digest>`. A name that is not a path stays below `BUNDLES`.
pub fn resolve(image: &str, bundles_dir: &Path) -> Result<PathBuf, Error> {
    if image.is_empty() {
        return Err(Error::Required);
    }
    let mut tried = Vec::new();
    let mut candidates = Vec::new();
    if is_path(image) {
        candidates.push(PathBuf::from(image));
    } else {
        below_bundles(image)?;
        candidates.push(bundles_dir.join(image));
        let bare = strip_tag(image);
        if bare != image {
            candidates.push(bundles_dir.join(bare));
        }
    }
    for c in candidates {
        if c.join("config.json").is_file() {
            return Ok(c);
        }
        tried.push(c);
    }
    Err(Error::NotFound {
        image: image.to_string(),
        tried,
    })
}

/// The bundle a name (not a path) names under `bundles_dir`, if there is one: rules 2 and
/// 3 of [`resolve`]. A name that would leave the directory is an error.
pub fn find(image: &str, bundles_dir: &Path) -> Result<Option<PathBuf>, Error> {
    if image.is_empty() {
        return Err(Error::Required);
    }
    below_bundles(image)?;
    let bare = strip_tag(image);
    Ok([image, bare]
        .into_iter()
        .map(|n| bundles_dir.join(n))
        .find(|c| c.join("config.json").is_file()))
}

/// An image that names a directory itself rather than a bundle under `BUNDLES`.
pub fn is_path(image: &str) -> bool {
    image.starts_with('/') || image.starts_with("./") || image.starts_with("../")
}

/// A name looked up under `BUNDLES` must not leave it: no `..`, `.` or empty component.
fn below_bundles(image: &str) -> Result<(), Error> {
    if image
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(Error::OutsideBundles(image.to_string()));
    }
    Ok(())
}

/// `name:tag`, `name@sha256:…` or both → `name`. A tag follows the last `/`: the colon of
/// a registry's port (`host:5000/busybox`) is not one.
fn strip_tag(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rfind('/').map_or(0, |i| i + 1);
    match no_digest[last..].rfind(':') {
        Some(i) => &no_digest[..last + i],
        None => no_digest,
    }
}

/// Load a bundle: its `config.json` and root filesystem must be there.
pub fn load(dir: &Path) -> Result<Bundle, Error> {
    let dir = dir.canonicalize().map_err(|err| Error::Io {
        what: format!("bundle {}", dir.display()),
        err,
    })?;
    let cfg = dir.join("config.json");
    let spec = crate::spec::load(&dir).map_err(Error::Load)?;
    let root = spec
        .root()
        .as_ref()
        .ok_or_else(|| Error::Invalid(format!("{}: root: Required value", cfg.display())))?;
    let rootfs = dir.join(root.path());
    match std::fs::metadata(&rootfs) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::Invalid(format!(
                "bundle {}: rootfs {} is not a directory",
                dir.display(),
                rootfs.display()
            )))
        }
        Err(err) => {
            return Err(Error::Io {
                what: format!("bundle {}: rootfs {}", dir.display(), rootfs.display()),
                err,
            })
        }
    }
    if spec.process().is_none() {
        return Err(Error::Invalid(format!(
            "{}: process: Required value",
            cfg.display()
        )));
    }
    Ok(Bundle::of_dir(dir, rootfs, spec))
}

/// The container's stop signal: `lifecycle.stopSignal`, else the bundle's
/// `org.opencontainers.image.stopSignal` annotation, else SIGTERM.
pub fn stop_signal(bundle: &Bundle, c: &Container) -> Result<i32, Error> {
    if let Some(s) = c.lifecycle.as_ref().and_then(|l| l.stop_signal.as_deref()) {
        return signal::parse(s);
    }
    if let Some(s) = bundle
        .spec
        .annotations()
        .as_ref()
        .and_then(|a| a.get("org.opencontainers.image.stopSignal"))
    {
        return signal::parse(s).map_err(|e| match &bundle.image {
            Some(i) => e.within(format_args!("image {}: config.StopSignal", i.name)),
            None => e.within(format_args!(
                "bundle {}: annotation org.opencontainers.image.stopSignal",
                bundle.dir.display()
            )),
        });
    }
    Ok(libc::SIGTERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// oci-spec checks `execCPUAffinity` with a regular expression, which regex-lite
    /// evaluates here (crates/regex).
    #[test]
    fn exec_cpu_affinity_is_checked() {
        let spec = |list: &str| {
            serde_json::from_value::<Spec>(serde_json::json!({
                "ociVersion": "1.0.2",
                "process": {"cwd": "/", "user": {"uid": 0, "gid": 0}, "execCPUAffinity": {"initial": list, "final": "0"}}
            }))
        };
        assert!(spec("0-1,3").is_ok());
        assert!(spec("7").is_ok());
        assert!(spec("0-1,x").is_err());
        assert!(spec("").is_err());
    }

    #[test]
    fn tags_and_digests() {
        assert_eq!(strip_tag("busybox:1.36"), "busybox");
        assert_eq!(strip_tag("busybox@sha256:abc"), "busybox");
        assert_eq!(strip_tag("busybox:1.36@sha256:abc"), "busybox");
        assert_eq!(strip_tag("busybox"), "busybox");
        assert_eq!(
            strip_tag("registry.k8s.io/busybox:1.27.2"),
            "registry.k8s.io/busybox"
        );
        assert_eq!(strip_tag("host:5000/busybox"), "host:5000/busybox");
        assert_eq!(strip_tag("host:5000/busybox:1"), "host:5000/busybox");
        assert_eq!(
            strip_tag("host:5000/lib/busybox@sha256:ab"),
            "host:5000/lib/busybox"
        );
    }

    #[test]
    fn paths_are_only_names_that_start_as_paths() {
        for p in ["/b", "./b", "../b", "./"] {
            assert!(is_path(p), "{p}");
        }
        for n in [
            "busybox",
            "registry.k8s.io/busybox:1.27.2",
            "a/b",
            ".b",
            "..b",
        ] {
            assert!(!is_path(n), "{n}");
        }
    }

    #[test]
    fn nested_names_resolve_under_bundles_and_never_leave_it() {
        let d = std::env::temp_dir().join(format!("podinit-bnest-{}", crate::util::random_hex(4)));
        let tagged = d.join("registry.k8s.io/busybox:1.27.2");
        std::fs::create_dir_all(&tagged).unwrap();
        std::fs::write(tagged.join("config.json"), "{}").unwrap();
        std::fs::create_dir_all(d.join("registry.k8s.io/nginx")).unwrap();
        std::fs::write(d.join("registry.k8s.io/nginx/config.json"), "{}").unwrap();
        assert_eq!(
            resolve("registry.k8s.io/busybox:1.27.2", &d).unwrap(),
            tagged
        );
        // Without the tagged directory, the name without its tag or digest.
        assert_eq!(
            resolve("registry.k8s.io/nginx:1.14.2", &d).unwrap(),
            d.join("registry.k8s.io/nginx")
        );
        assert_eq!(
            resolve("registry.k8s.io/nginx@sha256:0123", &d).unwrap(),
            d.join("registry.k8s.io/nginx")
        );
        let e = resolve("registry.k8s.io/busybox:1.28", &d)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&d.join("registry.k8s.io/busybox:1.28").display().to_string())
                && e.contains(&d.join("registry.k8s.io/busybox").display().to_string()),
            "{e}"
        );
        // A relative name with a `/` is no longer a path from the working directory.
        let e = resolve("oci-bundles/busybox", &d).unwrap_err().to_string();
        assert!(
            e.contains(&d.join("oci-bundles/busybox").display().to_string()),
            "{e}"
        );
        for bad in [
            "a/../../etc",
            "registry.k8s.io/../x",
            "a//b",
            "a/./b",
            "..",
            "x/",
        ] {
            let e = resolve(bad, &d).unwrap_err().to_string();
            assert!(e.starts_with("Invalid value: "), "{bad}: {e}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn resolution_order_and_errors() {
        let d = std::env::temp_dir().join(format!("podinit-bres-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(d.join("busybox")).unwrap();
        std::fs::write(d.join("busybox/config.json"), "{}").unwrap();
        assert_eq!(resolve("busybox", &d).unwrap(), d.join("busybox"));
        assert_eq!(resolve("busybox:latest", &d).unwrap(), d.join("busybox"));
        let p = d.join("busybox").display().to_string();
        assert_eq!(resolve(&p, &d).unwrap(), d.join("busybox"));
        let e = resolve("nginx:1", &d).unwrap_err().to_string();
        assert!(e.contains("image \"nginx:1\" not found"), "{e}");
        assert!(
            e.contains("nginx:1") && e.contains(&d.join("nginx").display().to_string()),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn load_checks_rootfs_and_json() {
        let d = std::env::temp_dir().join(format!("podinit-bload-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("config.json"), "{not json").unwrap();
        assert!(load(&d).unwrap_err().to_string().contains("parsing"));
        std::fs::write(
            d.join("config.json"),
            r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}}}"#,
        )
        .unwrap();
        let e = load(&d).unwrap_err().to_string();
        assert!(e.contains("rootfs") && e.contains("No such file"), "{e}");
        std::fs::create_dir_all(d.join("rootfs")).unwrap();
        let b = load(&d).unwrap();
        assert!(b.rootfs.is_absolute() && b.rootfs.ends_with("rootfs"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
