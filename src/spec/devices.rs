//! Devices: a privileged container's host devices, and the device cgroup's rules of any
//! spec in runc's order.

use oci_spec::runtime::{LinuxDevice, LinuxDeviceCgroup, LinuxDeviceType, Spec};
use std::path::Path;

use super::{Ctx, Result};
use crate::sys::devices::{self, Rule};

/// The device cgroup's rules for `spec`, as runc derives them (libcontainer/specconv's
/// `CreateCgroupConfig`): from nothing allowed, the spec's `linux.resources.devices` in
/// order, then runc's allowed devices, less those whose path the spec's `linux.devices`
/// makes (the spec's node takes priority). Being last, the allowed devices are never taken
/// away by the spec's rules; the spec's own nodes get no rule of their own.
pub fn cgroup_rules(spec: &Spec) -> Vec<Rule> {
    let linux = spec.linux().as_ref();
    let from_spec = linux
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().as_ref());
    let nodes: Vec<&Path> = linux
        .and_then(|l| l.devices().as_ref())
        .into_iter()
        .flatten()
        .map(|d| d.path().as_path())
        .collect();
    std::iter::once(devices::deny_all())
        .chain(from_spec.into_iter().flatten().filter_map(Rule::from_oci))
        .chain(
            devices::allowed()
                .into_iter()
                .filter(|(path, _)| path.is_none_or(|p| !nodes.contains(&Path::new(p))))
                .map(|(_, r)| r),
        )
        .collect()
}

/// A privileged container, as containerd's CRI makes it (`WithHostDevices`,
/// `WithAllDevicesAllowed`): the host's device nodes, and every device allowed.
pub fn with_privileged_devices(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    if !ctx.privileged() {
        return Ok(());
    }
    let linux = super::linux_mut(spec);
    let mut nodes = linux.devices().clone().unwrap_or_default();
    for n in devices::host_nodes() {
        if nodes.iter().any(|d| d.path() == &n.path) {
            continue;
        }
        let mut d = LinuxDevice::default();
        d.set_path(n.path);
        d.set_typ(if n.kind == 'b' {
            LinuxDeviceType::B
        } else {
            LinuxDeviceType::C
        });
        d.set_major(n.major as i64);
        d.set_minor(n.minor as i64);
        d.set_file_mode(Some(n.mode));
        d.set_uid(Some(0));
        d.set_gid(Some(0));
        nodes.push(d);
    }
    linux.set_devices(Some(nodes));
    let mut all = LinuxDeviceCgroup::default();
    all.set_allow(true);
    all.set_access(Some("rwm".into()));
    super::resources_mut(spec).set_devices(Some(vec![all]));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn spec(linux: serde_json::Value) -> Spec {
        serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2", "linux": linux})).unwrap()
    }

    fn lines(rules: &[Rule]) -> Vec<String> {
        rules
            .iter()
            .map(|r| format!("{} {}", if r.allow { "allow" } else { "deny" }, r.v1_line()))
            .collect()
    }

    #[test]
    fn runcs_order_the_specs_rules_then_the_allowed_devices() {
        let s = spec(serde_json::json!({
            "resources": {"devices": [{"allow": false, "access": "rwm"},
                                      {"allow": false, "type": "c", "major": 1, "minor": 3, "access": "rwm"},
                                      {"allow": true, "type": "c", "major": 10, "minor": 229, "access": "rw"}]},
            "devices": [{"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229}]
        }));
        let got = lines(&cgroup_rules(&s));
        assert_eq!(
            got[..4],
            [
                "deny a *:* rwm",
                "deny a *:* rwm",
                "deny c 1:3 rwm",
                "allow c 10:229 rw"
            ]
        );
        // The allowed devices follow, so the spec cannot deny /dev/null; the spec's node
        // gets no rule of its own.
        assert_eq!(got[4..], lines(&devices::defaults()[1..]));
    }

    #[test]
    fn a_node_of_the_spec_at_a_default_path_replaces_its_default_rule() {
        let s = spec(serde_json::json!({
            "devices": [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3}]
        }));
        let got = lines(&cgroup_rules(&s));
        assert!(!got.contains(&"allow c 1:3 rwm".to_string()), "{got:?}");
        assert!(got.contains(&"allow c 1:5 rwm".to_string()), "{got:?}");
        assert_eq!(got.len(), devices::defaults().len() - 1);
    }

    #[test]
    fn a_spec_without_linux_gets_the_defaults() {
        let s: Spec = serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2"})).unwrap();
        assert_eq!(cgroup_rules(&s), devices::defaults());
    }

    #[test]
    fn privileged_allows_every_device_and_has_the_hosts_nodes() {
        let c = container("name: c\nsecurityContext: {privileged: true}");
        let s = apply(with_privileged_devices, &c);
        let l = s.linux().as_ref().unwrap();
        let r = l.resources().as_ref().unwrap().devices().clone().unwrap();
        assert_eq!(
            lines(&r.iter().filter_map(Rule::from_oci).collect::<Vec<_>>()),
            ["allow a *:* rwm"]
        );
        let nodes = l.devices().clone().unwrap_or_default();
        assert_eq!(nodes.len(), devices::host_nodes().len());
        let rules = lines(&cgroup_rules(&s));
        assert_eq!(rules[1], "allow a *:* rwm");
        let s = apply(with_privileged_devices, &container("name: c"));
        assert!(s.linux().as_ref().unwrap().devices().is_none());
    }
}
