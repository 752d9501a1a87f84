//! Killing what is in a cgroup and removing it: [`Group::destroy`] waits (bounded) for the
//! processes to go, for teardown; [`Group::renew`] never waits, for the event loop.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{err, Group};

/// How long `destroy` waits for killed processes to leave a cgroup.
const DESTROY_WAIT: Duration = Duration::from_secs(5);
/// How often it looks again meanwhile.
const DESTROY_POLL: Duration = Duration::from_millis(5);

/// rmdir that counts a directory already gone as removed.
fn rmdir_gone(d: &PathBuf) -> bool {
    match fs::remove_dir(d) {
        Ok(()) => true,
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

impl Group {
    /// Kill every process in the cgroup: `cgroup.kill` on v2; on v1 freeze, SIGKILL every
    /// pid, thaw (a frozen cgroup cannot fork away from the kill). Returns once the signal
    /// has been sent, not once the processes are gone.
    pub fn kill_all(&self) {
        self.kill_all_checking(false)
    }

    /// `thorough`: on v1, look for processes in every hierarchy, not just the first.
    fn kill_all_checking(&self, thorough: bool) {
        if self.v2 {
            if self.cg.kill().is_ok() {
                return;
            }
        } else if (thorough && self.pids().is_empty()) || (!thorough && self.looks_empty()) {
            // Nothing can fork in an empty cgroup; and freezing is not free: the first
            // frozen cgroup of the system patches kernel text on every CPU.
            return;
        } else if let Some(fz) = self.freezer() {
            let _ = fz.freeze();
            self.signal_all(libc::SIGKILL);
            let _ = fz.thaw();
            return;
        }
        self.signal_all(libc::SIGKILL);
    }

    fn freezer(&self) -> Option<&cgroups_rs::fs::freezer::FreezerController> {
        self.cg.controller_of()
    }

    fn signal_all(&self, sig: i32) {
        for pid in self.pids() {
            // A pid read from this cgroup: one reused in the meantime cannot be in our
            // cgroup, and cgroup.procs lists pids of our namespace.
            let _ = crate::sys::signals::kill(pid, sig);
        }
    }

    /// Remove the cgroup (every hierarchy). Fails with EBUSY while processes or children
    /// remain: callers kill first and remove bottom-up. On v1 cgroups-rs retries for a
    /// while before it gives up: not for the event loop.
    pub fn remove(&self) -> super::Result<()> {
        if !self.exists() {
            return Ok(());
        }
        self.cg
            .delete()
            .map_err(|e| err(&format!("removing cgroup {}", self.describe()), e))
    }

    /// Kill what is inside, wait (bounded) for it to go, remove this cgroup and every
    /// cgroup below it, deepest first, and the cgroups it was renewed from. Blocks: for
    /// teardown and the outer process, never for the event loop ([`renew`](Self::renew)).
    pub fn destroy(&self) -> super::Result<()> {
        let mut first_error = None;
        for old in &self.retired {
            if let Err(e) = old.destroy() {
                first_error.get_or_insert(e);
            }
        }
        // The common case, a cgroup whose processes are gone and that has no children, is
        // one rmdir per hierarchy; listing, killing and checking first would cost ten
        // syscalls more each. Any refusal takes the careful way.
        if !self.dirs.iter().all(rmdir_gone) {
            for d in &self.dirs {
                remove_children(d, true);
            }
            let deadline = Instant::now() + DESTROY_WAIT;
            loop {
                self.kill_all_checking(true);
                match self.remove() {
                    Ok(()) => break,
                    Err(e) if Instant::now() >= deadline => return Err(e),
                    Err(_) => std::thread::sleep(DESTROY_POLL),
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Make way for a fresh cgroup of the same container, without waiting: on the event
    /// loop, before each restart. The old cgroup goes at once in the usual case (its
    /// processes are gone); one whose killed processes are still exiting is left to
    /// [`destroy`](Self::destroy), and this group moves to a sibling directory that no
    /// process ever used (`c_<name>.<n>`): a new run needs a cgroup of its own, for its
    /// OOM count and since some kernels kill what is born into a cgroup once killed.
    pub fn renew(&mut self) {
        self.retired.retain(|old| !old.try_remove());
        if self.try_remove() {
            return;
        }
        let renewals = self.renewals + 1;
        let mut next = self
            .root
            .group_at(&sibling(&self.root.rel_of(self), renewals));
        next.renewals = renewals;
        next.retired = std::mem::take(&mut self.retired);
        let old = std::mem::replace(self, next);
        self.retired.push(old);
    }

    /// One attempt at what `destroy` does, with no wait: whether the cgroup is gone.
    fn try_remove(&self) -> bool {
        if self.dirs.iter().all(rmdir_gone) {
            return true;
        }
        for d in &self.dirs {
            remove_children(d, false);
        }
        self.kill_all_checking(true);
        self.dirs.iter().all(rmdir_gone)
    }
}

/// The `n`th sibling of the cgroup at `rel`: `c_<name>.<n>` for `c_<name>` (or for an
/// earlier sibling of it). Container names have no '.', so no container has that name.
fn sibling(rel: &Path, n: u32) -> PathBuf {
    let base = rel
        .file_name()
        .and_then(|f| f.to_str())
        .and_then(|f| f.split('.').next())
        .unwrap_or("c");
    rel.with_file_name(format!("{base}.{n}"))
}

/// Kill and remove every child cgroup directory below `dir`, deepest first; with `wait`,
/// for a bounded time each, else with one attempt.
fn remove_children(dir: &Path, wait: bool) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let child = e.path();
        remove_children(&child, wait);
        let deadline = Instant::now() + DESTROY_WAIT;
        while fs::remove_dir(&child).is_err() {
            if let Ok(t) = fs::read_to_string(child.join("cgroup.procs")) {
                for pid in t.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    // As in Group::signal_all.
                    let _ = crate::sys::signals::kill(pid, libc::SIGKILL);
                }
            }
            let _ = fs::write(child.join("cgroup.kill"), "1");
            if !wait || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(DESTROY_POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_are_numbered_after_the_first_name() {
        let first = Path::new("podinit_default_p/c_app");
        assert_eq!(sibling(first, 1), Path::new("podinit_default_p/c_app.1"));
        assert_eq!(
            sibling(&sibling(first, 1), 2),
            Path::new("podinit_default_p/c_app.2")
        );
    }
}
