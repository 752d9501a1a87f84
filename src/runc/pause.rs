//! `pause` / `resume`: freeze or thaw every process of the container's cgroup.

use super::cli::Args;
use super::state;
use super::status::{self, Status};
use super::Globals;

/// `freeze`: pause; otherwise resume.
pub fn verb(g: &Globals, a: &Args, freeze: bool) -> Result<(), super::Error> {
    let id = a.exactly_one(if freeze { "pause" } else { "resume" })?;
    let _lock = state::lock(&g.root, id)?;
    let s = state::load(&g.root, id)?;
    let now = status::of(&g.root, &s);
    let group = crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths)?;
    if freeze {
        if now != Status::Running && now != Status::Created {
            return Err(super::Error::NotRunning);
        }
        group
            .freeze()
            .map_err(|e| format!("pausing container {id}: {e}").into())
    } else {
        if now != Status::Paused {
            return Err("container not paused".into());
        }
        group
            .thaw()
            .map_err(|e| format!("resuming container {id}: {e}").into())
    }
}
