//! The pod cgroup's limits, as kubelet computes them (docs/semantics.md §Sandbox): per resource,
//! the larger of the sum over app containers and sidecars and the largest plain init
//! container; a container without that limit makes the pod unlimited for it. A pod-level
//! limit (`spec.resources`, KEP-2837) replaces that sum for its resource.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

use crate::quantity;

/// A resource name (`cpu`, `memory`, `hugepages-2Mi`) → its pod-level limit, CPU in
/// millicores and the others in bytes (`None`: unlimited).
pub type Limits = BTreeMap<String, Option<i128>>;

/// A quantity of resource `r` in the unit of [`Limits`].
fn amount(r: &str, q: &Quantity) -> Option<i128> {
    quantity::parse(&q.0)
        .ok()
        .map(|q| if r == "cpu" { q.milli() } else { q.value() })
}

fn limit(c: &Container, r: &str) -> Option<i128> {
    amount(r, c.resources.as_ref()?.limits.as_ref()?.get(r)?)
}

fn request(c: &Container, r: &str) -> Option<i128> {
    amount(r, c.resources.as_ref()?.requests.as_ref()?.get(r)?)
}

/// Kubernetes' `IsSupportedPodLevelResource`: what `spec.resources` may name.
pub fn pod_level_resource(r: &str) -> bool {
    r == "cpu" || r == "memory" || r.starts_with("hugepages-")
}

/// Kubernetes' `IsPodLevelResourcesSet`: `spec.resources` names a supported resource.
pub fn pod_level_set(spec: &PodSpec) -> bool {
    spec.resources.as_ref().is_some_and(|r| {
        [&r.requests, &r.limits]
            .into_iter()
            .flatten()
            .any(|m| m.keys().any(|k| pod_level_resource(k)))
    })
}

/// The pod-level limit (`which` = `limits`) or request (`requests`) of resource `r`, in
/// the unit of [`Limits`].
pub fn pod_level(spec: &PodSpec, which: &str, r: &str) -> Option<i128> {
    let res = spec.resources.as_ref()?;
    let m = if which == "limits" {
        &res.limits
    } else {
        &res.requests
    };
    amount(r, m.as_ref()?.get(r)?)
}

/// Kubernetes' `AggregateContainerRequests`: per resource, the larger of what the app
/// containers and sidecars ask for together and what the largest plain init container
/// asks for beside the sidecars started before it.
pub fn aggregate_requests(spec: &PodSpec) -> BTreeMap<String, i128> {
    let names: std::collections::BTreeSet<String> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .flat_map(|c| c.resources.iter().flat_map(|r| r.requests.iter().flatten()))
        .map(|(k, _)| k.clone())
        .collect();
    let mut out = BTreeMap::new();
    for r in names {
        let mut sum: i128 = spec.containers.iter().filter_map(|c| request(c, &r)).sum();
        let mut sidecars = 0i128;
        let mut init_max = 0i128;
        for c in spec.init_containers.iter().flatten() {
            let q = request(c, &r).unwrap_or(0);
            if c.restart_policy.as_deref() == Some("Always") {
                sum += q;
                sidecars += q;
                init_max = init_max.max(sidecars);
            } else {
                init_max = init_max.max(sidecars + q);
            }
        }
        out.insert(r, sum.max(init_max));
    }
    out
}

/// kubelet's `MilliCPUToShares` of the pod-level CPU request, for the pod cgroup's
/// `cpu.shares` (`cpu.weight` on cgroup v2); `None` without a pod-level CPU request, where
/// the containers' own shares divide the CPU.
pub fn pod_cpu_shares(spec: &PodSpec) -> Option<u64> {
    let milli = pod_level(spec, "requests", "cpu")?;
    Some(((milli * 1024 / 1000) as u64).max(2))
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
    // kubelet's `ResourceConfigForPod`: a pod-level limit is the pod cgroup's, whatever the
    // containers say (validation keeps theirs within it).
    for (k, q) in spec
        .resources
        .iter()
        .flat_map(|r| r.limits.iter().flatten())
    {
        if pod_level_resource(k) {
            out.insert(k.clone(), amount(k, q));
        }
    }
    out
}

/// The pod cgroup's limits as OCI `linux.resources` JSON: a CFS quota over kubelet's
/// 100 ms period, byte limits, hugepage limits, and the shares of a pod-level CPU request.
pub fn pod_cgroup_json(l: &Limits, shares: Option<u64>) -> serde_json::Value {
    let mut v = serde_json::json!({});
    if let Some(Some(milli)) = l.get("cpu") {
        let quota = ((milli * 100_000) / 1000).max(1000) as i64;
        v["cpu"] = serde_json::json!({"quota": quota, "period": 100_000u64});
    }
    if let Some(s) = shares {
        v["cpu"]["shares"] = serde_json::json!(s);
    }
    if let Some(Some(bytes)) = l.get("memory") {
        v["memory"] = serde_json::json!({"limit": *bytes as i64});
    }
    let huge: Vec<serde_json::Value> = l
        .iter()
        .filter_map(|(k, v)| {
            let size = k.strip_prefix("hugepages-")?;
            let page = crate::quantity::hugepage_size(size).ok()?;
            v.map(|lim| serde_json::json!({"pageSize": page, "limit": lim as i64}))
        })
        .collect();
    if !huge.is_empty() {
        v["hugepageLimits"] = serde_json::json!(huge);
    }
    v
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

    #[test]
    fn a_pod_level_limit_replaces_the_containers_sum() {
        let s = spec("resources: {limits: {cpu: '1', memory: 100Mi}, requests: {cpu: 500m}}\ncontainers:\n- {name: a, resources: {limits: {memory: 10Mi}}}\n- {name: b}\n");
        let l = pod_limits(&s);
        assert_eq!(l["cpu"], Some(1000), "b has no limit, the pod has one");
        assert_eq!(l["memory"], Some(100 << 20));
        assert_eq!(pod_cpu_shares(&s), Some(512));
        assert!(pod_level_set(&s));
        // Only what the pod names is replaced.
        let s = spec("resources: {limits: {memory: 100Mi}}\ncontainers:\n- {name: a, resources: {limits: {cpu: 200m}}}\n");
        let l = pod_limits(&s);
        assert_eq!(l["cpu"], Some(200));
        assert_eq!(l["memory"], Some(100 << 20));
        assert_eq!(pod_cpu_shares(&s), None);
        assert!(!pod_level_set(&spec("containers: [{name: a}]\n")));
    }

    #[test]
    fn aggregate_requests_count_sidecars_started_before_an_init_container() {
        let s = spec("initContainers:\n- {name: s, restartPolicy: Always, resources: {requests: {cpu: 100m}}}\n- {name: i, resources: {requests: {cpu: 900m, memory: 1Gi}}}\ncontainers:\n- {name: a, resources: {requests: {cpu: 200m, memory: 10Mi}}}\n- {name: b}\n");
        let a = aggregate_requests(&s);
        assert_eq!(
            a["cpu"], 1000,
            "the init container's 900m beside the sidecar's 100m"
        );
        assert_eq!(a["memory"], 1 << 30);
        let s = spec("containers:\n- {name: a, resources: {requests: {cpu: 200m}}}\n- {name: b, resources: {requests: {cpu: 300m}}}\n");
        assert_eq!(aggregate_requests(&s)["cpu"], 500);
    }
}
