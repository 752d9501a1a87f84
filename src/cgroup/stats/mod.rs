//! A cgroup's usage figures in the shape of runc's `events --stats` data (runc's
//! `libcontainer/cgroups/types.Stats` as its `events` command prints it).
//!
//! Read straight from the cgroup files rather than through cgroups-rs's readers: those
//! parse into their own structs, which drop what runc passes on as it is (the whole
//! `memory.stat` map, blkio's per-device lines) and read files runc does not.
//! Fields that runc marks `omitempty` are left out when zero, as in its output.
//!
//! A [`StatsReader`] keeps the files it read open, and reads them again from their start
//! (a cgroup file is made anew for each read from offset 0): what a shim keeps per
//! container, so that containerd's polling costs one read per file and no lookups. The
//! figures containerd's metrics carry are read first into a typed [`Usage`] (`usage`),
//! which a shim turns into containerd's messages itself; runc's data is built from it.

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use super::Group;

mod blkio;
mod usage;
use blkio::{v1_blkio, v2_io};
use usage::{pairs, read_whole, Kept};
pub use usage::{Memory, MemoryEntry, Pids, Throttling, Usage};

impl Group {
    /// cpu, memory, pids, blkio and hugetlb figures, as the `data` of a runc stats event.
    pub fn stats(&self) -> serde_json::Value {
        self.stats_reader().figures()
    }

    /// A reader of this cgroup's figures that keeps its files open between reads.
    pub fn stats_reader(&self) -> StatsReader {
        self.reader(true)
    }

    /// A reader of the figures containerd's metrics carry (cpu, memory, pids), which
    /// keeps their files open between reads: no cpuset, blkio or hugetlb files.
    pub fn metrics_reader(&self) -> StatsReader {
        self.reader(false)
    }

    fn reader(&self, all: bool) -> StatsReader {
        let dirs = if self.v2 {
            match self.dirs.first() {
                Some(d) => Dirs::V2(d.clone()),
                None => Dirs::V1(V1Dirs::default()),
            }
        } else {
            Dirs::V1(self.v1_dirs())
        };
        StatsReader {
            dirs,
            sizes: if all {
                hugepage_sizes(Path::new("/sys/kernel/mm/hugepages"))
            } else {
                Vec::new()
            },
            all,
            files: Files::default(),
        }
    }

    fn v1_dirs(&self) -> V1Dirs {
        use cgroups_rs::fs::{Controller, Subsystem as S};
        let mut d = V1Dirs::default();
        for s in self.cg.subsystems() {
            let slot = match s {
                S::Cpu(c) => (&mut d.cpu, c.path()),
                S::CpuAcct(c) => (&mut d.cpuacct, c.path()),
                S::CpuSet(c) => (&mut d.cpuset, c.path()),
                S::Mem(c) => (&mut d.memory, c.path()),
                S::Pid(c) => (&mut d.pids, c.path()),
                S::BlkIo(c) => (&mut d.blkio, c.path()),
                S::HugeTlb(c) => (&mut d.hugetlb, c.path()),
                _ => continue,
            };
            *slot.0 = Some(slot.1.to_path_buf());
        }
        d
    }
}

/// A cgroup's figures, read as often as asked through the same open files.
pub struct StatsReader {
    dirs: Dirs,
    /// The machine's huge page sizes, listed once.
    sizes: Vec<String>,
    /// Every figure, else only those of containerd's metrics.
    all: bool,
    files: Files,
}

enum Dirs {
    V2(PathBuf),
    V1(V1Dirs),
}

impl StatsReader {
    /// A reader of the files of one directory, as a v2 cgroup's or as every v1
    /// hierarchy's (a fixture's: made-up files in a scratch directory); `all` as
    /// [`Group::stats_reader`]'s, else [`Group::metrics_reader`]'s.
    pub fn in_one_dir(dir: &Path, v2: bool, all: bool) -> StatsReader {
        let dirs = if v2 {
            Dirs::V2(dir.to_path_buf())
        } else {
            let d = Some(dir.to_path_buf());
            Dirs::V1(V1Dirs {
                cpu: d.clone(),
                cpuacct: d.clone(),
                cpuset: d.clone(),
                memory: d.clone(),
                pids: d.clone(),
                blkio: d.clone(),
                hugetlb: d,
            })
        };
        StatsReader {
            dirs,
            sizes: Vec::new(),
            all,
            files: Files::default(),
        }
    }

