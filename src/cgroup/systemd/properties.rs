//! A container's unit as systemd properties, as runc's systemd driver makes them: the
//! unit's own (slice, delegation, the pid, accounting) at start, and the spec's resources
//! (`genV1ResourcesProperties`, `genV2ResourcesProperties`) at start and on update. What
//! has no property is written to the cgroup's files afterwards, as runc's `Set` does.

use oci_spec::runtime::LinuxResources;

use super::dbus::Value;
use super::unit::Unit;
use super::Refused;
use crate::cgroup::resources::{shares_to_weight, swap_v2};

/// The CFS period systemd and the kernel assume when none is given.
const DEFAULT_PERIOD: u64 = 100_000;
/// systemd's `USEC_INFINITY`, and "unlimited" of every u64 limit.
const INFINITY: u64 = u64::MAX;

fn prop(name: &str, v: Value) -> Value {
    Value::property(name, v)
}

/// The properties a unit starts with (runc's `Apply`), with `pid` in it (a container's
/// scope), or none (a slice, which holds no process of its own).
pub fn unit(u: &Unit, pid: Option<i32>, v2: bool) -> Vec<Value> {
    let mut out = vec![prop(
        "Description",
        Value::Str(format!("libcontainer container {}", u.short)),
    )];
    if u.is_slice() {
        out.push(prop(
            "Wants",
            Value::Array("s".into(), vec![Value::str(&u.slice)]),
        ));
    } else {
        out.push(prop("Slice", Value::str(&u.slice)));
        out.push(prop("Delegate", Value::Bool(true)));
    }
    if let Some(pid) = pid {
        out.push(prop(
            "PIDs",
            Value::Array("u".into(), vec![Value::U32(pid as u32)]),
        ));
    }
    let io = if v2 {
        "IOAccounting"
    } else {
        "BlockIOAccounting"
    };
    for a in ["MemoryAccounting", "CPUAccounting", io, "TasksAccounting"] {
        out.push(prop(a, Value::Bool(true)));
    }
    out.push(prop("DefaultDependencies", Value::Bool(false)));
    out
}

/// The spec's resources as properties, for a systemd of `version`: v2 or v1 names.
pub fn resources(r: &LinuxResources, v2: bool, version: u32) -> Result<Vec<Value>, Refused> {
    let mut out = Vec::new();
    let u64_ = |name: &str, v: u64| prop(name, Value::U64(v));
    let mem = r.memory().as_ref();
    let limit = mem.and_then(|m| m.limit()).filter(|l| *l != 0);
    if let Some(l) = limit {
        out.push(u64_(if v2 { "MemoryMax" } else { "MemoryLimit" }, l as u64));
    }
    if v2 {
        if let Some(l) = mem.and_then(|m| m.reservation()).filter(|l| *l != 0) {
            out.push(u64_("MemoryLow", l as u64));
        }
        let swap = swap_v2(mem.and_then(|m| m.swap()), mem.and_then(|m| m.limit()))
            .map_err(|why| Refused::new("MemorySwapMax", why.to_string()))?;
        if let Some(s) = swap {
            out.push(u64_("MemorySwapMax", s as u64));
        }
    }
    let cpu = r.cpu().as_ref();
    if let Some(s) = cpu.and_then(|c| c.shares()).filter(|s| *s != 0) {
        out.push(if v2 {
            u64_("CPUWeight", shares_to_weight(s))
        } else {
            u64_("CPUShares", s)
        });
    }
    cpu_quota(
        &mut out,
        cpu.and_then(|c| c.quota()).unwrap_or(0),
        cpu.and_then(|c| c.period()).unwrap_or(0),
        version,
    );
    if !v2 {
        if let Some(w) = r
            .block_io()
            .as_ref()
            .and_then(|b| b.weight())
            .filter(|w| *w != 0)
        {
            out.push(u64_("BlockIOWeight", u64::from(w)));
        }
    }
    if let Some(p) = r.pids().as_ref().map(|p| p.limit()) {
        if p > 0 || p == -1 {
            out.push(u64_("TasksMax", p as u64));
        }
    }
    cpuset(
        &mut out,
        cpu.and_then(|c| c.cpus().clone()),
        cpu.and_then(|c| c.mems().clone()),
        version,
    )?;
    if v2 {
        if let Some(unified) = r.unified() {
            let mut keys: Vec<&String> = unified.keys().collect();
            keys.sort();
            for k in keys {
                unified_prop(&mut out, k, unified[k].trim(), version)?;
            }
        }
    }
    Ok(out)
}

