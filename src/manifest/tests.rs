use super::*;

fn admit_str(text: &str) -> Result<Admitted, Error> {
    let docs = load::documents(text)?;
    from_documents(docs, &|| "uid-1".into())
}

fn err_of(text: &str) -> String {
    admit_str(text).unwrap_err().to_string()
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: c, image: busybox}\n";

fn pod_with(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n{spec}")
}

#[test]
fn defaults_are_kubernetes() {
    let a = admit_str(POD).unwrap();
    let p = &a.pod;
    assert_eq!(p.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(p.metadata.uid.as_deref(), Some("uid-1"));
    let s = p.spec.as_ref().unwrap();
    assert_eq!(s.restart_policy.as_deref(), Some("Always"));
    assert_eq!(s.termination_grace_period_seconds, Some(30));
    assert_eq!(s.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(s.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(s.enable_service_links, Some(true));
    let c = &s.containers[0];
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    assert_eq!(
        c.image_pull_policy.as_deref(),
        Some("Always"),
        "untagged = latest"
    );
    let a = admit_str(&pod_with(
        "  containers:\n  - name: c\n    image: busybox:1.36\n    ports: [{containerPort: 80}]\n    resources: {limits: {cpu: 1, memory: 64Mi}}\n",
    ))
    .unwrap();
    let c = &a.pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        c.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    let req = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
    assert_eq!(
        req["cpu"].0, "1",
        "requests default to limits; numbers become quantities"
    );
    assert_eq!(req["memory"].0, "64Mi");
}

#[test]
fn multi_document_yaml_json_and_lists() {
    let text = format!("---\n{POD}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm}}\ndata: {{k: v}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\nstringData: {{pw: hunter2}}\n---\n");
    let a = admit_str(&text).unwrap();
    assert_eq!(a.config_maps.len(), 1);
    assert_eq!(a.secrets[0].data.as_ref().unwrap()["pw"].0, b"hunter2");
    let json = r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}"#;
    assert_eq!(
        admit_str(json).unwrap().pod.metadata.name.as_deref(),
        Some("j")
    );
}

#[test]
fn syntax_errors_say_where() {
    let e = err_of("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n");
    assert!(e.starts_with("line "), "{e}");
    assert!(e.contains("invalid YAML"), "{e}");
    let e = err_of("{\"apiVersion\": ");
    assert!(e.contains("invalid JSON"), "{e}");
    assert!(!e.contains('\n'));
}

#[test]
fn document_level_errors() {
    assert_eq!(
        err_of("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"),
        "manifest: no Pod (apiVersion: v1, kind: Pod) in it"
    );
    assert!(err_of(&format!("{POD}---\n{POD}")).contains("document 2: a second Pod"));
    assert!(err_of("apiVersion: apps/v1\nkind: Deployment\n").contains("not supported"));
    assert!(err_of("kind: Pod\n").contains("apiVersion: Required value"));
    // A PodPreset with a field it does not have.
    let e = err_of(&format!(
        "apiVersion: settings.k8s.io/v1alpha1\nkind: PodPreset\nmetadata: {{name: p}}\nspec: {{selector: {{}}, ports: []}}\n---\n{POD}"
    ));
    assert!(e.starts_with("document 1 (PodPreset): spec"), "{e}");
}

#[test]
fn unknown_fields_are_named() {
    let e = err_of(&pod_with(
        "  containers:\n  - {name: c, image: busybox, imagee: x}\n",
    ));
    assert_eq!(e, "spec.containers[0].imagee: unknown field \"imagee\"");
    let e = err_of(&pod_with(
        "  containers:\n  - {name: c, image: busybox}\n  restartpolicy: Never\n",
    ));
    assert_eq!(e, "spec.restartpolicy: unknown field \"restartpolicy\"");
    let e = err_of(&pod_with("  containers:\n  - {name: c, image: busybox, ports: [{containerPort: 80, hostPorts: 1}]}\n"));
    assert_eq!(
        e,
        "spec.containers[0].ports[0].hostPorts: unknown field \"hostPorts\""
    );
    // Type errors carry the path too.
    let e = err_of(&pod_with(
        "  containers:\n  - {name: c, image: busybox, ports: [{containerPort: eighty}]}\n",
    ));
    assert!(
        e.starts_with("spec.containers[0].ports[0].containerPort:"),
        "{e}"
    );
    // A status and null fields are fine. The status is not read at all, as the API server
    // drops it on create: its fields' types do not matter.
    admit_str(&format!("{POD}status: {{phase: Running}}\n")).unwrap();
    let a = admit_str(&format!("{POD}status: {{phase: 3, podIPs: x}}\n")).unwrap();
    assert!(a.pod.status.is_none());
    admit_str(&pod_with(
        "  containers:\n  - {name: c, image: busybox}\n  nodeName: null\n",
    ))
    .unwrap();
}

#[test]
fn alpha_fields_are_named_as_alpha() {
    for (spec, field, gate) in [
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, emptyDir: {mode: 0700}}]\n", "spec.volumes[0].emptyDir.mode", "EmptyDirVolumeMode"),
        ("  containers:\n  - name: c\n    image: busybox\n    volumeMounts: [{name: v, mountPath: /v, bindMountOptions: [noexec]}]\n  volumes: [{name: v, emptyDir: {}}]\n", "spec.containers[0].volumeMounts[0].bindMountOptions", "VolumeBindMountOptions"),
        ("  resources: {limits: {pid: 2048}}\n  containers:\n  - {name: c, image: busybox}\n", "spec.resources.limits.pid", "PerPodPIDLimit"),
        ("  resources: {requests: {pid: 100}}\n  containers:\n  - {name: c, image: busybox}\n", "spec.resources.requests.pid", "PerPodPIDLimit"),
        ("  evictionResponders: [{name: acme.io/r, priority: 10000}]\n  containers:\n  - {name: c, image: busybox}\n", "spec.evictionResponders", "EvictionRequestAPI"),
        ("  tolerations: [{key: k, operator: Gt, value: '5'}]\n  containers:\n  - {name: c, image: busybox}\n", "spec.tolerations[0].operator", "TaintTolerationComparisonOperators"),
        ("  tolerations: [{key: k, operator: Exists}, {key: k, operator: Lt, value: '5'}]\n  containers:\n  - {name: c, image: busybox}\n", "spec.tolerations[1].operator", "TaintTolerationComparisonOperators"),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, secret: {secretName: s, defaultUser: 1000}}]\n", "spec.volumes[0].secret.defaultUser", "AtomicWriteVolumeUserFields"),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, configMap: {name: m, items: [{key: a, path: a}, {key: b, path: b, user: 1000}]}}]\n", "spec.volumes[0].configMap.items[1].user", "AtomicWriteVolumeUserFields"),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, downwardAPI: {defaultUser: 7, items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}}]\n", "spec.volumes[0].downwardAPI.defaultUser", "AtomicWriteVolumeUserFields"),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, projected: {sources: [{configMap: {name: m}}, {secret: {name: s, items: [{key: k, path: k, user: 5}]}}]}}]\n", "spec.volumes[0].projected.sources[1].secret.items[0].user", "AtomicWriteVolumeUserFields"),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, projected: {defaultUser: 5, sources: [{configMap: {name: m}}]}}]\n", "spec.volumes[0].projected.defaultUser", "AtomicWriteVolumeUserFields"),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: t, user: 5}}]}}]\n", "spec.volumes[0].projected.sources[0].serviceAccountToken.user", "AtomicWriteVolumeUserFields"),
    ] {
        assert_eq!(
            err_of(&pod_with(spec)),
            format!("{field}: alpha in Kubernetes 1.37 (feature gate {gate}, off by default): not supported"),
            "{field}"
        );
    }
    // Beta and off by default: refused the same way, with its stage.
    assert_eq!(
        err_of(&pod_with("  schedulingGroup: {podGroupName: training-worker-0}\n  containers:\n  - {name: c, image: busybox}\n")),
        "spec.schedulingGroup: beta in Kubernetes 1.37 (feature gate GenericWorkload, off by default): not supported"
    );
}

