//! The pod's state directory (docs/interface.md §4): public files (`status.json`,
//! `events.jsonl`, `logs/`, `pod.sock`) and a private `.work/` for volumes and container
//! root filesystems. A lock held for the life of `podinit run` keeps two runs apart; a
//! leftover `.work/` under a free lock is what a killed run left, and is cleaned.

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub struct StateDir {
    pub root: PathBuf,
    lock: fs::File,
}

fn ctx(what: String) -> impl FnOnce(io::Error) -> io::Error {
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl StateDir {
    /// Create (mode 0700) and lock the state dir, then clear what an earlier run of the same
    /// pod left: its private work area (unmounting first) and its old public files.
    pub fn open(root: &Path) -> io::Result<StateDir> {
        let root = if root.is_absolute() {
            root.to_path_buf()
        } else {
            std::env::current_dir()?.join(root)
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .map_err(ctx(format!("creating state dir {}", root.display())))?;
        let lock_path = root.join(".lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .mode(0o600)
            .open(&lock_path)
            .map_err(ctx(format!("opening {}", lock_path.display())))?;
        if crate::sys::fd::flock(lock.as_fd(), libc::LOCK_EX | libc::LOCK_NB).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "state dir {} is in use: this pod is already running",
                    root.display()
                ),
            ));
        }
        let sd = StateDir { root, lock };
        sd.clear_leftovers()?;
        Ok(sd)
    }

    fn clear_leftovers(&self) -> io::Result<()> {
        remove_tree(&self.work())?;
        for f in ["status.json", "events.jsonl", "pod.sock"] {
            let p = self.root.join(f);
            match fs::remove_file(&p) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(ctx(format!("removing {}", p.display()))(e))
                }
                _ => {}
            }
        }
        // Nothing is ever mounted in logs/.
        remove_dir(&self.logs())
    }

    /// Private area: volumes and container root filesystems.
    pub fn work(&self) -> PathBuf {
        self.root.join(".work")
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn status_file(&self) -> PathBuf {
        self.root.join("status.json")
    }
    pub fn events_file(&self) -> PathBuf {
        self.root.join("events.jsonl")
    }
    /// Private per-container directory (overlay layers, termination log).
    pub fn container_dir(&self, name: &str) -> PathBuf {
        self.work().join("containers").join(name)
    }
    pub fn volume_dir(&self, name: &str) -> PathBuf {
        self.work().join("volumes").join(name)
    }

    /// The node's other pods as their state directories beside this one show them (the
    /// Pod each `status.json` holds), those whose socket still answers: the one view of
    /// the node that admitting a pod and allocating a resize both count
    /// (`pod::allocation::node_usage`). A pod whose podinit is gone has no kubelet running
    /// it, whatever its last status said.
    pub fn other_pods(&self) -> Vec<k8s_openapi::api::core::v1::Pod> {
        let Some(root) = self.root.parent() else {
            return Vec::new();
        };
        let dirs = fs::read_dir(root).into_iter().flatten().flatten();
        dirs.map(|e| e.path())
            .filter(|dir| *dir != self.root)
            .filter(|dir| std::os::unix::net::UnixStream::connect(dir.join("pod.sock")).is_ok())
            .filter_map(|dir| fs::read(dir.join("status.json")).ok())
            .filter_map(|b| crate::tracked::from_slice(&b).ok())
            .collect()
    }

    /// Remove everything private, leaving `status.json`, `events.jsonl` and `logs/` when
    /// the pod ran (`keep_public`). A sandbox that could not be set up leaves nothing
    /// (docs/interface.md, exit 3): the files are this run's, an earlier run's went at `open`.
    /// `mounted_here`: the run's mounts are in this mount namespace (PID-1 mode), not in
    /// the supervisor's own, which goes with it.
    pub fn finish(self, keep_public: bool, mounted_here: bool) -> io::Result<()> {
        if mounted_here {
            remove_tree(&self.work())?;
        } else {
            remove_dir(&self.work())?;
        }
        if !keep_public {
            for f in [self.status_file(), self.events_file()] {
                let _ = fs::remove_file(f);
            }
            remove_dir(&self.logs())?;
        }
        let _ = fs::remove_file(self.root.join("pod.sock"));
        let _ = fs::remove_file(self.root.join(".lock"));
        drop(self.lock);
        // A run that failed before writing anything leaves no empty directory behind.
        let _ = fs::remove_dir(&self.root);
        Ok(())
    }
}

/// Remove `dir` and all in it, if it exists.
fn remove_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(ctx(format!("removing {}", dir.display()))),
    }
}

/// Unmount everything mounted under `dir` (deepest first, lazily), then remove it.
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    unmount_below(dir);
    fs::remove_dir_all(dir).map_err(ctx(format!("removing {}", dir.display())))
}

/// Detach every mount at or below `dir` in this mount namespace.
pub fn unmount_below(dir: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mountinfo(p)))
        .filter(|p| p.starts_with(dir))
        .collect();
    // Deepest first; a point mounted twice appears twice and is unmounted twice.
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        let _ = nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mountinfo(s: &str) -> String {
    crate::util::unescape_codes(s, b'\\', 3, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_octal_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b"), "/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"/x\134"), r"/x\");
    }

    #[test]
    fn lock_keeps_a_second_run_out_and_finish_keeps_public_files() {
        let dir = std::env::temp_dir().join(format!("podinit-sd-{}", crate::util::random_hex(4)));
        let sd = StateDir::open(&dir).unwrap();
        let second = StateDir::open(&dir);
        assert!(second.is_err());
        assert!(second
            .err()
            .unwrap()
            .to_string()
            .contains("already running"));
        fs::create_dir_all(sd.volume_dir("v")).unwrap();
        fs::write(sd.status_file(), "{}").unwrap();
        sd.finish(true, true).unwrap();
        let left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("status.json")]);
        // A new run clears the old public files.
        let sd = StateDir::open(&dir).unwrap();
        assert!(!sd.status_file().exists());
        sd.finish(true, true).unwrap();
        assert!(!dir.exists(), "an empty state dir is removed");
        // A sandbox that could not be set up leaves none of its files.
        let sd = StateDir::open(&dir).unwrap();
        fs::write(sd.events_file(), "").unwrap();
        fs::create_dir_all(sd.logs().join("c")).unwrap();
        sd.finish(false, true).unwrap();
        assert!(!dir.exists(), "a failed sandbox leaves nothing");
    }
}
