//! A container's resources, as the API server's `ValidateResourceRequirements` checks
//! them: resource names (standard, `kubernetes.io/`-native, or extended), quantities,
//! integers for extended resources, hugepages multiples of their page size, requests
//! within limits, and equal to them where overcommit is not allowed.

use k8s_openapi::api::core::v1::ResourceRequirements;

use super::{err, Error, R};

/// `IsStandardContainerResourceName`.
fn standard_container(k: &str) -> bool {
    ["cpu", "memory", "ephemeral-storage"].contains(&k) || k.starts_with("hugepages-")
}

/// `IsStandardResourceName`: the names a quota or a node may have without a prefix.
fn standard(k: &str) -> bool {
    const NAMES: &[&str] = &[
        "cpu",
        "memory",
        "ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "services.nodeports",
        "services.loadbalancers",
    ];
    NAMES.contains(&k) || k.starts_with("hugepages-") || k.starts_with("requests.hugepages-")
}

/// `IsNativeResource`: no prefix, or a `kubernetes.io/` one.
fn native(k: &str) -> bool {
    !k.contains('/') || k.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`: not native, and `requests.<name>` a qualified name.
pub fn extended(k: &str) -> bool {
    !native(k) && !k.starts_with("requests.") && qualified(&format!("requests.{k}")).is_ok()
}

/// `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_` or `.`, starting and ending alphanumeric. The error is
/// Kubernetes' text.
fn qualified(v: &str) -> Result<(), &'static str> {
    let (prefix, name) = match v.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, v),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Err("prefix part must be non-empty");
        }
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if p.len() > 253 || !p.split('.').all(label_ok) {
            return Err("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
        }
    }
    if name.is_empty() {
        return Err("name part must be non-empty");
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters");
    }
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let bytes = name.as_bytes();
    if !bytes.iter().all(|&b| alnum(b) || b"-_.".contains(&b))
        || !alnum(bytes[0])
        || !alnum(bytes[bytes.len() - 1])
    {
        return Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')");
    }
    Ok(())
}

/// `validateContainerResourceName`.
fn name(k: &str, field: &str) -> R {
    qualified(k).map_err(|e| Error::new(field, format!("Invalid value: {k:?}: {e}")))?;
    let why = if !k.contains('/') {
        if !standard(k) {
            "must be a standard resource type or fully qualified"
        } else if !standard_container(k) {
            "must be a standard resource for containers"
        } else {
            return Ok(());
        }
    } else if !native(k) && !extended(k) {
        "doesn't follow extended resource name standard"
    } else {
        return Ok(());
    };
    err(field, format!("Invalid value: {k:?}: {why}"))
}

/// `IsOvercommitAllowed`: native resources but hugepages.
fn overcommit(k: &str) -> bool {
    native(k) && !k.starts_with("hugepages-")
}

/// `ValidateResourceQuantityValue` and the hugepages rule: the value in milli-units.
fn quantity(k: &str, q: &str, field: &str) -> Result<i128, Error> {
    let v =
        crate::quantity::parse(q).map_err(|e| Error::new(field, format!("Invalid value: {e}")))?;
    if v.milli() < 0 {
        return Err(Error::new(
            field,
            format!("Invalid value: {q:?}: must be greater than or equal to 0"),
        ));
    }
    if extended(k) && v.milli() % 1000 != 0 {
        return Err(Error::new(
            field,
            format!("Invalid value: {q:?}: must be an integer"),
        ));
    }
    if let Some(size) = k.strip_prefix("hugepages-") {
        let page = crate::quantity::parse(size)
            .ok()
            .filter(|p| p.milli() > 0 && p.milli() % 1000 == 0);
        if page.is_none_or(|p| v.value() % p.value() != 0) {
            return Err(Error::new(
                field,
                format!("Invalid value: {q:?}: {q} is not positive integer multiple of {k}"),
            ));
        }
    }
    Ok(v.milli())
}

/// Container resources `r`, at field path `p` (the container's).
pub(super) fn container(r: &ResourceRequirements, p: &str) -> R {
    let mut cpu_or_memory = false;
    let mut hugepages = false;
    let mut limits = std::collections::BTreeMap::new();
    for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
        for (k, q) in map.iter().flatten() {
            let field = format!("{p}.resources.{which}[{k}]");
            name(k, &field)?;
            let v = quantity(k, &q.0, &field)?;
            cpu_or_memory |= k == "cpu" || k == "memory";
            hugepages |= k.starts_with("hugepages-");
            if which == "limits" {
                limits.insert(k.as_str(), (v, q.0.as_str()));
            }
        }
    }
    for (k, req) in r.requests.iter().flatten() {
        let rq = crate::quantity::parse(&req.0)
            .map(|q| q.milli())
            .unwrap_or(0);
        match limits.get(k.as_str()) {
            Some(&(lq, lim)) if rq != lq && !overcommit(k) => {
                return err(
                    format!("{p}.resources.requests"),
                    format!(
                        "Invalid value: {:?}: must be equal to {k} limit of {lim}",
                        req.0
                    ),
                )
            }
            Some(&(lq, lim)) if rq > lq => {
                return err(
                    format!("{p}.resources.requests"),
                    format!(
                        "Invalid value: {:?}: must be less than or equal to {k} limit of {lim}",
                        req.0
                    ),
                )
            }
            None if !overcommit(k) => {
                return err(
                    format!("{p}.resources.limits"),
                    "Required value: Limit must be set for non overcommitable resources",
                )
            }
            _ => {}
        }
    }
    if hugepages && !cpu_or_memory {
        return err(
            format!("{p}.resources"),
            "Forbidden: HugePages require cpu or memory",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str) -> R {
        let r: ResourceRequirements = serde_yaml_ng::from_str(yaml).unwrap();
        container(&r, "spec.containers[0]")
    }

    /// The one line of `yaml`'s error.
    fn error(yaml: &str) -> String {
        check(yaml).unwrap_err().to_string()
    }

    #[test]
    fn extended_and_native_names_are_accepted() {
        for ok in [
            "limits: {example.com/dongle: '3'}",
            "limits: {nvidia.com/gpu: '1'}\nrequests: {nvidia.com/gpu: '1'}",
            "limits: {cpu: '1', memory: 1Gi, ephemeral-storage: 2Gi}",
            "limits: {hugepages-2Mi: 100Mi, memory: 100Mi}",
            "requests: {kubernetes.io/foo: '1'}",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn bad_names_say_what_kubernetes_says() {
        let e = error("limits: {gpu: '1'}");
        assert!(
            e.ends_with("must be a standard resource type or fully qualified"),
            "{e}"
        );
        assert!(
            e.starts_with("spec.containers[0].resources.limits[gpu]: "),
            "{e}"
        );
        let e = error("limits: {pods: '1'}");
        assert!(
            e.ends_with("must be a standard resource for containers"),
            "{e}"
        );
        let e = error("limits: {example.com/-bad: '1'}");
        assert!(e.contains("name part must consist of"), "{e}");
    }

    #[test]
    fn extended_resources_are_integers_with_requests_equal_to_limits() {
        let e = error("limits: {example.com/dongle: 500m}");
        assert!(e.ends_with("\"500m\": must be an integer"), "{e}");
        let e = error("limits: {example.com/dongle: '2'}\nrequests: {example.com/dongle: '1'}");
        assert_eq!(
            e,
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/dongle limit of 2"
        );
        let e = error("requests: {example.com/dongle: '1'}");
        assert_eq!(
            e,
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
        );
    }

    #[test]
    fn hugepages_rules() {
        let e = error("limits: {hugepages-2Mi: 3Mi, memory: 10Mi}");
        assert!(
            e.ends_with("3Mi is not positive integer multiple of hugepages-2Mi"),
            "{e}"
        );
        let e = error("limits: {hugepages-2Mi: 4Mi}");
        assert_eq!(
            e,
            "spec.containers[0].resources: Forbidden: HugePages require cpu or memory"
        );
        let e = error("limits: {hugepages-2Mi: 4Mi, memory: 1Gi}\nrequests: {hugepages-2Mi: 2Mi}");
        assert!(
            e.contains("must be equal to hugepages-2Mi limit of 4Mi"),
            "{e}"
        );
    }

    #[test]
    fn requests_within_limits() {
        let e = error("limits: {cpu: 500m}\nrequests: {cpu: '1'}");
        assert!(
            e.ends_with("must be less than or equal to cpu limit of 500m"),
            "{e}"
        );
    }
}
