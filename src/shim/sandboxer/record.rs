//! What a killed shim leaves of its sandbox, for the shim's `delete` that containerd runs
//! after it (docs/cri.md §3): the PID 1 (by pid and start time, so that a reused pid is
//! never killed) and its cgroup, in a file of the bundle.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::super::error::{Error, Result};

const FILE: &str = "podinit-sandbox.json";

#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub pid: i32,
    /// The PID 1's start time in clock ticks after boot (`/proc/<pid>/stat`'s 22nd field).
    pub start_time: u64,
    pub cgroups_path: String,
    /// The systemd unit of its cgroup, under the systemd driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub systemd_unit: Option<String>,
}

fn start_time(pid: i32) -> Option<u64> {
    procfs::process::Process::new(pid)
        .and_then(|p| p.stat())
        .ok()
        .map(|s| s.starttime)
}

impl Record {
    pub fn new(id: &str, pid: i32, cgroups_path: &str) -> Record {
        Record {
            id: id.to_string(),
            pid,
            start_time: start_time(pid).unwrap_or(0),
            cgroups_path: cgroups_path.to_string(),
            systemd_unit: None,
        }
    }

    pub fn write(&self, bundle: &Path) -> Result<()> {
        let path = bundle.join(FILE);
        let text = serde_json::to_vec(self)
            .map_err(|e| Error::Other(format!("{}: {e}", path.display())))?;
        podinit::util::write_atomic(&path, &text).map_err(|e| Error::io(path.display(), e))
    }

    pub fn read(bundle: &Path) -> Option<Record> {
        serde_json::from_slice(&std::fs::read(bundle.join(FILE)).ok()?).ok()
    }
}

/// The record of a sandbox that stopped in order.
pub fn forget(bundle: &Path) {
    let _ = std::fs::remove_file(bundle.join(FILE));
}

/// The shim's `delete` after a killed shim: its sandbox's PID 1 killed (if it is still the
/// process recorded) and its cgroup removed. The PID 1's pid, when there was one.
pub fn cleanup(bundle: &Path) -> Option<i32> {
    let r = Record::read(bundle)?;
    if r.start_time != 0 && start_time(r.pid) == Some(r.start_time) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(r.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    if let Some(unit) = &r.systemd_unit {
        let _ = podinit::cgroup::systemd::stop(unit);
    }
    if let Ok(g) = podinit::cgroup::CgroupRoot::for_oci_path(Some(&r.cgroups_path), &r.id) {
        let _ = g.destroy();
    }
    forget(bundle);
    Some(r.pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_gone_process_is_not_killed() {
        let dir = std::env::temp_dir().join(format!("podinit-sb-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let me = std::process::id() as i32;
        let r = Record::new("sb1", me, "/kubepods/pod1/sb1");
        assert!(r.start_time > 0, "our own start time");
        r.write(&dir).unwrap();
        assert_eq!(Record::read(&dir).unwrap(), r);
        // A record whose process has another start time: the pid was reused, so the
        // process there is left alone (this test's own process here).
        let stale = Record {
            start_time: r.start_time + 1,
            cgroups_path: format!("podinit-sb-record-absent-{me}"),
            ..r
        };
        stale.write(&dir).unwrap();
        assert_eq!(cleanup(&dir), Some(me));
        assert!(Record::read(&dir).is_none(), "the record goes with it");
        assert_eq!(cleanup(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
