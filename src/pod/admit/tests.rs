use super::*;

fn pod(yaml: &str) -> Pod {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn node() -> Node {
    let labels = [
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/hostname", "box"),
        ("disktype", "ssd"),
        ("zone", "3"),
    ];
    Node {
        name: "box".into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        allocatable: [
            ("cpu", 2000),
            ("memory", 4 << 30),
            ("pods", 110),
            ("example.com/dongle", 2),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect(),
        used: BTreeMap::new(),
        apparmor: false,
    }
}

fn rejected(yaml: &str) -> Rejection {
    check_on_node(&pod(yaml), &node()).unwrap_err()
}

const C: &str = "containers: [{name: c, image: busybox}]";

#[test]
fn a_plain_pod_is_admitted() {
    assert_eq!(
        check_on_node(&pod(&format!("spec: {{{C}}}")), &node()),
        Ok(())
    );
}

#[test]
fn too_much_cpu_is_out_of_cpu_with_kubelets_message() {
    let r = rejected("spec: {containers: [{name: c, resources: {requests: {cpu: '100'}}}]}");
    assert_eq!(r.reason(), "OutOfcpu");
    assert_eq!(
        r.message(),
        "Node didn't have enough resource: cpu, requested: 100000, used: 0, capacity: 2000"
    );
    assert_eq!(
        r.status_message(),
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 100000, used: 0, capacity: 2000"
    );
}

#[test]
fn memory_is_in_bytes_and_a_limit_alone_is_the_request() {
    let r = rejected("spec: {containers: [{name: c, resources: {limits: {memory: 1000Gi}}}]}");
    assert_eq!(r.reason(), "OutOfmemory");
    assert_eq!(
        r.message(),
        format!(
            "Node didn't have enough resource: memory, requested: {}, used: 0, capacity: {}",
            1000u64 << 30,
            4u64 << 30
        )
    );
}

#[test]
fn cpu_is_reported_before_memory() {
    let r = rejected(
        "spec: {containers: [{name: c, resources: {requests: {memory: 1000Gi, cpu: '3'}}}]}",
    );
    assert_eq!(r.reason(), "OutOfcpu");
}

#[test]
fn extended_resources_fit_what_the_node_declares() {
    let ok = "spec: {containers: [{name: c, resources: {limits: {example.com/dongle: '2'}, requests: {example.com/dongle: '2'}}}]}";
    assert_eq!(check_on_node(&pod(ok), &node()), Ok(()));
    let r =
        rejected("spec: {containers: [{name: c, resources: {limits: {example.com/dongle: '3'}}}]}");
    assert_eq!(r.reason(), "OutOfexample.com/dongle");
    assert_eq!(
        r.message(),
        "Node didn't have enough resource: example.com/dongle, requested: 3, used: 0, capacity: 2"
    );
    let r = rejected("spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: '1'}}}]}");
    assert_eq!(r.reason(), "OutOfnvidia.com/gpu");
    assert_eq!(
        r.message(),
        "Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0"
    );
}

#[test]
fn hugepages_without_any_on_the_node_do_not_fit() {
    let r = rejected(
        "spec: {containers: [{name: c, resources: {limits: {hugepages-2Mi: 4Mi, memory: 10Mi}}}]}",
    );
    assert_eq!(r.reason(), "OutOfhugepages-2Mi");
}

#[test]
fn the_pod_request_is_the_larger_of_init_and_long_running_containers() {
    let s = pod("spec:\n  initContainers:\n  - {name: i, resources: {requests: {cpu: '1', memory: 50Mi}}}\n  - {name: s, restartPolicy: Always, resources: {requests: {cpu: 300m, memory: 10Mi}}}\n  - {name: j, resources: {requests: {cpu: 800m}}}\n  containers:\n  - {name: a, resources: {requests: {cpu: 200m, memory: 20Mi}}}\n  overhead: {cpu: 10m}\n");
    let r = pod_requests(s.spec.as_ref().unwrap());
    // init j with the sidecar before it: 1100m; long-running: 500m; plus the overhead.
    assert_eq!(r["cpu"], 1110);
    // init i alone: 50Mi; long-running: 30Mi.
    assert_eq!(r["memory"], 50 << 20);
}

#[test]
fn node_selector_must_match_every_label() {
    let ok = format!("spec: {{nodeSelector: {{disktype: ssd}}, {C}}}");
    assert_eq!(check_on_node(&pod(&ok), &node()), Ok(()));
    let r = rejected(&format!("spec: {{nodeSelector: {{disktype: hdd}}, {C}}}"));
    assert_eq!(r.reason(), "NodeAffinity");
    assert_eq!(
        r.message(),
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
    );
    let r = rejected(&format!(
        "spec: {{nodeSelector: {{kubernetes.io/os: windows}}, {C}}}"
    ));
    assert_eq!(r.reason(), "NodeAffinity");
}

fn affinity(terms: &str) -> String {
    format!("spec: {{affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: {terms}}}}}}}, {C}}}")
}

#[test]
fn required_node_affinity_terms_are_ored_and_their_expressions_anded() {
    let admitted = |terms: &str| check_on_node(&pod(&affinity(terms)), &node()).is_ok();
    assert!(admitted(
        "[{matchExpressions: [{key: disktype, operator: In, values: [ssd, nvme]}]}]"
    ));
    assert!(!admitted("[{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [antarctica-east1]}]}]"));
    assert!(admitted("[{matchExpressions: [{key: zone, operator: In, values: [x]}]}, {matchExpressions: [{key: disktype, operator: Exists}]}]"));
    assert!(!admitted(
        "[{matchExpressions: [{key: disktype, operator: Exists}, {key: gpu, operator: Exists}]}]"
    ));
    assert!(admitted("[{matchExpressions: [{key: gpu, operator: DoesNotExist}, {key: gpu, operator: NotIn, values: [a]}]}]"));
    assert!(admitted("[{matchExpressions: [{key: zone, operator: Gt, values: ['2']}, {key: zone, operator: Lt, values: ['4']}]}]"));
    assert!(!admitted(
        "[{matchExpressions: [{key: disktype, operator: Gt, values: ['2']}]}]"
    ));
    assert!(admitted(
        "[{matchFields: [{key: metadata.name, operator: In, values: [box]}]}]"
    ));
    assert!(!admitted(
        "[{matchFields: [{key: metadata.name, operator: NotIn, values: [box]}]}]"
    ));
    assert!(!admitted("[{}]"), "an empty term matches nothing");
}

#[test]
fn node_name_must_be_this_node() {
    assert!(check_on_node(&pod(&format!("spec: {{nodeName: box, {C}}}")), &node()).is_ok());
    let r = rejected(&format!("spec: {{nodeName: kube-01, {C}}}"));
    assert_eq!(r.reason(), "NodeName");
    assert_eq!(
        r.message(),
        "Predicate NodeName failed: node(s) didn't match the requested node name"
    );
}

#[test]
fn resources_come_before_affinity_and_affinity_before_node_name() {
    let r = rejected("spec: {nodeName: x, nodeSelector: {a: b}, containers: [{name: c, resources: {requests: {cpu: '9'}}}]}");
    assert_eq!(r.reason(), "OutOfcpu");
    let r = rejected(&format!(
        "spec: {{nodeName: x, nodeSelector: {{a: b}}, {C}}}"
    ));
    assert_eq!(r.reason(), "NodeAffinity");
}

#[test]
fn the_os_label_and_field_are_checked_first() {
    let r = rejected(&format!(
        "metadata: {{labels: {{kubernetes.io/os: windows}}}}\nspec: {{nodeName: x, {C}}}"
    ));
    assert_eq!(r.reason(), "PodOSSelectorNodeLabelDoesNotMatch");
    assert_eq!(
        r.message(),
        "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
    );
    let r = rejected(&format!("spec: {{os: {{name: windows}}, {C}}}"));
    assert_eq!(r.reason(), "PodOSNotSupported");
    assert_eq!(
        r.message(),
        "Failed to admit pod as the OS field doesn't match node OS"
    );
    let ok = format!(
        "metadata: {{labels: {{kubernetes.io/os: linux}}}}\nspec: {{os: {{name: linux}}, {C}}}"
    );
    assert!(check_on_node(&pod(&ok), &node()).is_ok());
}

#[test]
fn apparmor_other_than_unconfined_needs_a_host_with_apparmor() {
    let msg = "Cannot enforce AppArmor: AppArmor is not enabled on the host";
    for yaml in [
        "metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/c: runtime/default}}\nspec: {containers: [{name: c}]}",
        "metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/c: localhost/k8s-apparmor-example-deny-write}}\nspec: {containers: [{name: c}]}",
        "spec: {securityContext: {appArmorProfile: {type: RuntimeDefault}}, containers: [{name: c}]}",
        "spec: {containers: [{name: c, securityContext: {appArmorProfile: {type: Localhost, localhostProfile: p}}}]}",
    ] {
        let r = rejected(yaml);
        assert_eq!((r.reason().as_str(), r.message().as_str()), ("AppArmor", msg), "{yaml}");
    }
    for yaml in [
        "metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/c: unconfined}}\nspec: {containers: [{name: c}]}",
        "spec: {securityContext: {appArmorProfile: {type: Unconfined}}, containers: [{name: c}]}",
    ] {
        assert_eq!(check_on_node(&pod(yaml), &node()), Ok(()), "{yaml}");
    }
    let mut n = node();
    n.apparmor = true;
    let r = check_on_node(&pod("spec: {securityContext: {appArmorProfile: {type: RuntimeDefault}}, containers: [{name: c}]}"), &n).unwrap_err();
    assert_eq!(r.reason(), "AppArmor");
}

#[test]
fn a_containers_profile_comes_from_its_field_then_its_annotation_then_the_pods() {
    let p = pod("metadata: {annotations: {container.apparmor.security.beta.kubernetes.io/a: localhost/x}}\nspec:\n  securityContext: {appArmorProfile: {type: RuntimeDefault}}\n  containers:\n  - {name: a}\n  - {name: b}\n  - {name: c, securityContext: {appArmorProfile: {type: Unconfined}}}\n");
    let cs = &p.spec.as_ref().unwrap().containers;
    let types: Vec<String> = cs
        .iter()
        .map(|c| apparmor_profile(&p, c).unwrap().type_)
        .collect();
    assert_eq!(types, ["Localhost", "RuntimeDefault", "Unconfined"]);
    assert_eq!(
        apparmor_profile(&p, &cs[0])
            .unwrap()
            .localhost_profile
            .as_deref(),
        Some("x")
    );
}

#[test]
fn the_other_pods_of_the_node_count_as_used() {
    // Two pods already on the node, one at a size a resize allocated, and one ended.
    let other = |name: &str, cpu: &str, phase: &str, allocated: &str| {
        pod(&format!(
            "metadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: {cpu}, memory: 1Gi}}}}}}]\nstatus:\n  phase: {phase}\n  containerStatuses: [{{name: c, image: busybox, imageID: '', ready: true, restartCount: 0{allocated}}}]\n"
        ))
    };
    let others = [
        other("a", "500m", "Running", ""),
        other(
            "b",
            "1",
            "Running",
            ", allocatedResources: {cpu: 900m, memory: 1Gi}",
        ),
        other("c", "1500m", "Succeeded", ""),
    ];
    let mut n = node();
    n.used = crate::pod::allocation::node_usage(&others);
    assert_eq!(n.used["pods"], 2);
    assert_eq!(n.used["cpu"], 1400);
    let p =
        pod("spec:\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: 700m}}}]");
    let r = check_on_node(&p, &n).unwrap_err();
    assert_eq!(r.reason(), "OutOfcpu");
    assert_eq!(
        r.message(),
        "Node didn't have enough resource: cpu, requested: 700, used: 1400, capacity: 2000"
    );
    let fits =
        pod("spec:\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: 600m}}}]");
    assert_eq!(check_on_node(&fits, &n), Ok(()), "exactly what is left");
    // The node's pod count: kubelet's "Too many pods" is OutOfpods.
    n.allocatable.insert("pods".into(), 2);
    let r = check_on_node(&fits, &n).unwrap_err();
    assert_eq!(
        r.message(),
        "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    );
}
