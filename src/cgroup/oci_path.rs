//! Where an OCI bundle's `linux.cgroupsPath` puts a container, as runc's cgroupfs driver
//! reads it: an absolute path from the root of each hierarchy (the caller names it), a
//! relative one below the cgroup the runtime was started in, none: `<id>` below that.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{err, CgroupRoot, Group};
use crate::sys::cgroup::enable_subtree_controllers;

/// Where a container's cgroup is, from `linux.cgroupsPath`: `absolute` from the root of
/// every hierarchy, else below the runtime's own cgroup; `rel` is the path with no
/// leading `/`, clean of empty and `.` components.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct OciPath {
    pub absolute: bool,
    pub rel: String,
}

/// Read `linux.cgroupsPath` (None or empty: the container's ID, relative) as runc's
/// cgroupfs driver does. A systemd-style `slice:prefix:name` is, as runc takes it without
/// `--systemd-cgroup`, one relative directory of that name (containerd 1.6's CRI hands it
/// whatever the driver when the kubelet's parent is a slice). `..` (which runc would clean
/// away, silently moving the container elsewhere) and the root cgroup itself are refused.
pub(super) fn parse(cgroups_path: Option<&str>, id: &str) -> super::Result<OciPath> {
    let given = cgroups_path.filter(|p| !p.is_empty());
    let path = given.unwrap_or(id);
    let what = || match given {
        Some(p) => format!("linux.cgroupsPath {p:?} of container {id}"),
        None => format!("the cgroup of container {id} (its ID, no linux.cgroupsPath)"),
    };
    if path.split('/').any(|c| c == "..") {
        return Err(err(&what(), "\"..\" is not allowed in a cgroup path"));
    }
    let rel: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if rel.is_empty() {
        return Err(err(&what(), "names the root cgroup"));
    }
    Ok(OciPath {
        absolute: path.starts_with('/'),
        rel: rel.join("/"),
    })
}

impl CgroupRoot {
    /// The container's group for `cgroups_path` (not created yet: `Group::create_all`).
    pub fn for_oci_path(cgroups_path: Option<&str>, id: &str) -> super::Result<Group> {
        Self::for_oci_path_in(cgroups_path, id, "/proc/self/cgroup")
    }

    /// As [`for_oci_path`](Self::for_oci_path), with the runtime's own cgroups read from
    /// `proc_cgroup` (a `/proc/<pid>/cgroup` file).
    pub(super) fn for_oci_path_in(
        cgroups_path: Option<&str>,
        id: &str,
        proc_cgroup: &str,
    ) -> super::Result<Group> {
        let p = parse(cgroups_path, id)?;
        // An absolute path hangs from the root of every hierarchy, which always exists.
        let parent = p.absolute.then_some("/");
        Ok(CgroupRoot::detect_for(parent, proc_cgroup)?.group(&p.rel))
    }
}

impl Group {
    /// Create the cgroup and every missing ancestor in every hierarchy (runc makes the
    /// whole path).
    pub fn create_all(&self) -> super::Result<()> {
        if !self.v2 {
            // mkdir -p in each hierarchy; cpus and mems are copied down every new cpuset
            // level.
            return self.create();
        }
        let Some(dir) = self.dirs.first() else {
            return Ok(());
        };
        // The errno is kept: runc's rootless rule tells a refusal from a failure.
        let fail = |d: &Path, e: io::Error| {
            super::err(
                &format!("creating cgroup {} ({})", dir.display(), d.display()),
                e,
            )
        };
        let new = missing_levels(dir);
        if let Some(top) = new.first().and_then(|d| d.parent()) {
            // The existing ancestor hands its controllers down only if no process is in it
            // (or it is the root): in a busy one the threaded controllers would make every
            // new child an invalid domain that no process may join.
            let busy = top.parent().is_some()
                && fs::read_to_string(top.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty());
            if !busy {
                enable_subtree_controllers(top);
            }
        }
        for (i, d) in new.iter().enumerate() {
            match fs::create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(fail(d, e)),
            }
            if i + 1 < new.len() {
                enable_subtree_controllers(d);
            }
        }
        Ok(())
    }
}

