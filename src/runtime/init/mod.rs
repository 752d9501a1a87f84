//! The container's child process, from the clone to `execve` (docs/architecture.md §2, step 2–3).
//! Every failure is written to the start socket as one line with its context, then the
//! process exits with 128. [`setup`] holds the order of the set-up; each kernel call goes
//! through [`Kernel`], so that tests can record that order.

mod devices;
mod exec;
mod identity;
mod kernel;
mod mounts;
#[cfg(test)]
mod recorder;
mod standalone;
#[cfg(test)]
mod tests;

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use super::prepare::{c_path, Prepared};
use kernel::{Kernel, Linux};

use crate::runtime::Error;

type R = crate::runtime::Result<()>;

/// What a set-up that went well ends in: nothing, since exec does not return.
enum Never {}

/// Run in the child; never returns.
pub fn run(p: &Prepared, cgroup_tasks: &[PathBuf], sock: OwnedFd) -> ! {
    // The error crosses to the creator as its one line (`Spawned::start_error`, the
    // sync socket's `Failed`).
    let err = match setup(&Linux, p, cgroup_tasks, sock.as_raw_fd()) {
        Ok(never) => match never {},
        Err(e) => e.to_string(),
    };
    if p.standalone.is_some() {
        standalone::report(sock.as_raw_fd(), &err);
    } else {
        // SAFETY: writing a message to our socket.
        unsafe { libc::write(sock.as_raw_fd(), err.as_ptr().cast(), err.len()) };
    }
    // SAFETY: exiting without running destructors or atexit handlers of the supervisor
    // we were copied from (or share memory with).
    unsafe { libc::_exit(128) }
}

/// `report` is the fd a failure is written to, kept open until exec.
fn setup<K: Kernel>(
    k: &K,
    p: &Prepared,
    cgroup_tasks: &[PathBuf],
    report: RawFd,
) -> crate::runtime::Result<Never> {
    // A container of its own waits for its creator first: its user namespace's maps, its
    // cgroup and the state its hooks are given.
    let states = match &p.standalone {
        Some(s) => Some(standalone::wait_for_go(k, s, p.keep_fds)?),
        None => None,
    };
    // Into our cgroups before anything else, so that all we do is accounted there and the
    // cgroup namespace below is rooted in it.
    k.join_cgroups(cgroup_tasks)?;
    if p.user_ns_root && p.join.is_none() {
        // Still host root (v1's tasks files above needed that): now the pod's user
        // namespace's root, so that the rootfs set-up makes files of mapped ids.
        k.setresgid(0)
            .map_err(|e| Error::os("becoming root in the pod's user namespace (setresgid 0)", e))?;
        k.setresuid(0)
            .map_err(|e| Error::os("becoming root in the pod's user namespace (setresuid 0)", e))?;
    }
    k.reset_signals(p.ignored_signals);
    if p.new_cgroup_ns && p.join.is_none() {
        k.unshare(libc::CLONE_NEWCGROUP)
            .map_err(|e| Error::os("unshare(CLONE_NEWCGROUP)", e))?;
    }
    k.setsid();
    for (i, &fd) in p.stdio.iter().enumerate() {
        let target = i as libc::c_int;
        k.set_stdio(fd, target)
            .map_err(|e| Error::os(format!("dup2 fd {fd} to {target}"), e))?;
    }
    if let Some(target) = p.join {
        // Into the running container: its mount namespace (root and cwd become its root,
        // which pivot_root made the container's rootfs) and cgroup namespace. The pid
        // namespace was joined at clone time; sysctls and mounts are already in place.
        // A container sharing our mount namespace (`exec_root`) has none to join: its
        // root is chroot'ed into instead.
        let mut ns = if p.exec_root.is_some() {
            0
        } else {
            libc::CLONE_NEWNS
        };
        if p.new_cgroup_ns {
            ns |= libc::CLONE_NEWCGROUP;
        }
        ns |= p.join_flags;
        if ns != 0 {
            k.setns(target, ns)
                .map_err(|e| Error::os("joining the container's namespaces", e))?;
        }
        if let Some(root) = &p.exec_root {
            k.chdir(root)
                .map_err(|e| Error::os(format!("chdir {}", root.to_string_lossy()), e))?;
            k.chroot(c".")
                .map_err(|e| Error::os("chroot into the container's root", e))?;
            k.chdir(c"/").map_err(|e| Error::os("chdir /", e))?;
        }
        if p.terminal {
            k.console(p.console_sock, p.console_size)
                .map_err(|e| Error::os("setting up the terminal (process.terminal)", e))?;
        }
        return finish(k, p, None, report);
    }
    standalone::uts_and_keyring(k, p)?;
    mounts::rootfs(k, p, || match (&p.standalone, &states) {
        (Some(s), Some(st)) => standalone::before_pivot(k, s, st),
        _ => Ok(()),
    })?;
    if p.terminal {
        // After the root is in place: the terminal comes from the container's own devpts.
        k.console(p.console_sock, p.console_size)
            .map_err(|e| Error::os("setting up the terminal (process.terminal)", e))?;
    }
    finish(k, p, states.as_ref(), report)
}