#[test]
fn every_ga_or_beta_on_field_of_1_37_is_accepted() {
    // Each row uses one field that 1.37 has on by default, with its stage.
    for (what, spec) in [
        ("pod-level resources (beta)", "  resources: {limits: {cpu: '1', memory: 256Mi}}\n  containers:\n  - {name: c, image: busybox}\n"),
        ("hostnameOverride (beta)", "  hostnameOverride: my-host\n  containers:\n  - {name: c, image: busybox}\n"),
        ("container restartPolicy and restartPolicyRules (beta)", "  restartPolicy: Never\n  containers:\n  - name: c\n    image: busybox\n    restartPolicy: Never\n    restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]\n"),
        ("RestartAllContainers (beta)", "  restartPolicy: Never\n  containers:\n  - name: c\n    image: busybox\n    restartPolicy: Never\n    restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [88]}}]\n"),
        ("lifecycle.stopSignal (beta)", "  os: {name: linux}\n  containers:\n  - {name: c, image: busybox, lifecycle: {stopSignal: SIGUSR1}}\n"),
        ("preStop sleep 0 (GA)", "  containers:\n  - {name: c, image: busybox, lifecycle: {preStop: {sleep: {seconds: 0}}}}\n"),
        ("resizePolicy (GA)", "  containers:\n  - {name: c, image: busybox, resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}]}\n"),
        ("sidecar containers (GA)", "  initContainers:\n  - {name: s, image: busybox, restartPolicy: Always}\n  containers:\n  - {name: c, image: busybox}\n"),
        ("fileKeyRef (GA)", "  containers:\n  - name: c\n    image: busybox\n    env: [{name: A, valueFrom: {fileKeyRef: {volumeName: e, path: a.env, key: A}}}]\n  volumes: [{name: e, emptyDir: {}}]\n"),
        ("image volumes (GA)", "  containers:\n  - {name: c, image: busybox, volumeMounts: [{name: iv, mountPath: /iv}]}\n  volumes: [{name: iv, image: {reference: busybox, pullPolicy: IfNotPresent}}]\n"),
        ("recursiveReadOnly (GA)", "  containers:\n  - {name: c, image: busybox, volumeMounts: [{name: v, mountPath: /v, readOnly: true, recursiveReadOnly: Enabled}]}\n  volumes: [{name: v, emptyDir: {}}]\n"),
        ("supplementalGroupsPolicy (beta)", "  securityContext: {supplementalGroupsPolicy: Strict}\n  containers:\n  - {name: c, image: busybox}\n"),
        ("schedulingGates (GA)", "  schedulingGates: [{name: example.com/gate}]\n  containers:\n  - {name: c, image: busybox}\n"),
        ("tolerations Equal and Exists (GA)", "  tolerations: [{key: k, operator: Equal, value: v}, {key: j, operator: Exists}]\n  containers:\n  - {name: c, image: busybox}\n"),
        ("emptyDir without mode, file volumes without user (GA)", "  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, emptyDir: {sizeLimit: 1Mi}}, {name: d, downwardAPI: {items: [{path: n, fieldRef: {fieldPath: metadata.name}}]}}]\n"),
    ] {
        if let Err(e) = admit_str(&pod_with(spec)) {
            panic!("{what}: {e}");
        }
    }
}

