//! The Kubernetes documentation's examples on where a pod's parts come from
//! (`tests/fixtures/docs/sources/`): images named with a registry and a tag, ConfigMaps and
//! Secrets missing from the manifest, optional ones, and volume sources that need a
//! cluster. Each checks status, reason, message and events against what kubelet reports.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/docs/sources")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A bundles directory laid out as the docs name their images, every image the busybox
/// bundle: `busybox`, `nginx`, `registry.k8s.io/busybox` (no tag: the fallback) and
/// `registry.k8s.io/e2e-test-images/agnhost:2.39` (with its tag).
fn docs_bundles(p: &TestPod) -> PathBuf {
    let root = p.dir.join("bundles");
    let busybox = bundles().join("busybox");
    for name in [
        "busybox",
        "nginx",
        "registry.k8s.io/busybox",
        "registry.k8s.io/e2e-test-images/agnhost:2.39",
    ] {
        let link = root.join(name);
        if link.symlink_metadata().is_ok() {
            continue;
        }
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&busybox, &link).unwrap();
    }
    root
}

/// `podinit run` of the pod with the docs' bundles.
fn run_command(p: &TestPod) -> Command {
    let mut c = Command::new(bin());
    c.arg("run")
        .arg(&p.manifest)
        .arg("--bundles")
        .arg(docs_bundles(p))
        .arg("--state-dir")
        .arg(&p.state)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn start(p: &mut TestPod) {
    let cmd = run_command(p);
    p.start_with(cmd);
}

/// The warnings of a run say the OOM score once at most, in words a user understands.
fn assert_oom_score_said_well(stderr: &str) {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("oom_score_adj") || l.contains("OOM score"))
        .collect();
    assert!(lines.len() <= 1, "{stderr}");
    for l in lines {
        assert!(
            l.starts_with("podinit: warning: oom_score_adj: cannot lower the supervisor's OOM score to -998 without CAP_SYS_RESOURCE; it keeps "),
            "{l}"
        );
    }
}

/// The `FailedMount` events recorded so far with this message.
fn failed_mounts(p: &TestPod, message: &str) -> usize {
    events(p)
        .iter()
        .filter(|e| e["reason"] == "FailedMount" && e["message"] == message)
        .inspect(|e| assert_eq!(e["type"], "Warning", "{e}"))
        .count()
}

