//! The shim's errors, and the one place they become ttrpc codes: as containerd's runc shim
//! gives them (`errdefs.ToGRPC`), so that containerd and the CRI tell a missing container
//! from a wrong state or a runtime failure.

use std::fmt;

use containerd_shim::protos::ttrpc::{self, Code};
use podinit::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// No container of this id in the shim.
    ContainerNotFound(String),
    /// No process of this exec id in its container.
    ProcessNotFound(String),
    /// The process has exited (or was never started): a signal has nothing to reach.
    ProcessFinished,
    /// A container of this id exists already.
    ContainerExists(String),
    /// An exec of this id exists already in the container.
    ExecExists(String),
    /// The process or container is in the wrong state for the call; the message says which.
    WrongState(String),
    /// A signal number the kernel does not know.
    InvalidSignal(u32),
    /// ResizePty for a process without a terminal.
    NoTerminal,
    /// The rootfs containerd gave could not be mounted.
    Mount(String),
    /// A runc verb failed: runc's own last error line.
    Runc(String),
    /// The runtime's state of the container is gone (Stats).
    NoState(String),
    /// A request the shim cannot take as given: no id, options that do not parse.
    Invalid(String),
    /// A request for what the shim does not do (a pod's user namespace in Sandbox mode).
    Unsupported(String),
    /// Something the request names is not there (a network namespace).
    Missing(String),
    /// The bundle's config.json could not be read or parsed: Unknown, as runc's failure
    /// to read it is under containerd's runc shim.
    Spec(podinit::spec::LoadError),
    /// A sandbox's spec the shim cannot lay its pause over (no process, nothing on /dev):
    /// Unknown, as the runtime's refusal of a spec is.
    SandboxSpec(podinit::spec::Error),
    /// A cgroup could not be found, made or removed: what, and the cgroup layer's error
    /// with its kind.
    Cgroup {
        what: String,
        err: podinit::cgroup::Error,
    },
    /// The shim's own set-up of a sandbox failed (its files, its PID 1, its record), or
    /// its PID 1 would not die: what, with its cause.
    Setup(String),
    /// A file, FIFO, socket or pipe of the shim's own: what was done to which path, and
    /// the OS's error. Unknown, as containerd's runc shim gives an OS error (no `errdefs`
    /// error) to containerd.
    Io { what: String, err: std::io::Error },
    /// Something of the shim's own failed: what, with its cause.
    Other(String),
}

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::ContainerNotFound(_)
            | Error::ProcessNotFound(_)
            | Error::ProcessFinished
            | Error::NoState(_) => Kind::NotFound,
            Error::ContainerExists(_) | Error::ExecExists(_) => Kind::AlreadyExists,
            Error::WrongState(_) | Error::NoTerminal => Kind::FailedPrecondition,
            Error::InvalidSignal(_) | Error::Invalid(_) => Kind::InvalidArgument,
            Error::Unsupported(_) => Kind::Unimplemented,
            Error::Missing(_) => Kind::NotFound,
            Error::Cgroup { err, .. } => err.kind(),
            Error::Mount(_) | Error::Setup(_) => Kind::Internal,
            Error::Runc(_)
            | Error::Other(_)
            | Error::Io { .. }
            | Error::Spec(_)
            | Error::SandboxSpec(_) => Kind::Unknown,
        }
    }

    pub fn io(what: impl fmt::Display, err: std::io::Error) -> Error {
        Error::Io {
            what: what.to_string(),
            err,
        }
    }

    /// A failed `kill` verb, read as containerd's runc shim reads runc's (`checkKillError`):
    /// a process that is gone is NotFound, anything else the runtime's error.
    pub fn of_kill(e: Error) -> Error {
        let Error::Runc(message) = e else {
            return e;
        };
        let gone = message.contains("os: process already finished")
            || message.contains("container not running")
            || message.to_lowercase().contains("no such process");
        if gone {
            Error::ProcessFinished
        } else if message.contains("does not exist") {
            Error::NoState(format!("no such container: {message}"))
        } else {
            Error::Runc(message)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ContainerNotFound(id) => write!(f, "container {id}: not found"),
            Error::ProcessNotFound(id) => write!(f, "process {id}: not found"),
            Error::ProcessFinished => f.write_str("process already finished: not found"),
            Error::ContainerExists(id) => write!(f, "container {id}: already exists"),
            Error::ExecExists(id) => write!(f, "id {id}: already exists"),
            Error::WrongState(m) => f.write_str(m),
            Error::InvalidSignal(n) => write!(f, "signal {n}: invalid"),
            Error::NoTerminal => f.write_str("the process has no terminal"),
            Error::Cgroup { what, err } => write!(f, "{what}: {err}"),
            Error::Spec(e) => write!(f, "{e}"),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Mount(m)
            | Error::Runc(m)
            | Error::NoState(m)
            | Error::Other(m)
            | Error::Invalid(m)
            | Error::Unsupported(m)
            | Error::Missing(m)
            | Error::Setup(m) => f.write_str(m),
            Error::SandboxSpec(e) => e.fmt(f),
        }
    }
}

