//! The systemd cgroup driver (`--systemd-cgroup`) against runc's, where systemd is PID 1:
//! the unit each makes (`systemctl show`), the cgroup files that hold the limits, `update`
//! and `delete`. This host kind has no systemd: `scripts/vm-systemd-test` boots a Debian
//! VM that has, and runs these there. Elsewhere each test fails on its first line, saying
//! so (scripts/test skips them by their `systemd_vm_` prefix and runs the VM).

mod common;

use common::runc::{Bundle, Lab, Runc, RuncOut};
use common::{OutputWithin, CLIENT_LIMIT};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The slice the tests' scopes go in.
const SLICE: &str = "podinittest.slice";

fn require_systemd() {
    common::require_root();
    assert!(
        Path::new("/run/systemd/system").is_dir(),
        "needs systemd as PID 1 (no /run/systemd/system here): run scripts/vm-systemd-test"
    );
}

/// `systemctl show UNIT -p …` as a map.
fn show(unit: &str, props: &[&str]) -> BTreeMap<String, String> {
    let mut c = Command::new("systemctl");
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
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
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
    let mut out = show(unit, PROPS);
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
                "devices": [{"allow": false, "access": "rwm"}],
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
        let after = show(&unit, &["LoadState", "ActiveState"]);
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
    ];
    for (k, v) in want {
        assert_eq!(created[k], v, "{k} after create: {created:#?}");
    }
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
    assert_eq!(
        runc.0, tested.0,
        "after create: runc (left) and podinit differ"
    );
    assert_eq!(
        runc.1, tested.1,
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
        let props = show(&unit, &["ActiveState", "Slice", "ControlGroup", "Delegate"]);
        r.run(&["delete", "--force", &id]).expect_ok();
        let gone = show(&unit, &["LoadState"]);
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
