//! The HTTP rules of httpGet probes and hooks, as kubelet applies them (docs/semantics.md
//! §Probes): the request podinit sends, how a response head is read, and where a redirect
//! goes. Pure; the bytes move in `net`.

use super::error::Error;
use super::handler::{HttpGet, KUBE_VERSION};

/// At most this much of a response body is kept (kubelet's limit).
pub const MAX_BODY: usize = 10 << 10;
/// A response head longer than this is refused.
pub const MAX_HEAD: usize = 16 << 10;
/// Same-host redirects followed before giving up.
pub const MAX_REDIRECTS: u32 = 10;

/// The request: one GET, no keep-alive. `User-Agent` and `Accept` default unless the spec
/// sets them; a header set to "" is not sent.
pub fn request(g: &HttpGet) -> Vec<u8> {
    let has = |name: &str| g.headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = format!("GET {} HTTP/1.1\r\n", g.path);
    if !has("host") {
        head += &format!("Host: {}\r\n", authority(&g.host, g.port, g.https));
    }
    if !has("user-agent") {
        head += &format!("User-Agent: {}/{KUBE_VERSION}\r\n", g.agent);
    }
    if !has("accept") {
        head += "Accept: */*\r\n";
    }
    for (k, v) in &g.headers {
        if !v.is_empty() {
            head += &format!("{k}: {v}\r\n");
        }
    }
    head += "Connection: close\r\n\r\n";
    head.into_bytes()
}

/// `host:port` as a URL authority (the port left out when it is the scheme's default).
fn authority(host: &str, port: u16, https: bool) -> String {
    let h = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    if port == if https { 443 } else { 80 } {
        h
    } else {
        format!("{h}:{port}")
    }
}

/// The URL a request goes to, as Go prints it in errors.
pub fn url(g: &HttpGet) -> String {
    format!(
        "{}://{}{}",
        if g.https { "https" } else { "http" },
        authority(&g.host, g.port, g.https),
        g.path
    )
}

#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    pub code: u16,
    pub location: Option<String>,
    /// Where the body starts in the buffer.
    pub body_at: usize,
}

/// Parse a response head from what arrived so far: `Ok(None)` until it is complete.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, Error> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => Ok(Some(Head {
            code: r.code.unwrap_or(0),
            location: r
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("location"))
                .map(|h| String::from_utf8_lossy(h.value).trim().to_string()),
            body_at: n,
        })),
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => Err(Error::Response(
            "server response headers exceeded the limit",
            None,
        )),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(Error::Response(
            "malformed HTTP response",
            Some(e.to_string()),
        )),
    }
}

/// Whether a status code is a redirect Go's client follows.
pub fn is_redirect(code: u16) -> bool {
    matches!(code, 301 | 302 | 303 | 307 | 308)
}

/// The request a redirect leads to: `Location` resolved against the current URL.
pub fn follow(cur: &HttpGet, location: &str) -> Result<HttpGet, Error> {
    let mut next = cur.clone();
    let rest = if let Some(r) = location.strip_prefix("http://") {
        next.https = false;
        Some(r)
    } else if let Some(r) = location.strip_prefix("https://") {
        next.https = true;
        Some(r)
    } else {
        location.strip_prefix("//")
    };
    match rest {
        Some(r) => {
            let (auth, path) = match r.find(['/', '?']) {
                Some(k) => (&r[..k], &r[k..]),
                None => (r, "/"),
            };
            let (host, port) =
                split_authority(auth, next.https).ok_or_else(|| Error::Redirect {
                    location: location.to_string(),
                })?;
            next.host = host;
            next.port = port;
            next.path = if path.starts_with('?') {
                format!("/{path}")
            } else {
                path.to_string()
            };
            // A Host header override does not follow to another URL.
            next.headers
                .retain(|(k, _)| !k.eq_ignore_ascii_case("host"));
        }
        None if location.starts_with('/') => next.path = location.to_string(),
        None => {
            let base = cur.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |k| k + 1)];
            next.path = format!("{dir}{location}");
        }
    }
    Ok(next)
}