#[test]
fn file_key_refs_are_validated_as_the_api_server_does() {
    let env = |fkr: &str| {
        pod_with(&format!("  containers:\n  - name: c\n    image: busybox\n    env: [{{name: A, valueFrom: {{fileKeyRef: {{{fkr}}}}}}}]\n  volumes: [{{name: config, emptyDir: {{}}}}, {{name: host, hostPath: {{path: /tmp}}}}]\n"))
    };
    admit_str(&env(
        "volumeName: config, path: config.env, key: DB_ADDRESS",
    ))
    .unwrap();
    let p = "spec.containers[0].env[0].valueFrom.fileKeyRef";
    for (fkr, want) in [
        ("volumeName: nope, path: a.env, key: K", format!("{p}.volumeName: Not found: \"nope\"")),
        ("volumeName: host, path: a.env, key: K", format!("{p}.volumeName: Invalid value: \"host\": must be an emptyDir volume")),
        ("volumeName: config, path: /a.env, key: K", format!("{p}.path: Invalid value: \"/a.env\": must be a relative path")),
        ("volumeName: config, path: ../a.env, key: K", format!("{p}.path: Invalid value: \"../a.env\": must not contain '..'")),
        ("volumeName: config, path: a.env, key: 'A=B'", format!("{p}.key: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='")),
    ] {
        assert_eq!(err_of(&env(fkr)), want, "{fkr}");
    }
    let long = "K".repeat(129);
    assert_eq!(
        err_of(&env(&format!(
            "volumeName: config, path: a.env, key: {long}"
        ))),
        format!("{p}.key: Too long: may not be more than 128 bytes")
    );
}

#[test]
fn container_restart_policies_are_accepted() {
    // The docs' examples of container restart rules (KEP-5307) and RestartAllContainers.
    admit_str(&pod_with("  restartPolicy: Never\n  containers:\n  - name: c\n    image: busybox\n    restartPolicy: Never\n    restartPolicyRules:\n    - {action: Restart, exitCodes: {operator: In, values: [42]}}\n")).unwrap();
    admit_str(&pod_with("  restartPolicy: Always\n  initContainers:\n  - {name: init-once, image: busybox, restartPolicy: Never}\n  containers:\n  - {name: c, image: busybox}\n")).unwrap();
    admit_str(&pod_with("  restartPolicy: Never\n  initContainers:\n  - name: w\n    image: busybox\n    restartPolicy: Always\n    restartPolicyRules: [{action: RestartAllContainers, exitCodes: {operator: In, values: [88]}}]\n  containers:\n  - {name: c, image: busybox}\n")).unwrap();
}

#[test]
fn unsupported_fields_are_named() {
    for (spec, field) in [
        ("  containers:\n  - name: c\n    image: busybox\n    volumeMounts: [{name: v, mountPath: /v, mountPropagation: Bidirectional}]\n  volumes: [{name: v, emptyDir: {}}]\n", "spec.containers[0].volumeMounts[0].mountPropagation"),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, nfs: {server: s, path: /x}}]\n", "spec.volumes[0].nfs"),
        ("  containers:\n  - {name: c, image: busybox, securityContext: {seLinuxOptions: {level: s0}}}\n", "spec.containers[0].securityContext.seLinuxOptions"),
    ] {
        assert_eq!(err_of(&pod_with(spec)), format!("{field}: not supported"));
    }
    // Informational fields are accepted.
    admit_str(&pod_with(
        "  nodeName: n1\n  os: {name: linux}\n  tolerations: [{key: k, operator: Exists}]\n  serviceAccountName: sa\n  containers:\n  - {name: c, image: busybox, ports: [{containerPort: 80, name: http}], lifecycle: {stopSignal: SIGUSR1}}\n",
    ))
    .unwrap();
}

