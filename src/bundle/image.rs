//! An image from the store as a container's base, in place of a bundle's `config.json`:
//! the spec a CRI runtime starts from (the busybox bundle's defaults, which are
//! containerd's: capabilities, mounts, masked and read-only paths, namespaces), with the
//! image config laid in as containerd's `WithImageConfig` does: Entrypoint and Cmd as the
//! process's arguments (`command`/`args` then apply, `merge`), Env, WorkingDir, User
//! resolved in the image's own `/etc/passwd` and `/etc/group`, and StopSignal as the
//! annotation the stop-signal path reads. The root is an overlay of the layers.

use oci_spec::runtime::{LinuxNamespace, LinuxNamespaceType, Spec};
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{Bundle, Error, ImageRef};
use crate::image::store::Image;

/// The base spec of a container from `img`.
pub fn from_image(img: &Image) -> Result<Bundle, Error> {
    let who = |e: Error| e.within(format_args!("image {}", img.name));
    let top = img
        .layers
        .last()
        .cloned()
        .ok_or_else(|| who(Error::Invalid("it has no layers".into())))?;
    // Overlay lowers are listed uppermost first; the store lists layers as applied.
    let lowers: Vec<PathBuf> = img.layers.iter().rev().cloned().collect();
    let none = Default::default();
    let cfg = img.config.config().as_ref().unwrap_or(&none);
    let strings = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();

    let mut spec = base_spec().map_err(|e| who(e.within("base spec")))?;
    let entrypoint = strings(cfg.entrypoint());
    // containerd: an Entrypoint of one empty string is none (`ENTRYPOINT [""]`).
    let entrypoint = if entrypoint == [""] {
        Vec::new()
    } else {
        entrypoint
    };
    let user = cfg.user().as_deref().unwrap_or("");
    let (uid_gid, user_error) = match resolve_user(user, &|f| read_layered(&lowers, f)) {
        Ok(ids) => (ids, None),
        Err(e) => ((0, 0), Some(e.to_string())),
    };
    let process = spec
        .process_mut()
        .as_mut()
        .ok_or_else(|| who(Error::Invalid("base spec: no process".into())))?;
    process.set_args(Some(
        entrypoint
            .iter()
            .chain(&strings(cfg.cmd()))
            .cloned()
            .collect(),
    ));
    // Without a PATH of the image's, `spec` gives the usual one.
    process.set_env(Some(strings(cfg.env())));
    if let Some(wd) = cfg.working_dir().as_deref().filter(|w| !w.is_empty()) {
        process.set_cwd(wd.into());
    }
    process.user_mut().set_uid(uid_gid.0);
    process.user_mut().set_gid(uid_gid.1);
    if let Some(sig) = cfg.stop_signal().as_deref().filter(|s| !s.is_empty()) {
        spec.annotations_mut()
            .get_or_insert_with(HashMap::new)
            .insert("org.opencontainers.image.stopSignal".into(), sig.into());
    }
    if let Some(r) = spec.root_mut() {
        r.set_path(top.clone());
    }
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        if let Some(ns) = spec
            .linux_mut()
            .as_mut()
            .and_then(|l| l.namespaces_mut().as_mut())
        {
            let mut cgroup = LinuxNamespace::default();
            cgroup.set_typ(LinuxNamespaceType::Cgroup);
            ns.push(cgroup);
        }
    }
    Ok(Bundle {
        dir: img.layers.first().cloned().unwrap_or_else(|| top.clone()),
        rootfs: top,
        spec,
        lowers,
        entrypoint_len: entrypoint.len(),
        image: Some(ImageRef {
            name: img.name.clone(),
            id: image_id(&img.name, &img.digest.to_string()),
            user_error,
        }),
    })
}

/// kubelet's `imageID`: the repository with the digest of the top-level manifest or
/// index (containerd's repo digest), `docker.io/library/busybox@sha256:…`.
pub fn image_id(name: &str, digest: &str) -> String {
    let no_digest = name.split('@').next().unwrap_or(name);
    let last = no_digest.rfind('/').map_or(0, |i| i + 1);
    let repo = match no_digest[last..].rfind(':') {
        Some(i) => &no_digest[..last + i],
        None => no_digest,
    };
    format!("{repo}@{digest}")
}

