//! The density bench (`cargo bench --bench cri -- --density`, `scripts/bench density`):
//! `--pods` pods at once per handler, each a sandbox on the CNI bridge and one busybox
//! `sleep`, started `--parallel` at a time, the handlers one after another (each once
//! the last one's shims have gone) in one private containerd. For each handler:
//! RunPodSandbox and the whole pod's start (p50, p99), the host memory the runtime adds
//! per pod (summed RSS and PSS of `smaps_rollup`) right after the last pod started and
//! after `--idle` seconds idle, and what the runtime's processes did over that idle
//! time: CPU (utime + stime) as a share of one core, and their threads' context
//! switches (each wake-up of a sleeping thread is one). The containers' own processes
//! are left out of the runtime's figures and shown on a row of their own.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cri::{self, container_pid, sandbox_identity, Lab};
use crate::cri_client::Client;
use crate::{common, Pod};

pub struct Density {
    pub pods: usize,
    pub parallel: usize,
    pub idle: Duration,
}

/// What a process is to a pod.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    /// The shim and whatever it runs that is neither the sandbox nor a container.
    Shim,
    /// The sandbox's PID 1 (a pause) and its descendants but the containers.
    Sandbox,
    /// A container's processes.
    Container,
}

/// A process's identity (pid, start time) and kind.
type Procs = Vec<((i32, u64), Kind)>;

/// Summed memory in KiB.
#[derive(Clone, Copy, Default, Debug)]
struct Mem {
    rss: u64,
    pss: u64,
}

/// Rss and Pss of a process, None once it is gone.
fn rollup(pid: i32) -> Option<Mem> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let kib = |key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
    };
    Some(Mem {
        rss: kib("Rss")?,
        pss: kib("Pss")?,
    })
}

/// (start time, utime + stime in clock ticks) of a process.
fn times(pid: i32) -> Option<(u64, u64)> {
    let f = common::stat_fields(pid)?;
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some((n(19)?, n(11)? + n(12)?))
}

/// Context switches of every thread of a process, summed: each time a thread slept and
/// was woken (voluntary) or was preempted (involuntary).
fn switches(pid: i32) -> u64 {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    rd.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// The processes of `pods` by kind: their shims, sandboxes and containers, each with
/// whatever it started.
fn classify(lab: &Lab, pods: &[Pod]) -> Procs {
    let parents = crate::parents();
    let containers: Vec<i32> = pods
        .iter()
        .map(|p| container_pid(lab, &p.container))
        .collect();
    let sandboxes: Vec<i32> = pods
        .iter()
        .map(|p| sandbox_identity(lab, &p.id).0 .0)
        .collect();
    let shims: Vec<i32> = lab.shims().into_iter().map(|(p, _)| p).collect();
    let under = |pid: i32, roots: &[i32]| crate::descends_from(&parents, pid, roots);
    let mut out = Vec::new();
    for &pid in parents.keys() {
        let kind = if under(pid, &containers) {
            Kind::Container
        } else if under(pid, &sandboxes) {
            Kind::Sandbox
        } else if under(pid, &shims) {
            Kind::Shim
        } else {
            continue;
        };
        if let Some((start, _)) = times(pid) {
            out.push(((pid, start), kind));
        }
    }
    out.sort();
    out
}

/// Memory by kind, of the processes still there.
fn memory(procs: &Procs) -> BTreeMap<Kind, Mem> {
    let mut m: BTreeMap<Kind, Mem> = BTreeMap::new();
    for &((pid, start), kind) in procs {
        if times(pid).map(|t| t.0) != Some(start) {
            continue;
        }
        if let Some(u) = rollup(pid) {
            let e = m.entry(kind).or_default();
            e.rss += u.rss;
            e.pss += u.pss;
        }
    }
    m
}

/// CPU ticks and context switches of each runtime process (not the containers').
fn activity(procs: &Procs) -> HashMap<(i32, u64), (u64, u64)> {
    procs
        .iter()
        .filter(|(_, k)| *k != Kind::Container)
        .filter_map(|&((pid, start), _)| {
            let (s, ticks) = times(pid)?;
            (s == start).then(|| ((pid, start), (ticks, switches(pid))))
        })
        .collect()
}

/// One handler's figures.
#[derive(Default)]
pub struct Figures {
    pub error: Option<String>,
    pub sandbox_ms: Vec<f64>,
    pub whole_ms: Vec<f64>,
    /// Per pod, KiB.
    pub runtime_start: (f64, f64),
    pub runtime_idle: (f64, f64),
    pub sandbox_idle: (f64, f64),
    pub containers_idle: (f64, f64),
    pub procs_per_pod: f64,
    /// Share of one core, in %, of the runtime's processes over the idle time.
    pub cpu_pct: f64,
    /// Context switches of the runtime's processes over the idle time, all pods.
    pub wakeups: u64,
    /// Those of the processes that woke, by command name: what to look at.
    pub wakers: BTreeMap<String, u64>,
    pub containerd_cpu_pct: f64,
    pub idle_s: f64,
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Start `n` pods with `parallel` workers, each on a CRI connection of its own.
fn start_all(lab: &Lab, handler: &str, n: usize, parallel: usize) -> Result<Vec<Pod>, String> {
    let next = AtomicUsize::new(0);
    let pods = Mutex::new(Vec::new());
    let errors = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..parallel.min(n) {
            s.spawn(|| {
                let c = match Client::connect(&lab.sock, Duration::from_secs(10)) {
                    Ok(c) => c,
                    Err(e) => return errors.lock().unwrap().push(e),
                };
                while next.fetch_add(1, Ordering::SeqCst) < n {
                    match crate::start_pod_on(&c, lab, handler) {
                        Ok(p) => pods.lock().unwrap().push(p),
                        Err(e) => errors.lock().unwrap().push(e),
                    }
                }
            });
        }
    });
    let pods = pods.into_inner().unwrap();
    let errors = errors.into_inner().unwrap();
    if let Some(e) = errors.first() {
        // What did start goes, so that the next handler starts from an empty node.
        remove_all(lab, &pods, parallel);
        return Err(format!(
            "{} of {n} pods failed; the first: {e}",
            errors.len()
        ));
    }
    Ok(pods)
}

