//! A pod's DNS: its policy and configuration, host aliases and subdomain.

use k8s_openapi::api::core::v1::PodSpec;

use super::names::{dns1123_label, dns1123_subdomain};
use super::{err, one_of, R};

/// `dnsPolicy`, `dnsConfig`, `hostAliases` and `subdomain` (`validateDNSPolicy`,
/// `validatePodDNSConfig`, `ValidateHostAliases`).
pub(super) fn dns(spec: &PodSpec) -> R {
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    one_of(
        "spec.dnsPolicy",
        policy,
        &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
    )?;
    let cfg = spec.dns_config.as_ref();
    if policy == "None" {
        let Some(c) = cfg else {
            return err(
                "spec.dnsConfig",
                "Required value: must provide `dnsConfig` when `dnsPolicy` is None",
            );
        };
        if c.nameservers.as_ref().is_none_or(|n| n.is_empty()) {
            return err(
                "spec.dnsConfig.nameservers",
                "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None",
            );
        }
    }
    if let Some(c) = cfg {
        let ns = c.nameservers.as_deref().unwrap_or_default();
        if ns.len() > 3 {
            return err(
                "spec.dnsConfig.nameservers",
                format!("Invalid value: {ns:?}: must not have more than 3 nameservers"),
            );
        }
        for (i, n) in ns.iter().enumerate() {
            if n.parse::<std::net::IpAddr>().is_err() {
                return err(
                    format!("spec.dnsConfig.nameservers[{i}]"),
                    format!("Invalid value: {n:?}: must be a valid IP address"),
                );
            }
        }
        if c.searches.as_ref().is_some_and(|s| s.len() > 32) {
            return err(
                "spec.dnsConfig.searches",
                "Invalid value: must not have more than 32 search paths",
            );
        }
    }
    for (i, a) in spec.host_aliases.iter().flatten().enumerate() {
        if a.ip.parse::<std::net::IpAddr>().is_err() {
            return err(
                format!("spec.hostAliases[{i}].ip"),
                format!("Invalid value: {:?}: must be valid IP address", a.ip),
            );
        }
        for (j, h) in a.hostnames.iter().flatten().enumerate() {
            dns1123_subdomain(format!("spec.hostAliases[{i}].hostnames[{j}]"), h)?;
        }
    }
    if let Some(sub) = spec.subdomain.as_deref().filter(|s| !s.is_empty()) {
        dns1123_label("spec.subdomain", sub)?;
    }
    hostname_override(spec)
}

/// `hostnameOverride` (KEP-4762, GA in 1.37): an RFC 1123 subdomain of at most 64
/// characters (the kernel's limit), neither with `setHostnameAsFQDN` nor with
/// `hostNetwork`.
fn hostname_override(spec: &PodSpec) -> R {
    let Some(h) = spec.hostname_override.as_deref() else {
        return Ok(());
    };
    if h.len() > 64 {
        return err(
            "spec.hostnameOverride",
            format!("Too long: may not be more than 64 bytes (got {})", h.len()),
        );
    }
    dns1123_subdomain("spec.hostnameOverride", h)?;
    if spec.set_hostname_as_fqdn == Some(true) {
        return err(
            "spec.setHostnameAsFQDN",
            "Forbidden: may not be set when hostnameOverride is set",
        );
    }
    if spec.host_network == Some(true) {
        return err(
            "spec.hostNetwork",
            "Forbidden: may not be set when hostnameOverride is set",
        );
    }
    Ok(())
}
