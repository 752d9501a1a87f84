//! Writes a layer's tar entries under a directory as containerd's overlay snapshotter has
//! them: whiteouts become overlayfs's (a 0:0 character device for `.wh.NAME`,
//! `trusted.overlay.opaque=y` for `.wh..wh..opq`, `user.overlay.opaque` without root),
//! owners, modes, times, xattrs, hard links, symlinks and device nodes are kept, and no
//! entry reaches outside the directory.

use nix::sys::stat::{mknod, utimensat, Mode, SFlag, UtimensatFlags};
use nix::sys::time::TimeSpec;
use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{lchown, symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use tar::EntryType;

use crate::image::error::{Error, Result};

const WHITEOUT: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// The layer root and what is known of it while entries are written.
pub struct Applier {
    root: PathBuf,
    /// Paths (relative) known to be real directories made by this layer, so that a
    /// parent is checked once for being a symlink rather than at every entry.
    dirs: HashSet<PathBuf>,
    /// Directories whose times are set last: writing into one changes its mtime.
    dir_times: Vec<(PathBuf, i64)>,
    /// File contents go through this, in writes larger than `io::copy`'s.
    buf: Vec<u8>,
}

/// What one entry asks for, read from its header and PAX records.
struct Meta {
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: i64,
    xattrs: Vec<(String, Vec<u8>)>,
}

impl Applier {
    pub fn new(root: &Path) -> Applier {
        let mut dirs = HashSet::new();
        dirs.insert(PathBuf::new());
        Applier {
            root: root.to_path_buf(),
            dirs,
            dir_times: vec![],
            buf: vec![0; 256 * 1024],
        }
    }

    /// Applies every entry of `archive`; an error names the entry.
    pub fn apply<R: Read>(&mut self, archive: &mut tar::Archive<R>) -> Result<()> {
        let tar = |e: io::Error| Error::io("reading the tar", flat(e));
        for entry in archive.entries().map_err(tar)? {
            let mut entry = entry.map_err(tar)?;
            let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            self.entry(&mut entry)
                .map_err(|e| e.within(format_args!("entry {raw:?}")))?;
        }
        // Deepest first, so that setting a child's time does not touch its parent's after.
        self.dir_times
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
        for (rel, mtime) in std::mem::take(&mut self.dir_times) {
            set_mtime(&self.root.join(&rel), mtime).map_err(|e| {
                Error::sys("setting its time", e).within(format_args!("entry {:?}", rel.display()))
            })?;
        }
        Ok(())
    }

    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<R>) -> Result<()> {
        let rel = clean(&entry.path().map_err(os)?)?;
        let meta = meta(entry)?;
        let kind = entry.header().entry_type();
        let name = rel.file_name().map(|n| n.to_string_lossy().into_owned());
        let parent = rel.parent().map(Path::to_path_buf).unwrap_or_default();
        if let Some(name) = name.as_deref().filter(|n| n.starts_with(WHITEOUT)) {
            self.parent_dir(&parent)?;
            return self.whiteout(&parent, name, &meta);
        }
        if rel.as_os_str().is_empty() {
            // The layer root itself (`./`): only its attributes.
            if kind.is_dir() {
                self.attrs(&rel, &meta, false)?;
                self.dir_times.push((rel, meta.mtime));
            }
            return Ok(());
        }
        self.parent_dir(&parent)?;
        let path = self.root.join(&rel);
        match kind {
            EntryType::Directory => {
                match fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        self.remove(&rel)?;
                        fs::create_dir(&path).map_err(Error::Os)?;
                    }
                    Err(_) => fs::create_dir(&path).map_err(Error::Os)?,
                }
                self.dirs.insert(rel.clone());
                self.attrs(&rel, &meta, false)?;
                self.dir_times.push((rel, meta.mtime));
                return Ok(());
            }
            EntryType::GNUSparse => {
                return Err(Error::Unsupported(
                    "GNU sparse files are not supported".into(),
                ))
            }
            EntryType::Regular | EntryType::Continuous => {
                let create = || {
                    fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&path)
                };
                // Most paths are new: try first, clear the way only when one is not.
                let mut f = match create() {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        self.replace(&rel)?;
                        create()
                    }
                    r => r,
                }
                .map_err(Error::Os)?;
                let want = entry.size();
                let got = copy(entry, &mut f, &mut self.buf).map_err(os)?;
                if got != want {
                    return Err(Error::Content(format!(
                        "truncated: {got} of its {want} bytes"
                    )));
                }
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(os)?
                    .ok_or_else(|| Error::Content("a symlink without a target".into()))?;
                self.replace(&rel)?;
                symlink(&target, &path).map_err(Error::Os)?;
                return self.attrs(&rel, &meta, true);
            }
            EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(os)?
                    .ok_or_else(|| Error::Content("a hard link without a target".into()))?;
                let target_rel = clean(&target)
                    .map_err(|e| e.within(format_args!("hard link to {:?}", target.display())))?;
                let tparent = target_rel
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                self.parent_dir(&tparent)?;
                let tpath = self.root.join(&target_rel);
                match fs::symlink_metadata(&tpath) {
                    Ok(m) if !m.is_dir() => {}
                    Ok(_) => {
                        return Err(Error::Content(format!(
                            "hard link to a directory {:?}",
                            target.display()
                        )))
                    }
                    Err(_) => {
                        return Err(Error::Content(format!(
                            "hard link to {:?}, which the layer does not have",
                            target.display()
                        )))
                    }
                }
                if target_rel == rel {
                    return Ok(());
                }
                self.replace(&rel)?;
                // A hard link shares its target's inode: its attributes are the target's.
                return fs::hard_link(&tpath, &path).map_err(Error::Os);
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let h = entry.header();
                // A fifo has no device numbers; writers leave the fields blank.
                let (major, minor) = if kind == EntryType::Fifo {
                    (0, 0)
                } else {
                    (
                        h.device_major().map_err(os)?.unwrap_or(0),
                        h.device_minor().map_err(os)?.unwrap_or(0),
                    )
                };
                let flag = match kind {
                    EntryType::Char => SFlag::S_IFCHR,
                    EntryType::Block => SFlag::S_IFBLK,
                    _ => SFlag::S_IFIFO,
                };
                self.replace(&rel)?;
                let dev = nix::sys::stat::makedev(major.into(), minor.into());
                mknod(&path, flag, Mode::from_bits_truncate(0o600), dev)
                    .map_err(|e| Error::sys("mknod", e))?;
            }
            other => {
                return Err(Error::Unsupported(format!(
                    "unsupported tar entry type {:?}",
                    other.as_byte() as char
                )))
            }
        }
        self.attrs(&rel, &meta, false)?;
        set_mtime(&path, meta.mtime).map_err(|e| Error::sys("setting its time", e))
    }

    /// `.wh..wh..opq` marks `parent` opaque; `.wh.NAME` hides NAME of the lower layers.
    fn whiteout(&mut self, parent: &Path, name: &str, meta: &Meta) -> Result<()> {
        let dir = self.root.join(parent);
        if name == OPAQUE {
            let opaque = format!("{}opaque", crate::sys::rootless::overlay_xattrs());
            return setxattr(&dir, &opaque, b"y").map_err(|e| match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) if crate::sys::rootless::rootless() => {
                    Error::Unsupported(format!(
                        "marking opaque: the image store's filesystem keeps no {opaque} \
                         attribute, which an opaque directory needs without root (tmpfs before \
                         Linux 6.6): put the store ($XDG_DATA_HOME) on ext4, xfs or btrfs"
                    ))
                }
                _ => Error::io("marking opaque", e),
            });
        }
        if name.starts_with(".wh..wh.") {
            // aufs's own bookkeeping (`.wh..wh.plnk`…): nothing for overlayfs.
            return Ok(());
        }
        let hidden = &name[WHITEOUT.len()..];
        if hidden.is_empty() || hidden == "." || hidden == ".." || hidden.contains('/') {
            return Err(Error::Content(format!(
                "whiteout of {hidden:?} escapes its directory"
            )));
        }
        let rel = parent.join(hidden);
        self.replace(&rel)?;
        let path = self.root.join(&rel);
        mknod(&path, SFlag::S_IFCHR, Mode::empty(), 0)
            .map_err(|e| Error::sys("whiteout mknod", e))?;
        chown(&path, meta)
    }

    /// Makes sure `rel` is a real directory inside the root, making missing ones (0755, as
    /// containerd does) and refusing to go through a symlink or a file.
    fn parent_dir(&mut self, rel: &Path) -> Result<()> {
        if self.dirs.contains(rel) {
            return Ok(());
        }
        if let Some(up) = rel.parent() {
            self.parent_dir(up)?;
        }
        let path = self.root.join(rel);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::Content(format!(
                    "writes through the symlink {:?}, out of the layer",
                    rel.display()
                )))
            }
            Ok(_) => {
                return Err(Error::Content(format!(
                    "{:?} is not a directory",
                    rel.display()
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir(&path)
                    .map_err(|e| Error::io(format_args!("mkdir {:?}", rel.display()), e))?;
                fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).map_err(Error::Os)?;
            }
            Err(e) => return Err(Error::io(format_args!("{:?}", rel.display()), e)),
        }
        self.dirs.insert(rel.to_path_buf());
        Ok(())
    }

    /// Clears the way for a new non-directory at `rel`: whatever an earlier entry of this
    /// layer put there goes (a symlink is removed, never followed).
    fn replace(&mut self, rel: &Path) -> Result<()> {
        match fs::symlink_metadata(self.root.join(rel)) {
            Ok(_) => self.remove(rel),
            Err(_) => Ok(()),
        }
    }

    fn remove(&mut self, rel: &Path) -> Result<()> {
        let path = self.root.join(rel);
        let m = fs::symlink_metadata(&path).map_err(Error::Os)?;
        if m.is_dir() {
            fs::remove_dir_all(&path).map_err(|e| Error::io("replacing a directory", e))?;
            self.dirs.retain(|d| !d.starts_with(rel));
            self.dir_times.retain(|(d, _)| !d.starts_with(rel));
        } else {
            fs::remove_file(&path).map_err(|e| Error::io("replacing", e))?;
        }
        Ok(())
    }

    /// Owner, then mode (a chown clears set-id bits), then xattrs.
    fn attrs(&self, rel: &Path, meta: &Meta, is_symlink: bool) -> Result<()> {
        let path = self.root.join(rel);
        chown(&path, meta)?;
        if !is_symlink {
            fs::set_permissions(&path, fs::Permissions::from_mode(meta.mode & 0o7777))
                .map_err(|e| Error::io("chmod", e))?;
        }
        for (k, v) in &meta.xattrs {
            // overlayfs's own attributes come from whiteouts only: a layer that brought
            // them could redirect lookups into other layers.
            if k.starts_with("trusted.overlay.")
                || k.starts_with(crate::sys::rootless::overlay_xattrs())
            {
                continue;
            }
            match setxattr(&path, k, v) {
                // As containerd: a filesystem without xattrs of that kind is not an error.
                Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => {}
                r => r.map_err(|e| Error::io(format_args!("xattr {k}"), e))?,
            }
        }
        if is_symlink {
            set_mtime(&path, meta.mtime).map_err(|e| Error::sys("setting its time", e))?;
        }
        Ok(())
    }
}

