//! The CRI benchmark (scripts/bench runs it; BENCHMARKS.md shows it): the
//! runc and podinit handlers side by side in one private containerd (tests/common/cri.rs),
//! through raw CRI calls.
//!
//! Rows: RunPodSandbox, CreateContainer + StartContainer, the whole pod (from
//! RunPodSandbox to its container running), ExecSync of `true`, each the median of
//! `--rounds` pods made and removed one at a time, the handlers interleaved, each pod once
//! the last one's shim has gone and containerd has settled; then the
//! same with `--pods` pods at once; and the host memory the runtime adds per pod: the
//! summed RSS of the pod's shim, its sandbox process and their descendants but the
//! containers' own (runc: containerd-shim-runc-v2 and pause; podinit: the shim and
//! podinit's pause), with one pod and with `--pods` at once, read once the pod settled.
//!
//! `cargo bench --bench cri -- [--rounds N] [--pods N] [--json FILE] [--md FILE]
//! [--update BENCHMARKS.md]`, as root. `--update` replaces the table between the file's
//! `<!-- cri-bench -->` and `<!-- /cri-bench -->` lines.
//! `--strace DIR` instead traces containerd and everything it starts (`strace -f -tt`)
//! while each handler runs one pod after the warm-up, writes `DIR/<handler>.strace`, and
//! measures nothing else: where a handler's RunPodSandbox time goes.
//! `--timeline DIR` records every exec and exit on the machine (`perf record`, which slows
//! nothing down) while each handler runs `--rounds` pods, and writes `DIR/<handler>.perf`
//! and `DIR/<handler>.calls` (each pod's RunPodSandbox start and end, and its container's
//! start's end, on the same clock): what of RunPodSandbox is containerd's and CNI's.
//! A handler whose pods cannot run (podinit before its shim exists) gets its error in the
//! table instead of figures.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/cri.rs"]
mod cri;
#[path = "../tests/common/cri_client.rs"]
mod cri_client;
#[path = "cri/density.rs"]
mod density;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use cri::{container_pid, sandbox_identity, Lab};

struct Args {
    rounds: usize,
    pods: usize,
    json: Option<String>,
    md: Option<String>,
    update: Option<String>,
    strace: Option<String>,
    timeline: Option<String>,
    density: bool,
    parallel: usize,
    idle: u64,
}

fn args() -> Args {
    let mut a = Args {
        rounds: 20,
        pods: 20,
        json: None,
        md: None,
        update: None,
        strace: None,
        timeline: None,
        density: false,
        parallel: 10,
        idle: 60,
    };
    let mut pods_given = false;
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--rounds" => a.rounds = val().parse().expect("--rounds N"),
            "--pods" => {
                a.pods = val().parse().expect("--pods N");
                pods_given = true;
            }
            "--density" => a.density = true,
            "--parallel" => a.parallel = val().parse().expect("--parallel N"),
            "--idle" => a.idle = val().parse().expect("--idle SECONDS"),
            "--json" => a.json = Some(val()),
            "--md" => a.md = Some(val()),
            "--update" => a.update = Some(val()),
            "--strace" => a.strace = Some(val()),
            "--timeline" => a.timeline = Some(val()),
            // cargo bench passes --bench to a bench without libtest's harness.
            "--bench" => {}
            other => panic!("cri bench: unknown argument {other}"),
        }
    }
    // The density bench's own default: the hundred pods.
    if a.density && !pods_given {
        a.pods = 100;
    }
    a
}

