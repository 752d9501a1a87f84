//! Everything the container's child process needs, computed in the supervisor before the
//! clone: the child then mostly makes system calls.

use oci_spec::runtime::{LinuxNamespaceType, Spec};
use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::mounts::{self, MountPlan};
use super::{Error, Result};

pub struct Device {
    pub path: PathBuf,
    pub kind: libc::mode_t,
    pub major: u64,
    pub minor: u64,
    pub mode: libc::mode_t,
    pub uid: u32,
    pub gid: u32,
}

pub struct Prepared {
    pub stdio: [RawFd; 3],
    /// A container of its own (`runtime::container`): what its process does beyond a pod
    /// container's. None for the pod's containers and for execs.
    pub standalone: Option<Standalone>,
    /// The namespaces an exec joins through the target's pidfd (`setns` flags); the pid
    /// namespace is joined at clone time.
    pub join_flags: libc::c_int,
    /// `hostname` and `domainname`, set in the container's own UTS namespace.
    pub hostname: Option<CString>,
    pub domainname: Option<CString>,
    /// `linux.personality`: the execution domain set before exec.
    pub personality: Option<libc::c_ulong>,
    /// fds 3..3+N stay open across exec (`--preserve-fds`).
    pub keep_fds: u32,
    /// Without HOME in the environment, set it from the container's /etc/passwd (runc's
    /// rule; "/" when the user has no entry).
    pub default_home: bool,
    /// `process.terminal`: 0–2 become a new terminal, whose master is sent on
    /// `console_sock` (the start-result socket).
    pub terminal: bool,
    pub console_sock: RawFd,
    /// `process.consoleSize` (rows, columns), set on the new terminal.
    pub console_size: Option<(u16, u16)>,
    /// Exec into a running container: the pidfd of its main process, whose mount (and
    /// cgroup) namespaces the child joins instead of building a root filesystem.
    pub join: Option<RawFd>,
    pub new_pid_ns: bool,
    pub new_cgroup_ns: bool,
    /// Born in the pod's user namespace (`runtime::Launch::user_ns`): the process becomes
    /// its root before anything else, so that what it creates is owned by mapped ids.
    pub user_ns_root: bool,
    /// The runtime itself runs in a user namespace that is not the host's (without root):
    /// the same limits as [`user_ns_root`](Self::user_ns_root) apply.
    pub ambient_user_ns: bool,
    pub root: PathBuf,
    /// No mount namespace of its own (`linux.namespaces` lists none): the rootfs is set up
    /// in the creator's and entered by chroot, the creator's `/` left as it is.
    pub shared_mount_ns: bool,
    /// An exec into a container that shares our mount namespace: the container's root
    /// (`/proc/PID/root`), chroot'ed into since there is no namespace to join for it.
    pub exec_root: Option<CString>,
    pub root_readonly: bool,
    pub root_propagation: libc::c_ulong,
    pub mounts: Vec<MountPlan>,
    /// /dev is a tmpfs of the spec: it gets the default device nodes and links.
    pub dev_is_tmpfs: bool,
    pub devices: Vec<Device>,
    pub masked: Vec<PathBuf>,
    pub readonly: Vec<PathBuf>,
    pub sysctl: Vec<(PathBuf, String)>,
    pub oom_score_adj: Option<i32>,
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<libc::gid_t>,
    pub umask: Option<u32>,
    pub caps: super::caps_set::Caps,
    pub no_new_privs: bool,
    /// The `linux.seccomp` filter, compiled here so that the child only installs it.
    pub seccomp: Option<super::seccomp::Filter>,
    pub cwd: PathBuf,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    /// Candidates for `argv[0]` in PATH order (just argv[0] when it has a '/').
    pub exe_candidates: Vec<CString>,
    pub argv0: String,
    /// On a pure cgroup v2 host a `cgroup` mount is a cgroup2 mount; on v1 it is skipped.
    pub cgroup2_host: bool,
    /// The signals the supervisor ignores, bit `n - 1` for signal `n`: set back to their
    /// default in the child (an ignored signal stays ignored across clone and exec).
    pub ignored_signals: u64,
}

