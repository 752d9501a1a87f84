//! The order of a container's set-up, recorded without root.

use std::path::PathBuf;

use super::kernel::Kind;
use super::recorder::Recorder;
use super::setup;
use crate::runtime::prepare::Prepared;

fn prepared(extra: serde_json::Value) -> Prepared {
    prepared_with(extra, crate::runtime::prepare::Namespaces::Pod)
}

fn prepared_with(extra: serde_json::Value, kinds: crate::runtime::prepare::Namespaces) -> Prepared {
    let mut v = serde_json::json!({
        "ociVersion": "1.0.2",
        "process": {"args": ["/bin/sh"], "cwd": "/work", "env": ["PATH=/bin:/usr/bin"],
                    "user": {"uid": 1000, "gid": 1000},
                    "capabilities": {"bounding": ["CAP_KILL"], "effective": ["CAP_KILL"]}},
        "root": {"path": "/r", "readonly": true},
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["mode=755"]}
        ],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}],
                  "maskedPaths": ["/proc/kcore", "/proc/acpi", "/proc/nothing"],
                  "readonlyPaths": ["/proc/sys"],
                  "sysctl": {"net.ipv4.ip_forward": "1"}}
    });
    merge(&mut v, extra);
    let spec: oci_spec::runtime::Spec = serde_json::from_value(v).unwrap();
    Prepared::from_spec_with(&spec, [0, 1, 2], kinds).unwrap()
}

fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
    match (into, from) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn recorder() -> Recorder {
    let mut k = Recorder::default();
    k.paths.insert("/proc/kcore".into(), Kind::Other);
    k.paths.insert("/proc/acpi".into(), Kind::Dir);
    k
}

/// The calls of a set-up, and the error it ended with (a recorder never execs).
fn run(k: &Recorder, p: &Prepared) -> (Vec<String>, String) {
    let tasks = [PathBuf::from("/cg/memory/c/tasks")];
    let err = match setup(k, p, &tasks, 9) {
        Ok(never) => match never {},
        Err(e) => e.to_string(),
    };
    (k.calls(), err)
}

/// The index of the first call that starts with the words `prefix`.
fn at(calls: &[String], prefix: &str) -> usize {
    let words = |c: &String| {
        c.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' ') || prefix.ends_with(' '))
    };
    calls
        .iter()
        .position(words)
        .unwrap_or_else(|| panic!("no call {prefix:?} in {calls:#?}"))
}

fn assert_order(calls: &[String], prefixes: &[&str]) {
    let idx: Vec<usize> = prefixes.iter().map(|p| at(calls, p)).collect();
    for (w, pair) in idx.windows(2).enumerate() {
        assert!(
            pair[0] < pair[1],
            "{:?} comes after {:?}: {calls:#?}",
            prefixes[w],
            prefixes[w + 1]
        );
    }
}

#[test]
fn the_cgroup_is_joined_first_and_exec_comes_last() {
    let k = recorder();
    let (calls, err) = run(&k, &prepared(serde_json::json!({})));
    assert!(calls[0].starts_with("join_cgroups"), "{calls:#?}");
    assert_eq!(calls.last().unwrap(), "execve /bin/sh");
    assert!(err.starts_with("exec: \"/bin/sh\": "), "{err}");
    assert_order(
        &calls,
        &["join_cgroups", "reset_signals", "setsid", "set_stdio 0 0"],
    );
}

#[test]
fn mounts_come_before_pivot_root_and_sysctls_masked_and_read_only_paths_after() {
    let k = recorder();
    let (calls, _) = run(&k, &prepared(serde_json::json!({})));
    assert_order(
        &calls,
        &[
            "mount - / - ",
            "mount /r /r ",
            "mount proc /r/proc proc",
            "statfs /r/proc",
            "mount tmpfs /r/dev tmpfs",
            "mknod /r/dev/null",
            "symlink /proc/self/fd /r/dev/fd",
            "chdir /r",
            "pivot_root",
            "detach .",
            "chdir /",
            // Sysctls before /proc/sys is made read-only, as runc writes them.
            "write_proc /proc/sys/net/ipv4/ip_forward 1",
            "mount /dev/null /proc/kcore",
            "mask_dir /proc/acpi",
            "bind_readonly /proc/sys",
            &format!(
                "mount - / - {:#x}",
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY
            ),
            "close_range_cloexec",
        ],
    );
    assert!(
        !calls.iter().any(|c| c.contains("/proc/nothing")),
        "a masked path that does not exist is left alone"
    );
}

