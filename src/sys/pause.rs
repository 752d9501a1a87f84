//! The sandbox's PID 1 under containerd (docs/cri.md): podinit in pause's place. It holds
//! the pod's namespaces for as long as it lives, reaps every orphan reparented to it, and
//! ends on SIGTERM or SIGINT with status 0, as pause does. Under `podinit run`, the same
//! loop is PID 1 of the shared pid namespace of a pod in a user namespace
//! ([`run_in_user_namespace`]).

use std::os::fd::RawFd;

/// Runs until SIGTERM or SIGINT; never returns.
pub fn run() -> ! {
    // SAFETY: an empty set filled with three valid signals, then blocked for this, the
    // only thread.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT] {
            libc::sigaddset(&mut set, s);
        }
        set
    };
    // Blocked and taken with sigtimedwait: no handler runs, so nothing but this loop exists.
    // SAFETY: as above.
    if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } != 0 {
        eprintln!(
            "podinit pause: blocking signals: {}",
            std::io::Error::last_os_error()
        );
        std::process::exit(1);
    }
    // It waits for the pod's life: none of the start-up's pages will be used again.
    crate::sys::pages::release_startup_pages();
    wait_loop(&set)
}

/// PID 1 of a pod's shared pid namespace in the pod's user namespace, made by the
/// supervisor (`supervisor::pause`) as a copy of itself that never execs. It becomes the
/// pod's root without capabilities, undumpable (its memory and its files are the
/// supervisor's: no container process may read them through `/proc/1`), named `pause`,
/// with none of the supervisor's files open; then it waits as [`run`] does. Closing
/// `ready` (above stdio) says it is ready; on failure it writes why there and exits.
pub fn run_in_user_namespace(ready: RawFd) -> ! {
    if let Err(e) = become_pause() {
        let e = format!("the pod's pause: {e}");
        // SAFETY: a write to the pipe our creator reads, then exiting.
        unsafe {
            libc::write(ready, e.as_ptr().cast(), e.len());
            libc::_exit(1)
        }
    }
    run()
}

fn become_pause() -> super::Result<()> {
    let os = |call: &'static str| super::Error::syscall(call, "", nix::errno::Errno::last());
    rename();
    // SAFETY: setgroups with no groups, then the pod's root ids: uid and gid 0 of the
    // user namespace we were born in.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            return Err(os("setgroups"));
        }
        if libc::setresgid(0, 0, 0) != 0 {
            return Err(os("setresgid"));
        }
        if libc::setresuid(0, 0, 0) != 0 {
            return Err(os("setresuid"));
        }
        if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 {
            return Err(os("prctl(PR_SET_DUMPABLE)"));
        }
    }
    for set in [
        caps::CapSet::Effective,
        caps::CapSet::Permitted,
        caps::CapSet::Inheritable,
    ] {
        caps::clear(None, set)
            .map_err(|e| super::Error::Invalid(format!("clearing {set:?}: {e}")))?;
    }
    let null = nix::fcntl::open(
        "/dev/null",
        nix::fcntl::OFlag::O_RDWR,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| super::Error::syscall("open", "/dev/null", e))?;
    let null = std::os::fd::IntoRawFd::into_raw_fd(null);
    for fd in 0..3 {
        // SAFETY: dup2 of an fd of ours over our stdio (`ready` is above it).
        if unsafe { libc::dup2(null, fd) } < 0 {
            return Err(os("dup2"));
        }
    }
    // SAFETY: close_range over every fd but stdio: the supervisor's, `ready` among them.
    if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) } != 0 {
        return Err(os("close_range"));
    }
    Ok(())
}

/// `pause` as `ps` shows it, for its name and its command line (the supervisor's until
/// now, which says where the pod's files are on the host).
fn rename() {
    // SAFETY: prctl with a NUL-terminated name.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"pause".as_ptr(), 0, 0, 0) };
    let Ok(stat) = procfs::process::Process::myself().and_then(|p| p.stat()) else {
        return;
    };
    if let (Some(start), Some(end)) = (stat.arg_start, stat.arg_end) {
        let (start, len) = (start as usize, end.saturating_sub(start) as usize);
        let name = b"pause";
        if len > name.len() {
            // SAFETY: [arg_start, arg_end) is our own argument strings, on our stack,
            // writable, read by nothing of ours after start-up.
            unsafe {
                std::ptr::write_bytes(start as *mut u8, 0, len);
                std::ptr::copy_nonoverlapping(name.as_ptr(), start as *mut u8, name.len());
            }
        }
    }
}

