//! The content-addressed image store under `--images` (docs/images.md): blobs as in an OCI
//! image layout, each layer unpacked once and shared read-only, names pointing at
//! top-level digests. File locks make concurrent users safe; everything enters by rename,
//! so a crash leaves nothing half-used.

use super::digest::{Digest, Verifier};
use super::error::{Error, Result};
use super::lock::{self, Lock};
use super::names::{self, Named};
use super::reference::Reference;
use super::resolve::{self, Layer, Resolved};
use super::unpack;
use oci_spec::image::ImageConfiguration;
use sha2::Digest as _;
use std::collections::HashSet;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Default for `--images`.
pub const DEFAULT_ROOT: &str = "/var/lib/podinit/images";

/// The store used when none is given: [`DEFAULT_ROOT`] as root, the user's own without
/// (docs/interface.md §Without root).
pub fn default_root() -> std::path::PathBuf {
    if crate::sys::rootless::rootless() {
        crate::sys::rootless::images_dir()
    } else {
        std::path::PathBuf::from(DEFAULT_ROOT)
    }
}

pub struct Store {
    root: PathBuf,
    /// How large a layer may unpack to, from the environment.
    limits: unpack::Limits,
}

/// An image ready to run: its config and its unpacked layers.
#[derive(Clone, Debug)]
pub struct Image {
    /// The normalised name it was asked for (`docker.io/library/nginx:1.27`).
    pub name: String,
    /// The digest of the top-level manifest or index the name points at (kubelet's
    /// `imageID` is `repository@<this>`).
    pub digest: Digest,
    /// The image config's digest (containerd's image id).
    pub config_digest: Digest,
    pub config: ImageConfiguration,
    /// Unpacked layer directories, lowest (first applied) first: overlay lowerdirs in
    /// reverse.
    pub layers: Vec<PathBuf>,
}

/// One row of `podinit images ls`.
#[derive(Clone, Debug)]
pub struct Listed {
    pub name: String,
    pub digest: Digest,
    /// Sum of the compressed layer and config sizes.
    pub size: u64,
}

/// Shared locks on an image's name and layers while a container uses them: `remove`
/// refuses the name (unless forced) and never deletes a held layer. Dropping it lets go.
pub struct Held {
    _locks: Vec<Lock>,
}

impl Store {
    /// Opens (creating if needed) the store at `root`.
    pub fn open(root: &Path) -> Result<Store> {
        let s = Store {
            root: root.to_path_buf(),
            limits: unpack::Limits::from_env()?,
        };
        let mk = |p: &Path, mode: u32| {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(p)
                .map_err(|e| Error::io(format_args!("image store: creating {}", p.display()), e))
        };
        mk(root, 0o711)?;
        mk(&root.join("blobs/sha256"), 0o755)?;
        // Unpacked layers keep their set-id binaries: only root may reach them.
        mk(&root.join("layers"), 0o700)?;
        mk(&s.tmp(), 0o700)?;
        mk(&root.join("in-use"), 0o700)?;
        let layout = root.join("oci-layout");
        if !layout.exists() {
            fs::write(&layout, br#"{"imageLayoutVersion":"1.0.0"}"#).map_err(|e| {
                Error::io(format_args!("image store: writing {}", layout.display()), e)
            })?;
        }
        // Leftovers of a writer that died; a live writer holds the lock shared.
        if let Some(_only) = lock::try_exclusive(&s.lock_path())? {
            let store = |e| Error::io("image store", e);
            for e in fs::read_dir(s.tmp()).map_err(store)? {
                let p = e.map_err(store)?.path();
                remove_any(&p)?;
            }
        }
        Ok(s)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The lock a container holds shared on the name it runs an image by.
    fn in_use_path(&self, name: &str) -> PathBuf {
        self.root
            .join("in-use")
            .join(Digest::of(name.as_bytes()).hex)
    }

    fn lock_path(&self) -> PathBuf {
        self.root.join("lock")
    }

    fn index_path(&self) -> PathBuf {
        self.root.join("index.json")
    }

    pub fn blob_path(&self, d: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(&d.hex)
    }

    /// The directory a layer is unpacked in, by its diffID.
    pub fn layer_path(&self, diff_id: &Digest) -> PathBuf {
        self.root.join("layers").join(&diff_id.hex)
    }

    /// Held while writing content that no name points at yet (blobs of an import or a
    /// pull): `remove` and the clean-up of `tmp/` wait for it.
    pub fn writing(&self) -> Result<Lock> {
        lock::take(&self.lock_path(), false)
    }