#[test]
fn hostname_override_is_a_subdomain_without_fqdn_or_host_network() {
    let with = |extra: &str| {
        pod_with(&format!(
            "{extra}  containers:\n  - {{name: c, image: busybox}}\n"
        ))
    };
    admit_str(&with(
        "  hostnameOverride: xx.yy.zz\n  hostname: aa\n  subdomain: bb\n",
    ))
    .unwrap();
    for (extra, want) in [
        (
            "  hostnameOverride: Not_A_Name\n",
            "spec.hostnameOverride: Invalid value: \"Not_A_Name\"",
        ),
        (
            "  hostnameOverride: xx.yy\n  setHostnameAsFQDN: true\n",
            "spec.setHostnameAsFQDN: Forbidden: may not be set when hostnameOverride is set",
        ),
        (
            "  hostnameOverride: xx.yy\n  hostNetwork: true\n",
            "spec.hostNetwork: Forbidden: may not be set when hostnameOverride is set",
        ),
    ] {
        let e = err_of(&with(extra));
        assert!(e.starts_with(want), "got {e:?}, want {want:?}");
    }
    let long = format!("  hostnameOverride: {}\n", "a".repeat(65));
    assert!(err_of(&with(&long)).starts_with("spec.hostnameOverride: Too long"));
}

