//! `hostUsers: false` in the outer process: refused where podinit cannot make the pod's
//! user namespace (PID-1 mode, `--netns`), else its block of host ids is allocated, the
//! namespace made, and the kernel probed for idmapped mounts on every filesystem the pod
//! uses, before the supervisor exists.

use std::path::{Path, PathBuf};

use super::{Error, RunOptions};
use crate::sandbox::statedir::StateDir;
use crate::sandbox::userns::{self, Block, PodUserns};
use crate::supervisor;

/// kubelet's default `maxPods`, which its check of the `kubelet` user's range uses.
const MAX_PODS: u32 = 110;

/// Why a pod with `hostUsers: false` cannot run as podinit was started, if it cannot.
pub(super) fn refusal(opts: &RunOptions, pid1: bool) -> Option<String> {
    if pid1 {
        return Some(
            "spec.hostUsers: false is not supported in PID-1 mode: podinit must make the pod's user namespace and the namespaces it owns itself".into(),
        );
    }
    if opts.netns.is_some() {
        return Some(
            "--netns cannot be used with spec.hostUsers: false: the pod's network namespace must be owned by its user namespace".into(),
        );
    }
    None
}

/// Allocate the pod's block (kept in `block` until the pod ends), make its user
/// namespace and check that every filesystem of the pod takes idmapped mounts.
pub(super) fn make(
    cfg: &supervisor::Config,
    sd: &StateDir,
    block: &mut Option<Block>,
) -> Result<PodUserns, Error> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let range = crate::pod::userns::kubelet_range(
        &read("/etc/passwd"),
        &read("/etc/subuid"),
        &read("/etc/subgid"),
        MAX_PODS,
    )?;
    let meta = &cfg.pod.metadata;
    let owner = format!(
        "{}/{} {}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or(""),
        sd.root.display()
    );
    let b = Block::allocate(Path::new(userns::ALLOCATIONS), range, &owner)?;
    let base = b.base;
    *block = Some(b);
    let ns = userns::create(base)?;
    // The containers' set-up, as the pod's root, reaches its root filesystem and volumes
    // below the state dir: that root's group may traverse it, nobody else.
    std::os::unix::fs::chown(&sd.root, None, Some(base))
        .and_then(|()| {
            std::fs::set_permissions(
                &sd.root,
                std::os::unix::fs::PermissionsExt::from_mode(0o710),
            )
        })
        .map_err(|e| {
            Error::io(
                format_args!("giving {} to the pod's root group", sd.root.display()),
                e,
            )
        })?;
    let work = sd.work();
    std::fs::create_dir_all(&work)
        .map_err(|e| Error::io(format_args!("creating {}", work.display()), e))?;
    let mut dirs: Vec<(&str, PathBuf)> = vec![("the pod's state directory", work)];
    for c in &cfg.containers {
        match &c.bundle {
            Some(b) => dirs.extend(
                b.lowers
                    .iter()
                    .map(|l| ("a root filesystem layer", l.clone())),
            ),
            None => dirs.push(("the image store", cfg.images.clone())),
        }
    }
    let spec = cfg.pod.spec.as_ref().expect("admitted pod has a spec");
    let mut tmpfs = false;
    for v in spec.volumes.iter().flatten() {
        if let Some(h) = &v.host_path {
            dirs.push(("hostPath volume", PathBuf::from(&h.path)));
        }
        tmpfs |= v
            .empty_dir
            .as_ref()
            .is_some_and(|e| e.medium.as_deref() == Some("Memory"));
    }
    let dirs: Vec<(&str, &Path)> = dirs.iter().map(|(w, p)| (*w, p.as_path())).collect();
    userns::probe(&ns, &dirs, tmpfs)?;
    Ok(ns)
}
