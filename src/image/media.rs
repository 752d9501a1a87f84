//! The media types the store knows, OCI's and Docker's, and what each one is.

use super::error::Error;

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

/// What a top-level or child JSON document is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doc {
    Index,
    Manifest,
}

/// How a layer blob is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// An index or a manifest, by media type; schema 1 and anything else is refused.
pub fn doc(media_type: &str) -> Result<Doc, Error> {
    match media_type {
        OCI_INDEX | DOCKER_LIST => Ok(Doc::Index),
        OCI_MANIFEST | DOCKER_MANIFEST => Ok(Doc::Manifest),
        m if m.starts_with("application/vnd.docker.distribution.manifest.v1") => {
            Err(Error::Unsupported(format!(
                "Docker schema 1 manifest ({m}) is not supported: push the image again with a current client"
            )))
        }
        m => Err(Error::Unsupported(format!(
            "unknown manifest media type {m:?}"
        ))),
    }
}

/// The media type a JSON document declares or, lacking one (OCI allows that), what its
/// fields say it is.
pub fn sniff_doc(json: &serde_json::Value) -> Result<Doc, Error> {
    match json.get("mediaType").and_then(|m| m.as_str()) {
        Some(m) => doc(m),
        None if json.get("manifests").is_some() => Ok(Doc::Index),
        None if json.get("layers").is_some() && json.get("config").is_some() => Ok(Doc::Manifest),
        None if json.get("fsLayers").is_some() => {
            doc("application/vnd.docker.distribution.manifest.v1+json")
        }
        None => Err(Error::Content(
            "a JSON document that is neither an image index nor a manifest".into(),
        )),
    }
}

pub fn is_config(media_type: &str) -> bool {
    matches!(media_type, OCI_CONFIG | DOCKER_CONFIG)
}

/// A layer's compression by media type: OCI's (distributable or not) and Docker's.
pub fn layer(media_type: &str) -> Result<Compression, Error> {
    let base = media_type.replace(".nondistributable.", ".");
    match base.as_str() {
        OCI_LAYER | "application/vnd.docker.image.rootfs.diff.tar" => Ok(Compression::None),
        OCI_LAYER_GZIP
        | "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Ok(Compression::Gzip),
        OCI_LAYER_ZSTD | "application/vnd.docker.image.rootfs.diff.tar.zstd" => {
            Ok(Compression::Zstd)
        }
        m if m.ends_with("+encrypted") => Err(Error::Unsupported(format!(
            "encrypted layers ({m}) are not supported"
        ))),
        m => Err(Error::Unsupported(format!(
            "unknown layer media type {m:?}"
        ))),
    }
}

/// A blob's compression by its first bytes (docker-save archives carry no media types).
pub fn sniff_compression(head: &[u8]) -> Compression {
    match head {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
        _ => Compression::None,
    }
}

/// The OCI layer media type for a compression.
pub fn oci_layer(c: Compression) -> &'static str {
    match c {
        Compression::None => OCI_LAYER,
        Compression::Gzip => OCI_LAYER_GZIP,
        Compression::Zstd => OCI_LAYER_ZSTD,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_media_types() {
        assert_eq!(doc(DOCKER_LIST).unwrap(), Doc::Index);
        assert_eq!(doc(OCI_MANIFEST).unwrap(), Doc::Manifest);
        assert!(
            doc("application/vnd.docker.distribution.manifest.v1+prettyjws")
                .unwrap_err()
                .to_string()
                .contains("schema 1")
        );
        assert_eq!(
            doc("text/plain").unwrap_err().to_string(),
            "unknown manifest media type \"text/plain\""
        );
        assert_eq!(layer(OCI_LAYER_ZSTD).unwrap(), Compression::Zstd);
        assert_eq!(
            layer("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip").unwrap(),
            Compression::Gzip
        );
        assert_eq!(
            layer("application/vnd.docker.image.rootfs.diff.tar.gzip").unwrap(),
            Compression::Gzip
        );
        assert!(layer("application/x-foo")
            .unwrap_err()
            .to_string()
            .contains("unknown layer media type"));
        assert!(layer("application/vnd.oci.image.layer.v1.tar+gzip+encrypted").is_err());
        assert_eq!(sniff_compression(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(sniff_compression(b"bin/"), Compression::None);
        let v: serde_json::Value = serde_json::json!({"manifests": []});
        assert_eq!(sniff_doc(&v).unwrap(), Doc::Index);
    }
}
