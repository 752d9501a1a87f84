//! The pod's cgroup tree, through cgroups-rs's `fs` API, on cgroup v1, hybrid and v2.
//!
//! Layout, always below the parent cgroup (`--cgroup-parent`, default: the cgroup podinit
//! was started in, per controller on v1):
//! ```text
//! <parent>/podinit_<ns>_<name>/            the pod cgroup (pod-level limits)
//!                              c_<name>/   one per container
//! <parent>/podinit_<ns>_<name>_supervisor/ the supervisor's leaf (PID-1 mode: <parent>/supervisor)
//! ```
//! The supervisor is outside the pod's limits, as a shim is (see `run.rs`).
//! Pitfall avoided (DESIGN.md §3): cgroups-rs places a cgroup at the root of every v1
//! hierarchy unless it is given each controller's path, so every handle here is made with
//! the per-controller parent paths read from `/proc/self/cgroup`.

use cgroups_rs::fs::hierarchies;
use cgroups_rs::fs::{Cgroup, MaxValue, Resources};
use cgroups_rs::CgroupPid;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use crate::sys::cgroup::{
    enable_subtree_controllers, join_self, parse_proc_cgroup, unified, Placement,
};

/// Where the pod's cgroups go and how to reach them.
#[derive(Clone, Debug)]
pub struct CgroupRoot {
    v2: bool,
    /// v1: controller name (as in /proc/self/cgroup, e.g. `memory`, `name=systemd`) →
    /// parent path. v2: the single entry `""` → parent path.
    parents: HashMap<String, String>,
}

/// One cgroup of the pod (the pod itself, the supervisor's leaf or a container's).
pub struct Group {
    cg: Cgroup,
    v2: bool,
    /// The cgroup's directory in every hierarchy it exists in (deduplicated). On v1 a new
    /// process joins them in this order ([`Placement::tasks`]), so the first lists every
    /// process that any of them lists, short of one that moved itself out.
    dirs: Vec<PathBuf>,
    /// v1: the directories of the memory, devices and cpuset hierarchies, which some
    /// operations need by name (on v2 the one directory serves).
    memory: Option<PathBuf>,
    devices: Option<PathBuf>,
    cpuset: Option<PathBuf>,
}

