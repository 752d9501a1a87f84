//! `podinit images import`: an OCI image layout directory, an `oci-archive` tarball, or a
//! `docker save` archive (or its unpacked directory) into the store, as containerd's
//! importer takes them. Docker's manifest.json entries become OCI manifests.

use super::digest::Digest;
use super::error::{Error, Result};
use super::media;
use super::names::{NAME_ANNOTATION, REF_ANNOTATION};
use super::reference::Reference;
use super::store::{Image, Store};
use super::unpack::clean;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// index.json, manifest.json and the like are small; a larger one is not an image's.
const JSON_MAX: u64 = 16 << 20;

/// Imports the images at `path`, named `name` if given (which then must be the only image
/// there), else as the archive names them. Nothing of a failed import stays.
pub fn import(store: &Store, path: &Path, name: Option<&str>) -> Result<Vec<Image>> {
    let name = name
        .map(Reference::parse)
        .transpose()
        .map_err(|e| e.within("--name"))?;
    let mut added = vec![];
    let writing = store.writing()?;
    let result = import_locked(store, path, name.as_ref(), &mut added);
    drop(writing);
    // Blobs that no image ended up using: another platform's, or a failure's.
    let cleaned = store.drop_unused(&added);
    let images = result.map_err(|e| e.within(format_args!("import {}", path.display())))?;
    cleaned?;
    Ok(images)
}

fn import_locked(
    store: &Store,
    path: &Path,
    name: Option<&Reference>,
    added: &mut Vec<Digest>,
) -> Result<Vec<Image>> {
    let meta = std::fs::metadata(path).map_err(Error::Os)?;
    let source = if meta.is_dir() {
        from_dir(store, path, added)?
    } else {
        from_tar(store, path, added)?
    };
    let tops = source.tops(store, added)?;
    let tops = name_them(tops, name)?;
    // Every image is unpacked before any is named, so that one bad image of several
    // leaves no name behind.
    for (r, top) in &tops {
        store.prepare(top).map_err(|e| e.within(r))?;
    }
    let mut images = vec![];
    for (r, top) in tops {
        images.push(store.commit(&r, &top)?);
    }
    Ok(images)
}

/// What an archive or directory holds once its blobs are in the store.
#[derive(Default)]
struct Source {
    index: Option<Value>,
    docker: Option<Value>,
    /// Docker archive paths (config and layer files) to the blobs they became.
    files: HashMap<PathBuf, Digest>,
}

/// A top-level digest and the names the archive gives it.
type Top = (Digest, Vec<String>);

impl Source {
    fn tops(&self, store: &Store, added: &mut Vec<Digest>) -> Result<Vec<Top>> {
        if let Some(index) = &self.index {
            return oci_tops(index);
        }
        if let Some(manifest) = &self.docker {
            return docker_tops(store, manifest, &self.files, added);
        }
        Err(Error::Content(
            "neither an OCI image layout (index.json) nor a docker save archive (manifest.json)"
                .into(),
        ))
    }
}

fn put_new(
    store: &Store,
    d: &Digest,
    added: &mut Vec<Digest>,
    put: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let had = store.has_blob(d);
    put()?;
    if !had {
        added.push(d.clone());
    }
    Ok(())
}

/// An OCI image layout directory (its index.json's images, this platform's blobs) or an
/// unpacked docker save archive.
fn from_dir(store: &Store, dir: &Path, added: &mut Vec<Digest>) -> Result<Source> {
    let mut s = Source::default();
    if dir.join("index.json").is_file() {
        let index = read_json(&dir.join("index.json"))?;
        let read = |d: &Digest| -> Result<Option<Vec<u8>>> {
            match std::fs::read(dir.join("blobs/sha256").join(&d.hex)) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::io(format_args!("blob {d}"), e)),
            }
        };
        for (top, _) in oci_tops(&index)? {
            let r = super::resolve::resolve(&top, &read)?;
            // Other platforms' manifests come along when the layout has them (small, and
            // they keep the index whole), their configs and layers do not.
            let blobs = dir.join("blobs/sha256");
            let others = r.others.iter().filter(|d| blobs.join(&d.hex).is_file());
            for b in r.blobs.iter().chain(others) {
                let path = blobs.join(&b.hex);
                put_new(store, b, added, || {
                    let mut f =
                        File::open(&path).map_err(|e| Error::io(format_args!("blob {b}"), e))?;
                    store.put_blob(b, None, &mut f)
                })?;
            }
        }
        s.index = Some(index);
        return Ok(s);
    }
    let manifest = read_json(&dir.join("manifest.json"))?;
    for entry in manifest.as_array().into_iter().flatten() {
        let config = entry["Config"].as_str().into_iter();
        let layers = entry["Layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str);
        for file in config.chain(layers) {
            let rel = clean(Path::new(file))?;
            let mut f = File::open(dir.join(&rel)).map_err(|e| Error::io(file, e))?;
            let (d, _) = store.put_blob_unnamed(&mut f)?;
            added.push(d.clone());
            s.files.insert(rel, d);
        }
    }
    s.docker = Some(manifest);
    Ok(s)
}

