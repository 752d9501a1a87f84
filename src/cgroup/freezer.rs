//! Pausing and resuming every process of a cgroup: the v1 freezer
//! (`freezer.state`) or v2's `cgroup.freeze`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cgroups_rs::fs::freezer::FreezerController;
use cgroups_rs::fs::Controller;

use super::Group;
use super::{err, missing, Error, Result};

/// v1: how many times a freeze is written and read back before it is given up. The v1
/// freezer can stay FREEZING while processes keep forking or joining; writing again,
/// with an occasional thaw in between, gets it through (as runc does).
const V1_TRIES: u32 = 1000;
/// v1: every this many tries, thaw and let the cgroup settle before freezing again.
const V1_THAW_EVERY: u32 = 50;
const V1_SETTLE: Duration = Duration::from_millis(10);
/// v2: how long to wait for `frozen 1` in `cgroup.events`, and how often to look.
const V2_POLLS: u32 = 1000;
const V2_POLL: Duration = Duration::from_millis(10);

impl Group {
    /// Freeze every process in the cgroup and return once they are frozen.
    pub fn freeze(&self) -> Result<()> {
        let what = || format!("freezing cgroup {}", self.describe());
        if self.v2 {
            let dir = self.v2_freeze_dir().map_err(|e| err(&what(), e))?;
            return freeze_v2(&dir).map_err(|e| err(&what(), e));
        }
        let dir = self.v1_freezer_dir().map_err(|e| err(&what(), e))?;
        freeze_v1(&dir).map_err(|e| err(&what(), e))
    }

    /// Thaw a frozen cgroup.
    pub fn thaw(&self) -> Result<()> {
        let what = || format!("thawing cgroup {}", self.describe());
        let (dir, file, value) = if self.v2 {
            let dir = self.v2_freeze_dir().map_err(|e| err(&what(), e))?;
            (dir, "cgroup.freeze", "0")
        } else {
            let dir = self.v1_freezer_dir().map_err(|e| err(&what(), e))?;
            (dir, "freezer.state", "THAWED")
        };
        write(&dir, file, value).map_err(|e| err(&what(), e))
    }

    /// Whether the cgroup is frozen (or freezing). On v1 a cgroup frozen only through an
    /// ancestor is not: pausing is about this cgroup, as runc reports it.
    pub fn is_frozen(&self) -> bool {
        if self.v2 {
            return self
                .v2_freeze_dir()
                .and_then(|d| read(&d, "cgroup.freeze"))
                .is_ok_and(|v| v == "1");
        }
        let Ok(dir) = self.v1_freezer_dir() else {
            return false;
        };
        match read(&dir, "freezer.state").as_deref() {
            Ok("FREEZING") => true,
            // A kernel without freezer.self_freezing: frozen is frozen.
            Ok("FROZEN") => read(&dir, "freezer.self_freezing").map_or(true, |v| v != "0"),
            _ => false,
        }
    }

    fn v1_freezer_dir(&self) -> Result<PathBuf> {
        let c: &FreezerController = self.cg.controller_of().ok_or_else(|| {
            missing(
                "",
                "no cgroup v1 hierarchy is mounted for the freezer controller",
            )
        })?;
        Ok(c.path().to_path_buf())
    }

    fn v2_freeze_dir(&self) -> Result<PathBuf> {
        let dir = self
            .dirs
            .first()
            .ok_or_else(|| missing("cgroup v2", "no directory"))?;
        if !dir.join("cgroup.freeze").exists() && dir.exists() {
            return Err(missing(
                "",
                "the cgroup v2 freezer is missing (no cgroup.freeze: a kernel before 5.2)",
            ));
        }
        Ok(dir.clone())
    }
}

/// Write FROZEN until the v1 freezer reads back FROZEN, bounded; on giving up, thaw
/// rather than leave the cgroup stuck half-frozen.
fn freeze_v1(dir: &Path) -> Result<()> {
    for i in 1..=V1_TRIES {
        if i % V1_THAW_EVERY == 0 {
            let _ = write(dir, "freezer.state", "THAWED");
            std::thread::sleep(V1_SETTLE);
        }
        write(dir, "freezer.state", "FROZEN")?;
        match read(dir, "freezer.state")?.as_str() {
            "FROZEN" => return Ok(()),
            "FREEZING" => continue,
            other => {
                return Err(stuck(format!(
                    "freezer.state reads {other:?} while freezing"
                )))
            }
        }
    }
    let _ = write(dir, "freezer.state", "THAWED");
    Err(stuck(format!(
        "still FREEZING after {V1_TRIES} tries (processes keep appearing); thawed it again"
    )))
}

/// Write 1 to `cgroup.freeze` and wait until `cgroup.events` says `frozen 1`; on giving
/// up, thaw rather than leave the cgroup half-frozen.
fn freeze_v2(dir: &Path) -> Result<()> {
    write(dir, "cgroup.freeze", "1")?;
    wait_v2_frozen(dir).inspect_err(|_| {
        let _ = write(dir, "cgroup.freeze", "0");
    })
}

