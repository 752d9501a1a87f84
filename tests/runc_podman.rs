//! podman drives the runc front-end through conmon: private `--root`,
//! `--runroot` and `--tmpdir`, cgroupfs, a file events log, no network, and the busybox
//! image of `scripts/make-oci-image` loaded with `podman load`. `RUNC_UNDER_TEST=/usr/sbin/runc`
//! runs the same tests on runc.

mod common;
use common::runc::*;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

const IMAGE: &str = "podinit.test/busybox:1";

/// What podman makes outside its private dirs whatever its options: removed after the
/// tests when they made it.
const SHARED_DIRS: [&str; 4] = [
    "/run/containers",
    "/var/lib/containers",
    "/run/runc",
    "/run/podinit-runc",
];

/// One podman test at a time: they share what podman keeps outside its private dirs.
static ONE: Mutex<()> = Mutex::new(());

/// A podman with dirs of its own; its drop removes every container, the storage and what
/// podman made on the host.
struct Podman {
    dir: PathBuf,
    runtime: PathBuf,
    shared_before: Vec<bool>,
    cgroup_parent_before: bool,
    _one: MutexGuard<'static, ()>,
}

impl Podman {
    fn new(prefix: &str) -> Podman {
        let one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        ensure_tool("podman", "podman");
        ensure_tool("conmon", "conmon");
        let dir = std::env::temp_dir().join(format!("podinit-it-{}", unique_name(prefix)));
        std::fs::create_dir_all(&dir).unwrap();
        // podman's default limits of open files and processes are over what a process may
        // set on a machine without CAP_SYS_RESOURCE; busybox needs far less.
        std::fs::write(
            dir.join("containers.conf"),
            format!(
                "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n\
                 [engine]\nevents_logger = \"file\"\nevents_logfile_path = \"{}\"\n\
                 cgroup_manager = \"cgroupfs\"\n",
                dir.join("events.log").display()
            ),
        )
        .unwrap();
        let p = Podman {
            runtime: under_test(),
            shared_before: SHARED_DIRS.iter().map(|d| Path::new(d).exists()).collect(),
            cgroup_parent_before: !libpod_parents().is_empty(),
            dir,
            _one: one,
        };
        let image = p.dir.join("busybox.tar");
        make_oci_image(&image, IMAGE);
        p.podman(&["load", "-i", image.to_str().unwrap()])
            .expect_ok();
        p
    }

    fn cmd(&self) -> Command {
        let d = &self.dir;
        let mut c = Command::new("podman");
        c.env("CONTAINERS_CONF", d.join("containers.conf"))
            .arg("--root")
            .arg(d.join("root"))
            .arg("--runroot")
            .arg(d.join("runroot"))
            .arg("--tmpdir")
            .arg(d.join("tmp"))
            .arg("--network-config-dir")
            .arg(d.join("net"))
            .args([
                "--storage-driver",
                "overlay",
                "--cgroup-manager",
                "cgroupfs",
            ])
            .args(["--events-backend", "file", "--runtime"])
            .arg(&self.runtime);
        c
    }

    fn podman(&self, args: &[&str]) -> RuncOut {
        let mut c = self.cmd();
        c.args(args);
        output_of(c)
    }

    /// `podman run --network none ARGS`.
    fn run(&self, args: &[&str]) -> RuncOut {
        let mut c = self.cmd();
        c.args(["run", "--network", "none"]).args(args);
        output_of(c)
    }

    fn inspect(&self, name: &str, format: &str) -> String {
        self.podman(&["inspect", name, "--format", format])
            .expect_ok()
            .stdout
            .trim()
            .to_string()
    }

    /// No container left, in podman or in the runtime's cgroups.
    fn assert_no_containers(&self) {
        assert_eq!(self.podman(&["ps", "-aq"]).expect_ok().stdout.trim(), "");
        let left: Vec<PathBuf> = libpod_parents()
            .iter()
            .flat_map(|p| std::fs::read_dir(p).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("libpod-"))
            })
            .collect();
        assert!(left.is_empty(), "container cgroups left: {left:?}");
    }
}

