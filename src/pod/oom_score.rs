//! The OOM-killer preference of each process in the pod, as kubelet sets it
//! (`pkg/kubelet/qos/policy.go`): the sandbox is almost never chosen, Guaranteed
//! containers next to never, BestEffort first, Burstable in between by memory request.

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::plan::qos_class;
use super::reason::QosClass;
use crate::quantity;

/// The pod sandbox (kubelet's `PodInfraOOMAdj`, the pause container's value): podinit's
/// supervisor, so that a container filling the node does not take the pod's keeper down.
pub const SANDBOX: i32 = -998;
const GUARANTEED: i32 = -997;
const BEST_EFFORT: i32 = 1000;

fn memory_request(c: &Container) -> i128 {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("memory"))
        .and_then(|q| quantity::parse(&q.0).ok())
        .map(|q| q.value())
        .unwrap_or(0)
}

/// `oom_score_adj` for container `c` of the pod (`sidecar`: a restartable init container),
/// on a node with `memory_capacity` bytes.
pub fn container(spec: &PodSpec, c: &Container, sidecar: bool, memory_capacity: i64) -> i32 {
    // A static pod is critical; with the node-critical class it ranks with Guaranteed.
    if spec.priority_class_name.as_deref() == Some("system-node-critical") {
        return GUARANTEED;
    }
    match qos_class(spec) {
        QosClass::Guaranteed => return GUARANTEED,
        QosClass::BestEffort => return BEST_EFFORT,
        QosClass::Burstable => {}
    }
    let capacity = i128::from(memory_capacity.max(1));
    let by_request = |req: i128| 1000 - (1000 * req) / capacity;
    let mut adj = by_request(memory_request(c));
    if sidecar {
        // A sidecar is never killed before the regular container that asks least.
        let least = spec
            .containers
            .iter()
            .map(memory_request)
            .min()
            .unwrap_or(0);
        adj = adj.min(by_request(least));
    }
    // Above every Guaranteed container (a Guaranteed one using all memory scores 10), and
    // below every BestEffort one.
    adj.clamp(i128::from(1000 + GUARANTEED), i128::from(BEST_EFFORT - 1)) as i32
}

/// The one line to tell the user when the kernel refused to give the supervisor the score
/// `asked` (lowering a score needs CAP_SYS_RESOURCE) and it keeps `kept`: only when that
/// matters, a score that was to be lowered and was not. Without the capability the
/// containers cannot go below `kept` either; the runtime lets them keep it silently.
pub fn refused(asked: i32, kept: i32) -> Option<String> {
    (asked < kept).then(|| {
        format!(
            "oom_score_adj: cannot lower the supervisor's OOM score to {asked} without CAP_SYS_RESOURCE; it keeps {kept}, and no container goes below {kept} either"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_score_is_told_only_when_it_was_to_be_lowered() {
        assert_eq!(
            refused(SANDBOX, 0).as_deref(),
            Some("oom_score_adj: cannot lower the supervisor's OOM score to -998 without CAP_SYS_RESOURCE; it keeps 0, and no container goes below 0 either")
        );
        assert_eq!(refused(SANDBOX, -998), None, "it has that score already");
        assert_eq!(refused(SANDBOX, -999), None, "it ranks even lower");
    }

    const GI: i64 = 1 << 30;

    fn spec(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn adj(s: &PodSpec, i: usize) -> i32 {
        container(s, &s.containers[i], false, 16 * GI)
    }

    #[test]
    fn by_qos_class() {
        let best = spec("containers: [{name: a}]");
        assert_eq!(adj(&best, 0), 1000);
        let guaranteed =
            spec("containers: [{name: a, resources: {limits: {cpu: 1, memory: 1Gi}}}]");
        assert_eq!(adj(&guaranteed, 0), -997);
        let critical = spec("priorityClassName: system-node-critical\ncontainers: [{name: a}]");
        assert_eq!(adj(&critical, 0), -997);
    }

    #[test]
    fn burstable_by_memory_request_within_3_and_999() {
        // 1 GiB of 16 GiB: 1000 - 62.5, truncated toward zero as Go's integer division.
        let s = spec(
            "containers:\n- {name: a, resources: {requests: {memory: 1Gi}}}\n- {name: b, resources: {requests: {cpu: 100m}}}\n- {name: c, resources: {requests: {memory: 16Gi}}}",
        );
        assert_eq!(adj(&s, 0), 938);
        assert_eq!(adj(&s, 1), 999, "no memory request: just below BestEffort");
        assert_eq!(adj(&s, 2), 3, "all of memory: just above Guaranteed");
    }

    #[test]
    fn a_sidecar_ranks_no_lower_than_the_smallest_regular_container() {
        let s = spec(
            "initContainers:\n- {name: side, restartPolicy: Always, resources: {requests: {cpu: 100m}}}\ncontainers:\n- {name: a, resources: {requests: {memory: 2Gi}}}\n- {name: b, resources: {requests: {memory: 4Gi}}}",
        );
        let side = &s.init_containers.as_ref().unwrap()[0];
        assert_eq!(container(&s, side, true, 16 * GI), 875);
        assert_eq!(container(&s, side, false, 16 * GI), 999);
    }
}