/// The entry's path relative to the layer root; `..` anywhere or an absolute path is an
/// escape, refused rather than clamped so that a hostile layer is seen for what it is.
pub fn clean(p: &Path) -> Result<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(Error::Content(format!(
                    "path {:?} leaves the layer (`..`)",
                    p.display()
                )))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(Error::Content(format!("absolute path {:?}", p.display())))
            }
        }
    }
    Ok(out)
}

/// The entry's owner given to `path` (not followed). Without root an owner outside the
/// ids the user's namespace maps cannot be given (EINVAL): the entry is refused, naming the
/// id and the ranges that would hold it, as rootless podman refuses it, since an image
/// whose files changed owner would run differently than it does for root.
fn chown(path: &Path, meta: &Meta) -> Result<()> {
    let (uid, gid) = (meta.uid as u32, meta.gid as u32);
    lchown(path, Some(uid), Some(gid)).map_err(|e| {
        match (e.raw_os_error() == Some(libc::EINVAL))
            .then(|| crate::sys::rootless::unmapped(uid, gid))
            .flatten()
        {
            Some(why) => Error::Unsupported(why),
            None => Error::io(format!("chown {uid}:{gid}"), e),
        }
    })
}

fn meta<R: Read>(entry: &mut tar::Entry<R>) -> Result<Meta> {
    let h = entry.header();
    let mut m = Meta {
        mode: h.mode().map_err(os)?,
        uid: h.uid().map_err(os)?,
        gid: h.gid().map_err(os)?,
        mtime: h.mtime().map_err(os)? as i64,
        xattrs: vec![],
    };
    if let Some(pax) = entry.pax_extensions().map_err(os)? {
        for ext in pax {
            let ext = ext.map_err(os)?;
            let key = ext.key().map_err(|e| Error::Content(e.to_string()))?;
            let num = || {
                ext.value()
                    .ok()
                    .and_then(|v| v.split('.').next()?.parse::<i64>().ok())
            };
            match key {
                "uid" => m.uid = num().ok_or_else(|| bad_pax("uid"))? as u64,
                "gid" => m.gid = num().ok_or_else(|| bad_pax("gid"))? as u64,
                "mtime" => m.mtime = num().ok_or_else(|| bad_pax("mtime"))?,
                k if k.starts_with("SCHILY.xattr.") => m.xattrs.push((
                    k["SCHILY.xattr.".len()..].to_string(),
                    ext.value_bytes().to_vec(),
                )),
                _ => {}
            }
        }
    }
    Ok(m)
}

