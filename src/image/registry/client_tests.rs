use super::*;
use crate::image::registry::testserver::{answer, net, Server};
use std::time::Duration;

fn login(u: &str, p: &str) -> Option<Credential> {
    Some(Credential {
        registry: "x".into(),
        username: u.into(),
        password: p.into(),
    })
}

fn client(port: u16, login: Option<Credential>) -> Client {
    let domain = format!("127.0.0.1:{port}");
    Client::new(&domain, "team/app", &[], net(Duration::from_secs(5)), login).unwrap()
}

#[test]
fn endpoints_follow_containerd() {
    let e = |d: &str, i: &[&str]| {
        let i: Vec<String> = i.iter().map(|s| s.to_string()).collect();
        let (u, fallback) = endpoint(d, &i).unwrap();
        (u.to_string(), fallback)
    };
    assert_eq!(
        e("docker.io", &[]),
        ("https://registry-1.docker.io/".into(), false)
    );
    assert_eq!(
        e("registry.example", &[]),
        ("https://registry.example/".into(), false)
    );
    assert_eq!(
        e("127.0.0.1:5000", &[]),
        ("http://127.0.0.1:5000/".into(), true)
    );
    assert_eq!(e("127.8.9.1", &[]), ("http://127.8.9.1/".into(), true));
    assert!(e("localhost:5000", &[]).1);
    assert_eq!(e("[::1]:5000", &[]), ("http://[::1]:5000/".into(), true));
    assert_eq!(
        e("r.example:5000", &["r.example:5000"]),
        ("http://r.example:5000/".into(), false)
    );
    assert_eq!(
        e("r.example:5000", &["r.example"]).0,
        "http://r.example:5000/"
    );
    assert_eq!(
        e("r.example:5000", &["r.example:5001"]).0,
        "https://r.example:5000/"
    );
    assert_eq!(e("128.0.0.1:80", &[]).0, "https://128.0.0.1:80/");
}

#[test]
fn answers_a_bearer_challenge_with_a_token_and_keeps_it() {
    let s = Server::start(|r, port| {
        if r.target.starts_with("/token") {
            if r.header("authorization") != Some("Basic dTpw") {
                return answer("401 Unauthorized", &[], b"");
            }
            return answer("200 OK", &[], br#"{"access_token":"tok"}"#);
        }
        if r.header("authorization") == Some("Bearer tok") {
            return answer("200 OK", &[], b"ok");
        }
        let challenge = format!(
            "Bearer realm=\"http://127.0.0.1:{port}/token\",service=\"reg\",scope=\"repository:team/app:pull\""
        );
        answer("401 Unauthorized", &[("WWW-Authenticate", &challenge)], b"")
    });
    let mut c = client(s.port, login("u", "p"));
    let mut r = c.get("manifests/1", "").unwrap();
    assert_eq!((r.status, r.read_body(10).unwrap()), (200, b"ok".to_vec()));
    assert_eq!(c.get("blobs/x", "").unwrap().status, 200);
    assert_eq!(
        s.targets(),
        [
            "/v2/team/app/manifests/1",
            "/token?service=reg&scope=repository%3Ateam%2Fapp%3Apull",
            "/v2/team/app/manifests/1",
            "/v2/team/app/blobs/x",
        ]
    );
    let e = client(s.port, login("u", "wrong"))
        .get("manifests/1", "")
        .err()
        .unwrap();
    assert_eq!(e.kind(), crate::error::Kind::PermissionDenied, "{e}");
    let e = e.to_string();
    assert!(
        e.contains("refused the login of \"u\"") && e.contains("401"),
        "{e}"
    );
    let e = client(s.port, None)
        .get("manifests/1", "")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("wants a login and none is given"), "{e}");
}

#[test]
fn answers_a_basic_challenge_and_reports_a_refused_login() {
    let s = Server::start(|r, _| match r.header("authorization") {
        Some("Basic dTpw") => answer("200 OK", &[], b""),
        _ => answer(
            "401 Unauthorized",
            &[("WWW-Authenticate", "Basic realm=\"r\"")],
            br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
        ),
    });
    assert_eq!(
        client(s.port, login("u", "p")).get("m", "").unwrap().status,
        200
    );
    let mut c = client(s.port, login("u", "bad"));
    let mut r = c.get("m", "").unwrap();
    assert_eq!(r.status, 401);
    let e = c.refusal("manifest 1", &mut r);
    assert_eq!(
        e,
        "manifest 1: 401 Unauthorized (UNAUTHORIZED: authentication required): \
         the registry refused the login of \"u\""
    );
    let e = client(s.port, None).get("m", "").err().unwrap().to_string();
    assert!(
        e.contains("wants a login and none is given for 127.0.0.1:"),
        "{e}"
    );
}

