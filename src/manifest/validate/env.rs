//! A container's environment: variable names, `valueFrom` sources and `envFrom`.

use k8s_openapi::api::core::v1::{Container, EnvVarSource, FileKeySelector};

use super::{err, local_descending_path, R};

/// Container `c`'s `env` and `envFrom`, at field path `p` (the container's).
pub(super) fn container(c: &Container, p: &str, empty_dirs: &EmptyDirs) -> R {
    for (i, e) in c.env.iter().flatten().enumerate() {
        if e.name.is_empty() || e.name.contains('=') {
            return err(format!("{p}.env[{i}].name"), format!("Invalid value: {:?}: a valid environment variable name must consist only of printable ASCII characters other than '='", e.name));
        }
        if let Some(src) = &e.value_from {
            value_from(
                src,
                e.value.is_some(),
                &format!("{p}.env[{i}].valueFrom"),
                empty_dirs,
            )?;
        }
    }
    for (i, f) in c.env_from.iter().flatten().enumerate() {
        let fp = format!("{p}.envFrom[{i}]");
        match (&f.config_map_ref, &f.secret_ref) {
            (None, None) => {
                return err(
                    fp,
                    "Required value: must specify one of: `configMapRef` or `secretRef`",
                )
            }
            (Some(_), Some(_)) => {
                return err(
                    fp,
                    "Invalid value: may not have more than one field specified at a time",
                )
            }
            (Some(r), None) if r.name.is_empty() => {
                return err(format!("{fp}.configMapRef.name"), "Required value")
            }
            (None, Some(r)) if r.name.is_empty() => {
                return err(format!("{fp}.secretRef.name"), "Required value")
            }
            _ => {}
        }
    }
    Ok(())
}

/// The downward-API fields an env var may use (`validEnvDownwardAPIFieldPathExpressions`).
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// `fileKeyRef` as the API server's `validateFileKeySelector` checks it: a volume of the
/// pod that is an emptyDir, a relative path without `..`, and a key that is a valid
/// variable name of at most 128 characters.
fn file_key_ref(f: &FileKeySelector, p: &str, empty_dirs: &EmptyDirs) -> R {
    if f.volume_name.is_empty() {
        return err(format!("{p}.volumeName"), "Required value");
    }
    match empty_dirs(&f.volume_name) {
        None => {
            return err(
                format!("{p}.volumeName"),
                format!("Not found: {:?}", f.volume_name),
            )
        }
        Some(false) => {
            return err(
                format!("{p}.volumeName"),
                format!(
                    "Invalid value: {:?}: must be an emptyDir volume",
                    f.volume_name
                ),
            )
        }
        Some(true) => {}
    }
    if f.path.is_empty() {
        return err(format!("{p}.path"), "Required value");
    }
    local_descending_path(&f.path, &format!("{p}.path"))?;
    if f.key.is_empty() {
        return err(format!("{p}.key"), "Required value");
    }
    if f.key.len() > crate::manifest::env_file::MAX_KEY_BYTES {
        return err(
            format!("{p}.key"),
            format!(
                "Too long: may not be more than {} bytes",
                crate::manifest::env_file::MAX_KEY_BYTES
            ),
        );
    }
    if f.key.contains('=') || !f.key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return err(format!("{p}.key"), format!("Invalid value: {:?}: a valid environment variable name must consist only of printable ASCII characters other than '='", f.key));
    }
    Ok(())
}

/// Whether the pod's volume of this name is an emptyDir (`None`: it has none of the name).
pub(super) type EmptyDirs<'a> = dyn Fn(&str) -> Option<bool> + 'a;

fn value_from(src: &EnvVarSource, has_value: bool, p: &str, empty_dirs: &EmptyDirs) -> R {
    let n = [
        src.field_ref.is_some(),
        src.resource_field_ref.is_some(),
        src.config_map_key_ref.is_some(),
        src.secret_key_ref.is_some(),
        src.file_key_ref.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if n == 0 {
        return err(p.to_string(), "Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`");
    }
    if n > 1 {
        return err(
            p.to_string(),
            "Invalid value: \"\": may not have more than one field specified at a time",
        );
    }
    if has_value {
        return err(
            p.to_string(),
            "Invalid value: \"\": may not be specified when `value` is not empty",
        );
    }
    if let Some(f) = &src.file_key_ref {
        file_key_ref(f, &format!("{p}.fileKeyRef"), empty_dirs)?;
    }
    if let Some(f) = &src.field_ref {
        let path = f.field_path.as_str();
        let keyed = |prefix: &str| {
            path.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix("']"))
                .is_some_and(|k| !k.is_empty())
        };
        if !(ENV_FIELD_PATHS.contains(&path)
            || keyed("metadata.labels['")
            || keyed("metadata.annotations['"))
        {
            return err(
                format!("{p}.fieldRef.fieldPath"),
                format!("Unsupported value: {path:?}: supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\""),
            );
        }
    }
    if let Some(r) = &src.resource_field_ref {
        resource_field_resource(&r.resource, &format!("{p}.resourceFieldRef.resource"))?;
    }
    for (f, key) in [
        (
            "configMapKeyRef",
            src.config_map_key_ref.as_ref().map(|r| (&r.name, &r.key)),
        ),
        (
            "secretKeyRef",
            src.secret_key_ref.as_ref().map(|r| (&r.name, &r.key)),
        ),
    ] {
        if let Some((name, key)) = key {
            if name.is_empty() {
                return err(format!("{p}.{f}.name"), "Required value");
            }
            if key.is_empty() {
                return err(format!("{p}.{f}.key"), "Required value");
            }
        }
    }
    Ok(())
}

/// A `resourceFieldRef.resource` the downward API knows (env and volume items alike).
pub(super) fn resource_field_resource(resource: &str, field: &str) -> R {
    let ok = [
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
    ]
    .contains(&resource)
        || resource.starts_with("limits.hugepages-")
        || resource.starts_with("requests.hugepages-");
    if ok {
        Ok(())
    } else {
        err(
            field.to_string(),
            format!("Unsupported value: {resource:?}"),
        )
    }
}
