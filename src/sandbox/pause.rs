//! The sandbox's PID 1 under containerd (docs/cri.md): podinit in pause's place. It holds
//! the pod's namespaces for as long as it lives, reaps every orphan reparented to it, and
//! ends on SIGTERM or SIGINT with status 0, as pause does.

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