/// The directories from the topmost missing ancestor of `dir` down to `dir` itself (empty
/// when `dir` exists).
fn missing_levels(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|d| !d.exists())
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory, removed when the test ends (passing or not).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let d =
                std::env::temp_dir().join(format!("podinit-{tag}-{}", crate::util::random_hex(4)));
            fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn ok(p: Option<&str>) -> (bool, String) {
        let o = parse(p, "c1").unwrap();
        (o.absolute, o.rel)
    }

    #[test]
    fn paths_as_runc_s_cgroupfs_driver_reads_them() {
        assert_eq!(ok(None), (false, "c1".into()), "no path: the ID, relative");
        assert_eq!(ok(Some("")), (false, "c1".into()));
        assert_eq!(ok(Some("/a/b")), (true, "a/b".into()));
        assert_eq!(ok(Some("//a/./b/")), (true, "a/b".into()));
        assert_eq!(ok(Some("x/y")), (false, "x/y".into()));
        // Colons are a name's characters to the cgroupfs driver: systemd's form too.
        assert_eq!(ok(Some("/a:b:c")), (true, "a:b:c".into()));
        assert_eq!(ok(Some("a:b")), (false, "a:b".into()));
        assert_eq!(
            ok(Some("test.slice:cri-containerd:c1")),
            (false, "test.slice:cri-containerd:c1".into()),
            "slice:prefix:name: one directory below the runtime's cgroup, as runc's cgroupfs"
        );
    }

    #[test]
    fn bad_paths_are_one_line_errors_naming_the_container() {
        for (p, why) in [
            (Some("/a/../b"), "\"..\" is not allowed"),
            (Some(".."), "\"..\" is not allowed"),
            (Some("/"), "names the root cgroup"),
            (Some("/./"), "names the root cgroup"),
        ] {
            let e = parse(p, "c1").unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("of container c1"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let e = parse(None, "..").unwrap_err().to_string();
        assert!(e.contains("its ID"), "{e}");
    }

    /// A `/proc/self/cgroup` of a runtime started in `/user/s1` (memory: `/m`).
    fn proc_cgroup(dir: &Path) -> String {
        let f = dir.join("cgroup");
        fs::write(
            &f,
            "9:name=systemd:/user/s1\n4:memory:/m\n3:cpuset:/user/s1\n1:cpu:/user/s1\n\
             0::/user/s1\n",
        )
        .unwrap();
        f.to_str().unwrap().to_string()
    }

    #[test]
    fn relative_paths_hang_below_the_runtime_s_own_cgroups() {
        let tmp = Scratch::new("oci-path");
        let f = proc_cgroup(&tmp.0);
        let rel = CgroupRoot::for_oci_path_in(Some("pod/c1"), "c1", &f).unwrap();
        let abs = CgroupRoot::for_oci_path_in(Some("/pod/c1"), "c1", &f).unwrap();
        let id = CgroupRoot::for_oci_path_in(None, "c1", &f).unwrap();
        if crate::sys::cgroup::unified() {
            let d = |g: &Group| g.dirs()[0].clone();
            assert!(d(&rel).ends_with("user/s1/pod/c1"), "{:?}", d(&rel));
            assert!(d(&id).ends_with("user/s1/c1"), "{:?}", d(&id));
            assert!(!d(&abs).to_string_lossy().contains("user/s1"));
            assert!(d(&abs).ends_with("pod/c1"));
            return;
        }
        // Each v1 hierarchy below the runtime's own cgroup in it.
        let mem = rel.memory.clone().expect("a memory hierarchy");
        assert!(mem.ends_with("m/pod/c1"), "{mem:?}");
        if let Some(cpuset) = &rel.cpuset {
            assert!(cpuset.ends_with("user/s1/pod/c1"), "{cpuset:?}");
        }
        assert!(id.memory.unwrap().ends_with("m/c1"));
        for d in abs.dirs() {
            assert!(d.ends_with("pod/c1") && !d.to_string_lossy().contains("/m/"));
            assert!(!d.to_string_lossy().contains("user/s1"), "{d:?}");
        }
    }

    #[test]
    fn missing_levels_start_at_the_topmost_missing_ancestor() {
        let scratch = Scratch::new("oci-path-levels");
        let tmp = &scratch.0;
        let leaf = tmp.join("a/b/c");
        assert_eq!(
            missing_levels(&leaf),
            [tmp.join("a"), tmp.join("a/b"), leaf.clone()]
        );
        fs::create_dir_all(&leaf).unwrap();
        assert!(missing_levels(&leaf).is_empty());
    }
}
