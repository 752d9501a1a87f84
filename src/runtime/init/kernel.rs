//! The seam between the container's set-up and the kernel: every call `init` makes goes
//! through [`Kernel`], so that unit tests can record the set-up's order without root
//! (youki's `Syscall` trait is the model). Static dispatch: the binary has one instance,
//! [`Linux`], whose methods are the system calls themselves.

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use crate::runtime::caps_set::Caps;
use crate::runtime::seccomp::Filter;

/// What is at a path, as `lstat` (a link is itself) or `stat` (a link is its target) saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn of(t: std::fs::FileType) -> Kind {
        if t.is_dir() {
            Kind::Dir
        } else if t.is_symlink() {
            Kind::Symlink
        } else {
            Kind::Other
        }
    }
}

/// The kernel calls of a container's set-up, in the words `init` uses them.
pub trait Kernel {
    /// Move this single-threaded process into the cgroups whose `tasks` files these are.
    fn join_cgroups(&self, tasks: &[PathBuf]) -> crate::runtime::Result<()>;
    /// Unblock every signal and set the `ignored` ones back to their default.
    fn reset_signals(&self, ignored: u64);
    fn unshare(&self, flags: libc::c_int) -> io::Result<()>;
    fn setsid(&self);
    /// Make `fd` this process's `target` (0–2), left open across exec.
    fn set_stdio(&self, fd: RawFd, target: RawFd) -> io::Result<()>;
    fn setns(&self, fd: RawFd, nstype: libc::c_int) -> io::Result<()>;
    /// Make a new terminal of this mount namespace's devpts the process's 0–2 and its
    /// controlling terminal, and send its master on the Unix socket `sock`.
    fn console(&self, sock: RawFd, size: Option<(u16, u16)>) -> io::Result<()>;

