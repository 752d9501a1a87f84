//! procfs reached through a handle that no container can swap (CVE-2025-52881, and the
//! procfs side of CVE-2025-31133 and CVE-2025-52565). A container that can mount in its
//! own mount namespace (or a racing one whose mounts propagate into it) can put a tmpfs
//! with a fake `self` link, or a bind of `/proc/sysrq-trigger`, where the runtime writes
//! `/proc/self/oom_score_adj` or `/proc/sys/...`, and have that write land elsewhere. As
//! runc 1.2.8+ does with libpathrs' procfs handle: a private procfs made for the write
//! (`fsopen("proc")` + `fsmount`, which no one else can reach, let alone mount on), else a
//! non-recursive clone of /proc's mount (`open_tree`, which leaves every mount on top of it
//! behind), else /proc itself; each checked to be a procfs root, and every file below it
//! opened with `openat2` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV`, its
//! `self` resolved by hand to the pid that procfs knows us by.

use std::ffi::{CStr, OsStr};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{openat, openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
/// The inode number of every procfs root.
const PROC_ROOT_INO: u64 = 1;

fn fd_from(rc: libc::c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd the kernel just returned to us.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
}

/// A new filesystem of type `fstype` (procfs: of this process's pid namespace), mounted
/// nowhere, with the filesystem flags `flags` (`ro`: a read-only superblock, as mount(2)'s
/// `MS_RDONLY` gives) and the `MOUNT_ATTR_*` `attr`.
pub(super) fn fs_mount(fstype: &CStr, flags: &[&CStr], attr: u64) -> io::Result<OwnedFd> {
    const FSCONFIG_SET_FLAG: libc::c_uint = 0;
    // SAFETY: fsopen with a C string and flags.
    let fs = fd_from(unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) })?;
    for flag in flags {
        // SAFETY: fsconfig's set-flag command takes a key and no value.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                fs.as_raw_fd(),
                FSCONFIG_SET_FLAG,
                flag.as_ptr(),
                std::ptr::null::<libc::c_void>(),
                0,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: fsconfig's create command takes no key or value.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fsmount of the context just created.
    fd_from(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attr) })
}

/// A detached copy of the mount at `path` relative to `dir` (`""`: `dir` itself), with
/// the mounts below it when `recursive`.
pub(super) fn clone_tree(dir: BorrowedFd, path: &CStr, recursive: bool) -> io::Result<OwnedFd> {
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let mut flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
    if path.is_empty() {
        flags |= libc::AT_EMPTY_PATH as libc::c_uint;
    }
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: open_tree with an fd of ours, a C string and flags.
    fd_from(unsafe { libc::syscall(libc::SYS_open_tree, dir.as_raw_fd(), path.as_ptr(), flags) })
}

/// Whether `fd` is the root of a procfs.
fn is_proc_root(fd: BorrowedFd) -> io::Result<bool> {
    let fs = nix::sys::statfs::fstatfs(fd)?;
    let st = nix::sys::stat::fstat(fd)?;
    Ok(fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC && st.st_ino == PROC_ROOT_INO)
}

fn not_procfs(what: &str) -> io::Error {
    io::Error::other(format!("{what} is not on procfs"))
}

/// The root of a procfs no one can have mounted on.
pub struct ProcRoot(OwnedFd);

impl ProcRoot {
    /// A private procfs, else a clone of /proc's mount without what is mounted on it
    /// (a user namespace refuses a new procfs once /proc has masks: they are "locked"),
    /// else /proc itself, whose overmounts the `RESOLVE_NO_XDEV` of each open refuses.
    pub fn open() -> io::Result<ProcRoot> {
        let attr =
            super::mount::attr::NOSUID | super::mount::attr::NODEV | super::mount::attr::NOEXEC;
        let fd = fs_mount(c"proc", &[], attr)
            .or_else(|_| clone_tree(cwd_fd(), c"/proc", false))
            .or_else(|_| {
                nix::fcntl::open(
                    "/proc",
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )
                .map_err(io::Error::from)
            })?;
        if !is_proc_root(fd.as_fd())? {
            return Err(not_procfs("/proc"));
        }
        Ok(ProcRoot(fd))
    }

    /// The path below this procfs that `path` (under `/proc/`) names, with a leading `self`
    /// or `thread-self` replaced by what this procfs's own links say (the pid it knows this
    /// process by): the links themselves are not followed by the open.
    fn relative(&self, path: &Path) -> io::Result<PathBuf> {
        let rel = path.strip_prefix("/proc").map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not under /proc", path.display()),
            )
        })?;
        let mut parts = rel.components();
        let first = match parts.next() {
            Some(Component::Normal(n)) => n,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a plain path under /proc", path.display()),
                ))
            }
        };
        let head = if first == "self" || first == "thread-self" {
            let target = nix::fcntl::readlinkat(self.0.as_fd(), first)?;
            PathBuf::from(target)
        } else {
            PathBuf::from(first)
        };
        Ok(head.join(parts.as_path()))
    }

    /// Open `path` (under `/proc/`) in this procfs, no link followed and no mount crossed;
    /// the file opened must be on procfs.
    pub fn open_file(&self, path: &Path, flags: OFlag) -> io::Result<OwnedFd> {
        let rel = self.relative(path)?;
        // The error keeps its errno: the caller names the path.
        let fd = open_beneath(
            self.0.as_fd(),
            &rel,
            flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            ResolveFlag::RESOLVE_NO_SYMLINKS,
        )?;
        let fs = nix::sys::statfs::fstatfs(fd.as_fd())?;
        if fs.filesystem_type() != nix::sys::statfs::PROC_SUPER_MAGIC {
            return Err(not_procfs(&path.display().to_string()));
        }
        Ok(fd)
    }
}

