//! A supervisor killed mid-run cannot write the pod's final status: `podinit run`, which
//! sees it die without announcing the pod's end, writes it instead, as kubelet reports a
//! pod whose sandbox is gone (phase Failed, each container that tried to start and did
//! not finish terminated with reason ContainerStatusUnknown), and leaves nothing behind.

mod common;
use common::*;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// SIGKILL the supervisor of the running pod `p`, wait for `podinit run`: its outcome.
fn kill_supervisor(p: &mut TestPod) -> Outcome {
    let sup = supervisor_pid(p);
    // SAFETY: kill(2) of the supervisor of our own pod.
    unsafe { libc::kill(sup, libc::SIGKILL) };
    let t0 = Instant::now();
    let out = p.wait(LIMIT);
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the pod's supervisor was killed by signal 9"),
        "{}",
        out.stderr
    );
    out
}

fn assert_lost(c: &serde_json::Value) {
    let t = &c["state"]["terminated"];
    assert_eq!(t["reason"], "ContainerStatusUnknown", "{c}");
    assert_eq!(t["exitCode"], 137, "{c}");
    assert_eq!(
        t["message"],
        "The container could not be located when the pod was terminated"
    );
    assert_eq!(c["ready"], false, "{c}");
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_killed_supervisor_s_pod_is_failed_with_its_containers_unknown() {
    require_root();
    let mut p = TestPod::new(
        "lostsup",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: long
    image: busybox
    command: ["sleep", "1000"]
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1}
  - name: done
    image: busybox
    command: ["true"]
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        let by_name = |name: &str| {
            v["status"]["containerStatuses"]
                .as_array()
                .and_then(|a| a.iter().find(|c| c["name"] == name))
                .cloned()
                .unwrap_or_default()
        };
        by_name("long")["ready"] == true
            && by_name("done")["state"]["terminated"]["reason"] == "Completed"
    });
    let out = kill_supervisor(&mut p);
    let st = &out.status;
    assert_eq!(st["status"]["phase"], "Failed", "{st}");
    assert_lost(container_status(st, "long"));
    // A container that had ended keeps its end.
    let done = &container_status(st, "done")["state"]["terminated"];
    assert_eq!(done["reason"], "Completed", "{st}");
    assert_eq!(done["exitCode"], 0, "{st}");
    for type_ in ["Ready", "ContainersReady"] {
        let c = condition(st, type_);
        assert_eq!(c["status"], "False", "{c}");
        assert_eq!(c["reason"], "PodFailed", "{c}");
    }
    // The rest of the object is what the supervisor wrote.
    assert_eq!(st["metadata"]["name"], p.name.as_str());
    assert!(st["status"]["startTime"].is_string(), "{st}");
    p.assert_nothing_left();
    assert!(!p.state.join("pod.sock").exists());
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_init_container_lost_with_its_supervisor_is_unknown_and_its_app_still_waits() {
    require_root();
    let mut p = TestPod::new(
        "lostinit",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: init
    image: busybox
    command: ["sleep", "1000"]
  containers:
  - name: app
    image: busybox
    command: ["sleep", "1000"]
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        v["status"]["initContainerStatuses"][0]["state"]["running"].is_object()
    });
    let out = kill_supervisor(&mut p);
    let st = &out.status;
    assert_eq!(st["status"]["phase"], "Failed", "{st}");
    assert_lost(&st["status"]["initContainerStatuses"][0]);
    // The pod never initialized: its app container never tried to start, as kubelet says.
    let app = &container_status(st, "app")["state"];
    assert!(app["waiting"].is_object(), "{st}");
    p.assert_nothing_left();
}
