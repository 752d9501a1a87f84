//! A container's record under `--root`: `<root>/<id>/state.json` (written atomically),
//! the exec fifo beside it, and the lock every verb that changes the container holds
//! (flock on the directory).

use super::Error;
use oci_spec::runtime::Spec;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What state.json holds. The init is named by its pid and its start time together, so a
/// pid reused by another process is never taken for the container.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct State {
    pub id: String,
    /// 0 while the container is being created.
    pub init_process_pid: i32,
    /// Start time of the init in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub init_process_start: u64,
    /// Set while `create` runs: the creating process, by pid and start time, so that a
    /// crashed create reads as stopped (and `delete` cleans it up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<(i32, u64)>,
    /// RFC 3339 with nanoseconds, UTC.
    pub created: String,
    pub bundle: PathBuf,
    pub rootfs: PathBuf,
    #[serde(default)]
    pub annotations: HashMap<String, String>,
    /// `linux.cgroupsPath` as the container's cgroup was found from it: absolute when the
    /// cgroup's path is the same in every hierarchy.
    pub cgroups_path: Option<String>,
    /// The cgroup's directory in every hierarchy.
    pub cgroup_paths: Vec<PathBuf>,
    /// The systemd unit that owns the cgroup (`--systemd-cgroup`): later verbs update its
    /// properties, `delete` stops it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub systemd_unit: Option<String>,
    /// config.json as read, `root.path` absolute; `update` keeps its resources current.
    pub config: Spec,
}

/// `<root>`: made (mode 0700) on first use.
pub struct Root(pub PathBuf);

impl Root {
    pub fn dir(&self, id: &str) -> PathBuf {
        self.0.join(id)
    }

    pub fn ensure(&self) -> Result<(), Error> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.0)
            .map_err(|e| Error::io(format_args!("creating state root {}", self.0.display()), e))
    }
}

/// runc's ID rule: `^[\w+-\.]+$` (where `+-\.` is a range, so `,` is allowed too), and
/// not `.` or `..`.
pub fn validate_id(id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+,-.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!("invalid container ID format: {id:?}")))
    }
}

pub fn state_file(dir: &Path) -> PathBuf {
    dir.join("state.json")
}

pub fn fifo_path(dir: &Path) -> PathBuf {
    dir.join("exec.fifo")
}

/// Read a container's state; an unknown (or half-made) container does not exist.
pub fn load(root: &Root, id: &str) -> Result<State, Error> {
    validate_id(id)?;
    let path = state_file(&root.dir(id));
    let text = match fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Error::NotExist),
        Err(e) => return Err(Error::Other(format!("reading {}: {e}", path.display()))),
    };
    crate::tracked::from_slice(&text)
        .map_err(|e| Error::Other(format!("reading {}: {e}", path.display())))
}

/// Write state.json atomically (temp file + rename), mode 0600.
pub fn save(root: &Root, s: &State) -> Result<(), Error> {
    let dir = root.dir(&s.id);
    let path = state_file(&dir);
    // Through a value: the spec in it is then serialised by the one serializer the rest of
    // podinit uses for specs (one copy of that code in the binary, not two).
    let data = serde_json::to_value(s)
        .and_then(|v| serde_json::to_vec(&v))
        .map_err(|e| Error::Other(format!("encoding state of {}: {e}", s.id)))?;
    let tmp = dir.join(".state.json.tmp");
    let fail = |e: io::Error| Error::io(format_args!("writing {}", path.display()), e);
    fs::write(&tmp, &data).map_err(fail)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600)).map_err(fail)?;
    fs::rename(&tmp, &path).map_err(fail)
}

