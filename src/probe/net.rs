//! Network checks (tcpSocket, httpGet, grpc) as non-blocking state machines: the
//! supervisor polls [`NetCheck::fd`] for [`NetCheck::interest`] and calls
//! [`NetCheck::advance`] when it is ready; nothing here ever blocks. The supervisor is in
//! the pod's network namespace, so connections go where the containers listen.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use nix::poll::PollFlags;

#[cfg(feature = "grpc")]
use super::grpc;
use super::handler::{HttpGet, Use};
use super::{http, Outcome};

enum Stage {
    Connecting,
    Writing(usize),
    Reading,
    /// Connected; the gRPC call does the rest.
    #[cfg(feature = "grpc")]
    Grpc(Box<grpc::Call>),
}

enum Proto {
    Tcp,
    Http {
        get: HttpGet,
        /// The host of the first request: redirects elsewhere end the probe.
        first_host: String,
        redirects: u32,
        use_: Use,
    },
    Grpc {
        #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
        service: String,
    },
}

pub struct NetCheck {
    sock: TcpStream,
    /// The TLS session of an HTTPS request.
    #[cfg(feature = "tls")]
    tls: Option<Box<rustls::ClientConnection>>,
    addr: SocketAddr,
    stage: Stage,
    proto: Proto,
    req: Vec<u8>,
    buf: Vec<u8>,
}

pub enum Progress {
    Pending,
    Done(Outcome),
}

/// Resolve a probe's host: IP literals and `localhost` (the pod has no resolver of its
/// own that podinit could ask without blocking).
fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    host.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, port))
        .map_err(|_| format!("dial tcp: lookup {host}: no such host"))
}

/// Start a non-blocking connect.
fn connect(addr: SocketAddr) -> Result<TcpStream, String> {
    use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, SockaddrStorage};
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket::socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| format!("dial tcp {addr}: socket: {}", e.desc()))?;
    match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) => Ok(TcpStream::from(fd)),
        Err(e) => Err(format!(
            "dial tcp {addr}: connect: {}",
            e.desc().to_lowercase()
        )),
    }
}

impl NetCheck {
    pub fn tcp(host: &str, port: u16) -> Result<NetCheck, String> {
        Self::open(resolve(host, port)?, Proto::Tcp, Vec::new())
    }

    pub fn http(get: HttpGet, use_: Use) -> Result<NetCheck, String> {
        let addr = resolve(&get.host, get.port).map_err(|e| http_err(&get, &e))?;
        let req = http::request(&get);
        let first_host = get.host.clone();
        let https = get.https;
        let mut check = Self::open(
            addr,
            Proto::Http {
                get,
                first_host,
                redirects: 0,
                use_,
            },
            req,
        )?;
        check.start_tls(https)?;
        Ok(check)
    }

    /// Speak TLS on this connection (HTTPS), or refuse when the build has no TLS.
    fn start_tls(&mut self, https: bool) -> Result<(), String> {
        #[cfg(feature = "tls")]
        {
            self.tls = None;
            if let (true, Proto::Http { get, .. }) = (https, &self.proto) {
                let c = super::tls::client(&get.host).map_err(|e| http_err(get, &e))?;
                self.tls = Some(Box::new(c));
            }
            Ok(())
        }
        #[cfg(not(feature = "tls"))]
        match (https, &self.proto) {
            (true, Proto::Http { get, .. }) => Err(http_err(
                get,
                "HTTPS needs podinit built with the \"tls\" feature",
            )),
            _ => Ok(()),
        }
    }

    fn write_some(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(c) = &mut self.tls {
            return rustls::Stream::new(c.as_mut(), &mut self.sock).write(buf);
        }
        self.sock.write(buf)
    }

    fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        #[cfg(feature = "tls")]
        if let Some(c) = &mut self.tls {
            return match rustls::Stream::new(c.as_mut(), &mut self.sock).read(buf) {
                // A peer that closes without close_notify has still said everything.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            };
        }
        self.sock.read(buf)
    }

