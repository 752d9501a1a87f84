//! Strictness: a field podinit does not know is an error (like `kubectl --validate=strict`),
//! and so is a known field that the pod uses and podinit does not support yet. Purely
//! informational fields (`ports`, `nodeName`, `tolerations`, …) are accepted and ignored.

use super::Error;
use k8s_openapi::api::core::v1::{
    Container, DownwardAPIVolumeFile, KeyToPath, Pod, PodSpec, SecurityContext, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What podinit reads of a Pod document: its metadata and spec (apiVersion and kind are
/// checked by the caller). The status is ignored, as the API server ignores it on create;
/// not reading it also leaves PodStatus's deserializer out of the binary.
#[derive(serde::Deserialize)]
struct PodDoc {
    #[serde(default)]
    metadata: ObjectMeta,
    spec: Option<PodSpec>,
}

/// The typed Pod of a manifest document (`typed`'s errors).
pub fn pod(doc: &Value) -> Result<Pod, Error> {
    let d: PodDoc = typed(doc)?;
    Ok(Pod {
        metadata: d.metadata,
        spec: d.spec,
        status: None,
    })
}

/// Deserialize with the failing field's path in the error.
pub fn typed<T: DeserializeOwned>(doc: &Value) -> Result<T, Error> {
    crate::tracked::deserialize(doc).map_err(|(path, e)| {
        Error::new(
            if path == "." { "document".into() } else { path },
            e.to_string(),
        )
    })
}

/// Kubernetes accepts plain numbers for quantities (`cpu: 1`); the typed form wants text.
pub fn normalize_quantities(doc: &mut Value) {
    fn walk(v: &mut Value, key: &str) {
        match v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    walk(child, k);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|c| walk(c, key)),
            Value::Number(n) if matches!(key, "sizeLimit") => *v = Value::String(n.to_string()),
            // YAML 1.1 (Kubernetes' parser) reads `mode: 0644` as octal; YAML 1.2 leaves
            // a string. File modes are the only octal numbers in a Pod.
            Value::String(t) if matches!(key, "mode" | "defaultMode") => {
                let octal = t.strip_prefix("0o").or_else(|| t.strip_prefix('0'));
                if let Some(n) = octal.and_then(|o| i64::from_str_radix(o, 8).ok()) {
                    *v = Value::from(n);
                }
            }
            _ => {}
        }
    }
    fn quantities(v: &mut Value) {
        if let Value::Object(m) = v {
            for q in m.values_mut() {
                if let Value::Number(n) = q {
                    *q = Value::String(n.to_string());
                }
            }
        }
    }
    walk(doc, "");
    let spec = &mut doc["spec"];
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                if let Some(r) = c.get_mut("resources") {
                    quantities(r.get_mut("limits").unwrap_or(&mut Value::Null));
                    quantities(r.get_mut("requests").unwrap_or(&mut Value::Null));
                }
            }
        }
    }
}

/// Every field of the raw document must survive a round trip through the typed Pod; one
/// that does not is unknown.
pub fn unknown_fields(raw: &Value, pod: &Pod) -> Result<(), Error> {
    let typed = serde_json::to_value(pod).map_err(|e| Error::new("document", e.to_string()))?;
    let mut raw = raw.clone();
    if let Some(o) = raw.as_object_mut() {
        // The status of a manifest is ignored, as the API server does on create.
        o.remove("status");
    }
    compare(&raw, &typed, "")
}

/// The same for any object read from JSON (an ephemeral container posted to the API).
pub fn unknown_fields_of<T: serde::Serialize>(raw: &Value, obj: &T) -> Result<(), Error> {
    let typed = serde_json::to_value(obj).map_err(|e| Error::new("document", e.to_string()))?;
    compare(raw, &typed, "")
}

