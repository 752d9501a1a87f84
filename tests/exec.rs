//! `podinit exec` and `POST /v1/containers/NAME/exec` (issue 6) on the real binary.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

fn exec(p: &TestPod, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .arg("exec")
        .args(args)
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exec_runs_in_the_container_and_returns_its_output_and_exit_code() {
    if !require_root() {
        return;
    }
    let mut p = TestPod::new(
        "exec",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "echo here > /tmp/mine; exec sleep 1000"]
    securityContext: {runAsUser: 4321}
  - {name: done, image: busybox, command: ["true"]}
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["running"].is_object()
            && container_status(v, "done")["state"]["terminated"].is_object()
    });
    let (code, out, err) = exec(
        &p,
        &[
            "c",
            "--",
            "sh",
            "-c",
            "cat /tmp/mine; id -u; hostname; echo oops >&2; exit 7",
        ],
    );
    assert_eq!(code, 7, "{err}");
    assert_eq!(out, format!("here\n4321\n{}\n", p.name));
    assert_eq!(err, "oops\n");
    // Its own pid namespace: the container's main process is PID 1 there.
    let (code, out, _) = exec(&p, &["c", "--", "cat", "/proc/1/cmdline"]);
    assert_eq!((code, out.as_str()), (0, "sleep\u{0}1000\u{0}"));

    let (code, _, err) = exec(&p, &["c", "--", "no-such-command"]);
    assert_eq!(code, 126);
    assert!(err.contains("no-such-command"), "{err}");
    let (code, _, err) = exec(&p, &["nope", "--", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("container \"nope\" not found"), "{err}");
    let (code, _, err) = exec(&p, &["done", "--", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("is not running"), "{err}");
    let (code, _, err) = exec(&p, &["c", "--timeout", "1", "--", "sleep", "30"]);
    assert_eq!(code, 1);
    assert!(err.contains("timed out after 1s"), "{err}");

    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}
