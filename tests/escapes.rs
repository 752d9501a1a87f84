//! The published container escapes of the runc family, each mounted as a malicious image
//! or workload would mount it, through each front-end that can meet it: `podinit run`
//! (a pod), `podinit runc` (create, run, exec). Each test names its CVE, says how the
//! attack works and which defence stops it, and asserts that the attack fails and that
//! the host is untouched. tests/REPORT.md lists them with their outcomes.

mod common;
use common::runc::{wait_for, Bundle, Lab};
use common::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

/// A path on the host that only an escaped process could create: `touch`ed from the
/// container through `../` chains, it must never appear.
fn host_marker(what: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("podinit-escape-{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// `../` enough times to climb from any host directory to the host's root, then `p`.
fn climb(p: &Path) -> String {
    format!(
        "{}{}",
        "../".repeat(16),
        p.display().to_string().trim_start_matches('/')
    )
}

/// The fd numbers an attacker would try: the ones a runtime's set-up is likely to hold.
const FDS: std::ops::RangeInclusive<i32> = 3..=14;

/// CVE-2024-21626 ("Leaky Vessels"): runc leaked a directory fd of the host (a cgroup
/// directory) into the container's init; a spec with `cwd: /proc/self/fd/7` left the
/// process with a working directory on the host, from which `../..` reaches the host's
/// root. Defence: every fd the set-up holds beyond 0–2 is closed before the chdir, and the
/// cwd is checked to be under the container's root after it (`runtime::init::finish`).
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2024_21626_a_leaked_fd_as_working_directory_through_run() {
    require_root();
    let marker = host_marker("cwd-run");
    let containers: String = FDS
        .map(|n| {
            format!(
                "  - {{name: w{n}, image: busybox, workingDir: /proc/self/fd/{n}, command: [sh, -c, {:?}]}}\n",
                format!("touch {} ; pwd", climb(&marker))
            )
        })
        .collect();
    let mut p = TestPod::new(
        "esc-cwd",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  restartPolicy: Never\n  containers:\n{containers}"
        ),
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 1, "the pod fails: {}", out.stderr);
    for n in FDS {
        let c = container_status(&out.status, &format!("w{n}"));
        let t = &c["state"]["terminated"];
        assert_eq!(t["reason"], "StartError", "w{n}: {c}");
        let msg = t["message"].as_str().unwrap_or("");
        assert!(msg.contains("/proc/self/fd/"), "w{n}: {msg}");
    }
    assert!(
        !marker.exists(),
        "{} was created on the host",
        marker.display()
    );
    p.assert_nothing_left();
}

/// CVE-2024-21626 through runc's command line: `process.cwd` of `run`, `exec --cwd`, and
/// a program reached through `/proc/self/fd/N/../..` (the advisory's attack 3).
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2024_21626_a_leaked_fd_as_working_directory_through_runc() {
    require_root();
    let lab = Lab::new("esc-cwd-runc");
    let r = lab.tested();
    let marker = host_marker("cwd-runc");
    let touch = format!("touch {}", climb(&marker));
    for n in FDS {
        let mut b = lab.bundle(&["sh", "-c", &touch]);
        b.set("/process/cwd", json!(format!("/proc/self/fd/{n}")));
        let id = lab.id("cwd");
        let o = r.run_fg(&b, &id);
        assert!(!o.ok(), "run with cwd /proc/self/fd/{n} started: {o:?}");
        r.run(&["delete", "--force", &id]);
        lab.assert_nothing_left(r, &b, &id, false);
    }
    let b = lab.bundle(&["sleep", "60"]);
    let id = lab.id("target");
    r.run_bg(&b, &id).expect_ok();
    for n in FDS {
        let cwd = format!("/proc/self/fd/{n}");
        let o = r.run(&["exec", "--cwd", &cwd, &id, "sh", "-c", &touch]);
        assert!(!o.ok(), "exec --cwd {cwd} started: {o:?}");
        let prog = format!("/proc/self/fd/{n}/{}", climb(Path::new("/bin/true")));
        let o = r.run(&["exec", &id, &prog]);
        assert!(!o.ok(), "exec of {prog} started: {o:?}");
    }
    assert!(
        !marker.exists(),
        "{} was created on the host",
        marker.display()
    );
    r.run(&["delete", "--force", &id]).expect_ok();
    lab.assert_nothing_left(r, &b, &id, false);
}

/// CVE-2024-21626's second half: no fd but 0–2 (and `--preserve-fds`') is open in the
/// process at exec, for a container's init and an exec, through runc's command line
/// (tests/security.rs checks a pod's containers, hooks and execs).
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn only_stdio_and_preserved_fds_are_open_at_exec_through_runc() {
    require_root();
    let lab = Lab::new("esc-fds");
    let r = lab.tested();
    // `ls` holds one fd of its own for the directory it reads: the highest one.
    let list = "echo fds=$(ls /proc/self/fd | tr '\\n' ' ')";
    let b = lab.bundle(&["sh", "-c", &format!("{list}; sleep 60")]);
    let id = lab.id("fds");
    r.run_bg(&b, &id).expect_ok();
    let seen = wait_for(LIMIT, "the init's fd list", || {
        let out = b.container_output();
        out.lines()
            .find_map(|l| l.strip_prefix("fds="))
            .map(str::to_string)
    });
    assert_eq!(seen.trim(), "0 1 2 3", "init's open fds");
    let o = r.run(&["exec", &id, "sh", "-c", list]).expect_ok();
    assert_eq!(o.stdout.trim(), "fds=0 1 2 3", "exec's open fds");
    // One fd passed on purpose (`--preserve-fds 1`): fd 3 is the caller's and stays.
    let mut c = r.cmd();
    c.args(["exec", "--preserve-fds", "1", &id, "sh", "-c", list]);
    let f = std::fs::File::open("/dev/null").unwrap();
    use std::os::fd::AsRawFd;
    let raw = f.as_raw_fd();
    use std::os::unix::process::CommandExt;
    // SAFETY: dup2 between fork and exec, of an fd we own, onto fd 3.
    unsafe {
        c.pre_exec(move || {
            // Already fd 3: only its close-on-exec flag goes.
            let rc = if raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = r.output(c).expect_ok();
    assert_eq!(o.stdout.trim(), "fds=0 1 2 3 4", "exec --preserve-fds 1");
    r.run(&["delete", "--force", &id]).expect_ok();
    lab.assert_nothing_left(r, &b, &id, false);
}

/// CVE-2016-9962: runc's init joined the container and stayed dumpable before exec, so a
/// process of the container could ptrace it or open its fds and /proc/PID/exe (the host's
/// runtime binary). A created container's init waits at the exec fifo for `start`: an
/// exec into it, with the container's own credentials, tries to reach it. Defence: the
/// process is made undumpable before it takes the container's credentials
/// (`runtime::init::finish`); exec makes the container's program dumpable again.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2016_9962_a_waiting_init_is_out_of_reach_of_the_container() {
    require_root();
    let lab = Lab::new("esc-dump");
    let r = lab.tested();
    let b = lab.bundle(&["sleep", "60"]);
    let id = lab.id("dump");
    r.create(&b, &id, &[]).expect_ok();
    let probe = "for f in exe cwd root; do readlink /proc/1/$f && echo reached-$f; done; \
                 ls /proc/1/fd/ >/dev/null 2>&1 && ls -l /proc/1/fd/ | grep -q -- '->' && echo reached-fds; \
                 head -c1 /proc/1/environ >/dev/null 2>&1 && echo reached-environ; \
                 head -c1 /proc/1/exe >/dev/null 2>&1 && echo reached-exe-content; \
                 grep -c . /proc/1/maps >/dev/null 2>&1 && echo reached-maps; echo done";
    let o = r.run(&["exec", &id, "sh", "-c", probe]).expect_ok();
    assert_eq!(
        o.stdout.trim(),
        "done",
        "the waiting init was reached: {o:?}"
    );
    r.run(&["start", &id]).expect_ok();
    // Once exec'd it is the container's own program, dumpable like any other.
    let o = r.run(&["exec", &id, "readlink", "/proc/1/exe"]).expect_ok();
    assert!(o.stdout.contains("busybox"), "{o:?}");
    r.run(&["delete", "--force", &id]).expect_ok();
    lab.assert_nothing_left(r, &b, &id, false);
}

/// The attacker of CVE-2019-5736, as a container's main process: it lays `/tmp/evil`, a
/// script whose interpreter is `/proc/self/exe`, so that a runtime process that execs it
/// (an exec, a probe, a hook) runs the runtime's own binary inside the container. The
/// script is also a pod manifest for `podinit validate`, and `--presets /tmp/p` holds a
/// FIFO, so that the binary stays running until the attacker has opened its
/// /proc/PID/exe (no race is needed to hold it). The attacker then lets it go, waits for
/// it to end, and writes the binary through the fd it kept (`>`: O_TRUNC), as the
/// original exploit did once the runtime had exited.
const EXE_ATTACKER: &str = r#"
mkdir -p /tmp/p && mkfifo /tmp/p/x.yaml
printf '#!/proc/self/exe validate\napiVersion: v1\nkind: Pod\nmetadata: {name: evil}\nspec: {containers: [{name: c, image: busybox}]}\n' > /tmp/evil
chmod +x /tmp/evil
echo armed
while :; do
  for d in /proc/[0-9]*; do
    [ "$d" = /proc/$$ ] && continue
    l=$(readlink $d/exe 2>/dev/null) || continue
    case "$l" in *busybox*|"") continue;; esac
    exec 3< $d/exe || continue
    echo "caught ${d#/proc/} $l"
    break 2
  done
  sleep 0.01
done
echo > /tmp/p/x.yaml
while [ -e $d/exe ] && [ "$(readlink $d/exe 2>/dev/null)" = "$l" ]; do sleep 0.05; done
i=0
while [ $i -lt 20 ]; do
  if (echo pwned > /proc/self/fd/3) 2>/tmp/err; then echo WROTE; break; fi
  i=$((i+1)); sleep 0.05
done
echo "write: $(cat /tmp/err)"
sleep 60
"#;

/// A copy of the podinit binary under `dir`, named `name`: the file the attack may
/// overwrite, so that a failure of the defence cannot destroy the binary under test.
fn binary_copy(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    copy_executable(&bin(), &to);
    to
}

fn same_file(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

/// What the attacker reported: it caught the runtime's binary, and its write failed on a
/// read-only file system.
fn assert_attack_failed(who: &str, log: &str) {
    assert!(
        log.contains("caught "),
        "{who}: the attacker never ran: {log}"
    );
    assert!(
        !log.contains("WROTE"),
        "{who}: the binary was written: {log}"
    );
    let write = log
        .lines()
        .find_map(|l| l.strip_prefix("write: "))
        .unwrap_or_else(|| panic!("{who}: no write attempt: {log}"));
    assert!(
        write.contains("Read-only file system"),
        "{who}: the write failed for another reason than the seal: {write}"
    );
}

/// CVE-2019-5736 through `podinit run`: `podinit exec` runs the attacker's script. Every
/// process the supervisor starts (containers, execs, probes, hooks) runs the supervisor's
/// binary until it execs, and the supervisor runs from a read-only detached bind mount of
/// the binary (`sys::exe`), so what the container reaches through /proc/PID/exe cannot be
/// written.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2019_5736_the_binary_is_unwritable_through_an_exec_of_run() {
    require_root();
    let mut p = TestPod::new(
        "esc-exe",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {{name: c, image: busybox, command: [sh, -c, {EXE_ATTACKER:?}]}}\n"
        ),
    );
    let copy = binary_copy(&p.dir, "podinit");
    let args: Vec<std::ffi::OsString> = p.command().get_args().map(Into::into).collect();
    let mut c = std::process::Command::new(&copy);
    c.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    p.start_with(c);
    p.wait_log("c", 0, LIMIT, "armed");
    // The supervisor's binary itself: read-only, whoever opens it.
    let sup = supervisor_pid(&p);
    let e = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(format!("/proc/{sup}/exe"))
        .unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::EROFS),
        "the supervisor's exe: {e}"
    );
    let body = json!({"command": ["/tmp/evil", "--presets", "/tmp/p"], "timeoutSeconds": 20});
    let (code, r) = api(&p, "POST", "/v1/containers/c/exec", Some(&body.to_string()));
    assert_eq!(code, 200, "{r}");
    let log = p.wait_log("c", 0, LIMIT, "write: ");
    assert_attack_failed("podinit exec", &log);
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    assert!(same_file(&copy, &bin()), "the binary was changed");
    p.assert_nothing_left();
}

