//! The runc front-end's errors, in runc's own words, and the one place they become the
//! logged line and the exit status (`report`): what runc_errors and the differential tests
//! hold podinit to.

use std::fmt;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// No state for the ID: runc's "container does not exist".
    NotExist,
    /// A container of that ID exists already.
    Exists(String),
    /// The verb needs a running container.
    NotRunning,
    /// The container's state forbids the verb; runc's sentence for it.
    WrongState(String),
    /// Bad arguments or an invalid ID, in urfave/cli's or runc's words.
    Usage(String),
    /// What podinit-runc does not do (checkpoint, restore, systemd cgroups).
    Unsupported(String),
    /// A verb runc does not have: urfave/cli's "No help topic", exit status 3.
    NoSuchVerb(String),
    /// The runtime failed for container `id`.
    Runtime {
        id: String,
        err: crate::runtime::Error,
    },
    /// A process could not be started in container `id`.
    Exec {
        id: String,
        err: crate::runtime::Error,
    },
    /// The container's cgroup could not be found, made, changed or removed.
    Cgroup(crate::cgroup::Error),
    /// The bundle's config.json is missing, unreadable or not a spec runc runs: runc's
    /// sentence, naming the file or the field.
    Config(String),
    /// A file or socket of the verb's own (state, pid file, console socket): what was done
    /// to which path, and the OS's error.
    Io { what: String, err: std::io::Error },
    /// Anything else, as its message.
    Other(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::NotExist => Kind::NotFound,
            Error::Exists(_) => Kind::AlreadyExists,
            Error::NotRunning | Error::WrongState(_) => Kind::FailedPrecondition,
            Error::Usage(_) | Error::NoSuchVerb(_) => Kind::InvalidArgument,
            Error::Unsupported(_) => Kind::Unimplemented,
            Error::Runtime { err, .. } | Error::Exec { err, .. } => err.kind(),
            Error::Cgroup(e) => e.kind(),
            Error::Config(_) => Kind::InvalidArgument,
            Error::Io { err, .. } => Kind::of_io(err),
            Error::Other(_) => Kind::Unknown,
        }
    }

    /// runc's exit status: 1 for every error (logrus' fatal), but urfave/cli's 3 for an
    /// unknown verb.
    pub fn exit_status(&self) -> i32 {
        match self {
            Error::NoSuchVerb(_) => 3,
            _ => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotExist => f.write_str("container does not exist"),
            Error::Exists(id) => write!(f, "container with id exists: {id}"),
            Error::NotRunning => f.write_str("container not running"),
            Error::NoSuchVerb(v) => write!(f, "No help topic for '{v}'"),
            Error::Runtime { id, err } => write!(f, "container {id}: {err}"),
            Error::Exec { id, err } => write!(f, "exec in container {id}: {err}"),
            Error::Cgroup(e) => e.fmt(f),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::WrongState(m)
            | Error::Usage(m)
            | Error::Unsupported(m)
            | Error::Config(m)
            | Error::Other(m) => f.write_str(m),
        }
    }
}

impl From<String> for Error {
    fn from(m: String) -> Error {
        Error::Other(m)
    }
}

impl From<crate::cgroup::Error> for Error {
    fn from(e: crate::cgroup::Error) -> Error {
        Error::Cgroup(e)
    }
}

impl From<&str> for Error {
    fn from(m: &str) -> Error {
        Error::Other(m.to_string())
    }
}

crate::error::string_from!(Error);
crate::error::context!(Error: io);

/// Logs the error as runc does (one line, at level error) and gives runc's exit status.
pub fn report(e: &Error) -> i32 {
    super::log::error(&e.to_string());
    e.exit_status()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_runcs_words_and_exit_status() {
        let spec = crate::runtime::Error::Spec("process.args: Required value".into());
        let cases = [
            (
                Error::NotExist,
                Kind::NotFound,
                "container does not exist",
                1,
            ),
            (
                Error::Exists("c1".into()),
                Kind::AlreadyExists,
                "container with id exists: c1",
                1,
            ),
            (
                Error::NotRunning,
                Kind::FailedPrecondition,
                "container not running",
                1,
            ),
            (
                Error::WrongState("cannot delete container c1 that is not stopped: running".into()),
                Kind::FailedPrecondition,
                "cannot delete container c1 that is not stopped: running",
                1,
            ),
            (
                Error::Usage("invalid container ID format: \"a/b\"".into()),
                Kind::InvalidArgument,
                "invalid container ID format: \"a/b\"",
                1,
            ),
            (
                Error::Unsupported("checkpoint is not supported by podinit-runc".into()),
                Kind::Unimplemented,
                "checkpoint is not supported by podinit-runc",
                1,
            ),
            (
                Error::NoSuchVerb("nope".into()),
                Kind::InvalidArgument,
                "No help topic for 'nope'",
                3,
            ),
            (
                Error::Runtime {
                    id: "c1".into(),
                    err: spec,
                },
                Kind::InvalidArgument,
                "container c1: process.args: Required value",
                1,
            ),
            (
                Error::Exec {
                    id: "c1".into(),
                    err: crate::runtime::Error::Start("exec: \"nope\": not found".into()),
                },
                Kind::Unknown,
                "exec in container c1: exec: \"nope\": not found",
                1,
            ),
            (
                Error::from(crate::cgroup::Error::Missing {
                    what: "devices".into(),
                    why: "no devices controller for cgroup /x".into(),
                }),
                Kind::FailedPrecondition,
                "devices: no devices controller for cgroup /x",
                1,
            ),
            (
                Error::Config("rootfs (\"/b/rootfs\") does not exist".into()),
                Kind::InvalidArgument,
                "rootfs (\"/b/rootfs\") does not exist",
                1,
            ),
            (
                Error::io(
                    "writing pid file /run/p",
                    std::io::Error::from_raw_os_error(libc::EACCES),
                ),
                Kind::PermissionDenied,
                "writing pid file /run/p: Permission denied (os error 13)",
                1,
            ),
            (Error::Other("o".into()), Kind::Unknown, "o", 1),
        ];
        for (e, kind, line, status) in cases {
            assert_eq!(e.kind(), kind, "{e}");
            assert_eq!(e.to_string(), line);
            assert_eq!(e.exit_status(), status, "{e}");
        }
    }

    #[test]
    fn every_runtime_error_keeps_its_kind_and_fails_with_status_1() {
        use crate::runtime::Error as R;
        let cases = [
            (
                R::spec("process.args: Required value"),
                Kind::InvalidArgument,
            ),
            (
                R::errno("setns /proc/7/ns/net", nix::errno::Errno::ENOENT),
                Kind::NotFound,
            ),
            (
                R::os("clone3", std::io::Error::from_raw_os_error(libc::EPERM)),
                Kind::PermissionDenied,
            ),
            (R::Hook("prestart: exit status 1".into()), Kind::Unknown),
            (R::Setup("the hop exited".into()), Kind::Unknown),
            (R::Start("exec: \"x\": not found".into()), Kind::Unknown),
            (R::Exited("the process has exited".into()), Kind::NotFound),
        ];
        for (err, kind) in cases {
            let line = format!("container c1: {err}");
            let e = Error::Runtime {
                id: "c1".into(),
                err,
            };
            assert_eq!((e.kind(), e.exit_status()), (kind, 1), "{e}");
            assert_eq!(e.to_string(), line);
        }
    }
}
