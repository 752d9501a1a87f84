//! The kinds of failure a front-end tells apart. Each layer has its own error enum, whose
//! variants carry their context (container, path, syscall, errno); every one of them says
//! which [`Kind`] it is, and each front-end maps a kind once: the CLI to an exit status,
//! the socket to a Kubernetes `Status`, the shim to a ttrpc code, `podinit runc` to runc's
//! exit status.

use nix::errno::Errno;

/// What went wrong, in the words of containerd's `errdefs` and gRPC's codes, which
/// Kubernetes' `StatusReason`s also follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The named thing (container, process, image, file) does not exist.
    NotFound,
    /// A thing of that name exists already.
    AlreadyExists,
    /// The thing is in the wrong state for the request (a running container to delete).
    FailedPrecondition,
    /// The request itself is wrong: a bad spec, flag, name or value.
    InvalidArgument,
    /// The kernel or a registry refused for lack of privilege.
    PermissionDenied,
    /// Something needed is not there for now (a registry, a socket): trying again may work.
    Unavailable,
    /// The request ran out of time (a timeout, a deadline).
    DeadlineExceeded,
    /// Asked of podinit, but not something podinit does.
    Unimplemented,
    /// A broken invariant or an unexpected failure of podinit's own.
    Internal,
    /// A failure with no better kind (a runtime's error as its message).
    Unknown,
}

impl Kind {
    /// The kind of a failed system call, by its errno.
    pub fn of_errno(e: Errno) -> Kind {
        match e {
            Errno::ENOENT | Errno::ESRCH | Errno::ENXIO | Errno::ENODEV => Kind::NotFound,
            Errno::EEXIST => Kind::AlreadyExists,
            Errno::EPERM | Errno::EACCES | Errno::EROFS => Kind::PermissionDenied,
            Errno::EINVAL | Errno::ENAMETOOLONG | Errno::E2BIG | Errno::ENOTDIR => {
                Kind::InvalidArgument
            }
            Errno::EBUSY | Errno::ENOTEMPTY => Kind::FailedPrecondition,
            Errno::EAGAIN | Errno::ENOMEM | Errno::ENOSPC | Errno::ECONNREFUSED => {
                Kind::Unavailable
            }
            Errno::ENOSYS | Errno::EOPNOTSUPP => Kind::Unimplemented,
            Errno::ETIMEDOUT => Kind::DeadlineExceeded,
            _ => Kind::Unknown,
        }
    }

    /// The kind of an I/O error.
    pub fn of_io(e: &std::io::Error) -> Kind {
        if let Some(s) = e
            .get_ref()
            .and_then(|i| i.downcast_ref::<crate::sys::Error>())
        {
            return s.kind();
        }
        if let Some(c) = e
            .get_ref()
            .and_then(|i| i.downcast_ref::<crate::cgroup::Error>())
        {
            return c.kind();
        }
        match e.raw_os_error() {
            Some(n) => Kind::of_errno(Errno::from_raw(n)),
            None => match e.kind() {
                std::io::ErrorKind::NotFound => Kind::NotFound,
                std::io::ErrorKind::AlreadyExists => Kind::AlreadyExists,
                std::io::ErrorKind::PermissionDenied => Kind::PermissionDenied,
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
                    Kind::InvalidArgument
                }
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    Kind::DeadlineExceeded
                }
                _ => Kind::Unknown,
            },
        }
    }

    /// Every kind, for tests of a front-end's mapping.
    pub const ALL: [Kind; 10] = [
        Kind::NotFound,
        Kind::AlreadyExists,
        Kind::FailedPrecondition,
        Kind::InvalidArgument,
        Kind::PermissionDenied,
        Kind::Unavailable,
        Kind::DeadlineExceeded,
        Kind::Unimplemented,
        Kind::Internal,
        Kind::Unknown,
    ];
}

/// What a layer's error enum has beside its own `Display` and kind: the standard trait
/// and, for the callers still written over strings, its line as a `String`.
macro_rules! layer_error {
    ($t:ty) => {
        impl std::error::Error for $t {}
        crate::error::string_from!($t);
    };
}
pub(crate) use layer_error;

/// The constructors of the context variants a layer's enum has, written once for every
/// layer: `io` for `Io { what, err }` (what was done to which path, and the OS's error),
/// `sys` for `Sys { what, errno }` (a system call's errno), `within` for
/// `In { what, err }` (this error as one of `what`'s, which its line then starts with).
macro_rules! context {
    ($t:ty: $($c:ident),+) => {
        $(crate::error::context!(@ $t, $c);)+
    };
    (@ $t:ty, io) => {
        impl $t {
            pub fn io(what: impl std::fmt::Display, err: std::io::Error) -> Self {
                Self::Io {
                    what: what.to_string(),
                    err,
                }
            }
        }
    };
    (@ $t:ty, sys) => {
        impl $t {
            pub fn sys(what: impl std::fmt::Display, errno: nix::errno::Errno) -> Self {
                Self::Sys {
                    what: what.to_string(),
                    errno,
                }
            }
        }
    };
    (@ $t:ty, within) => {
        impl $t {
            pub fn within(self, what: impl std::fmt::Display) -> Self {
                Self::In {
                    what: what.to_string(),
                    err: Box::new(self),
                }
            }
        }
    };
}
pub(crate) use context;

/// An error's line as a `String`, for the callers still written over strings (the
/// conversion goes once they are typed).
macro_rules! string_from {
    ($t:ty) => {
        impl From<$t> for String {
            fn from(e: $t) -> String {
                e.to_string()
            }
        }
    };
}
pub(crate) use string_from;

/// `From` a lower layer's error into `Error::Variant` of the calling module, one impl per
/// `Variant(Type)` pair: an enum that wraps each layer beneath it whole.
macro_rules! from_layer {
    ($($variant:ident($t:ty)),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::$variant(e)
            }
        }
    )*};
}
pub(crate) use from_layer;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_and_io_errors_have_their_kinds() {
        assert_eq!(Kind::of_errno(Errno::ENOENT), Kind::NotFound);
        assert_eq!(Kind::of_errno(Errno::EEXIST), Kind::AlreadyExists);
        assert_eq!(Kind::of_errno(Errno::EPERM), Kind::PermissionDenied);
        assert_eq!(Kind::of_errno(Errno::EINVAL), Kind::InvalidArgument);
        assert_eq!(Kind::of_errno(Errno::EBUSY), Kind::FailedPrecondition);
        assert_eq!(Kind::of_errno(Errno::EAGAIN), Kind::Unavailable);
        assert_eq!(Kind::of_errno(Errno::ENOSYS), Kind::Unimplemented);
        assert_eq!(Kind::of_errno(Errno::EIO), Kind::Unknown);
        let io = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(Kind::of_io(&io), Kind::PermissionDenied);
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "x");
        assert_eq!(Kind::of_io(&io), Kind::NotFound);
    }
}
