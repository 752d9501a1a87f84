//! A shim that containerd has dropped ends itself (docs/cri.md §3). containerd cleans up
//! after a sandbox it gave up on by calling ShutdownSandbox (Sandbox API) or Delete and
//! Shutdown (task mode), else by running the shim's `delete` in the bundle; a restart can
//! cut these short (a cancelled call, a bundle already renamed for removal), and then
//! nobody ever calls the shim again. So once no
//! connection has been open for a grace period, a shim with nothing of the pod running
//! ends itself, cleaning up what it made. A running pod keeps its shim: a containerd
//! restart reconnects within seconds and must find its pods.
//!
//! `Peers` counts the open connections (`server.rs`); `abandoned` is the rule, pure;
//! `watch` is the thread that applies it, asleep while containerd is connected.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long the shim waits with no connection before it may end itself. Longer than the
/// 100 s containerd's shim client dials a new shim for, and kubelet's default
/// `runtimeRequestTimeout` (2 minutes): by then no RunPodSandbox that made this sandbox is
/// still waiting, and containerd's CRI never resumes one cut short. A restarted containerd
/// reconnects to every shim it knows while it loads, within seconds.
pub const GRACE: Duration = Duration::from_secs(120);

/// The variable that sets another grace, in whole seconds (tests, or a node whose
/// containerd restarts take longer).
pub const GRACE_ENV: &str = "PODINIT_SHIM_ABANDON_SECS";

/// The grace this shim runs with: `GRACE`, or the variable's when it is a number.
pub fn grace() -> Duration {
    grace_of(std::env::var(GRACE_ENV).ok().as_deref())
}

/// The grace a value of the variable sets (`GRACE` when unset or not a number).
fn grace_of(value: Option<&str>) -> Duration {
    match value {
        None => GRACE,
        Some(v) => match v.trim().parse::<u64>() {
            Ok(s) => Duration::from_secs(s),
            Err(_) => {
                super::say::warn(format_args!(
                    "{GRACE_ENV}={v:?} is not a number of seconds: using {} s",
                    GRACE.as_secs()
                ));
                GRACE
            }
        },
    }
}

/// What the rule looks at, once the shim has been alone for the grace period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// A task (a container of the pod) is in the shim's table.
    pub tasks: bool,
    /// A sandbox's PID 1 was started and has not exited.
    pub live_sandbox: bool,
    /// The shim's bundle is gone from its path: containerd removed it (or renamed it to
    /// remove it), which it does only once it is done with the shim, and it finds shims
    /// again after a restart only by their bundles.
    pub bundle_gone: bool,
}

/// Whether a shim alone for the grace period may end itself: containerd removed its
/// bundle (it is done with the sandbox, and a container still in the shim is one a restart
/// made it lose), or nothing of the pod runs in it (no container, and its sandbox never
/// started or has ended).
pub fn abandoned(s: Seen) -> bool {
    s.bundle_gone || (!s.tasks && !s.live_sandbox)
}

/// When the next look is due: `grace` after the later of the last disconnection and the
/// last look, so that a sandbox that keeps the shim is looked at again once a period.
pub fn due(alone_since: Instant, last_look: Instant, grace: Duration) -> Instant {
    alone_since.max(last_look) + grace
}

/// The open connections to the shim, and since when none has been.
pub struct Peers {
    state: Mutex<(usize, Instant)>,
    changed: Condvar,
}

impl Default for Peers {
    fn default() -> Peers {
        Peers {
            state: Mutex::new((0, Instant::now())),
            changed: Condvar::new(),
        }
    }
}

impl Peers {
    fn lock(&self) -> MutexGuard<'_, (usize, Instant)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection was accepted.
    pub fn opened(&self) {
        self.lock().0 += 1;
        self.changed.notify_all();
    }

