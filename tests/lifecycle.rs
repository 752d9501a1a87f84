//! The pod lifecycle (issue 3) on the real binary: restarts with back-off, OnFailure,
//! init failure, sidecar order, OOM kills, shared pid namespace, cgroup limits, status.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

fn events(p: &TestPod) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p.state.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn condition<'a>(status: &'a serde_json::Value, t: &str) -> &'a serde_json::Value {
    status["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap_or_else(|| panic!("no condition {t}"))
}

#[test]
fn always_restarts_with_crash_loop_back_off() {
    if !require_root() {
        return;
    }
    let mut p = TestPod::new(
        "crash",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "echo run; exit 3"]}
"#,
    );
    let mut cmd = p.command();
    cmd.arg("--max-restart-backoff").arg("1");
    p.start_with(cmd);
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "c")["restartCount"]
            .as_i64()
            .unwrap_or(0)
            >= 3
    });
    assert_eq!(v["status"]["phase"], "Running");
    let c = container_status(&v, "c");
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 3);
    assert_eq!(c["lastState"]["terminated"]["reason"], "Error");
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    });
    let msg = container_status(&v, "c")["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.starts_with("back-off 1s restarting failed container=c pod=")
            && msg.contains("_default("),
        "{msg}"
    );
    assert!(events(&p)
        .iter()
        .any(|e| e["reason"] == "BackOff" && e["type"] == "Warning"));
    // Each run has its own log file.
    assert_eq!(p.log("c", 0), "run");
    assert_eq!(p.log("c", 1), "run");
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 1);
    p.assert_nothing_left();
}

#[test]
fn on_failure_restarts_until_success_and_empty_dirs_survive_restarts() {
    if !require_root() {
        return;
    }
    let mut p = TestPod::new(
        "onfail",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: OnFailure
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "if [ -e /d/ran ]; then echo second; exit 0; fi; touch /d/ran; echo first; exit 1"]
    volumeMounts: [{name: d, mountPath: /d}]
  volumes: [{name: d, emptyDir: {medium: Memory, sizeLimit: 1Mi}}]
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    let c = container_status(&out.status, "c");
    assert_eq!(c["restartCount"], 1);
    assert_eq!(c["state"]["terminated"]["reason"], "Completed");
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
    assert_eq!(p.log("c", 0), "first");
    assert_eq!(p.log("c", 1), "second");
    p.assert_nothing_left();
}

#[test]
fn a_failed_init_container_fails_a_never_pod() {
    if !require_root() {
        return;
    }
    let mut p = TestPod::new(
        "initfail",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  initContainers:
  - {name: i, image: busybox, command: ["sh", "-c", "exit 7"]}
  containers:
  - {name: app, image: busybox, command: ["true"]}
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 1);
    assert_eq!(out.status["status"]["phase"], "Failed");
    assert_eq!(
        container_status(&out.status, "i")["state"]["terminated"]["exitCode"],
        7
    );
    assert_eq!(
        container_status(&out.status, "app")["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    let init = condition(&out.status, "Initialized");
    assert_eq!(init["status"], "False");
    assert_eq!(init["reason"], "ContainersNotInitialized");
    assert_eq!(init["message"], "containers with incomplete status: [i]");
    p.assert_nothing_left();
}

#[test]
fn sidecars_outlive_the_app_and_stop_in_reverse_order() {
    if !require_root() {
        return;
    }
    let sidecar = |n: &str| {
        format!(
            "  - name: {n}\n    image: busybox\n    restartPolicy: Always\n    command: [\"sh\", \"-c\", \"trap 'echo {n} >> /d/stopped; exit 0' TERM; echo {n} >> /d/started; while true; do sleep 0.05; done\"]\n    volumeMounts: [{{name: d, mountPath: /d}}]\n"
        )
    };
    let yaml = format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  initContainers:
{}{}  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", "cat /d/started; sleep 0.5"]
    volumeMounts: [{{name: d, mountPath: /d}}]
  volumes: [{{name: d, emptyDir: {{}}}}]
"#,
        sidecar("first"),
        sidecar("second")
    );
    let mut p = TestPod::new("sidecar", &yaml);
    p.start();
    // The sidecars run before the app, in order.
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "app")["state"]["running"].is_object()
            || container_status(v, "app")["state"]["terminated"].is_object()
    });
    for s in ["first", "second"] {
        let st = container_status(&v, s);
        assert!(st["state"]["running"].is_object(), "{st}");
        assert_eq!(st["started"], true);
    }
    let order = p.state.join(".work/volumes/d/stopped");
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.status["status"]["phase"], "Succeeded",
        "sidecars do not count"
    );
    assert_eq!(p.log("app", 0), "first\nsecond");
    for s in ["first", "second"] {
        let t = &container_status(&out.status, s)["state"]["terminated"];
        assert_eq!(t["exitCode"], 0, "{s} stopped by its TERM trap: {t}");
    }
    // The volume is gone with the pod; the stop order was recorded in the events.
    assert!(!order.exists());
    let killing: Vec<String> = events(&p)
        .iter()
        .filter(|e| e["reason"] == "Killing")
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        killing,
        ["Stopping container second", "Stopping container first"]
    );
    p.assert_nothing_left();
}

