//! `podinit status`'s table, computed as `kubectl get pod` prints it (kubectl's
//! `printPod`: READY, STATUS with `Init:…` and container reasons, RESTARTS, AGE).

use serde_json::Value;

/// Rows of `kubectl get pod` for one Pod object (JSON as served by the socket).
pub fn render(pod: &Value, wide: bool, now_unix: i64) -> String {
    let (head, row) = (header(wide), cells(pod, wide, now_unix));
    columns(&[head, row.iter().map(String::as_str).collect()])
}

/// `kubectl get pods -A` of several pods: a NAMESPACE column first.
pub fn render_list(pods: &[Value], wide: bool, now_unix: i64) -> String {
    let rows: Vec<Vec<String>> = pods
        .iter()
        .map(|p| {
            let ns = p["metadata"]["namespace"].as_str().unwrap_or("default");
            std::iter::once(ns.to_string())
                .chain(cells(p, wide, now_unix))
                .collect()
        })
        .collect();
    let mut all = vec![std::iter::once("NAMESPACE").chain(header(wide)).collect()];
    all.extend(rows.iter().map(|r| r.iter().map(String::as_str).collect()));
    columns(&all)
}

fn header(wide: bool) -> Vec<&'static str> {
    let mut head = vec!["NAME", "READY", "STATUS", "RESTARTS", "AGE"];
    if wide {
        head.extend(["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]);
    }
    head
}

/// One pod's cells under `header`.
fn cells(pod: &Value, wide: bool, now_unix: i64) -> Vec<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("");
    let st = &pod["status"];
    let phase = st["phase"].as_str().unwrap_or("");
    let empty = Vec::new();
    let init_specs = pod["spec"]["initContainers"].as_array().unwrap_or(&empty);
    let sidecar = |name: &str| {
        init_specs
            .iter()
            .any(|c| c["name"] == name && c["restartPolicy"] == "Always")
    };
    // Sidecars count among the pod's containers.
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len)
        + init_specs
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut reason = st["reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .unwrap_or(if phase.is_empty() { "Unknown" } else { phase })
        .to_string();
    let mut restarts = 0;
    let mut ready = 0;
    let mut initializing = false;
    // The latest `lastState.terminated.finishedAt` (RFC 3339 UTC text sorts as time).
    let mut last_restart = String::new();
    let mut sidecar_restarts = 0;
    let mut sidecar_last_restart = String::new();
    let later = |latest: &mut String, c: &Value| {
        if let Some(t) = c["lastState"]["terminated"]["finishedAt"].as_str() {
            if t > latest.as_str() {
                *latest = t.to_string();
            }
        }
    };
    let inits = st["initContainerStatuses"].as_array().unwrap_or(&empty);
    for (i, c) in inits.iter().enumerate() {
        let count = c["restartCount"].as_i64().unwrap_or(0);
        restarts += count;
        later(&mut last_restart, c);
        let is_sidecar = sidecar(c["name"].as_str().unwrap_or(""));
        if is_sidecar {
            sidecar_restarts += count;
            later(&mut sidecar_last_restart, c);
        }
        let term = &c["state"]["terminated"];
        let wait = &c["state"]["waiting"];
        if term.is_object() && term["exitCode"] == 0 {
            continue;
        }
        if is_sidecar && c["started"] == true {
            if c["ready"] == true {
                ready += 1;
            }
            continue;
        }
        reason = if term.is_object() {
            match term["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None if term["signal"].as_i64().unwrap_or(0) != 0 => {
                    format!("Init:Signal:{}", term["signal"])
                }
                None => format!("Init:ExitCode:{}", term["exitCode"]),
            }
        } else if let Some(r) = wait["reason"]
            .as_str()
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            format!("Init:{r}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }
    let condition = |t: &str| {
        st["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .is_some_and(|c| c["status"] == "True")
    };
    if !initializing || condition("Initialized") {
        // Once initialized, a plain init container's restarts no longer count.
        restarts = sidecar_restarts;
        last_restart = sidecar_last_restart;
        let mut has_running = false;
        let apps = st["containerStatuses"].as_array().unwrap_or(&empty);
        for c in apps.iter().rev() {
            restarts += c["restartCount"].as_i64().unwrap_or(0);
            later(&mut last_restart, c);
            let term = &c["state"]["terminated"];
            if let Some(r) = c["state"]["waiting"]["reason"]
                .as_str()
                .filter(|r| !r.is_empty())
            {
                reason = r.to_string();
            } else if let Some(r) = term["reason"].as_str().filter(|r| !r.is_empty()) {
                reason = r.to_string();
            } else if term.is_object() {
                reason = if term["signal"].as_i64().unwrap_or(0) != 0 {
                    format!("Signal:{}", term["signal"])
                } else {
                    format!("ExitCode:{}", term["exitCode"])
                };
            } else if c["ready"] == true && c["state"]["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if condition("Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .into();
        }
    }
    // A deleted pod that has not ended yet.
    if pod["metadata"]["deletionTimestamp"].is_string() && !matches!(phase, "Succeeded" | "Failed")
    {
        reason = "Terminating".into();
    }
    let since = |t: &str| {
        t.parse::<k8s_openapi::jiff::Timestamp>()
            .ok()
            .map(|t| human_age(now_unix - t.as_second()))
    };
    let mut restarts_col = restarts.to_string();
    if restarts != 0 {
        if let Some(ago) = since(&last_restart) {
            restarts_col = format!("{restarts} ({ago} ago)");
        }
    }
    let age = pod["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(since)
        .unwrap_or_else(|| "<unknown>".into());
    let ready_col = format!("{ready}/{total}");
    let mut row = vec![name.to_string(), ready_col, reason, restarts_col, age];
    let ip = st["podIP"].as_str().unwrap_or("<none>").to_string();
    let text = |v: &Value| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("<none>")
            .to_string()
    };
    let node = text(&pod["spec"]["nodeName"]);
    let nominated = text(&st["nominatedNodeName"]);
    let gates = readiness_gates(pod);
    if wide {
        row.extend([ip, node, nominated, gates]);
    }
    row
}

/// kubectl's READINESS GATES column: how many of the gates' conditions are True.
fn readiness_gates(pod: &Value) -> String {
    let Some(gates) = pod["spec"]["readinessGates"]
        .as_array()
        .filter(|g| !g.is_empty())
    else {
        return "<none>".into();
    };
    let conditions = pod["status"]["conditions"].as_array();
    let true_ = gates
        .iter()
        .filter(|g| {
            conditions
                .into_iter()
                .flatten()
                .find(|c| c["type"] == g["conditionType"])
                .is_some_and(|c| c["status"] == "True")
        })
        .count();
    format!("{true_}/{}", gates.len())
}

/// apimachinery's `duration.HumanDuration`, which kubectl shows ages and LAST SEEN in.
pub fn human_age(secs: i64) -> String {
    // A clock a second ahead is "now"; further is not a time kubectl shows.
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h) = (s / 60, s / 3600);
    let with = |big: i64, unit: &str, small: i64, sub: &str| match small {
        0 => format!("{big}{unit}"),
        n => format!("{big}{unit}{n}{sub}"),
    };
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => with(m, "m", s % 60, "s"),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => with(h, "h", m % 60, "m"),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => with(h / 24, "d", h % 24, "h"),
        _ if h < 24 * 365 * 2 => format!("{}d", h / 24),
        _ if h < 24 * 365 * 8 => with(h / 24 / 365, "y", (h / 24) % 365, "d"),
        _ => format!("{}y", h / 24 / 365),
    }
}

fn columns(rows: &[Vec<&str>]) -> String {
    let n = rows[0].len();
    let widths: Vec<usize> = (0..n)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == n {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(status: Value) -> Value {
        json!({"metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "a"}, {"name": "b"}]},
               "status": status})
    }

    #[test]
    fn running_pod() {
        let p = pod(
            json!({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [{"name": "i", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": "2026-01-01T00:00:40Z"}}},
                {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                 "lastState": {"terminated": {"finishedAt": "2026-01-01T00:00:55Z"}}}]}),
        );
        let t = render(&p, false, 1767225600 + 65);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "NAME   READY   STATUS             RESTARTS      AGE"
        );
        assert_eq!(
            lines[1],
            "web    1/2     CrashLoopBackOff   3 (10s ago)   65s"
        );
    }

    #[test]
    fn init_progress_and_failures() {
        let p = pod(json!({"phase": "Pending",
            "initContainerStatuses": [{"name": "i", "restartCount": 0, "state": {"running": {}}}]}));
        assert!(render(&p, false, 0).contains("Init:0/1"));
        let p = pod(json!({"phase": "Failed",
            "initContainerStatuses": [{"name": "i", "restartCount": 0, "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}));
        assert!(render(&p, false, 0).contains("Init:Error"));
        // A crash-looping init container's restarts count until the pod is initialized.
        let p = pod(json!({"phase": "Pending",
            "initContainerStatuses": [{"name": "i", "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"finishedAt": "2026-01-01T00:01:00Z"}}}]}));
        let t = render(&p, false, 1767225600 + 90);
        assert!(t.contains("Init:CrashLoopBackOff   4 (30s ago)"), "{t}");
    }

    #[test]
    fn sidecars_count_and_plain_init_restarts_stop_counting() {
        let p = json!({"metadata": {"name": "web"},
            "spec": {"initContainers": [{"name": "i"}, {"name": "side", "restartPolicy": "Always"}],
                     "containers": [{"name": "a"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                "initContainerStatuses": [
                    {"name": "i", "restartCount": 2, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "side", "restartCount": 1, "started": true, "ready": true, "state": {"running": {}}}],
                "containerStatuses": [{"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
        let row = render(&p, false, 0).lines().nth(1).unwrap().to_string();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols, ["web", "2/2", "Running", "1", "<unknown>"], "{row}");
    }

    #[test]
    fn a_completed_container_beside_a_running_one() {
        let mut p = pod(json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        assert!(render(&p, false, 0).contains("NotReady"));
        p["status"]["conditions"][0]["status"] = json!("True");
        assert!(render(&p, false, 0).contains("Running"));
    }

    #[test]
    fn a_deleted_pod_is_terminating_until_it_ends() {
        let mut p = pod(json!({"phase": "Running",
            "containerStatuses": [{"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}}]}));
        p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:30Z");
        assert!(render(&p, false, 0).contains("Terminating"));
        p["status"]["phase"] = json!("Failed");
        assert!(!render(&p, false, 0).contains("Terminating"));
    }

    #[test]
    fn completed_and_wide() {
        let p = pod(json!({"phase": "Succeeded", "podIP": "10.0.0.5",
            "containerStatuses": [
                {"name": "a", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                {"name": "b", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}));
        let t = render(&p, true, 0);
        assert!(t.lines().nth(1).unwrap().contains("Completed"));
        assert!(t.lines().next().unwrap().contains(" IP "));
        assert!(t
            .lines()
            .next()
            .unwrap()
            .ends_with("NOMINATED NODE   READINESS GATES"));
        assert!(t.lines().nth(1).unwrap().contains("10.0.0.5"));
        let mut p = p;
        p["spec"]["nodeName"] = json!("box");
        p["spec"]["readinessGates"] = json!([{"conditionType": "x"}, {"conditionType": "y"}]);
        p["status"]["conditions"] = json!([{"type": "x", "status": "True"}]);
        let row = render(&p, true, 0).lines().nth(1).unwrap().to_string();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 3..], ["box", "<none>", "1/2"], "{row}");
    }

    #[test]
    fn ages() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(150), "2m30s");
        assert_eq!(human_age(3600), "60m");
        assert_eq!(human_age(4 * 3600), "4h");
        assert_eq!(human_age(3 * 86400), "3d");
        assert_eq!(human_age(-1), "0s");
        assert_eq!(human_age(-2), "<invalid>");
        assert_eq!(human_age(119), "119s");
        assert_eq!(human_age(120), "2m");
        assert_eq!(human_age(9 * 60 + 59), "9m59s");
        assert_eq!(human_age(3 * 3600 + 30 * 60), "3h30m");
        assert_eq!(human_age(30 * 3600), "30h");
        assert_eq!(human_age(3 * 86400 + 5 * 3600), "3d5h");
        assert_eq!(human_age(100 * 86400), "100d");
        assert_eq!(human_age(3 * 365 * 86400 + 86400), "3y1d");
    }
}
