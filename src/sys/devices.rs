//! Which device nodes a container may open or create: the device cgroup. Without it a
//! container with CAP_MKNOD (in the default set) could `mknod` the node's disk and read it.
//!
//! The rules are the OCI spec's `linux.resources.devices` then runc's allowed devices, in
//! order, the last match winning (cgroup v1's semantics). On v1 they are written to
//! `devices.deny` / `devices.allow`; on v2, which has no device files, [`super::bpf`]
//! compiles them into a program. Data only: `spec::cgroup_rules` puts them in order, the
//! cgroup code applies them.

use oci_spec::runtime::LinuxDeviceCgroup;

/// One rule: `kind` is `'a'` (all), `'c'` or `'b'`; `None` is the `*` wildcard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    pub kind: char,
    pub major: Option<i64>,
    pub minor: Option<i64>,
    /// Any of `r`, `w`, `m`.
    pub access: String,
}

impl Rule {
    /// Every access to every device (`a *:* rwm`), allowed or denied.
    pub fn every_device(allow: bool) -> Rule {
        Rule {
            allow,
            kind: 'a',
            major: None,
            minor: None,
            access: "rwm".into(),
        }
    }

    /// `None` for a FIFO rule: FIFOs are no devices, the cgroup does not control them.
    pub fn from_oci(d: &LinuxDeviceCgroup) -> Option<Rule> {
        use oci_spec::runtime::LinuxDeviceType::*;
        let kind = match d.typ() {
            Some(C) | Some(U) => 'c',
            Some(B) => 'b',
            Some(A) | None => 'a',
            Some(P) => return None,
        };
        Some(Rule {
            allow: d.allow(),
            kind,
            major: d.major().filter(|m| *m >= 0),
            minor: d.minor().filter(|m| *m >= 0),
            access: d.access().clone().unwrap_or_else(|| "rwm".into()),
        })
    }

    /// The v1 line: `c 1:3 rwm`.
    pub fn v1_line(&self) -> String {
        let n = |v: Option<i64>| v.map_or("*".to_string(), |v| v.to_string());
        if self.kind == 'a' {
            return format!("a *:* {}", self.access);
        }
        format!(
            "{} {}:{} {}",
            self.kind,
            n(self.major),
            n(self.minor),
            self.access
        )
    }
}

/// Everything denied: where the rules of a container start (runc's device emulator starts
/// from a deny-all list, and v1 needs it written, v2 has no other start).
pub fn deny_all() -> Rule {
    Rule::every_device(false)
}

/// runc's `AllowedDevices` (libcontainer/specconv), in its order: mknod of any node, and
/// use of the standard nodes, each with the path whose node it is. The spec's rules come
/// before these (`spec::cgroup_rules`), so a spec cannot take them away.
pub fn allowed() -> Vec<(Option<&'static str>, Rule)> {
    let rule = |kind, major, minor: Option<i64>, access: &str| Rule {
        allow: true,
        kind,
        major,
        minor,
        access: access.into(),
    };
    vec![
        (None, rule('c', None, None, "m")),
        (None, rule('b', None, None, "m")),
        (Some("/dev/null"), rule('c', Some(1), Some(3), "rwm")),
        (Some("/dev/random"), rule('c', Some(1), Some(8), "rwm")),
        (Some("/dev/full"), rule('c', Some(1), Some(7), "rwm")),
        (Some("/dev/tty"), rule('c', Some(5), Some(0), "rwm")),
        (Some("/dev/zero"), rule('c', Some(1), Some(5), "rwm")),
        (Some("/dev/urandom"), rule('c', Some(1), Some(9), "rwm")),
        // /dev/pts/*, /dev/ptmx, and tun/tap, which runc has always allowed.
        (None, rule('c', Some(136), None, "rwm")),
        (None, rule('c', Some(5), Some(2), "rwm")),
        (None, rule('c', Some(10), Some(200), "rwm")),
    ]
}

/// The rules of a spec without rules of its own: everything denied, then [`allowed`].
pub fn defaults() -> Vec<Rule> {
    std::iter::once(deny_all())
        .chain(allowed().into_iter().map(|(_, r)| r))
        .collect()
}

/// A device node of the host, as an OCI `linux.devices` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostNode {
    pub path: std::path::PathBuf,
    pub kind: char,
    pub major: u64,
    pub minor: u64,
    pub mode: u32,
}

/// Every character and block device under the host's /dev, for a privileged container
/// (containerd's `HostDevices`): not the per-container ones (pts, shm, mqueue) nor links.
pub fn host_nodes() -> Vec<HostNode> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut out = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from("/dev")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(md) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let ft = md.file_type();
            if ft.is_dir() {
                let skip = ["pts", "shm", "mqueue", "fd", ".lxc", ".lxd-mounts", ".udev"];
                if dir.as_os_str() != "/dev" || !skip.iter().any(|s| e.file_name() == *s) {
                    dirs.push(path);
                }
                continue;
            }
            let kind = if ft.is_char_device() {
                'c'
            } else if ft.is_block_device() {
                'b'
            } else {
                continue;
            };
            // /dev/console is the container's own (its terminal, if any).
            if path.as_os_str() == "/dev/console" {
                continue;
            }
            let rdev = md.rdev();
            out.push(HostNode {
                path,
                kind,
                major: libc::major(rdev) as u64,
                minor: libc::minor(rdev) as u64,
                mode: md.mode() & 0o7777,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_as_v1_lines() {
        assert_eq!(Rule::every_device(true).v1_line(), "a *:* rwm");
        assert_eq!(defaults()[0].v1_line(), "a *:* rwm");
        assert_eq!(defaults()[9].v1_line(), "c 136:* rwm");
        assert_eq!(defaults()[10].v1_line(), "c 5:2 rwm");
        assert_eq!(defaults()[11].v1_line(), "c 10:200 rwm");
    }
}
