//! The few URL forms a registry conversation needs: `http(s)://host[:port]/path?query`,
//! redirects' `Location` (absolute, or a path on the same server), and a token realm.

use std::fmt;

use crate::image::Error;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub https: bool,
    /// A name, an IPv4 address, or an IPv6 address without its brackets.
    pub host: String,
    pub port: u16,
    /// The path and query, starting with `/`.
    pub target: String,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, Error> {
        let bad = |why: String| Error::Url {
            url: s.to_string(),
            why,
        };
        let (https, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad("only http:// and https:// are supported".into()));
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        // Credentials in a URL are not ours to send anywhere.
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let default = if https { 443 } else { 80 };
        let (host, port) = split_host_port(authority, default).map_err(|e| bad(e.to_string()))?;
        Ok(Url {
            https,
            host,
            port,
            target: target.split('#').next().unwrap_or("/").to_string(),
        })
    }

    /// Where a redirect's `Location` points, relative to this URL.
    pub fn join(&self, location: &str) -> Result<Url, Error> {
        if location.starts_with("http://") || location.starts_with("https://") {
            return Url::parse(location);
        }
        if let Some(rest) = location.strip_prefix("//") {
            let scheme = if self.https { "https" } else { "http" };
            return Url::parse(&format!("{scheme}://{rest}"));
        }
        let target = if location.starts_with('/') {
            location.to_string()
        } else {
            let path = self.target.split('?').next().unwrap_or("/");
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{location}")
        };
        Ok(Url {
            target,
            ..self.clone()
        })
    }

    /// `host[:port]` as the `Host` header wants it: the port only when not the default.
    pub fn authority(&self) -> String {
        let host = bracketed(&self.host);
        if self.port == if self.https { 443 } else { 80 } {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// Whether `other` is on the same server (credentials may go to it).
    pub fn same_origin(&self, other: &Url) -> bool {
        self.https == other.https && self.host == other.host && self.port == other.port
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority(), self.target)
    }
}

/// An IPv6 address in brackets, as it is written beside a port.
pub fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// Why an authority is not `host[:port]`: the part that is wrong, and the whole.
#[derive(Debug, PartialEq, Eq)]
pub enum BadHostPort {
    Unclosed(String),
    AfterBracket { after: String, whole: String },
    NoHost(String),
    Port { port: String, whole: String },
}

impl std::fmt::Display for BadHostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadHostPort::Unclosed(s) => write!(f, "unclosed [ in {s:?}"),
            BadHostPort::AfterBracket { after, whole } => {
                write!(f, "unexpected {after:?} after ] in {whole:?}")
            }
            BadHostPort::NoHost(s) => write!(f, "no host in {s:?}"),
            BadHostPort::Port { port, whole } => write!(f, "invalid port {port:?} in {whole:?}"),
        }
    }
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` → the host (no brackets) and port.
pub fn split_host_port(s: &str, default: u16) -> Result<(String, u16), BadHostPort> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| BadHostPort::Unclosed(s.to_string()))?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => {
                return Err(BadHostPort::AfterBracket {
                    after: after.to_string(),
                    whole: s.to_string(),
                })
            }
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return Err(BadHostPort::NoHost(s.to_string()));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| BadHostPort::Port {
                port: p.to_string(),
                whole: s.to_string(),
            })?,
        None => default,
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// Percent-encodes a query value (RFC 3986 unreserved characters stay as they are).
pub fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_ports_and_targets() {
        let u = Url::parse("https://Registry.Example:5000/v2/a/b?x=1#frag").unwrap();
        assert_eq!(
            (u.https, u.host.as_str(), u.port, u.target.as_str()),
            (true, "registry.example", 5000, "/v2/a/b?x=1")
        );
        let u = Url::parse("http://[::1]:5000").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.target.as_str()),
            ("::1", 5000, "/")
        );
        assert_eq!(u.authority(), "[::1]:5000");
        let u = Url::parse("https://auth.docker.io?service=x").unwrap();
        assert_eq!((u.port, u.target.as_str()), (443, "/?service=x"));
        assert_eq!(u.authority(), "auth.docker.io");
        assert_eq!(u.to_string(), "https://auth.docker.io/?service=x");
        for bad in ["ftp://x/", "http://:80/", "http://h:99999/", "http://[::1/"] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn joins_redirects() {
        let base = Url::parse("http://127.0.0.1:5000/v2/a/blobs/sha256:00").unwrap();
        let abs = base.join("https://cdn.example/x/y?sig=1").unwrap();
        assert_eq!(abs.to_string(), "https://cdn.example/x/y?sig=1");
        assert!(!base.same_origin(&abs));
        assert_eq!(
            base.join("/elsewhere").unwrap().to_string(),
            "http://127.0.0.1:5000/elsewhere"
        );
        assert_eq!(
            base.join("sibling").unwrap().to_string(),
            "http://127.0.0.1:5000/v2/a/blobs/sibling"
        );
        assert_eq!(
            base.join("//other:81/p").unwrap().to_string(),
            "http://other:81/p"
        );
        assert!(base.same_origin(&base.join("/z").unwrap()));
    }

    #[test]
    fn encodes_query_values() {
        assert_eq!(
            encode_query("repository:team/app:pull"),
            "repository%3Ateam%2Fapp%3Apull"
        );
    }
}
