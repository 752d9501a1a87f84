//! `start`: open the exec fifo for reading, which lets the created container's process
//! exec its program; then the poststart hooks.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use super::cli::Args;
use super::state::{self, Root, State};
use super::status::{self, Status};
use super::{Error, Globals};
use crate::runtime::hooks;

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    let id = a.exactly_one("start")?;
    // No lock: the wait at the fifo may be long (a frozen process), and a `delete` meanwhile
    // must not wait for it. Two starts at once are told apart by the fifo: one reads the
    // byte, the other finds it closed.
    let s = state::load(&g.root, id)?;
    start(&g.root, &s)
}

/// Start a created container.
pub fn start(root: &Root, s: &State) -> Result<(), Error> {
    let wrong = |m: &str| Err(Error::WrongState(m.into()));
    match status::of(root, s) {
        Status::Created => {}
        Status::Stopped => return wrong("cannot start a container that has stopped"),
        Status::Running => return wrong("cannot start an already running container"),
        other => {
            return wrong(&format!(
                "cannot start a container in the {} state",
                other.as_str()
            ))
        }
    }
    let pidfd = open_init(s)?;
    let fifo = state::fifo_path(&root.dir(&s.id));
    // Non-blocking: the open does not wait for a writer, so a process that died before it
    // reached the fifo cannot hang us; the wait below watches the fifo and the process.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&fifo)
        .map_err(|e| Error::io(format_args!("opening exec fifo {}", fifo.display()), e))?;
    let got = await_fifo(&mut f, &pidfd)
        .map_err(|e| Error::Other(format!("container {}: exec fifo: {e}", s.id)))?;
    if !got {
        return wrong("cannot start an already running container");
    }
    std::fs::remove_file(&fifo)
        .map_err(|e| Error::io(format_args!("removing exec fifo {}", fifo.display()), e))?;
    let poststart = s
        .config
        .hooks()
        .as_ref()
        .and_then(|h| h.poststart().clone())
        .unwrap_or_default();
    if let Err(e) = hooks::run(
        "poststart",
        &poststart,
        &status::hook_json(s, "running", s.init_process_pid),
    ) {
        // As runc: a failed poststart hook ends the container and the verb fails.
        let _ = crate::sys::pidfd::send_signal(&pidfd, libc::SIGKILL);
        return Err(Error::Other(format!("container {}: {e}", s.id)));
    }
    Ok(())
}

/// A pidfd of the container's init, checked to be that process and not a reuse of its pid.
pub fn open_init(s: &State) -> Result<OwnedFd, Error> {
    let fd = crate::sys::pidfd::open(s.init_process_pid).map_err(|_| Error::NotRunning)?;
    if !status::alive(s.init_process_pid, s.init_process_start) {
        return Err(Error::NotRunning);
    }
    Ok(fd)
}

/// Wait until the process writes to the fifo (true) or closes it without writing (false);
/// its death first is an error.
/// The process keeps its end of the fifo open until its exec closes it (close-on-exec),
/// after its startContainer hooks: `start` returns, and runs poststart, only once the
/// program runs, as the runtime spec orders them. A process that dies first closes it too.
fn await_exec(f: &mut std::fs::File) -> std::io::Result<()> {
    loop {
        poll_ready(&[f.as_fd()])?;
        let mut buf = [0u8; 16];
        match f.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

fn await_fifo(f: &mut std::fs::File, pidfd: &OwnedFd) -> std::io::Result<bool> {
    loop {
        let ready = poll_ready(&[f.as_fd(), pidfd.as_fd()])?;
        if ready[0] {
            let mut buf = [0u8; 1];
            return match f.read(&mut buf) {
                Ok(0) => Ok(false),
                Ok(_) => {
                    await_exec(f)?;
                    Ok(true)
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => Err(e),
            };
        }
        if ready[1] {
            return Err(std::io::Error::other(
                "the container's process exited before it was started",
            ));
        }
    }
}

/// Wait, as long as it takes, until one of `fds` is readable (or hung up): which are.
/// An interrupted wait is resumed.
fn poll_ready(fds: &[BorrowedFd]) -> std::io::Result<Vec<bool>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut set: Vec<PollFd> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    loop {
        match poll(&mut set, PollTimeout::NONE) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(set
        .iter()
        .map(|p| p.revents().is_some_and(|r| !r.is_empty()))
        .collect())
}
