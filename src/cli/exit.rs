//! The command line's failures, and the one place they become a line on stderr and an
//! exit status (docs/interface.md §2: 1 a failure, 2 an invalid command line or manifest,
//! 3 a sandbox that could not be set up).

use std::fmt;

use crate::error::Kind;

pub const EXIT_FAILED: i32 = 1;
pub const EXIT_INVALID: i32 = 2;
pub const EXIT_SANDBOX: i32 = 3;

#[derive(Debug, PartialEq)]
pub enum Failure {
    /// The command line or the manifest is invalid: nothing was done.
    Invalid(String),
    /// The sandbox could not be set up, or removed at the end.
    Sandbox(String),
    /// The pod's socket refused the request: the kind its `Status` says, and its message.
    Refused { kind: Kind, message: String },
    /// Anything else that failed, with its kind.
    Failed { kind: Kind, message: String },
}

impl Failure {
    /// A failure of `kind`, exit status 1.
    pub fn failed(kind: Kind, message: impl Into<String>) -> Failure {
        Failure::Failed {
            kind,
            message: message.into(),
        }
    }

    /// A file of podinit's own that could not be read, written or removed: what was done
    /// to which path, with the kind of the OS's error.
    pub fn io(what: impl fmt::Display, e: std::io::Error) -> Failure {
        Failure::failed(Kind::of_io(&e), format!("{what}: {e}"))
    }

    pub fn kind(&self) -> Kind {
        match self {
            Failure::Invalid(_) => Kind::InvalidArgument,
            Failure::Sandbox(_) => Kind::FailedPrecondition,
            Failure::Refused { kind, .. } | Failure::Failed { kind, .. } => *kind,
        }
    }

    pub fn exit_status(&self) -> i32 {
        match self {
            Failure::Invalid(_) => EXIT_INVALID,
            Failure::Sandbox(_) => EXIT_SANDBOX,
            Failure::Refused { .. } | Failure::Failed { .. } => EXIT_FAILED,
        }
    }

    /// Prints the one line and gives the exit status.
    pub fn report(&self) -> i32 {
        crate::log::error(&self.to_string());
        self.exit_status()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Invalid(m) | Failure::Sandbox(m) => f.write_str(m),
            Failure::Refused { message, .. } | Failure::Failed { message, .. } => {
                f.write_str(message)
            }
        }
    }
}

/// A failure of a step still written over strings: its kind is not known.
impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Failed {
            kind: Kind::Unknown,
            message,
        }
    }
}

