//! A container's namespaces as `linux.namespaces` lists them: which the clone makes, which
//! are joined by path (by the creator around the clone; a user namespace by the child
//! first of all, or, when the clone makes namespaces, by a hop that clones the child from
//! inside it: `hop`), and, for an exec, which the container does not share with us.

use oci_spec::runtime::{Linux, LinuxNamespaceType as T};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use crate::runtime::prepare::ns_flag;
use crate::runtime::{Error, Result};

pub struct Plan {
    /// `CLONE_NEW*` flags of the namespaces the clone makes (a cgroup namespace is made
    /// by the child itself).
    pub clone_flags: libc::c_int,
    pub new_user: bool,
    pub new_cgroup: bool,
    /// No mount namespace in the list: the container shares the creator's, where its
    /// root is entered by chroot and its mounts stay until `delete` (runc's way).
    pub shared_mount: bool,
    /// A user namespace given by path: the child joins it before anything else.
    pub user_path: Option<OwnedFd>,
    /// The other namespaces given by path, with their flag.
    joins: Vec<(OwnedFd, libc::c_int, &'static str)>,
}

/// The name of a namespace kind in /proc/<pid>/ns.
fn proc_name(t: T) -> &'static str {
    match t {
        T::Mount => "mnt",
        T::Cgroup => "cgroup",
        T::Uts => "uts",
        T::Ipc => "ipc",
        T::User => "user",
        T::Pid => "pid",
        T::Network => "net",
        T::Time => "time",
    }
}

impl Plan {
    pub fn of(linux: &Linux) -> Result<Plan> {
        let mut plan = Plan {
            clone_flags: 0,
            new_user: false,
            new_cgroup: false,
            shared_mount: false,
            user_path: None,
            joins: Vec::new(),
        };
        let mut seen = Vec::new();
        for ns in linux.namespaces().iter().flatten() {
            let t = ns.typ();
            if seen.contains(&t) {
                return Err(Error::Spec(format!(
                    "linux.namespaces: the {} namespace is listed twice",
                    proc_name(t)
                )));
            }
            seen.push(t);
            match ns.path().as_deref().filter(|p| !p.as_os_str().is_empty()) {
                Some(path) => {
                    let fd = nix::fcntl::open(
                        path,
                        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                        nix::sys::stat::Mode::empty(),
                    )
                    .map_err(|e| {
                        let what = format!(
                            "linux.namespaces: opening the {} namespace {}",
                            proc_name(t),
                            path.display()
                        );
                        Error::errno(what, e)
                    })?;
                    if t == T::User {
                        plan.user_path = Some(fd);
                    } else {
                        plan.joins.push((fd, ns_flag(t), proc_name(t)));
                    }
                }
                None if t == T::User => {
                    plan.new_user = true;
                    plan.clone_flags |= libc::CLONE_NEWUSER;
                }
                None if t == T::Cgroup => plan.new_cgroup = true,
                None => plan.clone_flags |= ns_flag(t),
            }
        }
        if !seen.contains(&T::Mount) {
            plan.shared_mount = true;
            // Masking or making read-only a path of a shared mount namespace would do it
            // to the creator's (runc: "unable to restrict sys entries without a private
            // MNT namespace").
            for (field, paths) in [
                ("linux.maskedPaths", linux.masked_paths()),
                ("linux.readonlyPaths", linux.readonly_paths()),
            ] {
                if paths.as_ref().is_some_and(|p| !p.is_empty()) {
                    return Err(Error::Spec(format!(
                        "{field}: needs a mount namespace of the container's own, and \
                         linux.namespaces has none"
                    )));
                }
            }
        }
        if linux.time_offsets().is_some() {
            return Err(Error::Spec("linux.timeOffsets: not supported".into()));
        }
        let maps = linux.uid_mappings().as_ref().is_some_and(|m| !m.is_empty())
            || linux.gid_mappings().as_ref().is_some_and(|m| !m.is_empty());
        if maps && !seen.contains(&T::User) {
            return Err(Error::Spec(
                "linux.uidMappings/gidMappings need a user namespace in linux.namespaces".into(),
            ));
        }
        if plan.new_user && !maps {
            return Err(Error::Spec("linux.namespaces: a new user namespace needs linux.uidMappings and linux.gidMappings".into()));
        }
        Ok(plan)
    }

