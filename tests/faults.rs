//! Faults a pod supervisor meets on a real node, each on the real binary: the state
//! directory's filesystem full, the fd limit reached while many probes run, the supervisor
//! stopped and continued, 10,000 forks under a pids limit, a 100 MiB line with no newline.
//! Each asserts what the pod's status says afterwards, that nothing was lost, and that
//! nothing is left. (The wall clock stepped: the supervisor's timing reads only the
//! monotonic clock, shown by unit tests; see tests/REPORT.md §Faults for why the machine's
//! clock is not stepped here.)

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// Wait (bounded) until the pod's socket is up: the API is what these tests watch.
fn wait_socket(p: &TestPod) {
    let deadline = Instant::now() + LIMIT;
    while std::os::unix::net::UnixStream::connect(p.state.join("pod.sock")).is_err() {
        assert!(Instant::now() < deadline, "the pod's socket never came up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The soft limit of open files of process `pid`.
fn soft_nofile(pid: i32) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().to_string()
}

/// Set the soft limit of open files of `pid` (the hard one stays: raising it back would
/// need CAP_SYS_RESOURCE).
fn set_soft_nofile(pid: i32, soft: &str) {
    let out = std::process::Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={soft}:"))
        .output_within(CLIENT_LIMIT);
    assert!(
        out.status.success(),
        "prlimit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every line of a CRI log file is a whole record: time, stream, tag, content.
fn assert_cri_records(path: &Path) -> usize {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut n = 0;
    for (i, l) in text.split(|&b| b == b'\n').enumerate() {
        if l.is_empty() {
            continue;
        }
        let f: Vec<&[u8]> = l.splitn(4, |&b| b == b' ').collect();
        assert!(
            f.len() >= 3
                && (f[1] == b"stdout" || f[1] == b"stderr")
                && (f[2] == b"F" || f[2] == b"P"),
            "{} line {i} is no CRI record: {:?}",
            path.display(),
            String::from_utf8_lossy(&l[..l.len().min(120)])
        );
        n += 1;
    }
    assert!(
        text.is_empty() || text.ends_with(b"\n"),
        "{}: a half-written record at the end",
        path.display()
    );
    n
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_full_state_dir_loses_log_lines_but_never_the_status_or_the_events() {
    require_root();
    // A restarting container fills the state dir with its log, then goes on exiting and
    // being restarted (each restart an event and a status) while the disk stays full.
    let mut p = TestPod::new(
        "enospc",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: filler
    image: busybox
    command: ["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo done; exit 3"]
  - name: idle
    image: busybox
    command: ["sleep", "600"]
"#,
    );
    p.state_on_tmpfs("1m");
    let mut cmd = p.command();
    cmd.args(["--max-restart-backoff", "1"]);
    p.start_with(cmd);
    wait_socket(&p);
    // The restarts go on with the disk full: the socket tells them.
    let deadline = Instant::now() + LIMIT;
    let restarts = loop {
        let (code, pod) = api(&p, "GET", "/v1/pod", None);
        assert_eq!(code, 200, "{pod}");
        let n = container_status(&pod, "filler")["restartCount"]
            .as_u64()
            .unwrap_or(0);
        if n >= 1 {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "the filler never restarted: {pod}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let df = nix::sys::statvfs::statvfs(&p.state).unwrap();
    eprintln!(
        "state dir full: {} blocks free, filler restarted {restarts} times",
        df.blocks_available()
    );
    assert!(df.blocks_available() < 2, "the state dir is not full");
    p.signal(libc::SIGTERM);
    // With no room, the final status cannot be written until some is made: the run waits
    // (retrying), and says so. Make room as an operator would, by removing old logs.
    let deadline = Instant::now() + LIMIT;
    let events_before = std::fs::read_to_string(p.state.join("events.jsonl")).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(2));
    for e in std::fs::read_dir(p.state.join("logs/filler"))
        .unwrap()
        .flatten()
    {
        std::fs::OpenOptions::new()
            .write(true)
            .open(e.path())
            .unwrap()
            .set_len(0)
            .unwrap();
    }
    let out = p.wait(deadline.saturating_duration_since(Instant::now()));
    assert_eq!(
        out.code, 1,
        "a killed container fails the pod: {}",
        out.stderr
    );
    let v = &out.status;
    assert_eq!(v["status"]["phase"], "Failed", "{v}");
    for c in ["filler", "idle"] {
        assert!(
            container_status(v, c)["state"]["terminated"].is_object(),
            "{c} not terminated in the final status: {v}"
        );
    }
    assert!(
        container_status(v, "filler")["restartCount"].as_u64() >= Some(restarts),
        "{v}"
    );
    // The events: every line whole JSON, and those written before the disk was freed kept.
    let events = std::fs::read_to_string(p.state.join("events.jsonl")).unwrap();
    for l in events.lines() {
        serde_json::from_str::<serde_json::Value>(l)
            .unwrap_or_else(|e| panic!("events.jsonl holds a broken line ({e}): {l}"));
    }
    assert!(
        events.starts_with(events_before.trim_end_matches(|c| c != '\n')),
        "events written before were lost"
    );
    assert!(
        events.contains("\"Killing\""),
        "the stop's events were not written once there was room: {events}"
    );
    // The idle container's log and the filler's are whole records.
    for e in std::fs::read_dir(p.state.join("logs/filler"))
        .unwrap()
        .flatten()
    {
        assert_cri_records(&e.path());
    }
    eprintln!("stderr of the run: {}", out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn fifty_probes_at_the_fd_limit_fail_as_probes_and_the_supervisor_lives() {
    require_root();
    // 17 containers with a liveness, readiness and startup exec probe each: 51 probes,
    // each run every second. The supervisor's fd limit is then lowered below what they
    // need: probes fail (a probe error, as kubelet reports one), nothing else does.
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n",
    );
    for i in 0..17 {
        yaml.push_str(&format!(
            "  - name: c{i}\n    image: busybox\n    command: [\"sleep\", \"600\"]\n    \
             livenessProbe: {{exec: {{command: [\"true\"]}}, periodSeconds: 1, failureThreshold: 1000}}\n    \
             readinessProbe: {{exec: {{command: [\"true\"]}}, periodSeconds: 1}}\n    \
             startupProbe: {{exec: {{command: [\"true\"]}}, periodSeconds: 1, failureThreshold: 1000}}\n"
        ));
    }
    let mut p = TestPod::new("emfile", &yaml);
    p.start();
    let v = p.wait_status(LIMIT, |v| {
        v["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|a| a.len() == 17 && a.iter().all(|c| c["ready"] == true))
    });
    assert_eq!(v["status"]["phase"], "Running");
    let sup = supervisor_pid(&p);
    let open = usage(sup).fds;
    // Room for what is open now and a few more: fewer than 51 probes need at once.
    let limit = open + 8;
    let soft = soft_nofile(sup);
    set_soft_nofile(sup, &limit.to_string());
    // Over a few periods the probes hit the limit. On a loaded machine a probe may time
    // out first (its own Unhealthy event): the wait is for one that names the limit.
    let deadline = Instant::now() + LIMIT;
    let mut unhealthy = false;
    while Instant::now() < deadline {
        let evs = events(&p);
        let mut failed = evs.iter().filter(|e| e["reason"] == "Unhealthy").peekable();
        unhealthy |= failed.peek().is_some();
        if failed.any(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("Too many open files"))
        }) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let errors: Vec<String> = events(&p)
        .iter()
        .filter(|e| e["reason"] == "Unhealthy")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    let mut kinds = errors.clone();
    kinds.sort();
    kinds.dedup();
    eprintln!(
        "fd limit {limit} ({open} open): {} Unhealthy events, their messages: {kinds:?}",
        errors.len(),
    );
    assert!(unhealthy, "no probe ever failed at an fd limit of {limit}");
    // A probe that could not even start says so in kubelet's words, with the cause.
    assert!(
        kinds.iter().any(
            |m| m.contains("probe errored and resulted in unknown state: ")
                && m.contains("Too many open files")
        ),
        "no probe event names the fd limit: {kinds:?}"
    );
    // The supervisor still serves (an accept at the limit is retried, not spun on or
    // fatal), and once the limit is raised again every probe passes.
    let t0 = Instant::now();
    let (code, pod) = api(&p, "GET", "/v1/pod", None);
    assert_eq!(code, 200, "{pod}");
    assert_eq!(pod["status"]["phase"], "Running", "{pod}");
    eprintln!("GET /v1/pod at the fd limit answered in {:?}", t0.elapsed());
    let t0 = Instant::now();
    set_soft_nofile(sup, &soft);
    let v2 = p.wait_status(LIMIT, |v| {
        v["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|a| a.iter().all(|c| c["ready"] == true))
    });
    let (code, _) = api(&p, "GET", "/healthz", None);
    assert_eq!(code, 200);
    eprintln!("ready again {:?} after the limit was raised", t0.elapsed());
    // Liveness never killed a container (its threshold was not reached), the pod ran on.
    for i in 0..17 {
        let c = container_status(&v2, &format!("c{i}"));
        assert_eq!(c["restartCount"], 0, "{c}");
        assert!(c["state"]["running"].is_object(), "{c}");
    }
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        !out.stderr.to_lowercase().contains("panic"),
        "{}",
        out.stderr
    );
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_stopped_supervisor_catches_up_when_continued() {
    require_root();
    // While the supervisor is stopped a container exits and probes are due. Continued, it
    // records the exit, restarts the container, and counts no probe failure that the
    // containers did not cause.
    let mut p = TestPod::new(
        "sigstop",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: probed
    image: busybox
    command: ["sleep", "600"]
    livenessProbe: {exec: {command: ["true"]}, periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 1}
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1, timeoutSeconds: 1}
  - name: quitter
    image: busybox
    command: ["sh", "-c", "sleep 2; exit 4"]
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        v["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|a| a.iter().all(|c| c["ready"] == true))
    });
    let sup = supervisor_pid(&p);
    let stop_for = Duration::from_secs(
        std::env::var("PODINIT_SIGSTOP_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(10),
    );
    // SAFETY: kill(2) of this test's own pod's supervisor.
    unsafe { libc::kill(sup, libc::SIGSTOP) };
    let stopped_at = Instant::now();
    std::thread::sleep(stop_for);
    // SAFETY: as above.
    unsafe { libc::kill(sup, libc::SIGCONT) };
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "quitter")["restartCount"].as_u64() >= Some(1)
    });
    let caught_up = stopped_at.elapsed().saturating_sub(stop_for);
    eprintln!("stopped {stop_for:?}: caught up {caught_up:?} after SIGCONT");
    let q = container_status(&v, "quitter");
    let last = &q["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 4, "{q}");
    // Times stay in order, and none lies in the future.
    let t = |s: &serde_json::Value| {
        s.as_str()
            .map(|s| s.to_string())
            .unwrap_or_else(|| panic!("no time: {q}"))
    };
    assert!(t(&last["startedAt"]) <= t(&last["finishedAt"]), "{q}");
    let probed = container_status(&v, "probed");
    assert_eq!(
        probed["restartCount"], 0,
        "a stop of the supervisor killed a healthy container: {probed}"
    );
    // Probes run again and pass.
    p.wait_status(LIMIT, |v| container_status(v, "probed")["ready"] == true);
    let unhealthy: Vec<_> = events(&p)
        .into_iter()
        .filter(|e| e["reason"] == "Unhealthy")
        .collect();
    assert!(
        unhealthy.is_empty(),
        "probe failures the container did not cause: {unhealthy:?}"
    );
    let (code, _) = api(&p, "GET", "/healthz", None);
    assert_eq!(code, 200);
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn ten_thousand_forks_under_a_pids_limit_end_and_leave_nothing() {
    require_root();
    // A bomb fills the pids limit of 128 with sleeps until a fork is refused (busybox sh
    // ends at a refused fork); they are killed, then 10 workers fork and reap 1,000
    // processes each under the same limit.
    let mut p = TestPod::new(
        "forks",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: forker
    image: BUNDLE
    command: ["sh", "-c", "(while :; do sleep 30 & done) 2>/dev/null; killall sleep; wait; for j in 0 1 2 3 4 5 6 7 8 9; do (i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done; echo worker $j forked $i) & done; wait; echo forked; sleep 1; exit 0"]
"#,
    );
    let b = bundle_copy(&p, "pids-bundle", |c| {
        c["linux"]["resources"] = serde_json::json!({"pids": {"limit": 128}});
    });
    set_bundle(&p, &b);
    p.start();
    wait_socket(&p);
    let mut peak = 0u64;
    let mut refused = 0u64;
    let mut cg = None;
    let t0 = Instant::now();
    let v = loop {
        if cg.is_none() {
            cg = find_container_cgroup(&p, "forker", "pids.max");
        }
        if let Some(cg) = &cg {
            if let Ok(c) = std::fs::read_to_string(cg.join("pids.current")) {
                peak = peak.max(c.trim().parse().unwrap_or(0));
            }
            if let Ok(e) = std::fs::read_to_string(cg.join("pids.events")) {
                refused = e
                    .lines()
                    .find_map(|l| l.strip_prefix("max "))
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(refused);
            }
        }
        let pod = std::fs::read(p.state.join("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .unwrap_or_default();
        if pod["status"]["containerStatuses"][0]["state"]["terminated"].is_object() {
            break pod;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the forker never ended: {pod}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!(
        "a bomb and 10,000 forks under pids.max 128: peak {peak}, {refused} refused, ended in {:?}",
        t0.elapsed()
    );
    assert!(peak <= 128, "pids.current reached {peak}");
    assert!(refused > 0, "no fork was refused: the limit did not bite");
    let t = &container_status(&v, "forker")["state"]["terminated"];
    assert_eq!(t["exitCode"], 0, "{v}");
    let log = p.log("forker", 0);
    for j in 0..10 {
        assert!(log.contains(&format!("worker {j} forked 1000")), "{log}");
    }
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_100_mib_line_is_split_into_16_kib_records_in_bounded_memory() {
    require_root();
    let mut p = TestPod::new(
        "longline",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: long
    image: busybox
    command: ["sh", "-c", "sleep 1; head -c 104857600 /dev/zero | tr '\\0' x; sleep 1; echo; echo end"]
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| all_running(v, 1));
    let sup = supervisor_pid(&p);
    let before = usage(sup);
    let mut peak = before.anon_kib;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(u) = std::panic::catch_unwind(|| usage(sup)) {
            peak = peak.max(u.anon_kib);
        }
        let st = std::fs::read(p.state.join("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        if st.is_some_and(|v| container_status(&v, "long")["state"]["terminated"].is_object()) {
            break;
        }
        assert!(Instant::now() < deadline, "the 100 MiB line never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "100 MiB line: supervisor anonymous memory {} KiB before, peak {} KiB",
        before.anon_kib, peak
    );
    // A 64 KiB read buffer and a 16 KiB line piece at a time: never the line.
    assert!(
        peak < before.anon_kib + 8 * 1024,
        "memory grew by {} KiB with the line",
        peak - before.anon_kib
    );
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // Rotated at 10 MiB, 5 files: the newest 50 MiB or so of the line kept, as 16 KiB
    // partial records, then the line's end and "end" as full ones.
    let dir = p.state.join("logs/long");
    let mut kept = 0usize;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let size = e.metadata().unwrap().len();
        assert!(size <= 11 << 20, "{} is {size} bytes", e.path().display());
        assert_cri_records(&e.path());
        let text = std::fs::read(e.path()).unwrap();
        for l in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let f: Vec<&[u8]> = l.splitn(4, |&b| b == b' ').collect();
            let content = f.get(3).copied().unwrap_or(b"");
            assert!(
                content.len() <= 16 << 10,
                "a record of {} bytes",
                content.len()
            );
            if f[2] == b"P" {
                assert_eq!(content.len(), 16 << 10, "a short partial record");
            }
            kept += content.len();
        }
    }
    assert!(kept > 40 << 20, "only {kept} bytes of the line kept");
    let last = std::fs::read_to_string(dir.join("0.log")).unwrap();
    let tail: Vec<&str> = last.lines().rev().take(2).collect();
    assert!(tail[0].ends_with(" stdout F end"), "{:?}", tail[0]);
    // The line's last record is a full one (empty here: 100 MiB is a whole number of
    // 16 KiB pieces), as kubelet ends a split line.
    let f: Vec<&str> = tail[1].splitn(4, ' ').collect();
    assert_eq!(f[1..3], ["stdout", "F"], "the line's end: {:?}", tail[1]);
    assert!(f.get(3).is_none_or(|c| c.bytes().all(|b| b == b'x')));
    p.assert_nothing_left();
}

/// The wall clock stepped by an hour: the supervisor's timers (back-offs, probe periods and
/// timeouts, grace periods, deadlines) are milliseconds of the monotonic clock since its
/// start, and the status's times are the start's wall time plus those milliseconds, so a
/// step changes neither. This guards that design where it could regress: in the pod's
/// logic, its probes and its supervisor, the wall clock is read in exactly two places, the
/// start's wall time and the CRI log lines' timestamps (which are wall time in kubelet's
/// logs too). Stepping the machine's clock instead would disturb every other test running
/// beside this one (TLS certificates not yet valid, containerd's leases), and
/// CLOCK_REALTIME has no namespace.
#[test]
fn the_supervisor_times_nothing_by_the_wall_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut reads = Vec::new();
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    for d in ["pod", "probe", "supervisor"] {
        walk(&root.join(d), &mut files);
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests may make times as they like.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, l) in code.lines().enumerate() {
            if [
                "SystemTime",
                "now_unix_nanos",
                "CLOCK_REALTIME",
                "jiff::Timestamp::now",
            ]
            .iter()
            .any(|w| l.contains(w))
            {
                let rel = f.strip_prefix(&root).unwrap().display().to_string();
                reads.push(format!("{rel}:{}: {}", i + 1, l.trim()));
            }
        }
    }
    let allowed = ["supervisor/mod.rs", "supervisor/output.rs"];
    let other: Vec<&String> = reads
        .iter()
        .filter(|r| !allowed.iter().any(|a| r.starts_with(a)))
        .collect();
    assert!(
        other.is_empty(),
        "wall-clock reads where timing must be monotonic: {other:#?}"
    );
    assert_eq!(
        reads.len(),
        2,
        "the start's wall time and the log timestamps only: {reads:#?}"
    );
}