#[test]
fn redirects_carry_no_credentials_to_another_server() {
    let cdn = Server::start(|_, _| answer("200 OK", &[], b"blob"));
    let cdn_port = cdn.port;
    let s = Server::start(move |r, _| match r.header("authorization") {
        Some("Basic dTpw") => {
            let loc = format!("http://localhost:{cdn_port}/b?sig=1");
            answer("307 Temporary Redirect", &[("Location", &loc)], b"")
        }
        _ => answer("401 Unauthorized", &[("WWW-Authenticate", "Basic")], b""),
    });
    let mut c = client(s.port, login("u", "p"));
    let mut r = c.get("blobs/sha256:x", "").unwrap();
    assert_eq!(r.read_body(10).unwrap(), b"blob");
    let seen = cdn.seen.lock().unwrap();
    assert_eq!(seen[0].target, "/b?sig=1");
    assert_eq!(seen[0].header("authorization"), None);
}

#[test]
fn a_loopback_registry_speaking_tls_is_tried_over_https() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let mut firsts = Vec::new();
        // What Go's TLS server says to plain HTTP, then (to the TLS attempt) plain text.
        for _ in 0..2 {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = c.read(&mut buf).unwrap();
            firsts.push(buf[0]);
            let _ = c.write_all(
                b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
            );
            assert!(n > 0);
        }
        firsts
    });
    let e = client(port, None)
        .get("manifests/1", "")
        .err()
        .unwrap()
        .to_string();
    #[cfg(feature = "tls")]
    {
        assert!(e.contains("TLS handshake"), "{e}");
        // The second attempt was a TLS handshake record.
        assert_eq!(t.join().unwrap(), [b'G', 0x16]);
    }
    #[cfg(not(feature = "tls"))]
    {
        assert!(e.contains("`tls` feature"), "{e}");
        drop(t);
    }
}

#[test]
fn registry_errors_are_one_line() {
    let s = Server::start(|_, _| {
        answer(
            "404 Not Found",
            &[],
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"2"}}]}"#,
        )
    });
    let mut r = client(s.port, None).get("manifests/2", "").unwrap();
    assert_eq!(
        registry_error(&mut r),
        "404 Not Found (MANIFEST_UNKNOWN: manifest unknown)"
    );
}

/// A client of `domain` whose proxies point at 127.0.0.1:`proxy_port`.
fn proxied(domain: &str, insecure: &[String], proxy_port: u16) -> Client {
    let mut n = net(Duration::from_secs(5));
    let p = format!("http://u:p@127.0.0.1:{proxy_port}");
    n.proxies = crate::image::registry::proxy::Settings {
        http: Some(p.clone()),
        https: Some(p),
        no_proxy: "no.example".into(),
    };
    Client::new(domain, "team/app", insecure, n, None).unwrap()
}

#[test]
fn plain_http_through_a_proxy_names_the_whole_url() {
    let proxy = Server::start(|_, _| answer("200 OK", &[], b"via proxy"));
    let insecure = ["registry.example:5000".to_string()];
    let mut c = proxied("registry.example:5000", &insecure, proxy.port);
    let mut r = c.get("manifests/1", "").unwrap();
    assert_eq!(r.read_body(100).unwrap(), b"via proxy");
    let seen = proxy.seen.lock().unwrap();
    assert_eq!(
        seen[0].target,
        "http://registry.example:5000/v2/team/app/manifests/1"
    );
    assert_eq!(seen[0].header("proxy-authorization"), Some("Basic dTpw"));
    assert_eq!(seen[0].header("host"), Some("registry.example:5000"));
}

#[test]
fn https_through_a_proxy_asks_for_a_tunnel() {
    let proxy = Server::start(|r, _| match r.target.as_str() {
        "registry.example:443" => answer("407 Proxy Authentication Required", &[], b""),
        _ => answer("500 Nope", &[], b""),
    });
    let e = proxied("registry.example", &[], proxy.port)
        .get("manifests/1", "")
        .err()
        .unwrap();
    assert_eq!(e.kind(), crate::error::Kind::Unavailable, "{e}");
    let e = e.to_string();
    assert!(
        e.contains("through the proxy 127.0.0.1:")
            && e.contains("CONNECT refused: HTTP/1.1 407 Proxy Authentication Required"),
        "{e}"
    );
    let seen = proxy.seen.lock().unwrap();
    assert_eq!(seen[0].header("proxy-authorization"), Some("Basic dTpw"));
    // NO_PROXY names go direct: here, to a name that does not resolve.
    drop(seen);
    let e = proxied("no.example", &[], proxy.port)
        .get("manifests/1", "")
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("cannot resolve no.example"), "{e}");
    assert_eq!(proxy.targets().len(), 1);
}