/// A CRI container's defaults, as the busybox bundle's `config.json` (scripts/make-bundles)
/// has them, plus containerd's cgroup filesystem at /sys/fs/cgroup (read-only, in a cgroup
/// namespace of the container's own on a v2 host, which `from_image` adds): a document, as
/// a bundle's `config.json` is one.
fn base_spec() -> Result<Spec, Error> {
    let caps = json!([
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FSETID",
        "CAP_FOWNER",
        "CAP_MKNOD",
        "CAP_NET_RAW",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETFCAP",
        "CAP_SETPCAP",
        "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT",
        "CAP_KILL",
        "CAP_AUDIT_WRITE"
    ]);
    let namespaces = json!([{"type": "pid"}, {"type": "network"}, {"type": "ipc"},
                            {"type": "uts"}, {"type": "mount"}]);
    crate::tracked::from_value(&json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": [],
            "env": [],
            "cwd": "/",
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps,
                             "inheritable": [], "ambient": []},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": false
        },
        "root": {"path": "rootfs", "readonly": false},
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
             "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}
        ],
        "linux": {
            "namespaces": namespaces,
            "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                            "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                            "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"]
        },
        "annotations": {}
    }))
    .map_err(|e| Error::Invalid(e.to_string()))
}

/// The text of `rel` (`etc/passwd`) as the container will see it: from the uppermost layer
/// that has it, unless a layer above deleted it (an overlay whiteout, a 0/0 character
/// device, or an OCI `.wh.` file). Opaque directories are not looked at: `/etc` is not
/// made opaque by the images that matter here.
pub(super) fn read_layered(lowers: &[PathBuf], rel: &str) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let rel = Path::new(rel);
    let wh = rel.file_name().map(|n| {
        let mut w = std::ffi::OsString::from(".wh.");
        w.push(n);
        rel.with_file_name(w)
    });
    for l in lowers {
        let p = l.join(rel);
        if let Ok(m) = std::fs::symlink_metadata(&p) {
            if m.file_type().is_char_device() && m.rdev() == 0 {
                return None;
            }
            return std::fs::read_to_string(&p).ok();
        }
        if wh.as_ref().is_some_and(|w| l.join(w).exists()) {
            return None;
        }
    }
    None
}

/// The image config's `User` as containerd's `WithUser` resolves it: `uid`, `uid:gid`,
/// `name`, `name:group` (names looked up in the image's /etc/passwd and /etc/group; a
/// bare uid takes its primary group from /etc/passwd, 0 when it is not listed).
pub fn resolve_user(
    user: &str,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<(u32, u32), Error> {
    if user.is_empty() {
        return Ok((0, 0));
    }
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    let passwd = read("etc/passwd").unwrap_or_default();
    let entries: Vec<Vec<&str>> = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 4)
        .collect();
    let (uid, passwd_gid) = match u.parse::<u32>() {
        Ok(uid) => {
            let gid = entries
                .iter()
                .find(|f| f[2].parse::<u32>().ok() == Some(uid))
                .and_then(|f| f[3].parse().ok())
                .unwrap_or(0);
            (uid, gid)
        }
        Err(_) => {
            let f = entries.iter().find(|f| f[0] == u).ok_or_else(|| {
                Error::User(format!(
                    "user {u:?} (config.User {user:?}): no such user in the image's /etc/passwd"
                ))
            })?;
            let uid = f[2].parse().map_err(|_| {
                Error::User(format!("user {u:?}: bad uid {:?} in /etc/passwd", f[2]))
            })?;
            (uid, f[3].parse().unwrap_or(0))
        }
    };
    let gid = match g {
        None => passwd_gid,
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => {
                let group = read("etc/group").unwrap_or_default();
                group
                    .lines()
                    .map(|l| l.split(':').collect::<Vec<_>>())
                    .find(|f| f.len() >= 3 && f[0] == g)
                    .and_then(|f| f[2].parse().ok())
                    .ok_or_else(|| Error::User(format!("group {g:?} (config.User {user:?}): no such group in the image's /etc/group")))?
            }
        },
    };
    Ok((uid, gid))
}

#[cfg(test)]
mod tests;
