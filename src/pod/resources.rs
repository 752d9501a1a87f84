//! The pod cgroup's limits, as kubelet computes them (docs/semantics.md §Sandbox): per resource,
//! the larger of the sum over app containers and sidecars and the largest plain init
//! container; a container without that limit makes the pod unlimited for it.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use std::collections::BTreeMap;

use crate::quantity;

/// A resource name (`cpu`, `memory`, `hugepages-2Mi`) → its pod-level limit, CPU in
/// millicores and the others in bytes (`None`: unlimited).
pub type Limits = BTreeMap<String, Option<i128>>;

fn limit(c: &Container, r: &str) -> Option<i128> {
    c.resources
        .as_ref()?
        .limits
        .as_ref()?
        .get(r)
        .and_then(|q| quantity::parse(&q.0).ok())
        .map(|q| if r == "cpu" { q.milli() } else { q.value() })
}

pub fn pod_limits(spec: &PodSpec) -> Limits {
    let inits: Vec<&Container> = spec.init_containers.iter().flatten().collect();
    let is_sidecar = |c: &Container| c.restart_policy.as_deref() == Some("Always");
    let long_running: Vec<&Container> = inits
        .iter()
        .copied()
        .filter(|c| is_sidecar(c))
        .chain(spec.containers.iter())
        .collect();
    let plain: Vec<&Container> = inits.iter().copied().filter(|c| !is_sidecar(c)).collect();
    let mut names: Vec<String> = vec!["cpu".into(), "memory".into()];
    for c in inits.iter().copied().chain(spec.containers.iter()) {
        for k in c
            .resources
            .iter()
            .flat_map(|r| r.limits.iter().flatten())
            .map(|(k, _)| k)
        {
            if k.starts_with("hugepages-") && !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    let mut out = Limits::new();
    for r in names {
        let sum: Option<i128> = long_running.iter().map(|c| limit(c, &r)).sum();
        let init_max: Option<i128> = plain
            .iter()
            .map(|c| limit(c, &r))
            .try_fold(0i128, |m, l| l.map(|l| m.max(l)));
        out.insert(r, sum.zip(init_max).map(|(s, i)| s.max(i)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn sum_of_long_running_or_largest_init() {
        let s = spec(
            "initContainers:\n- {name: i, resources: {limits: {cpu: '2', memory: 100Mi}}}\n- {name: s, restartPolicy: Always, resources: {limits: {cpu: 100m, memory: 10Mi}}}\ncontainers:\n- {name: a, resources: {limits: {cpu: 500m, memory: 200Mi}}}\n- {name: b, resources: {limits: {cpu: 500m, memory: 20Mi}}}\n",
        );
        let l = pod_limits(&s);
        assert_eq!(l["cpu"], Some(2000), "the init container's 2 CPUs beat 1.1");
        assert_eq!(
            l["memory"],
            Some(230 << 20),
            "230Mi of long-running beat 100Mi"
        );
    }

    #[test]
    fn one_unlimited_container_makes_the_pod_unlimited() {
        let s = spec("containers:\n- {name: a, resources: {limits: {memory: 10Mi, hugepages-2Mi: 4Mi}}}\n- {name: b}\n");
        let l = pod_limits(&s);
        assert_eq!(l["memory"], None);
        assert_eq!(l["cpu"], None);
        assert_eq!(l["hugepages-2Mi"], None);
        let s = spec("containers:\n- {name: a, resources: {limits: {memory: 10Mi}}}\n");
        assert_eq!(pod_limits(&s)["memory"], Some(10 << 20));
    }
}
