//! The final status of a pod whose supervisor died without writing it (killed, crashed):
//! the outer process writes it instead, as kubelet's `TerminatePod` reports a pod whose
//! sandbox is gone: the pod Failed (unless its end was written already), each container
//! that tried to start and has no terminated state terminated with an unknown status
//! (the rule `pod::state`'s `on_pod_ended` applies to a pod that ends normally), and the
//! pod no longer ready.
//!
//! On the file's JSON value, not the typed Pod: whatever the supervisor wrote is kept as
//! it is, and PodStatus's deserializer stays out of the binary.

use serde_json::{json, Value};
use std::path::Path;

/// kubelet's exit code, reason and message for a container lost with its sandbox.
const EXIT_CODE: i32 = 137;
const REASON: &str = "ContainerStatusUnknown";
const MESSAGE: &str = "The container could not be located when the pod was terminated";

/// Rewrite `status.json` at `path` as the final status of a lost pod, atomically. A pod
/// whose supervisor wrote no status yet has none to finish.
pub(super) fn write_final_status(path: &Path) -> Result<(), String> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let mut pod: Value =
        serde_json::from_slice(&text).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let now = crate::util::now_unix_nanos() / 1_000_000_000;
    mark_lost(&mut pod, &rfc3339(now as i64));
    let mut out = serde_json::to_vec_pretty(&pod).map_err(|e| e.to_string())?;
    out.push(b'\n');
    crate::util::write_atomic(path, &out).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// A Kubernetes `Time` (RFC 3339, whole seconds, UTC) of `secs` since the epoch.
fn rfc3339(secs: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .ok()
        .and_then(|t| {
            serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t)).ok()
        })
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The final status of `pod` (a Pod object as JSON) whose sandbox was lost at `now`.
fn mark_lost(pod: &mut Value, now: &str) {
    let inits = &pod["spec"]["initContainers"];
    let has_inits = inits.as_array().is_some_and(|v| !v.is_empty());
    let sidecars: Vec<String> = inits
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always")
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    // A pod whose end was written before its supervisor died keeps it.
    let phase = status.get("phase").and_then(Value::as_str);
    if !matches!(phase, Some("Succeeded" | "Failed")) {
        status.insert("phase".into(), json!("Failed"));
    }
    // App containers only once the pod has initialized: one still waiting for its init
    // containers never tried to start.
    let app_started = !has_inits || initialized(status, &sidecars);
    for c in statuses(status.get_mut("containerStatuses")) {
        if app_started && !terminated(c) {
            mark_unknown(c);
        }
        c["ready"] = json!(false);
    }
    for c in statuses(status.get_mut("ephemeralContainerStatuses")) {
        if !terminated(c) {
            mark_unknown(c);
        }
        c["ready"] = json!(false);
    }
    // Init containers: all but a trailing run of never-started ones, and always the
    // first; one that never started did not fail.
    let inits = statuses(status.get_mut("initContainerStatuses"));
    let tried = inits
        .iter()
        .rposition(|c| started_once(c))
        .map_or(inits.len().min(1), |p| p + 1);
    for (i, c) in inits.into_iter().enumerate() {
        if i < tried && !terminated(c) {
            mark_unknown(c);
        }
        c["ready"] = json!(false);
    }
    for c in statuses(status.get_mut("conditions")) {
        let reason = match c["type"].as_str() {
            Some("PodReadyToStartContainers") => None,
            Some("ContainersReady" | "Ready") => Some("PodFailed"),
            _ => continue,
        };
        if c["status"] != "False" {
            c["status"] = json!("False");
            c["lastTransitionTime"] = json!(now);
        }
        let Some(o) = c.as_object_mut() else { continue };
        o.remove("message");
        match reason {
            Some(r) => o.insert("reason".into(), json!(r)),
            None => o.remove("reason"),
        };
    }
}

/// Whether a pod with init containers had initialized (kubelet's `hasPodInitialized`): an
/// app container left waiting once, or the last init container succeeded (a sidecar:
/// runs and has started). `sidecars` names the init containers that are sidecars.
fn initialized(status: &serde_json::Map<String, Value>, sidecars: &[String]) -> bool {
    let apps = status.get("containerStatuses").and_then(Value::as_array);
    if apps.into_iter().flatten().any(started_once) {
        return true;
    }
    let Some(last) = status
        .get("initContainerStatuses")
        .and_then(Value::as_array)
        .and_then(|v| v.last())
    else {
        return false;
    };
    let is_sidecar = last["name"]
        .as_str()
        .is_some_and(|n| sidecars.iter().any(|s| s == n));
    if is_sidecar {
        return last["state"].get("running").is_some() && last["started"] == true;
    }
    last["lastState"]["terminated"]["exitCode"] == 0 || last["state"]["terminated"]["exitCode"] == 0
}