/// Poll `cgroup.events` until it says `frozen 1`, bounded.
fn wait_v2_frozen(dir: &Path) -> Result<()> {
    for _ in 0..V2_POLLS {
        if read(dir, "cgroup.events")?
            .lines()
            .any(|l| l.trim() == "frozen 1")
        {
            return Ok(());
        }
        std::thread::sleep(V2_POLL);
    }
    Err(stuck(
        "cgroup.events never said \"frozen 1\"; thawed it again",
    ))
}

fn stuck(why: impl Into<String>) -> Error {
    Error::Stuck {
        what: String::new(),
        why: why.into(),
    }
}

fn read(dir: &Path, file: &str) -> Result<String> {
    let f = dir.join(file);
    fs::read_to_string(&f)
        .map(|t| t.trim().to_string())
        .map_err(|e| err(&format!("reading {}", f.display()), e))
}

/// A write without O_CREAT|O_TRUNC (cgroup files exist or the controller is missing).
fn write(dir: &Path, file: &str, value: &str) -> Result<()> {
    let f = dir.join(file);
    fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .and_then(|mut h| io::Write::write_all(&mut h, value.as_bytes()))
        .map_err(|e| err(&format!("writing {value} to {}", f.display()), e))
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::CgroupRoot;
    use super::*;

    /// A process in a new cgroup `/<top>/c` made with `create_all`; killed and removed
    /// (the top too) when the test ends, passing or not.
    pub struct Sleeper {
        pub group: Group,
        top: Group,
        child: std::process::Child,
    }

    impl Sleeper {
        pub fn start(tag: &str) -> Sleeper {
            let top = format!("/podinit-{tag}-{}", crate::util::random_hex(4));
            let path = format!("{top}/c");
            let group = CgroupRoot::for_oci_path(Some(&path), "c").unwrap();
            let top = CgroupRoot::for_oci_path(Some(&top), "c").unwrap();
            let child = std::process::Command::new("sleep")
                .arg("100")
                .spawn()
                .unwrap();
            let s = Sleeper { group, top, child };
            s.group.create_all().unwrap();
            s.group.add(s.child.id() as i32).unwrap();
            s
        }

        pub fn pid(&self) -> i32 {
            self.child.id() as i32
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.group.thaw();
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = self.top.destroy();
        }
    }

    #[test]
    #[ignore = "needs root: makes cgroups"]
    fn freeze_and_thaw_a_cgroup_made_with_its_ancestors() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "run as root with --include-ignored"
        );
        let s = Sleeper::start("freezer");
        assert_eq!(s.group.pids(), [s.pid()]);
        if let Some(cpuset) = &s.group.cpuset {
            assert!(!read(cpuset, "cpuset.cpus").unwrap().is_empty());
        }
        assert!(!s.group.is_frozen());
        s.group.freeze().unwrap();
        assert!(s.group.is_frozen());
        s.group.freeze().unwrap();
        s.group.thaw().unwrap();
        assert!(!s.group.is_frozen());
    }

    /// A cgroup v2 directory (in the unified hierarchy of a hybrid host too) holding a
    /// process; killed and removed when the test ends.
    struct V2Sleeper {
        dir: PathBuf,
        child: std::process::Child,
    }

    impl Drop for V2Sleeper {
        fn drop(&mut self) {
            let _ = write(&self.dir, "cgroup.freeze", "0");
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = fs::remove_dir(&self.dir);
        }
    }

    #[test]
    #[ignore = "needs root: makes cgroups"]
    fn the_v2_freezer_freezes_and_thaws() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "run as root with --include-ignored"
        );
        let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(Path::new)
            .find(|d| d.join("cgroup.subtree_control").exists())
            .expect("a cgroup v2 hierarchy is mounted");
        let dir = root.join(format!("podinit-v2freeze-{}", crate::util::random_hex(4)));
        fs::create_dir(&dir).unwrap();
        let child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let s = V2Sleeper { dir, child };
        if !s.dir.join("cgroup.freeze").exists() {
            panic!("this kernel has no cgroup v2 freezer");
        }
        fs::write(s.dir.join("cgroup.procs"), s.child.id().to_string()).unwrap();
        freeze_v2(&s.dir).unwrap();
        assert_eq!(read(&s.dir, "cgroup.freeze").unwrap(), "1");
        assert!(read(&s.dir, "cgroup.events").unwrap().contains("frozen 1"));
        write(&s.dir, "cgroup.freeze", "0").unwrap();
        let thawed = (0..V2_POLLS).any(|_| {
            let done = read(&s.dir, "cgroup.events").is_ok_and(|e| e.contains("frozen 0"));
            if !done {
                std::thread::sleep(V2_POLL);
            }
            done
        });
        assert!(thawed, "cgroup.events never said \"frozen 0\"");
    }
}
