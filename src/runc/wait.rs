//! A container's process in the foreground (`run`, `exec` without `-d`): we are its
//! parent, so we reap it (and, as subreaper, whatever it leaves), forward the signals we
//! get to it as runc does, relay its terminal when we hold the master, and exit with its
//! status (128 + the signal when one killed it).

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use crate::sys::signals::Blocked;

use super::log;

/// How long one look for signals (and, with a terminal, for I/O) lasts.
const TICK_MS: i32 = 50;

/// The exit status of a process as a shell reports it.
pub fn exit_code(ws: WaitStatus) -> Option<i32> {
    match ws {
        WaitStatus::Exited(_, c) => Some(c),
        WaitStatus::Signaled(_, s, _) => Some(128 + s as i32),
        _ => None,
    }
}

/// Signals kept for ourselves: faults of this process, and the ones no process can catch.
fn forwardable(sig: i32) -> bool {
    ![
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGTRAP,
    ]
    .contains(&sig)
}

/// Block every signal we forward (they are taken with sigtimedwait instead). They stay
/// blocked until we exit, so that a signal that comes once the process has ended cannot
/// stop us before the container is deleted; the hooks we run then get a clean mask from
/// `std::process::Command`.
fn block_signals() -> Blocked {
    Blocked::block((1..=libc::SIGRTMAX()).filter(|s| forwardable(*s)))
}

/// Wait for process `pid` (our child), forwarding signals to it through `pidfd`; with
/// `console` (the master of its terminal), relay it to our stdio. Its exit status.
pub fn foreground(
    pid: i32,
    pidfd: &OwnedFd,
    console: Option<OwnedFd>,
) -> Result<i32, super::Error> {
    MAIN.store(pid, std::sync::atomic::Ordering::Relaxed);
    let set = block_signals();
    let mut relay = console.map(Relay::new);
    loop {
        reap_orphans();
        if let Some(code) = reap(pid)? {
            if let Some(r) = &mut relay {
                r.drain();
            }
            return Ok(code);
        }
        if let Some(r) = &mut relay {
            r.step(TICK_MS, pidfd);
        }
        let timeout = if relay.is_some() {
            Duration::ZERO
        } else {
            Duration::from_millis(TICK_MS as u64)
        };
        match set.wait(timeout) {
            None | Some(libc::SIGCHLD) | Some(libc::SIGURG) => {}
            Some(libc::SIGWINCH) => {
                if let Some(r) = &relay {
                    r.resize();
                }
            }
            Some(s) => {
                if let Err(e) = crate::sys::pidfd::send_signal(pidfd, s) {
                    log::debug(&format!("forwarding signal {s} to {pid}: {e}"));
                }
            }
        }
    }
}

/// Reap the processes the container left to us (we are their subreaper), but not the
/// container's own, whose status `reap` takes.
fn reap_orphans() {
    use nix::sys::wait::{waitid, Id};
    // Look first (WNOWAIT), so that the container's own status is left for `reap`.
    while let Ok(ws) = waitid(
        Id::All,
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
    ) {
        match ws.pid() {
            Some(p) if !is_main(p.as_raw()) => {
                let _ = waitpid(p, Some(WaitPidFlag::WNOHANG));
            }
            _ => return,
        }
    }
}

/// The process `foreground` waits for, so that `reap_orphans` leaves it.
static MAIN: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

fn is_main(pid: i32) -> bool {
    pid == MAIN.load(std::sync::atomic::Ordering::Relaxed)
}

/// `pid`'s exit status once it has exited (reaped).
fn reap(pid: i32) -> Result<Option<i32>, super::Error> {
    loop {
        match waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(ws) => {
                if let Some(code) = exit_code(ws) {
                    return Ok(Some(code));
                }
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::ECHILD) => {
                return Err(super::Error::Other(format!(
                    "process {pid} is not a child of this process"
                )))
            }
            Err(e) => {
                return Err(super::Error::Other(format!(
                    "waiting for process {pid}: {e}"
                )))
            }
        }
    }
}

