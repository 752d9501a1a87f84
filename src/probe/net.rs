//! Network checks (tcpSocket, httpGet, grpc) as non-blocking state machines: the
//! supervisor polls [`NetCheck::fd`] for [`NetCheck::interest`] and calls
//! [`NetCheck::advance`] when it is ready; nothing here ever blocks. The supervisor is in
//! the pod's network namespace, so connections go where the containers listen.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use nix::poll::PollFlags;

use super::error::{Error, Feature};
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
fn resolve(host: &str, port: u16) -> Result<SocketAddr, Error> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    host.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, port))
        .map_err(|_| Error::Lookup {
            host: host.to_string(),
        })
}

/// Start a non-blocking connect.
fn connect(addr: SocketAddr) -> Result<TcpStream, Error> {
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
    .map_err(|errno| Error::Socket { addr, errno })?;
    match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) => Ok(TcpStream::from(fd)),
        Err(errno) => Err(Error::Connect { addr, errno }),
    }
}

impl NetCheck {
    pub fn tcp(host: &str, port: u16) -> Result<NetCheck, Error> {
        Self::open(resolve(host, port)?, Proto::Tcp, Vec::new())
    }

    pub fn http(get: HttpGet, use_: Use) -> Result<NetCheck, Error> {
        let addr = resolve(&get.host, get.port).map_err(|e| http_err(&get, e))?;
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
        if let Err(e) = check.start_tls(https) {
            return Err(match &check.proto {
                Proto::Http { get, .. } => http_err(get, e),
                _ => e,
            });
        }
        Ok(check)
    }

    /// Speak TLS on this connection (HTTPS), or refuse when the build has no TLS. The
    /// error is the caller's to put in Go's `Get "URL"` wording, once: after a redirect,
    /// `advance` does.
    fn start_tls(&mut self, https: bool) -> Result<(), Error> {
        #[cfg(feature = "tls")]
        {
            self.tls = None;
            if let (true, Proto::Http { get, .. }) = (https, &self.proto) {
                self.tls = Some(Box::new(super::tls::client(&get.host)?));
            }
            Ok(())
        }
        #[cfg(not(feature = "tls"))]
        match (https, &self.proto) {
            (true, Proto::Http { .. }) => Err(Error::Feature(Feature::Tls)),
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

    pub fn grpc(host: &str, port: u16, service: &str) -> Result<NetCheck, Error> {
        if !cfg!(feature = "grpc") {
            return Err(Error::Feature(Feature::Grpc));
        }
        let addr = resolve(host, port)?;
        Self::open(
            addr,
            Proto::Grpc {
                service: service.to_string(),
            },
            Vec::new(),
        )
        .map_err(|e| Error::grpc_dial(addr, e))
    }

    fn open(addr: SocketAddr, proto: Proto, req: Vec<u8>) -> Result<NetCheck, Error> {
        let sock = connect(addr).map_err(|e| match &proto {
            Proto::Http { get, .. } => http_err(get, e),
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
            (Proto::Http { get, .. }, _) => {
                Outcome::fail(http_err(get, Error::HeadersTimeout).to_string())
            }
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
            Err(e) => Progress::Done(Outcome::fail(
                match &self.proto {
                    Proto::Http { get, .. } => http_err(get, e),
                    // grpc-go's dial, as kubelet reports it.
                    Proto::Grpc { .. } if matches!(self.stage, Stage::Connecting) => {
                        Error::grpc_dial(self.addr, e)
                    }
                    _ => e,
                }
                .to_string(),
            )),
        }
    }

    fn step(&mut self) -> Result<Progress, Error> {
        if let Stage::Connecting = self.stage {
            let err =
                nix::sys::socket::getsockopt(&self.sock, nix::sys::socket::sockopt::SocketError)
                    .map_err(|errno| Error::SockOpt {
                        addr: self.addr,
                        errno,
                    })?;
            if err != 0 {
                return Err(Error::Connect {
                    addr: self.addr,
                    errno: nix::errno::Errno::from_raw(err),
                });
            }
            match &self.proto {
                Proto::Tcp => return Ok(Progress::Done(Outcome::ok(String::new()))),
                #[cfg(feature = "grpc")]
                Proto::Grpc { service } => {
                    let io = self.sock.try_clone().map_err(Error::Dup)?;
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
                .map_err(|e| Error::Tls(e.to_string()))?;
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
                    Err(error) => {
                        return Err(Error::Write {
                            addr: self.addr,
                            error,
                        })
                    }
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
                Err(error) => {
                    return Err(Error::Read {
                        addr: self.addr,
                        error,
                    })
                }
            }
        }
    }

    /// Judge what arrived so far (`eof`: nothing more will).
    fn on_data(&mut self, eof: bool) -> Result<Progress, Error> {
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
                        Err(Error::Eof)
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
                        Err(e) => Outcome::fail(e.to_string()),
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
                    return Err(Error::TooManyRedirects(http::MAX_REDIRECTS));
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

/// An HTTP request's error, in Go's `Get "URL": …` wording.
fn http_err(get: &HttpGet, e: Error) -> Error {
    Error::get(http::url(get), e)
}
