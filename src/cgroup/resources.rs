//! The spec's resource limits written to a cgroup: everything `runc update` can change
//! (memory, cpu, cpuset, pids, blkio, hugepages), with runc's v1 → v2 translations, and
//! why they cannot be when a controller is missing.

use oci_spec::runtime::{LinuxBlockIo, LinuxCpu, LinuxMemory, LinuxResources};
use std::fs;
use std::io;
use std::path::PathBuf;

use super::{err, Error, Group, Result};

/// One file to write: in the directory of `controller` (v2 name), `file` ← `value`.
#[derive(Debug, PartialEq, Eq)]
struct Write {
    controller: &'static str,
    file: String,
    value: String,
    /// A refusal is not yet an error: the same file is written again later in the plan
    /// (a v1 CFS period the kernel refuses until the new quota is in).
    retried: bool,
}

fn w(controller: &'static str, file: impl Into<String>, value: impl ToString) -> Write {
    Write {
        controller,
        file: file.into(),
        value: value.to_string(),
        retried: false,
    }
}

/// What the plan needs to know of the cgroup as it is now.
#[derive(Default)]
struct Current {
    /// v1 `memory.limit_in_bytes`, to order a new memory and swap limit as the kernel
    /// accepts them.
    memory_limit: Option<u64>,
    /// v1: the kernel accounts swap (`memory.memsw.*` exists).
    swap_accounting: bool,
    /// The weights are BFQ's (v1: `blkio.bfq.weight` and no `blkio.weight`; v2:
    /// `io.bfq.weight`, which takes blkio's range as it is).
    bfq: bool,
    /// v2 `cpu.max` (quota or "max", period): a new quota keeps the period, a new period
    /// the quota (runc takes the other from the config it stored; this is what it wrote).
    cpu_max: Option<(String, u64)>,
}

impl Group {
    /// Apply the OCI resources (memory, cpu, cpuset, pids, blkio, hugepages) to this
    /// cgroup. Only what `r` sets (and not to 0, runc's "unset") is written; the rest stays
    /// as it is, so the resources of a `runc update` apply as they are.
    pub fn set(&self, r: &LinuxResources) -> super::Result<()> {
        if self.root.is_none() {
            return Ok(());
        }
        let what = || format!("setting limits on cgroup {}", self.describe());
        let mem = self.controller_dir("memory");
        let read = |f: &str| {
            mem.as_ref()
                .and_then(|d| fs::read_to_string(d.join(f)).ok())
                .and_then(|t| t.trim().parse().ok())
        };
        let io = self.controller_dir("io");
        let io_has = |f: &str| io.as_ref().is_some_and(|d| d.join(f).exists());
        let cur = Current {
            memory_limit: read("memory.limit_in_bytes"),
            swap_accounting: mem
                .as_ref()
                .is_some_and(|d| d.join("memory.memsw.limit_in_bytes").exists()),
            bfq: if self.v2 {
                io_has("io.bfq.weight")
            } else {
                !io_has("blkio.weight") && io_has("blkio.bfq.weight")
            },
            cpu_max: self
                .v2
                .then(|| self.controller_dir("cpu"))
                .flatten()
                .and_then(|d| fs::read_to_string(d.join("cpu.max")).ok())
                .and_then(|t| parse_cpu_max(&t)),
        };
        let plan = plan(r, self.v2, &cur).map_err(|e| err(&what(), e))?;
        // Refuse before writing anything: a cgroup-v1 host without the hierarchy, or a v2
        // cgroup that was not handed the controller, would silently run without the limit.
        let mut missing: Vec<&str> = Vec::new();
        for c in plan.iter().map(|w| w.controller) {
            if !missing.contains(&c) && !self.has_controller(c) {
                missing.push(c);
            }
        }
        if !missing.is_empty() {
            return Err(super::missing(
                &what(),
                missing_controllers(&missing, self.v2),
            ));
        }
        for w in &plan {
            let Some(dir) = self.controller_dir(w.controller) else {
                continue;
            };
            let f = dir.join(&w.file);
            let res = fs::OpenOptions::new()
                .write(true)
                .open(&f)
                .and_then(|mut h| io::Write::write_all(&mut h, w.value.as_bytes()));
            match res {
                Err(_) if w.retried => {}
                Err(e) => {
                    let e = err(&format!("writing {} to {}", w.value, f.display()), e);
                    return Err(err(&what(), e));
                }
                Ok(()) => {}
            }
        }
        Ok(())
    }

