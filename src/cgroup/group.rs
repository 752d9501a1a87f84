//! One cgroup in every hierarchy: made, listed, and how a process is placed
//! in it.

use cgroups_rs::fs::Cgroup;
use cgroups_rs::CgroupPid;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{err, CgroupRoot};
use crate::sys::cgroup::{enable_subtree_controllers, Placement};

/// One cgroup in every hierarchy (a pod, a supervisor's leaf, a container).
pub struct Group {
    pub(super) cg: Cgroup,
    pub(super) v2: bool,
    /// The cgroup's directory in every hierarchy it exists in (deduplicated). On v1 a new
    /// process joins them in this order ([`Placement::tasks`]), so the first lists every
    /// process that any of them lists, short of one that moved itself out.
    pub(super) dirs: Vec<PathBuf>,
    /// v1: the directories of the memory, devices and cpuset hierarchies, which some
    /// operations need by name (on v2 the one directory serves).
    pub(super) memory: Option<PathBuf>,
    pub(super) devices: Option<PathBuf>,
    pub(super) cpuset: Option<PathBuf>,
    /// The tree this group is in, to make a sibling of it (`renew`).
    pub(super) root: CgroupRoot,
    /// Earlier cgroups of this container that were still busy when it was renewed: they
    /// go with [`destroy`](Group::destroy).
    pub(super) retired: Vec<Group>,
    /// How many times it was renewed into a sibling: the next sibling's number.
    pub(super) renewals: u32,
}

impl Group {
    /// Create a leaf cgroup (processes go here); on v2 it gets the controllers that its
    /// parent hands down (`delegate_controllers`, `create_parent`).
    pub fn create(&self) -> super::Result<()> {
        self.make(false).map(drop)
    }

    /// Make the directories; with `fresh`, report (true) one that existed already instead
    /// of making the rest.
    fn make(&self, fresh: bool) -> super::Result<bool> {
        let fail = |e| err(&format!("creating cgroup {}", self.describe()), e);
        // Not cgroups-rs's create. On v1 it would stat each directory before making it and
        // copy the cpuset's cpus and mems down with six reads and writes for every
        // container. On v2 it writes every controller into the subtree_control of every
        // ancestor up to the root: cgroups that are not podinit's, and in a parent that
        // holds processes (a login shell's scope) the threaded controllers it may enable
        // there make each new child an invalid domain that no process can join.
        for d in &self.dirs {
            if fresh {
                match fs::create_dir(d) {
                    Ok(()) => continue,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(true),
                    // A parent to make first (a new --cgroup-parent): ensure_dir does.
                    Err(_) => {}
                }
            }
            // The errno's kind is kept: runc's rootless rule tells a refusal from a failure.
            crate::util::ensure_dir(d).map_err(|e| fail(err(&d.display().to_string(), e)))?;
        }
        if let Some(d) = &self.cpuset {
            inherit_cpuset(d).map_err(fail)?;
        }
        Ok(false)
    }

    /// Create a cgroup that only has children (the pod cgroup): on v2 its controllers are
    /// passed down to them. One that exists already was left by a run that was killed (the
    /// caller holds the pod's state dir lock): it goes first, with whatever is left in it.
    /// Found by mkdir's EEXIST rather than a stat of every hierarchy beforehand.
    pub fn create_parent(&self) -> super::Result<()> {
        if self.make(true)? {
            self.destroy()
                .map_err(|e| err("removing stale pod cgroup", e))?;
            self.create()?;
        }
        if self.v2 {
            if let Some(d) = self.dirs.first() {
                enable_subtree_controllers(d);
            }
        } else if let Some(d) = &self.cpuset {
            // Its children (the containers) are born with its cpus
            // and mems instead of an empty set that no process may join.
            let _ = fs::write(d.join("cgroup.clone_children"), "1");
        }
        Ok(())
    }

    /// Hand the controllers this cgroup has down to its children (v2), on a cgroup made by
    /// someone else: a pod's slice, which systemd made, before the containers' scopes.
    pub fn hand_down_controllers(&self) {
        if let (true, Some(d)) = (self.v2, self.dirs.first()) {
            enable_subtree_controllers(d);
        }
    }

