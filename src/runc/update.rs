//! `update`: new resource limits for a container, from a JSON file (`-r FILE`, `-` for
//! stdin, an OCI `LinuxResources`) or from runc's flags, applied to its cgroup and kept
//! in its state, field by field as runc 1.1 does (docs/runc.md §Verbs).

use oci_spec::runtime::{LinuxCpu, LinuxPids, LinuxResources};
use serde_json::Value;

use super::cli::{val, Args, Flag};
use super::state;
use super::status::{self, Status};
use super::{Error, Globals};

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
    let given = match a.value("resources") {
        Some(path) => Given::of(&read_resources(path)?),
        None => from_flags(a)?,
    };
    let mut linux = s.config.linux().clone().unwrap_or_default();
    let stored = given.over(&linux.resources().clone().unwrap_or_default());
    let group = crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths)?;
    let mut written = Given::of(&stored).resources();
    if crate::sys::cgroup::unified() {
        written.set_cpu(v2_cpu_max(&given, written.cpu().clone()));
    }
    // Under systemd, runc's Set: the unit's properties from the whole new resources, then
    // the files, all of them (systemd rewrites those of each controller it touched).
    if let Some(unit) = &s.systemd_unit {
        let devices = crate::spec::cgroup_rules(&s.config);
        crate::cgroup::systemd::set(unit, &written, Some(&devices))
            .map_err(|e| format!("updating container {id}: {e}"))?;
    }
    group
        .set(&written)
        .map_err(|e| format!("updating container {id}: {e}"))?;
    linux.set_resources(Some(stored));
    s.config.set_linux(Some(linux));
    state::save(&g.root, &s)
}

/// runc's `cpu.max` on cgroup v2: written from this update's flags alone, a quota not
/// given as "max" and a period not given as the kernel's default, and not at all when
/// neither is given (runc 1.1's fs2). On v1 each of the two files is written alone, so a
/// flag not given leaves its file as it was.
fn v2_cpu_max(given: &Given, cpu: Option<LinuxCpu>) -> Option<LinuxCpu> {
    let mut cpu = cpu.unwrap_or_default();
    let (quota, period) = match (given.cpu_quota, given.cpu_period) {
        (0, 0) => (None, None),
        (q, p) => (
            Some(if q > 0 { q } else { -1 }),
            Some(if p > 0 { p } else { 100_000 }),
        ),
    };
    cpu.set_quota(quota);
    cpu.set_period(period);
    Some(cpu)
}

/// What one `runc update` sets, as runc 1.1 reads it (its `update.go`): these fields and
/// no others (a `-r` file's other fields are ignored), each 0 or empty where not given,
/// runc's "unset", which leaves the cgroup's value as it is.
#[derive(Clone, Debug, Default, PartialEq)]
struct Given {
    blkio_weight: u16,
    cpu_shares: u64,
    cpu_quota: i64,
    cpu_period: u64,
    cpu_rt_runtime: i64,
    cpu_rt_period: u64,
    cpus: String,
    mems: String,
    memory: i64,
    memory_reservation: i64,
    memory_swap: i64,
    pids: i64,
}

impl Given {
    /// runc's fields of `r` (a `-r` file, or the resources of the state).
    fn of(r: &LinuxResources) -> Given {
        let (m, c) = (
            r.memory().unwrap_or_default(),
            r.cpu().clone().unwrap_or_default(),
        );
        Given {
            blkio_weight: r.block_io().as_ref().and_then(|b| b.weight()).unwrap_or(0),
            cpu_shares: c.shares().unwrap_or(0),
            cpu_quota: c.quota().unwrap_or(0),
            cpu_period: c.period().unwrap_or(0),
            cpu_rt_runtime: c.realtime_runtime().unwrap_or(0),
            cpu_rt_period: c.realtime_period().unwrap_or(0),
            cpus: c.cpus().clone().unwrap_or_default(),
            mems: c.mems().clone().unwrap_or_default(),
            memory: m.limit().unwrap_or(0),
            memory_reservation: m.reservation().unwrap_or(0),
            memory_swap: m.swap().unwrap_or(0),
            pids: r.pids().map_or(0, |p| p.limit()),
        }
    }

