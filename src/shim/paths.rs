//! Where a shim keeps what is its own: under the state directory of the containerd that
//! started it, found from the task's bundle (`<state>/io.containerd.runtime.v2.task/<ns>/
//! <id>`) or a Sandbox API sandbox's (`<state>/io.containerd.sandbox.controller.v1.shim/
//! <ns>/<id>`), so that two containerds on one machine share nothing (docs/cri.md §2).

use std::path::{Path, PathBuf};

use sha2::Digest;

/// The directories of bundles in containerd's state directory: the runtime v2 plugin's
/// (tasks) and the `shim` sandbox controller's (containerd 2's Sandbox API). A Sandbox
/// API shim's containers get their bundles in the first, and their `delete` must find
/// the state their shim kept.
const BUNDLE_DIRS: [&str; 2] = [
    "io.containerd.runtime.v2.task",
    "io.containerd.sandbox.controller.v1.shim",
];
/// containerd's default state directory, for a bundle found elsewhere.
const DEFAULT_STATE: &str = "/run/containerd";
/// The longest path a Unix socket address holds (`sun_path` less its NUL).
const SUN_PATH_MAX: usize = 107;
/// Hex digits of the socket's name: half a SHA-256, so that a private containerd's state
/// directory has room for it.
const NAME_LEN: usize = 32;

/// containerd's state directory, from a task's or a sandbox's bundle.
pub fn state_dir(bundle: &Path) -> PathBuf {
    let bundles = bundle.parent().and_then(Path::parent);
    match bundles {
        Some(t)
            if BUNDLE_DIRS
                .iter()
                .any(|d| t.file_name() == Some(d.as_ref())) =>
        {
            t.parent()
                .map_or_else(|| PathBuf::from(DEFAULT_STATE), Path::to_path_buf)
        }
        _ => PathBuf::from(DEFAULT_STATE),
    }
}

/// runc's `--root` for a namespace: `<state>/podinit/<ns>` (containerd's runc shim keeps
/// `/run/containerd/runc/<ns>`).
pub fn runc_root(bundle: &Path, namespace: &str) -> PathBuf {
    state_dir(bundle).join("podinit").join(namespace)
}

/// The mount point of Sandbox API sandbox `id`'s `/dev/shm` (`sandboxer/files.rs`): beside
/// its containers' state under `root` (`runc_root`), in a directory no container ID can
/// name, as runc's state directory holds one directory per container.
pub fn shm_dir(root: &Path, id: &str) -> PathBuf {
    root.join(".sandbox-shm").join(id)
}

/// The address of the socket of the shim that serves `grouping` (the pod): in `socket_dir`
/// when containerd names one, else `<state>/s`; in containerd's default `/run/containerd/s`
/// when that path would be too long for a socket.
pub fn socket_address(
    bundle: &Path,
    socket_dir: Option<&str>,
    containerd: &str,
    namespace: &str,
    grouping: &str,
) -> String {
    let digest = sha2::Sha256::digest(format!("{containerd}/{namespace}/{grouping}"));
    let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let name = &name[..NAME_LEN];
    let dir = socket_dir.map_or_else(|| state_dir(bundle).join("s"), PathBuf::from);
    let mut path = dir.join(name);
    if path.as_os_str().len() > SUN_PATH_MAX {
        path = Path::new(DEFAULT_STATE).join("s").join(name);
    }
    format!("unix://{}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_directory_is_the_bundle_s_containerd_s() {
        let b = Path::new("/tmp/lab/state/io.containerd.runtime.v2.task/k8s.io/abc");
        assert_eq!(state_dir(b), Path::new("/tmp/lab/state"));
        assert_eq!(
            runc_root(b, "k8s.io"),
            Path::new("/tmp/lab/state/podinit/k8s.io")
        );
        assert_eq!(
            state_dir(Path::new("/srv/bundle")),
            Path::new("/run/containerd")
        );
        // A Sandbox API sandbox's bundle: its containers' state is where their own
        // bundles' `delete` looks for it.
        let sb = Path::new("/tmp/lab/state/io.containerd.sandbox.controller.v1.shim/k8s.io/sb");
        assert_eq!(runc_root(sb, "k8s.io"), runc_root(b, "k8s.io"));
    }

    #[test]
    fn sockets_go_under_the_state_or_the_given_directory_within_a_socket_s_length() {
        let b = Path::new("/tmp/lab/state/io.containerd.runtime.v2.task/k8s.io/abc");
        let a = socket_address(b, None, "/tmp/lab/c.sock", "k8s.io", "pod");
        assert!(a.starts_with("unix:///tmp/lab/state/s/"), "{a}");
        assert_eq!(a.len(), "unix:///tmp/lab/state/s/".len() + NAME_LEN);
        assert_eq!(
            a,
            socket_address(b, None, "/tmp/lab/c.sock", "k8s.io", "pod")
        );
        assert_ne!(
            a,
            socket_address(b, None, "/tmp/lab/c.sock", "k8s.io", "pod2")
        );
        let given = socket_address(b, Some("/run/c2/s"), "/c.sock", "k8s.io", "pod");
        assert!(given.starts_with("unix:///run/c2/s/"), "{given}");
        let deep = format!(
            "/{}/io.containerd.runtime.v2.task/k8s.io/abc",
            "d".repeat(90)
        );
        let far = socket_address(Path::new(&deep), None, "/c.sock", "k8s.io", "pod");
        assert!(far.starts_with("unix:///run/containerd/s/"), "{far}");
    }
}