/// What a container of its own does beyond a pod's container (see `runtime::container`).
pub struct Standalone {
    /// The socket to the creating process: the child waits on it for "go" (after its
    /// user namespace's maps are written) and reports "hooks" and "ready" on it.
    pub sync: RawFd,
    /// The exec fifo, opened O_PATH: reopened for writing through /proc/self/fd, which
    /// blocks until `start` reads it.
    pub fifo: RawFd,
    /// The creator's fds the child needs until exec (the sync socket, the fifo, the
    /// console socket, a user namespace's); every other fd above the preserved ones is
    /// closed first thing, so that nothing of the creator's (its lock on the state
    /// directory) stays held while the process waits for `start`.
    pub keep: Vec<RawFd>,
    /// A user namespace given by path, joined first.
    pub user_ns: Option<RawFd>,
    /// In a user namespace of its own or joined: become its root once the maps exist, so
    /// that what the set-up creates is owned by a mapped id.
    pub become_root: bool,
    /// Whether the creating process runs hooks (prestart, createRuntime) before the root
    /// is switched: then the child waits for them.
    pub runtime_hooks: bool,
    pub create_container_hooks: Vec<oci_spec::runtime::Hook>,
    pub start_container_hooks: Vec<oci_spec::runtime::Hook>,
    pub no_pivot: bool,
    /// The session keyring to join, named for the container (`--no-new-keyring`: None).
    pub keyring: Option<CString>,
}

/// How the namespaces of `linux.namespaces` are read.
#[derive(Clone, Copy, PartialEq)]
pub enum Namespaces {
    /// A pod's container: net, ipc and uts are the pod's (the child inherits them), only
    /// pid, mount and cgroup may be its own; paths are not accepted.
    Pod,
    /// A container of its own: every kind, made or joined by path (the caller joins the
    /// paths and passes the clone flags).
    Any,
}

fn cstr(s: impl AsRef<[u8]>) -> Result<CString> {
    CString::new(s.as_ref()).map_err(|_| {
        Error::spec(format!(
            "{:?} contains a NUL byte",
            String::from_utf8_lossy(s.as_ref())
        ))
    })
}

impl Prepared {
    pub fn from_spec(spec: &Spec, stdio: [RawFd; 3]) -> Result<Prepared> {
        Self::from_spec_with(spec, stdio, Namespaces::Pod)
    }

