//! A container's resources: standard resource names, valid quantities, requests within
//! limits.

use k8s_openapi::api::core::v1::ResourceRequirements;

use super::{err, Error, R};

/// Container resources `r`, at field path `p` (the container's).
pub(super) fn container(r: &ResourceRequirements, p: &str) -> R {
    for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
        for (k, q) in map.iter().flatten() {
            let standard = ["cpu", "memory", "ephemeral-storage"].contains(&k.as_str())
                || k.starts_with("hugepages-");
            if !standard {
                return err(
                    format!("{p}.resources.{which}[{k}]"),
                    format!(
                        "Invalid value: {k:?}: must be a standard resource type or fully qualified"
                    ),
                );
            }
            let v = crate::quantity::parse(&q.0).map_err(|e| {
                Error::new(
                    format!("{p}.resources.{which}[{k}]"),
                    format!("Invalid value: {e}"),
                )
            })?;
            if v.milli() < 0 {
                return err(
                    format!("{p}.resources.{which}[{k}]"),
                    format!(
                        "Invalid value: {:?}: must be greater than or equal to 0",
                        q.0
                    ),
                );
            }
        }
    }
    for (k, req) in r.requests.iter().flatten() {
        if let Some(lim) = r.limits.as_ref().and_then(|l| l.get(k)) {
            let (rq, lq) = (
                crate::quantity::parse(&req.0),
                crate::quantity::parse(&lim.0),
            );
            if let (Ok(rq), Ok(lq)) = (rq, lq) {
                if rq > lq {
                    return err(
                        format!("{p}.resources.requests"),
                        format!(
                            "Invalid value: {:?}: must be less than or equal to {k} limit of {}",
                            req.0, lim.0
                        ),
                    );
                }
            }
        }
    }
    Ok(())
}
