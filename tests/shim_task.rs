//! containerd-shim-podinit-v1 driven as containerd drives it, without containerd: the
//! shim's `start` per task, ttrpc Task calls on the address it answers, and an events
//! service of the test's own at `TTRPC_ADDRESS`. The bundles are shaped as the CRI makes
//! them (a sandbox, containers joining its namespaces by /proc path), so this runs where
//! containerd cannot: the pure cgroup v2 VM (scripts/vm-v2-test).

mod common;
#[path = "common/shim.rs"]
mod shim;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use containerd_shim::protos::api;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::shim_sync::{Events, TaskClient};
use containerd_shim::protos::ttrpc::{self, TtrpcContext};
use serde_json::json;
use shim::{
    cgroup_hierarchies, create, ctx, delete, drain, fifo, kill, shim_start, start, wait, wait_gone,
    Lab, GRACE_ENV,
};

/// The events the shim published: (topic, container or exec id).
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<(String, String)>>>);

impl Events for Recorded {
    fn forward(&self, _: &TtrpcContext, req: api::ForwardRequest) -> ttrpc::Result<api::Empty> {
        let e = req.envelope.unwrap_or_default();
        let id = shim::event_id(&e.event.unwrap_or_default());
        self.0.lock().unwrap().push((e.topic, id));
        Ok(api::Empty::default())
    }
}

/// A bundle of the pod "sb" running `args`, with the pod's hostname.
fn bundle(
    lab: &mut Lab,
    id: &str,
    args: &[&str],
    namespaces: serde_json::Value,
    kind: &str,
) -> PathBuf {
    let mut spec = lab.cri_spec(id, namespaces, kind, "sb");
    spec["process"]["args"] = json!(args);
    spec["hostname"] = json!("shim-test-pod");
    lab.bundle(id, &spec)
}

/// The sandbox task "sb" as the CRI makes it: podinit's pause in new pid, ipc, uts, mount
/// and network namespaces.
fn sandbox_bundle(lab: &mut Lab) -> PathBuf {
    bundle(
        lab,
        "sb",
        &["/pause"],
        json!([{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}]),
        "sandbox",
    )
}

/// The pod's shim, started for the sandbox bundle `sb` and connected as containerd does:
/// its Task client, its pid (the lab's shim from then on) and its address.
fn sandbox_shim(lab: &mut Lab, sb: &Path) -> (TaskClient, i32, String) {
    let (client, shim_pid, address) = shim::connect_shim(lab, sb, "sb", &[]);
    (TaskClient::new(client), shim_pid, address)
}