/// Pids whose command line holds `needle`.
fn processes_whose_cmdline_holds(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if pid != me && String::from_utf8_lossy(&cmdline).contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// `libpod_parent` in each cgroup hierarchy where it exists.
fn libpod_parents() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        for p in [
            h.path().join("libpod_parent"),
            Path::new("/sys/fs/cgroup/libpod_parent").into(),
        ] {
            if p.is_dir() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

impl Drop for Podman {
    fn drop(&mut self) {
        let ids = {
            let mut c = self.cmd();
            c.args(["ps", "-aq", "--no-trunc"])
                .stdin(Stdio::null())
                .stderr(Stdio::null());
            c.output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        let mut c = self.cmd();
        c.args(["rm", "-af", "-t", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Ok(mut child) = c.spawn() {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while child.try_wait().ok().flatten().is_none() && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        for parent in libpod_parents() {
            for id in ids.split_whitespace() {
                kill_and_remove(&parent.join(format!("libpod-{id}")));
            }
            if !self.cgroup_parent_before {
                let _ = std::fs::remove_dir(parent.join("conmon"));
                let _ = std::fs::remove_dir(&parent);
            }
        }
        // conmon and the `podman container cleanup` it starts when a container exits may
        // outlive the test's own commands, and would make the shared dirs again.
        let mine = self.dir.to_string_lossy().into_owned();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let left = processes_whose_cmdline_holds(&mine);
            if left.is_empty() {
                break;
            }
            if std::time::Instant::now() > deadline {
                for pid in left {
                    // SAFETY: a podman or conmon process of this test's own dirs.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                std::thread::sleep(Duration::from_millis(100));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        unmount_below(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
        for (d, before) in SHARED_DIRS.iter().zip(&self.shared_before) {
            if !before {
                // The runtimes' roots only when empty: another test may use them.
                if d.starts_with("/run/containers") || d.starts_with("/var/lib/containers") {
                    let _ = std::fs::remove_dir_all(d);
                } else {
                    let _ = std::fs::remove_dir(d);
                }
            }
        }
    }
}

#[test]
#[ignore = "needs root: podman and the runtime under test"]
fn runc_podman_run_rm_exit_status() {
    require_root();
    let p = Podman::new("pmrun");
    let o = p.run(&["--rm", IMAGE, "sh", "-c", "echo hi; exit 3"]);
    assert_eq!(o.code, 3, "{o:?}");
    assert_eq!(o.stdout, "hi\n", "{o:?}");
    let o = p.run(&["--rm", IMAGE, "true"]);
    assert_eq!(o.code, 0, "{o:?}");
    p.assert_no_containers();
}

#[test]
#[ignore = "needs root: podman and the runtime under test"]
fn runc_podman_detached_exec_pause_and_stop() {
    require_root();
    let p = Podman::new("pmstop");
    // A busybox `sleep` as PID 1 ignores SIGTERM: stop sends it, waits its timeout, then
    // kills.
    p.run(&["-d", "--name", "deaf", IMAGE, "sleep", "100"])
        .expect_ok();
    // podman runs the runtime under test, not one of its own list.
    assert_eq!(
        p.inspect("deaf", "{{.OCIRuntime}}"),
        p.runtime.to_string_lossy()
    );
    let o = p.podman(&["exec", "deaf", "sh", "-c", "echo in $$; exit 4"]);
    assert_eq!(o.code, 4, "{o:?}");
    assert!(
        o.stdout.starts_with("in ") && o.stdout.trim() != "in 1",
        "{o:?}"
    );
    // An exec with a terminal: the runtime's exec --tty --console-socket.
    let o = p.podman(&["exec", "-t", "deaf", "tty"]).expect_ok();
    assert!(o.stdout.contains("/dev/pts/"), "{o:?}");
    p.podman(&["pause", "deaf"]).expect_ok();
    assert_eq!(p.inspect("deaf", "{{.State.Status}}"), "paused");
    p.podman(&["unpause", "deaf"]).expect_ok();
    assert_eq!(p.inspect("deaf", "{{.State.Status}}"), "running");
    let o = p.podman(&["stop", "-t", "2", "deaf"]).expect_ok();
    assert!(
        o.stderr.contains("SIGKILL"),
        "stop should fall back to SIGKILL: {o:?}"
    );
    assert_eq!(
        p.inspect("deaf", "{{.State.Status}} {{.State.ExitCode}}"),
        "exited 137"
    );
    p.podman(&["rm", "deaf"]).expect_ok();
    // A stop signal the process handles ends it with its own status.
    p.run(&[
        "-d",
        "--name",
        "polite",
        "--stop-signal",
        "USR1",
        IMAGE,
        "sh",
        "-c",
        "trap 'exit 7' USR1; while :; do sleep 0.05; done",
    ])
    .expect_ok();
    let o = p.podman(&["stop", "-t", "20", "polite"]).expect_ok();
    assert!(!o.stderr.contains("SIGKILL"), "{o:?}");
    assert_eq!(
        p.inspect("polite", "{{.State.Status}} {{.State.ExitCode}}"),
        "exited 7"
    );
    p.podman(&["rm", "polite"]).expect_ok();
    p.assert_no_containers();
}

#[test]
#[ignore = "needs root: podman and the runtime under test"]
fn runc_podman_terminal_through_the_console_socket() {
    require_root();
    let p = Podman::new("pmtty");
    let o = p.run(&["--rm", "-t", IMAGE, "sh", "-c", "tty; exit 6"]);
    assert_eq!(o.code, 6, "{o:?}");
    assert!(o.stdout.contains("/dev/pts/"), "{o:?}");
    p.assert_no_containers();
}
