//! Admission on the real binary: environment from ConfigMaps, Secrets and the
//! downward API, `$(VAR)` expansion, and a missing key as CreateContainerConfigError.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn env_comes_from_config_maps_secrets_and_the_downward_api() {
    require_root();
    let mut p = TestPod::new(
        "env",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {MODE: fast, LEVEL: "3"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {PASSWORD: hunter2}
---
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: {app: shop}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    resources: {limits: {memory: 64Mi, cpu: 500m}}
    envFrom: [{configMapRef: {name: settings}, prefix: CFG_}]
    env:
    - {name: PASS, valueFrom: {secretKeyRef: {name: creds, key: PASSWORD}}}
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: APP, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}
    - {name: MEM_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
    - {name: CPU_M, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
    - {name: GREETING, value: "$(CFG_MODE) mode for $(POD)"}
    command: ["sh", "-c", "echo $CFG_MODE $CFG_LEVEL $PASS $APP $MEM_MI $CPU_M; echo $GREETING; echo $(APP)"]
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        p.log("c", 0),
        format!("fast 3 hunter2 shop 64 500\nfast mode for {}\nshop", p.name)
    );
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_missing_key_is_create_container_config_error() {
    require_root();
    let mut p = TestPod::new(
        "cfgerr",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {MODE: fast}
---
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sleep", "1000"]
    env: [{name: X, valueFrom: {configMapKeyRef: {name: settings, key: NOPE}}}]
"#,
    );
    p.start();
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    });
    assert_eq!(
        container_status(&v, "c")["state"]["waiting"]["message"],
        "couldn't find key NOPE in ConfigMap default/settings"
    );
    assert_eq!(v["status"]["phase"], "Pending");
    wait_event(
        &p,
        "Failed",
        "Error: couldn't find key NOPE in ConfigMap default/settings",
    );
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn config_map_secret_and_downward_api_volumes_are_read_only_files() {
    require_root();
    let mut p = TestPod::new(
        "volfiles",
        r#"apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {app.conf: "mode=fast", other: "o"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {token: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: {tier: web}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "cat /cfg/app.conf /cfg/other; echo; cat /sec/key; echo; stat -c %a /sec/key; cat /info/name; echo; cat /info/labels; echo; cat /all/conf/app; echo; touch /cfg/x 2>/dev/null && echo writable || echo read-only"]
    volumeMounts:
    - {name: cfg, mountPath: /cfg}
    - {name: sec, mountPath: /sec}
    - {name: info, mountPath: /info}
    - {name: all, mountPath: /all}
  volumes:
  - {name: cfg, configMap: {name: settings}}
  - {name: sec, secret: {secretName: creds, defaultMode: 0400, items: [{key: token, path: key}]}}
  - name: info
    downwardAPI:
      items:
      - {path: name, fieldRef: {fieldPath: metadata.name}}
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
  - name: all
    projected:
      sources:
      - configMap: {name: settings, items: [{key: app.conf, path: conf/app}]}
      - secret: {name: creds, optional: true}
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        p.log("c", 0),
        format!(
            "mode=fasto\ns3cret\n400\n{}\ntier=\"web\"\nmode=fast\nread-only",
            p.name
        )
    );
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn hosts_resolv_conf_and_fqdn_hostname() {
    require_root();
    let mut p = TestPod::new(
        "dns",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  hostname: web
  subdomain: api
  setHostnameAsFQDN: true
  dnsPolicy: None
  dnsConfig: {nameservers: [10.9.9.9], searches: [corp.example], options: [{name: ndots, value: "2"}]}
  hostAliases: [{ip: 10.1.1.1, hostnames: [db.local, cache.local]}]
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "hostname; cat /etc/hostname; cat /etc/resolv.conf; tail -n 2 /etc/hosts"]}
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let fqdn = "web.api.default.svc.cluster.local";
    assert_eq!(
        p.log("c", 0),
        format!("{fqdn}\n{fqdn}\nsearch corp.example\nnameserver 10.9.9.9\noptions ndots:2\n# Entries added by HostAliases.\n10.1.1.1\tdb.local\tcache.local")
    );
    p.assert_nothing_left();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn hostname_override_is_the_hostname_without_a_domain() {
    require_root();
    let mut p = TestPod::new(
        "hostover",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  hostname: aa
  subdomain: bb
  hostnameOverride: xx.yy.zz
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "hostname; cat /etc/hostname; grep -c bb /etc/hosts || true"]}
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The KEP's row 11: `hostname` and `hostname -f` are the override; no FQDN of the
    // subdomain is written for it.
    assert_eq!(p.log("c", 0), "xx.yy.zz\nxx.yy.zz\n0");
    p.assert_nothing_left();
}

const PRESET: &str = r#"apiVersion: settings.k8s.io/v1alpha1
kind: PodPreset
metadata: {name: cache, resourceVersion: "3"}
spec:
  selector: {matchExpressions: [{key: role, operator: In, values: [web]}]}
  env: [{name: CACHE_HOST, value: redis.local}]
  volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes: [{name: scratch, emptyDir: {}}]
"#;

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn pod_presets_inject_exclude_and_conflict() {
    require_root();
    // Injected from --presets DIR.
    let presets = std::env::temp_dir().join(format!("podinit-it-presets-{}", std::process::id()));
    std::fs::create_dir_all(&presets).unwrap();
    std::fs::write(presets.join("cache.yaml"), PRESET).unwrap();
    let pod = |extra: &str| {
        format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: NAME
  labels: {{role: web}}
{extra}spec:
  restartPolicy: Never
  initContainers:
  - {{name: init, image: busybox, command: ["sh", "-c", "echo init=${{CACHE_HOST:-none}}"]}}
  containers:
  - {{name: c, image: busybox, command: ["sh", "-c", "echo $CACHE_HOST; test -d /scratch && echo mounted"], env: [{{name: MODE, value: x}}]}}
"#
        )
    };
    let mut p = TestPod::new("preset", &pod(""));
    let mut cmd = p.command();
    cmd.arg("--presets").arg(&presets);
    p.start_with(cmd);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("c", 0), "redis.local\nmounted");
    assert_eq!(p.log("init", 0), "init=none", "never into init containers");
    assert_eq!(
        out.status["metadata"]["annotations"]["podpreset.admission.kubernetes.io/podpreset-cache"],
        "3"
    );
    p.assert_nothing_left();

    // Excluded by annotation.
    let mut p = TestPod::new(
        "presetx",
        &format!(
            "{PRESET}---\n{}",
            pod("  annotations: {podpreset.admission.kubernetes.io/exclude: \"true\"}\n")
        ),
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 1, "no /scratch: the test fails in the container");
    assert_eq!(p.log("c", 0), "");
    p.assert_nothing_left();

    // A conflict (the pod sets CACHE_HOST itself): nothing injected, a Warning event.
    let conflicting = format!(
        "{PRESET}---\n{}",
        pod("").replace(
            "env: [{name: MODE, value: x}]",
            "env: [{name: CACHE_HOST, value: mine}]"
        )
    );
    let mut p = TestPod::new("presetc", &conflicting);
    let out = p.run(LIMIT);
    assert_eq!(out.code, 1);
    assert_eq!(p.log("c", 0), "mine");
    assert!(has_event(
        &p,
        "PodPresetConflict",
        "PodPreset \"cache\": env: \"CACHE_HOST\" conflicts with container \"c\""
    ));
    p.assert_nothing_left();
    std::fs::remove_dir_all(&presets).unwrap();
}