    pub fn from_spec_with(spec: &Spec, stdio: [RawFd; 3], kinds: Namespaces) -> Result<Prepared> {
        let process = spec
            .process()
            .as_ref()
            .ok_or_else(|| Error::spec("config.json: process: Required value"))?;
        let root = spec
            .root()
            .as_ref()
            .ok_or_else(|| Error::spec("config.json: root: Required value"))?;
        let linux = spec.linux().clone().unwrap_or_default();
        let seccomp = linux
            .seccomp()
            .as_ref()
            .map(super::seccomp::compile)
            .transpose()?;
        if process
            .apparmor_profile()
            .as_deref()
            .is_some_and(|p| !p.is_empty())
            || process
                .selinux_label()
                .as_deref()
                .is_some_and(|p| !p.is_empty())
        {
            return Err(Error::spec("AppArmor and SELinux labels are not supported"));
        }
        let mut new_pid_ns = false;
        let mut new_cgroup_ns = false;
        let mut join_flags = libc::CLONE_NEWNS;
        for ns in linux.namespaces().iter().flatten() {
            match ns.typ() {
                LinuxNamespaceType::Pid => new_pid_ns = true,
                LinuxNamespaceType::Cgroup => {
                    new_cgroup_ns = true;
                    join_flags |= libc::CLONE_NEWCGROUP;
                }
                LinuxNamespaceType::Mount => {}
                t if kinds == Namespaces::Any => join_flags |= ns_flag(t),
                t => {
                    return Err(Error::spec(format!(
                        "namespace {t:?} must be the pod's (removed from the spec)"
                    )))
                }
            }
        }
        let mut mounts_out = Vec::new();
        let mut dev_is_tmpfs = false;
        for m in spec.mounts().iter().flatten() {
            if !m.destination().is_absolute() {
                return Err(Error::spec(format!(
                    "mount destination {} is not absolute",
                    m.destination().display()
                )));
            }
            let mut opts = m.options().clone().unwrap_or_default();
            if m.typ().as_deref() == Some("devpts") && crate::sys::rootless::rootless() {
                let map = std::fs::read_to_string("/proc/self/gid_map").unwrap_or_default();
                opts = mounts::devpts_options(&opts, &map);
            }
            let source_is_proc = || {
                m.source().as_deref().is_some_and(|s| {
                    nix::sys::statfs::statfs(s)
                        .is_ok_and(|st| st.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
                })
            };
            let on_proc = mounts::check_proc_mount(m.destination(), m.typ().as_deref(), false);
            if on_proc.is_err() && m.typ().as_deref() != Some("proc") {
                mounts::check_proc_mount(m.destination(), m.typ().as_deref(), source_is_proc())?;
            }
            let p = mounts::plan(
                m.destination(),
                m.typ().as_deref(),
                m.source().as_deref(),
                &opts,
            );
            if m.destination() == Path::new("/dev") && m.typ().as_deref() == Some("tmpfs") {
                dev_is_tmpfs = true;
            }
            mounts_out.push(p);
        }
        let devices = linux
            .devices()
            .iter()
            .flatten()
            .map(|d| {
                use oci_spec::runtime::LinuxDeviceType::*;
                let kind = match d.typ() {
                    C | U => libc::S_IFCHR,
                    B => libc::S_IFBLK,
                    P => libc::S_IFIFO,
                    A => libc::S_IFCHR,
                };
                Device {
                    path: d.path().clone(),
                    kind,
                    major: d.major() as u64,
                    minor: d.minor() as u64,
                    mode: d.file_mode().unwrap_or(0o666),
                    uid: d.uid().unwrap_or(0),
                    gid: d.gid().unwrap_or(0),
                }
            })
            .collect();
        let sysctl = linux
            .sysctl()
            .iter()
            .flatten()
            .map(|(k, v)| {
                (
                    PathBuf::from("/proc/sys").join(k.replace('.', "/")),
                    v.clone(),
                )
            })
            .collect();
        let mut rlimits = Vec::new();
        for r in process.rlimits().iter().flatten() {
            let res = rlimit_resource(&format!("{:?}", r.typ()))
                .ok_or_else(|| Error::spec(format!("rlimit {:?} is not known", r.typ())))?;
            rlimits.push((res, r.soft(), r.hard()));
        }
        let user = process.user();
        let mut groups: Vec<libc::gid_t> = user.additional_gids().clone().unwrap_or_default();
        // A pod's container also has its primary group among its groups, as the CRI gives
        // it; runc sets `additionalGids` as they are.
        if kinds == Namespaces::Pod && !groups.contains(&user.gid()) {
            groups.insert(0, user.gid());
        }
        let env: Vec<String> = process.env().clone().unwrap_or_default();
        let args = process.args().clone().unwrap_or_default();
        let argv0 = args
            .first()
            .cloned()
            .ok_or_else(|| Error::spec("process.args: Required value"))?;
        let exe_candidates = if argv0.contains('/') {
            vec![cstr(&argv0)?]
        } else {
            let path = env
                .iter()
                .find_map(|e| e.strip_prefix("PATH="))
                .unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
            path.split(':')
                .filter(|d| !d.is_empty())
                .map(|d| cstr(format!("{d}/{argv0}")))
                .collect::<Result<_>>()?
        };
        let personality = match linux.personality() {
            None => None,
            Some(p) => Some(personality(p)?),
        };
        let uts = |v: &Option<String>, field: &str| -> Result<Option<CString>> {
            match v.as_deref().filter(|h| !h.is_empty()) {
                None => Ok(None),
                Some(_) if kinds == Namespaces::Pod => Ok(None),
                Some(h)
                    if !linux
                        .namespaces()
                        .iter()
                        .flatten()
                        .any(|n| n.typ() == LinuxNamespaceType::Uts) =>
                {
                    Err(Error::spec(format!(
                        "{field} {h:?} needs a private UTS namespace (linux.namespaces has none)"
                    )))
                }
                Some(h) => cstr(h).map(Some),
            }
        };
        Ok(Prepared {
            stdio,
            standalone: None,
            join_flags,
            hostname: uts(spec.hostname(), "hostname")?,
            domainname: uts(spec.domainname(), "domainname")?,
            personality,
            keep_fds: 0,
            default_home: kinds == Namespaces::Any && !env.iter().any(|e| e.starts_with("HOME=")),
            terminal: process.terminal().unwrap_or(false),
            console_sock: -1,
            console_size: process
                .console_size()
                .as_ref()
                .map(|b| (b.height() as u16, b.width() as u16)),
            join: None,
            new_pid_ns,
            new_cgroup_ns,
            user_ns_root: false,
            ambient_user_ns: crate::sys::rootless::rootless(),
            root: root.path().clone(),
            shared_mount_ns: false,
            exec_root: None,
            root_readonly: root.readonly().unwrap_or(false),
            root_propagation: match linux.rootfs_propagation().as_deref() {
                Some("private") => libc::MS_PRIVATE,
                Some("rprivate") => libc::MS_PRIVATE | libc::MS_REC,
                Some("shared") => libc::MS_SHARED,
                Some("rshared") => libc::MS_SHARED | libc::MS_REC,
                Some("slave") => libc::MS_SLAVE,
                _ => libc::MS_SLAVE | libc::MS_REC,
            },
            mounts: mounts_out,
            dev_is_tmpfs,
            devices,
            masked: linux
                .masked_paths()
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            readonly: linux
                .readonly_paths()
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            sysctl,
            oom_score_adj: process.oom_score_adj(),
            rlimits,
            uid: user.uid(),
            gid: user.gid(),
            groups,
            umask: user.umask(),
            caps: super::caps_set::Caps::from_spec(process.capabilities().as_ref())?,
            no_new_privs: process.no_new_privileges().unwrap_or(false),
            seccomp,
            cwd: process.cwd().clone(),
            argv: args.iter().map(cstr).collect::<Result<_>>()?,
            env: env.iter().map(cstr).collect::<Result<_>>()?,
            exe_candidates,
            argv0,
            cgroup2_host: crate::sys::cgroup::unified(),
            ignored_signals: crate::sys::signals::ignored_signals(),
        })
    }
}

impl Prepared {
    /// In a user namespace (the pod's, or a container of its own's): no device node may
    /// be made, and a remount keeps the flags the kernel locked on the mount.
    pub fn in_user_ns(&self) -> bool {
        self.user_ns_root
            || self.ambient_user_ns
            || self.standalone.as_ref().is_some_and(|s| s.become_root)
    }
}

/// The `setns`/`clone` flag of a namespace kind.
pub fn ns_flag(t: LinuxNamespaceType) -> libc::c_int {
    match t {
        LinuxNamespaceType::Mount => libc::CLONE_NEWNS,
        LinuxNamespaceType::Cgroup => libc::CLONE_NEWCGROUP,
        LinuxNamespaceType::Uts => libc::CLONE_NEWUTS,
        LinuxNamespaceType::Ipc => libc::CLONE_NEWIPC,
        LinuxNamespaceType::User => libc::CLONE_NEWUSER,
        LinuxNamespaceType::Pid => libc::CLONE_NEWPID,
        LinuxNamespaceType::Network => libc::CLONE_NEWNET,
        LinuxNamespaceType::Time => 0x80,
    }
}

/// `linux.personality`'s domain (and no flags: runc accepts none either) as the value
/// personality(2) takes.
fn personality(p: &oci_spec::runtime::LinuxPersonality) -> Result<libc::c_ulong> {
    use oci_spec::runtime::LinuxPersonalityDomain as D;
    if p.flags().as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(Error::spec("linux.personality.flags: not supported"));
    }
    Ok(match p.domain() {
        D::PerLinux => 0,
        D::PerLinux32 => 8,
    })
}

