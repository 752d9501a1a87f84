//! Which systemd unit a container gets and where its cgroup is, from
//! `linux.cgroupsPath` as runc's systemd driver reads it: `slice:prefix:name` is the scope
//! `<prefix>-<name>.scope` in `slice` (or the slice `name` itself when it ends in
//! `.slice`); no path: `runc-<id>.scope` in `system.slice`.

use super::Error;
use crate::cgroup::Result;

/// A name that names no unit, in runc's words.
fn invalid(why: String) -> crate::cgroup::Error {
    Error::Name(why).into()
}

/// A container's unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The unit's name: `<prefix>-<name>.scope`, or a slice's own name.
    pub name: String,
    /// The slice it goes in (a scope's `Slice=`, a slice's `Wants=`).
    pub slice: String,
    /// Its cgroup's path from the hierarchy's root: the slice expanded, then the unit.
    pub cgroup: String,
    /// For the description (`libcontainer container <name>`).
    pub short: String,
}

impl Unit {
    pub fn is_slice(&self) -> bool {
        self.name.ends_with(".slice")
    }
}

/// The unit of the container `id` whose `linux.cgroupsPath` is `cgroups_path`.
pub fn parse(cgroups_path: Option<&str>, id: &str) -> Result<Unit> {
    let (slice, prefix, name) = match cgroups_path.filter(|p| !p.is_empty()) {
        None => ("", "runc", id),
        Some(p) => {
            let parts: Vec<&str> = p.split(':').collect();
            let &[slice, prefix, name] = parts.as_slice() else {
                return Err(invalid(format!(
                    "expected cgroupsPath to be of format \"slice:prefix:name\" for systemd \
                     cgroups, got {p:?} instead"
                )));
            };
            (slice, prefix, name)
        }
    };
    let slice = if slice.is_empty() {
        "system.slice"
    } else {
        slice
    };
    let unit = if name.ends_with(".slice") {
        name.to_string()
    } else {
        format!("{prefix}-{name}.scope")
    };
    if unit.contains('/') {
        return Err(invalid(format!(
            "invalid unit name {unit:?}: it contains a \"/\""
        )));
    }
    let parent = expand_slice(slice)?;
    Ok(Unit {
        cgroup: format!("{}/{unit}", parent.trim_end_matches('/')),
        name: unit,
        slice: slice.to_string(),
        short: name.to_string(),
    })
}

/// The slice of a pod as kubelet's systemd driver names it: its uid with `-` escaped as
/// `_`, after `pod`, in the parent slice (`kubepods-burstable.slice` gives
/// `kubepods-burstable-pod<uid>.slice`; `-.slice`, the root, gives `pod<uid>.slice`).
pub fn pod_slice(parent: &str, pod_uid: &str) -> Result<Unit> {
    expand_slice(parent)?;
    if pod_uid.is_empty()
        || !pod_uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
    {
        return Err(invalid(format!(
            "metadata.uid {pod_uid:?} cannot name a systemd slice: only letters, digits, \"-\", \"_\", \".\" and \":\""
        )));
    }
    let stem = parent.trim_end_matches(".slice");
    let own = format!("pod{}", pod_uid.replace('-', "_"));
    let name = if stem == "-" {
        format!("{own}.slice")
    } else {
        format!("{stem}-{own}.slice")
    };
    Ok(Unit {
        cgroup: expand_slice(&name)?,
        slice: parent.to_string(),
        short: name.clone(),
        name,
    })
}

/// The scope `<prefix>-<name>.scope` in `slice` (a pod's container).
pub fn scope(slice: &str, prefix: &str, name: &str) -> Result<Unit> {
    parse(Some(&format!("{slice}:{prefix}:{name}")), name)
}

