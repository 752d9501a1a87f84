//! `run`: create and start; then, unless detached, wait for the container's process in
//! the foreground and delete the container (unless `--keep`), exiting with its status.

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::cli::{bool_, Args, Flag};
use super::create::{self, Options};
use super::{delete, log, start, state, wait, Error, Globals};

pub const FLAGS: &[Flag] = &[
    create::BUNDLE,
    create::CONSOLE_SOCKET,
    bool_(&["detach", "d"], "detach from the container's process"),
    bool_(&["keep"], "do not delete the container after it exits"),
    create::PID_FILE,
    bool_(
        &["no-subreaper"],
        "disable the use of the subreaper used to reap reparented processes",
    ),
    create::NO_PIVOT,
    create::NO_NEW_KEYRING,
    create::PRESERVE_FDS,
];

pub fn verb(g: &Globals, a: &Args) -> Result<i32, super::Error> {
    let o = Options::from_args("run", a)?;
    let spec = create::bundle_spec(&o.bundle)?;
    let detach = a.on("detach");
    if o.console_socket.is_some() && !detach && !create::terminal(&spec) {
        return Err("cannot use console socket if runc will not detach or allocate tty".into());
    }
    // A terminal without a console socket in the foreground: we take its master ourselves
    // on a socket pair and relay it, as runc does.
    let (console, ours) = match &o.console_socket {
        Some(p) => (Some(create::connect_console(p)?), None),
        None if create::terminal(&spec) && detach => {
            return Err(
                "cannot allocate tty if runc will detach without setting console socket".into(),
            )
        }
        None if create::terminal(&spec) => {
            host_console()?;
            let (ours, theirs) = std::os::unix::net::UnixStream::pair()
                .map_err(|e| Error::io("console socket pair", e))?;
            (Some(OwnedFd::from(theirs)), Some(ours))
        }
        None => (None, None),
    };
    if !detach && !a.on("no-subreaper") {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
    let made = create::create(g, &o, spec, console)?;
    let fail = |e: Error| -> Error {
        if let Err(d) = delete::destroy(&g.root, &made.state) {
            log::warn(&d.to_string());
        }
        e
    };
    let master = match ours {
        Some(sock) => Some(receive_master(&sock, &o.id).map_err(fail)?),
        None => None,
    };
    start::start(&g.root, &made.state).map_err(fail)?;
    if detach {
        return Ok(0);
    }
    let code = wait::foreground(made.state.init_process_pid, &made.pidfd, master)?;
    // Deleted unless kept, or deleted meanwhile by another verb (`delete --force`).
    if !a.on("keep") {
        if let Ok(_lock) = state::lock(&g.root, &o.id) {
            if state::load(&g.root, &o.id).is_ok() {
                delete::destroy(&g.root, &made.state)?;
            }
        }
    }
    Ok(code)
}

/// The terminal that ours is relayed to, as runc finds it before it makes the container:
/// stderr, stdout or stdin if one is a terminal, else the controlling terminal. Without
/// any (a script, CI), the run fails at once as runc's does, rather than wait on a shell.
fn host_console() -> Result<(), Error> {
    let (err, out, inp) = (std::io::stderr(), std::io::stdout(), std::io::stdin());
    let std_fds = [err.as_fd(), out.as_fd(), inp.as_fd()];
    if std_fds
        .into_iter()
        .any(|fd| nix::unistd::isatty(fd).unwrap_or(false))
    {
        return Ok(());
    }
    std::fs::File::open("/dev/tty").map(drop).map_err(|e| {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        Error::Other(format!(
            "open /dev/tty: {}",
            create::go_error(nix::errno::Errno::from_raw(errno))
        ))
    })
}

/// The terminal's master, which the container's process sent on our end of the pair.
fn receive_master(sock: &std::os::unix::net::UnixStream, id: &str) -> Result<OwnedFd, Error> {
    // Sent while the process was set up, before create returned: the bound on the wait
    // only guards against a process that never sends it.
    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::from(10_000u16));
    match crate::sys::pty::recv_fd(sock.as_raw_fd()) {
        Ok(Some((_, Some(fd)))) => Ok(fd),
        Ok(_) => Err(Error::Other(format!(
            "container {id}: no terminal was sent"
        ))),
        Err(e) => Err(Error::Other(format!(
            "container {id}: receiving its terminal: {e}"
        ))),
    }
}