fn compare(raw: &Value, typed: &Value, path: &str) -> Result<(), Error> {
    match (raw, typed) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, rv) in r {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match t.get(k) {
                    Some(tv) => compare(rv, tv, &p)?,
                    None if rv.is_null() => {}
                    None => return Err(Error::new(p, format!("unknown field {k:?}"))),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            for (i, (rv, tv)) in r.iter().zip(t).enumerate() {
                compare(rv, tv, &format!("{path}[{i}]"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn unsupported_err(path: String) -> Result<(), Error> {
    Err(Error::new(path, "not supported"))
}

/// The pod fields that Kubernetes 1.37 has only behind a feature gate that is off by
/// default (alpha, or beta and off), with that gate: the API types know them, kubelet and
/// the API server 1.37 do not act on them. Refused by name, before validation judges
/// their values. The list and each gate's stage are in docs/interface.md §1.
pub fn alpha(pod: &Pod) -> Result<(), Error> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let refuse_as = |stage: &str, path: String, gate: &str| -> Result<(), Error> {
        Err(Error::new(
            path,
            format!(
                "{stage} in Kubernetes 1.37 (feature gate {gate}, off by default): not supported"
            ),
        ))
    };
    let refuse = |path: String, gate: &str| refuse_as("alpha", path, gate);
    if spec
        .eviction_responders
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        return refuse("spec.evictionResponders".into(), "EvictionRequestAPI");
    }
    if spec.scheduling_group.is_some() {
        return refuse_as("beta", "spec.schedulingGroup".into(), "GenericWorkload");
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        if matches!(t.operator.as_deref(), Some("Lt" | "Gt")) {
            return refuse(
                format!("spec.tolerations[{i}].operator"),
                "TaintTolerationComparisonOperators",
            );
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if let Some(path) = volume_user(v) {
            return refuse(
                format!("spec.volumes[{i}].{path}"),
                "AtomicWriteVolumeUserFields",
            );
        }
    }
    if let Some(r) = &spec.resources {
        for (which, m) in [("limits", &r.limits), ("requests", &r.requests)] {
            if m.as_ref().is_some_and(|m| m.contains_key("pid")) {
                return refuse(format!("spec.resources.{which}.pid"), "PerPodPIDLimit");
            }
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if v.empty_dir.as_ref().is_some_and(|e| e.mode.is_some()) {
            return refuse(
                format!("spec.volumes[{i}].emptyDir.mode"),
                "EmptyDirVolumeMode",
            );
        }
    }
    for (list, cs) in container_lists(spec) {
        for (i, c) in cs.iter().enumerate() {
            for (k, m) in c.volume_mounts.iter().flatten().enumerate() {
                if m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()) {
                    return refuse(
                        format!("spec.{list}[{i}].volumeMounts[{k}].bindMountOptions"),
                        "VolumeBindMountOptions",
                    );
                }
            }
        }
    }
    Ok(())
}

/// The first `defaultUser` or item `user` of a file volume (the owner UID of the files
/// kubelet writes), as a path below the volume.
fn volume_user(v: &Volume) -> Option<String> {
    let items = |what: &str, items: Option<&Vec<KeyToPath>>| {
        items
            .into_iter()
            .flatten()
            .position(|k| k.user.is_some())
            .map(|k| format!("{what}.items[{k}].user"))
    };
    if let Some(c) = &v.config_map {
        if c.default_user.is_some() {
            return Some("configMap.defaultUser".into());
        }
        if let Some(p) = items("configMap", c.items.as_ref()) {
            return Some(p);
        }
    }
    if let Some(s) = &v.secret {
        if s.default_user.is_some() {
            return Some("secret.defaultUser".into());
        }
        if let Some(p) = items("secret", s.items.as_ref()) {
            return Some(p);
        }
    }
    let downward = |what: &str, files: Option<&Vec<DownwardAPIVolumeFile>>| {
        files
            .into_iter()
            .flatten()
            .position(|f| f.user.is_some())
            .map(|k| format!("{what}.items[{k}].user"))
    };
    if let Some(d) = &v.downward_api {
        if d.default_user.is_some() {
            return Some("downwardAPI.defaultUser".into());
        }
        if let Some(p) = downward("downwardAPI", d.items.as_ref()) {
            return Some(p);
        }
    }
    let p = v.projected.as_ref()?;
    if p.default_user.is_some() {
        return Some("projected.defaultUser".into());
    }
    for (k, src) in p.sources.iter().flatten().enumerate() {
        let at = format!("projected.sources[{k}]");
        let found = src
            .config_map
            .as_ref()
            .and_then(|c| items(&format!("{at}.configMap"), c.items.as_ref()))
            .or_else(|| {
                let s = src.secret.as_ref()?;
                items(&format!("{at}.secret"), s.items.as_ref())
            })
            .or_else(|| {
                let d = src.downward_api.as_ref()?;
                downward(&format!("{at}.downwardAPI"), d.items.as_ref())
            })
            .or_else(|| {
                let own = [
                    (
                        "serviceAccountToken",
                        src.service_account_token.as_ref().and_then(|t| t.user),
                    ),
                    (
                        "clusterTrustBundle",
                        src.cluster_trust_bundle.as_ref().and_then(|t| t.user),
                    ),
                    (
                        "podCertificate",
                        src.pod_certificate.as_ref().and_then(|t| t.user),
                    ),
                ];
                own.iter()
                    .find(|(_, u)| u.is_some())
                    .map(|(f, _)| format!("{at}.{f}.user"))
            });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The one table of what podinit does not support yet; shrink it as features land.
pub fn unsupported(pod: &Pod) -> Result<(), Error> {
    let spec = pod.spec.as_ref().expect("validated");
    for (f, on) in [
        (
            "ephemeralContainers",
            spec.ephemeral_containers
                .as_ref()
                .is_some_and(|v| !v.is_empty()),
        ),
        (
            "resourceClaims",
            spec.resource_claims.as_ref().is_some_and(|v| !v.is_empty()),
        ),
        ("overhead", spec.overhead.is_some()),
    ] {
        if on {
            return unsupported_err(format!("spec.{f}"));
        }
    }
    if let Some(sc) = &spec.security_context {
        for (f, on) in [
            ("seLinuxOptions", sc.se_linux_options.is_some()),
            ("windowsOptions", sc.windows_options.is_some()),
            ("seLinuxChangePolicy", sc.se_linux_change_policy.is_some()),
        ] {
            if on {
                return unsupported_err(format!("spec.securityContext.{f}"));
            }
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let files = v.config_map.is_some()
            || v.secret.is_some()
            || v.downward_api.is_some()
            || v.projected.is_some();
        if v.empty_dir.is_none() && v.host_path.is_none() && v.image.is_none() && !files {
            let source = serde_json::to_value(v)
                .ok()
                .and_then(|o| {
                    o.as_object()
                        .and_then(|m| m.keys().find(|k| *k != "name").cloned())
                })
                .unwrap_or_else(|| "source".into());
            return unsupported_err(format!("spec.volumes[{i}].{source}"));
        }
        // Sources that need the API server (a token, a trust bundle, a certificate):
        // refused here, so that `validate` and `run` agree.
        let sources = v.projected.iter().flat_map(|p| p.sources.iter().flatten());
        for (k, src) in sources.enumerate() {
            for (f, on) in [
                ("serviceAccountToken", src.service_account_token.is_some()),
                ("clusterTrustBundle", src.cluster_trust_bundle.is_some()),
                ("podCertificate", src.pod_certificate.is_some()),
            ] {
                if on {
                    return unsupported_err(format!(
                        "spec.volumes[{i}].projected.sources[{k}].{f}"
                    ));
                }
            }
        }
    }
    for (list, cs) in container_lists(spec) {
        for (i, c) in cs.iter().enumerate() {
            container(c, &format!("spec.{list}[{i}]"))?;
        }
    }
    Ok(())
}

fn container(c: &Container, p: &str) -> Result<(), Error> {
    for (f, on) in [
        (
            "volumeDevices",
            c.volume_devices.as_ref().is_some_and(|v| !v.is_empty()),
        ),
        (
            "resources.claims",
            c.resources
                .as_ref()
                .is_some_and(|r| r.claims.as_ref().is_some_and(|v| !v.is_empty())),
        ),
    ] {
        if on {
            return unsupported_err(format!("{p}.{f}"));
        }
    }
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        if m.mount_propagation.as_deref().is_some_and(|v| v != "None") {
            return unsupported_err(format!("{p}.volumeMounts[{i}].mountPropagation"));
        }
    }
    if let Some(sc) = &c.security_context {
        security(sc, &format!("{p}.securityContext"))?;
    }
    Ok(())
}

fn security(sc: &SecurityContext, p: &str) -> Result<(), Error> {
    for (f, on) in [
        ("seLinuxOptions", sc.se_linux_options.is_some()),
        ("windowsOptions", sc.windows_options.is_some()),
    ] {
        if on {
            return unsupported_err(format!("{p}.{f}"));
        }
    }
    Ok(())
}

/// The pod's init and regular containers, each list with its field name.
fn container_lists(spec: &PodSpec) -> [(&'static str, &[Container]); 2] {
    [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", &spec.containers[..]),
    ]
}
