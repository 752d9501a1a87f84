//! podinit without root (docs/interface.md §Without root): each test makes a real
//! unprivileged user (useradd, which gives it subordinate id ranges), runs `podinit images`,
//! `podinit run`, the client commands and `podinit runc` as that user, and removes the
//! user, its processes and its files on drop, also when the test fails.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(90);
const IMAGE: &str = "podinit.test/rootless/busybox:1";

/// A user made for one test, with subordinate ids; gone on drop.
struct User {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
    /// The podinit binary, copied where the user may run it (target/ is root's alone).
    bin: PathBuf,
    /// Pods started in the background, killed on drop if still running.
    children: Vec<Child>,
}

impl User {
    fn new() -> User {
        // No bundles: the user runs images of its own store.
        assert!(
            is_root(),
            "the rootless tests make a user: run them as root"
        );
        let mut b = [0u8; 3];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut b)
            .unwrap();
        let name = format!("pirl{:02x}{:02x}{:02x}", b[0], b[1], b[2]);
        let out = Command::new("useradd")
            .args(["-m", "-s", "/bin/sh", &name])
            .output_within(CLIENT_LIMIT);
        assert!(
            out.status.success(),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let user = User {
            uid: id("-u"),
            gid: id("-g"),
            home: PathBuf::from(format!("/home/{name}")),
            bin: PathBuf::from(format!("/home/{name}/podinit")),
            name,
            children: Vec::new(),
        };
        std::fs::copy(bin(), &user.bin).unwrap();
        std::fs::set_permissions(&user.bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let subuid = std::fs::read_to_string("/etc/subuid").unwrap();
        assert!(
            subuid
                .lines()
                .any(|l| l.starts_with(&format!("{}:", user.name))),
            "useradd gave {} no subordinate ids (SUB_UID_COUNT in /etc/login.defs)",
            user.name
        );
        user
    }

    /// `program` as this user: its ids, no supplementary groups (std drops them), a login's
    /// environment without XDG_RUNTIME_DIR (as `su` gives), in its home.
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.uid(self.uid)
            .gid(self.gid)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("HOME", &self.home)
            .env("USER", &self.name)
            .env("LOGNAME", &self.name)
            .current_dir(&self.home);
        c
    }

    fn podinit(&self, args: &[&str]) -> std::process::Output {
        self.cmd(&self.bin).args(args).output_within(CLIENT_LIMIT)
    }

    /// Where its pods' state is: /tmp/podinit-<uid> without XDG_RUNTIME_DIR.
    fn state_root(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/podinit-{}", self.uid))
    }

