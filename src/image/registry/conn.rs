//! One connection to a registry's server: TCP with connect and read timeouts, then TLS
//! when the URL is https (`tls.rs`).

use super::url::Url;
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

/// Connects to `url`'s server; `timeout` bounds the connect and each read and write.
pub fn connect(url: &Url, tls: &Tls, timeout: Duration) -> Result<Stream, String> {
    let addrs = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}: cannot resolve {}: {e}", url.authority(), url.host))?;
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
    let sock = sock.ok_or_else(|| match last {
        Some(e) if is_timeout(&e) => format!(
            "{}: no connection within {connect_timeout:?}",
            url.authority()
        ),
        Some(e) => format!("{}: cannot connect: {e}", url.authority()),
        None => format!("{}: {} has no address", url.authority(), url.host),
    })?;
    let set = |r: io::Result<()>| r.map_err(|e| format!("{}: socket: {e}", url.authority()));
    set(sock.set_read_timeout(Some(timeout)))?;
    set(sock.set_write_timeout(Some(timeout)))?;
    set(sock.set_nodelay(true))?;
    if !url.https {
        return Ok(Stream::Plain(sock));
    }
    handshake(url, tls, sock, timeout)
}

#[cfg(feature = "tls")]
fn handshake(
    url: &Url,
    tls: &Tls,
    mut sock: TcpStream,
    timeout: Duration,
) -> Result<Stream, String> {
    let name = rustls::pki_types::ServerName::try_from(url.host.clone())
        .map_err(|e| format!("{}: invalid TLS server name: {e}", url.authority()))?;
    let mut conn = rustls::ClientConnection::new(tls.clone(), name)
        .map_err(|e| format!("{}: tls: {e}", url.authority()))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            return Err(if is_timeout(&e) {
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
            });
        }
    }
    Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(conn, sock))))
}

#[cfg(not(feature = "tls"))]
fn handshake(url: &Url, _: &Tls, _: TcpStream, _: Duration) -> Result<Stream, String> {
    Err(format!(
        "{}: HTTPS needs podinit built with the `tls` feature (or --insecure-registry {})",
        url.authority(),
        url.authority()
    ))
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
