//! The shim's table of containers, by id, and what they all share: podinit's runc
//! front-end to run verbs with (`runc.rs`), the reaper, containerd's event stream. Each
//! container holds its own processes (`container.rs`); the ttrpc surface is
//! `task_api.rs`.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;

use containerd_shim::protos::protobuf::MessageDyn;
use containerd_shim::ExitSignal;
use podinit::spec::pod_files::PodFiles;

use super::container::Container;
use super::error::{Error, Result};
use super::orphan::Peers;
use super::reaper::{Exit, Reaper};
use super::runc::Runc;

/// An event for containerd, published in order by one thread.
pub type Event = (&'static str, Box<dyn MessageDyn>);

/// What is told of a watched process's exit (a Sandbox API sandbox's PID 1).
pub type OnExit = Box<dyn FnOnce(Exit) + Send>;

pub struct Inner {
    containers: Mutex<HashMap<String, Arc<Container>>>,
    pub runc: Runc,
    pub reaper: Arc<Reaper>,
    events: Mutex<mpsc::Sender<Event>>,
    pub exit: Arc<ExitSignal>,
    /// The shim's own binary: the sandbox's pause.
    pub exe: PathBuf,
    /// Processes that are no container's whose exits someone waits for, by pid.
    watched: Mutex<HashMap<i32, OnExit>>,
    /// Whether a sandbox of the Sandbox API lives in this shim: the Task service's
    /// Shutdown must not end the shim under it.
    sandbox: AtomicBool,
    /// The own files of this shim's Sandbox API pods, by sandbox id, for their containers.
    pod_files: Mutex<HashMap<String, PodFiles>>,
    /// The connections open to the shim (containerd's, mostly).
    pub peers: Arc<Peers>,
}

#[derive(Clone)]
pub struct Service(pub Arc<Inner>);

/// How long the shim waits, after a call that ends it, for its caller to hang up: ttrpc's
/// server drops its connections at once when the shim ends, so an answer still on its way
/// would be lost (containerd forgives a Task Shutdown's "ttrpc: closed", but runs no Task
/// Shutdown after ShutdownSandbox, and RemovePodSandbox would fail). The caller hangs up
/// once answered.
const ANSWER_GRACE: Duration = Duration::from_secs(1);

impl Inner {
    pub fn new(
        runc: Runc,
        reaper: Arc<Reaper>,
        events: mpsc::Sender<Event>,
        exit: Arc<ExitSignal>,
        exe: PathBuf,
    ) -> Inner {
        Inner {
            containers: Mutex::new(HashMap::new()),
            runc,
            reaper,
            events: Mutex::new(events),
            exit,
            exe,
            watched: Mutex::new(HashMap::new()),
            sandbox: AtomicBool::new(false),
            pod_files: Mutex::new(HashMap::new()),
            peers: Arc::new(Peers::default()),
        }
    }

    /// Calls `f` with `pid`'s exit once it is reaped (at once if it already was).
    pub fn watch(&self, pid: i32, f: OnExit) {
        let mut w = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        match self.reaper.take(pid) {
            Some(exit) => f(exit),
            None => drop(w.insert(pid, f)),
        }
    }

    /// Tells the watcher of `pid` its exit; false when nobody watches it.
    pub fn on_watched_exit(&self, pid: i32) -> bool {
        let mut w = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        if !w.contains_key(&pid) {
            return false;
        }
        if let (Some(exit), Some(f)) = (self.reaper.take(pid), w.remove(&pid)) {
            f(exit);
        }
        true
    }

    pub fn hold_sandbox(&self, held: bool) {
        self.sandbox.store(held, Ordering::SeqCst);
    }

    /// Sets (or, with none, forgets) the files of sandbox `id` for its containers.
    pub fn set_pod_files(&self, id: &str, files: Option<PodFiles>) {
        let mut t = self.pod_files.lock().unwrap_or_else(|p| p.into_inner());
        match files {
            Some(f) => drop(t.insert(id.to_string(), f)),
            None => drop(t.remove(id)),
        }
    }

    /// The files of sandbox `id`, when it is a Sandbox API sandbox of this shim.
    pub fn pod_files(&self, id: &str) -> Option<PodFiles> {
        let t = self.pod_files.lock().unwrap_or_else(|p| p.into_inner());
        t.get(id).cloned()
    }

    /// Whether the shim may end: no task and no sandbox left in it.
    pub fn may_exit(&self) -> bool {
        self.is_empty() && !self.sandbox.load(Ordering::SeqCst)
    }

    /// Ends the shim once the answer to the call on connection `conn` has reached its
    /// caller (see [`ANSWER_GRACE`]): Shutdown and ShutdownSandbox answer, then go.
    pub fn exit_once_answered(&self, conn: Option<RawFd>) {
        let exit = Arc::clone(&self.exit);
        std::thread::spawn(move || {
            if let Some(fd) = conn {
                let _ = podinit::sys::unix_socket::wait_hangup(fd, ANSWER_GRACE);
            }
            exit.signal();
        });
    }

    /// The table; never locked while a container's own lock is held.
    fn table(&self) -> MutexGuard<'_, HashMap<String, Arc<Container>>> {
        self.containers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The container of this id.
    pub fn get(&self, id: &str) -> Result<Arc<Container>> {
        self.table()
            .get(id)
            .cloned()
            .ok_or_else(|| Error::ContainerNotFound(id.to_string()))
    }

    pub fn contains(&self, id: &str) -> bool {
        self.table().contains_key(id)
    }

    pub fn is_empty(&self) -> bool {
        self.table().is_empty()
    }

    /// Every container, for whoever must look through them all without the table locked.
    pub fn containers(&self) -> Vec<Arc<Container>> {
        self.table().values().cloned().collect()
    }

    pub fn insert(&self, c: Arc<Container>) {
        self.table().insert(c.id.clone(), c);
    }

    pub fn remove(&self, id: &str) -> Option<Arc<Container>> {
        self.table().remove(id)
    }

    /// Ends every container of the shim (`Container::end`): what a sandbox that goes takes
    /// with it. A container that cannot be ended is said and stays in the table.
    pub fn end_containers(&self) {
        for c in self.containers() {
            if let Err(e) = c.end(self) {
                super::say::warn(format_args!("ending container {}: {e}", c.id));
            }
        }
    }

    pub fn publish(&self, topic: &'static str, e: Box<dyn MessageDyn>) {
        let _ = self
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((topic, e));
    }
}
