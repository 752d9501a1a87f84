//! The memory floor of a pod's two processes on this kernel (scripts/bench.py's memory
//! rows): what a static Rust process pair costs that does nothing but what podinit's outer
//! process and supervisor must at rest, with the same build settings as podinit (static,
//! fixed-address, `opt-level = "z"`, LTO, `panic = "abort"`).
//!
//! `memory_floor [--rootless]` makes a process that is PID 1 of a new pid namespace (and,
//! with `--rootless`, first a user and mount namespace of the caller's own id, as a user
//! without root must) and waits for it with a pidfd in `poll`, as the outer process waits
//! for the supervisor; PID 1 waits in `poll` on a signal fd. Both give their start-up
//! pages back in that wait, as podinit's processes do
//! (`podinit::sys::pages::release_startup_pages_and_poll`). It prints `OUTER_PID PID1_PID`
//! before they wait, and ends when PID 1 is killed (SIGKILL from outside).

use std::io::Write;

fn die(what: &str) -> ! {
    eprintln!("memory_floor: {what}: {}", std::io::Error::last_os_error());
    // SAFETY: _exit ends the process without atexit handlers.
    unsafe { libc::_exit(1) }
}

/// Write one line of a map of this process (an unprivileged user's single-id map).
fn write_file(path: &str, text: &str) {
    if std::fs::write(path, text).is_err() {
        die(path)
    }
}

/// Wait until `fd` is readable, with the start-up pages given back first.
fn wait_for(fd: libc::c_int) {
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    // SAFETY: `fd` stays open for the whole wait.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    while podinit::sys::pages::release_startup_pages_and_poll(&mut fds, PollTimeout::NONE).is_err()
    {
    }
}

fn main() {
    let rootless = std::env::args().any(|a| a == "--rootless");
    // SAFETY: plain syscalls of a single-threaded process.
    unsafe {
        if rootless {
            let (uid, gid) = (libc::geteuid(), libc::getegid());
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                die("unshare(CLONE_NEWUSER|CLONE_NEWNS)")
            }
            write_file("/proc/self/setgroups", "deny");
            write_file("/proc/self/uid_map", &format!("0 {uid} 1\n"));
            write_file("/proc/self/gid_map", &format!("0 {gid} 1\n"));
        }
        let mut pidfd: libc::c_int = -1;
        let mut args: libc::clone_args = std::mem::zeroed();
        args.flags = (libc::CLONE_NEWPID | libc::CLONE_PIDFD) as u64;
        args.pidfd = &mut pidfd as *mut libc::c_int as u64;
        args.exit_signal = libc::SIGCHLD as u64;
        let pid = libc::syscall(
            libc::SYS_clone3,
            &args as *const libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        );
        if pid < 0 {
            die("clone3(CLONE_NEWPID)")
        }
        if pid == 0 {
            // PID 1: block the signals it handles and wait on a signalfd, as the
            // supervisor's loop waits on its signal pipe.
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
            wait_for(fd);
            loop {
                libc::pause();
            }
        }
        println!("{} {}", libc::getpid(), pid);
        let _ = std::io::stdout().flush();
        wait_for(pidfd);
        let mut status = 0;
        libc::waitpid(pid as libc::pid_t, &mut status, 0);
    }
}
