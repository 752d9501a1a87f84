//! The container's child process, from the clone to `execve` (DESIGN.md §2, step 2–3).
//! Every failure is written to the start socket as one line with its context, then the
//! process exits with 128.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::mounts::{self, MountKind};
use super::prepare::{c_path, Prepared};
use crate::sys::mount::mount;

type R = Result<(), String>;

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn check(rc: libc::c_int, what: impl FnOnce() -> String) -> R {
    if rc < 0 {
        Err(format!("{}: {}", what(), errno()))
    } else {
        Ok(())
    }
}

/// Run in the child; never returns.
pub fn run(p: &Prepared, cgroup_tasks: &[PathBuf], sock: OwnedFd) -> ! {
    let err = match setup(p, cgroup_tasks) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    // SAFETY: writing a message to our socket.
    unsafe { libc::write(sock.as_raw_fd(), err.as_ptr().cast(), err.len()) };
    // A vfork-like child (`runtime::spawn_in`) allocates from the supervisor's own heap:
    // what it does not free is lost to the supervisor for good.
    drop(err);
    // SAFETY: exiting without running destructors or atexit handlers of the supervisor
    // we were copied from (or share memory with).
    unsafe { libc::_exit(128) }
}

enum Never {}

fn setup(p: &Prepared, cgroup_tasks: &[PathBuf]) -> Result<Never, String> {
    // Into our cgroups before anything else, so that all we do is accounted there and the
    // cgroup namespace below is rooted in it.
    crate::sys::cgroup::join_self(cgroup_tasks)?;
    crate::sys::signals::reset_signals(p.ignored_signals);
    if p.new_cgroup_ns && p.join.is_none() {
        // SAFETY: unshare with a flag.
        check(unsafe { libc::unshare(libc::CLONE_NEWCGROUP) }, || {
            "unshare(CLONE_NEWCGROUP)".into()
        })?;
    }
    // SAFETY: setsid has no memory effects.
    unsafe { libc::setsid() };
    for (i, &fd) in p.stdio.iter().enumerate() {
        let target = i as libc::c_int;
        if fd == target {
            // SAFETY: clearing CLOEXEC on an fd we were given.
            unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        } else {
            // SAFETY: dup2 onto 0..2.
            check(unsafe { libc::dup2(fd, target) }, || {
                format!("dup2 fd {fd} to {target}")
            })?;
        }
    }
    if let Some(target) = p.join {
        // Into the running container: its mount namespace (root and cwd become its root,
        // which pivot_root made the container's rootfs) and cgroup namespace. The pid
        // namespace was joined at clone time; sysctls and mounts are already in place.
        let mut ns = libc::CLONE_NEWNS;
        if p.new_cgroup_ns {
            ns |= libc::CLONE_NEWCGROUP;
        }
        // SAFETY: setns with a pidfd we were given and namespace flags.
        check(unsafe { libc::setns(target, ns) }, || {
            "joining the container's namespaces".into()
        })?;
        return finish(p);
    }
    rootfs(p)?;
    for (path, value) in &p.sysctl {
        std::fs::write(path, value).map_err(|e| format!("sysctl {}: {e}", path.display()))?;
    }
    finish(p)
}

/// The process part of the spec, common to a container's main process and an exec into it.
fn finish(p: &Prepared) -> Result<Never, String> {
    if let Some(adj) = p.oom_score_adj {
        match std::fs::write("/proc/self/oom_score_adj", adj.to_string()) {
            // Lowering the score needs CAP_SYS_RESOURCE: without it the process keeps the
            // lowest score it may have (containerd's `restrict_oom_score_adj`).
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
            r => r.map_err(|e| format!("oom_score_adj {adj}: {e}"))?,
        }
    }
    for &(res, soft, hard) in &p.rlimits {
        let lim = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: setrlimit with a valid struct.
        check(unsafe { libc::setrlimit(res, &lim) }, || {
            format!("setrlimit {res}")
        })?;
    }
    // Everything but 0–2 closes at exec (the start socket is CLOEXEC already): no fd leaks
    // into the container. Done before a seccomp filter could refuse close_range.
    // SAFETY: close_range with the CLOEXEC flag only marks fds.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    // Installing a seccomp filter without no_new_privs needs CAP_SYS_ADMIN: then it comes
    // before the capabilities are dropped, else as late as possible (runc's order), so
    // that the profile has to allow as few of our own syscalls as possible.
    if let Some(f) = p.seccomp.as_ref().filter(|_| !p.no_new_privs) {
        super::seccomp::install(f)?;
    }
    credentials(p)?;
    if let Some(m) = p.umask {
        // SAFETY: umask has no failure mode.
        unsafe { libc::umask(m as libc::mode_t) };
    }
    let cwd = c_path(&p.cwd)?;
    // SAFETY: chdir with a valid C string.
    check(unsafe { libc::chdir(cwd.as_ptr()) }, || {
        format!(
            "chdir to cwd ({:?}) set in config.json failed",
            p.cwd.display().to_string()
        )
    })?;
    if let Some(f) = p.seccomp.as_ref().filter(|_| p.no_new_privs) {
        super::seccomp::install(f)?;
    }
    exec(p)
}

