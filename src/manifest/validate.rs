//! Validation, in the spirit and wording of Kubernetes' `ValidatePod`. The first error
//! found is returned, in a fixed order: the pod's own fields here, each subject in its
//! module.

mod containers;
mod dns;
mod env;
mod handlers;
mod images;
mod names;
mod pod_resources;
mod resources;
mod security;
mod volumes;

pub use names::{dns1123_label, dns1123_subdomain};
pub use resources::extended as is_extended_resource_name;
pub use security::seccomp_annotations_to_fields;

use super::Error;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeSet;

type R = Result<(), Error>;

fn err(field: impl Into<String>, msg: impl Into<String>) -> R {
    Err(Error::new(field, msg))
}

/// The API server's check of an enumerated field (`field.NotSupported`).
fn one_of(field: impl Into<String>, value: &str, supported: &[&str]) -> R {
    if supported.contains(&value) {
        return Ok(());
    }
    let list: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
    err(
        field,
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
    )
}

/// `validateLocalDescendingPath`: relative, and no `..` among its parts.
fn local_descending_path(path: &str, field: &str) -> R {
    let p = std::path::Path::new(path);
    if p.is_absolute() {
        return err(
            field,
            format!("Invalid value: {path:?}: must be a relative path"),
        );
    }
    if p.components().any(|c| c == std::path::Component::ParentDir) {
        return err(
            field,
            format!("Invalid value: {path:?}: must not contain '..'"),
        );
    }
    Ok(())
}

pub fn pod(pod: &Pod) -> R {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() {
        return err(
            "metadata.name",
            "Required value: name or generateName is required",
        );
    }
    names::dns1123_subdomain("metadata.name", name)?;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    names::dns1123_label("metadata.namespace", ns)?;
    let Some(spec) = &pod.spec else {
        return err("spec", "Required value");
    };
    if let Some(os) = &spec.os {
        // A windows pod is valid; kubelet's admission on this Linux node rejects it.
        if os.name != "linux" && os.name != "windows" {
            return err(
                "spec.os.name",
                format!(
                    "Unsupported value: {:?}: supported values: \"linux\", \"windows\"",
                    os.name
                ),
            );
        }
    }
    dns::dns(spec)?;
    let user_ns = spec.host_users == Some(false);
    if user_ns {
        if let Some((field, why)) = crate::pod::userns::host_namespaces_refusal(
            spec.host_network == Some(true),
            spec.host_pid == Some(true),
            spec.host_ipc == Some(true),
        ) {
            return err(field, why);
        }
    }
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        return err(
            "spec.shareProcessNamespace",
            "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
        );
    }
    if let Some(sp) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        security::seccomp_profile(sp, "spec.securityContext.seccompProfile")?;
    }
    if let Some(sc) = &spec.security_context {
        if let Some(p) = sc.supplemental_groups_policy.as_deref() {
            one_of(
                "spec.securityContext.supplementalGroupsPolicy",
                p,
                &["Merge", "Strict"],
            )?;
        }
        // Accepted and of no effect here: kubelet applies it to persistent volumes only;
        // the volumes podinit has always change (docs/semantics.md, `fsGroup` on volumes).
        if let Some(p) = sc.fs_group_change_policy.as_deref() {
            one_of(
                "spec.securityContext.fsGroupChangePolicy",
                p,
                &["OnRootMismatch", "Always"],
            )?;
        }
    }
    for (i, sc) in spec
        .security_context
        .iter()
        .flat_map(|s| s.sysctls.iter().flatten())
        .enumerate()
    {
        if let Some(why) = crate::pod::sysctls::refusal(
            &sc.name,
            spec.host_network == Some(true),
            spec.host_ipc == Some(true),
        ) {
            return err(
                format!("spec.securityContext.sysctls[{i}].name"),
                format!("Forbidden: {why}"),
            );
        }
    }
    let rp = spec.restart_policy.as_deref().unwrap_or("Always");
    if !["Always", "OnFailure", "Never"].contains(&rp) {
        return err(
            "spec.restartPolicy",
            format!(
                "Unsupported value: {rp:?}: supported values: \"Always\", \"OnFailure\", \"Never\""
            ),
        );
    }
    if spec.termination_grace_period_seconds.is_some_and(|g| g < 0) {
        return err(
            "spec.terminationGracePeriodSeconds",
            "Invalid value: must be >= 0",
        );
    }
    if let Some(d) = spec.active_deadline_seconds {
        if d < 1 {
            return err(
                "spec.activeDeadlineSeconds",
                format!("Invalid value: {d}: must be between 1 and 2147483647, inclusive"),
            );
        }
    }
    if let Some(h) = &spec.hostname {
        names::dns1123_label("spec.hostname", h)?;
    }
    let vols = volumes::pod(spec)?;
    images::pull_secrets(spec)?;
    // Containers.
    if spec.containers.is_empty() {
        return err("spec.containers", "Required value");
    }
    security::annotations(pod)?;
    let os = spec.os.as_ref().map(|o| o.name.as_str());
    let empty_dirs = |name: &str| {
        spec.volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .map(|v| v.empty_dir.is_some())
    };
    let mut names = BTreeSet::new();
    let init = spec.init_containers.iter().flatten().enumerate();
    let init = init.map(|(i, c)| (c, format!("spec.initContainers[{i}]"), true));
    let app = spec.containers.iter().enumerate();
    let app = app.map(|(i, c)| (c, format!("spec.containers[{i}]"), false));
    for (c, field, is_init) in init.chain(app) {
        containers::container(
            c,
            &field,
            is_init,
            &vols,
            &mut names,
            user_ns,
            os,
            &empty_dirs,
        )?;
    }
    pod_resources::pod(spec)?;
    for (i, g) in spec.readiness_gates.iter().flatten().enumerate() {
        if g.condition_type.is_empty() {
            return err(
                format!("spec.readinessGates[{i}].conditionType"),
                "Required value",
            );
        }
    }
    Ok(())
}