fn err(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

impl CgroupRoot {
    /// `parent`: `--cgroup-parent` (a path from the root of each hierarchy), or `None`
    /// for the cgroup this process is in.
    pub fn detect(parent: Option<&str>) -> io::Result<CgroupRoot> {
        Self::detect_for(parent, "/proc/self/cgroup")
    }

    /// As [`detect`](Self::detect), reading the current cgroup of `pid` instead.
    pub fn detect_for(parent: Option<&str>, proc_cgroup: &str) -> io::Result<CgroupRoot> {
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
            let root = CgroupRoot { v2, parents };
            // The parent is the caller's to make (as kubelet's cgroupfs driver expects):
            // creating it here would leave it behind.
            let probe = root.group("probe");
            let parents: Vec<&Path> = probe.dirs().iter().filter_map(|d| d.parent()).collect();
            if let Some(missing) = parents.into_iter().find(|d| !d.is_dir()) {
                return Err(err(
                    "--cgroup-parent",
                    format!("{p:?} does not exist ({} is missing)", missing.display()),
                ));
            }
            return Ok(root);
        }
        Ok(CgroupRoot { v2, parents })
    }

    pub fn is_v2(&self) -> bool {
        self.v2
    }

    /// A handle on `<parent>/<rel>` (not created yet).
    pub fn group(&self, rel: &str) -> Group {
        let cg = if self.v2 {
            let base = self.parents[""].trim_start_matches('/');
            let path = Path::new(base).join(rel);
            Cgroup::load(hierarchy(), path)
        } else {
            Cgroup::load_with_relative_paths(hierarchy(), rel, self.parents.clone())
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
        }
    }

    /// On v2, let the parent hand its controllers to the pod cgroup. The parent must have no
    /// processes of its own for that (the "no internal processes" rule): when it has, the pod
    /// runs without controllers, which `Group::set` reports if limits are asked for.
    /// Such a parent is left as it is: the threaded controllers (cpu, cpuset, pids) could
    /// still be enabled in it, but that would make its new children invalid domains that
    /// no process may join (clone3 into them fails with EOPNOTSUPP).
    pub fn delegate_controllers(&self) {
        if !self.v2 {
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
/// `/proc/self/mountinfo` on every call (60 µs here, several times per pod and per
/// container); where they are mounted does not change while podinit runs, so it is read
/// once (a forked supervisor inherits the answer).
fn hierarchy() -> Box<dyn cgroups_rs::fs::Hierarchy> {
    if unified() {
        return Box::new(hierarchies::V2::new());
    }
    static V1: std::sync::OnceLock<hierarchies::V1> = std::sync::OnceLock::new();
    Box::new(V1.get_or_init(hierarchies::V1::new).clone())
}

impl Group {
    /// Create a leaf cgroup (processes go here); on v2 it gets the controllers that its
    /// parent hands down (`delegate_controllers`, `create_parent`).
    pub fn create(&self) -> io::Result<()> {
        self.make(false).map(drop)
    }

    /// Make the directories; with `fresh`, report (true) one that existed already instead
    /// of making the rest.
    fn make(&self, fresh: bool) -> io::Result<bool> {
        let fail =
            |e: &dyn std::fmt::Display| err(&format!("creating cgroup {}", self.describe()), e);
        // Not cgroups-rs's create. On v1 it would stat each directory before making it and
        // copy the cpuset's cpus and mems down with six reads and writes: 0.1 ms per
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
            crate::util::ensure_dir(d).map_err(|e| fail(&format!("{}: {e}", d.display())))?;
        }
        if let Some(d) = &self.cpuset {
            inherit_cpuset(d).map_err(|e| fail(&e))?;
        }
        Ok(false)
    }

    /// Create a cgroup that only has children (the pod cgroup): on v2 its controllers are
    /// passed down to them. One that exists already was left by a run that was killed (the
    /// caller holds the pod's state dir lock): it goes first, with whatever is left in it.
    /// Found by mkdir's EEXIST rather than a stat of every hierarchy beforehand.
    pub fn create_parent(&self) -> io::Result<()> {
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

    fn describe(&self) -> String {
        self.dirs
            .first()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| self.cg.path().to_string())
    }

    /// How a process about to be cloned gets into this cgroup without being migrated by
    /// another process: see [`Placement`].
    pub fn placement(&self) -> io::Result<Placement> {
        Placement::of(self.v2, &self.dirs)
            .map_err(|e| err(&format!("placing into cgroup {}", self.describe()), e))
    }

    /// Put process `pid` (in the caller's pid namespace) into this cgroup.
    pub fn add(&self, pid: i32) -> io::Result<()> {
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
    fn looks_empty(&self) -> bool {
        let Some(first) = self.dirs.first() else {
            return true;
        };
        let mut buf = [0u8; 16];
        match fs::File::open(first.join("cgroup.procs")) {
            Ok(mut f) => matches!(io::Read::read(&mut f, &mut buf), Ok(0)),
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
    }

    /// Apply the OCI resources (memory, cpu, pids, hugepages) to this cgroup.
    pub fn set(&self, r: &oci_spec::runtime::LinuxResources) -> io::Result<()> {
        let res = to_cgroups_resources(r);
        if res == Resources::default() {
            return Ok(());
        }
        let what = || format!("setting limits on cgroup {}", self.describe());
        // cgroups-rs skips a limit whose file is missing without a word: a pod would run
        // without the limits it asked for.
        let missing: Vec<&str> = controllers_for(&res)
            .into_iter()
            .filter(|c| !self.has_controller(c))
            .collect();
        if !missing.is_empty() {
            return Err(err(&what(), missing_controllers(&missing, self.v2)));
        }
        self.cg.apply(&res).map_err(|e| err(&what(), e))
    }

    /// Whether `controller` (v2 name: memory, cpu, pids, hugetlb, …) acts on this cgroup.
    pub fn has_controller(&self, controller: &str) -> bool {
        if self.v2 {
            return self.dirs.first().is_some_and(|d| {
                fs::read_to_string(d.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|x| x == controller))
            });
        }
        use cgroups_rs::fs::Subsystem as S;
        self.cg.subsystems().iter().any(|s| {
            matches!(
                (s, controller),
                (S::Mem(_), "memory")
                    | (S::Cpu(_), "cpu")
                    | (S::Pid(_), "pids")
                    | (S::HugeTlb(_), "hugetlb")
            )
        })
    }

    /// Limit the device nodes the cgroup's processes may use to `rules` (see `devices`):
    /// v1 through `devices.deny`/`devices.allow`, v2 with a device program attached to the
    /// cgroup (once: each call adds one). No rules: no limit, as the OCI spec says.
    pub fn confine_devices(&self, rules: &[crate::sys::devices::Rule]) -> io::Result<()> {
        if rules.is_empty() {
            return Ok(());
        }
        let ctx =
            |what: &str, e: io::Error| err(&format!("{what} for cgroup {}", self.describe()), e);
        if self.v2 {
            let dir = self
                .dirs
                .first()
                .ok_or_else(|| err("devices", "no cgroup directory"))?;
            return crate::sys::bpf::attach_device_program(dir, &crate::sys::bpf::program(rules))
                .map_err(|e| ctx("attaching the device program", e));
        }
        let Some(dir) = &self.devices else {
            return Err(err(
                "devices",
                format!("no devices controller for cgroup {}", self.describe()),
            ));
        };
        // One rule per write(2), as the kernel parses them, through one open file each.
        let mut files: [Option<fs::File>; 2] = [None, None];
        for r in rules {
            let file = if r.allow {
                "devices.allow"
            } else {
                "devices.deny"
            };
            let f = match &mut files[r.allow as usize] {
                Some(f) => f,
                slot => slot.insert(
                    fs::OpenOptions::new()
                        .write(true)
                        .open(dir.join(file))
                        .map_err(|e| ctx(&format!("opening {file}"), e))?,
                ),
            };
            match io::Write::write_all(f, r.v1_line().as_bytes()) {
                Ok(()) => {}
                // The parent cgroup does not allow it: it stays denied, which is stricter.
                Err(e) if r.allow && e.raw_os_error() == Some(libc::EPERM) => {}
                Err(e) => return Err(ctx(&format!("writing {:?} to {file}", r.v1_line()), e)),
            }
        }
        Ok(())
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

    /// Kill every process in the cgroup: `cgroup.kill` on v2; on v1 freeze, SIGKILL every
    /// pid, thaw (a frozen cgroup cannot fork away from the kill). Returns once the signal
    /// has been sent, not once the processes are gone.
    pub fn kill_all(&self) {
        self.kill_all_checking(false)
    }

    /// `thorough`: on v1, look for processes in every hierarchy, not just the first.
    fn kill_all_checking(&self, thorough: bool) {
        if self.v2 {
            if self.cg.kill().is_ok() {
                return;
            }
        } else if (thorough && self.pids().is_empty()) || (!thorough && self.looks_empty()) {
            // Nothing can fork in an empty cgroup; and freezing is not free: the first
            // frozen cgroup of the system patches kernel text on every CPU.
            return;
        } else if let Some(fz) = self.freezer() {
            let _ = fz.freeze();
            self.signal_all(libc::SIGKILL);
            let _ = fz.thaw();
            return;
        }
        self.signal_all(libc::SIGKILL);
    }

    fn freezer(&self) -> Option<&cgroups_rs::fs::freezer::FreezerController> {
        self.cg.controller_of()
    }

    fn signal_all(&self, sig: i32) {
        for pid in self.pids() {
            // SAFETY: kill(2) with a pid read from this cgroup; a pid that was reused in the
            // meantime cannot be in our cgroup, and cgroup.procs lists pids of our namespace.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// Remove the cgroup (every hierarchy). Fails with EBUSY while processes or children
    /// remain: callers kill first and remove bottom-up.
    pub fn remove(&self) -> io::Result<()> {
        if !self.exists() {
            return Ok(());
        }
        self.cg
            .delete()
            .map_err(|e| err(&format!("removing cgroup {}", self.describe()), e))
    }

    /// Kill what is inside, wait (bounded) for it to go, remove this cgroup and every
    /// cgroup below it, deepest first.
    pub fn destroy(&self) -> io::Result<()> {
        // The common case, a cgroup whose processes are gone and that has no children, is
        // one rmdir per hierarchy; listing, killing and checking first cost ten syscalls
        // more each (0.3 ms for a container on v1). Any refusal takes the careful way.
        let gone = |d: &PathBuf| match fs::remove_dir(d) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        if self.dirs.iter().all(gone) {
            return Ok(());
        }
        for d in self.dirs.clone() {
            remove_children(&d);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            self.kill_all_checking(true);
            match self.remove() {
                Ok(()) => return Ok(()),
                Err(e) if std::time::Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
    }

    pub fn pid_of(p: i32) -> CgroupPid {
        CgroupPid::from(p as u64)
    }
}

/// A new v1 cpuset cgroup has no cpus and no mems (no process may join it) unless its
/// parent has `cgroup.clone_children` set: copy them from the nearest ancestor that has
/// them, top down, as cgroups-rs would.
fn inherit_cpuset(dir: &Path) -> io::Result<()> {
    let read = |d: &Path, f: &str| fs::read_to_string(d.join(f)).map(|t| t.trim().to_string());
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

/// Kill and remove every child cgroup directory below `dir`, deepest first.
fn remove_children(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            let child = e.path();
            remove_children(&child);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while fs::remove_dir(&child).is_err() && std::time::Instant::now() < deadline {
                if let Ok(t) = fs::read_to_string(child.join("cgroup.procs")) {
                    for pid in t.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                        // SAFETY: see Group::signal_all.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
                let _ = fs::write(child.join("cgroup.kill"), "1");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}

fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key)).then(|| it.next()?.parse().ok())?
    })
}

/// The controllers that the limits in `res` are written to.
fn controllers_for(res: &Resources) -> Vec<&'static str> {
    let mut out = Vec::new();
    if res.memory.memory_hard_limit.is_some() || res.memory.memory_swap_limit.is_some() {
        out.push("memory");
    }
    if res.cpu.shares.is_some() || res.cpu.quota.is_some() || res.cpu.period.is_some() {
        out.push("cpu");
    }
    if res.pid.maximum_number_of_processes.is_some() {
        out.push("pids");
    }
    if !res.hugepages.limits.is_empty() {
        out.push("hugetlb");
    }
    out
}

/// Why a v2 cgroup lacks a controller, and what to do about it.
/// The cgroup podinit starts in holds podinit itself, so only a parent given with
/// `--cgroup-parent` (or the root) can hand controllers down.
pub const V2_DELEGATION: &str = "cgroup v2 hands a controller to a cgroup only from a parent \
    that has it in cgroup.subtree_control and holds no process itself; pass --cgroup-parent \
    naming an empty cgroup whose own parent delegates the controllers (a systemd unit with \
    Delegate=yes)";

/// Why the limits cannot be set, and what to do about it, in one line.
fn missing_controllers(missing: &[&str], v2: bool) -> String {
    let list = missing.join(", ");
    let s = if missing.len() > 1 { "s are" } else { " is" };
    if v2 {
        format!("the {list} controller{s} not enabled for it: {V2_DELEGATION}")
    } else {
        let s = if missing.len() > 1 { "s" } else { "" };
        format!("no cgroup v1 hierarchy is mounted for the {list} controller{s}")
    }
}

fn to_cgroups_resources(r: &oci_spec::runtime::LinuxResources) -> Resources {
    let mut res = Resources::default();
    if let Some(m) = r.memory() {
        res.memory.memory_hard_limit = m.limit();
        res.memory.memory_swap_limit = m.swap();
    }
    if let Some(c) = r.cpu() {
        res.cpu.shares = c.shares();
        res.cpu.quota = c.quota();
        res.cpu.period = c.period();
    }
    if let Some(p) = r.pids() {
        res.pid.maximum_number_of_processes = Some(if p.limit() > 0 {
            MaxValue::Value(p.limit())
        } else {
            MaxValue::Max
        });
    }
    if let Some(h) = r.hugepage_limits() {
        res.hugepages.limits = h
            .iter()
            .map(|l| cgroups_rs::fs::HugePageResource {
                size: l.page_size().clone(),
                limit: l.limit() as u64,
            })
            .collect();
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_the_controllers_they_need() {
        let mut res = Resources::default();
        assert!(controllers_for(&res).is_empty());
        res.memory.memory_hard_limit = Some(1 << 20);
        res.cpu.quota = Some(50_000);
        res.pid.maximum_number_of_processes = Some(MaxValue::Value(10));
        assert_eq!(controllers_for(&res), ["memory", "cpu", "pids"]);
        let m = missing_controllers(&["memory", "cpu"], true);
        assert!(
            m.starts_with("the memory, cpu controllers are not enabled"),
            "{m}"
        );
        assert!(m.contains("--cgroup-parent") && !m.contains('\n'), "{m}");
        let m = missing_controllers(&["hugetlb"], false);
        assert_eq!(
            m,
            "no cgroup v1 hierarchy is mounted for the hugetlb controller"
        );
    }

    #[test]
    fn keyed_files() {
        let t = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed_value(t, "oom_kill"), Some(3));
        assert_eq!(keyed_value("low 0\nhigh 0\n", "oom_kill"), None);
    }

    #[test]
    fn resources_map_limits() {
        use oci_spec::runtime::{LinuxCpuBuilder, LinuxMemoryBuilder, LinuxResourcesBuilder};
        let r = LinuxResourcesBuilder::default()
            .memory(
                LinuxMemoryBuilder::default()
                    .limit(64 << 20)
                    .build()
                    .unwrap(),
            )
            .cpu(
                LinuxCpuBuilder::default()
                    .quota(50_000)
                    .period(100_000u64)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        let res = to_cgroups_resources(&r);
        assert_eq!(res.memory.memory_hard_limit, Some(64 << 20));
        assert_eq!(res.cpu.quota, Some(50_000));
        assert_eq!(res.cpu.period, Some(100_000));
    }
}
