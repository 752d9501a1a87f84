//! Status pushed to whoever started podinit (docs/interface.md §5), never blocking the loop:
//! - `--notify-socket PATH`: the Pod object as one JSON line on every status change, over
//!   a Unix stream socket. Every line is a whole snapshot, so a shim that cannot keep up
//!   loses only superseded lines: at most the line being written and the newest one are
//!   kept. A shim that is not there (yet, or any more) is tried again at the next change.
//! - `$NOTIFY_SOCKET` (systemd): `READY=1` once the pod is Ready, `STATUS=<phase>` on each
//!   phase change, as datagrams.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::PathBuf;

struct Shim {
    path: PathBuf,
    sock: Option<UnixStream>,
    /// The line being written and how much of it went out.
    current: Vec<u8>,
    sent: usize,
    /// The newest line, waiting for `current` to finish.
    next: Option<Vec<u8>>,
}

pub struct Notifier {
    shim: Option<Shim>,
    systemd: Option<UnixDatagram>,
    ready_sent: bool,
    last_phase: Option<String>,
}

impl Notifier {
    /// `shim`: `--notify-socket`; `systemd`: `$NOTIFY_SOCKET` (a path, or `@name` for an
    /// abstract socket).
    pub fn new(shim: Option<PathBuf>, systemd: Option<String>) -> Notifier {
        let systemd = systemd.and_then(|addr| {
            let s = UnixDatagram::unbound().ok()?;
            s.set_nonblocking(true).ok()?;
            let r = match addr.strip_prefix('@') {
                Some(name) => {
                    use std::os::linux::net::SocketAddrExt;
                    std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                        .and_then(|a| s.connect_addr(&a))
                }
                None => s.connect(&addr),
            };
            match r {
                Ok(()) => Some(s),
                Err(e) => {
                    crate::log::warn(&format!("NOTIFY_SOCKET {addr}: {e}"));
                    None
                }
            }
        });
        Notifier {
            shim: shim.map(|path| Shim {
                path,
                sock: None,
                current: Vec::new(),
                sent: 0,
                next: None,
            }),
            systemd,
            ready_sent: false,
            last_phase: None,
        }
    }

    /// The status changed: `line` is the Pod object as one JSON line.
    pub fn status(&mut self, line: &[u8], phase: &str, ready: bool) {
        if let Some(s) = &mut self.systemd {
            if self.last_phase.as_deref() != Some(phase) {
                let _ = s.send(format!("STATUS={phase}").as_bytes());
                self.last_phase = Some(phase.to_string());
            }
            if ready && !self.ready_sent {
                let _ = s.send(b"READY=1");
                self.ready_sent = true;
            }
        }
        if let Some(shim) = &mut self.shim {
            shim.push(line);
        }
    }

    /// An fd to poll for POLLOUT while a line waits to be written.
    pub fn pending_fd(&self) -> Option<BorrowedFd<'_>> {
        let s = self.shim.as_ref()?;
        if s.sent < s.current.len() {
            s.sock.as_ref().map(|s| s.as_fd())
        } else {
            None
        }
    }

    /// The socket is writable.
    pub fn writable(&mut self) {
        if let Some(s) = &mut self.shim {
            s.flush();
        }
    }
}

impl Shim {
    fn push(&mut self, line: &[u8]) {
        let mut l = line.to_vec();
        if !l.ends_with(b"\n") {
            l.push(b'\n');
        }
        if self.sent > 0 && self.sent < self.current.len() {
            // Half-way through an older line: finish it; this one supersedes any other
            // waiting.
            self.next = Some(l);
        } else {
            self.current = l;
            self.sent = 0;
        }
        self.flush();
    }

    fn flush(&mut self) {
        if self.sock.is_none() {
            let sock = crate::sys::unix_socket::socket_path(&self.path)
                .and_then(|(_dir, addr)| UnixStream::connect(addr));
            match sock {
                Ok(s) if s.set_nonblocking(true).is_ok() => self.sock = Some(s),
                // Not there: the next change tries again with the newest line.
                _ => return,
            }
        }
        loop {
            if self.sent >= self.current.len() {
                match self.next.take() {
                    Some(n) => {
                        self.current = n;
                        self.sent = 0;
                    }
                    None => return,
                }
            }
            let Some(sock) = &mut self.sock else { return };
            match sock.write(&self.current[self.sent..]) {
                Ok(0) => return,
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Gone: start over (with the whole newest line) on a new connection.
                    self.sock = None;
                    if let Some(n) = self.next.take() {
                        self.current = n;
                    }
                    self.sent = 0;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    #[test]
    fn lines_reach_the_shim_and_a_late_shim_gets_the_newest() {
        let dir =
            std::env::temp_dir().join(format!("podinit-notify-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("shim.sock");
        let mut n = Notifier::new(Some(path.clone()), None);
        // Nobody listens yet: nothing blocks, nothing is queued beyond the newest line.
        n.status(b"{\"a\":1}", "Pending", false);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        n.status(b"{\"a\":2}", "Running", false);
        let (s, _) = l.accept().unwrap();
        n.status(b"{\"a\":3}", "Running", true);
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "{\"a\":2}\n");
        line.clear();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "{\"a\":3}\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn systemd_gets_status_and_ready_once() {
        let dir = std::env::temp_dir().join(format!("podinit-sd-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        let mut n = Notifier::new(None, Some(path.display().to_string()));
        n.status(b"{}", "Pending", false);
        n.status(b"{}", "Running", true);
        n.status(b"{}", "Running", true);
        let mut got = Vec::new();
        rx.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        while let Ok(k) = rx.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..k]).into_owned());
        }
        assert_eq!(got, ["STATUS=Pending", "STATUS=Running", "READY=1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