#[test]
fn a_shared_root_makes_the_rootfs_mount_private_first_and_is_shared_after_pivot_root() {
    let k = recorder();
    let p = prepared(serde_json::json!({"linux": {"rootfsPropagation": "rshared"}}));
    let (calls, _) = run(&k, &p);
    let shared = libc::MS_SHARED | libc::MS_REC;
    assert_order(
        &calls,
        &[
            &format!("mount - / - {shared:#x}"),
            // The mount holding the rootfs itself (a CRI rootfs is a mount point), as
            // runc's rootfsParentMountPrivate finds it, so that its bind is not shared.
            "mount_point_of /r",
            &format!("mount - / - {:#x}", libc::MS_PRIVATE),
            "mount /r /r ",
            "pivot_root",
        ],
    );
    let to_shared = format!("mount - / - {shared:#x}");
    let last = calls.iter().rposition(|c| c.starts_with(&to_shared));
    assert!(
        last.is_some_and(|i| i > at(&calls, "pivot_root")),
        "the root's propagation is applied again once it is /: {calls:#?}"
    );
}

#[test]
fn capabilities_are_dropped_before_no_new_privs_and_seccomp_is_last_before_exec() {
    let k = recorder();
    let p = prepared(serde_json::json!({
        "process": {"noNewPrivileges": true,
                    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 10, "soft": 10}]},
        "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ERRNO"}}
    }));
    let (calls, _) = run(&k, &p);
    assert_order(
        &calls,
        &[
            "setrlimit",
            "close_range_cloexec 3",
            "drop_bounding",
            "setgroups [1000]",
            "keep_caps true",
            "setresgid 1000",
            "setresuid 1000",
            "keep_caps false",
            "set_caps",
            "no_new_privs",
            "chdir /work",
            "seccomp",
            "execve /bin/sh",
        ],
    );
    assert_eq!(at(&calls, "seccomp") + 1, at(&calls, "execve"));
}

#[test]
fn without_no_new_privs_seccomp_comes_before_the_capabilities_are_dropped() {
    let k = recorder();
    let p = prepared(serde_json::json!({
        "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ERRNO"}}
    }));
    let (calls, _) = run(&k, &p);
    assert_order(
        &calls,
        &["close_range_cloexec", "seccomp", "drop_bounding", "execve"],
    );
    assert!(!calls.iter().any(|c| c.starts_with("no_new_privs")));
    assert_eq!(calls.iter().filter(|c| c.starts_with("seccomp")).count(), 1);
}

#[test]
fn an_exec_into_a_running_container_joins_its_namespaces_and_mounts_nothing() {
    let k = recorder();
    let mut p = prepared(serde_json::json!({
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "cgroup"}]}
    }));
    p.join = Some(42);
    let (calls, _) = run(&k, &p);
    let ns = libc::CLONE_NEWNS | libc::CLONE_NEWCGROUP;
    assert_order(
        &calls,
        &[
            "join_cgroups",
            &format!("setns 42 {ns:#x}"),
            "setresuid",
            "execve",
        ],
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("mount")
            || c.starts_with("pivot_root")
            || c.starts_with("unshare")),
        "{calls:#?}"
    );
}

#[test]
fn a_new_cgroup_namespace_is_made_after_joining_the_cgroup() {
    let k = recorder();
    let p = prepared(serde_json::json!({
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "cgroup"}]}
    }));
    let (calls, _) = run(&k, &p);
    let flag = format!("unshare {:#x}", libc::CLONE_NEWCGROUP);
    assert_order(&calls, &["join_cgroups", &flag, "mount"]);
}

#[test]
fn a_failed_step_ends_the_set_up_with_its_context() {
    let mut k = recorder();
    k.fail = Some("pivot_root");
    let (calls, err) = run(&k, &prepared(serde_json::json!({})));
    assert_eq!(err, "pivot_root: Operation not permitted (os error 1)");
    assert!(
        calls.last().unwrap().starts_with("pivot_root"),
        "{calls:#?}"
    );
}