/// One pod of one busybox container, timed.
struct Pod {
    id: String,
    container: String,
    sandbox_ms: f64,
    create_start_ms: f64,
    whole_ms: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn start_pod(lab: &Lab, handler: &str) -> Result<Pod, String> {
    start_pod_on(lab.cri(), lab, handler)
}

/// [`start_pod`] over the CRI connection `c` (one per thread that starts pods).
fn start_pod_on(c: &cri_client::Client, lab: &Lab, handler: &str) -> Result<Pod, String> {
    let pc = lab.pod_config(&cri::unique("bench"), false, false);
    let cc = lab.container_config("sleeper", &["sleep", "3600"]);
    let t0 = Instant::now();
    let id = c
        .run_pod(&pc, handler)
        .map_err(|e| format!("RunPodSandbox: {}", e.message()))?;
    let t1 = Instant::now();
    let container = c
        .create_container(&id, &cc, &pc)
        .map_err(|e| format!("CreateContainer: {}", e.message()))?;
    c.start_container(&container)
        .map_err(|e| format!("StartContainer: {}", e.message()))?;
    let t2 = Instant::now();
    Ok(Pod {
        id,
        container,
        sandbox_ms: ms(t1 - t0),
        create_start_ms: ms(t2 - t1),
        whole_ms: ms(t2 - t0),
    })
}

/// CLOCK_MONOTONIC now, in seconds: perf's clock with `-k CLOCK_MONOTONIC`.
fn monotonic() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// `rounds` pods per handler under `perf record` of every exec and exit.
fn timeline(lab: &Lab, handlers: &[&str], dir: &str, rounds: usize) {
    std::fs::create_dir_all(dir).expect("--timeline DIR");
    for h in handlers {
        let out = format!("{dir}/{h}.perf");
        let mut perf = std::process::Command::new("perf")
            .args([
                "record",
                "-q",
                "-a",
                "-k",
                "CLOCK_MONOTONIC",
                "-e",
                "sched:sched_process_exec",
                "-e",
                "sched:sched_process_exit",
                "-o",
                &out,
            ])
            .spawn()
            .expect("perf");
        std::thread::sleep(Duration::from_millis(1000));
        let mut calls = String::new();
        for _ in 0..rounds {
            let t0 = monotonic();
            let p = start_pod(lab, h).unwrap_or_else(|e| panic!("{h}: {e}"));
            let t2 = monotonic();
            let t1 = t0 + p.sandbox_ms / 1000.0;
            calls += &format!("{t0:.6} {t1:.6} {t2:.6}\n");
            remove(lab, &p);
            quiet(lab);
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(perf.id() as i32, libc::SIGINT) };
        let _ = perf.wait();
        std::fs::write(format!("{dir}/{h}.calls"), calls).unwrap();
        eprintln!("cri bench: {out}");
    }
}

/// One pod per handler with containerd and its children under `strace -f -tt`.
fn trace(lab: &Lab, handlers: &[&str], dir: &str) {
    std::fs::create_dir_all(dir).expect("--strace DIR");
    for h in handlers {
        let out = format!("{dir}/{h}.strace");
        let mut st = std::process::Command::new("strace")
            .args(["-f", "-tt", "-qq", "-e", "trace=execve,clone,clone3,vfork,wait4,mount,umount2,pivot_root,connect,accept4,exit_group,unshare,setns", "-o", &out, "-p"])
            .arg(lab.containerd_pid().to_string())
            .spawn()
            .expect("strace");
        // strace attaches within a moment; the pod must not start before.
        std::thread::sleep(Duration::from_millis(500));
        let p = start_pod(lab, h).unwrap_or_else(|e| panic!("{h}: {e}"));
        eprintln!(
            "cri bench: {h}: RunPodSandbox {:.1} ms, Create+Start {:.1} ms (traced: slower)",
            p.sandbox_ms, p.create_start_ms
        );
        // SAFETY: signalling our own child.
        unsafe { libc::kill(st.id() as i32, libc::SIGINT) };
        let _ = st.wait();
        std::thread::sleep(SETTLE);
        // Before the CRI calls below, which may reach the shim.
        for (pid, _) in lab.shims() {
            eprintln!(
                "cri bench: {h}: shim {pid} RSS {} KiB before any CRI call",
                common::usage(pid).rss_kib
            );
        }
        for pid in runtime_procs(lab, std::slice::from_ref(&p)) {
            let u = common::usage(pid);
            let _ = std::fs::copy(
                format!("/proc/{pid}/smaps"),
                format!("{dir}/{h}-{pid}.smaps"),
            );
            let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            eprintln!(
                "cri bench: {h}: pid {pid} RSS {} KiB, anonymous {} KiB: {}",
                u.rss_kib,
                u.anon_kib,
                cmd.replace('\0', " ").chars().take(80).collect::<String>()
            );
        }
        remove(lab, &p);
        eprintln!("cri bench: {out}");
    }
}

fn exec_ms(lab: &Lab, pod: &Pod) -> f64 {
    let t = Instant::now();
    let r = lab
        .cri()
        .exec_sync(&pod.container, &["true"], 10)
        .expect("ExecSync");
    assert_eq!(r.exit_code, 0, "ExecSync true: {r:?}");
    ms(t.elapsed())
}

/// After a pod one at a time, or a handler's pods: until their shims have gone and
/// containerd's work after RemovePodSandbox (the shims' exits, their `delete`, the
/// snapshots' removal) has ended, so that the next pod, of another handler, does not pay
/// for it.
pub fn quiet(lab: &Lab) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !lab.shims().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
}

