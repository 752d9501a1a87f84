//! OCI mount options → mount(2) flags and data, and path resolution that never leaves the
//! container's root (the `securejoin` idea: every symlink is resolved inside the rootfs).

use std::path::{Component, Path, PathBuf};

/// What one OCI mount becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountPlan {
    pub kind: MountKind,
    /// Destination inside the container (absolute, as written).
    pub destination: PathBuf,
    pub source: Option<PathBuf>,
    pub fstype: Option<String>,
    /// Flags for the mount itself.
    pub flags: libc::c_ulong,
    /// Propagation flags applied afterwards (MS_PRIVATE, MS_SLAVE… possibly with MS_REC).
    pub propagation: libc::c_ulong,
    /// Comma-separated fs-specific options (`mode=755,size=65536k`).
    pub data: String,
    /// A bind mount with read-only or other per-mount flags needs a remount.
    pub remount: bool,
    /// `MOUNT_ATTR_*` set and cleared on the mount and every mount below it afterwards
    /// (`rro`, `rnosuid`…: runc's recursive options, applied with mount_setattr).
    pub rec_set: u64,
    pub rec_clr: u64,
    /// A bind source that must be reached below this directory with no link followed
    /// (option [`SOURCE_BENEATH`]): a volume's subPath, which a container sharing the
    /// volume may have swapped for a link to the host.
    pub source_root: Option<PathBuf>,
}

/// The mount option `x-podinit.source-beneath=DIR` (an `x-` option, which mount tools
/// leave to userspace): the bind source is resolved below DIR without following links.
pub const SOURCE_BENEATH: &str = "x-podinit.source-beneath=";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountKind {
    Bind,
    /// `cgroup`/`cgroup2`: only a cgroup2 mount is made (on a v1 host it is skipped).
    Cgroup,
    Other,
}

/// Files below /proc that a mount may cover: those lxcfs emulates (runc's list). Every
/// other mount at or below /proc but procfs itself is refused.
const PROC_FILES_ALLOWED: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/diskstats",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/swaps",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/slabinfo",
    "/proc/net/dev",
    "/proc/sys/kernel/ns_last_pid",
    "/proc/sys/crypto/fips_enabled",
];

/// Whether a mount may go at `destination` (as written, absolute) as runc's
/// checkProcMount decides: a volume over /proc would take the place of the files the
/// runtime writes and reads there (sysctls, oom_score_adj, masked paths), and the
/// container could lay its own files there (CVE-2019-19921). `source_is_proc`: the
/// source is on procfs (a bind of the host's /proc).
pub fn check_proc_mount(
    destination: &Path,
    fstype: Option<&str>,
    source_is_proc: bool,
) -> super::Result<()> {
    let mut clean = PathBuf::from("/");
    for c in destination.components() {
        match c {
            Component::Normal(n) => clean.push(n),
            Component::ParentDir => {
                clean.pop();
            }
            _ => {}
        }
    }
    let Ok(below) = clean.strip_prefix("/proc") else {
        return Ok(());
    };
    if below.as_os_str().is_empty() {
        if fstype == Some("proc") || source_is_proc {
            return Ok(());
        }
        return Err(super::Error::spec(format!(
            "mount {}: /proc cannot be mounted because it is not of type proc",
            destination.display()
        )));
    }
    if PROC_FILES_ALLOWED.iter().any(|a| Path::new(a) == clean) {
        return Ok(());
    }
    Err(super::Error::spec(format!(
        "mount {}: it cannot be mounted because it is inside /proc",
        destination.display()
    )))
}

/// Parse OCI mount options (runc's table).
/// A devpts mount's options without a `gid=N` that `gid_map` (the runtime's user
/// namespace's, read inside it) leaves out: the kernel refuses such a mount (EINVAL), and
/// a user without subordinate ids has no tty group to give. Rootless podman drops the
/// option then, as runc's rootless spec leaves it out.
pub fn devpts_options(options: &[String], gid_map: &str) -> Vec<String> {
    options
        .iter()
        .filter(|o| {
            o.strip_prefix("gid=")
                .and_then(|g| g.parse::<u32>().ok())
                .is_none_or(|g| crate::sys::rootless::outside_of(gid_map, g).is_some())
        })
        .cloned()
        .collect()
}