#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn safe_pod_sysctls_are_set_in_the_pods_namespaces_and_others_refused() {
    require_root();
    let mut p = TestPod::new(
        "sysctl",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  securityContext:
    sysctls: [{name: net.ipv4.ip_local_port_range, value: "20000 30000"}, {name: net/ipv4/tcp_syncookies, value: "0"}]
  containers:
  - {name: c, image: busybox, command: ["sh", "-c", "cat /proc/sys/net/ipv4/ip_local_port_range /proc/sys/net/ipv4/tcp_syncookies"]}
"#,
    );
    let host = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(p.log("c", 0), "20000\t30000\n0");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap(),
        host,
        "the host's own namespace is untouched"
    );
    p.assert_nothing_left();

    let mut q = TestPod::new(
        "sysctlbad",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: NAME}\nspec:\n  securityContext: {sysctls: [{name: kernel.msgmax, value: '1'}]}\n  containers:\n  - {name: c, image: busybox}\n",
    );
    let out = q.run(LIMIT);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(
            "spec.securityContext.sysctls[0].name: Forbidden: forbidden sysctl: \"kernel.msgmax\""
        ),
        "{}",
        out.stderr
    );
    q.assert_nothing_left();
}

/// `hostNetwork`, `hostPID`, `hostIPC`: the containers are in the caller's namespaces (and,
/// with the network, its UTS namespace and hostname); /etc/hosts is the node's.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn host_namespaces_are_the_callers() {
    require_root();
    let mut p = TestPod::new(
        "hostns",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  hostNetwork: true
  hostPID: true
  hostIPC: true
  containers:
  - name: host
    image: busybox
    command: ["sh", "-c", "for n in net pid ipc uts; do readlink /proc/self/ns/$n; done; hostname; head -1 /etc/hosts; (sleep 0.2 &) ; env | grep ^HOSTN | cut -d= -f2"]
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = p.log("host", 0);
    let lines: Vec<&str> = log.lines().collect();
    for (i, n) in ["net", "pid", "ipc", "uts"].iter().enumerate() {
        let ours = std::fs::read_link(format!("/proc/self/ns/{n}")).unwrap();
        assert_eq!(lines[i], ours.to_str().unwrap(), "{n}: {log}");
    }
    let node = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(lines[4], node.trim(), "{log}");
    assert_eq!(lines[5], "# Kubernetes-managed hosts file (host network).");
    assert_eq!(lines[6], node.trim());
    p.assert_nothing_left();
}