/// StopPodSandbox and RemovePodSandbox of every pod, `parallel` at a time.
fn remove_all(lab: &Lab, pods: &[Pod], parallel: usize) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..parallel.min(pods.len()) {
            s.spawn(|| {
                let c = Client::connect(&lab.sock, Duration::from_secs(10))
                    .unwrap_or_else(|e| panic!("density: {e}"));
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(p) = pods.get(i) else { return };
                    c.stop_pod(&p.id)
                        .unwrap_or_else(|e| panic!("StopPodSandbox {}: {e}", p.id));
                    c.remove_pod(&p.id)
                        .unwrap_or_else(|e| panic!("RemovePodSandbox {}: {e}", p.id));
                }
            });
        }
    });
}

fn per_pod(m: &BTreeMap<Kind, Mem>, kinds: &[Kind], n: usize) -> (f64, f64) {
    let (mut rss, mut pss) = (0, 0);
    for k in kinds {
        if let Some(v) = m.get(k) {
            rss += v.rss;
            pss += v.pss;
        }
    }
    (rss as f64 / n as f64, pss as f64 / n as f64)
}

/// One handler's run: start, measure, idle, measure, remove.
pub fn measure(lab: &Lab, handler: &str, d: &Density) -> Figures {
    let mut f = Figures::default();
    eprintln!(
        "density: {handler}: starting {} pods, {} at a time",
        d.pods, d.parallel
    );
    let pods = match start_all(lab, handler, d.pods, d.parallel) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("density: {handler}: {e}");
            f.error = Some(e);
            return f;
        }
    };
    f.sandbox_ms = pods.iter().map(|p| p.sandbox_ms).collect();
    f.whole_ms = pods.iter().map(|p| p.whole_ms).collect();
    let procs = classify(lab, &pods);
    let n = pods.len();
    let runtime = [Kind::Shim, Kind::Sandbox];
    f.runtime_start = per_pod(&memory(&procs), &runtime, n);
    f.procs_per_pod = procs.iter().filter(|(_, k)| *k != Kind::Container).count() as f64 / n as f64;
    // The idle time, with nothing asked of containerd or the runtime, from when the last
    // calls above are over (a podinit shim gives its start-up pages back a second after its
    // last call: once, not an idle pod's doing).
    std::thread::sleep(crate::SETTLE);
    let containerd = lab.containerd_pid() as i32;
    let before = activity(&procs);
    let cd_before = times(containerd).map_or(0, |t| t.1);
    let t0 = Instant::now();
    eprintln!("density: {handler}: {n} pods idle for {:?}", d.idle);
    std::thread::sleep(d.idle);
    let after = activity(&procs);
    let cd_after = times(containerd).map_or(0, |t| t.1);
    let secs = t0.elapsed().as_secs_f64();
    f.idle_s = secs;
    let mut ticks = 0;
    for (id, (t1, w1)) in &after {
        if let Some((t0, w0)) = before.get(id) {
            ticks += t1 - t0;
            f.wakeups += w1 - w0;
            if w1 > w0 {
                *f.wakers.entry(comm(id.0)).or_default() += w1 - w0;
            }
        }
    }
    f.cpu_pct = ticks as f64 / clk_tck() / secs * 100.0;
    f.containerd_cpu_pct = (cd_after - cd_before) as f64 / clk_tck() / secs * 100.0;
    let idle = memory(&procs);
    f.runtime_idle = per_pod(&idle, &runtime, n);
    f.sandbox_idle = per_pod(&idle, &[Kind::Sandbox], n);
    f.containers_idle = per_pod(&idle, &[Kind::Container], n);
    eprintln!("density: {handler}: removing the pods");
    remove_all(lab, &pods, d.parallel);
    f
}

