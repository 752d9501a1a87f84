//! HTTP proxies from the environment, as containerd (Go's `ProxyFromEnvironment`) reads
//! them: `HTTPS_PROXY` for https, `HTTP_PROXY` for http (either case), `NO_PROXY`
//! exceptions, and never for loopback addresses. An https target is reached through a
//! `CONNECT` tunnel; an http one by asking the proxy with the absolute URL.

use super::auth;
use super::url::{self, Url};
use crate::image::Error;

/// A proxy to go through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proxy {
    pub host: String,
    pub port: u16,
    /// `Proxy-Authorization` from the proxy URL's `user:password@`.
    pub authorization: Option<String>,
}

/// The proxy settings of a pull.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub http: Option<String>,
    pub https: Option<String>,
    pub no_proxy: String,
}

impl Settings {
    /// From the process's environment.
    pub fn from_env() -> Settings {
        let var = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
        };
        Settings {
            http: var(&["HTTP_PROXY", "http_proxy"]),
            https: var(&["HTTPS_PROXY", "https_proxy"]),
            no_proxy: var(&["NO_PROXY", "no_proxy"]).unwrap_or_default(),
        }
    }

    /// The proxy for `target`, if any.
    pub fn for_url(&self, target: &Url) -> Result<Option<Proxy>, Error> {
        let setting = if target.https {
            &self.https
        } else {
            &self.http
        };
        choose(target, setting.as_deref(), &self.no_proxy)
    }
}

fn choose(target: &Url, setting: Option<&str>, no_proxy: &str) -> Result<Option<Proxy>, Error> {
    let Some(setting) = setting else {
        return Ok(None);
    };
    if is_loopback(&target.host) || excluded(target, no_proxy) {
        return Ok(None);
    }
    parse(setting).map(Some)
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

/// `NO_PROXY`: `*`, hosts (their subdomains too), `.domain`, `host:port`, IP addresses.
fn excluded(target: &Url, no_proxy: &str) -> bool {
    no_proxy
        .split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .any(|e| {
            if e == "*" {
                return true;
            }
            let (host, port) = match url::split_host_port(&e, 0) {
                Ok(hp) => hp,
                Err(_) => return false,
            };
            if port != 0 && port != target.port {
                return false;
            }
            let host = host.trim_start_matches("*.").trim_start_matches('.');
            target.host == host || target.host.ends_with(&format!(".{host}"))
        })
}

/// `http://[user:password@]host[:port][/]`, the scheme optional.
fn parse(setting: &str) -> Result<Proxy, Error> {
    let s = setting.trim();
    let bad = |why: String| Error::Proxy {
        setting: s.to_string(),
        why,
    };
    let rest = if let Some(r) = s.strip_prefix("http://") {
        r
    } else if s.starts_with("https://") || s.starts_with("socks") {
        return Err(bad("only http:// proxies are supported".into()));
    } else {
        s
    };
    let rest = rest.split('/').next().unwrap_or("");
    let (userinfo, hostport) = match rest.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, rest),
    };
    let (host, port) = url::split_host_port(hostport, 80).map_err(|e| bad(e.to_string()))?;
    let authorization = userinfo.map(|u| {
        let (user, password) = u.split_once(':').unwrap_or((u, ""));
        auth::basic(&unescape(user), &unescape(password))
    });
    Ok(Proxy {
        host,
        port,
        authorization,
    })
}

/// Percent-decoding of a proxy URL's user and password.
fn unescape(s: &str) -> String {
    crate::util::unescape_codes(s, b'%', 2, 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn parses_proxy_settings() {
        assert_eq!(
            parse("proxy.corp:3128").unwrap(),
            Proxy {
                host: "proxy.corp".into(),
                port: 3128,
                authorization: None
            }
        );
        let p = parse("http://us%40r:p%3Ass@10.0.0.1/").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("10.0.0.1", 80));
        assert_eq!(p.authorization, Some(auth::basic("us@r", "p:ss")));
        let e = parse("socks5://p:1080").unwrap_err();
        assert_eq!(
            e.to_string(),
            "proxy \"socks5://p:1080\": only http:// proxies are supported"
        );
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
    }

    #[test]
    fn no_proxy_and_loopback_go_direct() {
        let p = Some("http://proxy:3128");
        let via = |t: &str, no: &str| choose(&u(t), p, no).unwrap().is_some();
        assert!(via("https://registry-1.docker.io/", ""));
        assert!(!via("http://127.0.0.1:5000/", ""));
        assert!(!via("http://localhost:5000/", ""));
        assert!(!via("http://[::1]:5000/", ""));
        assert!(!via("https://r.corp.example/", "corp.example"));
        assert!(!via("https://r.corp.example/", ".corp.example"));
        assert!(!via("https://r.corp.example/", "*.corp.example"));
        assert!(via("https://corp.example.org/", "corp.example"));
        assert!(!via("https://r.example:5000/", "r.example:5000"));
        assert!(via("https://r.example/", "r.example:5000"));
        assert!(!via("https://10.1.2.3/", "10.1.2.3, other"));
        assert!(!via("https://anything/", "*"));
        assert!(choose(&u("https://x/"), None, "").unwrap().is_none());
    }
}
