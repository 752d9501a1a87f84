//! From a top-level digest to what runs: through indexes (this platform's entry), to a
//! manifest, its config and its layers, reading blobs the store already has.

use super::digest::Digest;
use super::error::{Error, Result};
use super::media::{self, Compression, Doc};
use super::platform;
use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};

/// Indexes of indexes deeper than this are refused (a loop would be endless).
const MAX_DEPTH: usize = 4;

/// One layer: its blob and how to read it, and the digest of its uncompressed tar.
#[derive(Clone, Debug)]
pub struct Layer {
    pub blob: Digest,
    pub size: u64,
    pub compression: Compression,
    pub diff_id: Digest,
}

/// An image resolved for this machine.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub manifest: Digest,
    pub config_digest: Digest,
    pub config_size: u64,
    pub config: ImageConfiguration,
    /// Lowest first.
    pub layers: Vec<Layer>,
    /// The blobs this platform's image is made of: the indexes on the way, the manifest,
    /// config and layers.
    pub blobs: Vec<Digest>,
    /// The other platforms' manifests the indexes list, which a store may or may not have.
    pub others: Vec<Digest>,
}

/// Descriptor digest as ours.
pub fn digest_of(d: &Descriptor) -> Result<Digest> {
    Digest::parse(d.digest().as_ref())
}

/// Reads a blob: `Ok(None)` for one the store lacks.
pub type ReadBlob<'a> = &'a dyn Fn(&Digest) -> Result<Option<Vec<u8>>>;