    /// runc's stats data now, or None once the cgroup is removed.
    pub fn read(&self) -> Option<Value> {
        let v = self.figures();
        (!self.files.gone.load(Ordering::Relaxed)).then_some(v)
    }

    /// `with` given the cpu, memory and pids figures now, or None once the cgroup is
    /// removed. The figures are read into buffers the reader keeps: nothing is allocated
    /// once the first read has sized them.
    pub fn with_usage<R>(&self, with: impl FnOnce(&Usage) -> R) -> Option<R> {
        let r = self.files.usage(&self.dirs, with);
        (!self.files.gone.load(Ordering::Relaxed)).then_some(r)
    }

    fn figures(&self) -> Value {
        match &self.dirs {
            Dirs::V2(d) => v2_stats(&self.files, d, &self.sizes, self.all),
            Dirs::V1(d) => v1_stats(&self.files, d, &self.sizes, self.all),
        }
    }
}

/// The cgroup files read so far, open (or remembered as absent: a file the kernel does not
/// make for this cgroup is not looked up again): the metrics' files in `kept`, by their
/// place in a read, any other by its path.
#[derive(Default)]
struct Files {
    kept: Mutex<Kept>,
    open: Mutex<HashMap<PathBuf, Option<File>>>,
    /// A read found the cgroup removed.
    gone: AtomicBool,
}

impl Files {
    /// `with` given the metrics' figures, read now.
    fn usage<R>(&self, dirs: &Dirs, with: impl FnOnce(&Usage) -> R) -> R {
        match dirs {
            Dirs::V2(d) => self.usage_v2(d, with),
            Dirs::V1(d) => self.usage_v1(d, with),
        }
    }

    fn usage_v1<R>(&self, d: &V1Dirs, with: impl FnOnce(&Usage) -> R) -> R {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        with(kept.read_v1(d, &self.gone))
    }

    fn usage_v2<R>(&self, dir: &Path, with: impl FnOnce(&Usage) -> R) -> R {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        with(kept.read_v2(dir, &self.gone))
    }

    /// The whole file, read from its start.
    fn read(&self, dir: &Path, name: &str) -> Option<String> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let f = open
            .entry(dir.join(name))
            .or_insert_with_key(|p| File::open(p).ok())
            .as_ref()?;
        let mut buf = Vec::new();
        if !read_whole(f, &mut buf, &self.gone) {
            return None;
        }
        String::from_utf8(buf).ok()
    }

    fn exists(&self, dir: &Path, name: &str) -> bool {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.entry(dir.join(name))
            .or_insert_with_key(|p| File::open(p).ok())
            .is_some()
    }
}

/// The directory of each v1 hierarchy that has figures.
#[derive(Default)]
struct V1Dirs {
    cpu: Option<PathBuf>,
    cpuacct: Option<PathBuf>,
    cpuset: Option<PathBuf>,
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
    blkio: Option<PathBuf>,
    hugetlb: Option<PathBuf>,
}

/// `all` false leaves out what containerd's metrics do not carry: the per-CPU kernel and
/// user split, cpuset, blkio (and hugetlb, by `sizes` empty).
fn v1_stats(f: &Files, d: &V1Dirs, sizes: &[String], all: bool) -> Value {
    let mut data = f.usage_v1(d, |u| usage_data(u, "cache"));
    if let (Some(dir), true) = (&d.cpuacct, all) {
        let (kernel, user) = usage_all(f, dir);
        let usage = data["cpu"]["usage"].as_object_mut().expect("an object");
        put_list(usage, "percpu_kernel", &kernel);
        put_list(usage, "percpu_user", &user);
    }
    let hugetlb: Map<String, Value> = match &d.hugetlb {
        Some(dir) => sizes
            .iter()
            .map(|s| {
                let n = |what: &str| uint(f, dir, &format!("hugetlb.{s}.{what}"));
                let e = hugetlb_entry(n("usage_in_bytes"), n("max_usage_in_bytes"), n("failcnt"));
                (s.clone(), e)
            })
            .collect(),
        None => Map::new(),
    };
    data["cpuset"] = cpuset(f, d.cpuset.as_deref().filter(|_| all));
    data["blkio"] = d
        .blkio
        .as_deref()
        .filter(|_| all)
        .map(|d| v1_blkio(f, d))
        .unwrap_or_default();
    data["hugetlb"] = Value::Object(hugetlb);
    data
}

