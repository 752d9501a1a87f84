//! Image names as containerd normalises them: `nginx` is `docker.io/library/nginx:latest`.

use std::fmt;

/// A normalised image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// `docker.io`, `registry.example:5000`, `127.0.0.1:5000`, `[::1]:5000`.
    pub domain: String,
    /// `library/nginx`, `team/app`.
    pub path: String,
    /// The tag; `latest` when neither tag nor digest was given.
    pub tag: Option<String>,
    pub digest: Option<super::digest::Digest>,
}

impl Reference {
    /// Parses and normalises `s`; a clear one-line error names what is wrong.
    pub fn parse(s: &str) -> Result<Reference, String> {
        let _ = s;
        todo!("image::reference::parse")
    }

    /// `domain/path`, the repository the registry serves.
    pub fn repository(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// kubelet's default pull policy is Always for `:latest` or no tag (and no digest).
    pub fn is_latest(&self) -> bool {
        self.digest.is_none() && self.tag.as_deref().is_none_or(|t| t == "latest")
    }
}

impl fmt::Display for Reference {
    /// The full normalised name: `docker.io/library/nginx:latest`, `repo@sha256:…`,
    /// `repo:tag@sha256:…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.repository())?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}