/// `RLIMIT_NOFILE` (as oci-spec prints its enum: `RlimitNofile`) → the resource number.
fn rlimit_resource(name: &str) -> Option<libc::__rlimit_resource_t> {
    let n = name
        .to_ascii_uppercase()
        .replace("RLIMIT_", "")
        .replace("RLIMIT", "");
    Some(match n.as_str() {
        "CPU" => libc::RLIMIT_CPU,
        "FSIZE" => libc::RLIMIT_FSIZE,
        "DATA" => libc::RLIMIT_DATA,
        "STACK" => libc::RLIMIT_STACK,
        "CORE" => libc::RLIMIT_CORE,
        "RSS" => libc::RLIMIT_RSS,
        "NPROC" => libc::RLIMIT_NPROC,
        "NOFILE" => libc::RLIMIT_NOFILE,
        "MEMLOCK" => libc::RLIMIT_MEMLOCK,
        "AS" => libc::RLIMIT_AS,
        "LOCKS" => libc::RLIMIT_LOCKS,
        "SIGPENDING" => libc::RLIMIT_SIGPENDING,
        "MSGQUEUE" => libc::RLIMIT_MSGQUEUE,
        "NICE" => libc::RLIMIT_NICE,
        "RTPRIO" => libc::RLIMIT_RTPRIO,
        "RTTIME" => libc::RLIMIT_RTTIME,
        _ => return None,
    })
}

