//! The security context: user and groups, capabilities, the root's writability and
//! privilege escalation, a privileged container, an unmasked /proc.

use oci_spec::runtime::{Capabilities, Capability, LinuxCapabilities, Spec};
use serde::Deserialize;

use super::{Ctx, Error, Result};
use crate::bundle::Bundle;

/// An image whose config's `User` could not be resolved may still run as `runAsUser`.
pub fn with_image_user(_spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let Some(e) = ctx.base.image.as_ref().and_then(|i| i.user_error.as_ref()) else {
        return Ok(());
    };
    let of_container = ctx
        .container
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_user);
    let of_pod = ctx
        .pod
        .security_context
        .as_ref()
        .and_then(|s| s.run_as_user);
    match of_container.or(of_pod) {
        Some(_) => Ok(()),
        None => Err(Error::Invalid(e.clone())),
    }
}

fn id(v: i64, field: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::Invalid(format!("{field}: Invalid value: {v}")))
}

/// `runAsUser`, `runAsGroup`, the groups (`supplementalGroupsPolicy`,
/// `supplementalGroups`, `fsGroup`), and `runAsNonRoot` (container over pod).
pub fn with_user(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let psc = ctx.pod.security_context.clone().unwrap_or_default();
    let csc = ctx.container.security_context.clone().unwrap_or_default();
    let user = super::process_mut(spec)?.user_mut();
    let run_as_user = csc
        .run_as_user
        .or(psc.run_as_user)
        .map(|u| id(u, "runAsUser"))
        .transpose()?;
    let run_as_group = csc
        .run_as_group
        .or(psc.run_as_group)
        .map(|g| id(g, "runAsGroup"))
        .transpose()?;
    // `Strict`: only runAsGroup, supplementalGroups and fsGroup, nothing the image's
    // /etc/group or config adds (the CRI's SupplementalGroupsPolicy).
    let strict = psc.supplemental_groups_policy.as_deref() == Some("Strict");
    if strict {
        user.set_additional_gids(Some(Vec::new()));
    }
    let uid = run_as_user.unwrap_or(user.uid());
    let (passwd_gid, groups) = passwd_lookup(ctx.base, uid);
    if run_as_user.is_some() {
        user.set_uid(uid);
        if run_as_group.is_none() {
            user.set_gid(passwd_gid);
        }
    }
    let mut extra: Vec<u32> = Vec::new();
    // `Merge`: the groups /etc/group lists the user in, as containerd's
    // WithAdditionalGIDs adds them for the image's user or runAsUser.
    if !strict {
        extra.extend(groups);
    }
    if let Some(gid) = run_as_group {
        user.set_gid(gid);
    }
    for g in psc.supplemental_groups.iter().flatten() {
        extra.push(id(*g, "supplementalGroups")?);
    }
    if let Some(g) = psc.fs_group {
        extra.push(id(g, "fsGroup")?);
    }
    if !extra.is_empty() {
        let mut all = user.additional_gids().clone().unwrap_or_default();
        for g in extra {
            if !all.contains(&g) {
                all.push(g);
            }
        }
        user.set_additional_gids(Some(all));
    }
    if csc.run_as_non_root.or(psc.run_as_non_root) == Some(true) && user.uid() == 0 {
        return Err(Error::Invalid(
            "container has runAsNonRoot and image will run as root".into(),
        ));
    }
    Ok(())
}

/// A capability named as Kubernetes or OCI names it (`NET_RAW`, `cap_net_raw`).
fn capability(name: &str) -> Option<Capability> {
    Capability::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(name))
        .ok()
}

/// Every capability this kernel library knows.
fn all_caps() -> Capabilities {
    caps::all()
        .iter()
        .filter_map(|c| capability(&c.to_string()))
        .collect()
}

