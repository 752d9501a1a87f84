//! kubelet's side of a resize after the API server has taken it (docs/semantics.md
//! §Resize), from pkg/kubelet/allocation and the status manager: whether the new size can
//! be allocated (`handlePodResourcesResize`: `PodResizePending` `Infeasible` or
//! `Deferred`), when pending resizes are retried (the allocation manager's ticker), what
//! the container statuses show as `resources` from the cgroup's values
//! (`convertContainerStatusResources` over the runtime's `ContainerStatus`), whether the
//! resize is still in progress (`allocatedResourcesMatchStatus`), and the events' words
//! (pkg/kubelet/events). Pure.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

use super::reason::{EventReason, EventType};
use super::step::EventSpec;
use super::Millis;
use crate::quantity;

/// Why kubelet has not allocated a resize (`PodResizePending`'s reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// The node could never fit it: kubelet does not retry it.
    Infeasible,
    /// It fits the node but not beside what its other pods have now: retried.
    Deferred,
}

impl Pending {
    pub fn as_str(self) -> &'static str {
        match self {
            Pending::Infeasible => "Infeasible",
            Pending::Deferred => "Deferred",
        }
    }

    fn event_reason(self) -> EventReason {
        match self {
            Pending::Infeasible => EventReason::ResizeInfeasible,
            Pending::Deferred => EventReason::ResizeDeferred,
        }
    }
}

/// CPU (millicores) and memory (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMemory {
    pub cpu: i128,
    pub memory: i128,
}

/// The pod's CPU and memory requests as the scheduler and kubelet count them
/// (`GetResourceRequest`): the pod-level request where set, else the containers'
/// aggregate.
pub fn requests(spec: &PodSpec) -> CpuMemory {
    let agg = super::resources::aggregate_requests(spec);
    let one = |r: &str| {
        super::resources::pod_level(spec, "requests", r)
            .unwrap_or_else(|| agg.get(r).copied().unwrap_or(0))
    };
    CpuMemory {
        cpu: one("cpu"),
        memory: one("memory"),
    }
}

/// What the node's other pods hold, as kubelet counts them both when it admits a pod
/// (`canAdmitPod` over the allocated pods) and when it allocates a resize: one pod each
/// (`pods`) and its requests (`resourcehelper.PodRequests`) at the sizes kubelet
/// allocated (`getAllocatedPods`: each container's `allocatedResources` where its status
/// has them); nothing of a pod that has ended.
pub fn node_usage(others: &[Pod]) -> BTreeMap<String, i128> {
    let mut used = BTreeMap::new();
    for other in others {
        let Some(spec) = allocated_spec(other) else {
            continue;
        };
        *used.entry("pods".to_string()).or_insert(0) += 1;
        for (k, v) in super::admit::pod_requests(&spec) {
            *used.entry(k).or_insert(0) += v;
        }
    }
    used
}

/// The CPU and memory of a [`node_usage`].
pub fn cpu_memory(used: &BTreeMap<String, i128>) -> CpuMemory {
    CpuMemory {
        cpu: used.get("cpu").copied().unwrap_or(0),
        memory: used.get("memory").copied().unwrap_or(0),
    }
}

/// The spec of another pod with its containers' requests as allocated; `None` once it
/// has ended (it holds nothing then).
fn allocated_spec(other: &Pod) -> Option<PodSpec> {
    let status = other.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return None;
    }
    let mut spec = other.spec.clone()?;
    let statuses: Vec<_> = status
        .into_iter()
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .collect();
    let allocated = |c: &mut Container| {
        let found = statuses.iter().find(|s| s.name == c.name);
        if let Some(a) = found.and_then(|s| s.allocated_resources.clone()) {
            c.resources.get_or_insert_with(Default::default).requests = Some(a);
        }
    };
    spec.containers.iter_mut().for_each(allocated);
    spec.init_containers
        .iter_mut()
        .flatten()
        .for_each(allocated);
    Some(spec)
}

