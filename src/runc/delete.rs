//! `delete`: remove a stopped (or created) container: its processes, its cgroup, its
//! poststop hooks, its state. A running one only with `--force`.

use super::cli::{bool_, Args, Flag};
use super::state::{self, Root, State};
use super::status::{self, Status};
use super::{log, Globals};

pub const FLAGS: &[Flag] = &[bool_(
    &["force", "f"],
    "Forcibly deletes the container if it is still running (uses SIGKILL)",
)];

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    let id = a.exactly_one("delete")?;
    delete(&g.root, id, a.on("force"))
}

/// `delete [--force] ID`: also for a caller that deletes in its own process (the shim)
/// when the container has no poststop hook, the one child this waits for.
pub fn delete(root: &Root, id: &str, force: bool) -> Result<(), super::Error> {
    state::validate_id(id)?;
    let s = match state::load(root, id) {
        Ok(s) => s,
        Err(e) => {
            // A directory without state.json: a create that failed before writing it.
            // One whose create still runs (and holds the lock) is left alone.
            let dir = root.dir(id);
            if dir.is_dir() {
                if let Ok(Some(_lock)) = state::try_lock(root, id) {
                    if !state::state_file(&dir).exists() {
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                }
            }
            // As runc 1.1: forcing the removal of what is not there is no error.
            return if force && matches!(e, super::Error::NotExist) {
                Ok(())
            } else {
                Err(e)
            };
        }
    };
    let _lock = state::lock(root, id)?;
    // Read again under the lock: another verb may have changed it meanwhile.
    let s = state::load(root, id).unwrap_or(s);
    match status::of(root, &s) {
        Status::Stopped | Status::Created => {}
        other if !force => {
            return Err(super::Error::WrongState(format!(
                "cannot delete container {id} that is not stopped: {}",
                other.as_str()
            )))
        }
        _ => {}
    }
    destroy(root, &s)
}

/// Kill whatever is left of the container, remove its cgroup, run its poststop hooks
/// (their failures are warnings) and remove its state.
pub fn destroy(root: &Root, s: &State) -> Result<(), super::Error> {
    if let Ok(fd) = crate::sys::pidfd::open(s.init_process_pid) {
        if status::alive(s.init_process_pid, s.init_process_start) {
            let _ = crate::sys::pidfd::send_signal(&fd, libc::SIGKILL);
        }
    }
    if let Some(unit) = &s.systemd_unit {
        // runc's order: the unit first, then what is left of its cgroup.
        match crate::cgroup::systemd::stop(unit) {
            Ok(None) => {}
            Ok(Some(warning)) => log::warn(&warning.to_string()),
            Err(e) => {
                return Err(super::Error::Other(format!(
                    "deleting container {}: {e}",
                    s.id
                )))
            }
        }
    }
    match crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths) {
        Ok(group) => group
            .destroy()
            .map_err(|e| super::Error::Other(format!("deleting container {}: {e}", s.id)))?,
        Err(e) => {
            log::debug(&e.to_string());
            crate::cgroup::recorded::remove_recorded(&s.id, &s.cgroup_paths)?
        }
    }
    if let Some(u) = crate::cgroup::recorded::unified_leaf(s.cgroups_path.as_deref(), &s.id) {
        crate::cgroup::recorded::remove_unified_leaf(&u);
    }
    if s.config
        .linux()
        .as_ref()
        .is_some_and(crate::runtime::container::shares_mounts)
    {
        crate::runtime::container::release_shared_mounts(&s.rootfs);
    }
    let poststop = s
        .config
        .hooks()
        .as_ref()
        .and_then(|h| h.poststop().clone())
        .unwrap_or_default();
    if let Err(e) = crate::runtime::hooks::run(
        "poststop",
        &poststop,
        // The process is gone: runc's poststop state has no pid.
        &status::hook_json(s, "stopped", 0),
    ) {
        log::warn(&format!("container {}: {e}", s.id));
    }
    let dir = root.dir(&s.id);
    std::fs::remove_dir_all(&dir)
        .map_err(|e| super::Error::io(format_args!("removing {}", dir.display()), e))
}
