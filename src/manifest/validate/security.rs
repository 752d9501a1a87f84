//! Security contexts: seccomp profiles (the pod's and each container's), privilege and
//! /proc masking of a container; the AppArmor fields and the old security annotations.

use k8s_openapi::api::core::v1::{
    AppArmorProfile, Container, Pod, SeccompProfile, SecurityContext,
};

use super::{err, local_descending_path, R};

/// A container's security context, at field path `p` (the container's), in a pod with
/// a user namespace of its own (`user_ns`) or not.
pub(super) fn container(sc: &SecurityContext, p: &str, user_ns: bool) -> R {
    if let Some(sp) = &sc.seccomp_profile {
        seccomp_profile(sp, &format!("{p}.securityContext.seccompProfile"))?;
    }
    if sc.privileged == Some(true) && sc.allow_privilege_escalation == Some(false) {
        return err(
            format!("{p}.securityContext"),
            "Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        );
    }
    match sc.proc_mount.as_deref() {
        None | Some("Default") => {}
        Some("Unmasked") if user_ns => {}
        Some("Unmasked") => {
            return err(
                format!("{p}.securityContext.procMount"),
                "Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
            )
        }
        Some(v) => {
            return err(
                format!("{p}.securityContext.procMount"),
                format!("Unsupported value: {v:?}: supported values: \"Default\", \"Unmasked\""),
            )
        }
    }
    Ok(())
}

/// `validateSeccompProfileField`. Where Kubernetes prints the whole profile struct (with a
/// pointer address) as the invalid value of `localhostProfile`, this prints the field.
/// An empty `localhostProfile` passes the API server but fails at kubelet's container
/// creation ("localhostProfile must be set…"); podinit says so before anything starts.
pub(super) fn seccomp_profile(sp: &SeccompProfile, p: &str) -> R {
    let lp = sp.localhost_profile.as_deref();
    match sp.type_.as_str() {
        "" => return err(format!("{p}.type"), "Required value: type is required when seccompProfile is set"),
        "Localhost" => {
            let field = format!("{p}.localhostProfile");
            let Some(path) = lp.filter(|s| !s.is_empty()) else {
                return err(field, "Required value: must be set when seccomp type is Localhost");
            };
            local_descending_path(path, &field)?;
        }
        "RuntimeDefault" | "Unconfined" => {
            if let Some(path) = lp {
                return err(
                    format!("{p}.localhostProfile"),
                    format!("Invalid value: {path:?}: can only be set when seccomp type is Localhost"),
                );
            }
        }
        t => {
            return err(
                format!("{p}.type"),
                format!("Unsupported value: {t:?}: supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\""),
            )
        }
    }
    Ok(())
}

const APPARMOR_PREFIX: &str = crate::pod::admit::APPARMOR_ANNOTATION_PREFIX;
const SECCOMP_POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// The security annotations and the AppArmor fields, as `ValidatePodCreate` checks them:
/// each annotation's value and container, each `appArmorProfile`, and that an annotation
/// and the field of the same container agree (`validateAppArmorAnnotationsAndFieldsMatchOnCreate`,
/// `validateSeccompAnnotationsAndFields`).
pub(super) fn annotations(pod: &Pod) -> R {
    let spec = pod.spec.as_ref().expect("validated");
    let ann = pod.metadata.annotations.clone().unwrap_or_default();
    let containers: Vec<(String, &Container)> = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c))
        .chain(
            spec.containers
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("spec.containers[{i}]"), c)),
        )
        .collect();
    for (k, v) in &ann {
        if let Some(name) = k.strip_prefix(APPARMOR_PREFIX) {
            let field = format!("metadata.annotations[{k}]");
            if !containers.iter().any(|(_, c)| c.name == name) {
                return err(
                    field,
                    format!("Invalid value: {name:?}: container not found"),
                );
            }
            let known = ["", "runtime/default", "unconfined"].contains(&v.as_str());
            if !known && !v.starts_with("localhost/") {
                return err(
                    field,
                    format!("Invalid value: {v:?}: invalid AppArmor profile name: {v:?}"),
                );
            }
        }
        if k == SECCOMP_POD || k.starts_with(SECCOMP_CONTAINER_PREFIX) {
            seccomp_annotation(v, &format!("metadata.annotations.{k}"))?;
        }
    }
    let pod_aa = spec
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref());
    if let Some(p) = pod_aa {
        apparmor_field(p, "spec.securityContext.appArmorProfile")?;
    }
    let pod_sc = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref());
    if let (Some(a), Some(f)) = (ann.get(SECCOMP_POD), pod_sc) {
        seccomp_match(a, f, "spec.securityContext.seccompProfile")?;
    }
    for (p, c) in &containers {
        let sc = c.security_context.as_ref();
        let own = sc.and_then(|s| s.app_armor_profile.as_ref());
        let path = format!("{p}.securityContext.appArmorProfile");
        if let Some(f) = own {
            apparmor_field(f, &path)?;
        }
        if let (Some(f), Some(a)) = (
            own.or(pod_aa),
            ann.get(&format!("{APPARMOR_PREFIX}{}", c.name)),
        ) {
            apparmor_match(a, f, &path)?;
        }
        let key = format!("{SECCOMP_CONTAINER_PREFIX}{}", c.name);
        if let (Some(a), Some(f)) = (ann.get(&key), sc.and_then(|s| s.seccomp_profile.as_ref())) {
            seccomp_match(a, f, &format!("{p}.securityContext.seccompProfile"))?;
        }
    }
    Ok(())
}

