//! The shim's record of its tasks: each container (init process and execs) with its
//! status, exit and streams. Exits come from the reaper; waiters sleep on one condvar.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

use super::reaper::Exit;
use super::stdio::{Io, Paths};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Created,
    Running,
    Paused,
    Stopped,
}

/// One process: a container's init or an exec.
pub struct Proc {
    /// Host pid; 0 for an exec not started yet.
    pub pid: i32,
    pub status: Status,
    pub exit: Option<Exit>,
    pub paths: Paths,
    pub io: Io,
    /// An exec's process (JSON of the OCI `process`), until started.
    pub spec: Option<Vec<u8>>,
    /// `start` is running: an exit now is held in `pending` until TaskStart is out, so
    /// that containerd never sees an exit before the start.
    pub starting: bool,
    pub pending: Option<Exit>,
}

impl Proc {
    pub fn new(paths: Paths) -> Proc {
        Proc {
            pid: 0,
            status: Status::Created,
            exit: None,
            paths,
            io: Io::default(),
            spec: None,
            starting: false,
            pending: None,
        }
    }
}

pub struct Container {
    pub id: String,
    pub bundle: PathBuf,
    pub init: Proc,
    pub execs: HashMap<String, Proc>,
    /// The rootfs was mounted by this shim at `bundle/rootfs` (unmounted at delete).
    pub mounted_rootfs: bool,
    /// The cgroup's OOM-kill count when the container was made, and its file.
    pub oom: Option<(PathBuf, u64)>,
    /// Its processes can outlive its init (a shared pid namespace): kill them all when it
    /// exits, as containerd's runc shim does.
    pub kill_all_on_exit: bool,
}

impl Container {
    pub fn proc(&self, exec_id: &str) -> Option<&Proc> {
        if exec_id.is_empty() {
            Some(&self.init)
        } else {
            self.execs.get(exec_id)
        }
    }

    pub fn proc_mut(&mut self, exec_id: &str) -> Option<&mut Proc> {
        if exec_id.is_empty() {
            Some(&mut self.init)
        } else {
            self.execs.get_mut(exec_id)
        }
    }

    /// The process with this host pid: `""` for init, else the exec's id.
    pub fn owner_of(&self, pid: i32) -> Option<String> {
        if self.init.pid == pid && self.init.exit.is_none() {
            return Some(String::new());
        }
        self.execs
            .iter()
            .find(|(_, p)| p.pid == pid && p.exit.is_none())
            .map(|(k, _)| k.clone())
    }
}

/// The count of OOM kills in a memory cgroup: v1 `memory.oom_control`'s or v2
/// `memory.events`' `oom_kill` line.
pub fn oom_kills(file: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == "oom_kill").then(|| v.trim().parse().ok())?
    })
}

/// The file holding the OOM-kill count among a container's cgroup directories.
pub fn oom_file(dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter()
        .flat_map(|d| [d.join("memory.events"), d.join("memory.oom_control")])
        .find(|f| f.exists())
}

pub fn timestamp(
    t: SystemTime,
) -> containerd_shim::protos::protobuf::well_known_types::timestamp::Timestamp {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    containerd_shim::protos::protobuf::well_known_types::timestamp::Timestamp {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_kill_counts_from_v1_and_v2_files() {
        let dir = std::env::temp_dir().join(format!("podinit-shim-oom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("memory.oom_control");
        std::fs::write(&f, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n").unwrap();
        assert_eq!(oom_kills(&f), Some(2));
        assert_eq!(oom_file(std::slice::from_ref(&dir)), Some(f));
        let g = dir.join("memory.events");
        std::fs::write(&g, "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n").unwrap();
        assert_eq!(oom_kills(&g), Some(1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