#[test]
fn an_oom_kill_is_reported_as_oom_killed() {
    if !require_root() {
        return;
    }
    let mut p = TestPod::new(
        "oom",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"]
    resources: {limits: {memory: 32Mi}}
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 1);
    assert_eq!(out.status["status"]["phase"], "Failed");
    let t = &container_status(&out.status, "c")["state"]["terminated"];
    assert_eq!(t["reason"], "OOMKilled", "{t}");
    assert!(events(&p).iter().any(|e| e["reason"] == "OOMKilling"));
    p.assert_nothing_left();
}

#[test]
fn limits_land_in_the_container_and_pod_cgroups() {
    if !require_root() {
        return;
    }
    let mut p = TestPod::new(
        "limits",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: busybox
    command: ["sleep", "30"]
    resources: {limits: {cpu: 500m, memory: 64Mi}}
  - name: b
    image: busybox
    command: ["sleep", "30"]
    resources: {limits: {cpu: 250m, memory: 32Mi}}
"#,
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| {
        ["a", "b"]
            .iter()
            .all(|c| container_status(v, c)["state"]["running"].is_object())
    });
    assert_eq!(v["status"]["qosClass"], "Guaranteed");
    assert_eq!(condition(&v, "Ready")["status"], "True");
    assert_eq!(condition(&v, "ContainersReady")["status"], "True");
    assert!(v["status"]["startTime"].is_string());
    let v2 = std::fs::metadata("/sys/fs/cgroup/cgroup.controllers").is_ok();
    let ours = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let base = |ctrl: &str| -> std::path::PathBuf {
        let line = ours
            .lines()
            .find(|l| {
                if v2 {
                    l.starts_with("0::")
                } else {
                    l.split(':')
                        .nth(1)
                        .is_some_and(|c| c.split(',').any(|x| x == ctrl))
                }
            })
            .unwrap();
        let rel = line.splitn(3, ':').nth(2).unwrap().trim_start_matches('/');
        let mount = if v2 {
            "/sys/fs/cgroup".to_string()
        } else {
            format!("/sys/fs/cgroup/{ctrl}")
        };
        std::path::Path::new(&mount)
            .join(rel)
            .join(format!("podinit_default_{}", p.name))
    };
    let read = |p: std::path::PathBuf| {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    };
    if v2 {
        assert_eq!(
            read(base("").join("c_a/memory.max")),
            (64u64 << 20).to_string()
        );
        assert_eq!(read(base("").join("c_a/cpu.max")), "50000 100000");
        assert_eq!(read(base("").join("memory.max")), (96u64 << 20).to_string());
    } else {
        assert_eq!(
            read(base("memory").join("c_a/memory.limit_in_bytes")),
            (64u64 << 20).to_string()
        );
        assert_eq!(read(base("cpu").join("c_a/cpu.cfs_quota_us")), "50000");
        assert_eq!(read(base("cpu").join("c_b/cpu.cfs_quota_us")), "25000");
        assert_eq!(
            read(base("memory").join("memory.limit_in_bytes")),
            (96u64 << 20).to_string()
        );
        assert_eq!(read(base("cpu").join("cpu.cfs_quota_us")), "75000");
    }
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

#[test]
fn a_shared_pid_namespace_reaps_orphans_and_leftovers_are_killed() {
    if !require_root() {
        return;
    }
    let mut p = TestPod::new(
        "pidns",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  shareProcessNamespace: true
  containers:
  - name: orphans
    image: busybox
    command: ["sh", "-c", "for i in $(seq 50); do (true &); done; sleep 0.5; echo zombies=$(grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l); echo pid1=$(cat /proc/1/cmdline | tr '\\0' ' ' | cut -d' ' -f2); cat /proc/1/exe >/dev/null 2>&1 && echo exe=open || echo exe=denied"]
  - name: leaver
    image: busybox
    command: ["sh", "-c", "sleep 1000 & echo left-behind"]
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = p.log("orphans", 0);
    assert!(log.contains("zombies=0"), "{log}");
    assert!(
        log.contains("pid1=run"),
        "podinit is PID 1 of the shared namespace: {log}"
    );
    assert!(
        log.contains("exe=denied"),
        "the supervisor is not dumpable: {log}"
    );
    assert_eq!(p.log("leaver", 0), "left-behind");
    p.assert_nothing_left();
}
