//! Which pod sysctls (`spec.securityContext.sysctls`) may be set: kubelet allows the "safe"
//! set by default (others need `--allowed-unsafe-sysctls`, which podinit does not offer:
//! they are refused at admission). The sandbox sets the admitted ones (`sandbox::sysctls`).

/// kubelet's safe sysctls (`SafeSysctlAllowlist`, Kubernetes 1.34).
pub const SAFE: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// A sysctl name with `/` separators written the dotted way (both are accepted).
pub fn normalize(name: &str) -> String {
    if name.contains('/') {
        name.replace('/', ".")
    } else {
        name.to_string()
    }
}

/// Why `name` may not be set, or `None`; a pod on the host's network (IPC) namespace may not
/// set that namespace's sysctls: they would change the node's.
pub fn refusal(name: &str, host_network: bool, host_ipc: bool) -> Option<String> {
    let n = normalize(name);
    if !SAFE.contains(&n.as_str()) {
        return Some(format!(
            "forbidden sysctl: {n:?} not allowlisted (podinit allows kubelet's safe sysctls only)"
        ));
    }
    let ns = if n.starts_with("net.") { "net" } else { "ipc" };
    if (ns == "net" && host_network) || (ns == "ipc" && host_ipc) {
        return Some(format!(
            "forbidden sysctl: {n:?} not allowed with host {ns} enabled"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_safe_set_and_slash_names() {
        assert_eq!(refusal("net.ipv4.ip_local_port_range", false, false), None);
        assert_eq!(refusal("net/ipv4/tcp_syncookies", false, false), None);
        assert!(refusal("kernel.msgmax", false, false)
            .unwrap()
            .starts_with("forbidden sysctl: \"kernel.msgmax\""));
        assert_eq!(
            refusal("net.ipv4.tcp_syncookies", true, false).unwrap(),
            "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
        );
        assert_eq!(refusal("net.ipv4.tcp_syncookies", false, true), None);
        assert!(refusal("kernel.shm_rmid_forced", false, true).is_some());
        assert_eq!(normalize("net/ipv4/tcp_rmem"), "net.ipv4.tcp_rmem");
    }
}