/// `all` as [`v1_stats`]'s: no `io.stat` without it.
fn v2_stats(f: &Files, dir: &Path, sizes: &[String], all: bool) -> Value {
    let mut data = f.usage_v2(dir, |u| usage_data(u, "file"));
    let hugetlb: Map<String, Value> = sizes
        .iter()
        .filter(|s| f.exists(dir, &format!("hugetlb.{s}.current")))
        .map(|s| {
            let usage = uint(f, dir, &format!("hugetlb.{s}.current"));
            let failcnt = get(&keyed(f, dir, &format!("hugetlb.{s}.events")), "max");
            (s.clone(), hugetlb_entry(usage, 0, failcnt))
        })
        .collect();
    data["cpuset"] = cpuset(f, None);
    data["blkio"] = if all {
        v2_io(f, dir)
    } else {
        Value::Object(Map::new())
    };
    data["hugetlb"] = Value::Object(hugetlb);
    data
}

/// runc's stats data of the cpu, memory and pids figures, with the other keys in place
/// (empty); `cache` is the `memory.stat` key runc reports as the cache (v1's `cache`,
/// v2's `file`).
fn usage_data(u: &Usage, cache: &str) -> Value {
    let mut usage = Map::new();
    put(&mut usage, "total", u.cpu_total);
    put_list(&mut usage, "percpu", &u.per_cpu);
    usage.insert("kernel".into(), u.cpu_kernel.into());
    usage.insert("user".into(), u.cpu_user.into());
    let throttling = u.throttling.map(|t| {
        let mut m = Map::new();
        put(&mut m, "periods", t.periods);
        put(&mut m, "throttledPeriods", t.throttled_periods);
        put(&mut m, "throttledTime", t.throttled_time);
        Value::Object(m)
    });
    let memory = match &u.memory {
        Some(mem) => {
            let mut m = Map::new();
            put(&mut m, "cache", u.memory_stat_value(cache));
            for (key, e) in [
                ("usage", &mem.usage),
                ("swap", &mem.swap_with_memory()),
                ("kernel", &mem.kernel),
                ("kernelTCP", &mem.kernel_tcp),
            ] {
                m.insert(key.into(), memory_entry(e.limit, e.usage, e.max, e.failcnt));
            }
            let raw: Map<String, Value> = u
                .memory_stat()
                .map(|(k, v)| (k.to_string(), v.into()))
                .collect();
            if !raw.is_empty() {
                m.insert("raw".into(), Value::Object(raw));
            }
            Value::Object(m)
        }
        None => empty_memory(),
    };
    let pids = u.pids.map(|p| {
        let mut m = Map::new();
        put(&mut m, "current", p.current);
        put(&mut m, "limit", p.limit());
        Value::Object(m)
    });
    json!({
        "cpu": { "usage": usage, "throttling": throttling },
        "cpuset": {},
        "memory": memory,
        "pids": pids,
        "blkio": {},
        "hugetlb": {},
        "intel_rdt": {},
        "network_interfaces": null,
    })
}

fn memory_entry(limit: u64, usage: u64, max: u64, failcnt: u64) -> Value {
    let mut m = Map::new();
    m.insert("limit".into(), limit.into());
    put(&mut m, "usage", usage);
    put(&mut m, "max", max);
    m.insert("failcnt".into(), failcnt.into());
    Value::Object(m)
}

fn empty_memory() -> Value {
    let e = memory_entry(0, 0, 0, 0);
    json!({ "usage": e, "swap": e, "kernel": e, "kernelTCP": e })
}

fn hugetlb_entry(usage: u64, max: u64, failcnt: u64) -> Value {
    let mut m = Map::new();
    put(&mut m, "usage", usage);
    put(&mut m, "max", max);
    m.insert("failcnt".into(), failcnt.into());
    Value::Object(m)
}

/// The v1 cpuset's settings, as runc reports them (zeros without a v1 cpuset: on v2
/// runc 1.1 reports none).
fn cpuset(f: &Files, dir: Option<&Path>) -> Value {
    let mut m = Map::new();
    let text = |name: &str| dir.and_then(|d| f.read(d, &format!("cpuset.{name}")));
    for key in ["cpus", "mems"] {
        put_list(&mut m, key, &id_list(&text(key).unwrap_or_default()));
    }
    for key in [
        "cpu_exclusive",
        "mem_hardwall",
        "mem_exclusive",
        "memory_migrate",
        "memory_spread_page",
        "memory_spread_slab",
        "memory_pressure",
        "sched_load_balance",
    ] {
        let v: u64 = text(key).and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        m.insert(key.into(), v.into());
    }
    let level: i64 = text("sched_relax_domain_level")
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    m.insert("sched_relax_domain_level".into(), level.into());
    Value::Object(m)
}