/// The p-th percentile (nearest rank) of `v`.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// The handlers' columns: Sandbox mode, task mode, runc.
pub const COLUMNS: [(&str, &str); 3] = [
    (cri::SANDBOX_HANDLER, "podinit, Sandbox mode"),
    ("podinit", "podinit, task mode"),
    ("runc", "runc handler"),
];

/// The table and its JSON.
pub fn report(d: &Density, figs: &BTreeMap<&str, Figures>) -> (String, serde_json::Value) {
    type Get = fn(&Figures) -> f64;
    let rows: Vec<(&str, String, &str, Get, &str)> = vec![
        (
            "sandbox_p50",
            "RunPodSandbox p50".into(),
            "ms",
            |f| percentile(&f.sandbox_ms, 50.0),
            "≤ 0.35 × runc (Sandbox mode), ≤ 0.4 × (task mode)",
        ),
        (
            "sandbox_p99",
            "RunPodSandbox p99".into(),
            "ms",
            |f| percentile(&f.sandbox_ms, 99.0),
            "—",
        ),
        (
            "whole_p50",
            "the whole pod (RunPodSandbox to its container running) p50".into(),
            "ms",
            |f| percentile(&f.whole_ms, 50.0),
            "≤ 0.35 × runc",
        ),
        (
            "whole_p99",
            "the whole pod p99".into(),
            "ms",
            |f| percentile(&f.whole_ms, 99.0),
            "—",
        ),
        (
            "rss_start",
            "runtime memory per pod right after start: RSS".into(),
            "MiB",
            |f| f.runtime_start.0 / 1024.0,
            "—",
        ),
        (
            "pss_start",
            "runtime memory per pod right after start: PSS".into(),
            "MiB",
            |f| f.runtime_start.1 / 1024.0,
            "≤ 2 MiB and ≤ 0.15 × runc (Sandbox mode)",
        ),
        (
            "rss_idle",
            "runtime memory per pod after the idle time: RSS".into(),
            "MiB",
            |f| f.runtime_idle.0 / 1024.0,
            "—",
        ),
        (
            "pss_idle",
            "runtime memory per pod after the idle time: PSS".into(),
            "MiB",
            |f| f.runtime_idle.1 / 1024.0,
            "≤ 2 MiB and ≤ 0.15 × runc (Sandbox mode)",
        ),
        (
            "sandbox_pss_idle",
            "of it, the sandbox's PID 1 (pause): PSS".into(),
            "MiB",
            |f| f.sandbox_idle.1 / 1024.0,
            "—",
        ),
        (
            "procs",
            "runtime processes per pod".into(),
            "",
            |f| f.procs_per_pod,
            "—",
        ),
        (
            "cpu_idle",
            format!("runtime CPU, {} pods idle", d.pods),
            "% of a core",
            |f| f.cpu_pct,
            "≤ 1 %",
        ),
        (
            "wakeups_idle",
            format!(
                "runtime threads' wake-ups over the idle time, {} pods",
                d.pods
            ),
            "",
            |f| f.wakeups as f64,
            "0",
        ),
        (
            "containers_pss_idle",
            "not the runtime's: the container's own processes per pod, PSS".into(),
            "MiB",
            |f| f.containers_idle.1 / 1024.0,
            "—",
        ),
        (
            "containerd_cpu_idle",
            format!("not the runtime's: containerd's CPU, {} pods idle", d.pods),
            "% of a core",
            |f| f.containerd_cpu_pct,
            "—",
        ),
    ];
    let mut md = String::from("| what |");
    for (_, label) in COLUMNS {
        md.push_str(&format!(" {label} |"));
    }
    md.push_str(" Sandbox mode / runc | task mode / runc | goal |\n|");
    md.push_str(&" --- |".repeat(COLUMNS.len() + 4));
    md.push('\n');
    let mut rows_json = serde_json::Map::new();
    for (key, what, unit, get, goal) in &rows {
        let value = |h: &str| figs.get(h).filter(|f| f.error.is_none()).map(get);
        md.push_str(&format!("| {what} |"));
        for (h, _) in COLUMNS {
            match value(h) {
                Some(v) if unit.is_empty() => md.push_str(&format!(" {v:.1} |")),
                Some(v) => md.push_str(&format!(" {v:.2} {unit} |")),
                None => md.push_str(" not run |"),
            }
        }
        for h in [COLUMNS[0].0, COLUMNS[1].0] {
            match (value(h), value("runc")) {
                (Some(p), Some(r)) if r > 0.0 => md.push_str(&format!(" {:.2} |", p / r)),
                _ => md.push_str(" — |"),
            }
        }
        md.push_str(&format!(" {goal} |\n"));
        let mut o = serde_json::Map::new();
        o.insert("what".into(), serde_json::json!(what));
        o.insert("unit".into(), serde_json::json!(unit));
        for (h, _) in COLUMNS {
            o.insert(h.into(), serde_json::json!(value(h)));
        }
        rows_json.insert(key.to_string(), serde_json::Value::Object(o));
    }
    for (h, label) in COLUMNS {
        match figs.get(h) {
            Some(f) if f.error.is_some() => md.push_str(&format!(
                "\n{label}: not run: {}\n",
                f.error.as_ref().unwrap()
            )),
            Some(f) if !f.wakers.is_empty() => {
                let w: Vec<String> = f.wakers.iter().map(|(c, n)| format!("{c} {n}")).collect();
                md.push_str(&format!(
                    "\n{label}: the runtime's wake-ups over {:.0} s by process name: {}\n",
                    f.idle_s,
                    w.join(", ")
                ));
            }
            None => md.push_str(&format!("\n{label}: not run: no such handler here\n")),
            _ => {}
        }
    }
    let samples: serde_json::Map<String, serde_json::Value> = figs
        .iter()
        .map(|(h, f)| {
            (
                h.to_string(),
                serde_json::json!({
                    "error": f.error,
                    "run_pod_sandbox_ms": f.sandbox_ms,
                    "whole_ms": f.whole_ms,
                    "wakers": f.wakers,
                    "idle_s": f.idle_s,
                }),
            )
        })
        .collect();
    let json = serde_json::json!({
        "pods": d.pods,
        "parallel": d.parallel,
        "idle_s": d.idle.as_secs(),
        "rows": rows_json,
        "samples": samples,
    });
    (md, json)
}

/// The load average now (1, 5, 15 minutes), as /proc/loadavg gives it.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The figures in the time order of a run: each handler in turn.
pub fn run(lab: &Lab, d: &Density) -> (BTreeMap<&'static str, Figures>, String, String) {
    let load_before = loadavg();
    let mut figs = BTreeMap::new();
    // Untimed: images' snapshots, binaries and caches warm for each.
    for (h, _) in COLUMNS {
        let warm = crate::start_pod(lab, h).map(|p| crate::remove(lab, &p));
        crate::quiet(lab);
        if let Err(e) = warm {
            eprintln!("density: the {h} handler cannot run a pod: {e}");
            figs.insert(
                h,
                Figures {
                    error: Some(e),
                    ..Default::default()
                },
            );
        }
    }
    for (h, _) in COLUMNS {
        if figs.contains_key(h) {
            continue;
        }
        let f = measure(lab, h, d);
        crate::quiet(lab);
        figs.insert(h, f);
    }
    (figs, load_before, loadavg())
}