/// kubelet's admission of a resize to `spec` on a node with `allocatable`, beside other
/// pods that hold `used`: `Infeasible` when the pod's requests exceed the node's
/// allocatable (`canResizePod`'s words), `Deferred` when they exceed what the others leave
/// (the predicate admit handler's `InsufficientResourceError`, cpu before memory).
pub fn admit(
    spec: &PodSpec,
    allocatable: CpuMemory,
    used: CpuMemory,
) -> Result<(), (Pending, String)> {
    let req = requests(spec);
    if req.cpu > allocatable.cpu || req.memory > allocatable.memory {
        let what = if req.memory > allocatable.memory {
            format!(
                "memory, requested: {}, capacity: {}",
                req.memory, allocatable.memory
            )
        } else {
            format!("cpu, requested: {}, capacity: {}", req.cpu, allocatable.cpu)
        };
        return Err((
            Pending::Infeasible,
            format!("Node didn't have enough capacity: {what}"),
        ));
    }
    for (name, want, held, cap) in [
        ("cpu", req.cpu, used.cpu, allocatable.cpu),
        ("memory", req.memory, used.memory, allocatable.memory),
    ] {
        if want > 0 && want > cap - held {
            return Err((
                Pending::Deferred,
                format!("Node didn't have enough resource: {name}, requested: {want}, used: {held}, capacity: {cap}"),
            ));
        }
    }
    Ok(())
}

/// The allocation manager's ticker: its first tick 30 s after kubelet starts, then one
/// every 3 minutes.
pub const FIRST_RETRY_MS: Millis = 30_000;
pub const RETRY_EVERY_MS: Millis = 180_000;

/// When kubelet next retries its pending resizes, after `now` (milliseconds since it
/// started).
pub fn next_retry(now: Millis) -> Millis {
    if now < FIRST_RETRY_MS {
        return FIRST_RETRY_MS;
    }
    let ticks = (now - FIRST_RETRY_MS) / RETRY_EVERY_MS + 1;
    FIRST_RETRY_MS + ticks * RETRY_EVERY_MS
}

/// A container cgroup's CPU and memory values as read back (each `None` where the file
/// is missing or says unlimited): v1's `cpu.cfs_quota_us`, `cpu.cfs_period_us`,
/// `cpu.shares`, `memory.limit_in_bytes`; v2's `cpu.max`, `cpu.weight`, `memory.max`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupValues {
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    pub cpu_shares: Option<u64>,
    pub cpu_weight: Option<u64>,
    pub memory_limit: Option<i64>,
}

/// kubelet's `MilliCPUToShares`.
fn milli_to_shares(milli: i128) -> u64 {
    ((milli * 1024 / 1000) as u64).max(2)
}

/// The CRI's `sharesToMilliCPU`: 0 below the kernel's minimum of 2.
fn shares_to_milli(shares: u64) -> i128 {
    if shares < 2 {
        return 0;
    }
    (i128::from(shares) * 1000 + 1023) / 1024
}

/// runc's `ConvertCPUSharesToCgroupV2Value`.
fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + ((shares.max(2) - 2) * 9999) / 262_142
}

/// The CPU request a cgroup's values stand for: its shares; on v2 its weight, which runc
/// derived from shares without a way back: the allocated request where the weight is the
/// one runc makes of it, else the shares kubelet's `CpuWeightToCpuShares` gives.
fn cpu_request_of(v: &CgroupValues, allocated_milli: Option<i128>) -> Option<i128> {
    if let Some(s) = v.cpu_shares {
        return Some(shares_to_milli(s)).filter(|m| *m > 0);
    }
    let w = v.cpu_weight?;
    if let Some(m) = allocated_milli {
        if shares_to_weight(milli_to_shares(m)) == w {
            return Some(shares_to_milli(milli_to_shares(m)));
        }
    }
    let shares = (w.max(1) - 1) * 262_142 / 9999 + 2;
    Some(shares_to_milli(shares)).filter(|m| *m > 0)
}

fn amount(m: &Option<BTreeMap<String, Quantity>>, r: &str) -> Option<i128> {
    let q = quantity::parse(&m.as_ref()?.get(r)?.0).ok()?;
    Some(if r == "cpu" { q.milli() } else { q.value() })
}

fn milli_quantity(m: i128) -> Quantity {
    Quantity(if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    })
}

