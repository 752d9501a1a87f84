//! In-place resize (KEP-1287, GA in 1.35; pod-level KEP-5419, beta in 1.36): the `resize`
//! subresource as the API server takes it, and kubelet's admission of the new size. Pure.
//!
//! The API server applies the patch (strategic-merge: containers matched by `name`; or a
//! JSON merge patch) to the pod, keeps only what a resize may change
//! (`dropNonResizeUpdates`: each container's `resources` and `resizePolicy`, matched by
//! name, and `spec.resources`), validates it (`ValidatePodResize`) and bumps
//! `metadata.generation` when the spec changed. kubelet's allocation of the new size is
//! `pod::allocation`; how each container takes it (`resizePolicy`) and in which order the
//! pod's cgroup changes are here.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use serde_json::Value;
use std::collections::BTreeMap;

/// How the patch is to be applied (`Content-Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/strategic-merge-patch+json` (and plain `application/json`).
    Strategic,
    /// `application/merge-patch+json` (RFC 7386): lists are replaced whole.
    Merge,
}

/// A resize the API server refuses: 422 `Invalid`, `field: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// The pod validation the API server runs on a resized pod: `Err((field, message))`.
pub type Validate<'a> = dyn Fn(&Pod) -> Result<(), (String, String)> + 'a;

/// The patched pod's JSON read back as a Pod, or the reader's error: the caller's typed
/// reader, so that the Kubernetes types' deserializers are in the binary once.
pub type Decode<'a, E> = dyn Fn(&Value) -> Result<Pod, E> + 'a;

/// The pod after the resize `patch`, with its generation grown by one if its spec
/// changed; or why the API server refuses it. `decode` reads the patched JSON back;
/// `validate` is the pod validation the API server runs on the result (the manifest's,
/// with its wording).
pub fn patched<E: std::fmt::Display>(
    pod: &Pod,
    patch: &Value,
    kind: PatchKind,
    decode: &Decode<E>,
    validate: &Validate,
) -> Result<Pod, Invalid> {
    if !patch.is_object() {
        return Err(invalid("", "the patch must be a JSON object"));
    }
    let mut doc = serde_json::to_value(pod).map_err(|e| invalid("", e.to_string()))?;
    match kind {
        PatchKind::Strategic => strategic_merge(&mut doc, patch),
        PatchKind::Merge => merge_patch(&mut doc, patch),
    }
    let proposed =
        decode(&doc).map_err(|e| invalid("", format!("decoding the patched pod: {e}")))?;
    let old = pod.spec.as_ref().expect("admitted pod has a spec");
    let new = proposed.spec.clone().unwrap_or_default();
    let mut spec = old.clone();
    keep_resize_updates(&mut spec, &new);
    validate_resize(old, &spec)?;
    let mut out = pod.clone();
    out.spec = Some(spec);
    validate(&out).map_err(|(f, m)| invalid(f, m))?;
    if out.spec != pod.spec {
        out.metadata.generation = Some(pod.metadata.generation.unwrap_or(1) + 1);
    }
    Ok(out)
}

/// `dropNonResizeUpdates`: every change but the containers' `resources` and
/// `resizePolicy` (matched by name) and `spec.resources` is dropped.
fn keep_resize_updates(spec: &mut PodSpec, new: &PodSpec) {
    let take = |olds: &mut [Container], news: &[Container]| {
        for c in olds.iter_mut() {
            if let Some(n) = news.iter().find(|n| n.name == c.name) {
                c.resources = n.resources.clone();
                c.resize_policy = n.resize_policy.clone();
            }
        }
    };
    take(&mut spec.containers, &new.containers);
    if let (Some(olds), Some(news)) = (spec.init_containers.as_mut(), new.init_containers.as_ref())
    {
        take(olds, news);
    }
    spec.resources = new.resources.clone();
}

type Amounts = BTreeMap<String, String>;

