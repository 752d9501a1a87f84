//! The figures containerd's metrics carry (cpu, memory, pids), typed, read from the kept
//! cgroup files into buffers that are kept too: a shim answers containerd's Stats once a
//! second per container from these, with no lookup, no allocation and no JSON in
//! between. runc's `events --stats` data is built from the same figures (`super`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::V1Dirs;

/// A cgroup's cpu, memory and pids figures, in runc's units (nanoseconds of cpu) and as the
/// kernel gives them: v2's swap is swap alone ([`Memory::swap_with_memory`] is runc's).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// cpu time in nanoseconds: `total` 0 where there is no figure for it.
    pub cpu_total: u64,
    pub cpu_kernel: u64,
    pub cpu_user: u64,
    /// v1's `cpuacct.usage_percpu`; empty on v2.
    pub per_cpu: Vec<u64>,
    /// None without a cpu controller (v1).
    pub throttling: Option<Throttling>,
    /// None without a memory controller.
    pub memory: Option<Memory>,
    /// None without a pids controller (v1).
    pub pids: Option<Pids>,
    /// `memory.stat` as the kernel wrote it (empty without a memory controller).
    memory_stat: Vec<u8>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Throttling {
    pub periods: u64,
    pub throttled_periods: u64,
    /// Nanoseconds.
    pub throttled_time: u64,
}

/// runc's memory entries: v1's four files of each prefix; on v2, `usage` and `swap` only.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Memory {
    pub usage: MemoryEntry,
    /// v1's memsw (memory and swap together); v2's `memory.swap.current` and
    /// `memory.swap.max`, swap alone.
    pub swap: MemoryEntry,
    pub kernel: MemoryEntry,
    pub kernel_tcp: MemoryEntry,
    /// `swap` is v2's, without memory.
    pub swap_alone: bool,
    /// v2's `memory.peak` and `memory.swap.peak` (0 where the kernel has none): the
    /// maximum usages containerd's v2 metrics give; runc's v2 data has none.
    pub peak: u64,
    pub swap_peak: u64,
}

impl Memory {
    /// The swap entry as runc reports it: memory and swap together, on v2 too, where runc
    /// adds memory's usage and limit (an unlimited swap stays unlimited) for v1's sake.
    pub fn swap_with_memory(&self) -> MemoryEntry {
        if !self.swap_alone {
            return self.swap;
        }
        let (s, m) = (self.swap, self.usage);
        MemoryEntry {
            limit: if s.limit == u64::MAX {
                s.limit
            } else {
                s.limit.saturating_add(m.limit)
            },
            usage: s.usage + m.usage,
            ..s
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemoryEntry {
    pub limit: u64,
    pub usage: u64,
    pub max: u64,
    pub failcnt: u64,
}

/// `pids.current` and `pids.max`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pids {
    pub current: u64,
    /// As the kernel gives it, no limit (`max`) being u64::MAX, as containerd's v2
    /// metrics give it.
    pub max: u64,
}

impl Pids {
    /// The limit with no limit as 0, as runc and containerd's v1 metrics give it.
    pub fn limit(&self) -> u64 {
        if self.max == u64::MAX {
            0
        } else {
            self.max
        }
    }
}

impl Usage {
    /// `memory.stat`'s lines as (key, value), in the file's order; a line whose value is
    /// not a number is left out.
    pub fn memory_stat(&self) -> impl Iterator<Item = (&str, u64)> {
        pairs(&self.memory_stat)
    }

    /// One key of `memory.stat` (its first line), 0 without it.
    pub fn memory_stat_value(&self, key: &str) -> u64 {
        self.memory_stat()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, v)| v)
    }
}

/// A kept file: not opened yet, not there (not looked up again), or open.
#[derive(Default)]
pub(super) enum Slot {
    #[default]
    Unopened,
    Absent,
    Open(File),
}

/// The kept metrics files and the buffers of their last read. The files are read in the
/// same order at every read, so the n-th file read is the n-th slot: no name is looked
/// up or joined after the first read.
#[derive(Default)]
pub(super) struct Kept {
    slots: Vec<Slot>,
    /// The text of the last other file read.
    buf: Vec<u8>,
    usage: Usage,
    /// The clock ticks of `cpuacct.stat`, asked once (0: not yet).
    tck: u64,
}