fn remove(lab: &Lab, pod: &Pod) {
    lab.cri().stop_pod(&pod.id).expect("StopPodSandbox");
    lab.cri().remove_pod(&pod.id).expect("RemovePodSandbox");
}

/// The parent of every process now.
/// Whether `pid` is one of `roots` or below one, by `parents` (pid to parent pid).
fn descends_from(parents: &HashMap<i32, i32>, pid: i32, roots: &[i32]) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        if roots.contains(&p) {
            return true;
        }
        match parents.get(&p) {
            Some(&pp) if pp > 1 => p = pp,
            _ => return false,
        }
    }
    false
}

fn parents() -> HashMap<i32, i32> {
    let mut m = HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Some(ppid) = common::stat_fields(pid).and_then(|f| f.get(1)?.parse().ok()) {
            m.insert(pid, ppid);
        }
    }
    m
}

/// Summed RSS (KiB) of the lab's shims, the pods' sandbox processes and their
/// descendants, the containers' processes (and theirs) left out: what the runtime adds for
/// the pods running now. The sandboxes count apart from the shims: a runtime may run its
/// sandbox outside the shim's tree, so that the pod outlives the shim.
/// How long a pod runs before its memory is read: its steady state, start-up over (a
/// podinit shim gives its start-up pages back after a second without calls).
const SETTLE: Duration = Duration::from_secs(2);

fn runtime_rss_kib(lab: &Lab, pods: &[Pod]) -> u64 {
    runtime_procs(lab, pods)
        .into_iter()
        .map(|pid| common::usage(pid).rss_kib)
        .sum()
}

/// The processes the runtime adds for `pods`: their shims, sandbox processes and their
/// descendants but the containers' own.
fn runtime_procs(lab: &Lab, pods: &[Pod]) -> Vec<i32> {
    let parents = parents();
    let containers: Vec<i32> = pods
        .iter()
        .map(|p| container_pid(lab, &p.container))
        .collect();
    let mut roots: Vec<i32> = lab.shims().into_iter().map(|(p, _)| p).collect();
    roots.extend(pods.iter().map(|p| sandbox_identity(lab, &p.id).0 .0));
    let under = |pid: i32, roots: &[i32]| descends_from(&parents, pid, roots);
    // A process may end while it is read: it adds nothing then.
    parents
        .keys()
        .copied()
        .filter(|&pid| under(pid, &roots) && !under(pid, &containers))
        .filter(|pid| std::fs::metadata(format!("/proc/{pid}/smaps_rollup")).is_ok())
        .collect()
}

#[derive(Default)]
struct Figures {
    samples: BTreeMap<&'static str, Vec<f64>>,
    error: Option<String>,
}

impl Figures {
    fn add(&mut self, k: &'static str, v: f64) {
        self.samples.entry(k).or_default().push(v);
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn p90(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * 0.9).round() as usize]
}

