//! `sha256:<hex>` digests and a reader that verifies one while it streams.

use sha2::{Digest as _, Sha256};
use std::fmt;
use std::io::{self, Read};

use super::error::Error;

/// A content digest. Only sha256 is accepted, as containerd accepts by default.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest {
    /// 64 lowercase hex characters.
    pub hex: String,
}

impl Digest {
    /// `sha256:` followed by 64 lowercase hex characters.
    pub fn parse(s: &str) -> Result<Digest, Error> {
        let Some((alg, hex)) = s.split_once(':') else {
            return Err(Error::Content(format!(
                "invalid digest {s:?}: want sha256:<64 hex digits>"
            )));
        };
        if alg != "sha256" {
            return Err(Error::Unsupported(format!(
                "unsupported digest algorithm {alg:?} in {s:?}: only sha256 is"
            )));
        }
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(Error::Content(format!(
                "invalid digest {s:?}: want 64 lowercase hex digits after sha256:"
            )));
        }
        Ok(Digest { hex: hex.into() })
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(bytes))
    }

    fn from_hasher(h: Sha256) -> Digest {
        let sum = h.finalize();
        let mut hex = String::with_capacity(64);
        for b in sum {
            hex.push_str(&format!("{b:02x}"));
        }
        Digest { hex }
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
    read: u64,
    hasher: Option<Sha256>,
}

impl<R: Read> Verifier<R> {
    pub fn new(inner: R, expected: &Digest, size: Option<u64>) -> Self {
        Verifier {
            inner,
            expected: expected.clone(),
            size,
            read: 0,
            hasher: Some(Sha256::new()),
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl<R: Read> Read for Verifier<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let Some(hasher) = self.hasher.as_mut() else {
            return Ok(0);
        };
        let n = self.inner.read(buf)?;
        if n > 0 {
            hasher.update(&buf[..n]);
            self.read += n as u64;
            if let Some(size) = self.size.filter(|&s| self.read > s) {
                return Err(invalid(format!(
                    "{}: more than the {size} bytes its descriptor says",
                    self.expected
                )));
            }
            return Ok(n);
        }
        if let Some(size) = self.size.filter(|&s| self.read != s) {
            return Err(invalid(format!(
                "{}: {} bytes where its descriptor says {size}",
                self.expected, self.read
            )));
        }
        let got = Digest::from_hasher(self.hasher.take().expect("checked above"));
        if got != self.expected {
            return Err(invalid(format!(
                "digest mismatch: expected {}, content is {got}",
                self.expected
            )));
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn parses_and_prints() {
        assert_eq!(Digest::parse(EMPTY).unwrap().to_string(), EMPTY);
        assert_eq!(Digest::of(b"").to_string(), EMPTY);
        for bad in ["sha256:abc", "md5:00", "e3b0", &EMPTY.to_uppercase()] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn verifier_accepts_the_right_content_only() {
        let d = Digest::of(b"hello");
        let mut out = Vec::new();
        Verifier::new(&b"hello"[..], &d, Some(5))
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, b"hello");
        let e = Verifier::new(&b"hellO"[..], &d, Some(5))
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert!(e.to_string().contains("digest mismatch"), "{e}");
        let e = Verifier::new(&b"hello!"[..], &d, Some(5))
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert!(e.to_string().contains("more than the 5 bytes"), "{e}");
        let e = Verifier::new(&b"hell"[..], &d, Some(5))
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert!(e.to_string().contains("4 bytes where"), "{e}");
    }
}