#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn a_cri_shaped_pod_through_the_shims_task_api() {
    common::require_root();
    let tag = format!("podinit-shim-test-{}", std::process::id());
    let mut lab = Lab::new(&tag, &["sb", "c1", "c2", "c3"]);
    let events = Recorded::default();
    let server = shim::serve_events(&lab.dir, events.clone());

    // The sandbox: new pid, ipc, uts, mount and network namespaces; podinit's pause.
    let sb = sandbox_bundle(&mut lab);
    let written = std::fs::read(sb.join("config.json")).unwrap();
    let (client, shim_pid, address) = sandbox_shim(&mut lab, &sb);
    let sb_pid = create(&client, "sb", &sb, "");
    assert_eq!(start(&client, "sb", ""), sb_pid);
    let cmdline = std::fs::read_to_string(format!("/proc/{sb_pid}/cmdline")).unwrap();
    assert_eq!(
        cmdline, "/dev/.podinit-pause\0pause\0",
        "the sandbox's PID 1"
    );
    // As containerd's runc shim, the shim leaves config.json as containerd wrote it.
    assert!(
        std::fs::read(sb.join("config.json")).unwrap() == written,
        "the sandbox's config.json was changed"
    );

    // A container in the pod: the sandbox's namespaces by path, its own mount namespace.
    let ns = |t: &str, f: &str| json!({"type": t, "path": format!("/proc/{sb_pid}/ns/{f}")});
    let joined = json!([ns("pid", "pid"), ns("ipc", "ipc"), ns("uts", "uts"), ns("network", "net"), {"type": "mount"}]);
    let c1 = bundle(
        &mut lab,
        "c1",
        &["sh", "-c", "echo hello; hostname; sleep 30 & exit 7"],
        joined.clone(),
        "container",
    );
    assert_eq!(
        shim_start(&lab.ns, &lab.dir, &c1, "c1"),
        address,
        "one shim per pod"
    );
    let (out1, r1) = fifo(&lab.dir, "c1.out");
    let c1_pid = create(&client, "c1", &c1, &out1);
    start(&client, "c1", "");
    assert_eq!(wait(&client, "c1", ""), 7);
    assert_eq!(
        drain(r1),
        "hello\nshim-test-pod\n",
        "output, and the pod's hostname"
    );
    // Its init's exit ended what it left in the pod's pid namespace (the background sleep).
    let d = delete(&client, "c1", "");
    assert_eq!((d.pid, d.exit_status), (c1_pid, 7));

    // A long-running container: exec, stats, kill.
    let c2 = bundle(
        &mut lab,
        "c2",
        &["sleep", "600"],
        joined.clone(),
        "container",
    );
    shim_start(&lab.ns, &lab.dir, &c2, "c2");
    create(&client, "c2", &c2, "");
    start(&client, "c2", "");
    let (oute, re) = fifo(&lab.dir, "e1.out");
    let process = json!({"args": ["sh", "-c", "echo from-exec; exit 3"], "cwd": "/", "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}});
    let exec = shim::exec_request("c2", "e1", oute, &process);
    client.exec(ctx(), &exec).unwrap();
    start(&client, "c2", "e1");
    assert_eq!(wait(&client, "c2", "e1"), 3);
    assert_eq!(drain(re), "from-exec\n");
    assert_eq!(delete(&client, "c2", "e1").exit_status, 3);
    let stats = client
        .stats(
            ctx(),
            &api::StatsRequest {
                id: "c2".into(),
                ..Default::default()
            },
        )
        .unwrap();
    let want = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "v2"
    } else {
        "v1"
    };
    assert_eq!(
        stats.stats.type_url,
        format!("io.containerd.cgroups.{want}.Metrics")
    );
    kill(&client, "c2", libc::SIGKILL as u32);
    assert_eq!(wait(&client, "c2", ""), 137);
    assert_eq!(delete(&client, "c2", "").exit_status, 137);

    // A container with a poststop hook: the shim's delete then runs as the verb's own
    // process, which waits for the hook, and the hook runs once.
    let c3 = {
        let mut spec = lab.cri_spec("c3", joined.clone(), "container", "sb");
        spec["process"]["args"] = json!(["true"]);
        let mark = lab.dir.join("poststop-ran");
        spec["hooks"] = json!({"poststop": [{"path": "/bin/sh", "args": ["sh", "-c", format!("echo x >> {}", mark.display())]}]});
        lab.bundle("c3", &spec)
    };
    shim_start(&lab.ns, &lab.dir, &c3, "c3");
    create(&client, "c3", &c3, "");
    start(&client, "c3", "");
    assert_eq!(wait(&client, "c3", ""), 0);
    delete(&client, "c3", "");
    assert_eq!(
        std::fs::read_to_string(lab.dir.join("poststop-ran")).unwrap(),
        "x\n",
        "the poststop hook ran once, at delete"
    );

    // The sandbox ends on SIGTERM with 0, as pause does; then the shim may go.
    kill(&client, "sb", libc::SIGTERM as u32);
    assert_eq!(wait(&client, "sb", ""), 0);
    delete(&client, "sb", "");
    client
        .shutdown(
            ctx(),
            &api::ShutdownRequest {
                id: "sb".into(),
                ..Default::default()
            },
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{shim_pid}")).exists() {
        assert!(
            Instant::now() < deadline,
            "the shim did not exit after Shutdown"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    lab.shim = None;

    let got = events.0.lock().unwrap().clone();
    let per: BTreeMap<&str, Vec<&str>> = got.iter().fold(BTreeMap::new(), |mut m, (t, id)| {
        m.entry(id.as_str()).or_default().push(t.as_str());
        m
    });
    assert_eq!(
        per["c1"],
        [
            "/tasks/create",
            "/tasks/start",
            "/tasks/exit",
            "/tasks/delete"
        ]
    );
    assert_eq!(
        per["e1"],
        ["/tasks/exec-added", "/tasks/exec-started", "/tasks/exit"]
    );
    assert_eq!(
        per["sb"],
        [
            "/tasks/create",
            "/tasks/start",
            "/tasks/exit",
            "/tasks/delete"
        ]
    );
    for h in cgroup_hierarchies() {
        for id in ["sb", "c1", "c2", "c3"] {
            assert!(
                !h.join(&lab.parent).join(id).exists(),
                "cgroup {id} left in {}",
                h.display()
            );
        }
    }
    assert!(
        !Path::new(&format!("/proc/{sb_pid}")).exists(),
        "the sandbox's process is gone"
    );
    server.shutdown();
}

/// What a Stats answer says of a container, v1 or v2 (cpu in nanoseconds, at the
/// microsecond on v2), and the whole answer.
#[derive(Clone, Debug, PartialEq)]
struct Figures {
    pids: u64,
    memory: u64,
    cpu_ns: u64,
    raw: Vec<u8>,
}

fn figures(client: &TaskClient, id: &str) -> Figures {
    use containerd_shim::protos::protobuf::Message;
    let any = client
        .stats(
            ctx(),
            &api::StatsRequest {
                id: id.into(),
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("Stats {id}: {e}"))
        .stats
        .unwrap();
    if any.type_url.ends_with("v2.Metrics") {
        let m = containerd_shim::protos::cgroups_v2::metrics::Metrics::parse_from_bytes(&any.value)
            .unwrap();
        Figures {
            pids: m.pids.current,
            memory: m.memory.usage,
            cpu_ns: m.cpu.usage_usec * 1000,
            raw: any.value,
        }
    } else {
        let m = containerd_shim::protos::cgroups::metrics::Metrics::parse_from_bytes(&any.value)
            .unwrap();
        Figures {
            pids: m.pids.current,
            memory: m.memory.usage.usage,
            cpu_ns: m.cpu.usage.total,
            raw: any.value,
        }
    }
}

#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn an_idle_pod_s_shim_and_sandbox_do_not_wake() {
    common::require_root();
    let tag = format!("podinit-shim-idle-{}", std::process::id());
    let mut lab = Lab::new(&tag, &["sb", "c1"]);
    let server = shim::serve_events(&lab.dir, Recorded::default());
    let sb = sandbox_bundle(&mut lab);
    let (client, shim_pid, _) = sandbox_shim(&mut lab, &sb);
    let sb_pid = create(&client, "sb", &sb, "");
    start(&client, "sb", "");
    let ns = |t: &str, f: &str| json!({"type": t, "path": format!("/proc/{sb_pid}/ns/{f}")});
    let joined = json!([ns("pid", "pid"), ns("ipc", "ipc"), ns("uts", "uts"), ns("network", "net"), {"type": "mount"}]);
    let c1 = bundle(&mut lab, "c1", &["sleep", "600"], joined, "container");
    shim_start(&lab.ns, &lab.dir, &c1, "c1");
    create(&client, "c1", &c1, "");
    start(&client, "c1", "");

    shim::assert_idle(&[
        ("the shim", shim_pid),
        ("the sandbox's PID 1", sb_pid as i32),
    ]);

    // Stats keeps the cgroup's files open from its first call: the figures read again
    // through them are the first call's (nothing ran since) and those that
    // `runc events --stats` reads anew.
    let first = figures(&client, "c1");
    let root = format!("/run/containerd/podinit/{}", lab.ns);
    let out = Command::new(shim::SHIM)
        .args(["runc", "--root", &root, "events", "--stats", "c1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "runc events --stats: {out:?}");
    let fresh: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let again = figures(&client, "c1");
    assert_eq!(first, again, "Stats read again through its kept files");
    let d = &fresh["data"];
    let n = |p: &str| d.pointer(p).and_then(|v| v.as_u64()).unwrap_or(0);
    assert_eq!(
        first,
        Figures {
            pids: n("/pids/current"),
            memory: n("/memory/usage/usage"),
            cpu_ns: n("/cpu/usage/total"),
            ..first.clone()
        },
        "Stats (left) and runc events --stats: {d}"
    );
    assert!(first.pids >= 1, "the container's sleep counted: {first:?}");

    // The pod still answers after its quiet time, and ends as usual.
    for id in ["c1", "sb"] {
        kill(&client, id, libc::SIGKILL as u32);
        assert_eq!(wait(&client, id, ""), 137);
        delete(&client, id, "");
    }
    server.shutdown();
}

/// `systemctl show UNIT -p P` (one property's value).
fn unit_property(unit: &str, p: &str) -> String {
    let o = Command::new("systemctl")
        .args(["show", unit, "-p", p, "--value"])
        .output()
        .unwrap();
    assert!(o.status.success(), "systemctl show {unit}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_the_shim_honours_systemd_cgroup_with_a_scope_per_task() {
    common::require_root();
    assert!(
        Path::new("/run/systemd/system").is_dir(),
        "needs systemd as PID 1 (no /run/systemd/system here): run scripts/vm-systemd-test"
    );
    let tag = format!("podinit-shim-sd-{}", std::process::id());
    let mut lab = Lab::new(&tag, &["sb"]);
    let server = shim::serve_events(&lab.dir, Recorded::default());
    let sb = bundle(
        &mut lab,
        "sb",
        &["/pause"],
        json!([{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]),
        "sandbox",
    );
    // The CRI's form under the systemd driver: slice, prefix, the container's ID.
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sb.join("config.json")).unwrap()).unwrap();
    spec["linux"]["cgroupsPath"] = json!(format!("podinittest.slice:cri-containerd:{tag}"));
    std::fs::write(sb.join("config.json"), spec.to_string()).unwrap();
    let unit = format!("cri-containerd-{tag}.scope");
    let (client, _, _) = sandbox_shim(&mut lab, &sb);
    // containerd's runc options with SystemdCgroup = true (field 9, varint 1).
    let req = api::CreateTaskRequest {
        id: "sb".into(),
        bundle: sb.display().to_string(),
        options: Some(Any {
            type_url: "containerd.runc.v1.Options".into(),
            value: vec![0x48, 1],
            ..Default::default()
        })
        .into(),
        ..Default::default()
    };
    let pid = client
        .create(ctx(), &req)
        .unwrap_or_else(|e| panic!("Create sb: {e}"))
        .pid;
    start(&client, "sb", "");
    assert_eq!(unit_property(&unit, "ActiveState"), "active");
    assert_eq!(unit_property(&unit, "Slice"), "podinittest.slice");
    assert_eq!(unit_property(&unit, "Delegate"), "yes");
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert_eq!(own.trim(), format!("0::/podinittest.slice/{unit}"));
    kill(&client, "sb", libc::SIGKILL as u32);
    assert_eq!(wait(&client, "sb", ""), 137);
    delete(&client, "sb", "");
    assert_eq!(
        unit_property(&unit, "LoadState"),
        "not-found",
        "Delete removes the unit"
    );
    assert!(!Path::new(&format!("/sys/fs/cgroup/podinittest.slice/{unit}")).exists());
    client
        .shutdown(
            ctx(),
            &api::ShutdownRequest {
                id: "sb".into(),
                ..Default::default()
            },
        )
        .unwrap();
    server.shutdown();
}

/// A lab named `tag` with the events service, the sandbox task's bundle, and a shim
/// started in it with the tests' short grace and connected.
struct Dropped {
    lab: Lab,
    events: ttrpc::Server,
    bundle: PathBuf,
    client: TaskClient,
    pid: i32,
    socket: PathBuf,
}

fn dropped_shim(tag: &str) -> Dropped {
    let mut lab = Lab::new(&format!("{tag}-{}", std::process::id()), &["sb"]);
    let events = shim::serve_events(&lab.dir, Recorded::default());
    let bundle = sandbox_bundle(&mut lab);
    let (client, pid, address) = shim::connect_shim(&mut lab, &bundle, "sb", &[GRACE_ENV]);
    let socket = PathBuf::from(address.trim_start_matches("unix://"));
    Dropped {
        lab,
        events,
        bundle,
        client: TaskClient::new(client),
        pid,
        socket,
    }
}

/// containerd's podsandbox controller started the pod's shim, then a restart cut its
/// RunPodSandbox short before it created the sandbox task, and nobody connects again: the
/// shim, alone and with no task, ends itself after its grace, its socket and address too.
#[test]
#[ignore = "needs root: a shim's socket and state"]
fn a_task_mode_shim_dropped_before_its_first_task_ends_itself() {
    common::require_root();
    let d = dropped_shim("podinit-shim-drop");
    let (mut lab, sb, client, shim_pid, socket) = (d.lab, d.bundle, d.client, d.pid, d.socket);
    drop(client);
    wait_gone(shim_pid, "the task-mode shim containerd dropped");
    lab.shim = None;
    assert!(!socket.exists(), "the shim's socket is left");
    assert!(!sb.join("address").exists(), "the shim's address is left");
    assert!(
        sb.join("config.json").exists(),
        "containerd's own file was removed"
    );
    d.events.shutdown();
}

/// The same restart after the sandbox task started: containerd removed the bundle (after
/// unmounting its rootfs, as its `Bundle.Delete` does) and can never find the shim again.
/// The shim ends the task (its processes, cgroup and state) and itself. A shim whose task
/// runs and whose bundle is there waits for containerd however long it is away.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn a_task_mode_shim_whose_bundle_containerd_removed_ends_its_tasks_and_itself() {
    common::require_root();
    let d = dropped_shim("podinit-shim-gone");
    let (mut lab, sb, client, shim_pid, socket) = (d.lab, d.bundle, d.client, d.pid, d.socket);
    let sb_pid = create(&client, "sb", &sb, "") as i32;
    start(&client, "sb", "");
    lab.pause = Some(sb_pid);
    drop(client);
    // Past the grace, with its task running and its bundle there: kept.
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        Path::new(&format!("/proc/{shim_pid}")).exists()
            && Path::new(&format!("/proc/{sb_pid}")).exists(),
        "a running pod's shim ended while containerd was away"
    );
    // containerd's atomicDelete: rename to a hidden name, then remove the tree.
    let hidden = lab.dir.join(".sb");
    std::fs::rename(&sb, &hidden).unwrap();
    std::fs::remove_dir_all(&hidden).unwrap();
    wait_gone(shim_pid, "the shim whose bundle containerd removed");
    wait_gone(sb_pid, "its sandbox task");
    lab.shim = None;
    lab.pause = None;
    assert!(!socket.exists(), "the shim's socket is left");
    for h in cgroup_hierarchies() {
        let cg = h.join(&lab.parent).join("sb");
        assert!(!cg.exists(), "the task's cgroup is left: {}", cg.display());
    }
    let state = Path::new("/run/containerd/podinit")
        .join(&lab.ns)
        .join("sb");
    assert!(
        !state.exists(),
        "the task's state is left: {}",
        state.display()
    );
    d.events.shutdown();
}
