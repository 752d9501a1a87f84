//! The CRI flow on a node whose kubelet runs the systemd cgroup driver: containerd 1.6,
//! and containerd 2 with podinit's task mode and Sandbox mode, with `SystemdCgroup = true`
//! for every handler, each pod's cgroup parent a `kubepods-besteffort-pod<uid>.slice`, as
//! kubelet hands it. The runc handler is the reference: each container's cgroup is the
//! transient scope `cri-containerd-<id>.scope` in the pod's slice, and so is its pause's,
//! which podinit's handler must make the same, and remove with the pod. This host kind has
//! no systemd: `scripts/vm-systemd-test` runs these in its VM.

mod common;
#[path = "common/cri.rs"]
mod cri;
#[path = "common/cri_client.rs"]
mod cri_client;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{systemctl_show, OutputWithin, CLIENT_LIMIT};
use cri::{container_pid, run, wait_state, Containerd, Lab, SANDBOX_HANDLER};
use cri_client::api;

/// The pods' slices stopped at the end, whatever happened (the lab removes the pods).
struct Slices(Vec<String>);

impl Drop for Slices {
    fn drop(&mut self) {
        for s in &self.0 {
            let _ = Command::new("systemctl")
                .args(["stop", s])
                .output_within(CLIENT_LIMIT);
        }
    }
}

/// One pod with one container on `handler`: what systemd says of the container's scope
/// (its own id and the pod's uid replaced), and of the units once the pod is removed.
fn flow(lab: &Lab, handler: &str, slices: &mut Slices) -> BTreeMap<String, String> {
    let pc = lab.pod_config(&cri::unique("sd"), true, false);
    let uid = pc.metadata.as_ref().unwrap().uid.clone();
    let slice = lab.pod_cgroup_parent(&uid);
    slices.0.push(slice.clone());
    let pod = lab
        .cri()
        .run_pod(&pc, handler)
        .unwrap_or_else(|e| panic!("RunPodSandbox on {handler}: {e}"));
    let cc = lab.container_config("c", &["sleep", "600"]);
    let id = run(lab, &pod, &pc, &cc);
    wait_state(lab, &id, api::ContainerState::ContainerRunning);
    let scope = format!("cri-containerd-{id}.scope");
    let mut seen = systemctl_show(
        &scope,
        &[
            "LoadState",
            "ActiveState",
            "Slice",
            "ControlGroup",
            "Delegate",
            "DevicePolicy",
        ],
    );
    // The sandbox's own cgroup: a pause's scope, or the Sandbox mode's PID 1's.
    let sandbox_scope = format!("cri-containerd-{pod}.scope");
    for (k, v) in systemctl_show(&sandbox_scope, &["ActiveState", "Slice", "ControlGroup"]) {
        seen.insert(format!("sandbox's {k}"), v);
    }
    let pid = container_pid(lab, &id);
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    seen.insert("process's cgroup".into(), own.trim().to_string());
    let shims: Vec<String> = lab.shims().into_iter().map(|(_, cmd)| cmd).collect();
    seen.insert(
        "podinit's shim serves it".into(),
        shims.iter().any(|c| c.contains("podinit")).to_string(),
    );
    let c = lab.cri();
    c.stop_pod(&pod)
        .unwrap_or_else(|e| panic!("StopPodSandbox on {handler}: {e}"));
    c.remove_pod(&pod)
        .unwrap_or_else(|e| panic!("RemovePodSandbox on {handler}: {e}"));
    seen.insert(
        "scope after removal".into(),
        systemctl_show(&scope, &["LoadState"])["LoadState"].clone(),
    );
    seen.insert(
        "sandbox's scope after removal".into(),
        systemctl_show(&sandbox_scope, &["LoadState"])["LoadState"].clone(),
    );
    let cg = seen["ControlGroup"].clone();
    seen.insert(
        "scope's cgroup after removal".into(),
        Path::new(&format!("/sys/fs/cgroup{cg}"))
            .exists()
            .to_string(),
    );
    seen.into_iter()
        .map(|(k, v)| {
            (
                k,
                v.replace(&id, "ID")
                    .replace(&pod, "POD")
                    .replace(&uid.replace('-', "_"), "UID"),
            )
        })
        .collect()
}

/// podinit's `handler` gave what runc's handler did: the container's scope in the pod's
/// slice, `Delegate=yes`, the devices limited, the pause's scope beside it, all gone with
/// the pod.
fn same_as_runc(
    runc: &BTreeMap<String, String>,
    podinit: &BTreeMap<String, String>,
    handler: &str,
) {
    for (k, v) in [
        ("ActiveState", "active"),
        ("Slice", "kubepods-besteffort-podUID.slice"),
        (
            "ControlGroup",
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podUID.slice/cri-containerd-ID.scope",
        ),
        ("Delegate", "yes"),
        ("DevicePolicy", "strict"),
        ("sandbox's ActiveState", "active"),
        ("sandbox's Slice", "kubepods-besteffort-podUID.slice"),
        (
            "sandbox's ControlGroup",
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podUID.slice/cri-containerd-POD.scope",
        ),
        ("scope after removal", "not-found"),
        ("sandbox's scope after removal", "not-found"),
        ("scope's cgroup after removal", "false"),
    ] {
        assert_eq!(podinit[k], v, "{k} on {handler}: {podinit:#?}");
    }
    assert_eq!(
        podinit["process's cgroup"],
        format!("0::{}", podinit["ControlGroup"]),
        "the container's process is in its scope ({handler})"
    );
    assert_eq!(
        podinit["podinit's shim serves it"], "true",
        "containerd ran {handler} on another shim: {podinit:#?}"
    );
    let mut runc = runc.clone();
    runc.insert("podinit's shim serves it".into(), "true".into());
    assert_eq!(&runc, podinit, "runc's handler (left) and {handler} differ");
}

#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_cri_containers_are_scopes_in_the_pod_s_slice_as_runc_s() {
    common::require_root();
    assert!(
        Path::new("/run/systemd/system").is_dir(),
        "needs systemd as PID 1 (no /run/systemd/system here): run scripts/vm-systemd-test"
    );
    let lab = Lab::with_systemd("sdcri", Containerd::V1_6);
    let mut slices = Slices(Vec::new());
    let runc = flow(&lab, "runc", &mut slices);
    let podinit = flow(&lab, "podinit", &mut slices);
    same_as_runc(&runc, &podinit, "podinit's handler");
}

#[test]
#[ignore = "needs systemd as PID 1: scripts/vm-systemd-test runs it"]
fn systemd_vm_cri_on_containerd_2_task_and_sandbox_modes_as_runc_s() {
    common::require_root();
    assert!(
        Path::new("/run/systemd/system").is_dir(),
        "needs systemd as PID 1 (no /run/systemd/system here): run scripts/vm-systemd-test"
    );
    let v2 = Containerd::v2().expect(
        "needs containerd 2: no shared/containerd-2/bin/containerd above the crate and no \
         PODINIT_CONTAINERD2",
    );
    let lab = Lab::with_systemd("sdcri2", v2);
    let mut slices = Slices(Vec::new());
    let runc = flow(&lab, "runc", &mut slices);
    let task = flow(&lab, "podinit", &mut slices);
    let sandbox = flow(&lab, SANDBOX_HANDLER, &mut slices);
    same_as_runc(&runc, &task, "podinit's handler on containerd 2");
    same_as_runc(&runc, &sandbox, "podinit's Sandbox mode");
}
