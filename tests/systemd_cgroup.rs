//! The systemd cgroup driver (`--systemd-cgroup`) against runc's, where systemd is PID 1:
//! the unit each makes (`systemctl show`), the cgroup files that hold the limits, `update`
//! and `delete`. This host kind has no systemd: `scripts/vm-systemd-test` boots a Debian
//! VM that has, and runs these there. Elsewhere each test fails on its first line, saying
//! so (scripts/test skips them by their `systemd_vm_` prefix and runs the VM).

mod common;

use common::runc::{Bundle, Lab, Runc, RuncOut};
use common::{systemctl_show, OutputWithin, CLIENT_LIMIT};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The slice the tests' scopes go in.
const SLICE: &str = "podinittest.slice";

fn require_systemd() {
    common::require_root();
    assert!(
        Path::new("/run/systemd/system").is_dir(),
        "needs systemd as PID 1 (no /run/systemd/system here): run scripts/vm-systemd-test"
    );
}

/// Units stopped (and forgotten if failed) at the end, whatever happened.
struct Units(Vec<String>);

impl Drop for Units {
    fn drop(&mut self) {
        for u in &self.0 {
            let _ = Command::new("systemctl")
                .args(["stop", u])
                .output_within(CLIENT_LIMIT);
            let _ = Command::new("systemctl")
                .args(["reset-failed", u])
                .output_within(CLIENT_LIMIT);
        }
    }
}

fn sd_create(r: &Runc, b: &Bundle, id: &str) -> RuncOut {
    r.track(id);
    r.run_detached(
        &["--systemd-cgroup", "create", "--bundle", b.path(), id],
        &b.dir.join("stdio"),
    )
}

/// What the unit says of itself, as both drivers should set it.
const PROPS: &[&str] = &[
    "LoadState",
    "ActiveState",
    "Slice",
    "ControlGroup",
    "Delegate",
    "Description",
    "DefaultDependencies",
    "MemoryAccounting",
    "CPUAccounting",
    "IOAccounting",
    "TasksAccounting",
    "MemoryMax",
    "MemoryLow",
    "TasksMax",
    "CPUWeight",
    "CPUQuotaPerSecUSec",
    "CPUQuotaPeriodUSec",
    "AllowedCPUs",
    "DevicePolicy",
];

/// The cgroup files that hold the limits.
const FILES: &[&str] = &[
    "memory.max",
    "memory.low",
    "memory.swap.max",
    "pids.max",
    "cpu.max",
    "cpu.weight",
    "cpuset.cpus",
];

fn files(dir: &Path) -> BTreeMap<String, String> {
    FILES
        .iter()
        .map(|f| {
            let v = std::fs::read_to_string(dir.join(f))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|e| format!("<{e}>"));
            (f.to_string(), v)
        })
        .collect()
}

/// Everything one runtime's container shows, with its own name replaced by `CG`.
fn seen(unit: &str, cg: &str, pid: i64) -> BTreeMap<String, String> {
    let mut out = systemctl_show(unit, PROPS);
    // Its entries as a set: systemd lists them newest first. Compared with runc's apart
    // (`device_allow`), since runc 1.1 spells a major's wildcard by its /proc/devices group.
    out.insert(
        "DeviceAllow".into(),
        systemctl_show(unit, &["DeviceAllow"])
            .remove("DeviceAllow")
            .unwrap_or_default(),
    );
    let dir = PathBuf::from(format!("/sys/fs/cgroup{}", out["ControlGroup"]));
    for (k, v) in files(&dir) {
        out.insert(format!("file {k}"), v);
    }
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    out.insert("init's cgroup".into(), own.trim().to_string());
    out.into_iter()
        .map(|(k, v)| (k, v.replace(cg, "CG")))
        .collect()
}

