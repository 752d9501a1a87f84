//! What a dead shim's `delete` ends of its pod (docs/cri.md §3). containerd runs `delete`
//! for the sandbox whose shim died (containerd 2 for the sandbox alone), and its CRI can
//! no longer reach the pod's containers, whose shim that was: they would run on, owned by
//! nobody, as containerd's runc shim leaves them. The sandbox's `delete` ends them too.

use std::path::Path;

use podinit::runc::state::{self, Root};

use super::sandbox::{annotation, SANDBOX_ID};

/// Whether a container whose annotation names `of` is another container of sandbox
/// `sandbox`.
fn of_pod(id: &str, of: Option<&str>, sandbox: &str) -> bool {
    id != sandbox && of == Some(sandbox)
}

/// Force-deletes every container in the state root `root` that belongs to sandbox
/// `sandbox` (its processes, cgroup and state), and unmounts the root the shim mounted in
/// its bundle.
pub fn end_containers_of(root: &Path, sandbox: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let r = Root(root.to_path_buf());
    for e in entries.flatten() {
        let Some(id) = e.file_name().to_str().map(String::from) else {
            continue;
        };
        let Ok(st) = state::load(&r, &id) else {
            continue;
        };
        if !of_pod(&id, annotation(&st.config, SANDBOX_ID), sandbox) {
            continue;
        }
        let _ = podinit::runc::delete::delete(&r, &id, true);
        let _ = nix::mount::umount2(&st.bundle.join("rootfs"), nix::mount::MntFlags::MNT_DETACH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sandbox_s_other_containers_are_its_pod_s() {
        assert!(of_pod("c1", Some("sb"), "sb"));
        assert!(!of_pod("sb", Some("sb"), "sb"), "the sandbox itself");
        assert!(!of_pod("c2", Some("other"), "sb"), "another pod's");
        assert!(!of_pod("c3", None, "sb"), "no annotation: not a CRI pod's");
    }
}
