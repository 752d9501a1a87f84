//! Image names as containerd normalises them: `nginx` is `docker.io/library/nginx:latest`.

use super::digest::Digest;
use std::fmt;

const DOCKER_HUB: &str = "docker.io";
const LEGACY_DOCKER_HUB: &str = "index.docker.io";
/// Docker's limit on a whole repository name.
const NAME_MAX: usize = 255;

/// docker's splitDockerDomain: the first component is a registry host when it has a `.` or
/// `:`, is `localhost`, or has an upper-case letter (repositories never do); else Docker Hub.
fn split_domain(name: &str) -> (&str, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_lowercase() != first =>
        {
            (first, rest)
        }
        _ => (DOCKER_HUB, name),
    }
}

/// `[\w][\w.-]{0,127}`.
fn valid_tag(t: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && word(b[0])
        && b[1..].iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

/// A host name or IPv4 address, or a bracketed IPv6 address, with an optional port.
fn valid_domain(d: &str) -> bool {
    let (host, port) = if let Some(v6) = d.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return false;
        };
        if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return false;
        }
        match after {
            "" => return true,
            p => match p.strip_prefix(':') {
                Some(p) => ("", Some(p)),
                None => return false,
            },
        }
    } else {
        match d.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (d, None),
        }
    };
    if let Some(p) = port {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    if d.starts_with('[') {
        return true;
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
        })
}

/// A normalised image reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// `docker.io`, `registry.example:5000`, `127.0.0.1:5000`, `[::1]:5000`.
    pub domain: String,
    /// `library/nginx`, `team/app`.
    pub path: String,
    /// The tag; `latest` when neither tag nor digest was given.
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl Reference {
    /// Parses and normalises `s`; a clear one-line error names what is wrong.
    pub fn parse(s: &str) -> Result<Reference, super::Error> {
        let bad = |why: &str| {
            Err(super::Error::Reference(format!(
                "invalid image reference {s:?}: {why}"
            )))
        };
        if s.is_empty() {
            return bad("empty");
        }
        // A bare image id is not a name (docker refuses it for the same reason).
        if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return bad(
                "a 64-digit hex string is an id, not a name; write sha256:… or name@sha256:…",
            );
        }
        let (rest, digest) = match s.split_once('@') {
            Some((r, d)) => (
                r,
                Some(Digest::parse(d).map_err(|e| {
                    super::Error::Reference(format!("invalid image reference {s:?}: {e}"))
                })?),
            ),
            None => (s, None),
        };
        // A tag follows the last `:` after the last `/` (a `:` before it is a port).
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[slash..].rfind(':') {
            Some(i) => (&rest[..slash + i], Some(&rest[slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(t) = tag {
            if !valid_tag(t) {
                return bad(&format!("invalid tag {t:?}"));
            }
        }
        if name.len() > NAME_MAX {
            return bad(&format!(
                "repository name longer than {NAME_MAX} characters"
            ));
        }
        let (domain, path) = split_domain(name);
        if !valid_domain(domain) {
            return bad(&format!("invalid registry host {domain:?}"));
        }
        if path.to_lowercase() != path {
            return bad("repository name must be lowercase");
        }
        if path.is_empty() || !path.split('/').all(valid_component) {
            return bad(&format!("invalid repository name {path:?}"));
        }
        let mut domain = domain.to_string();
        let mut path = path.to_string();
        if domain == LEGACY_DOCKER_HUB {
            domain = DOCKER_HUB.into();
        }
        if domain == DOCKER_HUB && !path.contains('/') {
            path = format!("library/{path}");
        }
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_string()),
            (None, Some(_)) => None,
            (None, None) => Some("latest".into()),
        };
        Ok(Reference {
            domain,
            path,
            tag,
            digest,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn full(s: &str) -> String {
        Reference::parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .to_string()
    }

    #[test]
    fn normalises_as_containerd() {
        // containerd's reference/docker normalize_test.go cases.
        for (given, want) in [
            ("nginx", "docker.io/library/nginx:latest"),
            ("nginx:1.27", "docker.io/library/nginx:1.27"),
            ("docker.io/nginx", "docker.io/library/nginx:latest"),
            (
                "index.docker.io/library/nginx",
                "docker.io/library/nginx:latest",
            ),
            ("docker/docker", "docker.io/docker/docker:latest"),
            ("library/debian", "docker.io/library/debian:latest"),
            ("localhost/x", "localhost/x:latest"),
            ("localhost:5000/a/b:v1", "localhost:5000/a/b:v1"),
            ("127.0.0.1:5000/team/app:1", "127.0.0.1:5000/team/app:1"),
            ("[::1]:5000/app", "[::1]:5000/app:latest"),
            ("[2001:db8::1]/app:t", "[2001:db8::1]/app:t"),
            ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
            ("Foo.example/a", "Foo.example/a:latest"),
            ("FOO/a", "FOO/a:latest"),
            ("a__b/c-d/e--f.g", "docker.io/a__b/c-d/e--f.g:latest"),
        ] {
            assert_eq!(full(given), want, "{given}");
        }
        let r = Reference::parse(&format!("team/app@{D}")).unwrap();
        assert_eq!((r.tag, r.digest.unwrap().to_string()), (None, D.into()));
        assert_eq!(
            full(&format!("reg.example:5000/app:v2@{D}")),
            format!("reg.example:5000/app:v2@{D}")
        );
        let r = Reference::parse("reg.example:5000/a/b:c").unwrap();
        assert_eq!(
            (r.domain.as_str(), r.path.as_str(), r.repository()),
            ("reg.example:5000", "a/b", "reg.example:5000/a/b".into())
        );
        assert!(Reference::parse("nginx").unwrap().is_latest());
        assert!(!Reference::parse("nginx:1").unwrap().is_latest());
    }

    #[test]
    fn rejects_what_docker_rejects() {
        for bad in [
            "",
            "Nginx",
            "docker.io/Library/nginx",
            "nginx:",
            "nginx:-x",
            "a//b",
            "-a/b",
            "a-/b",
            "a/b.",
            "a/b/",
            "a..b/c",
            "a@sha256:abc",
            "a@md5:00",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "host:port/a",
            "-host.example/a",
            "[::1/a",
            "a b",
            "nginx:ta g",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?} was accepted");
        }
        let long = format!("a/{}", "b".repeat(300));
        assert!(Reference::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than"));
        let e = Reference::parse("Nginx").unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        assert_eq!(
            e.to_string(),
            "invalid image reference \"Nginx\": repository name must be lowercase"
        );
        assert!(Reference::parse(&"t".repeat(128)).is_ok());
        assert!(Reference::parse(&format!("a:{}", "t".repeat(129))).is_err());
    }
}