    /// Join the namespaces given by path (the pid one for our children only), keeping
    /// our own to come back to.
    pub fn enter(&self) -> Result<Joined> {
        let mut own = Vec::new();
        for (_, flag, name) in &self.joins {
            let fd = nix::fcntl::open(
                format!("/proc/self/ns/{name}").as_str(),
                nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .map_err(|e| Error::errno(format_args!("opening /proc/self/ns/{name}"), e))?;
            own.push((fd, *flag, *name));
        }
        let mut joined = Joined { own: Vec::new() };
        for ((fd, flag, name), mine) in self.joins.iter().zip(own) {
            // SAFETY: setns with an fd we opened and its namespace flag.
            if unsafe { libc::setns(fd.as_raw_fd(), *flag) } != 0 {
                let e = std::io::Error::last_os_error();
                let _ = joined.leave();
                return Err(Error::os(format_args!("joining the {name} namespace"), e));
            }
            joined.own.push(mine);
        }
        Ok(joined)
    }
}

/// Our own namespaces, left for the clone.
pub struct Joined {
    own: Vec<(OwnedFd, libc::c_int, &'static str)>,
}

impl Joined {
    /// Back into our own namespaces, so that the runtime hooks run in them.
    pub fn leave(mut self) -> Result<()> {
        while let Some((fd, flag, name)) = self.own.pop() {
            // SAFETY: setns with an fd we opened and its namespace flag.
            if unsafe { libc::setns(fd.as_raw_fd(), flag) } != 0 {
                return Err(Error::os(
                    format_args!("returning to our own {name} namespace"),
                    std::io::Error::last_os_error(),
                ));
            }
        }
        Ok(())
    }
}

/// The `setns` flags of the namespaces in which the process behind `pidfd` differs from
/// us.
pub fn differing(pidfd: &OwnedFd) -> Result<libc::c_int> {
    let pid = pid_of(pidfd)?;
    let mut flags = 0;
    for t in [
        T::Mount,
        T::Cgroup,
        T::Uts,
        T::Ipc,
        T::User,
        T::Pid,
        T::Network,
        T::Time,
    ] {
        let name = proc_name(t);
        let theirs = std::fs::metadata(format!("/proc/{pid}/ns/{name}"));
        let ours = std::fs::metadata(format!("/proc/self/ns/{name}"));
        match (theirs, ours) {
            (Ok(a), Ok(b)) if a.ino() == b.ino() && a.dev() == b.dev() => {}
            // A kind the kernel lacks (time before 5.6) is not joined.
            (Err(_), Err(_)) => {}
            (Err(e), _) => return Err(Error::os(format_args!("reading /proc/{pid}/ns/{name}"), e)),
            _ => flags |= ns_flag(t),
        }
    }
    Ok(flags)
}

/// The pid behind a pidfd, from its fdinfo.
pub(super) fn pid_of(pidfd: &OwnedFd) -> Result<i32> {
    let path = format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd());
    let text =
        std::fs::read_to_string(&path).map_err(|e| Error::os(format_args!("reading {path}"), e))?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&p: &i32| p > 0)
        .ok_or_else(|| Error::Exited("the container's process has exited".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(v: serde_json::Value) -> Linux {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn new_namespaces_are_clone_flags_and_a_cgroup_one_is_the_childs() {
        let p = Plan::of(&linux(serde_json::json!({"namespaces": [
            {"type": "mount"}, {"type": "pid"}, {"type": "network"}, {"type": "ipc"},
            {"type": "uts"}, {"type": "cgroup"}]})))
        .unwrap();
        assert_eq!(
            p.clone_flags,
            libc::CLONE_NEWNS
                | libc::CLONE_NEWPID
                | libc::CLONE_NEWNET
                | libc::CLONE_NEWIPC
                | libc::CLONE_NEWUTS
        );
        assert!(p.new_cgroup && !p.new_user && !p.shared_mount);
    }

    #[test]
    fn without_a_mount_namespace_the_creators_is_shared_but_not_masked() {
        let p = Plan::of(&linux(serde_json::json!({"namespaces": [{"type": "pid"}]}))).unwrap();
        assert!(p.shared_mount);
        assert_eq!(p.clone_flags, libc::CLONE_NEWPID);
        let none = Plan::of(&linux(serde_json::json!({}))).unwrap();
        assert!(none.shared_mount && none.clone_flags == 0);
        for field in ["maskedPaths", "readonlyPaths"] {
            let err = Plan::of(&linux(serde_json::json!({"namespaces": [{"type": "pid"}],
                field: ["/proc/kcore"]})))
            .err()
            .unwrap();
            assert_eq!(err.kind(), crate::error::Kind::InvalidArgument, "{err}");
            assert!(
                err.to_string()
                    .contains(&format!("linux.{field}: needs a mount namespace")),
                "{err}"
            );
        }
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let err = |v| Plan::of(&linux(v)).err().unwrap().to_string();
        let missing = Plan::of(&linux(serde_json::json!({"namespaces": [{"type": "mount"},
            {"type": "network", "path": "/nonexistent/ns"}]})))
        .err()
        .unwrap();
        assert_eq!(missing.kind(), crate::error::Kind::NotFound, "{missing}");
        assert!(
            err(serde_json::json!({"namespaces": [{"type": "mount"}, {"type": "mount"}]}))
                .contains("twice")
        );
        assert!(
            err(serde_json::json!({"namespaces": [{"type": "mount"}, {"type": "user"}]}))
                .contains("uidMappings")
        );
        assert!(err(serde_json::json!({"namespaces": [{"type": "mount"}],
            "uidMappings": [{"containerID": 0, "hostID": 1000, "size": 1}]}))
        .contains("user namespace"));
        assert!(err(serde_json::json!({"namespaces": [{"type": "mount"},
            {"type": "network", "path": "/nonexistent/ns"}]}))
        .contains("/nonexistent/ns"));
    }
}
