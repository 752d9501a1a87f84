//! `sha256:<hex>` digests and a reader that verifies one while it streams.

use std::fmt;
use std::io::{self, Read};

/// A content digest. Only sha256 is accepted, as containerd accepts by default.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    /// 64 lowercase hex characters.
    pub hex: String,
}

impl Digest {
    /// `sha256:` followed by 64 lowercase hex characters.
    pub fn parse(s: &str) -> Result<Digest, String> {
        let _ = s;
        todo!("image::digest::parse")
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        let _ = bytes;
        todo!("image::digest::of")
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

/// Reads through to `inner`, hashing; at the end (or past `size`) it fails with
/// `InvalidData` naming the expected and actual digest or size, so nothing unverified is
/// ever taken as complete.
pub struct Verifier<R> {
    inner: R,
    expected: Digest,
    size: Option<u64>,
}

impl<R: Read> Verifier<R> {
    pub fn new(inner: R, expected: &Digest, size: Option<u64>) -> Self {
        Verifier {
            inner,
            expected: expected.clone(),
            size,
        }
    }
}

impl<R: Read> Read for Verifier<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let _ = (&mut self.inner, &self.expected, self.size, buf);
        todo!("image::digest::Verifier::read")
    }
}