/// A pod held back by a volume: Pending, every container waiting with `reason`, the
/// `FailedMount` event repeated with back-off (0.5 s, then 1 s), the socket answering;
/// SIGTERM ends it normally, never with a sandbox error.
fn assert_waits_for_volume(mut p: TestPod, message: &str, reason: &str, containers: &[&str]) {
    let deadline = std::time::Instant::now() + LIMIT;
    while failed_mounts(&p, message) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "no repeated FailedMount {message:?}; events: {:#?}",
            events(&p)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let v = p.wait_status(LIMIT, |v| v["status"]["phase"] == "Pending");
    for c in containers {
        let s = container_status(&v, c);
        assert_eq!(s["state"]["waiting"]["reason"], reason, "{c}: {s}");
        assert_eq!(s["restartCount"], 0, "{c}: {s}");
    }
    assert!(
        !events(&p)
            .iter()
            .any(|e| e["reason"] == "Started" || e["reason"] == "Created"),
        "a container started: {:#?}",
        events(&p)
    );
    let out = Command::new(bin())
        .args(["status", "-o", "json", "--socket"])
        .arg(p.state.join("pod.sock"))
        .output_within(Duration::from_secs(10));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let live: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(live["status"]["phase"], "Pending");
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert!(
        out.code == 0 || out.code == 1,
        "{}: {}",
        out.code,
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!(
            "cannot be set up: {}",
            message.split(" : ").nth(1).unwrap()
        )),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("setting up the sandbox"),
        "{}",
        out.stderr
    );
    assert_oom_score_said_well(&out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn images_with_registry_and_tag_are_nested_bundle_directories() {
    require_root();
    let mut p = TestPod::new("nested", &fixture("image-nested.yaml"));
    start(&mut p);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    assert_eq!(p.log("test-container", 0), "from the untagged directory");
    assert_eq!(p.log("agnhost", 0), "from the tagged directory");
    let spec = &out.status["spec"]["containers"];
    assert_eq!(spec[0]["image"], "registry.k8s.io/busybox:1.27.2");
    assert_oom_score_said_well(&out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_image_name_never_leaves_the_bundles_directory() {
    require_root();
    let (file, want) = (
        "image-escape.yaml",
        "spec.containers[0].image: Invalid value: \"registry.k8s.io/../../../etc\": an image name that is not a path",
    );
    {
        let mut p = TestPod::new("imgname", &fixture(file));
        let bundles = docs_bundles(&p);
        // From the worktree, where a relative path `oci-bundles/busybox` would exist.
        let validate = Command::new(bin())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .arg("validate")
            .arg(&p.manifest)
            .arg("--bundles")
            .arg(&bundles)
            .output_within(LIMIT);
        assert_eq!(validate.status.code(), Some(2), "{file}");
        let err = String::from_utf8_lossy(&validate.stderr).into_owned();
        assert!(err.contains(want), "{file}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        let mut cmd = run_command(&p);
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
        p.start_with(cmd);
        let out = p.wait(LIMIT);
        assert_eq!(out.code, 2, "{file}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{file}: {}", out.stderr);
        p.assert_sandbox_gone();
    }
    // A relative name with a "/" that is no bundle is an image name, never a path from the
    // working directory (where oci-bundles/busybox exists): with `Never` it waits for the
    // image store, as kubelet's container does.
    let mut p = TestPod::new("imgname", &fixture("image-relative-path.yaml"));
    let mut cmd = run_command(&p);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd.arg("--images").arg(p.state.join("no-images"));
    p.start_with(cmd);
    let s = p.wait_status(LIMIT, |s| {
        s["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImageNeverPull"
    });
    assert_eq!(
        s["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        "Container image \"oci-bundles/busybox\" is not present with pull policy of Never"
    );
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn env_from_a_missing_config_map_or_secret_is_create_container_config_error() {
    require_root();
    for (file, container, message) in [
        (
            "env-configmap-missing.yaml",
            "test-container",
            "configmap \"special-config\" not found",
        ),
        (
            "env-configmap-missing-key.yaml",
            "test-container",
            "couldn't find key special.type in ConfigMap default/special-config",
        ),
        (
            "env-secret-missing.yaml",
            "envars-test-container",
            "secret \"test-secret\" not found",
        ),
    ] {
        let mut p = TestPod::new("envsrc", &fixture(file));
        start(&mut p);
        let v = p.wait_status(LIMIT, |v| {
            v["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                == "CreateContainerConfigError"
        });
        let s = container_status(&v, container);
        assert_eq!(s["state"]["waiting"]["message"], message, "{file}");
        assert_eq!(v["status"]["phase"], "Pending", "{file}");
        wait_event(&p, "Failed", &format!("Error: {message}"));
        p.signal(libc::SIGTERM);
        let out = p.wait(LIMIT);
        assert!(out.code == 0 || out.code == 1, "{file}: {}", out.stderr);
        p.assert_nothing_left();
    }
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_volume_from_a_missing_config_map_is_failed_mount_and_the_pod_waits() {
    require_root();
    let mut p = TestPod::new("volcm", &fixture("volume-configmap-missing.yaml"));
    start(&mut p);
    assert_waits_for_volume(
        p,
        "MountVolume.SetUp failed for volume \"config-volume\" : configmap \"special-config\" not found",
        "ContainerCreating",
        &["test-container"],
    );
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_projected_volume_reports_every_missing_source_together() {
    require_root();
    let mut p = TestPod::new("volproj", &fixture("volume-projected-missing.yaml"));
    start(&mut p);
    assert_waits_for_volume(
        p,
        "MountVolume.SetUp failed for volume \"all-in-one\" : [secret \"mysecret\" not found, configmap \"myconfigmap\" not found]",
        "PodInitializing",
        &["init", "container-test"],
    );
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_host_path_of_the_wrong_type_is_failed_mount() {
    require_root();
    let mut p = TestPod::new("volhp", &fixture("volume-hostpath-wrong-type.yaml"));
    start(&mut p);
    assert_waits_for_volume(
        p,
        "MountVolume.SetUp failed for volume \"test-volume\" : hostPath type check failed: /proc/version is not a directory",
        "ContainerCreating",
        &["test-container"],
    );
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn optional_sources_may_be_missing() {
    require_root();
    let mut p = TestPod::new("optional", &fixture("optional-missing.yaml"));
    start(&mut p);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    assert_eq!(p.log("test-container", 0), "level=unset\n0\n0");
    assert!(!has_event(&p, "FailedMount", ""), "{:#?}", events(&p));
    assert_oom_score_said_well(&out.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_service_account_token_is_refused_by_validate_and_run_alike() {
    require_root();
    let want = "spec.volumes[0].projected.sources[0].serviceAccountToken: not supported";
    let mut p = TestPod::new("satoken", &fixture("projected-service-account-token.yaml"));
    let validate = Command::new(bin())
        .arg("validate")
        .arg(&p.manifest)
        .arg("--bundles")
        .arg(docs_bundles(&p))
        .output_within(LIMIT);
    assert_eq!(validate.status.code(), Some(2));
    let err = String::from_utf8_lossy(&validate.stderr);
    assert!(err.contains(want), "{err}");
    assert!(validate.stdout.is_empty());
    let cmd = run_command(&p);
    p.start_with(cmd);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains(want), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    p.assert_sandbox_gone();
}

/// The docs' envfile-test-pod: `kubectl logs envfile-test-pod -c use-envfile | grep
/// DB_ADDRESS` shows `DB_ADDRESS=address`.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_env_file_example_prints_what_its_page_shows() {
    require_root();
    let mut p = TestPod::new("envfile", &fixture("envars-file-container.yaml"));
    start(&mut p);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    let log = p.log("use-envfile", 0);
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("DB_ADDRESS")).collect();
    assert_eq!(lines, ["DB_ADDRESS=address"], "{log}");
    assert!(
        !log.contains("REST_ENDPOINT"),
        "only the key asked for: {log}"
    );
    p.assert_nothing_left();
}

/// A fileKeyRef whose file is not there: CreateContainerConfigError, the pod waits.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_missing_env_file_is_create_container_config_error() {
    require_root();
    let yaml =
        fixture("envars-file-container.yaml").replace("> /data/config.env", "> /data/other.env");
    let mut p = TestPod::new("envfilemiss", &yaml);
    start(&mut p);
    let v = p.wait_status(LIMIT, |v| {
        v["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            == "CreateContainerConfigError"
    });
    let message = "couldn't find env file \"config.env\" in volume \"config\"";
    let s = container_status(&v, "use-envfile");
    assert_eq!(s["state"]["waiting"]["message"], message);
    assert_eq!(v["status"]["phase"], "Pending");
    wait_event(&p, "Failed", &format!("Error: {message}"));
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    p.assert_nothing_left();
}

/// The docs' ml-worker: the watcher's exit 88 restarts the whole pod in place, from the
/// setup-environment init container, with the same sandbox (UID, IP).
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_ml_worker_restarts_all_its_containers_in_place() {
    require_root();
    let mut p = TestPod::new("mlworker", &fixture("restart-all-containers.yaml"));
    start(&mut p);
    let first = p.wait_status(LIMIT, |v| {
        container_status(v, "main-application")["state"]["running"].is_object()
    });
    let restarted = p.wait_status(LIMIT, |v| {
        container_status(v, "main-application")["restartCount"] == 1
            && container_status(v, "main-application")["state"]["running"].is_object()
    });
    for name in ["setup-environment", "watcher-sidecar", "main-application"] {
        let s = container_status(&restarted, name);
        assert_eq!(s["restartCount"], 1, "{name}: {s}");
    }
    assert_eq!(
        container_status(&restarted, "watcher-sidecar")["lastState"]["terminated"]["exitCode"],
        88
    );
    assert_eq!(restarted["metadata"]["uid"], first["metadata"]["uid"]);
    assert_eq!(restarted["status"]["podIPs"], first["status"]["podIPs"]);
    let c = condition(&restarted, "AllContainersRestarting");
    assert_eq!(c["status"], "False", "{c}");
    assert_eq!(p.log("setup-environment", 1), "Setting up environment");
    // The restarted container runs before its first line is in its log (a wide window
    // under emulation): the line is waited for.
    let deadline = std::time::Instant::now() + LIMIT;
    while p.log("main-application", 1).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(p.log("main-application", 1), "Application is running");
    assert!(
        events(&p)
            .iter()
            .any(|e| e["reason"] == "Killing"
                && e["message"] == "Stopping container main-application")
    );
    p.signal(libc::SIGTERM);
    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    p.assert_nothing_left();
}