pub fn plan(
    destination: &Path,
    fstype: Option<&str>,
    source: Option<&Path>,
    options: &[String],
) -> MountPlan {
    let mut flags: libc::c_ulong = 0;
    let mut propagation: libc::c_ulong = 0;
    let mut data = Vec::new();
    let mut bind = fstype == Some("bind");
    let (mut rec_set, mut rec_clr) = (0u64, 0u64);
    let mut source_root = None;
    for o in options {
        if let Some(dir) = o.strip_prefix(SOURCE_BENEATH) {
            source_root = Some(PathBuf::from(dir));
            continue;
        }
        if let Some((clear, attr)) = recursive_attr(o) {
            if clear {
                rec_clr |= attr;
            } else {
                rec_set |= attr;
                // An access time is a field: setting one clears the field first
                // (mount_setattr(2)), as runc does.
                if attr & crate::sys::mount::attr::ATIME == attr {
                    rec_clr |= crate::sys::mount::attr::ATIME;
                }
            }
            continue;
        }
        let (set, clear): (libc::c_ulong, libc::c_ulong) = match o.as_str() {
            "ro" => (libc::MS_RDONLY, 0),
            "rw" => (0, libc::MS_RDONLY),
            "nosuid" => (libc::MS_NOSUID, 0),
            "suid" => (0, libc::MS_NOSUID),
            "nodev" => (libc::MS_NODEV, 0),
            "dev" => (0, libc::MS_NODEV),
            "noexec" => (libc::MS_NOEXEC, 0),
            "exec" => (0, libc::MS_NOEXEC),
            "sync" => (libc::MS_SYNCHRONOUS, 0),
            "async" => (0, libc::MS_SYNCHRONOUS),
            "dirsync" => (libc::MS_DIRSYNC, 0),
            "remount" => (libc::MS_REMOUNT, 0),
            "mand" => (libc::MS_MANDLOCK, 0),
            "nomand" => (0, libc::MS_MANDLOCK),
            "atime" => (0, libc::MS_NOATIME),
            "noatime" => (libc::MS_NOATIME, 0),
            "diratime" => (0, libc::MS_NODIRATIME),
            "nodiratime" => (libc::MS_NODIRATIME, 0),
            "relatime" => (libc::MS_RELATIME, 0),
            "norelatime" => (0, libc::MS_RELATIME),
            "strictatime" => (libc::MS_STRICTATIME, 0),
            "nostrictatime" => (0, libc::MS_STRICTATIME),
            "bind" => {
                bind = true;
                (libc::MS_BIND, 0)
            }
            "rbind" => {
                bind = true;
                (libc::MS_BIND | libc::MS_REC, 0)
            }
            "private" | "rprivate" | "shared" | "rshared" | "slave" | "rslave" | "unbindable"
            | "runbindable" => {
                propagation |= match o.trim_start_matches('r') {
                    "private" => libc::MS_PRIVATE,
                    "shared" => libc::MS_SHARED,
                    "slave" => libc::MS_SLAVE,
                    _ => libc::MS_UNBINDABLE,
                };
                if o.starts_with('r') {
                    propagation |= libc::MS_REC;
                }
                (0, 0)
            }
            _ => {
                data.push(o.as_str());
                (0, 0)
            }
        };
        flags = (flags | set) & !clear;
    }
    let kind = if bind {
        MountKind::Bind
    } else if matches!(fstype, Some("cgroup") | Some("cgroup2")) {
        MountKind::Cgroup
    } else {
        MountKind::Other
    };
    if bind {
        flags |= libc::MS_BIND;
    }
    let per_mount = libc::MS_RDONLY
        | libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC
        | libc::MS_NOATIME
        | libc::MS_NODIRATIME
        | libc::MS_RELATIME
        | libc::MS_STRICTATIME;
    MountPlan {
        kind,
        destination: destination.to_path_buf(),
        source: source.map(Path::to_path_buf),
        fstype: fstype.map(str::to_string),
        remount: bind && flags & per_mount != 0,
        flags,
        propagation,
        data: data.join(","),
        rec_set,
        rec_clr,
        source_root,
    }
}