/// `capabilities.add` and `drop` over the base's bounding, effective and permitted sets;
/// drops also leave the inheritable and ambient sets. Nothing for a privileged container
/// (it gets every capability, [`with_privileged`]).
pub fn with_capabilities(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    if ctx.privileged() {
        return Ok(());
    }
    let Some(caps) = ctx
        .container
        .security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref())
    else {
        return Ok(());
    };
    let is_all = |n: &str| n.eq_ignore_ascii_case("ALL") || n.eq_ignore_ascii_case("CAP_ALL");
    let add_all = caps.add.iter().flatten().any(|n| is_all(n));
    let drop_all = caps.drop.iter().flatten().any(|n| is_all(n));
    let mut adds = Vec::new();
    for (i, n) in caps.add.iter().flatten().enumerate() {
        if !is_all(n) {
            adds.push(capability(n).ok_or_else(|| {
                Error::Invalid(format!("capabilities.add[{i}]: Unsupported value: {n:?}"))
            })?);
        }
    }
    // A capability unknown here is in no set: dropping it changes nothing.
    let drops: Vec<Capability> = caps
        .drop
        .iter()
        .flatten()
        .filter_map(|n| capability(n))
        .collect();
    let process = super::process_mut(spec)?;
    let mut sets = process.capabilities().clone().unwrap_or_else(empty_caps);
    let granted = |cur: &Option<Capabilities>| {
        let mut cur = cur.clone().unwrap_or_default();
        if add_all {
            cur = all_caps();
        }
        if drop_all {
            cur.clear();
        }
        cur.extend(adds.iter().copied());
        cur.retain(|c| !drops.contains(c));
        Some(cur)
    };
    let kept = |cur: &Option<Capabilities>| {
        let mut cur = cur.clone().unwrap_or_default();
        if drop_all {
            cur.clear();
        }
        cur.retain(|c| !drops.contains(c));
        Some(cur)
    };
    let (b, e, p) = (
        granted(sets.bounding()),
        granted(sets.effective()),
        granted(sets.permitted()),
    );
    let (i, a) = (kept(sets.inheritable()), kept(sets.ambient()));
    sets.set_bounding(b);
    sets.set_effective(e);
    sets.set_permitted(p);
    sets.set_inheritable(i);
    sets.set_ambient(a);
    process.set_capabilities(Some(sets));
    Ok(())
}

/// No capability at all (`LinuxCapabilities::default()` has three).
fn empty_caps() -> LinuxCapabilities {
    let mut c = LinuxCapabilities::default();
    c.set_bounding(None);
    c.set_effective(None);
    c.set_permitted(None);
    c.set_inheritable(None);
    c.set_ambient(None);
    c
}

/// `readOnlyRootFilesystem` → `root.readonly`; `allowPrivilegeEscalation` →
/// `noNewPrivileges`, its opposite.
pub fn with_root_and_privileges(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let Some(csc) = ctx.container.security_context.as_ref() else {
        return Ok(());
    };
    if let Some(ro) = csc.read_only_root_filesystem {
        super::root_mut(spec).set_readonly(Some(ro));
    }
    if let Some(ape) = csc.allow_privilege_escalation {
        super::process_mut(spec)?.set_no_new_privileges(Some(!ape));
    }
    Ok(())
}

/// The capabilities podinit holds (containerd's `cap.Current()`).
pub(super) fn held_caps() -> Capabilities {
    match caps::read(None, caps::CapSet::Effective) {
        Ok(set) => set
            .iter()
            .filter_map(|c| capability(&c.to_string()))
            .collect(),
        Err(_) => all_caps(),
    }
}

/// `privileged: true`, as containerd's CRI makes it: every capability podinit itself holds
/// (asking for more would fail capset where podinit runs with a narrowed bounding set),
/// nothing masked or read-only in /proc, and /sys and the cgroup filesystem writable. Its
/// devices are [`super::devices::with_privileged_devices`]'s.
pub fn with_privileged(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    if !ctx.privileged() {
        return Ok(());
    }
    let held = held_caps();
    let process = super::process_mut(spec)?;
    let mut sets = process.capabilities().clone().unwrap_or_else(empty_caps);
    sets.set_bounding(Some(held.clone()));
    sets.set_effective(Some(held.clone()));
    sets.set_permitted(Some(held));
    process.set_capabilities(Some(sets));
    unmask(spec);
    for m in spec.mounts_mut().iter_mut().flatten() {
        if matches!(m.typ().as_deref(), Some("sysfs" | "cgroup" | "cgroup2")) {
            if let Some(opts) = m.options_mut() {
                for o in opts.iter_mut().filter(|o| *o == "ro") {
                    *o = "rw".into();
                }
            }
        }
    }
    Ok(())
}

/// `procMount: Unmasked` (admitted with `hostUsers: false` only): /proc as the kernel
/// shows it, as the CRI's unmasked proc mount is.
pub fn with_proc_mount(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    let unmasked = ctx
        .container
        .security_context
        .as_ref()
        .and_then(|s| s.proc_mount.as_deref())
        == Some("Unmasked");
    if unmasked {
        unmask(spec);
    }
    Ok(())
}

