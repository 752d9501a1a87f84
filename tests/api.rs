//! The status socket with a real client (`curl --unix-socket`), its limits and errors,
//! `--notify-socket`, `$NOTIFY_SOCKET` and `--netns` on the real binary.

mod common;
use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::process::Command;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(40);

/// `curl --unix-socket SOCK http://pod<path>` with extra arguments: (HTTP code, body).
fn curl(p: &TestPod, args: &[&str], path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "10",
            "-w",
            "\n%{http_code}",
            "--unix-socket",
        ])
        .arg(p.state.join("pod.sock"))
        .args(args)
        .arg(format!("http://pod{path}"))
        .output_within(CLIENT_LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

const SLEEPER: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  readinessGates: [{conditionType: example.com/gate}]
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "echo one; echo two; exec sleep 1000"]
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1}
"#;

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn every_route_answers_through_curl() {
    require_root();
    let mut p = TestPod::new("routes", SLEEPER);
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["running"].is_object()
    });

    let (code, body) = curl(&p, &[], "/v1/pod");
    assert_eq!(code, 200);
    let pod = json(&body);
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["name"], p.name.as_str());
    assert!(pod["metadata"]["creationTimestamp"].is_string(), "{pod}");
    assert_eq!(pod["status"]["phase"], "Running");

    let (code, body) = curl(&p, &[], "/v1/events");
    assert_eq!(code, 200);
    assert!(json(&body)["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["reason"] == "Started"));

    let deadline = Instant::now() + LIMIT;
    loop {
        let (code, body) = curl(&p, &[], "/v1/containers/c/log?tailLines=1");
        assert_eq!(code, 200);
        if body == "two\n" {
            break;
        }
        assert!(Instant::now() < deadline, "log: {body:?}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let (code, body) = curl(
        &p,
        &[
            "-X",
            "POST",
            "-d",
            r#"{"command":["sh","-c","echo hi; exit 3"]}"#,
        ],
        "/v1/containers/c/exec",
    );
    assert_eq!(code, 200, "{body}");
    let r = json(&body);
    assert_eq!(
        (r["exitCode"].as_i64(), r["stdout"].as_str()),
        (Some(3), Some("hi\n"))
    );

    let (code, body) = curl(
        &p,
        &["-X", "PUT", "-d", r#"{"status":"True","reason":"Warm"}"#],
        "/v1/pod/conditions/example.com/gate",
    );
    assert_eq!(code, 200, "{body}");
    p.wait_status(LIMIT, |v| {
        v["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    });
    let (code, body) = curl(&p, &[], "/healthz");
    assert_eq!((code, body.as_str()), (200, "ok"));
    let (code, body) = curl(&p, &[], "/metrics");
    assert_eq!(code, 200);
    for want in [
        "podinit_container_restarts_total{container=\"c\"} 0",
        "podinit_probe_results_total{container=\"c\",probe=\"readiness\",result=\"success\"} ",
        "podinit_probe_duration_seconds_count{container=\"c\",probe=\"readiness\"} ",
        "podinit_container_start_seconds_count{container=\"c\"} 1",
        "podinit_reaped_processes_total ",
    ] {
        assert!(body.contains(want), "{want} missing from {body}");
    }

    // Errors are Kubernetes Status objects.
    for (args, path, want) in [
        (vec![], "/v1/containers/nope/log", 400),
        (
            vec!["-X", "POST", "-d", "{not json"],
            "/v1/containers/c/exec",
            400,
        ),
        (
            vec!["-X", "POST", "-d", r#"{"command":[]}"#],
            "/v1/containers/c/exec",
            400,
        ),
        (
            vec!["-X", "POST", "-d", r#"{"command":["true"]}"#],
            "/v1/containers/nope/exec",
            400,
        ),
        (
            vec!["--path-as-is"],
            "/v1/containers/../../etc/passwd/log",
            404,
        ),
        (vec![], "/v1/nothing", 404),
        (vec!["-X", "DELETE"], "/v1/pod", 405),
    ] {
        let (code, body) = curl(&p, &args, path);
        assert_eq!(code, want, "{path}: {body}");
        let s = json(&body);
        assert_eq!(s["kind"], "Status", "{body}");
        assert_eq!(s["code"], want);
        if path.contains("nope") {
            // The API server's words for a container the pod does not have.
            let msg = format!("container nope is not valid for pod {}", p.name);
            assert_eq!(s["message"], msg.as_str());
        }
    }
    let big = p.dir.join("big");
    std::fs::write(&big, vec![b'x'; 2 << 20]).unwrap();
    let at = format!("@{}", big.display());
    let (code, _) = curl(
        &p,
        &["-X", "POST", "--data-binary", &at],
        "/v1/pod/terminate",
    );
    // 413, or the connection is closed while curl still sends.
    assert!(code == 413 || code == 0, "oversized body: {code}");

    let (code, _) = curl(
        &p,
        &["-X", "POST", "-d", r#"{"gracePeriodSeconds":0}"#],
        "/v1/pod/terminate",
    );
    assert_eq!(code, 202);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 1);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn fifty_clients_are_served_while_one_never_finishes_its_request() {
    require_root();
    let mut p = TestPod::new("busy", SLEEPER);
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["running"].is_object()
    });
    let sock = p.state.join("pod.sock");
    // Half a request, never finished.
    let mut slow = UnixStream::connect(&sock).unwrap();
    slow.write_all(b"GET /v1/pod HTTP/1.1\r\nHost: pod\r\nX-Slow: ")
        .unwrap();
    let t0 = Instant::now();
    let threads: Vec<_> = (0..50)
        .map(|_| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let mut s = UnixStream::connect(&sock).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n")
                    .unwrap();
                let mut out = String::new();
                s.read_to_string(&mut out).unwrap();
                out
            })
        })
        .collect();
    for t in threads {
        let out = t.join().unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.ends_with("ok"), "{out}");
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
    drop(slow);
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_watch_sees_the_phases_and_the_shim_gets_every_status() {
    require_root();
    let mut p = TestPod::new(
        "notify",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "sleep 1; exit 0"]}
"#,
    );
    let shim_path = p.dir.join("shim.sock");
    let shim = UnixListener::bind(&shim_path).unwrap();
    let sd_path = p.dir.join("systemd.sock");
    let sd = UnixDatagram::bind(&sd_path).unwrap();
    sd.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut cmd = p.command();
    cmd.arg("--notify-socket")
        .arg(&shim_path)
        .env("NOTIFY_SOCKET", &sd_path);
    p.start_with(cmd);
    let (conn, _) = shim.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(conn)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    // A watch through curl, from while the pod runs to its end.
    p.wait_status(LIMIT, |v| v["status"]["phase"] == "Running");
    let sock = p.state.join("pod.sock");
    let watch = std::thread::spawn(move || {
        let out = Command::new("curl")
            .args(["-sN", "--max-time", "30", "--unix-socket"])
            .arg(sock)
            .arg("http://pod/v1/pod?watch=true")
            .output_within(CLIENT_LIMIT);
        String::from_utf8_lossy(&out.stdout).into_owned()
    });
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines = reader.join().unwrap();
    let phases: Vec<String> = lines
        .iter()
        .map(|l| {
            json(l)["status"]["phase"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let mut distinct = phases.clone();
    distinct.dedup();
    assert_eq!(distinct, ["Pending", "Running", "Succeeded"], "{phases:?}");
    let watched: Vec<String> = watch
        .join()
        .unwrap()
        .lines()
        .map(|l| {
            json(l)["status"]["phase"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(
        watched.first().map(String::as_str),
        Some("Running"),
        "{watched:?}"
    );
    assert_eq!(
        watched.last().map(String::as_str),
        Some("Succeeded"),
        "{watched:?}"
    );
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    sd.set_nonblocking(true).unwrap();
    while let Ok(n) = sd.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert!(got.contains(&"READY=1".to_string()), "{got:?}");
    assert!(got.contains(&"STATUS=Running".to_string()), "{got:?}");
    assert_eq!(
        got.last().map(String::as_str),
        Some("STATUS=Succeeded"),
        "{got:?}"
    );
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn netns_joins_a_given_network_namespace() {
    require_root();
    // A namespace made by someone else (as a shim with CNI would), held by a process.
    let mut holder = Command::new("unshare")
        .args(["--net", "sleep", "60"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let ns = format!("/proc/{}/ns/net", holder.id());
    let want = std::fs::read_link(&ns).unwrap();
    let mut p = TestPod::new(
        "netns",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: busybox, command: ["readlink", "/proc/self/ns/net"]}
"#,
    );
    let mut cmd = p.command();
    cmd.arg("--netns").arg(&ns);
    p.start_with(cmd);
    let out = p.wait(LIMIT);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("c", 0), want.display().to_string());
    p.assert_nothing_left();

    // A namespace that is not there: exit 3, nothing left.
    let mut q = TestPod::new("nonetns", "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec:\n  containers:\n  - {name: c, image: busybox}\n");
    let mut cmd = q.command();
    cmd.arg("--netns").arg("/nonexistent/netns");
    q.start_with(cmd);
    let out = q.wait(LIMIT);
    assert_eq!(out.code, 3);
    assert!(out.stderr.contains("/nonexistent/netns"), "{}", out.stderr);
    q.assert_sandbox_gone();
}

/// A network namespace made with `ip netns add` and joined to the host by a veth pair, as
/// a CNI plugin leaves it; removed on drop, so also when the test fails.
struct VethNetns {
    name: String,
    host_ip: String,
    pod_ip: String,
}

impl VethNetns {
    fn new() -> VethNetns {
        let tag = format!("{:06x}", std::process::id() & 0xff_ffff);
        let octet = 1 + (std::process::id() % 250);
        let v = VethNetns {
            name: format!("podinit-test-{tag}"),
            host_ip: format!("10.231.{octet}.1"),
            pod_ip: format!("10.231.{octet}.2"),
        };
        let (host_if, pod_if) = (format!("pih{tag}"), format!("pip{tag}"));
        let steps: Vec<Vec<String>> = vec![
            vec!["netns".into(), "add".into(), v.name.clone()],
            vec![
                "link".into(),
                "add".into(),
                host_if.clone(),
                "type".into(),
                "veth".into(),
                "peer".into(),
                "name".into(),
                pod_if.clone(),
                "netns".into(),
                v.name.clone(),
            ],
            vec![
                "addr".into(),
                "add".into(),
                format!("{}/30", v.host_ip),
                "dev".into(),
                host_if.clone(),
            ],
            vec!["link".into(), "set".into(), host_if, "up".into()],
            vec![
                "-n".into(),
                v.name.clone(),
                "addr".into(),
                "add".into(),
                format!("{}/30", v.pod_ip),
                "dev".into(),
                pod_if.clone(),
            ],
            vec![
                "-n".into(),
                v.name.clone(),
                "link".into(),
                "set".into(),
                pod_if,
                "up".into(),
            ],
        ];
        for args in steps {
            let out = Command::new("ip").args(&args).output_within(CLIENT_LIMIT);
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        v
    }

    fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }
}

impl Drop for VethNetns {
    fn drop(&mut self) {
        // Deleting the namespace destroys the veth pair with it.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// `--netns` of a veth-connected namespace: podIP(s) are read from it, the httpGet
/// readiness probe reaches the server on the pod's IP, and so does the host.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn netns_with_veth_reports_pod_ip_and_probes_reach_it() {
    require_root();
    let ns = VethNetns::new();
    let mut p = TestPod::new(
        "veth",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers:
  - name: web
    image: busybox
    command: ["sh", "-c", "mkdir -p /tmp/www && echo hello >/tmp/www/index.html && httpd -p 8080 -h /tmp/www && trap 'exit 0' TERM && while :; do sleep 1; done"]
    readinessProbe:
      httpGet: {path: /index.html, port: 8080}
      periodSeconds: 1
"#,
    );
    let mut cmd = p.command();
    cmd.arg("--netns").arg(ns.path());
    p.start_with(cmd);
    let st = p.wait_status(LIMIT, |s| {
        s["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    });
    assert_eq!(st["status"]["podIP"], ns.pod_ip.as_str(), "{st}");
    assert_eq!(
        st["status"]["podIPs"],
        serde_json::json!([{"ip": ns.pod_ip}]),
        "{st}"
    );
    // The server is on the pod's address, reached from the host over the veth pair.
    let mut conn = std::net::TcpStream::connect_timeout(
        &format!("{}:8080", ns.pod_ip).parse().unwrap(),
        Duration::from_secs(5),
    )
    .expect("connecting to the pod from the host");
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").unwrap();
    let mut reply = String::new();
    let _ = conn.read_to_string(&mut reply);
    assert!(
        reply.starts_with("HTTP/1.") && reply.contains(" 200 "),
        "{reply}"
    );
    assert!(reply.ends_with("hello\n"), "{reply}");
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    p.assert_nothing_left();
    assert!(ns.host_ip.starts_with("10.231."));
}

/// Send `request` on a fresh connection and read until the server closes it (bounded).
fn raw(p: &TestPod, request: &[u8]) -> String {
    let mut s = UnixStream::connect(p.state.join("pod.sock")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_socket_speaks_http_as_clients_expect() {
    require_root();
    let mut p = TestPod::new(
        "http",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sleep", "1000"]
  - name: crash
    image: busybox
    command: ["sh", "-c", "echo run $(cat /proc/sys/kernel/random/uuid); exit 1"]
  - name: ticker
    image: busybox
    command: ["sh", "-c", "while true; do echo tick; sleep 0.2; done"]
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["running"].is_object()
    });

    // HEAD: the head of a GET, no body.
    let r = raw(&p, b"HEAD /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("Content-Length: 2\r\n"), "{r}");
    assert!(r.ends_with("\r\n\r\n"), "no body after the head: {r:?}");

    // An HTTP/1.0 follower gets the stream unchunked (ended by the close); following with
    // timestamps, every line carries its time, those sent as they come too.
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let since =
        k8s_openapi::jiff::Timestamp::new(since.as_secs() as i64, since.subsec_nanos() as i32)
            .unwrap();
    let mut s = UnixStream::connect(p.state.join("pod.sock")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /v1/containers/ticker/log?follow=true&timestamps=true HTTP/1.0\r\n\r\n")
        .unwrap();
    let mut got = String::new();
    let deadline = Instant::now() + LIMIT;
    let fresh = |text: &str| {
        text.lines().any(|l| {
            l.split_once(' ')
                .and_then(|(t, _)| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .is_some_and(|t| t > since)
        })
    };
    while !fresh(got.split_once("\r\n\r\n").map_or("", |(_, b)| b)) {
        assert!(Instant::now() < deadline, "{got:?}");
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {got:?}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(s);
    let (head, body) = got.split_once("\r\n\r\n").unwrap();
    assert!(
        !head.contains("chunked") && head.contains("Connection: close"),
        "{head}"
    );
    for l in body.lines() {
        let (t, rest) = l.split_once(' ').unwrap_or_else(|| panic!("{l:?}"));
        assert!(t.parse::<k8s_openapi::jiff::Timestamp>().is_ok(), "{l:?}");
        assert_eq!(rest, "tick", "{l:?}");
    }

    // A request sent behind an exec is answered once the exec is.
    let exec = r#"{"command":["sh","-c","sleep 0.2; echo done"]}"#;
    let req = format!(
        "POST /v1/containers/c/exec HTTP/1.1\r\nContent-Length: {}\r\n\r\n{exec}GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n",
        exec.len()
    );
    let r = raw(&p, req.as_bytes());
    assert!(r.contains("done"), "{r}");
    assert!(r.ends_with("\r\n\r\nok"), "the second answer: {r:?}");

    // In back-off the log is the last run's, with or without previous (kubelet picks
    // lastState), and the messages are kubelet's.
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "crash")["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    });
    let restarts = container_status(&v, "crash")["restartCount"]
        .as_u64()
        .unwrap();
    let (code, now) = curl(&p, &[], "/v1/containers/crash/log");
    let (code2, prev) = curl(&p, &[], "/v1/containers/crash/log?previous=true");
    assert_eq!((code, code2), (200, 200), "{now} {prev}");
    assert_eq!(now, prev, "restart count {restarts}");
    assert!(now.starts_with("run "), "{now}");
    let (code, body) = curl(&p, &[], "/v1/containers/c/log?previous=true");
    assert_eq!(code, 400);
    let want = format!(
        "previous terminated container \"c\" in pod \"{}\" not found",
        p.name
    );
    assert_eq!(json(&body)["message"], want.as_str());

    // An ephemeral container with a field Kubernetes does not have is refused.
    let (code, body) = curl(
        &p,
        &[
            "-X",
            "POST",
            "-d",
            r#"{"name":"dbg","image":"busybox","colour":"red"}"#,
        ],
        "/v1/ephemeralcontainers",
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("unknown field"), "{body}");

    // A deletion shows as the API server records it.
    let (code, _) = curl(
        &p,
        &["-X", "POST", "-d", r#"{"gracePeriodSeconds":1}"#],
        "/v1/pod/terminate",
    );
    assert_eq!(code, 202);
    let out = p.wait(LIMIT);
    let meta = &out.status["metadata"];
    assert_eq!(meta["deletionGracePeriodSeconds"], 1, "{meta}");
    assert!(meta["deletionTimestamp"].is_string(), "{meta}");
    p.assert_nothing_left();
}

/// `follow` ends when the run has exited and its output is read, as kubelet's does: not
/// when the process closes its stdout and stderr, and at once when asked after the end.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_followed_log_ends_with_the_run() {
    require_root();
    let mut p = TestPod::new(
        "follow",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: quiet
    image: busybox
    command: ["sh", "-c", "echo hi; exec >&- 2>&-; sleep 1"]
  - {name: stay, image: busybox, command: ["sleep", "1000"]}
"#,
    );
    p.start();
    p.wait_log("quiet", 0, LIMIT, "hi");
    let follow = || {
        let mut s = UnixStream::connect(p.state.join("pod.sock")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(b"GET /v1/containers/quiet/log?follow=true HTTP/1.0\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("the follow never ended: {e}"));
        String::from_utf8_lossy(&out).into_owned()
    };
    // Its output is closed, its process still runs: the stream waits for the exit.
    let got = follow();
    assert!(got.ends_with("\r\n\r\nhi\n"), "{got:?}");
    let (code, v) = api(&p, "GET", "/v1/pod", None);
    assert_eq!(code, 200);
    assert_eq!(
        container_status(&v, "quiet")["state"]["terminated"]["exitCode"],
        0,
        "ended before the exit: {v}"
    );
    assert_eq!(v["status"]["phase"], "Running");
    // Asked after the end: the whole log, ended.
    let got = follow();
    assert!(got.ends_with("\r\n\r\nhi\n"), "{got:?}");

    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

/// In-place resize (the `resize` subresource): a CPU limit changes the container's and
/// the pod's cgroup files in place; a memory change under `RestartContainer` restarts the
/// container with its new limit; what the API server refuses is 422; what the node cannot
/// hold is PodResizePending Infeasible.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn resize_changes_the_cgroups_in_place_or_by_a_restart() {
    require_root();
    let mut p = TestPod::new(
        "resize",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}
    resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]
"#,
    );
    p.start();
    p.wait_status(Duration::from_secs(40), |v| {
        container_status(v, "c")["state"]["running"].is_object()
    });
    let v2 = std::fs::metadata("/sys/fs/cgroup/cgroup.controllers").is_ok();
    let cpu_of = |dir: std::path::PathBuf| {
        if v2 {
            read_trimmed(dir.join("cpu.max"))
        } else {
            read_trimmed(dir.join("cpu.cfs_quota_us"))
        }
    };
    let mem_of = |dir: std::path::PathBuf| {
        if v2 {
            read_trimmed(dir.join("memory.max"))
        } else {
            read_trimmed(dir.join("memory.limit_in_bytes"))
        }
    };
    let (cpu_dir, mem_dir) = if v2 {
        (pod_cgroup(&p, ""), pod_cgroup(&p, ""))
    } else {
        (pod_cgroup(&p, "cpu"), pod_cgroup(&p, "memory"))
    };
    let want_cpu = |quota: u64| {
        if v2 {
            format!("{quota} 100000")
        } else {
            quota.to_string()
        }
    };
    assert_eq!(cpu_of(cpu_dir.join("c_c")), want_cpu(20000));
    // CPU: in place, no restart.
    let (code, pod) = api(
        &p,
        "PATCH",
        "/v1/pod/resize",
        Some(r#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"300m"}}}]}}"#),
    );
    assert_eq!(code, 200, "{pod}");
    assert_eq!(pod["metadata"]["generation"], 2);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "300m"
    );
    assert_eq!(cpu_of(cpu_dir.join("c_c")), want_cpu(30000));
    assert_eq!(cpu_of(cpu_dir.clone()), want_cpu(30000));
    let v = p.wait_status(Duration::from_secs(10), |v| {
        v["status"]["observedGeneration"] == 2
    });
    let c = container_status(&v, "c");
    assert_eq!(c["restartCount"], 0);
    assert_eq!(c["resources"]["limits"]["cpu"], "300m");
    assert_eq!(c["allocatedResources"]["cpu"], "100m");
    // Memory under RestartContainer: the container restarts with its new limit.
    let (code, pod) = api(
        &p,
        "PATCH",
        "/v1/pod/resize",
        Some(r#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"memory":"128Mi"}}}]}}"#),
    );
    assert_eq!(code, 200, "{pod}");
    p.wait_status(Duration::from_secs(20), |v| {
        container_status(v, "c")["restartCount"] == 1
            && container_status(v, "c")["state"]["running"].is_object()
    });
    assert_eq!(mem_of(mem_dir.join("c_c")), (128u64 << 20).to_string());
    assert_eq!(mem_of(mem_dir), (128u64 << 20).to_string());
    // The API server's refusal.
    let (code, st) = api(
        &p,
        "PATCH",
        "/v1/pod/resize",
        Some(r#"{"spec":{"containers":[{"name":"c","resources":{"limits":{"memory":null}}}]}}"#),
    );
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert!(
        st["message"].as_str().unwrap().ends_with(
            "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed"
        ),
        "{st}"
    );
    // More than the node has: Infeasible, nothing applied.
    let (code, _) = api(
        &p,
        "PATCH",
        "/v1/pod/resize",
        Some(
            r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"100000"},"limits":{"cpu":"100000"}}}]}}"#,
        ),
    );
    assert_eq!(code, 200);
    let v = p.wait_status(Duration::from_secs(10), |v| {
        v["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "PodResizePending"))
    });
    let c = condition(&v, "PodResizePending");
    assert_eq!(c["reason"], "Infeasible");
    assert!(
        c["message"]
            .as_str()
            .unwrap()
            .starts_with("Node didn't have enough capacity: cpu, requested: 100000000, capacity: "),
        "{c}"
    );
    assert_eq!(cpu_of(cpu_dir.join("c_c")), want_cpu(30000));
    p.signal(libc::SIGTERM);
    let out = p.wait(Duration::from_secs(40));
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    p.assert_nothing_left();
}

/// A resize the node fits but not beside another pod of the same state root is
/// PodResizePending Deferred with the predicate's message; once the other pod has ended,
/// the allocation manager's ticker (30 s after the supervisor started) allocates it:
/// PodResizeInProgress until the cgroup reads back the new size, then the events
/// ResizeStarted and ResizeCompleted, and the status's resources read from the cgroup.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_deferred_resize_is_allocated_when_the_node_has_room_again() {
    require_root();
    let root = std::env::temp_dir().join(format!("podinit-it-deferred-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    // Both pods see a node of 1000m of CPU.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
    let reserved = format!("cpu={}m", cpus * 1000 - 1000);
    let pod = |prefix: &str, cpu: &str| {
        let mut p = TestPod::new(
            prefix,
            &format!(
                r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
    resources: {{requests: {{cpu: {cpu}}}, limits: {{cpu: 800m}}}}
"#
            ),
        );
        p.state = root.join(&p.name);
        let mut cmd = p.command();
        cmd.args(["--system-reserved", &reserved]);
        p.start_with(cmd);
        p
    };
    let running = |v: &serde_json::Value| container_status(v, "c")["state"]["running"].is_object();
    let mut a = pod("deferred-a", "100m");
    a.wait_status(Duration::from_secs(40), running);
    let mut b = pod("deferred-b", "600m");
    b.wait_status(Duration::from_secs(40), running);
    let (code, _) = api(
        &a,
        "PATCH",
        "/v1/pod/resize",
        Some(r#"{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m"}}}]}}"#),
    );
    assert_eq!(code, 200);
    let v = a.wait_status(Duration::from_secs(10), |v| {
        v["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "PodResizePending"))
    });
    let c = condition(&v, "PodResizePending");
    assert_eq!(c["reason"], "Deferred");
    assert_eq!(
        c["message"],
        "Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
    );
    assert_eq!(c["observedGeneration"], 2);
    let cs = container_status(&v, "c");
    assert_eq!(cs["allocatedResources"]["cpu"], "100m");
    assert_eq!(
        cs["resources"]["requests"]["cpu"], "100m",
        "read from the cgroup"
    );
    assert!(has_event(&a, "ResizeDeferred", "Pod resize Deferred: {"));
    // The other pod ends: the next tick allocates the resize.
    b.signal(libc::SIGTERM);
    b.wait(Duration::from_secs(40));
    let v = a.wait_status(Duration::from_secs(60), |v| {
        container_status(v, "c")["allocatedResources"]["cpu"] == "500m"
            && !v["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"].as_str().unwrap_or("").starts_with("PodResize"))
            })
    });
    let cs = container_status(&v, "c");
    assert_eq!(cs["resources"]["requests"]["cpu"], "500m");
    assert_eq!(cs["restartCount"], 0);
    wait_event(&a, "ResizeStarted", r#""generation":2"#);
    wait_event(&a, "ResizeCompleted", "Pod resize completed: {");
    a.signal(libc::SIGTERM);
    a.wait(Duration::from_secs(40));
    a.assert_nothing_left();
    b.assert_nothing_left();
    std::fs::remove_dir_all(&root).ok();
}