/// CVE-2019-5736 through `podinit runc exec`, the case runc's advisory describes: no
/// podinit process is left running once the exec ends, so only the seal keeps the file
/// from the attacker (runc's `exeseal`: podinit-runc re-executes itself from a read-only
/// detached bind mount before `create`, `run` and `exec`).
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2019_5736_the_binary_is_unwritable_through_runc_exec() {
    require_root();
    let lab = Lab::with_runtime("esc-exe-runc", |dir| binary_copy(dir, "podinit-runc"));
    let r = lab.tested();
    let mut b = lab.bundle(&["sh", "-c", EXE_ATTACKER]);
    b.set("/root/readonly", json!(false));
    let id = lab.id("exe");
    r.run_bg(&b, &id).expect_ok();
    wait_for(LIMIT, "the attacker to arm", || {
        b.container_output().contains("armed").then_some(())
    });
    // The created container's init ran from the sealed binary too.
    r.run(&["exec", &id, "/tmp/evil", "--presets", "/tmp/p"]);
    let log = wait_for(LIMIT, "the attacker's write", || {
        let out = b.container_output();
        out.contains("write: ").then_some(out)
    });
    assert_attack_failed("runc exec", &log);
    assert!(same_file(&r.bin, &bin()), "the binary was changed");
    r.run(&["delete", "--force", &id]).expect_ok();
    lab.assert_nothing_left(r, &b, &id, false);
}

