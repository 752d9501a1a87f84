//! A container's cgroup figures in containerd's metric types (`io.containerd.cgroups.v1`
//! and `.v2` Metrics), which the CRI reads for ContainerStats: from the same figures
//! `podinit runc events --stats` prints.

use containerd_shim::protos::cgroups::metrics as v1;
use containerd_shim::protos::cgroups_v2::metrics as v2;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::MessageField;
use serde_json::Value;

use super::error::{Error, Result};

fn n(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn any(type_url: &str, m: &dyn containerd_shim::protos::protobuf::MessageDyn) -> Result<Any> {
    super::pack::any(type_url, m).map_err(|e| Error::Other(format!("encoding metrics: {e}")))
}

/// `stats` is runc's stats data for the cgroup; `v2` whether it is a cgroup v2 one.
pub fn to_any(stats: &Value, v2: bool) -> Result<Any> {
    if v2 {
        let m = to_v2(stats);
        any("io.containerd.cgroups.v2.Metrics", &m)
    } else {
        let m = to_v1(stats);
        any("io.containerd.cgroups.v1.Metrics", &m)
    }
}

pub fn to_v1(s: &Value) -> v1::Metrics {
    let raw = |k: &str| n(s, &["memory", "raw", k]);
    let entry = |k: &str| v1::MemoryEntry {
        limit: n(s, &["memory", k, "limit"]),
        usage: n(s, &["memory", k, "usage"]),
        max: n(s, &["memory", k, "max"]),
        failcnt: n(s, &["memory", k, "failcnt"]),
        ..Default::default()
    };
    let per_cpu = s
        .pointer("/cpu/usage/percpu")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    v1::Metrics {
        pids: MessageField::some(v1::PidsStat {
            current: n(s, &["pids", "current"]),
            limit: n(s, &["pids", "limit"]),
            ..Default::default()
        }),
        cpu: MessageField::some(v1::CPUStat {
            usage: MessageField::some(v1::CPUUsage {
                total: n(s, &["cpu", "usage", "total"]),
                kernel: n(s, &["cpu", "usage", "kernel"]),
                user: n(s, &["cpu", "usage", "user"]),
                per_cpu,
                ..Default::default()
            }),
            throttling: MessageField::some(v1::Throttle {
                periods: n(s, &["cpu", "throttling", "periods"]),
                throttled_periods: n(s, &["cpu", "throttling", "throttledPeriods"]),
                throttled_time: n(s, &["cpu", "throttling", "throttledTime"]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        memory: MessageField::some(v1::MemoryStat {
            cache: raw("cache"),
            rss: raw("rss"),
            rss_huge: raw("rss_huge"),
            mapped_file: raw("mapped_file"),
            dirty: raw("dirty"),
            writeback: raw("writeback"),
            pg_pg_in: raw("pgpgin"),
            pg_pg_out: raw("pgpgout"),
            pg_fault: raw("pgfault"),
            pg_maj_fault: raw("pgmajfault"),
            inactive_anon: raw("inactive_anon"),
            active_anon: raw("active_anon"),
            inactive_file: raw("inactive_file"),
            active_file: raw("active_file"),
            unevictable: raw("unevictable"),
            hierarchical_memory_limit: raw("hierarchical_memory_limit"),
            hierarchical_swap_limit: raw("hierarchical_memsw_limit"),
            total_cache: raw("total_cache"),
            total_rss: raw("total_rss"),
            total_rss_huge: raw("total_rss_huge"),
            total_mapped_file: raw("total_mapped_file"),
            total_dirty: raw("total_dirty"),
            total_writeback: raw("total_writeback"),
            total_pg_pg_in: raw("total_pgpgin"),
            total_pg_pg_out: raw("total_pgpgout"),
            total_pg_fault: raw("total_pgfault"),
            total_pg_maj_fault: raw("total_pgmajfault"),
            total_inactive_anon: raw("total_inactive_anon"),
            total_active_anon: raw("total_active_anon"),
            total_inactive_file: raw("total_inactive_file"),
            total_active_file: raw("total_active_file"),
            total_unevictable: raw("total_unevictable"),
            usage: MessageField::some(entry("usage")),
            swap: MessageField::some(entry("swap")),
            kernel: MessageField::some(entry("kernel")),
            kernel_tcp: MessageField::some(entry("kernelTCP")),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn to_v2(s: &Value) -> v2::Metrics {
    let raw = |k: &str| n(s, &["memory", "raw", k]);
    v2::Metrics {
        pids: MessageField::some(v2::PidsStat {
            current: n(s, &["pids", "current"]),
            limit: n(s, &["pids", "limit"]),
            ..Default::default()
        }),
        cpu: MessageField::some(v2::CPUStat {
            usage_usec: n(s, &["cpu", "usage", "total"]) / 1000,
            user_usec: n(s, &["cpu", "usage", "user"]) / 1000,
            system_usec: n(s, &["cpu", "usage", "kernel"]) / 1000,
            nr_periods: n(s, &["cpu", "throttling", "periods"]),
            nr_throttled: n(s, &["cpu", "throttling", "throttledPeriods"]),
            throttled_usec: n(s, &["cpu", "throttling", "throttledTime"]) / 1000,
            ..Default::default()
        }),
        memory: MessageField::some(v2::MemoryStat {
            anon: raw("anon"),
            file: raw("file"),
            kernel_stack: raw("kernel_stack"),
            slab: raw("slab"),
            sock: raw("sock"),
            shmem: raw("shmem"),
            file_mapped: raw("file_mapped"),
            file_dirty: raw("file_dirty"),
            file_writeback: raw("file_writeback"),
            anon_thp: raw("anon_thp"),
            inactive_anon: raw("inactive_anon"),
            active_anon: raw("active_anon"),
            inactive_file: raw("inactive_file"),
            active_file: raw("active_file"),
            unevictable: raw("unevictable"),
            slab_reclaimable: raw("slab_reclaimable"),
            slab_unreclaimable: raw("slab_unreclaimable"),
            pgfault: raw("pgfault"),
            pgmajfault: raw("pgmajfault"),
            workingset_refault: raw("workingset_refault"),
            workingset_activate: raw("workingset_activate"),
            workingset_nodereclaim: raw("workingset_nodereclaim"),
            pgrefill: raw("pgrefill"),
            pgscan: raw("pgscan"),
            pgsteal: raw("pgsteal"),
            pgactivate: raw("pgactivate"),
            pgdeactivate: raw("pgdeactivate"),
            pglazyfree: raw("pglazyfree"),
            pglazyfreed: raw("pglazyfreed"),
            thp_fault_alloc: raw("thp_fault_alloc"),
            thp_collapse_alloc: raw("thp_collapse_alloc"),
            usage: n(s, &["memory", "usage", "usage"]),
            usage_limit: n(s, &["memory", "usage", "limit"]),
            max_usage: n(s, &["memory", "usage", "max"]),
            swap_usage: n(s, &["memory", "swap", "usage"]),
            swap_limit: n(s, &["memory", "swap", "limit"]),
            swap_max_usage: n(s, &["memory", "swap", "max"]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::protos::protobuf::Message;

    #[test]
    fn runc_figures_land_in_containerds_fields() {
        let s = serde_json::json!({
            "cpu": {"usage": {"total": 5_000_000, "kernel": 1_000_000, "user": 4_000_000, "percpu": [2, 3]},
                    "throttling": {"periods": 7, "throttledPeriods": 2, "throttledTime": 9000}},
            "memory": {"usage": {"usage": 4096, "limit": 8192, "max": 5000, "failcnt": 1},
                       "raw": {"total_inactive_file": 100, "inactive_file": 100, "rss": 30, "anon": 40}},
            "pids": {"current": 3, "limit": 10}
        });
        let m = to_v1(&s);
        assert_eq!(m.cpu.usage.total, 5_000_000);
        assert_eq!(m.cpu.usage.per_cpu, vec![2, 3]);
        assert_eq!(m.cpu.throttling.throttled_periods, 2);
        assert_eq!(m.memory.usage.usage, 4096);
        assert_eq!(m.memory.usage.limit, 8192);
        assert_eq!(m.memory.total_inactive_file, 100);
        assert_eq!(m.pids.current, 3);
        let m = to_v2(&s);
        assert_eq!(m.cpu.usage_usec, 5000);
        assert_eq!(m.cpu.throttled_usec, 9);
        assert_eq!(m.memory.usage, 4096);
        assert_eq!(m.memory.usage_limit, 8192);
        assert_eq!(m.memory.inactive_file, 100);
        assert_eq!(m.memory.anon, 40);
        let a = to_any(&s, true).unwrap();
        assert_eq!(a.type_url, "io.containerd.cgroups.v2.Metrics");
        assert_eq!(v2::Metrics::parse_from_bytes(&a.value).unwrap(), m);
    }
}
