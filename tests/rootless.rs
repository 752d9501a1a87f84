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

/// A directory a test made outside the user's home, removed on drop.
struct Gone(PathBuf);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
        copy_executable(&bin(), &user.bin);
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
        c.uid(self.uid).gid(self.gid);
        self.login(&mut c);
        c
    }

    fn login(&self, c: &mut Command) {
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .env("HOME", &self.home)
            .env("USER", &self.name)
            .env("LOGNAME", &self.name)
            .current_dir(&self.home);
    }

    /// As [`cmd`](Self::cmd), started in the cgroup `leaf`: the child writes itself to its
    /// cgroup.procs while it is still root, then takes the user's ids, as a login lands in
    /// a scope of the subtree systemd delegates to the user.
    fn cmd_in(&self, program: impl AsRef<std::ffi::OsStr>, leaf: &Path) -> Command {
        use std::os::unix::ffi::OsStrExt;
        let mut c = Command::new(program);
        self.login(&mut c);
        let procs =
            std::ffi::CString::new(leaf.join("cgroup.procs").as_os_str().as_bytes()).unwrap();
        let (uid, gid) = (self.uid, self.gid);
        // SAFETY: between fork and exec the closure calls only open, write, close,
        // setgroups, setgid and setuid, and allocates nothing.
        unsafe {
            c.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let wrote = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if !wrote {
                    return Err(err);
                }
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
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
        let layout = self.home.join("busybox-oci");
        oci_layout(&layout, IMAGE, &[], &[]);
        self.chown_tree(&layout);
        let out = self.podinit(&["images", "import", layout.to_str().unwrap()]);
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

    /// Everything under `p` made the user's.
    fn chown_tree(&self, p: &Path) {
        let out = Command::new("chown")
            .args(["-R", &format!("{}:{}", self.uid, self.gid)])
            .arg(p)
            .output()
            .unwrap();
        assert!(out.status.success(), "chown -R {}: {out:?}", p.display());
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

/// A file an image layer adds beyond busybox: path, owner and content.
struct Extra<'a> {
    path: &'a str,
    uid: u64,
    gid: u64,
    text: &'a str,
}

/// An OCI image layout at `dir` named `reference`: one layer of the host's /bin/busybox,
/// its applets and a minimal /etc (as scripts/make-oci-image makes, without Python, which
/// the cgroup v2 VM lacks), and `extra` files; then, unless `upper` is empty, a second
/// layer of those files (whiteouts among them).
fn oci_layout(dir: &Path, reference: &str, extra: &[Extra], upper: &[Extra]) {
    use sha2::Digest;
    let header = |path: &str, kind: tar::EntryType, mode: u32, size: u64| {
        let mut h = tar::Header::new_gnu();
        h.set_path(path).unwrap();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h
    };
    let mut t = tar::Builder::new(Vec::new());
    for d in [
        "bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "tmp", "root",
        "home",
    ] {
        let mut h = header(
            d,
            tar::EntryType::Directory,
            if d == "tmp" { 0o1777 } else { 0o755 },
            0,
        );
        h.set_cksum();
        t.append(&h, std::io::empty()).unwrap();
    }
    let bb = std::fs::read("/bin/busybox")
        .expect("the image is made of /bin/busybox: install busybox-static");
    let mut h = header(
        "bin/busybox",
        tar::EntryType::Regular,
        0o755,
        bb.len() as u64,
    );
    h.set_cksum();
    t.append(&h, &bb[..]).unwrap();
    let list = Command::new("/bin/busybox")
        .arg("--list-full")
        .output()
        .unwrap();
    let mut applets: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .split_whitespace()
        .filter(|a| *a != "bin/busybox")
        .map(str::to_string)
        .collect();
    applets.sort();
    applets.dedup();
    for a in applets {
        let mut h = header(&a, tar::EntryType::Symlink, 0o777, 0);
        h.set_link_name("/bin/busybox").unwrap();
        h.set_cksum();
        t.append(&h, std::io::empty()).unwrap();
    }
    let etc = [
        Extra { path: "etc/passwd", uid: 0, gid: 0, text: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" },
        Extra { path: "etc/group", uid: 0, gid: 0, text: "root:x:0:\ntty:x:5:\nnogroup:x:65534:\n" },
    ];
    for f in etc.iter().chain(extra) {
        let mut h = header(f.path, tar::EntryType::Regular, 0o644, f.text.len() as u64);
        h.set_uid(f.uid);
        h.set_gid(f.gid);
        h.set_cksum();
        t.append(&h, f.text.as_bytes()).unwrap();
    }
    let mut layers = vec![t.into_inner().unwrap()];
    if !upper.is_empty() {
        let mut t = tar::Builder::new(Vec::new());
        for f in upper {
            let mut h = header(f.path, tar::EntryType::Regular, 0o644, f.text.len() as u64);
            h.set_uid(f.uid);
            h.set_gid(f.gid);
            h.set_cksum();
            t.append(&h, f.text.as_bytes()).unwrap();
        }
        layers.push(t.into_inner().unwrap());
    }
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let blob = |data: &[u8]| -> String {
        let hex: String = sha2::Sha256::digest(data)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(blobs.join(&hex), data).unwrap();
        format!("sha256:{hex}")
    };
    let media = "application/vnd.oci.image.";
    let digests: Vec<String> = layers.iter().map(|l| blob(l)).collect();
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": digests},
    }))
    .unwrap();
    let descriptors: Vec<serde_json::Value> = layers
        .iter()
        .zip(&digests)
        .map(|(l, d)| serde_json::json!({"mediaType": format!("{media}layer.v1.tar"), "digest": d, "size": l.len()}))
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": format!("{media}manifest.v1+json"),
        "config": {"mediaType": format!("{media}config.v1+json"), "digest": blob(&config), "size": config.len()},
        "layers": descriptors,
    }))
    .unwrap();
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": format!("{media}manifest.v1+json"),
            "digest": blob(&manifest), "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": reference},
        }],
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
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
    // `flaky` is ready for a moment in its first run too (it has no probe): the wait is
    // for its second.
    let st = u.wait_status(&pod, |s| {
        let cs = s["status"]["containerStatuses"].as_array();
        cs.is_some_and(|cs| {
            cs.iter().all(|c| c["ready"] == true)
                && cs
                    .iter()
                    .any(|c| c["name"] == "flaky" && c["restartCount"].as_u64() >= Some(1))
        })
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
    copy_executable(Path::new("/bin/busybox"), &bin.join("busybox"));
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
    // runc's fs manager on v1 and hybrid, its fs2 manager on v2.
    let words = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "rootless needs no limits + no cgrouppath when no permission is granted for cgroups: "
    } else {
        "cannot set memory limit: container could not join or create cgroup"
    };
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

/// An image whose layer has a file owned by an id beyond the user's subordinate ranges is
/// refused, as rootless podman refuses it: one line naming the entry, the id and the
/// ranges, and the store keeps nothing of it. An id inside the ranges is kept as it is.
#[test]
#[ignore = "needs root: it makes a user"]
fn an_image_file_of_an_unmapped_id_is_refused_naming_it() {
    let mut u = User::new();
    for (i, (uid, gid, kind)) in [(70000, 0, "uid"), (0, 70000, "gid")]
        .into_iter()
        .enumerate()
    {
        let reference = format!("podinit.test/rootless/far{i}:1");
        let layout = u.home.join(format!("far{i}-oci"));
        let far = Extra {
            path: "etc/far",
            uid,
            gid,
            text: "far\n",
        };
        oci_layout(&layout, &reference, &[far], &[]);
        u.chown_tree(&layout);
        let out = u.podinit(&["images", "import", layout.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "import of {reference}: {}",
            text(&out)
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        let want = format!(
            "entry \"etc/far\": owned by {kind} 70000, which the user's namespace does not map \
             (its {kind}s are 0 to 65536: the user's own and its /etc/sub{kind} ranges)"
        );
        assert!(err.contains(&want), "{want:?} not in {err}");
        let ls = u.podinit(&["images", "ls", "-q"]);
        assert!(!text(&ls).contains(&reference), "{}", text(&ls));
    }
    // The last id of the ranges is the user's: kept, and seen so inside a pod.
    let near = Extra {
        path: "etc/near",
        uid: 65536,
        gid: 65536,
        text: "near\n",
    };
    let layout = u.home.join("near-oci");
    oci_layout(&layout, "podinit.test/rootless/near:1", &[near], &[]);
    u.chown_tree(&layout);
    let out = u.podinit(&["images", "import", layout.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let pod = format!("near-{}", u.name);
    let manifest = u.write(
        "near.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: podinit.test/rootless/near:1
    imagePullPolicy: Never
    command: ["stat", "-c", "%u:%g", "/etc/near"]
"#
        ),
    );
    let run = u.start(&manifest);
    let (code, err) = u.wait(run);
    assert_eq!(code, 0, "{err}");
    let log = text(&u.podinit(&["logs", &pod, "app"]));
    assert_eq!(log, "65536:65536\n");
}

/// Without root podinit still runs sealed (`sys::exe`): in the mount namespace its user
/// namespace owns it re-executes itself from a read-only bind of its binary, so a container
/// (whose root is the user outside) cannot write, through /proc/PID/exe, a binary the user
/// owns. The state stays the user's after the re-exec.
#[test]
#[ignore = "needs root: it makes a user"]
fn the_binary_runs_sealed_in_the_users_namespace() {
    let mut u = User::new();
    std::os::unix::fs::chown(&u.bin, Some(u.uid), Some(u.gid)).unwrap();
    u.import_busybox();
    let pod = format!("seal-{}", u.name);
    let manifest = u.write(
        "seal.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sleep", "1000"]
"#
        ),
    );
    let run = u.start(&manifest);
    u.wait_status(&pod, |s| {
        s["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    let ours: Vec<i32> = user_pids(u.uid)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "podinit")
        })
        .collect();
    // The outer process and the supervisor.
    assert!(ours.len() >= 2, "podinit's processes: {ours:?}");
    for p in ours {
        let e = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(format!("/proc/{p}/exe"))
            .expect_err("the binary a rootless podinit runs is writable");
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "process {p}: {e}");
    }
    let stop = u.podinit(&["stop", &pod]);
    assert!(stop.status.success(), "{}", text(&stop));
    let (code, err) = u.wait(run);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
}

/// A cgroup v2 subtree delegated to the user as systemd delegates `user@UID.service`: the
/// directory and its cgroup.procs, cgroup.subtree_control and cgroup.threads are the
/// user's, the root hands it memory, cpu and pids, and the user's commands start in its
/// leaf `login` (a cgroup with processes cannot hand controllers down). Removed, with
/// anything left in it, on drop.
struct Delegated {
    dir: PathBuf,
    leaf: PathBuf,
}

impl Delegated {
    fn new(u: &User) -> Delegated {
        assert!(
            Path::new("/sys/fs/cgroup/cgroup.controllers").exists(),
            "needs cgroup v2 with nothing mounted over it: scripts/vm-v2-test runs this test"
        );
        std::fs::write(
            "/sys/fs/cgroup/cgroup.subtree_control",
            "+memory +cpu +pids",
        )
        .expect("handing memory, cpu and pids down from the root cgroup");
        let dir = PathBuf::from(format!("/sys/fs/cgroup/{}", u.name));
        let leaf = dir.join("login");
        let d = Delegated { dir, leaf };
        for cg in [&d.dir, &d.leaf] {
            std::fs::create_dir(cg).unwrap();
            for f in [
                "",
                "cgroup.procs",
                "cgroup.subtree_control",
                "cgroup.threads",
            ] {
                std::os::unix::fs::chown(cg.join(f), Some(u.uid), Some(u.gid)).unwrap();
            }
        }
        d
    }

    /// The absolute cgroup path, as `--cgroup-parent` and `cgroupsPath` take it.
    fn path(&self) -> String {
        format!("/{}", self.dir.file_name().unwrap().to_string_lossy())
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        kill_and_remove(&self.dir);
    }
}

/// With a cgroup v2 subtree delegated to the user, a rootless pod has its cgroups as
/// root's pod has: no CgroupsUnavailable event, its containers' limits in their cgroups
/// below the subtree, a container over its memory limit OOMKilled, and nothing left in
/// the subtree once the pod is down.
#[test]
#[ignore = "needs root: it makes a user; and cgroup v2 (scripts/vm-v2-test)"]
fn v2_vm_a_delegated_cgroup_gives_the_pod_its_limits() {
    let mut u = User::new();
    let cg = Delegated::new(&u);
    u.import_busybox();
    let pod = format!("dl-{}", u.name);
    let manifest = u.write(
        "dl.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sleep", "1000"]
    resources:
      limits: {{memory: 64Mi, cpu: 500m}}
  - name: hog
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"]
    resources:
      limits: {{memory: 16Mi}}
"#
        ),
    );
    let child = u
        .cmd_in(&u.bin, &cg.leaf)
        .args(["run", "--cgroup-parent", &cg.path()])
        .arg(&manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn podinit run");
    u.children.push(child);
    let run = u.children.len() - 1;
    let state = |s: &serde_json::Value, name: &str, what: &str| {
        s["status"]["containerStatuses"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .is_some_and(|c| c["state"][what].is_object())
    };
    let st = u.wait_status(&pod, |s| {
        state(s, "hog", "terminated") && state(s, "app", "running")
    });
    let hog = &container_status(&st, "hog")["state"]["terminated"];
    assert_eq!(hog["reason"], "OOMKilled", "{st}");
    let events = u.events(&pod);
    assert!(!events.contains("CgroupsUnavailable"), "{events}");
    let app = find_dirs(&cg.dir, "c_app", 3);
    assert_eq!(
        app.len(),
        1,
        "the app's cgroup below {}: {app:?}",
        cg.dir.display()
    );
    assert_eq!(read_trimmed(app[0].join("memory.max")), "67108864");
    assert_eq!(read_trimmed(app[0].join("cpu.max")), "50000 100000");
    let stop = u.podinit(&["stop", &pod]);
    assert!(stop.status.success(), "{}", text(&stop));
    let (code, err) = u.wait(run);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    let left: Vec<_> = std::fs::read_dir(&cg.dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir() && e.path() != cg.leaf)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in the delegated cgroup: {left:?}");
}

/// `podinit runc` rootless in a delegated cgroup v2 subtree, beside runc: a bundle with a
/// `cgroupsPath` there runs with its memory limit, `update` changes it, and `delete` takes
/// the cgroup away.
#[test]
#[ignore = "needs root: it makes a user; and cgroup v2 (scripts/vm-v2-test)"]
fn v2_vm_runc_update_in_a_delegated_cgroup_as_runc() {
    let u = User::new();
    let cg = Delegated::new(&u);
    let runc = PathBuf::from("/usr/sbin/runc");
    assert!(
        runc.exists(),
        "runc is the oracle of this test: install runc"
    );
    let ours = [u.bin.as_path(), Path::new("runc")];
    let theirs = [runc.as_path()];
    for (who, runtime) in [("podinit runc", &ours[..]), ("runc", &theirs[..])] {
        let tag = if runtime.len() == 2 { "ours" } else { "runc" };
        let path = format!("{}/{tag}", cg.path());
        let b = rootless_bundle(
            &u,
            &format!("bundle-{tag}"),
            "exec sleep 1000 </dev/null >/dev/null 2>&1",
            serde_json::json!({"cgroupsPath": path, "resources": {"memory": {"limit": 67108864}}}),
        );
        let state = u.home.join(format!("state-{tag}"));
        let id = format!("up-{tag}");
        let verb = |args: &[&str]| -> std::process::Output {
            let mut c = u.cmd_in(runtime[0], &cg.leaf);
            c.args(&runtime[1..])
                .arg("--root")
                .arg(&state)
                .args(args)
                .current_dir(&b);
            c.output_within(CLIENT_LIMIT)
        };
        let run = verb(&["run", "-d", &id]);
        assert!(run.status.success(), "{who} run: {}", text(&run));
        let dir = cg.dir.join(tag);
        assert_eq!(read_trimmed(dir.join("memory.max")), "67108864", "{who}");
        let up = verb(&["update", "--memory", "33554432", &id]);
        assert!(up.status.success(), "{who} update: {}", text(&up));
        assert_eq!(read_trimmed(dir.join("memory.max")), "33554432", "{who}");
        let del = verb(&["delete", "--force", &id]);
        assert!(del.status.success(), "{who} delete: {}", text(&del));
        assert!(!dir.exists(), "{who} left {}", dir.display());
    }
}

/// A layer's opaque directory (`.wh..wh..opq`) hides the lower layers' files in it without
/// root too: unpacked as `user.overlay.opaque`, which the container's overlay, mounted with
/// `userxattr`, reads.
#[test]
#[ignore = "needs root: it makes a user"]
fn an_opaque_directory_hides_the_lower_layers_files() {
    let mut u = User::new();
    let file = |path, text| Extra {
        path,
        uid: 0,
        gid: 0,
        text,
    };
    let layout = u.home.join("opq-oci");
    oci_layout(
        &layout,
        "podinit.test/rootless/opq:1",
        &[file("etc/conf.d/old", "old\n"), file("etc/kept", "kept\n")],
        &[
            file("etc/conf.d/.wh..wh..opq", ""),
            file("etc/conf.d/new", "new\n"),
        ],
    );
    u.chown_tree(&layout);
    let out = u.podinit(&["images", "import", layout.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let pod = format!("opq-{}", u.name);
    let manifest = u.write(
        "opq.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: podinit.test/rootless/opq:1
    imagePullPolicy: Never
    command: ["sh", "-c", "ls /etc/conf.d; cat /etc/kept"]
"#
        ),
    );
    let run = u.start(&manifest);
    let (code, err) = u.wait(run);
    assert_eq!(code, 0, "{err}");
    let log = text(&u.podinit(&["logs", &pod, "app"]));
    assert_eq!(log, "new\nkept\n");
}

/// The pod's volumes without root: configMap, secret and downwardAPI files and an emptyDir
/// owned by the pod's root, as root's pod has them, read and written by a container that
/// runs as a subordinate id; a hostPath the user can reach, whose files are the user's
/// outside and the pod's root's inside; one it cannot reach fails the container with the
/// path and the kernel's refusal named.
#[test]
#[ignore = "needs root: it makes a user"]
fn volumes_are_the_pods_and_a_host_path_the_users() {
    let mut u = User::new();
    u.import_busybox();
    let shared = u.home.join("shared");
    std::fs::create_dir(&shared).unwrap();
    u.write("shared/from-host", "host-file\n");
    u.chown_tree(&shared);
    // Root's own, mode 0700: the user cannot enter it.
    let closed = PathBuf::from(format!("/root/podinit-rl-{}", u.name));
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let _closed = Gone(closed.clone());
    let pod = format!("vol-{}", u.name);
    let manifest = u.write(
        "vol.yaml",
        &format!(
            r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
data:
  key: cm-value
---
apiVersion: v1
kind: Secret
metadata:
  name: sec
stringData:
  pass: secret-value
---
apiVersion: v1
kind: Pod
metadata:
  name: {pod}
  labels: {{tier: rootless}}
spec:
  restartPolicy: Never
  containers:
  - name: root
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", "for f in /cm/key /sec/pass /info/labels; do cat $f; echo; stat -c '%u:%g' $(readlink -f $f); done; stat -c '%u:%g' /empty; cat /host/from-host; stat -c '%u:%g' /host/from-host; echo made > /host/by-pod"]
    volumeMounts:
    - {{name: cm, mountPath: /cm}}
    - {{name: sec, mountPath: /sec}}
    - {{name: info, mountPath: /info}}
    - {{name: empty, mountPath: /empty}}
    - {{name: host, mountPath: /host}}
  - name: sub
    image: {IMAGE}
    imagePullPolicy: Never
    securityContext: {{runAsUser: 1000, runAsGroup: 1000}}
    command: ["sh", "-c", "id -u; cat /cm/key /sec/pass; echo; echo sub > /empty/sub && stat -c '%u:%g' /empty/sub"]
    volumeMounts:
    - {{name: cm, mountPath: /cm}}
    - {{name: sec, mountPath: /sec}}
    - {{name: empty, mountPath: /empty}}
  volumes:
  - {{name: cm, configMap: {{name: cm}}}}
  - {{name: sec, secret: {{secretName: sec}}}}
  - name: info
    downwardAPI:
      items: [{{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}]
  - {{name: empty, emptyDir: {{}}}}
  - {{name: host, hostPath: {{path: {shared}, type: Directory}}}}
"#,
            shared = shared.display()
        ),
    );
    let run = u.start(&manifest);
    let (code, err) = u.wait(run);
    assert_eq!(code, 0, "{err}");
    let log = text(&u.podinit(&["logs", &pod, "root"]));
    assert_eq!(
        log, "cm-value\n0:0\nsecret-value\n0:0\ntier=\"rootless\"\n0:0\n0:0\nhost-file\n0:0\n",
        "{err}"
    );
    let sub = text(&u.podinit(&["logs", &pod, "sub"]));
    assert_eq!(sub, "1000\ncm-valuesecret-value\n1000:1000\n", "{err}");
    // Made by the pod's root: the user's own file outside.
    let made = std::fs::metadata(shared.join("by-pod")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&made), u.uid);

    let pod2 = format!("vol2-{}", u.name);
    let manifest = u.write(
        "vol2.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod2}
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["true"]
    volumeMounts: [{{name: host, mountPath: /host}}]
  volumes:
  - {{name: host, hostPath: {{path: {closed}}}}}
"#,
            closed = closed.display()
        ),
    );
    let run = u.start(&manifest);
    let (code, err) = u.wait(run);
    let st = u.status(&pod2);
    let all = format!(
        "exit {code}: {err}\nstatus: {st}\nevents: {}",
        u.events(&pod2)
    );
    assert_ne!(code, 0, "{all}");
    assert!(
        all.contains(&closed.display().to_string()),
        "the path is not named: {all}"
    );
    assert!(all.contains("ermission denied"), "{all}");
}

/// With `$XDG_RUNTIME_DIR` the state and sockets go to `$XDG_RUNTIME_DIR/podinit` (made
/// 0700), where the client commands, with the same environment, find the pod; nothing
/// goes to `/tmp/podinit-<uid>`.
#[test]
#[ignore = "needs root: it makes a user"]
fn the_state_is_under_xdg_runtime_dir() {
    let mut u = User::new();
    u.import_busybox();
    let xdg = PathBuf::from(format!("/tmp/podinit-rl-xdg-{}", u.name));
    std::fs::create_dir(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&xdg, Some(u.uid), Some(u.gid)).unwrap();
    let _xdg = Gone(xdg.clone());
    let pod = format!("xdg-{}", u.name);
    let manifest = u.write(
        "xdg.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", "echo xdg-up; exec sleep 1000"]
"#
        ),
    );
    let child = u
        .cmd(&u.bin)
        .env("XDG_RUNTIME_DIR", &xdg)
        .arg("run")
        .arg(&manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn podinit run");
    u.children.push(child);
    let run = u.children.len() - 1;
    let root = xdg.join("podinit");
    let dir = root.join(format!("default_{pod}"));
    let deadline = Instant::now() + LIMIT;
    while !std::fs::read_to_string(dir.join("status.json")).is_ok_and(|s| s.contains("\"running\""))
    {
        assert!(
            Instant::now() < deadline,
            "no running status under {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let meta = std::fs::metadata(&root).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), u.uid);
    let sockets: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_type()
                .is_ok_and(|t| std::os::unix::fs::FileTypeExt::is_socket(&t))
        })
        .map(|e| e.file_name())
        .collect();
    assert!(!sockets.is_empty(), "no socket in {}", dir.display());
    assert!(
        !u.state_root().exists(),
        "{} made beside $XDG_RUNTIME_DIR",
        u.state_root().display()
    );
    let client = |args: &[&str]| {
        u.cmd(&u.bin)
            .env("XDG_RUNTIME_DIR", &xdg)
            .args(args)
            .output_within(CLIENT_LIMIT)
    };
    let status = client(&["status", &pod]);
    assert!(text(&status).contains("Running"), "{}", text(&status));
    let logs = client(&["logs", &pod, "app"]);
    assert_eq!(text(&logs), "xdg-up\n");
    assert!(text(&client(&["pods"])).contains(&pod));
    // Without the variable the client looks in /tmp/podinit-<uid> and finds no such pod.
    let lost = u.podinit(&["status", &pod]);
    assert!(!lost.status.success(), "{}", text(&lost));
    let stop = client(&["stop", &pod]);
    assert!(stop.status.success(), "{}", text(&stop));
    let (code, err) = u.wait(run);
    assert!(code == 0 || code == 1, "exit {code}: {err}");
}

/// A user without subordinate ids: the pod's user namespace maps the user's own id alone
/// (to root), said once on stderr however many containers start; the pod runs.
#[test]
#[ignore = "needs root: it makes a user"]
fn without_subordinate_ids_only_the_users_own_id_is_mapped() {
    let mut u = User::new();
    for (file, flag) in [
        ("/etc/subuid", "--del-subuids"),
        ("/etc/subgid", "--del-subgids"),
    ] {
        let line = std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .find(|l| l.starts_with(&format!("{}:", u.name)))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("{} has no range in {file}", u.name));
        let f: Vec<u64> = line
            .split(':')
            .skip(1)
            .map(|v| v.parse().unwrap())
            .collect();
        let out = Command::new("usermod")
            .args([flag, &format!("{}-{}", f[0], f[0] + f[1] - 1), &u.name])
            .output_within(CLIENT_LIMIT);
        assert!(out.status.success(), "usermod {flag}: {}", text(&out));
        assert!(
            !std::fs::read_to_string(file)
                .unwrap()
                .contains(&format!("{}:", u.name)),
            "{file} still has {}",
            u.name
        );
    }
    u.import_busybox();
    let pod = format!("one-{}", u.name);
    let manifest = u.write(
        "one.yaml",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
spec:
  restartPolicy: Never
  initContainers:
  - name: init
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["true"]
  containers:
  - name: a
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["sh", "-c", "id -u; cat /proc/self/uid_map /proc/self/gid_map"]
  - name: b
    image: {IMAGE}
    imagePullPolicy: Never
    command: ["true"]
"#
        ),
    );
    let run = u.start(&manifest);
    let (code, err) = u.wait(run);
    assert_eq!(code, 0, "{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("no subordinate ids"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("maps the user's own id only"), "{err}");
    let log = text(&u.podinit(&["logs", &pod, "a"]));
    let maps: Vec<Vec<&str>> = log
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(maps[0], ["0"], "{log}");
    assert_eq!(maps[1], ["0", &u.uid.to_string(), "1"], "{log}");
    assert_eq!(maps[2], ["0", &u.gid.to_string(), "1"], "{log}");
    assert_eq!(maps.len(), 3, "{log}");
}

