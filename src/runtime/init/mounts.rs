//! The container's root filesystem: its mounts, the switch to it (pivot_root), then the
//! masked and read-only paths, which must be made inside the new root.

use std::path::{Path, PathBuf};

use super::kernel::Kind;
use super::{Error, Kernel, R};
use crate::runtime::mounts::{self, MountKind, MountPlan};
use crate::runtime::prepare::{c_path, Prepared};

/// `before_pivot` runs once the mounts are made and before the root is switched (the
/// hooks of a container of its own).
pub(super) fn rootfs<K: Kernel>(k: &K, p: &Prepared, before_pivot: impl FnOnce() -> R) -> R {
    if p.shared_mount_ns {
        return shared_rootfs(k, p, before_pivot);
    }
    k.mount(None, Path::new("/"), None, p.root_propagation, "")
        .map_err(|e| {
            Error::os(
                format!(
                    "making / {}",
                    if p.root_propagation & libc::MS_SLAVE != 0 {
                        "rslave"
                    } else {
                        "private"
                    }
                ),
                e,
            )
        })?;
    // pivot_root refuses a new root whose parent mount is shared: with a shared root
    // propagation the mount holding the rootfs becomes private first (runc's
    // rootfsParentMountPrivate), the rootfs itself when it is a mount point (a CRI
    // bundle's overlay), so that its bind below is private too; the propagation asked
    // for is given to / after the switch.
    let shared = p.root_propagation & libc::MS_SHARED != 0;
    if shared {
        if let Some(parent) = k.mount_point_of(&p.root) {
            k.mount(None, &parent, None, libc::MS_PRIVATE, "")
                .map_err(|e| Error::os(format!("making {} private", parent.display()), e))?;
        }
    }
    // pivot_root needs the root to be a mount point.
    k.mount(
        Some(&p.root),
        &p.root,
        None,
        libc::MS_BIND | libc::MS_REC,
        "",
    )
    .map_err(|e| Error::os(format!("bind-mounting the rootfs {}", p.root.display()), e))?;
    for m in &p.mounts {
        mount_one(k, p, m)?;
    }
    if p.dev_is_tmpfs {
        super::devices::dev(k, p)?;
    }
    before_pivot()?;
    let root = c_path(&p.root)?;
    k.chdir(&root)
        .map_err(|e| Error::os(format!("chdir {}", p.root.display()), e))?;
    if p.standalone.as_ref().is_some_and(|s| s.no_pivot) {
        // `--no-pivot` (a root on a ramfs cannot be pivoted from): the rootfs is moved
        // over / and chroot'ed into; the old root stays below, hidden.
        k.mount(
            Some(Path::new(".")),
            Path::new("/"),
            None,
            libc::MS_MOVE,
            "",
        )
        .map_err(|e| Error::os("moving the rootfs to / (--no-pivot)", e))?;
        k.chroot(c".")
            .map_err(|e| Error::os("chroot (--no-pivot)", e))?;
    } else {
        k.pivot_root_here()
            .map_err(|e| Error::os("pivot_root", e))?;
        k.detach(c".")
            .map_err(|e| Error::os("detaching the old root", e))?;
    }
    k.chdir(c"/").map_err(|e| Error::os("chdir /", e))?;
    // A cwd the rootfs lacks is made, inside the new root and before it may turn
    // read-only, as runc makes it (0755 as root, whatever user the process runs as).
    if k.stat(&p.cwd).is_err() {
        k.create_dir_all(&p.cwd)
            .map_err(|e| Error::os(format!("creating cwd {}", p.cwd.display()), e))?;
    }
    if shared {
        k.mount(None, Path::new("/"), None, p.root_propagation, "")
            .map_err(|e| Error::os("applying the root propagation to /", e))?;
    }
    // Before the read-only paths, which usually include /proc/sys (runc's order).
    for (path, value) in &p.sysctl {
        k.write_proc(path, value.as_bytes())
            .map_err(|e| Error::os(format!("sysctl {}", path.display()), e))?;
    }
    // A path listed twice is done once: the second would find the first's mount in its
    // way, which a /proc path refuses (a mount there may be a container's).
    for (i, path) in p.masked.iter().enumerate() {
        if !p.masked[..i].contains(path) {
            mask(k, path)?;
        }
    }
    for (i, path) in p.readonly.iter().enumerate() {
        if !p.readonly[..i].contains(path) {
            readonly(k, path)?;
        }
    }
    if p.root_readonly {
        k.mount(
            None,
            Path::new("/"),
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
            "",
        )
        .map_err(|e| Error::os("making the root filesystem read-only", e))?;
    }
    Ok(())
}

