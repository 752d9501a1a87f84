//! runc's rootless rules (`--rootless=auto|true|false`, docs/runc.md): whether the caller
//! counts as rootless, where its state goes, and the cgroup it may go without.

use oci_spec::runtime::LinuxResources;

use crate::cgroup::{CgroupRoot, Group};

/// `--rootless`: `true` and `false` as given; `auto` (the default) is rootless when not
/// root, or root of a user namespace that does not map the host's ids (runc's rule).
pub fn rootless(flag: Option<&str>) -> bool {
    match flag {
        Some("true") => true,
        Some("false") => false,
        _ => crate::sys::rootless::rootless(),
    }
}

/// The default `--root` of a rootless caller: `$XDG_RUNTIME_DIR/podinit-runc`, as runc
/// uses `$XDG_RUNTIME_DIR/runc`; None keeps the root default.
pub fn default_root(rootless: bool) -> Option<std::path::PathBuf> {
    let xdg = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty())?;
    rootless.then(|| std::path::PathBuf::from(xdg).join("podinit-runc"))
}

/// runc's fs manager, rootless: a cgroup that cannot be made for lack of permission is
/// gone without (no cgroup) when the spec gives no `cgroupsPath`; it is an error with one.
pub fn ignorable(rootless: bool, cgroups_path: Option<&str>, err: &std::io::Error) -> bool {
    let denied = matches!(
        err.raw_os_error(),
        Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::EROFS)
    ) || matches!(
        err.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    );
    rootless && cgroups_path.is_none() && denied
}

/// The group of a container that goes without a cgroup.
pub fn no_group(id: &str) -> Group {
    CgroupRoot::none().group(id)
}

/// A limit that a container without a cgroup was asked for, as runc refuses it: `cannot
/// set memory limit: container could not join or create cgroup`. runc's subsystems in its
/// order; device rules are ignored without root, as runc ignores them. On cgroup v2 runc's
/// fs2 manager refuses it in its own words, with `err`, why the cgroup could not be made.
pub fn unsettable(r: &LinuxResources, v2: bool, err: &std::io::Error) -> Option<String> {
    let cpu = r.cpu().as_ref();
    let set = [
        (
            "cpuset",
            cpu.is_some_and(|c| c.cpus().is_some() || c.mems().is_some()),
        ),
        ("memory", r.memory().is_some()),
        (
            "cpu",
            cpu.is_some_and(|c| {
                c.shares().is_some()
                    || c.quota().is_some()
                    || c.period().is_some()
                    || c.realtime_runtime().is_some()
                    || c.realtime_period().is_some()
            }),
        ),
        ("pids", r.pids().is_some()),
        ("blkio", r.block_io().is_some()),
        (
            "hugetlb",
            r.hugepage_limits().as_ref().is_some_and(|h| !h.is_empty()),
        ),
        (
            "net_cls",
            r.network().as_ref().is_some_and(|n| n.class_id().is_some()),
        ),
        (
            "net_prio",
            r.network()
                .as_ref()
                .is_some_and(|n| n.priorities().as_ref().is_some_and(|p| !p.is_empty())),
        ),
    ];
    set.iter().find(|(_, on)| *on).map(|(name, _)| {
        if v2 {
            format!("rootless needs no limits + no cgrouppath when no permission is granted for cgroups: {err}")
        } else {
            format!("cannot set {name} limit: container could not join or create cgroup")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_permission_errors_without_a_path_are_ignored() {
        let eperm = std::io::Error::from_raw_os_error(libc::EPERM);
        let enoent = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert!(ignorable(true, None, &eperm));
        assert!(ignorable(
            true,
            None,
            &std::io::Error::from_raw_os_error(libc::EACCES)
        ));
        assert!(!ignorable(true, Some("/x"), &eperm));
        assert!(!ignorable(false, None, &eperm));
        assert!(!ignorable(true, None, &enoent));
    }

    #[test]
    fn limits_without_a_cgroup_are_refused_as_runc_names_them() {
        let r = |v: serde_json::Value| -> LinuxResources { serde_json::from_value(v).unwrap() };
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        let unsettable = |r: &LinuxResources| unsettable(r, false, &e);
        assert_eq!(unsettable(&r(serde_json::json!({}))), None);
        assert_eq!(
            unsettable(&r(
                serde_json::json!({"devices": [{"allow": false, "access": "rwm"}]})
            )),
            None
        );
        assert_eq!(
            unsettable(&r(serde_json::json!({"memory": {"limit": 1048576}}))).as_deref(),
            Some("cannot set memory limit: container could not join or create cgroup")
        );
        assert_eq!(
            unsettable(&r(
                serde_json::json!({"pids": {"limit": 5}, "cpu": {"shares": 2}})
            ))
            .as_deref(),
            Some("cannot set cpu limit: container could not join or create cgroup")
        );
    }

    #[test]
    fn on_v2_the_refusal_is_fs2_s() {
        let r: LinuxResources =
            serde_json::from_value(serde_json::json!({"memory": {"limit": 1048576}})).unwrap();
        let e = std::io::Error::from_raw_os_error(libc::EACCES);
        assert!(unsettable(&r, true, &e).unwrap().starts_with(
            "rootless needs no limits + no cgrouppath when no permission is granted for cgroups: "
        ));
        assert_eq!(unsettable(&LinuxResources::default(), true, &e), None);
    }

    #[test]
    fn flag_values() {
        assert!(rootless(Some("true")));
        assert!(!rootless(Some("false")));
    }
}
