//! kubelet's admission of a pod (docs/semantics.md §Admission by kubelet): the node's
//! description in, the first failing admit handler's reason and message out. The order is
//! kubelet's: `predicateAdmitHandler.Admit` (the OS label and field, then the scheduler's
//! general predicates: resources fit, node affinity/selector, node name), then the AppArmor
//! handler. Taints are not checked: kubelet skips them for static pods (`generalFilter`).

use k8s_openapi::api::core::v1::{
    AppArmorProfile, Container, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
};
use std::collections::BTreeMap;

use crate::quantity;

/// The OS kubelet compares with (`runtime.GOOS`).
pub const OS: &str = "linux";

/// The pod annotation prefix of a container's AppArmor profile (deprecated form of the field).
pub const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// What admission needs of the node.
#[derive(Clone, Debug, Default)]
pub struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Resource name → allocatable amount: `cpu` in millicores, `memory`,
    /// `ephemeral-storage` and `hugepages-*` in bytes, the others (`pods`, extended
    /// resources) as counts.
    pub allocatable: BTreeMap<String, i128>,
    /// What the node's other pods hold of each resource, `pods` among them
    /// (`allocation::node_usage`).
    pub used: BTreeMap<String, i128>,
    /// The kernel enforces AppArmor (`/sys/module/apparmor/parameters/enabled` is `Y`).
    pub apparmor: bool,
}

/// Why kubelet rejects the pod, one variant per admit handler's failure: its
/// [`reason`](Rejection::reason) (the status's and the Warning event's) and its
/// [`message`](Rejection::message) (the event's; the status's is
/// [`status_message`](Rejection::status_message)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The pod has no spec.
    NoSpec,
    /// Its `kubernetes.io/os` label names another OS than the node's.
    OsLabel,
    /// Its `spec.os.name` names another OS than the node's.
    OsField,
    /// The node has less of `resource` left than the pod requests, beside what its other
    /// pods hold (`used`).
    OutOf {
        resource: String,
        requested: i128,
        used: i128,
        capacity: i128,
    },
    /// A scheduler predicate failed: the node does not match the pod's node affinity or
    /// selector.
    NodeAffinity,
    /// The pod names another node.
    NodeName,
    /// The pod asks for an AppArmor profile and the host does not enforce AppArmor.
    AppArmorDisabled,
    /// The pod asks for an AppArmor profile, which podinit does not apply.
    AppArmorProfile,
}

impl Rejection {
    /// kubelet's reason.
    pub fn reason(&self) -> String {
        match self {
            Rejection::NoSpec => "InvalidPod".into(),
            Rejection::OsLabel => "PodOSSelectorNodeLabelDoesNotMatch".into(),
            Rejection::OsField => "PodOSNotSupported".into(),
            Rejection::OutOf { resource, .. } => format!("OutOf{resource}"),
            Rejection::NodeAffinity => "NodeAffinity".into(),
            Rejection::NodeName => "NodeName".into(),
            Rejection::AppArmorDisabled | Rejection::AppArmorProfile => "AppArmor".into(),
        }
    }

    /// kubelet's message: a `PredicateFailureError`'s, an `InsufficientResourceError`'s,
    /// the OS and AppArmor handlers' own.
    pub fn message(&self) -> String {
        let predicate = |desc: &str| format!("Predicate {} failed: {desc}", self.reason());
        match self {
            Rejection::NoSpec => "no spec".into(),
            Rejection::OsLabel => {
                "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
                    .into()
            }
            Rejection::OsField => "Failed to admit pod as the OS field doesn't match node OS".into(),
            Rejection::OutOf {
                resource,
                requested,
                used,
                capacity,
            } => format!(
                "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
            ),
            Rejection::NodeAffinity => predicate("node(s) didn't match Pod's node affinity/selector"),
            Rejection::NodeName => predicate("node(s) didn't match the requested node name"),
            Rejection::AppArmorDisabled => {
                "Cannot enforce AppArmor: AppArmor is not enabled on the host".into()
            }
            Rejection::AppArmorProfile => {
                "Cannot enforce AppArmor: podinit does not apply AppArmor profiles".into()
            }
        }
    }

    /// `status.message`, as `Kubelet.rejectPod` writes it.
    pub fn status_message(&self) -> String {
        format!("Pod was rejected: {}", self.message())
    }
}

