//! `update`: new resource limits for a container, from a JSON file (`-r FILE`, `-` for
//! stdin, an OCI `LinuxResources`) or from runc's flags, applied to its cgroup and kept
//! in its state. What is not given keeps its value.

use oci_spec::runtime::LinuxResources;
use serde_json::{json, Value};

use super::cli::{val, Args, Flag};
use super::state;
use super::status::{self, Status};
use super::Globals;

pub const FLAGS: &[Flag] = &[
    val(
        &["resources", "r"],
        "path to the file containing the resources to update or '-' to read from the standard input",
    ),
    val(&["blkio-weight"], "Specifies per cgroup weight, range is from 10 to 1000 (default: 0)"),
    val(&["cpu-period"], "CPU CFS period to be used for hardcapping (in usecs). 0 to use system default"),
    val(&["cpu-quota"], "CPU CFS hardcap limit (in usecs). Allowed cpu time in a given period"),
    val(&["cpu-share"], "CPU shares (relative weight vs. other containers)"),
    val(&["cpu-rt-period"], "CPU realtime period to be used for hardcapping (in usecs). 0 to use system default"),
    val(&["cpu-rt-runtime"], "CPU realtime hardcap limit (in usecs). Allowed cpu time in a given period"),
    val(&["cpuset-cpus"], "CPU(s) to use"),
    val(&["cpuset-mems"], "Memory node(s) to use"),
    val(&["memory"], "Memory limit (in bytes)"),
    val(&["memory-reservation"], "Memory reservation or soft_limit (in bytes)"),
    val(&["memory-swap"], "Total memory usage (memory + swap); set '-1' to enable unlimited swap"),
    val(&["kernel-memory"], "Kernel memory limit (in bytes)"),
    val(&["kernel-memory-tcp"], "Kernel memory limit for tcp buffer (in bytes)"),
    val(&["pids-limit"], "Maximum number of pids allowed in the container (default: 0)"),
    val(&["l3-cache-schema"], "The string of Intel RDT/CAT L3 cache schema (not supported)"),
    val(&["mem-bw-schema"], "The string of Intel RDT/MBA memory bandwidth schema (not supported)"),
];

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    let id = a.exactly_one("update")?;
    let _lock = state::lock(&g.root, id)?;
    let mut s = state::load(&g.root, id)?;
    if status::of(&g.root, &s) == Status::Stopped {
        return Err(super::Error::NotRunning);
    }
    let patch = match a.value("resources") {
        Some(path) => read_resources(path)?,
        None => from_flags(a)?,
    };
    let change: LinuxResources = serde_json::from_value(patch.clone())
        .map_err(|e| format!("resources for container {id}: {e}"))?;
    let group = crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths)?;
    let linux = s.config.linux().clone().unwrap_or_default();
    let mut merged = serde_json::to_value(linux.resources().clone().unwrap_or_default())
        .map_err(|e| e.to_string())?;
    merge(&mut merged, patch);
    let merged: LinuxResources =
        serde_json::from_value(merged).map_err(|e| format!("resources for container {id}: {e}"))?;
    // Under systemd, runc's Set: the unit's properties from the whole new resources, then
    // the files, all of them (systemd rewrites those of each controller it touched).
    let written = match &s.systemd_unit {
        Some(unit) => {
            crate::cgroup::systemd::set(unit, &merged)
                .map_err(|e| format!("updating container {id}: {e}"))?;
            &merged
        }
        None => &change,
    };
    group
        .set(written)
        .map_err(|e| format!("updating container {id}: {e}"))?;
    let mut linux = linux;
    linux.set_resources(Some(merged));
    s.config.set_linux(Some(linux));
    Ok(state::save(&g.root, &s)?)
}

fn read_resources(path: &str) -> Result<Value, String> {
    let text = if path == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
            .map_err(|e| format!("reading resources from stdin: {e}"))?;
        t
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("reading {path}: {e}"))?
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("resources in {path}: {e}"))?;
    if !v.is_object() {
        return Err(format!("resources in {path}: not a JSON object"));
    }
    Ok(v)
}