/// runc's `addCpuQuota`: the period (systemd 242 on), and the quota as microseconds per
/// second rounded up to whole percents, as systemd keeps it.
fn cpu_quota(out: &mut Vec<Value>, quota: i64, period: u64, version: u32) {
    if period != 0 && version >= 242 {
        out.push(prop("CPUQuotaPeriodUSec", Value::U64(period)));
    }
    if quota == 0 && period == 0 {
        return;
    }
    let mut per_sec = INFINITY;
    if quota > 0 {
        let period = if period == 0 { DEFAULT_PERIOD } else { period };
        per_sec = (quota as u64).saturating_mul(1_000_000) / period;
        if !per_sec.is_multiple_of(10_000) {
            per_sec = (per_sec / 10_000 + 1) * 10_000;
        }
    }
    out.push(prop("CPUQuotaPerSecUSec", Value::U64(per_sec)));
}

/// runc's `addCpuset`: `AllowedCPUs` and `AllowedMemoryNodes` (systemd 244 on).
fn cpuset(
    out: &mut Vec<Value>,
    cpus: Option<String>,
    mems: Option<String>,
    version: u32,
) -> Result<(), Refused> {
    if version < 244 {
        return Ok(());
    }
    for (name, list, what) in [
        ("AllowedCPUs", cpus, "resources.CPU.Cpus"),
        ("AllowedMemoryNodes", mems, "resources.CPU.Mems"),
    ] {
        if let Some(l) = list.filter(|l| !l.is_empty()) {
            let bits = range_to_bits(&l)
                .map_err(|e| Refused::new(name, format!("{what}={l:?} conversion error: {e}")))?;
            out.push(prop(name, bytes(bits)));
        }
    }
    Ok(())
}

fn bytes(b: Vec<u8>) -> Value {
    Value::Array("y".into(), b.into_iter().map(Value::Byte).collect())
}

/// Why a cpu or node list is not one: the part that is wrong.
#[derive(Debug, PartialEq, Eq)]
pub enum BadRange {
    NotANumber(String),
    TooLarge(u32),
    /// `b-a` with `a` above `b`.
    Reversed(String),
    Empty,
}

impl std::fmt::Display for BadRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadRange::NotANumber(s) => write!(f, "{s:?} is not a number"),
            BadRange::TooLarge(n) => write!(f, "{n} is too large"),
            BadRange::Reversed(r) => write!(f, "invalid range: {r}"),
            BadRange::Empty => f.write_str("empty value"),
        }
    }
}

/// A cpu or node list (`0-3,5`) as systemd's bitmask: byte `i` holds bits `8i..8i+8`.
pub fn range_to_bits(list: &str) -> Result<Vec<u8>, BadRange> {
    let mut out: Vec<u8> = Vec::new();
    let mut set = |n: u32| {
        let i = (n / 8) as usize;
        if out.len() <= i {
            out.resize(i + 1, 0);
        }
        out[i] |= 1 << (n % 8);
    };
    let num = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| BadRange::NotANumber(s.to_string()))
            .and_then(|n| (n < 1 << 16).then_some(n).ok_or(BadRange::TooLarge(n)))
    };
    for r in list.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        match r.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(BadRange::Reversed(r.to_string()));
                }
                (a..=b).for_each(&mut set);
            }
            None => set(num(r)?),
        }
    }
    if out.is_empty() {
        return Err(BadRange::Empty);
    }
    Ok(out)
}

