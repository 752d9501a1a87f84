//! The sandbox's errors: what was done to the kernel around the pod (a directory, a
//! namespace, a sysctl, a lock), to which path, with the OS's error; or why the pod's
//! user namespace cannot be had. Each keeps the one line podinit printed before it was
//! typed.

use std::fmt;
use std::io;

use nix::errno::Errno;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A file, directory or namespace step failed: what, on which path, and the OS's error.
    Io { what: String, err: io::Error },
    /// A system call failed: what it was for, and its errno as nix words it.
    Sys { what: String, errno: Errno },
    /// Every block of the id range is taken.
    NoFreeBlock,
    /// The child that makes the pod's namespaces exited before it said how it went.
    HelperExited,
    /// A volume's files could not be had from their source: the volume plugin's words
    /// (`configmap "x" not found`).
    Files(String),
    /// A volume could not be made on the host: the OS's error, whose text says what and
    /// where.
    Volume(io::Error),
    /// The kernel makes no idmapped mounts on a filesystem the pod needs: which (the
    /// filesystem, what it holds) and the kernel's error.
    NoIdmap {
        fs: String,
        what: String,
        err: io::Error,
    },
}

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::Io { err, .. } => Kind::of_io(err),
            Error::Sys { errno, .. } => Kind::of_errno(*errno),
            Error::NoFreeBlock => Kind::Unavailable,
            Error::HelperExited => Kind::Internal,
            Error::NoIdmap { .. } => Kind::FailedPrecondition,
            Error::Files(_) => Kind::Unknown,
            Error::Volume(err) => Kind::of_io(err),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Sys { what, errno } => write!(f, "{what}: {errno}"),
            Error::NoFreeBlock => {
                f.write_str("could not find an empty slot to allocate a user namespace")
            }
            Error::HelperExited => f.write_str("the user namespace's helper exited"),
            Error::Files(m) => f.write_str(m),
            Error::Volume(err) => err.fmt(f),
            Error::NoIdmap { fs, what, err } => write!(
                f,
                "spec.hostUsers: false needs idmapped mounts, which this kernel does not make on {fs} ({what}): {err}"
            ),
        }
    }
}

crate::error::layer_error!(Error);
crate::error::context!(Error: io, sys);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_keeps_its_line_and_has_its_kind() {
        let e = Error::sys("locking /run/podinit/userns/65536", Errno::EIO);
        assert_eq!(
            e.to_string(),
            "locking /run/podinit/userns/65536: EIO: I/O error"
        );
        assert_eq!(e.kind(), Kind::Unknown);
        let e = Error::io(
            "setting sysctl net.ipv4.ip_forward=1",
            io::Error::from_raw_os_error(libc::EACCES),
        );
        assert_eq!(e.kind(), Kind::PermissionDenied);
        assert_eq!(Error::NoFreeBlock.kind(), Kind::Unavailable);
        let e = Error::NoIdmap {
            fs: "tmpfs".into(),
            what: "emptyDir medium Memory".into(),
            err: io::Error::from_raw_os_error(libc::EINVAL),
        };
        assert!(e.to_string().starts_with(
            "spec.hostUsers: false needs idmapped mounts, which this kernel does not make on tmpfs (emptyDir medium Memory): "
        ));
        assert_eq!(e.kind(), Kind::FailedPrecondition);
        let e = Error::Files("configmap \"x\" not found".into());
        assert_eq!(e.to_string(), "configmap \"x\" not found");
        assert_eq!(e.kind(), Kind::Unknown);
        let e = Error::Volume(io::Error::new(
            io::ErrorKind::NotFound,
            "hostPath /x: missing",
        ));
        assert_eq!(e.to_string(), "hostPath /x: missing");
        assert_eq!(e.kind(), Kind::NotFound);
    }
}
