//! The image layer's errors, with what a front-end needs to tell them apart: a name that
//! does not parse, an image the store does not have, one a running container holds,
//! content that does not verify, a registry's refusal with its status, a file of the
//! store with its path and OS error. Each keeps the one line podinit has always printed.

use std::fmt;
use std::io;
use std::path::PathBuf;

use nix::errno::Errno;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A reference that does not parse; the message names what is wrong.
    Reference(String),
    /// No image of that name in the store.
    NoImage { name: String, store: PathBuf },
    /// A running container uses the image: it stays.
    InUse(String),
    /// A file of the store, an archive or a layout: what was done to which path, and the
    /// OS's error.
    Io { what: String, err: io::Error },
    /// An OS error, or a stream's (a digest or size that does not match its descriptor),
    /// whose line is its own: the context that names the file or entry wraps it.
    Os(io::Error),
    /// A system call on a file of the store or a layer (a lock, mknod, chown): what was
    /// done to which path, and its errno.
    Sys { what: String, errno: Errno },
    /// Content that is not what it claims to be, or not an image's: JSON that does not
    /// parse, a digest that does not match, a field missing or out of range.
    Content(String),
    /// Content of a kind podinit does not take (schema 1, encrypted layers, an unknown
    /// media type).
    Unsupported(String),
    /// A blob, layer or platform the image needs is not there.
    Missing(String),
    /// A layer that unpacks to more than its cap (a decompression bomb): which cap.
    TooLarge(String),
    /// A setting from the environment that does not parse: the variable and why.
    Setting(String),
    /// A registry refused or could not be reached: its HTTP status when it answered.
    Registry {
        status: Option<u16>,
        message: String,
    },
    /// A registry that cannot be named as an endpoint (`host:port` that does not parse):
    /// the registry and why.
    Endpoint { registry: String, why: String },
    /// A URL the conversation cannot follow (a scheme other than http and https, a bad
    /// port): the URL as given and why.
    Url { url: String, why: String },
    /// An `HTTP(S)_PROXY` setting podinit cannot use: the setting and why.
    Proxy { setting: String, why: String },
    /// A step of an exchange with a registry that answered failed: which URL, which step,
    /// and why (a body cut short or too large, a token answer without a token).
    Exchange {
        url: String,
        step: Step,
        why: String,
    },
    /// The error of a step on a named thing (an image, a blob, a layer, a pull).
    In { what: String, err: Box<Error> },
}

/// The step of a registry exchange that failed after the registry answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reading an answer's body.
    Body,
    /// Reading the token server's answer.
    Token,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A registry's error with no answer to give its status (a connection, a protocol
    /// error).
    pub fn unreachable(message: String) -> Error {
        Error::Registry {
            status: None,
            message,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::Reference(_) | Error::Content(_) | Error::TooLarge(_) | Error::Setting(_) => {
                Kind::InvalidArgument
            }
            Error::NoImage { .. } | Error::Missing(_) => Kind::NotFound,
            Error::InUse(_) => Kind::FailedPrecondition,
            Error::Io { err, .. } | Error::Os(err) => Kind::of_io(err),
            Error::Sys { errno, .. } => Kind::of_errno(*errno),
            Error::Unsupported(_) => Kind::Unimplemented,
            Error::Registry { status, .. } => match status {
                Some(401 | 403) => Kind::PermissionDenied,
                Some(404) => Kind::NotFound,
                Some(408 | 429 | 500..=599) | None => Kind::Unavailable,
                Some(_) => Kind::Unknown,
            },
            Error::Endpoint { .. } | Error::Url { .. } | Error::Proxy { .. } => {
                Kind::InvalidArgument
            }
            Error::Exchange { .. } => Kind::Unavailable,
            Error::In { err, .. } => err.kind(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoImage { name, store } => {
                write!(f, "no image {name} in the store {}", store.display())
            }
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Os(err) => err.fmt(f),
            Error::Sys { what, errno } => write!(f, "{what}: {errno}"),
            Error::Registry { message, .. } => f.write_str(message),
            Error::In { what, err } => write!(f, "{what}: {err}"),
            Error::Endpoint { registry, why } => write!(f, "registry {registry:?}: {why}"),
            Error::Url { url, why } => write!(f, "URL {url:?}: {why}"),
            Error::Proxy { setting, why } => write!(f, "proxy {setting:?}: {why}"),
            Error::Exchange { url, why, .. } => write!(f, "{url}: {why}"),
            Error::Reference(m)
            | Error::InUse(m)
            | Error::Content(m)
            | Error::Unsupported(m)
            | Error::Missing(m)
            | Error::TooLarge(m)
            | Error::Setting(m) => f.write_str(m),
        }
    }
}

