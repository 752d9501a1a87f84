//! /dev on a tmpfs of the spec: the default device nodes of an OCI container, the spec's
//! own, and /dev's links.

use std::path::{Path, PathBuf};

use super::{Error, Kernel, R};
use crate::runtime::mounts;
use crate::runtime::prepare::{c_path, Device, Prepared};

pub(super) fn dev<K: Kernel>(k: &K, p: &Prepared) -> R {
    let dev = p.root.join("dev");
    let defaults: [(&str, u64, u64); 6] = [
        ("null", 1, 3),
        ("zero", 1, 5),
        ("full", 1, 7),
        ("random", 1, 8),
        ("urandom", 1, 9),
        ("tty", 5, 0),
    ];
    // Restored below.
    let old = k.umask(0);
    let mut res = Ok(());
    // New nodes are owned by our euid and egid, unless a setgid /dev gives them its group,
    // which only a tmpfs `gid=` option can make other than root's: then each is chowned.
    let gid_option = p.mounts.iter().any(|m| {
        m.destination == Path::new("/dev") && m.data.split(',').any(|o| o.starts_with("gid="))
    });
    // In a user namespace no device node may be made: the host's are bind-mounted, as
    // runc does.
    let bind = p.in_user_ns();
    let root_owned = !gid_option && k.is_root() && !bind;
    for (name, major, minor) in defaults {
        // /dev is the tmpfs just mounted: one mknod each, owned by us (root) already.
        // Anything in the way (a spec's bind mount) takes the careful way.
        let path = dev.join(name);
        let c = c_path(&path)?;
        let quick = root_owned && k.mknod(&c, libc::S_IFCHR | 0o666, major, minor).is_ok();
        if !quick {
            let node = Device {
                path: PathBuf::from("/dev").join(name),
                kind: libc::S_IFCHR,
                major,
                minor,
                mode: 0o666,
                uid: 0,
                gid: 0,
            };
            res = res.and(mknod(k, &path, &node, bind));
        }
    }
    for d in &p.devices {
        let target = mounts::secure_join(&p.root, &d.path, &|p: &Path| {
            super::mounts::symlink_of(k, p)
        })?;
        res = res.and(mknod(k, &target, d, bind));
    }
    k.umask(old);
    res?;
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
    ] {
        symlink_unless_present(k, target, &dev.join(link))
            .map_err(|e| Error::os(format!("creating /dev/{link}"), e))?;
    }
    // Dangling without a devpts at /dev/pts, as runc's is.
    symlink_unless_present(k, "pts/ptmx", &dev.join("ptmx"))
        .map_err(|e| Error::os("creating /dev/ptmx", e))?;
    Ok(())
}

/// A link where nothing is (whatever is there already, a spec's device or mount, stays).
fn symlink_unless_present<K: Kernel>(k: &K, target: &str, link: &Path) -> std::io::Result<()> {
    match k.symlink(target, link) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

/// The node `d` at `path` (not `d.path`: that is inside the container), replacing
/// whatever is there, with its owner; with `bind`, the host's node at `d.path` mounted
/// there instead.
fn mknod<K: Kernel>(k: &K, path: &Path, d: &Device, bind: bool) -> R {
    if let Some(parent) = path.parent() {
        k.create_dir_all(parent)
            .map_err(|e| Error::os(format!("creating {}", parent.display()), e))?;
    }
    let _ = k.remove_file(path);
    if bind {
        // A node bound there already (a default device the spec lists too) stays, and the
        // host's is bound over it: opening it to create it could fail (/dev/tty, ENXIO).
        if k.lstat(path).is_none() {
            k.create_file(path)
                .map_err(|e| Error::os(format!("creating {}", path.display()), e))?;
        }
        return k
            .mount(Some(&d.path), path, None, libc::MS_BIND, "")
            .map_err(|e| {
                Error::os(
                    format!("bind-mounting {} (in a user namespace)", d.path.display()),
                    e,
                )
            });
    }
    let c = c_path(path)?;
    k.mknod(&c, d.kind | d.mode, d.major, d.minor)
        .map_err(|e| Error::os(format!("mknod {}", path.display()), e))?;
    k.chown(&c, d.uid, d.gid)
        .map_err(|e| Error::os(format!("chown {}", path.display()), e))?;
    Ok(())
}
