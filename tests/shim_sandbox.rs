//! containerd 2's Sandbox API of containerd-shim-podinit-v1, driven as containerd's `shim`
//! sandbox controller drives it, without containerd: the shim's `start` in a bundle with
//! no config.json, CreateSandbox with the CRI's PodSandboxConfig and a network namespace of
//! the test's own (as CNI's), StartSandbox, a container through the same socket's Task
//! service joining the sandbox's namespaces, then status, metrics, stop, wait, shutdown.
//! No containerd is needed, so this runs in the pure cgroup v2 VM too (scripts/vm-v2-test).

mod common;
#[path = "common/shim.rs"]
mod shim;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use containerd_shim::protos::api;
use containerd_shim::protos::sandbox_api as sb;
use containerd_shim::protos::sandbox_sync::SandboxClient;
use containerd_shim::protos::shim_sync::{Events, TaskClient};
use containerd_shim::protos::ttrpc::{self, Client, TtrpcContext};
use serde_json::json;
use shim::{
    cgroup_hierarchies, create_sandbox_request, ctx, delete, drain, fifo, sandbox_lab, start,
    start_sandbox, wait, wait_gone, Lab, SandboxShim, GRACE_ENV,
};

/// containerd's events service, which the shim publishes to: the events it got, as (topic,
/// container or exec id).
#[derive(Clone, Default)]
struct Topics(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

impl Events for Topics {
    fn forward(&self, _: &TtrpcContext, req: api::ForwardRequest) -> ttrpc::Result<api::Empty> {
        let e = req.envelope.unwrap_or_default();
        let id = shim::event_id(&e.event.unwrap_or_default());
        self.0.lock().unwrap().push((e.topic, id));
        Ok(api::Empty::default())
    }
}

impl Topics {
    /// Every topic, in the order published.
    fn topics(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// The topics of the events of container or exec `id`, in order.
    fn of(&self, id: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, i)| i == id)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// Where the event (`topic`, `id`) is among all, if it was published.
    fn position(&self, topic: &str, id: &str) -> Option<usize> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .position(|(t, i)| t == topic && i == id)
    }
}

/// Where the shim mounts its sandboxes' `/dev/shm`: beside its containers' state, never in
/// the bundle (containerd removes a bundle by removing its tree, which a mount stops).
fn shm_dir(lab: &Lab) -> PathBuf {
    Path::new("/run/containerd/podinit")
        .join(&lab.ns)
        .join(".sandbox-shm")
}

/// The mount points at or below any of `dirs`.
fn mounts_below(dirs: &[&Path]) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| dirs.iter().any(|d| Path::new(m).starts_with(d)))
        .map(str::to_string)
        .collect()
}

/// A container's bundle, as the CRI makes it for a pod in Sandbox mode: busybox, the
/// sandbox's namespaces by `/proc/<pid>/ns` paths, its own mount namespace.
fn container_bundle(lab: &mut Lab, id: &str, sandbox: &str, pid: u32, args: &[&str]) -> PathBuf {
    container_bundle_with(lab, id, sandbox, pid, args, |_| {})
}

/// `container_bundle` with its spec changed by `edit` before it is written.
fn container_bundle_with(
    lab: &mut Lab,
    id: &str,
    sandbox: &str,
    pid: u32,
    args: &[&str],
    edit: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let ns = |t: &str, f: &str| json!({"type": t, "path": format!("/proc/{pid}/ns/{f}")});
    let namespaces = json!([ns("pid", "pid"), ns("ipc", "ipc"), ns("uts", "uts"), ns("network", "net"), {"type": "mount"}]);
    let mut spec = lab.cri_spec(id, namespaces, "container", sandbox);
    spec["process"]["args"] = json!(args);
    spec.as_object_mut().unwrap().remove("hostname");
    edit(&mut spec);
    lab.ids.push(id.to_string());
    lab.bundle(id, &spec)
}

/// The ttrpc code of a refused call.
fn code(e: &ttrpc::Error) -> ttrpc::Code {
    match e {
        ttrpc::Error::RpcStatus(s) => s.code(),
        other => panic!("not a status: {other:?}"),
    }
}

fn ns_inode(pid: impl std::fmt::Display, ns: &str) -> u64 {
    std::fs::metadata(format!("/proc/{pid}/ns/{ns}"))
        .unwrap()
        .ino()
}