/// Resolves `top`, reading blobs with `read`.
pub fn resolve(top: &Digest, read: ReadBlob) -> Result<Resolved> {
    let need = |d: &Digest, what: &str| -> Result<Vec<u8>> {
        read(d)?.ok_or_else(|| Error::Missing(format!("{what} {d} is not in the store")))
    };
    let mut blobs = vec![top.clone()];
    let mut others = vec![];
    let mut current = top.clone();
    let mut bytes = need(top, "manifest")?;
    for depth in 0.. {
        let json: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Content(format!("{current}: not a JSON manifest or index: {e}")))?;
        match media::sniff_doc(&json).map_err(|e| e.within(&current))? {
            Doc::Manifest => break,
            Doc::Index if depth >= MAX_DEPTH => {
                return Err(Error::Content(format!(
                    "{top}: indexes nested more than {MAX_DEPTH} deep"
                )))
            }
            Doc::Index => {
                let index: ImageIndex = crate::tracked::from_value(&json)
                    .map_err(|e| Error::Content(format!("index {current}: {e}")))?;
                let chosen =
                    platform::select(&index).map_err(|e| e.within(format!("index {current}")))?;
                for m in index.manifests().iter().filter(|m| *m != chosen) {
                    others.push(digest_of(m)?);
                }
                media::doc(chosen.media_type().as_ref())
                    .map_err(|e| e.within(format!("index {current}")))?;
                current = digest_of(chosen)?;
                bytes = need(&current, "manifest")?;
                if !blobs.contains(&current) {
                    blobs.push(current.clone());
                }
            }
        }
    }
    let manifest: ImageManifest = crate::tracked::from_slice(&bytes)
        .map_err(|e| Error::Content(format!("manifest {current}: {e}")))?;
    let cfg = manifest.config();
    let cfg_type = cfg.media_type().to_string();
    if !media::is_config(&cfg_type) {
        return Err(Error::Unsupported(format!(
            "manifest {current}: config of media type {cfg_type:?} is not an image's"
        )));
    }
    let config_digest = digest_of(cfg)?;
    let config_bytes = need(&config_digest, "config")?;
    let config: ImageConfiguration = crate::tracked::from_slice(&config_bytes)
        .map_err(|e| Error::Content(format!("config {config_digest}: {e}")))?;
    blobs.push(config_digest.clone());
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != manifest.layers().len() {
        return Err(Error::Content(format!(
            "manifest {current}: {} layers but its config {config_digest} lists {} diff_ids",
            manifest.layers().len(),
            diff_ids.len()
        )));
    }
    let mut layers = vec![];
    for (l, diff) in manifest.layers().iter().zip(diff_ids) {
        let blob = digest_of(l)?;
        let compression =
            media::layer(l.media_type().as_ref()).map_err(|e| e.within(format!("layer {blob}")))?;
        let diff_id =
            Digest::parse(diff).map_err(|e| e.within(format!("config {config_digest}")))?;
        blobs.push(blob.clone());
        layers.push(Layer {
            blob,
            size: l.size(),
            compression,
            diff_id,
        });
    }
    Ok(Resolved {
        manifest: current,
        config_digest,
        config_size: cfg.size(),
        config,
        layers,
        blobs,
        others,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    /// Blobs in memory, by digest.
    #[derive(Default)]
    struct Blobs(HashMap<Digest, Vec<u8>>);

    impl Blobs {
        fn put(&mut self, v: serde_json::Value) -> (Digest, u64) {
            let b = serde_json::to_vec(&v).unwrap();
            let d = Digest::of(&b);
            let n = b.len() as u64;
            self.0.insert(d.clone(), b);
            (d, n)
        }

        fn resolve(&self, top: &Digest) -> Result<Resolved> {
            resolve(top, &|d| Ok(self.0.get(d).cloned()))
        }

        /// Why `top` does not resolve, as its line.
        fn refusal(&self, top: &Digest) -> String {
            self.resolve(top).unwrap_err().to_string()
        }
    }

    fn desc(media: &str, (d, n): (Digest, u64)) -> serde_json::Value {
        json!({"mediaType": media, "digest": d.to_string(), "size": n})
    }

    fn image(b: &mut Blobs, arch: &str, layers: usize, diff_ids: usize) -> (Digest, u64) {
        let ids: Vec<String> = (0..diff_ids)
            .map(|i| Digest::of(format!("{arch}{i}").as_bytes()).to_string())
            .collect();
        let config = b.put(json!({"architecture": arch, "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": ids}}));
        let layers: Vec<_> = (0..layers)
            .map(|i| {
                let d = Digest::of(format!("blob{arch}{i}").as_bytes());
                desc(media::OCI_LAYER_GZIP, (d, 10))
            })
            .collect();
        b.put(json!({"schemaVersion": 2, "mediaType": media::OCI_MANIFEST,
            "config": desc(media::OCI_CONFIG, config), "layers": layers}))
    }

    #[test]
    fn resolves_an_index_to_this_machines_manifest() {
        let mut b = Blobs::default();
        let host = platform::Platform::host();
        let mine = image(&mut b, &host.arch, 2, 2);
        let other = image(&mut b, "s390x", 1, 1);
        let with_platform = |m: (Digest, u64), arch: &str| {
            let mut d = desc(media::OCI_MANIFEST, m);
            d["platform"] = json!({"os": "linux", "architecture": arch});
            d
        };
        let index = b.put(json!({"schemaVersion": 2, "manifests": [
            with_platform(other.clone(), "s390x"), with_platform(mine.clone(), &host.arch)]}));
        let r = b.resolve(&index.0).unwrap();
        assert_eq!(r.manifest, mine.0);
        assert_eq!(r.layers.len(), 2);
        assert_eq!(r.layers[0].compression, Compression::Gzip);
        assert_eq!(r.config.architecture().to_string(), host.arch);
        // The index, this manifest, config and layers; the other manifest apart.
        assert_eq!(r.blobs.len(), 2 + 1 + 2);
        assert_eq!(r.others, [other.0]);
    }

    #[test]
    fn refuses_what_does_not_add_up() {
        let mut b = Blobs::default();
        let bad = image(&mut b, "amd64", 2, 1);
        let e = b.refusal(&bad.0);
        assert!(
            e.ends_with("2 layers but its config sha256:") || e.contains("lists 1 diff_ids"),
            "{e}"
        );
        let missing = Digest::of(b"nothing");
        assert_eq!(
            b.refusal(&missing),
            format!("manifest {missing} is not in the store")
        );
        let odd = b.put(json!({"schemaVersion": 2, "mediaType": "application/x-odd"}));
        assert!(b.refusal(&odd.0).contains("unknown manifest media type"));
        let v1 = b.put(json!({"schemaVersion": 1, "fsLayers": []}));
        assert!(b.refusal(&v1.0).contains("schema 1"));
        let cfg = b.put(json!({}));
        let wrong = b.put(
            json!({"schemaVersion": 2, "config": desc("application/x-thing", cfg),
            "layers": []}),
        );
        assert!(b.refusal(&wrong.0).contains("is not an image's"));
        let mut nested = b.put(json!({"schemaVersion": 2, "manifests": []})).0;
        for _ in 0..6 {
            nested = b
                .put(json!({"schemaVersion": 2, "manifests": [desc(media::OCI_INDEX, (nested.clone(), 1))]}))
                .0;
        }
        assert!(b.refusal(&nested).contains("nested more than"));
    }
}
