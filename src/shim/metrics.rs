//! A container's cgroup figures in containerd's metric types (`io.containerd.cgroups.v1`
//! and `.v2` Metrics), which the CRI reads for ContainerStats: the figures
//! `podinit runc events --stats` prints, put straight from the cgroup layer's typed
//! [`Usage`] into containerd's fields, as containerd's runc shim fills them from the
//! cgroup files (containerd/cgroups' `Stat`). containerd asks once a second per
//! container: no JSON in between. One difference from runc's data: v2's swap is swap
//! alone, as the kernel and containerd give it, where runc adds memory to it.

use containerd_shim::protos::cgroups::metrics as v1;
use containerd_shim::protos::cgroups_v2::metrics as v2;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::protobuf::MessageField;
use podinit::cgroup::{MemoryEntry, Usage};

use super::error::{Error, Result};

fn any(type_url: &str, m: &dyn containerd_shim::protos::protobuf::MessageDyn) -> Result<Any> {
    super::pack::any(type_url, m).map_err(|e| Error::Other(format!("encoding metrics: {e}")))
}

/// The figures as containerd's metrics; `v2` whether of a cgroup v2 one.
pub fn to_any(u: &Usage, v2: bool) -> Result<Any> {
    if v2 {
        any("io.containerd.cgroups.v2.Metrics", &to_v2(u))
    } else {
        any("io.containerd.cgroups.v1.Metrics", &to_v1(u))
    }
}

fn v1_entry(e: &MemoryEntry) -> MessageField<v1::MemoryEntry> {
    MessageField::some(v1::MemoryEntry {
        limit: e.limit,
        usage: e.usage,
        max: e.max,
        failcnt: e.failcnt,
        ..Default::default()
    })
}

pub fn to_v1(u: &Usage) -> v1::Metrics {
    let pids = u.pids.unwrap_or_default();
    let t = u.throttling.unwrap_or_default();
    let mem = u.memory.unwrap_or_default();
    let mut m = v1::MemoryStat {
        usage: v1_entry(&mem.usage),
        swap: v1_entry(&mem.swap),
        kernel: v1_entry(&mem.kernel),
        kernel_tcp: v1_entry(&mem.kernel_tcp),
        ..Default::default()
    };
    for (k, v) in u.memory_stat() {
        let field = match k {
            "cache" => &mut m.cache,
            "rss" => &mut m.rss,
            "rss_huge" => &mut m.rss_huge,
            "mapped_file" => &mut m.mapped_file,
            "dirty" => &mut m.dirty,
            "writeback" => &mut m.writeback,
            "pgpgin" => &mut m.pg_pg_in,
            "pgpgout" => &mut m.pg_pg_out,
            "pgfault" => &mut m.pg_fault,
            "pgmajfault" => &mut m.pg_maj_fault,
            "inactive_anon" => &mut m.inactive_anon,
            "active_anon" => &mut m.active_anon,
            "inactive_file" => &mut m.inactive_file,
            "active_file" => &mut m.active_file,
            "unevictable" => &mut m.unevictable,
            "hierarchical_memory_limit" => &mut m.hierarchical_memory_limit,
            "hierarchical_memsw_limit" => &mut m.hierarchical_swap_limit,
            "total_cache" => &mut m.total_cache,
            "total_rss" => &mut m.total_rss,
            "total_rss_huge" => &mut m.total_rss_huge,
            "total_mapped_file" => &mut m.total_mapped_file,
            "total_dirty" => &mut m.total_dirty,
            "total_writeback" => &mut m.total_writeback,
            "total_pgpgin" => &mut m.total_pg_pg_in,
            "total_pgpgout" => &mut m.total_pg_pg_out,
            "total_pgfault" => &mut m.total_pg_fault,
            "total_pgmajfault" => &mut m.total_pg_maj_fault,
            "total_inactive_anon" => &mut m.total_inactive_anon,
            "total_active_anon" => &mut m.total_active_anon,
            "total_inactive_file" => &mut m.total_inactive_file,
            "total_active_file" => &mut m.total_active_file,
            "total_unevictable" => &mut m.total_unevictable,
            _ => continue,
        };
        *field = v;
    }
    v1::Metrics {
        pids: MessageField::some(v1::PidsStat {
            current: pids.current,
            limit: pids.limit(),
            ..Default::default()
        }),
        cpu: MessageField::some(v1::CPUStat {
            usage: MessageField::some(v1::CPUUsage {
                total: u.cpu_total,
                kernel: u.cpu_kernel,
                user: u.cpu_user,
                per_cpu: u.per_cpu.clone(),
                ..Default::default()
            }),
            throttling: MessageField::some(v1::Throttle {
                periods: t.periods,
                throttled_periods: t.throttled_periods,
                throttled_time: t.throttled_time,
                ..Default::default()
            }),
            ..Default::default()
        }),
        memory: MessageField::some(m),
        ..Default::default()
    }
}

