//! The CRI benchmark of issue 25 (scripts/bench runs it; BENCHMARKS.md shows it): the
//! runc and podinit handlers side by side in one private containerd (tests/common/cri.rs),
//! through raw CRI calls.
//!
//! Rows: RunPodSandbox, CreateContainer + StartContainer, the whole pod (from
//! RunPodSandbox to its container running), ExecSync of `true`, each the median of
//! `--rounds` pods made and removed one at a time, the handlers interleaved; then the
//! same with `--pods` pods at once; and the host memory the runtime adds per pod: the
//! summed RSS of the pod's shim, its sandbox process and their descendants but the
//! containers' own (runc: containerd-shim-runc-v2 and pause; podinit: the shim and
//! podinit's pause), with one pod and with `--pods` at once, read once the pod settled.
//!
//! `cargo bench --bench cri -- [--rounds N] [--pods N] [--json FILE] [--md FILE]
//! [--update BENCHMARKS.md]`, as root. `--update` replaces the table between the file's
//! `<!-- cri-bench -->` and `<!-- /cri-bench -->` lines.
//! A handler whose pods cannot run (podinit before its shim exists) gets its error in the
//! table instead of figures.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/cri.rs"]
mod cri;
#[path = "../tests/common/cri_client.rs"]
mod cri_client;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use cri::{container_pid, sandbox_identity, Lab};

struct Args {
    rounds: usize,
    pods: usize,
    json: Option<String>,
    md: Option<String>,
    update: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        rounds: 20,
        pods: 20,
        json: None,
        md: None,
        update: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--rounds" => a.rounds = val().parse().expect("--rounds N"),
            "--pods" => a.pods = val().parse().expect("--pods N"),
            "--json" => a.json = Some(val()),
            "--md" => a.md = Some(val()),
            "--update" => a.update = Some(val()),
            // cargo bench passes --bench to a bench without libtest's harness.
            "--bench" => {}
            other => panic!("cri bench: unknown argument {other}"),
        }
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
    let c = lab.cri();
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

fn exec_ms(lab: &Lab, pod: &Pod) -> f64 {
    let t = Instant::now();
    let r = lab
        .cri()
        .exec_sync(&pod.container, &["true"], 10)
        .expect("ExecSync");
    assert_eq!(r.exit_code, 0, "ExecSync true: {r:?}");
    ms(t.elapsed())
}

fn remove(lab: &Lab, pod: &Pod) {
    lab.cri().stop_pod(&pod.id).expect("StopPodSandbox");
    lab.cri().remove_pod(&pod.id).expect("RemovePodSandbox");
}

/// The parent of every process now.
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
    let parents = parents();
    let containers: Vec<i32> = pods
        .iter()
        .map(|p| container_pid(lab, &p.container))
        .collect();
    let mut roots: Vec<i32> = lab.shims().into_iter().map(|(p, _)| p).collect();
    roots.extend(pods.iter().map(|p| sandbox_identity(lab, &p.id).0 .0));
    let under = |pid: i32, roots: &[i32]| {
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
    };
    let mut sum = 0;
    for &pid in parents.keys() {
        if under(pid, &roots) && !under(pid, &containers) {
            // A process may end while it is read: it adds nothing then.
            if std::fs::metadata(format!("/proc/{pid}/smaps_rollup")).is_ok() {
                sum += common::usage(pid).rss_kib;
            }
        }
    }
    sum
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
    let lab = Lab::new("bench");
    let mut figs: BTreeMap<&str, Figures> = cri::HANDLERS
        .iter()
        .map(|h| (*h, Figures::default()))
        .collect();
    // A first pod per handler, untimed: images' snapshots, binaries and caches warm.
    for h in cri::HANDLERS {
        match start_pod(&lab, h) {
            Ok(p) => remove(&lab, &p),
            Err(e) => {
                eprintln!("cri bench: the {h} handler cannot run a pod: {e}");
                figs.get_mut(h).unwrap().error = Some(e);
            }
        }
    }
    let live: Vec<&str> = cri::HANDLERS
        .iter()
        .copied()
        .filter(|h| figs[h].error.is_none())
        .collect();
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
    report(&a, &figs);
}

fn report(a: &Args, figs: &BTreeMap<&str, Figures>) {
    let n = a.pods;
    let rows: Vec<(&str, String, &str, &str)> = vec![
        ("sandbox", "RunPodSandbox".into(), "ms", "≤ 0.5 × runc"),
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
            "≤ 0.5 × runc",
        ),
        ("exec_sync", "ExecSync of `true`".into(), "ms", "—"),
        (
            "rss_1",
            "host memory per pod (runtime RSS), one pod".into(),
            "MiB",
            "≤ 3 MiB and ≤ 0.25 × runc",
        ),
        (
            "sandbox_n",
            format!("RunPodSandbox, {n} pods at once"),
            "ms",
            "≤ 0.5 × runc",
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
            "≤ 0.5 × runc",
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
            "≤ 3 MiB and ≤ 0.25 × runc",
        ),
        (
            "rss_n_total",
            format!("host memory of the runtime, {n} pods at once"),
            "MiB",
            "—",
        ),
    ];
    let cell = |h: &str, k: &str| -> (String, Option<f64>) {
        let f = &figs[h];
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
    let mut md = String::from(
        "| what | podinit median (p90) | runc handler median (p90) | podinit/runc | goal |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    let mut json = serde_json::Map::new();
    for (k, what, unit, goal) in &rows {
        let (p, pm) = cell("podinit", k);
        let (r, rm) = cell("runc", k);
        let ratio = match (pm, rm) {
            (Some(p), Some(r)) if r > 0.0 => format!("{:.2}", p / r),
            _ => "—".into(),
        };
        // "not run" takes no unit.
        let with_unit = |v: String| {
            if v == "not run" {
                v
            } else {
                format!("{v} {unit}")
            }
        };
        let (p, r) = (with_unit(p), with_unit(r));
        md.push_str(&format!("| {what} | {p} | {r} | {ratio} | {goal} |\n"));
        let mut o = serde_json::Map::new();
        for h in cri::HANDLERS {
            o.insert(
                h.to_string(),
                serde_json::json!({
                    "samples": figs[h].samples.get(k).cloned().unwrap_or_default(),
                    "error": figs[h].error,
                }),
            );
        }
        o.insert("what".into(), serde_json::json!(what));
        o.insert("unit".into(), serde_json::json!(unit));
        json.insert(k.to_string(), serde_json::Value::Object(o));
    }
    for h in cri::HANDLERS {
        if let Some(e) = &figs[h].error {
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
        update_section(p, &md);
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&json).unwrap())
            .unwrap_or_else(|e| panic!("{p}: {e}"));
    }
}

/// Replace what lies between the CRI bench's markers in `path` with `table`, headed by
/// the run's commit and machine.
fn update_section(path: &str, table: &str) {
    let (start, end) = ("<!-- cri-bench -->\n", "<!-- /cri-bench -->");
    let old = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (Some(i), Some(j)) = (old.find(start), old.find(end)) else {
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
        "`scripts/bench` (as root), commit {rev}, {cores} cores, containerd {}; both \
         handlers in one private containerd, raw CRI calls. Median (p90).\n\n",
        containerd_version()
    );
    let new = format!("{}{start}{head}{table}{}", &old[..i], &old[j..]);
    std::fs::write(path, new).unwrap_or_else(|e| panic!("{path}: {e}"));
}

fn containerd_version() -> String {
    std::process::Command::new("containerd")
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