    /// A new directory under `tmp/` for a writer's work in progress (a pull's staging),
    /// with the writing lock that keeps it from [`Store::open`]'s clean-up while held.
    pub fn scratch(&self, what: &str) -> Result<(Lock, PathBuf)> {
        let held = self.writing()?;
        let dir = self.tmp().join(names::unique(what));
        fs::create_dir(&dir)
            .map_err(|e| Error::io(format_args!("image store: creating {}", dir.display()), e))?;
        Ok((held, dir))
    }

    pub fn has_blob(&self, d: &Digest) -> bool {
        self.blob_path(d).is_file()
    }

    /// Streams a blob in, verifying its digest (and size when known); it appears under
    /// `blobs/sha256/` only once verified.
    pub fn put_blob(&self, expected: &Digest, size: Option<u64>, r: &mut dyn Read) -> Result<()> {
        if self.has_blob(expected) {
            return Ok(());
        }
        let _w = self.writing()?;
        let mut v = Verifier::new(r, expected, size);
        self.put(&mut v, |_| Ok(expected.clone()))
            .map(drop)
            .map_err(|e| e.within(format_args!("blob {expected}")))
    }

    /// Streams in a blob whose digest is not known beforehand (a docker-save archive's
    /// files); returns its digest and size.
    pub fn put_blob_unnamed(&self, r: &mut dyn Read) -> Result<(Digest, u64)> {
        let _w = self.writing()?;
        let mut h = Hashing {
            inner: r,
            hasher: sha2::Sha256::new(),
            n: 0,
        };
        let mut n = 0;
        let d = self.put(&mut h, |h| {
            n = h.n;
            let hex: String = std::mem::take(&mut h.hasher)
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            Digest::parse(&format!("sha256:{hex}"))
        })?;
        Ok((d, n))
    }

