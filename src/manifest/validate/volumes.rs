//! Volumes: the pod's (a unique name, exactly one source, the fields of the sources
//! podinit has) and a container's mounts of them.

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, PodSpec, Volume};
use std::collections::BTreeSet;

use super::{err, local_descending_path, Error, R};

/// The pod's volumes: their names.
pub(super) fn pod(spec: &PodSpec) -> Result<BTreeSet<String>, Error> {
    let mut vols = BTreeSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        volume(v, &format!("spec.volumes[{i}]"), &mut vols)?;
    }
    // A hugepage medium kubelet could not mount (no request of its page size) would leave
    // the containers waiting for it forever: refused here with kubelet's words.
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let Some(ed) = &v.empty_dir else { continue };
        let medium = ed.medium.as_deref().unwrap_or("");
        if medium.starts_with("HugePages") {
            if let Err(e) = crate::pod::empty_dir::backing(spec, ed, 0) {
                return Err(Error::new(
                    format!("spec.volumes[{i}].emptyDir.medium"),
                    format!("Invalid value: {medium:?}: {e}"),
                ));
            }
        }
    }
    Ok(vols)
}

/// Volume `v` at field path `p`; `vols` are the names of the volumes before it.
fn volume(v: &Volume, p: &str, vols: &mut BTreeSet<String>) -> R {
    super::names::dns1123_label(format!("{p}.name"), &v.name)?;
    if !vols.insert(v.name.clone()) {
        return err(
            format!("{p}.name"),
            format!("Duplicate value: {:?}", v.name),
        );
    }
    let sources = serde_json::to_value(v)
        .ok()
        .and_then(|o| {
            o.as_object()
                .map(|m| m.keys().filter(|k| *k != "name").count())
        })
        .unwrap_or(0);
    if sources == 0 {
        return err(p, "Required value: must specify a volume type");
    }
    if sources > 1 {
        return err(p, "Forbidden: may not specify more than 1 volume type");
    }
    if let Some(hp) = &v.host_path {
        if hp.path.is_empty() {
            return err(format!("{p}.hostPath.path"), "Required value");
        }
        let ty = hp.type_.as_deref().unwrap_or("");
        let ok = [
            "",
            "DirectoryOrCreate",
            "Directory",
            "FileOrCreate",
            "File",
            "Socket",
            "CharDevice",
            "BlockDevice",
        ];
        if !ok.contains(&ty) {
            return err(
                format!("{p}.hostPath.type"),
                format!("Unsupported value: {ty:?}"),
            );
        }
    }
    if let Some(iv) = &v.image {
        // `validateImageVolumeSource`.
        if iv.reference.as_deref().unwrap_or_default().is_empty() {
            return err(format!("{p}.image.reference"), "Required value");
        }
        let policy = iv.pull_policy.as_deref().unwrap_or_default();
        if policy.is_empty() {
            return err(format!("{p}.image.pullPolicy"), "Required value");
        }
        if !["Always", "IfNotPresent", "Never"].contains(&policy) {
            return err(
                format!("{p}.image.pullPolicy"),
                format!("Unsupported value: {policy:?}: supported values: \"Always\", \"IfNotPresent\", \"Never\""),
            );
        }
    }
    if let Some(d) = &v.downward_api {
        downward_items(
            d.items.as_deref().unwrap_or_default(),
            &format!("{p}.downwardAPI"),
        )?;
    }
    let sources = v
        .projected
        .iter()
        .flat_map(|pr| pr.sources.iter().flatten());
    for (k, src) in sources.enumerate() {
        if let Some(d) = &src.downward_api {
            let at = format!("{p}.projected.sources[{k}].downwardAPI");
            downward_items(d.items.as_deref().unwrap_or_default(), &at)?;
        }
    }
    if let Some(ed) = &v.empty_dir {
        if let Some(m) = ed.medium.as_deref() {
            if !["", "Memory", "HugePages"].contains(&m) && !m.starts_with("HugePages-") {
                return err(
                    format!("{p}.emptyDir.medium"),
                    format!("Unsupported value: {m:?}: supported values: \"\", \"Memory\", \"HugePages\", \"HugePages-<size>\""),
                );
            }
        }
        if let Some(q) = &ed.size_limit {
            let v = crate::quantity::parse(&q.0).map_err(|e| {
                Error::new(
                    format!("{p}.emptyDir.sizeLimit"),
                    format!("Invalid value: {e}"),
                )
            })?;
            if v.milli() < 0 {
                return err(
                    format!("{p}.emptyDir.sizeLimit"),
                    "Forbidden: SizeLimit field must be a valid resource quantity",
                );
            }
        }
    }
    Ok(())
}

