//! The pod's own files, made as containerd's podsandbox controller makes them for a pause
//! container (`setupSandboxFiles`): `hostname` (the pod's, else the node's), `hosts` (the
//! node's, copied), `resolv.conf` (from the pod's DNS config, else the node's, copied) and
//! a `shm` tmpfs unless the pod shares the node's IPC namespace. Under a sandboxer of the
//! shim containerd makes none of them, so the shim does: the files in `sandbox/` of the
//! sandbox's bundle, the `shm` beside the shim's container state (`paths::shm_dir`), never
//! in the bundle: containerd removes a bundle by renaming it and removing the tree, which a
//! mount inside stops half-way, and a shim's `delete` cannot even start in it then. Each
//! container of the pod gets them bound in (`podinit::spec::pod_files`).

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use podinit::spec::pod_files::PodFiles;

use super::super::error::{Error, Result};
use super::config::{Dns, Mode, PodConfig};

/// The directory of the files in a sandbox's bundle.
const DIR: &str = "sandbox";

/// The pod's `/dev/shm`, with containerd's flags and size.
const SHM_DATA: &str = "mode=1777,size=65536k";

/// `resolv.conf` of a DNS config, as containerd's `parseDNSOptions` writes it.
pub fn resolv_conf(dns: &Dns) -> String {
    let mut out = String::new();
    if !dns.searches.is_empty() {
        out.push_str(&format!("search {}\n", dns.searches.join(" ")));
    }
    for s in &dns.servers {
        out.push_str(&format!("nameserver {s}\n"));
    }
    if !dns.options.is_empty() {
        out.push_str(&format!("options {}\n", dns.options.join(" ")));
    }
    out
}

fn write(path: &Path, text: &[u8]) -> Result<()> {
    std::fs::write(path, text).map_err(|e| Error::io(format_args!("writing {}", path.display()), e))
}

fn copy(from: &str, to: &Path) -> Result<()> {
    std::fs::copy(from, to).map(drop).map_err(|e| {
        Error::io(
            format_args!("copying the node's {from} to {}", to.display()),
            e,
        )
    })
}

/// Makes the pod's files in `bundle` and its shm at `shm`; what to bind into its
/// containers. Nothing is left mounted when it fails.
pub fn make(bundle: &Path, shm: &Path, config: &PodConfig) -> Result<PodFiles> {
    let dir = bundle.join(DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format_args!("creating {}", dir.display()), e))?;
    let files = PodFiles {
        hostname: dir.join("hostname"),
        hosts: dir.join("hosts"),
        resolv_conf: dir.join("resolv.conf"),
        shm: (config.ipc != Mode::Node).then(|| shm.to_path_buf()),
    };
    let hostname = match config.hostname.as_str() {
        "" => nix::unistd::gethostname()
            .map_err(|e| Error::Other(format!("the node's hostname: {e}")))?
            .to_string_lossy()
            .into_owned(),
        h => h.to_string(),
    };
    write(&files.hostname, format!("{hostname}\n").as_bytes())?;
    copy("/etc/hosts", &files.hosts)?;
    match &config.dns {
        Some(dns) => write(&files.resolv_conf, resolv_conf(dns).as_bytes())?,
        None => copy("/etc/resolv.conf", &files.resolv_conf)?,
    }
    if let Some(shm) = &files.shm {
        mount_shm(shm)?;
    }
    Ok(files)
}

fn mount_shm(shm: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(shm)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Error::io(format_args!("creating {}", shm.display()), e)),
    }
    nix::mount::mount(
        Some("shm"),
        shm,
        Some("tmpfs"),
        MsFlags::MS_NOEXEC | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(SHM_DATA),
    )
    .map_err(|e| Error::Mount(format!("mounting the pod's shm at {}: {e}", shm.display())))
}

/// Unmounts the pod's `/dev/shm` at `shm` and removes its mount point (the files go with
/// the bundle, which containerd removes). Unmounting what is not mounted is no error.
pub fn unmount(shm: &Path) {
    let _ = nix::mount::umount2(shm, MntFlags::MNT_DETACH);
    let _ = std::fs::remove_dir(shm);
    // Their directory too once no other sandbox's is in it.
    if let Some(parent) = shm.parent() {
        let _ = std::fs::remove_dir(parent);
    }
}

/// Removes the pod's files from `bundle` (a shim ending itself; containerd otherwise
/// removes them with the bundle).
pub fn remove_own(bundle: &Path) {
    let _ = std::fs::remove_dir_all(bundle.join(DIR));
}

/// Where a shim of an earlier release mounted the pod's shm: in the bundle, for a `delete`
/// run after such a shim.
pub fn unmount_in_bundle(bundle: &Path) {
    let shm: PathBuf = bundle.join(DIR).join("shm");
    let _ = nix::mount::umount2(&shm, MntFlags::MNT_DETACH);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_is_written_as_containerds() {
        let dns = Dns {
            servers: vec!["8.8.8.8".into(), "1.1.1.1".into()],
            searches: vec!["a.example".into(), "b.example".into()],
            options: vec!["ndots:5".into(), "edns0".into()],
        };
        assert_eq!(
            resolv_conf(&dns),
            "search a.example b.example\nnameserver 8.8.8.8\nnameserver 1.1.1.1\n\
             options ndots:5 edns0\n"
        );
        assert_eq!(
            resolv_conf(&Dns::default()),
            "",
            "an empty config: an empty file"
        );
    }

    #[test]
    fn the_files_are_the_pods_and_the_nodes() {
        let dir = std::env::temp_dir().join(format!("podinit-pod-files-{}", std::process::id()));
        let config = PodConfig {
            hostname: "web-0".into(),
            dns: Some(Dns {
                servers: vec!["10.0.0.10".into()],
                ..Dns::default()
            }),
            // The node's IPC namespace: no shm to mount, so no root needed.
            ipc: Mode::Node,
            ..PodConfig::default()
        };
        let files = make(&dir, &dir.join("shm"), &config).unwrap();
        assert_eq!(files.shm, None);
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(&files.hostname), "web-0\n");
        assert_eq!(read(&files.resolv_conf), "nameserver 10.0.0.10\n");
        assert_eq!(read(&files.hosts), read(Path::new("/etc/hosts")));
        let node = make(
            &dir,
            &dir.join("shm"),
            &PodConfig {
                ipc: Mode::Node,
                ..PodConfig::default()
            },
        )
        .unwrap();
        assert_eq!(
            read(&node.hostname).trim_end(),
            nix::unistd::gethostname().unwrap().to_string_lossy()
        );
        assert_eq!(
            read(&node.resolv_conf),
            read(Path::new("/etc/resolv.conf")),
            "no DNS config: the node's"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