/// The whole life of the pause after start-up, in as few code pages as can be: every page
/// it touches again is mapped back with its neighbours (the kernel's fault-around, 64 KiB
/// a fault), so it calls the kernel through libc's `syscall` alone.
#[inline(never)]
fn wait_loop(set: &libc::sigset_t) -> ! {
    // The kernel's sigset is 8 bytes on every Linux architecture.
    const KERNEL_SIGSET: libc::c_long = 8;
    loop {
        // SAFETY: rt_sigtimedwait with a valid set, no info and no timeout.
        let sig = unsafe {
            libc::syscall(
                libc::SYS_rt_sigtimedwait,
                set as *const libc::sigset_t,
                std::ptr::null_mut::<libc::siginfo_t>(),
                std::ptr::null::<libc::timespec>(),
                KERNEL_SIGSET,
            )
        };
        match sig as libc::c_int {
            libc::SIGCHLD => {
                // Every child that has exited, without blocking.
                // SAFETY: wait4 with no status or rusage wanted.
                while unsafe {
                    libc::syscall(
                        libc::SYS_wait4,
                        -1,
                        std::ptr::null_mut::<libc::c_int>(),
                        libc::WNOHANG,
                        std::ptr::null_mut::<libc::rusage>(),
                    )
                } > 0
                {}
            }
            libc::SIGTERM | libc::SIGINT => {
                // SAFETY: ending the process, as pause does, with nothing to flush.
                unsafe { libc::syscall(libc::SYS_exit_group, 0) };
            }
            // EINTR (a stop and continue): wait again.
            _ => {}
        }
    }
}

/// What the Sandbox API's sandbox asks of the kernel for its PID 1 (docs/cri.md §6): the
/// network namespace containerd's CNI made, and which namespaces are the pod's own.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SandboxNamespaces {
    /// A network namespace to join (`None`: the caller's, a pod on the host network).
    pub netns: Option<std::path::PathBuf>,
    pub new_pid: bool,
    pub new_ipc: bool,
    pub new_uts: bool,
    /// Set in the new UTS namespace.
    pub hostname: Option<String>,
    /// `/proc/sys` paths (`net/ipv4/ip_forward`) and values, written once the namespaces
    /// are the pod's, so that they reach its network and IPC namespaces.
    pub sysctls: Vec<(String, String)>,
    /// The sandbox's cgroup, by its directories (one per v1 hierarchy, or the v2 one),
    /// entered as [`super::cgroup::Placement`] enters one: the starter joins the v1
    /// hierarchies' `tasks` before it forks, or the PID 1 is cloned into the v2 directory.
    /// Migrating the PID 1 afterwards (`cgroup.procs`) would take the kernel's threadgroup
    /// lock and an RCU grace period per hierarchy.
    pub cgroup: Option<SandboxCgroup>,
}

/// Where [`SandboxNamespaces::cgroup`] puts the PID 1.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SandboxCgroup {
    pub v2: bool,
    pub dirs: Vec<std::path::PathBuf>,
}

