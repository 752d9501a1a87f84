//! Why `podinit run` stopped before its pod ran, or could not clean up after it: a bad
//! flag or manifest (nothing was done), or a step of the sandbox (the state dir, the node,
//! the cgroups, the namespaces, the supervisor's set-up) with what it did to which path.
//! `cli::exit::Failure` maps the stage once: exit status 2 for the first two, 3 for the
//! sandbox, whose line it prefixes with "setting up the sandbox: ".

use std::fmt;
use std::io;
use std::path::PathBuf;

use nix::errno::Errno;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A flag of the command line is invalid: nothing was done.
    Options(String),
    /// The manifest at `path` is invalid: nothing was done.
    Manifest { path: PathBuf, message: String },
    /// What podinit cannot do as it was started (a flag or field that does not go with
    /// PID-1 mode, `--netns` or the systemd driver): why.
    Refused(String),
    /// A name the pod would have on the node does not fit (an FQDN, a state dir): why.
    Name(String),
    /// A file, directory or namespace step failed: what, on which path, the OS's error.
    Io { what: String, err: io::Error },
    /// A system call failed: what it was for, and its errno as nix words it.
    Errno { what: String, errno: Errno },
    /// An OS error whose own text says what and where (the state dir, loopback).
    Os(io::Error),
    /// A value podinit computed itself could not be used: what, and why.
    Internal { what: String, why: String },
    /// The pod's status file could not be read or written as JSON: which, and why.
    Json {
        what: String,
        err: serde_json::Error,
    },
    /// The sys layer's error (a private directory, a cgroup to join).
    Sys(crate::sys::Error),
    /// The cgroup floor's error (the pod's cgroup or slice), with its context.
    Cgroup(crate::cgroup::Error),
    /// The pod sandbox's error (its user namespace, sysctls).
    Sandbox(crate::sandbox::Error),
    /// The supervisor's error (a container's record, the pod's scopes, an idmapped mount).
    Supervisor(crate::supervisor::Error),
    /// kubelet's range of ids for pods' user namespaces cannot be had.
    Range(crate::pod::userns::RangeError),
    /// The user's own namespace (without root) could not be entered.
    Rootless(crate::sys::rootless::EnterError),
    /// Several steps of the clean-up failed: each, in order.
    Cleanup(Vec<Error>),
}

impl Error {
    pub fn io(what: impl fmt::Display, err: io::Error) -> Error {
        Error::Io {
            what: what.to_string(),
            err,
        }
    }

    pub fn errno(what: impl fmt::Display, errno: Errno) -> Error {
        Error::Errno {
            what: what.to_string(),
            errno,
        }
    }

    /// The command line or the manifest is at fault (exit status 2); otherwise the
    /// sandbox (exit status 3).
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, Error::Options(_) | Error::Manifest { .. })
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::Options(_) | Error::Manifest { .. } | Error::Name(_) => Kind::InvalidArgument,
            Error::Refused(_) => Kind::FailedPrecondition,
            Error::Io { err, .. } | Error::Os(err) => Kind::of_io(err),
            Error::Errno { errno, .. } => Kind::of_errno(*errno),
            Error::Internal { .. } => Kind::Internal,
            Error::Json { .. } => Kind::InvalidArgument,
            Error::Sys(e) => e.kind(),
            Error::Cgroup(e) => e.kind(),
            Error::Sandbox(e) => e.kind(),
            Error::Supervisor(e) => e.kind(),
            Error::Range(_) => Kind::FailedPrecondition,
            Error::Rootless(_) => Kind::PermissionDenied,
            Error::Cleanup(errs) => errs.first().map_or(Kind::Unknown, Error::kind),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Options(m) | Error::Refused(m) | Error::Name(m) => f.write_str(m),
            Error::Manifest { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Errno { what, errno } => write!(f, "{what}: {errno}"),
            Error::Os(err) => err.fmt(f),
            Error::Internal { what, why } => write!(f, "{what}: {why}"),
            Error::Json { what, err } if what.is_empty() => err.fmt(f),
            Error::Json { what, err } => write!(f, "{what}: {err}"),
            Error::Sys(e) => e.fmt(f),
            Error::Cgroup(e) => e.fmt(f),
            Error::Sandbox(e) => e.fmt(f),
            Error::Supervisor(e) => e.fmt(f),
            Error::Range(e) => e.fmt(f),
            Error::Rootless(e) => e.fmt(f),
            Error::Cleanup(errs) => {
                for (k, e) in errs.iter().enumerate() {
                    if k > 0 {
                        f.write_str("; ")?;
                    }
                    e.fmt(f)?;
                }
                Ok(())
            }
        }
    }
}

crate::error::from_layer!(
    Sys(crate::sys::Error),
    Cgroup(crate::cgroup::Error),
    Sandbox(crate::sandbox::Error),
    Supervisor(crate::supervisor::Error),
    Range(crate::pod::userns::RangeError),
    Rootless(crate::sys::rootless::EnterError)
);

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_keeps_its_line_and_has_its_kind() {
        let cases: Vec<(Error, &str, Kind)> = vec![
            (
                Error::Refused("--netns cannot be used with spec.hostNetwork: true".into()),
                "--netns cannot be used with spec.hostNetwork: true",
                Kind::FailedPrecondition,
            ),
            (
                Error::io(
                    "opening network namespace /n",
                    io::Error::from_raw_os_error(libc::ENOENT),
                ),
                "opening network namespace /n: No such file or directory (os error 2)",
                Kind::NotFound,
            ),
            (
                Error::errno("making / rslave", Errno::EPERM),
                "making / rslave: EPERM: Operation not permitted",
                Kind::PermissionDenied,
            ),
            (
                Error::Os(io::Error::from_raw_os_error(libc::EBUSY)),
                "Device or resource busy (os error 16)",
                Kind::FailedPrecondition,
            ),
            (
                Error::Internal {
                    what: "pod cgroup limits".into(),
                    why: "bad".into(),
                },
                "pod cgroup limits: bad",
                Kind::Internal,
            ),
            (
                Error::from(crate::sandbox::Error::NoFreeBlock),
                "could not find an empty slot to allocate a user namespace",
                Kind::Unavailable,
            ),
            (
                Error::from(crate::supervisor::Error::NoRun),
                "no run",
                Kind::FailedPrecondition,
            ),
            (
                Error::Cleanup(vec![
                    Error::Os(io::Error::from_raw_os_error(libc::EBUSY)),
                    Error::Name("b".into()),
                ]),
                "Device or resource busy (os error 16); b",
                Kind::FailedPrecondition,
            ),
        ];
        for (e, line, kind) in cases {
            assert!(!e.is_invalid_input(), "{line}");
            assert_eq!(e.to_string(), line);
            assert_eq!(e.kind(), kind, "{line}");
        }
        let json = serde_json::from_slice::<serde_json::Value>(b"{").unwrap_err();
        let e = Error::Json {
            what: "reading /s/status.json".into(),
            err: json,
        };
        assert!(
            e.to_string().starts_with("reading /s/status.json: EOF"),
            "{e}"
        );
        assert!(Error::Options("--x".into()).is_invalid_input());
    }
}