/// The process part of the spec, common to a container's main process and an exec into it.
fn finish<K: Kernel>(
    k: &K,
    p: &Prepared,
    states: Option<&standalone::States>,
    report: RawFd,
) -> crate::runtime::Result<Never> {
    if let Some(adj) = p.oom_score_adj {
        match k.write_proc(
            Path::new("/proc/self/oom_score_adj"),
            adj.to_string().as_bytes(),
        ) {
            // Lowering the score needs CAP_SYS_RESOURCE: without it the process keeps the
            // lowest score it may have (containerd's `restrict_oom_score_adj`).
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
            r => r.map_err(|e| Error::os(format!("oom_score_adj {adj}"), e))?,
        }
    }
    for &(res, soft, hard) in &p.rlimits {
        k.setrlimit(res, soft, hard)
            .map_err(|e| Error::os(format!("setrlimit {res}"), e))?;
    }
    // From here on the process may be seen by the container's other processes with their
    // own credentials: not dumpable, so that none can open its /proc/PID/exe (the host's
    // binary), fds or memory before exec, which makes it dumpable again
    // (CVE-2016-9962). After oom_score_adj, which a process in a user namespace may no
    // longer write once its /proc files belong to the host's root.
    k.set_dumpable(false)
        .map_err(|e| Error::os("prctl(PR_SET_DUMPABLE, 0)", e))?;
    // Everything but 0–2 closes at exec (the start socket is CLOEXEC already): no fd leaks
    // into the container. Those set-up no longer needs are closed now, so that no path
    // through /proc/self/fd (the cwd, the program) can lead to a host directory before
    // exec (CVE-2024-21626). Done before a seccomp filter could refuse close_range.
    k.close_range_cloexec(3 + p.keep_fds);
    let (needed, n) = match &p.standalone {
        Some(s) => ([report, s.sync, s.fifo], 3),
        None => ([report; 3], 1),
    };
    k.close_fds_except(3 + p.keep_fds, &needed[..n]);
    // Installing a seccomp filter without no_new_privs needs CAP_SYS_ADMIN: then it comes
    // before the capabilities are dropped, else as late as possible (runc's order), so
    // that the profile has to allow as few of our own syscalls as possible.
    if let Some(f) = p.seccomp.as_ref().filter(|_| !p.no_new_privs) {
        k.seccomp(f)?;
    }
    identity::credentials(k, p)?;
    if let Some(m) = p.umask {
        k.umask(m as libc::mode_t);
    }
    {
        let cwd = c_path(&p.cwd)?;
        k.chdir(&cwd).map_err(|e| {
            Error::os(
                format!(
                    "chdir to cwd ({:?}) set in config.json failed",
                    p.cwd.display().to_string()
                ),
                e,
            )
        })?;
        // A cwd reached through a magic link (a /proc/self/fd/N the set-up still held) may lie
        // outside the container's root, where the kernel names it "(unreachable)…" (runc's
        // check since CVE-2024-21626).
        let now = k.getcwd().map_err(|e| {
            Error::os(
                format!("getcwd after chdir to {:?}", p.cwd.display().to_string()),
                e,
            )
        })?;
        if !now.starts_with(b"/") {
            return Err(Error::Start(format!(
                "cwd {:?} is outside the container's root filesystem",
                p.cwd.display().to_string()
            )));
        }
    }
    if let Some(persona) = p.personality {
        k.personality(persona)
            .map_err(|e| Error::os(format!("personality {persona:#x}"), e))?;
    }
    // Looked up before a container of its own reports itself ready, so that a missing
    // program fails `create` rather than `start`.
    let exe = exec::find(k, p)?;
    if let Some(f) = p.seccomp.as_ref().filter(|_| p.no_new_privs) {
        k.seccomp(f)?;
    }
    if let (Some(s), Some(st)) = (&p.standalone, states) {
        standalone::ready_and_wait(k, s, st)?;
    }
    exec::exec(k, p, exe)
}