fn unmask(spec: &mut Spec) {
    if let Some(l) = spec.linux_mut() {
        l.set_masked_paths(None);
        l.set_readonly_paths(None);
    }
}

/// The primary gid of `uid` and the groups it belongs to, from the rootfs' `/etc/passwd`
/// and `/etc/group` (0 and none when it is not listed), as containerd does for a bare uid.
fn passwd_lookup(b: &Bundle, uid: u32) -> (u32, Vec<u32>) {
    let passwd = b.read_file("etc/passwd").unwrap_or_default();
    let entry = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[2].parse::<u32>().ok() == Some(uid))
            .then(|| (f[0].to_string(), f[3].parse::<u32>().unwrap_or(0)))
    });
    let Some((name, gid)) = entry else {
        return (0, Vec::new());
    };
    let group = b.read_file("etc/group").unwrap_or_default();
    let groups = group
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let member = f.len() >= 4 && f[3].split(',').any(|m| m == name);
            let g = f.get(2)?.parse::<u32>().ok()?;
            (member && g != gid).then_some(g)
        })
        .collect();
    (gid, groups)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    /// The image user's groups in a rootfs of its own; the process's user after the opt.
    fn groups_with(
        pod_sc: &str,
        csc: &str,
        image_user: (u32, u32, &[u32]),
    ) -> (u32, u32, Vec<u32>) {
        let root = std::env::temp_dir().join(format!(
            "podinit-sgp-{}-{}",
            std::process::id(),
            crate::util::random_hex(4)
        ));
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(
            root.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n",
        )
        .unwrap();
        std::fs::write(
            root.join("etc/group"),
            "root:x:0:\napp:x:1000:\nusers:x:100:app\nwheel:x:10:root,app\n",
        )
        .unwrap();
        let mut b = bundle();
        b.lowers = vec![root.clone()];
        let u = b.spec.process_mut().as_mut().unwrap().user_mut();
        u.set_uid(image_user.0);
        u.set_gid(image_user.1);
        u.set_additional_gids((!image_user.2.is_empty()).then(|| image_user.2.to_vec()));
        let pod = pod(&format!("securityContext: {pod_sc}"));
        let c = container(&format!("name: c\nsecurityContext: {csc}"));
        let s = try_apply_in(with_user, &b, &pod, &c, &Pod::new(&c)).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        let u = s.process().as_ref().unwrap().user();
        (
            u.uid(),
            u.gid(),
            u.additional_gids().clone().unwrap_or_default(),
        )
    }

    #[test]
    fn merge_adds_the_image_groups_and_strict_does_not() {
        assert_eq!(
            groups_with(
                "{runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000]}",
                "{}",
                (0, 0, &[42])
            ),
            (1000, 3000, vec![42, 100, 10, 4000]),
            "Merge is the default"
        );
        assert_eq!(
            groups_with("{runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000], fsGroup: 5000, supplementalGroupsPolicy: Strict}", "{}", (0, 0, &[42])),
            (1000, 3000, vec![4000, 5000])
        );
        // Without runAsUser, the image's user's groups (containerd's WithAdditionalGIDs).
        assert_eq!(
            groups_with("{supplementalGroupsPolicy: Merge}", "{}", (0, 0, &[])),
            (0, 0, vec![10])
        );
        assert_eq!(
            groups_with("{}", "{runAsUser: 1000}", (0, 0, &[])),
            (1000, 1000, vec![100, 10]),
            "the primary gid from /etc/passwd"
        );
    }

    #[test]
    fn user_groups_and_non_root() {
        let c = container("name: c\nsecurityContext: {runAsUser: 1000, runAsGroup: 2000}");
        let p = pod("securityContext: {supplementalGroups: [5], fsGroup: 7}");
        let s = try_apply(with_user, &p, &c).unwrap();
        let u = s.process().as_ref().unwrap().user();
        assert_eq!((u.uid(), u.gid()), (1000, 2000));
        assert_eq!(u.additional_gids().clone().unwrap(), [5, 7]);
        let c = container("name: c\nsecurityContext: {runAsNonRoot: true}");
        let e = try_apply(with_user, &PodSpec::default(), &c)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "container has runAsNonRoot and image will run as root");
        let c = container("name: c\nsecurityContext: {runAsUser: -1}");
        let e = try_apply(with_user, &PodSpec::default(), &c)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "runAsUser: Invalid value: -1");
    }

    #[test]
    fn capabilities_add_and_drop() {
        let c = container(
            "name: c\nsecurityContext: {capabilities: {add: [SYS_ADMIN], drop: [NET_RAW]}}",
        );
        let s = apply(with_capabilities, &c);
        let caps = caps_of(&s);
        for set in [caps.bounding(), caps.effective(), caps.permitted()] {
            assert_eq!(names(set), ["CAP_CHOWN", "CAP_SYS_ADMIN"]);
        }
        assert!(names(caps.inheritable()).is_empty());
        let c = container("name: c\nsecurityContext: {capabilities: {drop: [ALL], add: [kill]}}");
        let s = apply(with_capabilities, &c);
        let caps = caps_of(&s);
        assert_eq!(names(caps.permitted()), ["CAP_KILL"]);
        let c = container("name: c\nsecurityContext: {capabilities: {add: [ALL]}}");
        let s = apply(with_capabilities, &c);
        let caps = caps_of(&s);
        assert_eq!(caps.bounding().as_ref().unwrap(), &all_caps());
        let c = container("name: c\nsecurityContext: {capabilities: {add: [NOT_ONE]}}");
        let e = try_apply(with_capabilities, &PodSpec::default(), &c)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "capabilities.add[0]: Unsupported value: \"NOT_ONE\"");
    }

    #[test]
    fn read_only_root_and_no_new_privileges() {
        let c = container("name: c\nsecurityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}");
        let s = apply(with_root_and_privileges, &c);
        assert_eq!(s.root().as_ref().unwrap().readonly(), Some(true));
        assert_eq!(
            s.process().as_ref().unwrap().no_new_privileges(),
            Some(true)
        );
        let s = apply(with_root_and_privileges, &container("name: c"));
        assert_eq!(
            s.process().as_ref().unwrap().no_new_privileges(),
            Some(false)
        );
    }

    #[test]
    fn privileged_holds_every_capability_and_nothing_is_masked() {
        let c =
            container("name: c\nsecurityContext: {privileged: true, capabilities: {drop: [ALL]}}");
        let mut b = bundle();
        let l = b.spec.linux_mut().as_mut().unwrap();
        l.set_masked_paths(Some(vec!["/proc/kcore".into()]));
        let m: oci_spec::runtime::Mount = serde_json::from_value(serde_json::json!(
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "ro"]}
        ))
        .unwrap();
        b.spec.mounts_mut().as_mut().unwrap().push(m);
        let mut s = b.spec.clone();
        let p = Pod::new(&c);
        let cx = p.context();
        let ctx = Ctx {
            base: &b,
            pod: &PodSpec::default(),
            container: &c,
            cx: &cx,
            vars: Default::default(),
        };
        with_capabilities(&mut s, &ctx).unwrap();
        with_privileged(&mut s, &ctx).unwrap();
        let caps = caps_of(&s);
        assert_eq!(caps.bounding().as_ref().unwrap(), &held_caps());
        assert!(s.linux().as_ref().unwrap().masked_paths().is_none());
        let sys = s.mounts().as_ref().unwrap().last().unwrap();
        assert_eq!(sys.options().as_ref().unwrap(), &["nosuid", "rw"]);
    }

    #[test]
    fn unmasked_proc_drops_masked_and_read_only_paths() {
        let c = container("name: c\nsecurityContext: {procMount: Unmasked}");
        let mut b = bundle();
        let l = b.spec.linux_mut().as_mut().unwrap();
        l.set_masked_paths(Some(vec!["/proc/kcore".into()]));
        l.set_readonly_paths(Some(vec!["/proc/sys".into()]));
        let s = apply_on(with_proc_mount, &b, &c);
        let l = s.linux().as_ref().unwrap();
        assert!(l.masked_paths().is_none() && l.readonly_paths().is_none());
        let s = apply_on(with_proc_mount, &b, &container("name: c"));
        assert!(s.linux().as_ref().unwrap().masked_paths().is_some());
    }

    #[test]
    fn an_unresolved_image_user_needs_run_as_user() {
        let mut b = bundle();
        b.image = Some(crate::bundle::ImageRef {
            name: "i".into(),
            id: "i@sha256:0".into(),
            user_error: Some("user \"x\": no such user".into()),
        });
        let c = container("name: c");
        let e = try_apply_in(with_image_user, &b, &PodSpec::default(), &c, &Pod::new(&c))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "user \"x\": no such user");
        let p = pod("securityContext: {runAsUser: 5}");
        assert!(try_apply_in(with_image_user, &b, &p, &c, &Pod::new(&c)).is_ok());
    }
}