fn rootfs(p: &Prepared) -> R {
    mount(None, Path::new("/"), None, p.root_propagation, "").map_err(|e| {
        format!(
            "making / {}: {e}",
            if p.root_propagation & libc::MS_SLAVE != 0 {
                "rslave"
            } else {
                "private"
            }
        )
    })?;
    // pivot_root needs the root to be a mount point.
    mount(
        Some(&p.root),
        &p.root,
        None,
        libc::MS_BIND | libc::MS_REC,
        "",
    )
    .map_err(|e| format!("bind-mounting the rootfs {}: {e}", p.root.display()))?;
    for m in &p.mounts {
        mount_one(p, m)?;
    }
    if p.dev_is_tmpfs {
        dev(p)?;
    }
    let root = c_path(&p.root)?;
    // SAFETY: chdir/pivot_root/umount2 with valid C strings.
    unsafe {
        check(libc::chdir(root.as_ptr()), || {
            format!("chdir {}", p.root.display())
        })?;
        let dot = c".";
        check(
            libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) as libc::c_int,
            || "pivot_root".into(),
        )?;
        check(libc::umount2(dot.as_ptr(), libc::MNT_DETACH), || {
            "detaching the old root".into()
        })?;
        check(libc::chdir(c"/".as_ptr()), || "chdir /".into())?;
    }
    for path in &p.masked {
        mask(path)?;
    }
    for path in &p.readonly {
        readonly(path)?;
    }
    if p.root_readonly {
        mount(
            None,
            Path::new("/"),
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            "",
        )
        .map_err(|e| format!("making the root filesystem read-only: {e}"))?;
    }
    Ok(())
}

fn mount_one(p: &Prepared, m: &mounts::MountPlan) -> R {
    if m.kind == MountKind::Cgroup && !p.cgroup2_host {
        // A v1 cgroup mount needs one mount per hierarchy and a cgroup namespace to be
        // safe; podinit does not give containers a view of v1 cgroups.
        return Ok(());
    }
    let dest = m.destination.display().to_string();
    let raw_target = p
        .root
        .join(m.destination.strip_prefix("/").unwrap_or(&m.destination));
    // The walk below looks at every component once; what it saw of the last one (and of
    // the destination as written) spares the stat calls each check below would make.
    let seen = std::cell::RefCell::new(Vec::<(PathBuf, Option<std::fs::FileType>)>::new());
    let lookup = |path: &Path| {
        let md = std::fs::symlink_metadata(path).ok();
        let link = md
            .as_ref()
            .filter(|md| md.file_type().is_symlink())
            .and_then(|_| std::fs::read_link(path).ok());
        seen.borrow_mut()
            .push((path.to_path_buf(), md.map(|md| md.file_type())));
        link
    };
    let target = mounts::secure_join(&p.root, &m.destination, &lookup)?;
    let seen = seen.into_inner();
    let kind_of = |path: &Path| seen.iter().rev().find(|(p, _)| p == path).map(|(_, t)| *t);
    let is_proc_like = matches!(m.fstype.as_deref(), Some("proc") | Some("sysfs"));
    if is_proc_like {
        let raw_is_link = match kind_of(&raw_target) {
            Some(t) => t.is_some_and(|t| t.is_symlink()),
            None => {
                std::fs::symlink_metadata(&raw_target).is_ok_and(|md| md.file_type().is_symlink())
            }
        };
        if raw_is_link {
            return Err(format!(
                "mount {}: target {dest} is a symlink",
                m.fstype.as_deref().unwrap_or("")
            ));
        }
    }
    let src_is_file = m.kind == MountKind::Bind
        && m.source
            .as_ref()
            .is_some_and(|s| std::fs::metadata(s).is_ok_and(|md| !md.is_dir()));
    // Some(None): the walk saw that the target does not exist; None: it did not look.
    let existing = kind_of(&target);
    if src_is_file {
        let exists = match existing {
            Some(t) => t.is_some(),
            None => std::fs::symlink_metadata(&target).is_ok(),
        };
        if !exists {
            create_file(&target)
                .map_err(|e| format!("mount {dest}: creating {}: {e}", target.display()))?;
        }
    } else if !existing.is_some_and(|t| t.is_some_and(|t| t.is_dir())) {
        crate::util::ensure_dir(&target)
            .map_err(|e| format!("mount {dest}: creating {}: {e}", target.display()))?;
    }
    let res = match m.kind {
        MountKind::Bind => mount(
            m.source.as_deref(),
            &target,
            None,
            m.flags & (libc::MS_BIND | libc::MS_REC),
            "",
        ),
        MountKind::Cgroup => mount(
            Some(Path::new("cgroup2")),
            &target,
            Some("cgroup2"),
            m.flags,
            &m.data,
        ),
        MountKind::Other => mount(
            m.source.as_deref(),
            &target,
            m.fstype.as_deref(),
            m.flags,
            &m.data,
        ),
    };
    res.map_err(|e| {
        let src = m
            .source
            .as_ref()
            .map(|s| s.display().to_string())
            .unwrap_or_default();
        format!(
            "mount {src} on {dest} ({}): {e}",
            m.fstype.as_deref().unwrap_or("bind")
        )
    })?;
    if m.remount {
        mount(
            None,
            &target,
            None,
            m.flags | libc::MS_REMOUNT | libc::MS_BIND,
            "",
        )
        .map_err(|e| format!("remounting {dest} with its options: {e}"))?;
    }
    if m.propagation != 0 {
        mount(None, &target, None, m.propagation, "")
            .map_err(|e| format!("setting propagation of {dest}: {e}"))?;
    }
    if m.fstype.as_deref() == Some("proc") {
        // The mount must really be procfs before anything is written under it.
        let c = c_path(&target)?;
        // SAFETY: statfs into a zeroed struct.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        check(unsafe { libc::statfs(c.as_ptr(), &mut st) }, || {
            format!("statfs {dest}")
        })?;
        if st.f_type != libc::PROC_SUPER_MAGIC {
            return Err(format!("{dest} is not procfs after mounting it"));
        }
    }
    Ok(())
}