/// The objects of a status list.
fn statuses(list: Option<&mut Value>) -> Vec<&mut Value> {
    match list {
        Some(Value::Array(v)) => v.iter_mut().filter(|c| c.is_object()).collect(),
        _ => Vec::new(),
    }
}

fn terminated(c: &Value) -> bool {
    c["state"].get("terminated").is_some()
}

/// There is evidence that the container started: it is not waiting, or it ran before.
fn started_once(c: &Value) -> bool {
    c["state"].get("waiting").is_none() || c["lastState"].get("terminated").is_some()
}

fn mark_unknown(c: &mut Value) {
    c["state"] = json!({"terminated": {
        "exitCode": EXIT_CODE,
        "reason": REASON,
        "message": MESSAGE,
    }});
    c["started"] = json!(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-01-02T03:04:05Z";

    fn pod(status: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "uid": "u"},
            "spec": {"containers": [{"name": "a", "image": "busybox"}]},
            "status": status,
        })
    }

    fn unknown() -> Value {
        json!({"terminated": {"exitCode": 137, "reason": REASON, "message": MESSAGE}})
    }

    #[test]
    fn a_running_pod_becomes_failed_with_its_containers_unknown() {
        let mut p = pod(json!({
            "phase": "Running",
            "podIP": "10.0.0.1",
            "containerStatuses": [
                {"name": "a", "ready": true, "started": true, "restartCount": 2,
                 "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                 "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}},
                {"name": "b", "ready": false, "started": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                {"name": "c", "ready": false, "started": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            ],
        }));
        let before = p.clone();
        mark_lost(&mut p, NOW);
        let st = &p["status"];
        assert_eq!(st["phase"], "Failed");
        let cs = st["containerStatuses"].as_array().unwrap();
        assert_eq!(cs[0]["state"], unknown());
        assert_eq!(cs[0]["ready"], false);
        assert_eq!(cs[0]["started"], false);
        // What the supervisor wrote of the last run and the count stays.
        assert_eq!(
            cs[0]["lastState"],
            before["status"]["containerStatuses"][0]["lastState"]
        );
        assert_eq!(cs[0]["restartCount"], 2);
        assert_eq!(cs[1]["state"], unknown());
        // A container that had ended keeps its end.
        assert_eq!(cs[2]["state"]["terminated"]["reason"], "Completed");
        // The rest of the object is as it was.
        assert_eq!(st["podIP"], "10.0.0.1");
        assert_eq!(p["metadata"], before["metadata"]);
        assert_eq!(p["spec"], before["spec"]);
    }

    #[test]
    fn the_pod_is_no_longer_ready() {
        let cond = |t: &str, s: &str| json!({"type": t, "status": s, "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let mut p = pod(json!({
            "phase": "Running",
            "conditions": [
                cond("PodReadyToStartContainers", "True"),
                cond("Initialized", "True"),
                cond("ContainersReady", "True"),
                cond("Ready", "True"),
                cond("PodScheduled", "True"),
            ],
        }));
        mark_lost(&mut p, NOW);
        let c = &p["status"]["conditions"];
        assert_eq!(c[0]["status"], "False");
        assert_eq!(c[0]["lastTransitionTime"], NOW);
        assert_eq!(c[1], cond("Initialized", "True"));
        for i in [2, 3] {
            assert_eq!(c[i]["status"], "False");
            assert_eq!(c[i]["reason"], "PodFailed");
            assert_eq!(c[i]["lastTransitionTime"], NOW);
        }
        assert_eq!(c[4], cond("PodScheduled", "True"));
    }

    #[test]
    fn a_condition_already_false_keeps_its_transition_time() {
        let mut p = pod(json!({"conditions": [{
            "type": "Ready", "status": "False", "reason": "ContainersNotReady",
            "message": "containers with unready status: [a]",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}));
        mark_lost(&mut p, NOW);
        assert_eq!(
            p["status"]["conditions"][0],
            json!({"type": "Ready", "status": "False", "reason": "PodFailed",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"})
        );
    }

    fn with_inits(inits: &[&str], status: Value) -> Value {
        let mut p = pod(status);
        let specs: Vec<Value> = inits
            .iter()
            .map(|n| match n.strip_suffix("+sidecar") {
                Some(n) => json!({"name": n, "image": "busybox", "restartPolicy": "Always"}),
                None => json!({"name": n, "image": "busybox"}),
            })
            .collect();
        p["spec"]["initContainers"] = json!(specs);
        p
    }

    fn c(name: &str, state: &Value) -> Value {
        json!({"name": name, "ready": false, "restartCount": 0, "state": state})
    }

    #[test]
    fn init_containers_that_never_started_are_left_waiting() {
        let waiting = json!({"waiting": {"reason": "PodInitializing"}});
        let done = json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        let running = json!({"running": {}});
        let mut p = with_inits(
            &["i0", "i1", "i2"],
            json!({
                "initContainerStatuses": [c("i0", &done), c("i1", &running), c("i2", &waiting)],
                "containerStatuses": [c("a", &waiting)],
            }),
        );
        mark_lost(&mut p, NOW);
        let st = &p["status"];
        assert_eq!(st["phase"], "Failed");
        assert_eq!(st["initContainerStatuses"][0]["state"], done);
        assert_eq!(st["initContainerStatuses"][1]["state"], unknown());
        assert_eq!(st["initContainerStatuses"][2]["state"], waiting);
        // The pod had not initialized: its app container never tried to start.
        assert_eq!(st["containerStatuses"][0]["state"], waiting);

        // The first init container is the one that was being started.
        let mut p = with_inits(
            &["i0", "i1"],
            json!({"initContainerStatuses": [c("i0", &waiting), c("i1", &waiting)]}),
        );
        mark_lost(&mut p, NOW);
        let st = &p["status"]["initContainerStatuses"];
        assert_eq!(st[0]["state"], unknown());
        assert_eq!(st[1]["state"], waiting);
    }

    #[test]
    fn app_containers_are_lost_once_the_pod_has_initialized() {
        let waiting = json!({"waiting": {"reason": "PodInitializing"}});
        let done = json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        let failed = json!({"terminated": {"exitCode": 1, "reason": "Error"}});
        let running = json!({"running": {}});
        let app_state = |inits: &[&str], init_statuses: Value| {
            let mut p = with_inits(
                inits,
                json!({"initContainerStatuses": init_statuses,
                       "containerStatuses": [c("a", &waiting)]}),
            );
            mark_lost(&mut p, NOW);
            p["status"]["containerStatuses"][0]["state"].clone()
        };
        // The last init container succeeded.
        assert_eq!(app_state(&["i"], json!([c("i", &done)])), unknown());
        // It failed, and was not restarted into a success.
        assert_eq!(app_state(&["i"], json!([c("i", &failed)])), waiting);
        // A sidecar last: initialized once it runs and has started.
        let mut started = c("s", &running);
        started["started"] = json!(true);
        assert_eq!(app_state(&["s+sidecar"], json!([started])), unknown());
        assert_eq!(
            app_state(&["s+sidecar"], json!([c("s", &running)])),
            waiting
        );
        // An app container that ran is proof enough.
        let mut p = with_inits(
            &["i"],
            json!({"initContainerStatuses": [c("i", &waiting)],
                   "containerStatuses": [c("a", &running)]}),
        );
        mark_lost(&mut p, NOW);
        assert_eq!(p["status"]["containerStatuses"][0]["state"], unknown());
    }

    #[test]
    fn an_end_already_written_is_kept() {
        let done = json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        let mut p = pod(json!({"phase": "Succeeded", "containerStatuses": [c("a", &done)]}));
        mark_lost(&mut p, NOW);
        assert_eq!(p["status"]["phase"], "Succeeded");
        assert_eq!(p["status"]["containerStatuses"][0]["state"], done);
    }

    #[test]
    fn running_ephemeral_containers_are_lost_too() {
        let mut p = pod(json!({"ephemeralContainerStatuses": [
            {"name": "dbg", "ready": false, "state": {"running": {}}},
        ]}));
        mark_lost(&mut p, NOW);
        assert_eq!(
            p["status"]["ephemeralContainerStatuses"][0]["state"],
            unknown()
        );
    }

    #[test]
    fn a_pod_without_status_is_left_alone() {
        let mut p = json!({"kind": "Pod"});
        mark_lost(&mut p, NOW);
        assert_eq!(p, json!({"kind": "Pod"}));
    }

    #[test]
    fn times_are_whole_seconds_in_utc() {
        assert_eq!(rfc3339(1_767_323_045), NOW);
    }

    #[test]
    fn the_file_is_rewritten_whole() {
        let dir = std::env::temp_dir().join(format!("podinit-lost-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("status.json");
        // No status written yet: nothing to finish.
        write_final_status(&path).unwrap();
        assert!(!path.exists());
        let p = pod(json!({"phase": "Running"}));
        std::fs::write(&path, serde_json::to_vec_pretty(&p).unwrap()).unwrap();
        write_final_status(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("}\n"));
        let got: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(got["status"]["phase"], "Failed");
        assert_eq!(got["metadata"], p["metadata"]);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
