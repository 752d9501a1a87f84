//! The shim's table of containers, by id, and what they all share: podinit's runc
//! front-end to run verbs with (`runc.rs`), the reaper, containerd's event stream. Each
//! container holds its own processes (`container.rs`); the ttrpc surface is
//! `task_api.rs`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex, MutexGuard};

use containerd_shim::protos::protobuf::MessageDyn;
use containerd_shim::ExitSignal;

use super::container::Container;
use super::error::{Error, Result};
use super::reaper::Reaper;
use super::runc::Runc;

/// An event for containerd, published in order by one thread.
pub type Event = (&'static str, Box<dyn MessageDyn>);

pub struct Inner {
    containers: Mutex<HashMap<String, Arc<Container>>>,
    pub runc: Runc,
    pub reaper: Arc<Reaper>,
    events: Mutex<mpsc::Sender<Event>>,
    pub exit: Arc<ExitSignal>,
    /// The shim's own binary: the sandbox's pause.
    pub exe: PathBuf,
}

#[derive(Clone)]
pub struct Service(pub Arc<Inner>);

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
        }
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

    pub fn publish(&self, topic: &'static str, e: Box<dyn MessageDyn>) {
        let _ = self
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send((topic, e));
    }
}
