//! Idmapped mounts (mount_setattr(2) with `MOUNT_ATTR_IDMAP`): a detached copy of a
//! directory's mount (`open_tree` with `OPEN_TREE_CLONE`) takes a user namespace's id
//! mapping and is attached elsewhere (`move_mount`). libc has no wrappers for these
//! three system calls; nothing else here needs them.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path contains a NUL byte"))
}

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Gives the detached mount (a tree, with `AT_RECURSIVE`) `fd` the id mapping of `userns`.
fn set_idmap(fd: &OwnedFd, userns: BorrowedFd, flags: libc::c_uint) -> io::Result<()> {
    let attr = super::mount::MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    super::mount::mount_setattr(
        fd.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH as libc::c_uint | flags,
        &attr,
    )
}

/// A detached copy of the mount tree at `src`, idmapped with `userns`'s mapping: a file
/// owned by id N on disk is seen as owned by the user namespace's N (and written back as
/// N). EINVAL from mount_setattr: the filesystem (or the kernel) has no idmapped mounts.
pub fn idmapped_tree(src: &Path, userns: BorrowedFd) -> io::Result<OwnedFd> {
    let c = cpath(src)?;
    // SAFETY: open_tree with a valid C string and flags; the fd returned is ours.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE,
        )
    })?;
    // SAFETY: a new fd of ours.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    set_idmap(&tree, userns, AT_RECURSIVE)?;
    Ok(tree)
}

/// Attach a detached tree at `target` (an existing directory or file).
pub fn attach(tree: &OwnedFd, target: &Path) -> io::Result<()> {
    let c = cpath(target)?;
    // SAFETY: move_mount of our detached tree onto a path given as a C string.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// `src` idmapped with `userns`'s mapping, mounted at `target` (made if missing: a
/// directory for a directory, an empty file for a file).
pub fn bind(src: &Path, target: &Path, userns: BorrowedFd) -> io::Result<()> {
    if std::fs::symlink_metadata(target).is_err() {
        if std::fs::metadata(src)?.is_dir() {
            std::fs::create_dir_all(target)?;
        } else {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::File::create(target)?;
        }
    }
    let tree = idmapped_tree(src, userns)?;
    attach(&tree, target)
}

/// Whether a tmpfs takes an idmap (Linux 6.3 on): a detached tmpfs of our own
/// (fsopen/fsmount), never attached anywhere, is tried.
pub fn tmpfs_takes_idmap(userns: BorrowedFd) -> io::Result<()> {
    let m = super::procfs::fs_mount(c"tmpfs", &[], 0)?;
    set_idmap(&m, userns, 0)
}
