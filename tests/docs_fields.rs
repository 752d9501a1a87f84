//! Fields the Kubernetes docs' examples use, run as kubelet runs
//! them: pod-level resources, emptyDir's medium and sizeLimit, supplementalGroupsPolicy,
//! fsGroup, hostUsers. The manifests are in tests/fixtures/docs/fields/.

mod common;
use common::*;
use std::path::PathBuf;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/docs/fields")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn running(v: &serde_json::Value, names: &[&str]) -> bool {
    names
        .iter()
        .all(|c| container_status(v, c)["state"]["running"].is_object())
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn pod_level_resources_limit_the_pod_cgroup() {
    require_root();
    let mut p = TestPod::new("podres", &fixture("pod-level-resources.yaml"));
    p.start();
    let (c1, c2) = ("pod-resources-demo-ctr-1", "pod-resources-demo-ctr-2");
    let v = p.wait_status(LIMIT, |v| running(v, &[c1, c2]));
    // GetPodQOS reads the pod-level resources: requests below the limits.
    assert_eq!(v["status"]["qosClass"], "Burstable");
    let log = p.wait_log(c2, 0, LIMIT, "memory=");
    assert_eq!(
        log.trim(),
        "memory=200 cpu=1000",
        "a container without limits reads the pod's"
    );
    if std::fs::metadata("/sys/fs/cgroup/cgroup.controllers").is_ok() {
        let cg = pod_cgroup(&p, "");
        assert_eq!(
            read_trimmed(cg.join("memory.max")),
            (200u64 << 20).to_string()
        );
        assert_eq!(read_trimmed(cg.join("cpu.max")), "100000 100000");
        // runc's conversion of 1024 shares.
        assert_eq!(read_trimmed(cg.join("cpu.weight")), "39");
    } else {
        let mem = pod_cgroup(&p, "memory");
        assert_eq!(
            read_trimmed(mem.join("memory.limit_in_bytes")),
            (200u64 << 20).to_string()
        );
        let cpu = pod_cgroup(&p, "cpu");
        assert_eq!(read_trimmed(cpu.join("cpu.cfs_quota_us")), "100000");
        assert_eq!(read_trimmed(cpu.join("cpu.shares")), "1024");
    }
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

#[test]
fn pod_level_resources_that_break_the_rules_are_refused_naming_the_field() {
    let p = TestPod::new(
        "podres-bad",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  resources: {limits: {memory: 64Mi}}
  containers:
  - name: c
    image: busybox
    resources: {requests: {memory: 32Mi}, limits: {memory: 128Mi}}
"#,
    );
    let out = std::process::Command::new(bin())
        .arg("validate")
        .arg(&p.manifest)
        .arg("--bundles")
        .arg(bundles())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.containers[0].resources.limits[memory]: Invalid value: \"128Mi\": must be less than or equal to pod limits of 64Mi"),
        "{err}"
    );
}

/// The numbers of `groups=` in a line `uid=… gid=… groups=a b c`, as a sorted set.
fn group_set(log: &str) -> Vec<u32> {
    let mut g: Vec<u32> = log
        .split("groups=")
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    g.sort();
    g.dedup();
    g
}