/// The device cgroup refuses what the spec does not create, even to a container holding
/// CAP_MKNOD (it could otherwise read the node's disks), while the default nodes work.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn device_cgroup_confines_nodes() {
    require_root();
    let mut p = TestPod::new(
        "devices",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - name: dev
    image: busybox
    securityContext: {capabilities: {add: [MKNOD]}}
    command: ["sh", "-c", "mknod /tmp/mem c 1 1 && head -c1 /tmp/mem; echo mem=$?; echo hi >/dev/null && echo null-ok; head -c4 /dev/zero | wc -c"]
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let log = p.log("dev", 0);
    assert!(log.contains("Operation not permitted"), "{log}");
    assert!(log.contains("mem=1"), "{log}");
    assert!(log.contains("null-ok"), "{log}");
    assert!(log.lines().any(|l| l.trim() == "4"), "{log}");
    p.assert_nothing_left();
}

/// `privileged: true` as containerd makes it: podinit's own capabilities, /sys writable,
/// nothing masked, and the node's device nodes.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn privileged_container_sees_the_node() {
    require_root();
    let mut p = TestPod::new(
        "privileged",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - name: priv
    image: busybox
    securityContext: {privileged: true}
    command: ["sh", "-c", "grep CapEff /proc/self/status | cut -f2; grep ' /sys ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1; head -c1 /proc/timer_list | wc -c; ls /dev"]
  - name: plain
    image: busybox
    command: ["sh", "-c", "grep CapEff /proc/self/status | cut -f2; grep ' /sys ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1; head -c1 /proc/timer_list | wc -c; ls /dev"]
"#,
    );
    let out = p.run(LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ours = std::fs::read_to_string("/proc/self/status").unwrap();
    let cap_eff = ours
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .unwrap()
        .trim()
        .to_string();
    let log = p.log("priv", 0);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines[0], cap_eff, "{log}");
    assert_eq!(lines[1], "rw", "{log}");
    assert_eq!(lines[2].trim(), "1", "/proc/timer_list is masked: {log}");
    // Every character device of the node's /dev top level is there.
    let host_chr: Vec<String> = std::fs::read_dir("/dev")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            use std::os::unix::fs::FileTypeExt;
            e.file_type().map(|t| t.is_char_device()).unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for name in host_chr
        .iter()
        .filter(|n| n.starts_with("tty") || *n == "kmsg")
    {
        assert!(
            lines.iter().any(|l| l == name),
            "/dev/{name} missing: {log}"
        );
    }
    let plain = p.log("plain", 0);
    let plines: Vec<&str> = plain.lines().collect();
    assert_ne!(plines[0], cap_eff, "{plain}");
    assert_eq!(plines[1], "ro", "{plain}");
    assert_eq!(
        plines[2].trim(),
        "0",
        "/proc/timer_list is not masked: {plain}"
    );
    assert!(!plines.contains(&"kmsg"), "{plain}");
    p.assert_nothing_left();
}