/// The files of a downward-API volume (`validateDownwardAPIVolumeFile`): a relative path
/// without `..`, and one source, of the fields a volume may show.
fn downward_items(items: &[DownwardAPIVolumeFile], p: &str) -> R {
    for (j, it) in items.iter().enumerate() {
        let ip = format!("{p}.items[{j}]");
        if it.path.is_empty() {
            return err(format!("{ip}.path"), "Required value");
        }
        local_descending_path(&it.path, &format!("{ip}.path"))?;
        match (&it.field_ref, &it.resource_field_ref) {
            (Some(_), Some(_)) => {
                return err(
                    ip,
                    "Invalid value: \"resource\": fieldRef and resourceFieldRef can not be specified simultaneously",
                )
            }
            (None, None) => {
                return err(
                    ip,
                    "Required value: one of fieldRef and resourceFieldRef is required",
                )
            }
            (Some(f), None) => {
                let fp = f.field_path.as_str();
                let keyed = |prefix: &str| {
                    fp.strip_prefix(prefix)
                        .and_then(|r| r.strip_suffix("']"))
                        .is_some_and(|k| !k.is_empty())
                };
                let whole = [
                    "metadata.annotations",
                    "metadata.labels",
                    "metadata.name",
                    "metadata.namespace",
                    "metadata.uid",
                ];
                if !(whole.contains(&fp)
                    || keyed("metadata.labels['")
                    || keyed("metadata.annotations['"))
                {
                    return err(
                        format!("{ip}.fieldRef.fieldPath"),
                        format!("Unsupported value: {fp:?}: supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\""),
                    );
                }
            }
            (None, Some(r)) => {
                if r.container_name.as_deref().unwrap_or("").is_empty() {
                    return err(
                        format!("{ip}.resourceFieldRef.containerName"),
                        "Required value",
                    );
                }
                super::env::resource_field_resource(
                    &r.resource,
                    &format!("{ip}.resourceFieldRef.resource"),
                )?;
            }
        }
    }
    Ok(())
}

/// Container `c`'s volume mounts, at field path `p` (the container's): each of a pod
/// volume in `vols`, at a path of its own.
pub(super) fn mounts(c: &Container, p: &str, vols: &BTreeSet<String>) -> R {
    let mut paths = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let mp = format!("{p}.volumeMounts[{i}]");
        if !vols.contains(&m.name) {
            return err(format!("{mp}.name"), format!("Not found: {:?}", m.name));
        }
        if m.mount_path.is_empty() {
            return err(format!("{mp}.mountPath"), "Required value");
        }
        if !paths.insert(m.mount_path.clone()) {
            return err(
                format!("{mp}.mountPath"),
                format!("Invalid value: {:?}: must be unique", m.mount_path),
            );
        }
        if let Some(sp) = m.sub_path.as_deref() {
            let path = std::path::Path::new(sp);
            if path.is_absolute()
                || path
                    .components()
                    .any(|c| c == std::path::Component::ParentDir)
            {
                return err(
                    format!("{mp}.subPath"),
                    format!("Invalid value: {sp:?}: must be a relative path without '..'"),
                );
            }
        }
        // `ValidateVolumeMounts`: the API server names the mutual exclusion at the mount's
        // index and the path check without it, as here.
        if let Some(expr) = m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            if m.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
                return err(
                    format!("{mp}.subPathExpr"),
                    format!(
                        "Invalid value: {expr:?}: subPathExpr and subPath are mutually exclusive"
                    ),
                );
            }
            local_descending_path(expr, &format!("{p}.volumeMounts.subPathExpr"))?;
        }
        recursive_read_only(m, p)?;
    }
    Ok(())
}

/// `validateMountRecursiveReadOnly`: `Enabled` and `IfPossible` only on a read-only mount
/// without propagation. The API server names the field without the mount's index
/// (`spec.containers[0].volumeMounts.recursiveReadOnly`), as here.
fn recursive_read_only(m: &k8s_openapi::api::core::v1::VolumeMount, p: &str) -> R {
    let at = format!("{p}.volumeMounts.recursiveReadOnly");
    match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => Ok(()),
        Some("Enabled" | "IfPossible") => {
            if m.read_only != Some(true) {
                return err(at, "Forbidden: may only be specified when readOnly is true");
            }
            if m.mount_propagation.as_deref().is_some_and(|p| p != "None") {
                return err(
                    at,
                    "Forbidden: may only be specified when mountPropagation is None or not specified",
                );
            }
            Ok(())
        }
        Some(other) => err(
            at,
            format!("Unsupported value: {other:?}: supported values: \"Disabled\", \"Enabled\", \"IfPossible\""),
        ),
    }
}
