//! Security, checked from inside containers as youki's runtimetest does: what a
//! process podinit starts may hold and see. tests/foundation.rs already checks a main
//! process in its own pid namespace (fds 0–2, empty signal mask, the default capabilities,
//! NoNewPrivs for a non-root user, /proc/kcore masked, /proc/sysrq-trigger read-only) and
//! tests/lifecycle.rs that `cat /proc/1/exe` fails in a shared pid namespace. This file
//! extends those to exec'd processes, hooks and the shared pid namespace, to other
//! capability sets, every masked and read-only path, the status socket, and bundles whose
//! rootfs holds symlinks that lead out of it.

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

/// What a process reports about itself: its signal state, capabilities, NoNewPrivs and
/// fds. The status comes first: busybox sh starts ignoring SIGQUIT itself (and passes
/// that on) once it has run a command substitution.
const SELF_REPORT: &str =
    "grep -E '^(Sig(Blk|Ign)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status; \
    echo fds=$(ls /proc/self/fd | tr '\\n' ' ')";

fn field<'a>(log: &'a str, key: &str) -> &'a str {
    log.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in {log}"))
        .trim()
}

/// The report shows fds 0, 1, 2 only (plus the one `ls` reads the directory with), and no
/// blocked or ignored signal.
fn assert_clean(who: &str, report: &str) {
    let fds = report
        .lines()
        .find_map(|l| l.strip_prefix("fds="))
        .unwrap_or_else(|| panic!("{who}: {report}"));
    let fds: Vec<&str> = fds.split_whitespace().collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{who}: open fds {fds:?}");
    assert_eq!(
        field(report, "SigBlk"),
        "0000000000000000",
        "{who}: {report}"
    );
    assert_eq!(
        field(report, "SigIgn"),
        "0000000000000000",
        "{who}: {report}"
    );
}

fn assert_caps(who: &str, report: &str, eff_prm_bnd: [&str; 3], inh_amb: &str) {
    for (k, want) in ["CapEff", "CapPrm", "CapBnd"].iter().zip(eff_prm_bnd) {
        assert_eq!(field(report, k), want, "{who}: {k}: {report}");
    }
    for k in ["CapInh", "CapAmb"] {
        assert_eq!(field(report, k), inh_amb, "{who}: {k}: {report}");
    }
}

fn exec(p: &TestPod, container: &str, script: &str) -> String {
    let body = serde_json::json!({"command": ["sh", "-c", script], "timeoutSeconds": 20});
    let (code, r) = api(
        p,
        "POST",
        &format!("/v1/containers/{container}/exec"),
        Some(&body.to_string()),
    );
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    r["stdout"].as_str().unwrap().to_string()
}

/// A pod of one busybox container, `c`, that runs `script` once.
fn script_pod(prefix: &str, script: &str) -> TestPod {
    TestPod::new(
        prefix,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: NAME}}\nspec:\n  restartPolicy: Never\n  containers:\n  - {{name: c, image: busybox, command: [\"sh\", \"-c\", {script:?}]}}\n"
        ),
    )
}

fn running(p: &TestPod, n: usize) {
    p.wait_status(LIMIT, |v| {
        v["status"]["containerStatuses"]
            .as_array()
            .is_some_and(|a| a.len() == n && a.iter().all(|c| c["state"]["running"].is_object()))
    });
}