#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_a_container_s_scope_its_limits_update_and_delete_as_runc_s() {
    require_systemd();
    let lab = Lab::new("sd-scope");
    let mut units = Units(Vec::new());
    let [runc, tested] = lab.both().map(|r| {
        let mut b = lab.bundle(&["sleep", "600"]);
        b.set(
            "/linux/cgroupsPath",
            json!(format!("{SLICE}:pit:{}", b.cgroup)),
        );
        b.set(
            "/linux/resources",
            json!({
                "devices": [
                    {"allow": false, "access": "rwm"},
                    {"allow": true, "type": "b", "major": 7, "access": "rw"},
                    {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "r"}
                ],
                "memory": {"limit": 67108864, "reservation": 33554432},
                "cpu": {"shares": 512, "quota": 25000, "period": 100000, "cpus": "0"},
                "pids": {"limit": 42}
            }),
        );
        let unit = format!("pit-{}.scope", b.cgroup);
        units.0.push(unit.clone());
        let id = lab.id("sd");
        sd_create(r, &b, &id).expect_ok();
        let pid = r.state(&id).expect("state after create")["pid"]
            .as_i64()
            .unwrap();
        let created = seen(&unit, &b.cgroup, pid);
        r.run(&[
            "update",
            "--memory",
            "134217728",
            "--pids-limit",
            "50",
            "--cpu-quota",
            "50000",
            &id,
        ])
        .expect_ok();
        let updated = seen(&unit, &b.cgroup, pid);
        let dir = format!(
            "/sys/fs/cgroup{}",
            created["ControlGroup"].replace("CG", &b.cgroup)
        );
        r.run(&["kill", &id, "9"]).expect_ok();
        r.wait_status(&id, "stopped");
        r.run(&["delete", &id]).expect_ok();
        let after = systemctl_show(&unit, &["LoadState", "ActiveState"]);
        assert!(
            !Path::new(&dir).exists(),
            "{}: {dir} left after delete",
            r.label
        );
        (created, updated, after)
    });
    let (created, updated, after) = &tested;
    // What both must show, whatever runc does.
    let want = [
        ("ActiveState", "active"),
        ("Slice", SLICE),
        ("ControlGroup", "/podinittest.slice/pit-CG.scope"),
        ("Delegate", "yes"),
        ("MemoryMax", "67108864"),
        ("TasksMax", "42"),
        ("CPUQuotaPerSecUSec", "250ms"),
        ("file memory.max", "67108864"),
        ("file pids.max", "42"),
        ("file cpu.max", "25000 100000"),
        ("file cpu.weight", "20"),
        ("init's cgroup", "0::/podinittest.slice/pit-CG.scope"),
        ("DevicePolicy", "strict"),
    ];
    for (k, v) in want {
        assert_eq!(created[k], v, "{k} after create: {created:#?}");
    }
    // The spec's rules and runc's allowed devices, merged and in runc's order.
    for entry in [
        "/dev/char/1:3 rwm",
        "block-7 rw",
        "char-136 rwm",
        "block-* m",
    ] {
        assert!(
            created["DeviceAllow"].split(", ").any(|e| e == entry),
            "DeviceAllow has no {entry:?}: {created:#?}"
        );
    }
    assert_eq!(
        updated["DeviceAllow"], created["DeviceAllow"],
        "update sets the same device rules again"
    );
    for (k, v) in [
        ("MemoryMax", "134217728"),
        ("TasksMax", "50"),
        ("CPUQuotaPerSecUSec", "500ms"),
        ("file memory.max", "134217728"),
        ("file pids.max", "50"),
        ("file cpu.max", "50000 100000"),
    ] {
        assert_eq!(updated[k], v, "{k} after update: {updated:#?}");
    }
    assert_eq!(after["LoadState"], "not-found", "the unit after delete");
    // runc 1.1 (the oracle here) names `n:*` rules by their /proc/devices group
    // (`char-pts`) and skips a major the kernel has no group for; current runc, as podinit,
    // writes `char-136` on systemd 240 and later. The rest of the list is the same.
    let runc_devices: std::collections::BTreeSet<&str> =
        runc.0["DeviceAllow"].split(", ").collect();
    let our_devices: std::collections::BTreeSet<&str> =
        tested.0["DeviceAllow"].split(", ").collect();
    for e in &runc_devices {
        assert!(
            our_devices.contains(e) || e.starts_with("char-") || e.starts_with("block-"),
            "runc allows {e:?}, podinit does not: {our_devices:?}"
        );
    }
    let strip = |m: &BTreeMap<String, String>| {
        let mut m = m.clone();
        m.remove("DeviceAllow");
        m
    };
    assert_eq!(
        strip(&runc.0),
        strip(&tested.0),
        "after create: runc (left) and podinit differ"
    );
    assert_eq!(
        strip(&runc.1),
        strip(&tested.1),
        "after update: runc (left) and podinit differ"
    );
    assert_eq!(
        runc.2, tested.2,
        "after delete: runc (left) and podinit differ"
    );
}

