//! A user without root: `podinit run` and `podinit images` first move into a user
//! namespace of the user's own, as rootless podman does before anything else, mapped from
//! the user's subordinate ids (docs/interface.md §Without root).

use crate::sys::rootless::{self, mapping, ranges_of};

/// Enter the user's namespace when podinit runs as a user that is not root, before any
/// thread or child exists. Root, and a podinit already in a namespace it made, stay where
/// they are.
pub fn enter_if_unprivileged() -> Result<(), super::Error> {
    let uid = nix::unistd::geteuid();
    if uid.is_root() || rootless::entered().is_some() {
        return Ok(());
    }
    let gid = nix::unistd::getegid().as_raw();
    let name = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_default();
    let uid = uid.as_raw();
    let subuid = ranges_of("/etc/subuid", &name, uid);
    let subgid = ranges_of("/etc/subgid", &name, uid);
    let (uid_map, gid_map) = if subuid.is_empty() || subgid.is_empty() {
        // Said once a run: a pod whose files or users need other ids fails on them.
        crate::log::warn(&format!(
            "no subordinate ids for user {name:?} ({uid}) in /etc/subuid and /etc/subgid: \
             the pod's user namespace maps the user's own id only (as root, 0)"
        ));
        (mapping(uid, &[]), mapping(gid, &[]))
    } else {
        (mapping(uid, &subuid), mapping(gid, &subgid))
    };
    Ok(rootless::enter(uid, gid, uid_map, gid_map)?)
}

/// Why a rootless pod runs without cgroups below `root`, or None when it uses them (as
/// root, or with a delegated v2 subtree): `pod::rootless::cgroups` decides.
pub(super) fn without_cgroups(root: &crate::cgroup::CgroupRoot) -> Option<&'static str> {
    if !rootless::rootless() {
        return None;
    }
    let c = crate::pod::rootless::cgroups(root.is_v2(), root.parent_writable());
    crate::pod::rootless::why_without(c)
}
