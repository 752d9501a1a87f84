//! The bundle layer's errors: an image name that names no bundle, a bundle whose
//! directory, `config.json` or rootfs cannot be used, an image that cannot be a base, a
//! stop signal that is not one. Each keeps the one line podinit printed before it was
//! typed; admission puts the container's field in front.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// The image is empty.
    Required,
    /// A name (not a path) that would leave the bundles directory.
    OutsideBundles(String),
    /// No bundle at any of the places the image name may be.
    NotFound { image: String, tried: Vec<PathBuf> },
    /// A bundle's directory or rootfs could not be read: what, and the OS's error.
    Io { what: String, err: io::Error },
    /// The bundle's `config.json` could not be read or parsed.
    Load(crate::spec::LoadError),
    /// A bundle or image that cannot be a container's base: which, and why (no root, no
    /// process, a rootfs that is not a directory, no layers).
    Invalid(String),
    /// An image's `User` that its `/etc/passwd` or `/etc/group` does not resolve.
    User(String),
    /// A stop signal that is not a signal's name or number.
    Signal(String),
    /// The error of `what` (an image, a bundle's annotation), said first.
    In { what: String, err: Box<Error> },
}

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::NotFound { .. } => Kind::NotFound,
            Error::Io { err, .. } => Kind::of_io(err),
            Error::Load(e) if e.is_missing() => Kind::NotFound,
            Error::Required
            | Error::OutsideBundles(_)
            | Error::Load(_)
            | Error::Invalid(_)
            | Error::User(_)
            | Error::Signal(_) => Kind::InvalidArgument,
            Error::In { err, .. } => err.kind(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Required => f.write_str("Required value"),
            Error::OutsideBundles(image) => write!(
                f,
                "Invalid value: {image:?}: an image name that is not a path (starting with \"/\", \"./\" or \"../\") is looked up under the bundles directory and may not have empty, \".\" or \"..\" components"
            ),
            Error::NotFound { image, tried } => {
                write!(f, "image {image:?} not found: no OCI bundle (config.json) at ")?;
                for (i, t) in tried.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or ")?;
                    }
                    write!(f, "{}", t.display())?;
                }
                Ok(())
            }
            Error::Io { what, err } => write!(f, "{what}: {err}"),
            Error::Load(e) => e.fmt(f),
            Error::Invalid(m) | Error::User(m) => f.write_str(m),
            Error::Signal(s) => write!(f, "invalid signal {s:?}"),
            Error::In { what, err } => write!(f, "{what}: {err}"),
        }
    }
}

crate::error::layer_error!(Error);
crate::error::context!(Error: within);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_keeps_its_line_and_has_its_kind() {
        let e = Error::NotFound {
            image: "busybox".into(),
            tried: vec!["/b/busybox".into(), "/b/x".into()],
        };
        assert_eq!(
            e.to_string(),
            "image \"busybox\" not found: no OCI bundle (config.json) at /b/busybox or /b/x"
        );
        assert_eq!(e.kind(), Kind::NotFound);
        let e = Error::Signal("SIGNOPE".into()).within("image busybox: config.StopSignal");
        assert_eq!(
            e.to_string(),
            "image busybox: config.StopSignal: invalid signal \"SIGNOPE\""
        );
        assert_eq!(e.kind(), Kind::InvalidArgument);
        assert_eq!(Error::Required.to_string(), "Required value");
    }
}