/// The image layer's errors keep their kind: `podinit images` and `run`'s pulls.
impl From<crate::image::Error> for Failure {
    fn from(e: crate::image::Error) -> Failure {
        Failure::Failed {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

/// `podinit run`'s stages: an invalid flag or manifest is exit 2, a sandbox not set up 3.
impl From<crate::run::Error> for Failure {
    fn from(e: crate::run::Error) -> Failure {
        match e.is_invalid_input() {
            true => Failure::Invalid(e.to_string()),
            false => Failure::Sandbox(format!("setting up the sandbox: {e}")),
        }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Failure {
        Failure::from(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_exit_status_and_one_line() {
        assert_eq!(Failure::Invalid("pod.yaml: x".into()).exit_status(), 2);
        assert_eq!(Failure::Invalid("x".into()).kind(), Kind::InvalidArgument);
        assert_eq!(Failure::Sandbox("state dir in use".into()).exit_status(), 3);
        for k in Kind::ALL {
            let refused = Failure::Refused {
                kind: k,
                message: "container c: not found".into(),
            };
            assert_eq!(refused.kind(), k);
            assert_eq!(refused.exit_status(), 1, "{k:?}");
            assert_eq!(refused.to_string(), "container c: not found");
            let failed = Failure::Failed {
                kind: k,
                message: "m".into(),
            };
            assert_eq!((failed.kind(), failed.exit_status()), (k, 1));
        }
        let image = crate::image::Error::NoImage {
            name: "docker.io/library/x:latest".into(),
            store: "/s".into(),
        };
        let e = Failure::from(image);
        assert_eq!((e.kind(), e.exit_status()), (Kind::NotFound, 1));
        assert_eq!(
            e.to_string(),
            "no image docker.io/library/x:latest in the store /s"
        );
        let e = Failure::from("no socket".to_string());
        assert_eq!((e.kind(), e.exit_status()), (Kind::Unknown, 1));
        // `run` decides its statuses by stage; they are these.
        assert_eq!(EXIT_INVALID, crate::run::EXIT_INVALID);
        assert_eq!(EXIT_SANDBOX, crate::supervisor::EXIT_SANDBOX);
    }

    #[test]
    fn each_run_stage_has_its_exit_status_and_one_line() {
        use crate::run::Error as R;
        let cases = [
            (
                R::Options("--node-labels: \"x\" is not key=value".into()),
                EXIT_INVALID,
                Kind::InvalidArgument,
                "--node-labels: \"x\" is not key=value",
            ),
            (
                R::Manifest {
                    path: "/p/pod.yaml".into(),
                    message: "spec.containers: Required value".into(),
                },
                EXIT_INVALID,
                Kind::InvalidArgument,
                "/p/pod.yaml: spec.containers: Required value",
            ),
            (
                R::Os(std::io::Error::other("state dir /s is in use")),
                EXIT_SANDBOX,
                Kind::FailedPrecondition,
                "setting up the sandbox: state dir /s is in use",
            ),
        ];
        for (e, status, kind, line) in cases {
            let f = Failure::from(e);
            assert_eq!((f.exit_status(), f.kind()), (status, kind), "{line}");
            assert_eq!(f.to_string(), line);
        }
    }

    #[test]
    fn every_image_error_is_one_line_with_its_kind_and_exit_status() {
        use crate::image::Error as I;
        use std::io;
        let cases = [
            (
                I::Reference("invalid reference format: \"A\"".into()),
                Kind::InvalidArgument,
            ),
            (
                I::NoImage {
                    name: "docker.io/library/x:latest".into(),
                    store: "/s".into(),
                },
                Kind::NotFound,
            ),
            (
                I::InUse("image x is in use by a running container".into()),
                Kind::FailedPrecondition,
            ),
            (
                I::io(
                    "reading /s/index.json",
                    io::Error::from_raw_os_error(libc::ENOENT),
                ),
                Kind::NotFound,
            ),
            (
                I::Os(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "digest mismatch",
                )),
                Kind::InvalidArgument,
            ),
            (
                I::sys("locking /s/lock", nix::errno::Errno::EACCES),
                Kind::PermissionDenied,
            ),
            (
                I::Content("manifest: bad JSON".into()),
                Kind::InvalidArgument,
            ),
            (I::Unsupported("schema 1".into()), Kind::Unimplemented),
            (I::Missing("blob sha256:ab".into()), Kind::NotFound),
            (
                I::Registry {
                    status: Some(401),
                    message: "401 Unauthorized".into(),
                },
                Kind::PermissionDenied,
            ),
            (
                I::Registry {
                    status: Some(404),
                    message: "manifest unknown".into(),
                },
                Kind::NotFound,
            ),
            (
                I::unreachable("r.example: cannot connect: refused".into()),
                Kind::Unavailable,
            ),
            (
                I::Missing("layer l".into()).within("pull x"),
                Kind::NotFound,
            ),
        ];
        for (e, kind) in cases {
            let line = e.to_string();
            let f = Failure::from(e);
            assert_eq!((f.kind(), f.exit_status()), (kind, EXIT_FAILED), "{line}");
            assert_eq!(f.to_string(), line);
            assert!(!line.is_empty() && !line.contains('\n'), "{line:?}");
        }
    }
}
