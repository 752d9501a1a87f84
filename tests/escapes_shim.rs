//! The escapes of tests/escapes.rs that the CRI shim can meet, through
//! containerd-shim-podinit-v1's Task service driven as containerd drives it, without
//! containerd (the harness of tests/shim_task.rs): a leaked fd as the cwd of a container
//! and of an exec (CVE-2024-21626), the fds open at exec, a created container's init out
//! of reach of the pod's other containers (CVE-2016-9962), the binary a container's
//! process runs before exec read-only (CVE-2019-5736), no inheritable capabilities for an
//! exec (CVE-2022-29162), procfs writes a fake /proc cannot take (CVE-2025-52881); and the
//! attacks that need a whole bundle of the attacker's (links in the image, racing links
//! on mount paths, /dev/null a link, a volume over /proc) through Create and Start.

mod common;
#[path = "common/shim.rs"]
mod shim;

use std::io::Read;
use std::path::PathBuf;

use std::time::{Duration, Instant};

use containerd_shim::protos::api;
use containerd_shim::protos::shim_sync::{Events, TaskClient};
use containerd_shim::protos::ttrpc::{self, TtrpcContext};
use serde_json::json;
use shim::{
    create, ctx, drain, fifo, shim_start, start, try_create, try_delete, try_kill, try_start, wait,
    Lab,
};

/// The events service the shim publishes to (at `TTRPC_ADDRESS`): it takes them all.
struct Sink;

impl Events for Sink {
    fn forward(&self, _: &TtrpcContext, _: api::ForwardRequest) -> ttrpc::Result<api::Empty> {
        Ok(api::Empty::default())
    }
}

/// A bundle of the pod "sb" with these `process` fields.
fn bundle(
    lab: &mut Lab,
    id: &str,
    process: serde_json::Value,
    namespaces: serde_json::Value,
    kind: &str,
) -> PathBuf {
    let mut spec = lab.cri_spec(id, namespaces, kind, "sb");
    for (k, v) in process.as_object().unwrap() {
        spec["process"][k] = v.clone();
    }
    lab.bundle(id, &spec)
}

