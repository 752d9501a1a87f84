//! A conversation with one repository of one registry, as containerd's docker resolver
//! holds it: which server and scheme, redirects (blobs often live on another host, which
//! gets no credentials), and auth: a 401's challenge answered once with a bearer token or
//! Basic credentials, then kept for the requests that follow.

use super::auth::{self, Challenge};
use super::conn::Net;
use super::http::{self, Response, SendError};
use super::url::{self, Url};
use super::Credential;
use crate::image::{Error, Step};

const MAX_REDIRECTS: usize = 10;

/// Cloned for each download thread: the clone keeps the accepted `Authorization`.
#[derive(Clone)]
pub struct Client {
    /// The registry as the image name says it (`docker.io`, `127.0.0.1:5000`).
    domain: String,
    /// The repository's path (`library/nginx`).
    path: String,
    /// Scheme, host and port of the registry's API.
    base: Url,
    /// A loopback registry was tried over http first; it may turn out to speak https.
    may_be_https: bool,
    net: Net,
    login: Option<Credential>,
    /// The `Authorization` header the registry accepted, for the requests after.
    authorization: Option<String>,
}

/// Where the API of `domain` is and whether it is plain HTTP: Docker Hub's is at
/// `registry-1.docker.io`; loopback addresses and `--insecure-registry` entries (with or
/// without their port) are plain HTTP.
pub fn endpoint(domain: &str, insecure: &[String]) -> Result<(Url, bool), Error> {
    if domain == "docker.io" {
        return Ok((Url::parse("https://registry-1.docker.io/")?, false));
    }
    let (host, port) = url::split_host_port(domain, 0).map_err(|why| Error::Endpoint {
        registry: domain.to_string(),
        why: why.to_string(),
    })?;
    let listed = insecure.iter().any(|i| {
        let i = i.trim().to_ascii_lowercase();
        let i = i.trim_start_matches("http://").trim_end_matches('/');
        i == domain || url::split_host_port(i, 0) == Ok((host.clone(), 0))
    });
    let loopback = host == "localhost"
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback());
    let scheme = if listed || loopback { "http" } else { "https" };
    let base = Url::parse(&format!("{scheme}://{}/", url::bracketed(&host)))?;
    let base = Url {
        port: if port == 0 { base.port } else { port },
        ..base
    };
    Ok((base, loopback && !listed))
}

impl Client {
    pub fn new(
        domain: &str,
        path: &str,
        insecure: &[String],
        net: Net,
        login: Option<Credential>,
    ) -> Result<Client, Error> {
        let (base, may_be_https) = endpoint(domain, insecure)?;
        Ok(Client {
            domain: domain.to_string(),
            path: path.to_string(),
            base,
            may_be_https,
            net,
            login,
            authorization: None,
        })
    }

    /// `GET /v2/<path>/<what>` (`manifests/<ref>`, `blobs/<digest>`) with auth and
    /// redirects; any final status is the caller's to judge.
    pub fn get(&mut self, what: &str, accept: &str) -> Result<Response, Error> {
        let target = format!("/v2/{}/{what}", self.path);
        let mut authorized_once = false;
        loop {
            let url = self.base.join(&target)?;
            let resp = match self.follow(url, accept) {
                Err(e) if e.not_http && self.may_be_https => {
                    // A loopback registry serving TLS: the rest of the pull goes over https.
                    self.may_be_https = false;
                    self.base.https = true;
                    continue;
                }
                r => r.map_err(|e| Error::unreachable(e.msg))?,
            };
            if resp.status == 400 && self.may_be_https && !resp.url.https {
                let mut resp = resp;
                let body = resp.buffer_body(4096).unwrap_or_default();
                if String::from_utf8_lossy(&body).contains("HTTPS") {
                    self.may_be_https = false;
                    self.base.https = true;
                    continue;
                }
                return Ok(resp);
            }
            self.may_be_https = false;
            if resp.status != 401 || authorized_once || !resp.url.same_origin(&self.base) {
                return Ok(resp);
            }
            let challenges = auth::parse_challenges(resp.headers("www-authenticate"));
            self.authorization = Some(self.authorize(&challenges)?);
            authorized_once = true;
        }
    }