#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_no_cgroups_path_is_runc_id_scope_in_system_slice() {
    require_systemd();
    let lab = Lab::new("sd-default");
    let mut units = Units(Vec::new());
    let [runc, tested] = lab.both().map(|r| {
        let mut b = lab.bundle(&["sleep", "600"]);
        b.config["linux"]
            .as_object_mut()
            .unwrap()
            .remove("cgroupsPath");
        b.write();
        let id = lab.id("sd");
        let unit = format!("runc-{id}.scope");
        units.0.push(unit.clone());
        sd_create(r, &b, &id).expect_ok();
        let props = systemctl_show(&unit, &["ActiveState", "Slice", "ControlGroup", "Delegate"]);
        r.run(&["delete", "--force", &id]).expect_ok();
        let gone = systemctl_show(&unit, &["LoadState"]);
        (
            props
                .into_iter()
                .map(|(k, v)| (k, v.replace(&id, "ID")))
                .collect::<BTreeMap<_, _>>(),
            gone,
        )
    });
    assert_eq!(tested.0["ActiveState"], "active");
    assert_eq!(tested.0["Slice"], "system.slice");
    assert_eq!(tested.0["ControlGroup"], "/system.slice/runc-ID.scope");
    assert_eq!(
        tested.1["LoadState"], "not-found",
        "delete --force stops it"
    );
    assert_eq!(runc, tested, "runc (left) and podinit differ");
}

#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_a_path_not_slice_prefix_name_is_refused_as_runc_refuses_it() {
    require_systemd();
    let lab = Lab::new("sd-bad");
    let [runc, tested] = lab.both().map(|r| {
        let mut b = lab.bundle(&["true"]);
        b.set("/linux/cgroupsPath", json!(format!("/{}", b.cgroup)));
        let id = lab.id("sd");
        let out = sd_create(r, &b, &id).expect_fail();
        let _ = r.run(&["delete", "--force", &id]);
        lab.assert_nothing_left(r, &b, &id, false);
        // The message of the error line, the bundle's own name taken out.
        let line = out.stderr.lines().find(|l| l.contains("level=error"));
        let msg = line.and_then(|l| l.split_once("msg=")).map(|(_, m)| m);
        // runc 1.1 puts "runc create failed: " before every create error; podinit's
        // front-end names no verb in any of its errors.
        msg.unwrap_or_default()
            .replace("runc create failed: ", "")
            .replace(&b.cgroup, "CG")
    });
    assert!(
        runc.contains("expected cgroupsPath to be of format")
            && runc.contains("for systemd cgroups"),
        "runc's message changed: {runc}"
    );
    assert_eq!(runc, tested, "runc (left) and podinit say it differently");
}

