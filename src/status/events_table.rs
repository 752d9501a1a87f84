//! `podinit events`' table, as `kubectl events` prints it: LAST SEEN relative, a repeated
//! event as `13s (x5 over 2m)`, OBJECT as `Kind/name`, columns as kubectl's tabwriter
//! (minimum width 10, padding 3) sets them.

use super::table::human_age;
use serde_json::Value;

const HEADER: [&str; 5] = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"];

/// kubectl's `GetNewTabWriter`: minimum cell width 10, padding 3.
const MIN_WIDTH: usize = 10;
const PADDING: usize = 3;

/// The rows of `events` (Event objects), under the header if `header`, aligned together
/// as one flush of kubectl's tabwriter.
pub fn render(events: &[Value], header: bool, now_unix: i64) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    if header {
        rows.push(HEADER.iter().map(|h| h.to_string()).collect());
    }
    rows.extend(events.iter().map(|e| row(e, now_unix)));
    let mut widths = [0usize; 4];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max((cell.chars().count() + PADDING).max(MIN_WIDTH));
        }
    }
    let mut out = String::new();
    for r in &rows {
        for (i, cell) in r.iter().enumerate() {
            match widths.get(i) {
                Some(w) => out.push_str(&format!("{cell:<w$}")),
                None => out.push_str(cell),
            }
        }
        out.push('\n');
    }
    out
}

/// One event's cells (kubectl's `printOneEvent`).
fn row(e: &Value, now_unix: i64) -> Vec<String> {
    let since = |key: &str| {
        e[key]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(|t| human_age(now_unix - t.as_second()))
            .unwrap_or_else(|| "<unknown>".into())
    };
    let first = since("firstTimestamp");
    let count = e["count"].as_i64().unwrap_or(1);
    let seen = if count > 1 {
        format!("{} (x{count} over {first})", since("lastTimestamp"))
    } else {
        first
    };
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let o = &e["involvedObject"];
    vec![
        seen,
        text(&e["type"]),
        text(&e["reason"]),
        format!("{}/{}", text(&o["kind"]), text(&o["name"])),
        text(&e["message"]).trim().to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(reason: &str, first: &str, last: &str, count: u32) -> Value {
        json!({"type": "Normal", "reason": reason, "message": "m ",
               "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{a}"},
               "firstTimestamp": first, "lastTimestamp": last, "count": count})
    }

    #[test]
    fn as_kubectl_events_prints_them() {
        // 2026-01-01T00:02:00Z
        let now = 1_767_225_720;
        let once = event("Started", "2026-01-01T00:01:47Z", "2026-01-01T00:01:47Z", 1);
        let again = event("BackOff", "2026-01-01T00:00:00Z", "2026-01-01T00:01:50Z", 5);
        let t = render(&[once, again], true, now);
        assert_eq!(
            t,
            "LAST SEEN          TYPE      REASON    OBJECT    MESSAGE\n\
             13s                Normal    Started   Pod/web   m\n\
             10s (x5 over 2m)   Normal    BackOff   Pod/web   m\n"
        );
        let t = render(&[event("Killing", "", "", 1)], false, now);
        assert_eq!(t, "<unknown>   Normal    Killing   Pod/web   m\n");
    }
}
