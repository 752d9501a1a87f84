//! Probes and lifecycle hooks on the real binary, with busybox servers in the
//! pod: readiness over HTTP (200, 404, redirects) and TCP, liveness restarts, the startup
//! probe holding liveness back, exec timeouts, postStart order and failure, readiness
//! gates.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn cond(v: &serde_json::Value, t: &str) -> String {
    v["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

fn stop(mut p: TestPod) {
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

/// A web root with a page, a CGI redirect chain and a redirect to another host.
const WEB: &str = "mkdir -p /www/cgi-bin; echo fine > /www/ok.txt; \
printf '#!/bin/sh\\necho Status: 302 Found\\necho Location: /cgi-bin/b\\necho\\n' > /www/cgi-bin/a; \
printf '#!/bin/sh\\necho Status: 301 Moved\\necho Location: /ok.txt\\necho\\n' > /www/cgi-bin/b; \
printf '#!/bin/sh\\necho Status: 302 Found\\necho Location: http://192.0.2.1/\\necho\\n' > /www/cgi-bin/away; \
chmod +x /www/cgi-bin/*; exec httpd -f -p 8080 -h /www";

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn http_readiness_follows_the_page_and_same_host_redirects() {
    require_root();
    let mut p = TestPod::new(
        "httpready",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    command: ["sh", "-c", "{WEB}"]
    ports: [{{name: http, containerPort: 8080}}]
    readinessProbe: {{httpGet: {{port: http, path: /ok.txt}}, periodSeconds: 1}}
  - name: chain
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {{httpGet: {{port: 8080, path: /cgi-bin/a}}, periodSeconds: 1}}
  - name: away
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {{httpGet: {{port: 8080, path: /cgi-bin/away}}, periodSeconds: 1}}
  - name: missing
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {{httpGet: {{port: 8080, path: /nope}}, periodSeconds: 1}}
"#
        ),
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| {
        ["web", "chain", "away"]
            .iter()
            .all(|n| container_status(v, n)["ready"] == true)
    });
    assert_eq!(container_status(&v, "missing")["ready"], false);
    assert_eq!(cond(&v, "ContainersReady"), "False");
    assert_eq!(cond(&v, "Ready"), "False");
    wait_event(
        &p,
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 404",
    );
    wait_event(
        &p,
        "ProbeWarning",
        "Readiness probe warning: Probe terminated redirects",
    );
    stop(p);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn readiness_flips_ready_both_ways_and_tcp_probes_connect() {
    require_root();
    let mut p = TestPod::new(
        "flip",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    command: ["sh", "-c", "mkdir /www; httpd -p 8080 -h /www; while true; do echo ok > /www/ok; sleep 2; rm /www/ok; sleep 2; done"]
    readinessProbe: {httpGet: {port: 8080, path: /ok}, periodSeconds: 1, failureThreshold: 1}
  - name: tcp
    image: busybox
    command: ["sh", "-c", "sleep 2; exec nc -ll -p 9090 -e true"]
    readinessProbe: {tcpSocket: {port: 9090}, periodSeconds: 1}
"#,
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| cond(v, "Ready") == "True");
    assert_eq!(container_status(&v, "tcp")["ready"], true);
    let v = p.wait_status(LIMIT, |v| cond(v, "Ready") == "False");
    assert_eq!(container_status(&v, "web")["ready"], false);
    assert_eq!(
        container_status(&v, "web")["restartCount"],
        0,
        "readiness restarts nothing"
    );
    p.wait_status(LIMIT, |v| cond(v, "Ready") == "True");
    stop(p);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_failing_liveness_probe_restarts_the_container() {
    require_root();
    let mut p = TestPod::new(
        "live",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "touch /tmp/alive; sleep 1; rm /tmp/alive; echo dead; sleep 1000"]
    livenessProbe:
      exec: {command: ["cat", "/tmp/alive"]}
      periodSeconds: 1
      failureThreshold: 2
      terminationGracePeriodSeconds: 1
"#,
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| container_status(v, "c")["restartCount"] == 1);
    let last = &container_status(&v, "c")["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 137, "sh as PID 1 ignores SIGTERM: {last}");
    assert!(has_event(
        &p,
        "Unhealthy",
        "Liveness probe failed: cat: can't open '/tmp/alive'"
    ));
    assert!(has_event(
        &p,
        "Killing",
        "Container c failed liveness probe, will be restarted"
    ));
    assert_eq!(p.log("c", 0), "dead");
    stop(p);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_startup_probe_holds_liveness_back() {
    require_root();
    let mut p = TestPod::new(
        "startup",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: slow
    image: busybox
    command: ["sh", "-c", "sleep 2; touch /tmp/up; sleep 1000"]
    startupProbe: {exec: {command: ["test", "-f", "/tmp/up"]}, periodSeconds: 1, failureThreshold: 20}
    livenessProbe: {exec: {command: ["test", "-f", "/tmp/up"]}, periodSeconds: 1, failureThreshold: 1}
"#,
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| container_status(v, "slow")["started"] == true);
    let c = container_status(&v, "slow");
    assert_eq!(
        c["restartCount"], 0,
        "liveness never ran before startup succeeded"
    );
    assert_eq!(c["ready"], true);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!has_event(&p, "Unhealthy", "Liveness probe failed"));
    assert!(has_event(&p, "Unhealthy", "Startup probe failed"));
    stop(p);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_exec_probe_that_overruns_its_timeout_fails() {
    require_root();
    let mut p = TestPod::new(
        "timeout",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {exec: {command: ["sleep", "30"]}, timeoutSeconds: 1, periodSeconds: 2}
"#,
    );
    p.start();
    wait_event(
        &p,
        "Unhealthy",
        "Readiness probe failed: command \"sleep 30\" timed out",
    );
    let v = p.wait_status(LIMIT, |_| true);
    assert_eq!(container_status(&v, "c")["ready"], false);
    stop(p);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn post_start_runs_before_the_next_container_and_its_failure_restarts() {
    require_root();
    let mut p = TestPod::new(
        "poststart",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: h, hostPath: {path: /tmp/podinit-it-NAME-h, type: DirectoryOrCreate}}]
  containers:
  - name: first
    image: busybox
    command: ["sh", "-c", "echo main >> /h/order; sleep 1000"]
    volumeMounts: [{name: h, mountPath: /h}]
    lifecycle:
      postStart: {exec: {command: ["sh", "-c", "sleep 0.5; echo post >> /h/order"]}}
  - name: second
    image: busybox
    command: ["sh", "-c", "echo second >> /h/order; sleep 1000"]
    volumeMounts: [{name: h, mountPath: /h}]
  - name: broken
    image: busybox
    command: ["sleep", "1000"]
    lifecycle:
      postStart: {exec: {command: ["sh", "-c", "echo oops; exit 3"]}}
"#,
    );
    let host = std::path::PathBuf::from(format!("/tmp/podinit-it-{}-h", p.name));
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "broken")["restartCount"].as_u64() >= Some(1)
    });
    // The hook's output stays out of events (kubelet: it may hold secrets); the waiting
    // message carries it.
    wait_event(&p, "FailedPostStartHook", "PostStartHook failed");
    assert!(!has_event(&p, "FailedPostStartHook", "exited with 3"));
    assert!(has_event(&p, "Killing", "FailedPostStartHook"));
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "broken")["state"]["waiting"]["reason"] == "PostStartHookError"
    });
    let msg = &container_status(&v, "broken")["state"]["waiting"]["message"];
    assert!(
        msg.as_str().unwrap_or("").contains("exited with 3"),
        "{msg}"
    );
    let order = std::fs::read_to_string(host.join("order")).unwrap();
    let lines: Vec<&str> = order.lines().collect();
    let pos = |s: &str| lines.iter().position(|l| *l == s).unwrap_or(usize::MAX);
    assert!(
        pos("main") < pos("post") && pos("post") < pos("second"),
        "{order}"
    );
    stop(p);
    std::fs::remove_dir_all(&host).unwrap();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn readiness_gates_hold_ready_until_set_through_the_socket() {
    require_root();
    let mut p = TestPod::new(
        "gates",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  readinessGates: [{conditionType: example.com/warm}]
  containers:
  - {name: c, image: busybox, command: ["sleep", "1000"]}
"#,
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| cond(v, "ContainersReady") == "True");
    assert_eq!(cond(&v, "Ready"), "False");
    let sock = p.state.join("pod.sock");
    let set = |status: &str| {
        let out = std::process::Command::new(bin())
            .args(["condition", "--socket"])
            .arg(&sock)
            .args(["example.com/warm", status, "--reason", "Warmed"])
            .output_within(CLIENT_LIMIT);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    set("True");
    let v = p.wait_status(LIMIT, |v| cond(v, "Ready") == "True");
    assert_eq!(cond(&v, "example.com/warm"), "True");
    set("False");
    p.wait_status(LIMIT, |v| cond(v, "Ready") == "False");
    stop(p);
}

/// The pod's supervisor: the `podinit run` process's only child.
fn supervisor_pid(p: &TestPod) -> i32 {
    let pid = p.pid();
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .next()
        .and_then(|c| c.parse().ok())
        .expect("podinit run has its supervisor as child")
}

/// A gRPC health server (the h2 crate, as a real peer) listening on 127.0.0.1:`port` in
/// the network namespace of the pod: this thread enters it before binding. Service ""
/// is SERVING, "down" NOT_SERVING, anything else is NotFound.
fn grpc_health_server(netns: std::fs::File, port: u16) {
    use std::os::fd::AsRawFd;
    std::thread::spawn(move || {
        // SAFETY: setns on this thread only, with a namespace fd we own.
        let rc = unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "entering the pod's network namespace");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .unwrap();
            loop {
                let Ok((sock, _)) = l.accept().await else {
                    return;
                };
                tokio::spawn(serve(sock));
            }
        });
    });
}

