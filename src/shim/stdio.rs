//! A task's standard streams as containerd hands them over: FIFO paths (or none), or a
//! terminal. Output FIFOs go to the process directly, opened read-write so that a
//! containerd restart (its reader gone for a while) never costs the process a SIGPIPE:
//! no copy, no thread. Input goes through a pipe, so the process sees end-of-file exactly
//! when containerd closes its side. A terminal's master comes back on a console socket
//! and is copied to and from the FIFOs, as containerd's runc shim does.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use super::error::{Error, Result};
use super::runc::Streams;

/// What containerd asked for.
#[derive(Clone, Debug, Default)]
pub struct Paths {
    pub stdin: String,
    pub stdout: String,
    pub stderr: String,
    pub terminal: bool,
}

/// What stays with the shim while the process runs.
#[derive(Default)]
pub struct Io {
    /// The terminal's master, for ResizePty.
    pub console: Option<OwnedFd>,
    /// Copies between the FIFOs and a pipe or terminal; joined before an exit is
    /// reported, so that all output is through first.
    pub copiers: Vec<JoinHandle<()>>,
}

/// Opened streams for the verb, and the console socket to receive a terminal on.
pub struct Prepared {
    pub streams: Streams,
    pub console: Option<(UnixListener, PathBuf)>,
    pub io: Io,
}

fn fifo_rw(path: &str) -> Result<OwnedFd> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| Error::io(format_args!("opening {path}"), e))
}

/// Numbers console sockets: a container's ID would make the path longer than a socket
/// address may be.
static CONSOLES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Opens the streams; `socket_dir` is where a console socket is made (a short path).
pub fn prepare(p: &Paths, socket_dir: &Path) -> Result<Prepared> {
    let io = Io::default();
    if p.terminal {
        let n = CONSOLES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = socket_dir.join(format!("console-{}-{n}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path)
            .map_err(|e| Error::io(format_args!("console socket {}", path.display()), e))?;
        return Ok(Prepared {
            streams: Streams::none(),
            console: Some((l, path)),
            io,
        });
    }
    let stdin = if p.stdin.is_empty() {
        None
    } else {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| Error::Other(format!("stdin pipe: {e}")))?;
        let path = p.stdin.clone();
        // Not joined at exit: it ends when containerd closes stdin.
        std::thread::spawn(move || {
            // Blocks until containerd opens its end; its close is our end-of-file.
            if let Ok(mut f) = File::open(&path) {
                let _ = io::copy(&mut f, &mut File::from(w));
            }
        });
        Some(r)
    };
    let out = |s: &str| (!s.is_empty()).then(|| fifo_rw(s)).transpose();
    Ok(Prepared {
        streams: Streams {
            stdin,
            stdout: out(&p.stdout)?,
            stderr: out(&p.stderr)?,
        },
        console: None,
        io,
    })
}

/// After the verb ran: take the terminal's master from the console socket and copy
/// between it and the FIFOs.
pub fn attach_console(pre: &mut Prepared, p: &Paths) -> Result<()> {
    let Some((l, path)) = pre.console.take() else {
        return Ok(());
    };
    let _ = std::fs::remove_file(&path);
    l.set_nonblocking(true)
        .map_err(|e| Error::io("console socket", e))?;
    let (conn, _) = l
        .accept()
        .map_err(|e| Error::io("no terminal came on the console socket", e))?;
    let master = crate_recv_fd(&conn)?;
    if !p.stdout.is_empty() {
        let mut from = File::from(master.try_clone().map_err(|e| Error::io("terminal", e))?);
        let mut to = File::from(fifo_rw(&p.stdout)?);
        pre.io.copiers.push(std::thread::spawn(move || {
            copy_until_eio(&mut from, &mut to)
        }));
    }
    if !p.stdin.is_empty() {
        let mut to = File::from(master.try_clone().map_err(|e| Error::io("terminal", e))?);
        let path = p.stdin.clone();
        // Not joined at exit: it ends when containerd closes stdin.
        std::thread::spawn(move || {
            if let Ok(mut f) = File::open(&path) {
                let _ = io::copy(&mut f, &mut to);
            }
        });
    }
    pre.io.console = Some(master);
    Ok(())
}

fn crate_recv_fd(conn: &std::os::unix::net::UnixStream) -> Result<OwnedFd> {
    conn.set_nonblocking(false)
        .map_err(|e| Error::io("console socket", e))?;
    match podinit::sys::pty::recv_fd(conn.as_raw_fd()) {
        Ok(Some((_, Some(fd)))) => Ok(fd),
        Ok(_) => Err(Error::Other(
            "the console socket closed without a terminal".into(),
        )),
        Err(e) => Err(Error::io("receiving the terminal", e)),
    }
}

/// A terminal's master reads EIO once the last process holding its slave is gone: that
/// is its end.
fn copy_until_eio(from: &mut File, to: &mut File) {
    let mut buf = [0u8; 8192];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}