fn supplemental_groups(fixture_name: &str, want: &[u32], status_groups: serde_json::Value) {
    require_root();
    let mut p = TestPod::new("sgp", &fixture(fixture_name));
    p.start();
    let v = p.wait_status(LIMIT, |v| running(v, &["sec-ctx-demo"]));
    let log = p.wait_log("sec-ctx-demo", 0, LIMIT, "groups=");
    assert!(log.starts_with("uid=1000 gid=3000 "), "{log}");
    assert_eq!(group_set(&log), want, "{log}");
    assert_eq!(
        container_status(&v, "sec-ctx-demo")["user"]["linux"],
        serde_json::json!({"uid": 1000, "gid": 3000, "supplementalGroups": status_groups})
    );
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn supplemental_groups_policy_merge_adds_the_image_s_groups() {
    // "users" (100) lists uid 1000's name in the image's /etc/group.
    supplemental_groups(
        "supplemental-groups-merge.yaml",
        &[100, 3000, 4000],
        serde_json::json!([3000, 100, 4000]),
    );
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn supplemental_groups_policy_strict_keeps_only_the_pod_s_groups() {
    supplemental_groups(
        "supplemental-groups-strict.yaml",
        &[3000, 4000],
        serde_json::json!([3000, 4000]),
    );
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_disk_empty_dir_past_its_size_limit_evicts_the_pod() {
    require_root();
    let mut p = TestPod::new("evict", &fixture("emptydir-size-limit.yaml"));
    // The eviction manager looks every 10 s.
    let out = p.run(Duration::from_secs(60));
    let s = &out.status["status"];
    assert_eq!(s["phase"], "Failed", "{}", out.stderr);
    assert_eq!(s["reason"], "Evicted");
    let msg = "Usage of EmptyDir volume \"cache-volume\" exceeds the limit \"1Mi\". ";
    assert_eq!(s["message"], msg);
    let ev: Vec<_> = events(&p)
        .into_iter()
        .filter(|e| e["reason"] == "Evicted")
        .collect();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["type"], "Warning");
    assert_eq!(ev[0]["message"], msg);
    // Killed at once (grace 0), not after the pod's 30 s.
    let t = &container_status(&out.status, "test-container")["state"]["terminated"];
    assert_eq!(t["exitCode"], 137, "{t}");
    assert_eq!(out.code, 1);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_memory_empty_dir_is_a_tmpfs_sized_by_size_limit_or_the_pod_s_memory() {
    require_root();
    let mut p = TestPod::new("edmem", &fixture("emptydir-memory.yaml"));
    p.start();
    let log = p.wait_log("test-container", 0, LIMIT, " /scratch ");
    let size = |mnt: &str| {
        let line = log
            .lines()
            .find(|l| l.contains(&format!(" {mnt} ")))
            .unwrap_or_else(|| panic!("{mnt} not mounted: {log}"));
        assert!(line.starts_with("tmpfs "), "{line}");
        line.split(',')
            .find_map(|o| o.strip_prefix("size="))
            .map(|s| s.split_whitespace().next().unwrap().to_string())
            .unwrap_or_else(|| panic!("no size: {line}"))
    };
    assert_eq!(size("/cache"), "16384k");
    assert_eq!(size("/scratch"), "65536k", "the pod's memory limit");
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

/// The docs' security-context-demo, step by step as the page goes: the processes run as
/// uid 1000; /data/demo (an emptyDir) belongs to group 2000 with the set-gid bit
/// (`drwxrwsrwx root 2000`), so a file the container writes there is group 2000 too; `id`
/// lists groups 2000, 3000 and 4000. A ConfigMap's file of mode 0400 gets group read:
/// kubelet's `SetVolumeOwnership` on a read-only volume.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn fs_group_owns_the_volumes_as_the_docs_security_context_demo_shows() {
    require_root();
    let mut p = TestPod::new("fsgroup", &fixture("security-context.yaml"));
    p.start();
    p.wait_status(LIMIT, |v| running(v, &["sec-ctx-demo"]));
    let exec = |script: &str| {
        let out = std::process::Command::new(bin())
            .args(["exec", "sec-ctx-demo", "--", "sh", "-c", script])
            .env("PODINIT_SOCKET", p.state.join("pod.sock"))
            .output_within(CLIENT_LIMIT);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{script}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    // The bundle's image names uid 1000 ("app"), where the docs' image does not: the
    // checks read the ids as numbers.
    assert_eq!(exec("stat -c '%u %g' /proc/1").trim(), "1000 3000");
    let demo = exec("ls -ldn /data/demo");
    let f: Vec<&str> = demo.split_whitespace().collect();
    assert_eq!((f[0], f[2], f[3]), ("drwxrwsrwx", "0", "2000"), "{demo}");
    let file = exec("echo hello > /data/demo/testfile; ls -ln /data/demo/testfile");
    let f: Vec<&str> = file.split_whitespace().collect();
    assert_eq!((f[0], f[2], f[3]), ("-rw-r--r--", "1000", "2000"), "{file}");
    // The docs' `groups=2000,3000,4000`, and 100: the bundle's /etc/group makes "app" a
    // member of "users", which the default policy (Merge) adds.
    assert_eq!(
        group_set(&exec("echo groups=$(id -G)")),
        [100, 2000, 3000, 4000]
    );
    let conf = exec("ls -lLn /etc/demo/greeting; cat /etc/demo/greeting");
    let f: Vec<&str> = conf.split_whitespace().collect();
    assert_eq!((f[0], f[3]), ("-r--r-----", "2000"), "{conf}");
    assert!(conf.ends_with("hello"), "{conf}");
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}