    /// A connection ended.
    pub fn closed(&self) {
        let mut s = self.lock();
        s.0 = s.0.saturating_sub(1);
        if s.0 == 0 {
            s.1 = Instant::now();
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Blocks until no connection has been open for `grace` since the later of the last
    /// disconnection and `last_look`; asleep while one is open.
    pub fn wait_alone(&self, grace: Duration, last_look: Instant) {
        let mut s = self.lock();
        loop {
            if s.0 > 0 {
                s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let at = due(s.1, last_look, grace);
            let Some(left) = at.checked_duration_since(Instant::now()) else {
                return;
            };
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The shim's bundle: its working directory, by path. containerd may have removed it
/// before the shim comes up (a restart cut short the `start` that made it, and containerd
/// cleaned up after that `start`): the path `/proc/self/cwd` names then ends in
/// " (deleted)", which is nowhere, so the bundle reads as gone.
pub fn bundle_dir() -> std::path::PathBuf {
    std::env::current_dir()
        .or_else(|_| std::fs::read_link("/proc/self/cwd"))
        .unwrap_or_default()
}

/// The identity of a directory, to tell it from another made at the same path.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether the directory the shim runs in (its bundle, kept open as its working
/// directory) is no longer at `path`.
pub fn bundle_gone(path: &Path) -> bool {
    identity(path) != identity(Path::new("."))
}

/// The shim's `delete` in a Sandbox API sandbox's bundle: containerd runs it once it has
/// closed its connection to the shim and is done with the sandbox, whether or not its
/// ShutdownSandbox reached the shim. A shim still serving this bundle is asked for that
/// ShutdownSandbox now (it waits for a StartSandbox under way, stops what the start made,
/// and exits), and SIGKILLed if it does not answer in time, its socket removed, as kata's
/// runtime-rs `delete` ends its sandbox's shim. Its pid, when one ran.
pub fn end_running_shim(bundle: &Path, id: &str) -> Option<i32> {
    use containerd_shim::protos::{api, sandbox_api, sandbox_sync::SandboxClient};
    use containerd_shim::protos::{shim_sync::TaskClient, ttrpc};
    let address = std::fs::read_to_string(bundle.join("address")).ok()?;
    let address = address.trim();
    let ctx = |limit: Duration| ttrpc::context::with_timeout(limit.as_nanos() as i64);
    // The shim says its pid (the socket's peer is `start`, which bound it and has exited).
    let client = ttrpc::Client::connect(address).ok()?;
    let asked = TaskClient::new(client.clone()).connect(
        ctx(ASK_LIMIT),
        &api::ConnectRequest {
            id: id.to_string(),
            ..Default::default()
        },
    );
    let pid = asked.ok()?.shim_pid as i32;
    // Only the shim whose working directory is this bundle, never whatever else took the
    // socket's name.
    if pid <= 0 || identity(Path::new(&format!("/proc/{pid}/cwd"))) != identity(bundle) {
        return None;
    }
    let shut = SandboxClient::new(client).shutdown_sandbox(
        ctx(SHUTDOWN_LIMIT),
        &sandbox_api::ShutdownSandboxRequest {
            sandbox_id: id.to_string(),
            ..Default::default()
        },
    );
    if shut.is_err() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = std::fs::remove_file(super::socket_path(address));
    }
    Some(pid)
}

/// How long `delete` waits for a running shim to say its pid (Connect is answered at
/// once, on the connection's own thread).
const ASK_LIMIT: Duration = Duration::from_secs(1);

/// How long `delete` waits for the shim's ShutdownSandbox: within the 5 s containerd gives
/// the whole `delete` (its `io.containerd.timeout.shim.cleanup`).
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(3);

/// The watcher's thread: once alone for the grace period, `look` sees what runs and, when
/// the rule says so, ends the shim (it returns true then, and the thread ends).
pub fn watch(peers: Arc<Peers>, grace: Duration, mut look: impl FnMut() -> bool + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("abandon-watch".into())
        .spawn(move || {
            let mut last_look = Instant::now();
            loop {
                peers.wait_alone(grace, last_look);
                if look() {
                    return;
                }
                last_look = Instant::now();
            }
        });
    if let Err(e) = spawned {
        super::say::warn(format_args!("the thread that ends a dropped shim: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shim_ends_with_its_bundle_gone_or_nothing_of_its_pod_running() {
        let none = Seen::default();
        assert!(abandoned(none), "dropped before its sandbox started");
        let live = Seen {
            live_sandbox: true,
            ..none
        };
        assert!(
            !abandoned(live),
            "a started pod outlives containerd's restart"
        );
        assert!(abandoned(Seen {
            bundle_gone: true,
            ..live
        }));
        let tasks = Seen {
            tasks: true,
            ..none
        };
        assert!(!abandoned(tasks), "a running container keeps its shim");
        assert!(
            abandoned(Seen {
                bundle_gone: true,
                ..tasks
            }),
            "a container containerd lost goes with its removed sandbox"
        );
    }

    #[test]
    fn a_look_is_due_a_grace_after_the_last_disconnection_or_look() {
        let t0 = Instant::now();
        let g = Duration::from_secs(120);
        assert_eq!(due(t0, t0, g), t0 + g);
        let later = t0 + Duration::from_secs(30);
        assert_eq!(
            due(later, t0, g),
            later + g,
            "a reconnection restarts the wait"
        );
        assert_eq!(due(t0, later, g), later + g, "a look that kept the shim");
    }

    #[test]
    fn waiting_alone_sleeps_while_a_peer_is_connected() {
        let peers = Arc::new(Peers::default());
        peers.opened();
        let waiter = {
            let p = Arc::clone(&peers);
            std::thread::spawn(move || p.wait_alone(Duration::from_millis(10), Instant::now()))
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!waiter.is_finished(), "a connection is open");
        peers.closed();
        waiter.join().unwrap();
    }

    #[test]
    fn a_renamed_bundle_is_gone_and_the_working_directory_is_not() {
        let cwd = std::env::current_dir().unwrap();
        assert!(!bundle_gone(&cwd));
        assert!(bundle_gone(Path::new("/nonexistent/podinit-bundle")));
        assert!(bundle_gone(Path::new("/")) || cwd == Path::new("/"));
    }

    #[test]
    fn the_grace_is_the_variable_s_number_of_seconds_or_the_default() {
        assert_eq!(grace_of(None), GRACE);
        assert_eq!(grace_of(Some("3")), Duration::from_secs(3));
        assert_eq!(grace_of(Some("soon")), GRACE, "not a number: the default");
    }
}
