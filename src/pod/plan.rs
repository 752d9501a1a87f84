//! What the decisions need to know of the spec, extracted once at admission.

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
}

#[derive(Clone, Debug)]
pub struct ContainerPlan {
    pub name: String,
    pub kind: Kind,
    pub has_startup_probe: bool,
    pub has_readiness_probe: bool,
    pub has_liveness_probe: bool,
    pub has_post_start: bool,
    pub has_pre_stop: bool,
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
}
