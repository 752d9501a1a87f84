//! podinit under a higher-level runtime (issue 9): PID-1 mode as the process of the
//! sandbox bundle (`scripts/make-sandbox-bundle`), run by runc; status read from the host
//! through the socket; stopped with the runtime's kill; nothing left behind.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn runc() -> PathBuf {
    if Command::new("runc").arg("--version").output().is_err() {
        let ok = Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "runc"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "installing runc");
    }
    PathBuf::from("runc")
}

/// A sandbox bundle for `pod` (a manifest) with its state under `state`.
fn sandbox_bundle(p: &TestPod, state: &Path) -> PathBuf {
    let bundle = p.dir.join("bundle");
    std::fs::create_dir_all(state).unwrap();
    let out =
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-sandbox-bundle"))
            .arg(bin())
            .arg(&p.manifest)
            .arg(state)
            .arg(&bundle)
            .output()
            .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bundle
}

fn no_cgroups_named(name: &str) {
    let mut found = Vec::new();
    let mut stack = vec![(PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if !p.is_dir() || p.is_symlink() {
                continue;
            }
            if e.file_name().to_string_lossy().contains(name) {
                found.push(p.clone());
            }
            if depth < 6 {
                stack.push((p, depth + 1));
            }
        }
    }
    assert!(found.is_empty(), "cgroups left: {found:?}");
}

struct RuncContainer(String);

impl Drop for RuncContainer {
    fn drop(&mut self) {
        let _ = Command::new("runc")
            .args(["delete", "--force", &self.0])
            .output();
    }
}

#[test]
fn runc_runs_the_sandbox_bundle_to_completion() {
    if !require_root() {
        return;
    }
    let runc = runc();
    let p = TestPod::new(
        "runc",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  initContainers:
  - {name: init, image: busybox, command: ["sh", "-c", "echo init >> /data/out"], volumeMounts: [{name: d, mountPath: /data}]}
  containers:
  - {name: app, image: busybox, command: ["sh", "-c", "cat /data/out; hostname; echo pid $$$$"], volumeMounts: [{name: d, mountPath: /data}]}
  volumes: [{name: d, emptyDir: {}}]
"#,
    );
    let state = p.dir.join("run");
    let bundle = sandbox_bundle(&p, &state);
    let id = format!("podinit-it-{}", p.name);
    let _guard = RuncContainer(id.clone());
    let out = Command::new(&runc)
        .args(["run", "--bundle"])
        .arg(&bundle)
        .arg(&id)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "runc run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sd = state.join(format!("default_{}", p.name));
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sd.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["status"]["phase"], "Succeeded");
    let log = std::fs::read_to_string(sd.join("logs/app/0.log")).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .map(|l| l.splitn(4, ' ').nth(3).unwrap_or(""))
        .collect();
    assert_eq!(lines, ["init", p.name.as_str(), "pid 1"], "{log}");
    no_cgroups_named(&format!("podinit_default_{}", p.name));
    no_cgroups_named(&id);
}

#[test]
fn runc_kill_stops_a_long_running_pod_within_its_grace_period() {
    if !require_root() {
        return;
    }
    let runc = runc();
    let p = TestPod::new(
        "runckill",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - {name: web, image: busybox, command: ["sh", "-c", "trap 'echo bye; exit 0' TERM; echo ready; sleep 1000 & wait"]}
  - {name: deaf, image: busybox, command: ["sleep", "1000"]}
"#,
    );
    let state = p.dir.join("run");
    let bundle = sandbox_bundle(&p, &state);
    let id = format!("podinit-it-{}", p.name);
    let _guard = RuncContainer(id.clone());
    let st = Command::new(&runc)
        .args(["run", "-d", "--bundle"])
        .arg(&bundle)
        .arg(&id)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "runc run -d");
    let sd = state.join(format!("default_{}", p.name));
    let sock = sd.join("pod.sock");
    // From the host, through the socket.
    let deadline = Instant::now() + LIMIT;
    loop {
        let out = Command::new(bin())
            .args(["status", "-o", "json", "--socket"])
            .arg(&sock)
            .output()
            .unwrap();
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let cs = v["status"]["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if cs.len() == 2 && cs.iter().all(|c| c["state"]["running"].is_object()) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "the pod never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    let st = Command::new(&runc)
        .args(["kill", &id, "TERM"])
        .status()
        .unwrap();
    assert!(st.success());
    loop {
        let out = Command::new(&runc).args(["state", &id]).output().unwrap();
        let stopped = !out.status.success()
            || serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .is_ok_and(|v| v["status"] == "stopped");
        if stopped {
            break;
        }
        assert!(t0.elapsed() < LIMIT, "runc kill TERM did not stop the pod");
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = t0.elapsed();
    // `deaf` (PID 1 of its namespace, no handler) is SIGKILLed at the end of the grace.
    assert!(took >= Duration::from_secs(9), "took {took:?}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let st = Command::new(&runc).args(["delete", &id]).status().unwrap();
    assert!(st.success());
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sd.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["status"]["phase"], "Failed", "deaf was killed");
    let web = container_status(&status, "web");
    assert_eq!(web["state"]["terminated"]["exitCode"], 0, "{web}");
    assert_eq!(
        container_status(&status, "deaf")["state"]["terminated"]["exitCode"],
        137
    );
    assert!(!sock.exists(), "the socket is gone");
    no_cgroups_named(&format!("podinit_default_{}", p.name));
    no_cgroups_named(&id);
}
