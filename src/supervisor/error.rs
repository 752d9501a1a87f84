//! The supervisor's errors: what failed as it carried out `pod`'s decisions (a container's
//! start, its image volume, its resize, the pod's pause), with the container, path or
//! step it concerns. Their lines become kubelet's event messages and waiting reasons'
//! messages (`CreateContainerError`, `RunContainerError`, `FailedMount`), so each keeps
//! the line podinit wrote before it was typed.

use std::fmt;
use std::io;

use nix::errno::Errno;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A file, directory or descriptor step failed: what, on which path, the OS's error.
    Io { what: String, err: io::Error },
    /// A system call failed: what it was for, and its errno as nix words it.
    Sys { what: String, errno: Errno },
    /// An OS error whose own text says what and where (a root filesystem, a log file).
    Os(io::Error),
    /// The container's image is not in the store (no pull made it yet).
    NotInStore { image: String },
    /// `what` (an image, or the image of a volume) is gone from the store after its pull.
    Vanished { what: String },
    /// The run to end is not there (no start made one).
    NoRun,
    /// The container's process failed in its set-up, before its exec: the runtime's line.
    Start(String),
    /// The pod's pause could not be made: why, in its own words.
    Pause(String),
    /// kubelet refuses a memory limit below what the cgroup uses now.
    BelowUsage {
        what: String,
        limit: i64,
        usage: i64,
    },
    /// A value podinit computed itself could not be used: what, and why.
    Internal { what: String, why: String },
    /// A volume could not be set up: the volume plugin's words (`FailedMount`).
    Volume(String),
    /// The volume a `fileKeyRef` names is not set up.
    EnvFileVolume { volume: String, path: String },
    /// An env file could not be read: the volume, the file's path in it, and why.
    EnvFileRead {
        volume: String,
        path: String,
        err: Box<Error>,
    },
    /// An env file is larger than kubelet reads.
    EnvFileTooLarge {
        volume: String,
        path: String,
        max_kib: usize,
    },
    /// The cgroup floor's error (a cgroup, a systemd unit), with its own context.
    Cgroup(crate::cgroup::Error),
    /// The runtime's error: the container's process could not be made.
    Runtime(crate::runtime::Error),
    /// The container's OCI spec could not be built.
    Spec(crate::spec::Error),
    /// The container's bundle or image config says what cannot be run (a stop signal).
    Bundle(crate::bundle::Error),
    /// The image store's error.
    Image(crate::image::Error),
    /// The error of container `name`.
    Container { name: String, err: Box<Error> },
    /// The error, with what was being done said first.
    Within { what: String, err: Box<Error> },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(what: impl fmt::Display, err: io::Error) -> Error {
        Error::Io {
            what: what.to_string(),
            err,
        }
    }

    pub fn sys(what: impl fmt::Display, errno: Errno) -> Error {
        Error::Sys {
            what: what.to_string(),
            errno,
        }
    }

    /// The same error, said as container `name`'s.
    pub fn of_container(self, name: &str) -> Error {
        Error::Container {
            name: name.to_string(),
            err: Box::new(self),
        }
    }

    /// The same error, with `what` said first.
    pub fn within(self, what: impl fmt::Display) -> Error {
        Error::Within {
            what: what.to_string(),
            err: Box::new(self),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::Io { err, .. } | Error::Os(err) => Kind::of_io(err),
            Error::Sys { errno, .. } => Kind::of_errno(*errno),
            Error::NotInStore { .. } | Error::Vanished { .. } => Kind::NotFound,
            Error::NoRun => Kind::FailedPrecondition,
            Error::Start(_) | Error::Pause(_) | Error::Volume(_) => Kind::Unknown,
            Error::BelowUsage { .. } => Kind::FailedPrecondition,
            Error::Internal { .. } => Kind::Internal,
            Error::EnvFileVolume { .. } => Kind::FailedPrecondition,
            Error::EnvFileTooLarge { .. } => Kind::InvalidArgument,
            Error::Cgroup(e) => e.kind(),
            Error::Runtime(e) => e.kind(),
            Error::Spec(e) => e.kind(),
            Error::Bundle(e) => e.kind(),
            Error::Image(e) => e.kind(),
            Error::EnvFileRead { err, .. }
            | Error::Container { err, .. }
            | Error::Within { err, .. } => err.kind(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Sys { what, errno } => write!(f, "{what}: {errno}"),
            Error::Os(err) => err.fmt(f),
            Error::NotInStore { image } => write!(f, "image {image:?} is not in the store"),
            Error::Vanished { what } => write!(f, "{what} is not in the store after its pull"),
            Error::NoRun => f.write_str("no run"),
            Error::Start(m) | Error::Pause(m) | Error::Volume(m) => f.write_str(m),
            Error::BelowUsage { what, limit, usage } => write!(
                f,
                "attempting to set {what} memory limit ({limit}) below its current usage ({usage})"
            ),
            Error::Internal { what, why } => write!(f, "{what}: {why}"),
            Error::EnvFileVolume { volume, path } => {
                write!(f, "volume {volume:?} of env file {path:?} is not set up")
            }
            Error::EnvFileRead { volume, path, err } => {
                write!(
                    f,
                    "couldn't read env file {path:?} in volume {volume:?}: {err}"
                )
            }
            Error::EnvFileTooLarge {
                volume,
                path,
                max_kib,
            } => write!(
                f,
                "env file {path:?} in volume {volume:?} is larger than {max_kib} KiB"
            ),
            Error::Cgroup(e) => e.fmt(f),
            Error::Runtime(e) => e.fmt(f),
            Error::Spec(e) => e.fmt(f),
            Error::Bundle(e) => e.fmt(f),
            Error::Image(e) => e.fmt(f),
            Error::Container { name, err } => write!(f, "container {name}: {err}"),
            Error::Within { what, err } => write!(f, "{what}: {err}"),
        }
    }
}