fn main() {
    let a = args();
    assert!(common::is_root(), "the CRI bench needs root");
    let lab = Lab::with("bench", daemon(a.density), None);
    if a.density {
        let d = density::Density {
            pods: a.pods,
            parallel: a.parallel,
            idle: Duration::from_secs(a.idle),
        };
        let (figs, load_before, load_after) = density::run(&lab, &d);
        let (md, json) = density::report(&d, &figs);
        print!("{md}");
        if let Some(p) = &a.md {
            std::fs::write(p, &md).unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        if let Some(p) = &a.json {
            let mut json = json;
            json["loadavg"] = serde_json::json!({"before": load_before, "after": load_after});
            std::fs::write(p, serde_json::to_string_pretty(&json).unwrap())
                .unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        if let Some(p) = &a.update {
            let head = format!(
                "{} pods per handler, {} at a time, idle {} s; the handlers one after another. \
                 Load average (1, 5, 15 min) {load_before} before, {load_after} after.",
                d.pods, d.parallel, a.idle
            );
            update_section(p, &lab.daemon, "density-bench", &head, &md);
        }
        return;
    }
    let handlers = handlers(&lab.daemon);
    let mut figs: BTreeMap<&str, Figures> =
        handlers.iter().map(|h| (*h, Figures::default())).collect();
    // A first pod per handler, untimed: images' snapshots, binaries and caches warm.
    for h in handlers.iter().copied() {
        match start_pod(&lab, h) {
            Ok(p) => remove(&lab, &p),
            Err(e) => {
                eprintln!("cri bench: the {h} handler cannot run a pod: {e}");
                figs.get_mut(h).unwrap().error = Some(e);
            }
        }
    }
    let live: Vec<&str> = handlers
        .iter()
        .copied()
        .filter(|h| figs[h].error.is_none())
        .collect();
    if let Some(dir) = &a.strace {
        trace(&lab, &live, dir);
        return;
    }
    if let Some(dir) = &a.timeline {
        timeline(&lab, &live, dir, a.rounds);
        return;
    }
    eprintln!("cri bench: {} rounds of one pod", a.rounds);
    for _ in 0..a.rounds {
        for h in &live {
            let p = start_pod(&lab, h).unwrap_or_else(|e| panic!("{h}: {e}"));
            let e = exec_ms(&lab, &p);
            let f = figs.get_mut(h).unwrap();
            f.add("sandbox", p.sandbox_ms);
            f.add("create_start", p.create_start_ms);
            f.add("whole", p.whole_ms);
            f.add("exec_sync", e);
            remove(&lab, &p);
            quiet(&lab);
        }
    }
    for h in &live {
        let p = start_pod(&lab, h).unwrap();
        std::thread::sleep(SETTLE);
        let kib = runtime_rss_kib(&lab, std::slice::from_ref(&p));
        figs.get_mut(h).unwrap().add("rss_1", kib as f64 / 1024.0);
        remove(&lab, &p);
    }
    eprintln!("cri bench: {} pods at once", a.pods);
    for h in &live {
        let mut pods = Vec::new();
        for _ in 0..a.pods {
            let p = start_pod(&lab, h).unwrap_or_else(|e| panic!("{h}: {e}"));
            let f = figs.get_mut(h).unwrap();
            f.add("sandbox_n", p.sandbox_ms);
            f.add("create_start_n", p.create_start_ms);
            f.add("whole_n", p.whole_ms);
            pods.push(p);
        }
        for p in &pods {
            let e = exec_ms(&lab, p);
            figs.get_mut(h).unwrap().add("exec_sync_n", e);
        }
        std::thread::sleep(SETTLE);
        let kib = runtime_rss_kib(&lab, &pods);
        let f = figs.get_mut(h).unwrap();
        f.add("rss_n_total", kib as f64 / 1024.0);
        f.add("rss_n", kib as f64 / 1024.0 / pods.len() as f64);
        for p in &pods {
            remove(&lab, p);
        }
    }
    report(&a, &lab.daemon, &figs);
}

/// The handlers the bench runs: runc's and podinit's task mode, and on containerd 2
/// podinit's Sandbox mode too.
fn handlers(daemon: &cri::Containerd) -> Vec<&'static str> {
    let mut h = cri::HANDLERS.to_vec();
    if matches!(daemon, cri::Containerd::V2(_)) {
        h.push(cri::SANDBOX_HANDLER);
    }
    h
}

/// The goals against the runc handler (issue's table): task mode's, then Sandbox mode's.
const SANDBOX_GOAL: &str = "task ≤ 0.4 ×, Sandbox ≤ 0.35 × runc";
const WHOLE_GOAL: &str = "≤ 0.35 × runc";
const MEMORY_GOAL: &str = "Sandbox ≤ 2 MiB and ≤ 0.15 × runc";

fn report(a: &Args, daemon: &cri::Containerd, figs: &BTreeMap<&str, Figures>) {
    let n = a.pods;
    let rows: Vec<(&str, String, &str, &str)> = vec![
        ("sandbox", "RunPodSandbox".into(), "ms", SANDBOX_GOAL),
        (
            "create_start",
            "CreateContainer + StartContainer".into(),
            "ms",
            "≤ 0.5 × runc",
        ),
        (
            "whole",
            "the whole pod: RunPodSandbox to its container running".into(),
            "ms",
            WHOLE_GOAL,
        ),
        ("exec_sync", "ExecSync of `true`".into(), "ms", "—"),
        (
            "rss_1",
            "host memory per pod (runtime RSS), one pod".into(),
            "MiB",
            MEMORY_GOAL,
        ),
        (
            "sandbox_n",
            format!("RunPodSandbox, {n} pods at once"),
            "ms",
            SANDBOX_GOAL,
        ),
        (
            "create_start_n",
            format!("CreateContainer + StartContainer, {n} pods at once"),
            "ms",
            "≤ 0.5 × runc",
        ),
        (
            "whole_n",
            format!("the whole pod, {n} pods at once"),
            "ms",
            WHOLE_GOAL,
        ),
        (
            "exec_sync_n",
            format!("ExecSync of `true`, {n} pods running"),
            "ms",
            "—",
        ),
        (
            "rss_n",
            format!("host memory per pod, {n} pods at once"),
            "MiB",
            MEMORY_GOAL,
        ),
        (
            "rss_n_total",
            format!("host memory of the runtime, {n} pods at once"),
            "MiB",
            "—",
        ),
    ];
    let cell = |h: &str, k: &str| -> (String, Option<f64>) {
        let Some(f) = figs.get(h) else {
            return ("—".into(), None);
        };
        if f.error.is_some() {
            return ("not run".into(), None);
        }
        match f.samples.get(k) {
            Some(v) if v.len() > 1 => {
                (format!("{:.2} ({:.2})", median(v), p90(v)), Some(median(v)))
            }
            Some(v) if v.len() == 1 => (format!("{:.2}", v[0]), Some(v[0])),
            _ => ("—".into(), None),
        }
    };
    let sandbox_mode = figs.contains_key(cri::SANDBOX_HANDLER);
    let mut md = if sandbox_mode {
        String::from(
            "| what | podinit task mode, median (p90) | podinit Sandbox mode, median (p90) | runc handler, median (p90) | task / runc | Sandbox / runc | goal |\n\
             | --- | --- | --- | --- | --- | --- | --- |\n",
        )
    } else {
        String::from(
            "| what | podinit median (p90) | runc handler median (p90) | podinit/runc | goal |\n\
             | --- | --- | --- | --- | --- |\n",
        )
    };
    let mut json = serde_json::Map::new();
    for (k, what, unit, goal) in &rows {
        let (r, rm) = cell("runc", k);
        let ratio = |pm: Option<f64>| match (pm, rm) {
            (Some(p), Some(r)) if r > 0.0 => format!("{:.2}", p / r),
            _ => "—".into(),
        };
        // "not run" and "—" take no unit.
        let with_unit = |v: String| {
            if v == "not run" || v == "—" {
                v
            } else {
                format!("{v} {unit}")
            }
        };
        let (p, pm) = cell("podinit", k);
        if sandbox_mode {
            let (s, sm) = cell(cri::SANDBOX_HANDLER, k);
            md.push_str(&format!(
                "| {what} | {} | {} | {} | {} | {} | {goal} |\n",
                with_unit(p),
                with_unit(s),
                with_unit(r),
                ratio(pm),
                ratio(sm)
            ));
        } else {
            md.push_str(&format!(
                "| {what} | {} | {} | {} | {goal} |\n",
                with_unit(p),
                with_unit(r),
                ratio(pm)
            ));
        }
        let mut o = serde_json::Map::new();
        for (h, f) in figs {
            o.insert(
                h.to_string(),
                serde_json::json!({
                    "samples": f.samples.get(k).cloned().unwrap_or_default(),
                    "error": f.error,
                }),
            );
        }
        o.insert("what".into(), serde_json::json!(what));
        o.insert("unit".into(), serde_json::json!(unit));
        json.insert(k.to_string(), serde_json::Value::Object(o));
    }
    for (h, f) in figs {
        if let Some(e) = &f.error {
            let e = e.split_whitespace().collect::<Vec<_>>().join(" ");
            md.push_str(&format!("\nThe {h} handler did not run: {e}\n"));
        }
    }
    let json = serde_json::json!({
        "rounds": a.rounds,
        "pods": a.pods,
        "rows": json,
    });
    print!("{md}");
    if let Some(p) = &a.md {
        std::fs::write(p, &md).unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    if let Some(p) = &a.update {
        let head = format!(
            "the handlers in one private containerd, raw CRI calls. Median (p90). Load \
             average (1, 5, 15 min) at the end: {}.",
            density::loadavg()
        );
        update_section(p, daemon, "cri-bench", &head, &md);
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&json).unwrap())
            .unwrap_or_else(|e| panic!("{p}: {e}"));
    }
}

