//! A runc container's cgroup, found from `linux.cgroupsPath` at create time and found
//! again by every later verb from what its state recorded.

use std::path::{Path, PathBuf};

use super::{err, CgroupRoot, Error, Group, Result};

/// The group for a new container, and the cgroups path to record: made absolute when the
/// cgroup has the same path in every hierarchy, so that a later verb run from another
/// cgroup finds it too.
pub fn resolve(cgroups_path: Option<&str>, id: &str) -> Result<(Group, Option<String>)> {
    let g = CgroupRoot::for_oci_path(cgroups_path, id)
        .map_err(|e| err(&format!("cgroup of container {id}"), e))?;
    let recorded = uniform_path(g.dirs(), crate::sys::cgroup::unified())
        .or_else(|| cgroups_path.map(str::to_string));
    Ok((g, recorded))
}

/// On a hybrid host (v1 with a v2 mount at /sys/fs/cgroup/unified) runc also puts the
/// container in the unified hierarchy, where no controller acts but tools that read the
/// `0::` line of /proc/<pid>/cgroup find it: that directory, or None on other hosts.
pub fn unified_leaf(cgroups_path: Option<&str>, id: &str) -> Option<PathBuf> {
    let mount = Path::new("/sys/fs/cgroup/unified");
    if crate::sys::cgroup::unified() || !mount.join("cgroup.controllers").exists() {
        return None;
    }
    let rel = match cgroups_path {
        Some(p) if p.starts_with('/') => PathBuf::from(p.trim_start_matches('/')),
        other => {
            let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let own = crate::sys::cgroup::parse_proc_cgroup(&own, true).remove("")?;
            Path::new(own.trim_start_matches('/')).join(other.unwrap_or(id))
        }
    };
    (!rel.as_os_str().is_empty()).then(|| mount.join(rel))
}

/// Remove the unified-hierarchy leaf of a container whose processes are gone (bounded
/// retries while the last ones are still being torn down).
pub fn remove_unified_leaf(dir: &Path) {
    for _ in 0..100 {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => return,
        }
    }
}

/// The group of a recorded container; it must be where create put it.
pub fn open(id: &str, cgroups_path: Option<&str>, dirs: &[PathBuf]) -> Result<Group> {
    if dirs.is_empty() {
        // Made without a cgroup (rootless, none permitted): it has none to find again.
        return Ok(CgroupRoot::none().group(id));
    }
    let g = CgroupRoot::for_oci_path(cgroups_path, id)
        .map_err(|e| err(&format!("cgroup of container {id}"), e))?;
    let mut want: Vec<&PathBuf> = dirs.iter().collect();
    let mut got: Vec<&PathBuf> = g.dirs().iter().collect();
    want.sort();
    got.sort();
    if want != got {
        let missing = want.iter().find(|d| !got.contains(d));
        return Err(super::missing(
            &format!("cgroup of container {id}"),
            format!(
                "found again elsewhere than {} (called from another cgroup than create was)",
                missing.map(|d| d.display().to_string()).unwrap_or_default(),
            ),
        ));
    }
    Ok(g)
}

/// Remove a container's cgroup by the directories recorded for it, when it cannot be
/// found again as a [`Group`] (a later verb run from another cgroup): thaw, kill what is
/// inside, wait (bounded) for it to go, remove the directories.
pub fn remove_recorded(id: &str, dirs: &[PathBuf]) -> Result<()> {
    // Files of the cgroup: written, never created.
    let write = |f: PathBuf, v: &str| {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(f)
            .and_then(|mut f| std::io::Write::write_all(&mut f, v.as_bytes()));
    };
    for d in dirs {
        write(d.join("freezer.state"), "THAWED");
        write(d.join("cgroup.freeze"), "0");
    }
    let pids = || -> Vec<i32> {
        dirs.iter()
            .filter_map(|d| std::fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let left = pids();
        if left.is_empty() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::Stuck {
                what: format!("cgroup of container {id}"),
                why: format!("processes {left:?} did not exit"),
            });
        }
        for p in left {
            // A pid listed in the container's cgroup just now.
            let _ = crate::sys::signals::kill(p, libc::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for d in dirs {
        match std::fs::remove_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(&format!("removing cgroup {}", d.display()), e)),
        }
    }
    Ok(())
}

/// The cgroup path below the root of its hierarchy, when it is the same in all of them.
fn uniform_path(dirs: &[PathBuf], v2: bool) -> Option<String> {
    let base = Path::new("/sys/fs/cgroup");
    let mut found: Option<PathBuf> = None;
    for d in dirs {
        let rest = d.strip_prefix(base).ok()?;
        // v1 and hybrid: /sys/fs/cgroup/<hierarchy>/<path>.
        let rest: PathBuf = if v2 {
            rest.to_path_buf()
        } else {
            rest.components().skip(1).collect()
        };
        match &found {
            Some(f) if *f != rest => return None,
            _ => found = Some(rest),
        }
    }
    found.map(|p| format!("/{}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_directories_already_gone_are_removed() {
        let gone = std::env::temp_dir().join(format!("runc-cg-gone-{}", std::process::id()));
        remove_recorded("c1", std::slice::from_ref(&gone)).unwrap();
        std::fs::create_dir(&gone).unwrap();
        remove_recorded("c1", std::slice::from_ref(&gone)).unwrap();
        assert!(!gone.exists());
    }

    #[test]
    fn a_path_shared_by_every_hierarchy_is_recorded_absolute() {
        let v1 = |h: &str, p: &str| PathBuf::from(format!("/sys/fs/cgroup/{h}{p}"));
        assert_eq!(
            uniform_path(&[v1("memory", "/a/c1"), v1("cpu,cpuacct", "/a/c1")], false),
            Some("/a/c1".into())
        );
        assert_eq!(
            uniform_path(&[v1("memory", "/x/c1"), v1("pids", "/c1")], false),
            None
        );
        assert_eq!(
            uniform_path(&[PathBuf::from("/sys/fs/cgroup/user.slice/c1")], true),
            Some("/user.slice/c1".into())
        );
    }
}
