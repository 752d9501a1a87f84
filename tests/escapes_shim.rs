//! The escapes of tests/escapes.rs that the CRI shim can meet, through
//! containerd-shim-podinit-v1's Task service driven as containerd drives it, without
//! containerd (the harness of tests/shim_task.rs): a leaked fd as the cwd of a container
//! and of an exec (CVE-2024-21626), the fds open at exec, a created container's init out
//! of reach of the pod's other containers (CVE-2016-9962), and the binary a container's
//! process runs before exec read-only (CVE-2019-5736).

mod common;
#[path = "common/shim.rs"]
mod shim;

use std::io::Read;
use std::path::PathBuf;

use std::time::{Duration, Instant};

use containerd_shim::protos::api;
use containerd_shim::protos::protobuf::well_known_types::any::Any;
use containerd_shim::protos::shim_sync::{create_events, Events, TaskClient};
use containerd_shim::protos::ttrpc::{self, Client, Server, TtrpcContext};
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
    let req = api::ExecProcessRequest {
        id: id.into(),
        exec_id: exec_id.into(),
        stdout: out,
        spec: Some(Any {
            type_url: "types.containerd.io/opencontainers/runtime-spec/1/Process".into(),
            value: process.to_string().into_bytes(),
            ..Default::default()
        })
        .into(),
        ..Default::default()
    };
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
    let events_sock = format!("unix://{}", lab.dir.join("events.sock").display());
    let mut server = Server::new()
        .bind(&events_sock)
        .unwrap()
        .register_service(create_events(std::sync::Arc::new(Sink)));
    server.start().unwrap();
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
    let address = shim_start(&lab.ns, &lab.dir, &sb, "sb");
    let client = TaskClient::new(Client::connect(&address).unwrap());
    let connect = client
        .connect(
            ctx(),
            &api::ConnectRequest {
                id: "sb".into(),
                ..Default::default()
            },
        )
        .unwrap();
    lab.shim = Some(connect.shim_pid as i32);
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