async fn serve(sock: tokio::net::TcpStream) {
    let Ok(mut conn) = h2::server::handshake(sock).await else {
        return;
    };
    while let Some(Ok((req, mut respond))) = conn.accept().await {
        let mut body = req.into_body();
        let mut msg = Vec::new();
        while let Some(Ok(chunk)) = body.data().await {
            let _ = body.flow_control().release_capacity(chunk.len());
            msg.extend_from_slice(&chunk);
        }
        // HealthCheckRequest{service = 1}: after the 5-byte frame header, tag 0x0a, length.
        let service = if msg.len() > 7 {
            String::from_utf8_lossy(&msg[7..]).into_owned()
        } else {
            String::new()
        };
        let grpc = || {
            http::Response::builder()
                .status(200)
                .header("content-type", "application/grpc")
                .body(())
                .unwrap()
        };
        let status = match service.as_str() {
            "" => Some(1u8),
            "down" => Some(2),
            _ => None,
        };
        match status {
            Some(s) => {
                let mut stream = respond.send_response(grpc(), false).unwrap();
                let _ = stream.send_data(bytes::Bytes::from(vec![0, 0, 0, 0, 2, 0x08, s]), false);
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", "0".parse().unwrap());
                let _ = stream.send_trailers(trailers);
            }
            None => {
                let mut r = grpc();
                r.headers_mut().insert("grpc-status", "5".parse().unwrap());
                r.headers_mut()
                    .insert("grpc-message", "unknown%20service".parse().unwrap());
                let _ = respond.send_response(r, true);
            }
        }
    }
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn grpc_health_probes() {
    require_root();
    let mut p = TestPod::new(
        "grpc",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: serving
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {grpc: {port: 50051}, periodSeconds: 1}
  - name: down
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {grpc: {port: 50051, service: down}, periodSeconds: 1}
  - name: unknown
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {grpc: {port: 50051, service: nope}, periodSeconds: 1}
  - name: closed
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {grpc: {port: 50052}, periodSeconds: 1}
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "serving")["state"]["running"].is_object()
    });
    let netns = std::fs::File::open(format!("/proc/{}/ns/net", supervisor_pid(&p))).unwrap();
    grpc_health_server(netns, 50051);
    let v = p.wait_status(LIMIT, |v| container_status(v, "serving")["ready"] == true);
    for n in ["down", "unknown", "closed"] {
        assert_eq!(container_status(&v, n)["ready"], false, "{n}");
    }
    wait_event(
        &p,
        "Unhealthy",
        "Readiness probe failed: service unhealthy (responded with \"NOT_SERVING\")",
    );
    wait_event(
        &p,
        "Unhealthy",
        "Readiness probe failed: error: health rpc probe failed: rpc error: code = NotFound desc = unknown service",
    );
    wait_event(
        &p,
        "Unhealthy",
        "Readiness probe failed: timeout: failed to connect service",
    );
    stop(p);
}

