//! Logins: docker config JSON (a `kubernetes.io/dockerconfigjson` Secret's
//! `.dockerconfigjson`, `~/.docker/config.json`), and which login a repository uses, as
//! kubelet's credential keyring matches them (host with `*` globs, port, path prefix).

use super::auth::base64_decode;
use super::Credential;
use crate::image::Error;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Deserialize, Default)]
struct Entry {
    #[serde(default)]
    auth: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

pub fn from_docker_config(json: &[u8]) -> Result<Vec<Credential>, Error> {
    let bad = Error::Content;
    let v: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| bad(format!("docker config: {e}")))?;
    // `.dockerconfigjson` wraps the entries in `auths`; the older `.dockercfg` does not.
    let auths = match v.get("auths") {
        Some(a) => a.clone(),
        None => v,
    };
    let entries: BTreeMap<String, Entry> = crate::tracked::deserialize(&auths)
        .map_err(|(_, e)| bad(format!("docker config: auths: {e}")))?;
    let mut out = Vec::new();
    for (key, e) in entries {
        let (username, password) = if e.auth.is_empty() {
            (e.username, e.password)
        } else {
            let raw = base64_decode(&e.auth)
                .map_err(|err| bad(format!("docker config: auths[{key:?}].auth: {err}")))?;
            let raw = String::from_utf8(raw)
                .map_err(|_| bad(format!("docker config: auths[{key:?}].auth: not UTF-8")))?;
            let (u, p) = raw.split_once(':').ok_or_else(|| {
                bad(format!(
                    "docker config: auths[{key:?}].auth: not base64 of user:password"
                ))
            })?;
            (u.to_string(), p.to_string())
        };
        // An entry kept by a credential helper has nothing here.
        if username.is_empty() && password.is_empty() {
            continue;
        }
        out.push(Credential {
            registry: normalise_key(&key),
            username,
            password,
        });
    }
    Ok(out)
}

/// `https://index.docker.io/v1/` → `docker.io`; `http://r.example:5000/team/` →
/// `r.example:5000/team`.
pub fn normalise_key(key: &str) -> String {
    let k = key.trim();
    let k = k
        .strip_prefix("https://")
        .or_else(|| k.strip_prefix("http://"))
        .unwrap_or(k);
    let k = k.trim_end_matches('/').to_ascii_lowercase();
    let (host, path) = match k.split_once('/') {
        Some((h, p)) => (h.to_string(), Some(p.to_string())),
        None => (k.clone(), None),
    };
    if matches!(
        host.as_str(),
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" | "docker.io"
    ) {
        // Docker Hub's keys carry its API version (`/v1/`), not a repository.
        return match path.filter(|p| p != "v1" && p != "v2") {
            Some(p) => format!("docker.io/{p}"),
            None => "docker.io".into(),
        };
    }
    k
}

/// The login for `domain/path`: the most specific matching key wins (longest path).
pub fn find<'a>(creds: &'a [Credential], domain: &str, path: &str) -> Option<&'a Credential> {
    creds
        .iter()
        .filter(|c| matches(&c.registry, domain, path))
        .max_by_key(|c| c.registry.len())
}

/// Every login for `domain/path`, the most specific first: kubelet's keyring `Lookup`.
pub fn all<'a>(creds: &'a [Credential], domain: &str, path: &str) -> Vec<&'a Credential> {
    let mut m: Vec<&Credential> = creds
        .iter()
        .filter(|c| matches(&c.registry, domain, path))
        .collect();
    m.sort_by_key(|c| std::cmp::Reverse(c.registry.len()));
    m
}

fn matches(key: &str, domain: &str, path: &str) -> bool {
    let key = normalise_key(key);
    let (khost, kpath) = key.split_once('/').unwrap_or((&key, ""));
    let (kname, kport) = khost.rsplit_once(':').unwrap_or((khost, ""));
    let (dname, dport) = domain.rsplit_once(':').unwrap_or((domain, ""));
    if kport != dport || !host_glob(kname, dname) {
        return false;
    }
    kpath.is_empty() || path == kpath || path.starts_with(&format!("{kpath}/"))
}

/// Host names match part for part, `*` matching one whole part (`*.example.com`).
fn host_glob(pattern: &str, host: &str) -> bool {
    let p: Vec<_> = pattern.split('.').collect();
    let h: Vec<_> = host.split('.').collect();
    p.len() == h.len() && p.iter().zip(&h).all(|(a, b)| *a == "*" || a == b)
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`; none when it does not
/// exist.
pub fn from_default_file() -> Result<Vec<Credential>, Error> {
    let path = match std::env::var_os("DOCKER_CONFIG") {
        Some(d) => PathBuf::from(d).join("config.json"),
        None => match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".docker/config.json"),
            None => return Ok(Vec::new()),
        },
    };
    match std::fs::read(&path) {
        Ok(b) => from_docker_config(&b).map_err(|e| e.within(path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(path.display(), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(r: &str, u: &str, p: &str) -> Credential {
        Credential {
            registry: r.into(),
            username: u.into(),
            password: p.into(),
        }
    }

    #[test]
    fn reads_auths_in_both_forms() {
        let json = br#"{"auths":{
            "https://index.docker.io/v1/":{"auth":"dTE6cDE6eA=="},
            "r.example:5000":{"username":"u2","password":"p2"},
            "helper.example":{}
        },"credsStore":"desktop"}"#;
        let c = from_docker_config(json).unwrap();
        assert_eq!(
            c,
            [
                cred("docker.io", "u1", "p1:x"),
                cred("r.example:5000", "u2", "p2")
            ]
        );
        let legacy = br#"{"http://r.example/team/":{"auth":"dTpw"}}"#;
        assert_eq!(
            from_docker_config(legacy).unwrap(),
            [cred("r.example/team", "u", "p")]
        );
        for bad in [
            &br#"{"auths":{"r":{"auth":"!!"}}}"#[..],
            b"{\"auths\":{\"r\":{\"auth\":\"dQ==\"}}}",
            b"[]",
        ] {
            assert!(from_docker_config(bad).is_err());
        }
    }

    #[test]
    fn finds_the_most_specific_login() {
        let creds = [
            cred("docker.io", "hub", ""),
            cred("r.example:5000", "port", ""),
            cred("r.example:5000/team", "team", ""),
            cred("*.corp.example", "glob", ""),
        ];
        let who = |d, p| find(&creds, d, p).map(|c| c.username.as_str());
        assert_eq!(who("docker.io", "library/nginx"), Some("hub"));
        assert_eq!(who("r.example:5000", "other/app"), Some("port"));
        assert_eq!(who("r.example:5000", "team/app"), Some("team"));
        assert_eq!(who("r.example:5000", "teamx/app"), Some("port"));
        assert_eq!(who("r.example", "team/app"), None);
        assert_eq!(who("a.corp.example", "x"), Some("glob"));
        assert_eq!(who("a.b.corp.example", "x"), None);
        assert_eq!(
            normalise_key("https://registry-1.docker.io/v2/"),
            "docker.io"
        );
    }
}