fn amounts(
    m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Amounts {
    m.iter()
        .flatten()
        .map(|(k, q)| (k.clone(), q.0.clone()))
        .collect()
}

/// `ValidatePodResize`'s own rules: only cpu and memory change, of app containers,
/// restartable init containers and the pod; nothing is removed; the QoS class stays.
fn validate_resize(old: &PodSpec, new: &PodSpec) -> Result<(), Invalid> {
    let pairs = |o: &[Container], n: &[Container], list: &'static str| {
        o.iter()
            .zip(n.iter())
            .enumerate()
            .map(move |(i, (a, b))| (list, i, a.clone(), b.clone()))
            .collect::<Vec<_>>()
    };
    let mut all = pairs(&old.containers, &new.containers, "containers");
    all.extend(pairs(
        old.init_containers.as_deref().unwrap_or_default(),
        new.init_containers.as_deref().unwrap_or_default(),
        "initContainers",
    ));
    let empty = ResourceRequirements::default();
    for (list, i, a, b) in &all {
        let (ra, rb) = (
            a.resources.as_ref().unwrap_or(&empty),
            b.resources.as_ref().unwrap_or(&empty),
        );
        if ra == rb {
            continue;
        }
        let p = format!("spec.{list}[{i}].resources");
        if *list == "initContainers" && a.restart_policy.as_deref() != Some("Always") {
            return Err(invalid(
                p,
                "Forbidden: resize is not supported for non-restartable init containers",
            ));
        }
        changes(ra, rb, &p)?;
    }
    let (pa, pb) = (
        old.resources.as_ref().unwrap_or(&empty),
        new.resources.as_ref().unwrap_or(&empty),
    );
    if pa != pb {
        changes(pa, pb, "spec.resources")?;
    }
    let (qa, qb) = (super::plan::qos_class(old), super::plan::qos_class(new));
    if qa != qb {
        return Err(invalid(
            "spec",
            format!(
                "Invalid value: {:?}: Pod QOS Class may not change as a result of resizing",
                qb.as_str()
            ),
        ));
    }
    Ok(())
}

/// One set of resources changed: only cpu and memory, and no request or limit removed.
fn changes(a: &ResourceRequirements, b: &ResourceRequirements, p: &str) -> Result<(), Invalid> {
    for (which, x, y) in [
        ("requests", amounts(&a.requests), amounts(&b.requests)),
        ("limits", amounts(&a.limits), amounts(&b.limits)),
    ] {
        for k in x.keys().chain(y.keys()) {
            if x.get(k) != y.get(k) && k != "cpu" && k != "memory" {
                return Err(invalid(
                    "spec",
                    "Forbidden: only cpu and memory resources are mutable",
                ));
            }
        }
        if x.keys().any(|k| !y.contains_key(k)) {
            return Err(invalid(
                format!("{p}.{which}"),
                format!("Forbidden: resource {which} cannot be removed"),
            ));
        }
    }
    if a.claims != b.claims {
        return Err(invalid(
            "spec",
            "Forbidden: only cpu and memory resources are mutable",
        ));
    }
    Ok(())
}

/// RFC 7386: objects merge, `null` removes, anything else (lists too) replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// The list fields of a Pod that a strategic-merge patch merges by a key, and that key
/// (`patchMergeKey` in the API types).
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers" | "initContainers" | "ephemeralContainers" | "env" | "volumes" => "name",
        "resizePolicy" => "resourceName",
        "volumeMounts" => "mountPath",
        "ports" => "containerPort",
        _ => return None,
    })
}

/// A strategic-merge patch as the API server applies one to a Pod: objects merge, `null`
/// removes, lists with a merge key merge entry by entry (an entry of the patch with
/// `$patch: delete` removes the entry), other lists replace.
fn strategic_merge(target: &mut Value, patch: &Value) {
    let (Some(t), Some(p)) = (target.as_object_mut(), patch.as_object()) else {
        *target = patch.clone();
        return;
    };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (merge_key(k), v.as_array()) {
            (Some(key), Some(items)) => {
                let list = t.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                if !list.is_array() {
                    *list = Value::Array(vec![]);
                }
                let list = list.as_array_mut().expect("an array");
                for item in items {
                    let id = &item[key];
                    let at = list.iter().position(|e| &e[key] == id);
                    let delete = item["$patch"] == "delete";
                    match (at, delete) {
                        (Some(i), true) => {
                            list.remove(i);
                        }
                        (Some(i), false) => strategic_merge(&mut list[i], item),
                        (None, true) => {}
                        (None, false) => list.push(item.clone()),
                    }
                }
            }
            _ => strategic_merge(t.entry(k.clone()).or_insert(Value::Null), v),
        }
    }
}