/// Streams a tarball (gzip- or zstd-compressed or not) once: blobs go straight into the
/// store, verified; docker's files are stored by their content's digest.
fn from_tar(store: &Store, path: &Path, added: &mut Vec<Digest>) -> Result<Source> {
    let f = File::open(path).map_err(Error::Os)?;
    let mut input = BufReader::with_capacity(1 << 20, f);
    let head = input.fill_buf().map_err(Error::Os)?.to_vec();
    let plain: Box<dyn Read> = match media::sniff_compression(&head) {
        media::Compression::None => Box::new(input),
        media::Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        media::Compression::Zstd => Box::new(
            super::zstd::Frames::new(input).map_err(|e| Error::Content(format!("zstd: {e}")))?,
        ),
    };
    let mut archive = tar::Archive::new(plain);
    let mut s = Source::default();
    let mut links: Vec<(PathBuf, PathBuf)> = vec![];
    let bad = |e: std::io::Error| Error::io("reading the archive", e);
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let rel = clean(&entry.path().map_err(bad)?)?;
        let what = rel.display().to_string();
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => {}
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(bad)?
                    .unwrap_or_default()
                    .into_owned();
                // docker save links a repeated layer to its first copy, relative to itself.
                let base = if entry.header().entry_type() == tar::EntryType::Symlink {
                    rel.parent().unwrap_or(Path::new("")).join(&target)
                } else {
                    target
                };
                links.push((rel, normalise(&base)?));
                continue;
            }
            _ => continue,
        }
        match what.as_str() {
            "index.json" => s.index = Some(json_of(&mut entry, &what)?),
            "manifest.json" => s.docker = Some(json_of(&mut entry, &what)?),
            "oci-layout" | "repositories" => {}
            _ => {
                if let Some(hex) = what.strip_prefix("blobs/sha256/") {
                    let d = Digest::parse(&format!("sha256:{hex}")).map_err(|e| e.within(&what))?;
                    let size = entry.size();
                    put_new(store, &d, added, || {
                        store.put_blob(&d, Some(size), &mut entry)
                    })?;
                    s.files.insert(rel, d);
                } else {
                    let (d, _) = store
                        .put_blob_unnamed(&mut entry)
                        .map_err(|e| e.within(&what))?;
                    added.push(d.clone());
                    s.files.insert(rel, d);
                }
            }
        }
    }
    for (link, target) in links {
        if let Some(d) = s.files.get(&target).cloned() {
            s.files.insert(link, d);
        }
    }
    Ok(s)
}

/// `a/b/../c` is `a/c`; going above the archive's root is an error.
fn normalise(p: &Path) -> Result<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir if !out.pop() => {
                return Err(Error::Content(format!(
                    "link {:?} leaves the archive",
                    p.display()
                )));
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    Ok(out)
}

fn json_of(r: &mut dyn Read, what: &str) -> Result<Value> {
    let mut buf = vec![];
    r.take(JSON_MAX + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(what, e))?;
    if buf.len() as u64 > JSON_MAX {
        return Err(Error::Content(format!(
            "{what}: larger than {JSON_MAX} bytes"
        )));
    }
    serde_json::from_slice(&buf).map_err(|e| Error::Content(format!("{what}: {e}")))
}

fn read_json(path: &Path) -> Result<Value> {
    let mut f = File::open(path).map_err(|e| Error::io(path.display(), e))?;
    json_of(&mut f, &path.display().to_string())
}

/// The images an OCI index.json lists, with the names its annotations give.
fn oci_tops(index: &Value) -> Result<Vec<Top>> {
    let mut out = vec![];
    for m in index["manifests"].as_array().into_iter().flatten() {
        let d = Digest::parse(m["digest"].as_str().unwrap_or_default())
            .map_err(|e| e.within("index.json"))?;
        media::doc(m["mediaType"].as_str().unwrap_or(media::OCI_MANIFEST))
            .map_err(|e| e.within(format_args!("index.json: {d}")))?;
        let a = &m["annotations"];
        let names = match (a[NAME_ANNOTATION].as_str(), a[REF_ANNOTATION].as_str()) {
            (Some(n), _) => vec![n.to_string()],
            (None, Some(r)) => vec![r.to_string()],
            (None, None) => vec![],
        };
        match out.iter_mut().find(|(t, _): &&mut Top| *t == d) {
            Some((_, n)) => n.extend(names),
            None => out.push((d, names)),
        }
    }
    if out.is_empty() {
        return Err(Error::Content("index.json lists no images".into()));
    }
    Ok(out)
}

