//! The merge of a Kubernetes container over a bundle, field by field.

use super::*;
use crate::bundle::security::held_caps;
use crate::bundle::HostVolume;
use oci_spec::runtime::LinuxNamespaceType;
use std::path::PathBuf;

fn bundle() -> Bundle {
    let spec: Spec = serde_json::from_value(json!({
        "ociVersion": "1.0.2",
        "process": {"args": ["/bin/entry", "default-cmd"], "cwd": "/", "env": ["PATH=/bin", "A=1"],
                    "user": {"uid": 0, "gid": 0},
                    "capabilities": {"bounding": ["CAP_CHOWN", "CAP_NET_RAW"], "effective": ["CAP_CHOWN", "CAP_NET_RAW"],
                                     "permitted": ["CAP_CHOWN", "CAP_NET_RAW"], "inheritable": [], "ambient": []},
                    "noNewPrivileges": false},
        "root": {"path": "rootfs", "readonly": false},
        "hostname": "bundle-host",
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/data", "type": "tmpfs", "source": "tmpfs"}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
                  "cgroupsPath": "/x", "seccomp": {"defaultAction": "SCMP_ACT_LOG"}}
    }))
    .unwrap();
    Bundle::of_dir(PathBuf::from("/b"), PathBuf::from("/b/rootfs"), spec)
}

