//! From a top-level digest to what runs: through indexes (this platform's entry), to a
//! manifest, its config and its layers, reading blobs the store already has.

use super::digest::Digest;
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
    /// Every blob of the image the store has: indexes, all their manifests, and this
    /// platform's config and layers.
    pub blobs: Vec<Digest>,
}

/// Descriptor digest as ours.
pub fn digest_of(d: &Descriptor) -> Result<Digest, String> {
    Digest::parse(d.digest().as_ref())
}

/// Reads a blob: `Ok(None)` for one the store lacks.
pub type ReadBlob<'a> = &'a dyn Fn(&Digest) -> Result<Option<Vec<u8>>, String>;

/// Resolves `top`, reading blobs with `read`.
pub fn resolve(top: &Digest, read: ReadBlob) -> Result<Resolved, String> {
    let need = |d: &Digest, what: &str| -> Result<Vec<u8>, String> {
        read(d)?.ok_or_else(|| format!("{what} {d} is not in the store"))
    };
    let mut blobs = vec![top.clone()];
    let mut current = top.clone();
    let mut bytes = need(top, "manifest")?;
    for depth in 0.. {
        let json: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{current}: not a JSON manifest or index: {e}"))?;
        match media::sniff_doc(&json).map_err(|e| format!("{current}: {e}"))? {
            Doc::Manifest => break,
            Doc::Index if depth >= MAX_DEPTH => {
                return Err(format!("{top}: indexes nested more than {MAX_DEPTH} deep"))
            }
            Doc::Index => {
                let index: ImageIndex =
                    serde_json::from_value(json).map_err(|e| format!("index {current}: {e}"))?;
                for m in index.manifests() {
                    let d = digest_of(m)?;
                    if read(&d)?.is_some() && !blobs.contains(&d) {
                        blobs.push(d);
                    }
                }
                let chosen =
                    platform::select(&index).map_err(|e| format!("index {current}: {e}"))?;
                media::doc(chosen.media_type().as_ref())
                    .map_err(|e| format!("index {current}: {e}"))?;
                current = digest_of(chosen)?;
                bytes = need(&current, "manifest")?;
                if !blobs.contains(&current) {
                    blobs.push(current.clone());
                }
            }
        }
    }
    let manifest: ImageManifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("manifest {current}: {e}"))?;
    let cfg = manifest.config();
    let cfg_type = cfg.media_type().to_string();
    if !media::is_config(&cfg_type) {
        return Err(format!(
            "manifest {current}: config of media type {cfg_type:?} is not an image's"
        ));
    }
    let config_digest = digest_of(cfg)?;
    let config_bytes = need(&config_digest, "config")?;
    let config: ImageConfiguration = serde_json::from_slice(&config_bytes)
        .map_err(|e| format!("config {config_digest}: {e}"))?;
    blobs.push(config_digest.clone());
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != manifest.layers().len() {
        return Err(format!(
            "manifest {current}: {} layers but its config {config_digest} lists {} diff_ids",
            manifest.layers().len(),
            diff_ids.len()
        ));
    }
    let mut layers = vec![];
    for (l, diff) in manifest.layers().iter().zip(diff_ids) {
        let blob = digest_of(l)?;
        let compression =
            media::layer(l.media_type().as_ref()).map_err(|e| format!("layer {blob}: {e}"))?;
        let diff_id = Digest::parse(diff).map_err(|e| format!("config {config_digest}: {e}"))?;
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
    })
}
