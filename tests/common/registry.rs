//! A private registry for the image tests: Debian's `docker-registry` on 127.0.0.1 with a
//! config and storage of its own under a temp dir, optionally with htpasswd or token auth
//! and TLS from a CA made here; images pushed into it with `skopeo`; and a token server
//! (a thread signing ES256 JWTs) for the registry's `auth: token` mode. Everything stops
//! and is removed on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Installs what the tests run when missing, as scripts/test does.
pub fn ensure_tools() {
    let mut need = vec![];
    for (cmd, pkg) in [
        ("docker-registry", "docker-registry"),
        ("skopeo", "skopeo"),
        ("openssl", "openssl"),
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {cmd}")])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        if !found {
            need.push(pkg);
        }
    }
    if !need.is_empty() {
        let ok = Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&need)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "apt-get install {need:?}");
    }
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> TempDir {
        let mut b = [0u8; 4];
        std::fs::File::open("/dev/urandom")
            .unwrap()
            .read_exact(&mut b)
            .unwrap();
        let d =
            std::env::temp_dir().join(format!("podinit-it-{prefix}-{:08x}", u32::from_le_bytes(b)));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `cmd`, killing it past `limit`.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn sh(cmd: &str) {
    let out = run_bounded(
        {
            let mut c = Command::new("sh");
            c.args(["-ec", cmd]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate for 127.0.0.1 signed by it, made with the openssl CLI.
pub struct Certs {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn make_certs(dir: &Path) -> Certs {
    let d = dir.display();
    sh(&format!(
        "cd {d}
         openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=podinit-test-ca \
             -keyout ca.key -out ca.crt 2>/dev/null
         openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 \
             -keyout server.key -out server.csr 2>/dev/null
         printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n' > ext.cnf
         openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
             -days 2 -extfile ext.cnf -out server.crt 2>/dev/null"
    ));
    Certs {
        ca: dir.join("ca.crt"),
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
    }
}

pub enum Auth {
    None,
    /// htpasswd with one user (bcrypt, the only hash the registry takes).
    Basic {
        user: String,
        password: String,
    },
    /// Tokens from `realm`, signed by the key of `cert` (a PEM certificate).
    Token {
        realm: String,
        service: String,
        issuer: String,
        cert: PathBuf,
    },
}

pub struct Registry {
    pub port: u16,
    pub dir: TempDir,
    child: Child,
}

impl Registry {
    pub fn start(prefix: &str, auth: &Auth, certs: Option<&Certs>) -> Registry {
        ensure_tools();
        let dir = TempDir::new(prefix);
        let port = free_port();
        let d = dir.path();
        let mut cfg = format!(
            "version: 0.1\n\
             log: {{level: warn, accesslog: {{disabled: true}}}}\n\
             storage: {{filesystem: {{rootdirectory: {}}}}}\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            d.join("data").display()
        );
        if let Some(c) = certs {
            cfg.push_str(&format!(
                "  tls: {{certificate: {}, key: {}}}\n",
                c.cert.display(),
                c.key.display()
            ));
        }
        match auth {
            Auth::None => {}
            Auth::Basic { user, password } => {
                let hash = htpasswd_line(user, password);
                std::fs::write(d.join("htpasswd"), format!("{hash}\n")).unwrap();
                cfg.push_str(&format!(
                    "auth: {{htpasswd: {{realm: podinit-test, path: {}}}}}\n",
                    d.join("htpasswd").display()
                ));
            }
            Auth::Token {
                realm,
                service,
                issuer,
                cert,
            } => cfg.push_str(&format!(
                "auth: {{token: {{realm: \"{realm}\", service: {service}, issuer: {issuer}, \
                 rootcertbundle: {}}}}}\n",
                cert.display()
            )),
        }
        std::fs::write(d.join("config.yml"), cfg).unwrap();
        let log = std::fs::File::create(d.join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(d.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry");
        let mut r = Registry { port, dir, child };
        r.wait_ready();
        r
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(s) = self.child.try_wait().unwrap() {
                panic!("docker-registry exited ({s}): {}", self.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "docker-registry not listening after 20s: {}",
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Pushes an oci-archive as `repo:tag` with skopeo.
    pub fn push(&self, archive: &Path, repo_tag: &str, creds: Option<&str>) {
        let mut c = Command::new("skopeo");
        c.args(["copy", "-q", "--dest-tls-verify=false"]);
        if let Some(cr) = creds {
            c.args(["--dest-creds", cr]);
        }
        c.arg(format!("oci-archive:{}", archive.display()))
            .arg(format!("docker://{}/{repo_tag}", self.host()));
        let out = run_bounded(c, Duration::from_secs(120));
        assert!(
            out.status.success(),
            "skopeo push {repo_tag}: {}\nregistry: {}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }

    /// The digest a tag points at, as the registry keeps it on disk.
    pub fn tag_digest(&self, repo: &str, tag: &str) -> String {
        let link = self.dir.path().join(format!(
            "data/docker/registry/v2/repositories/{repo}/_manifests/tags/{tag}/current/link"
        ));
        std::fs::read_to_string(&link)
            .unwrap_or_else(|e| panic!("{}: {e}", link.display()))
            .trim()
            .to_string()
    }

    /// Where the registry keeps a blob's bytes.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join(format!(
            "data/docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }

    pub fn blob(&self, digest: &str) -> Vec<u8> {
        std::fs::read(self.blob_path(digest)).unwrap()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `user:$2y$…`: bcrypt, the only hash the registry takes: Python's crypt module where
/// it still is (Debian 12), else `htpasswd -B` (apache2-utils, installed if missing).
fn htpasswd_line(user: &str, password: &str) -> String {
    let py = Command::new("python3")
        .args([
            "-W",
            "ignore",
            "-c",
            "import crypt,sys;print(crypt.crypt(sys.argv[1],crypt.mksalt(crypt.METHOD_BLOWFISH,rounds=16)))",
            password,
        ])
        .output();
    if let Ok(out) = py {
        let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && hash.starts_with("$2") {
            return format!("{user}:{hash}");
        }
    }
    sh("command -v htpasswd >/dev/null || \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        apache2-utils >/dev/null");
    let out = Command::new("htpasswd")
        .args(["-nbB", "-C", "4", user, password])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && line.starts_with(&format!("{user}:$2")),
        "htpasswd: {line:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    line
}

/// A token server: grants every scope asked, as JWTs signed with ES256 by a key whose
/// certificate is the registry's `rootcertbundle`, to one login (Basic); 401 otherwise.
pub struct TokenServer {
    pub port: u16,
    pub cert: PathBuf,
    pub service: String,
    pub issuer: String,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl TokenServer {
    pub fn start(dir: &Path, user: &str, password: &str) -> TokenServer {
        let d = dir.display();
        sh(&format!(
            "cd {d}
             openssl ecparam -name prime256v1 -genkey -noout -out token.key
             openssl pkcs8 -topk8 -nocrypt -in token.key -outform DER -out token.p8
             openssl req -new -x509 -key token.key -days 2 -subj /CN=podinit-test-token \
                 -out token.crt 2>/dev/null
             openssl x509 -in token.crt -outform DER -out token.der"
        ));
        let pkcs8 = std::fs::read(dir.join("token.p8")).unwrap();
        let cert_der = std::fs::read(dir.join("token.der")).unwrap();
        let rng = ring::rand::SystemRandom::new();
        let key = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &pkcs8,
            &rng,
        )
        .unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let (service, issuer) = (
            "podinit-test".to_string(),
            "podinit-test-issuer".to_string(),
        );
        let expected = format!("Basic {}", b64(format!("{user}:{password}").as_bytes()));
        let st = stop.clone();
        let (svc, iss) = (service.clone(), issuer.clone());
        let thread = thread::spawn(move || {
            for c in l.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut c) = c else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let Some((target, auth)) = read_request(&c) else {
                    continue;
                };
                let answer = if auth.as_deref() != Some(expected.as_str()) {
                    http_answer(
                        "401 Unauthorized",
                        br#"{"errors":[{"code":"UNAUTHORIZED","message":"bad login"}]}"#,
                    )
                } else {
                    let jwt = sign(&key, &rng, &cert_der, &svc, &iss, &target);
                    http_answer(
                        "200 OK",
                        format!(r#"{{"token":"{jwt}","expires_in":300}}"#).as_bytes(),
                    )
                };
                let _ = c.write_all(&answer);
            }
        });
        TokenServer {
            port,
            cert: dir.join("token.crt"),
            service,
            issuer,
            stop,
            thread: Some(thread),
        }
    }

    pub fn auth(&self) -> Auth {
        Auth::Token {
            realm: format!("http://127.0.0.1:{}/token", self.port),
            service: self.service.clone(),
            issuer: self.issuer.clone(),
            cert: self.cert.clone(),
        }
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The request's target and `Authorization` header.
fn read_request(c: &TcpStream) -> Option<(String, Option<String>)> {
    let mut r = BufReader::new(c);
    let mut first = String::new();
    r.read_line(&mut first).ok()?;
    let target = first.split(' ').nth(1)?.to_string();
    let mut auth = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("authorization") {
                auth = Some(v.trim().to_string());
            }
        }
    }
    Some((target, auth))
}

fn http_answer(status: &str, body: &[u8]) -> Vec<u8> {
    let mut a = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    a.extend_from_slice(body);
    a
}

/// A JWT as the registry's token auth checks it: x5c names the signing certificate, the
/// claims grant each `scope=repository:NAME:ACTIONS` of the request.
fn sign(
    key: &ring::signature::EcdsaKeyPair,
    rng: &ring::rand::SystemRandom,
    cert_der: &[u8],
    service: &str,
    issuer: &str,
    target: &str,
) -> String {
    let query = target.split_once('?').map_or("", |(_, q)| q);
    let mut access = vec![];
    for kv in query.split('&') {
        let Some(scope) = kv.strip_prefix("scope=") else {
            continue;
        };
        let scope = unescape(scope);
        let mut parts = scope.splitn(3, ':');
        let (Some(kind), Some(name), Some(actions)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        access.push(serde_json::json!({
            "type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>()
        }));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [b64(cert_der)]});
    let claims = serde_json::json!({
        "iss": issuer, "sub": "podinit-test", "aud": service,
        "exp": now + 300, "nbf": now - 60, "iat": now - 60,
        "jti": format!("{now}-{}", access.len()), "access": access,
    });
    let input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let sig = key.sign(rng, input.as_bytes()).unwrap();
    format!("{input}.{}", b64url(sig.as_ref()))
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn b64(data: &[u8]) -> String {
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(B64[(n >> (18 - 6 * k)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn b64url(data: &[u8]) -> String {
    b64(data)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}