/// `seccompProfile` as kubelet and containerd apply it: the pod's RuntimeDefault (with and
/// without no_new_privs, as root and not), a container's Unconfined over it, a Localhost
/// profile from `--seccomp-root`, and none for a privileged container.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn seccomp_profiles_confine_containers() {
    require_root();
    let mut p = TestPod::new(
        "seccomp",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: default
    image: busybox
    command: ["sh", "-c", "grep Seccomp: /proc/self/status; unshare -U true; echo unshare=$?; mkdir /tmp/d && echo mkdir-ok"]
  - name: nnp
    image: busybox
    securityContext: {allowPrivilegeEscalation: false, runAsUser: 1000}
    command: ["sh", "-c", "grep -E 'Seccomp:|NoNewPrivs:' /proc/self/status; unshare -U true; echo unshare=$?"]
  - name: unconfined
    image: busybox
    securityContext: {seccompProfile: {type: Unconfined}}
    command: ["sh", "-c", "grep Seccomp: /proc/self/status; unshare -U true; echo unshare=$?"]
  - name: localhost
    image: busybox
    securityContext: {seccompProfile: {type: Localhost, localhostProfile: profiles/no-mkdir.json}}
    command: ["sh", "-c", "grep Seccomp: /proc/self/status; mkdir /tmp/d; echo mkdir=$?; touch /tmp/f && echo touch-ok"]
  - name: privileged
    image: busybox
    securityContext: {privileged: true}
    command: ["sh", "-c", "grep Seccomp: /proc/self/status"]
"#,
    );
    let root = p.dir.join("seccomp");
    std::fs::create_dir_all(root.join("profiles")).unwrap();
    std::fs::write(
        root.join("profiles/no-mkdir.json"),
        r#"{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}"#,
    )
    .unwrap();
    let mut cmd = p.command();
    cmd.arg("--seccomp-root").arg(&root);
    p.start_with(cmd);
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.status);
    let log = p.log("default", 0);
    assert!(log.contains("Seccomp:\t2"), "{log}");
    assert!(log.contains("Operation not permitted"), "{log}");
    assert!(
        log.contains("unshare=1") && log.contains("mkdir-ok"),
        "{log}"
    );
    let log = p.log("nnp", 0);
    assert!(
        log.contains("Seccomp:\t2") && log.contains("NoNewPrivs:\t1"),
        "{log}"
    );
    assert!(log.contains("unshare=1"), "{log}");
    let log = p.log("unconfined", 0);
    assert!(
        log.contains("Seccomp:\t0") && log.contains("unshare=0"),
        "{log}"
    );
    let log = p.log("localhost", 0);
    assert!(log.contains("Seccomp:\t2"), "{log}");
    assert!(
        log.contains("Permission denied") && log.contains("mkdir=1"),
        "{log}"
    );
    assert!(log.contains("touch-ok"), "{log}");
    assert_eq!(p.log("privileged", 0), "Seccomp:\t0");
    p.assert_nothing_left();
}

