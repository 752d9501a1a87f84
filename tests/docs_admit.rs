//! kubelet's admission of the docs' examples, on the real binary:
//! node selectors and affinity, nodeName, resources against the node's allocatable,
//! extended resources, AppArmor in both forms and the old seccomp annotation. A rejected
//! pod is Failed with kubelet's reason and "Pod was rejected: <message>", a Warning event
//! with the same reason and message, exit 1, and nothing but its status and events left.

mod common;
use common::*;
use serde_json::Value;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);
const NODE: &str = "podinit-test-node";

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/docs/admit/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Run fixture `name` with `--node-name` and `flags` to its end.
fn run(name: &str, flags: &[&str]) -> (TestPod, Outcome) {
    let prefix: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(12)
        .collect();
    let mut p = TestPod::new(&prefix.to_lowercase(), &fixture(name));
    let mut cmd = p.command();
    cmd.args(["--node-name", NODE]).args(flags);
    p.start_with(cmd);
    let out = p.wait(LIMIT);
    (p, out)
}

/// The pod was rejected as kubelet's `rejectPod` reports it.
fn assert_rejected(p: &TestPod, out: &Outcome, reason: &str, message: &str, qos: &str) {
    assert_eq!(out.code, 1, "a rejected pod has Failed: {}", out.stderr);
    let st = &out.status["status"];
    assert_eq!(st["phase"], "Failed", "{}", out.status);
    assert_eq!(st["reason"], reason, "{}", out.status);
    assert_eq!(st["message"], format!("Pod was rejected: {message}"));
    assert_eq!(st["qosClass"], qos);
    assert!(st["startTime"].is_string(), "{}", out.status);
    assert!(
        st["containerStatuses"].is_null(),
        "no container was created"
    );
    let ev = events(p);
    assert_eq!(ev.len(), 1, "one event: {ev:?}");
    assert_eq!(ev[0]["type"], "Warning");
    assert_eq!(ev[0]["reason"], reason);
    assert_eq!(ev[0]["message"], message);
    assert_eq!(ev[0]["involvedObject"]["name"], p.name.as_str());
    assert!(
        out.stderr
            .contains(&format!("the pod was rejected: {reason}: {message}")),
        "{}",
        out.stderr
    );
    assert!(!p.state.join("logs").exists(), "no container ever logged");
    p.assert_nothing_left();
}