/// The cgroup path of a slice: `a-b-c.slice` is `/a.slice/a-b.slice/a-b-c.slice`, `-.slice`
/// the root (runc's `ExpandSlice`, systemd's slice naming).
pub fn expand_slice(slice: &str) -> Result<String> {
    let invalid = || invalid(format!("invalid slice name: {slice}"));
    let Some(stem) = slice.strip_suffix(".slice") else {
        return Err(invalid());
    };
    if slice.contains('/') {
        return Err(invalid());
    }
    if stem == "-" {
        return Ok("/".into());
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for part in stem.split('-') {
        if part.is_empty() {
            return Err(invalid());
        }
        path.push_str(&format!("/{prefix}{part}.slice"));
        prefix.push_str(&format!("{part}-"));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_expand_as_runc_s_expand_slice() {
        assert_eq!(expand_slice("system.slice").unwrap(), "/system.slice");
        assert_eq!(
            expand_slice("kubepods-besteffort-pod1.slice").unwrap(),
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice"
        );
        assert_eq!(expand_slice("-.slice").unwrap(), "/");
        for bad in [
            ".slice",
            "a",
            "a--b.slice",
            "-a.slice",
            "a/b.slice",
            "a-.slice",
        ] {
            assert_eq!(
                expand_slice(bad).unwrap_err().to_string(),
                format!("invalid slice name: {bad}")
            );
        }
    }

    #[test]
    fn cgroups_paths_name_units_as_runc_s_specconv() {
        let u = parse(Some("test.slice:cri-containerd:c1"), "c1").unwrap();
        assert_eq!(u.name, "cri-containerd-c1.scope");
        assert_eq!(u.slice, "test.slice");
        assert_eq!(u.cgroup, "/test.slice/cri-containerd-c1.scope");
        assert!(!u.is_slice());
        let k = parse(
            Some("kubepods-burstable-pod9.slice:cri-containerd:abc"),
            "abc",
        )
        .unwrap();
        assert_eq!(
            k.cgroup,
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod9.slice/\
             cri-containerd-abc.scope"
        );
        // No path: runc-<id>.scope in system.slice; an empty slice: system.slice.
        let d = parse(None, "c2").unwrap();
        assert_eq!(
            (d.name.as_str(), d.cgroup.as_str()),
            ("runc-c2.scope", "/system.slice/runc-c2.scope")
        );
        assert_eq!(parse(Some(":p:n"), "x").unwrap().slice, "system.slice");
        // A name that is a slice is the unit itself.
        let s = parse(Some("-.slice:x:my.slice"), "x").unwrap();
        assert_eq!(
            (s.name.as_str(), s.cgroup.as_str()),
            ("my.slice", "/my.slice")
        );
        assert!(s.is_slice());
    }

    #[test]
    fn pod_slices_are_named_as_kubelet_s_systemd_driver_names_them() {
        let uid = "8dbb6a3e-1c1a-4f0e-9a44-1b2c3d4e5f60";
        let b = pod_slice("kubepods-burstable.slice", uid).unwrap();
        assert_eq!(
            b.name,
            "kubepods-burstable-pod8dbb6a3e_1c1a_4f0e_9a44_1b2c3d4e5f60.slice"
        );
        assert_eq!(b.slice, "kubepods-burstable.slice");
        assert_eq!(
            b.cgroup,
            "/kubepods.slice/kubepods-burstable.slice/\
             kubepods-burstable-pod8dbb6a3e_1c1a_4f0e_9a44_1b2c3d4e5f60.slice"
        );
        assert!(b.is_slice());
        let g = pod_slice("kubepods.slice", "u1").unwrap();
        assert_eq!(
            (g.name.as_str(), g.cgroup.as_str()),
            (
                "kubepods-podu1.slice",
                "/kubepods.slice/kubepods-podu1.slice"
            )
        );
        let r = pod_slice("-.slice", "u1").unwrap();
        assert_eq!(
            (r.name.as_str(), r.cgroup.as_str()),
            ("podu1.slice", "/podu1.slice")
        );
        assert_eq!(
            pod_slice("/kubepods", "u1").unwrap_err().to_string(),
            "invalid slice name: /kubepods"
        );
        let e = pod_slice("kubepods.slice", "a/b").unwrap_err();
        assert!(e.to_string().contains("metadata.uid"), "{e}");
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        assert!(pod_slice("kubepods.slice", "").is_err());
        let c = scope(&g.name, "podinit", "abc").unwrap();
        assert_eq!(c.name, "podinit-abc.scope");
        assert_eq!(
            c.cgroup,
            "/kubepods.slice/kubepods-podu1.slice/podinit-abc.scope"
        );
    }

    #[test]
    fn bad_paths_are_refused_with_runc_s_words() {
        let e = parse(Some("/a/b"), "c").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected cgroupsPath to be of format \"slice:prefix:name\" for systemd cgroups, \
             got \"/a/b\" instead"
        );
        assert!(parse(Some("a:b:c:d"), "c").is_err());
        assert_eq!(
            parse(Some("bad:p:n"), "c").unwrap_err().to_string(),
            "invalid slice name: bad"
        );
        assert!(parse(Some("a.slice:p:x/y"), "c").is_err());
    }
}