#[test]
fn recursive_read_only_is_validated_as_the_api_server_does() {
    let with = |mount: &str| {
        pod_with(&format!(
            "  containers:\n  - name: c\n    image: busybox\n    volumeMounts: [{{name: v, mountPath: /a}}, {mount}]\n  volumes: [{{name: v, emptyDir: {{}}}}]\n"
        ))
    };
    for ok in [
        "{name: v, mountPath: /m, readOnly: true, recursiveReadOnly: Enabled}",
        "{name: v, mountPath: /m, readOnly: true, recursiveReadOnly: IfPossible, mountPropagation: None}",
        "{name: v, mountPath: /m, recursiveReadOnly: Disabled}",
    ] {
        admit_str(&with(ok)).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for (bad, want) in [
        ("{name: v, mountPath: /m, recursiveReadOnly: Enabled}", "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly is true"),
        ("{name: v, mountPath: /m, readOnly: false, recursiveReadOnly: IfPossible}", "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly is true"),
        ("{name: v, mountPath: /m, readOnly: true, recursiveReadOnly: Always}", "spec.containers[0].volumeMounts.recursiveReadOnly: Unsupported value: \"Always\": supported values: \"Disabled\", \"Enabled\", \"IfPossible\""),
    ] {
        assert_eq!(err_of(&with(bad)), want, "{bad}");
    }
}

#[test]
fn validation_messages() {
    let cases = [
        ("  containers: []\n", "spec.containers: Required value"),
        ("  containers:\n  - {name: c, image: busybox}\n  - {name: c, image: busybox}\n", "spec.containers[1].name: Duplicate value: \"c\""),
        ("  initContainers:\n  - {name: c, image: busybox}\n  containers:\n  - {name: c, image: busybox}\n", "spec.containers[0].name: Duplicate value: \"c\""),
        ("  containers:\n  - {name: C_1, image: busybox}\n", "spec.containers[0].name: Invalid value: \"C_1\""),
        ("  containers:\n  - {name: c}\n", "spec.containers[0].image: Required value"),
        ("  restartPolicy: Sometimes\n  containers:\n  - {name: c, image: busybox}\n", "spec.restartPolicy: Unsupported value: \"Sometimes\""),
        ("  os: {name: plan9}\n  containers:\n  - {name: c, image: busybox}\n", "spec.os.name: Unsupported value: \"plan9\""),
        ("  containers:\n  - {name: c, image: busybox, resources: {limits: {example.com/dongle: 500m}}}\n", "spec.containers[0].resources.limits[example.com/dongle]: Invalid value: \"500m\": must be an integer"),
        ("  containers:\n  - {name: c, image: busybox}\n  securityContext: {appArmorProfile: {type: Localhost}}\n", "spec.securityContext.appArmorProfile.localhostProfile: Required value"),
        ("  initContainers:\n  - {name: i, image: busybox, restartPolicy: Sometimes}\n  containers:\n  - {name: c, image: busybox}\n", "spec.initContainers[0].restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""),
        ("  containers:\n  - {name: c, image: busybox, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [1]}}]}\n", "spec.containers[0].restartPolicy: Required value: must specify restartPolicy when restart rules are used"),
        ("  containers:\n  - {name: c, image: busybox, restartPolicy: Never, restartPolicyRules: [{action: Kill, exitCodes: {operator: In, values: [1]}}]}\n", "spec.containers[0].restartPolicyRules[0].action: Unsupported value: \"Kill\": supported values: \"Restart\", \"RestartAllContainers\""),
        ("  containers:\n  - {name: c, image: busybox, restartPolicy: Never, restartPolicyRules: [{action: Restart}]}\n", "spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified"),
        ("  containers:\n  - {name: c, image: busybox, restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: Exists, values: [1]}}]}\n", "spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: \"Exists\": supported values: \"In\", \"NotIn\""),
        ("  containers:\n  - {name: c, image: busybox, restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [1, 2, 1]}}]}\n", "spec.containers[0].restartPolicyRules[0].exitCodes.values[2]: Duplicate value: 1"),
        ("  initContainers:\n  - name: i\n    image: busybox\n    readinessProbe: {exec: {command: ['true']}}\n  containers:\n  - {name: c, image: busybox}\n", "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"),
        ("  containers:\n  - name: c\n    image: busybox\n    volumeMounts: [{name: data, mountPath: /d}]\n", "spec.containers[0].volumeMounts[0].name: Not found: \"data\""),
        ("  containers:\n  - {name: c, image: busybox}\n  volumes: [{name: v, emptyDir: {}}, {name: v, emptyDir: {}}]\n", "spec.volumes[1].name: Duplicate value: \"v\""),
        ("  containers:\n  - {name: c, image: busybox, resources: {limits: {cpu: lots}}}\n", "spec.containers[0].resources.limits[cpu]: Invalid value"),
        ("  containers:\n  - {name: c, image: busybox, resources: {limits: {gpus: 1}}}\n", "spec.containers[0].resources.limits[gpus]: Invalid value"),
        ("  containers:\n  - {name: c, image: busybox, resources: {limits: {cpu: 1}, requests: {cpu: 2}}}\n", "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"),
        ("  activeDeadlineSeconds: 0\n  containers:\n  - {name: c, image: busybox}\n", "spec.activeDeadlineSeconds: Invalid value: 0"),
        ("  os: {name: linux}\n  containers:\n  - {name: c, image: busybox, lifecycle: {stopSignal: SIGNOPE}}\n", "spec.containers[0].lifecycle.stopSignal: Unsupported value"),
        ("  containers:\n  - {name: c, image: busybox, lifecycle: {stopSignal: SIGUSR1}}\n", "spec.containers[0].lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`"),
        ("  containers:\n  - {name: c, image: busybox, env: [{name: 'A=B', value: x}]}\n", "spec.containers[0].env[0].name: Invalid value"),
        ("  containers:\n  - {name: c, image: busybox, env: [{name: A, valueFrom: {fieldRef: {fieldPath: spec.hostname}}}]}\n", "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: \"spec.hostname\""),
        ("  containers:\n  - {name: c, image: busybox, env: [{name: A, value: x, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]}\n", "spec.containers[0].env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty"),
        ("  containers:\n  - {name: c, image: busybox, env: [{name: A, valueFrom: {configMapKeyRef: {name: cm, key: ''}}}]}\n", "spec.containers[0].env[0].valueFrom.configMapKeyRef.key: Required value"),
        ("  containers:\n  - {name: c, image: busybox, env: [{name: A, valueFrom: {resourceFieldRef: {resource: limits.gpu}}}]}\n", "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource: Unsupported value"),
        ("  containers:\n  - {name: c, image: busybox, envFrom: [{prefix: X_}]}\n", "spec.containers[0].envFrom[0]: Required value"),
        ("  dnsPolicy: None\n  containers:\n  - {name: c, image: busybox}\n", "spec.dnsConfig: Required value"),
        ("  dnsPolicy: Sometimes\n  containers:\n  - {name: c, image: busybox}\n", "spec.dnsPolicy: Unsupported value"),
        ("  dnsConfig: {nameservers: [not-an-ip]}\n  containers:\n  - {name: c, image: busybox}\n", "spec.dnsConfig.nameservers[0]: Invalid value"),
        ("  hostAliases: [{ip: 1.2.3, hostnames: [a]}]\n  containers:\n  - {name: c, image: busybox}\n", "spec.hostAliases[0].ip: Invalid value"),
    ];
    for (spec, want) in cases {
        let e = err_of(&pod_with(spec));
        assert!(e.starts_with(want), "got {e:?}, want {want:?}");
        assert!(!e.contains('\n'));
    }
    let e = err_of("apiVersion: v1\nkind: Pod\nmetadata: {}\nspec:\n  containers:\n  - {name: c, image: busybox}\n");
    assert!(e.starts_with("metadata.name: Required value"), "{e}");
}

#[test]
fn names_have_kubernetes_length_limits() {
    // A subdomain limits its whole length only (IsDNS1123Subdomain), not its labels.
    let named = |n: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {n}}}\nspec:\n  containers:\n  - {{name: c, image: busybox}}\n")
    };
    let long = "a".repeat(200);
    assert_eq!(
        admit_str(&named(&long))
            .unwrap()
            .pod
            .metadata
            .name
            .as_deref(),
        Some(long.as_str())
    );
    let e = err_of(&named(&"a".repeat(254)));
    assert!(
        e.starts_with("metadata.name: Invalid value: \"aaa")
            && e.ends_with(": must be no more than 253 characters"),
        "{e}"
    );
    let e = err_of(&pod_with(&format!(
        "  containers:\n  - {{name: {}, image: busybox}}\n",
        "c".repeat(64)
    )));
    assert!(
        e.starts_with("spec.containers[0].name: Invalid value: \"ccc")
            && e.ends_with(": must be no more than 63 characters"),
        "{e}"
    );
    let e = err_of(&pod_with(&format!(
        "  hostname: {}\n  containers:\n  - {{name: c, image: busybox}}\n",
        "h".repeat(64)
    )));
    assert!(
        e.starts_with("spec.hostname: ") && e.ends_with(": must be no more than 63 characters"),
        "{e}"
    );
}