impl Kept {
    /// The figures, read now from the v1 hierarchies' directories.
    pub(super) fn read_v1(&mut self, d: &V1Dirs, gone: &AtomicBool) -> &Usage {
        if self.tck == 0 {
            self.tck = clock_ticks();
        }
        let tck = self.tck;
        let mut r = Reading::new(self, gone);
        r.start();
        let cpuacct = d.cpuacct.as_deref();
        r.file(cpuacct, "cpuacct.stat");
        let (user, system) = (get(r.text(), "user"), get(r.text(), "system"));
        // `cpuacct.usage` is the sum of these, the kernel's same per-CPU counters
        // (kernel/sched/cpuacct.c: `cpuusage_read` and `cpuacct_percpu_seq_show` both
        // read `cpuacct_cpuusage_read` of every possible CPU): one file less a call.
        r.file(cpuacct, "cpuacct.usage_percpu");
        let Kept { buf, usage: u, .. } = &mut *r.kept;
        u.per_cpu.extend(numbers(buf));
        if cpuacct.is_some() {
            u.cpu_total = u.per_cpu.iter().sum();
            u.cpu_kernel = system * 1_000_000_000 / tck;
            u.cpu_user = user * 1_000_000_000 / tck;
        }
        let cpu = d.cpu.as_deref();
        r.file(cpu, "cpu.stat");
        let t = throttling(r.text(), 1);
        r.kept.usage.throttling = cpu.map(|_| t);

        let memory = d.memory.as_deref();
        r.stat(memory);
        let mut m = Memory::default();
        for (entry, prefix) in [
            (&mut m.usage, "memory."),
            (&mut m.swap, "memory.memsw."),
            (&mut m.kernel, "memory.kmem."),
            (&mut m.kernel_tcp, "memory.kmem.tcp."),
        ] {
            let mut n = |what: &str| {
                r.read(memory, &|d| d.join(format!("{prefix}{what}")));
                uint(r.text())
            };
            *entry = MemoryEntry {
                limit: n("limit_in_bytes"),
                usage: n("usage_in_bytes"),
                max: n("max_usage_in_bytes"),
                failcnt: n("failcnt"),
            };
        }
        r.kept.usage.memory = memory.map(|_| m);

        let pids = d.pids.as_deref();
        let current = r.uint(pids, "pids.current");
        let max = r.uint(pids, "pids.max");
        r.kept.usage.pids = pids.map(|_| Pids { current, max });
        &self.usage
    }

    /// The figures, read now from a v2 cgroup's directory.
    pub(super) fn read_v2(&mut self, dir: &Path, gone: &AtomicBool) -> &Usage {
        let mut r = Reading::new(self, gone);
        r.start();
        let dir = Some(dir);
        r.file(dir, "cpu.stat");
        let text = r.text();
        let [usage, user, system] =
            ["usage_usec", "user_usec", "system_usec"].map(|k| get(text, k));
        let t = throttling(text, 1000);
        let u = &mut r.kept.usage;
        u.cpu_total = usage * 1000;
        u.cpu_kernel = system * 1000;
        u.cpu_user = user * 1000;
        u.throttling = Some(t);

        r.stat(dir);
        let has_memory = r.file(dir, "memory.current");
        let current = uint(r.text());
        let limit = r.uint(dir, "memory.max");
        let has_swap = r.file(dir, "memory.swap.current");
        let swap = uint(r.text());
        let swap_limit = r.uint(dir, "memory.swap.max");
        let peak = r.uint(dir, "memory.peak");
        let swap_peak = r.uint(dir, "memory.swap.peak");
        r.kept.usage.memory = has_memory.then(|| Memory {
            usage: MemoryEntry {
                limit,
                usage: current,
                ..Default::default()
            },
            swap: if has_swap {
                MemoryEntry {
                    limit: swap_limit,
                    usage: swap,
                    ..Default::default()
                }
            } else {
                MemoryEntry::default()
            },
            swap_alone: has_swap,
            peak,
            swap_peak,
            ..Default::default()
        });
        if !has_memory {
            r.kept.usage.memory_stat.clear();
        }

        let current = r.uint(dir, "pids.current");
        let max = r.uint(dir, "pids.max");
        r.kept.usage.pids = Some(Pids { current, max });
        &self.usage
    }
}

/// One read of the kept files, slot after slot.
struct Reading<'a> {
    kept: &'a mut Kept,
    next: usize,
    gone: &'a AtomicBool,
}

