//! A container's fields: its name and image, restart policy, what an init container may
//! not have, probes, hooks and stop signal. Its security context, environment, mounts
//! and resources have modules of their own.

use k8s_openapi::api::core::v1::Container;
use std::collections::BTreeSet;

use super::{err, one_of, Error, R};

/// Container `c` at field path `p`; `names` are the pod's container names so far;
/// `user_ns`: the pod has `hostUsers: false`; `os`: its `spec.os.name`; `empty_dirs`: which
/// of its volumes are emptyDirs.
#[allow(clippy::too_many_arguments)]
pub(super) fn container(
    c: &Container,
    p: &str,
    init: bool,
    vols: &BTreeSet<String>,
    names: &mut BTreeSet<String>,
    user_ns: bool,
    os: Option<&str>,
    empty_dirs: &super::env::EmptyDirs,
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
    let sidecar = init && c.restart_policy.as_deref() == Some("Always");
    restart_policy(c, p)?;
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
        if os.is_none() {
            return err(
                format!("{p}.lifecycle.stopSignal"),
                "Forbidden: may not be set for containers with empty `spec.os.name`",
            );
        }
        crate::bundle::signal::parse(sig).map_err(|e| {
            Error::new(
                format!("{p}.lifecycle.stopSignal"),
                format!("Unsupported value: {e}"),
            )
        })?;
    }
    super::env::container(c, p, empty_dirs)?;
    super::volumes::mounts(c, p, vols)?;
    if let Some(r) = &c.resources {
        super::resources::container(r, p)?;
    }
    Ok(())
}

/// The container-level `restartPolicy` and its `restartPolicyRules` (KEP-5307, beta in
/// 1.35; the `RestartAllContainers` action KEP-5532, beta in 1.36), as the API server's
/// `validateContainerRestartPolicy` checks them: any container but an ephemeral one may
/// set a policy (`Always` on an init container makes it a sidecar); rules need a policy,
/// at most 20 of them, each with an action and an `exitCodes` condition of at most 255
/// distinct values.
fn restart_policy(c: &Container, p: &str) -> R {
    let rules = c.restart_policy_rules.as_deref().unwrap_or_default();
    let Some(policy) = c.restart_policy.as_deref() else {
        if !rules.is_empty() {
            return err(
                format!("{p}.restartPolicy"),
                "Required value: must specify restartPolicy when restart rules are used",
            );
        }
        return Ok(());
    };
    one_of(
        format!("{p}.restartPolicy"),
        policy,
        &["Always", "OnFailure", "Never"],
    )?;
    if rules.len() > 20 {
        return err(
            format!("{p}.restartPolicyRules"),
            format!("Too many: {}: must have at most 20 items", rules.len()),
        );
    }
    for (i, rule) in rules.iter().enumerate() {
        let rp = format!("{p}.restartPolicyRules[{i}]");
        if !["Restart", "RestartAllContainers"].contains(&rule.action.as_str()) {
            return err(
                format!("{rp}.action"),
                format!(
                    "Unsupported value: {:?}: supported values: \"Restart\", \"RestartAllContainers\"",
                    rule.action
                ),
            );
        }
        let Some(codes) = &rule.exit_codes else {
            return err(
                format!("{rp}.exitCodes"),
                "Required value: must be specified",
            );
        };
        if !["In", "NotIn"].contains(&codes.operator.as_str()) {
            return err(
                format!("{rp}.exitCodes.operator"),
                format!(
                    "Unsupported value: {:?}: supported values: \"In\", \"NotIn\"",
                    codes.operator
                ),
            );
        }
        let values = codes.values.as_deref().unwrap_or_default();
        if values.len() > 255 {
            return err(
                format!("{rp}.exitCodes.values"),
                format!("Too many: {}: must have at most 255 items", values.len()),
            );
        }
        let mut seen = BTreeSet::new();
        for (k, v) in values.iter().enumerate() {
            if !seen.insert(*v) {
                return err(
                    format!("{rp}.exitCodes.values[{k}]"),
                    format!("Duplicate value: {v}"),
                );
            }
        }
    }
    Ok(())
}