/// Admit `pod` on `node` as kubelet does, or say why not.
pub fn check_on_node(pod: &Pod, node: &Node) -> Result<(), Rejection> {
    let spec = pod.spec.as_ref().ok_or(Rejection::NoSpec)?;
    let os_label = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kubernetes.io/os"));
    // rejectPodAdmissionBasedOnOSSelector: the node's OS label is always kubelet's own OS.
    if os_label.is_some_and(|v| v != OS) {
        return Err(Rejection::OsLabel);
    }
    if spec.os.as_ref().is_some_and(|o| o.name != OS) {
        return Err(Rejection::OsField);
    }
    if let Some(r) = fits(spec, node).into_iter().next() {
        return Err(r);
    }
    if !matches_node(spec, node) {
        return Err(Rejection::NodeAffinity);
    }
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != node.name)
    {
        return Err(Rejection::NodeName);
    }
    apparmor(pod, spec, node)
}

/// An `InsufficientResourceError`.
fn insufficient(name: &str, requested: i128, used: i128, capacity: i128) -> Rejection {
    Rejection::OutOf {
        resource: name.to_string(),
        requested,
        used,
        capacity,
    }
}

/// `noderesources.Fits` beside the node's other pods (`node.used`), in its order: pods,
/// cpu, memory, ephemeral-storage, then the scalar resources (hugepages, extended) by name.
pub fn fits(spec: &PodSpec, node: &Node) -> Vec<Rejection> {
    let alloc = |r: &str| node.allocatable.get(r).copied().unwrap_or(0);
    let used = |r: &str| node.used.get(r).copied().unwrap_or(0);
    let mut out = Vec::new();
    if node.allocatable.contains_key("pods") && used("pods") + 1 > alloc("pods") {
        out.push(insufficient("pods", 1, used("pods"), alloc("pods")));
    }
    let req = pod_requests(spec);
    for (name, &want) in ["cpu", "memory", "ephemeral-storage"]
        .iter()
        .filter_map(|r| req.get_key_value(*r))
        .chain(req.iter().filter(|(k, _)| scalar(k)))
    {
        if want > 0 && want > alloc(name) - used(name) {
            out.push(insufficient(name, want, used(name), alloc(name)));
        }
    }
    out
}

/// A scalar resource of the scheduler: hugepages, extended, or `kubernetes.io/`-prefixed.
fn scalar(name: &str) -> bool {
    name.starts_with("hugepages-") || name.contains('/')
}

/// The requests of a container, defaulted as the API server does (a request is its limit
/// when only the limit is set).
fn requests(c: &Container) -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    let Some(r) = c.resources.as_ref() else {
        return out;
    };
    for (k, q) in r.limits.iter().flatten().chain(r.requests.iter().flatten()) {
        if let Some(v) = amount(k, &q.0) {
            out.insert(k.clone(), v);
        }
    }
    out
}

/// A quantity as the scheduler counts it: CPU in millicores, everything else rounded up.
fn amount(name: &str, q: &str) -> Option<i128> {
    let q = quantity::parse(q).ok()?;
    Some(if name == "cpu" { q.milli() } else { q.value() })
}

fn add(to: &mut BTreeMap<String, i128>, from: &BTreeMap<String, i128>) {
    for (k, v) in from {
        *to.entry(k.clone()).or_insert(0) += v;
    }
}

fn max(to: &mut BTreeMap<String, i128>, from: &BTreeMap<String, i128>) {
    for (k, v) in from {
        let e = to.entry(k.clone()).or_insert(0);
        *e = (*e).max(*v);
    }
}

/// `resourcehelper.PodRequests`: the app containers' and sidecars' sum, or the largest
/// init container's with the sidecars started before it, whichever is larger per resource;
/// pod-level requests replace the containers' for cpu and memory; plus the pod's overhead.
pub fn pod_requests(spec: &PodSpec) -> BTreeMap<String, i128> {
    let mut reqs = BTreeMap::new();
    for c in &spec.containers {
        add(&mut reqs, &requests(c));
    }
    let mut sidecars = BTreeMap::new();
    let mut inits = BTreeMap::new();
    for c in spec.init_containers.iter().flatten() {
        let r = requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut reqs, &r);
            add(&mut sidecars, &r);
            max(&mut inits, &sidecars);
        } else {
            let mut tmp = r;
            add(&mut tmp, &sidecars);
            max(&mut inits, &tmp);
        }
    }
    max(&mut reqs, &inits);
    if let Some(r) = spec.resources.as_ref() {
        for name in ["cpu", "memory"] {
            let q = r.requests.as_ref().and_then(|m| m.get(name));
            let q = q.or_else(|| r.limits.as_ref().and_then(|m| m.get(name)));
            if let Some(v) = q.and_then(|q| amount(name, &q.0)) {
                reqs.insert(name.to_string(), v);
            }
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        if let Some(v) = amount(k, &q.0) {
            *reqs.entry(k.clone()).or_insert(0) += v;
        }
    }
    reqs.retain(|_, v| *v != 0);
    reqs
}

