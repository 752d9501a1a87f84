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

/// Send `sig` (any signal, realtime ones included) to process `pid`.
pub fn kill(pid: i32, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) takes plain integers.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Ignore `sig` from now on (`SIG_IGN`; an exec keeps it ignored).
pub fn ignore(sig: i32) {
    let ignore = KernelSigaction {
        handler: libc::SIG_IGN,
        ..Default::default()
    };
    rt_sigaction(sig, Some(&ignore), None);
}

/// A set of signals blocked on this thread, to be taken with [`Blocked::wait`] rather
/// than by a handler.
pub struct Blocked(libc::sigset_t);

impl Blocked {
    /// Block `signals` on this thread (realtime ones included).
    pub fn block(signals: impl IntoIterator<Item = i32>) -> Blocked {
        // SAFETY: a sigset of our own, filled with valid signals, then pthread_sigmask on
        // this thread.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for sig in signals {
                libc::sigaddset(&mut set, sig);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Blocked(set)
        }
    }

    /// The next pending signal of the set, waiting up to `timeout` for one: None when
    /// none came (or the wait was interrupted).
    pub fn wait(&self, timeout: std::time::Duration) -> Option<i32> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: sigtimedwait on our set, no siginfo wanted, a valid timeout.
        let sig = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &ts) };
        (sig > 0).then_some(sig)
    }

    /// Unblock the set on this thread.
    pub fn unblock(&self) {
        // SAFETY: pthread_sigmask on this thread with our set.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &self.0, std::ptr::null_mut()) };
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
