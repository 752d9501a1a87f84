//! Admission (issue 7) on the real binary: environment from ConfigMaps, Secrets and the
//! downward API, `$(VAR)` expansion, and a missing key as CreateContainerConfigError.

mod common;
use common::*;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(40);

#[test]
fn env_comes_from_config_maps_secrets_and_the_downward_api() {
    if !require_root() {
        return;
    }
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
fn a_missing_key_is_create_container_config_error() {
    if !require_root() {
        return;
    }
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
