//! Events to containerd, in the order they are made.

use std::sync::mpsc;
use std::time::Duration;

use containerd_shim::publisher::RemotePublisher;
use containerd_shim::Context;

use super::service::Event;

/// Publishes events in the order they were made. Every change to a task publishes one,
/// so this thread also knows when the shim has been quiet for a second: then it gives
/// code pages back (a pod's shim spends its life waiting, and what ran for a create or a
/// start is mapped again from the page cache if it runs again; `sys::pages`, as podinit's
/// supervisor does).
pub fn publisher_thread(rx: mpsc::Receiver<Event>, publisher: RemotePublisher, namespace: String) {
    std::thread::spawn(move || {
        let mut busy = true;
        loop {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok((topic, e)) => {
                    let _ = publisher.publish(Context::default(), topic, &namespace, e);
                    busy = true;
                }
                Err(mpsc::RecvTimeoutError::Timeout) if busy => {
                    podinit::sys::pages::release_startup_pages();
                    busy = false;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    });
}
