//! The root filesystem and what the pod, not the base, decides: hostname and cgroup.

use oci_spec::runtime::Spec;

use super::{Ctx, Result};

/// The base's root filesystem as `root.path`; no `hostname` or `domainname` (the pod's
/// UTS namespace applies) and no `linux.cgroupsPath` (podinit's cgroups do).
pub fn with_base_root(spec: &mut Spec, ctx: &Ctx) -> Result<()> {
    super::root_mut(spec).set_path(ctx.base.rootfs.clone());
    spec.set_hostname(None);
    spec.set_domainname(None);
    if let Some(l) = spec.linux_mut() {
        l.set_cgroups_path(None);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_base_root_and_nothing_of_its_hostname_or_cgroup() {
        let s = apply(with_base_root, &container("name: c"));
        assert_eq!(
            s.root().as_ref().unwrap().path(),
            &PathBuf::from("/b/rootfs")
        );
        assert!(s.hostname().is_none());
        assert!(s.linux().as_ref().unwrap().cgroups_path().is_none());
    }
}