    /// Whether `controller` (v2 name: memory, cpu, cpuset, pids, io, hugetlb; `blkio` is
    /// v1's io) acts on this cgroup.
    pub fn has_controller(&self, controller: &str) -> bool {
        if self.v2 {
            return self.dirs.first().is_some_and(|d| {
                fs::read_to_string(d.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|x| x == controller))
            });
        }
        self.controller_dir(controller).is_some()
    }

    /// The directory holding `controller`'s files (v2: the one directory).
    fn controller_dir(&self, controller: &str) -> Option<PathBuf> {
        if self.v2 {
            return self.dirs.first().cloned();
        }
        use cgroups_rs::fs::{Controller, Subsystem as S};
        self.cg.subsystems().iter().find_map(|s| {
            let path = match (s, controller) {
                (S::Mem(c), "memory") => c.path(),
                (S::Cpu(c), "cpu") => c.path(),
                (S::CpuSet(c), "cpuset") => c.path(),
                (S::Pid(c), "pids") => c.path(),
                (S::BlkIo(c), "blkio" | "io") => c.path(),
                (S::HugeTlb(c), "hugetlb") => c.path(),
                _ => return None,
            };
            Some(path.to_path_buf())
        })
    }
}

/// A resource no cgroup file takes; the caller names the cgroup.
fn invalid(why: impl Into<String>) -> Error {
    Error::Invalid {
        what: String::new(),
        why: why.into(),
    }
}

/// The writes that apply `r`, in the order runc makes them.
fn plan(r: &LinuxResources, v2: bool, cur: &Current) -> Result<Vec<Write>> {
    let mut out = Vec::new();
    if let Some(m) = r.memory() {
        if v2 {
            memory_v2(m, &mut out)?;
        } else {
            memory_v1(m, cur, &mut out)?;
        }
    }
    if let Some(c) = r.cpu() {
        cpu(c, v2, cur, &mut out)?;
    }
    if let Some(p) = r.pids() {
        // 0 leaves it as it is; a negative limit is none.
        if p.limit() != 0 {
            out.push(w("pids", "pids.max", limit_or_max(p.limit())));
        }
    }
    if let Some(b) = r.block_io() {
        blkio(b, v2, cur.bfq, &mut out);
    }
    for h in r.hugepage_limits().iter().flatten() {
        let file = if v2 {
            format!("hugetlb.{}.max", h.page_size())
        } else {
            format!("hugetlb.{}.limit_in_bytes", h.page_size())
        };
        out.push(w("hugetlb", file, h.limit()));
    }
    Ok(out)
}

/// v1: limit, memory+swap (first when the new pair only fits that way round), soft limit,
/// swappiness, OOM killer. A 0 is unset; kernel memory limits are ignored, as runc 1.1
/// ignores them (the kernel deprecated them).
fn memory_v1(m: &LinuxMemory, cur: &Current, out: &mut Vec<Write>) -> Result<()> {
    let mem = m.limit().filter(|l| *l != 0);
    let limit = mem.map(|l| w("memory", "memory.limit_in_bytes", l));
    // Unlimited memory with no word on swap: swap unlimited too (where it is accounted).
    let swap_value = match (mem, m.swap().filter(|s| *s != 0)) {
        (Some(-1), None) if cur.swap_accounting => Some(-1),
        (_, s) => s,
    };
    let swap = swap_value.map(|s| w("memory", "memory.memsw.limit_in_bytes", s));
    // The kernel keeps memory ≤ memory+swap at every write: raising both needs the swap
    // limit first, lowering both the memory limit first.
    let swap_first = matches!((mem, swap_value), (Some(_), Some(s))
        if s == -1 || cur.memory_limit.is_some_and(|c| (c as i128) < s as i128));
    if swap_first {
        out.extend(swap);
        out.extend(limit);
    } else {
        out.extend(limit);
        out.extend(swap);
    }
    if let Some(v) = m.reservation().filter(|v| *v != 0) {
        out.push(w("memory", "memory.soft_limit_in_bytes", v));
    }
    if m.disable_oom_killer() == Some(true) {
        out.push(w("memory", "memory.oom_control", 1));
    }
    match m.swappiness() {
        // Go's -1 ("leave it") as the spec's unsigned number.
        None | Some(u64::MAX) => {}
        Some(v) if v <= 100 => out.push(w("memory", "memory.swappiness", v)),
        Some(v) => return Err(invalid(format!("memory swappiness {v} is outside 0-100"))),
    }
    Ok(())
}