/// `validateAppArmorProfileField`.
fn apparmor_field(p: &AppArmorProfile, path: &str) -> R {
    let lp = p.localhost_profile.as_deref();
    match p.type_.as_str() {
        "Localhost" => {
            let field = format!("{path}.localhostProfile");
            match lp {
                Some(l) if l.trim() != l => {
                    err(field, format!("Invalid value: {l:?}: must not be padded with whitespace"))
                }
                Some(l) if !l.is_empty() => Ok(()),
                _ => err(field, "Required value: must be set when AppArmor type is Localhost"),
            }
        }
        "RuntimeDefault" | "Unconfined" => match lp {
            Some(l) => err(
                format!("{path}.localhostProfile"),
                format!("Invalid value: {l:?}: can only be set when AppArmor type is Localhost"),
            ),
            None => Ok(()),
        },
        "" => err(format!("{path}.type"), "Required value: type is required when appArmorProfile is set"),
        t => err(
            format!("{path}.type"),
            format!("Unsupported value: {t:?}: supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\""),
        ),
    }
}

/// An AppArmor annotation and the field that applies to its container must agree.
fn apparmor_match(a: &str, f: &AppArmorProfile, path: &str) -> R {
    let same_type = match f.type_.as_str() {
        "Unconfined" => a == "unconfined",
        "RuntimeDefault" => a == "runtime/default",
        "Localhost" => a.starts_with("localhost/"),
        _ => true,
    };
    if !same_type {
        return err(
            format!("{path}.type"),
            "Forbidden: apparmor type in annotation and field must match",
        );
    }
    if f.type_ == "Localhost" && a.strip_prefix("localhost/") != f.localhost_profile.as_deref() {
        return err(
            format!("{path}.localhostProfile"),
            "Forbidden: apparmor profile in annotation and field must match",
        );
    }
    Ok(())
}

/// `ValidateSeccompProfile` of an annotation's value.
fn seccomp_annotation(v: &str, field: &str) -> R {
    if ["runtime/default", "docker/default", "unconfined"].contains(&v) {
        return Ok(());
    }
    if let Some(path) = v.strip_prefix("localhost/") {
        return local_descending_path(path, field);
    }
    err(
        field,
        format!("Invalid value: {v:?}: must be a valid seccomp profile"),
    )
}

/// The field a seccomp annotation's value stands for (`seccompFieldForAnnotation`).
pub fn seccomp_from_annotation(v: &str) -> Option<SeccompProfile> {
    let (type_, lp) = match v {
        "unconfined" => ("Unconfined", None),
        "runtime/default" | "docker/default" => ("RuntimeDefault", None),
        _ => (
            "Localhost",
            Some(v.strip_prefix("localhost/").filter(|p| !p.is_empty())?),
        ),
    };
    Some(SeccompProfile {
        type_: type_.into(),
        localhost_profile: lp.map(str::to_string),
    })
}

/// A seccomp annotation and the field of the same pod or container must agree.
fn seccomp_match(a: &str, f: &SeccompProfile, path: &str) -> R {
    let Some(from) = seccomp_from_annotation(a) else {
        return Ok(());
    };
    if from.type_ != f.type_ {
        return err(
            format!("{path}.type"),
            "Forbidden: seccomp type in annotation and field must match",
        );
    }
    if from.localhost_profile != f.localhost_profile {
        return err(
            format!("{path}.localhostProfile"),
            "Forbidden: seccomp profile in annotation and field must match",
        );
    }
    Ok(())
}

/// The API server's `applySeccompVersionSkew` on create: the old annotations set the
/// fields they stand for where those are unset, so that they are enforced, not ignored.
pub fn seccomp_annotations_to_fields(pod: &mut Pod) {
    let ann = pod.metadata.annotations.clone().unwrap_or_default();
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    if spec.os.as_ref().is_some_and(|o| o.name == "windows") {
        return;
    }
    if let Some(f) = ann
        .get(SECCOMP_POD)
        .and_then(|a| seccomp_from_annotation(a))
    {
        let sc = spec.security_context.get_or_insert_with(Default::default);
        sc.seccomp_profile.get_or_insert(f);
    }
    let all = spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut());
    for c in all {
        let key = format!("{SECCOMP_CONTAINER_PREFIX}{}", c.name);
        if let Some(f) = ann.get(&key).and_then(|a| seccomp_from_annotation(a)) {
            let sc = c.security_context.get_or_insert_with(Default::default);
            sc.seccomp_profile.get_or_insert(f);
        }
    }
}