#[test]
fn sidecars_may_have_probes() {
    admit_str(&pod_with(
        "  initContainers:\n  - name: s\n    image: busybox\n    restartPolicy: Always\n    readinessProbe: {exec: {command: ['true']}}\n  containers:\n  - {name: c, image: busybox}\n",
    ))
    .unwrap();
}

#[test]
fn probe_and_hook_handlers_are_validated() {
    let cases = [
        ("livenessProbe: {periodSeconds: 3}", "spec.containers[0].livenessProbe: Required value: must specify a handler type"),
        ("livenessProbe: {exec: {command: ['true']}, tcpSocket: {port: 80}}", "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"),
        ("readinessProbe: {exec: {}}", "spec.containers[0].readinessProbe.exec.command: Required value"),
        ("readinessProbe: {httpGet: {port: 0}}", "spec.containers[0].readinessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive"),
        ("readinessProbe: {httpGet: {port: Web_1}}", "spec.containers[0].readinessProbe.httpGet.port: Invalid value: \"Web_1\""),
        ("readinessProbe: {httpGet: {port: 80, scheme: FTP}}", "spec.containers[0].readinessProbe.httpGet.scheme: Unsupported value: \"FTP\""),
        ("startupProbe: {grpc: {port: 70000}}", "spec.containers[0].startupProbe.grpc.port: Invalid value: 70000"),
        ("livenessProbe: {exec: {command: ['true']}, successThreshold: 2}", "spec.containers[0].livenessProbe.successThreshold: Invalid value: must be 1"),
        ("livenessProbe: {exec: {command: ['true']}, periodSeconds: -1}", "spec.containers[0].livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"),
        ("lifecycle: {preStop: {}}", "spec.containers[0].lifecycle.preStop: Required value: must specify a handler type"),
        ("lifecycle: {postStart: {sleep: {seconds: -1}}}", "spec.containers[0].lifecycle.postStart.sleep.seconds: Invalid value: -1: must be non-negative"),
    ];
    for (field, want) in cases {
        let e = err_of(&pod_with(&format!(
            "  containers:\n  - name: c\n    image: busybox\n    {field}\n"
        )));
        assert!(e.starts_with(want), "got {e:?}, want {want:?}");
    }
    // Zero means the default, as in SetDefaults_Probe.
    let a = admit_str(&pod_with(
        "  containers:\n  - name: c\n    image: busybox\n    readinessProbe: {tcpSocket: {port: 80}, periodSeconds: 0, timeoutSeconds: 0}\n",
    ))
    .unwrap();
    let p = a.pod.spec.unwrap().containers[0]
        .readiness_probe
        .clone()
        .unwrap();
    assert_eq!(
        (p.period_seconds, p.timeout_seconds, p.failure_threshold),
        (Some(10), Some(1), Some(3))
    );
}

#[test]
fn uuids_are_version_4() {
    let u = uuid_v4(&[0xff; 16]);
    assert_eq!(u.len(), 36);
    assert_eq!(&u[14..15], "4");
    assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
}

#[test]
fn host_namespaces_and_what_they_rule_out() {
    let c = "  containers:\n  - {name: c, image: busybox}\n";
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        admit_str(&pod_with(&format!("  {host}: true\n{c}"))).unwrap();
    }
    assert_eq!(
        err_of(&pod_with(&format!("  hostPID: true\n  shareProcessNamespace: true\n{c}"))),
        "spec.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled"
    );
    assert_eq!(
        err_of(&pod_with(&format!(
            "  hostNetwork: true\n  securityContext: {{sysctls: [{{name: net.ipv4.tcp_syncookies, value: '1'}}]}}\n{c}"
        ))),
        "spec.securityContext.sysctls[0].name: Forbidden: forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
    );
}

#[test]
fn privileged_and_proc_mount_rules() {
    let c = |sc: &str| {
        pod_with(&format!(
            "  containers:\n  - {{name: c, image: busybox, securityContext: {sc}}}\n"
        ))
    };
    admit_str(&c("{privileged: true}")).unwrap();
    admit_str(&c("{procMount: Default}")).unwrap();
    assert_eq!(
        err_of(&c("{privileged: true, allowPrivilegeEscalation: false}")),
        "spec.containers[0].securityContext: Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
    );
    assert_eq!(
        err_of(&c("{procMount: Unmasked}")),
        "spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"
    );
    admit_str(&pod_with(
        "  hostUsers: false\n  containers:\n  - {name: c, image: busybox, securityContext: {procMount: Unmasked}}\n",
    ))
    .unwrap();
}

