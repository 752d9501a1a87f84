//! The shim is a child subreaper: container processes come to it once the runtime that
//! created them exits. One thread reaps every child; whoever waits for one (the task
//! table for containers and execs, `runc` for its own runs) takes the exit from here, so
//! no exit is ever lost to another `waitpid`.

use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, SystemTime};

/// An exit: the status containerd reports (the code, or 128 + the signal) and when.
#[derive(Clone, Copy, Debug)]
pub struct Exit {
    pub status: u32,
    pub at: SystemTime,
}

/// Exits not yet taken, by pid.
#[derive(Default)]
pub struct Reaper {
    exits: Mutex<HashMap<i32, Exit>>,
    cv: Condvar,
}

impl Reaper {
    /// Reaps every exited child; returns the pids reaped so the caller can hand them to
    /// their owners.
    pub fn reap(&self) -> Vec<(i32, Exit)> {
        let mut done = Vec::new();
        loop {
            let (pid, status) = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(p, c)) => (p.as_raw(), c as u32),
                Ok(WaitStatus::Signaled(p, s, _)) => (p.as_raw(), 128 + s as u32),
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => continue,
            };
            done.push((
                pid,
                Exit {
                    status,
                    at: SystemTime::now(),
                },
            ));
        }
        if !done.is_empty() {
            let mut m = self.exits.lock().unwrap();
            m.extend(done.iter().copied());
            self.cv.notify_all();
        }
        done
    }

    /// Takes `pid`'s exit if it has been reaped.
    pub fn take(&self, pid: i32) -> Option<Exit> {
        self.exits.lock().unwrap().remove(&pid)
    }

    /// Waits for `pid`'s exit (a child the caller started), up to `limit`.
    pub fn wait_for(&self, pid: i32, limit: Duration) -> Option<Exit> {
        let deadline = std::time::Instant::now() + limit;
        let mut m = self.exits.lock().unwrap();
        loop {
            if let Some(e) = m.remove(&pid) {
                return Some(e);
            }
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            m = self.cv.wait_timeout(m, left).unwrap().0;
        }
    }
}
