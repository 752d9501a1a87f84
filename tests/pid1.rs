//! PID-1 mode without a container runtime: `unshare --pid --fork --mount-proc` makes
//! `podinit run` PID 1 of a pid namespace it did not create (busybox's unshare does the
//! same in the pure cgroup v2 VM).

mod common;
use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn podinit_as_pid_1_uses_its_namespaces_and_its_own_cgroup() {
    require_root();
    let _leaf = LeafCleanup;
    let mut p = TestPod::new(
        "pid1",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "echo ok"]}
"#,
    );
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--pid",
        "--fork",
        "--mount",
        "--mount-proc",
        "--uts",
        "--ipc",
        "--net",
    ])
    .arg(bin())
    .arg("run")
    .arg(&p.manifest)
    .arg("--bundles")
    .arg(bundles())
    .arg("--state-dir")
    .arg(&p.state)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    p.start_with(cmd);
    let out = p.wait(Duration::from_secs(40));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status["status"]["phase"], "Succeeded");
    assert_eq!(p.log("c", 0), "ok");
    p.assert_nothing_left();
}

/// Only podinit's own leaf is left in the cgroup it was started in, as a runtime's cgroup
/// would hold it until the runtime removes it; here that cgroup is the test's: remove the
/// leaf, also when the test fails.
struct LeafCleanup;

impl Drop for LeafCleanup {
    fn drop(&mut self) {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (ctrls, path) = (parts.nth(1).unwrap_or(""), parts.next().unwrap_or(""));
            let base = if ctrls.is_empty() {
                if std::path::Path::new("/sys/fs/cgroup/unified").exists() {
                    "/sys/fs/cgroup/unified".to_string()
                } else {
                    "/sys/fs/cgroup".to_string()
                }
            } else {
                let ctrl = ctrls.split(',').next().unwrap_or("");
                format!("/sys/fs/cgroup/{}", ctrl.trim_start_matches("name="))
            };
            let leaf = std::path::Path::new(&base)
                .join(path.trim_start_matches('/'))
                .join("supervisor");
            let _ = std::fs::remove_dir(&leaf);
        }
    }
}
