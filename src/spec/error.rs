//! The spec layer's errors: a field of the container (or of its base's spec) that the spec
//! cannot take, what podinit does not run, a file a step needs (a seccomp profile, a
//! `subPath`), and, around each, the container and field [`for_container`](super::for_container)
//! reports it under. Each keeps the one line podinit printed before it was typed.

use std::fmt;
use std::io;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A value the spec cannot take; the line names its field.
    Invalid(String),
    /// Something podinit does not run (a user namespace, a namespace's path, a seccomp
    /// profile's type).
    Unsupported(String),
    /// A file a step reads or makes: what was done to which path, and the OS's error.
    Io { what: String, err: io::Error },
    /// A resource of the container that is not a quantity: its name and why.
    Quantity {
        resource: String,
        err: crate::quantity::Error,
    },
    /// The default seccomp profile did not build.
    Build(oci_spec::OciSpecError),
    /// A step of container `name`'s spec failed: the field its error is reported under
    /// (none where the error names its field itself), and the step's error.
    Container {
        name: String,
        field: Option<&'static str>,
        err: Box<Error>,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::Invalid(_) | Error::Quantity { .. } => Kind::InvalidArgument,
            Error::Unsupported(_) => Kind::Unimplemented,
            Error::Io { err, .. } => Kind::of_io(err),
            Error::Build(_) => Kind::Internal,
            Error::Container { err, .. } => err.kind(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(m) | Error::Unsupported(m) => f.write_str(m),
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Quantity { resource, err } => write!(f, "{resource}: {err}"),
            Error::Build(e) => e.fmt(f),
            Error::Container {
                name,
                field: Some(field),
                err,
            } => write!(f, "container {name}: {field}: {err}"),
            Error::Container {
                name,
                field: None,
                err,
            } => write!(f, "container {name}: {err}"),
        }
    }
}

impl From<oci_spec::OciSpecError> for Error {
    fn from(e: oci_spec::OciSpecError) -> Error {
        Error::Build(e)
    }
}

crate::error::layer_error!(Error);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_names_its_container_and_field_and_has_its_kind() {
        let e = Error::Container {
            name: "c1".into(),
            field: Some("securityContext"),
            err: Box::new(Error::Invalid("runAsUser: Invalid value: -1".into())),
        };
        assert_eq!(
            e.to_string(),
            "container c1: securityContext: runAsUser: Invalid value: -1"
        );
        assert_eq!(e.kind(), Kind::InvalidArgument);
        let e = Error::Container {
            name: "c1".into(),
            field: None,
            err: Box::new(Error::Unsupported(
                "user namespaces are not supported".into(),
            )),
        };
        assert_eq!(
            e.to_string(),
            "container c1: user namespaces are not supported"
        );
        assert_eq!(e.kind(), Kind::Unimplemented);
        let e = Error::Io {
            what: "cannot load seccomp profile \"/p\"".into(),
            err: io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert_eq!(e.kind(), Kind::NotFound);
    }
}