/// v2: memory.max, memory.swap.max (swap alone: memory+swap less memory, as runc),
/// memory.low for the reservation. A 0 is unset; v2 has no swappiness nor kernel memory
/// limits, which runc ignores there.
fn memory_v2(m: &LinuxMemory, out: &mut Vec<Write>) -> Result<()> {
    if let Some(swap) = swap_v2(m.swap(), m.limit())? {
        out.push(w("memory", "memory.swap.max", limit_or_max(swap)));
    }
    if let Some(l) = m.limit().filter(|l| *l != 0) {
        out.push(w("memory", "memory.max", limit_or_max(l)));
    }
    if let Some(v) = m.reservation().filter(|v| *v != 0) {
        out.push(w("memory", "memory.low", limit_or_max(v)));
    }
    Ok(())
}

/// runc's `ConvertMemorySwapToCgroupV2Value`: the spec's swap is memory+swap (as v1's
/// memsw), v2's memory.swap.max is swap alone.
pub(super) fn swap_v2(swap: Option<i64>, memory: Option<i64>) -> Result<Option<i64>> {
    match (swap, memory) {
        // Unlimited memory with no word on swap: swap unlimited too.
        (None | Some(0), Some(-1)) => Ok(Some(-1)),
        (None | Some(0), _) => Ok(None),
        (Some(-1), _) => Ok(Some(-1)),
        (Some(_), None | Some(0) | Some(-1)) => Err(invalid(
            "a swap limit needs a memory limit (memory.swap.max is swap alone)",
        )),
        (Some(s), Some(m)) if s < m => Err(invalid(format!(
            "memory+swap limit {s} is below the memory limit {m}"
        ))),
        (Some(s), Some(m)) => Ok(Some(s - m)),
    }
}

fn cpu(c: &LinuxCpu, v2: bool, cur: &Current, out: &mut Vec<Write>) -> Result<()> {
    if v2 {
        if let Some(s) = c.shares().filter(|s| *s != 0) {
            out.push(w("cpu", "cpu.weight", shares_to_weight(s)));
        }
        let (quota, period) = (
            c.quota().filter(|q| *q != 0),
            c.period().filter(|p| *p != 0),
        );
        if quota.is_some() || period.is_some() {
            // cpu.max takes both at once: the one not given stays as it is.
            let quota = match quota {
                Some(q) if q > 0 => q.to_string(),
                Some(_) => "max".to_string(),
                None => cur
                    .cpu_max
                    .as_ref()
                    .map_or("max".into(), |(q, _)| q.clone()),
            };
            let period = period
                .or(cur.cpu_max.as_ref().map(|(_, p)| *p))
                .unwrap_or(100_000);
            out.push(w("cpu", "cpu.max", format!("{quota} {period}")));
        }
        if c.realtime_period().is_some() || c.realtime_runtime().is_some() {
            return Err(invalid(
                "realtime cpu scheduling (realtimePeriod, realtimeRuntime) does not \
                 exist on cgroup v2",
            ));
        }
    } else {
        if let Some(s) = c.shares().filter(|s| *s != 0) {
            out.push(w("cpu", "cpu.shares", s));
        }
        let quota = c.quota().filter(|q| *q != 0);
        if let Some(p) = c.period().filter(|p| *p != 0) {
            // A shorter period can be refused while the old quota is in: again after it.
            out.push(Write {
                retried: quota.is_some(),
                ..w("cpu", "cpu.cfs_period_us", p)
            });
            if let Some(q) = quota {
                out.push(w("cpu", "cpu.cfs_quota_us", q));
                out.push(w("cpu", "cpu.cfs_period_us", p));
            }
        } else if let Some(q) = quota {
            out.push(w("cpu", "cpu.cfs_quota_us", q));
        }
        if let Some(p) = c.realtime_period().filter(|p| *p != 0) {
            out.push(w("cpu", "cpu.rt_period_us", p));
        }
        if let Some(r) = c.realtime_runtime().filter(|r| *r != 0) {
            out.push(w("cpu", "cpu.rt_runtime_us", r));
        }
    }
    for (file, v) in [("cpuset.cpus", c.cpus()), ("cpuset.mems", c.mems())] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            out.push(w("cpuset", file, v));
        }
    }
    Ok(())
}

