//! What the shim reads of a task's kernel side and how it writes containerd's times: the
//! OOM-kill count of a container's cgroup, and protobuf timestamps.

use std::path::PathBuf;
use std::time::SystemTime;

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
