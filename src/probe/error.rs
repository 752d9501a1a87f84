//! Why a network check failed, with what it probed. Each message is Go's (net, net/http,
//! grpc-go) as kubelet reports it: it ends up in events and a container's `message`.

use std::fmt;
use std::net::SocketAddr;

use nix::errno::Errno;

#[derive(Debug)]
pub enum Error {
    /// A host that is neither an IP literal nor `localhost`.
    Lookup { host: String },
    /// socket(2) for a connection to `addr` failed.
    Socket { addr: SocketAddr, errno: Errno },
    /// The connection to `addr` was refused or could not start.
    Connect { addr: SocketAddr, errno: Errno },
    /// The connection's state could not be read back.
    SockOpt { addr: SocketAddr, errno: Errno },
    /// Sending the request to `addr` failed.
    Write {
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// Reading the answer from `addr` failed.
    Read {
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// The socket could not be handed to the gRPC call.
    Dup(std::io::Error),
    /// The TLS session could not be set up or broke (its words after `tls: `).
    Tls(String),
    /// A server name TLS cannot use.
    TlsName { host: String, why: String },
    /// No response head before the probe's timeout.
    HeadersTimeout,
    /// The peer closed before a whole response head.
    Eof,
    /// The response head is malformed or too large (net/http's words).
    Response(&'static str, Option<String>),
    /// A response whose status code is not a success.
    Status(u16),
    /// A `Location` that names no host and port.
    Redirect { location: String },
    /// The redirect limit was reached.
    TooManyRedirects(u32),
    /// A check this build cannot run: the cargo feature it needs.
    Feature(Feature),
    /// An exec handler given to the network checks.
    NotNetwork,
    /// An HTTP request's failure: Go's `Get "URL": …`.
    Get { url: String, source: Box<Error> },
    /// A gRPC dial's failure to `addr`, as grpc-go words it.
    GrpcDial {
        addr: SocketAddr,
        source: Box<Error>,
    },
}

/// A cargo feature a check needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    Tls,
    Grpc,
}

impl Error {
    pub fn get(url: String, source: Error) -> Error {
        Error::Get {
            url,
            source: Box::new(source),
        }
    }

    pub fn grpc_dial(addr: SocketAddr, source: Error) -> Error {
        Error::GrpcDial {
            addr,
            source: Box::new(source),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Lookup { host } => write!(f, "dial tcp: lookup {host}: no such host"),
            Error::Socket { addr, errno } => write!(f, "dial tcp {addr}: socket: {}", errno.desc()),
            Error::Connect { addr, errno } => {
                write!(
                    f,
                    "dial tcp {addr}: connect: {}",
                    errno.desc().to_lowercase()
                )
            }
            Error::SockOpt { addr, errno } => write!(f, "dial tcp {addr}: {}", errno.desc()),
            Error::Write { addr, error } => write!(f, "write tcp {addr}: {error}"),
            Error::Read { addr, error } => write!(f, "read tcp {addr}: {error}"),
            Error::Dup(e) => write!(f, "dup socket: {e}"),
            Error::Tls(e) => write!(f, "tls: {e}"),
            Error::TlsName { host, why } => write!(f, "tls: invalid server name {host:?}: {why}"),
            Error::HeadersTimeout => f.write_str(
                "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            ),
            Error::Eof => f.write_str("EOF"),
            Error::Response(what, None) => write!(f, "net/http: {what}"),
            Error::Response(what, Some(e)) => write!(f, "net/http: {what}: {e}"),
            Error::Status(code) => write!(f, "HTTP probe failed with statuscode: {code}"),
            Error::Redirect { location } => write!(f, "invalid redirect location {location:?}"),
            Error::TooManyRedirects(n) => write!(f, "stopped after {n} redirects"),
            Error::Feature(Feature::Tls) => {
                f.write_str("HTTPS needs podinit built with the \"tls\" feature")
            }
            Error::Feature(Feature::Grpc) => {
                f.write_str("gRPC probes need podinit built with the \"grpc\" feature")
            }
            Error::NotNetwork => f.write_str("exec handlers start through exec::ExecCheck"),
            Error::Get { url, source } => write!(f, "Get {url:?}: {source}"),
            Error::GrpcDial { addr, source } => write!(
                f,
                "timeout: failed to connect service {:?}: {source}",
                addr.to_string()
            ),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_gos_wording() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: SocketAddr = "[::1]:81".parse().unwrap();
        let io = || std::io::Error::from_raw_os_error(libc::ECONNRESET);
        let cases = [
            (
                Error::Lookup { host: "web".into() },
                "dial tcp: lookup web: no such host".to_string(),
            ),
            (
                Error::Socket {
                    addr,
                    errno: Errno::EMFILE,
                },
                "dial tcp 127.0.0.1:8080: socket: Too many open files".into(),
            ),
            (
                Error::Connect {
                    addr,
                    errno: Errno::ECONNREFUSED,
                },
                "dial tcp 127.0.0.1:8080: connect: connection refused".into(),
            ),
            (
                Error::SockOpt {
                    addr,
                    errno: Errno::EBADF,
                },
                "dial tcp 127.0.0.1:8080: Bad file number".into(),
            ),
            (
                Error::Write { addr, error: io() },
                format!("write tcp 127.0.0.1:8080: {}", io()),
            ),
            (
                Error::Read { addr, error: io() },
                format!("read tcp 127.0.0.1:8080: {}", io()),
            ),
            (Error::Dup(io()), format!("dup socket: {}", io())),
            (Error::Tls("bad".into()), "tls: bad".into()),
            (
                Error::TlsName {
                    host: "a b".into(),
                    why: "invalid dns name".into(),
                },
                "tls: invalid server name \"a b\": invalid dns name".into(),
            ),
            (Error::Eof, "EOF".into()),
            (
                Error::HeadersTimeout,
                "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".into(),
            ),
            (
                Error::Response("server response headers exceeded the limit", None),
                "net/http: server response headers exceeded the limit".into(),
            ),
            (
                Error::Response("malformed HTTP response", Some("invalid token".into())),
                "net/http: malformed HTTP response: invalid token".into(),
            ),
            (
                Error::Status(404),
                "HTTP probe failed with statuscode: 404".into(),
            ),
            (
                Error::Redirect {
                    location: "http://:x/".into(),
                },
                "invalid redirect location \"http://:x/\"".into(),
            ),
            (
                Error::TooManyRedirects(10),
                "stopped after 10 redirects".into(),
            ),
            (
                Error::Feature(Feature::Tls),
                "HTTPS needs podinit built with the \"tls\" feature".into(),
            ),
            (
                Error::Feature(Feature::Grpc),
                "gRPC probes need podinit built with the \"grpc\" feature".into(),
            ),
            (
                Error::NotNetwork,
                "exec handlers start through exec::ExecCheck".into(),
            ),
            (
                Error::get("http://127.0.0.1:8080/healthz".into(), Error::Eof),
                "Get \"http://127.0.0.1:8080/healthz\": EOF".into(),
            ),
            (
                Error::grpc_dial(
                    v6,
                    Error::Connect {
                        addr: v6,
                        errno: Errno::ECONNREFUSED,
                    },
                ),
                "timeout: failed to connect service \"[::1]:81\": dial tcp [::1]:81: connect: connection refused".into(),
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want, "{e:?}");
        }
    }
}