/// `GetRequiredNodeAffinity(pod).Match(node)`: every `nodeSelector` label, and one of the
/// required node affinity's terms.
pub fn matches_node(spec: &PodSpec, node: &Node) -> bool {
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    selector_ok
        && required.is_none_or(|s| s.node_selector_terms.iter().any(|t| term_matches(t, node)))
}

/// A node selector term: all its expressions and fields; an empty term matches nothing.
fn term_matches(t: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement(r, node.labels.get(&r.key).map(String::as_str)))
        // The only field a node selector can name is metadata.name.
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement(r, Some(node.name.as_str())))
}

/// One requirement against the label's value (`None`: the node has no such label).
fn requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = || -> Option<(i64, i64)> {
        let [want] = values else { return None };
        Some((value?.parse().ok()?, want.parse().ok()?))
    };
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| values.iter().all(|w| w != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => number().is_some_and(|(v, w)| v > w),
        "Lt" => number().is_some_and(|(v, w)| v < w),
        _ => false,
    }
}

/// The AppArmor profile of container `c`, as kubelet's `apparmor.GetProfile` finds it: the
/// container's field, else its annotation (a static pod's are never synced to fields), else
/// the pod's field.
pub fn apparmor_profile(pod: &Pod, c: &Container) -> Option<AppArmorProfile> {
    if let Some(p) = c
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.clone())
    {
        return Some(p);
    }
    let key = format!("{APPARMOR_ANNOTATION_PREFIX}{}", c.name);
    if let Some(v) = pod.metadata.annotations.as_ref().and_then(|a| a.get(&key)) {
        if let Some(p) = apparmor_from_annotation(v) {
            return Some(p);
        }
    }
    pod.spec
        .as_ref()?
        .security_context
        .as_ref()?
        .app_armor_profile
        .clone()
}

/// The profile an annotation value names (`runtime/default`, `unconfined`,
/// `localhost/<name>`), as kubelet reads it; any other value names none.
pub fn apparmor_from_annotation(v: &str) -> Option<AppArmorProfile> {
    let (type_, localhost) = match v {
        "runtime/default" => ("RuntimeDefault", None),
        "unconfined" => ("Unconfined", None),
        _ => ("Localhost", Some(v.strip_prefix("localhost/")?.to_string())),
    };
    Some(AppArmorProfile {
        type_: type_.into(),
        localhost_profile: localhost,
    })
}

/// The AppArmor admit handler (`apparmor.validator.Validate`): a pod that asks for a
/// confining profile needs a host that enforces AppArmor.
fn apparmor(pod: &Pod, spec: &PodSpec, node: &Node) -> Result<(), Rejection> {
    let pod_field = spec
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref());
    let confined = |p: &AppArmorProfile| p.type_ != "Unconfined";
    // isRequired: a field or an AppArmor annotation that is not unconfined.
    let annotated = pod
        .metadata
        .annotations
        .iter()
        .flatten()
        .any(|(k, v)| k.starts_with(APPARMOR_ANNOTATION_PREFIX) && v != "unconfined");
    let required =
        pod_field.is_some_and(confined) || containers_fields(spec).any(confined) || annotated;
    if !required {
        return Ok(());
    }
    if !node.apparmor {
        return Err(Rejection::AppArmorDisabled);
    }
    // podinit loads and applies no AppArmor profile: refused as clearly as a host without
    // AppArmor, rather than run unconfined.
    Err(Rejection::AppArmorProfile)
}

fn containers_fields(spec: &PodSpec) -> impl Iterator<Item = &AppArmorProfile> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .filter_map(|c| c.security_context.as_ref()?.app_armor_profile.as_ref())
}

#[cfg(test)]
mod tests;