    fn mount(
        &self,
        src: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: &str,
    ) -> io::Result<()>;
    /// `mount` onto `target`, a path below `root` as `secure_join` resolved it, reached
    /// again without following any link (`sys::beneath`): a directory swapped for a link
    /// since cannot move the mount out of the root.
    fn mount_in_root(
        &self,
        root: &Path,
        src: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: &str,
    ) -> io::Result<()>;
    /// A bind mount (`flags`) of `src`, reached below `src_root` with no link followed,
    /// onto `target` below `root` as [`Kernel::mount_in_root`].
    fn bind_beneath(
        &self,
        src_root: &Path,
        src: &Path,
        root: &Path,
        target: &Path,
        flags: libc::c_ulong,
    ) -> io::Result<()>;
    /// Bind the container's /dev/null onto `target` (a masked file), once it is known to
    /// be the null device itself: a /dev/null swapped for a link (to a procfs file such
    /// as /proc/sys/kernel/core_pattern) would unmask that file instead (CVE-2025-31133).
    fn bind_null(&self, target: &Path) -> io::Result<()>;
    /// An empty read-only tmpfs over the directory `target` (a masked directory).
    fn mask_dir(&self, target: &Path) -> io::Result<()>;
    /// A read-only bind of `path` onto itself, the mounts below it included, each keeping
    /// its own nosuid, nodev and noexec (runc's readonlyPath).
    fn bind_readonly(&self, path: &Path) -> io::Result<()>;
    /// `ensure_dir` and `create_file` of a path below `root`, no link followed.
    fn ensure_dir_in_root(&self, root: &Path, path: &Path) -> io::Result<()>;
    fn create_file_in_root(&self, root: &Path, path: &Path) -> io::Result<()>;
    /// mount_setattr(2) with `AT_RECURSIVE`: `MOUNT_ATTR_*` set and cleared on the mount
    /// at `target` and every mount below it.
    fn set_attr_recursive(&self, target: &Path, set: u64, clr: u64) -> io::Result<()>;
    fn chdir(&self, dir: &CStr) -> io::Result<()>;
    /// The current directory as the kernel names it from this process's root: a path
    /// that does not start with '/' ("(unreachable)…") lies outside the root.
    fn getcwd(&self) -> io::Result<Vec<u8>>;
    /// `PR_SET_DUMPABLE`.
    fn set_dumpable(&self, on: bool) -> io::Result<()>;
    /// `pivot_root(".", ".")`: the current directory becomes the root, the old root is
    /// stacked on it until detached.
    fn pivot_root_here(&self) -> io::Result<()>;
    /// `umount2(target, MNT_DETACH)`.
    fn detach(&self, target: &CStr) -> io::Result<()>;
    /// The filesystem type (`f_type` of statfs) of the mount holding `path`.
    fn statfs_type(&self, path: &CStr) -> io::Result<libc::__fsword_t>;
    /// The `MS_*` flags of the mount holding `path` (statvfs's `f_flag`, whose `ST_*`
    /// bits are the same).
    fn mount_flags(&self, path: &CStr) -> io::Result<libc::c_ulong>;
    /// What `path` itself is; `None` when nothing is there (or it cannot be looked at).
    fn lstat(&self, path: &Path) -> Option<Kind>;
    /// What `path` is, its links followed.
    fn stat(&self, path: &Path) -> io::Result<Kind>;
    fn read_link(&self, path: &Path) -> Option<PathBuf>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Open `path` for writing, created if missing and never truncated, and close it.
    fn create_file(&self, path: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Write a file under /proc (a sysctl, `/proc/self/oom_score_adj`) through a private
    /// procfs handle (`sys::procfs`): a mount or link the container put in /proc cannot
    /// move the write elsewhere (CVE-2025-52881).
    fn write_proc(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The mount point of the mount that holds `path` (the longest one above it in
    /// /proc/self/mountinfo).
    fn mount_point_of(&self, path: &Path) -> Option<PathBuf>;
    fn symlink(&self, target: &str, link: &Path) -> io::Result<()>;
    fn mknod(&self, path: &CStr, mode: libc::mode_t, major: u64, minor: u64) -> io::Result<()>;
    fn chown(&self, path: &CStr, uid: u32, gid: u32) -> io::Result<()>;
    fn umask(&self, mask: libc::mode_t) -> libc::mode_t;
    /// Whether the effective uid and gid are both 0.
    fn is_root(&self) -> bool;

    fn setrlimit(&self, res: libc::__rlimit_resource_t, soft: u64, hard: u64) -> io::Result<()>;
    /// Mark every fd from `first` on close-on-exec.
    fn close_range_cloexec(&self, first: u32);
    /// Close every fd from `first` on but those in `keep`.
    fn close_fds_except(&self, first: u32, keep: &[RawFd]);
    fn setgroups(&self, groups: &[libc::gid_t]) -> io::Result<()>;
    /// `PR_SET_KEEPCAPS`.
    fn keep_caps(&self, on: bool) -> io::Result<()>;
    fn setresgid(&self, gid: libc::gid_t) -> io::Result<()>;
    fn setresuid(&self, uid: libc::uid_t) -> io::Result<()>;
    /// Narrow the bounding set to `caps.bounding` (needs CAP_SETPCAP: before leaving root).
    fn drop_bounding(&self, caps: &Caps) -> crate::runtime::Result<()>;
    /// Set the effective, permitted, inheritable and ambient sets.
    fn set_caps(&self, caps: &Caps) -> crate::runtime::Result<()>;
    /// `PR_SET_NO_NEW_PRIVS`.
    fn no_new_privs(&self) -> io::Result<()>;
    fn seccomp(&self, filter: &Filter) -> crate::runtime::Result<()>;
    /// `access(path, F_OK)`.
    fn access(&self, path: &CStr) -> io::Result<()>;
    /// `sethostname`, `setdomainname` (the process's UTS namespace).
    fn set_hostname(&self, name: &CStr) -> io::Result<()>;
    fn set_domainname(&self, name: &CStr) -> io::Result<()>;
    /// Join a new session keyring named `name` (`KEYCTL_JOIN_SESSION_KEYRING`).
    fn join_keyring(&self, name: &CStr) -> io::Result<()>;
    fn personality(&self, persona: libc::c_ulong) -> io::Result<()>;
    fn chroot(&self, dir: &CStr) -> io::Result<()>;
    /// One message to, and one from, the creating process (a SEQPACKET socket).
    fn sync_send(&self, fd: RawFd, msg: &[u8]) -> io::Result<()>;
    fn sync_recv(&self, fd: RawFd) -> io::Result<Vec<u8>>;
    /// Open the exec fifo (an O_PATH fd) for writing, which blocks until it is opened for
    /// reading, and write one byte to it; the fifo stays open until exec closes it.
    fn pass_gate(&self, fifo: RawFd) -> io::Result<()>;
    /// OCI hooks (`runtime::hooks::run`).
    fn run_hooks(
        &self,
        phase: &str,
        hooks: &[oci_spec::runtime::Hook],
        state: &str,
    ) -> crate::runtime::Result<()>;
    /// Returns only when it failed.
    fn execve(
        &self,
        path: &CStr,
        argv: &[*const libc::c_char],
        envp: &[*const libc::c_char],
    ) -> io::Error;
}

/// The kernel itself.
pub struct Linux;

fn ok(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// An `O_PATH` fd on `path` (a masked or read-only path, inside the new root) to mount
/// onto. Under /proc it is reached as `sys::procfs::open_mount_target` does, so that no mount
/// a container put there takes the mount's place; elsewhere as mount(2) would find it.
fn mount_target(path: &Path, dir: bool) -> io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::OFlag;
    if crate::sys::procfs::is_under_proc(path) {
        return crate::sys::procfs::open_mount_target(path);
    }
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if dir {
        flags |= OFlag::O_DIRECTORY;
    }
    nix::fcntl::open(path, flags, nix::sys::stat::Mode::empty()).map_err(io::Error::from)
}

impl Kernel for Linux {
    #[inline]
    fn join_cgroups(&self, tasks: &[PathBuf]) -> crate::runtime::Result<()> {
        Ok(crate::sys::cgroup::join_self(tasks)?)
    }
    #[inline]
    fn reset_signals(&self, ignored: u64) {
        crate::sys::signals::reset_signals(ignored)
    }
    #[inline]
    fn unshare(&self, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: unshare with flags.
        ok(unsafe { libc::unshare(flags) })
    }
    #[inline]
    fn setsid(&self) {
        // SAFETY: setsid has no memory effects.
        unsafe { libc::setsid() };
    }
    #[inline]
    fn set_stdio(&self, fd: RawFd, target: RawFd) -> io::Result<()> {
        if fd == target {
            // SAFETY: clearing CLOEXEC on an fd we were given.
            unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
            return Ok(());
        }
        // SAFETY: dup2 onto 0..2.
        ok(unsafe { libc::dup2(fd, target) })
    }
    #[inline]
    fn console(&self, sock: RawFd, size: Option<(u16, u16)>) -> io::Result<()> {
        use crate::sys::pty;
        let (master, slave) = pty::open()?;
        let res = (|| {
            if let Some((rows, cols)) = size {
                pty::set_size(slave, rows, cols)?;
            }
            for target in 0..3 {
                // SAFETY: dup2 of our slave onto 0..2.
                ok(unsafe { libc::dup2(slave, target) })?;
            }
            pty::set_controlling(0)?;
            pty::send_fd(sock, master)
        })();
        // SAFETY: our own fds; the slave lives on as 0–2, the master in the supervisor.
        unsafe {
            libc::close(master);
            libc::close(slave);
        }
        res
    }
    #[inline]
    fn setns(&self, fd: RawFd, nstype: libc::c_int) -> io::Result<()> {
        // SAFETY: setns with an fd we were given and namespace flags.
        ok(unsafe { libc::setns(fd, nstype) })
    }
    #[inline]
    fn mount(
        &self,
        src: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: &str,
    ) -> io::Result<()> {
        crate::sys::mount::mount(src, target, fstype, flags, data)
    }
    #[inline]
    fn mount_in_root(
        &self,
        root: &Path,
        src: Option<&Path>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: &str,
    ) -> io::Result<()> {
        crate::sys::beneath::mount(root, src, target, fstype, flags, data)
    }
    fn bind_beneath(
        &self,
        src_root: &Path,
        src: &Path,
        root: &Path,
        target: &Path,
        flags: libc::c_ulong,
    ) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let fd = crate::sys::beneath::open(src_root, src)?;
        let from = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        crate::sys::beneath::mount(root, Some(&from), target, None, flags, "")
    }
    fn bind_null(&self, target: &Path) -> io::Result<()> {
        use std::os::fd::AsFd;
        let fd = nix::fcntl::open(
            "/dev/null",
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        let st = nix::sys::stat::fstat(fd.as_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFCHR || st.st_rdev != libc::makedev(1, 3) {
            return Err(io::Error::other("/dev/null is not the null device"));
        }
        // From the checked fd onto the target's fd: neither is named again by a path, and
        // no /proc/self/fd the container could have mounted on is read.
        let to = mount_target(target, false)?;
        match crate::sys::mount::bind_fd(fd.as_fd(), to.as_fd(), false, 0) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                // A kernel before open_tree (5.2): the device was checked just now.
                crate::sys::mount::mount(
                    Some(Path::new("/dev/null")),
                    target,
                    None,
                    libc::MS_BIND,
                    "",
                )
            }
            r => r,
        }
    }
    fn mask_dir(&self, target: &Path) -> io::Result<()> {
        use std::os::fd::AsFd;
        let to = mount_target(target, true)?;
        let ro = crate::sys::mount::attr::RDONLY;
        match crate::sys::mount::new_fs_onto(c"tmpfs", &[c"ro"], ro, to.as_fd()) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => crate::sys::mount::mount(
                Some(Path::new("tmpfs")),
                target,
                Some("tmpfs"),
                libc::MS_RDONLY,
                "",
            ),
            r => r,
        }
    }
    fn bind_readonly(&self, path: &Path) -> io::Result<()> {
        use std::os::fd::AsFd;
        let at = mount_target(path, false)?;
        let ro = crate::sys::mount::attr::RDONLY;
        match crate::sys::mount::bind_fd(at.as_fd(), at.as_fd(), true, ro) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                crate::sys::mount::mount(Some(path), path, None, libc::MS_BIND | libc::MS_REC, "")?;
                let own = self.mount_flags(
                    &crate::runtime::prepare::c_path(path).map_err(io::Error::other)?,
                )? & (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC);
                let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | own;
                crate::sys::mount::mount(None, path, None, flags, "")
            }
            r => r,
        }
    }
    #[inline]
    fn ensure_dir_in_root(&self, root: &Path, path: &Path) -> io::Result<()> {
        crate::sys::beneath::ensure_dir(root, path)
    }
    #[inline]
    fn create_file_in_root(&self, root: &Path, path: &Path) -> io::Result<()> {
        crate::sys::beneath::create_file(root, path)
    }
    #[inline]
    fn set_attr_recursive(&self, target: &Path, set: u64, clr: u64) -> io::Result<()> {
        crate::sys::mount::set_attr_recursive(target, set, clr)
    }
    #[inline]
    fn chdir(&self, dir: &CStr) -> io::Result<()> {
        // SAFETY: chdir with a valid C string.
        ok(unsafe { libc::chdir(dir.as_ptr()) })
    }
    fn getcwd(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: the raw getcwd syscall (not libc's, which may hide the kernel's
        // "(unreachable)" prefix) into a buffer of the length given.
        let n = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        // The length counts the terminating NUL.
        buf.truncate((n as usize).saturating_sub(1));
        Ok(buf)
    }
    #[inline]
    fn set_dumpable(&self, on: bool) -> io::Result<()> {
        // SAFETY: prctl with integer arguments.
        ok(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, on as libc::c_ulong, 0, 0, 0) })
    }
    #[inline]
    fn pivot_root_here(&self) -> io::Result<()> {
        let dot = c".";
        // SAFETY: pivot_root with valid C strings.
        ok(
            unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) }
                as libc::c_int,
        )
    }
    #[inline]
    fn detach(&self, target: &CStr) -> io::Result<()> {
        // SAFETY: umount2 with a valid C string.
        ok(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })
    }
    #[inline]
    fn statfs_type(&self, path: &CStr) -> io::Result<libc::__fsword_t> {
        // SAFETY: statfs into a zeroed struct.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above, with a valid C string.
        ok(unsafe { libc::statfs(path.as_ptr(), &mut st) })?;
        Ok(st.f_type)
    }
    #[inline]
    fn mount_flags(&self, path: &CStr) -> io::Result<libc::c_ulong> {
        // SAFETY: statvfs into a zeroed struct, with a valid C string.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        ok(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
        Ok(st.f_flag)
    }
    #[inline]
    fn lstat(&self, path: &Path) -> Option<Kind> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|md| Kind::of(md.file_type()))
    }
    #[inline]
    fn stat(&self, path: &Path) -> io::Result<Kind> {
        std::fs::metadata(path).map(|md| Kind::of(md.file_type()))
    }
    #[inline]
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        std::fs::read_link(path).ok()
    }
    #[inline]
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }
    #[inline]
    fn create_file(&self, path: &Path) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map(drop)
    }
    #[inline]
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn mount_point_of(&self, path: &Path) -> Option<PathBuf> {
        crate::sys::proc::own_mountinfo()
            .ok()?
            .into_iter()
            .map(|m| m.mount_point)
            .filter(|m| path.starts_with(m))
            .max_by_key(|m| m.as_os_str().len())
    }
    #[inline]
    fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    #[inline]
    fn write_proc(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        crate::sys::procfs::write(path, data)
    }
    #[inline]
    fn symlink(&self, target: &str, link: &Path) -> io::Result<()> {
        std::os::unix::fs::symlink(target, link)
    }
    #[inline]
    fn mknod(&self, path: &CStr, mode: libc::mode_t, major: u64, minor: u64) -> io::Result<()> {
        let dev = libc::makedev(major as u32, minor as u32);
        // SAFETY: mknod with a valid C string.
        ok(unsafe { libc::mknod(path.as_ptr(), mode, dev) })
    }
    #[inline]
    fn chown(&self, path: &CStr, uid: u32, gid: u32) -> io::Result<()> {
        // SAFETY: chown with a valid C string.
        ok(unsafe { libc::chown(path.as_ptr(), uid, gid) })
    }
    #[inline]
    fn umask(&self, mask: libc::mode_t) -> libc::mode_t {
        // SAFETY: umask has no failure mode.
        unsafe { libc::umask(mask) }
    }
    #[inline]
    fn is_root(&self) -> bool {
        // SAFETY: geteuid/getegid have no failure mode.
        unsafe { libc::geteuid() == 0 && libc::getegid() == 0 }
    }
    #[inline]
    fn setrlimit(&self, res: libc::__rlimit_resource_t, soft: u64, hard: u64) -> io::Result<()> {
        let lim = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: setrlimit with a valid struct.
        ok(unsafe { libc::setrlimit(res, &lim) })
    }
    #[inline]
    fn close_range_cloexec(&self, first: u32) {
        // SAFETY: close_range with the CLOEXEC flag only marks fds.
        unsafe {
            libc::syscall(
                libc::SYS_close_range,
                first,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
    }
    fn close_fds_except(&self, first: u32, keep: &[RawFd]) {
        let mut keep: Vec<u32> = keep
            .iter()
            .filter_map(|&f| u32::try_from(f).ok())
            .filter(|&f| f >= first)
            .collect();
        keep.sort_unstable();
        let mut lo = first;
        for k in keep.into_iter().chain([u32::MAX]) {
            if k > lo {
                // SAFETY: close_range on fds of this process that nothing here uses.
                unsafe { libc::syscall(libc::SYS_close_range, lo, k - 1, 0) };
            }
            lo = k.saturating_add(1);
        }
    }
    #[inline]
    fn setgroups(&self, groups: &[libc::gid_t]) -> io::Result<()> {
        // SAFETY: setgroups with a slice's pointer and length.
        ok(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) })
    }
    #[inline]
    fn keep_caps(&self, on: bool) -> io::Result<()> {
        // SAFETY: prctl with integer arguments.
        ok(unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, on as libc::c_ulong, 0, 0, 0) })
    }
    #[inline]
    fn setresgid(&self, gid: libc::gid_t) -> io::Result<()> {
        // SAFETY: a credential syscall with plain values.
        ok(unsafe { libc::setresgid(gid, gid, gid) })
    }
    #[inline]
    fn setresuid(&self, uid: libc::uid_t) -> io::Result<()> {
        // SAFETY: a credential syscall with plain values.
        ok(unsafe { libc::setresuid(uid, uid, uid) })
    }
    #[inline]
    fn drop_bounding(&self, caps: &Caps) -> crate::runtime::Result<()> {
        caps.apply_bounding()
    }
    #[inline]
    fn set_caps(&self, caps: &Caps) -> crate::runtime::Result<()> {
        caps.apply_rest()
    }
    #[inline]
    fn no_new_privs(&self) -> io::Result<()> {
        // SAFETY: prctl with integer arguments.
        ok(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
    }
    #[inline]
    fn seccomp(&self, filter: &Filter) -> crate::runtime::Result<()> {
        crate::runtime::seccomp::install(filter)
    }
    #[inline]
    fn set_hostname(&self, name: &CStr) -> io::Result<()> {
        // SAFETY: a valid C string and its length.
        ok(unsafe { libc::sethostname(name.as_ptr(), name.to_bytes().len()) })
    }
    #[inline]
    fn set_domainname(&self, name: &CStr) -> io::Result<()> {
        // SAFETY: a valid C string and its length.
        ok(unsafe { libc::setdomainname(name.as_ptr(), name.to_bytes().len()) })
    }
    #[inline]
    fn join_keyring(&self, name: &CStr) -> io::Result<()> {
        const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
        // SAFETY: keyctl with a valid C string.
        let rc =
            unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, name.as_ptr()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
    #[inline]
    fn personality(&self, persona: libc::c_ulong) -> io::Result<()> {
        // SAFETY: personality with a plain value.
        ok(unsafe { libc::personality(persona) })
    }
    #[inline]
    fn chroot(&self, dir: &CStr) -> io::Result<()> {
        // SAFETY: chroot with a valid C string.
        ok(unsafe { libc::chroot(dir.as_ptr()) })
    }
    #[inline]
    fn sync_send(&self, fd: RawFd, msg: &[u8]) -> io::Result<()> {
        crate::sys::packet::send(fd, msg)
    }
    #[inline]
    fn sync_recv(&self, fd: RawFd) -> io::Result<Vec<u8>> {
        // The creator's "go" carries two state documents, annotations and all.
        crate::sys::packet::recv(fd, 256 << 10)
    }
    #[inline]
    fn pass_gate(&self, fifo: RawFd) -> io::Result<()> {
        let path = std::ffi::CString::new(format!("/proc/self/fd/{fifo}")).unwrap_or_default();
        // SAFETY: open with a valid C string; blocks until a reader opens the fifo.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a one-byte write from a static buffer to our own fd. The fd stays open:
        // its close at exec (O_CLOEXEC) tells `start` that the program runs.
        let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        let e = io::Error::last_os_error();
        // SAFETY: closing the O_PATH fd of our own.
        unsafe { libc::close(fifo) };
        if n != 1 {
            return Err(e);
        }
        Ok(())
    }
    fn run_hooks(
        &self,
        phase: &str,
        hooks: &[oci_spec::runtime::Hook],
        state: &str,
    ) -> crate::runtime::Result<()> {
        crate::runtime::hooks::run(phase, hooks, state)
    }
    #[inline]
    fn access(&self, path: &CStr) -> io::Result<()> {
        // SAFETY: access with a valid C string.
        ok(unsafe { libc::access(path.as_ptr(), libc::F_OK) })
    }
    #[inline]
    fn execve(
        &self,
        path: &CStr,
        argv: &[*const libc::c_char],
        envp: &[*const libc::c_char],
    ) -> io::Error {
        // SAFETY: NUL-terminated argv/envp arrays of valid C strings (the caller's).
        unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        io::Error::last_os_error()
    }
}
