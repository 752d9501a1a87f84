//! A `cgroup` mount on a cgroup v1 host, as runc makes it: a tmpfs at the destination and,
//! in it, each of the host's v1 hierarchies bound at the container's own cgroup (a pod's
//! containers get no v1 view; a container of its own gets runc's).

use oci_spec::runtime::Spec;
use std::path::{Path, PathBuf};

use crate::runtime::mounts::{self, MountKind, MountPlan};
use crate::sys::cgroup::Placement;

/// `plans` (one per `spec.mounts` entry, in order) with each v1 `cgroup` mount expanded.
pub fn expand(plans: Vec<MountPlan>, spec: &Spec, placement: &Placement) -> Vec<MountPlan> {
    if crate::sys::cgroup::unified() || !plans.iter().any(|m| m.kind == MountKind::Cgroup) {
        return plans;
    }
    let hierarchies = v1_hierarchies();
    let dirs: Vec<&Path> = placement.tasks.iter().filter_map(|t| t.parent()).collect();
    let mut out = Vec::new();
    for (plan, m) in plans.into_iter().zip(spec.mounts().iter().flatten()) {
        if plan.kind != MountKind::Cgroup {
            out.push(plan);
            continue;
        }
        let opts = m.options().clone().unwrap_or_default();
        let tmpfs_opts: Vec<String> = ["nosuid", "noexec", "nodev", "mode=755"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        out.push(mounts::plan(
            &plan.destination,
            Some("tmpfs"),
            Some(Path::new("tmpfs")),
            &tmpfs_opts,
        ));
        for h in &hierarchies {
            let Some(dir) = dirs.iter().find(|d| d.starts_with(h)) else {
                continue;
            };
            let Some(name) = h.file_name() else { continue };
            let mut bind_opts = opts.clone();
            bind_opts.push("rbind".into());
            out.push(mounts::plan(
                &plan.destination.join(name),
                Some("bind"),
                Some(dir),
                &bind_opts,
            ));
        }
    }
    out
}

/// The mount points of the host's v1 hierarchies (not the unified one of a hybrid host).
fn v1_hierarchies() -> Vec<PathBuf> {
    crate::sys::proc::own_mountinfo()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.fs_type == "cgroup")
        .map(|m| m.mount_point)
        .collect()
}
