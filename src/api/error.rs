//! The socket's errors and the one place they become Kubernetes `Status` objects: the
//! HTTP code and `reason` follow the apiserver's (`StatusReason`), so that a client reads
//! them as it reads kubectl's.

use std::fmt;

use crate::error::Kind;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A malformed request: a query parameter, a body, a name.
    BadRequest(String),
    /// An object that fails validation (an ephemeral container).
    Invalid(String),
    /// No such route or container.
    NotFound(String),
    /// The route exists, not with this method.
    MethodNotAllowed(String),
    /// The pod's state forbids the request (it is terminating).
    Conflict(String),
    /// An object of that name exists already.
    AlreadyExists(String),
    /// The peer may not use the socket.
    Forbidden(String),
    /// The server cannot take the request now (too many connections).
    Unavailable(String),
    /// The request ran out of time (an exec's timeout).
    Timeout(String),
    /// The server failed.
    Internal(String),
    /// A request body over the limit.
    EntityTooLarge(String),
    /// A request head over the limit.
    HeadersTooLarge(String),
    /// A request the server does not handle (a body without Content-Length).
    NotImplemented(String),
    /// A body of a type the route does not take (a JSON patch to `resize`).
    UnsupportedMediaType(String),
}

impl Error {
    /// The error of its kind, as the socket answers it.
    pub fn of(kind: Kind, message: impl Into<String>) -> Error {
        let m = message.into();
        match kind {
            Kind::NotFound => Error::NotFound(m),
            Kind::AlreadyExists => Error::AlreadyExists(m),
            Kind::FailedPrecondition => Error::Conflict(m),
            Kind::InvalidArgument => Error::BadRequest(m),
            Kind::PermissionDenied => Error::Forbidden(m),
            Kind::Unavailable => Error::Unavailable(m),
            Kind::DeadlineExceeded => Error::Timeout(m),
            Kind::Unimplemented => Error::MethodNotAllowed(m),
            Kind::Internal | Kind::Unknown => Error::Internal(m),
        }
    }

    /// An exec that the runtime could not start in container `container`, answered by
    /// its kind: a process gone 404, a bad command 400, a cgroup in the wrong state 409,
    /// a failure of the runtime's own 500.
    pub fn exec(container: &str, e: &crate::runtime::Error) -> Error {
        Error::of(e.kind(), format!("exec in container {container:?}: {e}"))
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::BadRequest(_) | Error::Invalid(_) => Kind::InvalidArgument,
            Error::NotFound(_) => Kind::NotFound,
            Error::MethodNotAllowed(_) => Kind::Unimplemented,
            Error::Conflict(_) => Kind::FailedPrecondition,
            Error::AlreadyExists(_) => Kind::AlreadyExists,
            Error::Forbidden(_) => Kind::PermissionDenied,
            Error::Unavailable(_) => Kind::Unavailable,
            Error::Timeout(_) => Kind::DeadlineExceeded,
            Error::Internal(_) => Kind::Internal,
            Error::EntityTooLarge(_) | Error::HeadersTooLarge(_) => Kind::InvalidArgument,
            Error::NotImplemented(_) => Kind::Unimplemented,
            Error::UnsupportedMediaType(_) => Kind::InvalidArgument,
        }
    }

    /// The HTTP code and the Kubernetes `Status.reason`.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            Error::BadRequest(_) => (400, "BadRequest"),
            Error::Invalid(_) => (422, "Invalid"),
            Error::NotFound(_) => (404, "NotFound"),
            Error::MethodNotAllowed(_) => (405, "MethodNotAllowed"),
            Error::Conflict(_) => (409, "Conflict"),
            Error::AlreadyExists(_) => (409, "AlreadyExists"),
            Error::Forbidden(_) => (403, "Forbidden"),
            Error::Unavailable(_) => (503, "ServiceUnavailable"),
            Error::Timeout(_) => (504, "Timeout"),
            Error::Internal(_) => (500, "InternalError"),
            Error::EntityTooLarge(_) => (413, "RequestEntityTooLarge"),
            Error::HeadersTooLarge(_) => (431, "RequestHeaderFieldsTooLarge"),
            Error::NotImplemented(_) => (501, "NotImplemented"),
            Error::UnsupportedMediaType(_) => (415, "UnsupportedMediaType"),
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Error::BadRequest(m)
            | Error::Invalid(m)
            | Error::NotFound(m)
            | Error::MethodNotAllowed(m)
            | Error::Conflict(m)
            | Error::AlreadyExists(m)
            | Error::Forbidden(m)
            | Error::Unavailable(m)
            | Error::Timeout(m)
            | Error::Internal(m)
            | Error::EntityTooLarge(m)
            | Error::HeadersTooLarge(m)
            | Error::NotImplemented(m)
            | Error::UnsupportedMediaType(m) => m,
        }
    }

    /// The `Status` object's JSON.
    pub fn body(&self) -> Vec<u8> {
        let (code, reason) = self.status();
        super::status_error(code, reason, self.message())
    }

    /// The kind a client reads from an answer's HTTP code.
    pub fn kind_of_code(code: u16) -> Kind {
        match code {
            400 | 415 | 422 => Kind::InvalidArgument,
            403 => Kind::PermissionDenied,
            404 => Kind::NotFound,
            405 | 501 => Kind::Unimplemented,
            409 => Kind::FailedPrecondition,
            503 => Kind::Unavailable,
            504 => Kind::DeadlineExceeded,
            500 => Kind::Internal,
            _ => Kind::Unknown,
        }
    }
}