/// Makes the sandbox's namespaces and its PID 1: joins `netns`, unshares IPC and UTS,
/// sets the hostname and the sysctls, enters the cgroup, then forks the pause, PID 1 of a
/// new pid namespace,
/// and returns its pid; the pause never returns from here. The caller must be a fresh,
/// single-threaded process (the shim runs its own binary for this), and exits once it has
/// said the pid: the pause then belongs to the shim, its subreaper. The pause waits for a
/// byte on its stdin, the shim's word that it has recorded the pid, and ends at EOF there.
pub fn start_sandbox(ns: &SandboxNamespaces) -> super::Result<i32> {
    use super::Error;
    use nix::sched::CloneFlags;
    if let Some(path) = &ns.netns {
        let f = std::fs::File::open(path)
            .map_err(|e| Error::file("opening the network namespace", path, e))?;
        nix::sched::setns(f, CloneFlags::CLONE_NEWNET)
            .map_err(|e| Error::file("joining the network namespace", path, e.into()))?;
    }
    let mut flags = CloneFlags::empty();
    flags.set(CloneFlags::CLONE_NEWIPC, ns.new_ipc);
    flags.set(CloneFlags::CLONE_NEWUTS, ns.new_uts);
    nix::sched::unshare(flags).map_err(|e| Error::io("new IPC and UTS namespaces", e.into()))?;
    if let Some(h) = ns.hostname.as_deref().filter(|_| ns.new_uts) {
        nix::unistd::sethostname(h).map_err(|e| Error::io(format!("hostname {h:?}"), e.into()))?;
    }
    // Through a private procfs, as every write of podinit's under /proc goes.
    if !ns.sysctls.is_empty() {
        let proc = super::procfs::ProcRoot::open().map_err(|e| Error::io("opening procfs", e))?;
        for (path, value) in &ns.sysctls {
            proc.write(
                &std::path::Path::new("/proc/sys").join(path),
                value.as_bytes(),
            )
            .map_err(|e| Error::io(format!("sysctl {}={value}", path.replace('/', ".")), e))?;
        }
    }
    let pid_flag = if ns.new_pid {
        libc::CLONE_NEWPID as u64
    } else {
        0
    };
    let placement = match &ns.cgroup {
        Some(c) => Some(
            super::cgroup::Placement::of(c.v2, &c.dirs)
                .map_err(|e| Error::io("placing the sandbox's PID 1", e))?,
        ),
        None => None,
    };
    if let Some(p) = &placement {
        super::cgroup::join_self(&p.tasks)?;
    }
    let into = placement.as_ref().and_then(|p| p.dir.as_ref());
    match crate::sys::clone::fork(pid_flag, into.map(std::os::fd::AsFd::as_fd))
        .map_err(|e| Error::io("forking the sandbox's PID 1", e))?
    {
        Some(child) => Ok(child.pid),
        None => {
            // The pause keeps none of its starter's files: the pipe the shim reads the pid
            // from must close when the starter exits. It lives on only once the shim has
            // recorded it: a shim killed before then never knew of it, and it would be a
            // pod's PID 1 that nothing ends.
            match quiet_stdio().and_then(|()| recorded()) {
                Ok(true) => {}
                // SAFETY: ending the forked child without running its parent's exit code.
                Ok(false) => unsafe { libc::_exit(0) },
                // SAFETY: as above.
                Err(_) => unsafe { libc::_exit(1) },
            }
            rename();
            run()
        }
    }
}

/// Waits for the shim's word on stdin that it has recorded this PID 1 (a byte), then puts
/// /dev/null there (stdout's, which [`quiet_stdio`] opened read-write); `false` when the
/// pipe ends first (its writer, the shim, is gone).
fn recorded() -> super::Result<bool> {
    use super::Error;
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: a read of one byte into our own buffer.
        match unsafe { libc::read(0, byte.as_mut_ptr().cast(), 1) } {
            1 => break,
            0 => return Ok(false),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(Error::io("reading the shim's word on stdin", e));
                }
            }
        }
    }
    // SAFETY: dup2 of our stdout over our stdin.
    if unsafe { libc::dup2(1, 0) } < 0 {
        return Err(Error::io("dup2", std::io::Error::last_os_error()));
    }
    Ok(true)
}

/// /dev/null on stdout and stderr, every fd above them closed; stdin stays the shim's.
fn quiet_stdio() -> super::Result<()> {
    use super::Error;
    let null = nix::fcntl::open(
        "/dev/null",
        nix::fcntl::OFlag::O_RDWR,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| Error::file("opening", "/dev/null", e.into()))?;
    let null = std::os::fd::IntoRawFd::into_raw_fd(null);
    for fd in 1..3 {
        // SAFETY: dup2 of an fd of ours over our stdio.
        if unsafe { libc::dup2(null, fd) } < 0 {
            return Err(Error::io("dup2", std::io::Error::last_os_error()));
        }
    }
    // SAFETY: close_range over every fd but stdio.
    if unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) } != 0 {
        return Err(Error::io("close_range", std::io::Error::last_os_error()));
    }
    Ok(())
}