/// The images of a docker save manifest.json, each made an OCI manifest in the store.
fn docker_tops(
    store: &Store,
    manifest: &Value,
    files: &HashMap<PathBuf, Digest>,
    added: &mut Vec<Digest>,
) -> Result<Vec<Top>> {
    let mut out = vec![];
    let file = |f: &str| -> Result<(Digest, u64)> {
        let rel = clean(Path::new(f))?;
        let d = files.get(&rel).ok_or_else(|| {
            Error::Missing(format!("manifest.json names {f}, which the archive lacks"))
        })?;
        let size = std::fs::metadata(store.blob_path(d))
            .map_err(|e| Error::io(f, e))?
            .len();
        Ok((d.clone(), size))
    };
    let bad = |m: &str| Error::Content(m.to_string());
    for entry in manifest
        .as_array()
        .ok_or_else(|| bad("manifest.json is not a list"))?
    {
        let (config, config_size) = file(
            entry["Config"]
                .as_str()
                .ok_or_else(|| bad("manifest.json: an entry without Config"))?,
        )?;
        let mut layers = vec![];
        for l in entry["Layers"].as_array().into_iter().flatten() {
            let (d, size) = file(
                l.as_str()
                    .ok_or_else(|| bad("manifest.json: a layer that is not a path"))?,
            )?;
            let mut head = [0u8; 4];
            let n = File::open(store.blob_path(&d))
                .and_then(|mut f| f.read(&mut head))
                .map_err(Error::Os)?;
            let kind = media::oci_layer(media::sniff_compression(&head[..n]));
            layers.push(json!({"mediaType": kind, "digest": d.to_string(), "size": size}));
        }
        let m = json!({
            "schemaVersion": 2,
            "mediaType": media::OCI_MANIFEST,
            "config": {"mediaType": media::OCI_CONFIG, "digest": config.to_string(), "size": config_size},
            "layers": layers,
        });
        let bytes = serde_json::to_vec(&m).expect("JSON values serialise");
        let d = Digest::of(&bytes);
        put_new(store, &d, added, || {
            store.put_blob(&d, Some(bytes.len() as u64), &mut &bytes[..])
        })?;
        let names = entry["RepoTags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect();
        out.push((d, names));
    }
    if out.is_empty() {
        return Err(bad("manifest.json lists no images"));
    }
    Ok(out)
}

/// The references to commit: `--name` for the one image, else the archive's names,
/// normalised; a name that is only a tag (an OCI layout's `ref.name` often is) needs
/// `--name` to say whose.
fn name_them(tops: Vec<Top>, name: Option<&Reference>) -> Result<Vec<(Reference, Digest)>> {
    if let Some(n) = name {
        if tops.len() != 1 {
            return Err(Error::Content(format!(
                "it holds {} images; --name names only one",
                tops.len()
            )));
        }
        let top = tops.into_iter().next().expect("one").0;
        return Ok(vec![(n.clone(), top)]);
    }
    let mut out = vec![];
    for (top, names) in tops {
        for n in names {
            if !n.contains(['/', ':', '@']) {
                return Err(Error::Content(format!(
                    "the image {top} is named only by the tag {n:?}: give --name"
                )));
            }
            let r = Reference::parse(&n).map_err(|e| e.within(format_args!("image {top}")))?;
            out.push((r, top.clone()));
        }
    }
    if out.is_empty() {
        return Err(Error::Content(
            "no image in it has a name: give --name".into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_annotations_or_name() {
        let d = |b: &[u8]| Digest::of(b);
        let index = json!({"manifests": [
            {"mediaType": media::OCI_MANIFEST, "digest": d(b"a").to_string(), "size": 1,
             "annotations": {REF_ANNOTATION: "feas/busybox:1"}},
            {"mediaType": media::OCI_INDEX, "digest": d(b"b").to_string(), "size": 1,
             "annotations": {NAME_ANNOTATION: "docker.io/library/busybox:latest", REF_ANNOTATION: "latest"}},
        ]});
        let tops = oci_tops(&index).unwrap();
        let named = name_them(tops.clone(), None).unwrap();
        let shown: Vec<String> = named.iter().map(|(r, _)| r.to_string()).collect();
        assert_eq!(
            shown,
            [
                "docker.io/feas/busybox:1",
                "docker.io/library/busybox:latest"
            ]
        );
        assert!(name_them(tops, Some(&Reference::parse("x").unwrap()))
            .unwrap_err()
            .to_string()
            .contains("holds 2 images"));
        let tag_only = vec![(d(b"a"), vec!["1.0".to_string()])];
        assert!(name_them(tag_only.clone(), None)
            .unwrap_err()
            .to_string()
            .contains("give --name"));
        let n = name_them(tag_only, Some(&Reference::parse("team/app:2").unwrap())).unwrap();
        assert_eq!(n[0].0.to_string(), "docker.io/team/app:2");
        assert!(name_them(vec![(d(b"a"), vec![])], None)
            .unwrap_err()
            .to_string()
            .contains("no image in it has a name"));
        let bad = json!({"manifests": [{"mediaType": "text/plain", "digest": d(b"a").to_string(), "size": 1}]});
        assert!(oci_tops(&bad)
            .unwrap_err()
            .to_string()
            .contains("unknown manifest media type"));
        assert_eq!(
            normalise(Path::new("a/../b/c")).unwrap(),
            PathBuf::from("b/c")
        );
        assert!(normalise(Path::new("../x")).is_err());
    }
}
