//! Termination on the real binary: stop signals, grace periods, forced stops,
//! the API and `podinit stop`, deadlines, and a killed podinit.

mod common;
use common::*;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(40);

fn running(p: &TestPod, names: &[&str]) -> serde_json::Value {
    p.wait_status(LIMIT, |v| {
        names
            .iter()
            .all(|n| container_status(v, n)["state"]["running"].is_object())
    })
}

fn trap(sig: &str, name: &str) -> String {
    format!(
        "trap 'echo {name} got {sig}; exit 0' {sig}; echo ready; while true; do sleep 0.05; done"
    )
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_graceful_stop_is_fast_when_containers_exit_on_term() {
    require_root();
    let mut p = TestPod::new(
        "fast",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  containers:
  - {{name: a, image: busybox, command: ["sh", "-c", "{}"]}}
  - {{name: b, image: busybox, command: ["sh", "-c", "{}"]}}
"#,
            trap("TERM", "a"),
            trap("TERM", "b")
        ),
    );
    p.start();
    running(&p, &["a", "b"]);
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    let took = t0.elapsed();
    // The grace period is 30 s; a stop that does not wait for it is what counts here.
    // Latency itself is measured by scripts/bench, not asserted.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(out.code, 0, "every app container exited 0: {}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    assert_eq!(p.log("a", 0), "ready\na got TERM");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn stop_signals_come_from_the_container_or_the_bundle() {
    require_root();
    let mut p = TestPod::new(
        "stopsig",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  terminationGracePeriodSeconds: 10
  os: {{name: linux}}
  containers:
  - {{name: bundle, image: busybox-stopsig, command: ["sh", "-c", "{}"]}}
  - name: own
    image: busybox
    command: ["sh", "-c", "{}"]
    lifecycle: {{stopSignal: SIGUSR2}}
"#,
            trap("USR1", "bundle"),
            trap("USR2", "own")
        ),
    );
    p.start();
    running(&p, &["bundle", "own"]);
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("bundle", 0), "ready\nbundle got USR1");
    assert_eq!(p.log("own", 0), "ready\nown got USR2");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_second_sigterm_forces() {
    require_root();
    let mut p = TestPod::new(
        "force",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 60
  containers:
  - {name: deaf, image: busybox, command: ["sh", "-c", "trap '' TERM; echo ready; while true; do sleep 0.05; done"]}
"#,
    );
    p.start();
    running(&p, &["deaf"]);
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(out.code, 1);
    let t = &container_status(&out.status, "deaf")["state"]["terminated"];
    assert_eq!(t["exitCode"], 137, "{t}");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn stop_through_the_socket_and_the_client() {
    require_root();
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - {{name: a, image: busybox, command: ["sh", "-c", "{}"]}}
"#,
        trap("TERM", "a")
    );
    // `podinit stop`.
    let mut p = TestPod::new("stopcli", &yaml);
    p.start();
    running(&p, &["a"]);
    let sock = p.state.join("pod.sock");
    let st = std::process::Command::new(bin())
        .args(["status", "--socket"])
        .arg(&sock)
        .output_within(CLIENT_LIMIT);
    let table = String::from_utf8_lossy(&st.stdout);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains(&p.name) && table.contains("1/1") && table.contains("Running"),
        "{table}"
    );
    let stop = std::process::Command::new(bin())
        .args(["stop", "--socket"])
        .arg(&sock)
        .status()
        .unwrap();
    assert!(stop.success());
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("a", 0), "ready\na got TERM");
    p.assert_nothing_left();
    assert!(!sock.exists(), "the socket is gone");

    // `podinit stop --grace-period 0`: SIGKILL at once, no trap runs.
    let mut p = TestPod::new("stopkill", &yaml);
    p.start();
    running(&p, &["a"]);
    let stop = std::process::Command::new(bin())
        .args(["stop", "--grace-period", "0"])
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .status()
        .unwrap();
    assert!(stop.success());
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 1);
    assert_eq!(
        container_status(&out.status, "a")["state"]["terminated"]["exitCode"],
        137
    );
    assert_eq!(p.log("a", 0), "ready");
    p.assert_nothing_left();

    // A client with no pod to talk to says so in one line.
    let gone = std::process::Command::new(bin())
        .args(["status", "--socket", "/nonexistent/pod.sock"])
        .output_within(CLIENT_LIMIT);
    assert_eq!(gone.status.code(), Some(1));
    let err = String::from_utf8_lossy(&gone.stderr);
    assert!(
        err.contains("/nonexistent/pod.sock") && err.contains("is the pod running"),
        "{err}"
    );
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_active_deadline_fails_the_pod() {
    require_root();
    let mut p = TestPod::new(
        "deadline",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  activeDeadlineSeconds: 1
  terminationGracePeriodSeconds: 1
  containers:
  - {name: a, image: busybox, command: ["sleep", "60"]}
"#,
    );
    let t0 = Instant::now();
    let out = p.run(LIMIT);
    assert!(
        t0.elapsed() < Duration::from_secs(6),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(out.code, 1);
    let st = &out.status["status"];
    assert_eq!(st["phase"], "Failed");
    assert_eq!(st["reason"], "DeadlineExceeded");
    assert_eq!(
        st["message"],
        "Pod was active on the node longer than the specified deadline"
    );
    let events = std::fs::read_to_string(p.state.join("events.jsonl")).unwrap();
    assert!(events.contains("\"reason\":\"DeadlineExceeded\""));
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_killed_podinit_takes_its_pod_down_and_the_next_run_cleans_up() {
    require_root();
    let yaml = r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: busybox
    command: ["sleep", "60"]
    volumeMounts: [{name: m, mountPath: /m}]
  volumes: [{name: m, emptyDir: {medium: Memory}}]
"#;
    let mut p = TestPod::new("sigkill", yaml);
    p.start();
    let v = running(&p, &["a"]);
    assert_eq!(v["status"]["phase"], "Running");
    p.signal(libc::SIGKILL);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, -1, "killed by a signal");
    // The kernel takes the pod's pid namespace down with the supervisor.
    let deadline = Instant::now() + Duration::from_secs(5);
    let cg_dir = || {
        let found = std::process::Command::new("find")
            .args([
                "/sys/fs/cgroup",
                "-maxdepth",
                "5",
                "-name",
                &format!("podinit_default_{}", p.name),
            ])
            .output_within(CLIENT_LIMIT);
        String::from_utf8_lossy(&found.stdout)
            .lines()
            .next()
            .map(str::to_string)
    };
    let leftover = cg_dir().expect("a killed podinit leaves its cgroups");
    loop {
        let procs =
            std::fs::read_to_string(format!("{leftover}/c_a/cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "container processes outlived podinit: {procs}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The next run with the same state dir removes the leftovers first, then runs.
    std::fs::write(
        &p.manifest,
        yaml.replace("NAME", &p.name)
            .replace("[\"sleep\", \"60\"]", "[\"true\"]")
            .replace(
                "terminationGracePeriodSeconds: 1",
                "terminationGracePeriodSeconds: 1\n  restartPolicy: Never",
            ),
    )
    .unwrap();
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn pid_1_without_a_handler_ignores_sigterm_and_is_killed_when_grace_ends() {
    require_root();
    let mut p = TestPod::new(
        "deafpid1",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - {name: sleeper, image: busybox, command: ["sleep", "1000"]}
"#,
    );
    p.start();
    running(&p, &["sleeper"]);
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    let took = t0.elapsed();
    // The kernel drops SIGTERM for a PID 1 without a handler: only SIGKILL at the end of
    // the grace period ends it.
    assert!(took >= Duration::from_millis(1900), "took {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let t = &container_status(&out.status, "sleeper")["state"]["terminated"];
    assert_eq!(t["exitCode"], 137, "{t}");
    assert_eq!(t["signal"], 9, "{t}");
    assert_eq!(out.code, 1);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn pre_stop_hooks_run_together_before_each_stop_signal() {
    require_root();
    let mut p = TestPod::new(
        "prestop",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 20
  volumes: [{name: h, hostPath: {path: /tmp/podinit-it-NAME-h, type: DirectoryOrCreate}}]
  containers:
  - name: web
    image: busybox
    command: ["sh", "-c", "mkdir /www; httpd -p 8080 -h /www; trap 'echo web-term >> /h/order; exit 0' TERM; echo ready; while true; do sleep 0.05; done"]
    volumeMounts: [{name: h, mountPath: /h}]
    lifecycle:
      preStop: {exec: {command: ["sh", "-c", "echo web-prestop >> /h/order; sleep 1; echo web-prestop-done >> /h/order"]}}
  - name: sleepy
    image: busybox
    command: ["sh", "-c", "trap 'echo sleepy-term >> /h/order; exit 0' TERM; echo ready; while true; do sleep 0.05; done"]
    volumeMounts: [{name: h, mountPath: /h}]
    lifecycle:
      preStop: {sleep: {seconds: 2}}
  - name: http
    image: busybox
    command: ["sh", "-c", "trap 'echo http-term >> /h/order; exit 0' TERM; echo ready; while true; do sleep 0.05; done"]
    volumeMounts: [{name: h, mountPath: /h}]
    lifecycle:
      preStop: {httpGet: {port: 8080, path: /anything}}
  - name: failing
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; echo ready; while true; do sleep 0.05; done"]
    lifecycle:
      preStop: {exec: {command: ["sh", "-c", "echo no; exit 2"]}}
"#,
    );
    let host = std::path::PathBuf::from(format!("/tmp/podinit-it-{}-h", p.name));
    p.start();
    running(&p, &["web", "sleepy", "http", "failing"]);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    let took = t0.elapsed();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        took >= Duration::from_millis(1900),
        "the sleep hook held its container: {took:?}"
    );
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let order = std::fs::read_to_string(host.join("order")).unwrap();
    let lines: Vec<&str> = order.lines().collect();
    let pos = |s: &str| {
        lines
            .iter()
            .position(|l| *l == s)
            .unwrap_or_else(|| panic!("{s} missing from {order}"))
    };
    assert!(pos("web-prestop") < pos("web-prestop-done"), "{order}");
    assert!(pos("web-prestop-done") < pos("web-term"), "{order}");
    // The quick hooks did not wait for the slow ones.
    assert!(pos("http-term") < pos("web-term"), "{order}");
    assert!(pos("web-term") < pos("sleepy-term"), "{order}");
    // kubelet's event names the failure only; the hook's output goes to the log.
    let ev = std::fs::read_to_string(p.state.join("events.jsonl")).unwrap();
    assert!(
        ev.lines()
            .any(|l| l.contains("FailedPreStopHook") && l.contains("PreStopHook failed")),
        "{ev}"
    );
    assert!(out.stderr.contains("exited with 2"), "{}", out.stderr);
    p.assert_nothing_left();
    std::fs::remove_dir_all(&host).unwrap();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_pre_stop_hook_that_overruns_the_grace_period_is_abandoned() {
    require_root();
    let mut p = TestPod::new(
        "overrun",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "trap 'echo got TERM; exit 0' TERM; echo ready; while true; do sleep 0.05; done"]
    lifecycle:
      preStop: {exec: {command: ["sleep", "100"]}}
"#,
    );
    p.start();
    running(&p, &["c"]);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    let took = t0.elapsed();
    // Abandoned at 2 s, then the stop signal (with the 2-second minimum to SIGKILL).
    assert!(took >= Duration::from_millis(1900), "took {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("c", 0), "ready\ngot TERM");
    p.assert_nothing_left();
}
