//! Fault tests on a private containerd (tests/common/cri.rs): a pod's shim
//! SIGKILLed, containerd restarted under running pods, containers that cannot start. Each
//! runs on the runc handler (the reference) and on podinit's; the start errors are compared
//! between the two in one containerd.

mod common;
#[path = "common/cri.rs"]
mod cri;
#[path = "common/cri_client.rs"]
mod cri_client;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cri::{
    assert_pod_gone, container_pid, remove_pod, run, sandbox_identity, wait_state, Lab, WAIT,
};
use cri_client::api;

/// A running pod of one `sleep` container: its id, the container's, the sandbox's and the
/// container's processes, and the path of its network namespace.
struct Running {
    pod: String,
    container: String,
    pids: Vec<(i32, String)>,
    netns: Option<String>,
}

fn running_pod(lab: &Lab, handler: &str, name: &str) -> Running {
    let pc = lab.pod_config(&cri::unique(name), false, false);
    let pod = lab
        .cri()
        .run_pod(&pc, handler)
        .unwrap_or_else(|e| panic!("RunPodSandbox on {handler}: {e}"));
    let (sandbox, netns) = sandbox_identity(lab, &pod);
    let cc = lab.container_config("sleeper", &["sleep", "3600"]);
    let container = run(lab, &pod, &pc, &cc);
    wait_state(lab, &container, api::ContainerState::ContainerRunning);
    let pids = vec![
        sandbox,
        common::process_identity(container_pid(lab, &container)),
    ];
    Running {
        pod,
        container,
        pids,
        netns,
    }
}