crate::error::from_layer!(
    Cgroup(crate::cgroup::Error),
    Runtime(crate::runtime::Error),
    Spec(crate::spec::Error),
    Bundle(crate::bundle::Error),
    Image(crate::image::Error)
);

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_keeps_its_line_and_has_its_kind() {
        let cases: Vec<(Error, &str, Kind)> = vec![
            (
                Error::io(
                    "creating /s/c/termination-log",
                    io::Error::from_raw_os_error(libc::ENOSPC),
                ),
                "creating /s/c/termination-log: No space left on device (os error 28)",
                Kind::Unavailable,
            ),
            (
                Error::sys("pipe", Errno::EMFILE),
                "pipe: EMFILE: Too many open files",
                Kind::Unknown,
            ),
            (
                Error::NotInStore {
                    image: "busybox:1.36".into(),
                },
                "image \"busybox:1.36\" is not in the store",
                Kind::NotFound,
            ),
            (
                Error::Vanished {
                    what: "image docker.io/library/busybox:1.36".into(),
                },
                "image docker.io/library/busybox:1.36 is not in the store after its pull",
                Kind::NotFound,
            ),
            (Error::NoRun, "no run", Kind::FailedPrecondition),
            (
                Error::Start("exec: \"nope\": not found".into()),
                "exec: \"nope\": not found",
                Kind::Unknown,
            ),
            (
                Error::BelowUsage {
                    what: "container c".into(),
                    limit: 1,
                    usage: 2,
                },
                "attempting to set container c memory limit (1) below its current usage (2)",
                Kind::FailedPrecondition,
            ),
            (
                Error::EnvFileVolume {
                    volume: "config".into(),
                    path: "a.env".into(),
                },
                "volume \"config\" of env file \"a.env\" is not set up",
                Kind::FailedPrecondition,
            ),
            (
                Error::EnvFileRead {
                    volume: "config".into(),
                    path: "a.env".into(),
                    err: Box::new(Error::Os(io::Error::from_raw_os_error(libc::EACCES))),
                },
                "couldn't read env file \"a.env\" in volume \"config\": Permission denied (os error 13)",
                Kind::PermissionDenied,
            ),
            (
                Error::EnvFileTooLarge {
                    volume: "config".into(),
                    path: "a.env".into(),
                    max_kib: 64,
                },
                "env file \"a.env\" in volume \"config\" is larger than 64 KiB",
                Kind::InvalidArgument,
            ),
            (
                Error::from(crate::runtime::Error::spec("process.args: Required value"))
                    .within("making the pod's pause"),
                "making the pod's pause: process.args: Required value",
                Kind::InvalidArgument,
            ),
            (
                Error::Volume("configmap \"x\" not found".into())
                    .within("image volume \"v\" (r)")
                    .of_container("c"),
                "container c: image volume \"v\" (r): configmap \"x\" not found",
                Kind::Unknown,
            ),
        ];
        for (e, line, kind) in cases {
            assert_eq!(e.to_string(), line);
            assert_eq!(e.kind(), kind, "{line}");
        }
    }
}