#[test]
fn the_program_is_looked_up_along_path() {
    let mut k = recorder();
    k.paths.insert("/usr/bin/sh".into(), Kind::Other);
    let p = prepared(serde_json::json!({"process": {"args": ["sh"]}}));
    let (calls, _) = run(&k, &p);
    let tail: Vec<&str> = calls[calls.len() - 3..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        ["access /bin/sh", "access /usr/bin/sh", "execve /usr/bin/sh"]
    );
}

#[test]
fn a_file_is_bind_mounted_on_a_new_file_inside_the_root_whatever_the_links() {
    let mut k = recorder();
    k.paths.insert("/h/hosts".into(), Kind::Other);
    k.paths.insert("/r/etc".into(), Kind::Symlink);
    k.links.insert("/r/etc".into(), "/../../host-etc".into());
    let p = prepared(serde_json::json!({"mounts": [
        {"destination": "/etc/hosts", "type": "bind", "source": "/h/hosts", "options": ["rbind", "ro"]}
    ]}));
    let (calls, _) = run(&k, &p);
    let bind = format!(
        "mount /h/hosts /r/host-etc/hosts - {:#x}",
        libc::MS_BIND | libc::MS_REC
    );
    assert_order(
        &calls,
        &[
            "create_file /r/host-etc/hosts",
            &bind,
            "mount - /r/host-etc/hosts",
            "pivot_root",
        ],
    );
}

#[test]
fn proc_is_never_mounted_on_a_link() {
    let mut k = recorder();
    k.paths.insert("/r/proc".into(), Kind::Symlink);
    k.links.insert("/r/proc".into(), "/somewhere".into());
    let (calls, err) = run(&k, &prepared(serde_json::json!({})));
    assert_eq!(err, "mount proc: target /proc is a symlink");
    assert!(!calls.iter().any(|c| c.starts_with("pivot_root")));
}

#[test]
fn a_terminal_comes_from_the_containers_own_root_before_the_process_part() {
    let k = recorder();
    let (calls, _) = run(
        &k,
        &prepared(serde_json::json!({"process": {"terminal": true}})),
    );
    assert_order(&calls, &["set_stdio 0 0", "chdir /r", "console", "execve"]);
    let k = recorder();
    let (calls, _) = run(&k, &prepared(serde_json::json!({})));
    assert!(
        !calls.iter().any(|c| c.starts_with("console")),
        "{calls:#?}"
    );
}

#[test]
fn a_missing_program_of_a_container_of_its_own_fails_before_ready_as_runc_words_it() {
    let k = recorder();
    let p = standalone(
        serde_json::json!({"process": {"args": ["/no/such/binary"]}}),
        false,
        false,
    );
    let (calls, err) = run(&k, &p);
    assert_eq!(
        err,
        "exec: \"/no/such/binary\": stat /no/such/binary: no such file or directory"
    );
    assert!(!calls.iter().any(|c| c == "sync_send 7 R"), "{calls:#?}");
    assert!(
        !calls.iter().any(|c| c.starts_with("pass_gate")),
        "{calls:#?}"
    );
}

fn standalone(extra: serde_json::Value, runtime_hooks: bool, no_pivot: bool) -> Prepared {
    let mut p = prepared_with(extra, crate::runtime::prepare::Namespaces::Any);
    p.standalone = Some(crate::runtime::prepare::Standalone {
        sync: 7,
        fifo: 8,
        keep: vec![7, 8],
        user_ns: None,
        become_root: true,
        runtime_hooks,
        create_container_hooks: Vec::new(),
        start_container_hooks: Vec::new(),
        no_pivot,
        keyring: Some(c"ctr-1".into()),
    });
    p
}

#[test]
fn a_container_of_its_own_waits_for_go_runs_hooks_before_pivot_and_waits_at_the_fifo_last() {
    let mut k = recorder();
    k.paths.insert("/bin/sh".into(), Kind::Other);
    let mut p = standalone(
        serde_json::json!({"process": {"noNewPrivileges": true},
                           "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ALLOW"}}}),
        true,
        false,
    );
    p.hostname = Some(c"box".into());
    let (calls, err) = run(&k, &p);
    assert_eq!(calls[0], "close_fds_except 3 [7, 8]", "{calls:#?}");
    assert_order(
        &calls,
        &[
            "sync_recv 7",
            "setresgid 0",
            "setresuid 0",
            "join_cgroups",
            "set_hostname box",
            "join_keyring ctr-1",
            "mount proc /r/proc proc",
            "sync_send 7 H",
            "run_hooks createContainer 0 {\"status\":\"creating\"}",
            "pivot_root",
            "setresuid 1000",
            "seccomp",
            "sync_send 7 R",
            "pass_gate 8",
            "run_hooks startContainer 0 {\"status\":\"created\"}",
            "execve /bin/sh",
        ],
    );
    assert!(err.starts_with("exec: "), "{err}");
}