#[test]
fn host_users_false_shares_no_namespace_with_the_node() {
    let c = "  containers:\n  - {name: c, image: busybox}\n";
    admit_str(&pod_with(&format!("  hostUsers: false\n{c}"))).unwrap();
    for (host, field) in [
        ("hostNetwork", "spec.hostNetwork"),
        ("hostPID", "spec.HostPID"),
        ("hostIPC", "spec.HostIPC"),
    ] {
        assert_eq!(
            err_of(&pod_with(&format!(
                "  hostUsers: false\n  {host}: true\n{c}"
            ))),
            format!("{field}: Forbidden: when `pod.Spec.HostUsers` is false")
        );
    }
    admit_str(&pod_with(&format!(
        "  hostUsers: true\n  hostNetwork: true\n{c}"
    )))
    .unwrap();
    // The shared pid namespace is then a pause's, in the pod's user namespace.
    admit_str(&pod_with(&format!(
        "  hostUsers: false\n  shareProcessNamespace: true\n{c}"
    )))
    .unwrap();
}

#[test]
fn seccomp_profile_rules() {
    let c = |sp: &str| {
        pod_with(&format!(
            "  containers:\n  - {{name: c, image: busybox, securityContext: {{seccompProfile: {sp}}}}}\n"
        ))
    };
    let pod = |sp: &str| {
        pod_with(&format!(
            "  securityContext: {{seccompProfile: {sp}}}\n  containers:\n  - {{name: c, image: busybox}}\n"
        ))
    };
    for ok in [
        "{type: RuntimeDefault}",
        "{type: Unconfined}",
        "{type: Localhost, localhostProfile: profiles/audit.json}",
    ] {
        admit_str(&c(ok)).unwrap();
        admit_str(&pod(ok)).unwrap();
    }
    let f = "spec.containers[0].securityContext.seccompProfile";
    for (sp, want) in [
        (
            "{type: Localhost}",
            format!("{f}.localhostProfile: Required value: must be set when seccomp type is Localhost"),
        ),
        (
            "{type: Localhost, localhostProfile: ''}",
            format!("{f}.localhostProfile: Required value: must be set when seccomp type is Localhost"),
        ),
        (
            "{type: Localhost, localhostProfile: /etc/x.json}",
            format!("{f}.localhostProfile: Invalid value: \"/etc/x.json\": must be a relative path"),
        ),
        (
            "{type: Localhost, localhostProfile: a/../../x.json}",
            format!("{f}.localhostProfile: Invalid value: \"a/../../x.json\": must not contain '..'"),
        ),
        (
            "{type: RuntimeDefault, localhostProfile: x.json}",
            format!("{f}.localhostProfile: Invalid value: \"x.json\": can only be set when seccomp type is Localhost"),
        ),
        (
            "{type: Default}",
            format!("{f}.type: Unsupported value: \"Default\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\""),
        ),
        (
            "{type: ''}",
            format!("{f}.type: Required value: type is required when seccompProfile is set"),
        ),
    ] {
        assert_eq!(err_of(&c(sp)), want, "{sp}");
    }
    assert_eq!(
        err_of(&pod("{type: Localhost}")),
        "spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost"
    );
    let init = pod_with(
        "  initContainers:\n  - {name: i, image: busybox, securityContext: {seccompProfile: {type: Unconfined, localhostProfile: x}}}\n  containers:\n  - {name: c, image: busybox}\n",
    );
    assert!(err_of(&init).starts_with(
        "spec.initContainers[0].securityContext.seccompProfile.localhostProfile: Invalid value"
    ));
}

#[test]
fn volume_sources_that_need_a_cluster_are_refused_at_admission() {
    for (src, field) in [
        ("serviceAccountToken: {path: token}", "serviceAccountToken"),
        (
            "clusterTrustBundle: {path: b, signerName: x/y}",
            "clusterTrustBundle",
        ),
    ] {
        let spec = format!(
            "  containers:\n  - {{name: c, image: busybox}}\n  volumes:\n  - name: v\n    projected:\n      sources:\n      - configMap: {{name: cfg}}\n      - {src}\n"
        );
        assert_eq!(
            err_of(&pod_with(&spec)),
            format!("spec.volumes[0].projected.sources[1].{field}: not supported")
        );
    }
}

#[test]
fn downward_api_volume_items_are_validated() {
    for (items, want) in [
        (
            "[{path: n, fieldRef: {fieldPath: spec.nodeName}}]",
            "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: \"spec.nodeName\"",
        ),
        (
            "[{path: ../n, fieldRef: {fieldPath: metadata.name}}]",
            "spec.volumes[0].downwardAPI.items[0].path: Invalid value: \"../n\": must not contain '..'",
        ),
        (
            "[{path: /n, fieldRef: {fieldPath: metadata.name}}]",
            "spec.volumes[0].downwardAPI.items[0].path: Invalid value: \"/n\": must be a relative path",
        ),
        (
            "[{path: m, resourceFieldRef: {resource: limits.memory}}]",
            "spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName: Required value",
        ),
    ] {
        let spec = format!(
            "  containers:\n  - {{name: c, image: busybox}}\n  volumes:\n  - {{name: v, downwardAPI: {{items: {items}}}}}\n"
        );
        let e = err_of(&pod_with(&spec));
        assert!(e.starts_with(want), "{e}");
    }
    let ok = "  containers:\n  - {name: c, image: busybox}\n  volumes:\n  - {name: v, downwardAPI: {items: [{path: l, fieldRef: {fieldPath: metadata.labels}}, {path: a, fieldRef: {fieldPath: \"metadata.annotations['x']\"}}, {path: m, resourceFieldRef: {containerName: c, resource: limits.memory}}]}}\n";
    assert!(admit_str(&pod_with(ok)).is_ok());
}