/// An empty file to bind-mount a file onto (an existing one is kept as it is).
fn create_file(path: &Path) -> std::io::Result<()> {
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            open().map(drop)
        }
        r => r.map(drop),
    }
}

/// The default devices of an OCI container, the spec's own, and /dev's links.
fn dev(p: &Prepared) -> R {
    let dev = p.root.join("dev");
    let defaults: [(&str, u64, u64); 6] = [
        ("null", 1, 3),
        ("zero", 1, 5),
        ("full", 1, 7),
        ("random", 1, 8),
        ("urandom", 1, 9),
        ("tty", 5, 0),
    ];
    // SAFETY: umask has no failure mode; restored below.
    let old = unsafe { libc::umask(0) };
    let mut res = Ok(());
    // New nodes are owned by our euid and egid, unless a setgid /dev gives them its group,
    // which only a tmpfs `gid=` option can make other than root's: then each is chowned.
    let gid_option = p.mounts.iter().any(|m| {
        m.destination == Path::new("/dev") && m.data.split(',').any(|o| o.starts_with("gid="))
    });
    // SAFETY: geteuid/getegid have no failure mode.
    let root_owned = !gid_option && unsafe { libc::geteuid() == 0 && libc::getegid() == 0 };
    for (name, major, minor) in defaults {
        // /dev is the tmpfs just mounted: one mknod each, owned by us (root) already.
        // Anything in the way (a spec's bind mount) takes the careful way.
        let path = dev.join(name);
        let c = c_path(&path)?;
        let mode = libc::S_IFCHR | 0o666;
        // SAFETY: mknod with a valid path.
        let quick = root_owned
            && unsafe { libc::mknod(c.as_ptr(), mode, libc::makedev(major as u32, minor as u32)) }
                == 0;
        if !quick {
            res = res.and(mknod(&path, libc::S_IFCHR, major, minor, 0o666, 0, 0));
        }
    }
    for d in &p.devices {
        let target = mounts::secure_join(&p.root, &d.path, &mounts::fs_symlink)?;
        res = res.and(mknod(
            &target, d.kind, d.major, d.minor, d.mode, d.uid, d.gid,
        ));
    }
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    res?;
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
    ] {
        symlink_unless_present(target, &dev.join(link))
            .map_err(|e| format!("creating /dev/{link}: {e}"))?;
    }
    // Dangling without a devpts at /dev/pts, as runc's is.
    symlink_unless_present("pts/ptmx", &dev.join("ptmx"))
        .map_err(|e| format!("creating /dev/ptmx: {e}"))?;
    Ok(())
}

