//! Events to containerd, in the order they are made.

use std::sync::mpsc;
use std::time::Duration;

use containerd_shim::protos::protobuf::MessageField;
use containerd_shim::protos::shim::event::Envelope;
use containerd_shim::protos::shim::events::ForwardRequest;
use containerd_shim::protos::topics;
use containerd_shim::protos::Events;
use containerd_shim::publisher::RemotePublisher;

use super::service::Event;

/// The protobuf type of each event we publish, by topic, as containerd names them in an
/// event's `Any` (given by hand: `pack.rs` says why).
fn type_name(topic: &str) -> Option<&'static str> {
    Some(match topic {
        topics::TASK_CREATE_EVENT_TOPIC => "containerd.events.TaskCreate",
        topics::TASK_START_EVENT_TOPIC => "containerd.events.TaskStart",
        topics::TASK_EXIT_EVENT_TOPIC => "containerd.events.TaskExit",
        topics::TASK_DELETE_EVENT_TOPIC => "containerd.events.TaskDelete",
        topics::TASK_EXEC_ADDED_EVENT_TOPIC => "containerd.events.TaskExecAdded",
        topics::TASK_EXEC_STARTED_EVENT_TOPIC => "containerd.events.TaskExecStarted",
        topics::TASK_OOM_EVENT_TOPIC => "containerd.events.TaskOOM",
        topics::TASK_PAUSED_EVENT_TOPIC => "containerd.events.TaskPaused",
        topics::TASK_RESUMED_EVENT_TOPIC => "containerd.events.TaskResumed",
        _ => return None,
    })
}

/// The envelope containerd's events service takes.
fn envelope(namespace: &str, (topic, e): &Event) -> Option<ForwardRequest> {
    let envelope = Envelope {
        timestamp: MessageField::some(super::tasks::timestamp(std::time::SystemTime::now())),
        namespace: namespace.to_string(),
        topic: topic.to_string(),
        event: MessageField::some(super::pack::any(type_name(topic)?, e.as_ref()).ok()?),
        ..Default::default()
    };
    Some(ForwardRequest {
        envelope: MessageField::some(envelope),
        ..Default::default()
    })
}

/// A context for `forward`, which the publisher does not read (it sends with its own).
fn context() -> containerd_shim::TtrpcContext {
    let (_, cancel_rx) = crossbeam_channel::bounded(0);
    let (res_tx, _) = mpsc::channel();
    containerd_shim::TtrpcContext {
        fd: -1,
        cancel_rx,
        mh: Default::default(),
        res_tx,
        metadata: Default::default(),
        timeout_nano: 0,
    }
}

/// The environment variable containerd starts a shim with: its ttrpc address, where
/// events go (the shim crate's own name for it, which it does not export).
const TTRPC_ADDRESS: &str = "TTRPC_ADDRESS";

/// A new connection to containerd's events service, None (said on stderr, which
/// containerd logs) when it cannot be made: the event is lost, as a failed forward's is.
fn connect() -> Option<RemotePublisher> {
    let address = std::env::var(TTRPC_ADDRESS).ok()?;
    RemotePublisher::new(&address)
        .map_err(|e| {
            eprintln!(
                "containerd-shim-podinit-v1: connecting to containerd's events at {address}: {e}"
            )
        })
        .ok()
}

/// Publishes events in the order they were made. Every change to a task publishes one,
/// so this thread also knows when the shim has been quiet for a second: then it gives
/// code pages back (a pod's shim spends its life waiting, and what ran for a create or a
/// start is mapped again from the page cache if it runs again; `sys::pages`, as podinit's
/// supervisor does), closes its connection to containerd (ttrpc's sync client polls its
/// socket every 10 ms for as long as it is open) and blocks with no timeout: an idle
/// pod's shim wakes for nothing. The next event connects again.
pub fn publisher_thread(rx: mpsc::Receiver<Event>, publisher: RemotePublisher, namespace: String) {
    std::thread::spawn(move || {
        let mut publisher = Some(publisher);
        let publish = |publisher: &mut Option<RemotePublisher>, e: Event| {
            if publisher.is_none() {
                *publisher = connect();
            }
            if let (Some(p), Some(req)) = (publisher.as_ref(), envelope(&namespace, &e)) {
                let _ = p.forward(&context(), req);
            }
        };
        loop {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(e) => publish(&mut publisher, e),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    publisher = None;
                    podinit::sys::pages::release_startup_pages();
                    match rx.recv() {
                        Ok(e) => publish(&mut publisher, e),
                        Err(mpsc::RecvError) => return,
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_shim::protos::events::task as ev;
    use containerd_shim::protos::protobuf::{Message, MessageDyn};

    /// The names by hand are the protos' own (asked of reflection here, in the test only).
    #[test]
    fn each_topic_names_its_event_type() {
        let events: Vec<(&str, Box<dyn MessageDyn>)> = vec![
            (
                topics::TASK_CREATE_EVENT_TOPIC,
                Box::new(ev::TaskCreate::new()),
            ),
            (
                topics::TASK_START_EVENT_TOPIC,
                Box::new(ev::TaskStart::new()),
            ),
            (topics::TASK_EXIT_EVENT_TOPIC, Box::new(ev::TaskExit::new())),
            (
                topics::TASK_DELETE_EVENT_TOPIC,
                Box::new(ev::TaskDelete::new()),
            ),
            (
                topics::TASK_EXEC_ADDED_EVENT_TOPIC,
                Box::new(ev::TaskExecAdded::new()),
            ),
            (
                topics::TASK_EXEC_STARTED_EVENT_TOPIC,
                Box::new(ev::TaskExecStarted::new()),
            ),
            (topics::TASK_OOM_EVENT_TOPIC, Box::new(ev::TaskOOM::new())),
            (
                topics::TASK_PAUSED_EVENT_TOPIC,
                Box::new(ev::TaskPaused::new()),
            ),
            (
                topics::TASK_RESUMED_EVENT_TOPIC,
                Box::new(ev::TaskResumed::new()),
            ),
        ];
        for (topic, e) in events {
            assert_eq!(
                type_name(topic),
                Some(e.descriptor_dyn().full_name()),
                "{topic}"
            );
        }
        assert_eq!(type_name("/tasks/unknown"), None);
    }

    #[test]
    fn an_envelope_carries_the_topic_namespace_and_encoded_event() {
        let e = ev::TaskStart {
            container_id: "c1".into(),
            pid: 42,
            ..Default::default()
        };
        let req = envelope(
            "k8s.io",
            &(topics::TASK_START_EVENT_TOPIC, Box::new(e.clone())),
        )
        .unwrap();
        let env = req.envelope.unwrap();
        assert_eq!(
            (env.topic.as_str(), env.namespace.as_str()),
            ("/tasks/start", "k8s.io")
        );
        let any = env.event.unwrap();
        assert_eq!(any.type_url, "containerd.events.TaskStart");
        assert_eq!(any.value, e.write_to_bytes().unwrap());
        assert!(env.timestamp.seconds > 0);
    }
}
