//! The CRI's own conformance suite, critest (cri-tools), on private containerds for the
//! runc handler and podinit's in the same run, all at once: podinit must pass every spec
//! that runc passes on the same containerd, in task mode and, on containerd 2, in Sandbox
//! mode (docs/cri.md §6). Runs on containerd 1.6 (Debian's) and on containerd 2 when the
//! shared test tools hold it (tests/common/cri.rs finds them); critest comes from the same
//! tools.
//!
//! critest's images are stand-ins made from busybox (scripts/make-critest-images), served
//! by a loopback registry that the lab's containerd uses as the mirror of registry.k8s.io,
//! gcr.io and docker.io. A spec whose stand-in falls short fails on both handlers alike.
//! Set `PODINIT_CRITEST_KEEP=DIR` to keep the junit reports in DIR, and
//! `PODINIT_CRITEST_FOCUS=REGEX` to run only the specs it matches (ginkgo's focus), and
//! `PODINIT_CRITEST_JOBS=N` to run N handlers' critest at a time, and
//! `PODINIT_CRI_CONTAINERD=1.6|2` to run on that containerd alone. Each handler runs in a
//! containerd of its own, all in the order of one ginkgo seed (printed;
//! `PODINIT_CRITEST_SEED=N` repeats it).

mod common;
#[path = "common/cri.rs"]
mod cri;
#[path = "common/cri_client.rs"]
mod cri_client;
// The registry's helpers for auth and TLS are not used here.
#[allow(dead_code)]
#[path = "common/registry.rs"]
mod registry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::OutputWithin;
use cri::{Containerd, Lab, HANDLERS, SANDBOX_HANDLER};

/// One critest invocation: a few minutes on an idle machine, several times that where
/// other runs, builds and tests share its two cores.
const CRITEST_LIMIT: Duration = Duration::from_secs(1800);

/// critest's binary from the shared test tools (`shared/cri-tools/bin` above the crate, or
/// `PODINIT_CRITEST`).
fn critest() -> Option<PathBuf> {
    std::env::var_os("PODINIT_CRITEST")
        .map(PathBuf::from)
        .or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .map(|d| d.join("shared/cri-tools/bin/critest"))
                .find(|p| p.is_file())
        })
        .filter(|p| p.is_file())
}

/// Each spec's status (`passed`, `failed`, `skipped`…) by its full name, from a ginkgo
/// junit report.
fn statuses(junit: &str) -> BTreeMap<String, String> {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let key = format!(" {name}=\"");
        let start = tag.find(&key)? + key.len();
        let len = tag[start..].find('"')?;
        Some(tag[start..start + len].to_string())
    };
    junit
        .split("<testcase ")
        .skip(1)
        .filter_map(|rest| {
            let tag = format!(" {}", &rest[..rest.find('>')?]);
            Some((attr(&tag, "name")?, attr(&tag, "status")?))
        })
        .collect()
}

/// The failure message of each spec that failed, by name, its first line: why a spec
/// runc passes failed on podinit's handler is then in the test's own report.
fn failures(junit: &str) -> BTreeMap<String, String> {
    junit
        .split("<testcase ")
        .skip(1)
        .filter_map(|rest| {
            let name_at = rest.find("name=\"")? + "name=\"".len();
            let name = &rest[name_at..name_at + rest[name_at..].find('"')?];
            let body = &rest[..rest.find("</testcase>").unwrap_or(rest.len())];
            let msg_at = body.find("<failure message=\"")? + "<failure message=\"".len();
            let msg = &body[msg_at..msg_at + body[msg_at..].find('"')?];
            let line = msg.replace("&#xA;", "\n").replace("&#x9;", " ");
            let line = line
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())?
                .to_string();
            Some((name.to_string(), line))
        })
        .collect()
}

fn count(s: &BTreeMap<String, String>, status: &str) -> usize {
    s.values().filter(|v| *v == status).count()
}

/// The specs that bind fixed ports on the host (critest's 12000–12003: a host port
/// mapping, port-forward listeners, a host-network web server). Two runs at once would
/// take each other's ports, so these run one run at a time, after the rest.
const FIXED_PORT_SPECS: &str =
    "runtime should support portforward|port mapping with host port and container port";

/// Which of a run's specs one critest invocation runs.
#[derive(Clone, Copy)]
enum Part {
    /// Every spec but [`FIXED_PORT_SPECS`] (narrowed by `PODINIT_CRITEST_FOCUS` if set).
    Shared,
    /// [`FIXED_PORT_SPECS`] alone.
    FixedPorts,
}

