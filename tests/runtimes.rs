//! podinit under a higher-level runtime: PID-1 mode as the process of the
//! sandbox bundle (`scripts/make-sandbox-bundle`), run by runc; status read from the host
//! through the socket; stopped with the runtime's kill; nothing left behind.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn runc() -> PathBuf {
    install("runc", "runc");
    PathBuf::from("runc")
}

/// Installs Debian's `package` when `command` is missing. The tests run in parallel and
/// dpkg takes one installer at a time: one test installs while the others wait here, and
/// apt waits for a lock another process holds.
fn install(command: &str, package: &str) {
    static APT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = APT.lock().unwrap_or_else(|e| e.into_inner());
    if Command::new(command).arg("--version").output().is_ok() {
        return;
    }
    let ok = Command::new("apt-get")
        .args([
            "install",
            "-y",
            "--no-install-recommends",
            "-o",
            "DPkg::Lock::Timeout=300",
            package,
        ])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "installing {package}");
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
            .output_within(CLIENT_LIMIT);
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

/// `runc run -d` of the bundle, stdio detached.
fn runc_detached(runc: &Path, bundle: &Path, id: &str) {
    let st = Command::new(runc)
        .args(["run", "-d", "--bundle"])
        .arg(bundle)
        .arg(id)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "runc run -d");
}

