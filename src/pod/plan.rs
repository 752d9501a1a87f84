//! What the decisions need to know of the spec, extracted once at admission.

use super::probes::{ProbeKind, Timing};
use super::reason::QosClass;

/// `spec.restartPolicy`, and the effective per-container policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

/// Where a container sits in the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A plain init container: runs to completion, in order.
    Init,
    /// An init container with `restartPolicy: Always` (KEP-753).
    Sidecar,
    /// An entry of `spec.containers`.
    App,
    /// Added to the running pod (`POST /v1/ephemeralcontainers`): started once, never
    /// restarted, no part of the pod's phase or readiness.
    Ephemeral,
}

impl Kind {
    /// Plain init containers run to completion and are never probed (kubelet starts no
    /// prober worker for them); ephemeral containers have no probes by API validation.
    pub fn has_probes(self) -> bool {
        matches!(self, Kind::Sidecar | Kind::App)
    }

    /// The field path of events about container `name` (`spec.containers{web}`).
    pub fn field_path(self, name: &str) -> String {
        match self {
            Kind::App => format!("spec.containers{{{name}}}"),
            Kind::Init | Kind::Sidecar => format!("spec.initContainers{{{name}}}"),
            Kind::Ephemeral => format!("spec.ephemeralContainers{{{name}}}"),
        }
    }
}

/// What a matching restart rule does (`restartPolicyRules[].action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleAction {
    /// Restart this container (KEP-5307).
    Restart,
    /// Restart every container of the pod in place, from the first init container
    /// (KEP-5532).
    RestartAllContainers,
}

/// One entry of `restartPolicyRules`: `action` when the exit code is `In` (or `NotIn`)
/// `values`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartRule {
    pub action: RuleAction,
    /// true for `In`, false for `NotIn`.
    pub in_values: bool,
    pub values: Vec<i32>,
}

#[derive(Clone, Debug)]
pub struct ContainerPlan {
    pub name: String,
    pub kind: Kind,
    /// The container's own `restartPolicy` (an app or plain init container's; a sidecar's
    /// is its kind).
    pub restart_policy: Option<RestartPolicy>,
    /// `restartPolicyRules`, in order.
    pub restart_rules: Vec<RestartRule>,
    pub has_startup_probe: bool,
    pub has_readiness_probe: bool,
    pub has_liveness_probe: bool,
    pub has_post_start: bool,
    pub has_pre_stop: bool,
    /// The probes that run, in the order kubelet's workers start (none for a plain init
    /// container).
    pub probes: Vec<(ProbeKind, Timing)>,
}

#[derive(Clone, Debug)]
pub struct PodPlan {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub restart_policy: RestartPolicy,
    /// Init containers (plain and sidecars) in spec order, then app containers in spec
    /// order. Indices into this vector name containers everywhere in `pod`.
    pub containers: Vec<ContainerPlan>,
    /// `terminationGracePeriodSeconds` (defaulted to 30).
    pub grace_seconds: u64,
    pub active_deadline_seconds: Option<u64>,
    /// CrashLoopBackOff cap (`--max-restart-backoff`, default 300 s), in ms.
    pub max_backoff_ms: u64,
    /// `spec.readinessGates[].conditionType`.
    pub readiness_gates: Vec<String>,
    pub qos_class: QosClass,
    /// `metadata.generation` of the spec this plan was made from (1 at admission; each
    /// accepted change of the spec adds one), which the status reports as observed.
    pub generation: i64,
}

impl RestartPolicy {
    pub fn parse(s: Option<&str>) -> RestartPolicy {
        match s {
            Some("Never") => RestartPolicy::Never,
            Some("OnFailure") => RestartPolicy::OnFailure,
            _ => RestartPolicy::Always,
        }
    }
}

impl PodPlan {
    /// A pod `p` in `default` with kubelet's defaults (30 s grace, 300 s back-off cap, no
    /// deadline or readiness gates, BestEffort): the plan the rules' tests start from.
    pub fn bare(restart_policy: RestartPolicy, containers: Vec<ContainerPlan>) -> PodPlan {
        PodPlan {
            name: "p".into(),
            namespace: "default".into(),
            uid: "u".into(),
            restart_policy,
            containers,
            grace_seconds: 30,
            active_deadline_seconds: None,
            max_backoff_ms: 300_000,
            readiness_gates: vec![],
            qos_class: QosClass::BestEffort,
            generation: 1,
        }
    }

    /// Extract the plan from an admitted (defaulted, validated) Pod.
    pub fn from_pod(pod: &k8s_openapi::api::core::v1::Pod, max_backoff_ms: u64) -> PodPlan {
        let spec = pod.spec.clone().unwrap_or_default();
        let meta = &pod.metadata;
        let mut containers = Vec::new();
        for c in spec.init_containers.iter().flatten() {
            let kind = if c.restart_policy.as_deref() == Some("Always") {
                Kind::Sidecar
            } else {
                Kind::Init
            };
            containers.push(ContainerPlan::of(c, kind));
        }
        for c in &spec.containers {
            containers.push(ContainerPlan::of(c, Kind::App));
        }
        PodPlan {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            uid: meta.uid.clone().unwrap_or_default(),
            restart_policy: RestartPolicy::parse(spec.restart_policy.as_deref()),
            containers,
            grace_seconds: spec.termination_grace_period_seconds.unwrap_or(30).max(0) as u64,
            active_deadline_seconds: spec.active_deadline_seconds.map(|s| s.max(0) as u64),
            max_backoff_ms,
            readiness_gates: spec
                .readiness_gates
                .iter()
                .flatten()
                .map(|g| g.condition_type.clone())
                .collect(),
            qos_class: qos_class(&spec),
            generation: meta.generation.unwrap_or(1),
        }
    }

