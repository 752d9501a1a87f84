//! The outer process while the pod runs: it relays SIGTERM/SIGINT to the supervisor and
//! waits for its end, announced on a pipe or seen as its exit.

use nix::sys::signal::{SigSet, Signal};
use std::os::fd::{AsFd, OwnedFd};

use crate::sys::clone::Cloned;
use crate::sys::signal_pipe::SignalPipe;

/// How the supervisor's run ended, as the outer process saw it.
pub(super) enum End {
    /// It wrote this exit status and is exiting (not waited for yet).
    Announced(i32),
    /// It announced its end and has exited (waited for): its exit code.
    Exited(i32),
    /// It died without announcing the pod's end (waited for): nobody wrote the pod's
    /// final status. Its exit code, 1 if a signal killed it.
    Lost(i32),
}

/// The signals relayed to the supervisor, blocked until the relay is in place; the
/// supervisor inherits the mask and unblocks them once its own handlers are installed.
pub(super) fn block_signals() -> SigSet {
    let relay = SigSet::from_iter([Signal::SIGTERM, Signal::SIGINT]);
    let _ = relay.thread_block();
    relay
}

/// Forward SIGTERM/SIGINT to the supervisor until it announces its end on `done` or exits.
pub(super) fn until_end(child: &Cloned, relay: &SigSet, done: &OwnedFd) -> End {
    let sig = SignalPipe::install(&[libc::SIGTERM, libc::SIGINT]);
    let _ = relay.thread_unblock();
    let sig = match sig {
        Ok(s) => s,
        Err(e) => {
            crate::log::warn(&format!("cannot relay signals to the pod: {e}"));
            return waited(child.pid, done);
        }
    };
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    // From here on this process only relays signals and waits. Its start-up pages are
    // given back a second from now, not at once: the supervisor was just cloned onto this
    // CPU and runs as soon as we sleep, and a short pod never needs them given back.
    // The release is made by the wait that follows, so that only that wait's code comes
    // back while the pod runs.
    let mut release = Some(PollTimeout::from(1000u16));
    let mut release_now = false;
    loop {
        let mut fds = [
            PollFd::new(sig.fd(), PollFlags::POLLIN),
            PollFd::new(child.pidfd.as_fd(), PollFlags::POLLIN),
            PollFd::new(done.as_fd(), PollFlags::POLLIN),
        ];
        let polled = if std::mem::take(&mut release_now) {
            crate::sys::pages::release_startup_pages_and_poll(&mut fds, PollTimeout::NONE)
        } else {
            poll(&mut fds, release.unwrap_or(PollTimeout::NONE))
        };
        match polled {
            Ok(0) => {
                release = None;
                release_now = true;
                continue;
            }
            Ok(_) => {}
            Err(_) => continue,
        }
        for s in sig.drain() {
            let _ = crate::sys::pidfd::send_signal(&child.pidfd, s);
        }
        if fds[2].revents().is_some_and(|r| !r.is_empty()) {
            return match announcement(done) {
                Some(code) => End::Announced(code),
                // Closed without a word: the supervisor is exiting, killed or crashed.
                None => waited(child.pid, done),
            };
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return waited(child.pid, done);
        }
    }
}

/// The exit status the supervisor wrote on `done`, if it did.
fn announcement(done: &OwnedFd) -> Option<i32> {
    let mut code = [0u8];
    match nix::unistd::read(done, &mut code) {
        Ok(1) => Some(i32::from(code[0])),
        _ => None,
    }
}

/// Wait for the supervisor to exit; then whether it had announced its end. Its word is
/// in the pipe by then, if it wrote one; the pipe is only looked at, as a process it
/// forked may still hold the other end open.
fn waited(pid: i32, done: &OwnedFd) -> End {
    let status = crate::sys::wait::wait_child(pid);
    let code = exit_code(status);
    let mut fds = [nix::poll::PollFd::new(
        done.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO);
    let readable = fds[0].revents().is_some_and(|r| !r.is_empty());
    if readable && announcement(done).is_some() {
        return End::Exited(code);
    }
    match status.filter(|&s| libc::WIFSIGNALED(s)) {
        // podinit never sends it a signal that kills.
        Some(s) => crate::log::error(&format!(
            "the pod's supervisor was killed by signal {}: the pod is down, and podinit run wrote its final status",
            libc::WTERMSIG(s)
        )),
        None => crate::log::error(&format!(
            "the pod's supervisor exited with {code} without writing the pod's end: the pod is down, and podinit run wrote its final status"
        )),
    }
    End::Lost(code)
}

/// Wait for the supervisor: its exit code, or 1 if a signal killed it (the pod cannot have
/// succeeded then).
pub(super) fn wait_supervisor(pid: i32) -> i32 {
    exit_code(crate::sys::wait::wait_child(pid))
}

fn exit_code(status: Option<i32>) -> i32 {
    match status {
        Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_death_is_exit_code_1() {
        assert_eq!(exit_code(Some(3 << 8)), 3);
        assert_eq!(exit_code(Some(libc::SIGKILL)), 1);
        assert_eq!(exit_code(None), 1);
    }

    #[test]
    fn the_announcement_is_one_byte_or_none() {
        let (r, w) = nix::unistd::pipe().unwrap();
        nix::unistd::write(&w, &[3]).unwrap();
        drop(w);
        assert_eq!(announcement(&r), Some(3));
        assert_eq!(announcement(&r), None);
    }
}
