//! Where the cgroups go: cgroup v1 (and hybrid) or v2, and the parent cgroup in
//! each hierarchy.

use cgroups_rs::fs::hierarchies;
use cgroups_rs::fs::Cgroup;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{err, Group};
use crate::sys::cgroup::{enable_subtree_controllers, parse_proc_cgroup, unified};

/// Where the cgroups go and how to reach them. Cheap to clone: every [`Group`]
/// keeps one, to make a sibling of itself.
#[derive(Clone, Debug)]
pub struct CgroupRoot {
    v2: bool,
    /// v1: controller name (as in /proc/self/cgroup, e.g. `memory`, `name=systemd`) →
    /// parent path. v2: the single entry `""` → parent path.
    parents: Arc<HashMap<String, String>>,
    /// No cgroups at all: a pod run without root where none are delegated to the user
    /// (docs/interface.md §Without root). Its groups have no directory; making one,
    /// placing a process, limits and device rules do nothing.
    none: bool,
}

impl CgroupRoot {
    /// `parent`: `--cgroup-parent` (a path from the root of each hierarchy), or `None`
    /// for the cgroup this process is in.
    pub fn detect(parent: Option<&str>) -> super::Result<CgroupRoot> {
        Self::detect_for(parent, "/proc/self/cgroup")
    }

    /// As [`detect`](Self::detect), reading the current cgroup of `pid` instead.
    pub fn detect_for(parent: Option<&str>, proc_cgroup: &str) -> super::Result<CgroupRoot> {
        let v2 = unified();
        let text = fs::read_to_string(proc_cgroup)
            .map_err(|e| err(&format!("reading {proc_cgroup}"), e))?;
        let mut parents = parse_proc_cgroup(&text, v2);
        if v2 && !parents.contains_key("") {
            return Err(err("cgroup v2", format!("no 0:: line in {proc_cgroup}")));
        }
        if let Some(p) = parent {
            if !p.starts_with('/') || p.split('/').any(|c| c == "..") {
                return Err(err(
                    "--cgroup-parent",
                    format!("{p:?} must be an absolute cgroup path without \"..\""),
                ));
            }
            for v in parents.values_mut() {
                *v = p.to_string();
            }
            let root = CgroupRoot {
                v2,
                parents: Arc::new(parents),
                none: false,
            };
            // The parent is the caller's to make (as kubelet's cgroupfs driver expects):
            // creating it here would leave it behind.
            let probe = root.group("probe");
            let parents: Vec<&Path> = probe.dirs().iter().filter_map(|d| d.parent()).collect();
            if let Some(missing) = parents.into_iter().find(|d| !d.is_dir()) {
                return Err(super::missing(
                    "--cgroup-parent",
                    format!("{p:?} does not exist ({} is missing)", missing.display()),
                ));
            }
            return Ok(root);
        }
        Ok(CgroupRoot {
            v2,
            parents: Arc::new(parents),
            none: false,
        })
    }

    /// Cgroups that are not used (see `none`): what a pod without delegated cgroups
    /// runs with.
    pub fn none() -> CgroupRoot {
        CgroupRoot {
            v2: false,
            parents: Arc::new(HashMap::new()),
            none: true,
        }
    }

    /// Whether this process may make cgroups below the parent: on v2, the parent's
    /// directory and its `cgroup.procs` are writable (a subtree delegated to the user).
    /// Checked with access(2), which a user namespace's root passes only for files its
    /// owner maps.
    pub fn parent_writable(&self) -> bool {
        if !self.v2 || self.none {
            return false;
        }
        let dir = hierarchy()
            .root()
            .join(self.parents[""].trim_start_matches('/'));
        let w = nix::unistd::AccessFlags::W_OK;
        nix::unistd::access(&dir, w).is_ok()
            && nix::unistd::access(&dir.join("cgroup.procs"), w).is_ok()
    }

    /// Whether this is [`none`](Self::none).
    pub fn is_none(&self) -> bool {
        self.none
    }