    pub fn grpc(host: &str, port: u16, service: &str) -> Result<NetCheck, String> {
        if !cfg!(feature = "grpc") {
            return Err("gRPC probes need podinit built with the \"grpc\" feature".into());
        }
        let addr = resolve(host, port)?;
        Self::open(
            addr,
            Proto::Grpc {
                service: service.to_string(),
            },
            Vec::new(),
        )
        .map_err(|e| {
            format!(
                "timeout: failed to connect service {:?}: {e}",
                addr.to_string()
            )
        })
    }

    fn open(addr: SocketAddr, proto: Proto, req: Vec<u8>) -> Result<NetCheck, String> {
        let sock = connect(addr).map_err(|e| match &proto {
            Proto::Http { get, .. } => http_err(get, &e),
            _ => e,
        })?;
        Ok(NetCheck {
            sock,
            #[cfg(feature = "tls")]
            tls: None,
            addr,
            stage: Stage::Connecting,
            proto,
            req,
            buf: Vec::new(),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    pub fn interest(&self) -> PollFlags {
        match &self.stage {
            Stage::Connecting | Stage::Writing(_) => PollFlags::POLLOUT,
            #[cfg(feature = "tls")]
            Stage::Reading if self.tls.as_ref().is_some_and(|c| c.wants_write()) => {
                PollFlags::POLLIN | PollFlags::POLLOUT
            }
            Stage::Reading => PollFlags::POLLIN,
            #[cfg(feature = "grpc")]
            Stage::Grpc(c) if c.wants_write() => PollFlags::POLLIN | PollFlags::POLLOUT,
            #[cfg(feature = "grpc")]
            Stage::Grpc(_) => PollFlags::POLLIN,
        }
    }

    /// What a timeout means at this point, in Go's words.
    pub fn timeout(&self) -> Outcome {
        match (&self.proto, &self.stage) {
            (Proto::Http { get, .. }, _) => Outcome::fail(http_err(
                get,
                "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            )),
            (Proto::Grpc { .. }, Stage::Connecting) => Outcome::fail(format!(
                "timeout: failed to connect service \"{}\": context deadline exceeded",
                self.addr
            )),
            (Proto::Grpc { .. }, _) => {
                Outcome::fail("timeout: health rpc did not complete within the timeout".into())
            }
            (Proto::Tcp, _) => Outcome::fail(format!("dial tcp {}: i/o timeout", self.addr)),
        }
    }

    /// Make progress after poll said the socket is ready.
    pub fn advance(&mut self) -> Progress {
        match self.step() {
            Ok(p) => p,
            Err(msg) => Progress::Done(Outcome::fail(match &self.proto {
                Proto::Http { get, .. } => http_err(get, &msg),
                // grpc-go's dial, as kubelet reports it.
                Proto::Grpc { .. } if matches!(self.stage, Stage::Connecting) => format!(
                    "timeout: failed to connect service {:?}: {msg}",
                    self.addr.to_string()
                ),
                _ => msg,
            })),
        }
    }

    fn step(&mut self) -> Result<Progress, String> {
        if let Stage::Connecting = self.stage {
            let err =
                nix::sys::socket::getsockopt(&self.sock, nix::sys::socket::sockopt::SocketError)
                    .map_err(|e| format!("dial tcp {}: {}", self.addr, e.desc()))?;
            if err != 0 {
                let e = nix::errno::Errno::from_raw(err);
                return Err(format!(
                    "dial tcp {}: connect: {}",
                    self.addr,
                    e.desc().to_lowercase()
                ));
            }
            match &self.proto {
                Proto::Tcp => return Ok(Progress::Done(Outcome::ok(String::new()))),
                #[cfg(feature = "grpc")]
                Proto::Grpc { service } => {
                    let io = self
                        .sock
                        .try_clone()
                        .map_err(|e| format!("dup socket: {e}"))?;
                    let call = grpc::Call::start(io, self.addr.to_string(), service);
                    self.stage = Stage::Grpc(Box::new(call));
                }
                _ => self.stage = Stage::Writing(0),
            }
        }
        #[cfg(feature = "grpc")]
        if let Stage::Grpc(call) = &mut self.stage {
            return Ok(match call.advance() {
                Some(o) => Progress::Done(o),
                None => Progress::Pending,
            });
        }
        #[cfg(feature = "tls")]
        if let (Stage::Writing(0), Some(c)) = (&self.stage, &mut self.tls) {
            // rustls keeps the request until the handshake is done; reading drives both.
            c.writer()
                .write_all(&self.req)
                .map_err(|e| format!("tls: {e}"))?;
            self.stage = Stage::Reading;
        }
        if let Stage::Writing(mut off) = self.stage {
            while off < self.req.len() {
                let req = std::mem::take(&mut self.req);
                let r = self.write_some(&req[off..]);
                self.req = req;
                match r {
                    Ok(n) => off += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        self.stage = Stage::Writing(off);
                        return Ok(Progress::Pending);
                    }
                    Err(e) => return Err(format!("write tcp {}: {e}", self.addr)),
                }
            }
            self.stage = Stage::Reading;
        }
        let mut chunk = [0u8; 8192];
        loop {
            match self.read_some(&mut chunk) {
                Ok(0) => return self.on_data(true),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    if let Progress::Done(o) = self.on_data(false)? {
                        return Ok(Progress::Done(o));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Ok(Progress::Pending)
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read tcp {}: {e}", self.addr)),
            }
        }
    }

    /// Judge what arrived so far (`eof`: nothing more will).
    fn on_data(&mut self, eof: bool) -> Result<Progress, String> {
        match &mut self.proto {
            Proto::Tcp => Ok(Progress::Pending),
            Proto::Grpc { .. } => Ok(Progress::Pending),
            Proto::Http {
                get,
                first_host,
                redirects,
                use_,
            } => {
                let Some(head) = http::parse_head(&self.buf)? else {
                    return if eof {
                        Err("EOF".into())
                    } else {
                        Ok(Progress::Pending)
                    };
                };
                let body = &self.buf[head.body_at..];
                if *use_ == Use::Hook {
                    // Any response completes a hook.
                    return Ok(Progress::Done(Outcome::ok(String::new())));
                }
                let location = head
                    .location
                    .clone()
                    .filter(|_| http::is_redirect(head.code));
                let Some(loc) = location else {
                    return Ok(Progress::Done(match http::probe_result(head.code, body) {
                        Ok(b) => Outcome::ok(b),
                        Err(m) => Outcome::fail(m),
                    }));
                };
                let next = http::follow(get, &loc)?;
                if next.host != *first_host {
                    // kubelet stops at a redirect to another host: a success with a warning.
                    let b = String::from_utf8_lossy(&body[..body.len().min(http::MAX_BODY)]);
                    let mut o = Outcome::ok(String::new());
                    o.warning = Some(format!("Probe terminated redirects, Response body: {b}"));
                    return Ok(Progress::Done(o));
                }
                if *redirects >= http::MAX_REDIRECTS {
                    return Err("stopped after 10 redirects".into());
                }
                let addr = resolve(&next.host, next.port)?;
                *redirects += 1;
                self.req = http::request(&next);
                *get = next;
                let https = get.https;
                self.sock = connect(addr)?;
                self.addr = addr;
                self.buf.clear();
                self.stage = Stage::Connecting;
                self.start_tls(https)?;
                Ok(Progress::Pending)
            }
        }
    }
}

/// Go's `Get "URL": …` error wording.
fn http_err(get: &HttpGet, msg: &str) -> String {
    format!("Get {:?}: {msg}", http::url(get))
}