    /// A file in its home, owned by it.
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.home.join(rel);
        std::fs::write(&p, text).unwrap();
        std::os::unix::fs::chown(&p, Some(self.uid), Some(self.gid)).unwrap();
        p
    }

    /// The busybox image imported into its own store (`podinit images import` as the user,
    /// no `--images`): ~/.local/share/podinit/images.
    fn import_busybox(&self) {
        let archive = self.home.join("busybox.tar");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let made = Command::new(root.join("scripts/make-oci-image"))
            .arg(&archive)
            .arg(IMAGE)
            .output_within(CLIENT_LIMIT);
        assert!(made.status.success(), "make-oci-image: {made:?}");
        std::os::unix::fs::chown(&archive, Some(self.uid), Some(self.gid)).unwrap();
        let out = self.podinit(&["images", "import", archive.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "podinit images import as {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let store = self.home.join(".local/share/podinit/images");
        assert!(store.is_dir(), "no per-user store at {}", store.display());
        let ls = self.podinit(&["images", "ls", "-q"]);
        assert!(
            String::from_utf8_lossy(&ls.stdout).contains(IMAGE),
            "images ls: {ls:?}"
        );
    }

    /// `podinit run MANIFEST` in the background.
    fn start(&mut self, manifest: &Path) -> usize {
        let child = self
            .cmd(&self.bin)
            .arg("run")
            .arg(manifest)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn podinit run");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Wait (bounded) for the run `i` to end: its exit status and stderr.
    fn wait(&mut self, i: usize) -> (i32, String) {
        let c = &mut self.children[i];
        let deadline = Instant::now() + LIMIT;
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "podinit run did not end");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
        (status.code().unwrap_or(-1), err)
    }

    /// The pod's status.json under the user's state root.
    fn status(&self, pod: &str) -> serde_json::Value {
        std::fs::read(self.state_root().join(format!("default_{pod}/status.json")))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    fn wait_status(
        &self,
        pod: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + LIMIT;
        loop {
            let s = self.status(pod);
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "status of {pod} never matched: {s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn events(&self, pod: &str) -> String {
        std::fs::read_to_string(
            self.state_root()
                .join(format!("default_{pod}/events.jsonl")),
        )
        .unwrap_or_default()
    }
}

impl Drop for User {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Anything of this user's still running (a pod whose run was killed leaves its
        // supervisor to die with it, but not at once): only the ids this test made.
        for _ in 0..100 {
            let left = user_pids(self.uid);
            if left.is_empty() {
                break;
            }
            for p in left {
                // SAFETY: kill with a pid and a signal.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("userdel").args(["-r", &self.name]).output();
        let _ = std::fs::remove_dir_all(self.state_root());
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// Processes whose real uid is `uid` (outside any namespace: the user's own).
fn user_pids(uid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let real = st
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next()?.parse::<u32>().ok());
        if real == Some(uid) {
            out.push(pid);
        }
    }
    out
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A pod with an init container, a sidecar, an app with a readiness probe and a limit,
/// and a container that fails once: run as the user from its own image store; status,
/// logs, exec and events through the client commands as the user; then `stop`.
#[test]
#[ignore = "needs root: it makes a user"]
fn a_pod_runs_as_an_unprivileged_user() {
    let mut u = User::new();
    u.import_busybox();
    let pod = format!("rl-{}", u.name);
    let manifest = u.write(
        "pod.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: init
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", "echo init-ran > /work/init; id -u; cat /proc/self/uid_map"]
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: side
    image: {IMAGE}
    imagePullPolicy: Never
    restartPolicy: Always
    command: ["sh", "-c", "echo side-up; exec sleep 1000"]
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", "cat /work/init; echo app-up; ip -o link 2>/dev/null | cut -d: -f2; touch /tmp/ok; exec sleep 1000"]
    resources:
      limits: {{memory: 64Mi}}
    readinessProbe:
      exec: {{command: ["test", "-e", "/tmp/ok"]}}
      periodSeconds: 1
    volumeMounts: [{{name: work, mountPath: /work}}]
  - name: flaky
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", "if [ -e /work/flaked ]; then exec sleep 1000; fi; touch /work/flaked; exit 3"]
    volumeMounts: [{{name: work, mountPath: /work}}]
  volumes:
  - name: work
    emptyDir: {{}}
"#
        ),
    );
    let run = u.start(&manifest);
    let st = u.wait_status(&pod, |s| {
        let cs = s["status"]["containerStatuses"].as_array();
        cs.is_some_and(|cs| cs.iter().all(|c| c["ready"] == true))
    });
    assert_eq!(st["status"]["phase"], "Running", "{st}");
    let flaky = container_status(&st, "flaky");
    assert_eq!(flaky["restartCount"], 1, "{flaky}");
    assert_eq!(flaky["lastState"]["terminated"]["exitCode"], 3, "{flaky}");
    // The state is the user's, private.
    let root = u.state_root();
    let meta = std::fs::metadata(&root).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), u.uid);

    // The client commands find the pod as the user does, without flags.
    let status = u.podinit(&["status", &pod]);
    assert!(status.status.success(), "{}", text(&status));
    assert!(text(&status).contains("Running"), "{}", text(&status));
    let logs = u.podinit(&["logs", &pod, "init"]);
    let init_log = text(&logs);
    // Root in the pod, the user outside: its own id mapped to 0, the subordinate ids from 1.
    assert!(init_log.starts_with("0\n"), "{init_log}");
    let map: Vec<Vec<String>> = init_log
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    assert_eq!(map[0], ["0", &u.uid.to_string(), "1"], "{init_log}");
    assert_eq!(map[1][0], "1", "{init_log}");
    assert_eq!(map[1][2], "65536", "{init_log}");
    let app_log = text(&u.podinit(&["logs", &pod, "app"]));
    assert!(app_log.contains("init-ran\napp-up"), "{app_log}");
    // Its own network namespace, loopback only.
    assert_eq!(
        app_log.lines().skip(2).map(str::trim).collect::<Vec<_>>(),
        ["lo"],
        "{app_log}"
    );
    let side_log = text(&u.podinit(&["logs", &pod, "side"]));
    assert!(side_log.contains("side-up"), "{side_log}");
    let exec = u.podinit(&[
        "exec",
        &pod,
        "app",
        "--",
        "sh",
        "-c",
        "id -u; echo hi > /tmp/x; cat /tmp/x",
    ]);
    assert!(exec.status.success(), "{}", text(&exec));
    assert_eq!(String::from_utf8_lossy(&exec.stdout), "0\nhi\n");

    // Without cgroups here (hybrid, nothing delegated): said once, naming the limit.
    let events = u.events(&pod);
    if !Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        let line = events
            .lines()
            .find(|l| l.contains("CgroupsUnavailable"))
            .unwrap_or_else(|| panic!("no CgroupsUnavailable event: {events}"));
        assert!(line.contains("\"Warning\""), "{line}");
        assert!(
            line.contains("not enforced: container \\\"app\\\": limits.memory=64Mi"),
            "{line}"
        );
    }

    let stop = u.podinit(&["stop", &pod]);
    assert!(stop.status.success(), "{}", text(&stop));
    let (code, err) = u.wait(run);
    // Stopped by request, as kubelet deletes a pod: its phase stays what the containers say.
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    let end = u.status(&pod);
    for c in end["status"]["containerStatuses"].as_array().unwrap() {
        assert!(c["state"]["terminated"].is_object(), "{c}");
    }
    // Nothing of the pod runs any more.
    let deadline = Instant::now() + LIMIT;
    while !user_pids(u.uid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes left: {:?}",
            user_pids(u.uid)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // `pods` lists the ended pod, as root's does.
    let pods = u.podinit(&["pods"]);
    assert!(text(&pods).contains(&pod), "{}", text(&pods));
}

/// What a user cannot have is refused with the field named, exit 2, nothing made.
#[test]
#[ignore = "needs root: it makes a user"]
fn what_needs_root_is_refused_naming_the_field() {
    let u = User::new();
    let cases = [
        (
            "containers:\n  - name: a\n    image: IMAGE\n    securityContext: {privileged: true}\n",
            "spec.containers[0].securityContext.privileged: ",
        ),
        (
            "hostPID: true\n  containers:\n  - name: a\n    image: IMAGE\n",
            "spec.hostPID: ",
        ),
        (
            "hostIPC: true\n  containers:\n  - name: a\n    image: IMAGE\n",
            "spec.hostIPC: ",
        ),
    ];
    for (i, (spec, want)) in cases.iter().enumerate() {
        let pod = format!("rf{i}-{}", u.name);
        let m = u.write(
            &format!("refuse{i}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\nspec:\n  {}",
                spec.replace("IMAGE", IMAGE)
            ),
        );
        let out = u.cmd(&u.bin).arg("run").arg(&m).output_within(CLIENT_LIMIT);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{want:?} not in {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            !u.state_root().join(format!("default_{pod}")).exists(),
            "state dir made for a refused pod"
        );
    }
}

/// A busybox bundle of the user's own (its files the user's), with `spec --rootless`'s
/// config running `script`, the same for podinit and runc.
fn rootless_bundle(u: &User, dir: &str, script: &str, extra: serde_json::Value) -> PathBuf {
    let b = u.home.join(dir);
    let bin = b.join("rootfs/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/busybox", bin.join("busybox")).unwrap();
    for a in ["sh", "id", "cat", "hostname", "ls", "test"] {
        std::os::unix::fs::symlink("busybox", bin.join(a)).unwrap();
    }
    let out = Command::new("chown")
        .args(["-R", &format!("{}:{}", u.uid, u.gid)])
        .arg(&b)
        .output()
        .unwrap();
    assert!(out.status.success());
    let spec = u
        .cmd(&u.bin)
        .args(["runc", "spec", "--rootless"])
        .current_dir(&b)
        .output_within(CLIENT_LIMIT);
    assert!(spec.status.success(), "{}", text(&spec));
    let path = b.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["process"]["terminal"] = false.into();
    config["process"]["args"] = serde_json::json!(["sh", "-c", script]);
    if let serde_json::Value::Object(m) = extra {
        for (k, v) in m {
            config["linux"][k] = v;
        }
    }
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    b
}

/// `RUNTIME --root ROOT run ID` as the user in `bundle`.
fn run_as(
    u: &User,
    runtime: &[&Path],
    root: &Path,
    bundle: &Path,
    id: &str,
) -> std::process::Output {
    let mut c = u.cmd(runtime[0]);
    c.args(&runtime[1..])
        .arg("--root")
        .arg(root)
        .args(["run", id])
        .current_dir(bundle);
    c.output_within(CLIENT_LIMIT)
}

/// The same rootless bundle under `podinit runc` and runc's `--rootless=auto` (runc 1.1 is
/// the oracle): the same ids and maps inside, the same exit status; and a memory limit
/// that needs a cgroup the user cannot make is refused by both with runc's words.
#[test]
#[ignore = "needs root: it makes a user"]
fn a_rootless_bundle_runs_as_runc_runs_it() {
    let u = User::new();
    let runc = PathBuf::from("/usr/sbin/runc");
    assert!(
        runc.exists(),
        "runc is the oracle of this test: install runc"
    );
    let script = "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; hostname; \
                  test -c /dev/null && echo null-ok; exit 7";
    let b = rootless_bundle(&u, "bundle", script, serde_json::json!({}));
    let ours = run_as(
        &u,
        &[&u.bin, Path::new("runc")],
        &u.home.join("state-podinit"),
        &b,
        "rl-ours",
    );
    let theirs = run_as(&u, &[&runc], &u.home.join("state-runc"), &b, "rl-runc");
    assert_eq!(theirs.status.code(), Some(7), "runc: {}", text(&theirs));
    assert_eq!(ours.status.code(), Some(7), "podinit runc: {}", text(&ours));
    let out = String::from_utf8_lossy(&ours.stdout).into_owned();
    assert_eq!(out, String::from_utf8_lossy(&theirs.stdout), "stdout");
    assert!(
        out.starts_with(&format!("0\n0\n{:>10}{:>11}{:>11}\n", 0, u.uid, 1)),
        "{out}"
    );
    assert!(out.ends_with("runc\nnull-ok\n"), "{out}");

    let limited = rootless_bundle(
        &u,
        "limited",
        "true",
        serde_json::json!({"resources": {"memory": {"limit": 33554432}}}),
    );
    let ours = run_as(
        &u,
        &[&u.bin, Path::new("runc")],
        &u.home.join("state-podinit"),
        &limited,
        "rl-ours2",
    );
    let theirs = run_as(
        &u,
        &[&runc],
        &u.home.join("state-runc"),
        &limited,
        "rl-runc2",
    );
    let words = "cannot set memory limit: container could not join or create cgroup";
    for (who, o) in [("runc", &theirs), ("podinit runc", &ours)] {
        assert_eq!(o.status.code(), Some(1), "{who}: {}", text(o));
        assert!(text(o).contains(words), "{who}: {}", text(o));
    }
    // Nothing is left in either state root.
    for root in ["state-podinit", "state-runc"] {
        let left: Vec<_> = std::fs::read_dir(u.home.join(root))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{root}: {left:?}");
    }
}

/// `hostNetwork: true` shares the user's network namespace: the container sees the host's
/// links, and its /sys (which a user namespace may not mount for that namespace) is the
/// host's, bound.
#[test]
#[ignore = "needs root: it makes a user"]
fn host_network_is_the_users() {
    let mut u = User::new();
    u.import_busybox();
    let pod = format!("hn-{}", u.name);
    let manifest = u.write(
        "hn.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  restartPolicy: Never
  hostNetwork: true
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", "readlink /proc/self/ns/net; test -d /sys/class/net/lo && echo sys-ok"]
"#
        ),
    );
    let run = u.start(&manifest);
    let (code, err) = u.wait(run);
    assert_eq!(code, 0, "{err}");
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let log = text(&u.podinit(&["logs", &pod, "app"]));
    assert_eq!(log, format!("{}\nsys-ok\n", ours.display()), "{log}");
}