/// A kernel list such as `0-3,8` as the numbers it names.
fn id_list(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<u64>(), b.parse::<u64>()) {
            out.extend(a..=b);
        }
    }
    out
}

/// `cpuacct.usage_all` (`cpu user system` per CPU): the (kernel, user) columns.
fn usage_all(f: &Files, dir: &Path) -> (Vec<u64>, Vec<u64>) {
    let (mut kernel, mut user) = (Vec::new(), Vec::new());
    for line in f
        .read(dir, "cpuacct.usage_all")
        .unwrap_or_default()
        .lines()
        .skip(1)
    {
        let f: Vec<u64> = line
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if let [_, u, k] = f[..] {
            user.push(u);
            kernel.push(k);
        }
    }
    (kernel, user)
}

/// The huge page sizes of the machine as cgroup files name them (`2MB`, `1GB`), from
/// `/sys/kernel/mm/hugepages/hugepages-<n>kB`.
fn hugepage_sizes(dir: &Path) -> Vec<String> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut kbs: Vec<u64> = rd
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            n.strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()
        })
        .collect();
    kbs.sort_unstable();
    kbs.into_iter().map(page_size_name).collect()
}

fn page_size_name(kb: u64) -> String {
    let units = ["KB", "MB", "GB", "TB", "PB"];
    let (mut n, mut u) = (kb, 0);
    while n >= 1024 && n % 1024 == 0 && u + 1 < units.len() {
        n /= 1024;
        u += 1;
    }
    format!("{n}{}", units[u])
}

/// A one-number file; `max` is no limit (u64::MAX), a negative number or none: 0.
fn uint(f: &Files, dir: &Path, file: &str) -> u64 {
    let Some(t) = f.read(dir, file) else {
        return 0;
    };
    let t = t.trim();
    if t == "max" {
        return u64::MAX;
    }
    t.parse().unwrap_or(0)
}