/// critest against the lab's CRI for `handler`, its specs in the order `seed` gives: the
/// statuses of `part`'s specs.
fn run_critest(
    critest: &Path,
    lab: &Lab,
    handler: &str,
    part: Part,
    seed: u64,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let tag = match part {
        Part::Shared => "shared",
        Part::FixedPorts => "fixed-ports",
    };
    let report = lab.dir.join(format!("junit-{handler}-{tag}.xml"));
    let endpoint = format!("unix://{}", lab.sock.display());
    let filter = match part {
        Part::Shared => [
            std::env::var("PODINIT_CRITEST_FOCUS")
                .ok()
                .map(|f| format!("--ginkgo.focus={f}")),
            Some(format!("--ginkgo.skip={FIXED_PORT_SPECS}")),
        ],
        Part::FixedPorts => [Some(format!("--ginkgo.focus={FIXED_PORT_SPECS}")), None],
    };
    let out = Command::new("timeout")
        .args(["-s", "KILL", &CRITEST_LIMIT.as_secs().to_string()])
        .arg(critest)
        .args([
            "--runtime-endpoint",
            &endpoint,
            "--image-endpoint",
            &endpoint,
        ])
        .args(["--runtime-handler", handler])
        .arg(format!("--ginkgo.junit-report={}", report.display()))
        .arg("--ginkgo.no-color")
        .arg(format!("--ginkgo.seed={seed}"))
        .args(filter.into_iter().flatten())
        .current_dir(&lab.dir)
        .output_within(CRITEST_LIMIT + Duration::from_secs(30));
    let junit = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "critest for {handler} on {} ({tag} specs) wrote no report ({e}): {}\n{}",
            lab.daemon.label(),
            String::from_utf8_lossy(&out.stdout),
            lab.log_tail()
        )
    });
    if let Some(keep) = std::env::var_os("PODINIT_CRITEST_KEEP") {
        let name = format!("{}-{handler}-{tag}", lab.daemon.label().replace(' ', "-"));
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::copy(&report, Path::new(&keep).join(format!("{name}.xml")));
        let _ = std::fs::write(Path::new(&keep).join(format!("{name}.log")), &out.stdout);
    }
    (statuses(&junit), failures(&junit))
}

/// One handler on one containerd: its lab, its specs' statuses so far, and the failed
/// ones' messages.
struct Run {
    lab: Lab,
    handler: &'static str,
    specs: BTreeMap<String, String>,
    failures: BTreeMap<String, String>,
}

impl Run {
    /// Runs `part` and merges its statuses over the specs that part skipped before.
    fn run(&mut self, critest: &Path, part: Part, seed: u64) {
        let started = std::time::Instant::now();
        let (found, failures) = run_critest(critest, &self.lab, self.handler, part, seed);
        self.failures.extend(failures);
        for (spec, status) in found {
            let ran = status != "skipped";
            let slot = self.specs.entry(spec).or_insert_with(|| status.clone());
            if ran {
                *slot = status;
            }
        }
        eprintln!(
            "critest on {}, {} handler: {} in {:.0?}",
            self.lab.daemon.label(),
            self.handler,
            match part {
                Part::Shared => "the shared specs",
                Part::FixedPorts => "the fixed-port specs",
            },
            started.elapsed()
        );
    }
}

