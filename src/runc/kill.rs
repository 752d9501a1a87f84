//! `kill`: a signal to the container's init (through a pidfd checked against its start
//! time), or with `--all` to every process in its cgroup.

use super::cli::{bool_, Args, Flag};
use super::state;
use super::status::{self, Status};
use super::Globals;

pub const FLAGS: &[Flag] = &[bool_(
    &["all", "a"],
    "send the specified signal to all processes inside the container",
)];

/// A signal as runc takes it: a name with or without `SIG`, in any case, or a number.
pub fn parse_signal(s: &str) -> Result<i32, super::Error> {
    crate::bundle::signal::parse(&s.to_ascii_uppercase())
        .map_err(|_| super::Error::Usage(format!("unknown signal {s:?}")))
}

pub fn verb(g: &Globals, a: &Args) -> Result<(), super::Error> {
    let (id, sig) = match a.pos.as_slice() {
        [id] => (id, "SIGTERM"),
        [id, sig] => (id, sig.as_str()),
        _ => return Err("\"kill\" requires a minimum of 1 and a maximum of 2 argument(s)".into()),
    };
    kill(&g.root, id, parse_signal(sig)?, a.on("all"))
}

/// `kill [--all] ID SIG`: also for a caller that signals in its own process (the shim),
/// since nothing here clones or waits for a child.
pub fn kill(root: &state::Root, id: &str, sig: i32, all: bool) -> Result<(), super::Error> {
    let _lock = state::lock(root, id)?;
    let s = state::load(root, id)?;
    let now = status::of(root, &s);
    let group = || crate::cgroup::recorded::open(&s.id, s.cgroups_path.as_deref(), &s.cgroup_paths);
    if all {
        // As runc: what is left in a stopped container's cgroup is signalled too.
        let group = group()?;
        if sig == libc::SIGKILL {
            // Frozen processes (a paused container) die only once thawed: kill_all does.
            group.kill_all();
            return Ok(());
        }
        for pid in group.pids() {
            // A pid listed in the container's cgroup just now.
            let _ = crate::sys::signals::kill(pid, sig);
        }
        return Ok(());
    }
    if now == Status::Stopped {
        return Err(super::Error::NotRunning);
    }
    let pidfd = super::start::open_init(&s)?;
    crate::sys::pidfd::send_signal(&pidfd, sig)
        .map_err(|e| format!("container {id}: sending signal {sig}: {e}"))?;
    if now == Status::Paused && sig == libc::SIGKILL {
        // A frozen process dies only once thawed (v1): as runc, thaw for SIGKILL alone.
        group()?
            .thaw()
            .map_err(|e| format!("container {id}: thawing after SIGKILL: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_in_any_case_or_number() {
        assert_eq!(parse_signal("KILL").unwrap(), 9);
        assert_eq!(parse_signal("sigterm").unwrap(), 15);
        assert_eq!(parse_signal("SIGUSR1").unwrap(), libc::SIGUSR1);
        assert_eq!(parse_signal("9").unwrap(), 9);
        let e = parse_signal("NOPE").unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::InvalidArgument);
        assert_eq!(e.to_string(), "unknown signal \"NOPE\"");
    }
}