fn shim_killed(handler: &str) {
    common::require_root();
    let lab = Lab::for_handler(&format!("shimkill-{handler}"), handler);
    let p = running_pod(&lab, handler, "victim");
    let shims = lab.shims();
    assert!(!shims.is_empty(), "no shim runs the pod on {handler}");
    for (pid, _) in &shims {
        // SAFETY: kill(2) of this lab's shim.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    // containerd sees the shim's connection close and cleans up after it: the task ends,
    // the container is reported exited, and nothing of the pod runs.
    let st = wait_state(&lab, &p.container, api::ContainerState::ContainerExited);
    assert_ne!(st.finished_at, 0, "exited without a finish time: {st:?}");
    // containerd 1.6 runs the shim's `delete` for each task, which kills what is left;
    // containerd 2 leaves the container's process (on the runc handler alike), checked
    // once the pod is removed.
    let deadline = Instant::now() + WAIT;
    let pods_processes_end = lab.daemon == cri::Containerd::V1_6;
    if pods_processes_end {
        loop {
            let left: Vec<_> = p
                .pids
                .iter()
                .filter(|id| common::still_running(id))
                .collect();
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "processes of the pod left after its shim was killed: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let st = lab.cri().pod_status(&p.pod).status.unwrap();
    assert_eq!(
        st.state,
        api::PodSandboxState::SandboxNotready as i32,
        "the pod of a dead shim is still ready: {st:?}"
    );
    remove_pod(&lab, &p.pod);
    // A shim killed cannot remove its socket, and containerd 1.6 leaves it.
    for sock in lab.shim_sockets() {
        std::fs::remove_file(&sock).unwrap();
    }
    if lab.daemon != cri::Containerd::V1_6 {
        // containerd 2 runs `delete` for a killed shim's sandbox alone, at StopPodSandbox:
        // on the runc handler the pod's container outlives the pod, with its cgroup.
        // podinit's `delete` of the sandbox ends the pod's containers too (docs/cri.md §3).
        let left = || -> Vec<&str> {
            ["sandbox", "container"]
                .into_iter()
                .zip(&p.pids)
                .filter(|(_, id)| common::still_running(id))
                .map(|(role, _)| role)
                .collect()
        };
        // The sandbox's process ends with StopPodSandbox, but not at once.
        let expected: &[&str] = if handler == "runc" {
            &["container"]
        } else {
            &[]
        };
        let deadline = Instant::now() + WAIT;
        while left() != expected && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(left(), expected, "{handler} on containerd 2");
        for (pid, _) in &p.pids {
            // SAFETY: kill(2) of this test's own pod's process.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        return;
    }
    assert_pod_gone(&lab, &p.pod, &p.pids, p.netns);
}

fn containerd_restarted(handler: &str) {
    common::require_root();
    let mut lab = Lab::for_handler(&format!("restart-{handler}"), handler);
    let a = running_pod(&lab, handler, "survivor-a");
    let b = running_pod(&lab, handler, "survivor-b");
    lab.stop();
    for id in a.pids.iter().chain(&b.pids) {
        assert!(
            common::still_running(id),
            "process {} ended with containerd",
            id.0
        );
    }
    lab.start();
    for p in [&a, &b] {
        let st = lab.cri().pod_status(&p.pod).status.unwrap();
        assert_eq!(
            st.state,
            api::PodSandboxState::SandboxReady as i32,
            "pod {} after the restart: {st:?}",
            p.pod
        );
        let st = lab.cri().container_status(&p.container).status.unwrap();
        assert_eq!(
            st.state,
            api::ContainerState::ContainerRunning as i32,
            "container of {} after the restart: {st:?}",
            p.pod
        );
        // containerd talks to the shim again.
        let r = lab
            .cri()
            .exec_sync(&p.container, &["echo", "again"], 10)
            .expect("ExecSync after containerd's restart");
        assert_eq!(String::from_utf8_lossy(&r.stdout), "again\n");
    }
    let listed = lab.cri().list_pods();
    for p in [&a, &b] {
        assert!(
            listed
                .iter()
                .any(|l| l.id == p.pod && l.state == api::PodSandboxState::SandboxReady as i32),
            "pod {} not listed ready: {listed:?}",
            p.pod
        );
    }
    for p in [a, b] {
        remove_pod(&lab, &p.pod);
        for id in &p.pids {
            assert!(!common::still_running(id), "process {} left", id.0);
        }
        if let Some(ns) = &p.netns {
            assert!(!std::path::Path::new(ns).exists(), "netns {ns} left");
        }
    }
    assert_pod_gone(&lab, "(all)", &[], None);
}

/// containerd restarted while RunPodSandbox runs on the Sandbox mode, at several points of
/// it: whatever the restart cut short (CreateSandbox, StartSandbox, containerd's own
/// clean-up of a sandbox it gave up on), once every pod left is removed nothing remains,
/// a shim that containerd dropped ending itself after its grace (docs/cri.md §3).
fn containerd_restarted_during_run_pod(handler: &str) {
    common::require_root();
    let mut lab = Lab::for_handler(&format!("midrun-{handler}"), handler);
    // A short grace for the shims, through containerd's environment as on a node.
    let grace = Duration::from_secs(2);
    lab.env.push((
        "PODINIT_SHIM_ABANDON_SECS".into(),
        grace.as_secs().to_string(),
    ));
    lab.stop();
    lab.start();
    // Restarts spread over how long one RunPodSandbox takes on this machine, and a little
    // past it, so that each step of it is cut on a fast machine as on a loaded one.
    let t = Instant::now();
    let pod = lab
        .cri()
        .run_pod(
            &lab.pod_config(&cri::unique("timed"), false, false),
            handler,
        )
        .unwrap_or_else(|e| panic!("RunPodSandbox on {handler}: {e}"));
    let took = t.elapsed();
    remove_pod(&lab, &pod);
    let steps = 16u32;
    let mut outcomes = Vec::new();
    for delay in (0..steps).map(|i| took * 5 / 4 * i / steps) {
        let delay_ms = delay.as_millis();
        let pc = lab.pod_config(&cri::unique("midrun"), false, false);
        let sock = lab.sock.clone();
        let (handler_name, config) = (handler.to_string(), pc.clone());
        let call = std::thread::spawn(move || {
            let c = cri_client::Client::connect(&sock, Duration::from_secs(5))?;
            c.run_pod(&config, &handler_name).map_err(|e| e.to_string())
        });
        std::thread::sleep(delay);
        lab.stop();
        lab.start();
        outcomes.push((delay_ms, call.join().unwrap()));
    }
    eprintln!(
        "RunPodSandbox takes {} ms; cut by a restart after (ms): {outcomes:?}",
        took.as_millis()
    );
    for p in lab.cri().list_pods() {
        remove_pod(&lab, &p.id);
    }
    // A shim containerd dropped ends itself once its grace has passed with no connection.
    let dropped = lab.shims();
    eprintln!("shims left once every pod was removed: {dropped:?}");
    let deadline = Instant::now() + grace + WAIT;
    while !lab.shims().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for ns in netns_containerd_lost(&lab) {
        eprintln!("containerd lost the network namespace {ns} (no process is in it): removed");
    }
    assert_pod_gone(&lab, "(all)", &[], None);
}

/// The network namespaces containerd made and lost, unmounted and removed. A restart after
/// containerd 2.3 made a pod's namespace but before it recorded it in the sandbox leaves a
/// sandbox whose spec it cannot read ("failed to unmarshal sandbox spec" in its log), and
/// removing that pod cannot find the namespace: the bind mount is containerd's, on any
/// handler. One that a process is still in is not counted here (a sandbox left running
/// would hold it), and the check after this fails on it.
fn netns_containerd_lost(lab: &Lab) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let held: std::collections::BTreeSet<u64> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::metadata(e.path().join("ns/net")).ok())
        .map(|m| m.ino())
        .collect();
    let mut lost = Vec::new();
    for m in lab.mounts() {
        if !m.contains("/netns/cni-") {
            continue;
        }
        let Ok(meta) = std::fs::metadata(&m) else {
            continue;
        };
        if held.contains(&meta.ino()) {
            continue;
        }
        let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        let _ = std::fs::remove_file(&m);
        lost.push(m);
    }
    lost
}

/// What a container that cannot start shows through the CRI: StartContainer's error code,
/// whether its message names the cause, and the container's status after.
fn start_errors(lab: &Lab, handler: &str) -> BTreeMap<&'static str, String> {
    let mut rec = BTreeMap::new();
    let pc = lab.pod_config(&cri::unique("broken"), false, false);
    let pod = lab
        .cri()
        .run_pod(&pc, handler)
        .unwrap_or_else(|e| panic!("RunPodSandbox on {handler}: {e}"));
    let (sandbox, netns) = sandbox_identity(lab, &pod);
    let file = lab.dir.join("a-file");
    std::fs::write(&file, "not a directory\n").unwrap();
    let missing = lab.container_config("missing", &["/no/such/binary"]);
    let mut bad_bundle = lab.container_config("badmount", &["sleep", "1"]);
    // A file mounted over a directory of the image: the runtime cannot make the rootfs.
    bad_bundle.mounts = vec![api::Mount {
        host_path: file.display().to_string(),
        container_path: "/etc".into(),
        ..Default::default()
    }];
    for (key, cc, cause) in [
        ("missing", &missing, "no such file or directory"),
        ("bad_bundle", &bad_bundle, "not a directory"),
    ] {
        let id = lab
            .cri()
            .create_container(&pod, cc, &pc)
            .unwrap_or_else(|e| panic!("CreateContainer {key}: {e}"));
        let err = lab
            .cri()
            .start_container(&id)
            .expect_err("StartContainer of a container that cannot start");
        let msg = err.message().to_lowercase();
        rec.insert(
            match key {
                "missing" => "missing.start_error",
                _ => "bad_bundle.start_error",
            },
            format!("{:?}, names the cause: {}", err.code(), msg.contains(cause)),
        );
        let st = lab.cri().container_status(&id).status.unwrap();
        let state = api::ContainerState::try_from(st.state)
            .map(|s| format!("{s:?}"))
            .unwrap_or_default();
        rec.insert(
            match key {
                "missing" => "missing.status",
                _ => "bad_bundle.status",
            },
            format!(
                "{state} exit {} reason {} message names the cause: {}",
                st.exit_code,
                st.reason,
                st.message.to_lowercase().contains(cause)
            ),
        );
        lab.cri()
            .remove_container(&id)
            .unwrap_or_else(|e| panic!("RemoveContainer {key}: {e}"));
    }
    // The pod is still usable after its failures.
    let ok = run(
        lab,
        &pod,
        &pc,
        &lab.container_config("after", &["sleep", "3600"]),
    );
    wait_state(lab, &ok, api::ContainerState::ContainerRunning);
    let pids = [sandbox, common::process_identity(container_pid(lab, &ok))];
    remove_pod(lab, &pod);
    assert_pod_gone(lab, &pod, &pids, netns);
    rec
}

fn check_start_errors(handler: &str, rec: &BTreeMap<&'static str, String>) {
    let want = [
        ("missing.start_error", "Unknown, names the cause: true"),
        (
            "missing.status",
            "ContainerExited exit 128 reason StartError message names the cause: true",
        ),
        ("bad_bundle.start_error", "Unknown, names the cause: true"),
        (
            "bad_bundle.status",
            "ContainerExited exit 128 reason StartError message names the cause: true",
        ),
    ];
    for (k, v) in want {
        assert_eq!(
            rec.get(k).map(String::as_str),
            Some(v),
            "{k} on {handler}; all: {rec:#?}"
        );
    }
}

#[test]
#[ignore = "needs root: a private containerd with CNI"]
fn cri_shim_killed_on_runc() {
    shim_killed("runc");
}

#[test]
#[ignore = "needs root: a private containerd"]
fn cri_shim_killed_on_podinit() {
    shim_killed("podinit");
}

#[test]
#[ignore = "needs root: a private containerd 2"]
fn cri_shim_killed_on_podinit_sandbox_mode() {
    shim_killed(cri::SANDBOX_HANDLER);
}

#[test]
#[ignore = "needs root: a private containerd with CNI"]
fn cri_containerd_restarted_on_runc() {
    containerd_restarted("runc");
}

#[test]
#[ignore = "needs root: a private containerd"]
fn cri_containerd_restarted_on_podinit() {
    containerd_restarted("podinit");
}

#[test]
#[ignore = "needs root: a private containerd 2"]
fn cri_containerd_restarted_on_podinit_sandbox_mode() {
    containerd_restarted(cri::SANDBOX_HANDLER);
}

#[test]
#[ignore = "needs root: a private containerd 2"]
fn cri_containerd_restarted_during_run_pod_on_podinit_sandbox_mode() {
    containerd_restarted_during_run_pod(cri::SANDBOX_HANDLER);
}

#[test]
#[ignore = "needs root: a private containerd with CNI"]
fn cri_start_errors_on_runc() {
    common::require_root();
    let lab = Lab::new("starterr-runc");
    let rec = start_errors(&lab, "runc");
    check_start_errors("runc", &rec);
}

/// Both handlers in one containerd: podinit's errors are runc's.
#[test]
#[ignore = "needs root: a private containerd"]
fn cri_start_errors_on_podinit_agree_with_runc() {
    common::require_root();
    let lab = Lab::new("starterr-podinit");
    let runc = start_errors(&lab, "runc");
    check_start_errors("runc", &runc);
    let podinit = start_errors(&lab, "podinit");
    assert_eq!(podinit, runc, "start errors: podinit's differ from runc's");
}

/// The process runs still: it exists, is not a zombie, and is the one of `id`.
fn alive(id: &(i32, String)) -> bool {
    common::stat_fields(id.0)
        .is_some_and(|f| f.first().is_some_and(|s| s != "Z") && f.get(19) == Some(&id.1))
}

/// A test run killed leaves its lab behind, every pod running: containerd, the shims, the
/// sandboxes (a Sandbox API PID 1 among them), the containers, mounts, cgroups, the bridge
/// and the shims' socket dir. The next lab to start sweeps it, and leaves a lab whose
/// owner lives alone.
#[test]
#[ignore = "needs root: private containerds 2 with CNI"]
fn cri_a_dead_test_runs_lab_is_swept_by_the_next() {
    common::require_root();
    let v2 = cri::Containerd::v2().expect(
        "the Sandbox mode needs containerd 2: no shared/containerd-2/bin/containerd above the \
         crate and no PODINIT_CONTAINERD2",
    );
    let live = Lab::with("sweep-live", v2.clone(), None);
    let survivor = running_pod(&live, "podinit", "survivor");
    let dead = Lab::with("sweep-dead", v2.clone(), None);
    let mut pids = vec![common::process_identity(dead.containerd_pid() as i32)];
    for handler in ["runc", "podinit", cri::SANDBOX_HANDLER] {
        pids.extend(running_pod(&dead, handler, "left").pids);
    }
    pids.extend(
        dead.shims()
            .into_iter()
            .map(|(pid, _)| common::process_identity(pid)),
    );
    let (dir, bridge, socket_dir) = (
        dead.dir.clone(),
        dead.bridge.clone(),
        dead.socket_dir.clone(),
    );
    let cgroups = dead.cgroups();
    assert!(!dead.mounts().is_empty(), "the pods mount nothing");
    assert!(!cgroups.is_empty(), "the pods have no cgroups");
    // Its owner: a process that has ended.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let owner = common::process_identity(gone.id() as i32);
    gone.wait().unwrap();
    let mut containerd = dead.abandon(&owner);

    let next = Lab::with("sweep-next", v2, None);
    // containerd is this test's child: reaped here once the sweep has killed it.
    let deadline = Instant::now() + WAIT;
    while containerd.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the dead lab's containerd still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another test process may have been the sweeper: then wait for it to finish.
    while (dir.exists() || socket_dir.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<_> = pids.iter().filter(|id| alive(id)).collect();
    assert!(left.is_empty(), "processes of the dead lab left: {left:?}");
    assert!(!dir.exists(), "{} left", dir.display());
    assert!(!socket_dir.exists(), "{} left", socket_dir.display());
    let prefix = format!("{}/", dir.display());
    let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix))
        .map(str::to_string)
        .collect();
    assert_eq!(mounts, Vec::<String>::new(), "mounts of the dead lab left");
    let cgroups_left: Vec<_> = cgroups.iter().filter(|c| c.exists()).collect();
    assert!(
        cgroups_left.is_empty(),
        "cgroups of the dead lab left: {cgroups_left:?}"
    );
    let link = std::process::Command::new("ip")
        .args(["link", "show", &bridge])
        .output()
        .unwrap();
    assert!(
        !link.status.success(),
        "the dead lab's bridge {bridge} left"
    );

    // The live lab is untouched: its containerd answers and its pod runs.
    for id in &survivor.pids {
        assert!(
            alive(id),
            "process {} of the live lab's pod was killed",
            id.0
        );
    }
    let st = live.cri().pod_status(&survivor.pod).status.unwrap();
    assert_eq!(
        st.state,
        api::PodSandboxState::SandboxReady as i32,
        "{st:?}"
    );
    remove_pod(&live, &survivor.pod);
    drop(next);
}
