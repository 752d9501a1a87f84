//! The errors of kernel primitives: which call failed, on what, with which errno. They
//! become `io::Error`s at the boundary of code still written over `io::Result`, keeping
//! their kind (`crate::error::Kind::of_io` finds a `sys::Error` inside).

use std::fmt;
use std::path::PathBuf;

use nix::errno::Errno;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A system call failed: which one, what it acted on (a path, a pid), and its errno.
    Syscall {
        call: &'static str,
        on: String,
        errno: Errno,
    },
    /// A kernel file (under /proc or a cgroup) could not be read or written.
    File {
        op: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
    /// A step made of several calls, or of a call on no one path, failed: what it was,
    /// and the OS's error.
    Io { what: String, err: std::io::Error },
    /// Something no system call can take or give (a NUL in a path, no cgroup directory).
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn syscall(call: &'static str, on: impl fmt::Display, errno: Errno) -> Error {
        Error::Syscall {
            call,
            on: on.to_string(),
            errno,
        }
    }

    pub fn file(op: &'static str, path: impl Into<PathBuf>, err: std::io::Error) -> Error {
        Error::File {
            op,
            path: path.into(),
            err,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::Syscall { errno, .. } => Kind::of_errno(*errno),
            Error::File { err, .. } | Error::Io { err, .. } => Kind::of_io(err),
            Error::Invalid(_) => Kind::InvalidArgument,
        }
    }

    /// The errno, when the kernel gave one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Syscall { errno, .. } => Some(*errno),
            Error::File { err, .. } | Error::Io { err, .. } => {
                err.raw_os_error().map(Errno::from_raw)
            }
            Error::Invalid(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syscall { call, on, errno } if on.is_empty() => {
                write!(f, "{call}: {}", errno.desc())
            }
            Error::Syscall { call, on, errno } => write!(f, "{call} {on}: {}", errno.desc()),
            Error::File { op, path, err } => write!(f, "{op} {}: {err}", path.display()),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Invalid(m) => f.write_str(m),
        }
    }
}

crate::error::layer_error!(Error);
crate::error::context!(Error: io);

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        let kind = match (&e, e.errno()) {
            (_, Some(n)) => std::io::Error::from_raw_os_error(n as i32).kind(),
            (Error::Io { err, .. }, None) => err.kind(),
            (_, None) => std::io::ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_names_its_call_or_file_and_keeps_its_kind() {
        let e = Error::syscall("setns", "pid 7", Errno::EPERM);
        assert_eq!(e.to_string(), "setns pid 7: Operation not permitted");
        assert_eq!(e.kind(), Kind::PermissionDenied);
        let e = Error::file(
            "reading",
            "/proc/7/status",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(e.to_string().starts_with("reading /proc/7/status: "), "{e}");
        assert_eq!(e.kind(), Kind::NotFound);
        assert_eq!(Error::Invalid("x".into()).kind(), Kind::InvalidArgument);
        let io: std::io::Error = Error::syscall("open", "/x", Errno::EEXIST).into();
        assert_eq!(io.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(Kind::of_io(&io), Kind::AlreadyExists);
        assert_eq!(io.to_string(), "open /x: File exists");
        let e = Error::io("dup2", std::io::Error::from_raw_os_error(libc::EBADF));
        assert!(
            e.to_string().starts_with("dup2: Bad file descriptor"),
            "{e}"
        );
        assert_eq!(e.errno(), Some(Errno::EBADF));
    }
}
