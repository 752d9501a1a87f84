//! A container's root filesystem: the bundle's rootfs, or an image's unpacked layers, as
//! the read-only lower layers of an overlay with a fresh writable layer per run, as a CRI
//! runtime gives every new container (a restart starts from the image again, and two
//! containers of one image never see each other's writes; the layers themselves are
//! shared by every container of every pod that uses them). Mounted in the supervisor's
//! mount namespace, so a killed supervisor takes the mounts with it.

use std::fs;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use crate::sys::mount::{detach, mount};

/// Mount `<dir>/rootfs` = overlay(lowers: `lowers`, uppermost first; upper:
/// `<dir>/upper`), returning it. With `idmap` (a pod's user namespace and the first host
/// id it maps), each lower layer is an idmapped mount of it (`<dir>/lower/<i>`) and the
/// upper layer's root is the namespace's root's: the container's root owns what host
/// root owns in the image, and what it writes lands in the upper layer as the mapped ids.
pub fn prepare(
    lowers: &[PathBuf],
    dir: &Path,
    idmap: Option<(BorrowedFd, u32)>,
) -> io::Result<PathBuf> {
    release(dir);
    let (upper, work, merged) = (dir.join("upper"), dir.join("work"), dir.join("rootfs"));
    let mapped: Vec<PathBuf>;
    let lowers = match idmap {
        Some((userns, _)) => {
            mapped = (0..lowers.len())
                .map(|i| dir.join("lower").join(i.to_string()))
                .collect();
            for (l, m) in lowers.iter().zip(&mapped) {
                crate::sys::idmap::bind(l, m, userns).map_err(|e| {
                    ctx(
                        e,
                        format!("idmapped mount of layer {} at {}", l.display(), m.display()),
                    )
                })?;
            }
            &mapped[..]
        }
        None => lowers,
    };
    let data = options(lowers, &upper, &work, crate::sys::rootless::rootless())?;
    for d in [&upper, &work, &merged] {
        fs::create_dir_all(d).map_err(|e| ctx(e, format!("creating {}", d.display())))?;
    }
    if let Some((_, base)) = idmap {
        std::os::unix::fs::chown(&upper, Some(base), Some(base))
            .map_err(|e| ctx(e, format!("chown {}", upper.display())))?;
    }
    mount(
        Some(Path::new("overlay")),
        &merged,
        Some("overlay"),
        0,
        &data,
    )
    .map_err(|e| {
        io::Error::other(format!(
            "mounting overlay rootfs at {} over {}: {e}",
            merged.display(),
            lowers
                .iter()
                .map(|l| l.display().to_string())
                .collect::<Vec<_>>()
                .join(":")
        ))
    })?;
    Ok(merged)
}

/// The overlay's mount data. A lower layer's `:` (a store naming layers by digest) is
/// escaped as overlayfs reads it; a `,` is refused anywhere, and the whole must fit the
/// page the kernel copies mount data into. `userxattr` (without root): overlayfs's own
/// attributes are `user.overlay.*`, as the layers were unpacked (`sys::rootless`).
fn options(lowers: &[PathBuf], upper: &Path, work: &Path, userxattr: bool) -> io::Result<String> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    if lowers.is_empty() {
        return Err(invalid("overlay rootfs: no lower layer".into()));
    }
    for p in lowers.iter().map(PathBuf::as_path).chain([upper, work]) {
        let s = p.to_string_lossy();
        if s.contains(',') || (s.contains(':') && (p == upper || p == work)) {
            return Err(invalid(format!(
                "overlay rootfs: path {s:?} contains ',' or ':'"
            )));
        }
    }
    let lower = lowers
        .iter()
        .map(|l| {
            l.display()
                .to_string()
                .replace('\\', "\\\\")
                .replace(':', "\\:")
        })
        .collect::<Vec<_>>()
        .join(":");
    let data = format!(
        "lowerdir={lower},upperdir={},workdir={}{}",
        upper.display(),
        work.display(),
        if userxattr { ",userxattr" } else { "" }
    );
    if data.len() >= MAX_DATA {
        return Err(invalid(format!(
            "overlay rootfs: {} layers make mount options of {} bytes, more than the kernel takes ({MAX_DATA})",
            lowers.len(),
            data.len()
        )));
    }
    Ok(data)
}

/// mount(2) copies at most a page of options.
const MAX_DATA: usize = 4096;

/// Unmount and remove a run's root filesystem and writable layer (no error if absent).
pub fn release(dir: &Path) {
    let merged = dir.join("rootfs");
    while detach(&merged).is_ok() {}
    for d in ["rootfs", "upper", "work"] {
        let _ = fs::remove_dir_all(dir.join(d));
    }
    // Idmapped views of the image's layers: unmounted, then their empty mount points
    // removed one by one (never recursively: a layer still mounted keeps its files).
    let lower = dir.join("lower");
    if let Ok(entries) = fs::read_dir(&lower) {
        for e in entries.flatten() {
            while detach(&e.path()).is_ok() {}
            let _ = fs::remove_dir(e.path());
        }
        let _ = fs::remove_dir(&lower);
    }
}

fn ctx(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowers_are_listed_uppermost_first_and_bad_paths_refused() {
        let l = [PathBuf::from("/s/l2"), PathBuf::from("/s/l1")];
        assert_eq!(
            options(&l, Path::new("/c/upper"), Path::new("/c/work"), false).unwrap(),
            "lowerdir=/s/l2:/s/l1,upperdir=/c/upper,workdir=/c/work"
        );
        assert_eq!(
            options(
                &[PathBuf::from("/s/sha256:ab")],
                Path::new("/u"),
                Path::new("/w"),
                false
            )
            .unwrap(),
            "lowerdir=/s/sha256\\:ab,upperdir=/u,workdir=/w"
        );
        assert_eq!(
            options(&l, Path::new("/u"), Path::new("/w"), true).unwrap(),
            "lowerdir=/s/l2:/s/l1,upperdir=/u,workdir=/w,userxattr"
        );
        let e = options(
            &[PathBuf::from("/a,b")],
            Path::new("/u"),
            Path::new("/w"),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("\"/a,b\""), "{e}");
        assert!(options(
            &[PathBuf::from("/l")],
            Path::new("/u:x"),
            Path::new("/w"),
            false
        )
        .is_err());
        assert!(options(&[], Path::new("/u"), Path::new("/w"), false).is_err());
        let many: Vec<PathBuf> = (0..200)
            .map(|i| PathBuf::from(format!("/var/lib/podinit/images/layers/{i:040}")))
            .collect();
        let e = options(&many, Path::new("/u"), Path::new("/w"), false).unwrap_err();
        assert!(e.to_string().contains("200 layers"), "{e}");
    }
}