    pub fn is_v2(&self) -> bool {
        self.v2
    }

    /// A handle on `<parent>/<rel>` (not created yet).
    pub fn group(&self, rel: &str) -> Group {
        self.group_at(Path::new(rel))
    }

    /// As [`group`](Self::group), with a path.
    pub(super) fn group_at(&self, rel: &Path) -> Group {
        if self.none {
            return Group {
                cg: Cgroup::load_with_relative_paths(
                    Box::new(hierarchies::V2::new()),
                    rel,
                    HashMap::new(),
                ),
                v2: false,
                dirs: Vec::new(),
                memory: None,
                devices: None,
                cpuset: None,
                root: self.clone(),
                retired: Vec::new(),
                renewals: 0,
            };
        }
        let cg = if self.v2 {
            let base = self.parents[""].trim_start_matches('/');
            let path = Path::new(base).join(rel);
            Cgroup::load(hierarchy(), path)
        } else {
            Cgroup::load_with_relative_paths(hierarchy(), rel, (*self.parents).clone())
        };
        let (mut memory, mut devices, mut cpuset) = (None, None, None);
        let mut dirs: Vec<PathBuf> = if self.v2 {
            let root = hierarchy().root();
            vec![root.join(cg.path())]
        } else {
            cg.subsystems()
                .iter()
                .map(|s| {
                    let dir = s.to_controller().path().to_path_buf();
                    match s {
                        cgroups_rs::fs::Subsystem::Mem(_) => memory = Some(dir.clone()),
                        cgroups_rs::fs::Subsystem::Devices(_) => devices = Some(dir.clone()),
                        cgroups_rs::fs::Subsystem::CpuSet(_) => cpuset = Some(dir.clone()),
                        _ => {}
                    }
                    dir
                })
                .collect()
        };
        dirs.sort();
        dirs.dedup();
        if self.v2 {
            memory = dirs.first().cloned();
        }
        Group {
            cg,
            v2: self.v2,
            dirs,
            memory,
            devices,
            cpuset,
            root: self.clone(),
            retired: Vec::new(),
            renewals: 0,
        }
    }

    /// On v2, let the parent hand its controllers to the pod cgroup. The parent must have no
    /// processes of its own for that (the "no internal processes" rule): when it has, the pod
    /// runs without controllers, which `Group::set` reports if limits are asked for.
    /// Such a parent is left as it is: the threaded controllers (cpu, cpuset, pids) could
    /// still be enabled in it, but that would make its new children invalid domains that
    /// no process may join (clone3 into them fails with EOPNOTSUPP).
    pub fn delegate_controllers(&self) {
        if !self.v2 || self.none {
            return;
        }
        let rel = self.parents[""].trim_start_matches('/');
        let dir = hierarchy().root().join(rel);
        let busy = !rel.is_empty()
            && fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty());
        if !busy {
            enable_subtree_controllers(&dir);
        }
    }
}

/// The cgroup hierarchies of this machine. On v1 cgroups-rs finds them in
/// `/proc/self/mountinfo` on every call, several times per pod and per container; where
/// they are mounted does not change while podinit runs, so it is read once (a forked
/// supervisor inherits the answer).
fn hierarchy() -> Box<dyn cgroups_rs::fs::Hierarchy> {
    if unified() {
        return Box::new(hierarchies::V2::new());
    }
    static V1: std::sync::OnceLock<hierarchies::V1> = std::sync::OnceLock::new();
    Box::new(V1.get_or_init(hierarchies::V1::new).clone())
}

impl CgroupRoot {
    /// The path of `g` relative to the parent, as given to [`group`](Self::group).
    pub(super) fn rel_of(&self, g: &Group) -> PathBuf {
        let path = Path::new(g.cg.path());
        if !self.v2 {
            return path.to_path_buf();
        }
        let base = self.parents[""].trim_start_matches('/');
        path.strip_prefix(base).unwrap_or(path).to_path_buf()
    }
}