/// A container without a mount namespace of its own, in its creator's: as runc, its
/// mounts are made under the rootfs there and the root is entered by chroot. Unlike runc,
/// the creator's `/` keeps its propagation and the rootfs gets no bind onto itself (only
/// pivot_root needs one), so that what stays behind in the shared namespace is the
/// spec's mounts alone, which `delete` removes. Masked and read-only paths and a
/// read-only root were refused with the spec.
fn shared_rootfs<K: Kernel>(k: &K, p: &Prepared, before_chroot: impl FnOnce() -> R) -> R {
    for m in &p.mounts {
        mount_one(k, p, m)?;
    }
    if p.dev_is_tmpfs {
        super::devices::dev(k, p)?;
    }
    before_chroot()?;
    let root = c_path(&p.root)?;
    k.chdir(&root)
        .map_err(|e| Error::os(format!("chdir {}", p.root.display()), e))?;
    k.chroot(c".")
        .map_err(|e| Error::os(format!("chroot {}", p.root.display()), e))?;
    k.chdir(c"/").map_err(|e| Error::os("chdir /", e))?;
    if k.stat(&p.cwd).is_err() {
        k.create_dir_all(&p.cwd)
            .map_err(|e| Error::os(format!("creating cwd {}", p.cwd.display()), e))?;
    }
    for (path, value) in &p.sysctl {
        k.write_proc(path, value.as_bytes())
            .map_err(|e| Error::os(format!("sysctl {}", path.display()), e))?;
    }
    Ok(())
}

/// The kernel's answer for `secure_join`: a path's link target, if it is a link.
pub(super) fn symlink_of<K: Kernel>(k: &K, path: &Path) -> Option<PathBuf> {
    (k.lstat(path) == Some(Kind::Symlink))
        .then(|| k.read_link(path))
        .flatten()
}

fn mount_one<K: Kernel>(k: &K, p: &Prepared, m: &MountPlan) -> R {
    if m.kind == MountKind::Cgroup && !p.cgroup2_host {
        // A v1 cgroup mount needs one mount per hierarchy and a cgroup namespace to be
        // safe; podinit does not give containers a view of v1 cgroups.
        return Ok(());
    }
    let dest = m.destination.display().to_string();
    let raw_target = p
        .root
        .join(m.destination.strip_prefix("/").unwrap_or(&m.destination));
    // The walk below looks at every component once; what it saw of the last one (and of
    // the destination as written) spares the stat calls each check below would make.
    let seen = std::cell::RefCell::new(Vec::<(PathBuf, Option<Kind>)>::new());
    let lookup = |path: &Path| {
        let kind = k.lstat(path);
        let link = (kind == Some(Kind::Symlink))
            .then(|| k.read_link(path))
            .flatten();
        seen.borrow_mut().push((path.to_path_buf(), kind));
        link
    };
    let target = mounts::secure_join(&p.root, &m.destination, &lookup)?;
    let seen = seen.into_inner();
    let kind_of = |path: &Path| seen.iter().rev().find(|(p, _)| p == path).map(|(_, t)| *t);
    let is_proc_like = matches!(m.fstype.as_deref(), Some("proc") | Some("sysfs"));
    if is_proc_like {
        let raw_kind = kind_of(&raw_target).unwrap_or_else(|| k.lstat(&raw_target));
        if raw_kind == Some(Kind::Symlink) {
            return Err(Error::Spec(format!(
                "mount {}: target {dest} is a symlink",
                m.fstype.as_deref().unwrap_or("")
            )));
        }
    }
    let src_is_file = m.kind == MountKind::Bind
        && m.source
            .as_ref()
            .is_some_and(|s| k.stat(s).is_ok_and(|t| t != Kind::Dir));
    // Some(None): the walk saw that the target does not exist; None: it did not look.
    let existing = kind_of(&target);
    if src_is_file {
        let exists = existing.unwrap_or_else(|| k.lstat(&target)).is_some();
        if !exists {
            k.create_file_in_root(&p.root, &target).map_err(|e| {
                Error::os(format!("mount {dest}: creating {}", target.display()), e)
            })?;
        }
    } else if existing != Some(Some(Kind::Dir)) {
        k.ensure_dir_in_root(&p.root, &target)
            .map_err(|e| Error::os(format!("mount {dest}: creating {}", target.display()), e))?;
    }
    let res = match m.kind {
        MountKind::Bind if m.source_root.is_some() => match (&m.source_root, &m.source) {
            (Some(src_root), Some(src)) => k.bind_beneath(
                src_root,
                src,
                &p.root,
                &target,
                m.flags & (libc::MS_BIND | libc::MS_REC),
            ),
            _ => Err(std::io::Error::from(std::io::ErrorKind::InvalidInput)),
        },
        MountKind::Bind => k.mount_in_root(
            &p.root,
            m.source.as_deref(),
            &target,
            None,
            m.flags & (libc::MS_BIND | libc::MS_REC),
            "",
        ),
        MountKind::Cgroup => k
            .mount_in_root(
                &p.root,
                Some(Path::new("cgroup2")),
                &target,
                Some("cgroup2"),
                m.flags,
                &m.data,
            )
            .or_else(|e| {
                // A user namespace without a cgroup namespace of its own may not mount
                // cgroup2 (EPERM, or EBUSY on the host's hierarchy): the host's is bound
                // instead, as runc's mountCgroupV2 does.
                let refused = matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EBUSY));
                if !(refused && p.in_user_ns()) {
                    return Err(e);
                }
                bind_host(k, p, Path::new("/sys/fs/cgroup"), &target, m.flags)
            }),
        MountKind::Other => k
            .mount_in_root(
                &p.root,
                m.source.as_deref(),
                &target,
                m.fstype.as_deref(),
                m.flags,
                &m.data,
            )
            .or_else(|e| {
                // A user namespace that does not own the network namespace (a rootless
                // pod on the host's network) may not mount sysfs: the host's /sys is
                // bound instead, as runc does.
                let sysfs = m.fstype.as_deref() == Some("sysfs");
                if !(sysfs && p.in_user_ns() && e.raw_os_error() == Some(libc::EPERM)) {
                    return Err(e);
                }
                bind_host(k, p, Path::new("/sys"), &target, m.flags)
            }),
    };
    res.map_err(|e| {
        let src = m
            .source
            .as_ref()
            .map(|s| s.display().to_string())
            .unwrap_or_default();
        let what = format!(
            "mount {src} on {dest} ({})",
            m.fstype.as_deref().unwrap_or("bind")
        );
        Error::os(what, e)
    })?;
    if m.remount {
        // In a user namespace the mount's nosuid, nodev and noexec are locked: kept.
        let locked = if p.in_user_ns() {
            k.mount_flags(&c_path(&target)?)
                .map_err(|e| Error::os(format!("remounting {dest} with its options"), e))?
                & (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC)
        } else {
            0
        };
        k.mount_in_root(
            &p.root,
            None,
            &target,
            None,
            m.flags | locked | libc::MS_REMOUNT | libc::MS_BIND,
            "",
        )
        .map_err(|e| Error::os(format!("remounting {dest} with its options"), e))?;
    }
    if m.propagation != 0 {
        k.mount_in_root(&p.root, None, &target, None, m.propagation, "")
            .map_err(|e| Error::os(format!("setting propagation of {dest}"), e))?;
    }
    if m.rec_set | m.rec_clr != 0 {
        k.set_attr_recursive(&target, m.rec_set, m.rec_clr)
            .map_err(|e| Error::os(format!("setting the recursive options of {dest}"), e))?;
    }
    if m.fstype.as_deref() == Some("proc") {
        // The mount must really be procfs before anything is written under it.
        let c = c_path(&target)?;
        let f_type = k
            .statfs_type(&c)
            .map_err(|e| Error::os(format!("statfs {dest}"), e))?;
        if f_type != libc::PROC_SUPER_MAGIC {
            return Err(Error::Start(format!(
                "{dest} is not procfs after mounting it"
            )));
        }
    }
    Ok(())
}