fn node_affinity() -> &'static str {
    "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_node_selector_needs_the_nodes_label() {
    require_root();
    let (p, out) = run("pod-nginx-nodeselector.yaml", &[]);
    assert_rejected(&p, &out, "NodeAffinity", node_affinity(), "BestEffort");
    let (p, out) = run(
        "pod-nginx-nodeselector.yaml",
        &["--node-labels", "disktype=ssd"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    assert_eq!(out.status["spec"]["nodeName"], NODE);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn required_node_affinity_and_windows_pods_are_rejected() {
    require_root();
    let (p, out) = run("pod-with-node-affinity.yaml", &[]);
    assert_rejected(&p, &out, "NodeAffinity", node_affinity(), "BestEffort");
    let (p, out) = run("windows-nodeselector.yaml", &[]);
    assert_rejected(&p, &out, "NodeAffinity", node_affinity(), "BestEffort");
    let (p, out) = run("windows-os-field.yaml", &[]);
    let msg = "Failed to admit pod as the OS field doesn't match node OS";
    assert_rejected(&p, &out, "PodOSNotSupported", msg, "BestEffort");
    let zone = "topology.kubernetes.io/zone=antarctica-west1";
    let (p, out) = run("pod-with-node-affinity.yaml", &["--node-labels", zone]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_pod_bound_to_another_node_is_rejected_and_ours_reads_its_node() {
    require_root();
    let (p, out) = run("node-name.yaml", &[]);
    let msg = "Predicate NodeName failed: node(s) didn't match the requested node name";
    assert_rejected(&p, &out, "NodeName", msg, "BestEffort");
    assert_eq!(out.status["spec"]["nodeName"], "kube-01");
    let (p, out) = run("dapi-envars-nodename.yaml", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("test-container", 0), NODE);
    assert_eq!(out.status["spec"]["nodeName"], NODE);
    p.assert_nothing_left();
}

fn online_cpus() -> i64 {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) as i64 }
}

fn mem_total() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn more_cpu_or_memory_than_the_node_has_is_out_of_it() {
    require_root();
    let (p, out) = run("cpu-request-limit-2.yaml", &[]);
    let msg = format!(
        "Node didn't have enough resource: cpu, requested: 100000, used: 0, capacity: {}",
        online_cpus() * 1000
    );
    assert_rejected(&p, &out, "OutOfcpu", &msg, "Burstable");
    let (p, out) = run("memory-request-limit-3.yaml", &[]);
    let msg = format!(
        "Node didn't have enough resource: memory, requested: {}, used: 0, capacity: {}",
        1000u64 << 30,
        mem_total()
    );
    assert_rejected(&p, &out, "OutOfmemory", &msg, "Burstable");
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn system_reserved_is_kept_back_from_allocatable() {
    require_root();
    // Reserving every CPU but one leaves 1000m of allocatable.
    let reserved = format!("cpu={}", online_cpus() - 1);
    let (p, out) = run(
        "cpu-request-limit-2.yaml",
        &["--system-reserved", &reserved],
    );
    let msg = "Node didn't have enough resource: cpu, requested: 100000, used: 0, capacity: 1000";
    assert_rejected(&p, &out, "OutOfcpu", msg, "Burstable");
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn extended_resources_fit_what_the_node_declares() {
    require_root();
    let (p, out) = run("extended-resource-pod.yaml", &[]);
    let msg =
        "Node didn't have enough resource: example.com/dongle, requested: 3, used: 0, capacity: 0";
    assert_rejected(&p, &out, "OutOfexample.com/dongle", msg, "BestEffort");
    let (p, out) = run(
        "extended-resource-pod.yaml",
        &["--node-resources", "example.com/dongle=2"],
    );
    let msg =
        "Node didn't have enough resource: example.com/dongle, requested: 3, used: 0, capacity: 2";
    assert_rejected(&p, &out, "OutOfexample.com/dongle", msg, "BestEffort");
    let (p, out) = run("gpu-pod.yaml", &[]);
    let msg =
        "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0";
    assert_rejected(&p, &out, "OutOfnvidia.com/gpu", msg, "BestEffort");
    let (p, out) = run(
        "extended-resource-pod.yaml",
        &["--node-resources", "example.com/dongle=4"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("extended-resource-demo-ctr", 0), "dongles");
    p.assert_nothing_left();
}

fn apparmor_message() -> &'static str {
    let enabled = std::path::Path::new("/sys/kernel/security/apparmor").exists()
        && std::fs::read("/sys/module/apparmor/parameters/enabled")
            .is_ok_and(|b| b.first() == Some(&b'Y'));
    if enabled {
        "Cannot enforce AppArmor: podinit does not apply AppArmor profiles"
    } else {
        "Cannot enforce AppArmor: AppArmor is not enabled on the host"
    }
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn apparmor_in_either_form_is_enforced_or_the_pod_rejected() {
    require_root();
    for f in ["hello-apparmor.yaml", "hello-apparmor-annotation.yaml"] {
        let (p, out) = run(f, &[]);
        assert_rejected(&p, &out, "AppArmor", apparmor_message(), "BestEffort");
    }
    let (p, out) = run("apparmor-unconfined.yaml", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_old_seccomp_annotation_becomes_the_field_and_is_enforced() {
    require_root();
    let (p, out) = run("seccomp-annotation.yaml", &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let sc: &Value = &out.status["spec"]["securityContext"]["seccompProfile"];
    assert_eq!(sc["type"], "RuntimeDefault", "{}", out.status);
    // 2: a seccomp filter is in force.
    assert_eq!(p.log("c", 0), "Seccomp:\t2");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn bad_node_flags_are_refused_before_anything_is_made() {
    require_root();
    for (flag, value, says) in [
        (
            "--node-labels",
            "disktype",
            "--node-labels: \"disktype\": must be name=value",
        ),
        (
            "--node-resources",
            "gpu=1",
            "--node-resources: \"gpu\": not an extended resource name",
        ),
        (
            "--system-reserved",
            "memory=lots",
            "--system-reserved: memory=\"lots\": not a quantity",
        ),
    ] {
        let (p, out) = run("gpu-pod.yaml", &[flag, value]);
        assert_eq!(out.code, 2, "{flag} {value}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
        p.assert_sandbox_gone();
    }
}
