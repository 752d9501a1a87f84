//! Admission's errors: the field of the pod that is wrong and what is wrong with it, as
//! the API server's validation words it, or the image store's error for a container's
//! image. Each is the one line `podinit run` and `validate` print (after the manifest's
//! path) and the ephemeral-container route answers 422 with.

use std::fmt;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// The manifest does not load, default or validate: its one line, the field first.
    Manifest(String),
    /// A field of the pod: a container's image that names no bundle, a stop signal, an
    /// ephemeral container, an image volume's reference.
    Field { field: String, why: String },
    /// The bundle or image of `field` cannot be a container's base, or its stop signal is
    /// not one.
    Bundle {
        field: String,
        err: crate::bundle::Error,
    },
    /// The store could not be read for the image of `field`.
    Store {
        field: String,
        err: crate::image::Error,
    },
}

impl Error {
    pub fn field(field: impl Into<String>, why: impl Into<String>) -> Error {
        Error::Field {
            field: field.into(),
            why: why.into(),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::Manifest(_) | Error::Field { .. } => Kind::InvalidArgument,
            Error::Bundle { err, .. } => err.kind(),
            Error::Store { err, .. } => err.kind(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Manifest(m) => f.write_str(m),
            Error::Field { field, why } => write!(f, "{field}: {why}"),
            Error::Bundle { field, err } => write!(f, "{field}: {err}"),
            Error::Store { field, err } => write!(f, "{field}: {err}"),
        }
    }
}

crate::error::layer_error!(Error);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_names_its_field_and_has_its_kind() {
        let e = Error::field("spec.containers[0].image", "image \"x\" not found");
        assert_eq!(
            e.to_string(),
            "spec.containers[0].image: image \"x\" not found"
        );
        assert_eq!(e.kind(), Kind::InvalidArgument);
        let m = Error::Manifest("spec.containers: Required value".into());
        assert_eq!(m.to_string(), "spec.containers: Required value");
        assert_eq!(m.kind(), Kind::InvalidArgument);
        let s = Error::Store {
            field: "spec.containers[0].image".into(),
            err: crate::image::Error::io(
                "reading /s/index.json",
                std::io::Error::from_raw_os_error(libc::EACCES),
            ),
        };
        assert_eq!(s.kind(), Kind::PermissionDenied);
        assert_eq!(
            s.to_string(),
            "spec.containers[0].image: reading /s/index.json: Permission denied (os error 13)"
        );
    }
}
