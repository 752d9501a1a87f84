//! containerd drives the runc front-end: a private containerd (its own config,
//! sockets and dirs under a temp dir, CRI off, a unique namespace) runs the busybox image of
//! `scripts/make-oci-image` through `ctr run --runc-binary <runtime under test>`, so that
//! containerd's runc shim calls it as it calls runc. `RUNC_UNDER_TEST=/usr/sbin/runc` runs
//! the same tests on runc.

mod common;
use common::runc::*;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "podinit.test/busybox:1";

/// A containerd of the test's own; its drop stops every task, containerd and the shims,
/// and removes its dirs and the namespace's cgroups.
struct Containerd {
    dir: PathBuf,
    ns: String,
    sock: PathBuf,
    runtime: PathBuf,
    child: Option<Child>,
}

impl Containerd {
    fn start(prefix: &str) -> Containerd {
        ensure_tool("containerd", "containerd");
        let ns = unique_name(prefix);
        let dir = std::env::temp_dir().join(format!("podinit-it-{ns}"));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.to_string_lossy();
        let sock = dir.join("c.sock");
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "version = 2\nroot = \"{d}/root\"\nstate = \"{d}/state\"\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
                 [grpc]\n  address = \"{d}/c.sock\"\n[ttrpc]\n  address = \"{d}/c.sock.ttrpc\"\n\
                 [debug]\n  address = \"{d}/debug.sock\"\n\
                 [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{d}/opt\"\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawning containerd");
        let c = Containerd {
            dir,
            ns,
            sock,
            runtime: under_test(),
            child: Some(child),
        };
        wait_for(Duration::from_secs(20), "containerd answers", || {
            c.ctr(&["version"]).ok().then_some(())
        });
        let image = c.dir.join("busybox.tar");
        make_oci_image(&image, IMAGE);
        c.ctr(&["images", "import", image.to_str().unwrap()])
            .expect_ok();
        c
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("ctr");
        c.arg("-a").arg(&self.sock).args(["-n", &self.ns]);
        c
    }

    fn ctr(&self, args: &[&str]) -> RuncOut {
        let mut c = self.cmd();
        c.args(args);
        output_of(c)
    }

    /// `ctr run` options that make the runtime under test containerd's runc.
    fn runtime_args(&self) -> Vec<String> {
        vec![
            "--runc-binary".into(),
            self.runtime.to_string_lossy().into_owned(),
            "--runc-root".into(),
            self.runc_root().to_string_lossy().into_owned(),
        ]
    }

    fn runc_root(&self) -> PathBuf {
        self.dir.join("runc")
    }

    /// `ctr run` with the runtime under test, then `rest` (options, image, ID, command).
    fn run_cmd(&self, rest: &[&str]) -> Command {
        let mut c = self.cmd();
        c.arg("run").args(self.runtime_args()).args(rest);
        c
    }

    /// The status of task `id` as `ctr task ls` shows it.
    fn task_status(&self, id: &str) -> Option<String> {
        let ls = self.ctr(&["task", "ls"]).expect_ok().stdout;
        ls.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.first() == Some(&id))
            .and_then(|w| w.get(2).map(|s| s.to_string()))
    }

    fn wait_task(&self, id: &str, want: &str) {
        wait_for(
            Duration::from_secs(30),
            &format!("task {id} {want}"),
            || (self.task_status(id).as_deref() == Some(want)).then_some(()),
        );
    }

    /// Neither containerd nor the runtime holds anything of `id` any more.
    fn assert_gone(&self, id: &str) {
        assert_eq!(
            self.ctr(&["task", "ls", "-q"]).expect_ok().stdout.trim(),
            ""
        );
        assert_eq!(
            self.ctr(&["containers", "ls", "-q"])
                .expect_ok()
                .stdout
                .trim(),
            ""
        );
        let cgs: Vec<PathBuf> = find_dirs_named(&self.ns)
            .into_iter()
            .filter(|d| d.join(id).exists())
            .collect();
        assert!(cgs.is_empty(), "cgroup of {id} left in {cgs:?}");
        let st = self.runc_root().join(&self.ns).join(id);
        assert!(!st.exists(), "runtime state {} left", st.display());
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let left: Vec<&str> = mounts
            .lines()
            .filter(|l| l.contains(&format!("/{id}/rootfs")))
            .collect();
        assert!(left.is_empty(), "mounts left: {left:#?}");
    }
}

