//! Signal names for messages, and signal dispositions through the raw `rt_sigaction`.

/// Signal name for messages (`SIGTERM`), or the number.
pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// The kernel's `struct sigaction` (glibc's has another layout), for raw rt_sigaction:
/// it also reaches 32 and 33, which glibc's wrappers refuse to touch and which a caller
/// may have left ignored.
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

fn rt_sigaction(sig: i32, new: Option<&KernelSigaction>, old: Option<&mut KernelSigaction>) {
    // SAFETY: rt_sigaction with the kernel's struct layout and its 8-byte mask.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            new.map_or(std::ptr::null(), |n| n as *const KernelSigaction),
            old.map_or(std::ptr::null_mut(), |o| o as *mut KernelSigaction),
            8usize,
        );
    }
}

/// The signals this process ignores (bit `n - 1` for signal `n`), read once: what it
/// ignores is settled at start-up (Rust's SIGPIPE, whatever the caller left ignored).
pub fn ignored_signals() -> u64 {
    static IGNORED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *IGNORED.get_or_init(|| {
        (1..=64)
            .filter(|&sig| sig != libc::SIGKILL && sig != libc::SIGSTOP)
            .filter(|&sig| {
                let mut old = KernelSigaction::default();
                rt_sigaction(sig, None, Some(&mut old));
                old.handler == libc::SIG_IGN
            })
            .fold(0u64, |m, sig| m | 1 << (sig - 1))
    })
}

/// No signal blocked, and the `ignored` ones (as [`ignored_signals`] gives them) back to
/// their default. For a new process cloned with CLONE_CLEAR_SIGHAND, which has already
/// set every handled one back to its default.
pub fn reset_signals(ignored: u64) {
    // SAFETY: a plain signal-mask syscall on this (only) thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
    let default = KernelSigaction {
        handler: libc::SIG_DFL,
        ..Default::default()
    };
    for sig in (1..=64).filter(|s| ignored & 1 << (s - 1) != 0) {
        rt_sigaction(sig, Some(&default), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(200), "signal 200");
    }

    #[test]
    fn sigpipe_is_ignored_in_a_rust_program() {
        assert_ne!(ignored_signals() & 1 << (libc::SIGPIPE - 1), 0);
        assert_eq!(ignored_signals() & 1 << (libc::SIGKILL - 1), 0);
    }
}
