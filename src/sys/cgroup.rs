//! A process's cgroups: which hierarchy the host has (v1 and hybrid, or v2 unified), where
//! a process is (`/proc/<pid>/cgroup`), and how a new process enters its cgroup.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::error::Error;

/// Whether the host is pure cgroup v2: asked once (a statfs), not at every container or
/// exec start.
pub fn unified() -> bool {
    static V2: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *V2.get_or_init(cgroups_rs::fs::hierarchies::is_cgroup2_unified_mode)
}

/// How a new process enters its cgroup. Migrating a whole process (`cgroup.procs`) takes
/// the kernel's global threadgroup lock, whose write side waits for an RCU grace period,
/// for every supervisor, container and exec started. Neither way below takes it.
pub struct Placement {
    /// v2: the cgroup's directory, for `clone3`'s `CLONE_INTO_CGROUP`: born inside it.
    pub dir: Option<OwnedFd>,
    /// v1: the `tasks` file of each hierarchy. The new, still single-threaded, process
    /// writes "0" to each first thing ([`join_self`]): moving only the calling thread.
    pub tasks: Vec<PathBuf>,
}

impl Placement {
    /// The placement into the cgroup whose directories are `dirs` (one per v1 hierarchy,
    /// in the order the new process joins them; the single v2 one).
    pub fn of(v2: bool, dirs: &[PathBuf]) -> io::Result<Placement> {
        if v2 {
            let dir = dirs
                .first()
                .ok_or_else(|| Error::Invalid("cgroup v2: no directory".into()))?;
            return Ok(Placement {
                dir: Some(open_dir(dir)?),
                tasks: Vec::new(),
            });
        }
        Ok(Placement {
            dir: None,
            tasks: dirs.iter().map(|d| d.join("tasks")).collect(),
        })
    }

    /// On a hybrid host, also the cgroup `dir` of the unified hierarchy (which has no
    /// controllers): `CLONE_INTO_CGROUP` works there too, as the v2 hierarchy is the
    /// kernel's default one.
    pub fn with_unified(mut self, dir: &Path) -> io::Result<Placement> {
        self.dir = Some(open_dir(dir)?);
        Ok(self)
    }
}

fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    nix::fcntl::open(
        dir,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| Error::syscall("opening cgroup", dir.display(), e).into())
}

/// In a freshly cloned, single-threaded process: move it into the cgroups of
/// [`Placement::tasks`].
pub fn join_self(tasks: &[PathBuf]) -> Result<(), Error> {
    for f in tasks {
        // Not fs::write: O_CREAT|O_TRUNC make the kernel set attributes on the cgroup file
        // (kernfs allocates them on first use), which costs more than the write.
        fs::OpenOptions::new()
            .write(true)
            .open(f)
            .and_then(|mut file| io::Write::write_all(&mut file, b"0"))
            .map_err(|e| Error::file("joining cgroup", f, e))?;
    }
    Ok(())
}

/// Parse `/proc/<pid>/cgroup`: v1 → controller → path (one entry per controller of a
/// co-mounted hierarchy); v2 → `""` → path.
pub fn parse_proc_cgroup(text: &str, v2: bool) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if v2 {
            if id == "0" && ctrls.is_empty() {
                m.insert(String::new(), path.to_string());
            }
        } else if !ctrls.is_empty() {
            for c in ctrls.split(',') {
                m.insert(c.to_string(), path.to_string());
            }
        }
    }
    m
}

/// Write every available controller into `dir/cgroup.subtree_control`, one at a time so
/// that one refusal does not stop the others.
pub fn enable_subtree_controllers(dir: &Path) {
    let Ok(avail) = fs::read_to_string(dir.join("cgroup.controllers")) else {
        return;
    };
    for c in avail.split_whitespace() {
        let _ = fs::write(dir.join("cgroup.subtree_control"), format!("+{c}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_cgroup_v1_maps_every_controller_of_a_line() {
        let t = "9:name=systemd:/\n4:memory:/process_api/9b\n2:cpu,cpuacct:/a\n0::/\n";
        let m = parse_proc_cgroup(t, false);
        assert_eq!(m["memory"], "/process_api/9b");
        assert_eq!(m["cpu"], "/a");
        assert_eq!(m["cpuacct"], "/a");
        assert_eq!(m["name=systemd"], "/");
        assert!(!m.contains_key(""));
    }

    #[test]
    fn proc_cgroup_v2_takes_the_zero_line() {
        let m = parse_proc_cgroup("0::/user.slice/x.scope\n", true);
        assert_eq!(m[""], "/user.slice/x.scope");
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn a_v1_placement_lists_the_tasks_file_of_every_hierarchy() {
        let dirs = [PathBuf::from("/a/memory/p"), PathBuf::from("/a/pids/p")];
        let p = Placement::of(false, &dirs).unwrap();
        assert!(p.dir.is_none());
        assert_eq!(
            p.tasks,
            [
                PathBuf::from("/a/memory/p/tasks"),
                PathBuf::from("/a/pids/p/tasks")
            ]
        );
        assert!(Placement::of(true, &[]).is_err());
    }
}
