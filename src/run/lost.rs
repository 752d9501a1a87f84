//! The final status of a pod whose supervisor died without writing it (killed, crashed):
//! the outer process writes it instead, as kubelet's `TerminatePod` reports a pod whose
//! sandbox is gone: the pod Failed (unless its end was written already), the containers
//! that `pod::ending`'s rule names (the one `on_pod_ended` applies to a pod that ends
//! normally) terminated with its unknown status, and the pod no longer ready.
//!
//! On the file's JSON value, not the typed Pod: whatever the supervisor wrote is kept as
//! it is, and PodStatus's deserializer stays out of the binary.

use serde_json::{json, Value};
use std::path::Path;

use crate::pod::ending::{lost_at_end, status_unknown, EndView};
use crate::pod::{Kind, PodPhase};
use crate::util::{rfc3339, Fraction};

/// Rewrite `status.json` at `path` as the final status of a lost pod, atomically. A pod
/// whose supervisor wrote no status yet has none to finish.
pub(super) fn write_final_status(path: &Path) -> Result<(), super::Error> {
    use super::Error;
    let reading = || format!("reading {}", path.display());
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(reading(), e)),
    };
    let mut pod: Value = serde_json::from_slice(&text).map_err(|err| Error::Json {
        what: reading(),
        err,
    })?;
    mark_lost(
        &mut pod,
        &rfc3339(crate::util::now_unix_nanos(), Fraction::Whole),
    );
    let mut out = serde_json::to_vec_pretty(&pod).map_err(|err| Error::Json {
        what: String::new(),
        err,
    })?;
    out.push(b'\n');
    crate::util::write_atomic(path, &out)
        .map_err(|e| Error::io(format_args!("writing {}", path.display()), e))
}

/// The final status of `pod` (a Pod object as JSON) whose sandbox was lost at `now`.
fn mark_lost(pod: &mut Value, now: &str) {
    let sidecars: Vec<String> = pod["spec"]["initContainers"]
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
    let ended = [PodPhase::Succeeded, PodPhase::Failed]
        .iter()
        .any(|p| status.get("phase").and_then(Value::as_str) == Some(p.as_str()));
    if !ended {
        status.insert("phase".into(), json!(PodPhase::Failed.as_str()));
    }
    // The init containers, then the app containers, as the rule reads them.
    let list = |key: &str| -> Vec<Value> {
        match status.get(key) {
            Some(Value::Array(v)) => v.iter().filter(|c| c.is_object()).cloned().collect(),
            _ => Vec::new(),
        }
    };
    let init_kind = |c: &Value| match c["name"].as_str() {
        Some(n) if sidecars.iter().any(|s| s == n) => Kind::Sidecar,
        _ => Kind::Init,
    };
    let inits = list("initContainerStatuses");
    let views: Vec<EndView> = inits
        .iter()
        .map(|c| end_view(init_kind(c), c))
        .chain(
            list("containerStatuses")
                .iter()
                .map(|c| end_view(Kind::App, c)),
        )
        .collect();
    let lost = lost_at_end(&views);
    for (key, first) in [
        ("initContainerStatuses", 0),
        ("containerStatuses", inits.len()),
    ] {
        for (i, c) in statuses(status.get_mut(key)).into_iter().enumerate() {
            if lost.contains(&(first + i)) {
                mark_unknown(c);
            }
            c["ready"] = json!(false);
        }
    }
    // Ephemeral containers are no part of kubelet's rule: any not ended was lost with the
    // sandbox it ran in.
    for c in statuses(status.get_mut("ephemeralContainerStatuses")) {
        if c["state"].get("terminated").is_none() {
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

/// What kubelet's end rule reads of a container status as written.
fn end_view(kind: Kind, c: &Value) -> EndView {
    // A terminated state without an exit code is not known to have succeeded.
    let exit_code = |t: &Value| {
        t.get("terminated")
            .map(|t| t["exitCode"].as_i64().unwrap_or(-1) as i32)
    };
    EndView {
        kind,
        waiting: c["state"].get("waiting").is_some(),
        terminated: exit_code(&c["state"]),
        last_terminated: exit_code(&c["lastState"]),
        running_started: c["state"].get("running").is_some() && c["started"] == true,
    }
}

/// The objects of a status list.
fn statuses(list: Option<&mut Value>) -> Vec<&mut Value> {
    match list {
        Some(Value::Array(v)) => v.iter_mut().filter(|c| c.is_object()).collect(),
        _ => Vec::new(),
    }
}

/// The container's state becomes kubelet's unknown one, rendered as the status writer
/// renders every terminated state.
fn mark_unknown(c: &mut Value) {
    let state = k8s_openapi::api::core::v1::ContainerState {
        // Unknown has no times: the clock reads none.
        terminated: Some(crate::status::render::terminated(
            &status_unknown(),
            None,
            &crate::status::render::WallClock { epoch_unix_ms: 0 },
        )),
        ..Default::default()
    };
    c["state"] = serde_json::to_value(state).unwrap_or(Value::Null);
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
        json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
               "message": "The container could not be located when the pod was terminated"}})
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
        assert_eq!(rfc3339(1_767_323_045_000_000_000, Fraction::Whole), NOW);
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