/// An exclusive lock on a container's directory, released when dropped.
pub struct Lock(#[allow(dead_code)] OwnedFd);

/// Lock `<root>/<id>` (waiting for another verb that holds it).
pub fn lock(root: &Root, id: &str) -> Result<Lock, Error> {
    lock_with(root, id, libc::LOCK_EX)?.ok_or_else(|| Error::Other("lock busy".into()))
}

/// Lock `<root>/<id>` if no other verb holds it (a `create` under way): None if one does.
pub fn try_lock(root: &Root, id: &str) -> Result<Option<Lock>, Error> {
    lock_with(root, id, libc::LOCK_EX | libc::LOCK_NB)
}

/// The lock, or None when `how` does not wait and another verb holds it.
fn lock_with(root: &Root, id: &str, how: libc::c_int) -> Result<Option<Lock>, Error> {
    let dir = root.dir(id);
    let fd = nix::fcntl::open(
        &dir,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| match e {
        nix::errno::Errno::ENOENT => Error::NotExist,
        e => Error::Other(format!("opening {}: {e}", dir.display())),
    })?;
    if let Err(e) = crate::sys::fd::flock(fd.as_fd(), how) {
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        return Err(Error::Other(format!("locking {}: {e}", dir.display())));
    }
    Ok(Some(Lock(fd)))
}

/// Make `<root>/<id>` (0700) for a new container; one there already is a duplicate ID.
pub fn make_dir(root: &Root, id: &str) -> Result<(), Error> {
    validate_id(id)?;
    root.ensure()?;
    let dir = root.dir(id);
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(Error::Exists(id.to_string())),
        Err(e) => Err(Error::Other(format!("creating {}: {e}", dir.display()))),
    }
}

/// Write `path` atomically (temp file in its directory + rename), as runc writes
/// `--pid-file`: a reader never sees it half-written.
pub fn write_pid_file(path: &Path, pid: i32) -> Result<(), Error> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir
        .unwrap_or(Path::new("."))
        .join(format!(".{name}.{}", std::process::id()));
    let fail = |e: io::Error| Error::io(format_args!("writing pid file {}", path.display()), e);
    fs::write(&tmp, pid.to_string()).map_err(fail)?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        fail(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_as_runc_accepts_them() {
        for ok in ["abc", "a.b-c_d+e", "1", "x..y", "a,b"] {
            assert!(validate_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "ä", "../x", "a:b"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_record_is_written_atomically_found_and_duplicates_refused() {
        let tmp = std::env::temp_dir().join(format!("runc-state-{}", std::process::id()));
        let root = Root(tmp.clone());
        make_dir(&root, "c1").unwrap();
        let e = make_dir(&root, "c1").unwrap_err();
        assert_eq!(e.to_string(), "container with id exists: c1");
        assert_eq!(e.kind(), crate::error::Kind::AlreadyExists);
        let e = load(&root, "c2").unwrap_err();
        assert_eq!(e.to_string(), "container does not exist");
        assert_eq!(e.kind(), crate::error::Kind::NotFound);
        let s = State {
            id: "c1".into(),
            init_process_pid: 42,
            init_process_start: 7,
            creator: None,
            created: "2026-01-01T00:00:00.000000001Z".into(),
            bundle: "/b".into(),
            rootfs: "/b/rootfs".into(),
            annotations: HashMap::new(),
            cgroups_path: Some("/c1".into()),
            cgroup_paths: vec!["/sys/fs/cgroup/c1".into()],
            systemd_unit: None,
            config: Spec::default(),
        };
        let l = lock(&root, "c1").unwrap();
        // flock is per open file: a second open of the directory sees it held.
        assert!(try_lock(&root, "c1").unwrap().is_none());
        save(&root, &s).unwrap();
        drop(l);
        // Another test's fork in this process may hold a copy of the lock's fd until its
        // child execs or exits (O_CLOEXEC acts at exec): the lock is free once it has.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while try_lock(&root, "c1").unwrap().is_none() {
            assert!(std::time::Instant::now() < deadline, "the lock stayed held");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let back = load(&root, "c1").unwrap();
        assert_eq!(back.init_process_pid, 42);
        assert_eq!(back.cgroups_path.as_deref(), Some("/c1"));
        let mode = fs::metadata(state_file(&root.dir("c1")))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let pidf = tmp.join("pid");
        write_pid_file(&pidf, 123).unwrap();
        assert_eq!(fs::read_to_string(&pidf).unwrap(), "123");
        fs::remove_dir_all(&tmp).unwrap();
    }
}
