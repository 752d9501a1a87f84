//! The running binary made unwritable before podinit starts anything in a container
//! (CVE-2019-5736): a process set up by podinit runs podinit's binary until it execs, and
//! a container program whose interpreter is `/proc/self/exe` is podinit itself, so a
//! container could reach the binary through `/proc/PID/exe` and write it once no podinit
//! runs. As runc's `exeseal`, podinit runs itself again from a read-only, detached bind
//! mount of its own file (`open_tree` + `mount_setattr`): what `/proc/PID/exe` leads to is
//! then that mount, which no container can reach to make writable. It costs one `execve`
//! and copies nothing, where runc's memfd copy costs the binary's size per process; that
//! copy is kept for `podinit runc` where it may not mount (a user without root).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;

/// The seals of a copy no one may change: runc's `sealMemfd` set.
const COPY_SEALS: libc::c_int =
    libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;

/// Whether the binary this process runs is on a read-only mount (sealed already, or
/// installed on a read-only filesystem), or a sealed copy in memory: nothing to do then.
pub fn is_sealed() -> bool {
    nix::sys::statvfs::statvfs("/proc/self/exe")
        .is_ok_and(|st| st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        || is_sealed_copy()
}

/// Whether the binary this process runs is a memfd sealed against writes
/// ([`reexec_sealed_copy`]).
fn is_sealed_copy() -> bool {
    let Ok(exe) = std::fs::File::open("/proc/self/exe") else {
        return false;
    };
    // SAFETY: fcntl on an fd we own; a file that is no memfd answers EINVAL.
    let seals = unsafe { libc::fcntl(exe.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & COPY_SEALS == COPY_SEALS
}

/// Run this program again from a sealed copy of its binary in memory, as runc 1.2 does
/// where it may not mount (a user without root): a memfd that nothing can write, shrink
/// or grow once sealed, so that no container reaches the binary on disk through
/// `/proc/PID/exe`. It costs the binary's size in memory while a process runs it, which
/// is why [`reexec_sealed`]'s read-only mount comes first wherever it is allowed.
pub fn reexec_sealed_copy() -> io::Result<()> {
    if is_sealed() {
        name_after_argv0();
        return Ok(());
    }
    // SAFETY: memfd_create with a valid C string and flags; the fd returned is ours.
    let fd = unsafe {
        libc::memfd_create(
            c"podinit".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd of ours.
    let copy = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut dst = std::fs::File::from(copy);
    let mut src = std::fs::File::open("/proc/self/exe")?;
    io::copy(&mut src, &mut dst)?;
    // SAFETY: fcntl on an fd we own with a seal mask.
    if unsafe { libc::fcntl(dst.as_raw_fd(), libc::F_ADD_SEALS, COPY_SEALS) } != 0 {
        return Err(io::Error::last_os_error());
    }
    exec_fd(&OwnedFd::from(dst))
}

/// Run this program again, with the same arguments and environment, from a read-only
/// detached bind mount of its binary. Returns only when it did not: `Ok` when the binary
/// is sealed already, an error when the kernel refused a step (no `CAP_SYS_ADMIN` in a
/// container's PID-1 mode gives EPERM), and the caller goes on as it is.
pub fn reexec_sealed() -> io::Result<()> {
    match sealed_mount()? {
        Some(tree) => exec_fd(&tree),
        None => {
            name_after_argv0();
            Ok(())
        }
    }
}

/// The read-only, detached bind mount of the running binary that [`reexec_sealed`] runs
/// itself from (an `O_PATH` fd of it, close-on-exec); `None` when the binary is sealed
/// already. A long-lived process that starts podinit's verbs (the shim) runs them from
/// it, so that each does not seal itself again.
pub fn sealed_mount() -> io::Result<Option<OwnedFd>> {
    if is_sealed() {
        return Ok(None);
    }
    let tree = match clone_of(c"/proc/self/exe") {
        // Without root podinit runs in a mount namespace of its own (`sys::rootless`), but
        // the binary it runs is on the mount it was started from, in the namespace left
        // behind, which may not be cloned from here: the same file's mount in this
        // namespace, found by its path, is, once it is known to be the same file.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => same_file_here()?,
        r => r?,
    };
    let attr = super::mount::MountAttr {
        attr_set: super::mount::attr::RDONLY
            | super::mount::attr::NOSUID
            | super::mount::attr::NODEV,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    super::mount::mount_setattr(
        tree.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH as libc::c_uint,
        &attr,
    )?;
    Ok(Some(tree))
}

/// `execveat` of the binary behind `fd` with our arguments and environment; returns only
/// the error.
fn exec_fd(fd: &OwnedFd) -> io::Result<()> {
    let cstrings = |items: Vec<Vec<u8>>| -> io::Result<Vec<CString>> {
        items
            .into_iter()
            .map(|v| CString::new(v).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
            .collect()
    };
    let argv = cstrings(std::env::args_os().map(|a| a.as_bytes().to_vec()).collect())?;
    let envp = cstrings(
        std::env::vars_os()
            .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
            .collect(),
    )?;
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    envp_p.push(std::ptr::null());
    // SAFETY: NUL-terminated arrays of valid C strings that outlive the call; on success
    // it does not return.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd.as_raw_fd(),
            c"".as_ptr(),
            argv_p.as_ptr(),
            envp_p.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    Err(io::Error::last_os_error())
}

/// A detached clone of the mount of `path` (`open_tree(OPEN_TREE_CLONE)`), the file alone.
fn clone_of(path: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: open_tree with a valid C string and flags; the fd returned is ours.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The clone of the running binary's path as this mount namespace sees it, refused (EINVAL)
/// unless it is the very file running (device and inode), which a rename since the start
/// could have changed.
fn same_file_here() -> io::Result<OwnedFd> {
    use std::os::unix::fs::MetadataExt;
    let path = std::fs::read_link("/proc/self/exe")?;
    let running = std::fs::metadata("/proc/self/exe")?;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let tree = clone_of(&c)?;
    let here = std::fs::File::from(tree.try_clone()?).metadata()?;
    if (here.dev(), here.ino()) != (running.dev(), running.ino()) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(tree)
}

/// The kernel names a program run through an fd after the fd's number (`/dev/fd/N`):
/// the process takes its usual name back, `argv[0]`'s last part, as `ps` shows it.
fn name_after_argv0() {
    let Some(argv0) = std::env::args_os().next() else {
        return;
    };
    let base = std::path::Path::new(&argv0)
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    // The kernel keeps 15 bytes and a NUL.
    let mut name = base;
    name.truncate(15);
    if let Ok(c) = CString::new(name) {
        // SAFETY: prctl with a valid C string of at most 16 bytes.
        unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0) };
    }
}
