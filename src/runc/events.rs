//! `events`: the container's events as runc prints them, one JSON object a line: with
//! `--stats` one stats event; otherwise a stats event every `--interval` and an `oom`
//! event whenever the cgroup's OOM-kill count rises, until the container stops.

use serde_json::json;
use std::time::{Duration, Instant};

use super::cli::{bool_, val, Args, Flag};
use super::state;
use super::status::{self, Status};
use super::Globals;

pub const FLAGS: &[Flag] = &[
    val(
        &["interval"],
        "set the stats collection interval (default: 5s)",
    ),
    bool_(&["stats"], "display the container's stats then exit"),
];

/// How often the OOM count and the container's life are looked at between stats events.
const WATCH: Duration = Duration::from_millis(200);

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    let id = a.exactly_one("events")?;
    let interval = match a.value("interval") {
        Some(d) => {
            go_duration(d).ok_or_else(|| format!("invalid value {d:?} for flag -interval"))?
        }
        None => Duration::from_secs(5),
    };
    if interval.is_zero() {
        return Err("duration interval must be greater than 0".into());
    }
    let s = state::load(&g.root, id)?;
    if status::of(&g.root, &s) == Status::Stopped {
        return Err(super::Error::WrongState(format!(
            "container with id {id} is not running"
        )));
    }
    let group = crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths)?;
    let stats = || event("stats", id, Some(group.stats()));
    if a.on("stats") {
        super::print(&format!("{}\n", stats()));
        return Ok(());
    }
    let mut ooms = group.oom_kills();
    let mut next = Instant::now() + interval;
    loop {
        std::thread::sleep(WATCH.min(interval));
        let now_ooms = group.oom_kills();
        if now_ooms > ooms {
            super::print(&format!("{}\n", event("oom", id, None)));
            ooms = now_ooms;
        }
        if status::of(&g.root, &s) == Status::Stopped {
            return Ok(());
        }
        if Instant::now() >= next {
            super::print(&format!("{}\n", stats()));
            next += interval;
        }
    }
}

/// One event line, its keys in runc's order (type, id, data).
pub fn event(kind: &str, id: &str, data: Option<serde_json::Value>) -> String {
    let mut s = format!(r#"{{"type":{},"id":{}"#, json!(kind), json!(id));
    if let Some(d) = data {
        s.push_str(&format!(r#","data":{d}"#));
    }
    s.push('}');
    s
}

/// Go's `time.ParseDuration`: `5s`, `1m30s`, `250ms`, `1.5h`.
pub fn go_duration(s: &str) -> Option<Duration> {
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[u..];
        total += value * unit;
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_as_runc_prints_them() {
        assert_eq!(event("oom", "c1", None), r#"{"type":"oom","id":"c1"}"#);
        assert_eq!(
            event("stats", "c1", Some(json!({"pids": {"current": 1}}))),
            r#"{"type":"stats","id":"c1","data":{"pids":{"current":1}}}"#
        );
    }

    #[test]
    fn durations_as_go_writes_them() {
        assert_eq!(go_duration("5s"), Some(Duration::from_secs(5)));
        assert_eq!(go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(go_duration("0"), Some(Duration::ZERO));
        assert_eq!(go_duration("5"), None);
        assert_eq!(go_duration("5x"), None);
        assert_eq!(go_duration(""), None);
    }
}