/// One `linux.resources.unified` entry as the property runc's `unifiedResToSystemdProps`
/// makes of it; others are only written to the cgroup's files.
fn unified_prop(out: &mut Vec<Value>, key: &str, v: &str, version: u32) -> Result<(), Refused> {
    let property = match key {
        "cpu.max" => "CPUQuotaPerSecUSec",
        "cpu.weight" => "CPUWeight",
        "cpuset.cpus" => "AllowedCPUs",
        "cpuset.mems" => "AllowedMemoryNodes",
        "memory.high" => "MemoryHigh",
        "memory.low" => "MemoryLow",
        "memory.min" => "MemoryMin",
        "memory.max" => "MemoryMax",
        "memory.swap.max" => "MemorySwapMax",
        "pids.max" => "TasksMax",
        _ => return Ok(()),
    };
    let bad = |e: &str| {
        Refused::new(
            property,
            format!("unified resource {key:?} value {v:?}: {e}"),
        )
    };
    let u64_or_max = |s: &str| -> Result<u64, Refused> {
        if s == "max" {
            Ok(INFINITY)
        } else {
            s.parse().map_err(|_| bad("not a number"))
        }
    };
    match key {
        "cpu.max" => {
            let f: Vec<&str> = v.split_whitespace().collect();
            if f.is_empty() || f.len() > 2 {
                return Err(bad("want \"quota [period]\""));
            }
            let quota = if f[0] == "max" {
                0
            } else {
                f[0].parse().map_err(|_| bad("the quota is not a number"))?
            };
            let period = match f.get(1) {
                Some(p) => p.parse().map_err(|_| bad("the period is not a number"))?,
                None => DEFAULT_PERIOD,
            };
            cpu_quota(out, quota, period, version);
        }
        "cpu.weight" => out.push(prop(
            "CPUWeight",
            Value::U64(v.parse().map_err(|_| bad("not a number"))?),
        )),
        "cpuset.cpus" | "cpuset.mems" if version >= 244 => {
            out.push(prop(
                property,
                bytes(range_to_bits(v).map_err(|e| bad(&e.to_string()))?),
            ));
        }
        "memory.high" | "memory.low" | "memory.min" | "memory.max" | "memory.swap.max"
        | "pids.max" => out.push(prop(property, Value::U64(u64_or_max(v)?))),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(props: &[Value]) -> Vec<(String, Value)> {
        props
            .iter()
            .map(|p| match p {
                Value::Struct(f) => match (&f[0], &f[1]) {
                    (Value::Str(n), Value::Variant(v)) => (n.clone(), (**v).clone()),
                    _ => panic!("not a property: {p:?}"),
                },
                _ => panic!("not a property: {p:?}"),
            })
            .collect()
    }

    fn res(json: &str) -> LinuxResources {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_scope_starts_delegated_in_its_slice_with_its_pid() {
        let u = super::super::unit::parse(Some("test.slice:cri-containerd:c1"), "c1").unwrap();
        let p = names(&unit(&u, Some(1234), true));
        let get = |n: &str| p.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(get("Slice"), Some(Value::str("test.slice")));
        assert_eq!(get("Delegate"), Some(Value::Bool(true)));
        assert_eq!(
            get("PIDs"),
            Some(Value::Array("u".into(), vec![Value::U32(1234)]))
        );
        assert_eq!(get("IOAccounting"), Some(Value::Bool(true)));
        assert_eq!(get("DefaultDependencies"), Some(Value::Bool(false)));
        assert_eq!(
            get("Description"),
            Some(Value::str("libcontainer container c1"))
        );
        let v1 = names(&unit(&u, Some(1), false));
        assert!(v1.iter().any(|(k, _)| k == "BlockIOAccounting"));
        let s = super::super::unit::parse(Some("a.slice:x:b.slice"), "b").unwrap();
        let p = names(&unit(&s, None, true));
        assert!(p.iter().any(|(k, _)| k == "Wants") && !p.iter().any(|(k, _)| k == "Delegate"));
        assert!(!p.iter().any(|(k, _)| k == "PIDs"), "a slice starts empty");
    }

    #[test]
    fn v2_resources_map_as_runc_s() {
        let r = res(
            r#"{"memory":{"limit":268435456,"reservation":1048576,"swap":536870912},
            "cpu":{"shares":1024,"quota":50000,"period":100000,"cpus":"0-1","mems":"0"},
            "pids":{"limit":100}}"#,
        );
        let p = names(&resources(&r, true, 252).unwrap());
        let want = [
            ("MemoryMax", Value::U64(268435456)),
            ("MemoryLow", Value::U64(1048576)),
            ("MemorySwapMax", Value::U64(268435456)),
            ("CPUWeight", Value::U64(39)),
            ("CPUQuotaPeriodUSec", Value::U64(100000)),
            ("CPUQuotaPerSecUSec", Value::U64(500000)),
            ("TasksMax", Value::U64(100)),
            (
                "AllowedCPUs",
                Value::Array("y".into(), vec![Value::Byte(3)]),
            ),
            (
                "AllowedMemoryNodes",
                Value::Array("y".into(), vec![Value::Byte(1)]),
            ),
        ];
        let want: Vec<(String, Value)> = want.into_iter().map(|(k, v)| (k.into(), v)).collect();
        assert_eq!(p, want);
    }

    #[test]
    fn v1_resources_use_the_legacy_names() {
        let r = res(r#"{"memory":{"limit":1000000},"cpu":{"shares":512},
            "blockIO":{"weight":300},"pids":{"limit":-1}}"#);
        let p = names(&resources(&r, false, 252).unwrap());
        let keys: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["MemoryLimit", "CPUShares", "BlockIOWeight", "TasksMax"]
        );
        assert_eq!(p[3].1, Value::U64(u64::MAX), "pids -1: infinity");
    }

    #[test]
    fn quotas_round_up_to_whole_percents_and_old_systemds_get_less() {
        let mut out = Vec::new();
        cpu_quota(&mut out, 12345, 0, 252);
        assert_eq!(
            names(&out),
            [("CPUQuotaPerSecUSec".into(), Value::U64(130000))]
        );
        let mut out = Vec::new();
        cpu_quota(&mut out, -1, 50000, 241);
        assert_eq!(
            names(&out),
            [("CPUQuotaPerSecUSec".into(), Value::U64(u64::MAX))],
            "no period property before 242, and no quota is infinity"
        );
        let r = res(r#"{"cpu":{"cpus":"0"}}"#);
        assert!(
            resources(&r, true, 243).unwrap().is_empty(),
            "AllowedCPUs from 244"
        );
    }

    #[test]
    fn cpu_lists_are_systemd_s_little_endian_masks() {
        assert_eq!(range_to_bits("0").unwrap(), [1]);
        assert_eq!(range_to_bits("0-3,5").unwrap(), [0x2f]);
        assert_eq!(range_to_bits("9").unwrap(), [0, 2]);
        assert_eq!(range_to_bits(" 1 , 8-9").unwrap(), [2, 3]);
        assert!(range_to_bits("").is_err());
        assert_eq!(range_to_bits("3-1"), Err(BadRange::Reversed("3-1".into())));
        assert_eq!(
            range_to_bits("x").unwrap_err().to_string(),
            "\"x\" is not a number"
        );
    }

    #[test]
    fn unified_entries_with_a_property_become_it() {
        let r = res(
            r#"{"unified":{"memory.high":"max","pids.max":"7","cpu.max":"max 50000","io.weight":"100"}}"#,
        );
        let p = names(&resources(&r, true, 252).unwrap());
        assert_eq!(
            p,
            [
                ("CPUQuotaPeriodUSec".to_string(), Value::U64(50000)),
                ("CPUQuotaPerSecUSec".to_string(), Value::U64(u64::MAX)),
                ("MemoryHigh".to_string(), Value::U64(u64::MAX)),
                ("TasksMax".to_string(), Value::U64(7)),
            ]
        );
        let bad = res(r#"{"unified":{"pids.max":"lots"}}"#);
        let e = resources(&bad, true, 252).unwrap_err();
        assert_eq!(e.property, "TasksMax");
        assert!(e.why.contains("pids.max"), "{}", e.why);
        let swap = res(r#"{"memory":{"swap":100}}"#);
        assert_eq!(
            resources(&swap, true, 252).unwrap_err().property,
            "MemorySwapMax"
        );
    }
}