/// Wait (bounded) until runc says the container stopped.
fn runc_wait_stopped(runc: &Path, id: &str) {
    let t0 = Instant::now();
    loop {
        let out = Command::new(runc)
            .args(["state", id])
            .output_within(CLIENT_LIMIT);
        let stopped = !out.status.success()
            || serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .is_ok_and(|v| v["status"] == "stopped");
        if stopped {
            return;
        }
        assert!(t0.elapsed() < LIMIT, "{id} did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
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
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn runc_runs_the_sandbox_bundle_to_completion() {
    require_root();
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
        .output_within(CLIENT_LIMIT);
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
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn runc_kill_stops_a_long_running_pod_within_its_grace_period() {
    require_root();
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
    runc_detached(&runc, &bundle, &id);
    let sd = state.join(format!("default_{}", p.name));
    let sock = sd.join("pod.sock");
    // From the host, through the socket.
    let deadline = Instant::now() + LIMIT;
    loop {
        let out = Command::new(bin())
            .args(["status", "-o", "json", "--socket"])
            .arg(&sock)
            .output_within(CLIENT_LIMIT);
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
    runc_wait_stopped(&runc, &id);
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

/// A containerd of the test's own: private socket, root and state directories.
struct Containerd {
    dir: PathBuf,
    daemon: std::process::Child,
}

impl Containerd {
    fn start(dir: &Path) -> Containerd {
        install("containerd", "containerd");
        let dir = dir.join("containerd");
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let cfg = format!(
            "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n[grpc]\n  address = \"{d}/c.sock\"\n[ttrpc]\n  address = \"{d}/c.sock.ttrpc\"\n[debug]\n  address = \"\"\n[metrics]\n  address = \"\"\n"
        );
        std::fs::write(dir.join("config.toml"), cfg).unwrap();
        let daemon = Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .unwrap();
        let c = Containerd { dir, daemon };
        let deadline = Instant::now() + LIMIT;
        while !c.ctr(&["version"]).status.success() {
            assert!(Instant::now() < deadline, "containerd did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }

    fn ctr(&self, args: &[&str]) -> std::process::Output {
        Command::new("ctr")
            .arg("--address")
            .arg(self.dir.join("c.sock"))
            .args(args)
            .stdin(Stdio::null())
            .output_within(CLIENT_LIMIT)
    }

    fn task_status(&self, id: &str) -> String {
        let out = self.ctr(&["task", "ls"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
            .unwrap_or_default()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.daemon.id() as i32, libc::SIGTERM) };
        let _ = self.daemon.wait();
    }
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn containerd_runs_the_sandbox_and_ctr_task_kill_stops_it() {
    require_root();
    let p = TestPod::new(
        "ctrd",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - {name: web, image: busybox, command: ["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"]}
"#,
    );
    let state = p.dir.join("run");
    let bundle = sandbox_bundle(&p, &state);
    let c = Containerd::start(&p.dir);
    let id = format!("it-{}", p.name);
    let mount = |src: &Path, dst: &str, opts: &str| {
        format!("type=bind,src={},dst={dst},options={opts}", src.display())
    };
    let oci = Path::new(env!("CARGO_MANIFEST_DIR")).join("oci-bundles");
    let mounts = [
        mount(Path::new("/sys/fs/cgroup"), "/sys/fs/cgroup", "rbind:rw"),
        mount(&bin(), "/podinit", "bind:ro"),
        mount(&p.manifest, "/etc/podinit/pod.yaml", "bind:ro"),
        mount(&oci, "/oci-bundles", "rbind:ro"),
        mount(&state, "/run/podinit", "rbind:rw"),
    ];
    let mut args: Vec<String> = ["run", "-d", "--rootfs", "--privileged"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for m in &mounts {
        args.push("--mount".into());
        args.push(m.clone());
    }
    args.push(bundle.join("rootfs").display().to_string());
    args.push(id.clone());
    for a in [
        "/podinit",
        "run",
        "/etc/podinit/pod.yaml",
        "--bundles",
        "/oci-bundles",
    ] {
        args.push(a.into());
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = c.ctr(&argv);
    assert!(
        out.status.success(),
        "ctr run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sd = state.join(format!("default_{}", p.name));
    let sock = sd.join("pod.sock");
    let deadline = Instant::now() + LIMIT;
    loop {
        let out = Command::new(bin())
            .args(["status", "-o", "json", "--socket"])
            .arg(&sock)
            .output_within(CLIENT_LIMIT);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if container_status(&v, "web")["state"]["running"].is_object() {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the pod never ran under containerd"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let t0 = Instant::now();
    assert!(c.ctr(&["task", "kill", &id]).status.success());
    while c.task_status(&id) != "STOPPED" {
        assert!(t0.elapsed() < LIMIT, "ctr task kill did not stop the pod");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "graceful: {:?}",
        t0.elapsed()
    );
    assert!(c.ctr(&["task", "delete", &id]).status.success());
    assert!(c.ctr(&["container", "delete", &id]).status.success());
    assert_eq!(c.task_status(&id), "", "containerd's task is gone");
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sd.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["status"]["phase"], "Succeeded");
    assert!(!sock.exists());
    no_cgroups_named(&format!("podinit_default_{}", p.name));
    no_cgroups_named(&id);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn runc_kill_sigkill_takes_the_whole_pod_down() {
    require_root();
    let runc = runc();
    let p = TestPod::new(
        "runckill9",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers:
  - {name: a, image: busybox, command: ["sleep", "1000"]}
  - {name: b, image: busybox, command: ["sleep", "1000"]}
"#,
    );
    let state = p.dir.join("run");
    let bundle = sandbox_bundle(&p, &state);
    let id = format!("podinit-it-{}", p.name);
    let _guard = RuncContainer(id.clone());
    runc_detached(&runc, &bundle, &id);
    let status_file = state.join(format!("default_{}/status.json", p.name));
    let deadline = Instant::now() + LIMIT;
    loop {
        let v: serde_json::Value = std::fs::read(&status_file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let cs = v["status"]["containerStatuses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if cs.len() == 2 && cs.iter().all(|c| c["state"]["running"].is_object()) {
            break;
        }
        assert!(Instant::now() < deadline, "the pod never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(Command::new(&runc)
        .args(["kill", &id, "KILL"])
        .status()
        .unwrap()
        .success());
    runc_wait_stopped(&runc, &id);
    assert!(Command::new(&runc)
        .args(["delete", &id])
        .status()
        .unwrap()
        .success());
    // The kernel took the pid namespace down; runc removed the sandbox's cgroup with the
    // pod's tree inside it.
    no_cgroups_named(&format!("podinit_default_{}", p.name));
    no_cgroups_named(&id);
}