#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn a_pod_made_through_the_sandbox_api_with_a_container_in_it() {
    common::require_root();
    let id = "sb";
    let (mut lab, bundle) = sandbox_lab(&format!("podinit-sbapi-{}", std::process::id()), id);
    let topics = Topics::default();
    let events = shim::serve_events(&lab.dir, topics.clone());
    let SandboxShim {
        sandboxes,
        tasks,
        pid: shim_pid,
        address,
    } = SandboxShim::start(&mut lab, &bundle, id, &[]);

    // A network namespace that does not exist is refused, and nothing is kept of it.
    let bad = sandboxes
        .create_sandbox(
            ctx(),
            &sb::CreateSandboxRequest {
                sandbox_id: id.into(),
                bundle_path: bundle.display().to_string(),
                netns_path: "/nonexistent/netns".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(bad.to_string().contains("/nonexistent/netns"), "{bad}");
    assert_eq!(code(&bad), ttrpc::Code::NOT_FOUND, "{bad}");
    let no_id = sandboxes
        .create_sandbox(ctx(), &sb::CreateSandboxRequest::default())
        .unwrap_err();
    assert_eq!(code(&no_id), ttrpc::Code::INVALID_ARGUMENT, "{no_id}");
    let unknown = sandboxes
        .start_sandbox(
            ctx(),
            &sb::StartSandboxRequest {
                sandbox_id: "no-such-sandbox".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(code(&unknown), ttrpc::Code::NOT_FOUND, "{unknown}");

    let create = create_sandbox_request(
        &lab,
        &bundle,
        id,
        "sbapi-pod",
        &[
            ("kernel.shm_rmid_forced", "1"),
            ("net.ipv4.ip_unprivileged_port_start", "81"),
        ],
    );
    sandboxes.create_sandbox(ctx(), &create).unwrap();
    let again = sandboxes.create_sandbox(ctx(), &create).unwrap_err();
    assert_eq!(code(&again), ttrpc::Code::ALREADY_EXISTS, "{again}");
    let status = sandboxes
        .sandbox_status(
            ctx(),
            &sb::SandboxStatusRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        (status.pid, status.state.as_str()),
        (0, "SANDBOX_NOTREADY"),
        "created, not started"
    );

    let started = sandboxes
        .start_sandbox(
            ctx(),
            &sb::StartSandboxRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    let pid = started.pid;
    lab.pause = Some(pid as i32);
    let twice = sandboxes
        .start_sandbox(
            ctx(),
            &sb::StartSandboxRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(code(&twice), ttrpc::Code::FAILED_PRECONDITION, "{twice}");
    assert!(pid > 0);
    // It names itself `pause` once it has the shim's word, which StartSandbox's answer
    // does not wait for.
    let comm = || std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while comm() != "pause\n" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(comm(), "pause\n");
    // The pause is the shim's child (it reaps it), in the netns given, with pid, IPC and
    // UTS namespaces of its own, in the sandbox's cgroup below the pod's.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let ppid: i32 = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(ppid, shim_pid, "the shim is the sandbox's parent");
    assert_eq!(
        ns_inode(pid, "net"),
        std::fs::metadata(lab.netns.as_ref().unwrap())
            .unwrap()
            .ino()
    );
    for ns in ["pid", "ipc", "uts"] {
        assert_ne!(
            ns_inode(pid, ns),
            ns_inode("self", ns),
            "{ns} namespace of its own"
        );
    }
    assert_eq!(
        ns_inode(pid, "mnt"),
        ns_inode("self", "mnt"),
        "no mount namespace, no rootfs"
    );
    // In every controller's hierarchy (v1), or the one (v2): sandbox-init placed it.
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let placed: Vec<&str> = cgroup
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.splitn(3, ':').collect();
            if v2 {
                f[0] == "0"
            } else {
                !f[1].is_empty() && !f[1].starts_with("name=")
            }
        })
        .collect();
    assert!(
        !placed.is_empty()
            && placed
                .iter()
                .all(|l| l.ends_with(&format!("/{}/{id}", lab.parent))),
        "the sandbox's cgroup: {cgroup}"
    );

    let status = sandboxes
        .sandbox_status(
            ctx(),
            &sb::SandboxStatusRequest {
                sandbox_id: id.into(),
                verbose: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((status.pid, status.state.as_str()), (pid, "SANDBOX_READY"));
    assert_eq!(status.sandbox_id, id);
    assert_eq!(status.created_at.seconds, started.created_at.seconds);
    assert!(status.exited_at.is_none());
    let platform = sandboxes
        .platform(
            ctx(),
            &sb::PlatformRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(platform.platform.os, "linux");
    sandboxes
        .ping_sandbox(
            ctx(),
            &sb::PingRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    let e = sandboxes
        .ping_sandbox(
            ctx(),
            &sb::PingRequest {
                sandbox_id: "other".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("other"), "{e}");

    // A container of the pod, through the same socket's Task service: the pod's hostname,
    // sysctls and network namespace, and the pause as PID 1 of the pod's pid namespace;
    // the pod's /etc files as the CRI binds a pause's (read-only with a read-only root),
    // and the pod's /dev/shm, which it leaves a file in for the next container.
    let c1 = container_bundle(
        &mut lab,
        "c1",
        id,
        pid,
        &[
            "sh",
            "-c",
            "hostname; cat /proc/sys/kernel/shm_rmid_forced /proc/sys/net/ipv4/ip_unprivileged_port_start /proc/1/comm; \
             cat /etc/hostname /etc/resolv.conf; grep -c . /etc/hosts >/dev/null && echo hosts; \
             echo x >> /etc/resolv.conf 2>/dev/null || echo read-only; echo shared > /dev/shm/f; exit 3",
        ],
    );
    let written = std::fs::read(c1.join("config.json")).unwrap();
    let (out, r) = fifo(&lab.dir, "c1.out");
    shim::create(&tasks, "c1", &c1, &out);
    // The pod's files are bound in by the shim's create, not written into config.json.
    assert!(
        std::fs::read(c1.join("config.json")).unwrap() == written,
        "c1's config.json was changed"
    );
    start(&tasks, "c1", "");
    assert_eq!(wait(&tasks, "c1", ""), 3);
    assert_eq!(
        drain(r),
        "sbapi-pod\n1\n81\npause\nsbapi-pod\nsearch sbapi.example\nnameserver 10.9.8.7\n\
         options ndots:3\nhosts\nread-only\n"
    );
    delete(&tasks, "c1", "");

    // A second container sees the first one's file in the pod's /dev/shm.
    let c2 = container_bundle(&mut lab, "c2", id, pid, &["cat", "/dev/shm/f"]);
    let (out, r) = fifo(&lab.dir, "c2.out");
    shim::create(&tasks, "c2", &c2, &out);
    start(&tasks, "c2", "");
    assert_eq!((wait(&tasks, "c2", ""), drain(r).as_str()), (0, "shared\n"));
    delete(&tasks, "c2", "");

    // The pod cgroup's figures, as the Task service's Stats gives a container's.
    let metrics = sandboxes
        .sandbox_metrics(
            ctx(),
            &sb::SandboxMetricsRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    let want = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "v2"
    } else {
        "v1"
    };
    assert_eq!(metrics.metrics.id, id);
    assert_eq!(
        metrics.metrics.data.type_url,
        format!("io.containerd.cgroups.{want}.Metrics")
    );

    // A Task Shutdown while the sandbox lives does not end the shim under it.
    tasks
        .shutdown(
            ctx(),
            &api::ShutdownRequest {
                id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    sandboxes
        .ping_sandbox(
            ctx(),
            &sb::PingRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();

    // WaitSandbox, called before the stop, answers with the exit: pause ends on SIGTERM with 0.
    let waiter = {
        let s = sandboxes.clone();
        std::thread::spawn(move || {
            s.wait_sandbox(
                ctx(),
                &sb::WaitSandboxRequest {
                    sandbox_id: "sb".into(),
                    ..Default::default()
                },
            )
        })
    };
    sandboxes
        .stop_sandbox(
            ctx(),
            &sb::StopSandboxRequest {
                sandbox_id: id.into(),
                timeout_secs: 10,
                ..Default::default()
            },
        )
        .unwrap();
    let waited = waiter.join().unwrap().unwrap();
    assert_eq!(waited.exit_status, 0);
    assert!(waited.exited_at.seconds >= started.created_at.seconds);
    wait_gone(pid as i32, "the sandbox's PID 1");
    assert_eq!(
        mounts_below(&[&shm_dir(&lab), &bundle]),
        Vec::<String>::new(),
        "the pod's shm is unmounted at stop"
    );
    assert!(!shm_dir(&lab).exists(), "its mount point is removed");
    let status = sandboxes
        .sandbox_status(
            ctx(),
            &sb::SandboxStatusRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(status.state, "SANDBOX_NOTREADY");
    assert_eq!(status.exited_at.seconds, waited.exited_at.seconds);
    for h in cgroup_hierarchies() {
        assert!(
            !h.join(&lab.parent).join(id).exists(),
            "sandbox cgroup left in {}",
            h.display()
        );
    }
    // Stopping again is no error.
    sandboxes
        .stop_sandbox(
            ctx(),
            &sb::StopSandboxRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();

    sandboxes
        .shutdown_sandbox(
            ctx(),
            &sb::ShutdownSandboxRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    wait_gone(shim_pid, "the shim after ShutdownSandbox");
    lab.shim = None;
    lab.pause = None;
    assert!(
        !Path::new(address.trim_start_matches("unix://")).exists(),
        "the shim's socket is removed"
    );
    // The container's task events, and none for the sandbox: it is no task.
    assert_eq!(
        topics.topics(),
        [
            "/tasks/create",
            "/tasks/start",
            "/tasks/exit",
            "/tasks/delete",
            "/tasks/create",
            "/tasks/start",
            "/tasks/exit",
            "/tasks/delete"
        ]
    );
    events.shutdown();
}

#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn an_idle_pod_s_shim_and_sandbox_do_not_wake() {
    common::require_root();
    let id = "sb";
    let (mut lab, bundle) = sandbox_lab(&format!("podinit-sbapi-idle-{}", std::process::id()), id);
    let events = shim::serve_events(&lab.dir, Topics::default());
    let SandboxShim {
        sandboxes,
        tasks,
        pid: shim_pid,
        ..
    } = SandboxShim::created(&mut lab, &bundle, id, "idle-pod", &[]);
    let pid = start_sandbox(&sandboxes, id);
    lab.pause = Some(pid as i32);
    let c1 = container_bundle(&mut lab, "c1", id, pid, &["sleep", "600"]);
    shim::create(&tasks, "c1", &c1, "");
    start(&tasks, "c1", "");

    shim::assert_idle(&[("the shim", shim_pid), ("the sandbox's PID 1", pid as i32)]);

    // The pod still answers after its quiet time, and ends as usual.
    shim::kill(&tasks, "c1", libc::SIGKILL as u32);
    assert_eq!(wait(&tasks, "c1", ""), 137);
    delete(&tasks, "c1", "");
    sandboxes
        .stop_sandbox(
            ctx(),
            &sb::StopSandboxRequest {
                sandbox_id: id.into(),
                timeout_secs: 10,
                ..Default::default()
            },
        )
        .unwrap();
    wait_gone(pid as i32, "the sandbox's PID 1");
    sandboxes
        .shutdown_sandbox(
            ctx(),
            &sb::ShutdownSandboxRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    wait_gone(shim_pid, "the shim after ShutdownSandbox");
    lab.shim = None;
    lab.pause = None;
    events.shutdown();
}

/// A shim started with a short grace, connected, its sandbox created from the lab's pod
/// config.
fn created(lab: &mut Lab, bundle: &Path, id: &str) -> SandboxShim {
    SandboxShim::created(lab, bundle, id, "dropped", &[GRACE_ENV])
}

/// Nothing of sandbox `id` is left: its cgroup, a mount of it (the shm), its socket.
fn assert_nothing_left(lab: &Lab, id: &str, bundle: &Path, socket: &Path) {
    for h in cgroup_hierarchies() {
        assert!(
            !h.join(&lab.parent).join(id).exists(),
            "sandbox cgroup left in {}",
            h.display()
        );
    }
    // The network namespace's bind mount is the test's own, as CNI's is.
    let netns = lab.netns.as_ref().unwrap().display().to_string();
    let mounts: Vec<String> = mounts_below(&[&shm_dir(lab), &lab.dir])
        .into_iter()
        .filter(|m| *m != netns)
        .collect();
    assert_eq!(mounts, Vec::<String>::new(), "mounts left");
    assert!(!shm_dir(lab).exists(), "the shm's mount point is left");
    assert!(!socket.exists(), "the shim's socket is left");
    for own in ["address", "options.json", "sandbox", "podinit-sandbox.json"] {
        assert!(!bundle.join(own).exists(), "{own} left in the bundle");
    }
}

/// containerd dropped the shim between CreateSandbox and StartSandbox (its restart cut
/// RunPodSandbox short, and its ShutdownSandbox never reached the shim): once the grace
/// has passed with no connection, the shim ends itself and leaves nothing.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn a_shim_dropped_before_its_sandbox_started_ends_itself_and_leaves_nothing() {
    common::require_root();
    let id = "sb";
    let (mut lab, bundle) = sandbox_lab(&format!("podinit-sbapi-drop-{}", std::process::id()), id);
    let events = shim::serve_events(&lab.dir, Topics::default());
    let shim = created(&mut lab, &bundle, id);
    let (socket, shim_pid) = (shim.socket(), shim.pid);
    let SandboxShim {
        sandboxes, tasks, ..
    } = shim;
    assert!(bundle.join("address").exists(), "start wrote the address");
    drop((sandboxes, tasks));
    wait_gone(shim_pid, "the shim containerd dropped before StartSandbox");
    lab.shim = None;
    assert_nothing_left(&lab, id, &bundle, &socket);
    events.shutdown();
}

/// The soak's leak: StartSandbox ran, then containerd gave up on the sandbox and removed
/// its bundle (renamed to `.ID`, then the tree removed) without ShutdownSandbox reaching
/// the shim, and its `delete` could not start in the bundle. containerd's removal now
/// succeeds (nothing is mounted in the bundle), and the shim, whose bundle is gone, ends
/// itself: its PID 1, cgroup and shm go.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn a_started_sandbox_whose_bundle_containerd_removed_is_ended_by_its_shim() {
    common::require_root();
    let id = "sb";
    let (mut lab, bundle) = sandbox_lab(&format!("podinit-sbapi-gone-{}", std::process::id()), id);
    let events = shim::serve_events(&lab.dir, Topics::default());
    let shim = created(&mut lab, &bundle, id);
    let (socket, shim_pid) = (shim.socket(), shim.pid);
    let SandboxShim {
        sandboxes, tasks, ..
    } = shim;
    let pid = start_sandbox(&sandboxes, id);
    lab.pause = Some(pid as i32);
    assert!(
        mounts_below(&[&bundle]).is_empty(),
        "the shm is not mounted in the bundle"
    );
    // containerd's atomicDelete: rename to a hidden name, then remove the tree.
    let hidden = lab.dir.join(format!(".{id}"));
    std::fs::rename(&bundle, &hidden).unwrap();
    // The `log` FIFO's read end is the test's; the tree goes whole.
    std::fs::remove_dir_all(&hidden).expect("containerd's removal of the bundle");
    drop((sandboxes, tasks));
    wait_gone(shim_pid, "the shim whose bundle containerd removed");
    wait_gone(pid as i32, "its sandbox's PID 1");
    lab.shim = None;
    lab.pause = None;
    assert_nothing_left(&lab, id, &bundle, &socket);
    events.shutdown();
}

/// A started sandbox keeps its shim when containerd goes away (a restart must not end
/// pods), past the grace, and containerd's reconnection finds it ready.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn a_started_sandbox_outlives_a_dropped_connection_and_is_found_again() {
    common::require_root();
    let id = "sb";
    let (mut lab, bundle) = sandbox_lab(&format!("podinit-sbapi-keep-{}", std::process::id()), id);
    let events = shim::serve_events(&lab.dir, Topics::default());
    let shim = created(&mut lab, &bundle, id);
    let (socket, shim_pid) = (shim.socket(), shim.pid);
    let SandboxShim {
        sandboxes, tasks, ..
    } = shim;
    let pid = start_sandbox(&sandboxes, id);
    lab.pause = Some(pid as i32);
    drop((sandboxes, tasks));
    // Past two graces: the shim has looked with nobody connected.
    std::thread::sleep(Duration::from_secs(5));
    for (what, p) in [("the shim", shim_pid), ("the sandbox's PID 1", pid as i32)] {
        assert!(
            Path::new(&format!("/proc/{p}")).exists(),
            "{what} ({p}) ended while containerd was away"
        );
    }
    let client = Client::connect(&format!("unix://{}", socket.display())).unwrap();
    let sandboxes = SandboxClient::new(client);
    let status = sandboxes
        .sandbox_status(
            ctx(),
            &sb::SandboxStatusRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((status.pid, status.state.as_str()), (pid, "SANDBOX_READY"));
    sandboxes
        .shutdown_sandbox(
            ctx(),
            &sb::ShutdownSandboxRequest {
                sandbox_id: id.into(),
                ..Default::default()
            },
        )
        .unwrap();
    wait_gone(shim_pid, "the shim after ShutdownSandbox");
    wait_gone(pid as i32, "its sandbox's PID 1");
    lab.shim = None;
    lab.pause = None;
    assert!(!socket.exists(), "the shim's socket is left");
    assert!(
        mounts_below(&[&shm_dir(&lab)]).is_empty(),
        "the shm is left"
    );
    events.shutdown();
}

/// containerd runs the shim's `delete` in the sandbox's bundle once it has closed its
/// connection and is done with the sandbox, whether or not its ShutdownSandbox reached the
/// shim: a shim still running there is ended by it at once (as kata's runtime-rs `delete`
/// ends its sandbox's shim), with its sandbox's PID 1, cgroup, shm and socket.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn the_shim_s_delete_ends_a_sandbox_shim_still_running_in_its_bundle() {
    common::require_root();
    let id = "sb";
    let (mut lab, bundle) = sandbox_lab(&format!("podinit-sbapi-del-{}", std::process::id()), id);
    let events = shim::serve_events(&lab.dir, Topics::default());
    // The shim's own grace (two minutes): what ends it here is the delete.
    let shim = SandboxShim::created(&mut lab, &bundle, id, "deleted", &[]);
    let (socket, shim_pid) = (shim.socket(), shim.pid);
    let SandboxShim {
        sandboxes, tasks, ..
    } = shim;
    let pid = start_sandbox(&sandboxes, id);
    lab.pause = Some(pid as i32);
    drop((sandboxes, tasks));
    let out = Command::new(shim::SHIM)
        .args(["-namespace", &lab.ns, "-id", id, "-address"])
        .arg(lab.dir.join("containerd.sock"))
        .args(["-publish-binary", "/bin/true", "delete"])
        .current_dir(&bundle)
        .env("TTRPC_ADDRESS", lab.dir.join("events.sock"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "shim delete: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_gone(shim_pid, "the shim after its delete");
    wait_gone(pid as i32, "its sandbox's PID 1");
    lab.shim = None;
    lab.pause = None;
    for h in cgroup_hierarchies() {
        assert!(
            !h.join(&lab.parent).join(id).exists(),
            "sandbox cgroup left in {}",
            h.display()
        );
    }
    assert!(
        mounts_below(&[&shm_dir(&lab)]).is_empty(),
        "the shm is left"
    );
    assert!(!shm_dir(&lab).exists(), "the shm's mount point is left");
    assert!(!socket.exists(), "the shim's socket is left");
    events.shutdown();
}

/// What a pod holds in its shim for the tests of its end: container `c1` running (its init
/// and a child of its own) with its root mounted by the shim from the mount containerd
/// hands over, an exec `e1` running in it, and container `c2` created, not started.
struct Held {
    /// Every process of both containers (pid and start time).
    procs: Vec<(i32, String)>,
    /// Their cgroups, in every hierarchy.
    cgroups: Vec<PathBuf>,
    /// `c1`'s root, which the shim mounted.
    rootfs: PathBuf,
}

/// CreateTask of `id` with its root handed over as containerd hands a snapshot (a mount,
/// here a bind of a writable copy of busybox's root beside the bundle, where the runtime
/// may make the mount points the pod's files need, as in a snapshot): the shim mounts it
/// at `<bundle>/rootfs`.
fn create_with_rootfs(tasks: &TaskClient, id: &str, bundle: &Path) -> u32 {
    let base = common::bundles().join("busybox").join("rootfs");
    let snapshot = bundle.with_extension("snapshot");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(&base)
        .arg(&snapshot)
        .status()
        .expect("cp");
    assert!(copied.success(), "copying {} failed", base.display());
    let req = api::CreateTaskRequest {
        id: id.into(),
        bundle: bundle.display().to_string(),
        rootfs: vec![api::Mount {
            type_: "bind".into(),
            source: snapshot.display().to_string(),
            options: vec!["rbind".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    tasks
        .create(ctx(), &req)
        .unwrap_or_else(|e| panic!("Create {id}: {e}"))
        .pid
}

/// The pids in container `id`'s cgroup, in every hierarchy.
fn cgroup_pids(lab: &Lab, id: &str) -> std::collections::BTreeSet<i32> {
    cgroup_hierarchies()
        .into_iter()
        .filter_map(|h| {
            std::fs::read_to_string(h.join(&lab.parent).join(id).join("cgroup.procs")).ok()
        })
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Fills the started sandbox `sandbox` (PID 1 `pid`) with what [`Held`] says.
fn hold(lab: &mut Lab, tasks: &TaskClient, sandbox: &str, pid: u32) -> Held {
    let c1 = container_bundle_with(
        lab,
        "c1",
        sandbox,
        pid,
        &["sh", "-c", "sleep 600 & exec sleep 601"],
        |spec| spec["root"] = json!({"path": "rootfs", "readonly": true}),
    );
    create_with_rootfs(tasks, "c1", &c1);
    let rootfs = c1.join("rootfs");
    assert_eq!(
        mounts_below(&[&rootfs]),
        [rootfs.display().to_string()],
        "the shim mounts c1's root"
    );
    start(tasks, "c1", "");
    let (out, _r) = fifo(&lab.dir, "e1.out");
    let process = json!({"args": ["sleep", "602"], "cwd": "/", "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}});
    tasks
        .exec(ctx(), &shim::exec_request("c1", "e1", out, &process))
        .unwrap();
    start(tasks, "c1", "e1");
    let c2 = container_bundle(lab, "c2", sandbox, pid, &["sleep", "603"]);
    let c2_pid = shim::create(tasks, "c2", &c2, "");
    // The init, its background sleep and the exec.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut pids = cgroup_pids(lab, "c1");
    while pids.len() < 3 {
        assert!(Instant::now() < deadline, "c1's processes: {pids:?}");
        std::thread::sleep(Duration::from_millis(20));
        pids = cgroup_pids(lab, "c1");
    }
    pids.extend(cgroup_pids(lab, "c2"));
    assert!(pids.contains(&(c2_pid as i32)), "c2's init in its cgroup");
    let cgroups = cgroup_hierarchies()
        .into_iter()
        .flat_map(|h| ["c1", "c2"].map(|c| h.join(&lab.parent).join(c)))
        .filter(|d| d.exists())
        .collect();
    Held {
        procs: pids.into_iter().map(common::process_identity).collect(),
        cgroups,
        rootfs,
    }
}

/// Nothing of what `hold` made is left: no process, cgroup, rootfs mount or container
/// state.
fn assert_held_gone(lab: &Lab, held: &Held) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // A zombie is gone too: its parent may be the pod's PID 1, itself ending.
        let left: Vec<_> = held
            .procs
            .iter()
            .filter(|id| common::still_running(id))
            .filter(|id| common::stat_fields(id.0).is_some_and(|f| f[0] != "Z"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the containers left: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let cgroups: Vec<_> = held.cgroups.iter().filter(|d| d.exists()).collect();
    assert!(cgroups.is_empty(), "container cgroups left: {cgroups:?}");
    assert_eq!(
        mounts_below(&[&held.rootfs]),
        Vec::<String>::new(),
        "c1's rootfs is still mounted"
    );
    let state = Path::new("/run/containerd/podinit").join(&lab.ns);
    for c in ["c1", "c2"] {
        assert!(
            !state.join(c).exists(),
            "container {c}'s state is left in {}",
            state.display()
        );
    }
}

/// The events of the ended containers are those containerd's runc shim sends when their
/// processes are killed and they are deleted: each exit, the exec's before its
/// container's (containerd's runc shim publishes a container's init exit last), then the
/// delete. The created container's init, killed by the delete, may report its exit too,
/// before the delete: containerd's runc shim sends it as well, in either order.
fn assert_ended_events(topics: &Topics, c1_before_exit: &[&str]) {
    let mut c1: Vec<&str> = c1_before_exit.to_vec();
    c1.extend(["/tasks/exit", "/tasks/delete"]);
    assert_eq!(topics.of("c1"), c1, "all: {:?}", topics.0.lock().unwrap());
    assert_eq!(
        topics.of("e1"),
        ["/tasks/exec-added", "/tasks/exec-started", "/tasks/exit"]
    );
    let c2: Vec<String> = topics
        .of("c2")
        .into_iter()
        .filter(|t| t != "/tasks/exit")
        .collect();
    assert_eq!(c2, ["/tasks/create", "/tasks/delete"]);
    assert!(
        topics
            .of("c2")
            .iter()
            .filter(|t| *t == "/tasks/exit")
            .count()
            <= 1,
        "c2: {:?}",
        topics.of("c2")
    );
    let at = |t: &str, id: &str| topics.position(t, id).unwrap();
    assert!(
        at("/tasks/exit", "e1") < at("/tasks/exit", "c1"),
        "the exec's exit after its container's: {:?}",
        topics.0.lock().unwrap()
    );
}

/// A started sandbox whose shim holds `hold`'s containers: the tests of containers that
/// end with their sandbox.
struct Ending {
    lab: Lab,
    bundle: PathBuf,
    topics: Topics,
    events: ttrpc::Server,
    socket: PathBuf,
    shim_pid: i32,
    pid: u32,
    held: Held,
}

/// Sandbox `sb` started by a shim that `make` starts, with `hold`'s containers in it; the
/// clients to go on with.
fn ending(
    tag: &str,
    make: impl FnOnce(&mut Lab, &Path) -> SandboxShim,
) -> (Ending, SandboxClient, TaskClient) {
    let id = "sb";
    let (mut lab, bundle) = sandbox_lab(&format!("podinit-sbapi-{tag}-{}", std::process::id()), id);
    let topics = Topics::default();
    let events = shim::serve_events(&lab.dir, topics.clone());
    let shim = make(&mut lab, &bundle);
    let (socket, shim_pid) = (shim.socket(), shim.pid);
    let SandboxShim {
        sandboxes, tasks, ..
    } = shim;
    let pid = start_sandbox(&sandboxes, id);
    lab.pause = Some(pid as i32);
    let held = hold(&mut lab, &tasks, id, pid);
    let e = Ending {
        lab,
        bundle,
        topics,
        events,
        socket,
        shim_pid,
        pid,
        held,
    };
    (e, sandboxes, tasks)
}

impl Ending {
    /// Once the shim (ended by `what`) and the sandbox's PID 1 are gone: nothing of the
    /// containers is left, the events of their end came after `before`, and, once
    /// containerd has removed the bundle (now, if it has not yet), nothing of the shim.
    fn assert_all_gone(mut self, what: &str, before: &[&str]) {
        wait_gone(self.shim_pid, what);
        wait_gone(self.pid as i32, "its sandbox's PID 1");
        self.lab.shim = None;
        self.lab.pause = None;
        assert_held_gone(&self.lab, &self.held);
        assert_ended_events(&self.topics, before);
        if self.bundle.exists() {
            remove_bundle(&self.lab, &self.bundle);
        }
        assert_nothing_left(&self.lab, "sb", &self.bundle, &self.socket);
        self.events.shutdown();
    }
}

/// containerd's removal of a bundle (its shim manager's Delete, `atomicDelete`): renamed to
/// a hidden name, then the tree removed, which nothing mounted in it may stop.
fn remove_bundle(lab: &Lab, bundle: &Path) {
    let hidden = lab.dir.join(format!(
        ".{}",
        bundle.file_name().unwrap().to_string_lossy()
    ));
    std::fs::rename(bundle, &hidden).unwrap();
    std::fs::remove_dir_all(&hidden).expect("containerd's removal of the bundle");
}

fn shutdown_sandbox(sandboxes: &SandboxClient) {
    sandboxes
        .shutdown_sandbox(
            ctx(),
            &sb::ShutdownSandboxRequest {
                sandbox_id: "sb".into(),
                ..Default::default()
            },
        )
        .unwrap();
}

/// The CRI removes every container it knows before ShutdownSandbox, so a container still
/// in the shim then is one a containerd restart made it lose: ShutdownSandbox ends it with
/// the sandbox (as kata's runtime-rs does), a running one's exec and a created one too, and
/// the shim exits leaving nothing.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn shutdown_sandbox_ends_the_containers_still_in_the_shim() {
    common::require_root();
    // The shim's own grace: nothing here ends it but the call.
    let (e, sandboxes, tasks) = ending("end", |lab, bundle| {
        SandboxShim::created(lab, bundle, "sb", "ended", &[])
    });
    shutdown_sandbox(&sandboxes);
    drop((sandboxes, tasks));
    e.assert_all_gone(
        "the shim after ShutdownSandbox",
        &["/tasks/create", "/tasks/start"],
    );
}

/// A paused container (Task.Pause: its cgroup frozen) still in the shim at
/// ShutdownSandbox is thawed and ended with the rest: a frozen process would not die of
/// SIGKILL on cgroup v1.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn shutdown_sandbox_ends_a_paused_container() {
    common::require_root();
    let (e, sandboxes, tasks) = ending("paused", |lab, bundle| {
        SandboxShim::created(lab, bundle, "sb", "paused", &[])
    });
    tasks
        .pause(
            ctx(),
            &api::PauseRequest {
                id: "c1".into(),
                ..Default::default()
            },
        )
        .unwrap();
    let state = tasks
        .state(
            ctx(),
            &api::StateRequest {
                id: "c1".into(),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(state.status, api::Status::PAUSED.into());
    shutdown_sandbox(&sandboxes);
    drop((sandboxes, tasks));
    e.assert_all_gone(
        "the shim after ShutdownSandbox",
        &[
            "/tasks/create",
            "/tasks/start",
            "/tasks/paused",
            "/tasks/resumed",
        ],
    );
}

/// The churn's leak: a containerd restart cut a StartContainer short, and containerd,
/// having lost the container, gave up on its sandbox and removed the sandbox's bundle
/// without ShutdownSandbox reaching the shim. The shim, alone for its grace with its bundle
/// gone, ends the containers still in it with the sandbox, and itself.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn a_sandbox_whose_bundle_containerd_removed_is_ended_with_its_containers() {
    common::require_root();
    let (e, sandboxes, tasks) = ending("lost", |lab, bundle| created(lab, bundle, "sb"));
    drop((sandboxes, tasks));
    remove_bundle(&e.lab, &e.bundle);
    e.assert_all_gone(
        "the shim whose bundle containerd removed",
        &["/tasks/create", "/tasks/start"],
    );
}

/// The shim's daemon, run as `start` runs it, in `bundle` with a short grace (`GRACE_ENV`)
/// and serving `socket`; `remove_bundle` removes the (empty) bundle between the daemon's
/// entering it and its coming up, as containerd removes the bundle of a `start` it gave up
/// on.
fn daemon_in(lab: &Lab, bundle: &Path, socket: &Path, remove_bundle: bool) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let dir = std::ffi::CString::new(bundle.as_os_str().as_encoded_bytes()).unwrap();
    let mut cmd = Command::new(shim::SHIM);
    cmd.args(["-namespace", &lab.ns, "-id", "sb", "-address"])
        .arg(lab.dir.join("containerd.sock"))
        .arg("-socket")
        .arg(format!("unix://{}", socket.display()))
        .env("TTRPC_ADDRESS", lab.dir.join("events.sock"))
        .env(GRACE_ENV.0, GRACE_ENV.1)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: between fork and exec, only chdir and rmdir on a string made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::chdir(dir.as_ptr()) != 0 || (remove_bundle && libc::rmdir(dir.as_ptr()) != 0) {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// Waits for the test's own child `c` to exit, for at most `limit`.
fn exits_within(c: &mut std::process::Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A restart cut short the `start` of a sandbox's shim and containerd removed the bundle
/// (its `log` fifo with it) before the daemon came up: the daemon, in a working directory
/// that is gone and with no log, still ends itself after its grace, and its socket goes.
#[test]
#[ignore = "needs root: a shim's socket and state"]
fn a_shim_that_comes_up_in_a_bundle_containerd_removed_ends_itself() {
    common::require_root();
    let mut lab = Lab::new(&format!("podinit-sbapi-early-{}", std::process::id()), &[]);
    let bundle = lab.dir.join("sb");
    std::fs::create_dir_all(&bundle).unwrap();
    let socket = lab.dir.join("sb.sock");
    let mut daemon = daemon_in(&lab, &bundle, &socket, true);
    lab.shim = Some(daemon.id() as i32);
    assert!(
        exits_within(&mut daemon, Duration::from_secs(10)),
        "the shim whose bundle was gone before it came up still runs"
    );
    lab.shim = None;
    assert!(!bundle.exists());
    assert!(!socket.exists(), "the shim's socket is left");
}

/// A shim killed after `sandbox-init` forked the sandbox's PID 1 but before it recorded
/// it would leave a PID 1 that no `delete` can find. So the PID 1 waits on its stdin for
/// the shim's word that it is recorded, and ends when that pipe closes unanswered. Given
/// the word, it lives on as the pod's pause.
#[test]
#[ignore = "needs root: new namespaces"]
fn a_sandbox_pid_1_its_shim_never_recorded_ends_itself() {
    use std::io::{Read, Write};
    use std::process::Stdio;
    common::require_root();
    let comm = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let started = || {
        let mut c = Command::new(shim::SHIM)
            .args(["sandbox-init", "--pid", "--ipc", "--uts"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let word = c.stdin.take().unwrap();
        let mut out = String::new();
        c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        assert!(c.wait().unwrap().success(), "sandbox-init failed");
        let pid: i32 = out.trim().parse().unwrap();
        (pid, word)
    };

    let (pid, word) = started();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        Path::new(&format!("/proc/{pid}")).exists() && comm(pid).trim() != "pause",
        "the PID 1 did not wait for the shim's word"
    );
    drop(word);
    wait_gone(pid, "a PID 1 whose shim never recorded it");

    let (pid, mut word) = started();
    word.write_all(b"\n").unwrap();
    drop(word);
    let deadline = Instant::now() + Duration::from_secs(10);
    while comm(pid).trim() != "pause" {
        assert!(
            Instant::now() < deadline,
            "the recorded PID 1 did not become the pause"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let alive = comm(pid).trim() == "pause";
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    wait_gone(pid, "the pause");
    assert!(
        alive,
        "the recorded PID 1 did not live on once its pipe closed"
    );
}

/// containerd gave up on a shim while it came up and is gone (stopped before it removed
/// the bundle): nobody reads the bundle's `log` fifo, whose open would block for ever. The
/// daemon runs without its log and, dropped before any sandbox, ends itself after its
/// grace.
#[test]
#[ignore = "needs root: a shim's socket and state"]
fn a_shim_whose_log_nobody_reads_ends_itself() {
    common::require_root();
    let mut lab = Lab::new(&format!("podinit-sbapi-nolog-{}", std::process::id()), &[]);
    let bundle = lab.dir.join("sb");
    std::fs::create_dir_all(&bundle).unwrap();
    nix::unistd::mkfifo(
        &bundle.join("log"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let socket = lab.dir.join("sb.sock");
    let mut daemon = daemon_in(&lab, &bundle, &socket, false);
    lab.shim = Some(daemon.id() as i32);
    assert!(
        exits_within(&mut daemon, Duration::from_secs(10)),
        "the shim whose log nobody reads still runs"
    );
    lab.shim = None;
    assert!(!socket.exists(), "the shim's socket is left");
}