    /// Indices of the app containers.
    pub fn apps(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.containers.len()).filter(|&i| self.containers[i].kind == Kind::App)
    }
}

impl PodPlan {
    /// [`PodPlan::bare`] under `restartPolicy: Always`, with bare containers of these
    /// names and kinds.
    pub fn bare_of(kinds: &[(&str, Kind)]) -> PodPlan {
        PodPlan::bare(
            RestartPolicy::Always,
            kinds
                .iter()
                .map(|(n, k)| ContainerPlan::bare(n, *k))
                .collect(),
        )
    }
}

impl ContainerPlan {
    /// A container with no probes and no hooks.
    pub fn bare(name: &str, kind: Kind) -> ContainerPlan {
        ContainerPlan {
            name: name.to_string(),
            kind,
            restart_policy: None,
            restart_rules: Vec::new(),
            has_startup_probe: false,
            has_readiness_probe: false,
            has_liveness_probe: false,
            has_post_start: false,
            has_pre_stop: false,
            probes: Vec::new(),
        }
    }

    pub fn of(c: &k8s_openapi::api::core::v1::Container, kind: Kind) -> ContainerPlan {
        let lc = c.lifecycle.as_ref();
        let probes = if kind.has_probes() {
            [
                (ProbeKind::Startup, &c.startup_probe),
                (ProbeKind::Liveness, &c.liveness_probe),
                (ProbeKind::Readiness, &c.readiness_probe),
            ]
            .into_iter()
            .filter_map(|(k, p)| p.as_ref().map(|p| (k, Timing::from_probe(p))))
            .collect()
        } else {
            Vec::new()
        };
        let restart_policy = match kind {
            Kind::App | Kind::Init => c
                .restart_policy
                .as_deref()
                .map(|p| RestartPolicy::parse(Some(p))),
            Kind::Sidecar | Kind::Ephemeral => None,
        };
        let restart_rules = c
            .restart_policy_rules
            .iter()
            .flatten()
            .filter_map(|r| {
                let action = match r.action.as_str() {
                    "Restart" => RuleAction::Restart,
                    "RestartAllContainers" => RuleAction::RestartAllContainers,
                    _ => return None,
                };
                let codes = r.exit_codes.as_ref()?;
                Some(RestartRule {
                    action,
                    in_values: codes.operator == "In",
                    values: codes.values.clone().unwrap_or_default(),
                })
            })
            .collect();
        ContainerPlan {
            name: c.name.clone(),
            kind,
            restart_policy,
            restart_rules,
            has_startup_probe: c.startup_probe.is_some(),
            has_readiness_probe: c.readiness_probe.is_some(),
            has_liveness_probe: c.liveness_probe.is_some(),
            has_post_start: lc.is_some_and(|l| l.post_start.is_some()),
            has_pre_stop: lc.is_some_and(|l| l.pre_stop.is_some()),
            probes,
        }
    }

    /// The field path of events about this container.
    pub fn field_path(&self) -> String {
        self.kind.field_path(&self.name)
    }
}

/// Kubernetes' `GetPodQOS`: over every container (init included), CPU and memory only;
/// from the pod-level resources alone when the pod has them.
pub fn qos_class(spec: &k8s_openapi::api::core::v1::PodSpec) -> QosClass {
    use crate::quantity;
    if super::resources::pod_level_set(spec) {
        return pod_level_qos(spec.resources.as_ref().expect("pod-level resources set"));
    }
    let mut any_request = false;
    let mut any_limit = false;
    let mut guaranteed = true;
    let all = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for c in all {
        let res = c.resources.clone().unwrap_or_default();
        let get = |m: &Option<
            std::collections::BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >,
        >,
                   k: &str| {
            m.as_ref()
                .and_then(|m| m.get(k))
                .and_then(|q| quantity::parse(&q.0).ok())
                .filter(|q| !q.is_zero())
        };
        for r in ["cpu", "memory"] {
            let req = get(&res.requests, r);
            let lim = get(&res.limits, r);
            any_request |= req.is_some();
            any_limit |= lim.is_some();
            match (req, lim) {
                (_, None) => guaranteed = false,
                (Some(q), Some(l)) if q != l => guaranteed = false,
                _ => {}
            }
        }
    }
    if !any_request && !any_limit {
        QosClass::BestEffort
    } else if guaranteed {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

/// `GetPodQOS` over pod-level resources: Guaranteed when both CPU and memory have a limit
/// and every non-zero request equals its limit.
fn pod_level_qos(r: &k8s_openapi::api::core::v1::ResourceRequirements) -> QosClass {
    let nonzero = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        let mut out = std::collections::BTreeMap::new();
        for (k, q) in m.iter().flatten() {
            if k != "cpu" && k != "memory" {
                continue;
            }
            if let Some(v) = crate::quantity::parse(&q.0).ok().filter(|v| !v.is_zero()) {
                out.insert(k.clone(), v);
            }
        }
        out
    };
    let (req, lim) = (nonzero(&r.requests), nonzero(&r.limits));
    if req.is_empty() && lim.is_empty() {
        return QosClass::BestEffort;
    }
    let all_limited = r
        .limits
        .as_ref()
        .is_some_and(|l| l.contains_key("cpu") && l.contains_key("memory"));
    let equal = req.iter().all(|(k, v)| lim.get(k) == Some(v));
    if all_limited && equal && req.len() == lim.len() {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}
