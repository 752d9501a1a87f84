//! The CRI's own conformance suite, critest (cri-tools), on a private containerd for the
//! runc handler and podinit's in the same run: podinit must pass every spec that runc
//! passes there, in task mode and, on containerd 2, in Sandbox mode (docs/cri.md §6). Runs
//! on containerd 1.6 (Debian's) and on containerd 2 when the shared test tools hold it
//! (tests/common/cri.rs finds them); critest comes from the same tools.
//!
//! critest's images are stand-ins made from busybox (scripts/make-critest-images), served
//! by a loopback registry that the lab's containerd uses as the mirror of registry.k8s.io,
//! gcr.io and docker.io. A spec whose stand-in falls short fails on both handlers alike.
//! Set `PODINIT_CRITEST_KEEP=DIR` to keep the junit reports in DIR, and
//! `PODINIT_CRITEST_FOCUS=REGEX` to run only the specs it matches (ginkgo's focus), and
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

/// A whole critest run for one handler: about a minute on an idle machine, ten where
/// other builds and tests share its two cores.
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

fn count(s: &BTreeMap<String, String>, status: &str) -> usize {
    s.values().filter(|v| *v == status).count()
}

/// critest against the lab's CRI for `handler`, its specs in the order `seed` gives:
/// their statuses.
fn run_critest(critest: &Path, lab: &Lab, handler: &str, seed: u64) -> BTreeMap<String, String> {
    let report = lab.dir.join(format!("junit-{handler}.xml"));
    let endpoint = format!("unix://{}", lab.sock.display());
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
        .args(
            std::env::var("PODINIT_CRITEST_FOCUS")
                .map(|f| format!("--ginkgo.focus={f}"))
                .ok(),
        )
        .current_dir(&lab.dir)
        .output_within(CRITEST_LIMIT + Duration::from_secs(30));
    let junit = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "critest for {handler} on {} wrote no report ({e}): {}\n{}",
            lab.daemon.label(),
            String::from_utf8_lossy(&out.stdout),
            lab.log_tail()
        )
    });
    if let Some(keep) = std::env::var_os("PODINIT_CRITEST_KEEP") {
        let tag = lab.daemon.label().replace(' ', "-");
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::copy(
            &report,
            Path::new(&keep).join(format!("{tag}-{handler}.xml")),
        );
        let _ = std::fs::write(
            Path::new(&keep).join(format!("{tag}-{handler}.log")),
            &out.stdout,
        );
    }
    let s = statuses(&junit);
    assert!(
        count(&s, "passed") > 0,
        "critest for {handler} on {} passed nothing: {}",
        lab.daemon.label(),
        String::from_utf8_lossy(&out.stdout)
    );
    s
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
    // Every handler runs the specs in one order, each in a containerd of its own: the
    // stand-ins share one image, so what an image spec sees depends on the specs before it.
    let seed = std::env::var("PODINIT_CRITEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs() % 100_000)
        });
    eprintln!("critest: ginkgo seed {seed} (PODINIT_CRITEST_SEED repeats it)");
    let mut problems = Vec::new();
    for daemon in daemons {
        // containerd 2 has podinit's Sandbox mode too (docs/cri.md §6).
        let mut handlers = HANDLERS.to_vec();
        if matches!(daemon, Containerd::V2(_)) {
            handlers.push(SANDBOX_HANDLER);
        }
        let label = daemon.label();
        let runs: Vec<BTreeMap<String, String>> = handlers
            .iter()
            .map(|h| {
                let lab = Lab::with("critest", daemon.clone(), Some(registry.host()));
                run_critest(&critest, &lab, h, seed)
            })
            .collect();
        for (h, s) in handlers.iter().zip(&runs) {
            eprintln!(
                "critest on {label}, {h} handler: {} passed, {} failed, {} skipped",
                count(s, "passed"),
                count(s, "failed") + count(s, "timedout") + count(s, "panicked"),
                count(s, "skipped") + count(s, "pending"),
            );
        }
        let runc = &runs[0];
        for (h, podinit) in handlers.iter().zip(&runs).skip(1) {
            for (spec, status) in runc {
                let theirs = podinit.get(spec).map(String::as_str).unwrap_or("missing");
                if status == "passed" && theirs != "passed" {
                    problems.push(format!("{label}: {spec}: runc passed, {h} {theirs}"));
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
</testcase><testcase name="[It] b &quot;x&quot;" classname="critest" status="failed" time="2"><failure message="m"></failure></testcase>
<testcase name="[It] c" status="skipped"></testcase></testsuite>"#;
    let s = statuses(junit);
    assert_eq!(s.len(), 3);
    assert_eq!(s["[It] a spec"], "passed");
    assert_eq!(s["[It] b &quot;x&quot;"], "failed");
    assert_eq!(count(&s, "skipped"), 1);
}