/// `podinit run --cgroup-driver systemd`, as kubelet's systemd driver lays a pod out: a
/// transient slice named after the pod's QoS class and uid with the pod's limits, a
/// delegated scope for each container run with its limits and device rules, and nothing
/// of either left once the pod has ended.
#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_a_pod_is_a_kubepods_slice_with_a_scope_a_container() {
    require_systemd();
    let uid = format!("{}-1c1a-4f0e", common::unique("sdpod"));
    let mut p = common::TestPod::new(
        "sdpod",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME, uid: {uid}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sleep", "600"]
    resources: {{requests: {{cpu: 100m}}, limits: {{memory: 64Mi, cpu: 500m}}}}
"#
        ),
    );
    let slice = format!("kubepods-burstable-pod{}.slice", uid.replace('-', "_"));
    let mut units = Units(vec![slice.clone()]);
    let mut cmd = p.command();
    cmd.args(["--cgroup-driver", "systemd"]);
    p.start_with(cmd);
    let status = p.wait_status(Duration::from_secs(60), |v| {
        common::container_status(v, "c")["state"]["running"].is_object()
    });
    let id = common::container_status(&status, "c")["containerID"]
        .as_str()
        .unwrap()
        .trim_start_matches("podinit://")
        .to_string();
    let scope = format!("podinit-{id}.scope");
    units.0.push(scope.clone());
    let pod = systemctl_show(
        &slice,
        &[
            "ActiveState",
            "Slice",
            "ControlGroup",
            "MemoryMax",
            "CPUQuotaPerSecUSec",
        ],
    );
    assert_eq!(pod["ActiveState"], "active", "{pod:#?}");
    assert_eq!(pod["Slice"], "kubepods-burstable.slice");
    let pod_cg = format!("/kubepods.slice/kubepods-burstable.slice/{slice}");
    assert_eq!(pod["ControlGroup"], pod_cg);
    assert_eq!(pod["MemoryMax"], "67108864", "the pod's limit: {pod:#?}");
    assert_eq!(pod["CPUQuotaPerSecUSec"], "500ms");
    let mut props = PROPS.to_vec();
    props.push("DeviceAllow");
    let c = systemctl_show(&scope, &props);
    for (k, v) in [
        ("ActiveState", "active"),
        ("Slice", slice.as_str()),
        ("Delegate", "yes"),
        ("MemoryMax", "67108864"),
        ("CPUQuotaPerSecUSec", "500ms"),
        ("DevicePolicy", "strict"),
    ] {
        assert_eq!(c[k], v, "{k} of the container's scope: {c:#?}");
    }
    assert!(
        c["DeviceAllow"]
            .split(", ")
            .any(|e| e == "/dev/char/1:3 rwm"),
        "{c:#?}"
    );
    let dir = PathBuf::from(format!("/sys/fs/cgroup{pod_cg}/{scope}"));
    assert_eq!(
        std::fs::read_to_string(dir.join("memory.max"))
            .unwrap()
            .trim(),
        "67108864"
    );
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    let pid = procs
        .lines()
        .next()
        .expect("the container's process is in its scope");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "sleep");
    // The supervisor is outside the slice, where podinit runs.
    let sup = common::supervisor_pid(&p);
    let own = std::fs::read_to_string(format!("/proc/{sup}/cgroup")).unwrap();
    assert!(!own.contains("kubepods"), "the supervisor: {own}");
    p.signal(libc::SIGTERM);
    let out = p.wait(Duration::from_secs(60));
    assert_eq!(out.code, 1, "a pod stopped: {}", out.stderr);
    assert_slice_stopped(&slice);
    assert_eq!(
        systemctl_show(&scope, &["LoadState"])["LoadState"],
        "not-found"
    );
    assert!(
        !Path::new(&format!("/sys/fs/cgroup{pod_cg}")).exists(),
        "the pod's slice left {pod_cg}"
    );
    p.assert_nothing_left();
}

/// The pod's slice is stopped. systemd loads a slice unit of any valid name without a
/// unit file (asking for it loads it), so a slice gone reads `inactive`, not `not-found`.
fn assert_slice_stopped(slice: &str) {
    let seen = systemctl_show(slice, &["ActiveState", "LoadState"]);
    assert_eq!(
        seen["ActiveState"], "inactive",
        "the pod's slice {slice} after the pod: {seen:?}"
    );
}

/// A pod in a parent slice of the caller's (its slice is named in it); a `--cgroup-parent`
/// that is no slice is bad input under the systemd driver.
#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_a_pod_under_a_parent_slice_of_its_own() {
    require_systemd();
    let parent = format!("{}.slice", common::unique("podinittest").replace('-', "_"));
    let mut units = Units(vec![parent.clone()]);
    let mut p = common::TestPod::new(
        "sdparent",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME, uid: u1-NAME}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    command: ["true"]
"#,
    );
    let slice = format!(
        "{}-podu1_{}.slice",
        parent.trim_end_matches(".slice"),
        p.name.replace('-', "_")
    );
    units.0.insert(0, slice.clone());
    let mut cmd = p.command();
    cmd.args(["--cgroup-driver", "systemd", "--cgroup-parent", &parent]);
    p.start_with(cmd);
    let seen = p.wait_status(Duration::from_secs(60), |v| {
        v["status"]["phase"] == "Succeeded" || v["status"]["phase"] == "Failed"
    });
    let out = p.wait(Duration::from_secs(60));
    assert_eq!(out.code, 0, "{}\n{seen}", out.stderr);
    assert_slice_stopped(&slice);
    let bad = common::TestPod::new("sdbad", "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec: {containers: [{name: c, image: busybox}]}\n");
    let o = bad
        .command()
        .args(["--cgroup-driver", "systemd", "--cgroup-parent", "/kubepods"])
        .output_within(CLIENT_LIMIT);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--cgroup-parent \"/kubepods\"") && err.contains("names a slice"),
        "{err}"
    );
    assert!(
        !bad.state.exists(),
        "bad input made {}",
        bad.state.display()
    );
}
