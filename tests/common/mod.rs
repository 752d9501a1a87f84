//! Shared harness of the integration tests: run the real `podinit` binary as root on the
//! busybox bundles, each pod with a unique name and state dir, a bounded time, and a check
//! that nothing was left behind. Cleanup runs on drop, so also when a test fails.

#![allow(dead_code)]

pub mod runc;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() == 0 }
}

/// Integration tests need root and the bundles made by `scripts/make-bundles`. Each is
/// `#[ignore]`d with that reason, so a developer's plain `cargo test` lists it as ignored
/// instead of passing it unrun; `scripts/test` runs them as root with `--include-ignored`.
/// Called first in each: with `--include-ignored` but without root or the bundles, the test
/// fails here instead of passing.
pub fn require_root() {
    assert!(
        is_root(),
        "integration tests need root: run scripts/test, or as root \
         cargo test --tests -- --include-ignored"
    );
    assert!(
        bundles().join("busybox/rootfs/bin/busybox").exists(),
        "{} is missing: run scripts/make-bundles",
        bundles().join("busybox/rootfs").display()
    );
}

pub fn bundles() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("oci-bundles")
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_podinit"))
}

/// `from` copied to `to` as an executable (mode 0755) by a `cp` process of its own. Copied
/// here, the file's writable descriptor would be ours for a moment, and a child that
/// another test thread forks meanwhile holds it until its exec: running the copy then
/// fails with ETXTBSY ("Text file busy").
pub fn copy_executable(from: &Path, to: &Path) {
    let status = Command::new("cp")
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("running cp {} {}: {e}", from.display(), to.display()));
    assert!(
        status.success(),
        "cp {} {}: {status}",
        from.display(),
        to.display()
    );
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(to, mode).unwrap();
}

pub fn unique(prefix: &str) -> String {
    let mut b = [0u8; 4];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    format!("{prefix}-{:08x}", u32::from_le_bytes(b))
}

/// One pod under test.
pub struct TestPod {
    pub name: String,
    pub dir: PathBuf,
    pub manifest: PathBuf,
    pub state: PathBuf,
    child: Option<Child>,
}

/// What a finished `podinit run` left.
pub struct Outcome {
    pub code: i32,
    pub stderr: String,
    pub status: serde_json::Value,
}

