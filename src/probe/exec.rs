//! An exec handler in flight: a process started inside the container by
//! `runtime::spawn_in`, its output collected (at most 10 KiB kept) from one pipe that is
//! both its stdout and stderr. It ends when the process is reaped, or at its deadline
//! (then it is SIGKILLed).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::Outcome;
use crate::runtime::Spawned;

/// Output kept for the event message of a probe or hook (kubelet's limit).
pub const MAX_OUTPUT: usize = 10 << 10;

/// Read a non-blocking pipe until it would block, keeping at most `limit` bytes; at EOF
/// the pipe is closed.
fn drain_into(fd: &mut Option<OwnedFd>, into: &mut Vec<u8>, limit: usize) {
    let Some(f) = fd else { return };
    let mut buf = [0u8; 8192];
    loop {
        match nix::unistd::read(&*f, &mut buf) {
            Ok(0) => {
                *fd = None;
                return;
            }
            Ok(n) => {
                let room = limit.saturating_sub(into.len());
                into.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

pub struct ExecCheck {
    pub pid: i32,
    pidfd: OwnedFd,
    out: Option<OwnedFd>,
    output: Vec<u8>,
    /// A separate stderr (`podinit exec`), else stderr goes to `out` too.
    err: Option<OwnedFd>,
    err_output: Vec<u8>,
    /// Output kept per stream.
    limit: usize,
    start_error: Option<String>,
    /// The command, for messages.
    command: String,
}

impl ExecCheck {
    /// `out`: the read end of the output pipe (non-blocking); `err`: a separate one for
    /// stderr; at most `limit` bytes of each are kept.
    pub fn new(
        sp: Spawned,
        out: OwnedFd,
        err: Option<OwnedFd>,
        limit: usize,
        command: &[String],
    ) -> ExecCheck {
        ExecCheck {
            pid: sp.pid.as_raw(),
            pidfd: sp.pidfd,
            out: Some(out),
            output: Vec::new(),
            err,
            err_output: Vec::new(),
            limit,
            start_error: sp.start_error,
            command: command.join(" "),
        }
    }

    /// The output pipes.
    pub fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.out
            .iter()
            .chain(self.err.iter())
            .map(|f| f.as_fd())
            .collect()
    }

    /// Read the output that is there. Never ends the check (the exit does).
    pub fn on_ready(&mut self) -> Option<super::Outcome> {
        self.drain();
        None
    }

    fn drain(&mut self) {
        drain_into(&mut self.out, &mut self.output, self.limit);
        drain_into(&mut self.err, &mut self.err_output, self.limit);
    }

    /// The process was reaped with wait status `status`.
    pub fn on_exit(&mut self, status: i32) -> Outcome {
        self.finish();
        if let Some(e) = self.start_error.take() {
            return Outcome::error(e);
        }
        let out = String::from_utf8_lossy(&self.output).into_owned();
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Outcome::ok(out)
        } else {
            Outcome::fail(out)
        }
    }

    /// After the exit: stdout (or all output), stderr, and the start error if the command
    /// could not be started at all.
    pub fn take_output(&mut self) -> (Vec<u8>, Vec<u8>, Option<String>) {
        (
            std::mem::take(&mut self.output),
            std::mem::take(&mut self.err_output),
            self.start_error.take(),
        )
    }

    /// Read the exit's loose ends without judging it (for callers that want the raw
    /// output): what is left in the pipes.
    pub fn finish(&mut self) {
        self.drain();
    }

    /// The exit code of a failed run, for hook messages.
    pub fn describe_exit(status: i32) -> String {
        if libc::WIFEXITED(status) {
            format!("exited with {}", libc::WEXITSTATUS(status))
        } else {
            format!("was killed by signal {}", libc::WTERMSIG(status))
        }
    }

    /// The deadline passed: kill it (reaped later like any child) and fail.
    pub fn timed_out(&mut self) -> Outcome {
        let _ = crate::sys::pidfd::send_signal(&self.pidfd, libc::SIGKILL);
        Outcome::fail(format!("command {:?} timed out", self.command))
    }

    /// Stop it without a result (its container went away).
    pub fn kill(&self) {
        let _ = crate::sys::pidfd::send_signal(&self.pidfd, libc::SIGKILL);
    }
}