/// /dev/null over a file, an empty read-only tmpfs over a directory, nothing where nothing
/// is. Looked at first: a bind of /dev/null refused on a directory (runc's way to tell)
/// makes the kernel unmount the copy it had made, and wait an RCU grace period for it.
/// A filesystem the user namespace may not mount, bound from the host's `src` instead
/// (recursively, as runc binds it), then made read-only if `flags` ask it, keeping the
/// nosuid, nodev and noexec the kernel locks on the host's mount.
fn bind_host<K: Kernel>(
    k: &K,
    p: &Prepared,
    src: &Path,
    target: &Path,
    flags: libc::c_ulong,
) -> std::io::Result<()> {
    let keep = flags & (libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC);
    k.mount_in_root(
        &p.root,
        Some(src),
        target,
        None,
        libc::MS_BIND | libc::MS_REC,
        "",
    )?;
    if keep & libc::MS_RDONLY == 0 {
        return Ok(());
    }
    let locked = k.mount_flags(&c_path(target).map_err(std::io::Error::other)?)?
        & (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC);
    k.mount_in_root(
        &p.root,
        None,
        target,
        None,
        keep | locked | libc::MS_REMOUNT | libc::MS_BIND,
        "",
    )
}

fn mask<K: Kernel>(k: &K, path: &Path) -> R {
    let kind = match k.stat(path) {
        Ok(kind) => kind,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::os(format!("masking {}", path.display()), e)),
    };
    let res = if kind == Kind::Dir {
        k.mask_dir(path)
    } else {
        k.bind_null(path)
    };
    res.map_err(|e| Error::os(format!("masking {}", path.display()), e))
}

fn readonly<K: Kernel>(k: &K, path: &Path) -> R {
    match k.bind_readonly(path) {
        // Nothing there: nothing to protect.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        r => r.map_err(|e| Error::os(format!("read-only {}", path.display()), e)),
    }
}
