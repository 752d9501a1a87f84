//! `hostUsers: false`: the pod's containers in a user namespace of their own
//! that maps container ids 0..65535 to a block of 65536 host ids, with idmapped root
//! filesystems and volumes. Each pod's state dir is on a tmpfs, as `/run/podinit` is on
//! most machines: on a kernel whose tmpfs takes no idmap (before 6.3) podinit refuses the
//! pod, and these tests check that refusal instead (the kernel is probed, not its version).

mod common;
use common::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);
const ALLOCATIONS: &str = "/run/podinit/userns";

/// The tests here take turns: each looks at the node's allocations as a whole.
static NODE: Mutex<()> = Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    NODE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this kernel makes idmapped mounts on a tmpfs: a tmpfs of our own, detached,
/// is given the idmap of a user namespace made by `unshare`.
fn tmpfs_takes_idmap() -> bool {
    let mut helper = Command::new("unshare")
        .args(["-U", "-r", "sleep", "30"])
        .stdin(Stdio::null())
        .spawn()
        .expect("unshare");
    let ns_path = format!("/proc/{}/ns/user", helper.id());
    // Until unshare has exec'd sleep: only then is the namespace's id map written, and an
    // idmap onto a namespace without one fails with EINVAL whatever the kernel can do.
    let comm = format!("/proc/{}/comm", helper.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&comm).map_or(true, |c| c.trim() != "sleep") {
        assert!(
            std::time::Instant::now() < deadline,
            "unshare -U -r did not exec sleep within 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !std::fs::read_to_string(format!("/proc/{}/uid_map", helper.id()))
            .unwrap()
            .trim()
            .is_empty(),
        "unshare -U -r left its namespace without a uid map"
    );
    let userns = std::fs::File::open(&ns_path).unwrap();
    let dir = std::env::temp_dir().join(format!("podinit-idmap-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(&dir)
        .status()
        .unwrap()
        .success());
    let c = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: open_tree(OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) on a C string.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            1 | libc::O_CLOEXEC as libc::c_uint,
        )
    };
    assert!(tree >= 0, "open_tree: {}", std::io::Error::last_os_error());
    // SAFETY: a new fd of ours.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as i32) };
    let attr: [u64; 4] = [0x0010_0000, 0, 0, userns.as_raw_fd() as u64];
    // SAFETY: mount_setattr(MOUNT_ATTR_IDMAP) on our detached copy.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            attr.as_ptr(),
            32usize,
        )
    };
    drop(tree);
    let _ = Command::new("umount").arg("-l").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    let _ = helper.kill();
    let _ = helper.wait();
    rc == 0
}

/// The block (first host id) the node's allocations give `pod`, if any.
fn block_of(pod: &str) -> Option<u32> {
    std::fs::read_dir(ALLOCATIONS)
        .ok()?
        .flatten()
        .find(|e| {
            std::fs::read_to_string(e.path())
                .is_ok_and(|t| t.starts_with(&format!("default/{pod} ")))
        })
        .and_then(|e| e.file_name().to_str()?.parse().ok())
}

/// The pids of the supervisor's children (the containers' processes).
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The real uid of a process as the host sees it.
fn host_uid(pid: i32) -> u32 {
    std::fs::metadata(format!("/proc/{pid}")).unwrap().uid()
}

fn owner(p: &Path) -> (u32, u32) {
    let md = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (md.uid(), md.gid())
}

/// A pod whose containers wait for `/data/go` (written by the test on the host) before
/// they end.
fn waiting_pod(prefix: &str, extra: &str) -> TestPod {
    let mut p = TestPod::new(
        prefix,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  hostUsers: false
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: root
    image: busybox
    command:
    - sh
    - -c
    - |
      echo map $(cat /proc/self/uid_map)
      echo id=$(id -u)
      echo r > /rootfile && echo rootfs-writable
      echo e > /data/by-root && echo volume-writable
      nc -l -p 80 & sleep 0.3
      netstat -ltn | grep -q ':80 ' && echo port-80-bound
      ls /proc/1/status >/dev/null && echo proc-mounted
      echo ready
      while [ ! -e /data/go ]; do sleep 0.1; done
    volumeMounts: [{{name: data, mountPath: /data}}]
  - name: user
    image: busybox
    securityContext: {{runAsUser: 1000, runAsGroup: 1000}}
    command: [sh, -c, "echo id=$(id -u); echo u > /data/by-user; echo ready; while [ ! -e /data/go ]; do sleep 0.1; done"]
    volumeMounts: [{{name: data, mountPath: /data}}]
{extra}  volumes: [{{name: data, emptyDir: {{}}}}]
"#
        ),
    );
    p.state_on_tmpfs("64m");
    p
}

