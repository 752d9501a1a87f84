use super::*;
use crate::image::digest::Digest;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::Value;
use std::collections::BTreeMap;

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("podinit-bimg-{tag}-{}", crate::util::random_hex(4)));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn image(layers: Vec<PathBuf>, config: Value) -> Image {
    Image {
        name: "127.0.0.1:5000/team/app:v1".into(),
        digest: Digest::of(b"manifest"),
        config_digest: Digest::of(b"config"),
        config: serde_json::from_value(json!({
            "architecture": "amd64", "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": []},
            "config": config
        }))
        .unwrap(),
        layers,
    }
}

fn passwd_files(root: &Path) {
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(
        root.join("etc/group"),
        "root:x:0:\napp:x:1001:\nstaff:x:50:app\n",
    )
    .unwrap();
}

fn merged(b: &Bundle, c: &str, pod: &str) -> crate::spec::Result<Spec> {
    let c: Container = serde_yaml_ng::from_str(c).unwrap();
    let pod: PodSpec = serde_yaml_ng::from_str(pod).unwrap();
    let vols = BTreeMap::new();
    let env = crate::spec::testing::literal_env(&c);
    crate::spec::for_container(
        b,
        &pod,
        &c,
        &crate::spec::PodContext {
            volumes: &vols,
            termination_log: None,
            share_process_namespace: false,
            hostname: "h",
            env: &env,
            pod_files: &[],
            oom_score_adj: None,
            seccomp_root: Path::new("/nonexistent"),
            recursive_read_only: &[],
            sub_paths: &[],
        },
    )
}

