//! Pod-level resources (`spec.resources`, KEP-2837), as Kubernetes' `validatePodResources`
//! and `validatePodResourceConsistency` check them: cpu, memory and hugepages only,
//! requests within limits, requests that cover the containers' aggregate, and no
//! container limit above the pod's.

use k8s_openapi::api::core::v1::PodSpec;

use super::{err, Error, R};
use crate::manifest::defaults::canonical;
use crate::pod::resources::{aggregate_requests, pod_level_resource};
use crate::quantity::{self, Quantity};

pub(super) fn pod(spec: &PodSpec) -> R {
    let Some(r) = &spec.resources else {
        return Ok(());
    };
    let p = "spec.resources";
    let parsed = |which: &str, k: &str, q: &str| -> Result<Quantity, Error> {
        let path = format!("{p}.{which}[{k}]");
        let standard = ["cpu", "memory", "ephemeral-storage"].contains(&k) || k.contains('/');
        if !pod_level_resource(k) {
            return Err(if standard {
                Error::new(
                    path,
                    format!("Unsupported value: {k:?}: supported values: \"cpu\", \"hugepages-\", \"memory\""),
                )
            } else {
                Error::new(
                    path,
                    format!(
                        "Invalid value: {k:?}: must be a standard resource type or fully qualified"
                    ),
                )
            });
        }
        let v = quantity::parse(q)
            .map_err(|e| Error::new(path.clone(), format!("Invalid value: {e}")))?;
        if v.milli() < 0 {
            return Err(Error::new(
                path,
                format!("Invalid value: {q:?}: must be greater than or equal to 0"),
            ));
        }
        Ok(v)
    };
    let mut limits = std::collections::BTreeMap::new();
    for (k, q) in r.limits.iter().flatten() {
        limits.insert(k.clone(), (parsed("limits", k, &q.0)?, q.0.clone()));
    }
    let mut cpu_or_memory = limits.keys().any(|k| k == "cpu" || k == "memory");
    let mut huge = limits.keys().any(|k| k.starts_with("hugepages-"));
    for (k, q) in r.requests.iter().flatten() {
        let v = parsed("requests", k, &q.0)?;
        cpu_or_memory |= k == "cpu" || k == "memory";
        huge |= k.starts_with("hugepages-");
        match limits.get(k) {
            // Hugepages cannot be overcommitted: a request is its limit.
            Some((l, ls)) if k.starts_with("hugepages-") && v != *l => {
                return err(
                    format!("{p}.requests"),
                    format!(
                        "Invalid value: {:?}: must be equal to {k} limit of {ls}",
                        q.0
                    ),
                );
            }
            Some((l, ls)) if v > *l => {
                return err(
                    format!("{p}.requests"),
                    format!(
                        "Invalid value: {:?}: must be less than or equal to {k} limit of {ls}",
                        q.0
                    ),
                );
            }
            None if k.starts_with("hugepages-") => {
                return err(
                    format!("{p}.limits"),
                    "Required value: Limit must be set for non overcommitable resources",
                );
            }
            _ => {}
        }
    }
    if huge && !cpu_or_memory {
        return err(p, "Forbidden: HugePages require cpu or memory");
    }
    for (k, aggregate) in aggregate_requests(spec) {
        let Some(q) = r.requests.as_ref().and_then(|m| m.get(&k)) else {
            continue;
        };
        if !pod_level_resource(&k) {
            continue;
        }
        let pod = parsed("requests", &k, &q.0)?;
        let pod = if k == "cpu" { pod.milli() } else { pod.value() };
        if aggregate > pod {
            return err(
                format!("{p}.requests[{k}]"),
                format!(
                    "Invalid value: {:?}: must be greater than or equal to aggregate container requests of {}",
                    q.0,
                    canonical(&k, aggregate)
                ),
            );
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (k, q) in c.resources.iter().flat_map(|r| r.limits.iter().flatten()) {
            let (Some((pl, ps)), Ok(cl)) = (limits.get(k), quantity::parse(&q.0)) else {
                continue;
            };
            if cl > *pl {
                return err(
                    format!("spec.containers[{i}].resources.limits[{k}]"),
                    format!(
                        "Invalid value: {:?}: must be less than or equal to pod limits of {ps}",
                        q.0
                    ),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::manifest::{from_documents, load, Error};

    fn admit_spec(spec: &str) -> Result<k8s_openapi::api::core::v1::Pod, Error> {
        let text = format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n{spec}");
        from_documents(load::documents(&text)?, &|| "uid-1".into()).map(|a| a.pod)
    }

    #[test]
    fn pod_requests_default_to_the_containers_aggregate_then_to_the_limits() {
        let p = admit_spec("  resources: {limits: {cpu: '1', memory: 200Mi}}\n  containers:\n  - {name: a, image: busybox, resources: {requests: {cpu: 200m}}}\n  - {name: b, image: busybox, resources: {requests: {cpu: 300m}}}\n").unwrap();
        let req = p.spec.unwrap().resources.unwrap().requests.unwrap();
        assert_eq!(req["cpu"].0, "500m", "the containers' aggregate");
        assert_eq!(req["memory"].0, "200Mi", "no container asks: the limit");
    }

    #[test]
    fn validation_follows_validate_pod_resources() {
        let c = "  containers:\n  - {name: a, image: busybox}\n";
        for (spec, want) in [
            (
                format!("  resources: {{limits: {{ephemeral-storage: 1Gi}}}}\n{c}"),
                "spec.resources.limits[ephemeral-storage]: Unsupported value: \"ephemeral-storage\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
            ),
            (
                format!("  resources: {{requests: {{example.com/dongle: '1'}}}}\n{c}"),
                "spec.resources.requests[example.com/dongle]: Unsupported value: \"example.com/dongle\": supported values: \"cpu\", \"hugepages-\", \"memory\"",
            ),
            (
                format!("  resources: {{limits: {{cpu: 500m}}, requests: {{cpu: '1'}}}}\n{c}"),
                "spec.resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m",
            ),
            (
                format!("  resources: {{limits: {{memory: -1Mi}}}}\n{c}"),
                "spec.resources.limits[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0",
            ),
            (
                format!("  resources: {{limits: {{hugepages-2Mi: 4Mi}}}}\n{c}"),
                "spec.resources: Forbidden: HugePages require cpu or memory",
            ),
            (
                "  resources: {requests: {cpu: 100m}}\n  containers:\n  - {name: a, image: busybox, resources: {requests: {cpu: 300m}}}\n".to_string(),
                "spec.resources.requests[cpu]: Invalid value: \"100m\": must be greater than or equal to aggregate container requests of 300m",
            ),
            (
                "  resources: {limits: {memory: 64Mi}}\n  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox, resources: {requests: {memory: 32Mi}, limits: {memory: 128Mi}}}\n".to_string(),
                "spec.containers[1].resources.limits[memory]: Invalid value: \"128Mi\": must be less than or equal to pod limits of 64Mi",
            ),
        ] {
            assert_eq!(admit_spec(&spec).unwrap_err().to_string(), want, "{spec}");
        }
        admit_spec(&format!(
            "  resources: {{limits: {{cpu: '1', memory: 1Gi, hugepages-2Mi: 4Mi}}}}\n{c}"
        ))
        .unwrap();
    }

    #[test]
    fn qos_class_reads_the_pod_level_resources() {
        use crate::pod::plan::qos_class;
        use crate::pod::QosClass;
        for (spec, want) in [
            ("  resources: {limits: {cpu: '1', memory: 1Gi}}\n  containers:\n  - {name: a, image: busybox}\n", QosClass::Guaranteed),
            ("  resources: {limits: {cpu: '1'}}\n  containers:\n  - {name: a, image: busybox, resources: {limits: {cpu: 500m, memory: 1Gi}}}\n", QosClass::Burstable),
            ("  resources: {limits: {cpu: '1', memory: 1Gi}, requests: {cpu: 500m}}\n  containers:\n  - {name: a, image: busybox}\n", QosClass::Burstable),
            // Without pod-level resources, the containers' decide.
            ("  containers:\n  - {name: a, image: busybox, resources: {limits: {cpu: 500m, memory: 1Gi}}}\n", QosClass::Guaranteed),
        ] {
            let p = admit_spec(spec).unwrap();
            assert_eq!(qos_class(p.spec.as_ref().unwrap()), want, "{spec}");
        }
    }
}
