//! `resources` as the cgroup values kubelet and the CRI derive from them.

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use oci_spec::runtime::{LinuxCpu, LinuxHugepageLimit, LinuxMemory, LinuxResources, Spec};
use std::collections::BTreeMap;

use super::{Ctx, Error, Result};
use crate::quantity;

/// CFS period for CPU limits, as kubelet uses (100 ms).
const CPU_PERIOD_US: u64 = 100_000;
const MIN_QUOTA_US: i64 = 1000;
const MIN_SHARES: u64 = 2;

fn get(m: &Option<BTreeMap<String, K8sQuantity>>, k: &str) -> Result<Option<quantity::Quantity>> {
    match m.as_ref().and_then(|m| m.get(k)) {
        None => Ok(None),
        Some(q) => quantity::parse(&q.0)
            .map(Some)
            .map_err(|err| Error::Quantity {
                resource: k.to_string(),
                err,
            }),
    }
}

/// `limits.cpu` → CFS quota, `requests.cpu` (else the limit) → shares, `limits.memory` →
/// memory limit, `limits.hugepages-<size>` → hugepage limits.
pub fn with_resources(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    if ctx.container.resources.is_none() {
        return Ok(());
    }
    fill(super::resources_mut(spec), ctx.container)
}

/// Container `c`'s resources as the OCI `linux.resources` its cgroup is given (what an
/// in-place resize writes again).
pub fn container_resources(c: &Container) -> Result<LinuxResources> {
    let mut lr = LinuxResources::default();
    fill(&mut lr, c)?;
    Ok(lr)
}

fn fill(lr: &mut LinuxResources, c: &Container) -> Result<()> {
    let Some(res) = &c.resources else {
        return Ok(());
    };
    let cpu_limit = get(&res.limits, "cpu")?;
    let cpu_request = get(&res.requests, "cpu")?.or(cpu_limit);
    let memory = get(&res.limits, "memory")?;
    let mut huge = Vec::new();
    for k in res.limits.iter().flatten().map(|(k, _)| k) {
        if let Some(size) = k.strip_prefix("hugepages-") {
            let Some(q) = get(&res.limits, k)? else {
                continue;
            };
            let mut h = LinuxHugepageLimit::default();
            h.set_page_size(
                quantity::hugepage_size(size).map_err(|err| Error::Quantity {
                    resource: k.to_string(),
                    err,
                })?,
            );
            h.set_limit(q.value() as i64);
            huge.push(h);
        }
    }
    let cpu = lr.cpu_mut().get_or_insert_with(LinuxCpu::default);
    let shares = cpu_request.map_or(MIN_SHARES, |q| {
        ((q.milli() * 1024 / 1000) as u64).max(MIN_SHARES)
    });
    cpu.set_shares(Some(shares));
    if let Some(q) = cpu_limit {
        let quota = ((q.milli() * CPU_PERIOD_US as i128) / 1000) as i64;
        cpu.set_quota(Some(quota.max(MIN_QUOTA_US)));
        cpu.set_period(Some(CPU_PERIOD_US));
    }
    if let Some(q) = memory {
        lr.memory_mut()
            .get_or_insert_with(LinuxMemory::default)
            .set_limit(Some(q.value() as i64));
    }
    if !huge.is_empty() {
        lr.set_hugepage_limits(Some(huge));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn resources_map_to_cgroup_values() {
        let c = container("name: c\nresources: {limits: {cpu: 500m, memory: 64Mi, hugepages-2Mi: 4Mi}, requests: {cpu: 250m}}");
        let v = json(&apply(with_resources, &c));
        let r = &v["linux"]["resources"];
        assert_eq!(r["cpu"]["quota"], 50_000);
        assert_eq!(r["cpu"]["period"], 100_000);
        assert_eq!(r["cpu"]["shares"], 256);
        assert_eq!(r["memory"]["limit"], 64 << 20);
        assert_eq!(r["hugepageLimits"][0]["pageSize"], "2MB");
        assert_eq!(r["hugepageLimits"][0]["limit"], 4 << 20);
        let c = container("name: c\nresources: {limits: {cpu: 1m}}");
        let v = json(&apply(with_resources, &c));
        assert_eq!(
            v["linux"]["resources"]["cpu"]["quota"], 1000,
            "minimum quota"
        );
        assert_eq!(
            v["linux"]["resources"]["cpu"]["shares"], 2,
            "minimum shares"
        );
        let c = container("name: c\nresources: {}");
        let v = json(&apply(with_resources, &c));
        assert_eq!(v["linux"]["resources"]["cpu"]["shares"], 2);
        assert!(v["linux"]["resources"]["cpu"].get("quota").is_none());
        let v = json(&apply(with_resources, &container("name: c")));
        assert!(
            v["linux"].get("resources").is_none(),
            "no resources, no change"
        );
    }

    #[test]
    fn a_bad_quantity_names_its_key() {
        let c = container("name: c\nresources: {limits: {memory: lots}}");
        let e = try_apply(with_resources, &Default::default(), &c)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("memory: "), "{e}");
    }
}