fn split_authority(a: &str, https: bool) -> Option<(String, u16)> {
    let default = if https { 443 } else { 80 };
    if let Some(r) = a.strip_prefix('[') {
        let (h, rest) = r.split_once(']')?;
        let port = match rest.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if rest.is_empty() => default,
            None => return None,
        };
        return Some((h.to_string(), port));
    }
    match a.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None if !a.is_empty() => Some((a.to_string(), default)),
        None => None,
    }
}

/// What an HTTP response means for a probe (`Ok` = success) or a hook (any response
/// succeeds), given the first bytes of its body.
pub fn probe_result(code: u16, body: &[u8]) -> Result<String, Error> {
    let body = String::from_utf8_lossy(&body[..body.len().min(MAX_BODY)]).into_owned();
    if (200..400).contains(&code) {
        Ok(body)
    } else {
        Err(Error::Status(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> HttpGet {
        HttpGet {
            https: false,
            host: "127.0.0.1".into(),
            port: 8080,
            path: path.into(),
            headers: vec![],
            agent: "kube-probe",
        }
    }

    #[test]
    fn the_request_has_kubelets_headers() {
        let r = String::from_utf8(request(&get("/healthz?x=1"))).unwrap();
        assert_eq!(
            r,
            "GET /healthz?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: kube-probe/1.37\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn spec_headers_replace_or_remove_the_defaults() {
        let mut g = get("/");
        g.port = 80;
        g.agent = "kube-lifecycle";
        g.headers = vec![
            ("user-agent".into(), "".into()),
            ("Accept".into(), "text/plain".into()),
            ("Host".into(), "example.com".into()),
            ("X-Custom".into(), "1".into()),
        ];
        let r = String::from_utf8(request(&g)).unwrap();
        assert_eq!(
            r,
            "GET / HTTP/1.1\r\nAccept: text/plain\r\nHost: example.com\r\nX-Custom: 1\r\nConnection: close\r\n\r\n"
        );
        g.headers.clear();
        let r = String::from_utf8(request(&g)).unwrap();
        assert!(r.contains("Host: 127.0.0.1\r\n"), "{r}");
        assert!(r.contains("User-Agent: kube-lifecycle/1.37\r\n"), "{r}");
    }

    #[test]
    fn response_heads() {
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), None);
        let h = parse_head(b"HTTP/1.0 302 Found\r\nLocation: /next\r\n\r\nbody")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.code, h.location.as_deref(), h.body_at),
            (302, Some("/next"), 39)
        );
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
        assert!(parse_head(&[b'a'; MAX_HEAD + 1]).is_err());
    }

    #[test]
    fn success_is_200_to_399() {
        assert_eq!(probe_result(200, b"ok").unwrap(), "ok");
        assert_eq!(probe_result(399, b"").unwrap(), "");
        assert_eq!(
            probe_result(404, b"nope").unwrap_err().to_string(),
            "HTTP probe failed with statuscode: 404"
        );
        assert!(probe_result(199, b"").is_err());
        assert_eq!(probe_result(200, &[b'x'; 20000]).unwrap().len(), MAX_BODY);
    }

    #[test]
    fn redirects_resolve_against_the_current_url() {
        let cur = get("/a/b?q=1");
        assert_eq!(follow(&cur, "/c").unwrap().path, "/c");
        assert_eq!(follow(&cur, "c").unwrap().path, "/a/c");
        let n = follow(&cur, "http://127.0.0.1:9000/x").unwrap();
        assert_eq!(
            (n.host.as_str(), n.port, n.path.as_str()),
            ("127.0.0.1", 9000, "/x")
        );
        let n = follow(&cur, "https://other.example").unwrap();
        assert_eq!(
            (n.host.as_str(), n.port, n.path.as_str(), n.https),
            ("other.example", 443, "/", true)
        );
        let n = follow(&cur, "//[::1]:81/y").unwrap();
        assert_eq!(
            (n.host.as_str(), n.port, n.path.as_str()),
            ("::1", 81, "/y")
        );
        assert!(follow(&cur, "http://:x/").is_err());
        assert!(is_redirect(307) && !is_redirect(304));
        assert_eq!(url(&n), "http://[::1]:81/y");
    }
}
