//! The runtime's errors: a spec it cannot run, a system call that failed, a hook that
//! failed, a process that failed before its exec, each with the container it concerns
//! when the caller did not name it already.

use std::fmt;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// The spec asks for what cannot be done; the message names the field.
    Spec(String),
    /// A system call or kernel file of the runtime's failed.
    Sys(crate::sys::Error),
    /// An OCI hook failed: its phase, path and why.
    Hook(String),
    /// Something of the runtime's own failed on the way (a socket, a clone): what, and why.
    Setup(String),
    /// The container's process failed in its set-up, before its exec: its own line.
    Start(String),
    /// A call of the runtime's own that failed on what it names (a namespace, a map file),
    /// with the OS's error as the standard library words it.
    Os { what: String, err: std::io::Error },
    /// The same, with the errno as nix words it.
    Errno {
        what: String,
        errno: nix::errno::Errno,
    },
    /// The process a call needs has exited.
    Exited(String),
    /// The cgroup a process goes in could not be found or used.
    Cgroup(crate::cgroup::Error),
    /// The error of a process joining container `container` (an exec, a probe, a hook).
    In { container: String, err: Box<Error> },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::Spec(_) => Kind::InvalidArgument,
            Error::Sys(e) => e.kind(),
            Error::Hook(_) | Error::Setup(_) | Error::Start(_) => Kind::Unknown,
            Error::Os { err, .. } => Kind::of_io(err),
            Error::Errno { errno, .. } => Kind::of_errno(*errno),
            Error::Exited(_) => Kind::NotFound,
            Error::Cgroup(e) => e.kind(),
            Error::In { err, .. } => err.kind(),
        }
    }

    /// A spec the runtime cannot run: the message names the field.
    pub fn spec(message: impl Into<String>) -> Error {
        Error::Spec(message.into())
    }

    pub fn os(what: impl fmt::Display, err: std::io::Error) -> Error {
        Error::Os {
            what: what.to_string(),
            err,
        }
    }

    pub fn errno(what: impl fmt::Display, errno: nix::errno::Errno) -> Error {
        Error::Errno {
            what: what.to_string(),
            errno,
        }
    }

    /// The error as one of container `name`'s, for a process joining it: its caller reports
    /// a probe or hook. A front-end that names the container itself gives no name.
    pub fn named(self, name: &str, exec: bool) -> Error {
        if exec && !name.is_empty() {
            Error::In {
                container: name.to_string(),
                err: Box::new(self),
            }
        } else {
            self
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Spec(m)
            | Error::Hook(m)
            | Error::Setup(m)
            | Error::Start(m)
            | Error::Exited(m) => f.write_str(m),
            Error::Os { what, err } => write!(f, "{what}: {err}"),
            Error::Errno { what, errno } => write!(f, "{what}: {errno}"),
            Error::Sys(e) => e.fmt(f),
            Error::Cgroup(e) => e.fmt(f),
            Error::In { container, err } => write!(f, "container {container}: {err}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<crate::cgroup::Error> for Error {
    fn from(e: crate::cgroup::Error) -> Error {
        Error::Cgroup(e)
    }
}

impl From<crate::sys::Error> for Error {
    fn from(e: crate::sys::Error) -> Error {
        Error::Sys(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_its_kind_and_names_its_container_once() {
        let spec = Error::Spec("process.args: Required value".into());
        assert_eq!(spec.kind(), Kind::InvalidArgument);
        let sys = Error::from(crate::sys::Error::syscall(
            "setns",
            "pid 7",
            nix::errno::Errno::ESRCH,
        ));
        assert_eq!(sys.kind(), Kind::NotFound);
        let e = sys.named("lifecycle-demo-container", true);
        assert_eq!(e.kind(), Kind::NotFound);
        assert_eq!(
            e.to_string(),
            "container lifecycle-demo-container: setns pid 7: No such process"
        );
        assert_eq!(Error::Hook("h".into()).named("c", false).to_string(), "h");
        assert_eq!(Error::Setup("s".into()).named("", true).to_string(), "s");
        assert_eq!(Error::Hook("h".into()).kind(), Kind::Unknown);
        let e = Error::errno(
            "linux.namespaces: opening the net namespace /x",
            nix::errno::Errno::ENOENT,
        );
        assert_eq!(e.kind(), Kind::NotFound);
        assert_eq!(
            e.to_string(),
            "linux.namespaces: opening the net namespace /x: ENOENT: No such file or directory"
        );
        let e = Error::os(
            "joining the pid namespace",
            std::io::Error::from_raw_os_error(libc::EPERM),
        );
        assert_eq!(e.kind(), Kind::PermissionDenied);
        assert_eq!(
            e.to_string(),
            "joining the pid namespace: Operation not permitted (os error 1)"
        );
        let e = Error::Exited("the container's process has exited".into());
        assert_eq!(e.kind(), Kind::NotFound);
    }
}