fn release(p: &TestPod) {
    std::fs::write(p.state.join(".work/volumes/data/go"), "").unwrap();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn containers_run_as_root_of_their_own_user_namespace() {
    require_root();
    let _turn = turn();
    let mut p = waiting_pod("userns", "");
    if !start_or_assert_refusal(&mut p) {
        return;
    }
    let log = p.wait_log("root", 0, LIMIT, "ready");
    p.wait_log("user", 0, LIMIT, "ready");
    let base = block_of(&p.name).expect("the pod holds a block");
    assert!(base >= 65536 && base.is_multiple_of(65536), "block {base}");
    assert!(
        log.contains(&format!("map 0 {base} 65536")),
        "uid_map of the container: {log}"
    );
    for want in [
        "id=0",
        "rootfs-writable",
        "volume-writable",
        "port-80-bound",
        "proc-mounted",
    ] {
        assert!(log.contains(want), "{want} missing: {log}");
    }
    assert!(p.log("user", 0).contains("id=1000"), "{}", p.log("user", 0));
    // An exec joins the container's user namespace with its other namespaces.
    let out = Command::new(bin())
        .args(["exec", "user", "--", "sh", "-c"])
        .arg("id -u; cat /proc/self/uid_map; cat /data/by-root")
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        words,
        ["1000", "0", base.to_string().as_str(), "65536", "e"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An ephemeral container in the pod's user namespace, in its target's pid namespace.
    let out = Command::new(bin())
        .args([
            "debug", "--image", "busybox", "--target", "user", "--", "sh", "-c",
        ])
        .arg("head -c 2 /proc/1/cmdline; echo; id -u")
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(0), "sh\n0\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // On the host: the processes run as the mapped ids.
    let mut uids: Vec<u32> = children(supervisor_pid(&p))
        .into_iter()
        .map(host_uid)
        .collect();
    uids.sort();
    assert_eq!(uids, [base, base + 1000]);
    // What the container writes to its root filesystem lands in the upper layer as the
    // mapped ids; the layer's root is the container root's.
    let upper = p.state.join(".work/containers/root/upper");
    assert_eq!(owner(&upper.join("rootfile")), (base, base));
    assert_eq!(owner(&upper), (base, base));
    // A volume is an idmapped mount: files keep the container's ids on the host, as they
    // would without a user namespace (Kubernetes' user-namespaces page).
    let vol = p.state.join(".work/volumes/data");
    assert_eq!(owner(&vol.join("by-root")), (0, 0));
    assert_eq!(owner(&vol.join("by-user")), (1000, 1000));
    release(&p);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    p.assert_nothing_left();
    assert_eq!(block_of(&p.name), None, "the block is given back");
    assert!(!Path::new(ALLOCATIONS).join(base.to_string()).exists());
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn two_pods_get_different_blocks_and_a_dead_pods_block_is_taken_again() {
    require_root();
    let _turn = turn();
    if !tmpfs_takes_idmap() {
        // The refusal is checked by the test above.
        assert_idmap_refusal(&mut waiting_pod("userns-refused", ""));
        return;
    }
    // A block whose pod died without giving it back: its file is there, unlocked.
    std::fs::create_dir_all(ALLOCATIONS).unwrap();
    let stale = (1u32..)
        .map(|i| i * 65536)
        .find(|b| {
            let f = Path::new(ALLOCATIONS).join(b.to_string());
            !f.exists()
        })
        .unwrap();
    let stale_file: PathBuf = Path::new(ALLOCATIONS).join(stale.to_string());
    std::fs::write(&stale_file, "default/dead-pod /nonexistent\n").unwrap();
    let mut a = waiting_pod("userns-a", "");
    let mut b = waiting_pod("userns-b", "");
    a.start();
    a.wait_log("root", 0, LIMIT, "ready");
    b.start();
    b.wait_log("root", 0, LIMIT, "ready");
    let (ba, bb) = (block_of(&a.name).unwrap(), block_of(&b.name).unwrap());
    assert_ne!(ba, bb);
    // The lowest free block is the dead pod's (kubelet takes the lowest free one too).
    assert!(ba <= stale, "pod a got {ba}, the stale block is {stale}");
    if ba != stale {
        assert!(bb <= stale, "pod b got {bb}, the stale block is {stale}");
    }
    assert!(
        a.log("root", 0).contains(&format!("map 0 {ba} 65536"))
            && b.log("root", 0).contains(&format!("map 0 {bb} 65536"))
    );
    for p in [&a, &b] {
        release(p);
    }
    for p in [&mut a, &mut b] {
        let out = p.wait(LIMIT);
        assert_eq!(out.code, 0, "{}", out.stderr);
        p.assert_nothing_left();
    }
    assert_eq!((block_of(&a.name), block_of(&b.name)), (None, None));
    let _ = std::fs::remove_file(&stale_file);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_pod_in_a_user_namespace_may_not_share_the_nodes_namespaces() {
    require_root();
    let mut p = waiting_pod("userns-hostnet", "  hostNetwork: true\n");
    let out = p.run(LIMIT);
    assert_refused(
        &p,
        &out,
        2,
        "spec.hostNetwork: Forbidden: when `pod.Spec.HostUsers` is false",
    );
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_given_network_namespace_is_refused_for_a_pod_in_a_user_namespace() {
    require_root();
    let mut p = waiting_pod("userns-netns", "");
    let mut cmd = p.command();
    cmd.arg("--netns").arg("/proc/self/ns/net");
    p.start_with(cmd);
    let out = p.wait(LIMIT);
    assert_refused(
        &p,
        &out,
        3,
        "--netns cannot be used with spec.hostUsers: false: the pod's network namespace must be owned by its user namespace",
    );
}

/// `out` is the refusal `message` with exit `code`, and the pod left no id block and no
/// sandbox behind.
fn assert_refused(p: &TestPod, out: &Outcome, code: i32, message: &str) {
    assert_eq!(out.code, code, "{}", out.stderr);
    assert!(out.stderr.contains(message), "{}", out.stderr);
    assert_eq!(block_of(&p.name), None);
    p.assert_sandbox_gone();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn privileged_and_read_only_containers_in_a_user_namespace() {
    require_root();
    let _turn = turn();
    let mut p = TestPod::new(
        "userns-priv",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  hostUsers: false
  restartPolicy: Never
  containers:
  - name: priv
    image: busybox
    securityContext: {privileged: true}
    command: [sh, -c, "echo map $(cat /proc/self/uid_map); test -c /dev/tty && test -c /dev/null && echo host-devices"]
  - name: ro
    image: busybox
    securityContext: {readOnlyRootFilesystem: true}
    command: [sh, -c, "touch /x || echo read-only; echo bye > /dev/termination-log"]
"#,
    );
    p.state_on_tmpfs("64m");
    let supported = tmpfs_takes_idmap();
    let out = p.run(LIMIT);
    if !supported {
        assert_eq!(out.code, 3, "{}", out.stderr);
        p.assert_sandbox_gone();
        return;
    }
    assert_eq!(out.code, 0, "{}", out.stderr);
    let priv_log = p.log("priv", 0);
    assert!(
        priv_log.contains("map 0 ") && priv_log.contains("host-devices"),
        "{priv_log}"
    );
    assert!(p.log("ro", 0).contains("read-only"), "{}", p.log("ro", 0));
    let ro = container_status(&out.status, "ro");
    assert_eq!(ro["state"]["terminated"]["exitCode"], 0, "{ro}");
    assert_eq!(ro["state"]["terminated"]["message"], "bye\n", "{ro}");
    p.assert_nothing_left();
    assert_eq!(block_of(&p.name), None);
}

/// The pid namespace of a process, as its link names it.
fn pid_ns(pid: i32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).unwrap()
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The supervisor's child that is the pod's pause (bounded wait).
fn pause_of(supervisor: i32) -> i32 {
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        if let Some(p) = children(supervisor)
            .into_iter()
            .find(|&c| comm(c) == "pause")
        {
            return p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the supervisor {supervisor} has no pause child"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The supervisor's child running as host uid `uid` other than the pause (bounded wait).
fn container_process(supervisor: i32, uid: u32, not: Option<i32>) -> i32 {
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        if let Some(p) = children(supervisor).into_iter().find(|&c| {
            Some(c) != not
                && comm(c) != "pause"
                && std::fs::metadata(format!("/proc/{c}")).is_ok_and(|m| m.uid() == uid)
        }) {
            return p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no process of host uid {uid} under the supervisor"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pod sharing its pid namespace in its user namespace: `root` leaves an orphan behind
/// (a child of a shell that exits at once, until the test kills it) and both write a
/// termination message.
fn shared_pid_pod(prefix: &str, restart: &str) -> TestPod {
    let mut p = TestPod::new(
        prefix,
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  hostUsers: false
  shareProcessNamespace: true
  restartPolicy: {restart}
  terminationGracePeriodSeconds: 1
  containers:
  - name: root
    image: busybox
    command:
    - sh
    - -c
    - |
      echo map $(cat /proc/self/uid_map)
      echo pid1=$(cat /proc/1/comm)
      ls /proc/1/status >/dev/null && echo proc-mounted
      sh -c 'sleep 1000 & exit 0'
      echo root-message > /dev/termination-log
      echo ready
      exec sleep 1000
  - name: user
    image: busybox
    securityContext: {{runAsUser: 1000, runAsGroup: 1000}}
    command: [sh, -c, "echo id=$(id -u) pid1=$(cat /proc/1/comm); echo user-message > /dev/termination-log; echo ready; exec sleep 1000"]
"#
        ),
    );
    p.state_on_tmpfs("64m");
    p
}

/// Starts `p` where the kernel has idmapped tmpfs (true); elsewhere asserts the refusal
/// (false: the test has nothing more to see).
fn start_or_assert_refusal(p: &mut TestPod) -> bool {
    if !tmpfs_takes_idmap() {
        assert_idmap_refusal(p);
        return false;
    }
    p.start();
    true
}

/// Where the kernel has no idmapped tmpfs: the pod is refused before anything starts.
fn assert_idmap_refusal(p: &mut TestPod) {
    let out = p.run(LIMIT);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "spec.hostUsers: false needs idmapped mounts, which this kernel does not make on tmpfs"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(block_of(&p.name), None, "the block is given back");
    p.assert_sandbox_gone();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn containers_share_the_pid_namespace_of_a_pause_in_the_pods_user_namespace() {
    require_root();
    let _turn = turn();
    let mut p = shared_pid_pod("userns-sharepid", "Always");
    if !start_or_assert_refusal(&mut p) {
        return;
    }
    let log = p.wait_log("root", 0, LIMIT, "ready");
    let user_log = p.wait_log("user", 0, LIMIT, "ready");
    let base = block_of(&p.name).expect("the pod holds a block");
    for want in [
        format!("map 0 {base} 65536"),
        "pid1=pause".into(),
        "proc-mounted".into(),
    ] {
        assert!(log.contains(&want), "{want} missing: {log}");
    }
    assert!(user_log.contains("id=1000 pid1=pause"), "{user_log}");
    // On the host: the pause is the supervisor's child, PID 1 of a pid namespace of its
    // own that both containers are in, and runs as the pod's root.
    let sup = supervisor_pid(&p);
    let pause = pause_of(sup);
    let root = container_process(sup, base, Some(pause));
    let user = container_process(sup, base + 1000, None);
    assert_eq!(host_uid(pause), base);
    let status = std::fs::read_to_string(format!("/proc/{pause}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert!(nspid.ends_with("\t1"), "{nspid}");
    assert_ne!(pid_ns(pause), pid_ns(sup));
    assert_eq!((pid_ns(root), pid_ns(user)), (pid_ns(pause), pid_ns(pause)));
    // The orphan `root` left is the pause's child, and reaped by it when it exits: no
    // zombie is left in the namespace.
    let orphans = children(pause);
    assert!(
        orphans.len() == 1 && comm(orphans[0]) == "sleep",
        "the pause's children: {orphans:?}"
    );
    // SAFETY: kill(2) of the orphan.
    unsafe { libc::kill(orphans[0], libc::SIGKILL) };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !children(pause).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the orphan is never reaped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // An exec into a container is in that namespace and sees every container's processes.
    let out = Command::new(bin())
        .args(["exec", "user", "--", "sh", "-c"])
        .arg("id -u; ps -o pid,args")
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("1000\n"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().eq(["1", "pause"])),
        "{text}"
    );
    let sleeps = text.lines().filter(|l| l.ends_with("sleep 1000")).count();
    assert_eq!(sleeps, 2, "{text}");
    // So is an ephemeral container, without a target.
    let out = Command::new(bin())
        .args(["debug", "--image", "busybox", "--", "sh", "-c"])
        .arg("cat /proc/1/comm; id -u")
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).as_ref()
        ),
        (Some(0), "pause\n0\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A container whose process is killed restarts in the same namespace, with the same
    // pause; its termination message is its last state's.
    // SAFETY: kill(2) of the container's process.
    unsafe { libc::kill(user, libc::SIGKILL) };
    p.wait_log("user", 1, LIMIT, "ready");
    let again = container_process(sup, base + 1000, Some(user));
    assert_eq!(pid_ns(again), pid_ns(pause));
    assert_eq!(pause_of(sup), pause);
    let st = p.wait_status(LIMIT, |s| {
        s["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|a| {
                a.iter()
                    .any(|c| c["name"] == "user" && c["restartCount"] == 1)
            })
    });
    let user_status = container_status(&st, "user");
    assert_eq!(
        user_status["lastState"]["terminated"]["message"], "user-message\n",
        "{user_status}"
    );
    assert!(!has_event(&p, "SandboxChanged", ""));
    // Not PID 1 of their namespace, the containers' processes die of SIGTERM (143: the
    // pod fails).
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let root_status = &container_status(&out.status, "root")["state"]["terminated"];
    assert_eq!(
        (&root_status["exitCode"], &root_status["message"]),
        (
            &serde_json::json!(143),
            &serde_json::json!("root-message\n")
        ),
        "{root_status}"
    );
    assert!(
        !Path::new(&format!("/proc/{pause}")).exists(),
        "the pause is left"
    );
    p.assert_nothing_left();
    assert_eq!(block_of(&p.name), None, "the block is given back");
    assert!(!Path::new(ALLOCATIONS).join(base.to_string()).exists());
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_dead_pause_is_made_again_and_a_killed_supervisor_takes_its_pause_along() {
    require_root();
    let _turn = turn();
    let mut p = shared_pid_pod("userns-pause", "Always");
    if !start_or_assert_refusal(&mut p) {
        return;
    }
    p.wait_log("root", 0, LIMIT, "ready");
    p.wait_log("user", 0, LIMIT, "ready");
    let base = block_of(&p.name).expect("the pod holds a block");
    let sup = supervisor_pid(&p);
    let pause = pause_of(sup);
    let old_ns = pid_ns(pause);
    // The pause dies: the kernel kills every process of its namespace, and the containers
    // restart in a new one, with a new pause.
    // SAFETY: kill(2) of the pod's pause.
    unsafe { libc::kill(pause, libc::SIGKILL) };
    wait_event(
        &p,
        "SandboxChanged",
        "Pod sandbox changed, it will be killed and re-created.",
    );
    let log = p.wait_log("root", 1, LIMIT, "ready");
    assert!(log.contains("pid1=pause"), "{log}");
    let new_pause = pause_of(sup);
    assert_ne!(pid_ns(new_pause), old_ns);
    let root = container_process(sup, base, Some(new_pause));
    assert_eq!(pid_ns(root), pid_ns(new_pause));
    // The supervisor is killed: the pause dies with the supervisor's pid namespace, and
    // `podinit run` gives everything back.
    let pause_id = process_identity(new_pause);
    // SAFETY: kill(2) of the pod's supervisor.
    unsafe { libc::kill(sup, libc::SIGKILL) };
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        !still_running(&pause_id),
        "the pause outlived the supervisor"
    );
    p.assert_nothing_left();
    assert_eq!(block_of(&p.name), None, "the block is given back");
}
