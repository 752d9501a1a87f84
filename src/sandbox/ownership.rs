//! A volume's files given to the pod's `fsGroup` (the rules are `pod::fs_group`), before
//! any container sees them. Symbolic links are neither followed nor chmod'ed. As kubelet,
//! a file that cannot be changed is left as it is: the volume still mounts.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::pod::fs_group;

/// Every file below `dir` (and `dir`) to group `gid`, with the modes `fs_group::mode` gives.
pub fn give(dir: &Path, gid: u32, read_only: bool) {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return;
    };
    let _ = std::os::unix::fs::lchown(dir, None, Some(gid));
    if meta.file_type().is_symlink() {
        return;
    }
    let is_dir = meta.is_dir();
    let mode = fs_group::mode(meta.mode() & 0o7777, is_dir, read_only);
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(mode));
    if !is_dir {
        return;
    }
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        give(&entry.path(), gid, read_only);
    }
}
