//! What the tests that drive containerd-shim-podinit-v1 without containerd share
//! (tests/shim_task.rs, shim_sandbox.rs, escapes_shim.rs): the lab that removes what a
//! test made, a CRI-shaped bundle, the shim's `start` and connection as containerd runs
//! them, the Task calls, the FIFOs containerd makes, and a pod made through the Sandbox
//! API. Included by those tests alone (`#[path]`): it needs the shim feature's crates.

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use containerd_shim::protos::api;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::sandbox_api as sb;
use containerd_shim::protos::sandbox_sync::SandboxClient;
use containerd_shim::protos::shim_sync::TaskClient;
use containerd_shim::protos::ttrpc::{self, context, Client};
use serde_json::json;

pub const SHIM: &str = env!("CARGO_BIN_EXE_containerd-shim-podinit-v1");

/// Every hierarchy a cgroup of the lab may be in (the one on pure v2).
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.controllers").exists() {
        return vec![base.to_path_buf()];
    }
    std::fs::read_dir(base)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir() && !p.is_symlink())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes everything a test made, failed or not: its tasks (by the shim's runc), the
/// shim and the pause it started, the state root, the cgroups below its parent, a bound
/// network namespace, and its directory.
pub struct Lab {
    pub dir: PathBuf,
    pub ns: String,
    pub parent: String,
    pub shim: Option<i32>,
    pub pause: Option<i32>,
    pub ids: Vec<String>,
    pub netns: Option<PathBuf>,
    /// The read ends of the bundles' `log` FIFOs, which the shim writes its log to.
    pub logs: Vec<std::fs::File>,
}

impl Lab {
    /// A lab named `tag` (its directory, containerd namespace and cgroup parent), whose
    /// tasks `ids` are deleted at the end.
    pub fn new(tag: &str, ids: &[&str]) -> Lab {
        let dir = std::env::temp_dir().join(tag);
        std::fs::create_dir_all(&dir).unwrap();
        Lab {
            dir,
            ns: tag.to_string(),
            parent: tag.to_string(),
            shim: None,
            pause: None,
            ids: ids.iter().map(|s| s.to_string()).collect(),
            netns: None,
            logs: Vec::new(),
        }
    }

    /// The bundle `id` with this spec: its config.json, and the `log` FIFO containerd
    /// makes and reads (the shim's log).
    pub fn bundle(&mut self, id: &str, spec: &serde_json::Value) -> PathBuf {
        let dir = self.dir.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), spec.to_string()).unwrap();
        self.logs.push(make_fifo(&dir.join("log")));
        dir
    }

    /// busybox's spec as the CRI shapes a pod's task: `namespaces`, a cgroup below the
    /// lab's parent, and the CRI's annotations of its `kind` in sandbox `sandbox`.
    pub fn cri_spec(
        &self,
        id: &str,
        namespaces: serde_json::Value,
        kind: &str,
        sandbox: &str,
    ) -> serde_json::Value {
        let base = super::common::bundles().join("busybox");
        let mut spec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(base.join("config.json")).unwrap()).unwrap();
        spec["root"] = json!({"path": base.join("rootfs"), "readonly": true});
        spec["linux"]["namespaces"] = namespaces;
        spec["linux"]["cgroupsPath"] = json!(format!("/{}/{id}", self.parent));
        spec["annotations"] = json!({
            "io.kubernetes.cri.container-type": kind,
            "io.kubernetes.cri.sandbox-id": sandbox,
        });
        spec
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let root = format!("/run/containerd/podinit/{}", self.ns);
        for id in &self.ids {
            let _ = Command::new(SHIM)
                .args(["runc", "--root", &root, "delete", "--force", id])
                .stderr(Stdio::null())
                .status();
        }
        for pid in [self.shim, self.pause].into_iter().flatten() {
            // SAFETY: a process this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // A sandbox's shm mount point, left where the shim did not get to remove it.
        let shms = Path::new(&root).join(".sandbox-shm");
        if let Ok(d) = std::fs::read_dir(&shms) {
            for e in d.flatten() {
                let _ = nix::mount::umount2(&e.path(), nix::mount::MntFlags::MNT_DETACH);
                let _ = std::fs::remove_dir(e.path());
            }
        }
        let _ = std::fs::remove_dir(&shms);
        let _ = std::fs::remove_dir(&root);
        for h in cgroup_hierarchies() {
            let p = h.join(&self.parent);
            if let Ok(d) = std::fs::read_dir(&p) {
                for e in d.flatten().filter(|e| e.path().is_dir()) {
                    let _ = std::fs::remove_dir(e.path());
                }
            }
            let _ = std::fs::remove_dir(&p);
        }
        if let Some(netns) = &self.netns {
            let _ = nix::mount::umount2(netns, nix::mount::MntFlags::MNT_DETACH);
        }
        // Whatever the shim did not get to unmount below the lab (a sandbox's shm).
        let dir = self.dir.display().to_string();
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(&dir))
            .map(str::to_string)
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Task.Exec's request for exec `exec_id` of container `id`: the OCI `process` as
/// containerd hands it (an Any of the runtime spec's Process), its output to `stdout`.
pub fn exec_request(
    id: &str,
    exec_id: &str,
    stdout: String,
    process: &serde_json::Value,
) -> api::ExecProcessRequest {
    api::ExecProcessRequest {
        id: id.into(),
        exec_id: exec_id.into(),
        stdout,
        spec: Some(Any {
            type_url: "types.containerd.io/opencontainers/runtime-spec/1/Process".into(),
            value: process.to_string().into_bytes(),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    }
}

pub fn try_create(c: &TaskClient, id: &str, bundle: &Path, stdout: &str) -> ttrpc::Result<u32> {
    let req = api::CreateTaskRequest {
        id: id.into(),
        bundle: bundle.display().to_string(),
        stdout: stdout.into(),
        ..Default::default()
    };
    c.create(ctx(), &req).map(|r| r.pid)
}

pub fn create(c: &TaskClient, id: &str, bundle: &Path, stdout: &str) -> u32 {
    try_create(c, id, bundle, stdout).unwrap_or_else(|e| panic!("Create {id}: {e}"))
}

pub fn try_start(c: &TaskClient, id: &str, exec: &str) -> ttrpc::Result<u32> {
    let req = api::StartRequest {
        id: id.into(),
        exec_id: exec.into(),
        ..Default::default()
    };
    c.start(ctx(), &req).map(|r| r.pid)
}

pub fn start(c: &TaskClient, id: &str, exec: &str) -> u32 {
    try_start(c, id, exec).unwrap_or_else(|e| panic!("Start {id}/{exec}: {e}"))
}

pub fn wait(c: &TaskClient, id: &str, exec: &str) -> u32 {
    let req = api::WaitRequest {
        id: id.into(),
        exec_id: exec.into(),
        ..Default::default()
    };
    c.wait(ctx(), &req)
        .unwrap_or_else(|e| panic!("Wait {id}/{exec}: {e}"))
        .exit_status
}

pub fn try_kill(c: &TaskClient, id: &str, sig: u32) -> ttrpc::Result<()> {
    let req = api::KillRequest {
        id: id.into(),
        signal: sig,
        ..Default::default()
    };
    c.kill(ctx(), &req).map(drop)
}

pub fn kill(c: &TaskClient, id: &str, sig: u32) {
    try_kill(c, id, sig).unwrap_or_else(|e| panic!("Kill {id}: {e}"));
}

pub fn try_delete(c: &TaskClient, id: &str, exec: &str) -> ttrpc::Result<api::DeleteResponse> {
    let req = api::DeleteRequest {
        id: id.into(),
        exec_id: exec.into(),
        ..Default::default()
    };
    c.delete(ctx(), &req)
}

pub fn delete(c: &TaskClient, id: &str, exec: &str) -> api::DeleteResponse {
    try_delete(c, id, exec).unwrap_or_else(|e| panic!("Delete {id}/{exec}: {e}"))
}

/// The container's id in an event (the exec's for exec events).
pub fn event_id(a: &Any) -> String {
    use containerd_shim::protos::events::task::*;
    use containerd_shim::protos::protobuf::Message;
    let v = &a.value;
    match a.type_url.rsplit('.').next().unwrap_or("") {
        "TaskExit" => TaskExit::parse_from_bytes(v)
            .map(|e| e.id)
            .unwrap_or_default(),
        "TaskCreate" => TaskCreate::parse_from_bytes(v)
            .map(|e| e.container_id)
            .unwrap_or_default(),
        "TaskStart" => TaskStart::parse_from_bytes(v)
            .map(|e| e.container_id)
            .unwrap_or_default(),
        "TaskDelete" => TaskDelete::parse_from_bytes(v)
            .map(|e| e.container_id)
            .unwrap_or_default(),
        "TaskExecAdded" => TaskExecAdded::parse_from_bytes(v)
            .map(|e| e.exec_id)
            .unwrap_or_default(),
        "TaskExecStarted" => TaskExecStarted::parse_from_bytes(v)
            .map(|e| e.exec_id)
            .unwrap_or_default(),
        "TaskPaused" => TaskPaused::parse_from_bytes(v)
            .map(|e| e.container_id)
            .unwrap_or_default(),
        "TaskResumed" => TaskResumed::parse_from_bytes(v)
            .map(|e| e.container_id)
            .unwrap_or_default(),
        other => other.to_string(),
    }
}

/// A ttrpc call's context, with containerd's kind of deadline.
pub fn ctx() -> context::Context {
    context::with_timeout(Duration::from_secs(30).as_nanos() as i64)
}

/// containerd's events service for a lab's shims (`<lab_dir>/events.sock`, where
/// `shim_start` tells them to publish), answered by `events`; served while the returned
/// server lives.
pub fn serve_events<E>(lab_dir: &Path, events: E) -> ttrpc::Server
where
    E: containerd_shim::protos::shim_sync::Events + Send + Sync + 'static,
{
    let sock = format!("unix://{}", lab_dir.join("events.sock").display());
    let mut server = ttrpc::Server::new().bind(&sock).unwrap().register_service(
        containerd_shim::protos::shim_sync::create_events(std::sync::Arc::new(events)),
    );
    server.start().unwrap();
    server
}

/// The shim's `start`, run as containerd runs it: in the bundle, with TTRPC_ADDRESS at the
/// lab's events socket; the address it answers.
pub fn shim_start(ns: &str, lab_dir: &Path, bundle: &Path, id: &str) -> String {
    shim_start_with(ns, lab_dir, bundle, id, &[])
}

/// `shim_start` with more variables in the shim's environment, as containerd passes its own.
pub fn shim_start_with(
    ns: &str,
    lab_dir: &Path,
    bundle: &Path,
    id: &str,
    env: &[(&str, &str)],
) -> String {
    let out = Command::new(SHIM)
        .args(["-namespace", ns, "-id", id, "-address"])
        .arg(lab_dir.join("containerd.sock"))
        .args(["-publish-binary", "/bin/true", "start"])
        .current_dir(bundle)
        .env("TTRPC_ADDRESS", lab_dir.join("events.sock"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "shim start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The shim started in `bundle` for task `id` (`env` added to its environment) and
/// connected as containerd connects: its ttrpc client, its pid (the lab's shim from then
/// on) and its address.
pub fn connect_shim(
    lab: &mut Lab,
    bundle: &Path,
    id: &str,
    env: &[(&str, &str)],
) -> (Client, i32, String) {
    let address = shim_start_with(&lab.ns, &lab.dir, bundle, id, env);
    let client = Client::connect(&address).unwrap();
    let pid = TaskClient::new(client.clone())
        .connect(
            ctx(),
            &api::ConnectRequest {
                id: id.into(),
                ..Default::default()
            },
        )
        .unwrap()
        .shim_pid as i32;
    lab.shim = Some(pid);
    (client, pid, address)
}

/// A lab named `tag` for one Sandbox API pod: a network namespace bound to a file with a
/// loopback only, as CNI's are, and the sandbox's bundle `id` as containerd 2's sandbox
/// controller makes it (an empty `rootfs`, no config.json, the `log` FIFO).
pub fn sandbox_lab(tag: &str, id: &str) -> (Lab, PathBuf) {
    let mut lab = Lab::new(tag, &[]);
    let netns = lab.dir.join("netns");
    std::fs::write(&netns, "").unwrap();
    let st = Command::new("unshare")
        .arg(format!("--net={}", netns.display()))
        .arg("true")
        .status()
        .unwrap();
    assert!(st.success(), "unshare --net=FILE failed");
    lab.netns = Some(netns);
    let bundle = lab.dir.join(id);
    std::fs::create_dir_all(bundle.join("rootfs")).unwrap();
    lab.logs.push(make_fifo(&bundle.join("log")));
    (lab, bundle)
}

/// A Sandbox API shim, connected: its Sandbox and Task clients on the one socket, its pid
/// and its address.
pub struct SandboxShim {
    pub sandboxes: SandboxClient,
    pub tasks: TaskClient,
    pub pid: i32,
    pub address: String,
}

impl SandboxShim {
    /// The shim started in the sandbox's `bundle` (`env` added to its environment) and
    /// connected, as containerd 2's sandbox controller does before CreateSandbox.
    pub fn start(lab: &mut Lab, bundle: &Path, id: &str, env: &[(&str, &str)]) -> SandboxShim {
        let (client, pid, address) = connect_shim(lab, bundle, id, env);
        SandboxShim {
            sandboxes: SandboxClient::new(client.clone()),
            tasks: TaskClient::new(client),
            pid,
            address,
        }
    }

    /// `start`, then CreateSandbox of the lab's pod (`create_sandbox_request` with no
    /// sysctls).
    pub fn created(
        lab: &mut Lab,
        bundle: &Path,
        id: &str,
        hostname: &str,
        env: &[(&str, &str)],
    ) -> SandboxShim {
        let shim = SandboxShim::start(lab, bundle, id, env);
        let create = create_sandbox_request(lab, bundle, id, hostname, &[]);
        shim.sandboxes.create_sandbox(ctx(), &create).unwrap();
        shim
    }

    /// The path of the shim's socket.
    pub fn socket(&self) -> PathBuf {
        PathBuf::from(self.address.trim_start_matches("unix://"))
    }
}

/// CreateSandbox of sandbox `id` in `bundle`, as containerd 2's CRI asks it: the pod's
/// config (`pod_config`) below the lab's cgroup parent, in the lab's network namespace.
pub fn create_sandbox_request(
    lab: &Lab,
    bundle: &Path,
    id: &str,
    hostname: &str,
    sysctls: &[(&str, &str)],
) -> sb::CreateSandboxRequest {
    sb::CreateSandboxRequest {
        sandbox_id: id.into(),
        bundle_path: bundle.display().to_string(),
        options: Some(pod_config(hostname, &format!("/{}", lab.parent), sysctls)).into(),
        netns_path: lab.netns.as_ref().unwrap().display().to_string(),
        ..Default::default()
    }
}

/// StartSandbox of `id`: the pid of its PID 1.
pub fn start_sandbox(sandboxes: &SandboxClient, id: &str) -> u32 {
    sandboxes
        .start_sandbox(
            ctx(),
            &sb::StartSandboxRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap()
        .pid
}

// The CRI's PodSandboxConfig, encoded by hand (field numbers of cri-api's api.proto).
fn field(out: &mut Vec<u8>, n: u8, b: &[u8]) {
    out.push(n << 3 | 2);
    out.push(b.len() as u8);
    out.extend_from_slice(b);
}

/// A pod's PodSandboxConfig as the CRI passes it in CreateSandbox's options: its
/// hostname, cgroup parent, sysctls and a DNS config.
pub fn pod_config(hostname: &str, parent: &str, sysctls: &[(&str, &str)]) -> Any {
    let mut linux = Vec::new();
    field(&mut linux, 1, parent.as_bytes());
    for (k, v) in sysctls {
        let mut e = Vec::new();
        field(&mut e, 1, k.as_bytes());
        field(&mut e, 2, v.as_bytes());
        field(&mut linux, 3, &e);
    }
    let mut meta = Vec::new();
    field(&mut meta, 1, b"web");
    field(&mut meta, 2, b"uid-1");
    field(&mut meta, 3, b"default");
    // DNSConfig: servers, searches, options.
    let mut dns = Vec::new();
    field(&mut dns, 1, b"10.9.8.7");
    field(&mut dns, 2, b"sbapi.example");
    field(&mut dns, 3, b"ndots:3");
    let mut cfg = Vec::new();
    field(&mut cfg, 1, &meta);
    field(&mut cfg, 2, hostname.as_bytes());
    field(&mut cfg, 4, &dns);
    field(&mut cfg, 8, &linux);
    Any {
        type_url: "runtime.v1.PodSandboxConfig".into(),
        value: cfg,
        ..Default::default()
    }
}

/// A FIFO at `path`, as containerd makes one, and its read end (non-blocking).
pub fn make_fifo(path: &Path) -> std::fs::File {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .unwrap()
}

/// A FIFO `name` in `dir` for a process's stdio: its path and read end.
pub fn fifo(dir: &Path, name: &str) -> (String, std::fs::File) {
    let p = dir.join(name);
    let r = make_fifo(&p);
    (p.display().to_string(), r)
}

/// Everything in the FIFO until every writer is gone.
pub fn drain(mut f: std::fs::File) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match f.read(&mut buf) {
            Ok(0) if !out.is_empty() => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("reading a FIFO: {e}"),
        }
        assert!(Instant::now() < deadline, "FIFO never closed: {out:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Each thread's wake-ups so far (its voluntary and involuntary context switches), by
/// thread id, for every thread of `pid`.
pub fn wakeups(pid: i32) -> std::collections::BTreeMap<i32, u64> {
    let dir = format!("/proc/{pid}/task");
    let mut out = std::collections::BTreeMap::new();
    for t in std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .flatten()
    {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        // A thread that ended between the listing and this read has no more to count.
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let n = status
            .lines()
            .filter_map(|l| {
                l.strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            })
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum();
        out.insert(tid, n);
    }
    out
}

/// How often the processes `pids` (named, every thread of each) wake while nothing calls
/// them for `window`: per process, the wake-ups in the window and the threads that came or
/// went in it. A thread that came counts all its wake-ups.
pub fn wakeups_over(pids: &[(&str, i32)], window: Duration) -> Vec<(String, u64, String)> {
    let before: Vec<_> = pids.iter().map(|(_, p)| wakeups(*p)).collect();
    std::thread::sleep(window);
    pids.iter()
        .zip(before)
        .map(|((name, pid), before)| {
            let after = wakeups(*pid);
            let woke = after
                .iter()
                .map(|(tid, n)| n.saturating_sub(before.get(tid).copied().unwrap_or(0)))
                .sum();
            let came: Vec<_> = after.keys().filter(|t| !before.contains_key(t)).collect();
            let went: Vec<_> = before.keys().filter(|t| !after.contains_key(t)).collect();
            let threads = if came.is_empty() && went.is_empty() {
                String::new()
            } else {
                format!("threads came {came:?}, went {went:?}")
            };
            (format!("{name} ({pid})"), woke, threads)
        })
        .collect()
}

/// How long an idle pod is left before its wake-ups are counted: the shim's last events
/// connection closes after a quiet second.
pub const SETTLE: Duration = Duration::from_secs(3);
/// The window the wake-ups are counted over, and the most each process may have in it: a
/// timer or a poll, even at 10 Hz, exceeds it many times over.
pub const IDLE_WINDOW: Duration = Duration::from_secs(5);
pub const IDLE_WAKEUPS: u64 = 5;

/// `pids` (the pod's shim and its sandbox's PID 1), left idle for [`SETTLE`], do not wake
/// more than [`IDLE_WAKEUPS`] times each over [`IDLE_WINDOW`], and start or end no thread.
pub fn assert_idle(pids: &[(&str, i32)]) {
    std::thread::sleep(SETTLE);
    let seen = wakeups_over(pids, IDLE_WINDOW);
    eprintln!("wake-ups over {IDLE_WINDOW:?} of an idle pod: {seen:?}");
    for (what, woke, threads) in &seen {
        assert!(
            *woke <= IDLE_WAKEUPS && threads.is_empty(),
            "{what} woke {woke} times in {IDLE_WINDOW:?} with nothing calling it (at most \
             {IDLE_WAKEUPS}) {threads}: {seen:?}"
        );
    }
}

/// The grace, in seconds, after which a dropped shim ends itself in these tests (the
/// shim's own is two minutes, docs/cri.md §3).
pub const GRACE_ENV: (&str, &str) = ("PODINIT_SHIM_ABANDON_SECS", "2");

/// Waits for process `pid` to be gone (or a zombie nobody reaped yet).
pub fn wait_gone(pid: i32, what: &str) {
    // Generous: a shim that ends itself first waits out its grace, then ends its
    // containers and its sandbox, on a machine the whole suite loads.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = super::common::stat_fields(pid).and_then(|f| f.into_iter().next());
        if state.as_deref() == Some("Z") {
            return;
        }
        assert!(Instant::now() < deadline, "{what} ({pid}) did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}