/// Copies between our stdio and the container's terminal, our terminal in raw mode
/// meanwhile.
struct Relay {
    master: OwnedFd,
    stdin_open: bool,
    saved: Option<nix::sys::termios::Termios>,
}

impl Relay {
    fn new(master: OwnedFd) -> Relay {
        let _ = nix::fcntl::fcntl(
            &master,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        );
        let stdin = std::io::stdin();
        let saved = nix::sys::termios::tcgetattr(&stdin).ok();
        if let Some(t) = &saved {
            let mut raw = t.clone();
            nix::sys::termios::cfmakeraw(&mut raw);
            let _ = nix::sys::termios::tcsetattr(&stdin, nix::sys::termios::SetArg::TCSANOW, &raw);
        }
        let r = Relay {
            master,
            stdin_open: true,
            saved,
        };
        r.resize();
        r
    }

    /// Give the container's terminal the size of ours.
    fn resize(&self) {
        if let Ok((rows, cols)) = crate::sys::pty::size(0) {
            let _ = crate::sys::pty::set_size(self.master.as_raw_fd(), rows, cols);
        }
    }

    /// Wait up to `ms` for input on either side, or for the process (`pidfd`) to exit,
    /// and copy what there is.
    fn step(&mut self, ms: i32, pidfd: &OwnedFd) {
        let stdin = std::io::stdin();
        let mut fds = vec![
            PollFd::new(self.master.as_fd(), PollFlags::POLLIN),
            PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
        ];
        if self.stdin_open {
            fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
        }
        let timeout = PollTimeout::try_from(ms).unwrap_or(PollTimeout::NONE);
        if !matches!(poll(&mut fds, timeout), Ok(n) if n > 0) {
            return;
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let (master_ready, stdin_ready) = (ready(&fds[0]), fds.get(2).is_some_and(ready));
        drop(fds);
        if master_ready {
            self.drain();
        }
        if stdin_ready && !copy(stdin.as_fd(), self.master.as_fd()) {
            self.stdin_open = false;
        }
    }

    /// Copy what the terminal has written to our stdout.
    fn drain(&mut self) {
        let stdout = std::io::stdout();
        while copy(self.master.as_fd(), stdout.as_fd()) {}
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                t,
            );
        }
    }
}

/// One read from `from` written whole to `to`; false at EOF, an error or nothing to read.
fn copy(from: BorrowedFd, to: BorrowedFd) -> bool {
    let mut buf = [0u8; 4096];
    let n = match nix::unistd::read(from, &mut buf) {
        Ok(n) if n > 0 => n,
        _ => return false,
    };
    let mut done = 0usize;
    while done < n {
        match nix::unistd::write(to, &buf[done..n]) {
            Ok(w) if w > 0 => done += w,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;
    use nix::unistd::Pid;

    #[test]
    fn exit_codes_as_a_shell_reports_them() {
        let p = Pid::from_raw(1);
        assert_eq!(exit_code(WaitStatus::Exited(p, 3)), Some(3));
        assert_eq!(
            exit_code(WaitStatus::Signaled(p, Signal::SIGKILL, false)),
            Some(137)
        );
        assert_eq!(exit_code(WaitStatus::StillAlive), None);
        assert!(!forwardable(libc::SIGKILL));
        assert!(forwardable(libc::SIGTERM));
    }

    #[test]
    fn a_program_spawned_while_signals_are_blocked_starts_with_none_blocked() {
        // What the hooks run after the foreground wait rely on (see block_signals).
        let set = block_signals();
        let out = std::process::Command::new("sh")
            .args(["-c", "grep SigBlk /proc/self/status"])
            .output()
            .unwrap();
        set.unblock();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.trim().ends_with("0000000000000000"), "{text}");
    }

    #[test]
    fn a_child_is_reaped_with_its_status() {
        #[allow(clippy::zombie_processes)] // reaped by `reap`, the code under test
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let fd = crate::sys::pidfd::open(pid).unwrap();
        assert!(crate::sys::pidfd::exited(&fd, 5000).unwrap());
        assert_eq!(reap(pid).unwrap(), Some(7));
    }
}