fn container(yaml: &str) -> Container {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn run(c: &Container, pod: &PodSpec, share: bool) -> Result<Spec, String> {
    run_in(c, pod, share, Path::new("/nonexistent/seccomp"))
}

fn run_in(c: &Container, pod: &PodSpec, share: bool, root: &Path) -> Result<Spec, String> {
    let mut vols = BTreeMap::new();
    vols.insert(
        "data".to_string(),
        HostVolume {
            host_path: PathBuf::from("/host/data"),
            read_only: false,
            made_at: None,
        },
    );
    merge(
        &bundle(),
        pod,
        c,
        &MergeContext {
            volumes: &vols,
            termination_log: Some(Path::new("/state/tl")),
            share_process_namespace: share,
            hostname: "mypod",
            env: None,
            pod_files: &[],
            oom_score_adj: None,
            seccomp_root: root,
        },
    )
}

fn args(s: &Spec) -> Vec<String> {
    s.process().as_ref().unwrap().args().clone().unwrap()
}

#[test]
fn command_and_args_rules() {
    let pod = PodSpec::default();
    let s = run(&container("name: c"), &pod, false).unwrap();
    assert_eq!(args(&s), ["/bin/entry", "default-cmd"]);
    let s = run(&container("name: c\ncommand: [sh, -c]"), &pod, false).unwrap();
    assert_eq!(args(&s), ["sh", "-c"]);
    let s = run(&container("name: c\nargs: [x, y]"), &pod, false).unwrap();
    assert_eq!(args(&s), ["/bin/entry", "x", "y"]);
    let s = run(
        &container(
            "name: c\ncommand: [echo]\nargs: [$(A), $$(A), $(NOPE)]\nenv: [{name: A, value: hi}]",
        ),
        &pod,
        false,
    )
    .unwrap();
    assert_eq!(args(&s), ["echo", "hi", "$(A)", "$(NOPE)"]);
}

#[test]
fn env_merges_in_order_with_hostname_and_expansion() {
    let c = container("name: c\nenv: [{name: A, value: two}, {name: B, value: '$(A)-x'}]");
    let s = run(&c, &PodSpec::default(), false).unwrap();
    let env = s.process().as_ref().unwrap().env().clone().unwrap();
    assert_eq!(env, ["PATH=/bin", "A=two", "B=two-x", "HOSTNAME=mypod"]);
    let c = container("name: c\nworkingDir: /w");
    let s = run(&c, &PodSpec::default(), false).unwrap();
    assert_eq!(s.process().as_ref().unwrap().cwd(), &PathBuf::from("/w"));
}

#[test]
fn device_rules_and_privileged() {
    let pod = PodSpec::default();
    let s = serde_json::to_value(run(&container("name: c"), &pod, false).unwrap()).unwrap();
    let rules = s["linux"]["resources"]["devices"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        rules[0],
        json!({"allow": false, "type": "a", "access": "rwm"})
    );
    assert!(rules
        .contains(&json!({"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"})));
    assert!(!rules.iter().any(|r| r["allow"] == true && r["type"] == "a"));

    let c = container("name: c\nsecurityContext: {privileged: true, capabilities: {drop: [ALL]}}");
    let s = serde_json::to_value(run(&c, &pod, false).unwrap()).unwrap();
    let rules = s["linux"]["resources"]["devices"].as_array().unwrap();
    assert_eq!(
        rules.last().unwrap(),
        &json!({"allow": true, "type": "a", "access": "rwm"})
    );
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(
        sorted(strings(&s["process"]["capabilities"]["bounding"])),
        held_caps()
    );
    assert!(s["linux"].get("maskedPaths").is_none());
    assert!(s["linux"].get("readonlyPaths").is_none());
}

#[test]
fn security_context() {
    let c = container(
        "name: c\nsecurityContext: {runAsUser: 1000, runAsGroup: 2000, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {add: [SYS_ADMIN], drop: [NET_RAW]}}",
    );
    let pod: PodSpec = serde_yaml_ng::from_str(
        "containers: []\nsecurityContext: {supplementalGroups: [5], fsGroup: 7}",
    )
    .unwrap();
    let s = run(&c, &pod, false).unwrap();
    let p = s.process().as_ref().unwrap();
    assert_eq!((p.user().uid(), p.user().gid()), (1000, 2000));
    assert_eq!(p.user().additional_gids().clone().unwrap(), [5, 7]);
    assert_eq!(p.no_new_privileges(), Some(true));
    assert_eq!(s.root().as_ref().unwrap().readonly(), Some(true));
    // Capability sets are sets: compare them sorted.
    let set = |v: &Value| {
        let mut s = strings(v);
        s.sort();
        s
    };
    let v = serde_json::to_value(&s).unwrap();
    for which in ["bounding", "effective", "permitted"] {
        assert_eq!(
            set(&v["process"]["capabilities"][which]),
            ["CAP_CHOWN", "CAP_SYS_ADMIN"]
        );
    }
    let c = container("name: c\nsecurityContext: {capabilities: {drop: [ALL], add: [kill]}}");
    let v = serde_json::to_value(run(&c, &PodSpec::default(), false).unwrap()).unwrap();
    assert_eq!(
        v["process"]["capabilities"]["permitted"],
        json!(["CAP_KILL"])
    );
    let c = container("name: c\nsecurityContext: {runAsNonRoot: true}");
    let e = run(&c, &PodSpec::default(), false).unwrap_err();
    assert!(
        e.contains(
            "container c: securityContext: container has runAsNonRoot and image will run as root"
        ),
        "{e}"
    );
}

#[test]
fn resources_map_to_cgroup_values() {
    let c = container("name: c\nresources: {limits: {cpu: 500m, memory: 64Mi, hugepages-2Mi: 4Mi}, requests: {cpu: 250m}}");
    let v = serde_json::to_value(run(&c, &PodSpec::default(), false).unwrap()).unwrap();
    let r = &v["linux"]["resources"];
    assert_eq!(r["cpu"]["quota"], 50_000);
    assert_eq!(r["cpu"]["period"], 100_000);
    assert_eq!(r["cpu"]["shares"], 256);
    assert_eq!(r["memory"]["limit"], 64 << 20);
    assert_eq!(r["hugepageLimits"][0]["pageSize"], "2MB");
    assert_eq!(r["hugepageLimits"][0]["limit"], 4 << 20);
    let c = container("name: c\nresources: {limits: {cpu: 1m}}");
    let v = serde_json::to_value(run(&c, &PodSpec::default(), false).unwrap()).unwrap();
    assert_eq!(
        v["linux"]["resources"]["cpu"]["quota"], 1000,
        "minimum quota"
    );
    assert_eq!(
        v["linux"]["resources"]["cpu"]["shares"], 2,
        "minimum shares"
    );
}

#[test]
fn mounts_and_namespaces() {
    let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /data, readOnly: true}]\nterminationMessagePath: /dev/termination-log");
    let s = run(&c, &PodSpec::default(), false).unwrap();
    let v = serde_json::to_value(&s).unwrap();
    let m = v["mounts"].as_array().unwrap();
    assert_eq!(m.len(), 3, "the volume replaced the bundle's /data: {m:?}");
    assert_eq!(m[1]["source"], "/host/data");
    assert!(m[1]["options"].as_array().unwrap().contains(&json!("ro")));
    assert_eq!(m[2]["destination"], "/dev/termination-log");
    assert_eq!(m[2]["source"], "/state/tl");
    let types: Vec<LinuxNamespaceType> = s
        .linux()
        .as_ref()
        .unwrap()
        .namespaces()
        .clone()
        .unwrap()
        .iter()
        .map(|n| n.typ())
        .collect();
    assert_eq!(types, [LinuxNamespaceType::Pid, LinuxNamespaceType::Mount]);
    assert!(s.hostname().is_none());
    assert!(s.linux().as_ref().unwrap().cgroups_path().is_none());
    assert_eq!(
        s.root().as_ref().unwrap().path(),
        &PathBuf::from("/b/rootfs")
    );
    let s = run(&container("name: c"), &PodSpec::default(), true).unwrap();
    let types: Vec<LinuxNamespaceType> = s
        .linux()
        .as_ref()
        .unwrap()
        .namespaces()
        .clone()
        .unwrap()
        .iter()
        .map(|n| n.typ())
        .collect();
    assert_eq!(types, [LinuxNamespaceType::Mount], "shared pid namespace");
    let c = container("name: c\nvolumeMounts: [{name: data, mountPath: /d, subPath: ../x}]");
    assert!(run(&c, &PodSpec::default(), false)
        .unwrap_err()
        .contains("subPath"));
}