/// What a container's resize needs (kubelet's `computePodResizeAction`): nothing, a
/// change of its cgroup in place, or a restart (`resizePolicy` `RestartContainer` for a
/// resource that changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerResize {
    Unchanged,
    InPlace,
    Restart,
}

pub fn container_resize(old: &Container, new: &Container) -> ContainerResize {
    let empty = ResourceRequirements::default();
    let (a, b) = (
        old.resources.as_ref().unwrap_or(&empty),
        new.resources.as_ref().unwrap_or(&empty),
    );
    let changed = |r: &str| {
        amounts(&a.requests).get(r) != amounts(&b.requests).get(r)
            || amounts(&a.limits).get(r) != amounts(&b.limits).get(r)
    };
    let mut out = ContainerResize::Unchanged;
    for r in ["cpu", "memory"] {
        if !changed(r) {
            continue;
        }
        let restart = new
            .resize_policy
            .iter()
            .flatten()
            .any(|p| p.resource_name == r && p.restart_policy == "RestartContainer");
        out = if restart {
            ContainerResize::Restart
        } else if out == ContainerResize::Restart {
            out
        } else {
            ContainerResize::InPlace
        };
    }
    out
}

/// Whether the pod cgroup's limits go first (they grow) or last (they shrink): kubelet's
/// `doPodResizeAction` sets a growing pod limit before the containers' and a shrinking one
/// after, so that the containers' never exceed the pod's.
pub fn pod_first(old: &PodSpec, new: &PodSpec, resource: &str) -> bool {
    let limit = |s: &PodSpec| {
        super::resources::pod_limits(s)
            .get(resource)
            .copied()
            .flatten()
    };
    match (limit(old), limit(new)) {
        (Some(a), Some(b)) => b >= a,
        (Some(_), None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn burstable() -> Pod {
        pod("metadata: {name: p, generation: 1}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}\n    resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]\n  - name: d\n    image: busybox\n")
    }

    /// One container: Burstable, and its pod cgroup limited.
    fn single() -> Pod {
        pod("metadata: {name: p, generation: 1}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}\n    resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]\n")
    }

    fn ok(_: &Pod) -> Result<(), (String, String)> {
        Ok(())
    }

    fn decode(v: &Value) -> Result<Pod, serde_json::Error> {
        serde_json::from_value(v.clone())
    }

    fn res(p: &Pod, i: usize) -> Value {
        serde_json::to_value(&p.spec.as_ref().unwrap().containers[i].resources).unwrap()
    }

    #[test]
    fn a_strategic_patch_changes_one_containers_resources_and_the_generation() {
        let p = burstable();
        let patch = json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "300m"}}}]}});
        let out = patched(&p, &patch, PatchKind::Strategic, &decode, &ok).unwrap();
        assert_eq!(
            res(&out, 0)["limits"],
            json!({"cpu": "300m", "memory": "64Mi"})
        );
        assert_eq!(out.metadata.generation, Some(2));
        assert_eq!(out.spec.as_ref().unwrap().containers.len(), 2, "d is kept");
        // The same patch again changes nothing: the generation stays.
        let again = patched(&out, &patch, PatchKind::Strategic, &decode, &ok).unwrap();
        assert_eq!(again.metadata.generation, Some(2));
    }

    #[test]
    fn what_is_not_a_resize_is_dropped_as_the_api_server_drops_it() {
        let p = burstable();
        let patch = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "other", "resources": {"limits": {"cpu": "300m"}}}, {"name": "new", "image": "x"}]}});
        let out = patched(&p, &patch, PatchKind::Strategic, &decode, &ok).unwrap();
        let spec = out.spec.as_ref().unwrap();
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(spec.containers[0].image.as_deref(), Some("busybox"));
        assert!(out.metadata.labels.is_none());
        assert_eq!(res(&out, 0)["limits"]["cpu"], "300m");
    }

    #[test]
    fn the_api_servers_refusals() {
        let p = burstable();
        let cases = [
            (
                json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"ephemeral-storage": "1Gi"}}}]}}),
                (
                    "spec",
                    "Forbidden: only cpu and memory resources are mutable",
                ),
            ),
            (
                json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": null}}}]}}),
                (
                    "spec.containers[0].resources.limits",
                    "Forbidden: resource limits cannot be removed",
                ),
            ),
        ];
        for (patch, (field, message)) in cases {
            let e = patched(&p, &patch, PatchKind::Strategic, &decode, &ok).unwrap_err();
            assert_eq!(
                (e.field.as_str(), e.message.as_str()),
                (field, message),
                "{patch}"
            );
        }
        let qos = json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}}}]}});
        let e = patched(&single(), &qos, PatchKind::Strategic, &decode, &ok).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("spec", "Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing")
        );
        let with_init = pod("metadata: {name: p}\nspec:\n  initContainers: [{name: i, image: busybox, resources: {limits: {cpu: 100m}}}]\n  containers: [{name: c, image: busybox, resources: {limits: {cpu: 100m}}}]\n");
        let e = patched(&with_init, &json!({"spec": {"initContainers": [{"name": "i", "resources": {"limits": {"cpu": "200m"}}}]}}), PatchKind::Strategic, &decode, &ok).unwrap_err();
        assert_eq!(e.field, "spec.initContainers[0].resources");
        // The pod's own validation runs on the result.
        let refuse = |_: &Pod| {
            Err((
                "spec.containers[0].resources.requests".to_string(),
                "Invalid value: \"300m\": must be less than or equal to cpu limit of 200m"
                    .to_string(),
            ))
        };
        let e = patched(&p, &json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "300m"}}}]}}), PatchKind::Strategic, &decode, &refuse).unwrap_err();
        assert_eq!(e.field, "spec.containers[0].resources.requests");
    }

    #[test]
    fn a_merge_patch_replaces_the_list_and_resizes_only_what_it_names() {
        let p = burstable();
        let patch = json!({"spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "150m", "memory": "32Mi"}, "limits": {"cpu": "250m", "memory": "64Mi"}}}]}});
        let out = patched(&p, &patch, PatchKind::Merge, &decode, &ok).unwrap();
        assert_eq!(res(&out, 0)["limits"]["cpu"], "250m");
        assert_eq!(out.spec.as_ref().unwrap().containers.len(), 2, "d is kept");
    }

    #[test]
    fn the_resize_policy_decides_in_place_or_restart() {
        let p = single();
        let old = &p.spec.as_ref().unwrap().containers[0];
        let cpu = patched(&p, &json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "300m"}}}]}}), PatchKind::Strategic, &decode, &ok).unwrap();
        assert_eq!(
            container_resize(old, &cpu.spec.as_ref().unwrap().containers[0]),
            ContainerResize::InPlace
        );
        let mem = patched(&p, &json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "128Mi"}}}]}}), PatchKind::Strategic, &decode, &ok).unwrap();
        assert_eq!(
            container_resize(old, &mem.spec.as_ref().unwrap().containers[0]),
            ContainerResize::Restart
        );
        assert_eq!(container_resize(old, old), ContainerResize::Unchanged);
        assert!(pod_first(
            p.spec.as_ref().unwrap(),
            mem.spec.as_ref().unwrap(),
            "memory"
        ));
        assert!(!pod_first(
            mem.spec.as_ref().unwrap(),
            p.spec.as_ref().unwrap(),
            "memory"
        ));
    }
}
