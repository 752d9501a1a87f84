//! An image volume's root filesystem on the host (KEP-4639): the image's layers, read-only
//! and shared with every container and pod that uses them, as containerd mounts an image
//! volume (its snapshot's layers, no writable layer). Mounted in the supervisor's mount
//! namespace, so a killed supervisor takes the mount with it.

use std::io;
use std::path::{Path, PathBuf};

/// The image's root filesystem for a volume at `dir`: its one layer itself (a bundle's
/// rootfs), or a read-only overlay of its layers (uppermost first) mounted at `dir`.
/// Containers bind-mount it read-only either way.
pub fn mount(lowers: &[PathBuf], dir: &Path) -> io::Result<PathBuf> {
    match lowers {
        [] => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "image volume: the image has no layer",
        )),
        [only] => Ok(only.clone()),
        _ => {
            while crate::sys::mount::detach(dir).is_ok() {}
            std::fs::create_dir_all(dir).map_err(|e| {
                io::Error::new(e.kind(), format!("creating {}: {e}", dir.display()))
            })?;
            let data = options(lowers, crate::sys::rootless::rootless())?;
            crate::sys::mount::mount(
                Some(Path::new("overlay")),
                dir,
                Some("overlay"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                &data,
            )
            .map_err(|e| {
                io::Error::other(format!(
                    "mounting the image's {} layers at {}: {e}",
                    lowers.len(),
                    dir.display()
                ))
            })?;
            Ok(dir.to_path_buf())
        }
    }
}

/// The overlay's options: only lower layers (overlayfs is then read-only), `:` escaped as
/// overlayfs reads it, `,` refused, within the page the kernel copies; `userxattr` without
/// root, as the layers were unpacked.
fn options(lowers: &[PathBuf], userxattr: bool) -> io::Result<String> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    let mut parts = Vec::with_capacity(lowers.len());
    for l in lowers {
        let s = l.to_string_lossy();
        if s.contains(',') {
            return Err(invalid(format!(
                "image volume: layer path {s:?} contains ','"
            )));
        }
        parts.push(s.replace('\\', "\\\\").replace(':', "\\:"));
    }
    let data = format!(
        "lowerdir={}{}",
        parts.join(":"),
        if userxattr { ",userxattr" } else { "" }
    );
    if data.len() >= 4096 {
        return Err(invalid(format!(
            "image volume: {} layers make mount options of {} bytes, more than the kernel takes (4096)",
            lowers.len(),
            data.len()
        )));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_layer_is_used_as_it_is_and_more_are_a_lower_only_overlay() {
        let l = PathBuf::from("/s/layers/sha256:ab");
        assert_eq!(
            mount(std::slice::from_ref(&l), Path::new("/nowhere")).unwrap(),
            l
        );
        assert!(mount(&[], Path::new("/nowhere")).is_err());
        assert_eq!(
            options(&[l, PathBuf::from("/s/layers/cd")], false).unwrap(),
            "lowerdir=/s/layers/sha256\\:ab:/s/layers/cd"
        );
        assert!(options(&[PathBuf::from("/a,b")], false).is_err());
        assert_eq!(
            options(&[PathBuf::from("/a"), PathBuf::from("/b")], true).unwrap(),
            "lowerdir=/a:/b,userxattr"
        );
    }
}