    /// Copies `r` to a temporary file, then renames it to the blob `name` gives.
    fn put<R: Read>(
        &self,
        r: &mut R,
        name: impl FnOnce(&mut R) -> Result<Digest>,
    ) -> Result<Digest> {
        let (tmp, mut f) = names::tempfile_in(&self.tmp(), "blob")
            .map_err(|e| Error::io("creating a temporary file", e))?;
        let written = io::copy(r, &mut f)
            .and_then(|_| f.flush())
            .and_then(|()| f.sync_all())
            .map_err(Error::Os)
            .and_then(|()| name(r));
        let d = match written {
            Ok(d) => d,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        fs::rename(&tmp, self.blob_path(&d)).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            Error::io(format_args!("storing blob {d}"), e)
        })?;
        Ok(d)
    }

    pub fn read_blob(&self, d: &Digest) -> Result<Vec<u8>> {
        fs::read(self.blob_path(d)).map_err(|e| Error::io(format_args!("blob {d}"), e))
    }

    fn read_if_present(&self, d: &Digest) -> Result<Option<Vec<u8>>> {
        match fs::read(self.blob_path(d)) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format_args!("blob {d}"), e)),
        }
    }

    /// The image `top` is, for this machine.
    pub fn resolve(&self, top: &Digest) -> Result<Resolved> {
        resolve::resolve(top, &|d| self.read_if_present(d))
    }

    /// Names `name` as the image whose top-level manifest or index is `top` (its blobs
    /// already in the store), unpacking this platform's layers first.
    pub fn commit(&self, name: &Reference, top: &Digest) -> Result<Image> {
        let full = name.to_string();
        // Held until the name is written, so that a `remove` cannot take the layers that
        // this image shares with the one it removes in between.
        let _w = self.writing()?;
        let image = self.ready(&full, top).map_err(|e| e.within(&full))?;
        let _names = lock::take(&self.root.join("names.lock"), true)?;
        let mut all = names::load(&self.index_path())?;
        let bytes = self.read_blob(top)?;
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let media_type = match json["mediaType"].as_str() {
            Some(m) => m.to_string(),
            None => match super::media::sniff_doc(&json) {
                Ok(super::media::Doc::Index) => super::media::OCI_INDEX.into(),
                _ => super::media::OCI_MANIFEST.into(),
            },
        };
        all.retain(|n| n.name != full);
        all.push(Named {
            name: full,
            digest: top.clone(),
            media_type,
            size: bytes.len() as u64,
        });
        names::save(&self.index_path(), &self.tmp(), &all)?;
        Ok(image)
    }

    /// Unpacks what of the image `top` is not unpacked yet, without naming it.
    pub fn prepare(&self, top: &Digest) -> Result<()> {
        self.ready("", top).map(drop)
    }

    /// Resolves `top` and unpacks what of it is not unpacked yet.
    fn ready(&self, name: &str, top: &Digest) -> Result<Image> {
        let r = self.resolve(top)?;
        let _w = self.writing()?;
        let mut layers = vec![];
        for l in &r.layers {
            layers.push(self.unpacked(l)?);
        }
        Ok(Image {
            name: name.to_string(),
            digest: top.clone(),
            config_digest: r.config_digest,
            config: r.config,
            layers,
        })
    }

    /// The layer's directory, unpacked into `tmp/` and renamed into place if it was not
    /// there yet. Two writers may both unpack it; the first rename wins.
    fn unpacked(&self, l: &Layer) -> Result<PathBuf> {
        let dest = self.layer_path(&l.diff_id);
        if dest.is_dir() {
            return Ok(dest);
        }
        let blob = self.blob_path(&l.blob);
        if !blob.is_file() {
            return Err(Error::Missing(format!(
                "layer {} is not in the store",
                l.blob
            )));
        }
        let tmp = self.tmp().join(names::unique("layer"));
        fs::create_dir(&tmp)
            .map_err(|e| Error::io(format_args!("creating {}", tmp.display()), e))?;
        if let Err(e) = unpack::unpack(&blob, l.compression, &l.diff_id, &tmp, &self.limits) {
            let _ = remove_any(&tmp);
            return Err(e.within(format_args!("layer {}", l.blob)));
        }
        if let Err(e) = fs::rename(&tmp, &dest) {
            let _ = remove_any(&tmp);
            if !dest.is_dir() {
                return Err(Error::io("storing it", e).within(format_args!("layer {}", l.blob)));
            }
        }
        Ok(dest)
    }

    /// The names a name or digest means: the normalised name, `repo@digest` for a stored
    /// `repo` with that top digest, or a bare digest of a top-level manifest or config.
    fn matching(&self, all: &[Named], what: &str) -> Result<Vec<Named>> {
        if what.starts_with("sha256:") {
            let d = Digest::parse(what)?;
            let mut out = vec![];
            for n in all {
                let by_config = || self.resolve(&n.digest).is_ok_and(|r| r.config_digest == d);
                if n.digest == d || by_config() {
                    out.push(n.clone());
                }
            }
            return Ok(out);
        }
        let r = Reference::parse(what)?;
        let full = r.to_string();
        let exact: Vec<Named> = all.iter().filter(|n| n.name == full).cloned().collect();
        if !exact.is_empty() || r.digest.is_none() {
            return Ok(exact);
        }
        let repo = r.repository();
        let d = r.digest.expect("checked above");
        Ok(all
            .iter()
            .filter(|n| n.digest == d && n.name.starts_with(&repo))
            .filter(|n| Reference::parse(&n.name).is_ok_and(|x| x.repository() == repo))
            .cloned()
            .collect())
    }

    /// The image a name (normalised first) or a digest (`sha256:…`, of the top-level
    /// manifest or the config) names, if the store has it.
    pub fn get(&self, name: &str) -> Result<Option<Image>> {
        let all = names::load(&self.index_path())?;
        let Some(n) = self.matching(&all, name)?.into_iter().next() else {
            return Ok(None);
        };
        // Asked for as `repo@digest`, it is that name that kubelet reports.
        let shown = match Reference::parse(name) {
            Ok(r) if r.digest.is_some() => r.to_string(),
            _ => n.name.clone(),
        };
        self.ready(&shown, &n.digest)
            .map(Some)
            .map_err(|e| e.within(&n.name))
    }

    pub fn list(&self) -> Result<Vec<Listed>> {
        let mut out = vec![];
        for n in names::load(&self.index_path())? {
            // An image whose content cannot be read still shows, so that it can be removed.
            let size = self.resolve(&n.digest).map_or(0, |r| {
                r.config_size + r.layers.iter().map(|l| l.size).sum::<u64>()
            });
            out.push(Listed {
                name: n.name,
                digest: n.digest,
                size,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Keeps `image`'s layers from being removed while the returned value lives.
    pub fn hold(&self, image: &Image) -> Result<Held> {
        let mut locks = vec![lock::take(&self.in_use_path(&image.name), false)?];
        for l in &image.layers {
            locks.extend(lock::dir(l, false)?);
        }
        Ok(Held { _locks: locks })
    }

    /// Removes the name; blobs and layers no other name uses go too. A name a running
    /// container uses is refused, as containerd and podman refuse it, unless `force`:
    /// then the name goes and the layers in use stay until no container holds them.
    pub fn remove(&self, name: &str, force: bool) -> Result<()> {
        let _only = lock::take(&self.lock_path(), true)?;
        let _names = lock::take(&self.root.join("names.lock"), true)?;
        let all = names::load(&self.index_path())?;
        let gone = self.matching(&all, name)?;
        if gone.is_empty() {
            return Err(Error::NoImage {
                name: name.to_string(),
                store: self.root.clone(),
            });
        }
        let keep: Vec<Named> = all
            .into_iter()
            .filter(|n| {
                !gone
                    .iter()
                    .any(|g| g.name == n.name && g.digest == n.digest)
            })
            .collect();
        // A name in use by a running container: refuse before anything changes.
        let mut locks = vec![];
        let mut free_names = vec![];
        for g in &gone {
            match lock::try_exclusive(&self.in_use_path(&g.name))? {
                Some(held) => {
                    locks.push(held);
                    free_names.push(self.in_use_path(&g.name));
                }
                None if force => {}
                None => {
                    return Err(Error::InUse(format!(
                        "image {} is in use by a running container: stop its pod first, or give --force",
                        g.name
                    )))
                }
            }
        }
        let (mut kept_blobs, kept_layers) = self.references(&keep);
        let (blobs, layers) = self.references(&gone);
        let mut doomed_layers = vec![];
        for l in layers.iter().filter(|l| !kept_layers.contains(l)) {
            let p = self.layer_path(l);
            if !p.is_dir() {
                continue;
            }
            match lock::dir(&p, true)? {
                Some(held) => {
                    locks.push(held);
                    doomed_layers.push(l);
                }
                // Held by a container of another name, or of this one with --force: it stays
                // (with the blobs it came from) until `drop_unused` finds it free.
                None if force => kept_blobs.extend(blobs.iter().cloned()),
                None => {
                    return Err(Error::InUse(format!(
                        "{name}: a running container uses the image's layer {l}"
                    )))
                }
            }
        }
        names::save(&self.index_path(), &self.tmp(), &keep)?;
        // An image no name points at any more loses its pull record: pulled again, it is
        // a new image to kubelet's pull manager.
        let records = super::pull_records::Records::of(&self.root);
        for g in gone
            .iter()
            .filter(|g| !keep.iter().any(|k| k.digest == g.digest))
        {
            // The names are gone already: a record left behind only makes a later pull
            // of the same image verify again, so it is said and not undone.
            if let Err(e) = records.forget(&g.digest.to_string()) {
                crate::log::warn(&format!("{}: its pull record: {e}", g.name));
            }
        }
        // A name gone, its lock file too; one a container still holds stays with it.
        for f in free_names {
            let _ = fs::remove_file(f);
        }
        for l in doomed_layers {
            // Out of sight by rename first, so that no reader sees half a layer.
            let p = self.layer_path(l);
            if p.is_dir() {
                let doomed = self.tmp().join(names::unique("rm"));
                fs::rename(&p, &doomed)
                    .map_err(|e| Error::io(format_args!("removing layer {l}"), e))?;
                remove_any(&doomed)?;
            }
        }
        for b in blobs.difference(&kept_blobs) {
            match fs::remove_file(self.blob_path(b)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(Error::io(format_args!("removing blob {b}"), e))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The blobs the image `top` is made of, as far as they resolve: what a pull that
    /// failed after fetching them hands to [`Store::drop_unused`].
    pub fn blobs_of(&self, top: &Digest) -> Vec<Digest> {
        let mut out = vec![top.clone()];
        if let Ok(r) = self.resolve(top) {
            out.extend(r.blobs);
            out.extend(r.others);
        }
        out
    }

    /// Blobs and layers (by diffID) that `names` use.
    fn references(&self, names: &[Named]) -> (HashSet<Digest>, HashSet<Digest>) {
        let mut blobs = HashSet::new();
        let mut layers = HashSet::new();
        for n in names {
            blobs.insert(n.digest.clone());
            if let Ok(r) = self.resolve(&n.digest) {
                blobs.extend(r.blobs);
                blobs.extend(r.others);
                layers.extend(r.layers.into_iter().map(|l| l.diff_id));
            }
        }
        (blobs, layers)
    }

    /// Removes the blobs of `added` that no name uses: what an import or a pull brought
    /// that ended up unused (another platform's layers) or that a failure left behind;
    /// and unpacked layers no name uses (of an image that failed after they were unpacked).
    /// The caller must not hold [`Store::writing`].
    pub fn drop_unused(&self, added: &[Digest]) -> Result<()> {
        let _only = lock::take(&self.lock_path(), true)?;
        let all = names::load(&self.index_path())?;
        let (used, used_layers) = self.references(&all);
        let dir = self.root.join("layers");
        let listing = |e| Error::io(format_args!("image store: {}", dir.display()), e);
        for e in fs::read_dir(&dir).map_err(listing)? {
            let e = e.map_err(listing)?;
            let name = e.file_name().to_string_lossy().into_owned();
            let unused =
                Digest::parse(&format!("sha256:{name}")).is_ok_and(|d| !used_layers.contains(&d));
            // A layer a container holds stays, named or not.
            if unused && lock::dir(&e.path(), true)?.is_some() {
                let doomed = self.tmp().join(names::unique("rm"));
                fs::rename(e.path(), &doomed)
                    .map_err(|e| Error::io(format_args!("removing layer {name}"), e))?;
                remove_any(&doomed)?;
            }
        }
        for d in added.iter().filter(|d| !used.contains(d)) {
            match fs::remove_file(self.blob_path(d)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(Error::io(format_args!("removing blob {d}"), e))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Hashes what it reads, for blobs named by their content once read.
struct Hashing<'a> {
    inner: &'a mut dyn Read,
    hasher: sha2::Sha256,
    n: u64,
}

impl Read for Hashing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.n += n as u64;
        Ok(n)
    }
}

fn remove_any(p: &Path) -> Result<()> {
    let r = match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(_) => Ok(()),
    };
    r.map_err(|e| Error::io(format_args!("image store: removing {}", p.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_store(what: &str) -> (PathBuf, Store) {
        let root = std::env::temp_dir().join(names::unique(what));
        let s = Store::open(&root).unwrap();
        (root, s)
    }

    #[test]
    fn blobs_enter_only_verified() {
        let (root, s) = temp_store("store-blobs");
        let d = Digest::of(b"hello");
        let e = s.put_blob(&d, Some(5), &mut &b"hellO"[..]).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        let e = e.to_string();
        assert!(e.starts_with(&format!("blob {d}: digest mismatch")), "{e}");
        assert!(!s.has_blob(&d));
        let e = s
            .put_blob(&d, Some(4), &mut &b"hello"[..])
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the 4 bytes"), "{e}");
        s.put_blob(&d, Some(5), &mut &b"hello"[..]).unwrap();
        assert!(s.has_blob(&d));
        assert_eq!(s.read_blob(&d).unwrap(), b"hello");
        assert_eq!(
            s.put_blob_unnamed(&mut &b"world"[..]).unwrap(),
            (Digest::of(b"world"), 5)
        );
        assert_eq!(
            fs::read_dir(s.tmp()).unwrap().count(),
            0,
            "temporary files left"
        );
        assert_eq!(s.list().unwrap().len(), 0);
        assert!(s.get("nginx").unwrap().is_none());
        let e = s.remove("nginx", false).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::NotFound);
        assert!(e.to_string().starts_with("no image nginx in the store"));
        // What only the two blobs put here use goes; nothing names them.
        s.drop_unused(&[d.clone(), Digest::of(b"world")]).unwrap();
        assert!(!s.has_blob(&d));
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn open_removes_a_dead_writers_leftovers() {
        let (root, s) = temp_store("store-open");
        fs::create_dir_all(s.tmp().join("layer-1/usr")).unwrap();
        fs::write(s.tmp().join("blob-1"), b"half").unwrap();
        {
            // A live writer's files stay.
            let (_w, scratch) = s.scratch("pull").unwrap();
            assert!(scratch.starts_with(s.tmp()) && scratch.is_dir());
            Store::open(&root).unwrap();
            assert_eq!(fs::read_dir(s.tmp()).unwrap().count(), 3);
        }
        Store::open(&root).unwrap();
        assert_eq!(fs::read_dir(s.tmp()).unwrap().count(), 0);
        assert!(root.join("oci-layout").is_file());
        fs::remove_dir_all(root).unwrap();
    }
}
