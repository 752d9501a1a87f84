//! Fetching an image's content: the manifest (or index, then this platform's manifest),
//! the config and the layers the store lacks, each verified against its digest and size
//! while it streams. Everything is staged first and enters the store only once all of it
//! is verified, so a failed pull leaves nothing behind (as containerd's ingest directory).

use super::client::Client;
use super::media;
use super::Progress;
use crate::image::digest::{Digest, Verifier};
use crate::image::platform;
use crate::image::reference::Reference;
use oci_spec::image::{Descriptor, ImageIndex, ImageManifest};
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// A manifest or index larger than this is refused (containerd's limit).
const MAX_MANIFEST: u64 = 4 << 20;
/// Indexes pointing at indexes are followed this deep.
const MAX_DEPTH: usize = 4;

/// Where blobs go: the store, or a test's map.
pub trait Blobs {
    fn has_blob(&self, d: &Digest) -> bool;
    fn put_blob(&self, d: &Digest, size: Option<u64>, r: &mut dyn Read) -> Result<(), String>;
}

/// What a pull fetched, held until all of it is verified.
struct Staged {
    dir: PathBuf,
    /// Manifests and indexes, kept in memory.
    small: Vec<(Digest, Vec<u8>)>,
    /// Configs and layers, in files under `dir`.
    files: Vec<(Digest, u64, PathBuf)>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        // Best effort: a staging directory left by a crash is only unused space.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Fetches `name` into `blobs`, staging under `staging` (a directory that this call
/// creates and removes); returns the top-level manifest's or index's digest.
pub fn fetch(
    client: &mut Client,
    blobs: &dyn Blobs,
    staging: &Path,
    name: &Reference,
    progress: &mut dyn FnMut(Progress),
) -> Result<Digest, String> {
    std::fs::create_dir_all(staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    let mut staged = Staged {
        dir: staging.to_path_buf(),
        small: Vec::new(),
        files: Vec::new(),
    };
    let by = match (&name.digest, &name.tag) {
        (Some(d), _) => d.to_string(),
        (None, Some(t)) => t.clone(),
        (None, None) => "latest".into(),
    };
    let (mut media_type, mut bytes, top) = manifest(client, &by, name.digest.as_ref(), None)?;
    progress(Progress::Resolved {
        digest: top.to_string(),
    });
    staged.small.push((top.clone(), bytes.clone()));
    for _ in 0..MAX_DEPTH {
        match media_type.as_str() {
            media::OCI_INDEX | media::DOCKER_LIST => {
                let index = ImageIndex::from_reader(&bytes[..])
                    .map_err(|e| format!("index {}: {e}", staged.small.last().unwrap().0))?;
                let d = platform::select(&index)?;
                let digest = Digest::parse(d.digest().as_ref())?;
                let (mt, b, _) = manifest(client, &digest.to_string(), Some(&digest), Some(d))?;
                staged.small.push((digest, b.clone()));
                (media_type, bytes) = (mt, b);
            }
            media::OCI_MANIFEST | media::DOCKER_MANIFEST => {
                let m = ImageManifest::from_reader(&bytes[..])
                    .map_err(|e| format!("manifest {}: {e}", staged.small.last().unwrap().0))?;
                content(client, blobs, &m, &mut staged, progress)?;
                for (d, b) in &staged.small {
                    blobs.put_blob(d, Some(b.len() as u64), &mut &b[..])?;
                }
                for (d, size, path) in &staged.files {
                    let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
                    blobs.put_blob(d, Some(*size), &mut BufReader::new(f))?;
                }
                return Ok(top);
            }
            other => return Err(media::refuse(other)),
        }
    }
    Err(format!("indexes nest deeper than {MAX_DEPTH}"))
}

/// Fetches the manifest or index `by` (a tag or digest) and its media type, checking it
/// against `expected` (a digest asked for, or a descriptor that points at it).
fn manifest(
    client: &mut Client,
    by: &str,
    expected: Option<&Digest>,
    desc: Option<&Descriptor>,
) -> Result<(String, Vec<u8>, Digest), String> {
    let what = format!("manifest {by}");
    let mut resp = client.get(&format!("manifests/{by}"), media::ACCEPT)?;
    match resp.status {
        200 => {}
        404 => {
            let why = super::client::registry_error(&mut resp);
            return Err(format!("{what}: not found: {why}"));
        }
        _ => return Err(client.refusal(&what, &mut resp)),
    }
    if let Some(d) = desc {
        media::check_length(&what, resp.content_length(), d.size())?;
    }
    let header_type = resp.header("content-type").map(str::to_string);
    let header_digest = resp.header("docker-content-digest").map(str::to_string);
    let bytes = resp.read_body(MAX_MANIFEST)?;
    let got = Digest::of(&bytes);
    if let Some(e) = expected.filter(|e| **e != got) {
        return Err(format!(
            "{what}: digest mismatch: content is {got}, expected {e}"
        ));
    }
    if let Some(d) = desc.filter(|d| d.size() != bytes.len() as u64) {
        return Err(format!(
            "{what}: {} bytes where its descriptor says {}",
            bytes.len(),
            d.size()
        ));
    }
    if let Some(h) = header_digest.filter(|h| *h != got.to_string()) {
        return Err(format!(
            "{what}: the registry says its digest is {h}, its content is {got}"
        ));
    }
    let media_type = media::of_manifest(header_type.as_deref(), &bytes);
    Ok((media_type, bytes, got))
}

/// The config and layers of `m`, those the store lacks staged.
fn content(
    client: &mut Client,
    blobs: &dyn Blobs,
    m: &ImageManifest,
    staged: &mut Staged,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), String> {
    media::check_config(m.config())?;
    for l in m.layers() {
        media::check_layer(l)?;
    }
    for d in std::iter::once(m.config()).chain(m.layers()) {
        let digest = Digest::parse(d.digest().as_ref())?;
        if blobs.has_blob(&digest) || staged.files.iter().any(|(s, _, _)| *s == digest) {
            continue;
        }
        let path = staged.dir.join(&digest.hex);
        blob(client, &digest, d.size(), &path, progress)?;
        staged.files.push((digest, d.size(), path));
    }
    Ok(())
}

/// Streams one blob into `path` through a `Verifier`.
fn blob(
    client: &mut Client,
    digest: &Digest,
    size: u64,
    path: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), String> {
    let what = format!("blob {digest}");
    let mut resp = client.get(&format!("blobs/{digest}"), "")?;
    match resp.status {
        200 => {}
        404 => {
            let why = super::client::registry_error(&mut resp);
            return Err(format!("{what}: not found: {why}"));
        }
        _ => return Err(client.refusal(&what, &mut resp)),
    }
    media::check_length(&what, resp.content_length(), size)?;
    let mut out = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut v = Verifier::new(resp.body(), digest, Some(size));
    let mut buf = vec![0u8; 256 * 1024];
    progress(Progress::Blob {
        digest: digest.to_string(),
        done: 0,
        total: size,
    });
    loop {
        let n = match v.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{what}: {e}")),
        };
        out.write_all(&buf[..n])
            .map_err(|e| format!("{}: {e}", path.display()))?;
        progress(Progress::Blob {
            digest: digest.to_string(),
            done: v.bytes_read(),
            total: size,
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "pull_tests.rs"]
mod tests;