/// Paths as C strings for the child.
pub fn c_path(p: &Path) -> Result<CString> {
    cstr(p.as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rlimit_names() {
        assert_eq!(rlimit_resource("RlimitNofile"), Some(libc::RLIMIT_NOFILE));
        assert_eq!(rlimit_resource("RLIMIT_NPROC"), Some(libc::RLIMIT_NPROC));
        assert_eq!(rlimit_resource("Nope"), None);
    }

    #[test]
    fn prepares_a_spec() {
        let spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh", "-c", "true"], "cwd": "/", "env": ["PATH=/bin:/usr/bin"],
                        "user": {"uid": 1000, "gid": 1000, "additionalGids": [5]},
                        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 512}],
                        "capabilities": {"bounding": ["CAP_KILL"]}},
            "root": {"path": "/r", "readonly": true},
            "mounts": [{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["mode=755"]}],
            "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}], "maskedPaths": ["/proc/kcore"]}
        }))
        .unwrap();
        let p = Prepared::from_spec(&spec, [0, 1, 2]).unwrap();
        assert!(p.new_pid_ns && !p.new_cgroup_ns && p.dev_is_tmpfs && p.root_readonly);
        assert_eq!(p.groups, vec![1000, 5]);
        assert_eq!(p.rlimits, vec![(libc::RLIMIT_NOFILE, 512, 1024)]);
        assert_eq!(
            p.exe_candidates,
            vec![cstr("/bin/sh").unwrap(), cstr("/usr/bin/sh").unwrap()]
        );
        assert_eq!(p.masked, vec![PathBuf::from("/proc/kcore")]);
    }

    #[test]
    fn refuses_what_it_cannot_do() {
        let mut v = serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"args": ["sh"], "cwd": "/", "user": {"uid": 0, "gid": 0}},
            "root": {"path": "/r"},
            "linux": {"namespaces": [{"type": "network"}]}
        });
        let spec: Spec = serde_json::from_value(v.clone()).unwrap();
        let err = |s: &Spec| Prepared::from_spec(s, [0, 1, 2]).err().unwrap().to_string();
        assert!(err(&spec).contains("pod's"));
        v["linux"] = serde_json::json!({"seccomp": {"defaultAction": "SCMP_ACT_NOTIFY"}});
        let spec: Spec = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            err(&spec),
            "linux.seccomp.defaultAction: SCMP_ACT_NOTIFY is not supported"
        );
        v["linux"] = serde_json::json!({"seccomp": {"defaultAction": "SCMP_ACT_ERRNO"}});
        let spec: Spec = serde_json::from_value(v).unwrap();
        let p = Prepared::from_spec(&spec, [0, 1, 2]).unwrap();
        assert!(p.seccomp.is_some_and(|f| !f.program.is_empty()));
    }
}