/// The first line written to the FIFO (its writer may stay open).
fn first_line(mut f: std::fs::File) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.contains(&b'\n') {
        match f.read(&mut buf) {
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("reading a FIFO: {e}"),
        }
        assert!(Instant::now() < deadline, "no line in the FIFO: {out:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Exec `args` (with `cwd`) in container `id`; its stdout, or the error of Exec or Start.
fn exec(
    lab: &Lab,
    c: &TaskClient,
    id: &str,
    exec_id: &str,
    cwd: &str,
    args: &[&str],
) -> Result<String, String> {
    exec_with(lab, c, id, exec_id, cwd, args, json!({}))
}

/// [`exec`] with more fields of the OCI process (`extra`).
fn exec_with(
    lab: &Lab,
    c: &TaskClient,
    id: &str,
    exec_id: &str,
    cwd: &str,
    args: &[&str],
    extra: serde_json::Value,
) -> Result<String, String> {
    let (out, r) = fifo(&lab.dir, &format!("{exec_id}.out"));
    let mut process =
        json!({"args": args, "cwd": cwd, "env": ["PATH=/bin"], "user": {"uid": 0, "gid": 0}});
    for (k, v) in extra.as_object().unwrap() {
        process[k] = v.clone();
    }
    let req = shim::exec_request(id, exec_id, out, &process);
    c.exec(ctx(), &req).map_err(|e| e.to_string())?;
    if let Err(e) = try_start(c, id, exec_id) {
        let _ = try_delete(c, id, exec_id);
        return Err(e.to_string());
    }
    let text = drain(r);
    wait(c, id, exec_id);
    let _ = try_delete(c, id, exec_id);
    Ok(text)
}

#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn escapes_through_the_shims_task_api() {
    common::require_root();
    let tag = format!("podinit-shim-esc-{}", std::process::id());
    let mut lab = Lab::new(&tag, &["sb", "c1", "c2", "bad"]);
    let server = shim::serve_events(&lab.dir, Sink);
    let marker = lab.dir.join("escaped");
    let climb = format!(
        "{}{}",
        "../".repeat(16),
        marker.display().to_string().trim_start_matches('/')
    );

    let sb = bundle(
        &mut lab,
        "sb",
        json!({"args": ["/pause"]}),
        json!([{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}]),
        "sandbox",
    );
    let client = TaskClient::new(shim::connect_shim(&mut lab, &sb, "sb", &[]).0);
    let sb_pid = create(&client, "sb", &sb, "");
    start(&client, "sb", "");
    let ns = |t: &str, f: &str| json!({"type": t, "path": format!("/proc/{sb_pid}/ns/{f}")});
    let joined = json!([ns("pid", "pid"), ns("ipc", "ipc"), ns("uts", "uts"), ns("network", "net"), {"type": "mount"}]);

    // CVE-2024-21626 at Create: a container whose cwd is a set-up fd does not start.
    for n in 3..=12 {
        let bad = bundle(
            &mut lab,
            &format!("bad{n}"),
            json!({"args": ["sh", "-c", format!("touch {climb}")], "cwd": format!("/proc/self/fd/{n}")}),
            joined.clone(),
            "container",
        );
        lab.ids.push(format!("bad{n}"));
        shim_start(&lab.ns, &lab.dir, &bad, &format!("bad{n}"));
        let created = try_create(&client, &format!("bad{n}"), &bad, "");
        let started = created
            .as_ref()
            .ok()
            .map(|_| try_start(&client, &format!("bad{n}"), ""));
        assert!(
            created.is_err() || started.as_ref().is_some_and(|s| s.is_err()),
            "cwd /proc/self/fd/{n}: the container started"
        );
        let _ = try_delete(&client, &format!("bad{n}"), "");
    }

    // A long-running container: what its init saw, and execs into it.
    let (out1, r1) = fifo(&lab.dir, "c1.out");
    let c1 = bundle(
        &mut lab,
        "c1",
        json!({"args": ["sh", "-c", "echo fds=$(ls /proc/self/fd | tr '\\n' ' '); sleep 600"]}),
        joined.clone(),
        "container",
    );
    shim_start(&lab.ns, &lab.dir, &c1, "c1");
    create(&client, "c1", &c1, &out1);
    start(&client, "c1", "");
    assert_eq!(first_line(r1).trim(), "fds=0 1 2 3", "the init's open fds");
    let fds = exec(
        &lab,
        &client,
        "c1",
        "e-fds",
        "/",
        &["sh", "-c", "echo fds=$(ls /proc/self/fd | tr '\\n' ' ')"],
    )
    .unwrap();
    assert_eq!(fds.trim(), "fds=0 1 2 3", "an exec's open fds");
    // CVE-2022-29162: an exec that asks for no capabilities gets no inheritable (nor
    // ambient) ones, which a file capability would otherwise make effective.
    let caps = exec(
        &lab,
        &client,
        "c1",
        "e-caps",
        "/",
        &["sh", "-c", "grep -E '^Cap(Inh|Amb)' /proc/self/status"],
    )
    .unwrap();
    assert_eq!(
        caps.split_whitespace().collect::<Vec<_>>(),
        ["CapInh:", "0000000000000000", "CapAmb:", "0000000000000000"],
        "an exec's inheritable and ambient capabilities"
    );
    for n in 3..=12 {
        let r = exec(
            &lab,
            &client,
            "c1",
            &format!("e-cwd{n}"),
            &format!("/proc/self/fd/{n}"),
            &["sh", "-c", &format!("touch {climb}")],
        );
        assert!(r.is_err(), "exec with cwd /proc/self/fd/{n} ran: {r:?}");
    }

    // A second container, created and not started: its init waits at the exec fifo,
    // running the runtime's binary, in the pod's pid namespace.
    let c2 = bundle(
        &mut lab,
        "c2",
        json!({"args": ["sleep", "600"]}),
        joined.clone(),
        "container",
    );
    shim_start(&lab.ns, &lab.dir, &c2, "c2");
    let c2_pid = create(&client, "c2", &c2, "");
    // CVE-2019-5736: the binary it runs is the read-only mount, whoever writes it.
    let e = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(format!("/proc/{c2_pid}/exe"))
        .unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(libc::EROFS),
        "the waiting init's exe: {e}"
    );
    // CVE-2016-9962: from c1, every process of the pod whose exe is not busybox (the
    // pause, c2's waiting init) is out of reach.
    let seen = exec(
        &lab,
        &client,
        "c1",
        "e-reach",
        "/",
        &["sh", "-c", "for d in /proc/[0-9]*; do l=$(readlink $d/exe 2>/dev/null) && case $l in *busybox*) ;; *) echo reached $d $l;; esac; done; echo done"],
    )
    .unwrap();
    assert_eq!(seen.trim(), "done", "{seen}");

    // CVE-2025-52881: a container with CAP_SYS_ADMIN puts a tmpfs over its /proc whose
    // `self` links to a host directory it has as a volume; an exec's set-up, which writes
    // the process's `/proc/self/oom_score_adj`, must write its own, not that directory's.
    let host = lab.dir.join("procw");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(host.join("oom_score_adj"), "untouched\n").unwrap();
    let (out3, r3) = fifo(&lab.dir, "c3.out");
    let fake = "mount -t tmpfs fake /proc && ln -s /vol /proc/self && ln -s /vol /proc/thread-self && echo faked; sleep 600";
    let c3 = bundle(
        &mut lab,
        "c3",
        json!({"args": ["sh", "-c", fake]}),
        joined.clone(),
        "container",
    );
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(c3.join("config.json")).unwrap()).unwrap();
    for set in ["bounding", "effective", "permitted"] {
        let caps = spec["process"]["capabilities"][set].as_array_mut().unwrap();
        caps.push(json!("CAP_SYS_ADMIN"));
    }
    spec["mounts"].as_array_mut().unwrap().push(
        json!({"destination": "/vol", "type": "bind", "source": host, "options": ["rbind", "rw"]}),
    );
    std::fs::write(c3.join("config.json"), spec.to_string()).unwrap();
    lab.ids.push("c3".into());
    shim_start(&lab.ns, &lab.dir, &c3, "c3");
    create(&client, "c3", &c3, &out3);
    start(&client, "c3", "");
    assert_eq!(first_line(r3).trim(), "faked", "the container's fake /proc");
    let seen = exec_with(
        &lab,
        &client,
        "c3",
        "e-procw",
        "/",
        &["sh", "-c", "echo self=$(readlink /proc/self)"],
        json!({"oomScoreAdj": 500}),
    );
    assert_eq!(
        std::fs::read_to_string(host.join("oom_score_adj")).unwrap(),
        "untouched\n",
        "the exec's oom_score_adj went to the container's file: {seen:?}"
    );
    assert_eq!(seen.unwrap().trim(), "self=/vol", "the fake was in place");

    assert!(
        !marker.exists(),
        "{} was created on the host",
        marker.display()
    );
    for id in ["c1", "c2", "c3", "sb"] {
        let _ = try_kill(&client, id, libc::SIGKILL as u32);
        wait(&client, id, "");
        let _ = try_delete(&client, id, "");
    }
    server.shutdown();
    let _ = client.shutdown(
        ctx(),
        &api::ShutdownRequest {
            id: "sb".into(),
            ..Default::default()
        },
    );
}

