//! The sandbox's PID 1 under containerd (docs/cri.md): podinit in pause's place. It holds
//! the pod's namespaces for as long as it lives, reaps every orphan reparented to it, and
//! ends on SIGTERM or SIGINT with status 0, as pause does.

use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};

/// Runs until SIGTERM or SIGINT; never returns.
pub fn run() -> ! {
    let mut set = SigSet::empty();
    for s in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT] {
        set.add(s);
    }
    // Blocked and taken with sigwait: no handler runs, so nothing but this loop exists.
    if let Err(e) = set.thread_block() {
        eprintln!("podinit pause: blocking signals: {e}");
        std::process::exit(1);
    }
    // It waits for the pod's life: none of the start-up's pages will be used again.
    crate::sys::pages::release_startup_pages();
    loop {
        match set.wait() {
            Ok(Signal::SIGCHLD) => reap_all(),
            Ok(_) => std::process::exit(0),
            Err(_) => continue,
        }
    }
}

/// Every child that has exited, without blocking.
fn reap_all() {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => continue,
        }
    }
}