/// CVE-2022-29162: `runc exec` gave the process inheritable capabilities it had not asked
/// for, which a file capability then made effective. A process started with exec (with
/// and without `--cap`) has empty inheritable and ambient sets.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2022_29162_exec_gives_no_inheritable_capabilities() {
    require_root();
    let lab = Lab::new("esc-inh");
    let r = lab.tested();
    let b = lab.bundle(&["sleep", "60"]);
    let id = lab.id("inh");
    r.run_bg(&b, &id).expect_ok();
    let caps = "grep -E '^Cap(Inh|Amb):' /proc/self/status";
    for extra in [&[][..], &["--cap", "CAP_NET_ADMIN"][..]] {
        let mut args = vec!["exec"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[&id, "sh", "-c", caps]);
        let o = r.run(&args).expect_ok();
        for l in o.stdout.lines() {
            assert!(l.ends_with("0000000000000000"), "exec {extra:?}: {l}");
        }
        assert_eq!(o.stdout.lines().count(), 2, "{o:?}");
    }
    r.run(&["delete", "--force", &id]).expect_ok();
    lab.assert_nothing_left(r, &b, &id, false);
}

/// Waits until container `c` of the running pod is refused (kubelet's
/// CreateContainerError, retried with back-off, or a StartError), then ends the pod; the
/// refusal's message.
fn refused(p: &mut TestPod, c: &str) -> String {
    let status = p.wait_status(LIMIT, |v| {
        let s = &container_status(v, c)["state"];
        s["waiting"]["reason"] == "CreateContainerError"
            || s["terminated"]["reason"] == "StartError"
    });
    let s = &container_status(&status, c)["state"];
    let msg = s["waiting"]["message"]
        .as_str()
        .or(s["terminated"]["message"].as_str())
        .unwrap_or("")
        .to_string();
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    msg
}