/// A copy of busybox's rootfs for container `id`, which an attacker's image may shape.
fn own_rootfs(lab: &Lab, id: &str) -> PathBuf {
    let base = common::bundles().join("busybox/rootfs");
    let dest = lab.dir.join(format!("rootfs-{id}"));
    let o = std::process::Command::new("cp")
        .arg("-a")
        .arg(&base)
        .arg(&dest)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cp: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    dest
}

/// `at` (a path in `rootfs`) replaced by a symlink to `target`.
fn link_in(rootfs: &std::path::Path, at: &str, target: &str) {
    let p = rootfs.join(at.trim_start_matches('/'));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    std::os::unix::fs::symlink(target, &p).unwrap();
}

/// A directory on the host that an attack would reach, empty.
fn host_dir(lab: &Lab, what: &str) -> PathBuf {
    let d = lab.dir.join(format!("host-{what}"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entries(d: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A task's Create, and its Start when Create succeeded: the first error.
fn create_and_start(
    lab: &mut Lab,
    c: &TaskClient,
    id: &str,
    bundle: &std::path::Path,
    stdout: &str,
) -> Result<(), String> {
    lab.ids.push(id.to_string());
    shim_start(&lab.ns, &lab.dir, bundle, id);
    try_create(c, id, bundle, stdout).map_err(|e| format!("Create: {e}"))?;
    try_start(c, id, "").map_err(|e| format!("Start: {e}"))?;
    Ok(())
}

/// Ends task `id`, started or not.
fn end(c: &TaskClient, id: &str) {
    if try_kill(c, id, libc::SIGKILL as u32).is_ok() {
        wait(c, id, "");
    }
    let _ = try_delete(c, id, "");
}

/// `../` enough times to climb from any directory to the root, then `p` (absolute).
fn climb(p: &std::path::Path) -> String {
    format!(
        "{}{}",
        "../".repeat(16),
        p.display().to_string().trim_start_matches('/')
    )
}

/// The attacks of tests/escapes.rs that need a whole bundle of the attacker's (an image's
/// links, a bundle's mounts), through the shim's Create and Start: the shim runs the same
/// `runtime::init` as `podinit runc create`, and this shows it for the CRI's path.
/// - CVE-2023-27561 / CVE-2023-28642: the image's `/proc` (or `/sys`) a link to a host
///   directory, absolute and climbing: refused (a proc or sysfs mount onto a link).
/// - CVE-2019-19921: a bind of a host directory over `/proc` after procfs: refused (nothing
///   but procfs on /proc).
/// - CVE-2025-31133: the container's `/dev/null` a link to a procfs file, with a masked
///   path: refused (the null device is checked before it is bound).
/// - Mount destinations behind links (absolute, climbing): the mounts land inside the
///   rootfs, nothing on the host.
/// - CVE-2021-30465 / CVE-2024-45310: a container of the pod swaps a directory of a shared
///   volume for a link to the host while others are created with a mount below it: each
///   victim starts inside its root or fails, and the host directory stays empty.
#[test]
#[ignore = "needs root: namespaces, cgroups and a shim"]
fn whole_bundle_link_attacks_through_the_shims_create_and_start() {
    common::require_root();
    let tag = format!("podinit-shim-links-{}", std::process::id());
    let mut lab = Lab::new(&tag, &["sb"]);
    let server = shim::serve_events(&lab.dir, Sink);
    let sb = bundle(
        &mut lab,
        "sb",
        json!({"args": ["/pause"]}),
        json!([{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}]),
        "sandbox",
    );
    let client = TaskClient::new(shim::connect_shim(&mut lab, &sb, "sb", &[]).0);
    let sb_pid = create(&client, "sb", &sb, "");
    start(&client, "sb", "");
    let ns = |t: &str, f: &str| json!({"type": t, "path": format!("/proc/{sb_pid}/ns/{f}")});
    let joined = json!([ns("pid", "pid"), ns("ipc", "ipc"), ns("uts", "uts"), ns("network", "net"), {"type": "mount"}]);
    // A container's spec with its own rootfs (writable) and `args`.
    let spec_of = |lab: &Lab, id: &str, rootfs: &std::path::Path, args: &[&str]| {
        let mut spec = lab.cri_spec(id, joined.clone(), "container", "sb");
        spec["root"] = json!({"path": rootfs, "readonly": false});
        spec["process"]["args"] = json!(args);
        spec
    };

    // CVE-2023-27561 / CVE-2023-28642: /proc or /sys a link out of the rootfs.
    for (n, (dir, abs)) in [("proc", true), ("proc", false), ("sys", true)]
        .into_iter()
        .enumerate()
    {
        let id = format!("procln{n}");
        let host = host_dir(&lab, &id);
        let rootfs = own_rootfs(&lab, &id);
        let target = if abs {
            host.display().to_string()
        } else {
            climb(&host)
        };
        link_in(&rootfs, dir, &target);
        let spec = spec_of(&lab, &id, &rootfs, &["true"]);
        let b = lab.bundle(&id, &spec);
        let r = create_and_start(&mut lab, &client, &id, &b, "");
        end(&client, &id);
        let e = r.expect_err(&format!("/{dir} -> {target}: the container started"));
        assert!(e.contains("symlink"), "/{dir}: the error says why: {e}");
        assert!(entries(&host).is_empty(), "/{dir}: {:?}", entries(&host));
    }

    // CVE-2019-19921: a host directory bound over /proc after procfs.
    let host = host_dir(&lab, "overproc");
    let rootfs = own_rootfs(&lab, "overproc");
    let mut spec = spec_of(&lab, "overproc", &rootfs, &["true"]);
    spec["mounts"].as_array_mut().unwrap().push(
        json!({"destination": "/proc", "type": "bind", "source": host, "options": ["rbind", "rw"]}),
    );
    let b = lab.bundle("overproc", &spec);
    let r = create_and_start(&mut lab, &client, "overproc", &b, "");
    end(&client, "overproc");
    let e = r.expect_err("a bind over /proc was taken");
    assert!(e.contains("/proc"), "{e}");
    assert!(entries(&host).is_empty(), "{:?}", entries(&host));

    // CVE-2025-31133: /dev from a host directory whose `null` links to a procfs file.
    let masked = "/proc/timer_list";
    assert!(
        std::path::Path::new(masked).exists(),
        "{masked} is missing on this kernel: choose another masked file that it has"
    );
    let dev = host_dir(&lab, "dev");
    std::os::unix::fs::symlink("/proc/sys/kernel/core_pattern", dev.join("null")).unwrap();
    let rootfs = own_rootfs(&lab, "null");
    let (out_null, r_null) = fifo(&lab.dir, "null.out");
    let mut spec = spec_of(
        &lab,
        "null",
        &rootfs,
        &["sh", "-c", &format!("echo got=$(head -c 64 {masked})")],
    );
    let mounts: Vec<serde_json::Value> = spec["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["destination"].as_str().unwrap_or("").starts_with("/dev"))
        .cloned()
        .chain([json!({"destination": "/dev", "type": "bind", "source": dev, "options": ["rbind", "rw"]})])
        .collect();
    spec["mounts"] = json!(mounts);
    spec["linux"]["maskedPaths"] = json!([masked]);
    let b = lab.bundle("null", &spec);
    let r = create_and_start(&mut lab, &client, "null", &b, &out_null);
    end(&client, "null");
    let e = r.expect_err("started with a masked path bound from a link");
    assert!(e.contains("/dev/null"), "{e}");
    drop(r_null);

    // Mount destinations behind links: absolute and climbing, to a host directory.
    let host = host_dir(&lab, "behind");
    let vol = host_dir(&lab, "vol-of-behind");
    let rootfs = own_rootfs(&lab, "behind");
    link_in(&rootfs, "/abs", &host.display().to_string());
    link_in(&rootfs, "/etc/rel", &climb(&host));
    let (out_b, r_b) = fifo(&lab.dir, "behind.out");
    let host_s = host.display().to_string();
    let mut spec = spec_of(
        &lab,
        "behind",
        &rootfs,
        &[
            "sh",
            "-c",
            &format!("echo hi > /abs/vol/f; echo mounts=$(grep -c {host_s} /proc/self/mountinfo)"),
        ],
    );
    let mounts = spec["mounts"].as_array_mut().unwrap();
    mounts.push(json!({"destination": "/abs/vol", "type": "bind", "source": vol, "options": ["rbind", "rw"]}));
    mounts.push(json!({"destination": "/etc/rel/tmpfs", "type": "tmpfs", "source": "tmpfs"}));
    let b = lab.bundle("behind", &spec);
    let r = create_and_start(&mut lab, &client, "behind", &b, &out_b);
    let said = r.as_ref().map(|()| drain(r_b));
    end(&client, "behind");
    assert_eq!(
        said.unwrap().trim(),
        "mounts=2",
        "both mounts inside the rootfs"
    );
    assert_eq!(
        std::fs::read_to_string(vol.join("f")).unwrap(),
        "hi\n",
        "the volume is reached through the link inside the rootfs"
    );
    assert!(
        entries(&host).is_empty(),
        "created on the host: {:?}",
        entries(&host)
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&host_s),
        "a mount landed on the host's {host_s}"
    );

    // CVE-2021-30465 / CVE-2024-45310: a container of the pod swaps /s/d of a shared
    // volume between a directory and a link to the host while victims mount below it.
    let target = host_dir(&lab, "race");
    let shared = host_dir(&lab, "shared");
    let swap = format!(
        "i=0; while [ $i -lt 100000 ]; do rm -rf /s/d; mkdir /s/d; rm -rf /s/d; ln -s {} /s/d; i=$((i+1)); done",
        target.display()
    );
    let shared_mount =
        json!({"destination": "/s", "type": "bind", "source": shared, "options": ["rbind", "rw"]});
    let mut spec = lab.cri_spec("swap", joined.clone(), "container", "sb");
    spec["process"]["args"] = json!(["sh", "-c", swap]);
    spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(shared_mount.clone());
    let b = lab.bundle("swap", &spec);
    create_and_start(&mut lab, &client, "swap", &b, "").expect("the swapping container");
    let mut started = 0;
    for i in 0..12 {
        let id = format!("victim{i}");
        let mut spec = lab.cri_spec(&id, joined.clone(), "container", "sb");
        spec["process"]["args"] = json!(["true"]);
        let mounts = spec["mounts"].as_array_mut().unwrap();
        mounts.push(shared_mount.clone());
        mounts.push(json!({"destination": "/s/d/t", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]}));
        let b = lab.bundle(&id, &spec);
        if create_and_start(&mut lab, &client, &id, &b, "").is_ok() {
            started += 1;
        }
        end(&client, &id);
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(&target.display().to_string()),
            "a mount landed on the host's {}",
            target.display()
        );
    }
    end(&client, "swap");
    assert!(entries(&target).is_empty(), "{:?}", entries(&target));
    eprintln!("shim victims started inside their root: {started} of 12");

    end(&client, "sb");
    server.shutdown();
    let _ = client.shutdown(
        ctx(),
        &api::ShutdownRequest {
            id: "sb".into(),
            ..Default::default()
        },
    );
}