#[test]
fn users_resolve_as_containerd_resolves_them() {
    let root = tmp("user");
    passwd_files(&root);
    let read = |f: &str| std::fs::read_to_string(root.join(f)).ok();
    assert_eq!(resolve_user("", &read).unwrap(), (0, 0));
    assert_eq!(
        resolve_user("1000", &read).unwrap(),
        (1000, 1001),
        "primary gid from passwd"
    );
    assert_eq!(
        resolve_user("4242", &read).unwrap(),
        (4242, 0),
        "an unlisted uid"
    );
    assert_eq!(resolve_user("1000:7", &read).unwrap(), (1000, 7));
    assert_eq!(resolve_user("app", &read).unwrap(), (1000, 1001));
    assert_eq!(resolve_user("app:staff", &read).unwrap(), (1000, 50));
    assert_eq!(resolve_user("0:staff", &read).unwrap(), (0, 50));
    let e = resolve_user("nobody", &read).unwrap_err().to_string();
    assert!(e.contains("\"nobody\"") && e.contains("/etc/passwd"), "{e}");
    let e = resolve_user("app:wheel", &read).unwrap_err().to_string();
    assert!(e.contains("\"wheel\"") && e.contains("/etc/group"), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn image_ids_are_repo_digests() {
    assert_eq!(
        image_id("docker.io/library/busybox:1.36", "sha256:ab"),
        "docker.io/library/busybox@sha256:ab"
    );
    assert_eq!(
        image_id("127.0.0.1:5000/a/b@sha256:cd", "sha256:cd"),
        "127.0.0.1:5000/a/b@sha256:cd"
    );
    assert_eq!(
        image_id("host:5000/app", "sha256:1"),
        "host:5000/app@sha256:1"
    );
}

#[test]
fn files_are_read_from_the_uppermost_layer_and_whiteouts_hide_them() {
    let (low, high) = (tmp("low"), tmp("high"));
    passwd_files(&low);
    std::fs::create_dir_all(high.join("etc")).unwrap();
    std::fs::write(high.join("etc/passwd"), "root:x:0:0::/:/bin/sh\n").unwrap();
    std::fs::write(high.join("etc/.wh.group"), "").unwrap();
    let lowers = vec![high.clone(), low.clone()];
    assert_eq!(
        read_layered(&lowers, "etc/passwd").as_deref(),
        Some("root:x:0:0::/:/bin/sh\n")
    );
    assert_eq!(read_layered(&lowers, "etc/group"), None, "whited out above");
    assert!(read_layered(&lowers[1..], "etc/group").is_some());
    assert_eq!(read_layered(&lowers, "etc/shadow"), None);
    for d in [low, high] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn the_image_config_is_laid_under_the_container_as_the_cri_does() {
    let (l0, l1) = (tmp("l0"), tmp("l1"));
    passwd_files(&l0);
    let img = image(
        vec![l0.clone(), l1.clone()],
        json!({"Entrypoint": ["/bin/entry", "--flag"], "Cmd": ["serve", "--port=80"],
               "Env": ["PATH=/opt/bin:/bin", "MODE=image", "KEEP=1"], "WorkingDir": "/srv",
               "User": "app", "StopSignal": "SIGQUIT"}),
    );
    let b = from_image(&img).unwrap();
    assert_eq!(b.lowers, [l1.clone(), l0.clone()], "uppermost first");
    assert_eq!(b.entrypoint_len, 2);
    let r = b.image.as_ref().unwrap();
    assert_eq!(r.name, "127.0.0.1:5000/team/app:v1");
    assert_eq!(r.id, format!("127.0.0.1:5000/team/app@{}", img.digest));
    let c: Container = serde_yaml_ng::from_str("{name: c}").unwrap();
    assert_eq!(super::super::stop_signal(&b, &c).unwrap(), libc::SIGQUIT);

    let s = merged(
        &b,
        "{name: c, env: [{name: MODE, value: pod}]}",
        "containers: []",
    )
    .unwrap();
    let p = s.process().as_ref().unwrap();
    assert_eq!(
        p.args().as_ref().unwrap(),
        &["/bin/entry", "--flag", "serve", "--port=80"]
    );
    let env = p.env().as_ref().unwrap();
    assert_eq!(env[..3], ["PATH=/opt/bin:/bin", "MODE=pod", "KEEP=1"]);
    assert_eq!(p.cwd().display().to_string(), "/srv");
    assert_eq!((p.user().uid(), p.user().gid()), (1000, 1001));
    assert_eq!(p.user().additional_gids().as_ref().unwrap(), &[50]);
    let dests: Vec<String> = s
        .mounts()
        .iter()
        .flatten()
        .map(|m| m.destination().display().to_string())
        .collect();
    for d in [
        "/proc",
        "/dev",
        "/dev/pts",
        "/dev/mqueue",
        "/sys",
        "/sys/fs/cgroup",
        "/dev/shm",
    ] {
        assert!(dests.iter().any(|x| x == d), "{d} in {dests:?}");
    }

    // args alone keep the whole Entrypoint; command drops the image's Cmd too.
    let s = merged(&b, "{name: c, args: [a, b]}", "containers: []").unwrap();
    assert_eq!(
        s.process().as_ref().unwrap().args().as_ref().unwrap(),
        &["/bin/entry", "--flag", "a", "b"]
    );
    let s = merged(&b, "{name: c, command: [/bin/sh]}", "containers: []").unwrap();
    assert_eq!(
        s.process().as_ref().unwrap().args().as_ref().unwrap(),
        &["/bin/sh"]
    );
    let s = merged(
        &b,
        "{name: c, workingDir: /tmp, securityContext: {runAsUser: 0}}",
        "containers: []",
    )
    .unwrap();
    let p = s.process().as_ref().unwrap();
    assert_eq!(p.cwd().display().to_string(), "/tmp");
    assert_eq!(p.user().uid(), 0);
    for d in [l0, l1] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn an_image_without_entrypoint_or_with_an_empty_one_runs_cmd_or_args() {
    let l = tmp("noep");
    let b = from_image(&image(
        vec![l.clone()],
        json!({"Entrypoint": [""], "Cmd": ["sh"]}),
    ))
    .unwrap();
    assert_eq!(b.entrypoint_len, 0);
    let s = merged(&b, "{name: c}", "containers: []").unwrap();
    let p = s.process().as_ref().unwrap();
    assert_eq!(p.args().as_ref().unwrap(), &["sh"]);
    assert!(p
        .env()
        .as_ref()
        .unwrap()
        .iter()
        .any(|e| e.starts_with("PATH=/usr/local/sbin")));
    let s = merged(&b, "{name: c, args: [echo, hi]}", "containers: []").unwrap();
    assert_eq!(
        s.process().as_ref().unwrap().args().as_ref().unwrap(),
        &["echo", "hi"]
    );
    let b = from_image(&image(vec![l.clone()], json!({}))).unwrap();
    let e = merged(&b, "{name: c}", "containers: []")
        .unwrap_err()
        .to_string();
    assert!(e.contains("command"), "{e}");
    std::fs::remove_dir_all(l).unwrap();
}

#[test]
fn an_unknown_image_user_fails_unless_run_as_user_replaces_it() {
    let l = tmp("nouser");
    passwd_files(&l);
    let b = from_image(&image(
        vec![l.clone()],
        json!({"Cmd": ["sh"], "User": "ghost"}),
    ))
    .unwrap();
    let e = merged(&b, "{name: c}", "containers: []")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("container c: image: user \"ghost\""), "{e}");
    let s = merged(
        &b,
        "{name: c}",
        "containers: []\nsecurityContext: {runAsUser: 1000}",
    )
    .unwrap();
    assert_eq!(s.process().as_ref().unwrap().user().uid(), 1000);
    std::fs::remove_dir_all(l).unwrap();
}

#[test]
fn a_bad_stop_signal_names_the_image() {
    let l = tmp("sig");
    let b = from_image(&image(
        vec![l.clone()],
        json!({"Cmd": ["sh"], "StopSignal": "SIGNOPE"}),
    ))
    .unwrap();
    let c: Container = serde_yaml_ng::from_str("{name: c}").unwrap();
    let e = super::super::stop_signal(&b, &c).unwrap_err().to_string();
    assert_eq!(
        e,
        "image 127.0.0.1:5000/team/app:v1: config.StopSignal: invalid signal \"SIGNOPE\""
    );
    std::fs::remove_dir_all(l).unwrap();
}
