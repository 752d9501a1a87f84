//! The pod's `/etc/hosts` and `/etc/resolv.conf`, as kubelet and the CRI runtime make them
//! (kubelet's `managedHostsFileContent`, `dns.Configurer`): written once into the state
//! dir and bind-mounted into every container that does not mount something there itself.
//! The contents are pure functions of the pod.

use k8s_openapi::api::core::v1::Pod;

/// The pod's files and where each is mounted in a container.
pub type PodFiles = Vec<(std::path::PathBuf, &'static str)>;

/// kubelet's default `--cluster-domain`.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// resolv.conf limits kubelet applies.
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;

/// `node_hosts`: the node's /etc/hosts, which a `hostNetwork` pod gets instead of its own
/// entries (kubelet's `nodeHostsFileContent`).
pub fn hosts(pod: &Pod, pod_ips: &[String], hostname: &str, node_hosts: &str) -> String {
    let spec = pod.spec.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let host_network = spec.host_network == Some(true);
    let mut out = if host_network {
        let mut s = format!("# Kubernetes-managed hosts file (host network).\n{node_hosts}");
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    } else {
        String::from(
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
        )
    };
    // An overridden hostname has no domain (`GeneratePodHostNameAndDomain`).
    let subdomain = spec
        .subdomain
        .as_deref()
        .filter(|_| spec.hostname_override.is_none());
    for ip in pod_ips.iter().filter(|_| !host_network) {
        match subdomain.filter(|s| !s.is_empty()) {
            Some(sub) => out.push_str(&format!(
                "{ip}\t{hostname}.{sub}.{ns}.svc.{CLUSTER_DOMAIN}\t{hostname}\n"
            )),
            None => out.push_str(&format!("{ip}\t{hostname}\n")),
        }
    }
    let aliases = spec.host_aliases.unwrap_or_default();
    if !aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for a in aliases {
            let names = a.hostnames.unwrap_or_default();
            if !names.is_empty() {
                out.push_str(&format!("{}\t{}\n", a.ip, names.join("\t")));
            }
        }
    }
    out
}

/// What the pod's resolv.conf says, and whether kubelet would warn that it had no cluster
/// DNS for `ClusterFirst` (it falls back to the node's resolv.conf: `MissingClusterDNS`).
pub fn resolv_conf(pod: &Pod, host_resolv: &str) -> (String, bool) {
    let spec = pod.spec.clone().unwrap_or_default();
    let mut policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    if policy == "ClusterFirst" && spec.host_network == Some(true) {
        // A host-network pod uses the node's DNS unless it asks `ClusterFirstWithHostNet`.
        policy = "Default";
    }
    let (mut servers, mut searches, mut options) = (Vec::new(), Vec::new(), Vec::<String>::new());
    let mut missing_cluster_dns = false;
    if policy != "None" {
        // No cluster DNS here: ClusterFirst falls back to Default, as kubelet does.
        missing_cluster_dns = policy.starts_with("ClusterFirst");
        for line in host_resolv.lines() {
            let mut f = line.split_whitespace();
            match f.next() {
                Some("nameserver") => servers.extend(f.next().map(str::to_string)),
                Some("search") | Some("domain") => {
                    searches = f.map(str::to_string).collect();
                }
                Some("options") => options.extend(f.map(str::to_string)),
                _ => {}
            }
        }
    }
    if let Some(c) = &spec.dns_config {
        for s in c.nameservers.iter().flatten() {
            if !servers.contains(s) {
                servers.push(s.clone());
            }
        }
        for s in c.searches.iter().flatten() {
            if !searches.contains(s) {
                searches.push(s.clone());
            }
        }
        for o in c.options.iter().flatten() {
            let opt = match &o.value {
                Some(v) => format!("{}:{v}", o.name.as_deref().unwrap_or("")),
                None => o.name.clone().unwrap_or_default(),
            };
            let name = opt.split(':').next().unwrap_or("").to_string();
            options.retain(|x| x.split(':').next() != Some(name.as_str()));
            options.push(opt);
        }
    }
    servers.truncate(MAX_NAMESERVERS);
    searches.truncate(MAX_SEARCHES);
    let mut out = String::new();
    if !searches.is_empty() {
        out.push_str(&format!("search {}\n", searches.join(" ")));
    }
    for s in &servers {
        out.push_str(&format!("nameserver {s}\n"));
    }
    if !options.is_empty() {
        out.push_str(&format!("options {}\n", options.join(" ")));
    }
    (out, missing_cluster_dns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: &str) -> Pod {
        serde_yaml_ng::from_str(&format!(
            "metadata: {{name: web, namespace: prod}}\nspec:\n  containers: []\n{spec}"
        ))
        .unwrap()
    }

    #[test]
    fn hosts_as_kubelet_writes_it() {
        let p = pod("  subdomain: api\n  hostAliases: [{ip: 10.1.1.1, hostnames: [foo, bar]}]\n");
        let h = hosts(&p, &["10.0.0.5".into()], "web", "");
        assert!(
            h.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"),
            "{h}"
        );
        assert!(
            h.contains("\n10.0.0.5\tweb.api.prod.svc.cluster.local\tweb\n"),
            "{h}"
        );
        assert!(
            h.ends_with("\n# Entries added by HostAliases.\n10.1.1.1\tfoo\tbar\n"),
            "{h}"
        );
        let h = hosts(&pod(""), &["10.0.0.5".into()], "web", "");
        assert!(
            h.ends_with("fe00::2\tip6-allrouters\n10.0.0.5\tweb\n"),
            "{h}"
        );
    }

    #[test]
    fn a_host_network_pod_gets_the_nodes_hosts_and_dns() {
        let p = pod("  hostNetwork: true\n  hostAliases: [{ip: 10.1.1.1, hostnames: [foo]}]\n");
        let h = hosts(
            &p,
            &["192.168.1.9".into()],
            "node1",
            "127.0.0.1 localhost\n",
        );
        assert_eq!(
            h,
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n10.1.1.1\tfoo\n"
        );
        let host = "nameserver 192.168.1.1\n";
        assert_eq!(
            resolv_conf(&p, host),
            ("nameserver 192.168.1.1\n".to_string(), false),
            "ClusterFirst is Default on the host network"
        );
        let with_net = pod("  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet\n");
        assert!(resolv_conf(&with_net, host).1, "no cluster DNS to use");
    }

    #[test]
    fn resolv_conf_by_policy_and_dns_config() {
        let host = "# comment\nnameserver 192.168.1.1\nsearch lan\noptions edns0 ndots:1\n";
        let (r, warn) = resolv_conf(&pod(""), host);
        assert!(warn, "ClusterFirst without cluster DNS");
        assert_eq!(
            r,
            "search lan\nnameserver 192.168.1.1\noptions edns0 ndots:1\n"
        );
        let (r, warn) = resolv_conf(
            &pod("  dnsPolicy: None\n  dnsConfig: {nameservers: [1.1.1.1], searches: [a.example], options: [{name: ndots, value: '2'}]}\n"),
            host,
        );
        assert!(!warn);
        assert_eq!(r, "search a.example\nnameserver 1.1.1.1\noptions ndots:2\n");
        let (r, _) = resolv_conf(
            &pod("  dnsPolicy: Default\n  dnsConfig: {nameservers: [192.168.1.1, 8.8.8.8], options: [{name: ndots, value: '5'}, {name: rotate}]}\n"),
            host,
        );
        assert_eq!(r, "search lan\nnameserver 192.168.1.1\nnameserver 8.8.8.8\noptions edns0 ndots:5 rotate\n");
    }
}
