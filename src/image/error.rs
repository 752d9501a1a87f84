//! The image store's errors, with what a front-end needs to tell them apart: a name that
//! does not parse, an image the store does not have, one a running container holds.

use std::fmt;
use std::path::PathBuf;

use crate::error::Kind;

#[derive(Debug)]
pub enum Error {
    /// A reference that does not parse; the message names what is wrong.
    Reference(String),
    /// No image of that name in the store.
    NoImage { name: String, store: PathBuf },
    /// A running container uses the image: it stays.
    InUse(String),
    /// Anything else, as its message.
    Other(String),
}

impl Error {
    pub fn kind(&self) -> Kind {
        match self {
            Error::Reference(_) => Kind::InvalidArgument,
            Error::NoImage { .. } => Kind::NotFound,
            Error::InUse(_) => Kind::FailedPrecondition,
            Error::Other(_) => Kind::Unknown,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoImage { name, store } => {
                write!(f, "no image {name} in the store {}", store.display())
            }
            Error::Reference(m) | Error::InUse(m) | Error::Other(m) => f.write_str(m),
        }
    }
}

impl From<String> for Error {
    fn from(m: String) -> Error {
        Error::Other(m)
    }
}

/// For the callers still written over strings.
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_its_kind() {
        let e = Error::NoImage {
            name: "docker.io/library/x:latest".into(),
            store: "/var/lib/podinit/images".into(),
        };
        assert_eq!(e.kind(), Kind::NotFound);
        assert_eq!(
            e.to_string(),
            "no image docker.io/library/x:latest in the store /var/lib/podinit/images"
        );
        assert_eq!(Error::Reference("r".into()).kind(), Kind::InvalidArgument);
        assert_eq!(Error::InUse("u".into()).kind(), Kind::FailedPrecondition);
        assert_eq!(Error::from("o".to_string()).kind(), Kind::Unknown);
    }
}