/// A container status's `resources` (`convertContainerStatusResources`): the limits the
/// cgroup has (CPU from its quota, memory from its limit) where the container has limits,
/// the CPU request from its shares and the memory request as allocated where it has
/// requests; `ephemeral-storage` as allocated. A value the cgroup does not have is the
/// allocated one.
pub fn actual(allocated: &ResourceRequirements, v: &CgroupValues) -> ResourceRequirements {
    let mut limits = BTreeMap::new();
    let alloc_limits = allocated.limits.as_ref().filter(|m| !m.is_empty());
    if let Some(al) = alloc_limits {
        let cpu = match (v.cpu_quota, v.cpu_period) {
            (Some(q), Some(p)) if q > 0 && p > 0 => {
                Some(milli_quantity(i128::from(q) * 1000 / i128::from(p)))
            }
            _ => al.get("cpu").cloned(),
        };
        let memory = match v.memory_limit {
            Some(m) if m > 0 => Some(Quantity(m.to_string())),
            _ => al.get("memory").cloned(),
        };
        let storage = al.get("ephemeral-storage").cloned();
        for (k, q) in [
            ("cpu", cpu),
            ("memory", memory),
            ("ephemeral-storage", storage),
        ] {
            if let Some(q) = q {
                limits.insert(k.to_string(), q);
            }
        }
    }
    let mut requests = BTreeMap::new();
    if let Some(ar) = allocated.requests.as_ref().filter(|m| !m.is_empty()) {
        let alloc_cpu = amount(&allocated.requests, "cpu");
        let cpu = cpu_request_of(v, alloc_cpu)
            .map(milli_quantity)
            .or_else(|| ar.get("cpu").cloned());
        for (k, q) in [
            ("cpu", cpu),
            ("memory", ar.get("memory").cloned()),
            ("ephemeral-storage", ar.get("ephemeral-storage").cloned()),
        ] {
            if let Some(q) = q {
                requests.insert(k.to_string(), q);
            }
        }
    }
    ResourceRequirements {
        limits: (!limits.is_empty()).then_some(limits),
        requests: (!requests.is_empty()).then_some(requests),
        claims: None,
    }
}

/// `allocatedResourcesMatchStatus` for one running container: the CPU request (as the
/// shares it makes), the CPU limit (as the quota it makes) and the memory limit it was
/// allocated are what its cgroup has. Only what the allocation sets is compared.
pub fn matches(allocated: &ResourceRequirements, actual: &ResourceRequirements) -> bool {
    let quota = |m: i128| (m * 100).max(1000);
    let same = |want: Option<i128>, have: Option<i128>, f: &dyn Fn(i128) -> i128| match want {
        None => true,
        Some(w) => have.map_or(w == 0, |h| f(w) == f(h)),
    };
    same(
        amount(&allocated.requests, "cpu"),
        amount(&actual.requests, "cpu"),
        &|m| i128::from(milli_to_shares(m)),
    ) && same(
        amount(&allocated.limits, "cpu"),
        amount(&actual.limits, "cpu"),
        &quota,
    ) && same(
        amount(&allocated.limits, "memory"),
        amount(&actual.limits, "memory"),
        &|m| m,
    )
}

/// The resources of each container of `spec` as kubelet's events summarise them
/// (`makeResourceSummaryFromSpec`): `{"initContainers":[…],"containers":[…],
/// "generation":N,"error":"…"}` in Go's field order, each map's keys sorted.
fn summary(spec: &PodSpec, generation: i64, error: &str) -> String {
    let list = |cs: &[Container]| {
        let items: Vec<String> = cs
            .iter()
            .map(|c| {
                let r = c.resources.clone().unwrap_or_default();
                let map = |m: &Option<BTreeMap<String, Quantity>>| {
                    m.as_ref()
                        .filter(|m| !m.is_empty())
                        .map(|m| serde_json::to_string(m).unwrap_or_else(|_| "{}".into()))
                };
                let mut parts = Vec::new();
                if let Some(l) = map(&r.limits) {
                    parts.push(format!("\"limits\":{l}"));
                }
                if let Some(q) = map(&r.requests) {
                    parts.push(format!("\"requests\":{q}"));
                }
                format!(
                    "{{\"name\":{},\"resources\":{{{}}}}}",
                    serde_json::Value::from(c.name.as_str()),
                    parts.join(",")
                )
            })
            .collect();
        format!("[{}]", items.join(","))
    };
    let mut out = String::from("{");
    if let Some(inits) = spec.init_containers.as_deref().filter(|v| !v.is_empty()) {
        out.push_str(&format!("\"initContainers\":{},", list(inits)));
    }
    if !spec.containers.is_empty() {
        out.push_str(&format!("\"containers\":{},", list(&spec.containers)));
    }
    out.push_str(&format!("\"generation\":{generation}"));
    if !error.is_empty() {
        out.push_str(&format!(",\"error\":{}", serde_json::Value::from(error)));
    }
    out.push('}');
    out
}