    /// One request and its redirects; only the registry's own server gets credentials.
    fn follow(&self, mut url: Url, accept: &str) -> Result<Response, SendError> {
        for _ in 0..MAX_REDIRECTS {
            let mut headers = vec![];
            if !accept.is_empty() {
                headers.push(("Accept", accept.to_string()));
            }
            if let Some(a) = self
                .authorization
                .as_ref()
                .filter(|_| url.same_origin(&self.base))
            {
                headers.push(("Authorization", a.clone()));
            }
            let resp = http::send("GET", &url, &headers, &self.net)?;
            if !matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
                return Ok(resp);
            }
            let Some(loc) = resp.header("location") else {
                return Ok(resp);
            };
            url = url.join(loc)?;
        }
        Err(format!("{}: more than {MAX_REDIRECTS} redirects", self.domain).into())
    }

    /// The `Authorization` header answering `challenges`: a bearer token from the realm
    /// (asked with the login if there is one), or the login as Basic credentials.
    fn authorize(&self, challenges: &[Challenge]) -> Result<String, Error> {
        let no_login = || {
            unauthorized(format!(
                "401 Unauthorized: the registry wants a login and none is given for {} \
                 (imagePullSecrets, --creds, or ~/.docker/config.json)",
                self.domain
            ))
        };
        if let Some(c) = challenges.iter().find(|c| c.scheme == "bearer") {
            return self.token(c).map(|t| format!("Bearer {t}"));
        }
        if challenges.iter().any(|c| c.scheme == "basic") {
            let l = self.login.as_ref().ok_or_else(no_login)?;
            return Ok(auth::basic(&l.username, &l.password));
        }
        Err(unauthorized(format!(
            "{}: 401 Unauthorized without a Bearer or Basic challenge ({})",
            self.domain,
            challenges
                .iter()
                .map(|c| c.scheme.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// Asks the token server named by a bearer challenge for a pull token.
    fn token(&self, c: &Challenge) -> Result<String, Error> {
        let realm = c.param("realm").ok_or_else(|| {
            unauthorized(format!("{}: bearer challenge without a realm", self.domain))
        })?;
        let mut realm_url = Url::parse(realm)
            .map_err(|e| unauthorized(format!("{}: token realm: {e}", self.domain)))?;
        let mut query = Vec::new();
        if let Some(s) = c.param("service") {
            query.push(format!("service={}", url::encode_query(s)));
        }
        let ours = format!("repository:{}:pull", self.path);
        let mut scopes: Vec<&str> = c.param("scope").into_iter().collect();
        if !scopes.contains(&ours.as_str()) {
            scopes.push(&ours);
        }
        for s in scopes {
            query.push(format!("scope={}", url::encode_query(s)));
        }
        let sep = if realm_url.target.contains('?') {
            '&'
        } else {
            '?'
        };
        realm_url.target = format!("{}{sep}{}", realm_url.target, query.join("&"));
        let mut headers = vec![];
        if let Some(l) = &self.login {
            headers.push(("Authorization", auth::basic(&l.username, &l.password)));
        }
        let mut url = realm_url;
        for _ in 0..MAX_REDIRECTS {
            let mut resp = http::send("GET", &url, &headers, &self.net)
                .map_err(|e| Error::unreachable(format!("token server: {}", e.msg)))?;
            match resp.status {
                200 => {
                    let body = resp.read_body(1 << 20)?;
                    return auth::token_from_answer(&body).map_err(|why| Error::Exchange {
                        url: url.to_string(),
                        step: Step::Token,
                        why: why.to_string(),
                    });
                }
                301 | 302 | 303 | 307 | 308 if resp.header("location").is_some() => {
                    url = url.join(resp.header("location").unwrap_or_default())?;
                }
                401 | 403 => {
                    let status = Some(resp.status);
                    let why = registry_error(&mut resp);
                    let message = match &self.login {
                        Some(l) => format!(
                            "{}: token server {} refused the login of {:?}: {why}",
                            self.domain,
                            url.authority(),
                            l.username
                        ),
                        None => format!(
                            "{}: token server {} wants a login and none is given \
                             (imagePullSecrets, --creds, or ~/.docker/config.json): {why}",
                            self.domain,
                            url.authority()
                        ),
                    };
                    return Err(Error::Registry { status, message });
                }
                _ => {
                    let status = Some(resp.status);
                    let why = registry_error(&mut resp);
                    let message = format!("{}: token server: {why}", self.domain);
                    return Err(Error::Registry { status, message });
                }
            }
        }
        Err(Error::unreachable(format!(
            "{}: token server: too many redirects",
            self.domain
        )))
    }

    /// GET `path` (below the repository) for `what`: the response when it is 200, else
    /// one line: not found with the registry's reason, or [`Client::refusal`].
    pub fn get_found(&mut self, what: &str, path: &str, accept: &str) -> Result<Response, Error> {
        let mut resp = self.get(path, accept)?;
        let status = Some(resp.status);
        let message = match resp.status {
            200 => return Ok(resp),
            404 => format!("{what}: not found: {}", registry_error(&mut resp)),
            _ => self.refusal(what, &mut resp),
        };
        Err(Error::Registry { status, message })
    }

    /// A one-line error for a final answer that is not what was asked: the status and the
    /// registry's own error codes; a 401 says whose login failed.
    pub fn refusal(&self, what: &str, resp: &mut Response) -> String {
        let why = registry_error(resp);
        if resp.status == 401 {
            return match &self.login {
                Some(l) => format!(
                    "{what}: {why}: the registry refused the login of {:?}",
                    l.username
                ),
                None => format!(
                    "{what}: {why}: the registry wants a login and none is given for {} \
                     (imagePullSecrets, --creds, or ~/.docker/config.json)",
                    self.domain
                ),
            };
        }
        format!("{what}: {why}")
    }
}

/// A refusal of the registry's login, or of its lack.
fn unauthorized(message: String) -> Error {
    Error::Registry {
        status: Some(401),
        message,
    }
}

/// `404 Not Found (MANIFEST_UNKNOWN: manifest unknown)` from the distribution spec's error
/// body, or the status alone.
pub fn registry_error(resp: &mut Response) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let status = format!("{} {}", resp.status, resp.reason);
    let body = resp.read_body(64 * 1024).unwrap_or_default();
    let Ok(e) = serde_json::from_slice::<Errors>(&body) else {
        // A short line of text (a TLS server's answer to plain HTTP) says what went wrong.
        let text = String::from_utf8_lossy(&body);
        let text = text.trim();
        if !text.is_empty() && text.len() <= 200 && !text.starts_with('<') && !text.contains('\n') {
            return format!("{status} ({text})");
        }
        return status;
    };
    let items: Vec<_> = e
        .errors
        .iter()
        .map(|i| match (i.code.is_empty(), i.message.is_empty()) {
            (false, false) => format!("{}: {}", i.code, i.message),
            (false, true) => i.code.clone(),
            _ => i.message.clone(),
        })
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        status
    } else {
        format!("{status} ({})", items.join("; "))
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