    /// The tree this group is in.
    pub fn root(&self) -> &CgroupRoot {
        &self.root
    }

    /// A group of [`CgroupRoot::none`]: no cgroup at all.
    /// Whether it is a cgroup v2 (unified) group.
    pub fn is_v2(&self) -> bool {
        self.v2
    }

    pub fn is_none(&self) -> bool {
        self.root.is_none()
    }

    pub fn exists(&self) -> bool {
        self.dirs.iter().any(|d| d.exists())
    }

    /// The `cgroup.procs` files a new process is written to, one per hierarchy.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    pub(super) fn describe(&self) -> String {
        self.dirs
            .first()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| self.cg.path().to_string())
    }

    /// How a process about to be cloned gets into this cgroup without being migrated by
    /// another process: see [`Placement`].
    pub fn placement(&self) -> super::Result<Placement> {
        Placement::of(self.v2, &self.dirs)
            .map_err(|e| err(&format!("placing into cgroup {}", self.describe()), e))
    }

    /// Put process `pid` (in the caller's pid namespace) into this cgroup.
    pub fn add(&self, pid: i32) -> super::Result<()> {
        for f in self.procs_files() {
            fs::write(&f, pid.to_string())
                .map_err(|e| err(&format!("adding pid {pid} to {}", f.display()), e))?;
        }
        Ok(())
    }

    /// Pids in the cgroup (from the hierarchy that lists the most: v1 hierarchies can
    /// disagree for a moment while a process moves).
    pub fn pids(&self) -> Vec<i32> {
        let mut best: Vec<i32> = Vec::new();
        for d in &self.dirs {
            let Ok(t) = fs::read_to_string(d.join("cgroup.procs")) else {
                continue;
            };
            let v: Vec<i32> = t.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if v.len() > best.len() {
                best = v;
            }
        }
        best
    }

    /// Whether the cgroup holds no process, from the first hierarchy alone (see `dirs`):
    /// one read instead of one per hierarchy, at every exit of a container.
    pub(super) fn looks_empty(&self) -> bool {
        let Some(first) = self.dirs.first() else {
            return true;
        };
        let mut buf = [0u8; 16];
        match fs::File::open(first.join("cgroup.procs")) {
            Ok(mut f) => matches!(io::Read::read(&mut f, &mut buf), Ok(0)),
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
    }

    /// Number of OOM kills the kernel counted in this cgroup (v1 `memory.oom_control`,
    /// v2 `memory.events`).
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        self.memory
            .as_ref()
            .and_then(|d| fs::read_to_string(d.join(file)).ok())
            .and_then(|t| keyed_value(&t, key))
            .unwrap_or(0)
    }

    pub fn pid_of(p: i32) -> CgroupPid {
        CgroupPid::from(p as u64)
    }
}

/// A new v1 cpuset cgroup has no cpus and no mems (no process may join it) unless its
/// parent has `cgroup.clone_children` set: copy them from the nearest ancestor that has
/// them, top down, as cgroups-rs would.
fn inherit_cpuset(dir: &Path) -> super::Result<()> {
    let read = |d: &Path, f: &str| {
        let p = d.join(f);
        fs::read_to_string(&p)
            .map(|t| t.trim().to_string())
            .map_err(|e| err(&format!("reading {}", p.display()), e))
    };
    if !read(dir, "cpuset.cpus")?.is_empty() {
        return Ok(());
    }
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let mut empty = vec![dir.to_path_buf()];
        let mut value = String::new();
        let mut cur = dir.parent();
        while let Some(d) = cur {
            value = read(d, file)?;
            if !value.is_empty() {
                break;
            }
            empty.push(d.to_path_buf());
            cur = d.parent();
        }
        for d in empty.iter().rev() {
            fs::write(d.join(file), &value)
                .map_err(|e| err(&format!("writing {}", d.join(file).display()), e))?;
        }
    }
    Ok(())
}

fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key)).then(|| it.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_files() {
        let t = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed_value(t, "oom_kill"), Some(3));
        assert_eq!(keyed_value("low 0\nhigh 0\n", "oom_kill"), None);
    }
}