/// A Localhost profile that is not there keeps the container waiting in
/// CreateContainerError, naming the file; the pod lives on, and the profile is read again
/// at the next try.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_missing_seccomp_profile_is_create_container_error() {
    require_root();
    let mut p = TestPod::new(
        "seccompmissing",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    securityContext: {seccompProfile: {type: Localhost, localhostProfile: late.json}}
    command: ["sh", "-c", "grep Seccomp: /proc/self/status"]
"#,
    );
    let root = p.dir.join("seccomp");
    std::fs::create_dir_all(&root).unwrap();
    let profile = root.join("late.json");
    let mut cmd = p.command();
    cmd.arg("--seccomp-root").arg(&root);
    p.start_with(cmd);
    let v = p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["waiting"]["reason"] == "CreateContainerError"
    });
    let msg = container_status(&v, "c")["state"]["waiting"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.starts_with(&format!(
            "container c: cannot load seccomp profile \"{}\": No such file or directory",
            profile.display()
        )),
        "{msg}"
    );
    assert_eq!(v["status"]["phase"], "Pending");
    wait_event(
        &p,
        "Failed",
        "Error: container c: cannot load seccomp profile",
    );
    std::fs::write(&profile, r#"{"defaultAction": "SCMP_ACT_ALLOW"}"#).unwrap();
    let out = p.wait(LIMIT);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.status);
    assert_eq!(p.log("c", 0), "Seccomp:\t2");
    p.assert_nothing_left();
}

/// A process started in a running container (`podinit exec`, exec probes and hooks) gets
/// the container's filter too, as `runc exec` does.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn exec_into_a_confined_container_is_confined() {
    require_root();
    let mut p = TestPod::new(
        "seccompexec",
        r#"apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    securityContext: {seccompProfile: {type: RuntimeDefault}}
    command: ["sleep", "1000"]
"#,
    );
    p.start();
    p.wait_status(LIMIT, |v| {
        container_status(v, "c")["state"]["running"].is_object()
    });
    let out = std::process::Command::new(bin())
        .args(["exec", "c", "--", "sh", "-c"])
        .arg("grep Seccomp: /proc/self/status; unshare -U true")
        .env("PODINIT_SOCKET", p.state.join("pod.sock"))
        .output_within(CLIENT_LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(stdout, "Seccomp:\t2\n");
    assert!(stderr.contains("Operation not permitted"), "{stderr}");
    p.signal(libc::SIGTERM);
    p.wait(LIMIT);
    p.assert_nothing_left();
}

/// kubelet admits a pod beside the pods already on the node, the view a resize's
/// `Deferred` counts too: a pod the node's allocatable fits, but not beside another pod of
/// the same state root, is rejected OutOfcpu naming what the other uses; one that fits
/// what is left runs.
#[test]
#[ignore = "needs root: scripts/test runs it (as root: cargo test -- --include-ignored)"]
fn a_pod_is_admitted_beside_the_pods_already_on_the_node() {
    require_root();
    let root = std::env::temp_dir().join(format!("podinit-it-beside-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    // Every pod sees a node of 1000m of CPU.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
    let reserved = format!("cpu={}m", cpus * 1000 - 1000);
    let pod = |prefix: &str, cpu: &str| {
        let mut p = TestPod::new(
            prefix,
            &format!(
                r#"apiVersion: v1
kind: Pod
metadata: {{name: NAME}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"]
    resources: {{requests: {{cpu: {cpu}}}}}
"#
            ),
        );
        p.state = root.join(&p.name);
        let mut cmd = p.command();
        cmd.args(["--system-reserved", &reserved]);
        p.start_with(cmd);
        p
    };
    let running = |v: &serde_json::Value| container_status(v, "c")["state"]["running"].is_object();
    let mut a = pod("beside-a", "600m");
    a.wait_status(LIMIT, running);
    let mut b = pod("beside-b", "500m");
    let out = b.wait(LIMIT);
    assert_eq!(out.code, 1, "a rejected pod has Failed: {}", out.stderr);
    let st = &out.status["status"];
    assert_eq!(st["reason"], "OutOfcpu", "{}", out.status);
    assert_eq!(
        st["message"],
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
    );
    b.assert_nothing_left();
    let mut c = pod("beside-c", "400m");
    c.wait_status(LIMIT, running);
    for p in [&mut c, &mut a] {
        p.signal(libc::SIGTERM);
        let out = p.wait(LIMIT);
        assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
        p.assert_nothing_left();
    }
    let _ = std::fs::remove_dir_all(&root);
}