/// A directory on the host that an attack would write into, and how many entries it holds.
fn host_dir(lab_dir: &Path, what: &str) -> PathBuf {
    let d = lab_dir.join(format!("host-{what}"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entries(d: &Path) -> Vec<String> {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A bundle whose rootfs has `link` (a path in it) replaced by a symlink to `target`.
fn with_symlink(b: &Bundle, link: &str, target: &Path) {
    let at = b.rootfs().join(link.trim_start_matches('/'));
    let _ = std::fs::remove_dir_all(&at);
    let _ = std::fs::remove_file(&at);
    std::os::unix::fs::symlink(target, &at).unwrap();
}

/// CVE-2023-27561, CVE-2023-28642 (and the CVE-2019-19921 class): an image whose `/proc`
/// or `/sys` is a symlink to a host path, so that procfs (or sysfs) would be mounted
/// there, the runtime's writes to /proc/self/* and /proc/sys/* would go to files of the
/// image's choosing, and masked paths would mask nothing. Defence: a proc or sysfs mount
/// whose destination is a symlink is refused (`runtime::init::mounts::mount_one`), and a
/// procfs mount is checked to be procfs after mounting.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2023_27561_proc_and_sys_through_a_symlink_are_refused_by_runc() {
    require_root();
    let lab = Lab::new("esc-procln");
    let r = lab.tested();
    for (dir, abs) in [("proc", true), ("proc", false), ("sys", true)] {
        let host = host_dir(&lab.dir, &format!("{dir}-{abs}"));
        let b = lab.bundle(&["true"]);
        let target = if abs {
            host.clone()
        } else {
            // Relative: climbs out of the rootfs when resolved on the host.
            PathBuf::from(climb(&host))
        };
        with_symlink(&b, dir, &target);
        let id = lab.id("procln");
        let o = r.run_fg(&b, &id);
        assert!(!o.ok(), "/{dir} -> {}: started", target.display());
        assert!(
            o.stderr.contains("symlink"),
            "/{dir}: the error says why: {o:?}"
        );
        assert!(
            entries(&host).is_empty(),
            "{}: {:?}",
            host.display(),
            entries(&host)
        );
        r.run(&["delete", "--force", &id]);
        lab.assert_nothing_left(r, &b, &id, false);
    }
}

/// CVE-2019-19921: a volume mounted over /proc (after procfs) takes the place of the
/// files the runtime writes there (sysctls, oom_score_adj, the AppArmor label in runc)
/// and of the masked paths. Defence: as runc's checkProcMount, nothing but procfs is
/// mounted on /proc and nothing but lxcfs's files below it
/// (`runtime::mounts::check_proc_mount`), for every front-end: a bundle's mount through
/// runc, a hostPath volume through a pod.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2019_19921_a_volume_over_proc_is_refused() {
    require_root();
    let lab = Lab::new("esc-procvol");
    let r = lab.tested();
    let host = host_dir(&lab.dir, "vol");
    for dest in ["/proc", "/proc/sys", "/proc/sys/kernel/core_pattern"] {
        let b = lab.bundle(&["true"]);
        let mut mounts = b.config["mounts"].as_array().unwrap().clone();
        mounts.push(json!({"destination": dest, "type": "bind", "source": host,
                           "options": ["rbind", "rw"]}));
        let mut b = b;
        b.set("/mounts", json!(mounts));
        b.set("/linux/sysctl", json!({"net.ipv4.ip_forward": "1"}));
        let id = lab.id("procvol");
        let o = r.run_fg(&b, &id);
        assert!(!o.ok(), "a volume at {dest}: started");
        assert!(o.stderr.contains("/proc"), "{dest}: {o:?}");
        assert!(entries(&host).is_empty(), "{dest}: {:?}", entries(&host));
        r.run(&["delete", "--force", &id]);
        lab.assert_nothing_left(r, &b, &id, false);
    }
    // The same through a pod: a hostPath volume mounted at /proc.
    let mut p = TestPod::new(
        "esc-procvol",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: c\n    image: busybox\n    command: [\"true\"]\n    volumeMounts: [{{name: v, mountPath: /proc}}]\n  volumes: [{{name: v, hostPath: {{path: {}}}}}]\n",
            host.display()
        ),
    );
    p.start();
    let msg = refused(&mut p, "c");
    assert!(
        msg.contains("/proc cannot be mounted because it is not of type proc"),
        "{msg}"
    );
    assert!(entries(&host).is_empty(), "pod: {:?}", entries(&host));
    p.assert_nothing_left();
}

/// CVE-2017-1002101 (kubelet's subPath): a container sharing a volume replaces a subPath's
/// directory with a link to the host, and the next container mounting that subPath gets
/// the host's directory. Here an init container makes `sub` a link to a host directory,
/// absolute and relative, before the app container that mounts `subPath: sub` starts.
/// Defence: the subPath is reached below the volume with no link followed
/// (`x-podinit.source-beneath`, `sys::beneath`), so the container fails to start.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_sub_path_swapped_for_a_link_to_the_host_is_refused() {
    require_root();
    let scratch =
        std::env::temp_dir().join(format!("podinit-escape-subpath-{}", std::process::id()));
    let host = scratch.join("host");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("secret"), "host secret").unwrap();
    for link in [host.display().to_string(), climb(&host)] {
        let mut p = TestPod::new(
            "esc-subpath",
            &format!(
                r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  restartPolicy: Never
  initContainers:
  - name: a
    image: busybox
    command: [sh, -c, "rm -rf /v/sub && ln -s {link} /v/sub"]
    volumeMounts: [{{name: v, mountPath: /v}}]
  containers:
  - name: b
    image: busybox
    command: [sh, -c, "cat /h/secret; touch /h/written"]
    volumeMounts: [{{name: v, mountPath: /h, subPath: sub}}]
  volumes: [{{name: v, emptyDir: {{}}}}]
"#
            ),
        );
        p.start();
        let msg = refused(&mut p, "b");
        assert!(msg.contains("subPath"), "{link}: {msg}");
        assert!(
            !p.log("b", 0).contains("host secret"),
            "{link}: the host's file was read"
        );
        assert_eq!(
            entries(&host),
            ["secret"],
            "{link}: the host directory was written"
        );
        p.assert_nothing_left();
    }
    std::fs::remove_dir_all(&scratch).unwrap();
}

