//! stdin / stdinOnce / tty and `podinit attach`: the fixtures of
//! tests/fixtures/docs/attach run on the real binary, checked against what kubelet, the
//! CRI and `kubectl attach` report (docs/interface.md §3, docs/semantics.md §Attach).

mod common;
use common::*;
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(40);

/// A running `podinit attach`: its input, and its output and errors as they come.
struct Attach {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

fn reader(mut r: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let b = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            b.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

fn attach(p: &TestPod, args: &[&str]) -> Attach {
    let mut child = Command::new(bin())
        .arg("attach")
        .args(args)
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take();
    let out = reader(child.stdout.take().unwrap());
    let err = reader(child.stderr.take().unwrap());
    Attach {
        child,
        stdin,
        out,
        err,
    }
}

impl Attach {
    fn send(&mut self, text: &str) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(text.as_bytes()).unwrap();
        s.flush().unwrap();
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn errors(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned()
    }

    /// Wait (bounded) until the output holds `needle`.
    fn wait_output(&self, needle: &str) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            let out = self.output();
            if out.contains(needle) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "attach output never held {needle:?}: {out:?}; stderr: {}",
                self.errors()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Close its input, and wait (bounded) for it to exit: its exit code.
    fn finish(mut self) -> (i32, String, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + LIMIT;
        let code = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "podinit attach did not end: out {:?} err {:?}",
                    self.output(),
                    self.errors()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // The readers see EOF once the process is gone.
        std::thread::sleep(Duration::from_millis(50));
        (code, self.output(), self.errors())
    }
}

fn running(v: &serde_json::Value, c: &str) -> bool {
    container_status(v, c)["state"]["running"].is_object()
}

/// The raw CRI records of a container run.
fn records(p: &TestPod, c: &str) -> Vec<String> {
    std::fs::read_to_string(p.state.join(format!("logs/{c}/0.log")))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_once(' ').map_or("", |(_, r)| r).to_string())
        .collect()
}

fn stop(p: &mut TestPod) {
    let out = Command::new(bin())
        .args(["stop", "--grace-period", "0"])
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    assert!(out.status.success(), "{out:?}");
    p.wait(LIMIT);
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn attach_i_streams_input_to_a_container_with_stdin() {
    require_root();
    let mut p = TestPod::new(
        "att-cat",
        include_str!("fixtures/docs/attach/cat-stdin.yaml"),
    );
    p.start();
    p.wait_status(LIMIT, |v| running(v, "cat"));
    let mut a = attach(&p, &["cat", "-i"]);
    a.send("hello from attach\n");
    a.wait_output("hello from attach\n");
    // Without stdinOnce the session ends with its input; the container's stdin stays
    // open, and `cat` runs on.
    let (code, _, err) = a.finish();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("If you don't see a command prompt, try pressing enter."),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let v = p.wait_status(LIMIT, |v| running(v, "cat"));
    assert_eq!(container_status(&v, "cat")["restartCount"], 0);
    // A second session reaches the same stdin.
    let mut b = attach(&p, &["cat", "-i"]);
    b.send("second session\n");
    b.wait_output("second session\n");
    assert_eq!(b.finish().0, 0);
    let recs = records(&p, "cat");
    assert!(
        recs.iter().any(|r| r == "stdout F hello from attach"),
        "{recs:?}"
    );
    assert!(
        recs.iter().any(|r| r == "stdout F second session"),
        "{recs:?}"
    );
    assert!(has_event(&p, "Started", "Started container cat"));
    stop(&mut p);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn stdin_once_closes_stdin_when_the_first_session_ends() {
    require_root();
    let mut p = TestPod::new(
        "att-once",
        include_str!("fixtures/docs/attach/cat-stdin-once.yaml"),
    );
    p.start();
    p.wait_status(LIMIT, |v| running(v, "cat"));
    let mut a = attach(&p, &["cat", "-i"]);
    a.send("only once\n");
    a.wait_output("only once\n");
    // The end of the session's input closes the container's: `cat` sees EOF, exits 0,
    // and the session ends with the container's output.
    let (code, out, err) = a.finish();
    assert_eq!((code, out.as_str()), (0, "only once\n"), "{err}");
    let o = p.wait(LIMIT);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.status["status"]["phase"], "Succeeded");
    let t = &container_status(&o.status, "cat")["state"]["terminated"];
    assert_eq!(
        (t["exitCode"].as_i64(), t["reason"].as_str()),
        (Some(0), Some("Completed"))
    );
    assert_eq!(records(&p, "cat").len(), 1);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_tty_container_has_a_terminal_and_its_log_is_all_stdout() {
    require_root();
    let mut p = TestPod::new("att-tty", include_str!("fixtures/docs/attach/tty.yaml"));
    let o = p.run(LIMIT);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let t = &container_status(&o.status, "tty")["state"]["terminated"];
    assert_eq!(
        (t["exitCode"].as_i64(), t["reason"].as_str()),
        (Some(0), Some("Completed"))
    );
    // Its own devpts: the first terminal there. A terminal has no stderr of its own, and
    // the CRI's log drops the `\r` of its line ends.
    assert_eq!(
        records(&p, "tty"),
        vec!["stdout F /dev/pts/0", "stdout F to-stderr"]
    );
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn attach_to_a_shell_with_a_terminal_and_resize_it() {
    require_root();
    let mut p = TestPod::new("att-sh", include_str!("fixtures/docs/attach/shell-it.yaml"));
    p.start();
    p.wait_status(LIMIT, |v| running(v, "shell"));
    // The window size, as `podinit attach -t` sends it from a terminal.
    let sock = p.state.join("pod.sock");
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let body = r#"{"width":123,"height":45}"#;
    write!(
        s,
        "POST /v1/containers/shell/resize HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Not a terminal here: -i alone, and the container's terminal forces tty mode.
    let mut a = attach(&p, &["shell", "-i"]);
    a.send("stty size; echo sum=$((40+2))\n");
    let out = a.wait_output("sum=42");
    assert!(out.contains("45 123"), "{out:?}");
    // The terminal's line ends are `\r\n`: an attach shows them as they are.
    assert!(out.contains("sum=42\r\n"), "{out:?}");
    let (code, _, _) = a.finish();
    assert_eq!(code, 0);
    let recs = records(&p, "shell");
    assert!(recs.iter().any(|r| r == "stdout F sum=42"), "{recs:?}");
    assert!(recs.iter().all(|r| r.starts_with("stdout ")), "{recs:?}");
    stop(&mut p);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn attach_it_to_a_container_without_stdin_or_tty_shows_its_output_only() {
    require_root();
    let mut p = TestPod::new(
        "att-none",
        include_str!("fixtures/docs/attach/no-stdin.yaml"),
    );
    p.start();
    p.wait_status(LIMIT, |v| running(v, "c"));
    let mut a = attach(&p, &["c", "-i", "-t"]);
    a.send("ignored\n");
    a.wait_output("late\n");
    let (code, out, err) = a.finish();
    assert_eq!(code, 0, "{err}");
    // Its stdin is /dev/null: `read` sees EOF at once, not our input.
    assert_eq!(out, "late\nread=1\n");
    assert!(
        err.contains("error: Unable to use a TTY - container c did not allocate one"),
        "{err}"
    );
    assert!(err.contains("container c does not take input"), "{err}");
    let o = p.wait(LIMIT);
    assert_eq!(o.code, 0, "{}", o.stderr);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn attach_refuses_a_container_the_pod_does_not_have() {
    require_root();
    let mut p = TestPod::new(
        "att-err",
        include_str!("fixtures/docs/attach/cat-stdin.yaml"),
    );
    p.start();
    p.wait_status(LIMIT, |v| running(v, "cat"));
    let (code, _, err) = attach(&p, &["nope", "-i"]).finish();
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("container nope is not valid for pod {}", p.name)),
        "{err}"
    );
    stop(&mut p);
    p.assert_nothing_left();
}
