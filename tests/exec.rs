//! `podinit exec` and `POST /v1/containers/NAME/exec` on the real binary.

mod common;
use common::*;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

/// `podinit SUB ARGS…` against the pod's socket: (exit code, stdout, stderr).
fn client(p: &TestPod, sub: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .arg(sub)
        .args(args)
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn exec(p: &TestPod, args: &[&str]) -> (i32, String, String) {
    client(p, "exec", args)
}

fn debug(p: &TestPod, args: &[&str]) -> (i32, String, String) {
    client(p, "debug", args)
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn exec_runs_in_the_container_and_returns_its_output_and_exit_code() {
    require_root();
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
    assert!(err.contains("container nope is not valid for pod"), "{err}");
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

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_ephemeral_debug_container_sees_its_targets_processes() {
    require_root();
    let mut p = TestPod::new(
        "debug",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: web, image: busybox, command: ["sleep", "1000"]}
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "web")["state"]["running"].is_object()
    });
    let (code, out, err) = debug(
        &p,
        &[
            "--image", "busybox", "--target", "web", "--name", "dbg", "--", "ps", "-o", "pid,args",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("sleep 1000"), "the target's processes: {out}");
    assert!(!err.contains("Defaulting"), "the name was given: {err}");
    let v = p.wait_status(LIMIT, |v| {
        v["status"]["ephemeralContainerStatuses"][0]["state"]["terminated"].is_object()
    });
    let e = &v["status"]["ephemeralContainerStatuses"][0];
    assert_eq!(e["name"], "dbg");
    assert_eq!(e["state"]["terminated"]["exitCode"], 0);
    assert_eq!(
        v["spec"]["ephemeralContainers"][0]["targetContainerName"],
        "web"
    );
    assert_eq!(v["status"]["phase"], "Running", "no part of the phase");
    assert_eq!(container_status(&v, "web")["restartCount"], 0);

    // Without a target: its own pid namespace; its exit code is debug's.
    let (code, out, err) = debug(
        &p,
        &[
            "--image",
            "busybox",
            "--",
            "sh",
            "-c",
            "head -c 2 /proc/1/cmdline; exit 3",
        ],
    );
    assert!(
        err.starts_with("Defaulting debug container name to debugger-"),
        "{err}"
    );
    assert_eq!(
        (code, out.as_str()),
        (3, "sh\n"),
        "PID 1 of its own namespace is itself"
    );
    // A name in use, a forbidden field, an unknown image.
    let (code, _, err) = debug(&p, &["--image", "busybox", "--name", "dbg", "--", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("already exists"), "{err}");
    let (code, _, err) = debug(&p, &["--image", "busybox", "--name", "web", "--", "true"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("spec.ephemeralContainers[2].name: Duplicate value"),
        "{err}"
    );
    // An image that is neither a bundle nor stored, in a pod that pulls nothing (it has no
    // puller): added, and waiting for its image.
    let (code, _, err) = debug(&p, &["--image", "nope", "--", "true"]);
    assert_eq!(code, 1);
    assert!(err.contains("image"), "{err}");
    // A command that cannot start: exit 128 and why.
    let (code, _, err) = debug(&p, &["--image", "busybox", "--", "/no/such/program"]);
    assert_eq!(code, 128, "{err}");
    assert!(
        err.contains("StartError") && err.contains("/no/such/program"),
        "{err}"
    );
    // The raw API (no curl needed, so that this runs in the pure-v2 VM too).
    let body = {
        use std::io::{Read, Write};
        let json = r#"{"name":"x","image":"busybox","ports":[{"containerPort":80}]}"#;
        let mut s = std::os::unix::net::UnixStream::connect(p.state.join("pod.sock")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "POST /v1/ephemeralcontainers HTTP/1.1\r\nHost: pod\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{json}",
            json.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    assert!(body.starts_with("HTTP/1.1 422"), "{body}");
    // The index is the new container's: the one on image `nope` above was added (it waits
    // for its image, as the API server accepts any image name).
    assert!(
        body.contains("spec.ephemeralContainers[4].ports: Forbidden"),
        "{body}"
    );

    p.signal(libc::SIGTERM);
    let out = p.wait(LIMIT);
    let statuses = out.status["status"]["ephemeralContainerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(statuses.len(), 4, "{statuses:#?}");
    // The one on `nope` never ran: kubelet's image failure, not a start.
    let nope = statuses
        .iter()
        .find(|s| s["image"] == "nope")
        .unwrap_or_else(|| panic!("{statuses:#?}"));
    assert_eq!(nope["restartCount"], 0, "{nope:#}");
    assert!(nope["lastState"].get("terminated").is_none(), "{nope:#}");
    p.assert_nothing_left();
}