/// CVE-2025-31133: runc bind-mounted the container's /dev/null over each masked file; a
/// /dev/null that the image (or a container sharing /dev) made a link to a procfs file
/// such as /proc/sys/kernel/core_pattern put a writable copy of that file at the masked
/// path instead. Defence: /dev/null is opened without following links and must be the
/// null device (char 1:3) before it is bound, from that very fd (`Kernel::bind_null`).
/// The attack is tried with a link to /proc/sys/kernel/core_pattern; the test only reads
/// what the container got, never writes it.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2025_31133_a_dev_null_link_does_not_unmask_a_proc_file() {
    require_root();
    let lab = Lab::new("esc-null");
    let r = lab.tested();
    let masked = "/proc/timer_list";
    assert!(
        Path::new(masked).exists(),
        "{masked} is missing on this kernel: choose another masked file that it has"
    );
    let dev = host_dir(&lab.dir, "dev");
    std::os::unix::fs::symlink("/proc/sys/kernel/core_pattern", dev.join("null")).unwrap();
    let mut b = lab.bundle(&["sh", "-c", &format!("echo got=$(head -c 64 {masked})")]);
    // /dev is a bind of the prepared directory instead of the runtime's tmpfs.
    let mounts: Vec<serde_json::Value> = b.config["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["destination"].as_str().unwrap_or("").starts_with("/dev"))
        .cloned()
        .chain([json!({"destination": "/dev", "type": "bind", "source": dev, "options": ["rbind", "rw"]})])
        .collect();
    b.set("/mounts", json!(mounts));
    b.set("/linux/maskedPaths", json!([masked]));
    let id = lab.id("null");
    let o = r.run_fg(&b, &id);
    assert!(
        !o.ok(),
        "started with a masked path bound from a link: {o:?}"
    );
    assert!(o.stderr.contains("/dev/null"), "{o:?}");
    assert!(!o.stdout.contains("got="), "{o:?}");
    r.run(&["delete", "--force", &id]);
    lab.assert_nothing_left(r, &b, &id, false);
}

