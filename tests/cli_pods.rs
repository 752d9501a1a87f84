//! A newcomer's first hour with the client commands, run as a user runs them: the lines
//! `podinit run` says as the pod goes, a pod found by its name under a state root, an
//! ended pod's status, events and logs read from what it left, `pods`, `rm`, and `events`
//! as `kubectl events` prints them.

mod common;
use common::*;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A private state root, removed (with whatever pods left in it) on drop.
struct Root(PathBuf);

impl Root {
    fn new(tag: &str) -> Root {
        let d = std::env::temp_dir().join(format!(
            "podinit-it-root-{tag}-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&d).unwrap();
        Root(d)
    }

    /// `p` keeps its state dir where `run` puts it by default, under this root.
    fn place(&self, p: &mut TestPod) {
        p.state = self.0.join(format!("default_{}", p.name));
    }

    /// `podinit COMMAND --state-root ROOT ARGS`, bounded, without the pod's socket in the env.
    fn podinit(&self, args: &[&str]) -> Output {
        // Right after the command: what follows `--` is the command's, not podinit's.
        Command::new(bin())
            .arg(args[0])
            .arg("--state-root")
            .arg(&self.0)
            .args(&args[1..])
            .env_remove("PODINIT_SOCKET")
            .stdin(Stdio::null())
            .output_within(CLIENT_LIMIT)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if let Ok(rd) = std::fs::read_dir(&self.0) {
            for e in rd.flatten() {
                kill_and_remove(&e.path());
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Succeeded, with its stdout.
fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed ({:?}): {}",
        o.status,
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// Failed with status 1 and one line on stderr; that line.
fn one_line_error(o: Output, what: &str) -> String {
    assert_eq!(o.status.code(), Some(1), "{what}: {o:?}");
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: not one line: {err:?}");
    lines[0].to_string()
}

const DONE: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "echo hello; echo bye"]}
"#;

const WAITS: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}
"#;

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn an_ended_pod_is_found_by_name_read_listed_and_removed() {
    require_root();
    let root = Root::new("ended");
    let mut p = TestPod::new("ended", DONE);
    root.place(&mut p);
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The terminal heard of each event and of the end, one line each.
    assert!(
        out.stderr
            .contains("podinit: Started: Started container c\n"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .ends_with(&format!("podinit: pod default/{} Succeeded\n", p.name)),
        "{}",
        out.stderr
    );
    let name = p.name.as_str();
    let full = format!("default/{name}");

    // The only pod under the root is meant; by name and by namespace/name too.
    let t = ok(root.podinit(&["status"]), "status");
    assert!(
        t.starts_with("NAME") && t.lines().nth(1).unwrap().starts_with(name),
        "{t}"
    );
    assert!(t.contains("Completed"), "{t}");
    let j: serde_json::Value = serde_json::from_str(&ok(
        root.podinit(&["status", name, "-o", "json"]),
        "status -o json",
    ))
    .unwrap();
    assert_eq!(j["status"]["phase"], "Succeeded");
    ok(root.podinit(&["status", &full]), "status NS/NAME");

    // Its logs, kept: by container alone (the only pod) and by pod and container.
    assert_eq!(ok(root.podinit(&["logs", "c"]), "logs c"), "hello\nbye\n");
    assert_eq!(
        ok(
            root.podinit(&["logs", name, "c", "--tail", "1"]),
            "logs NAME c"
        ),
        "bye\n"
    );
    let e = one_line_error(
        root.podinit(&["logs", name, "nope"]),
        "logs of no container",
    );
    assert!(e.contains("container nope is not valid for pod"), "{e}");

    // Its events as kubectl events prints them.
    let ev = ok(root.podinit(&["events", name]), "events");
    let mut lines = ev.lines();
    let head = lines.next().unwrap();
    assert!(
        head.starts_with("LAST SEEN") && head.contains("OBJECT"),
        "{ev}"
    );
    let started = ev.lines().find(|l| l.contains(" Started ")).expect(&ev);
    assert!(started.contains(&format!("Pod/{name}")), "{ev}");
    let seen = started.split_whitespace().next().unwrap();
    assert!(
        seen.ends_with('s') && seen[..seen.len() - 1].parse::<u64>().is_ok(),
        "LAST SEEN is relative: {ev}"
    );

    // What needs it running says it has ended.
    let e = one_line_error(
        root.podinit(&["exec", name, "c", "--", "true"]),
        "exec of an ended pod",
    );
    assert!(e.contains(&format!("pod {full} has ended")), "{e}");

    // A second pod: the only one is no longer meant; the error lists both.
    let mut q = TestPod::new("ended2", DONE);
    root.place(&mut q);
    assert_eq!(q.run(LIMIT).code, 0);
    let e = one_line_error(root.podinit(&["status"]), "status of two pods");
    assert!(
        e.contains("2 pods under") && e.contains(&full) && e.contains(&q.name),
        "{e}"
    );
    let e = one_line_error(root.podinit(&["status", "nope"]), "status of no pod");
    assert!(
        e.contains("default/nope not found") && e.contains(&full),
        "{e}"
    );

    // Listed, then removed.
    let list = ok(root.podinit(&["pods"]), "pods");
    let head = list.lines().next().unwrap();
    assert!(
        head.split_whitespace().collect::<Vec<_>>()
            == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{list}"
    );
    assert_eq!(list.lines().count(), 3, "{list}");
    let j: serde_json::Value =
        serde_json::from_str(&ok(root.podinit(&["pods", "-o", "json"]), "pods -o json")).unwrap();
    assert_eq!(j["kind"], "List");
    assert_eq!(j["items"].as_array().unwrap().len(), 2);
    let said = ok(root.podinit(&["rm", name]), "rm");
    assert!(said.contains(&format!("pod \"{full}\" deleted")), "{said}");
    assert!(!p.state.exists());
    let e = one_line_error(root.podinit(&["rm", name]), "rm again");
    assert!(e.contains("not found"), "{e}");
    ok(root.podinit(&["rm", &q.name]), "rm of the second");
    let o = root.podinit(&["pods"]);
    assert!(o.status.success() && o.stdout.is_empty(), "{o:?}");
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_running_pod_by_name_its_watch_header_and_rm_refused() {
    require_root();
    let root = Root::new("running");
    let mut p = TestPod::new("running", WAITS);
    root.place(&mut p);
    p.start();
    p.wait_status(LIMIT, |v| container_status(v, "c")["ready"] == true);
    let name = p.name.clone();
    assert!(ok(root.podinit(&["status", &name]), "status").contains("Running"));
    let e = one_line_error(root.podinit(&["rm", &name]), "rm of a running pod");
    assert!(e.contains("is running: stop it first"), "{e}");
    // `events --watch`: the header with the first event, until the pod ends.
    let mut watch = Command::new(bin());
    watch
        .args(["events", &name, "--watch", "--state-root"])
        .arg(&root.0);
    let watch = std::thread::spawn(move || watch.output_within(CLIENT_LIMIT));
    // Whether it connects before or after the stop, it prints the header first and the
    // pod's events up to its end (kept ones first, or an ended pod's table).
    ok(root.podinit(&["stop", &name]), "stop");
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let w = watch.join().unwrap();
    let text = text(&w.stdout);
    let err = String::from_utf8_lossy(&w.stderr);
    assert!(text.starts_with("LAST SEEN "), "{text}{err}");
    assert!(text.contains(" Killing "), "{text}{err}");
    ok(root.podinit(&["rm", &name]), "rm once ended");
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_pod_that_cannot_start_says_why_and_quiet_says_nothing() {
    require_root();
    let store = std::env::temp_dir().join(format!("podinit-it-emptystore-{}", std::process::id()));
    let mut p = TestPod::new(
        "cannot",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - {name: bad, image: "Not_A/Reference:x"}
  - {name: never, image: podinit.test/newcomer/absent:1, imagePullPolicy: Never}
"#,
    );
    let mut cmd = p.command();
    cmd.arg("--images").arg(&store);
    p.start_with(cmd);
    p.wait_status(LIMIT, |v| {
        container_status(v, "bad")["state"]["waiting"]["reason"] == "InvalidImageName"
            && container_status(v, "never")["state"]["waiting"]["reason"] == "ErrImageNeverPull"
    });
    stop_by_socket(&p);
    let out = p.wait(LIMIT);
    let _ = std::fs::remove_dir_all(&store);
    assert!(
        out.stderr
            .contains("podinit: warning: InspectFailed: Failed to apply default image tag"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "podinit: warning: ErrImageNeverPull: Container image \"podinit.test/newcomer/absent:1\" is not present with pull policy of Never"
        ),
        "{}",
        out.stderr
    );

    // --quiet: the same run of a pod that succeeds says nothing at all.
    let mut q = TestPod::new("quiet", DONE);
    let mut cmd = q.command();
    cmd.arg("--quiet");
    q.start_with(cmd);
    let out = q.wait(LIMIT);
    assert_eq!(out.code, 0);
    assert_eq!(out.stderr, "", "--quiet said something");
}

fn stop_by_socket(p: &TestPod) {
    let o = Command::new(bin())
        .arg("stop")
        .arg("--socket")
        .arg(p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    assert!(o.status.success(), "stop: {o:?}");
}

/// A repeated event, as `kubectl events` shows it: `<last> (x<count> over <first>)`; and as
/// `podinit run` says it, with its count.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn repeated_events_show_their_count() {
    require_root();
    let root = Root::new("repeat");
    let mut p = TestPod::new(
        "repeat",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "exit 1"]}
"#,
    );
    root.place(&mut p);
    let mut cmd = p.command();
    cmd.arg("--max-restart-backoff").arg("1");
    p.start_with(cmd);
    p.wait_status(LIMIT, |v| {
        container_status(v, "c")["restartCount"]
            .as_i64()
            .unwrap_or(0)
            >= 2
    });
    let name = p.name.clone();
    let ev = ok(root.podinit(&["events", &name]), "events");
    let started = ev
        .lines()
        .find(|l| l.contains(" Started ") && l.contains(" over "))
        .unwrap_or_else(|| panic!("no repeated Started: {ev}"));
    let seen: Vec<&str> = started.split_whitespace().take(4).collect();
    assert!(
        seen[1].starts_with("(x") && seen[2] == "over" && seen[3].ends_with(')'),
        "{started}"
    );
    ok(root.podinit(&["stop", &name]), "stop");
    let out = p.wait(LIMIT);
    assert!(
        out.stderr
            .contains("podinit: Started: Started container c (x2)"),
        "{}",
        out.stderr
    );
}

/// The README's demo as `scripts/demo` runs it: examples/demo.yaml (under a name of its
/// own) to its end, then read back by name from what it left, and removed.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_readmes_demo_runs_and_is_read_back_by_name() {
    require_root();
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/demo.yaml"),
    )
    .unwrap();
    assert!(page.contains("\n  name: demo\n"), "{page}");
    let root = Root::new("demo");
    let mut p = TestPod::new(
        "demo",
        &page.replacen("\n  name: demo\n", "\n  name: NAME\n", 1),
    );
    root.place(&mut p);
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let name = p.name.clone();
    assert!(
        out.stderr
            .ends_with(&format!("podinit: pod default/{name} Succeeded\n")),
        "{}",
        out.stderr
    );
    let status = ok(root.podinit(&["status", &name]), "status");
    assert!(status.contains("Completed"), "{status}");
    let events = ok(root.podinit(&["events", &name]), "events");
    for c in ["seed", "writer", "reader"] {
        assert!(
            events.contains(&format!("Started container {c}")),
            "{events}"
        );
    }
    let said = ok(root.podinit(&["logs", &name, "reader"]), "logs reader");
    assert!(
        said.starts_with("reader: the shared log says\nseeded by ")
            && said.ends_with("line 3 from the writer (uid 1000)\n"),
        "{said}"
    );
    assert_eq!(
        ok(root.podinit(&["logs", &name, "writer"]), "logs writer"),
        "writer: wrote 3 lines\n"
    );
    ok(root.podinit(&["rm", &name]), "rm");
    assert!(!p.state.exists());
}
