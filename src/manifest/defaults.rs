//! Kubernetes' defaults (`SetDefaults_Pod`, `_PodSpec`, `_Container`, `_Probe`, …), so that
//! the effective pod reads as the API server would store it.

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, Probe, Secret};
use k8s_openapi::ByteString;

pub fn pod(pod: &mut Pod, new_uid: &dyn Fn() -> String) {
    let m = &mut pod.metadata;
    m.namespace.get_or_insert_with(|| "default".into());
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
}

pub(super) fn container(c: &mut Container) {
    c.termination_message_path
        .get_or_insert_with(|| "/dev/termination-log".into());
    c.termination_message_policy
        .get_or_insert_with(|| "File".into());
    if c.image_pull_policy.is_none() {
        let image = c.image.as_deref().unwrap_or("");
        let tag = image
            .rsplit_once(':')
            .map(|(_, t)| t)
            .filter(|t| !t.contains('/'));
        let latest = !image.contains('@') && tag.is_none_or(|t| t == "latest");
        c.image_pull_policy = Some(if latest { "Always" } else { "IfNotPresent" }.into());
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