/// CVE-2025-52881: a container that can mount in its own mount namespace (here with
/// CAP_SYS_ADMIN; a racing container whose mounts propagate in does the same) puts a tmpfs
/// over its /proc whose `self` is a link to a directory of its choice, holding a file
/// `oom_score_adj`. The runtime's set-up of an exec, which writes the process's
/// `/proc/self/oom_score_adj` before it drops its privileges, would write the attacker's
/// file instead (with a bind of `/proc/sysrq-trigger` there, the host's). Here the
/// attacker's file is a harmless one on a host directory, which must keep its content.
/// Defence: every file the set-up writes under /proc is opened through a private procfs
/// (`fsopen("proc")`), with `RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_XDEV`
/// (`sys::procfs`), so the write lands on the process's own `oom_score_adj`.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2025_52881_a_fake_proc_does_not_take_the_writes_of_runc_exec() {
    require_root();
    let lab = Lab::new("esc-procw");
    let r = lab.tested();
    let host = host_dir(&lab.dir, "procw");
    std::fs::write(host.join("oom_score_adj"), "untouched\n").unwrap();
    let fake = "mount -t tmpfs fake /proc && ln -s /vol /proc/self && ln -s /vol /proc/thread-self && echo faked; sleep 60";
    let mut b = lab.bundle(&["sh", "-c", fake]);
    for set in ["bounding", "effective", "permitted"] {
        let pointer = format!("/process/capabilities/{set}");
        let mut caps = b.config.pointer(&pointer).cloned().unwrap_or(json!([]));
        caps.as_array_mut().unwrap().push(json!("CAP_SYS_ADMIN"));
        b.set(&pointer, caps);
    }
    b.set("/process/oomScoreAdj", json!(500));
    let mut mounts = b.config["mounts"].as_array().unwrap().clone();
    mounts.push(
        json!({"destination": "/vol", "type": "bind", "source": host, "options": ["rbind", "rw"]}),
    );
    b.set("/mounts", json!(mounts));
    let id = lab.id("procw");
    r.run_bg(&b, &id).expect_ok();
    wait_for(LIMIT, "the container's fake /proc", || {
        b.container_output().contains("faked").then_some(())
    });
    let o = r.run(&["exec", &id, "sh", "-c", "echo self=$(readlink /proc/self)"]);
    assert_eq!(
        std::fs::read_to_string(host.join("oom_score_adj")).unwrap(),
        "untouched\n",
        "the exec's oom_score_adj went to the container's file: {o:?}"
    );
    assert_eq!(entries(&host), ["oom_score_adj"], "{o:?}");
    // The attack was in place for the exec (its /proc/self is the link), and the exec ran.
    let o = o.expect_ok();
    assert_eq!(o.stdout.trim(), "self=/vol", "{o:?}");
    r.run(&["delete", "--force", &id]).expect_ok();
    lab.assert_nothing_left(r, &b, &id, false);
}