/// A request that could not be parsed.
impl From<super::http::ParseError> for Error {
    fn from(e: super::http::ParseError) -> Error {
        use super::http::ParseError as P;
        let m = e.message();
        match e {
            P::Malformed(_) => Error::BadRequest(m),
            P::HeadTooLarge => Error::HeadersTooLarge(m),
            P::BodyTooLarge => Error::EntityTooLarge(m),
            P::Unsupported(_) => Error::NotImplemented(m),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_answered_with_kubernetes_code_and_reason() {
        let want = [
            (Kind::NotFound, 404, "NotFound"),
            (Kind::AlreadyExists, 409, "AlreadyExists"),
            (Kind::FailedPrecondition, 409, "Conflict"),
            (Kind::InvalidArgument, 400, "BadRequest"),
            (Kind::PermissionDenied, 403, "Forbidden"),
            (Kind::Unavailable, 503, "ServiceUnavailable"),
            (Kind::DeadlineExceeded, 504, "Timeout"),
            (Kind::Unimplemented, 405, "MethodNotAllowed"),
            (Kind::Internal, 500, "InternalError"),
            (Kind::Unknown, 500, "InternalError"),
        ];
        assert_eq!(want.len(), Kind::ALL.len());
        for (k, code, reason) in want {
            let e = Error::of(k, "m");
            assert_eq!(e.status(), (code, reason), "{k:?}");
            let body: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
            assert_eq!(body["kind"], "Status");
            assert_eq!(body["code"], code);
            assert_eq!(body["reason"], reason);
            assert_eq!(body["message"], "m");
            if k != Kind::Unknown {
                assert_eq!(e.kind(), k);
                assert_eq!(
                    Error::kind_of_code(code),
                    if code == 409 {
                        Kind::FailedPrecondition
                    } else {
                        k
                    }
                );
            }
        }
        assert_eq!(Error::Invalid("x".into()).status(), (422, "Invalid"));
        use crate::runtime::Error as R;
        let exec = [
            (
                R::Exited("container web is not running".into()),
                404,
                "exec in container \"web\": container web is not running",
            ),
            (
                R::spec("exec: no command"),
                400,
                "exec in container \"web\": exec: no command",
            ),
            (
                R::errno("pipe", nix::errno::Errno::EMFILE),
                500,
                "exec in container \"web\": pipe: EMFILE: Too many open files",
            ),
            (
                R::from(crate::sys::Error::syscall(
                    "setns",
                    "pid 7",
                    nix::errno::Errno::ESRCH,
                )),
                404,
                "",
            ),
            (
                R::from(crate::cgroup::Error::Io {
                    what: "joining cgroup /sys/fs/cgroup/x".into(),
                    err: std::io::Error::from_raw_os_error(libc::EBUSY),
                }),
                409,
                "",
            ),
            (
                R::from(crate::cgroup::Error::Io {
                    what: "joining cgroup /sys/fs/cgroup/x".into(),
                    err: std::io::Error::from_raw_os_error(libc::EACCES),
                }),
                403,
                "",
            ),
            (R::Setup("clone3: EAGAIN".into()), 500, ""),
            (R::Start("exec: sh: not found".into()), 500, ""),
        ];
        for (e, code, line) in exec {
            let a = Error::exec("web", &e);
            assert_eq!(a.status().0, code, "{e}");
            if !line.is_empty() {
                assert_eq!(a.message(), line);
            }
        }
        assert_eq!(Error::Invalid("x".into()).kind(), Kind::InvalidArgument);
        use super::super::http::ParseError as P;
        for (p, code) in [
            (P::Malformed("x".into()), 400),
            (P::HeadTooLarge, 431),
            (P::BodyTooLarge, 413),
            (P::Unsupported("x".into()), 501),
        ] {
            assert_eq!(Error::from(p.clone()).status().0, p.code());
            assert_eq!(Error::from(p).status().0, code);
        }
    }
}