/// A recursive mount option: whether it clears its attribute, and the attribute (runc's
/// table of `r*` options).
fn recursive_attr(option: &str) -> Option<(bool, u64)> {
    use crate::sys::mount::attr::*;
    Some(match option {
        "rro" => (false, RDONLY),
        "rrw" => (true, RDONLY),
        "rnosuid" => (false, NOSUID),
        "rsuid" => (true, NOSUID),
        "rnodev" => (false, NODEV),
        "rdev" => (true, NODEV),
        "rnoexec" => (false, NOEXEC),
        "rexec" => (true, NOEXEC),
        "rnodiratime" => (false, NODIRATIME),
        "rdiratime" => (true, NODIRATIME),
        "rrelatime" => (false, RELATIME),
        "rnorelatime" => (true, RELATIME),
        "rnoatime" => (false, NOATIME),
        "ratime" => (true, NOATIME),
        "rstrictatime" => (false, STRICTATIME),
        "rnostrictatime" => (true, STRICTATIME),
        "rnosymfollow" => (false, NOSYMFOLLOW),
        "rsymfollow" => (true, NOSYMFOLLOW),
        _ => return None,
    })
}

/// Join `unsafe_path` to `root` resolving every symlink as if `root` were `/`, so that the
/// result never escapes `root`. `lookup` returns a path's symlink target, if it is one
/// (a parameter so that the rule is testable without a filesystem).
pub fn secure_join(
    root: &Path,
    unsafe_path: &Path,
    lookup: &dyn Fn(&Path) -> Option<PathBuf>,
) -> super::Result<PathBuf> {
    use std::ffi::OsString;
    // Components still to walk, next one last.
    fn push_rev(stack: &mut Vec<OsString>, p: &Path) {
        let comps: Vec<OsString> = p
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some(OsString::from("..")),
                _ => None,
            })
            .collect();
        stack.extend(comps.into_iter().rev());
    }
    let mut stack = Vec::new();
    push_rev(&mut stack, unsafe_path);
    let mut out = PathBuf::new();
    let mut links = 0;
    while let Some(c) = stack.pop() {
        if c == ".." {
            out.pop();
            continue;
        }
        let candidate = out.join(&c);
        match lookup(&root.join(&candidate)) {
            Some(target) => {
                links += 1;
                if links > 255 {
                    return Err(super::Error::spec(format!(
                        "{}: too many levels of symbolic links",
                        unsafe_path.display()
                    )));
                }
                if target.is_absolute() {
                    out = PathBuf::new();
                }
                push_rev(&mut stack, &target);
            }
            None => out = candidate,
        }
    }
    Ok(root.join(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn recursive_options_become_mount_attributes_not_data() {
        use crate::sys::mount::attr;
        let opts = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let m = plan(
            Path::new("/data"),
            Some("bind"),
            Some(Path::new("/h")),
            &opts(&["rbind", "rro", "rnosuid", "rnoatime", "rdev"]),
        );
        assert_eq!(m.data, "", "no recursive option reaches the filesystem");
        assert_eq!(m.rec_set, attr::RDONLY | attr::NOSUID | attr::NOATIME);
        // An access time clears the whole field first; rdev clears nodev.
        assert_eq!(m.rec_clr, attr::ATIME | attr::NODEV);
        assert_eq!(m.flags, libc::MS_BIND | libc::MS_REC, "rro is no MS_RDONLY");
        assert!(!m.remount);
        let m = plan(Path::new("/d"), Some("tmpfs"), None, &opts(&["rrw"]));
        assert_eq!((m.rec_set, m.rec_clr), (0, attr::RDONLY));
    }

    #[test]
    fn options_become_flags() {
        let opts = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let m = plan(
            Path::new("/dev"),
            Some("tmpfs"),
            Some(Path::new("tmpfs")),
            &opts(&["nosuid", "strictatime", "mode=755", "size=65536k"]),
        );
        assert_eq!(m.kind, MountKind::Other);
        assert_eq!(m.flags, libc::MS_NOSUID | libc::MS_STRICTATIME);
        assert_eq!(m.data, "mode=755,size=65536k");
        assert!(!m.remount);
        let m = plan(
            Path::new("/data"),
            Some("bind"),
            Some(Path::new("/h")),
            &opts(&["rbind", "rprivate", "ro", "nosuid"]),
        );
        assert_eq!(m.kind, MountKind::Bind);
        assert_eq!(
            m.flags,
            libc::MS_BIND | libc::MS_REC | libc::MS_RDONLY | libc::MS_NOSUID
        );
        assert_eq!(m.propagation, libc::MS_PRIVATE | libc::MS_REC);
        assert!(m.remount);
        let m = plan(
            Path::new("/x"),
            None,
            Some(Path::new("/h")),
            &opts(&["bind", "rw", "ro", "rw"]),
        );
        assert_eq!(m.flags, libc::MS_BIND, "later options win");
        assert!(!m.remount);
        let m = plan(
            Path::new("/sys/fs/cgroup"),
            Some("cgroup"),
            None,
            &opts(&["ro"]),
        );
        assert_eq!(m.kind, MountKind::Cgroup);
    }

    #[test]
    fn devpts_loses_a_gid_the_namespace_does_not_map() {
        let opts: Vec<String> = ["nosuid", "mode=0620", "gid=5"].map(String::from).into();
        assert_eq!(
            devpts_options(&opts, "         0       1000          1\n"),
            ["nosuid", "mode=0620"]
        );
        assert_eq!(devpts_options(&opts, "0 1000 1\n1 100000 65536\n"), opts);
    }

    #[test]
    fn secure_join_stays_inside() {
        let links: HashMap<PathBuf, PathBuf> = [
            ("/r/etc/evil", "/../../../host"),
            ("/r/rel", "../../x"),
            ("/r/a", "b/c"),
            ("/r/loop", "loop"),
        ]
        .iter()
        .map(|(a, b)| (PathBuf::from(a), PathBuf::from(b)))
        .collect();
        let lookup = |p: &Path| links.get(p).cloned();
        let root = Path::new("/r");
        assert_eq!(
            secure_join(root, Path::new("/proc"), &lookup).unwrap(),
            PathBuf::from("/r/proc")
        );
        assert_eq!(
            secure_join(root, Path::new("/etc/evil/y"), &lookup).unwrap(),
            PathBuf::from("/r/host/y")
        );
        assert_eq!(
            secure_join(root, Path::new("/rel"), &lookup).unwrap(),
            PathBuf::from("/r/x")
        );
        assert_eq!(
            secure_join(root, Path::new("/a/d"), &lookup).unwrap(),
            PathBuf::from("/r/b/c/d")
        );
        assert_eq!(
            secure_join(root, Path::new("/../../etc"), &lookup).unwrap(),
            PathBuf::from("/r/etc")
        );
        assert!(secure_join(root, Path::new("/loop"), &lookup).is_err());
    }

    #[test]
    fn only_procfs_goes_on_proc_and_only_lxcfs_files_below_it() {
        let ok = |d: &str, t: Option<&str>, proc_src: bool| {
            check_proc_mount(Path::new(d), t, proc_src).map_err(|e| e.to_string())
        };
        assert_eq!(ok("/proc", Some("proc"), false), Ok(()));
        assert_eq!(ok("/proc", Some("bind"), true), Ok(()));
        assert_eq!(
            ok("/proc", Some("bind"), false),
            Err("mount /proc: /proc cannot be mounted because it is not of type proc".into())
        );
        assert!(ok("/./proc/", Some("tmpfs"), false).is_err());
        assert!(ok("/proc/../proc", None, false).is_err());
        assert_eq!(
            ok("/proc/sys/kernel/core_pattern", Some("bind"), false),
            Err("mount /proc/sys/kernel/core_pattern: it cannot be mounted because it is inside /proc".into())
        );
        assert_eq!(ok("/proc/cpuinfo", Some("bind"), false), Ok(()));
        assert_eq!(ok("/procs", Some("bind"), false), Ok(()));
        assert_eq!(ok("/data/proc", Some("bind"), false), Ok(()));
    }
}
