//! The container's namespaces inside its pod.

use oci_spec::runtime::{LinuxNamespace, LinuxNamespaceType, Spec};

use super::{Ctx, Error, Result};

fn namespace(typ: LinuxNamespaceType) -> LinuxNamespace {
    let mut n = LinuxNamespace::default();
    n.set_typ(typ);
    n
}

/// The type as config.json spells it (the enum's `Display` says `mnt` and `net`).
fn oci_name(t: LinuxNamespaceType) -> String {
    match t {
        LinuxNamespaceType::Mount => "mount".into(),
        LinuxNamespaceType::Network => "network".into(),
        t => t.to_string(),
    }
}

/// Network, ipc and uts are the pod's (the container inherits them), so is pid with a
/// shared process namespace; the container has its own mount namespace and, otherwise,
/// its own pid namespace. A user namespace or a namespace `path` is refused.
pub fn with_pod_namespaces(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    use LinuxNamespaceType::*;
    let share_pid = ctx.cx.share_process_namespace;
    let linux = super::linux_mut(spec);
    let mut kept: Vec<LinuxNamespace> = Vec::new();
    for ns in linux.namespaces().iter().flatten() {
        let t = ns.typ();
        match t {
            Network | Ipc | Uts => continue,
            Pid if share_pid => continue,
            User => {
                return Err(Error::Unsupported(
                    "user namespaces are not supported".into(),
                ))
            }
            _ => {}
        }
        if ns
            .path()
            .as_ref()
            .is_some_and(|p| !p.as_os_str().is_empty())
        {
            return Err(Error::Unsupported(format!(
                "a {} namespace with a path is not supported",
                oci_name(t)
            )));
        }
        kept.push(namespace(t));
    }
    for want in [Mount, Pid] {
        if want == Pid && share_pid {
            continue;
        }
        if !kept.iter().any(|n| n.typ() == want) {
            kept.push(namespace(want));
        }
    }
    linux.set_namespaces(Some(kept));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn types(s: &Spec) -> Vec<LinuxNamespaceType> {
        let l = s.linux().as_ref().unwrap();
        l.namespaces().iter().flatten().map(|n| n.typ()).collect()
    }

    #[test]
    fn the_pods_namespaces_are_inherited() {
        let c = container("name: c");
        let s = apply(with_pod_namespaces, &c);
        assert_eq!(
            types(&s),
            [LinuxNamespaceType::Pid, LinuxNamespaceType::Mount]
        );
        let mut p = Pod::new(&c);
        p.share = true;
        let s = try_apply_in(with_pod_namespaces, &bundle(), &Default::default(), &c, &p).unwrap();
        assert_eq!(
            types(&s),
            [LinuxNamespaceType::Mount],
            "shared pid namespace"
        );
    }

    #[test]
    fn user_namespaces_and_paths_are_refused() {
        let c = container("name: c");
        let refused = |ns: LinuxNamespace| {
            let mut b = bundle();
            let l = b.spec.linux_mut().as_mut().unwrap();
            l.set_namespaces(Some(vec![ns]));
            try_apply_in(
                with_pod_namespaces,
                &b,
                &Default::default(),
                &c,
                &Pod::new(&c),
            )
            .unwrap_err()
            .to_string()
        };
        let user = namespace(LinuxNamespaceType::User);
        assert_eq!(refused(user), "user namespaces are not supported");
        let mut mount = namespace(LinuxNamespaceType::Mount);
        mount.set_path(Some("/proc/1/ns/mnt".into()));
        assert_eq!(
            refused(mount),
            "a mount namespace with a path is not supported"
        );
    }
}
