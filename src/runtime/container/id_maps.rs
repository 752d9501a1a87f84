//! The uid and gid maps of a new user namespace, written by the creator while the child
//! waits (a process may not map itself beyond its own ids). Without root, as runc's
//! nsexec does: a map of the caller's own id alone is written directly (the gid map after
//! `setgroups` is denied, which the kernel requires of an unprivileged writer), and any
//! other through the setuid `newuidmap`/`newgidmap`.

use oci_spec::runtime::{Linux, LinuxIdMapping};

use crate::runtime::{Error, Result};

pub fn write(pid: i32, linux: &Linux) -> Result<()> {
    let euid = nix::unistd::geteuid();
    let egid = nix::unistd::getegid().as_raw();
    for (file, maps, own, helper) in [
        ("uid_map", linux.uid_mappings(), euid.as_raw(), "newuidmap"),
        ("gid_map", linux.gid_mappings(), egid, "newgidmap"),
    ] {
        let maps = maps.as_deref().unwrap_or_default();
        let path = format!("/proc/{pid}/{file}");
        if !euid.is_root() && !own_id_only(maps, own) {
            helper_map(helper, pid, maps)?;
            continue;
        }
        if !euid.is_root() && file == "gid_map" {
            let sg = format!("/proc/{pid}/setgroups");
            std::fs::write(&sg, "deny").map_err(|e| Error::os(format_args!("writing {sg}"), e))?;
        }
        std::fs::write(&path, lines(maps))
            .map_err(|e| Error::os(format_args!("writing {path}"), e))?;
    }
    Ok(())
}

/// Whether `maps` is the one line an unprivileged process may write: its own id, once.
fn own_id_only(maps: &[LinuxIdMapping], own: u32) -> bool {
    matches!(maps, [m] if m.host_id() == own && m.size() == 1)
}

/// `newuidmap PID containerID hostID size…`, with what it said when it fails.
fn helper_map(helper: &str, pid: i32, maps: &[LinuxIdMapping]) -> Result<()> {
    let mut cmd = std::process::Command::new(helper);
    cmd.arg(pid.to_string());
    for m in maps {
        cmd.args([m.container_id(), m.host_id(), m.size()].map(|n| n.to_string()));
    }
    let out = cmd.output().map_err(|e| {
        Error::os(
            format_args!("running {helper} for a map of more than the caller's own id"),
            e,
        )
    })?;
    if !out.status.success() {
        // The helper's own line says why (a range /etc/subuid does not grant).
        return Err(Error::Setup(format!(
            "{helper} {pid}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
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
        assert!(!super::own_id_only(&maps, 1000));
        assert!(super::own_id_only(&maps[1..], 1000));
        assert!(!super::own_id_only(&maps[1..], 1001));
    }
}