#[test]
#[ignore = "needs root: a private containerd, critest, pods"]
fn critest_podinit_passes_every_spec_runc_passes() {
    common::require_root();
    let critest = critest().unwrap_or_else(|| {
        panic!(
            "critest not found: no shared/cri-tools/bin/critest above {} and no PODINIT_CRITEST",
            env!("CARGO_MANIFEST_DIR")
        )
    });
    let mut daemons = vec![Containerd::V1_6];
    match Containerd::v2() {
        _ if std::env::var_os("PODINIT_CRI_CONTAINERD").is_some() => {
            daemons = vec![Containerd::from_env()]
        }
        Some(d) => daemons.push(d),
        None => eprintln!(
            "critest: containerd 2 did not run: no shared/containerd-2/bin/containerd above {} \
             and no PODINIT_CONTAINERD2",
            env!("CARGO_MANIFEST_DIR")
        ),
    }
    let registry = registry::Registry::start("critest", &registry::Auth::None, None);
    let images = registry::TempDir::new("critest-images");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-critest-images");
    let out = Command::new(script)
        .arg(images.path())
        .output_within(common::CLIENT_LIMIT);
    assert!(
        out.status.success(),
        "scripts/make-critest-images: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = std::fs::read_to_string(images.path().join("LIST")).unwrap();
    for line in list.lines() {
        let (archive, reference) = line.split_once(' ').unwrap();
        registry.push(Path::new(archive), reference, None);
    }
    // Every handler on every containerd, each in a lab (a containerd) of its own: critest's
    // image specs pull and remove images, which two runs in one containerd would race on.
    // All run the specs in one order, so that what an image spec finds left by the specs
    // before it is the same for each. containerd 2 has podinit's Sandbox mode too
    // (docs/cri.md §6).
    let seed = std::env::var("PODINIT_CRITEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs() % 100_000)
        });
    eprintln!("critest: ginkgo seed {seed} (PODINIT_CRITEST_SEED repeats it)");
    let plan: Vec<(Containerd, &'static str)> = daemons
        .iter()
        .flat_map(|d| {
            let mut handlers = HANDLERS.to_vec();
            if matches!(d, Containerd::V2(_)) {
                handlers.push(SANDBOX_HANDLER);
            }
            handlers.into_iter().map(move |h| (d.clone(), h))
        })
        .collect();
    let mut runs: Vec<Run> = plan
        .into_iter()
        .map(|(daemon, handler)| Run {
            lab: Lab::with("critest", daemon, Some(registry.host())),
            handler,
            specs: BTreeMap::new(),
            failures: BTreeMap::new(),
        })
        .collect();
    // critest mostly waits on its specs' pods and timeouts, so the runs share the machine
    // at once (PODINIT_CRITEST_JOBS at a time; all by default); a focused run goes one at a
    // time, as a person narrowing a failure wants. The fixed-port specs follow, one run at
    // a time.
    let focused = std::env::var_os("PODINIT_CRITEST_FOCUS").is_some();
    let jobs = std::env::var("PODINIT_CRITEST_JOBS")
        .ok()
        .and_then(|j| j.parse::<usize>().ok())
        .unwrap_or(if focused { 1 } else { runs.len() })
        .max(1);
    for batch in runs.chunks_mut(jobs) {
        std::thread::scope(|s| {
            for run in batch.iter_mut() {
                let critest = &critest;
                s.spawn(move || run.run(critest, Part::Shared, seed));
            }
        });
    }
    if !focused {
        for run in &mut runs {
            run.run(&critest, Part::FixedPorts, seed);
        }
    }
    let mut problems = Vec::new();
    for run in &runs {
        let s = &run.specs;
        eprintln!(
            "critest on {}, {} handler: {} passed, {} failed, {} skipped",
            run.lab.daemon.label(),
            run.handler,
            count(s, "passed"),
            count(s, "failed") + count(s, "timedout") + count(s, "panicked"),
            count(s, "skipped") + count(s, "pending"),
        );
        assert!(
            count(s, "passed") > 0,
            "critest for {} on {} passed nothing",
            run.handler,
            run.lab.daemon.label()
        );
    }
    for runc in runs.iter().filter(|r| r.handler == HANDLERS[0]) {
        let theirs_of = runs
            .iter()
            .filter(|r| r.handler != HANDLERS[0] && r.lab.daemon == runc.lab.daemon);
        for podinit in theirs_of {
            for (spec, status) in &runc.specs {
                let theirs = podinit
                    .specs
                    .get(spec)
                    .map(String::as_str)
                    .unwrap_or("missing");
                if status == "passed" && theirs != "passed" {
                    let why = podinit
                        .failures
                        .get(spec)
                        .map_or(String::new(), |m| format!(" ({m})"));
                    problems.push(format!(
                        "{}: {spec}: runc passed, {} {theirs}{why}",
                        runc.lab.daemon.label(),
                        podinit.handler
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "specs the runc handler passes and podinit's does not:\n{}",
        problems.join("\n")
    );
}

#[test]
fn junit_statuses_are_read_by_spec_name() {
    let junit = r#"<testsuite><testcase name="[It] a spec" classname="critest" status="passed" time="1">
</testcase><testcase name="[It] b &quot;x&quot;" classname="critest" status="failed" time="2"><failure message="&#xA;  m&#xA;more"></failure></testcase>
<testcase name="[It] c" status="skipped"></testcase></testsuite>"#;
    let s = statuses(junit);
    assert_eq!(s.len(), 3);
    let f = failures(junit);
    assert_eq!(f.len(), 1);
    assert_eq!(f["[It] b &quot;x&quot;"], "m");
    assert_eq!(s["[It] a spec"], "passed");
    assert_eq!(s["[It] b &quot;x&quot;"], "failed");
    assert_eq!(count(&s, "skipped"), 1);
}