crate::error::layer_error!(Error);
crate::error::context!(Error: io, sys, within);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_its_kind_and_line() {
        let e = Error::NoImage {
            name: "docker.io/library/x:latest".into(),
            store: "/var/lib/podinit/images".into(),
        };
        assert_eq!(e.kind(), Kind::NotFound);
        assert_eq!(
            e.to_string(),
            "no image docker.io/library/x:latest in the store /var/lib/podinit/images"
        );
        let enoent = || io::Error::from_raw_os_error(libc::ENOENT);
        let cases = [
            (Error::Reference("r".into()), Kind::InvalidArgument, "r"),
            (Error::InUse("u".into()), Kind::FailedPrecondition, "u"),
            (Error::Content("c".into()), Kind::InvalidArgument, "c"),
            (Error::Unsupported("s".into()), Kind::Unimplemented, "s"),
            (Error::Missing("m".into()), Kind::NotFound, "m"),
            (Error::TooLarge("t".into()), Kind::InvalidArgument, "t"),
            (Error::Setting("v".into()), Kind::InvalidArgument, "v"),
            (
                Error::io("reading /s/index.json", enoent()),
                Kind::NotFound,
                "reading /s/index.json: No such file or directory (os error 2)",
            ),
            (
                Error::Os(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "digest mismatch",
                )),
                Kind::InvalidArgument,
                "digest mismatch",
            ),
            (
                Error::sys("locking /s/lock", Errno::EACCES),
                Kind::PermissionDenied,
                "locking /s/lock: EACCES: Permission denied",
            ),
            (
                Error::Registry {
                    status: Some(401),
                    message: "401 Unauthorized".into(),
                },
                Kind::PermissionDenied,
                "401 Unauthorized",
            ),
            (
                Error::Registry {
                    status: Some(404),
                    message: "not found".into(),
                },
                Kind::NotFound,
                "not found",
            ),
            (
                Error::Registry {
                    status: Some(503),
                    message: "503".into(),
                },
                Kind::Unavailable,
                "503",
            ),
            (
                Error::unreachable("connection refused".into()),
                Kind::Unavailable,
                "connection refused",
            ),
            (
                Error::Endpoint {
                    registry: "r:x".into(),
                    why: "invalid port \"x\"".into(),
                },
                Kind::InvalidArgument,
                "registry \"r:x\": invalid port \"x\"",
            ),
            (
                Error::Url {
                    url: "ftp://r/".into(),
                    why: "only http:// and https:// are supported".into(),
                },
                Kind::InvalidArgument,
                "URL \"ftp://r/\": only http:// and https:// are supported",
            ),
            (
                Error::Proxy {
                    setting: "socks5://p".into(),
                    why: "only http:// proxies are supported".into(),
                },
                Kind::InvalidArgument,
                "proxy \"socks5://p\": only http:// proxies are supported",
            ),
            (
                Error::Exchange {
                    url: "https://r/v2/".into(),
                    step: Step::Body,
                    why: "answer larger than 10 bytes".into(),
                },
                Kind::Unavailable,
                "https://r/v2/: answer larger than 10 bytes",
            ),
            (
                Error::Missing("layer x".into())
                    .within("blob b")
                    .within("pull a"),
                Kind::NotFound,
                "pull a: blob b: layer x",
            ),
        ];
        for (e, kind, line) in cases {
            assert_eq!(e.kind(), kind, "{e}");
            assert_eq!(e.to_string(), line);
        }
    }
}