impl<'a> Reading<'a> {
    fn new(kept: &'a mut Kept, gone: &'a AtomicBool) -> Reading<'a> {
        Reading {
            kept,
            next: 0,
            gone,
        }
    }

    /// The figures of the last read cleared, their buffers kept.
    fn start(&mut self) {
        let u = &mut self.kept.usage;
        let (mut per_cpu, mut memory_stat) = (
            std::mem::take(&mut u.per_cpu),
            std::mem::take(&mut u.memory_stat),
        );
        per_cpu.clear();
        memory_stat.clear();
        *u = Usage {
            per_cpu,
            memory_stat,
            ..Default::default()
        };
    }

    /// Reads the next slot's file (`path` of `dir`; no `dir`: absent, opened at the
    /// first read) into `stat` or the one-line buffer; false (that buffer empty) where it
    /// is not there or cannot be read.
    fn fill(&mut self, dir: Option<&Path>, path: &dyn Fn(&Path) -> PathBuf, stat: bool) -> bool {
        let i = self.next;
        self.next += 1;
        let kept = &mut *self.kept;
        if kept.slots.len() <= i {
            kept.slots.resize_with(i + 1, Slot::default);
        }
        let slot = &mut kept.slots[i];
        if let Slot::Unopened = slot {
            *slot = match dir.map(|d| File::open(path(d))) {
                Some(Ok(f)) => Slot::Open(f),
                _ => Slot::Absent,
            };
        }
        let buf = if stat {
            &mut kept.usage.memory_stat
        } else {
            &mut kept.buf
        };
        match slot {
            Slot::Open(f) => read_whole(f, buf, self.gone),
            _ => {
                buf.clear();
                false
            }
        }
    }

    fn read(&mut self, dir: Option<&Path>, path: &dyn Fn(&Path) -> PathBuf) -> bool {
        self.fill(dir, path, false)
    }

    fn file(&mut self, dir: Option<&Path>, name: &str) -> bool {
        self.fill(dir, &|d| d.join(name), false)
    }

    /// `memory.stat` of `dir` into the figures' own buffer.
    fn stat(&mut self, dir: Option<&Path>) {
        self.fill(dir, &|d| d.join("memory.stat"), true);
    }

    fn text(&self) -> &[u8] {
        &self.kept.buf
    }

    fn uint(&mut self, dir: Option<&Path>, name: &str) -> u64 {
        self.file(dir, name);
        uint(self.text())
    }
}

/// The whole file into `buf`, read from its start. A cgroup file is a seq file, which
/// fills a read up to its end: a read short of the room left is the end. The buffer's
/// capacity is kept for the next read, and read into as it is: zeroing it first, once
/// per file and call, cost more than the read. ENODEV: the cgroup is removed (`gone`).
pub(super) fn read_whole(f: &File, buf: &mut Vec<u8>, gone: &AtomicBool) -> bool {
    use std::os::fd::AsFd;
    buf.clear();
    buf.reserve(4096);
    loop {
        let (want, offset) = (buf.capacity() - buf.len(), buf.len() as u64);
        match crate::sys::fd::pread_append(f.as_fd(), buf, offset) {
            Ok(n) if n < want => return true,
            Ok(_) => buf.reserve(buf.capacity()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if e.raw_os_error() == Some(libc::ENODEV) {
                    gone.store(true, Ordering::Relaxed);
                }
                buf.clear();
                return false;
            }
        }
    }
}

/// A one-number file; `max` is no limit (u64::MAX), a negative number or none: 0.
pub(super) fn uint(text: &[u8]) -> u64 {
    let t = std::str::from_utf8(text).unwrap_or("").trim();
    if t == "max" {
        return u64::MAX;
    }
    t.parse().unwrap_or(0)
}

/// A flat keyed file's (`key value` lines) pairs, in its order.
pub(super) fn pairs(text: &[u8]) -> impl Iterator<Item = (&str, u64)> {
    std::str::from_utf8(text)
        .unwrap_or("")
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k, v.trim().parse().ok()?))
        })
}

/// The first line of `key` in a keyed file, 0 without it.
fn get(text: &[u8], key: &str) -> u64 {
    pairs(text).find(|(k, _)| *k == key).map_or(0, |(_, v)| v)
}

/// The numbers of a whitespace-separated list.
fn numbers(text: &[u8]) -> impl Iterator<Item = u64> + '_ {
    std::str::from_utf8(text)
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
}

/// `cpu.stat`'s throttling figures; `unit` turns v2's microseconds into nanoseconds.
fn throttling(stat: &[u8], unit: u64) -> Throttling {
    Throttling {
        periods: get(stat, "nr_periods"),
        throttled_periods: get(stat, "nr_throttled"),
        throttled_time: if unit == 1 {
            get(stat, "throttled_time")
        } else {
            get(stat, "throttled_usec") * unit
        },
    }
}

pub(super) fn clock_ticks() -> u64 {
    let t = crate::sys::proc::sysconf(libc::_SC_CLK_TCK);
    if t > 0 {
        t as u64
    } else {
        100
    }
}