#[test]
fn expansion_rules() {
    let mut vars = BTreeMap::new();
    vars.insert("A".to_string(), "1".to_string());
    assert_eq!(expand("$(A)$(B)$$(A)$", &vars), "1$(B)$(A)$");
    assert_eq!(expand("é$(A", &vars), "é$(A");
}

#[test]
fn seccomp_profile_choice() {
    let root = std::env::temp_dir().join(format!("podinit-scroot-{}", crate::util::random_hex(4)));
    std::fs::create_dir_all(root.join("profiles")).unwrap();
    std::fs::write(
        root.join("profiles/deny-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}"#,
    )
    .unwrap();
    std::fs::write(root.join("bad.json"), "{").unwrap();
    std::fs::write(
        root.join("notify.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}"#,
    )
    .unwrap();
    let pod = |sp: &str| -> PodSpec {
        serde_yaml_ng::from_str(&format!(
            "containers: []\nsecurityContext: {{seccompProfile: {sp}}}"
        ))
        .unwrap()
    };
    let seccomp = |c: &str, p: &PodSpec| {
        let s = run_in(&container(c), p, false, &root).unwrap();
        serde_json::to_value(&s).unwrap()["linux"]["seccomp"].clone()
    };
    let allowed = |v: &Value, name: &str| {
        v["syscalls"].as_array().unwrap().iter().any(|r| {
            r["action"] == "SCMP_ACT_ALLOW"
                && r.get("args").is_none()
                && r["names"].as_array().unwrap().contains(&json!(name))
        })
    };
    // Unset: Unconfined, the bundle's own filter is dropped too.
    assert_eq!(seccomp("name: c", &PodSpec::default()), Value::Null);
    let d = seccomp(
        "name: c\nsecurityContext: {seccompProfile: {type: RuntimeDefault}}",
        &PodSpec::default(),
    );
    assert_eq!(d["defaultAction"], "SCMP_ACT_ERRNO");
    assert!(allowed(&d, "read") && !allowed(&d, "unshare") && !allowed(&d, "mount"));
    // The profile follows the final bounding set.
    let d = seccomp(
        "name: c\nsecurityContext: {seccompProfile: {type: RuntimeDefault}, capabilities: {add: [SYS_ADMIN]}}",
        &PodSpec::default(),
    );
    assert!(allowed(&d, "unshare") && allowed(&d, "mount"));
    // The pod's applies unless the container has its own.
    let rd = pod("{type: RuntimeDefault}");
    assert_eq!(seccomp("name: c", &rd)["defaultAction"], "SCMP_ACT_ERRNO");
    assert_eq!(
        seccomp(
            "name: c\nsecurityContext: {seccompProfile: {type: Unconfined}}",
            &rd
        ),
        Value::Null
    );
    let lh = pod("{type: Localhost, localhostProfile: profiles/deny-mkdir.json}");
    let l = seccomp("name: c", &lh);
    assert_eq!(l["defaultAction"], "SCMP_ACT_ALLOW");
    assert_eq!(l["syscalls"][0]["errnoRet"], 13);
    // Privileged: no filter, whatever was asked (containerd).
    assert_eq!(
        seccomp("name: c\nsecurityContext: {privileged: true}", &rd),
        Value::Null
    );
    // Localhost files are read at each start; what is wrong with one names it.
    let err = |c: &str| run_in(&container(c), &PodSpec::default(), false, &root).unwrap_err();
    let e = err("name: c\nsecurityContext: {seccompProfile: {type: Localhost, localhostProfile: missing.json}}");
    assert!(
        e.starts_with(&format!(
            "container c: cannot load seccomp profile \"{}/missing.json\": No such file",
            root.display()
        )),
        "{e}"
    );
    let e = err(
        "name: c\nsecurityContext: {seccompProfile: {type: Localhost, localhostProfile: bad.json}}",
    );
    assert!(
        e.starts_with("container c: decoding seccomp profile failed"),
        "{e}"
    );
    let e = err("name: c\nsecurityContext: {seccompProfile: {type: Localhost, localhostProfile: notify.json}}");
    assert!(
        e.ends_with(
            "notify.json\": linux.seccomp.syscalls[0].action: SCMP_ACT_NOTIFY is not supported"
        ),
        "{e}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}