pub fn to_v2(u: &Usage) -> v2::Metrics {
    let pids = u.pids.unwrap_or_default();
    let t = u.throttling.unwrap_or_default();
    let mem = u.memory.unwrap_or_default();
    let mut m = v2::MemoryStat {
        usage: mem.usage.usage,
        usage_limit: mem.usage.limit,
        max_usage: mem.peak,
        swap_usage: mem.swap.usage,
        swap_limit: mem.swap.limit,
        swap_max_usage: mem.swap_peak,
        ..Default::default()
    };
    for (k, v) in u.memory_stat() {
        let field = match k {
            "anon" => &mut m.anon,
            "file" => &mut m.file,
            "kernel_stack" => &mut m.kernel_stack,
            "slab" => &mut m.slab,
            "sock" => &mut m.sock,
            "shmem" => &mut m.shmem,
            "file_mapped" => &mut m.file_mapped,
            "file_dirty" => &mut m.file_dirty,
            "file_writeback" => &mut m.file_writeback,
            "anon_thp" => &mut m.anon_thp,
            "inactive_anon" => &mut m.inactive_anon,
            "active_anon" => &mut m.active_anon,
            "inactive_file" => &mut m.inactive_file,
            "active_file" => &mut m.active_file,
            "unevictable" => &mut m.unevictable,
            "slab_reclaimable" => &mut m.slab_reclaimable,
            "slab_unreclaimable" => &mut m.slab_unreclaimable,
            "pgfault" => &mut m.pgfault,
            "pgmajfault" => &mut m.pgmajfault,
            "workingset_refault" => &mut m.workingset_refault,
            "workingset_activate" => &mut m.workingset_activate,
            "workingset_nodereclaim" => &mut m.workingset_nodereclaim,
            "pgrefill" => &mut m.pgrefill,
            "pgscan" => &mut m.pgscan,
            "pgsteal" => &mut m.pgsteal,
            "pgactivate" => &mut m.pgactivate,
            "pgdeactivate" => &mut m.pgdeactivate,
            "pglazyfree" => &mut m.pglazyfree,
            "pglazyfreed" => &mut m.pglazyfreed,
            "thp_fault_alloc" => &mut m.thp_fault_alloc,
            "thp_collapse_alloc" => &mut m.thp_collapse_alloc,
            _ => continue,
        };
        *field = v;
    }
    v2::Metrics {
        pids: MessageField::some(v2::PidsStat {
            current: pids.current,
            limit: pids.max,
            ..Default::default()
        }),
        cpu: MessageField::some(v2::CPUStat {
            usage_usec: u.cpu_total / 1000,
            user_usec: u.cpu_user / 1000,
            system_usec: u.cpu_kernel / 1000,
            nr_periods: t.periods,
            nr_throttled: t.throttled_periods,
            throttled_usec: t.throttled_time / 1000,
            ..Default::default()
        }),
        memory: MessageField::some(m),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::protos::protobuf::Message;
    use podinit::cgroup::StatsReader;
    use std::path::PathBuf;

    /// runc's `events --stats` data read into containerd's Metrics: the reference the
    /// direct path is held to. containerd's runc shim reads the same files itself, and on
    /// v2 takes the swap figures as the kernel gives them, where runc's add memory's.
    mod runc_json {
        use super::{v1, v2, MessageField};
        use serde_json::Value;

        fn n(v: &Value, path: &[&str]) -> u64 {
            path.iter()
                .try_fold(v, |v, k| v.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        }

        pub(super) fn to_v1(s: &Value) -> v1::Metrics {
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

        pub(super) fn to_v2(s: &Value) -> v2::Metrics {
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
                    swap_usage: n(s, &["memory", "swap", "usage"])
                        .saturating_sub(n(s, &["memory", "usage", "usage"])),
                    swap_limit: match n(s, &["memory", "swap", "limit"]) {
                        u64::MAX => u64::MAX,
                        l => l.saturating_sub(n(s, &["memory", "usage", "limit"])),
                    },
                    swap_max_usage: n(s, &["memory", "swap", "max"]),
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
    }

    #[test]
    fn runc_figures_land_in_containerds_fields() {
        let s = serde_json::json!({
            "cpu": {"usage": {"total": 5_000_000, "kernel": 1_000_000, "user": 4_000_000, "percpu": [2, 3]},
                    "throttling": {"periods": 7, "throttledPeriods": 2, "throttledTime": 9000}},
            "memory": {"usage": {"usage": 4096, "limit": 8192, "max": 5000, "failcnt": 1},
                       "raw": {"total_inactive_file": 100, "inactive_file": 100, "rss": 30, "anon": 40}},
            "pids": {"current": 3, "limit": 10}
        });
        let m = runc_json::to_v1(&s);
        assert_eq!(m.cpu.usage.total, 5_000_000);
        assert_eq!(m.cpu.usage.per_cpu, vec![2, 3]);
        assert_eq!(m.cpu.throttling.throttled_periods, 2);
        assert_eq!(m.memory.usage.usage, 4096);
        assert_eq!(m.memory.usage.limit, 8192);
        assert_eq!(m.memory.total_inactive_file, 100);
        assert_eq!(m.pids.current, 3);
        let m = runc_json::to_v2(&s);
        assert_eq!(m.cpu.usage_usec, 5000);
        assert_eq!(m.cpu.throttled_usec, 9);
        assert_eq!(m.memory.usage, 4096);
        assert_eq!(m.memory.usage_limit, 8192);
        assert_eq!(m.memory.inactive_file, 100);
        assert_eq!(m.memory.anon, 40);
    }

    /// A scratch directory of cgroup files, removed when the test ends.
    struct Fixture(PathBuf);

    impl Fixture {
        fn new(files: &[(&str, &str)]) -> Fixture {
            let d = std::env::temp_dir().join(format!(
                "podinit-metrics-{}-{}",
                std::process::id(),
                podinit::util::random_hex(4)
            ));
            std::fs::create_dir_all(&d).unwrap();
            for (f, t) in files {
                std::fs::write(d.join(f), t).unwrap();
            }
            Fixture(d)
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The Metrics made straight from the kept files and those made from runc's data of
    /// the same files agree field for field and byte for byte, read once and again.
    fn agree(dir: &std::path::Path, v2: bool) -> Any {
        let reference = StatsReader::in_one_dir(dir, v2, true).read().unwrap();
        let direct = StatsReader::in_one_dir(dir, v2, false);
        let (want, got) = if v2 {
            let mut want = runc_json::to_v2(&reference);
            containerd_only_v2(&mut want, dir);
            let got = direct.with_usage(to_v2).unwrap();
            assert_eq!(got, want);
            (
                want.write_to_bytes().unwrap(),
                got.write_to_bytes().unwrap(),
            )
        } else {
            let want = runc_json::to_v1(&reference);
            let got = direct.with_usage(to_v1).unwrap();
            assert_eq!(got, want);
            (
                want.write_to_bytes().unwrap(),
                got.write_to_bytes().unwrap(),
            )
        };
        assert_eq!(got, want);
        let a = direct.with_usage(|u| to_any(u, v2)).unwrap().unwrap();
        assert_eq!(a.value, want, "read again through the kept files");
        a
    }

    /// What containerd's v2 metrics carry that runc's data has not (containerd/cgroups
    /// v3, cgroup2 `Stat`, each file through `getStatFileContentUint64`): `MaxUsage` and
    /// `SwapMaxUsage` from `memory.peak` and `memory.swap.peak`, and `pids.max` as it
    /// is, `max` being u64::MAX where runc gives 0.
    fn containerd_only_v2(m: &mut v2::Metrics, dir: &std::path::Path) {
        let n = |f: &str| match std::fs::read_to_string(dir.join(f)) {
            Ok(t) if t.trim() == "max" => u64::MAX,
            Ok(t) => t.trim().parse().unwrap_or(0),
            Err(_) => 0,
        };
        let mem = m.memory.mut_or_insert_default();
        mem.max_usage = n("memory.peak");
        mem.swap_max_usage = n("memory.swap.peak");
        m.pids.mut_or_insert_default().limit = n("pids.max");
    }

    /// memory.stat as a cgroup v1 memory controller writes it, every key.
    const V1_MEMORY_STAT: &str = "cache 1216512\nrss 552960\nrss_huge 0\nshmem 0\n\
        mapped_file 811008\ndirty 4096\nwriteback 0\nswap 0\npgpgin 1125\npgpgout 676\n\
        pgfault 1617\npgmajfault 11\ninactive_anon 548864\nactive_anon 8192\n\
        inactive_file 958464\nactive_file 258048\nunevictable 0\n\
        hierarchical_memory_limit 9223372036854771712\n\
        hierarchical_memsw_limit 9223372036854771712\ntotal_cache 1216512\n\
        total_rss 552960\ntotal_rss_huge 0\ntotal_shmem 0\ntotal_mapped_file 811008\n\
        total_dirty 4096\ntotal_writeback 0\ntotal_swap 0\ntotal_pgpgin 1125\n\
        total_pgpgout 676\ntotal_pgfault 1617\ntotal_pgmajfault 11\n\
        total_inactive_anon 548864\ntotal_active_anon 8192\ntotal_inactive_file 958464\n\
        total_active_file 258048\ntotal_unevictable 0\n";

    #[test]
    fn the_direct_metrics_are_runc_s_data_in_containerd_s_fields_v1() {
        let f = Fixture::new(&[
            ("cpuacct.stat", "user 31\nsystem 17\n"),
            ("cpuacct.usage", "512034567\n"),
            ("cpuacct.usage_percpu", "300034567 212000000 \n"),
            ("cpuacct.usage_all", "cpu user system\n0 100 200\n1 0 200\n"),
            (
                "cpu.stat",
                "nr_periods 40\nnr_throttled 3\nthrottled_time 123456\n",
            ),
            ("memory.stat", V1_MEMORY_STAT),
            ("memory.usage_in_bytes", "1769472\n"),
            ("memory.max_usage_in_bytes", "2314240\n"),
            ("memory.failcnt", "2\n"),
            ("memory.limit_in_bytes", "67108864\n"),
            ("memory.kmem.usage_in_bytes", "131072\n"),
            ("memory.kmem.max_usage_in_bytes", "262144\n"),
            ("memory.kmem.failcnt", "0\n"),
            ("memory.kmem.limit_in_bytes", "9223372036854771712\n"),
            ("memory.kmem.tcp.usage_in_bytes", "0\n"),
            ("memory.kmem.tcp.limit_in_bytes", "9223372036854771712\n"),
            ("pids.current", "3\n"),
            ("pids.max", "max\n"),
        ]);
        let a = agree(&f.0, false);
        assert_eq!(a.type_url, "io.containerd.cgroups.v1.Metrics");
        let m = v1::Metrics::parse_from_bytes(&a.value).unwrap();
        assert_eq!(m.cpu.usage.total, 512_034_567);
        assert_eq!(m.cpu.usage.per_cpu, [300_034_567, 212_000_000]);
        assert_eq!(m.cpu.throttling.throttled_time, 123_456);
        assert_eq!(m.memory.total_pg_maj_fault, 11);
        assert_eq!(m.memory.hierarchical_swap_limit, 9_223_372_036_854_771_712);
        assert_eq!(m.memory.usage.failcnt, 2);
        assert_eq!(m.memory.kernel.max, 262_144);
        assert_eq!((m.pids.current, m.pids.limit), (3, 0));
    }

    #[test]
    fn the_direct_metrics_are_runc_s_data_in_containerd_s_fields_v2() {
        let stat = "anon 548864\nfile 1216512\nkernel 368640\nkernel_stack 32768\n\
            pagetables 61440\nsec_pagetables 0\npercpu 720\nsock 4096\nvmalloc 0\n\
            shmem 0\nzswap 0\nzswapped 0\nfile_mapped 811008\nfile_dirty 4096\n\
            file_writeback 0\nswapcached 0\nanon_thp 0\nfile_thp 0\nshmem_thp 0\n\
            inactive_anon 548864\nactive_anon 8192\ninactive_file 958464\n\
            active_file 258048\nunevictable 0\nslab_reclaimable 181440\n\
            slab_unreclaimable 84296\nslab 265736\nworkingset_refault_anon 0\n\
            workingset_refault_file 0\nworkingset_activate_anon 0\n\
            workingset_activate_file 0\nworkingset_restore_anon 0\n\
            workingset_restore_file 0\nworkingset_nodereclaim 0\npgscan 0\npgsteal 0\n\
            pgscan_kswapd 0\npgrefill 0\npgactivate 12\npgdeactivate 0\npglazyfree 0\n\
            pglazyfreed 0\nthp_fault_alloc 0\nthp_collapse_alloc 0\npgfault 1617\n\
            pgmajfault 11\n";
        let f = Fixture::new(&[
            (
                "cpu.stat",
                "usage_usec 512034\nuser_usec 310000\nsystem_usec 202034\n\
                 core_sched.force_idle_usec 0\nnr_periods 40\nnr_throttled 3\n\
                 throttled_usec 1234\nnr_bursts 0\nburst_usec 0\n",
            ),
            ("memory.stat", stat),
            ("memory.current", "1769472\n"),
            ("memory.max", "67108864\n"),
            ("memory.swap.current", "4096\n"),
            ("memory.swap.max", "max\n"),
            ("memory.peak", "2314240\n"),
            ("memory.swap.peak", "8192\n"),
            ("pids.current", "3\n"),
            ("pids.max", "max\n"),
            (
                "io.stat",
                "8:16 rbytes=512 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
            ),
        ]);
        let a = agree(&f.0, true);
        assert_eq!(a.type_url, "io.containerd.cgroups.v2.Metrics");
        let m = v2::Metrics::parse_from_bytes(&a.value).unwrap();
        assert_eq!(m.cpu.usage_usec, 512_034);
        assert_eq!(m.cpu.throttled_usec, 1234);
        assert_eq!(m.memory.usage, 1_769_472);
        assert_eq!(m.memory.slab, 265_736);
        assert_eq!(m.memory.pgmajfault, 11);
        assert_eq!((m.memory.swap_usage, m.memory.swap_limit), (4096, u64::MAX));
        assert_eq!(
            (m.memory.max_usage, m.memory.swap_max_usage),
            (2_314_240, 8192),
            "the peaks, as containerd gives them"
        );
        assert_eq!(
            (m.pids.current, m.pids.limit),
            (3, u64::MAX),
            "no pids limit: u64::MAX, as containerd's v2 metrics give it"
        );
        let runc = StatsReader::in_one_dir(&f.0, true, true).read().unwrap();
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        assert_eq!(n(&runc["pids"]["limit"]), 0, "runc's events say 0");
        assert_eq!(
            n(&runc["memory"]["usage"]["max"]),
            0,
            "runc's v2 data has no peak"
        );
    }

    /// v2's swap figures are the kernel's, as containerd's runc shim reports them
    /// (containerd/cgroups v3.1.3, cgroup2/manager.go, `readMemoryStats`: `SwapUsage:
    /// getStatFileContentUint64(filepath.Join(cgroupPath, "memory.swap.current"))` and
    /// `SwapLimit` of `memory.swap.max`), not runc's, which add memory's (runc's `events
    /// --stats` keeps them so).
    #[test]
    fn v2_swap_is_swap_alone_as_containerd_reports_it() {
        let f = Fixture::new(&[
            ("memory.stat", "anon 8192\nfile 4096\n"),
            ("memory.current", "12288\n"),
            ("memory.max", "1048576\n"),
            ("memory.swap.current", "100\n"),
            ("memory.swap.max", "50000\n"),
        ]);
        let m = StatsReader::in_one_dir(&f.0, true, false)
            .with_usage(to_v2)
            .unwrap();
        assert_eq!(m.memory.usage, 12288);
        assert_eq!(m.memory.swap_usage, 100);
        assert_eq!(m.memory.swap_limit, 50000);
        let runc = StatsReader::in_one_dir(&f.0, true, true).read().unwrap();
        assert_eq!(runc["memory"]["swap"]["usage"], 12388);
        assert_eq!(runc["memory"]["swap"]["limit"], 1_098_576);
    }

    /// Without a memory or cpu controller (files absent), both paths give zeros alike.
    #[test]
    fn the_direct_metrics_agree_on_a_cgroup_without_files() {
        let f = Fixture::new(&[("pids.current", "1\n")]);
        agree(&f.0, false);
        agree(&f.0, true);
    }
}
