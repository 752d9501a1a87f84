//! What the shim needs of the CRI's `PodSandboxConfig`, which containerd hands
//! CreateSandbox as its options (an `Any` of the CRI's `runtime.v1.PodSandboxConfig`): the
//! hostname, the DNS config, the cgroup parent, which namespaces are the node's, the
//! sysctls. Read field by
//! field with protobuf's own reader, so that the shim carries none of the CRI's protos.

use containerd_shim::protos::protobuf::rt::WireType;
use containerd_shim::protos::protobuf::CodedInputStream;

use super::super::error::{Error, Result};

/// CRI's `NamespaceMode`: what each of the pod's namespaces is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The pod's own (`POD`, the default).
    #[default]
    Pod,
    /// Each container's own (`CONTAINER`; pid only).
    Container,
    /// The node's (`NODE`: hostNetwork, hostPID, hostIPC).
    Node,
    /// Another container's (`TARGET`; pid only, for ephemeral containers).
    Target,
}

impl Mode {
    fn from_enum(v: i32) -> Result<Mode> {
        match v {
            0 => Ok(Mode::Pod),
            1 => Ok(Mode::Container),
            2 => Ok(Mode::Node),
            3 => Ok(Mode::Target),
            n => Err(Error::Invalid(format!(
                "namespace mode {n}: not one of the CRI's"
            ))),
        }
    }
}

/// The CRI's `DNSConfig`: what the pod's `/etc/resolv.conf` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dns {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// The fields of a `PodSandboxConfig` the sandbox is made from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodConfig {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub hostname: String,
    /// `dns_config`; none means the node's own resolv.conf, as containerd reads it.
    pub dns: Option<Dns>,
    pub cgroup_parent: String,
    pub network: Mode,
    pub pid: Mode,
    pub ipc: Mode,
    /// Whether `namespace_options.userns_options` asks for a user namespace of the pod's.
    pub user_namespace: bool,
    /// `sysctls`, by their dotted names.
    pub sysctls: Vec<(String, String)>,
    /// The pod's annotations.
    pub annotations: Vec<(String, String)>,
}

type Fields = Vec<(u32, Field)>;

/// One field's value: a varint or a length-delimited run of bytes (the only kinds the
/// fields read here have).
enum Field {
    Varint(u64),
    Bytes(Vec<u8>),
}

/// Every field of one message, in order; other wire types are skipped.
fn fields(b: &[u8], what: &str) -> Result<Fields> {
    let bad = |e: containerd_shim::protos::protobuf::Error| Error::Invalid(format!("{what}: {e}"));
    let mut is = CodedInputStream::from_bytes(b);
    let mut out = Vec::new();
    while let Some(tag) = is.read_raw_tag_or_eof().map_err(bad)? {
        let (number, wire) = (tag >> 3, tag & 7);
        match WireType::new(wire) {
            Some(WireType::Varint) => {
                out.push((number, Field::Varint(is.read_uint64().map_err(bad)?)))
            }
            Some(WireType::LengthDelimited) => {
                out.push((number, Field::Bytes(is.read_bytes().map_err(bad)?)))
            }
            Some(w) => is.skip_field(w).map_err(bad)?,
            None => {
                return Err(Error::Invalid(format!(
                    "{what}: wire type {wire} in field {number}"
                )))
            }
        }
    }
    Ok(out)
}

fn string(b: &[u8], what: &str) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| Error::Invalid(format!("{what}: not UTF-8")))
}

/// A `map<string, string>` entry: key 1, value 2.
fn entry(b: &[u8], what: &str) -> Result<(String, String)> {
    let (mut k, mut v) = (String::new(), String::new());
    for (n, f) in fields(b, what)? {
        match (n, f) {
            (1, Field::Bytes(b)) => k = string(&b, what)?,
            (2, Field::Bytes(b)) => v = string(&b, what)?,
            _ => {}
        }
    }
    Ok((k, v))
}

