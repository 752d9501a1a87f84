//! A container's root filesystem: the bundle's rootfs as the read-only lower layer of an
//! overlay with a fresh writable layer per run, as a CRI runtime gives every new container
//! (a restart starts from the image again, and two containers of one image never see each
//! other's writes). Mounted in the supervisor's mount namespace, so a killed supervisor
//! takes the mounts with it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::sys::mount::{detach, mount};

/// Mount `<dir>/rootfs` = overlay(lower: `lower`, upper: `<dir>/upper`), returning it.
pub fn prepare(lower: &Path, dir: &Path) -> io::Result<PathBuf> {
    release(dir);
    let (upper, work, merged) = (dir.join("upper"), dir.join("work"), dir.join("rootfs"));
    for d in [&upper, &work, &merged] {
        fs::create_dir_all(d).map_err(|e| ctx(e, format!("creating {}", d.display())))?;
    }
    for p in [lower, &upper, &work] {
        let s = p.to_string_lossy();
        if s.contains([',', ':']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("overlay rootfs: path {s:?} contains ',' or ':'"),
            ));
        }
    }
    let data = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
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
            lower.display()
        ))
    })?;
    Ok(merged)
}

/// Unmount and remove a run's root filesystem and writable layer (no error if absent).
pub fn release(dir: &Path) {
    let merged = dir.join("rootfs");
    while detach(&merged).is_ok() {}
    for d in ["rootfs", "upper", "work"] {
        let _ = fs::remove_dir_all(dir.join(d));
    }
}

fn ctx(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}
