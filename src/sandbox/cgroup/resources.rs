//! The spec's resource limits (memory, cpu, pids, hugepages) written to a cgroup, and
//! why they cannot be when a controller is missing.

use cgroups_rs::fs::{MaxValue, Resources};
use std::fs;
use std::io;

use super::{err, Group};

impl Group {
    /// Apply the OCI resources (memory, cpu, pids, hugepages) to this cgroup.
    pub fn set(&self, r: &oci_spec::runtime::LinuxResources) -> io::Result<()> {
        let mut res = to_cgroups_resources(r);
        if self.v2 {
            // cgroups-rs writes shares to cpu.weight as they are; the CRI's shares mean
            // what runc's conversion makes of them (and above 10000 the kernel refuses).
            res.cpu.shares = res.cpu.shares.map(shares_to_weight);
        }
        if res == Resources::default() {
            return Ok(());
        }
        let what = || format!("setting limits on cgroup {}", self.describe());
        // cgroups-rs skips a limit whose file is missing without a word: a pod would run
        // without the limits it asked for.
        let missing: Vec<&str> = controllers_for(&res)
            .into_iter()
            .filter(|c| !self.has_controller(c))
            .collect();
        if !missing.is_empty() {
            return Err(err(&what(), missing_controllers(&missing, self.v2)));
        }
        self.cg.apply(&res).map_err(|e| err(&what(), e))
    }

    /// Whether `controller` (v2 name: memory, cpu, pids, hugetlb, …) acts on this cgroup.
    pub fn has_controller(&self, controller: &str) -> bool {
        if self.v2 {
            return self.dirs.first().is_some_and(|d| {
                fs::read_to_string(d.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|x| x == controller))
            });
        }
        use cgroups_rs::fs::Subsystem as S;
        self.cg.subsystems().iter().any(|s| {
            matches!(
                (s, controller),
                (S::Mem(_), "memory")
                    | (S::Cpu(_), "cpu")
                    | (S::Pid(_), "pids")
                    | (S::HugeTlb(_), "hugetlb")
            )
        })
    }
}

/// The controllers that the limits in `res` are written to.
fn controllers_for(res: &Resources) -> Vec<&'static str> {
    let mut out = Vec::new();
    if res.memory.memory_hard_limit.is_some() || res.memory.memory_swap_limit.is_some() {
        out.push("memory");
    }
    if res.cpu.shares.is_some() || res.cpu.quota.is_some() || res.cpu.period.is_some() {
        out.push("cpu");
    }
    if res.pid.maximum_number_of_processes.is_some() {
        out.push("pids");
    }
    if !res.hugepages.limits.is_empty() {
        out.push("hugetlb");
    }
    out
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
fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.clamp(2, 262_144) - 2) * 9999 / 262_142
}

fn to_cgroups_resources(r: &oci_spec::runtime::LinuxResources) -> Resources {
    let mut res = Resources::default();
    if let Some(m) = r.memory() {
        res.memory.memory_hard_limit = m.limit();
        res.memory.memory_swap_limit = m.swap();
    }
    if let Some(c) = r.cpu() {
        res.cpu.shares = c.shares();
        res.cpu.quota = c.quota();
        res.cpu.period = c.period();
    }
    if let Some(p) = r.pids() {
        res.pid.maximum_number_of_processes = Some(if p.limit() > 0 {
            MaxValue::Value(p.limit())
        } else {
            MaxValue::Max
        });
    }
    if let Some(h) = r.hugepage_limits() {
        res.hugepages.limits = h
            .iter()
            .map(|l| cgroups_rs::fs::HugePageResource {
                size: l.page_size().clone(),
                limit: l.limit() as u64,
            })
            .collect();
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_the_controllers_they_need() {
        let mut res = Resources::default();
        assert!(controllers_for(&res).is_empty());
        res.memory.memory_hard_limit = Some(1 << 20);
        res.cpu.quota = Some(50_000);
        res.pid.maximum_number_of_processes = Some(MaxValue::Value(10));
        assert_eq!(controllers_for(&res), ["memory", "cpu", "pids"]);
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
    fn resources_map_limits() {
        use oci_spec::runtime::{LinuxCpuBuilder, LinuxMemoryBuilder, LinuxResourcesBuilder};
        let r = LinuxResourcesBuilder::default()
            .memory(
                LinuxMemoryBuilder::default()
                    .limit(64 << 20)
                    .build()
                    .unwrap(),
            )
            .cpu(
                LinuxCpuBuilder::default()
                    .quota(50_000)
                    .period(100_000u64)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        let res = to_cgroups_resources(&r);
        assert_eq!(res.memory.memory_hard_limit, Some(64 << 20));
        assert_eq!(res.cpu.quota, Some(50_000));
        assert_eq!(res.cpu.period, Some(100_000));
    }

    #[test]
    fn shares_become_runc_s_weight_on_v2() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(
            shares_to_weight(1 << 20),
            10_000,
            "within the kernel's range"
        );
    }
}
