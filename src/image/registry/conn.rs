//! One connection to a registry's server: TCP with connect and read timeouts, then TLS
//! when the URL is https (`tls.rs`).

use super::proxy::{self, Proxy};
use super::url::{self, Url};
use crate::image::Error;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Connecting takes at most this long even with a longer `timeout` (containerd's dialer's).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

pub enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

/// TLS settings of a pull (absent when podinit is built without the `tls` feature).
#[cfg(feature = "tls")]
pub type Tls = std::sync::Arc<rustls::ClientConfig>;
/// Without the `tls` feature there is nothing to set: https is refused.
#[cfg(not(feature = "tls"))]
#[derive(Clone, Copy, Debug, Default)]
pub struct Tls;

/// How a pull reaches servers.
#[derive(Clone, Debug)]
pub struct Net {
    pub tls: Tls,
    /// Bounds the connect and each read and write.
    pub timeout: Duration,
    pub proxies: proxy::Settings,
}

/// A connection ready for a request.
pub struct Connection {
    pub stream: Stream,
    /// Plain HTTP through a proxy: the request names the absolute URL, with this
    /// `Proxy-Authorization` if any.
    pub forward: Option<Option<String>>,
}

/// Connects to `url`'s server, through a proxy when the environment names one. Every
/// error is the registry's unreachable one (`Error::Registry` without a status), naming
/// the server and the step.
pub fn connect(url: &Url, net: &Net) -> Result<Connection, Error> {
    let proxy = net.proxies.for_url(url)?;
    let timeout = net.timeout;
    let (host, port) = match &proxy {
        Some(p) => (p.host.as_str(), p.port),
        None => (url.host.as_str(), url.port),
    };
    let label = match &proxy {
        Some(p) => format!(
            "{} (through the proxy {}:{})",
            url.authority(),
            url::bracketed(&p.host),
            p.port
        ),
        None => url.authority(),
    };
    let mut sock = dial(host, port, &label, timeout)?;
    match (url.https, proxy) {
        (false, None) => Ok(Connection {
            stream: Stream::Plain(sock),
            forward: None,
        }),
        (false, Some(p)) => Ok(Connection {
            stream: Stream::Plain(sock),
            forward: Some(p.authorization),
        }),
        (true, p) => {
            if let Some(p) = p {
                tunnel(&mut sock, url, &p, &label, timeout)?;
            }
            Ok(Connection {
                stream: handshake(url, &net.tls, sock, timeout)?,
                forward: None,
            })
        }
    }
}

/// Asks the proxy for a tunnel to `url`'s server (`CONNECT host:port`).
fn tunnel(
    sock: &mut TcpStream,
    url: &Url,
    p: &Proxy,
    label: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let target = format!("{}:{}", url::bracketed(&url.host), url.port);
    let mut req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(a) = &p.authorization {
        req.push_str(&format!("Proxy-Authorization: {a}\r\n"));
    }
    req.push_str("\r\n");
    let fail = |e: io::Error| {
        Error::unreachable(if is_timeout(&e) {
            format!("{label}: CONNECT: no answer within {timeout:?}")
        } else {
            format!("{label}: CONNECT: {e}")
        })
    };
    sock.write_all(req.as_bytes()).map_err(fail)?;
    // Byte by byte: what follows the answer's head is the server's TLS, not ours to read.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        if sock.read(&mut b).map_err(fail)? == 0 || head.len() > 16 * 1024 {
            return Err(Error::unreachable(format!(
                "{label}: CONNECT: the proxy closed without an answer"
            )));
        }
        head.push(b[0]);
    }
    let status_line = String::from_utf8_lossy(&head);
    let status_line = status_line.lines().next().unwrap_or("");
    let code = status_line.split(' ').nth(1).unwrap_or("");
    if !code.starts_with('2') {
        return Err(Error::unreachable(format!(
            "{label}: CONNECT refused: {status_line}"
        )));
    }
    Ok(())
}

/// A TCP connection to `host:port`, with `timeout` on reads and writes.
fn dial(host: &str, port: u16, label: &str, timeout: Duration) -> Result<TcpStream, Error> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::unreachable(format!("{label}: cannot resolve {host}: {e}")))?;
    let mut last = None;
    let mut sock = None;
    let connect_timeout = timeout.min(CONNECT_TIMEOUT);
    for a in addrs {
        match TcpStream::connect_timeout(&a, connect_timeout) {
            Ok(s) => {
                sock = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let sock = sock.ok_or_else(|| {
        Error::unreachable(match last {
            Some(e) if is_timeout(&e) => {
                format!("{label}: no connection within {connect_timeout:?}")
            }
            Some(e) => format!("{label}: cannot connect: {e}"),
            None => format!("{label}: {host} has no address"),
        })
    })?;
    let set =
        |r: io::Result<()>| r.map_err(|e| Error::unreachable(format!("{label}: socket: {e}")));
    set(sock.set_read_timeout(Some(timeout)))?;
    set(sock.set_write_timeout(Some(timeout)))?;
    set(sock.set_nodelay(true))?;
    Ok(sock)
}

#[cfg(feature = "tls")]
fn handshake(
    url: &Url,
    tls: &Tls,
    mut sock: TcpStream,
    timeout: Duration,
) -> Result<Stream, Error> {
    let name = rustls::pki_types::ServerName::try_from(url.host.clone()).map_err(|e| {
        Error::unreachable(format!("{}: invalid TLS server name: {e}", url.authority()))
    })?;
    let mut conn = rustls::ClientConnection::new(tls.clone(), name)
        .map_err(|e| Error::unreachable(format!("{}: tls: {e}", url.authority())))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            return Err(Error::unreachable(if is_timeout(&e) {
                format!(
                    "{}: TLS handshake: no answer within {timeout:?}",
                    url.authority()
                )
            } else {
                let tls_err = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
                let hint = match tls_err {
                    Some(rustls::Error::InvalidCertificate(_)) => {
                        " (a registry with a private CA needs --registry-ca)"
                    }
                    _ => "",
                };
                format!("{}: TLS handshake: {e}{hint}", url.authority())
            }));
        }
    }
    Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(conn, sock))))
}

#[cfg(not(feature = "tls"))]
fn handshake(url: &Url, _: &Tls, _: TcpStream, _: Duration) -> Result<Stream, Error> {
    Err(Error::Unsupported(format!(
        "{}: HTTPS needs podinit built with the `tls` feature (or --insecure-registry {})",
        url.authority(),
        url.authority()
    )))
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => match s.read(buf) {
                // Servers that close without close_notify are common; the framing (length,
                // chunks) says whether the body was whole.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                r => r,
            },
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.flush(),
        }
    }
}