impl TestPod {
    /// `yaml` may use `NAME` for the pod's unique name.
    pub fn new(prefix: &str, yaml: &str) -> TestPod {
        let name = unique(prefix);
        let dir = std::env::temp_dir().join(format!("podinit-it-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = dir.join("pod.yaml");
        std::fs::write(&manifest, yaml.replace("NAME", &name)).unwrap();
        let state = dir.join("state");
        TestPod {
            name,
            dir,
            manifest,
            state,
            child: None,
        }
    }

    /// Keep the state dir on a tmpfs of its own, as the default `/run/podinit/…` is on most
    /// machines: what podinit writes there (logs) is then memory.
    pub fn state_on_tmpfs(&mut self, size: &str) {
        let mnt = self.dir.join("tmpfs");
        std::fs::create_dir_all(&mnt).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a tmpfs at {}", mnt.display());
        self.state = mnt.join("state");
    }

    pub fn command(&self) -> Command {
        let mut c = Command::new(bin());
        c.arg("run")
            .arg(&self.manifest)
            .arg("--bundles")
            .arg(bundles())
            .arg("--state-dir")
            .arg(&self.state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    pub fn start(&mut self) {
        self.start_with(self.command());
    }

    /// Start with a command made by `command()` and given more options.
    pub fn start_with(&mut self, mut cmd: Command) {
        self.child = Some(cmd.spawn().expect("spawn podinit"));
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: our own child, not yet reaped.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// Wait (bounded) for the run to end.
    pub fn wait(&mut self, limit: Duration) -> Outcome {
        let mut child = self.child.take().expect("started");
        let what = format!("podinit run of {}", self.name);
        let status = wait_within(&mut child, limit, &what);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status_json = std::fs::read(self.state.join("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null);
        Outcome {
            code: status.code().unwrap_or(-1),
            stderr,
            status: status_json,
        }
    }

    /// Run to the end.
    pub fn run(&mut self, limit: Duration) -> Outcome {
        self.start();
        self.wait(limit)
    }

    /// Poll status.json until `pred` holds (bounded).
    pub fn wait_status(
        &self,
        limit: Duration,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + limit;
        let mut last = serde_json::Value::Null;
        loop {
            if let Some(v) = std::fs::read(self.state.join("status.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            {
                if pred(&v) {
                    return v;
                }
                last = v;
            }
            assert!(
                Instant::now() < deadline,
                "status of {} never matched; last seen: {last}\nevents: {}",
                self.name,
                std::fs::read_to_string(self.state.join("events.jsonl")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The whole log of a container run, as CRI records' content.
    pub fn log(&self, container: &str, run: u32) -> String {
        let p = self.state.join(format!("logs/{container}/{run}.log"));
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        text.lines()
            .map(|l| l.splitn(4, ' ').nth(3).unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The log of a container run once it holds `needle` (bounded): a running container
    /// may not have written all it will yet.
    pub fn wait_log(&self, container: &str, run: u32, limit: Duration, needle: &str) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.log(container, run);
            if log.contains(needle) {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "the log of {container} (run {run}) never held {needle:?}: {log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pod cgroup's name and the supervisor's leaf beside it.
    pub fn cgroup_names(&self) -> [String; 2] {
        let pod = format!("podinit_default_{}", self.name);
        [format!("{pod}_supervisor"), pod]
    }

    /// Nothing of the pod remains: no cgroup in any hierarchy, no mount below the state
    /// dir, no process in a pod cgroup, only the public files in the state dir.
    pub fn assert_nothing_left(&self) {
        let found: Vec<PathBuf> = self
            .cgroup_names()
            .iter()
            .flat_map(|cg| find_dirs(Path::new("/sys/fs/cgroup"), cg, 6))
            .collect();
        assert!(found.is_empty(), "cgroups left behind: {found:?}");
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let st = self.state.to_string_lossy().to_string();
        assert!(
            !mounts.lines().any(|l| l.contains(&st)),
            "mounts left below {st}"
        );
        let mut left: Vec<String> = std::fs::read_dir(&self.state)
            .map(|rd| {
                rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        left.sort();
        for f in &left {
            assert!(
                ["status.json", "events.jsonl", "logs"].contains(&f.as_str()),
                "unexpected file left in the state dir: {f} (all: {left:?})"
            );
        }
    }
}

impl TestPod {
    /// After exit 3 (the sandbox could not be set up): nothing at all, not even the state
    /// dir (docs/interface.md: everything created was removed again).
    pub fn assert_sandbox_gone(&self) {
        self.assert_nothing_left();
        let left: Vec<_> = std::fs::read_dir(&self.state)
            .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            !self.state.exists(),
            "state dir {} left behind, holding {left:?}",
            self.state.display()
        );
    }
}

pub fn find_dirs(root: &Path, name: &str, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if depth == 0 {
        return out;
    }
    let Ok(rd) = std::fs::read_dir(root) else {
        return out;
    };
    for e in rd.flatten() {
        if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let p = e.path();
        if e.file_name().to_string_lossy() == name {
            out.push(p);
        } else {
            out.extend(find_dirs(&p, name, depth - 1));
        }
    }
    out
}

/// A copy of the busybox bundle's config.json, its root the shared busybox rootfs, changed
/// by `edit`.
pub fn bundle_copy(p: &TestPod, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let dir = p.dir.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundles().join("busybox/config.json")).unwrap())
            .unwrap();
    cfg["root"]["path"] = bundles()
        .join("busybox/rootfs")
        .display()
        .to_string()
        .into();
    edit(&mut cfg);
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    dir
}

/// Makes `b` the `image: BUNDLE` of pod `p`'s manifest.
pub fn set_bundle(p: &TestPod, b: &Path) {
    let yaml = std::fs::read_to_string(&p.manifest).unwrap();
    std::fs::write(
        &p.manifest,
        yaml.replace("BUNDLE", &b.display().to_string()),
    )
    .unwrap();
}

/// Whether the pod status `v` shows `n` containers, all running.
pub fn all_running(v: &serde_json::Value, n: usize) -> bool {
    v["status"]["containerStatuses"]
        .as_array()
        .is_some_and(|a| a.len() == n && a.iter().all(|c| c["state"]["running"].is_object()))
}

/// The directory of cgroup `c_<container>` of pod `p` holding `file` (any hierarchy), once
/// it exists.
pub fn find_container_cgroup(p: &TestPod, container: &str, file: &str) -> Option<PathBuf> {
    let pod = format!("podinit_default_{}", p.name);
    find_dirs(Path::new("/sys/fs/cgroup"), &pod, 6)
        .into_iter()
        .map(|d| d.join(format!("c_{container}")))
        .find(|d| d.join(file).exists())
}

impl Drop for TestPod {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Whatever a failed run left: cgroups (kill what is inside, then remove), mounts,
        // files.
        for cg in self.cgroup_names() {
            for d in find_dirs(Path::new("/sys/fs/cgroup"), &cg, 6) {
                kill_and_remove(&d);
            }
        }
        let _ = Command::new("umount")
            .arg("-R")
            .arg("-l")
            .arg(&self.state)
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.join("tmpfs"))
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn kill_and_remove(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                kill_and_remove(&e.path());
            }
        }
    }
    for _ in 0..200 {
        if let Ok(t) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in t.lines().filter_map(|l| l.parse::<i32>().ok()) {
                // SAFETY: kill(2) of a process in the test pod's own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        if std::fs::remove_dir(dir).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `status.containerStatuses[name]` (or init).
pub fn container_status<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    for list in ["containerStatuses", "initContainerStatuses"] {
        if let Some(arr) = status["status"][list].as_array() {
            if let Some(c) = arr.iter().find(|c| c["name"] == name) {
                return c;
            }
        }
    }
    panic!("no status for container {name} in {status}");
}

/// The pod's events as recorded in `events.jsonl`.
pub fn events(p: &TestPod) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p.state.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn has_event(p: &TestPod, reason: &str, msg: &str) -> bool {
    events(p)
        .iter()
        .any(|e| e["reason"] == reason && e["message"].as_str().unwrap_or("").contains(msg))
}

pub fn wait_event(p: &TestPod, reason: &str, msg: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !has_event(p, reason, msg) {
        assert!(
            Instant::now() < deadline,
            "no event {reason} with {msg:?}; events: {:#?}",
            events(p)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pod's supervisor: the `podinit run` process's only child.
pub fn supervisor_pid(p: &TestPod) -> i32 {
    let pid = p.pid();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(c) = children.split_whitespace().next() {
            return c.parse().unwrap();
        }
        assert!(Instant::now() < deadline, "podinit run has no supervisor");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process as `/proc` names it: its pid and its start time (a reused pid has another).
pub fn process_identity(pid: i32) -> (i32, String) {
    (pid, start_time(pid).expect("the process exists"))
}

fn start_time(pid: i32) -> Option<String> {
    // Field 22 of the stat line.
    stat_fields(pid)?.into_iter().nth(19)
}

/// The fields of `/proc/PID/stat` after the command name, which may hold spaces and
/// parentheses: the first is field 3 (the state), then the parent's pid, and so on. None
/// when the process is gone.
pub fn stat_fields(pid: impl std::fmt::Display) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The process of `process_identity` still exists (a zombie counts).
pub fn still_running(id: &(i32, String)) -> bool {
    start_time(id.0).as_ref() == Some(&id.1)
}

/// What a process holds: open fds, resident memory, and its children that are zombies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub fds: usize,
    /// Resident anonymous memory (heap, stacks, written data): what a leak grows. It is
    /// the process's own, unlike the binary's code pages, which podinit gives back after
    /// activity and which come back with whatever code runs next.
    pub anon_kib: u64,
    /// All resident memory, code pages included: shown, never compared.
    pub rss_kib: u64,
    pub zombies: usize,
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} fds, anonymous {} KiB (Rss {} KiB), {} zombie children",
            self.fds, self.anon_kib, self.rss_kib, self.zombies
        )
    }
}

/// A process's usage now. Memory is read from `smaps_rollup`, which counts the pages
/// themselves: `status`'s `RssAnon` and `VmRSS` are summed from per-CPU counters the
/// kernel folds in lazily, so two readings of a process at rest may differ.
pub fn usage(pid: i32) -> Usage {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or_else(|e| panic!("/proc/{pid}/fd: {e}"));
    let path = format!("/proc/{pid}/smaps_rollup");
    let rollup = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let kib = |key: &str| -> u64 {
        rollup
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{path} has no {key}: {rollup}"))
    };
    Usage {
        fds,
        anon_kib: kib("Anonymous"),
        rss_kib: kib("Rss"),
        zombies: zombie_children(pid),
    }
}

/// Children of `pid` (as this pid namespace sees them) in state Z.
pub fn zombie_children(pid: i32) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Some(f) = stat_fields(name) else {
            continue;
        };
        let state = f.first().map(String::as_str);
        let ppid = f.get(1).and_then(|p| p.parse::<i32>().ok());
        if state == Some("Z") && ppid == Some(pid) {
            n += 1;
        }
    }
    n
}

/// One request to the pod's socket with podinit's own client: (HTTP code, body as JSON,
/// or as a string when it is not JSON).
pub fn api(p: &TestPod, method: &str, path: &str, body: Option<&str>) -> (u16, serde_json::Value) {
    let r = podinit::api::client::request(
        &p.state.join("pod.sock"),
        method,
        path,
        body.map(str::as_bytes),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let v = serde_json::from_slice(&r.body)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&r.body).into()));
    (r.code, v)
}

/// A counter of `GET /metrics`, summed over its label sets.
pub fn metric(p: &TestPod, name: &str, labels: &str) -> u64 {
    let (code, text) = api(p, "GET", "/metrics", None);
    assert_eq!(code, 200);
    let text = text.as_str().unwrap_or_default().to_string();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name} ")) || l.starts_with(&format!("{name}{{")))
        .filter(|l| l.contains(labels))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum::<f64>() as u64
}

/// Wait for `child` for up to `limit`; past it, kill it and fail the test.
fn wait_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `Command::output`, bounded: a client that hangs (on a pod that never answers) fails
/// its test within `limit` instead of stalling the whole run.
pub trait OutputWithin {
    fn output_within(&mut self, limit: Duration) -> std::process::Output;
}

impl OutputWithin for Command {
    fn output_within(&mut self, limit: Duration) -> std::process::Output {
        let what = format!("{:?}", self);
        // As `output`: no input (a spawned child would inherit the harness's stdin).
        let mut child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
        // Read both pipes on threads so that neither fills while the child runs.
        let (tx, rx) = std::sync::mpsc::channel();
        for (k, mut pipe) in [
            (
                0,
                Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            ),
            (1, Box::new(child.stderr.take().unwrap())),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.read_to_end(&mut buf);
                let _ = tx.send((k, buf));
            });
        }
        let deadline = Instant::now() + limit;
        let status = wait_within(&mut child, limit, &what);
        // A process it left behind may hold the pipes open: bounded too.
        let mut out = [Vec::new(), Vec::new()];
        for _ in 0..2 {
            let left = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
            let (k, buf) = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("{what} ended but its output did not"));
            out[k] = buf;
        }
        let [stdout, stderr] = out;
        std::process::Output {
            status,
            stdout,
            stderr,
        }
    }
}

/// How long a client command (`podinit status`, `exec`, `curl`, `runc`…) may take in a test.
pub const CLIENT_LIMIT: Duration = Duration::from_secs(90);

/// The pod condition of type `t` in a Pod object (status.json, `GET /v1/pod`).
pub fn condition<'a>(pod: &'a serde_json::Value, t: &str) -> &'a serde_json::Value {
    pod["status"]["conditions"]
        .as_array()
        .and_then(|v| v.iter().find(|c| c["type"] == t))
        .unwrap_or_else(|| panic!("no condition {t}: {pod}"))
}

/// The cgroup directory of pod `p` for controller `ctrl` (any on cgroup v2), below the
/// cgroup this test runs in: where `podinit run` puts the pod by default.
pub fn pod_cgroup(p: &TestPod, ctrl: &str) -> PathBuf {
    let v2 = std::fs::metadata("/sys/fs/cgroup/cgroup.controllers").is_ok();
    let ours = std::fs::read_to_string("/proc/self/cgroup").unwrap();
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
    PathBuf::from(mount)
        .join(rel)
        .join(format!("podinit_default_{}", p.name))
}

/// A file's content without surrounding white space, or a panic naming the file.
pub fn read_trimmed(p: PathBuf) -> String {
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

/// `systemctl show UNIT -p …` as a map (the systemd driver's tests, in their VM).
pub fn systemctl_show(unit: &str, props: &[&str]) -> std::collections::BTreeMap<String, String> {
    let mut c = std::process::Command::new("systemctl");
    c.arg("show").arg(unit);
    for p in props {
        c.arg("-p").arg(p);
    }
    let o = c.output_within(CLIENT_LIMIT);
    assert!(
        o.status.success(),
        "systemctl show {unit}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A list property (DeviceAllow) is a line an entry: joined in their order.
    let mut out: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    for (k, v) in String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
    {
        out.entry(k.to_string())
            .and_modify(|s| {
                s.push_str(", ");
                s.push_str(v)
            })
            .or_insert_with(|| v.to_string());
    }
    out
}
