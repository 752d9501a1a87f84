//! The cgroup floor's errors: what was being done, to which cgroup or file, and why: the
//! kernel's error with its errno kept (so a front-end maps ENOENT, EBUSY, EPERM once, by
//! [`Kind`]), or the reason no cgroup can do it.

use std::fmt;
use std::io;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// The kernel refused to read, write, make or remove a cgroup file or directory.
    Io { what: String, err: io::Error },
    /// A path or value no cgroup takes (a `..` in `cgroupsPath`, swappiness 200).
    Invalid { what: String, why: String },
    /// The cgroup lacks what the request needs (a controller, the freezer, a directory).
    Missing { what: String, why: String },
    /// Its processes would not freeze or leave in the time given.
    ///
    /// Each says `what: why`, or `why` alone where `what` is empty (the caller says it).
    Stuck { what: String, why: String },
    /// The systemd driver's error: the unit, the step, D-Bus's error (`what` as above).
    Systemd {
        what: String,
        err: Box<super::systemd::Error>,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::Io { err, .. } => Kind::of_io(err),
            Error::Invalid { .. } => Kind::InvalidArgument,
            Error::Missing { .. } => Kind::FailedPrecondition,
            Error::Stuck { .. } => Kind::DeadlineExceeded,
            Error::Systemd { err, .. } => err.kind(),
        }
    }

    /// The same error, with `outer` said first: `outer: <its own message>`.
    pub fn within(self, outer: &str) -> Error {
        let prefix = |w: String| match w.is_empty() {
            true => outer.to_string(),
            false => format!("{outer}: {w}"),
        };
        match self {
            Error::Io { what, err } => Error::Io {
                what: prefix(what),
                err,
            },
            Error::Invalid { what, why } => Error::Invalid {
                what: prefix(what),
                why,
            },
            Error::Missing { what, why } => Error::Missing {
                what: prefix(what),
                why,
            },
            Error::Stuck { what, why } => Error::Stuck {
                what: prefix(what),
                why,
            },
            Error::Systemd { what, err } => Error::Systemd {
                what: prefix(what),
                err,
            },
        }
    }
}

/// What an error of the layer is made from with [`err`](super::err): a kernel's error
/// keeps its errno; a sentence says why a value is refused; an error of the layer gets
/// the outer context in front.
pub trait Cause {
    fn within(self, what: &str) -> Error;
}

impl Cause for io::Error {
    fn within(self, what: &str) -> Error {
        Error::Io {
            what: what.to_string(),
            err: self,
        }
    }
}

impl Cause for crate::sys::Error {
    fn within(self, what: &str) -> Error {
        io::Error::from(self).within(what)
    }
}

/// cgroups-rs's errors say what failed; the errno of the one beneath is kept.
impl Cause for cgroups_rs::fs::error::Error {
    fn within(self, what: &str) -> Error {
        let errno = std::error::Error::source(&self)
            .and_then(|s| s.downcast_ref::<io::Error>())
            .and_then(io::Error::raw_os_error);
        let kind = errno.map_or(io::ErrorKind::Other, |n| {
            io::Error::from_raw_os_error(n).kind()
        });
        io::Error::new(kind, self.to_string()).within(what)
    }
}

impl Cause for Error {
    fn within(self, what: &str) -> Error {
        Error::within(self, what)
    }
}

impl Cause for String {
    fn within(self, what: &str) -> Error {
        Error::Invalid {
            what: what.to_string(),
            why: self,
        }
    }
}

impl Cause for &str {
    fn within(self, what: &str) -> Error {
        self.to_string().within(what)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, err } if what.is_empty() => err.fmt(f),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Invalid { what, why }
            | Error::Missing { what, why }
            | Error::Stuck { what, why }
                if what.is_empty() =>
            {
                f.write_str(why)
            }
            Error::Invalid { what, why }
            | Error::Missing { what, why }
            | Error::Stuck { what, why } => write!(f, "{what}: {why}"),
            Error::Systemd { what, err } if what.is_empty() => err.fmt(f),
            Error::Systemd { what, err } => write!(f, "{what}: {err}"),
        }
    }
}

/// For code written over `io::Result`: the I/O kind of the errno, and the error itself
/// inside for `Kind::of_io`.
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Io { err, .. } => err.kind(),
            Error::Invalid { .. } => io::ErrorKind::InvalidInput,
            Error::Missing { .. } | Error::Stuck { .. } | Error::Systemd { .. } => {
                io::ErrorKind::Other
            }
        };
        io::Error::new(kind, e)
    }
}

impl From<super::systemd::Error> for Error {
    fn from(err: super::systemd::Error) -> Error {
        Error::Systemd {
            what: String::new(),
            err: Box::new(err),
        }
    }
}

crate::error::layer_error!(Error);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_says_what_and_keeps_its_kind() {
        let e =
            io::Error::from_raw_os_error(libc::EBUSY).within("removing cgroup /sys/fs/cgroup/x");
        assert_eq!(e.kind(), Kind::FailedPrecondition);
        assert!(
            e.to_string()
                .starts_with("removing cgroup /sys/fs/cgroup/x: "),
            "{e}"
        );
        let e = e.within("removing stale pod cgroup");
        assert!(
            e.to_string()
                .starts_with("removing stale pod cgroup: removing cgroup /sys/fs/cgroup/x: "),
            "{e}"
        );
        assert_eq!(e.kind(), Kind::FailedPrecondition);
        let io: io::Error = e.into();
        assert_eq!(Kind::of_io(&io), Kind::FailedPrecondition);
        let e = "names the root cgroup".within("linux.cgroupsPath \"/\" of container c1");
        assert_eq!(
            e.to_string(),
            "linux.cgroupsPath \"/\" of container c1: names the root cgroup"
        );
        assert_eq!(e.kind(), Kind::InvalidArgument);
        let e = crate::sys::Error::syscall("open", "/x", nix::errno::Errno::ENOENT).within("w");
        assert_eq!(e.kind(), Kind::NotFound);
        let missing = Error::Missing {
            what: "devices".into(),
            why: "no cgroup directory".into(),
        };
        assert_eq!(missing.kind(), Kind::FailedPrecondition);
        let stuck = Error::Stuck {
            what: "freezing cgroup x".into(),
            why: "still FREEZING".into(),
        };
        assert_eq!(stuck.kind(), Kind::DeadlineExceeded);
        assert_eq!(Kind::of_io(&io::Error::from(stuck)), Kind::DeadlineExceeded);
    }
}