/// v1 blkio's weight and throttles; v2's io.weight (runc's conversion, unless BFQ's
/// weight takes blkio's as it is) and io.max. Device weights go where runc puts them
/// (on v2 only BFQ has them).
fn blkio(b: &LinuxBlockIo, v2: bool, bfq: bool, out: &mut Vec<Write>) {
    let ctl = if v2 { "io" } else { "blkio" };
    let (weight_file, device_file) = match (v2, bfq) {
        (false, false) => ("blkio.weight", Some("blkio.weight_device")),
        (false, true) => ("blkio.bfq.weight", Some("blkio.bfq.weight_device")),
        (true, true) => ("io.bfq.weight", Some("io.bfq.weight")),
        (true, false) => ("io.weight", None),
    };
    if let Some(weight) = b.weight().filter(|w| *w != 0) {
        let v = if v2 && !bfq {
            blkio_to_io_weight(weight)
        } else {
            weight.into()
        };
        out.push(w(ctl, weight_file, v));
    }
    if let Some(lw) = b.leaf_weight().filter(|w| *w != 0 && !v2) {
        out.push(w(ctl, "blkio.leaf_weight", lw));
    }
    for d in b.weight_device().iter().flatten() {
        let dev = format!("{}:{}", d.major(), d.minor());
        if let (Some(file), Some(wt)) = (device_file, d.weight().filter(|w| *w != 0)) {
            out.push(w(ctl, file, format!("{dev} {wt}")));
        }
        if let Some(lw) = d.leaf_weight().filter(|w| *w != 0 && !v2) {
            out.push(w(ctl, "blkio.leaf_weight_device", format!("{dev} {lw}")));
        }
    }
    let throttles = [
        (b.throttle_read_bps_device(), "read_bps_device", "rbps"),
        (b.throttle_write_bps_device(), "write_bps_device", "wbps"),
        (b.throttle_read_iops_device(), "read_iops_device", "riops"),
        (b.throttle_write_iops_device(), "write_iops_device", "wiops"),
    ];
    for (devices, v1_file, v2_key) in throttles {
        for d in devices.iter().flatten() {
            let dev = format!("{}:{}", d.major(), d.minor());
            if v2 {
                // A rate of 0 is "no limit" on v1; v2 says it with max.
                let rate = if d.rate() == 0 {
                    "max".to_string()
                } else {
                    d.rate().to_string()
                };
                out.push(w(ctl, "io.max", format!("{dev} {v2_key}={rate}")));
            } else {
                let file = format!("blkio.throttle.{v1_file}");
                out.push(w(ctl, file, format!("{dev} {}", d.rate())));
            }
        }
    }
}

/// v2 `cpu.max`: "<quota|max> <period>".
fn parse_cpu_max(text: &str) -> Option<(String, u64)> {
    let mut it = text.split_whitespace();
    let quota = it.next()?.to_string();
    Some((quota, it.next()?.parse().ok()?))
}

/// A limit where -1 (or any negative) is none: v2's "max".
fn limit_or_max(v: i64) -> String {
    if v < 0 {
        "max".into()
    } else {
        v.to_string()
    }
}

/// runc's `ConvertBlkIOToIOWeightValue`: blkio.weight [10, 1000] onto io.weight
/// [1, 10000].
fn blkio_to_io_weight(weight: u16) -> u64 {
    1 + (u64::from(weight).saturating_sub(10)) * 9999 / 990
}

