//! The foundation: containers from OCI bundles, created by podinit's own runtime
//! inside a real sandbox, checked from inside the containers; exit codes, status.json, and
//! nothing left behind.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

fn one_container(prefix: &str, script: &str, extra: &str) -> TestPod {
    TestPod::new(
        prefix,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", {script:?}]
{extra}"#
        ),
    )
}

/// Field of /proc/self/status as printed by the container.
fn field<'a>(log: &'a str, key: &str) -> &'a str {
    log.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in {log}"))
        .trim()
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn succeeds_and_fails_with_the_pods_phase() {
    require_root();
    let mut ok = one_container("ok", "echo hello; exit 0", "");
    let out = ok.run(LIMIT);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    let c = container_status(&out.status, "c");
    assert_eq!(c["state"]["terminated"]["exitCode"], 0);
    assert_eq!(c["state"]["terminated"]["reason"], "Completed");
    assert!(c["state"]["terminated"]["startedAt"].is_string());
    assert!(c["state"]["terminated"]["finishedAt"].is_string());
    assert!(c["containerID"].as_str().unwrap().starts_with("podinit://"));
    assert_eq!(
        c["containerID"].as_str().unwrap().len(),
        "podinit://".len() + 64
    );
    assert!(c["imageID"]
        .as_str()
        .unwrap()
        .ends_with("oci-bundles/busybox"));
    assert_eq!(ok.log("c", 0), "hello");
    ok.assert_nothing_left();

    let mut bad = one_container("fail", "echo oops >&2; exit 3", "");
    let out = bad.run(LIMIT);
    assert_eq!(out.code, 1);
    assert_eq!(out.status["status"]["phase"], "Failed");
    let c = container_status(&out.status, "c");
    assert_eq!(c["state"]["terminated"]["exitCode"], 3);
    assert_eq!(c["state"]["terminated"]["reason"], "Error");
    let raw = std::fs::read_to_string(bad.state.join("logs/c/0.log")).unwrap();
    assert!(raw.trim_end().ends_with(" stderr F oops"), "{raw}");
    bad.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_signal_exit_is_128_plus_the_signal() {
    require_root();
    // PID 1 of a pid namespace cannot be killed from inside it: share the pod's, where the
    // container's shell is not PID 1 (podinit is). `$$$$` is `$$` after Kubernetes' `$$`
    // escape.
    let mut p = one_container("sig", "kill -KILL $$$$", "  shareProcessNamespace: true\n");
    let out = p.run(LIMIT);
    assert_eq!(out.code, 1);
    let t = &container_status(&out.status, "c")["state"]["terminated"];
    assert_eq!(t["exitCode"], 137);
    assert_eq!(t["signal"], 9);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn exec_failure_is_a_start_error() {
    require_root();
    let mut p = TestPod::new(
        "noexec",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: busybox, command: ["/no/such/program"]}
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 1, "stderr: {}", out.stderr);
    let t = &container_status(&out.status, "c")["state"]["terminated"];
    assert_eq!(t["exitCode"], 128, "{t}");
    assert_eq!(t["reason"], "StartError");
    assert!(
        t["message"]
            .as_str()
            .unwrap_or_default()
            .contains("/no/such/program"),
        "{t}"
    );
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_container_sees_what_its_spec_says() {
    require_root();
    let script = "cat /proc/self/status; echo host=$(hostname); id; \
                  echo fds=$(ls /proc/self/fd | tr '\\n' ' '); \
                  echo pid1=$(cat /proc/1/cmdline | tr '\\0' ' '); \
                  touch /rootfile 2>/dev/null && echo root=rw || echo root=ro; \
                  cat /proc/kcore >/dev/null 2>&1 && echo kcore=readable || echo kcore=masked; \
                  echo hi > /data/x && echo data=rw; \
                  echo sysrq=$(echo 1 > /proc/sysrq-trigger 2>&1 && echo w || echo ro); \
                  grep -c ' / ' /proc/self/mountinfo; echo env=$GREETING cwd=$(pwd)";
    let extra = r#"    workingDir: /tmp
    env: [{name: GREETING, value: hello}]
    securityContext:
      runAsUser: 1000
      runAsGroup: 1000
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities: {drop: [NET_RAW], add: [SYS_ADMIN]}
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
"#;
    let mut p = one_container("inside", script, extra);
    let out = p.run(LIMIT);
    assert_eq!(
        out.code,
        0,
        "stderr: {}\nlog: {}",
        out.stderr,
        p.log("c", 0)
    );
    let log = p.log("c", 0);
    // The bundle's (Docker's default) capabilities, minus NET_RAW, plus SYS_ADMIN, as the
    // bounding set; a non-root user keeps none in its effective set unless ambient.
    assert_eq!(field(&log, "CapBnd"), "00000000a82405fb", "{log}");
    assert_eq!(field(&log, "CapAmb"), "0000000000000000");
    assert_eq!(field(&log, "NoNewPrivs"), "1");
    assert_eq!(field(&log, "SigBlk"), "0000000000000000");
    assert_eq!(field(&log, "SigIgn"), "0000000000000000");
    assert!(log.contains(&format!("host={}", p.name)), "{log}");
    assert!(log.contains("uid=1000"), "{log}");
    assert!(log.contains("gid=1000"), "{log}");
    // 0 1 2, plus the directory ls itself is reading.
    let fds = log.lines().find_map(|l| l.strip_prefix("fds=")).unwrap();
    let fds: Vec<&str> = fds.split_whitespace().collect();
    assert_eq!(fds.len(), 4, "open fds: {fds:?}");
    assert!(fds.starts_with(&["0", "1", "2"]));
    assert!(log.contains("pid1=sh -c"), "own pid namespace: {log}");
    assert!(log.contains("root=ro"), "{log}");
    assert!(log.contains("kcore=masked"), "{log}");
    assert!(log.contains("data=rw"), "{log}");
    assert!(log.contains("sysrq=ro"), "{log}");
    assert!(log.contains("env=hello cwd=/tmp"), "{log}");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn root_container_gets_the_bundles_capabilities() {
    require_root();
    let mut p = one_container(
        "caps",
        "grep Cap /proc/self/status; cat /proc/self/cgroup",
        "",
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let log = p.log("c", 0);
    // Every hierarchy: the container is below the cgroup podinit was started in (ours).
    let pure_v2 = std::fs::metadata("/sys/fs/cgroup/cgroup.controllers").is_ok();
    let ours = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mut checked = 0;
    for line in ours.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        if ctrls.is_empty() != pure_v2 {
            continue;
        }
        let want = format!(
            "{}/podinit_default_{}/c_c",
            path.trim_end_matches('/'),
            p.name
        );
        let got = log
            .lines()
            .find(|l| l.split(':').nth(1) == Some(ctrls))
            .unwrap_or_else(|| panic!("no {ctrls:?} line in {log}"));
        assert!(
            got.ends_with(&format!(":{want}")),
            "{ctrls}: {got}, want {want}"
        );
        checked += 1;
    }
    assert!(checked > 0);
    for k in ["CapInh", "CapAmb"] {
        assert_eq!(field(&log, k), "0000000000000000", "{k}: {log}");
    }
    for k in ["CapPrm", "CapEff", "CapBnd"] {
        assert_eq!(field(&log, k), "00000000a80425fb", "{k}: {log}");
    }
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn init_then_apps_share_an_empty_dir_and_loopback() {
    require_root();
    let mut p = TestPod::new(
        "share",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: init
    image: busybox
    command: ["sh", "-c", "echo from-init > /work/seed"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: server
    image: busybox
    command: ["sh", "-c", "cat /work/seed; until grep -q over-loopback /work/got 2>/dev/null; do nc -l -p 8089 >> /work/got; done; touch /work/ack; grep -m1 over-loopback /work/got"]
    volumeMounts: [{name: work, mountPath: /work}]
  - name: client
    image: busybox
    # busybox nc may close a connection before its data is read: send until acknowledged
    # (the data itself only ever crosses the shared loopback).
    command: ["sh", "-c", "for i in $(seq 200); do [ -e /work/ack ] && exit 0; echo over-loopback | nc 127.0.0.1 8089; sleep 0.05; done; exit 1"]
    volumeMounts: [{name: work, mountPath: /work}]
  volumes: [{name: work, emptyDir: {}}]
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    assert_eq!(p.log("server", 0), "from-init\nover-loopback");
    let init = container_status(&out.status, "init");
    assert_eq!(init["state"]["terminated"]["reason"], "Completed");
    // The init container ended before either app container started.
    let init_end = init["state"]["terminated"]["finishedAt"]
        .as_str()
        .unwrap()
        .to_string();
    for c in ["server", "client"] {
        let s = container_status(&out.status, c)["state"]["terminated"]["startedAt"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            s >= init_end,
            "{c} started at {s}, before init ended at {init_end}"
        );
    }
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn bad_input_exits_2_and_creates_nothing() {
    require_root();
    let pod =
        |spec: &str| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n{spec}");
    let cases = [
        (
            "a bundle path that does not exist",
            pod("  containers:\n  - {name: c, image: ./no-such-image}\n"),
            "no-such-image",
        ),
        (
            "unknown OS",
            pod("  os: {name: plan9}\n  containers:\n  - {name: c, image: busybox}\n"),
            "spec.os.name",
        ),
        (
            "unknown field",
            pod("  containers:\n  - {name: c, image: busybox, imagee: x}\n"),
            "imagee",
        ),
        (
            "restart rules without a container restartPolicy",
            pod("  containers:\n  - {name: c, image: busybox, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}\n"),
            "spec.containers[0].restartPolicy: Required value",
        ),
        (
            "an alpha field",
            pod("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, emptyDir: {mode: 0700}}]\n"),
            "spec.volumes[0].emptyDir.mode: alpha in Kubernetes 1.37",
        ),
        (
            "duplicate names",
            pod("  containers:\n  - {name: c, image: busybox}\n  - {name: c, image: busybox}\n"),
            "spec.containers[1].name: Duplicate value",
        ),
        (
            "malformed YAML",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n".to_string(),
            "pod.yaml",
        ),
    ];
    for (what, yaml, expect) in cases {
        let mut p = TestPod::new("bad", &yaml);
        let out = p.run(LIMIT);
        assert_eq!(out.code, 2, "{what}: {}", out.stderr);
        assert_eq!(
            out.stderr.trim().lines().count(),
            1,
            "{what}: one line: {}",
            out.stderr
        );
        assert!(out.stderr.contains(expect), "{what}: {}", out.stderr);
        assert!(!p.state.exists(), "{what}: the state dir was created");
        p.assert_nothing_left();
    }
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn sigterm_ends_the_pod_within_its_grace_period() {
    require_root();
    // `sleep` as PID 1 of its namespace has no handler for SIGTERM and ignores it, as in
    // Kubernetes: it is SIGKILLed when the grace period ends. The trapping one exits at once.
    let mut p = TestPod::new(
        "term",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
  - {name: stubborn, image: busybox, command: ["sleep", "1000"]}
  - {name: polite, image: busybox, command: ["sh", "-c", "trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 0.1; done"]}
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        v["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|c| c["state"]["running"].is_object()))
    });
    std::thread::sleep(Duration::from_millis(300));
    // The supervisor announces its end and the outer process cleans up while it exits:
    // `podinit run` still returns only once it is gone.
    let supervisor = common::process_identity(supervisor_pid(&p));
    let t0 = std::time::Instant::now();
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    let took = t0.elapsed();
    assert!(
        !common::still_running(&supervisor),
        "podinit run returned before its supervisor was gone"
    );
    assert!(
        took >= Duration::from_secs(2),
        "stopped before the grace period: {took:?}"
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert_eq!(
        out.code, 1,
        "a killed container fails the pod: {}",
        out.stderr
    );
    let stubborn = &container_status(&out.status, "stubborn")["state"]["terminated"];
    assert_eq!(stubborn["exitCode"], 137, "{stubborn}");
    let polite = &container_status(&out.status, "polite")["state"]["terminated"];
    assert_eq!(polite["exitCode"], 0, "{polite}");
    assert_eq!(p.log("polite", 0), "ready\nbye");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn sandbox_failures_exit_3_and_leave_nothing() {
    require_root();
    // A second run of a running pod (same state dir) is refused; the first is untouched.
    let mut first = one_container("busy", "sleep 30", "");
    first.start();
    first.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["running"].is_object()
    });
    let second = std::process::Command::new(bin())
        .arg("run")
        .arg(&first.manifest)
        .arg("--bundles")
        .arg(bundles())
        .arg("--state-dir")
        .arg(&first.state)
        .output_within(CLIENT_LIMIT);
    assert_eq!(second.status.code(), Some(3));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("already running"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let still = first.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["running"].is_object()
    });
    assert_eq!(still["status"]["phase"], "Running");
    first.signal(libc::SIGINT);
    first.signal(libc::SIGINT);
    let out = first.wait(LIMIT);
    assert_eq!(out.code, 1, "forced stop fails the pod: {}", out.stderr);
    first.assert_nothing_left();

    // A cgroup parent that does not exist.
    let p = one_container("nocg", "true", "");
    let out = p
        .command()
        .arg("--cgroup-parent")
        .arg("/no/such/parent")
        .output_within(CLIENT_LIMIT);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--cgroup-parent") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!std::path::Path::new("/sys/fs/cgroup/memory/no").exists());
    p.assert_nothing_left();
    assert!(!p.state.join("status.json").exists());
}
