//! Kubernetes' defaults (`SetDefaults_Pod`, `_PodSpec`, `_Container`, `_Probe`, …), so that
//! the effective pod reads as the API server would store it.

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, Probe, Secret};
use k8s_openapi::ByteString;

pub fn pod(pod: &mut Pod, new_uid: &dyn Fn() -> String) {
    let m = &mut pod.metadata;
    m.namespace.get_or_insert_with(|| "default".into());
    // The API server starts every pod at generation 1, whatever the manifest says
    // (KEP-5067).
    m.generation = Some(1);
    if m.uid.as_deref().unwrap_or("").is_empty() {
        m.uid = Some(new_uid());
    }
    super::validate::seccomp_annotations_to_fields(pod);
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".into());
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    spec.enable_service_links.get_or_insert(true);
    for c in spec.init_containers.iter_mut().flatten() {
        container(c);
    }
    for c in spec.containers.iter_mut() {
        container(c);
    }
    // `SetDefaults_ImageVolumeSource`: the pull policy a container of the image would get.
    let images = spec
        .volumes
        .iter_mut()
        .flatten()
        .filter_map(|v| v.image.as_mut());
    for iv in images {
        if iv.pull_policy.is_none() {
            let reference = iv.reference.as_deref().unwrap_or_default();
            iv.pull_policy = Some(crate::pod::image_pull::default_policy(reference).into());
        }
    }
    pod_requests(spec);
}

/// An amount of resource `r` (CPU in millicores, bytes otherwise) as Kubernetes writes it:
/// `500m`, `2`, `64Mi`.
pub(super) fn canonical(r: &str, v: i128) -> String {
    if r == "cpu" {
        return if v % 1000 == 0 {
            (v / 1000).to_string()
        } else {
            format!("{v}m")
        };
    }
    let mut n = v;
    for suffix in ["", "Ki", "Mi", "Gi", "Ti", "Pi"] {
        if n == 0 || n % 1024 != 0 || suffix == "Pi" {
            return format!("{n}{suffix}");
        }
        n /= 1024;
    }
    unreachable!("the loop returns at Pi")
}

/// Kubernetes' `defaultPodRequests`: with pod-level limits, a pod-level request not given
/// is the containers' aggregate request for it, or else the pod-level limit.
fn pod_requests(spec: &mut k8s_openapi::api::core::v1::PodSpec) {
    use crate::pod::resources::{aggregate_requests, pod_level_resource};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let aggregate = aggregate_requests(spec);
    let Some(r) = spec.resources.as_mut() else {
        return;
    };
    let Some(limits) = r.limits.as_ref().filter(|l| !l.is_empty()) else {
        return;
    };
    let mut req = r.requests.clone().unwrap_or_default();
    for (k, v) in &aggregate {
        if pod_level_resource(k) && !req.contains_key(k) {
            req.insert(k.clone(), Quantity(canonical(k, *v)));
        }
    }
    for (k, v) in limits {
        if pod_level_resource(k) && !req.contains_key(k) {
            req.insert(k.clone(), v.clone());
        }
    }
    if !req.is_empty() {
        r.requests = Some(req);
    }
}

pub(super) fn container(c: &mut Container) {
    c.termination_message_path
        .get_or_insert_with(|| "/dev/termination-log".into());
    c.termination_message_policy
        .get_or_insert_with(|| "File".into());
    if c.image_pull_policy.is_none() {
        let image = c.image.as_deref().unwrap_or("");
        c.image_pull_policy = Some(crate::pod::image_pull::default_policy(image).into());
    }
    for p in c.ports.iter_mut().flatten() {
        p.protocol.get_or_insert_with(|| "TCP".into());
    }
    if let Some(r) = c.resources.as_mut() {
        // A limit without a request: the request is the limit.
        if let Some(limits) = &r.limits {
            let req = r.requests.get_or_insert_with(Default::default);
            for (k, v) in limits {
                req.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    for p in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        probe(p);
    }
}

fn probe(p: &mut Probe) {
    // As `SetDefaults_Probe`: zero means unset.
    for (v, d) in [
        (&mut p.timeout_seconds, 1),
        (&mut p.period_seconds, 10),
        (&mut p.success_threshold, 1),
        (&mut p.failure_threshold, 3),
    ] {
        if v.unwrap_or(0) == 0 {
            *v = Some(d);
        }
    }
    if let Some(h) = p.http_get.as_mut() {
        h.path.get_or_insert_with(|| "/".into());
        h.scheme.get_or_insert_with(|| "HTTP".into());
    }
}

/// `stringData` is merged into `data`, as the API server does.
pub fn secret(mut s: Secret) -> Secret {
    if let Some(sd) = s.string_data.take() {
        let data = s.data.get_or_insert_with(Default::default);
        for (k, v) in sd {
            data.insert(k, ByteString(v.into_bytes()));
        }
    }
    s
}
