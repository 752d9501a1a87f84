//! The media types a pull takes (OCI and Docker schema 2), how a manifest's type is told
//! when the registry does not say it, and the refusal of any other, naming it.

use crate::image::Error;
use oci_spec::image::Descriptor;

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_SCHEMA1: &str = "application/vnd.docker.distribution.manifest.v1+json";
const DOCKER_SCHEMA1_SIGNED: &str = "application/vnd.docker.distribution.manifest.v1+prettyjws";

/// The `Accept` of a manifest request, as containerd's resolver sends it.
pub const ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

const CONFIGS: &[&str] = &[
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
];

const LAYERS: &[&str] = &[
    "application/vnd.oci.image.layer.v1.tar",
    "application/vnd.oci.image.layer.v1.tar+gzip",
    "application/vnd.oci.image.layer.v1.tar+zstd",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
    "application/vnd.docker.image.rootfs.diff.tar",
    "application/vnd.docker.image.rootfs.diff.tar.gzip",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
];

/// A manifest's media type: the `Content-Type` the registry sent, else (a generic or
/// absent one) the `mediaType` in the document, else its shape, as containerd tells them.
pub fn of_manifest(content_type: Option<&str>, body: &[u8]) -> String {
    let header = content_type
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|c| !c.is_empty() && c != "application/json" && c != "text/plain");
    if let Some(h) = header {
        return h;
    }
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if let Some(m) = v.get("mediaType").and_then(|m| m.as_str()) {
        return m.to_string();
    }
    if v.get("manifests").is_some() {
        OCI_INDEX.into()
    } else if v.get("config").is_some() {
        OCI_MANIFEST.into()
    } else if v.get("schemaVersion").and_then(|s| s.as_u64()) == Some(1) {
        DOCKER_SCHEMA1.into()
    } else {
        content_type.unwrap_or("none").to_string()
    }
}

/// The one-line refusal of a manifest type a pull does not take.
pub fn refuse(media_type: &str) -> Error {
    if media_type == DOCKER_SCHEMA1 || media_type == DOCKER_SCHEMA1_SIGNED {
        return Error::Unsupported(format!(
            "unsupported manifest media type {media_type} (Docker schema 1, \
             deprecated): push the image again with a current client"
        ));
    }
    Error::Unsupported(format!(
        "unsupported manifest media type {media_type:?}: podinit takes OCI and Docker \
         schema 2 manifests and indexes"
    ))
}

pub fn check_config(d: &Descriptor) -> Result<(), Error> {
    let t = d.media_type().to_string();
    if CONFIGS.contains(&t.as_str()) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "config {}: unsupported media type {t:?} (not an image config)",
        d.digest()
    )))
}

pub fn check_layer(d: &Descriptor) -> Result<(), Error> {
    let t = d.media_type().to_string();
    if LAYERS.contains(&t.as_str()) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "layer {}: unsupported media type {t:?} (layers are tar, tar+gzip or tar+zstd)",
        d.digest()
    )))
}

/// A registry announcing another length than the descriptor's lies about the content.
pub fn check_length(what: &str, announced: Option<u64>, size: u64) -> Result<(), Error> {
    match announced {
        Some(n) if n != size => Err(Error::Content(format!(
            "{what}: the registry announces {n} bytes, its descriptor says {size}"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_a_manifests_type() {
        let index = br#"{"schemaVersion":2,"manifests":[]}"#;
        let manifest = br#"{"schemaVersion":2,"config":{},"layers":[]}"#;
        assert_eq!(of_manifest(Some(DOCKER_LIST), index), DOCKER_LIST);
        assert_eq!(
            of_manifest(
                Some("application/vnd.oci.image.manifest.v1+json; charset=utf-8"),
                b""
            ),
            OCI_MANIFEST
        );
        assert_eq!(of_manifest(Some("application/json"), index), OCI_INDEX);
        assert_eq!(of_manifest(None, manifest), OCI_MANIFEST);
        let typed = br#"{"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}"#;
        assert_eq!(of_manifest(None, typed), DOCKER_MANIFEST);
        assert_eq!(of_manifest(None, br#"{"schemaVersion":1}"#), DOCKER_SCHEMA1);
        assert!(refuse(DOCKER_SCHEMA1_SIGNED)
            .to_string()
            .contains("Docker schema 1"));
        let e = refuse("application/vnd.example+json").to_string();
        assert!(e.contains("\"application/vnd.example+json\""), "{e}");
    }

    #[test]
    fn checks_config_and_layer_types() {
        let d = |t: &str| -> Descriptor {
            serde_json::from_value(serde_json::json!({
                "mediaType": t,
                "digest": format!("sha256:{}", "0".repeat(64)),
                "size": 1
            }))
            .unwrap()
        };
        assert!(check_config(&d("application/vnd.docker.container.image.v1+json")).is_ok());
        assert!(check_layer(&d("application/vnd.oci.image.layer.v1.tar+zstd")).is_ok());
        assert!(check_layer(&d("application/vnd.docker.image.rootfs.diff.tar.gzip")).is_ok());
        let e = check_layer(&d("application/vnd.cncf.helm.chart.content.v1.tar+gzip"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("helm") && e.contains("unsupported"), "{e}");
        let e = check_config(&d("application/vnd.cncf.helm.config.v1+json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an image config"), "{e}");
        assert!(check_length("blob x", Some(3), 4)
            .unwrap_err()
            .to_string()
            .contains("announces 3"));
        assert!(check_length("blob x", None, 4).is_ok());
    }
}