    /// The container's resources after the update, as runc keeps them in its config:
    /// each of runc's fields as given (unset where not), the others as they were; but a
    /// CPU quota or period given alone leaves the other at its old value.
    fn over(&self, old: &LinuxResources) -> LinuxResources {
        let mut r = old.clone();
        let (p, q) = (self.cpu_period, self.cpu_quota);
        let was = Given::of(old);
        let (p, q) = match (p, q) {
            (0, 0) => (0, 0),
            (p, 0) => (p, was.cpu_quota),
            (0, q) => (was.cpu_period, q),
            both => both,
        };
        let mut cpu = r.cpu().clone().unwrap_or_default();
        cpu.set_shares(set(self.cpu_shares));
        cpu.set_quota(set(q));
        cpu.set_period(set(p));
        cpu.set_realtime_runtime(set(self.cpu_rt_runtime));
        cpu.set_realtime_period(set(self.cpu_rt_period));
        cpu.set_cpus(Some(self.cpus.clone()).filter(|v| !v.is_empty()));
        cpu.set_mems(Some(self.mems.clone()).filter(|v| !v.is_empty()));
        r.set_cpu(Some(cpu));
        let mut m = r.memory().unwrap_or_default();
        m.set_limit(set(self.memory));
        m.set_reservation(set(self.memory_reservation));
        m.set_swap(set(self.memory_swap));
        r.set_memory(Some(m));
        let mut b = r.block_io().clone().unwrap_or_default();
        b.set_weight(set(self.blkio_weight));
        r.set_block_io(Some(b));
        let mut pids = LinuxPids::default();
        pids.set_limit(self.pids);
        r.set_pids(set(self.pids).map(|_| pids));
        r
    }

    /// These fields alone, as the resources to write to the cgroup (what is unset stays).
    fn resources(&self) -> LinuxResources {
        self.over(&LinuxResources::default())
    }
}

/// A value of runc's, where 0 is unset.
fn set<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

/// `-r`'s resources: a file of them, or stdin's with `-`.
fn read_resources(path: &str) -> Result<LinuxResources, Error> {
    let text = if path == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
            .map_err(|e| Error::io("reading resources from stdin", e))?;
        t
    } else {
        std::fs::read_to_string(path).map_err(|e| Error::io(format_args!("reading {path}"), e))?
    };
    let bad = |e: &dyn std::fmt::Display| Error::Usage(format!("resources in {path}: {e}"));
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(&e))?;
    if !v.is_object() {
        return Err(bad(&"not a JSON object"));
    }
    crate::tracked::deserialize(&v).map_err(|(_, e)| bad(&e))
}