fn event(type_: EventType, reason: EventReason, prefix: &str, text: String) -> EventSpec {
    EventSpec {
        type_,
        reason,
        message: format!("{prefix}: {text}"),
        container: None,
    }
}

/// `ResizeStarted`: the allocation took the new size (`PodResizeStartedMsg`).
pub fn started(spec: &PodSpec, generation: i64) -> EventSpec {
    let s = summary(spec, generation, "");
    event(
        EventType::Normal,
        EventReason::ResizeStarted,
        "Pod resize started",
        s,
    )
}

/// `ResizeCompleted`: the containers run with it (`PodResizeCompletedMsg`).
pub fn completed(spec: &PodSpec, generation: i64) -> EventSpec {
    let s = summary(spec, generation, "");
    event(
        EventType::Normal,
        EventReason::ResizeCompleted,
        "Pod resize completed",
        s,
    )
}

/// `ResizeError`: applying it failed (`PodResizeErrorMsg`).
pub fn error(spec: &PodSpec, generation: i64, message: &str) -> EventSpec {
    let s = summary(spec, generation, message);
    event(
        EventType::Warning,
        EventReason::ResizeError,
        "Pod resize error",
        s,
    )
}

/// `ResizeInfeasible` or `ResizeDeferred` (`PodResizePendingMsg`), of the desired spec.
pub fn pending(spec: &PodSpec, generation: i64, why: Pending, message: &str) -> EventSpec {
    let s = summary(spec, generation, message);
    event(
        EventType::Warning,
        why.event_reason(),
        &format!("Pod resize {}", why.as_str()),
        s,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn rr(yaml: &str) -> ResourceRequirements {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn cm(cpu: i128, memory: i128) -> CpuMemory {
        CpuMemory { cpu, memory }
    }

    const ONE: &str = "containers:\n- name: c\n  image: busybox\n  resources: {requests: {cpu: 500m, memory: 100Mi}, limits: {cpu: '1', memory: 200Mi}}\n";

    /// The cases of kubelet's `TestHandlePodResourcesResize` on a node of 4 CPUs and 4 GiB
    /// with another pod holding 1.5 CPUs and 1.5 GiB, scaled to one pod's requests.
    #[test]
    fn infeasible_past_the_node_deferred_past_what_the_others_leave() {
        let node = cm(4000, 4 << 30);
        let s = spec(ONE);
        assert_eq!(admit(&s, node, cm(0, 0)), Ok(()));
        assert_eq!(admit(&s, node, cm(3500, 0)), Ok(()), "exactly what is left");
        assert_eq!(
            admit(&s, node, cm(3600, 0)),
            Err((
                Pending::Deferred,
                "Node didn't have enough resource: cpu, requested: 500, used: 3600, capacity: 4000"
                    .into()
            ))
        );
        assert_eq!(
            admit(&s, node, cm(0, 4 << 30)),
            Err((
                Pending::Deferred,
                format!(
                    "Node didn't have enough resource: memory, requested: {}, used: {}, capacity: {}",
                    100 << 20,
                    4i128 << 30,
                    4i128 << 30
                )
            ))
        );
        let big = spec("containers:\n- name: c\n  image: busybox\n  resources: {requests: {cpu: '5', memory: 100Mi}}\n");
        assert_eq!(
            admit(&big, node, cm(3600, 0)),
            Err((
                Pending::Infeasible,
                "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000".into()
            )),
            "infeasible wins over deferred"
        );
        let huge = spec("containers:\n- name: c\n  image: busybox\n  resources: {requests: {cpu: '5', memory: 5Gi}}\n");
        assert_eq!(
            admit(&huge, node, cm(0, 0)).unwrap_err().1,
            format!(
                "Node didn't have enough capacity: memory, requested: {}, capacity: {}",
                5i128 << 30,
                4i128 << 30
            ),
            "memory is named before cpu"
        );
    }

    #[test]
    fn another_pod_holds_its_allocated_requests_until_it_ends() {
        let mut other: Pod = serde_yaml_ng::from_str(&format!(
            "metadata: {{name: o}}\nspec:\n  {}\nstatus:\n  phase: Running\n  containerStatuses:\n  - {{name: c, image: busybox, imageID: '', ready: true, restartCount: 0, allocatedResources: {{cpu: 300m, memory: 50Mi}}}}\n",
            ONE.replace('\n', "\n  ")
        ))
        .unwrap();
        let held = |o: &Pod| cpu_memory(&node_usage(std::slice::from_ref(o)));
        assert_eq!(held(&other), cm(300, 50 << 20), "allocated, not desired");
        assert_eq!(node_usage(&[other.clone(), other.clone()])["pods"], 2);
        other.status.as_mut().unwrap().container_statuses = None;
        assert_eq!(held(&other), cm(500, 100 << 20), "the spec's");
        other.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert_eq!(held(&other), cm(0, 0));
        assert!(
            node_usage(&[other]).is_empty(),
            "an ended pod is not counted"
        );
    }

    #[test]
    fn retries_follow_the_allocation_managers_ticker() {
        assert_eq!(next_retry(0), 30_000);
        assert_eq!(next_retry(29_999), 30_000);
        assert_eq!(next_retry(30_000), 210_000);
        assert_eq!(next_retry(209_999), 210_000);
        assert_eq!(next_retry(210_000), 390_000);
    }

    #[test]
    fn status_resources_are_read_back_from_the_cgroup() {
        let alloc = rr("{requests: {cpu: 250m, memory: 64Mi, ephemeral-storage: 1Gi}, limits: {cpu: 500m, memory: 128Mi}}");
        // cgroup v1, as set.
        let v1 = CgroupValues {
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            cpu_shares: Some(256),
            memory_limit: Some(128 << 20),
            ..Default::default()
        };
        let a = actual(&alloc, &v1);
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            serde_json::json!({"limits": {"cpu": "500m", "memory": (128u64 << 20).to_string()}, "requests": {"cpu": "250m", "ephemeral-storage": "1Gi", "memory": "64Mi"}})
        );
        assert!(matches(&alloc, &a));
        // cgroup v2: runc's weight of 256 shares stands for the request it came from.
        let v2 = CgroupValues {
            cpu_shares: None,
            cpu_weight: Some(shares_to_weight(256)),
            ..v1
        };
        assert_eq!(actual(&alloc, &v2), a);
        // A cgroup not yet resized shows its old values, and the resize is in progress.
        let old = CgroupValues {
            cpu_quota: Some(20_000),
            cpu_shares: Some(102),
            ..v1
        };
        let b = actual(&alloc, &old);
        assert_eq!(b.limits.as_ref().unwrap()["cpu"].0, "200m");
        assert_eq!(b.requests.as_ref().unwrap()["cpu"].0, "100m");
        assert!(!matches(&alloc, &b));
        // Unlimited where the cgroup says so: the allocated limit is shown (the runtime
        // reports none), and a CPU limit of a whole core reads as "1".
        let none = CgroupValues::default();
        let c = actual(&rr("{limits: {cpu: '1'}}"), &none);
        assert_eq!(c.limits.unwrap()["cpu"].0, "1");
        assert!(c.requests.is_none());
    }

    #[test]
    fn matching_is_in_the_cgroups_units() {
        // 1m of CPU makes the kernel's minimums: 2 shares, 1 ms of quota.
        let alloc = rr("{requests: {cpu: 1m}, limits: {cpu: 1m}}");
        let v = CgroupValues {
            cpu_quota: Some(1000),
            cpu_period: Some(100_000),
            cpu_shares: Some(2),
            ..Default::default()
        };
        let a = actual(&alloc, &v);
        assert_eq!(a.limits.as_ref().unwrap()["cpu"].0, "10m");
        assert_eq!(a.requests.as_ref().unwrap()["cpu"].0, "2m");
        assert!(matches(&alloc, &a));
    }

    #[test]
    fn events_summarise_the_resources_as_kubelet_does() {
        let s = spec(ONE);
        assert_eq!(
            started(&s, 2).message,
            r#"Pod resize started: {"containers":[{"name":"c","resources":{"limits":{"cpu":"1","memory":"200Mi"},"requests":{"cpu":"500m","memory":"100Mi"}}}],"generation":2}"#
        );
        let p = pending(&s, 3, Pending::Deferred, "no room");
        assert_eq!(p.reason, EventReason::ResizeDeferred);
        assert_eq!(p.type_, EventType::Warning);
        assert!(
            p.message.starts_with("Pod resize Deferred: {")
                && p.message.ends_with(r#""generation":3,"error":"no room"}"#),
            "{}",
            p.message
        );
        assert_eq!(error(&s, 2, "boom").reason, EventReason::ResizeError);
        assert!(completed(&s, 2)
            .message
            .starts_with("Pod resize completed: "));
    }
}