/// The fd of the current directory, for calls that take a directory fd.
fn cwd_fd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is a constant every *at call takes as the current directory.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// `rel` opened below `dir` with `openat2`'s `RESOLVE_BENEATH | RESOLVE_NO_XDEV` and
/// `links` (`RESOLVE_NO_SYMLINKS` or `RESOLVE_NO_MAGICLINKS`); on a kernel without openat2
/// (before 5.6), component by component with `O_NOFOLLOW`, each on the filesystem of `dir`.
fn open_beneath(
    dir: BorrowedFd,
    rel: &Path,
    flags: OFlag,
    links: ResolveFlag,
) -> io::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_XDEV | links);
    match openat2(dir, rel, how) {
        Err(nix::errno::Errno::ENOSYS) => {}
        r => return r.map_err(io::Error::from),
    }
    let dev = nix::sys::stat::fstat(dir)?.st_dev;
    let names: Vec<&OsStr> = rel
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a plain path", rel.display()),
            )),
        })
        .collect::<io::Result<_>>()?;
    let Some((last, parents)) = names.split_last() else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let same_fs = |fd: OwnedFd| -> io::Result<OwnedFd> {
        if nix::sys::stat::fstat(fd.as_fd())?.st_dev != dev {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        Ok(fd)
    };
    let mut cur: Option<OwnedFd> = None;
    for name in parents {
        let at = cur.as_ref().map_or(dir, |f| f.as_fd());
        let next = openat(
            at,
            *name,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        cur = Some(same_fs(next)?);
    }
    let at = cur.as_ref().map_or(dir, |f| f.as_fd());
    same_fs(openat(at, *last, flags, Mode::empty())?)
}

/// Write `data` to `path` (under `/proc/`, such as `/proc/sys/net/ipv4/ip_forward` or
/// `/proc/self/oom_score_adj`) through a private procfs: never created, never truncated
/// beyond what procfs does, never a file a mount or link put in its place.
pub fn write(path: &Path, data: &[u8]) -> io::Result<()> {
    ProcRoot::open()?.write(path, data)
}

impl ProcRoot {
    /// [`write`] through this handle, for callers that write several files.
    pub fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let fd = self.open_file(path, OFlag::O_WRONLY)?;
        std::fs::File::from(fd).write_all(data)
    }
}

/// What `path` (under `/proc/`) holds, read as [`write`] writes.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let root = ProcRoot::open()?;
    let fd = root.open_file(path, OFlag::O_RDONLY)?;
    let mut out = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut out)?;
    Ok(out)
}

/// The file at `path` (under `/proc/`) of the /proc this process sees, to mount onto (a
/// masked or read-only path): /proc must be a procfs root reached without a link, and the
/// rest is opened with `RESOLVE_NO_XDEV`, so that a mount someone put on the way (on
/// the file itself or a directory above it) is refused rather than masked in its stead.
/// procfs's own links (`net` → `self/net`) are followed, magic links (`fd/N`) are not.
pub fn open_mount_target(path: &Path) -> io::Result<OwnedFd> {
    let rel = path.strip_prefix("/proc").map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not under /proc", path.display()),
        )
    })?;
    let proc = nix::fcntl::open(
        "/proc",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    if !is_proc_root(proc.as_fd())? {
        return Err(not_procfs("/proc"));
    }
    if rel.as_os_str().is_empty() {
        return Ok(proc);
    }
    open_beneath(
        proc.as_fd(),
        rel,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        ResolveFlag::RESOLVE_NO_MAGICLINKS,
    )
}

/// Whether `path` lies under /proc (`/proc` itself included), as written.
pub fn is_under_proc(path: &Path) -> bool {
    path.starts_with("/proc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_is_this_process_as_procfs_knows_it() {
        let root = ProcRoot::open().expect("a procfs handle");
        let rel = root.relative(Path::new("/proc/self/status")).unwrap();
        assert_eq!(
            rel,
            Path::new(&std::process::id().to_string()).join("status")
        );
        let text = String::from_utf8(read(Path::new("/proc/self/status")).unwrap()).unwrap();
        assert!(
            text.lines()
                .any(|l| l == format!("Pid:\t{}", std::process::id())),
            "{text}"
        );
    }

    #[test]
    fn paths_outside_proc_or_not_plain_are_refused() {
        let root = ProcRoot::open().unwrap();
        for bad in ["/etc/passwd", "/proc", "/proc/../etc/passwd"] {
            let e = root.open_file(Path::new(bad), OFlag::O_RDONLY).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
        // procfs's own links (`mounts` → `self/mounts`) are not followed either.
        let e = root
            .open_file(Path::new("/proc/mounts"), OFlag::O_RDONLY)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    }
}
