//! The container's root filesystem as containerd hands it over: mounts to make at
//! `<bundle>/rootfs`.

use std::path::Path;

use super::error::{Error, Result};

/// Mounts containerd's rootfs mounts at `target`, in order (an overlay from the
/// snapshotter, or a bind). Done here rather than with the shim crate's helper, which
/// forks and waits through a reaper this shim replaces.
pub fn mount_rootfs(mounts: &[containerd_shim::protos::api::Mount], target: &Path) -> Result<()> {
    use nix::mount::{mount, MsFlags};
    std::fs::create_dir_all(target)
        .map_err(|e| Error::Mount(format!("creating {}: {e}", target.display())))?;
    for m in mounts {
        let p = podinit::runtime::mounts::plan(
            target,
            Some(&m.type_),
            Some(Path::new(&m.source)),
            &m.options,
        );
        let flags = MsFlags::from_bits_truncate(p.flags);
        let fstype = (m.type_ != "bind").then_some(m.type_.as_str());
        let data = (!p.data.is_empty()).then_some(p.data.as_str());
        let what = |e: nix::Error| {
            Error::Mount(format!(
                "mounting the rootfs ({} {}) at {}: {e}",
                m.type_,
                m.source,
                target.display()
            ))
        };
        mount(
            Some(m.source.as_str()),
            target,
            fstype,
            flags & !MsFlags::MS_RDONLY
                | if p.remount {
                    MsFlags::empty()
                } else {
                    flags & MsFlags::MS_RDONLY
                },
            data,
        )
        .map_err(what)?;
        if p.remount {
            mount(
                None::<&str>,
                target,
                None::<&str>,
                flags | MsFlags::MS_REMOUNT | MsFlags::MS_BIND,
                None::<&str>,
            )
            .map_err(what)?;
        }
    }
    Ok(())
}
