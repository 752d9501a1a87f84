//! Security contexts: seccomp profiles (the pod's and each container's), privilege and
//! /proc masking of a container.

use k8s_openapi::api::core::v1::{SeccompProfile, SecurityContext};

use super::{err, R};

/// A container's security context, at field path `p` (the container's).
pub(super) fn container(sc: &SecurityContext, p: &str) -> R {
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
        // Unmasked needs a user namespace (hostUsers: false), which podinit does not make.
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
            if path.starts_with('/') {
                return err(field, format!("Invalid value: {path:?}: must be a relative path"));
            }
            if path.split('/').any(|c| c == "..") {
                return err(field, format!("Invalid value: {path:?}: must not contain '..'"));
            }
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