/// A `DNSConfig`: servers 1, searches 2, options 3, each a repeated string.
fn dns(b: &[u8]) -> Result<Dns> {
    const WHAT: &str = "PodSandboxConfig.dns_config";
    let mut d = Dns::default();
    for (n, f) in fields(b, WHAT)? {
        match (n, f) {
            (1, Field::Bytes(b)) => d.servers.push(string(&b, WHAT)?),
            (2, Field::Bytes(b)) => d.searches.push(string(&b, WHAT)?),
            (3, Field::Bytes(b)) => d.options.push(string(&b, WHAT)?),
            _ => {}
        }
    }
    Ok(d)
}

impl PodConfig {
    /// The config from CreateSandbox's options (`type_url` and value); none (a client
    /// other than the CRI) gives the defaults: every namespace the pod's own.
    pub fn from_options(type_url: &str, value: &[u8]) -> Result<PodConfig> {
        let mut c = PodConfig::default();
        if type_url.is_empty() {
            return Ok(c);
        }
        if !type_url.ends_with("PodSandboxConfig") {
            return Err(Error::Invalid(format!(
                "the sandbox's options are a {type_url}, not the CRI's PodSandboxConfig"
            )));
        }
        for (n, f) in fields(value, "PodSandboxConfig")? {
            match (n, f) {
                (1, Field::Bytes(b)) => c.metadata(&b)?,
                (2, Field::Bytes(b)) => c.hostname = string(&b, "PodSandboxConfig.hostname")?,
                (4, Field::Bytes(b)) => c.dns = Some(dns(&b)?),
                (7, Field::Bytes(b)) => c
                    .annotations
                    .push(entry(&b, "PodSandboxConfig.annotations")?),
                (8, Field::Bytes(b)) => c.linux(&b)?,
                _ => {}
            }
        }
        Ok(c)
    }

