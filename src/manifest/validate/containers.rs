//! A container's fields: its name and image, restart policy, what an init container may
//! not have, probes, hooks and stop signal. Its security context, environment, mounts
//! and resources have modules of their own.

use k8s_openapi::api::core::v1::Container;
use std::collections::BTreeSet;

use super::{err, Error, R};

/// Container `c` at field path `p`; `names` are the pod's container names so far;
/// `user_ns`: the pod has `hostUsers: false`.
pub(super) fn container(
    c: &Container,
    p: &str,
    init: bool,
    vols: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    user_ns: bool,
) -> R {
    if c.name.is_empty() {
        return err(format!("{p}.name"), "Required value");
    }
    super::names::dns1123_label(format!("{p}.name"), &c.name)?;
    if !names.insert(c.name.clone()) {
        return err(
            format!("{p}.name"),
            format!("Duplicate value: {:?}", c.name),
        );
    }
    if c.image.as_deref().unwrap_or("").trim().is_empty() {
        return err(format!("{p}.image"), "Required value");
    }
    super::images::pull_policy(c, p)?;
    if let Some(sc) = &c.security_context {
        super::security::container(sc, p, user_ns)?;
    }
    let sidecar = match c.restart_policy.as_deref() {
        None => false,
        Some("Always") if init => true,
        Some(v) if init => {
            return err(
                format!("{p}.restartPolicy"),
                format!("Unsupported value: {v:?}: supported values: \"Always\""),
            );
        }
        Some(_) => {
            return err(
                format!("{p}.restartPolicy"),
                "Forbidden: may not be set for non-init containers",
            )
        }
    };
    if init && !sidecar {
        for (f, set) in [
            (
                "lifecycle",
                c.lifecycle
                    .as_ref()
                    .is_some_and(|l| l.post_start.is_some() || l.pre_stop.is_some()),
            ),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("readinessProbe", c.readiness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ] {
            if set {
                return err(
                    format!("{p}.{f}"),
                    "Forbidden: may not be set for init containers without restartPolicy=Always",
                );
            }
        }
    }
    for (f, probe) in [
        ("livenessProbe", &c.liveness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        if probe
            .as_ref()
            .and_then(|pr| pr.success_threshold)
            .is_some_and(|s| s != 1)
        {
            return err(
                format!("{p}.{f}.successThreshold"),
                "Invalid value: must be 1",
            );
        }
    }
    for (f, probe) in [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        if let Some(pr) = probe {
            super::handlers::probe_handler(pr, &format!("{p}.{f}"))?;
        }
    }
    if let Some(lc) = &c.lifecycle {
        for (f, h) in [("postStart", &lc.post_start), ("preStop", &lc.pre_stop)] {
            if let Some(h) = h {
                super::handlers::hook_handler(h, &format!("{p}.lifecycle.{f}"))?;
            }
        }
    }
    if let Some(sig) = c.lifecycle.as_ref().and_then(|l| l.stop_signal.as_deref()) {
        crate::bundle::signal::parse(sig).map_err(|e| {
            Error::new(
                format!("{p}.lifecycle.stopSignal"),
                format!("Unsupported value: {e}"),
            )
        })?;
    }
    super::env::container(c, p)?;
    super::volumes::mounts(c, p, vols)?;
    if let Some(r) = &c.resources {
        super::resources::container(r, p)?;
    }
    Ok(())
}