/// An HTTPS server (rustls, a self-signed certificate) on 127.0.0.1:`port` in the pod's
/// network namespace. Each request's head goes to `heads`; `/ok` answers 200, anything
/// else 404.
fn https_server(netns: std::fs::File, port: u16, heads: std::sync::mpsc::Sender<String>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let certs = vec![CertificateDer::from_pem_file(dir.join("tls.crt")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(dir.join("tls.key")).unwrap();
    let cfg = std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap(),
    );
    std::thread::spawn(move || {
        // SAFETY: setns on this thread only, with a namespace fd we own.
        let rc = unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "entering the pod's network namespace");
        let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        for sock in l.incoming() {
            let Ok(sock) = sock else { return };
            let conn = rustls::ServerConnection::new(cfg.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, sock);
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let ok = head.starts_with("GET /ok ");
            let _ = heads.send(head);
            let resp: &[u8] = if ok {
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            } else {
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            };
            let _ = tls.write_all(resp);
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn https_probes_do_not_verify_certificates() {
    require_root();
    let mut p = TestPod::new(
        "https",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: good
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe:
      httpGet: {port: 8443, path: /ok, scheme: HTTPS, httpHeaders: [{name: X-Probe, value: yes}]}
      periodSeconds: 1
  - name: bad
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {httpGet: {port: 8443, path: /missing, scheme: HTTPS}, periodSeconds: 1}
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "good")["state"]["running"].is_object()
    });
    let netns = std::fs::File::open(format!("/proc/{}/ns/net", supervisor_pid(&p))).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    https_server(netns, 8443, tx);
    let v = p.wait_status(LIMIT, |v| container_status(v, "good")["ready"] == true);
    assert_eq!(container_status(&v, "bad")["ready"], false);
    wait_event(
        &p,
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 404",
    );
    let head = rx
        .iter()
        .find(|h| h.starts_with("GET /ok "))
        .expect("a probe request");
    for line in [
        "GET /ok HTTP/1.1\r\n",
        "Host: 127.0.0.1:8443\r\n",
        "User-Agent: kube-probe/1.37\r\n",
        "Accept: */*\r\n",
        "X-Probe: yes\r\n",
        "Connection: close\r\n",
    ] {
        assert!(head.contains(line), "{line:?} missing from {head:?}");
    }
    stop(p);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn exec_probes_and_hooks_run_inside_the_container() {
    require_root();
    // Both with a pid namespace of the container's own and with the pod's shared one.
    for share in [false, true] {
        let mut p = TestPod::new(
            "inside",
            &format!(
                r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  shareProcessNamespace: {share}
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "echo marker > /tmp/only-here; exec sleep 1000"]
    securityContext: {{runAsUser: 1234}}
    readinessProbe:
      exec: {{command: ["sh", "-c", "test $(id -u) = 1234 && test -f /tmp/only-here && ps | grep -q 'sleep 1000'"]}}
      periodSeconds: 1
"#
            ),
        );
        p.start();
        p.wait_status(LIMIT, |v| container_status(v, "c")["ready"] == true);
        stop(p);
    }
}