/// The resources runc's flags give. `--kernel-memory` and `--kernel-memory-tcp` are read
/// and ignored, as runc 1.1 does (with its warning).
fn from_flags(a: &Args) -> Result<Given, Error> {
    if a.value("l3-cache-schema").is_some() || a.value("mem-bw-schema").is_some() {
        return Err(Error::Unsupported(
            "Intel RDT is not supported by podinit-runc".into(),
        ));
    }
    fn invalid(name: &str, s: &str) -> Error {
        Error::Usage(format!("invalid value for {name}: {s:?}"))
    }
    fn num<T: std::str::FromStr + Default>(a: &Args, name: &str) -> Result<T, Error> {
        a.value(name).map_or(Ok(T::default()), |s| {
            s.parse().map_err(|_| invalid(name, s))
        })
    }
    let ram = |name: &str| -> Result<i64, Error> {
        a.value(name)
            .map_or(Ok(0), |s| ram_in_bytes(s).ok_or_else(|| invalid(name, s)))
    };
    if ram("kernel-memory")? != 0 || ram("kernel-memory-tcp")? != 0 {
        super::log::warn("Kernel memory settings are ignored and will be removed");
    }
    Ok(Given {
        blkio_weight: num(a, "blkio-weight")?,
        cpu_shares: num(a, "cpu-share")?,
        cpu_quota: num(a, "cpu-quota")?,
        cpu_period: num(a, "cpu-period")?,
        cpu_rt_runtime: num(a, "cpu-rt-runtime")?,
        cpu_rt_period: num(a, "cpu-rt-period")?,
        cpus: a.value("cpuset-cpus").unwrap_or_default().to_string(),
        mems: a.value("cpuset-mems").unwrap_or_default().to_string(),
        memory: ram("memory")?,
        memory_reservation: ram("memory-reservation")?,
        memory_swap: ram("memory-swap")?,
        pids: num(a, "pids-limit")?,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    fn flags(words: &[&str]) -> Result<Given, Error> {
        let args: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        from_flags(&super::super::cli::parse(FLAGS, &args, true).unwrap())
    }

    fn resources(json: serde_json::Value) -> LinuxResources {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn flags_give_runcs_fields_and_zero_for_the_rest() {
        let g = flags(&[
            "--memory",
            "64m",
            "--cpu-quota=5000",
            "--pids-limit",
            "10",
            "c1",
        ]);
        let want = Given {
            memory: 64 << 20,
            cpu_quota: 5000,
            pids: 10,
            ..Given::default()
        };
        assert_eq!(g.unwrap(), want);
        let g = flags(&["--memory-swap", "-1", "--cpuset-cpus", "0-1", "c1"]).unwrap();
        assert_eq!((g.memory_swap, g.cpus.as_str()), (-1, "0-1"));
        assert_eq!(
            flags(&["--cpu-period", "-5", "c1"])
                .unwrap_err()
                .to_string(),
            "invalid value for cpu-period: \"-5\""
        );
        assert_eq!(
            flags(&["--memory", "lots", "c1"]).unwrap_err().to_string(),
            "invalid value for memory: \"lots\""
        );
        assert_eq!(
            flags(&["--kernel-memory", "1m", "c1"]).unwrap(),
            Given::default()
        );
    }

    #[test]
    fn an_update_sets_runcs_fields_as_given_and_keeps_the_others() {
        let old = resources(json!({
            "memory": {"limit": 1, "swap": 2, "swappiness": 10},
            "cpu": {"shares": 3, "quota": 4000, "period": 100000},
            "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
        }));
        let given = flags(&["--memory", "64m", "c1"]).unwrap();
        let new = given.over(&old);
        assert_eq!(
            serde_json::to_value(&new).unwrap(),
            json!({
                "memory": {"limit": 67108864, "swappiness": 10},
                "cpu": {},
                "blockIO": {},
                "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
            })
        );
        // Written: the memory limit alone.
        assert_eq!(
            serde_json::to_value(Given::of(&new).resources()).unwrap(),
            json!({"memory": {"limit": 67108864}, "cpu": {}, "blockIO": {}})
        );
    }

    #[test]
    fn a_quota_or_period_given_alone_keeps_the_other() {
        let old = resources(json!({"cpu": {"quota": 4000, "period": 100000}}));
        let cpu = |g: Given| {
            let r = g.over(&old);
            let c = r.cpu().clone().unwrap();
            (c.quota(), c.period())
        };
        let period = flags(&["--cpu-period", "50000", "c1"]).unwrap();
        assert_eq!(cpu(period), (Some(4000), Some(50000)));
        let quota = flags(&["--cpu-quota", "8000", "c1"]).unwrap();
        assert_eq!(cpu(quota), (Some(8000), Some(100000)));
        let both = flags(&["--cpu-quota", "8000", "--cpu-period", "50000", "c1"]).unwrap();
        assert_eq!(cpu(both), (Some(8000), Some(50000)));
        assert_eq!(cpu(Given::default()), (None, None));
    }

    #[test]
    fn a_resources_file_gives_runcs_fields_only() {
        let file = resources(json!({
            "memory": {"limit": 209715200, "swappiness": 0, "disableOOMKiller": true},
            "pids": {"limit": 5},
            "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
        }));
        let g = Given::of(&file);
        assert_eq!(
            g,
            Given {
                memory: 209715200,
                pids: 5,
                ..Given::default()
            }
        );
        assert_eq!(
            serde_json::to_value(g.resources()).unwrap(),
            json!({"memory": {"limit": 209715200}, "cpu": {}, "blockIO": {}, "pids": {"limit": 5}})
        );
    }
}