/// A link where nothing is (whatever is there already, a spec's device or mount, stays).
fn symlink_unless_present(target: &str, link: &Path) -> std::io::Result<()> {
    match std::os::unix::fs::symlink(target, link) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

fn mknod(
    path: &Path,
    kind: libc::mode_t,
    major: u64,
    minor: u64,
    mode: libc::mode_t,
    uid: u32,
    gid: u32,
) -> R {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("creating {}: {e}", parent.display()))?;
    }
    let _ = std::fs::remove_file(path);
    let c = c_path(path)?;
    // SAFETY: mknod/chown with a valid path.
    unsafe {
        check(
            libc::mknod(
                c.as_ptr(),
                kind | mode,
                libc::makedev(major as u32, minor as u32),
            ),
            || format!("mknod {}", path.display()),
        )?;
        check(libc::chown(c.as_ptr(), uid, gid), || {
            format!("chown {}", path.display())
        })?;
    }
    Ok(())
}

/// /dev/null over a file, an empty read-only tmpfs over a directory, nothing where nothing
/// is. Looked at first: a bind of /dev/null refused on a directory (runc's way to tell)
/// makes the kernel unmount the copy it had made, and wait an RCU grace period for it
/// (≈ 0.2 ms each here).
fn mask(path: &Path) -> R {
    let md = match std::fs::metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("masking {}: {e}", path.display())),
    };
    let res = if md.is_dir() {
        mount(
            Some(Path::new("tmpfs")),
            path,
            Some("tmpfs"),
            libc::MS_RDONLY,
            "size=0",
        )
    } else {
        mount(Some(Path::new("/dev/null")), path, None, libc::MS_BIND, "")
    };
    res.map_err(|e| format!("masking {}: {e}", path.display()))
}

fn readonly(path: &Path) -> R {
    let p = PathBuf::from(path);
    match mount(Some(&p), &p, None, libc::MS_BIND | libc::MS_REC, "") {
        // Nothing there: nothing to protect.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        r => r.map_err(|e| format!("read-only {}: {e}", path.display()))?,
    }
    let flags = libc::MS_BIND
        | libc::MS_REMOUNT
        | libc::MS_RDONLY
        | libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC;
    mount(None, &p, None, flags, "")
        .or_else(|_| {
            mount(
                None,
                &p,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                "",
            )
        })
        .map_err(|e| format!("read-only {}: {e}", path.display()))
}

fn credentials(p: &Prepared) -> R {
    p.caps.apply_bounding()?;
    // SAFETY: credential syscalls with plain values.
    unsafe {
        check(libc::setgroups(p.groups.len(), p.groups.as_ptr()), || {
            "setgroups".into()
        })?;
        check(libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0), || {
            "PR_SET_KEEPCAPS".into()
        })?;
        check(libc::setresgid(p.gid, p.gid, p.gid), || {
            format!("setresgid {}", p.gid)
        })?;
        check(libc::setresuid(p.uid, p.uid, p.uid), || {
            format!("setresuid {}", p.uid)
        })?;
        check(libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0), || {
            "PR_SET_KEEPCAPS".into()
        })?;
    }
    p.caps.apply_rest()?;
    if p.no_new_privs {
        // SAFETY: prctl with integer arguments.
        check(
            unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) },
            || "PR_SET_NO_NEW_PRIVS".into(),
        )?;
    }
    Ok(())
}

fn exec(p: &Prepared) -> Result<Never, String> {
    let mut argv: Vec<*const libc::c_char> = p.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = p.env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut last = None;
    for cand in &p.exe_candidates {
        // A failed execve costs twice a failed access: look first along PATH.
        // SAFETY: access with a valid C string.
        if p.exe_candidates.len() > 1 && unsafe { libc::access(cand.as_ptr(), libc::F_OK) } != 0 {
            let e = errno();
            if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) {
                last = Some(e);
                continue;
            }
        }
        // SAFETY: NUL-terminated argv/envp arrays of valid C strings.
        unsafe { libc::execve(cand.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        let e = errno();
        // Keep looking along PATH only when this one does not exist.
        let missing = matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR));
        if !missing || p.exe_candidates.len() == 1 {
            return Err(format!("exec: {:?}: {e}", cand.to_string_lossy()));
        }
        last = Some(e);
    }
    let _ = last;
    Err(format!(
        "exec: {:?}: executable file not found in $PATH",
        p.argv0
    ))
}