/// The ttrpc code of a kind, as `errdefs.ToGRPC` gives it.
pub fn code(k: Kind) -> Code {
    match k {
        Kind::NotFound => Code::NOT_FOUND,
        Kind::AlreadyExists => Code::ALREADY_EXISTS,
        Kind::FailedPrecondition => Code::FAILED_PRECONDITION,
        Kind::InvalidArgument => Code::INVALID_ARGUMENT,
        Kind::PermissionDenied => Code::PERMISSION_DENIED,
        Kind::Unavailable => Code::UNAVAILABLE,
        Kind::DeadlineExceeded => Code::DEADLINE_EXCEEDED,
        Kind::Unimplemented => Code::UNIMPLEMENTED,
        Kind::Internal => Code::INTERNAL,
        Kind::Unknown => Code::UNKNOWN,
    }
}

impl From<Error> for ttrpc::Error {
    fn from(e: Error) -> ttrpc::Error {
        ttrpc::Error::RpcStatus(ttrpc::get_status(code(e.kind()), e.to_string()))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    fn status(e: Error) -> (Code, String) {
        match ttrpc::Error::from(e) {
            ttrpc::Error::RpcStatus(s) => (s.code(), s.message),
            other => panic!("not a status: {other:?}"),
        }
    }

    #[test]
    fn each_kind_has_containerds_code() {
        let want = [
            (Kind::NotFound, Code::NOT_FOUND),
            (Kind::AlreadyExists, Code::ALREADY_EXISTS),
            (Kind::FailedPrecondition, Code::FAILED_PRECONDITION),
            (Kind::InvalidArgument, Code::INVALID_ARGUMENT),
            (Kind::PermissionDenied, Code::PERMISSION_DENIED),
            (Kind::Unavailable, Code::UNAVAILABLE),
            (Kind::DeadlineExceeded, Code::DEADLINE_EXCEEDED),
            (Kind::Unimplemented, Code::UNIMPLEMENTED),
            (Kind::Internal, Code::INTERNAL),
            (Kind::Unknown, Code::UNKNOWN),
        ];
        assert_eq!(want.len(), Kind::ALL.len());
        for (k, c) in want {
            assert_eq!(code(k), c, "{k:?}");
        }
    }

    #[test]
    fn each_error_reaches_containerd_with_its_code_and_message() {
        let bad_cwd = podinit::tracked::from_slice::<oci_spec::runtime::Spec>(
            br#"{"ociVersion": "1.0.2", "process": {"cwd": 1}}"#,
        )
        .unwrap_err();
        let parsing = format!("parsing /b/config.json: {bad_cwd}");
        assert!(parsing.contains("process.cwd"), "{parsing}");
        let cases = [
            (
                Error::ContainerNotFound("c".into()),
                Code::NOT_FOUND,
                "container c: not found",
            ),
            (
                Error::ProcessNotFound("e".into()),
                Code::NOT_FOUND,
                "process e: not found",
            ),
            (
                Error::ProcessFinished,
                Code::NOT_FOUND,
                "process already finished: not found",
            ),
            (
                Error::ContainerExists("c".into()),
                Code::ALREADY_EXISTS,
                "container c: already exists",
            ),
            (
                Error::ExecExists("e".into()),
                Code::ALREADY_EXISTS,
                "id e: already exists",
            ),
            (
                Error::WrongState("container c: is stopped".into()),
                Code::FAILED_PRECONDITION,
                "container c: is stopped",
            ),
            (
                Error::InvalidSignal(99),
                Code::INVALID_ARGUMENT,
                "signal 99: invalid",
            ),
            (
                Error::NoTerminal,
                Code::FAILED_PRECONDITION,
                "the process has no terminal",
            ),
            (Error::Mount("m".into()), Code::INTERNAL, "m"),
            (Error::Runc("r".into()), Code::UNKNOWN, "r"),
            (
                Error::NoState("container does not exist".into()),
                Code::NOT_FOUND,
                "container does not exist",
            ),
            (Error::Other("o".into()), Code::UNKNOWN, "o"),
            (
                Error::io(
                    "opening /x/stdout",
                    std::io::Error::from_raw_os_error(libc::ENOENT),
                ),
                Code::UNKNOWN,
                "opening /x/stdout: No such file or directory (os error 2)",
            ),
            (
                Error::Invalid("CreateSandbox: no sandbox_id".into()),
                Code::INVALID_ARGUMENT,
                "CreateSandbox: no sandbox_id",
            ),
            (Error::Unsupported("u".into()), Code::UNIMPLEMENTED, "u"),
            (
                Error::Missing("sandbox sb: the network namespace /x does not exist".into()),
                Code::NOT_FOUND,
                "sandbox sb: the network namespace /x does not exist",
            ),
            (
                Error::Cgroup {
                    what: "sandbox sb: removing its cgroup".into(),
                    err: podinit::cgroup::Error::Io {
                        what: "removing cgroup /sys/fs/cgroup/x".into(),
                        err: std::io::Error::from_raw_os_error(libc::EBUSY),
                    },
                },
                Code::FAILED_PRECONDITION,
                "sandbox sb: removing its cgroup: removing cgroup /sys/fs/cgroup/x: \
                 Device or resource busy (os error 16)",
            ),
            (Error::Setup("s".into()), Code::INTERNAL, "s"),
            (
                Error::Spec(podinit::spec::LoadError::Parse(
                    "/b/config.json".into(),
                    bad_cwd,
                )),
                Code::UNKNOWN,
                &parsing,
            ),
            (
                Error::SandboxSpec(podinit::spec::Error::Invalid(
                    "the sandbox's config.json has no process".into(),
                )),
                Code::UNKNOWN,
                "the sandbox's config.json has no process",
            ),
        ];
        for (e, c, m) in cases {
            assert_eq!(status(e), (c, m.to_string()));
        }
    }

    #[test]
    fn a_kill_of_a_gone_process_is_not_found_as_containerd_reads_runc() {
        assert!(matches!(
            Error::of_kill(Error::Runc("container not running".into())),
            Error::ProcessFinished
        ));
        assert!(matches!(
            Error::of_kill(Error::Runc("kill: No such process".into())),
            Error::ProcessFinished
        ));
        // A container runc no longer knows: "no such container", NotFound too.
        let e = Error::of_kill(Error::Runc("container c1 does not exist".into()));
        assert_eq!(e.kind(), Kind::NotFound);
        assert_eq!(
            e.to_string(),
            "no such container: container c1 does not exist"
        );
        assert!(matches!(
            Error::of_kill(Error::Runc("permission denied".into())),
            Error::Runc(_)
        ));
        // A failure before runc ran keeps its own kind.
        assert!(matches!(
            Error::of_kill(Error::Other("spawning".into())),
            Error::Other(_)
        ));
    }
}