/// A flat keyed file (`key value` lines), in its order.
fn keyed(f: &Files, dir: &Path, file: &str) -> Vec<(String, u64)> {
    let text = f.read(dir, file).unwrap_or_default();
    pairs(text.as_bytes())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn get(kv: &[(String, u64)], key: &str) -> u64 {
    kv.iter().find(|(k, _)| k == key).map_or(0, |(_, v)| *v)
}

/// Insert unless zero (Go's `omitempty`).
fn put(m: &mut Map<String, Value>, key: &str, v: u64) {
    if v != 0 {
        m.insert(key.into(), v.into());
    }
}

fn put_list(m: &mut Map<String, Value>, key: &str, v: &[u64]) {
    if !v.is_empty() {
        m.insert(key.into(), v.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use usage::clock_ticks;

    /// A scratch cgroup directory of made-up files, removed when the test ends.
    struct Fake(PathBuf);

    impl Fake {
        fn new(files: &[(&str, &str)]) -> Fake {
            let d =
                std::env::temp_dir().join(format!("podinit-stats-{}", crate::util::random_hex(4)));
            fs::create_dir_all(&d).unwrap();
            for (f, t) in files {
                fs::write(d.join(f), t).unwrap();
            }
            Fake(d)
        }
    }

    impl Fake {
        /// Every v1 hierarchy in the one scratch directory.
        fn v1_dirs(&self) -> V1Dirs {
            let d = || Some(self.0.clone());
            V1Dirs {
                cpu: d(),
                cpuacct: d(),
                cpuset: d(),
                memory: d(),
                pids: d(),
                blkio: d(),
                hugetlb: d(),
            }
        }
    }

    /// The cpu, cpuacct and memory files both v1 readers are tried on.
    const V1_CPU_AND_MEMORY: [(&str, &str); 7] = [
        ("cpuacct.stat", "user 3\nsystem 1\n"),
        ("cpuacct.usage", "500\n"),
        ("cpuacct.usage_percpu", "300 200 \n"),
        ("cpuacct.usage_all", "cpu user system\n0 100 200\n1 0 200\n"),
        (
            "cpu.stat",
            "nr_periods 4\nnr_throttled 0\nthrottled_time 0\n",
        ),
        ("memory.stat", "cache 4096\nrss 8192\n"),
        ("memory.usage_in_bytes", "12288\n"),
    ];

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn v1_figures_in_runc_s_shape() {
        let f = Fake::new(
            &[
                &V1_CPU_AND_MEMORY[..],
                &[
                    ("memory.max_usage_in_bytes", "20480\n"),
                    ("memory.failcnt", "0\n"),
                    ("memory.limit_in_bytes", "9223372036854771712\n"),
                    ("pids.current", "2\n"),
                    ("pids.max", "max\n"),
                    ("cpuset.cpus", "0-2,5\n"),
                    ("cpuset.mems", "0\n"),
                    ("cpuset.sched_relax_domain_level", "-1\n"),
                    ("blkio.sectors_recursive", ""),
                    (
                        "blkio.throttle.io_serviced_recursive",
                        "8:0 Read 3\n8:0 Write 0\nTotal 3\n",
                    ),
                    (
                        "blkio.throttle.io_service_bytes_recursive",
                        "8:0 Read 4096\nTotal 4096\n",
                    ),
                    ("hugetlb.2MB.usage_in_bytes", "0\n"),
                    ("hugetlb.2MB.failcnt", "1\n"),
                ],
            ]
            .concat(),
        );
        let dirs = f.v1_dirs();
        let s = v1_stats(&Files::default(), &dirs, &["2MB".to_string()], true);
        let tck = clock_ticks();
        assert_eq!(
            s["cpu"],
            json!({
                "usage": {
                    "total": 500, "percpu": [300, 200], "percpu_kernel": [200, 200],
                    "percpu_user": [100, 0], "kernel": 1_000_000_000 / tck,
                    "user": 3_000_000_000u64 / tck,
                },
                "throttling": { "periods": 4 },
            })
        );
        let nolimit = 9_223_372_036_854_771_712u64;
        let zero = json!({ "limit": 0, "failcnt": 0 });
        assert_eq!(
            s["memory"],
            json!({
                "cache": 4096,
                "usage": { "limit": nolimit, "usage": 12288, "max": 20480, "failcnt": 0 },
                "swap": zero, "kernel": zero, "kernelTCP": zero,
                "raw": { "cache": 4096, "rss": 8192 },
            })
        );
        assert_eq!(
            s["pids"],
            json!({ "current": 2 }),
            "pids.max \"max\": no limit"
        );
        assert_eq!(s["cpuset"]["cpus"], json!([0, 1, 2, 5]));
        assert_eq!(s["cpuset"]["sched_relax_domain_level"], json!(-1));
        assert_eq!(s["cpuset"]["cpu_exclusive"], json!(0));
        // cfq's first file is empty: the throttle layer's files are read instead.
        assert_eq!(
            s["blkio"],
            json!({
                "ioServicedRecursive": [
                    { "major": 8, "op": "Read", "value": 3 }, { "major": 8, "op": "Write" },
                ],
                "ioServiceBytesRecursive": [{ "major": 8, "op": "Read", "value": 4096 }],
            })
        );
        assert_eq!(s["hugetlb"], json!({ "2MB": { "failcnt": 1 } }));
        assert_eq!(s["intel_rdt"], json!({}));
        assert!(s["network_interfaces"].is_null());
    }

    /// What containerd's metrics are made of is the same in both readers; the figures
    /// read again through the kept files follow the files.
    #[test]
    fn the_metrics_reader_reads_the_metrics_figures_alone_and_again() {
        let f = Fake::new(
            &[
                &V1_CPU_AND_MEMORY[..],
                &[
                    ("pids.current", "2\n"),
                    ("pids.max", "9\n"),
                    ("cpuset.cpus", "0-2,5\n"),
                    (
                        "blkio.throttle.io_serviced_recursive",
                        "8:0 Read 3\nTotal 3\n",
                    ),
                    (
                        "blkio.throttle.io_service_bytes_recursive",
                        "8:0 Read 4096\nTotal 4096\n",
                    ),
                ],
            ]
            .concat(),
        );
        let dirs = || f.v1_dirs();
        let mut full = v1_stats(&Files::default(), &dirs(), &[], true);
        let kept = Files::default();
        let metrics = v1_stats(&kept, &dirs(), &[], false);
        for key in ["cpuset", "blkio"] {
            full[key] = metrics[key].clone();
        }
        for key in ["percpu_kernel", "percpu_user"] {
            full["cpu"]["usage"].as_object_mut().unwrap().remove(key);
        }
        assert_eq!(full, metrics);
        let read: Vec<_> = kept.open.lock().unwrap().keys().cloned().collect();
        assert!(
            read.iter().all(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                !n.starts_with("cpuset.") && !n.starts_with("blkio.") && n != "cpuacct.usage_all"
            }),
            "{read:?}"
        );
        fs::write(f.0.join("pids.current"), "5\n").unwrap();
        let again = v1_stats(&kept, &dirs(), &[], false);
        assert_eq!(again["pids"], json!({ "current": 5, "limit": 9 }));
    }

    #[test]
    fn v2_figures_in_runc_s_v1_shape() {
        let f = Fake::new(&[
            (
                "cpu.stat",
                "usage_usec 7\nuser_usec 5\nsystem_usec 2\nnr_periods 3\n\
                 nr_throttled 1\nthrottled_usec 9\n",
            ),
            ("memory.stat", "anon 8192\nfile 4096\n"),
            ("memory.current", "12288\n"),
            ("memory.max", "1048576\n"),
            ("memory.swap.current", "100\n"),
            ("memory.swap.max", "max\n"),
            ("pids.current", "1\n"),
            ("pids.max", "50\n"),
            (
                "io.stat",
                "8:16 rbytes=512 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
            ),
            ("hugetlb.2MB.current", "0\n"),
            ("hugetlb.2MB.events", "max 2\n"),
        ]);
        let s = v2_stats(
            &Files::default(),
            &f.0,
            &["2MB".to_string(), "1GB".to_string()],
            true,
        );
        assert_eq!(
            s["cpu"],
            json!({
                "usage": { "total": 7000, "kernel": 2000, "user": 5000 },
                "throttling": { "periods": 3, "throttledPeriods": 1, "throttledTime": 9000 },
            })
        );
        let zero = json!({ "limit": 0, "failcnt": 0 });
        assert_eq!(
            s["memory"],
            json!({
                "cache": 4096,
                "usage": { "limit": 1_048_576, "usage": 12288, "failcnt": 0 },
                "swap": { "limit": u64::MAX, "usage": 12388, "failcnt": 0 },
                "kernel": zero, "kernelTCP": zero,
                "raw": { "anon": 8192, "file": 4096 },
            })
        );
        assert_eq!(s["pids"], json!({ "current": 1, "limit": 50 }));
        assert_eq!(
            s["blkio"],
            json!({
                "ioServiceBytesRecursive": [
                    { "major": 8, "minor": 16, "op": "Read", "value": 512 },
                    { "major": 8, "minor": 16, "op": "Write" },
                ],
                "ioServicedRecursive": [
                    { "major": 8, "minor": 16, "op": "Read", "value": 1 },
                    { "major": 8, "minor": 16, "op": "Write" },
                ],
            })
        );
        assert_eq!(
            s["hugetlb"],
            json!({ "2MB": { "failcnt": 2 } }),
            "no 1GB files"
        );
        assert_eq!(s["cpuset"]["sched_relax_domain_level"], json!(0));
        assert!(s["cpuset"].get("cpus").is_none());
    }

    #[test]
    fn a_v2_swap_limit_adds_the_memory_limit_as_runc() {
        let f = Fake::new(&[
            ("memory.current", "10\n"),
            ("memory.max", "100\n"),
            ("memory.swap.current", "1\n"),
            ("memory.swap.max", "50\n"),
        ]);
        let s = v2_stats(&Files::default(), &f.0, &[], true);
        assert_eq!(
            s["memory"]["swap"],
            json!({ "limit": 150, "usage": 11, "failcnt": 0 })
        );
        assert!(s["memory"].get("raw").is_none());
    }

    #[test]
    fn page_sizes_and_id_lists() {
        assert_eq!(page_size_name(2048), "2MB");
        assert_eq!(page_size_name(1 << 20), "1GB");
        assert_eq!(page_size_name(64), "64KB");
        assert_eq!(id_list("0-1,4\n"), [0, 1, 4]);
        assert!(id_list("\n").is_empty());
    }
}