/// `podinit runc` without root may not mount its binary read-only: as runc 1.2 does, it
/// runs again from a sealed copy in memory, which is what the container's process runs
/// until it execs (it waits at the exec fifo after `create`).
#[test]
#[ignore = "needs root: it makes a user"]
fn runc_without_root_runs_from_a_sealed_copy() {
    let u = User::new();
    let b = rootless_bundle(&u, "sealed", "exit 0", serde_json::json!({}));
    let root = u.home.join("state-sealed");
    let runc = |args: &[&str]| {
        u.cmd(&u.bin)
            .arg("runc")
            .arg("--root")
            .arg(&root)
            .args(args)
            .current_dir(&b)
            .stdin(Stdio::null())
            .output_within(CLIENT_LIMIT)
    };
    // stdio the container keeps: not the pipes output_within reads to their end.
    let create = u
        .cmd(&u.bin)
        .arg("runc")
        .arg("--root")
        .arg(&root)
        .args(["create", "rl-sealed"])
        .current_dir(&b)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(create.success(), "podinit runc create as {}", u.name);
    let state: serde_json::Value =
        serde_json::from_slice(&runc(&["state", "rl-sealed"]).stdout).unwrap();
    let pid = state["pid"].as_i64().unwrap();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    let file = std::fs::File::open(format!("/proc/{pid}/exe")).unwrap();
    // SAFETY: fcntl on an fd we own.
    let seals = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_GET_SEALS) };
    let del = runc(&["delete", "--force", "rl-sealed"]);
    assert!(del.status.success(), "{}", text(&del));
    assert!(
        exe.to_string_lossy().starts_with("/memfd:"),
        "the container's process runs {}",
        exe.display()
    );
    let want = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
    assert_eq!(seals & want, want, "seals {seals:#x} of {}", exe.display());
}