/// The resources runc's flags give, in `LinuxResources`' JSON shape.
fn from_flags(a: &Args) -> Result<Value, String> {
    if a.value("l3-cache-schema").is_some() || a.value("mem-bw-schema").is_some() {
        return Err("Intel RDT is not supported by podinit-runc".into());
    }
    let mut v = json!({});
    let int = |name: &str| -> Result<Option<i64>, String> {
        a.value(name)
            .map(|s| {
                s.parse::<i64>()
                    .map_err(|_| format!("invalid value for {name}: {s:?}"))
            })
            .transpose()
    };
    let ram = |name: &str| -> Result<Option<i64>, String> {
        a.value(name)
            .map(|s| ram_in_bytes(s).ok_or_else(|| format!("invalid value for {name}: {s:?}")))
            .transpose()
    };
    let mut put = |section: &str, key: &str, val: Option<Value>| {
        if let Some(val) = val {
            v[section][key] = val;
        }
    };
    put("blockIO", "weight", int("blkio-weight")?.map(Value::from));
    put("cpu", "period", int("cpu-period")?.map(Value::from));
    put("cpu", "quota", int("cpu-quota")?.map(Value::from));
    put("cpu", "shares", int("cpu-share")?.map(Value::from));
    put(
        "cpu",
        "realtimePeriod",
        int("cpu-rt-period")?.map(Value::from),
    );
    put(
        "cpu",
        "realtimeRuntime",
        int("cpu-rt-runtime")?.map(Value::from),
    );
    put("cpu", "cpus", a.value("cpuset-cpus").map(Value::from));
    put("cpu", "mems", a.value("cpuset-mems").map(Value::from));
    put("memory", "limit", ram("memory")?.map(Value::from));
    put(
        "memory",
        "reservation",
        ram("memory-reservation")?.map(Value::from),
    );
    put("memory", "swap", ram("memory-swap")?.map(Value::from));
    put("memory", "kernel", ram("kernel-memory")?.map(Value::from));
    put(
        "memory",
        "kernelTCP",
        ram("kernel-memory-tcp")?.map(Value::from),
    );
    put("pids", "limit", int("pids-limit")?.map(Value::from));
    Ok(v)
}

/// docker's `RAMInBytes` (what runc uses): `512`, `100k`, `1.5g`, `2GiB`, binary units;
/// and `-1`, unlimited.
pub fn ram_in_bytes(s: &str) -> Option<i64> {
    if s == "-1" {
        return Some(-1);
    }
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (num, mult) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1i64 << 10),
        'm' => (&t[..t.len() - 1], 1 << 20),
        'g' => (&t[..t.len() - 1], 1 << 30),
        't' => (&t[..t.len() - 1], 1 << 40),
        'p' => (&t[..t.len() - 1], 1 << 50),
        _ => (t, 1),
    };
    let n: f64 = num.trim().parse().ok()?;
    if n < 0.0 || !n.is_finite() {
        return None;
    }
    Some((n * mult as f64) as i64)
}

/// `patch` over `base`: objects merged key by key, anything else replaced.
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_docker_reads_them() {
        assert_eq!(ram_in_bytes("512"), Some(512));
        assert_eq!(ram_in_bytes("100k"), Some(102400));
        assert_eq!(ram_in_bytes("1.5g"), Some(3 << 29));
        assert_eq!(ram_in_bytes("2GiB"), Some(2 << 30));
        assert_eq!(ram_in_bytes("64MB"), Some(64 << 20));
        assert_eq!(ram_in_bytes("-1"), Some(-1));
        assert_eq!(ram_in_bytes("lots"), None);
    }

    #[test]
    fn flags_make_a_resources_document_and_merge_over_the_old_one() {
        let table = FLAGS;
        let args: Vec<String> = [
            "--memory",
            "64m",
            "--cpu-quota=5000",
            "--pids-limit",
            "10",
            "c1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let a = super::super::cli::parse(table, &args, true).unwrap();
        let patch = from_flags(&a).unwrap();
        assert_eq!(
            patch,
            json!({"memory": {"limit": 67108864}, "cpu": {"quota": 5000}, "pids": {"limit": 10}})
        );
        let r: LinuxResources = serde_json::from_value(patch.clone()).unwrap();
        assert_eq!(r.pids().as_ref().unwrap().limit(), 10);
        let mut base = json!({"memory": {"limit": 1, "swap": 2}, "cpu": {"shares": 3}});
        merge(&mut base, patch);
        assert_eq!(base["memory"], json!({"limit": 67108864, "swap": 2}));
        assert_eq!(base["cpu"], json!({"shares": 3, "quota": 5000}));
    }
}
