//! mount(2) and umount2(2) on paths, with the errno as an `io::Error` for the caller to
//! put in context. Paths reach the kernel through nix's stack buffers: no allocation on
//! the container start path.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;

use nix::mount::{MntFlags, MsFlags};

/// `mount(src, target, fstype, flags, data)`; an empty `data` is passed as none.
pub fn mount(
    src: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    nix::mount::mount(
        src,
        target,
        fstype,
        MsFlags::from_bits_retain(flags),
        (!data.is_empty()).then_some(data),
    )
    .map_err(io::Error::from)
}

/// `MOUNT_ATTR_*` of mount_setattr(2) (the uapi's values; libc has none of them).
pub mod attr {
    pub const RDONLY: u64 = 0x1;
    pub const NOSUID: u64 = 0x2;
    pub const NODEV: u64 = 0x4;
    pub const NOEXEC: u64 = 0x8;
    /// The access-time field: RELATIME (0), NOATIME and STRICTATIME are its values.
    pub const ATIME: u64 = 0x70;
    pub const RELATIME: u64 = 0x0;
    pub const NOATIME: u64 = 0x10;
    pub const STRICTATIME: u64 = 0x20;
    pub const NODIRATIME: u64 = 0x80;
    pub const NOSYMFOLLOW: u64 = 0x0020_0000;
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
pub(super) struct MountAttr {
    pub attr_set: u64,
    pub attr_clr: u64,
    pub propagation: u64,
    pub userns_fd: u64,
}

/// mount_setattr(2): `attr` on the mount at `path` relative to `dirfd` (with `flags`'
/// `AT_EMPTY_PATH`, the mount `dirfd` itself; with `AT_RECURSIVE`, every mount below too).
pub(super) fn mount_setattr(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
    attr: &MountAttr,
) -> io::Result<()> {
    // SAFETY: a valid C string and a mount_attr of the size given, both borrowed for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `mount_setattr(target, AT_RECURSIVE, {set, clr})`: the attributes on the mount at
/// `target` and every mount below it (the recursive `rro`, `rnosuid`… options).
pub fn set_attr_recursive(target: &Path, set: u64, clr: u64) -> io::Result<()> {
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path contains a NUL byte"))?;
    mount_setattr(libc::AT_FDCWD, &c, AT_RECURSIVE, &attr)
}

/// Whether the kernel has mount_setattr(2) (Linux 5.12), which recursive read-only
/// mounts need: asked with a bad descriptor, so that only `ENOSYS` says no.
pub fn setattr_supported() -> bool {
    const AT_EMPTY_PATH: libc::c_uint = 0x1000;
    let attr = MountAttr {
        attr_set: 0,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let res = mount_setattr(-1, c"", AT_EMPTY_PATH, &attr);
    !matches!(res, Err(e) if e.raw_os_error() == Some(libc::ENOSYS))
}

/// move_mount(2) of the detached mount `tree` onto the file `target` is open on: the
/// mount lands on that very file, with no path resolved again (through a `/proc/self/fd`
/// a container could have mounted on, or a link swapped in since).
pub fn move_onto(tree: BorrowedFd, target: BorrowedFd) -> io::Result<()> {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
    // SAFETY: move_mount with two fds of ours and empty C strings.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            target.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A bind mount of the file `src` is open on, onto the file `target` is open on (both
/// `O_PATH` fds), with the mounts below `src` when `recursive`, and `MOUNT_ATTR_*` `set`
/// on the new mount alone (as a remount of the bind would).
pub fn bind_fd(src: BorrowedFd, target: BorrowedFd, recursive: bool, set: u64) -> io::Result<()> {
    let tree = super::procfs::clone_tree(src, c"", recursive)?;
    if set != 0 {
        let a = MountAttr {
            attr_set: set,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        mount_setattr(
            tree.as_raw_fd(),
            c"",
            libc::AT_EMPTY_PATH as libc::c_uint,
            &a,
        )?;
    }
    move_onto(tree.as_fd(), target)
}

/// A new filesystem of type `fstype` with no options but the flags `flags` (`ro`) and the
/// `MOUNT_ATTR_*` `attr`, onto the file `target` is open on.
pub fn new_fs_onto(
    fstype: &CStr,
    flags: &[&CStr],
    attr: u64,
    target: BorrowedFd,
) -> io::Result<()> {
    let mnt = super::procfs::fs_mount(fstype, flags, attr)?;
    move_onto(mnt.as_fd(), target)
}

/// `umount2(target, MNT_DETACH)`: lazily, whatever still uses it.
pub fn detach(target: &Path) -> io::Result<()> {
    nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_nul_in_a_path_is_refused_before_the_call() {
        let bad = Path::new(std::ffi::OsStr::from_bytes(b"/a\0b"));
        let e = mount(None, bad, None, 0, "").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(detach(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn setattr_is_found_on_a_kernel_that_has_it() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release
            .split(['.', '-'])
            .map(|n| n.parse::<u32>().unwrap_or(0));
        let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
        assert_eq!(setattr_supported(), (major, minor) >= (5, 12), "{release}");
    }
}