/// The default set of the busybox bundle (Docker's), as a mask.
const DEFAULT_CAPS: &str = "00000000a80425fb";

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn execs_hooks_and_shared_pid_namespace_processes_start_clean() {
    require_root();
    // In a shared pid namespace the container's process is not PID 1 and is started
    // without the second fork: another path through the runtime than foundation.rs's.
    let mut p = TestPod::new(
        "cleanstate",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  shareProcessNamespace: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", {main:?}]
    lifecycle:
      postStart: {{exec: {{command: ["sh", "-c", {hook:?}]}}}}
"#,
            main = format!("{SELF_REPORT}; trap 'exit 0' TERM; sleep 1000 & wait"),
            // No subshell: busybox sh ignores SIGQUIT in its subshells itself.
            hook = format!("exec > /tmp/hook.txt; {SELF_REPORT}"),
        ),
    );
    p.start();
    running(&p, 1);
    // Running says the process started, not that its report is written yet.
    let main = p.wait_log("c", 0, LIMIT, "fds=");
    assert_clean("main process", &main);
    assert_caps("main process", &main, [DEFAULT_CAPS; 3], "0000000000000000");
    assert_eq!(field(&main, "NoNewPrivs"), "0", "{main}");
    let hook = exec(&p, "c", "cat /tmp/hook.txt");
    assert_clean("postStart hook", &hook);
    assert_caps(
        "postStart hook",
        &hook,
        [DEFAULT_CAPS; 3],
        "0000000000000000",
    );
    let ex = exec(&p, "c", SELF_REPORT);
    assert_clean("exec", &ex);
    assert_caps("exec", &ex, [DEFAULT_CAPS; 3], "0000000000000000");
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait(LIMIT).code, 0);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn capabilities_are_exactly_the_configured_ones() {
    require_root();
    // drop ALL, add NET_BIND_SERVICE (bit 10): root keeps that one capability in every set
    // but the inheritable and ambient ones; a non-root user has it in the bounding set
    // only. allowPrivilegeEscalation: false sets NoNewPrivs for root too, and for execs.
    let caps = "capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}";
    let mut p = TestPod::new(
        "caps",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: root
    image: busybox
    command: ["sh", "-c", {root:?}]
    securityContext: {{allowPrivilegeEscalation: false, {caps}}}
  - name: user
    image: busybox
    command: ["sh", "-c", {user:?}]
    securityContext: {{runAsUser: 1000, {caps}}}
"#,
            root = format!(
                "{SELF_REPORT}; touch /tmp/f; chown 1000 /tmp/f 2>/dev/null && echo chown=yes || echo chown=no; \
                 nc -l -p 80 & sleep 0.2; kill -0 $! 2>/dev/null && echo bind80=yes || echo bind80=no; kill $!; \
                 trap 'exit 0' TERM; sleep 1000 & wait"
            ),
            user = format!("{SELF_REPORT}; trap 'exit 0' TERM; sleep 1000 & wait"),
        ),
    );
    p.start();
    running(&p, 2);
    let wait_log = |c: &str, marker: &str| {
        let deadline = std::time::Instant::now() + LIMIT;
        loop {
            let l = p.log(c, 0);
            if l.contains(marker) {
                return l;
            }
            assert!(std::time::Instant::now() < deadline, "{c}: {l}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let only = "0000000000000400";
    let none = "0000000000000000";
    let root = wait_log("root", "bind80=");
    assert_clean("root", &root);
    assert_caps("root", &root, [only; 3], none);
    assert_eq!(field(&root, "NoNewPrivs"), "1", "{root}");
    // The capabilities act: CAP_CHOWN is gone, CAP_NET_BIND_SERVICE is there.
    assert!(root.contains("chown=no"), "{root}");
    assert!(root.contains("bind80=yes"), "{root}");
    let ex = exec(&p, "root", SELF_REPORT);
    assert_caps("exec in root", &ex, [only; 3], none);
    assert_eq!(field(&ex, "NoNewPrivs"), "1", "{ex}");
    let user = wait_log("user", "NoNewPrivs");
    assert_caps("user", &user, [none, none, only], none);
    assert_eq!(field(&user, "NoNewPrivs"), "0", "{user}");
    let ex = exec(&p, "user", SELF_REPORT);
    assert_caps("exec in user", &ex, [none, none, only], none);
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait(LIMIT).code, 0);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn masked_paths_are_empty_and_read_only_paths_refuse_writes() {
    require_root();
    // The bundle's lists (Docker's): masked files read as empty (/dev/null over them),
    // masked directories are empty; the read-only ones are read-only mounts.
    let masked = [
        "/proc/acpi",
        "/proc/asound",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/sys/firmware",
        "/proc/scsi",
    ];
    let readonly = [
        "/proc/bus",
        "/proc/fs",
        "/proc/irq",
        "/proc/sys",
        "/proc/sysrq-trigger",
    ];
    let script = format!(
        "for p in {masked}; do if [ -d $p ]; then echo \"masked $p dir $(ls -A $p | wc -l)\"; \
         elif [ -e $p ]; then echo \"masked $p file $(cat $p 2>/dev/null | wc -c)\"; \
         else echo \"masked $p absent\"; fi; done; \
         for p in {ro}; do echo \"ro $p $(grep \" $p \" /proc/self/mountinfo | cut -d' ' -f6)\"; done; \
         for f in /proc/sys/kernel/domainname /proc/sys/net/ipv4/ip_forward /proc/sys/vm/overcommit_memory; do \
           (cat $f > $f) 2>/dev/null && echo \"write $f ok\" || echo \"write $f refused\"; done;",
        masked = masked.join(" "),
        ro = readonly.join(" "),
    );
    let mut p = script_pod("masked", &script);
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = p.log("c", 0);
    for m in masked {
        let line = log
            .lines()
            .find(|l| l.starts_with(&format!("masked {m} ")))
            .unwrap_or_else(|| panic!("{m}: {log}"));
        let host_has = Path::new(m).exists();
        if host_has {
            assert!(
                line.ends_with(" 0"),
                "{m} is readable in the container: {line}"
            );
        } else {
            assert!(line.ends_with(" absent") || line.ends_with(" 0"), "{line}");
        }
    }
    // Not vacuous: the host has some of them (which depends on its kernel).
    let present: Vec<&str> = masked
        .into_iter()
        .filter(|m| Path::new(m).exists())
        .collect();
    eprintln!("masked paths the host has: {present:?}");
    assert!(present.len() >= 2, "{present:?}");
    for r in readonly {
        if !Path::new(r).exists() {
            eprintln!("read-only path the host does not have: {r}");
            continue;
        }
        let line = log
            .lines()
            .find(|l| l.starts_with(&format!("ro {r} ")))
            .unwrap_or_else(|| panic!("{r}: {log}"));
        let opts = line.rsplit(' ').next().unwrap();
        assert!(
            opts.split(',').any(|o| o == "ro"),
            "{r} is not a read-only mount: {line}"
        );
    }
    for f in [
        "/proc/sys/kernel/domainname",
        "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/vm/overcommit_memory",
    ] {
        assert!(log.contains(&format!("write {f} refused")), "{f}: {log}");
    }
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn dev_has_the_default_nodes_and_links_and_nothing_else() {
    require_root();
    // The OCI defaults on the spec's /dev tmpfs: six character devices, mode 0666 and owned
    // by root, runc's links, and the spec's own mounts (pts, shm, mqueue, the termination
    // log) — nothing from the host's /dev.
    let script = "for d in null zero full random urandom tty; do stat -c '%n %F %t:%T %a %u:%g' /dev/$d; done; \
        for l in fd stdin stdout stderr core ptmx; do echo \"/dev/$l -> $(readlink /dev/$l)\"; done; \
        echo \"entries $(ls -A /dev | sort | tr '\\n' ' ')\"; \
        echo hello > /dev/null && head -c 3 /dev/zero | wc -c";
    let mut p = script_pod("devnodes", script);
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = p.log("c", 0);
    for (name, dev) in [
        ("null", "1:3"),
        ("zero", "1:5"),
        ("full", "1:7"),
        ("random", "1:8"),
        ("urandom", "1:9"),
        ("tty", "5:0"),
    ] {
        let want = format!("/dev/{name} character special file {dev} 666 0:0");
        assert!(log.lines().any(|l| l == want), "{want}: {log}");
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("core", "/proc/kcore"),
        ("ptmx", "pts/ptmx"),
    ] {
        let want = format!("/dev/{link} -> {target}");
        assert!(log.lines().any(|l| l == want), "{want}: {log}");
    }
    let entries = log
        .lines()
        .find_map(|l| l.strip_prefix("entries "))
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(
        entries.trim(),
        "core fd full mqueue null ptmx pts random shm stderr stdin stdout termination-log tty urandom zero",
        "{log}"
    );
    assert!(log.lines().any(|l| l.trim() == "3"), "{log}");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_supervisor_is_out_of_reach_in_a_shared_pid_namespace() {
    require_root();
    // podinit is PID 1 there and not dumpable: nothing of its process can be opened, only
    // what any process shows (its command line). Checked from the container's main process
    // and from an exec, both root with the default capabilities.
    let probe = "echo cmdline=$(tr '\\0' ' ' < /proc/1/cmdline | cut -d' ' -f2); \
        for f in exe cwd root; do readlink /proc/1/$f >/dev/null 2>&1 && echo \"readlink $f ok\" || echo \"readlink $f denied\"; done; \
        for f in exe environ mem maps auxv; do cat /proc/1/$f >/dev/null 2>&1 && echo \"cat $f ok\" || echo \"cat $f denied\"; done; \
        for f in /proc/1/fd/*; do readlink $f >/dev/null 2>&1 && echo \"readlink fd ok\"; cat $f >/dev/null 2>&1 && echo \"cat fd ok\"; done; \
        ls /proc/1/root/ >/dev/null 2>&1 && echo 'ls root ok' || echo 'ls root denied'";
    let mut p = TestPod::new(
        "pid1exe",
        &format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  shareProcessNamespace: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", {main:?}]
"#,
            main = format!("{probe}; trap 'exit 0' TERM; sleep 1000 & wait")
        ),
    );
    p.start();
    running(&p, 1);
    let check = |who: &str, out: &str| {
        assert!(
            out.contains("cmdline=run"),
            "{who}: PID 1 is podinit: {out}"
        );
        for f in ["exe", "cwd", "root"] {
            assert!(
                out.contains(&format!("readlink {f} denied")),
                "{who}: {f}: {out}"
            );
        }
        for f in ["exe", "environ", "mem", "maps", "auxv"] {
            assert!(
                out.contains(&format!("cat {f} denied")),
                "{who}: {f}: {out}"
            );
        }
        // Its fd numbers can be listed (the directory is root's), but none can be followed.
        assert!(!out.contains("fd ok"), "{who}: {out}");
        assert!(out.contains("ls root denied"), "{who}: {out}");
    };
    let deadline = std::time::Instant::now() + LIMIT;
    while !p.log("c", 0).contains("ls root") {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    check("main", &p.log("c", 0));
    check("exec", &exec(&p, "c", probe));
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait(LIMIT).code, 0);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn the_socket_and_state_dir_are_invisible_inside_and_closed_to_other_users() {
    require_root();
    // Every kind of volume podinit makes lives in the state dir: none of them may show the
    // rest of it, nor the socket.
    let mut p = TestPod::new(
        "sock",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {k: v}
---
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"]
    volumeMounts:
    - {name: e, mountPath: /e}
    - {name: m, mountPath: /m}
    - {name: cm, mountPath: /cm}
    - {name: d, mountPath: /d}
  volumes:
  - {name: e, emptyDir: {}}
  - {name: m, emptyDir: {medium: Memory}}
  - {name: cm, configMap: {name: cm}}
  - {name: d, downwardAPI: {items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}}
"#,
    );
    p.start();
    running(&p, 1);
    let sock = p.state.join("pod.sock");
    let found = exec(
        &p,
        "c",
        &format!(
            "find / \\( -path /proc -o -path /sys \\) -prune -o \\( -type s -o -name pod.sock -o -name .lock \
             -o -name status.json -o -name events.jsonl -o -name .work \\) -print; \
             ls -d {} {} 2>/dev/null; ls -a /e/.. /m/.. | grep -c -e '^\\.work$' -e '^pod.sock$' || true",
            p.state.display(),
            sock.display()
        ),
    );
    assert_eq!(found.trim(), "0", "seen from inside: {found}");
    // On the host: the state dir is root's alone, the socket 0600.
    let mode = |f: &Path| std::fs::metadata(f).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&p.state), 0o700);
    assert_eq!(mode(&sock), 0o600);
    // The client from a copy that uid 65534 may run wherever the build lives.
    let client = p.dir.join("podinit-client");
    copy_executable(&bin(), &client);
    std::fs::set_permissions(&p.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = || {
        let out = Command::new(&client)
            .args(["status", "-o", "json", "--socket"])
            .arg(&sock)
            .uid(65534)
            .gid(65534)
            .output_within(CLIENT_LIMIT);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Another user cannot even reach the socket…
    let (code, stdout, stderr) = as_nobody();
    assert_ne!(code, Some(0), "{stdout}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    // …and when the file modes are opened up by mistake, the server still refuses the
    // peer (SO_PEERCRED: root or podinit's own user only) with a 403 Status.
    std::fs::set_permissions(&p.state, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, stdout, stderr) = as_nobody();
    assert_ne!(code, Some(0), "{stdout}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("peer is neither root nor podinit's user"),
        "{stderr}"
    );
    // The pod is untouched: root is served.
    let (code, pod) = api(&p, "GET", "/v1/pod", None);
    assert_eq!(code, 200);
    assert_eq!(pod["status"]["phase"], "Running");
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait(LIMIT).code, 0);
    p.assert_nothing_left();
}

/// A copy of the busybox bundle with its own rootfs (to plant symlinks in), changed by
/// `edit_rootfs` and `edit_config`.
fn rootfs_copy(
    p: &TestPod,
    edit_rootfs: impl FnOnce(&Path),
    edit_config: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let b = p.dir.join("bundle");
    std::fs::create_dir_all(&b).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(bundles().join("busybox/rootfs"))
        .arg(b.join("rootfs"))
        .status()
        .unwrap();
    assert!(st.success());
    edit_rootfs(&b.join("rootfs"));
    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundles().join("busybox/config.json")).unwrap())
            .unwrap();
    edit_config(&mut cfg);
    std::fs::write(b.join("config.json"), cfg.to_string()).unwrap();
    b
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn mount_destinations_behind_symlinks_stay_inside_the_rootfs() {
    require_root();
    // The rootfs has an absolute and a relative symlink pointing at a host directory; a
    // volume and a bundle tmpfs are mounted below them. Both must land inside the
    // container's rootfs (where the link points when the rootfs is `/`), and nothing may be
    // created or mounted on the host.
    let mut p = TestPod::new("symlink", "");
    let host = PathBuf::from(format!("/tmp/podinit-escape-{}", p.name));
    std::fs::create_dir_all(&host).unwrap();
    let host_s = host.display().to_string();
    let b = rootfs_copy(
        &p,
        |r| {
            std::os::unix::fs::symlink(&host, r.join("abs")).unwrap();
            std::os::unix::fs::symlink(
                format!("../../../../../../../..{host_s}"),
                r.join("etc/rel"),
            )
            .unwrap();
        },
        |c| {
            c["mounts"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"destination": "/etc/rel/tmpfs", "type": "tmpfs", "source": "tmpfs"}));
        },
    );
    std::fs::write(
        &p.manifest,
        format!(
            r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: {image}
    command: ["sh", "-c", "echo hi > /abs/vol/f && cat /check/f && grep -c {host_s} /proc/self/mountinfo; ls {host_s}"]
    volumeMounts:
    - {{name: v, mountPath: /abs/vol}}
    - {{name: v, mountPath: /check}}
  volumes: [{{name: v, emptyDir: {{}}}}]
"#,
            name = p.name,
            image = b.display()
        ),
    )
    .unwrap();
    let out = p.run(LIMIT);
    let left: Vec<_> = std::fs::read_dir(&host).unwrap().flatten().collect();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let _ = std::fs::remove_dir_all(&host);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, p.log("c", 0));
    // The volume is reachable through the link inside; the two mounts sit at the link's
    // target inside the rootfs (mountinfo names them by the container's path).
    let log = p.log("c", 0);
    let mut lines = log.lines();
    assert_eq!(lines.next(), Some("hi"), "{log}");
    assert_eq!(lines.next(), Some("2"), "{log}");
    assert!(left.is_empty(), "created on the host: {left:?}");
    assert!(!mounts.contains(&host_s), "mounted on the host: {host_s}");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_proc_that_is_a_symlink_is_refused() {
    require_root();
    // runc's CVE-2019-19921 class: procfs mounted through a symlink could land anywhere
    // (here: on a host directory), and what is written under /proc afterwards (the
    // sysctls, oom_score_adj, the masks) would go there.
    let mut p = TestPod::new("procsym", "");
    let host = PathBuf::from(format!("/tmp/podinit-procsym-{}", p.name));
    std::fs::create_dir_all(&host).unwrap();
    let b = rootfs_copy(
        &p,
        |r| {
            std::fs::remove_dir(r.join("proc")).unwrap();
            std::os::unix::fs::symlink(&host, r.join("proc")).unwrap();
        },
        |_| {},
    );
    std::fs::write(
        &p.manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {}}}\nspec:\n  restartPolicy: Never\n  containers:\n  - {{name: c, image: {}, command: [\"true\"]}}\n",
            p.name,
            b.display()
        ),
    )
    .unwrap();
    let out = p.run(LIMIT);
    let left: Vec<_> = std::fs::read_dir(&host).unwrap().flatten().collect();
    let _ = std::fs::remove_dir_all(&host);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let c = container_status(&out.status, "c");
    let t = &c["state"]["terminated"];
    eprintln!("/proc symlink: {c}");
    assert_eq!(t["reason"], "StartError", "{c}");
    let msg = t["message"].as_str().unwrap_or_default();
    assert!(msg.contains("/proc") && msg.contains("symlink"), "{msg}");
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(left.is_empty(), "written on the host: {left:?}");
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn device_nodes_outside_the_allowed_list_cannot_be_opened() {
    require_root();
    // CAP_MKNOD is in the default set, so the container can make any node: the device
    // cgroup is what stops it from using one. /dev/mem (c 1:1) and loop0 (b 7:0) are not
    // in the list (deny all, then null, zero, full, random, urandom, tty, ptmx, pts); a
    // node made for null (c 1:3) is, and the list's nodes in /dev work.
    let script = "mknod /tmp/mem c 1 1 && mknod /tmp/loop b 7 0 && mknod /tmp/null c 1 3 && \
        for d in /tmp/mem /tmp/loop /tmp/null /dev/null /dev/zero /dev/urandom; do \
          head -c 1 $d > /dev/null 2>&1 && echo \"open $d ok\" || echo \"open $d refused\"; done";
    let mut p = script_pod("devices", script);
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = p.log("c", 0);
    for d in ["/tmp/mem", "/tmp/loop"] {
        assert!(log.contains(&format!("open {d} refused")), "{d}: {log}");
    }
    for d in ["/tmp/null", "/dev/null", "/dev/zero", "/dev/urandom"] {
        assert!(log.contains(&format!("open {d} ok")), "{d}: {log}");
    }
    p.assert_nothing_left();
}