#[test]
fn without_runtime_hooks_nothing_is_asked_and_no_pivot_moves_the_root() {
    let k = recorder();
    let (calls, _) = run(&k, &standalone(serde_json::json!({}), false, true));
    assert!(!calls.iter().any(|c| c == "sync_send 7 H"), "{calls:#?}");
    assert!(
        !calls.iter().any(|c| c.starts_with("pivot_root")),
        "{calls:#?}"
    );
    assert_order(
        &calls,
        &[
            "run_hooks createContainer",
            "chdir /r",
            &format!("mount . / - {:#x}", libc::MS_MOVE),
            "chroot .",
            "chdir /",
        ],
    );
}

#[test]
fn in_a_user_namespace_device_nodes_are_bind_mounted_from_the_host() {
    let k = recorder();
    let (calls, _) = run(&k, &standalone(serde_json::json!({}), false, false));
    assert!(!calls.iter().any(|c| c.starts_with("mknod")), "{calls:#?}");
    assert_order(
        &calls,
        &["create_file /r/dev/null", "mount /dev/null /r/dev/null"],
    );
}

#[test]
fn a_container_of_its_own_without_home_gets_its_users_home_from_passwd() {
    let mut k = recorder();
    k.paths.insert("/bin/sh".into(), Kind::Other);
    let (calls, _) = run(&k, &standalone(serde_json::json!({}), false, false));
    // The recorder's /etc/passwd gives uid 1000 /home/u.
    assert_order(&calls, &["read_file /etc/passwd", "execve /bin/sh"]);
    assert!(k.env().iter().any(|e| e == "HOME=/home/u"), "{:?}", k.env());
    // One given in the spec is kept, and a pod's container is left as the CRI made it.
    let mut k = recorder();
    k.paths.insert("/bin/sh".into(), Kind::Other);
    let p = standalone(
        serde_json::json!({"process": {"env": ["PATH=/bin", "HOME=/data"]}}),
        false,
        false,
    );
    let (calls, _) = run(&k, &p);
    assert!(
        !calls.iter().any(|c| c.starts_with("read_file")),
        "{calls:#?}"
    );
    let homes: Vec<String> = k
        .env()
        .into_iter()
        .filter(|e| e.starts_with("HOME="))
        .collect();
    assert_eq!(homes, ["HOME=/data"]);
    let k = recorder();
    run(&k, &prepared(serde_json::json!({})));
    assert!(
        !k.env().iter().any(|e| e.starts_with("HOME=")),
        "{:?}",
        k.env()
    );
}

#[test]
fn set_up_fds_are_closed_and_the_process_undumpable_before_the_cwd_and_credentials() {
    let k = recorder();
    let (calls, _) = run(&k, &prepared(serde_json::json!({})));
    // CVE-2016-9962 and CVE-2024-21626: nothing of the host is reachable through this
    // process once the container may see it with its own credentials, nor through a
    // /proc/self/fd/N cwd or program.
    assert_order(
        &calls,
        &[
            "set_dumpable false",
            "close_range_cloexec 3",
            "close_fds_except 3 [9]",
            "drop_bounding",
            "chdir /work",
            "getcwd",
            "execve /bin/sh",
        ],
    );
}

#[test]
fn a_cwd_that_leads_out_of_the_root_is_refused_before_exec() {
    let mut k = recorder();
    // What the kernel answers for a cwd reached through a magic link to a host directory.
    k.cwd = Some(b"(unreachable)/sys/fs/cgroup".to_vec());
    let p = prepared(serde_json::json!({"process": {"cwd": "/proc/self/fd/7"}}));
    let (calls, err) = run(&k, &p);
    assert_eq!(
        err,
        "cwd \"/proc/self/fd/7\" is outside the container's root filesystem"
    );
    assert!(!calls.iter().any(|c| c.starts_with("execve")), "{calls:#?}");
}
