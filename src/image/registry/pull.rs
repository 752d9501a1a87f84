//! Fetching an image's content: the manifest (or index, then this platform's manifest),
//! the config and the layers the store lacks, each verified against its digest and size
//! while it streams. Everything is staged first and enters the store only once all of it
//! is verified, so a failed pull leaves nothing behind (as containerd's ingest directory).

use super::client::Client;
use super::media;
use super::Progress;
use crate::image::digest::{Digest, Verifier};
use crate::image::error::{Error, Result};
use crate::image::platform;
use crate::image::reference::Reference;
use oci_spec::image::{Descriptor, ImageIndex, ImageManifest};
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

/// A manifest or index larger than this is refused (containerd's limit).
const MAX_MANIFEST: u64 = 4 << 20;
/// Indexes pointing at indexes are followed this deep.
const MAX_DEPTH: usize = 4;
/// Blobs fetched at once (containerd's `max_concurrent_downloads` default).
const MAX_CONCURRENT_DOWNLOADS: usize = 3;

/// Where blobs go: the store, or a test's map.
pub trait Blobs {
    fn has_blob(&self, d: &Digest) -> bool;
    fn put_blob(&self, d: &Digest, size: Option<u64>, r: &mut dyn Read) -> Result<()>;
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
) -> Result<Digest> {
    std::fs::create_dir_all(staging).map_err(|e| Error::io(staging.display(), e))?;
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
                let index: ImageIndex = crate::tracked::from_slice(&bytes).map_err(|e| {
                    Error::Content(format!("index {}: {e}", staged.small.last().unwrap().0))
                })?;
                let d = platform::select(&index)?;
                let digest = Digest::parse(d.digest().as_ref())?;
                let (mt, b, _) = manifest(client, &digest.to_string(), Some(&digest), Some(d))?;
                staged.small.push((digest, b.clone()));
                (media_type, bytes) = (mt, b);
            }
            media::OCI_MANIFEST | media::DOCKER_MANIFEST => {
                let m: ImageManifest = crate::tracked::from_slice(&bytes).map_err(|e| {
                    Error::Content(format!("manifest {}: {e}", staged.small.last().unwrap().0))
                })?;
                content(client, blobs, &m, &mut staged, progress)?;
                for (d, b) in staged.small.iter().filter(|(d, _)| !blobs.has_blob(d)) {
                    blobs.put_blob(d, Some(b.len() as u64), &mut &b[..])?;
                }
                for (d, size, path) in &staged.files {
                    let f = File::open(path).map_err(|e| Error::io(path.display(), e))?;
                    blobs.put_blob(d, Some(*size), &mut BufReader::new(f))?;
                }
                return Ok(top);
            }
            other => return Err(media::refuse(other)),
        }
    }
    Err(Error::Content(format!(
        "indexes nest deeper than {MAX_DEPTH}"
    )))
}

/// Fetches the manifest or index `by` (a tag or digest) and its media type, checking it
/// against `expected` (a digest asked for, or a descriptor that points at it).
fn manifest(
    client: &mut Client,
    by: &str,
    expected: Option<&Digest>,
    desc: Option<&Descriptor>,
) -> Result<(String, Vec<u8>, Digest)> {
    let what = format!("manifest {by}");
    let mut resp = client.get_found(&what, &format!("manifests/{by}"), media::ACCEPT)?;
    if let Some(d) = desc {
        media::check_length(&what, resp.content_length(), d.size())?;
    }
    let header_type = resp.header("content-type").map(str::to_string);
    let header_digest = resp.header("docker-content-digest").map(str::to_string);
    let bytes = resp.read_body(MAX_MANIFEST)?;
    let got = Digest::of(&bytes);
    if let Some(e) = expected.filter(|e| **e != got) {
        return Err(Error::Content(format!(
            "{what}: digest mismatch: content is {got}, expected {e}"
        )));
    }
    if let Some(d) = desc.filter(|d| d.size() != bytes.len() as u64) {
        return Err(Error::Content(format!(
            "{what}: {} bytes where its descriptor says {}",
            bytes.len(),
            d.size()
        )));
    }
    if let Some(h) = header_digest.filter(|h| *h != got.to_string()) {
        return Err(Error::Content(format!(
            "{what}: the registry says its digest is {h}, its content is {got}"
        )));
    }
    let media_type = media::of_manifest(header_type.as_deref(), &bytes);
    Ok((media_type, bytes, got))
}

/// The config and layers of `m` that the store lacks, staged: up to
/// `MAX_CONCURRENT_DOWNLOADS` at a time, the first failure stopping the others.
fn content(
    client: &Client,
    blobs: &dyn Blobs,
    m: &ImageManifest,
    staged: &mut Staged,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    media::check_config(m.config())?;
    for l in m.layers() {
        media::check_layer(l)?;
    }
    let mut todo: Vec<(Digest, u64)> = Vec::new();
    for d in std::iter::once(m.config()).chain(m.layers()) {
        let digest = Digest::parse(d.digest().as_ref())?;
        if !blobs.has_blob(&digest) && !todo.iter().any(|(t, _)| *t == digest) {
            todo.push((digest, d.size()));
        }
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let dir = staged.dir.clone();
    let (tx, rx) = mpsc::channel::<Progress>();
    let results: Vec<Result<()>> = thread::scope(|s| {
        let workers: Vec<_> = (0..MAX_CONCURRENT_DOWNLOADS.min(todo.len()))
            .map(|_| {
                let (tx, mut c) = (tx.clone(), client.clone());
                let (todo, next, failed, dir) = (&todo, &next, &failed, &dir);
                s.spawn(move || -> Result<()> {
                    let report = |p| {
                        // The receiver lives until every worker is done.
                        let _ = tx.send(p);
                    };
                    while !failed.load(Ordering::SeqCst) {
                        let Some((d, size)) = todo.get(next.fetch_add(1, Ordering::SeqCst)) else {
                            break;
                        };
                        let path = dir.join(&d.hex);
                        if let Err(e) = blob(&mut c, d, *size, &path, failed, &report) {
                            failed.store(true, Ordering::SeqCst);
                            return Err(e);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        drop(tx);
        for p in rx {
            progress(p);
        }
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(Error::Os(io::Error::other("a download panicked"))))
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    for (d, size) in todo {
        let path = dir.join(&d.hex);
        staged.files.push((d, size, path));
    }
    Ok(())
}

/// Streams one blob into `path` through a `Verifier`; stops early (its result then
/// unused) once `cancel` is set by another download's failure.
fn blob(
    client: &mut Client,
    digest: &Digest,
    size: u64,
    path: &Path,
    cancel: &AtomicBool,
    progress: &dyn Fn(Progress),
) -> Result<()> {
    let what = format!("blob {digest}");
    let mut resp = client.get_found(&what, &format!("blobs/{digest}"), "")?;
    media::check_length(&what, resp.content_length(), size)?;
    let mut out = File::create(path).map_err(|e| Error::io(path.display(), e))?;
    let mut v = Verifier::new(resp.body(), digest, Some(size));
    let mut buf = vec![0u8; 256 * 1024];
    progress(Progress::Blob {
        digest: digest.to_string(),
        done: 0,
        total: size,
    });
    while !cancel.load(Ordering::SeqCst) {
        let n = match v.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::Os(e).within(&what)),
        };
        out.write_all(&buf[..n])
            .map_err(|e| Error::io(path.display(), e))?;
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
