//! One synchronous D-Bus connection over a unix socket: EXTERNAL authentication (the
//! kernel vouches for our uid), `Hello` when a bus daemon is in between, method calls
//! answered in order, and signals kept until they are waited for.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::wire::{self, Kind, Malformed, Message, Value};

/// How long a method call may take: libdbus's default.
const CALL_LIMIT: Duration = Duration::from_secs(25);

#[derive(Debug)]
pub enum Error {
    Connect {
        path: PathBuf,
        err: io::Error,
    },
    Io {
        what: &'static str,
        err: io::Error,
    },
    Auth(String),
    Malformed(Malformed),
    /// An error reply: its D-Bus error name and message.
    Remote {
        name: String,
        message: String,
    },
    Timeout(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect { path, err } => write!(f, "connecting to {}: {err}", path.display()),
            Error::Io { what, err } => write!(f, "D-Bus {what}: {err}"),
            Error::Auth(why) => write!(f, "D-Bus authentication refused: {why}"),
            Error::Malformed(m) => m.fmt(f),
            Error::Remote { name, message } => write!(f, "{name}: {message}"),
            Error::Timeout(what) => write!(f, "timed out waiting for {what}"),
        }
    }
}

impl From<Malformed> for Error {
    fn from(m: Malformed) -> Error {
        Error::Malformed(m)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

pub struct Bus {
    stream: UnixStream,
    serial: u32,
    /// Signals read while waiting for a reply.
    signals: VecDeque<Message>,
    /// The name the bus daemon gave us (none on a peer-to-peer connection).
    unique: Option<String>,
}

impl Bus {
    /// Connect to the socket at `path` and authenticate; `daemon`: a bus daemon is
    /// there (the system bus), to which we say `Hello`, rather than a peer (systemd's
    /// private socket).
    pub fn connect(path: &Path, daemon: bool) -> Result<Bus> {
        let stream = UnixStream::connect(path).map_err(|err| Error::Connect {
            path: path.to_path_buf(),
            err,
        })?;
        let mut bus = Bus {
            stream,
            serial: 0,
            signals: VecDeque::new(),
            unique: None,
        };
        bus.authenticate()?;
        if daemon {
            let name = bus.call(Message::call(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "Hello",
                vec![],
            ))?;
            bus.unique = name.first().and_then(Value::as_str).map(str::to_string);
        }
        Ok(bus)
    }

    pub fn unique_name(&self) -> Option<&str> {
        self.unique.as_deref()
    }

    fn authenticate(&mut self) -> Result<()> {
        let deadline = Instant::now() + CALL_LIMIT;
        let uid = nix::unistd::geteuid().as_raw().to_string();
        let hex: String = uid.bytes().map(|b| format!("{b:02x}")).collect();
        self.send_raw(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())?;
        let line = self.read_line(deadline)?;
        if !line.starts_with("OK ") {
            return Err(Error::Auth(line));
        }
        self.send_raw(b"BEGIN\r\n")
    }

    /// One line of the authentication exchange, read a byte at a time so that nothing
    /// of what follows is consumed.
    fn read_line(&mut self, deadline: Instant) -> Result<String> {
        let mut line = Vec::new();
        while !line.ends_with(b"\r\n") {
            if line.len() > 4096 {
                return Err(Error::Auth("an over-long reply".into()));
            }
            let mut b = [0u8];
            self.read_exact(&mut b, deadline, "the authentication reply")?;
            line.push(b[0]);
        }
        line.truncate(line.len() - 2);
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    fn send_raw(&mut self, b: &[u8]) -> Result<()> {
        self.stream
            .write_all(b)
            .map_err(|err| Error::Io { what: "write", err })
    }

    fn read_exact(&mut self, buf: &mut [u8], deadline: Instant, what: &str) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout(what.to_string()));
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|err| Error::Io { what: "read", err })?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(Error::Io {
                        what: "read",
                        err: io::ErrorKind::UnexpectedEof.into(),
                    })
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(Error::Timeout(what.to_string()))
                }
                Err(err) => return Err(Error::Io { what: "read", err }),
            }
        }
        Ok(())
    }

    fn read_message(&mut self, deadline: Instant, what: &str) -> Result<Message> {
        let mut buf = vec![0u8; wire::FIXED];
        self.read_exact(&mut buf, deadline, what)?;
        let total = wire::frame_len(&buf)?;
        buf.resize(total, 0);
        self.read_exact(&mut buf[wire::FIXED..], deadline, what)?;
        Ok(Message::decode(&buf)?)
    }

    /// Send `m` and wait for its reply: the reply's body, or the error it carries.
    pub fn call(&mut self, m: Message) -> Result<Vec<Value>> {
        self.serial += 1;
        let serial = self.serial;
        self.send_raw(&m.encode(serial))?;
        let what = format!(
            "the reply to {}",
            m.member.as_deref().unwrap_or("a method call")
        );
        let deadline = Instant::now() + CALL_LIMIT;
        loop {
            let r = self.read_message(deadline, &what)?;
            match r.kind {
                Some(Kind::Signal) => self.signals.push_back(r),
                Some(Kind::MethodReturn) if r.reply_serial == Some(serial) => return Ok(r.body),
                Some(Kind::Error) if r.reply_serial == Some(serial) => {
                    return Err(Error::Remote {
                        name: r.error_name.unwrap_or_default(),
                        message: r
                            .body
                            .first()
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    })
                }
                // Replies to nothing we wait for, and calls to us: not ours to answer.
                _ => {}
            }
        }
    }

    /// The first signal that `wanted` accepts, read or already kept, by `deadline`.
    pub fn wait_signal(
        &mut self,
        what: &str,
        deadline: Instant,
        wanted: impl Fn(&Message) -> bool,
    ) -> Result<Message> {
        if let Some(i) = self.signals.iter().position(&wanted) {
            return Ok(self.signals.remove(i).unwrap_or_default());
        }
        loop {
            let m = self.read_message(deadline, what)?;
            if m.kind == Some(Kind::Signal) && wanted(&m) {
                return Ok(m);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A peer that speaks the server's side over a socketpair-like listener: it answers
    /// the authentication, then replies to the first call with a signal and the reply.
    #[test]
    fn authenticates_calls_and_keeps_signals_that_come_first() {
        let dir = std::env::temp_dir().join(format!("podinit-dbus-{}", crate::util::random_hex(4)));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bus");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut auth = Vec::new();
            let mut b = [0u8];
            while !auth.ends_with(b"\r\n") {
                s.read_exact(&mut b).unwrap();
                auth.push(b[0]);
            }
            s.write_all(b"OK 1234deadbeef\r\n").unwrap();
            let mut begin = [0u8; 7];
            s.read_exact(&mut begin).unwrap();
            assert_eq!(&begin, b"BEGIN\r\n");
            let mut head = [0u8; wire::FIXED];
            s.read_exact(&mut head).unwrap();
            let mut m = head.to_vec();
            m.resize(wire::frame_len(&head).unwrap(), 0);
            s.read_exact(&mut m[wire::FIXED..]).unwrap();
            let call = Message::decode(&m).unwrap();
            assert_eq!(call.member.as_deref(), Some("StopUnit"));
            let signal = Message {
                kind: Some(Kind::Signal),
                member: Some("JobRemoved".into()),
                body: vec![Value::U32(7), Value::Path("/j/7".into())],
                ..Message::default()
            };
            s.write_all(&signal.encode(1)).unwrap();
            let reply = Message {
                kind: Some(Kind::MethodReturn),
                reply_serial: Some(call.serial),
                body: vec![Value::Path("/j/7".into())],
                ..Message::default()
            };
            s.write_all(&reply.encode(2)).unwrap();
            String::from_utf8(auth).unwrap()
        });
        let mut bus = Bus::connect(&path, false).unwrap();
        let body = bus
            .call(Message::call(
                None,
                "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager",
                "StopUnit",
                vec![Value::str("x.scope"), Value::str("replace")],
            ))
            .unwrap();
        assert_eq!(body, [Value::Path("/j/7".into())]);
        let deadline = Instant::now() + Duration::from_secs(5);
        let sig = bus
            .wait_signal("JobRemoved", deadline, |m| {
                m.body.get(1) == Some(&Value::Path("/j/7".into()))
            })
            .unwrap();
        assert_eq!(sig.member.as_deref(), Some("JobRemoved"));
        let auth = server.join().unwrap();
        let uid = nix::unistd::geteuid().as_raw().to_string();
        let hex: String = uid.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(auth, format!("\0AUTH EXTERNAL {hex}\r\n"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_socket_names_its_path() {
        let e = Bus::connect(Path::new("/nonexistent/bus"), true)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("/nonexistent/bus"), "{e}");
    }
}