/// Why a v2 cgroup lacks a controller, and what to do about it.
/// The cgroup podinit starts in holds podinit itself, so only a parent given with
/// `--cgroup-parent` (or the root) can hand controllers down.
pub const V2_DELEGATION: &str = "cgroup v2 hands a controller to a cgroup only from a parent \
    that has it in cgroup.subtree_control and holds no process itself; pass --cgroup-parent \
    naming an empty cgroup whose own parent delegates the controllers (a systemd unit with \
    Delegate=yes)";

/// Why the limits cannot be set, and what to do about it, in one line.
fn missing_controllers(missing: &[&str], v2: bool) -> String {
    let list = missing.join(", ");
    let s = if missing.len() > 1 { "s are" } else { " is" };
    if v2 {
        format!("the {list} controller{s} not enabled for it: {V2_DELEGATION}")
    } else {
        let s = if missing.len() > 1 { "s" } else { "" };
        format!("no cgroup v1 hierarchy is mounted for the {list} controller{s}")
    }
}

/// runc's `ConvertCPUSharesToCgroupV2Value`: cpu.shares [2, 262144] onto cpu.weight
/// [1, 10000].
pub(super) fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.clamp(2, 262_144) - 2) * 9999 / 262_142
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(v: serde_json::Value) -> LinuxResources {
        serde_json::from_value(v).unwrap()
    }

    /// The plan as `controller file=value` lines.
    fn lines(v: serde_json::Value, v2: bool, cur: &Current) -> Vec<String> {
        plan(&resources(v), v2, cur)
            .unwrap()
            .iter()
            .map(|w| format!("{} {}={}", w.controller, w.file, w.value))
            .collect()
    }

    #[test]
    fn every_update_field_on_v1() {
        let r = serde_json::json!({
            "memory": { "limit": 64 << 20, "reservation": 32 << 20, "swap": 128 << 20 },
            "cpu": {
                "shares": 512, "quota": 50_000, "period": 100_000,
                "realtimePeriod": 1_000_000, "realtimeRuntime": 950_000,
                "cpus": "0-1", "mems": "0",
            },
            "pids": { "limit": 50 },
            "blockIO": {
                "weight": 300,
                "throttleReadBpsDevice": [{ "major": 8, "minor": 0, "rate": 1024 }],
            },
            "hugepageLimits": [{ "pageSize": "2MB", "limit": 4 << 20 }],
        });
        let cur = Current {
            memory_limit: Some(1 << 40),
            swap_accounting: true,
            ..Current::default()
        };
        assert_eq!(
            lines(r, false, &cur),
            [
                "memory memory.limit_in_bytes=67108864",
                "memory memory.memsw.limit_in_bytes=134217728",
                "memory memory.soft_limit_in_bytes=33554432",
                "cpu cpu.shares=512",
                "cpu cpu.cfs_period_us=100000",
                "cpu cpu.cfs_quota_us=50000",
                "cpu cpu.cfs_period_us=100000",
                "cpu cpu.rt_period_us=1000000",
                "cpu cpu.rt_runtime_us=950000",
                "cpuset cpuset.cpus=0-1",
                "cpuset cpuset.mems=0",
                "pids pids.max=50",
                "blkio blkio.weight=300",
                "blkio blkio.throttle.read_bps_device=8:0 1024",
                "hugetlb hugetlb.2MB.limit_in_bytes=4194304",
            ]
        );
    }

    #[test]
    fn v1_raises_memory_and_swap_swap_first() {
        let r = serde_json::json!({ "memory": { "limit": 256 << 20, "swap": 512 << 20 } });
        let cur = Current {
            memory_limit: Some(64 << 20),
            swap_accounting: true,
            ..Current::default()
        };
        assert_eq!(
            lines(r, false, &cur),
            [
                "memory memory.memsw.limit_in_bytes=536870912",
                "memory memory.limit_in_bytes=268435456",
            ]
        );
        // Unlimited memory, swap not given: swap unlimited too, first.
        let r = serde_json::json!({ "memory": { "limit": -1 } });
        assert_eq!(
            lines(r.clone(), false, &cur),
            [
                "memory memory.memsw.limit_in_bytes=-1",
                "memory memory.limit_in_bytes=-1"
            ]
        );
        let no_swap = Current::default();
        assert_eq!(
            lines(r, false, &no_swap),
            ["memory memory.limit_in_bytes=-1"]
        );
    }

    #[test]
    fn every_update_field_on_v2() {
        let r = serde_json::json!({
            "memory": { "limit": 64 << 20, "reservation": 32 << 20, "swap": 96 << 20 },
            "cpu": { "shares": 1024, "quota": 50_000, "period": 100_000, "cpus": "1" },
            "pids": { "limit": -1 },
            "blockIO": {
                "weight": 500,
                "throttleWriteIOPSDevice": [{ "major": 8, "minor": 16, "rate": 0 }],
            },
            "hugepageLimits": [{ "pageSize": "1GB", "limit": 0 }],
        });
        assert_eq!(
            lines(r, true, &Current::default()),
            [
                "memory memory.swap.max=33554432",
                "memory memory.max=67108864",
                "memory memory.low=33554432",
                "cpu cpu.weight=39",
                "cpu cpu.max=50000 100000",
                "cpuset cpuset.cpus=1",
                "pids pids.max=max",
                "io io.weight=4950",
                "io io.max=8:16 wiops=max",
                "hugetlb hugetlb.1GB.max=0",
            ]
        );
        let r = serde_json::json!({ "cpu": { "period": 20_000 }, "memory": { "limit": -1 } });
        assert_eq!(
            lines(r, true, &Current::default()),
            [
                "memory memory.swap.max=max",
                "memory memory.max=max",
                "cpu cpu.max=max 20000"
            ]
        );
        let r = serde_json::json!({ "cpu": { "quota": 30_000 }, "memory": { "limit": 0 } });
        assert_eq!(
            lines(r, true, &Current::default()),
            ["cpu cpu.max=30000 100000"]
        );
        // An update of one of the two keeps the other as it is.
        let cur = Current {
            cpu_max: parse_cpu_max("20000 50000\n"),
            ..Current::default()
        };
        let r = serde_json::json!({ "cpu": { "quota": 30_000 } });
        assert_eq!(lines(r, true, &cur), ["cpu cpu.max=30000 50000"]);
        let r = serde_json::json!({ "cpu": { "period": 40_000 } });
        assert_eq!(lines(r, true, &cur), ["cpu cpu.max=20000 40000"]);
        let r = serde_json::json!({ "cpu": { "quota": -1 } });
        assert_eq!(lines(r, true, &cur), ["cpu cpu.max=max 50000"]);
    }

    #[test]
    fn v2_swap_is_memory_plus_swap_less_memory_as_runc() {
        assert_eq!(swap_v2(Some(300), Some(100)).unwrap(), Some(200));
        assert_eq!(swap_v2(Some(100), Some(100)).unwrap(), Some(0));
        assert_eq!(swap_v2(Some(-1), Some(100)).unwrap(), Some(-1));
        assert_eq!(swap_v2(None, Some(100)).unwrap(), None);
        assert_eq!(swap_v2(Some(0), Some(-1)).unwrap(), Some(-1));
        let e = swap_v2(Some(50), Some(100)).unwrap_err();
        assert!(e.to_string().contains("below the memory limit"), "{e}");
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        let e = swap_v2(Some(50), None).unwrap_err();
        assert!(e.to_string().contains("needs a memory limit"), "{e}");
    }

    #[test]
    fn bfq_weights_take_blkio_s_range() {
        let r = serde_json::json!({ "blockIO": {
            "weight": 500,
            "weightDevice": [{ "major": 8, "minor": 0, "weight": 200 }],
        }});
        let bfq = Current {
            bfq: true,
            ..Current::default()
        };
        assert_eq!(
            lines(r.clone(), true, &bfq),
            ["io io.bfq.weight=500", "io io.bfq.weight=8:0 200"]
        );
        assert_eq!(
            lines(r.clone(), false, &bfq),
            [
                "blkio blkio.bfq.weight=500",
                "blkio blkio.bfq.weight_device=8:0 200"
            ]
        );
        // Without BFQ v2 has no device weights.
        assert_eq!(lines(r, true, &Current::default()), ["io io.weight=4950"]);
    }

    #[test]
    fn kernel_memory_is_ignored_and_swappiness_checked_as_runc() {
        let r = serde_json::json!({ "memory": { "kernel": 1 << 20, "kernelTCP": 1 << 20 } });
        assert!(lines(r.clone(), false, &Current::default()).is_empty());
        assert!(lines(r, true, &Current::default()).is_empty());
        let r = serde_json::json!({ "memory": { "swappiness": 60 } });
        assert_eq!(
            lines(r.clone(), false, &Current::default()),
            ["memory memory.swappiness=60"]
        );
        assert!(lines(r, true, &Current::default()).is_empty());
        let r = resources(serde_json::json!({ "memory": { "swappiness": 101 } }));
        let e = plan(&r, false, &Current::default()).unwrap_err();
        assert_eq!(e.to_string(), "memory swappiness 101 is outside 0-100");
    }

    #[test]
    fn what_v2_lacks_is_an_error() {
        let r = resources(serde_json::json!({ "cpu": { "realtimeRuntime": 1000 } }));
        let e = plan(&r, true, &Current::default()).unwrap_err().to_string();
        assert!(e.contains("realtime") && e.contains("cgroup v2"), "{e}");
        assert!(plan(&r, false, &Current::default()).is_ok());
    }

    #[test]
    fn nothing_set_writes_nothing() {
        let r = resources(serde_json::json!({ "pids": { "limit": 0 }, "cpu": {} }));
        assert!(plan(&r, false, &Current::default()).unwrap().is_empty());
        assert!(plan(&r, true, &Current::default()).unwrap().is_empty());
    }

    #[test]
    #[ignore = "needs root: makes cgroups"]
    fn limits_land_in_a_live_cgroup() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "run as root with --include-ignored"
        );
        let s = super::super::freezer::tests::Sleeper::start("limits");
        let g = &s.group;
        let r = resources(serde_json::json!({
            "memory": { "limit": 64 << 20, "reservation": 32 << 20 },
            "cpu": { "shares": 512, "quota": 20_000, "period": 50_000, "cpus": "0" },
            "pids": { "limit": 7 },
        }));
        g.set(&r).unwrap();
        let read = |c: &str, f: &str| {
            fs::read_to_string(g.controller_dir(c).unwrap().join(f))
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(read("pids", "pids.max"), "7");
        assert_eq!(read("cpuset", "cpuset.cpus"), "0");
        if g.v2 {
            assert_eq!(read("memory", "memory.max"), (64u64 << 20).to_string());
            assert_eq!(read("cpu", "cpu.max"), "20000 50000");
        } else {
            assert_eq!(
                read("memory", "memory.limit_in_bytes"),
                (64u64 << 20).to_string()
            );
            assert_eq!(read("cpu", "cpu.cfs_quota_us"), "20000");
            assert_eq!(read("cpu", "cpu.shares"), "512");
        }
        let stats = g.stats();
        assert_eq!(
            stats["pids"],
            serde_json::json!({ "current": 1, "limit": 7 })
        );
        assert_eq!(stats["memory"]["usage"]["limit"], 64u64 << 20);
        // Lower memory below what memory+swap was: the plan orders the two writes.
        let r = resources(serde_json::json!({ "memory": { "limit": 16 << 20, "swap": -1 } }));
        g.set(&r).unwrap();
        let e = g
            .set(&resources(
                serde_json::json!({ "pids": { "limit": 7 }, "cpu": { "cpus": "99" } }),
            ))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("setting limits on cgroup /") && e.contains("cpuset.cpus"),
            "{e}"
        );
    }

    #[test]
    fn missing_controllers_in_one_line() {
        let m = missing_controllers(&["memory", "cpu"], true);
        assert!(
            m.starts_with("the memory, cpu controllers are not enabled"),
            "{m}"
        );
        assert!(m.contains("--cgroup-parent") && !m.contains('\n'), "{m}");
        let m = missing_controllers(&["hugetlb"], false);
        assert_eq!(
            m,
            "no cgroup v1 hierarchy is mounted for the hugetlb controller"
        );
    }

    #[test]
    fn weights_as_runc_converts_them() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(
            shares_to_weight(1 << 20),
            10_000,
            "within the kernel's range"
        );
        assert_eq!(blkio_to_io_weight(10), 1);
        assert_eq!(blkio_to_io_weight(1000), 10_000);
    }
}