/// Replace what lies between the `<!-- MARK -->` and `<!-- /MARK -->` lines of `path`
/// with `table`, headed by the run's commit, machine and containerd, then `head`.
fn update_section(path: &str, daemon: &cri::Containerd, mark: &str, head: &str, table: &str) {
    let (start, end) = (format!("<!-- {mark} -->\n"), format!("<!-- /{mark} -->"));
    let old = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (Some(i), Some(j)) = (old.find(&start), old.find(&end)) else {
        panic!("{path} has no {start:?} … {end:?} section");
    };
    let rev = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let head = format!(
        "`scripts/bench` (as root), commit {rev}, {cores} cores, containerd {}; {head}\n\n",
        containerd_version(daemon)
    );
    let new = format!("{}{start}{head}{table}{}", &old[..i], &old[j..]);
    std::fs::write(path, new).unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// The containerd the bench runs: `PODINIT_CRI_CONTAINERD`'s when set, else containerd 2
/// when this machine has it (nodes run 2.x), else Debian's 1.6, said in one line. The
/// density bench measures containerd 2's Sandbox mode and fails without it.
fn daemon(density: bool) -> cri::Containerd {
    if std::env::var_os("PODINIT_CRI_CONTAINERD").is_some() {
        return cri::Containerd::from_env();
    }
    match cri::Containerd::v2() {
        Some(d) => d,
        None if density => panic!(
            "cri bench --density: the Sandbox mode needs containerd 2: no \
             shared/containerd-2/bin/containerd above the crate and no PODINIT_CONTAINERD2"
        ),
        None => {
            eprintln!("cri bench: no containerd 2 here (shared/containerd-2): containerd 1.6");
            cri::Containerd::V1_6
        }
    }
}

fn containerd_version(daemon: &cri::Containerd) -> String {
    std::process::Command::new(daemon.program("containerd"))
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .nth(2)
                .map(str::to_string)
        })
        .unwrap_or_default()
}