    fn metadata(&mut self, b: &[u8]) -> Result<()> {
        const WHAT: &str = "PodSandboxConfig.metadata";
        for (n, f) in fields(b, WHAT)? {
            match (n, f) {
                (1, Field::Bytes(b)) => self.name = string(&b, WHAT)?,
                (2, Field::Bytes(b)) => self.uid = string(&b, WHAT)?,
                (3, Field::Bytes(b)) => self.namespace = string(&b, WHAT)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn linux(&mut self, b: &[u8]) -> Result<()> {
        const WHAT: &str = "PodSandboxConfig.linux";
        for (n, f) in fields(b, WHAT)? {
            match (n, f) {
                (1, Field::Bytes(b)) => self.cgroup_parent = string(&b, WHAT)?,
                (2, Field::Bytes(b)) => {
                    for (n, f) in fields(&b, "linux.security_context")? {
                        if let (1, Field::Bytes(b)) = (n, f) {
                            self.namespaces(&b)?;
                        }
                    }
                }
                (3, Field::Bytes(b)) => self.sysctls.push(entry(&b, "linux.sysctls")?),
                _ => {}
            }
        }
        Ok(())
    }

    fn namespaces(&mut self, b: &[u8]) -> Result<()> {
        const WHAT: &str = "security_context.namespace_options";
        for (n, f) in fields(b, WHAT)? {
            match (n, f) {
                (1, Field::Varint(v)) => self.network = Mode::from_enum(v as i32)?,
                (2, Field::Varint(v)) => self.pid = Mode::from_enum(v as i32)?,
                (3, Field::Varint(v)) => self.ipc = Mode::from_enum(v as i32)?,
                // UserNamespace{mode = 1}: NODE (2) is the host's, POD (0) a new one.
                (5, Field::Bytes(b)) => {
                    let mode = fields(&b, "namespace_options.userns_options")?
                        .into_iter()
                        .find_map(|(n, f)| match (n, f) {
                            (1, Field::Varint(v)) => Some(v),
                            _ => None,
                        })
                        .unwrap_or(0);
                    self.user_namespace = mode != 2;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The pod's own namespaces and its settings for its PID 1, with the network
    /// namespace containerd's CNI made (`netns`, empty for a pod on the host network).
    /// The UTS namespace is the node's with its network, as containerd makes it.
    pub fn namespaces_for(&self, netns: &str) -> podinit::sys::pause::SandboxNamespaces {
        let host_network = self.network == Mode::Node;
        podinit::sys::pause::SandboxNamespaces {
            netns: (!host_network && !netns.is_empty()).then(|| netns.into()),
            new_pid: self.pid != Mode::Node,
            new_ipc: self.ipc != Mode::Node,
            new_uts: !host_network,
            hostname: (!host_network && !self.hostname.is_empty()).then(|| self.hostname.clone()),
            sysctls: self
                .sysctls
                .iter()
                .map(|(k, v)| (k.replace('.', "/"), v.clone()))
                .collect(),
            // Known once the sandbox's cgroup is made (StartSandbox).
            cgroup: None,
        }
    }

    /// The sandbox's own cgroup below the pod's, as containerd's cgroupfs driver names a
    /// sandbox's (`<parent>/<id>`); a sandbox without a parent has `<id>` below the
    /// shim's own cgroup, as runc puts a container without a cgroupsPath.
    pub fn cgroups_path(&self, id: &str) -> String {
        if self.cgroup_parent.is_empty() {
            id.to_string()
        } else {
            format!("{}/{id}", self.cgroup_parent.trim_end_matches('/'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(out: &mut Vec<u8>, n: u32, wire: u8) {
        out.push(((n << 3) as u8) | wire);
    }

    fn bytes(out: &mut Vec<u8>, n: u32, b: &[u8]) {
        tag(out, n, 2);
        out.push(b.len() as u8);
        out.extend_from_slice(b);
    }

    fn varint(out: &mut Vec<u8>, n: u32, v: u8) {
        tag(out, n, 0);
        out.push(v);
    }

    const URL: &str = "type.googleapis.com/runtime.v1.PodSandboxConfig";

    #[test]
    fn a_cri_config_gives_hostname_parent_namespaces_and_sysctls() {
        let mut meta = Vec::new();
        bytes(&mut meta, 1, b"web");
        bytes(&mut meta, 2, b"uid-1");
        bytes(&mut meta, 3, b"default");
        let mut ns = Vec::new();
        varint(&mut ns, 1, 0);
        varint(&mut ns, 2, 2);
        varint(&mut ns, 3, 0);
        let mut sc = Vec::new();
        bytes(&mut sc, 1, &ns);
        varint(&mut sc, 6, 1); // privileged: skipped
        let mut sysctl = Vec::new();
        bytes(&mut sysctl, 1, b"net.ipv4.ip_forward");
        bytes(&mut sysctl, 2, b"1");
        let mut linux = Vec::new();
        bytes(&mut linux, 1, b"/kubepods/pod1");
        bytes(&mut linux, 2, &sc);
        bytes(&mut linux, 3, &sysctl);
        let mut annotation = Vec::new();
        bytes(&mut annotation, 1, b"a/b");
        bytes(&mut annotation, 2, b"c");
        let mut dns = Vec::new();
        bytes(&mut dns, 1, b"10.0.0.10");
        bytes(&mut dns, 1, b"10.0.0.11");
        bytes(&mut dns, 2, b"svc.cluster.local");
        bytes(&mut dns, 3, b"ndots:5");
        let mut cfg = Vec::new();
        bytes(&mut cfg, 1, &meta);
        bytes(&mut cfg, 2, b"web-0");
        bytes(&mut cfg, 4, &dns);
        bytes(&mut cfg, 7, &annotation);
        bytes(&mut cfg, 3, b"/var/log/pods/x");
        bytes(&mut cfg, 8, &linux);
        let c = PodConfig::from_options(URL, &cfg).unwrap();
        assert_eq!(
            (c.name.as_str(), c.uid.as_str(), c.namespace.as_str()),
            ("web", "uid-1", "default")
        );
        assert_eq!(c.hostname, "web-0");
        assert_eq!(
            c.dns,
            Some(Dns {
                servers: vec!["10.0.0.10".into(), "10.0.0.11".into()],
                searches: vec!["svc.cluster.local".into()],
                options: vec!["ndots:5".into()],
            })
        );
        assert_eq!(c.annotations, [("a/b".into(), "c".into())]);
        assert_eq!(c.cgroup_parent, "/kubepods/pod1");
        assert_eq!(
            (c.network, c.pid, c.ipc),
            (Mode::Pod, Mode::Node, Mode::Pod)
        );
        assert!(!c.user_namespace);
        assert_eq!(c.cgroups_path("sb1"), "/kubepods/pod1/sb1");
        let ns = c.namespaces_for("/var/run/netns/cni-1");
        assert_eq!(
            ns.netns.as_deref(),
            Some(std::path::Path::new("/var/run/netns/cni-1"))
        );
        assert!(
            !ns.new_pid && ns.new_ipc && ns.new_uts,
            "hostPID: the node's pid namespace"
        );
        assert_eq!(ns.hostname.as_deref(), Some("web-0"));
        assert_eq!(ns.sysctls, [("net/ipv4/ip_forward".into(), "1".into())]);
    }

    #[test]
    fn host_network_keeps_the_nodes_network_and_uts_namespaces() {
        let mut ns = Vec::new();
        varint(&mut ns, 1, 2);
        let mut sc = Vec::new();
        bytes(&mut sc, 1, &ns);
        let mut linux = Vec::new();
        bytes(&mut linux, 2, &sc);
        let mut cfg = Vec::new();
        bytes(&mut cfg, 2, b"ignored");
        bytes(&mut cfg, 8, &linux);
        let c = PodConfig::from_options(URL, &cfg).unwrap();
        assert_eq!(c.dns, None, "no dns_config: the node's resolv.conf");
        let ns = c.namespaces_for("");
        assert_eq!(ns.netns, None);
        assert!(ns.new_pid && ns.new_ipc && !ns.new_uts);
        assert_eq!(ns.hostname, None, "the node's hostname");
        assert_eq!(c.cgroups_path("sb1"), "sb1");
    }

    #[test]
    fn a_user_namespace_is_seen_and_bad_options_are_named() {
        let mut userns = Vec::new();
        varint(&mut userns, 1, 0);
        let mut ns = Vec::new();
        bytes(&mut ns, 5, &userns);
        let mut sc = Vec::new();
        bytes(&mut sc, 1, &ns);
        let mut linux = Vec::new();
        bytes(&mut linux, 2, &sc);
        let mut cfg = Vec::new();
        bytes(&mut cfg, 8, &linux);
        assert!(PodConfig::from_options(URL, &cfg).unwrap().user_namespace);
        assert_eq!(
            PodConfig::from_options("", b"").unwrap(),
            PodConfig::default()
        );
        let e = PodConfig::from_options("x.Other", b"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x.Other"), "{e}");
        let e = PodConfig::from_options(URL, &[0x12, 0x09, b'a'])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("PodSandboxConfig"), "{e}");
        let mut bad = Vec::new();
        varint(&mut bad, 2, 9);
        let mut sc = Vec::new();
        bytes(&mut sc, 1, &bad);
        let mut linux = Vec::new();
        bytes(&mut linux, 2, &sc);
        let mut cfg = Vec::new();
        bytes(&mut cfg, 8, &linux);
        let e = PodConfig::from_options(URL, &cfg).unwrap_err().to_string();
        assert!(e.contains("namespace mode 9"), "{e}");
    }
}
