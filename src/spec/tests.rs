//! The whole pipeline of a pod's container: the order of the opts, and errors that name
//! the container and the field.

use super::testing::*;
use super::*;
use serde_json::{json, Value};

#[test]
fn the_pipeline_lays_the_container_over_its_base() {
    let c = container(
        "name: c\ncommand: [echo, $(B)]\nenv: [{name: A, value: two}, {name: B, value: '$(A)-x'}]\nvolumeMounts: [{name: data, mountPath: /data}]",
    );
    let s = run(&c, &PodSpec::default(), &Pod::new(&c)).unwrap();
    let p = s.process().as_ref().unwrap();
    assert_eq!(p.args().as_ref().unwrap(), &["echo", "two-x"]);
    assert_eq!(
        p.env().as_ref().unwrap(),
        &["PATH=/bin", "A=two", "B=two-x", "HOSTNAME=mypod"]
    );
    let v = json(&s);
    assert!(v["linux"].get("seccomp").is_none(), "unconfined by default");
    assert_eq!(v["mounts"][1]["source"], "/host/data");
    assert!(v.get("hostname").is_none());
    assert_eq!(v["root"]["path"], "/b/rootfs");
    assert_eq!(
        v["linux"]["namespaces"],
        json!([{"type": "pid"}, {"type": "mount"}])
    );
    // The base's rules only: the runtime adds runc's defaults after them.
    assert!(v["linux"].get("resources").is_none(), "{v}");
}

#[test]
fn errors_name_the_container_and_the_field() {
    let err = |c: &str, p: &PodSpec| {
        let c = container(c);
        run(&c, p, &Pod::new(&c)).unwrap_err().to_string()
    };
    assert_eq!(
        err(
            "name: c\nsecurityContext: {runAsNonRoot: true}",
            &PodSpec::default()
        ),
        "container c: securityContext: container has runAsNonRoot and image will run as root"
    );
    assert!(err(
        "name: c\nresources: {limits: {cpu: lots}}",
        &PodSpec::default()
    )
    .starts_with("container c: resources: cpu: "));
    assert_eq!(
        err(
            "name: c\nvolumeMounts: [{name: nope, mountPath: /d}]",
            &PodSpec::default()
        ),
        "container c: volumeMounts[0].name: Not found: \"nope\""
    );
    assert_eq!(
        err(
            "name: c\nsecurityContext: {seccompProfile: {type: Weird}}",
            &PodSpec::default()
        ),
        "container c: type: Unsupported value: \"Weird\""
    );
}

#[test]
fn privileged_takes_every_capability_no_mask_and_every_device() {
    let c = container("name: c\nsecurityContext: {privileged: true, capabilities: {drop: [ALL]}}");
    let s = run(&c, &PodSpec::default(), &Pod::new(&c)).unwrap();
    let caps = caps_of(&s);
    assert_eq!(caps.bounding().as_ref().unwrap(), &security::held_caps());
    let v = json(&s);
    assert!(v["linux"].get("maskedPaths").is_none());
    assert!(v["linux"].get("readonlyPaths").is_none());
    assert_eq!(
        v["linux"]["resources"]["devices"],
        json!([{"allow": true, "access": "rwm"}])
    );
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
    let pod_with = |sp: &str| pod(&format!("securityContext: {{seccompProfile: {sp}}}"));
    let attempt = |c: &str, p: &PodSpec| {
        let c = container(c);
        let mut pod = Pod::new(&c);
        pod.seccomp_root = root.clone();
        run(&c, p, &pod)
    };
    let seccomp = |c: &str, p: &PodSpec| json(&attempt(c, p).unwrap())["linux"]["seccomp"].clone();
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
    let rd = pod_with("{type: RuntimeDefault}");
    assert_eq!(seccomp("name: c", &rd)["defaultAction"], "SCMP_ACT_ERRNO");
    assert_eq!(
        seccomp(
            "name: c\nsecurityContext: {seccompProfile: {type: Unconfined}}",
            &rd
        ),
        Value::Null
    );
    let lh = pod_with("{type: Localhost, localhostProfile: profiles/deny-mkdir.json}");
    let l = seccomp("name: c", &lh);
    assert_eq!(l["defaultAction"], "SCMP_ACT_ALLOW");
    assert_eq!(l["syscalls"][0]["errnoRet"], 13);
    // Privileged: no filter, whatever was asked (containerd).
    assert_eq!(
        seccomp("name: c\nsecurityContext: {privileged: true}", &rd),
        Value::Null
    );
    // Localhost files are read at each start; what is wrong with one names it.
    let err = |c: &str| attempt(c, &PodSpec::default()).unwrap_err().to_string();
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

#[test]
fn an_empty_linux_resources_and_root_are_empty() {
    let mut s: Spec = serde_json::from_value(json!({"ociVersion": "1.0.2"})).unwrap();
    resources_mut(&mut s);
    root_mut(&mut s).set_path("/r".into());
    assert_eq!(
        json(&s),
        json!({"ociVersion": "1.0.2", "linux": {"resources": {}}, "root": {"path": "/r"}})
    );
}

#[test]
fn capability_names_are_ocis() {
    for c in security::held_caps() {
        assert_eq!(
            json!(format!("CAP_{c}")),
            serde_json::to_value(c).unwrap(),
            "{c:?}"
        );
    }
}