/// Directories named `name` in any cgroup hierarchy (top two levels).
fn find_dirs_named(name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = h.path().join(name);
        if p.is_dir() {
            out.push(p);
        }
    }
    let top = Path::new("/sys/fs/cgroup").join(name);
    if top.is_dir() && !out.contains(&top) {
        out.push(top);
    }
    out
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if self.child.is_some() {
            let tasks = self.ctr_quiet(&["task", "ls", "-q"]);
            for id in tasks.split_whitespace() {
                self.ctr_quiet(&["task", "kill", "-s", "KILL", id]);
            }
            for id in tasks.split_whitespace() {
                self.ctr_quiet(&["task", "rm", "-f", id]);
            }
            for id in self
                .ctr_quiet(&["containers", "ls", "-q"])
                .split_whitespace()
            {
                self.ctr_quiet(&["containers", "rm", id]);
            }
        }
        if let Some(mut c) = self.child.take() {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        // Shims of this containerd that outlived it.
        let sock = self.sock.to_string_lossy().into_owned();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&sock) {
                // SAFETY: a shim this test's containerd started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        for d in find_dirs_named(&self.ns) {
            kill_and_remove(&d);
        }
        unmount_below(&self.dir);
        let _ = std::fs::remove_dir_all(Path::new("/run/containerd/runc").join(&self.ns));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Containerd {
    fn ctr_quiet(&self, args: &[&str]) -> String {
        let mut c = self.cmd();
        // Bounded by ctr itself: a drop must not panic.
        c.args(["--timeout", "20s"]).args(args);
        c.stdin(Stdio::null()).stderr(Stdio::null());
        c.output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

#[test]
#[ignore = "needs root: containerd and the runtime under test"]
fn runc_ctr_run_rm_propagates_exit_status() {
    require_root();
    let c = Containerd::start("ctrrun");
    let o = output_of(c.run_cmd(&["--rm", IMAGE, "c1", "sh", "-c", "echo hi; exit 3"]));
    assert_eq!(o.code, 3, "{o:?}");
    assert_eq!(o.stdout, "hi\n", "{o:?}");
    c.assert_gone("c1");
    let o = output_of(c.run_cmd(&["--rm", IMAGE, "c2", "true"]));
    assert_eq!(o.code, 0, "{o:?}");
    c.assert_gone("c2");
    // Killed from outside: ctr reports 128 + the signal.
    let o = std::thread::scope(|s| {
        let run = s.spawn(|| output_of(c.run_cmd(&["--rm", IMAGE, "c3", "sleep", "100"])));
        c.wait_task("c3", "RUNNING");
        c.ctr(&["task", "kill", "-s", "KILL", "c3"]).expect_ok();
        run.join().unwrap()
    });
    assert_eq!(o.code, 137, "{o:?}");
    c.assert_gone("c3");
}

#[test]
#[ignore = "needs root: containerd and the runtime under test"]
fn runc_ctr_task_exec_pause_metrics_kill() {
    require_root();
    let c = Containerd::start("ctrtask");
    output_of(c.run_cmd(&["-d", IMAGE, "t1", "sleep", "100"])).expect_ok();
    c.wait_task("t1", "RUNNING");
    // The shim ran the runtime under test: its state is under the --runc-root given.
    let st = c.runc_root().join(&c.ns).join("t1");
    assert!(st.is_dir(), "no state of t1 at {}", st.display());
    let o = c.ctr(&[
        "task",
        "exec",
        "--exec-id",
        "e1",
        "t1",
        "sh",
        "-c",
        "exit 4",
    ]);
    assert_eq!(o.code, 4, "{o:?}");
    let o = c.ctr(&[
        "task",
        "exec",
        "--exec-id",
        "e2",
        "t1",
        "sh",
        "-c",
        "echo hello $$",
    ]);
    assert!(o.ok() && o.stdout.starts_with("hello "), "{o:?}");
    assert_ne!(o.stdout.trim(), "hello 1", "an exec is not the init");
    // The shim's `ps --format json` of the runtime: the init's pid among them.
    let ps = c.ctr(&["task", "ps", "t1"]).expect_ok().stdout;
    let init = c.ctr(&["task", "ls"]).expect_ok().stdout;
    let init_pid = init
        .lines()
        .find_map(|l| l.strip_prefix("t1"))
        .and_then(|l| l.split_whitespace().next())
        .expect("t1 in task ls")
        .to_string();
    assert!(
        ps.lines()
            .skip(1)
            .any(|l| l.split_whitespace().next() == Some(init_pid.as_str())),
        "ctr task ps: {ps} (init {init_pid})"
    );
    c.ctr(&["task", "pause", "t1"]).expect_ok();
    c.wait_task("t1", "PAUSED");
    c.ctr(&["task", "resume", "t1"]).expect_ok();
    c.wait_task("t1", "RUNNING");
    let m = c.ctr(&["task", "metrics", "t1"]).expect_ok().stdout;
    assert!(
        m.lines().count() > 3 && m.contains("memory"),
        "metrics: {m}"
    );
    let usage: u64 = m
        .lines()
        .find(|l| l.starts_with("memory.usage_in_bytes") || l.starts_with("memory.usage "))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no memory usage in {m}"));
    assert!(usage > 0, "{m}");
    c.ctr(&["task", "kill", "-s", "KILL", "t1"]).expect_ok();
    c.wait_task("t1", "STOPPED");
    // `ctr task rm` reports the exit status it got from the shim.
    let o = c.ctr(&["task", "rm", "t1"]).expect_ok();
    assert!(o.stderr.contains("exit code 137"), "{o:?}");
    c.ctr(&["containers", "rm", "t1"]).expect_ok();
    c.assert_gone("t1");
}

#[test]
#[ignore = "needs root: containerd and the runtime under test"]
fn runc_ctr_terminal_through_script() {
    require_root();
    let c = Containerd::start("ctrtty");
    // ctr needs a terminal for `-t`: script gives it one.
    let mut cmd = Command::new("script");
    cmd.args(["-qec"]);
    cmd.arg(format!(
        "ctr -a {} -n {} run -t --rm {} {IMAGE} tty1 sh -c 'tty; exit 5'",
        c.sock.display(),
        c.ns,
        c.runtime_args().join(" ")
    ));
    cmd.arg("/dev/null");
    let o = output_of(cmd);
    assert_eq!(o.code, 5, "{o:?}");
    assert!(o.stdout.contains("/dev/pts/"), "{o:?}");
    c.assert_gone("tty1");
}
