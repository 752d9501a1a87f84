//! The uid and gid maps of a new user namespace, written by the creator while the child
//! waits (a process may not map itself beyond its own ids).

use oci_spec::runtime::{Linux, LinuxIdMapping};

pub fn write(pid: i32, linux: &Linux) -> Result<(), String> {
    for (file, maps) in [
        ("uid_map", linux.uid_mappings()),
        ("gid_map", linux.gid_mappings()),
    ] {
        let path = format!("/proc/{pid}/{file}");
        std::fs::write(&path, lines(maps.as_deref().unwrap_or_default()))
            .map_err(|e| format!("writing {path}: {e}"))?;
    }
    Ok(())
}

/// `containerID hostID size` per line, as user_namespaces(7) wants them.
fn lines(maps: &[LinuxIdMapping]) -> String {
    maps.iter()
        .map(|m| format!("{} {} {}\n", m.container_id(), m.host_id(), m.size()))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_per_mapping() {
        let maps: Vec<oci_spec::runtime::LinuxIdMapping> = serde_json::from_value(
            serde_json::json!([{"containerID": 0, "hostID": 100000, "size": 65536},
                               {"containerID": 65536, "hostID": 1000, "size": 1}]),
        )
        .unwrap();
        assert_eq!(super::lines(&maps), "0 100000 65536\n65536 1000 1\n");
    }
}