/// CVE-2025-52881 through a pod: the same fake /proc, made by a container given
/// CAP_SYS_ADMIN, meets an exec of the supervisor's (`POST /v1/containers/c/exec`, as a
/// probe's), whose set-up writes the pod's QoS `oom_score_adj` for the process.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2025_52881_a_fake_proc_does_not_take_the_writes_of_a_pod_exec() {
    require_root();
    let mut p = TestPod::new(
        "esc-procw",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: busybox\n    securityContext: {capabilities: {add: [SYS_ADMIN]}}\n    command: [sh, -c, \"mount -t tmpfs fake /proc && ln -s /vol /proc/self && ln -s /vol /proc/thread-self && echo faked; sleep 600\"]\n    volumeMounts: [{name: v, mountPath: /vol}]\n  volumes: [{name: v, hostPath: {path: HOST}}]\n",
    );
    let host = host_dir(&p.dir, "procw");
    std::fs::write(host.join("oom_score_adj"), "untouched\n").unwrap();
    let yaml = std::fs::read_to_string(&p.manifest)
        .unwrap()
        .replace("HOST", &host.display().to_string());
    std::fs::write(&p.manifest, yaml).unwrap();
    p.start();
    p.wait_log("c", 0, LIMIT, "faked");
    let body =
        json!({"command": ["sh", "-c", "echo self=$(readlink /proc/self)"], "timeoutSeconds": 20});
    let (code, r) = api(&p, "POST", "/v1/containers/c/exec", Some(&body.to_string()));
    assert_eq!(
        std::fs::read_to_string(host.join("oom_score_adj")).unwrap(),
        "untouched\n",
        "the exec's oom_score_adj went to the container's file: {r}"
    );
    assert_eq!(entries(&host), ["oom_score_adj"], "{r}");
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(
        r["stdout"].as_str().map(str::trim),
        Some("self=/vol"),
        "{r}"
    );
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

/// CVE-2021-30465 and CVE-2024-45310: a container sharing a volume with the victim swaps
/// a directory on the victim's mount path for a link to the host, in a loop, while the
/// victim starts: a runtime that resolved the path once and used it later would make its
/// directories (and mount) on the host. Here a sidecar swaps `/s/d` between a directory
/// and a link to a host directory (absolute: before the root is switched the kernel would
/// resolve it on the host) while twelve containers mount a volume at `/s/d/t`, through a
/// pod, and twenty through `runc run`. Defence: every component of a mount's destination
/// is opened from its parent with no link followed, made there with mkdirat, and the mount
/// goes onto that fd (`sys::beneath`). Each victim starts inside its root or fails; the
/// host directory stays empty and no mount appears on the host.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn cve_2021_30465_racing_links_on_mount_paths_never_reach_the_host() {
    require_root();
    let lab = Lab::new("esc-race");
    let r = lab.tested();
    let host = host_dir(&lab.dir, "target");
    let swap = format!(
        "i=0; while [ $i -lt 100000 ]; do rm -rf /s/d; mkdir /s/d; rm -rf /s/d; ln -s {} /s/d; i=$((i+1)); done",
        host.display()
    );
    let victims: String = (0..12)
        .map(|i| {
            format!(
                "  - {{name: v{i}, image: busybox, command: [\"true\"], volumeMounts: [{{name: s, mountPath: /s}}, {{name: t, mountPath: /s/d/t}}]}}\n"
            )
        })
        .collect();
    let mut p = TestPod::new(
        "esc-race",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  initContainers:\n  - {{name: swap, image: busybox, restartPolicy: Always, command: [sh, -c, {swap:?}], volumeMounts: [{{name: s, mountPath: /s}}]}}\n  containers:\n{victims}  volumes: [{{name: s, emptyDir: {{}}}}, {{name: t, emptyDir: {{}}}}]\n"
        ),
    );
    p.run(LIMIT);
    assert!(entries(&host).is_empty(), "pod: {:?}", entries(&host));
    p.assert_nothing_left();

    // The same through runc: the shared volume is a host directory bound into both.
    let shared = host_dir(&lab.dir, "shared");
    let vol = |b: &mut Bundle, extra: &[serde_json::Value]| {
        let mut mounts = b.config["mounts"].as_array().unwrap().clone();
        mounts.push(json!({"destination": "/s", "type": "bind", "source": shared, "options": ["rbind", "rw"]}));
        mounts.extend_from_slice(extra);
        b.set("/mounts", json!(mounts));
    };
    let mut attacker = lab.bundle(&["sh", "-c", &swap]);
    vol(&mut attacker, &[]);
    let aid = lab.id("swap");
    r.run_bg(&attacker, &aid).expect_ok();
    let mut started = 0;
    for _ in 0..20 {
        let mut b = lab.bundle(&["true"]);
        vol(
            &mut b,
            &[
                json!({"destination": "/s/d/t", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]}),
            ],
        );
        let id = lab.id("victim");
        if r.run_fg(&b, &id).ok() {
            started += 1;
        }
        r.run(&["delete", "--force", &id]);
        lab.assert_nothing_left(r, &b, &id, false);
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(&host.display().to_string()),
            "a mount landed on the host's {}",
            host.display()
        );
    }
    assert!(entries(&host).is_empty(), "runc: {:?}", entries(&host));
    eprintln!("runc victims started inside their root: {started} of 20");
    r.run(&["delete", "--force", &aid]).expect_ok();
    lab.assert_nothing_left(r, &attacker, &aid, false);
}