#[test]
fn empty_dir_media_and_supplemental_groups_policy() {
    let c = "  containers:\n  - {name: c, image: busybox, resources: {limits: {memory: 64Mi, hugepages-2Mi: 4Mi}}}\n";
    for ok in [
        "{medium: Memory, sizeLimit: 1Mi}",
        "{sizeLimit: 1Gi}",
        "{medium: HugePages}",
        "{medium: HugePages-2Mi}",
    ] {
        admit_str(&pod_with(&format!(
            "{c}  volumes: [{{name: v, emptyDir: {ok}}}]\n"
        )))
        .unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for (ed, want) in [
        ("{medium: Disk}", "spec.volumes[0].emptyDir.medium: Unsupported value: \"Disk\": supported values: \"\", \"Memory\", \"HugePages\", \"HugePages-<size>\""),
        ("{medium: HugePages-1Gi}", "spec.volumes[0].emptyDir.medium: Invalid value: \"HugePages-1Gi\": medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages"),
        ("{sizeLimit: -1Mi}", "spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity"),
    ] {
        assert_eq!(
            err_of(&pod_with(&format!("{c}  volumes: [{{name: v, emptyDir: {ed}}}]\n"))),
            want
        );
    }
    admit_str(&pod_with(&format!(
        "  securityContext: {{supplementalGroupsPolicy: Strict}}\n{c}"
    )))
    .unwrap();
    assert_eq!(
        err_of(&pod_with(&format!(
            "  securityContext: {{supplementalGroupsPolicy: Loose}}\n{c}"
        ))),
        "spec.securityContext.supplementalGroupsPolicy: Unsupported value: \"Loose\": supported values: \"Merge\", \"Strict\""
    );
    for policy in ["OnRootMismatch", "Always"] {
        admit_str(&pod_with(&format!(
            "  securityContext: {{fsGroup: 2000, fsGroupChangePolicy: {policy}}}\n{c}"
        )))
        .unwrap();
    }
    assert_eq!(
        err_of(&pod_with(&format!(
            "  securityContext: {{fsGroup: 2000, fsGroupChangePolicy: Never}}\n{c}"
        ))),
        "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Never\": supported values: \"OnRootMismatch\", \"Always\""
    );
}

#[test]
fn security_annotations_are_checked_and_seccomp_ones_become_fields() {
    let with = |ann: &str, spec: &str| {
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p, annotations: {{{ann}}}}}\nspec:\n{spec}")
    };
    let c = "  containers:\n  - {name: c, image: busybox}\n";
    let aa = "container.apparmor.security.beta.kubernetes.io";
    let e = err_of(&with(&format!("{aa}/nope: runtime/default"), c));
    assert_eq!(
        e,
        format!("metadata.annotations[{aa}/nope]: Invalid value: \"nope\": container not found")
    );
    let e = err_of(&with(&format!("{aa}/c: strict"), c));
    assert!(
        e.ends_with("invalid AppArmor profile name: \"strict\""),
        "{e}"
    );
    let field = "  containers:\n  - {name: c, image: busybox, securityContext: {appArmorProfile: {type: RuntimeDefault}}}\n";
    let e = err_of(&with(&format!("{aa}/c: unconfined"), field));
    assert_eq!(e, "spec.containers[0].securityContext.appArmorProfile.type: Forbidden: apparmor type in annotation and field must match");
    assert!(admit_str(&with(&format!("{aa}/c: runtime/default"), field)).is_ok());
    let sp = "seccomp.security.alpha.kubernetes.io/pod";
    let e = err_of(&with(&format!("{sp}: strict"), c));
    assert_eq!(
        e,
        format!(
            "metadata.annotations.{sp}: Invalid value: \"strict\": must be a valid seccomp profile"
        )
    );
    let a = admit_str(&with(
        &format!("{sp}: runtime/default, container.seccomp.security.alpha.kubernetes.io/c: localhost/prof.json"),
        c,
    ))
    .unwrap();
    let spec = a.pod.spec.unwrap();
    let pod_sp = spec.security_context.unwrap().seccomp_profile.unwrap();
    assert_eq!(pod_sp.type_, "RuntimeDefault");
    let c_sp = spec.containers[0]
        .security_context
        .clone()
        .unwrap()
        .seccomp_profile
        .unwrap();
    assert_eq!(
        (c_sp.type_.as_str(), c_sp.localhost_profile.as_deref()),
        ("Localhost", Some("prof.json"))
    );
    let mismatch = "  securityContext: {seccompProfile: {type: Unconfined}}\n  containers:\n  - {name: c, image: busybox}\n";
    let e = err_of(&with(&format!("{sp}: runtime/default"), mismatch));
    assert_eq!(e, "spec.securityContext.seccompProfile.type: Forbidden: seccomp type in annotation and field must match");
}