fn bad_pax(what: &str) -> Error {
    Error::Content(format!("bad PAX {what}"))
}

/// An I/O error of the archive's own, on one line: the tar and decompression crates'
/// messages may span several.
fn flat(e: io::Error) -> io::Error {
    let m = e.to_string();
    if m.contains('\n') {
        io::Error::new(e.kind(), m.replace('\n', " "))
    } else {
        e
    }
}

fn os(e: io::Error) -> Error {
    Error::Os(flat(e))
}

/// `io::copy` with the caller's buffer; returns the bytes copied.
fn copy(r: &mut impl Read, w: &mut impl io::Write, buf: &mut [u8]) -> io::Result<u64> {
    let mut n = 0;
    loop {
        let k = match r.read(buf) {
            Ok(0) => return Ok(n),
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        w.write_all(&buf[..k])?;
        n += k as u64;
    }
}

fn set_mtime(path: &Path, mtime: i64) -> nix::Result<()> {
    let t = TimeSpec::new(mtime, 0);
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &t,
        &t,
        UtimensatFlags::NoFollowSymlink,
    )
}

fn setxattr(path: &Path, key: &str, value: &[u8]) -> io::Result<()> {
    crate::sys::fs::lsetxattr(path, key, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whiteouts_that_leave_their_directory_are_refused() {
        let root = std::env::temp_dir().join(format!("podinit-wh-{}", std::process::id()));
        let mut a = Applier::new(&root);
        let meta = Meta {
            mode: 0,
            uid: 0,
            gid: 0,
            mtime: 0,
            xattrs: vec![],
        };
        for name in [".wh.", ".wh..", ".wh..."] {
            let e = a.whiteout(Path::new("etc"), name, &meta).unwrap_err();
            assert!(
                e.to_string().contains("escapes its directory"),
                "{name}: {e}"
            );
        }
        assert!(!root.exists(), "nothing was made");
    }

    #[test]
    fn clean_refuses_escapes() {
        assert_eq!(clean(Path::new("./a/./b/")).unwrap(), PathBuf::from("a/b"));
        assert_eq!(clean(Path::new("./")).unwrap(), PathBuf::new());
        assert!(clean(Path::new("a/../../etc"))
            .unwrap_err()
            .to_string()
            .contains("leaves the layer"));
        assert!(clean(Path::new("a/../b")).is_err());
        assert!(clean(Path::new("/etc/passwd"))
            .unwrap_err()
            .to_string()
            .contains("absolute path"));
    }
}
