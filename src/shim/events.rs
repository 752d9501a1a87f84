//! Events to containerd, in the order they are made.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;

use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::protos::shim::event::Envelope;
use containerd_shim::protos::shim::events::ForwardRequest;
use containerd_shim::protos::topics;
use containerd_shim::protos::ttrpc::proto::{
    Code, MessageHeader, Request, Response, MESSAGE_TYPE_RESPONSE,
};

use super::error::Error;
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

/// The environment variable containerd starts a shim with: its ttrpc address, where
/// events go (the shim crate's own name for it, which it does not export).
const TTRPC_ADDRESS: &str = "TTRPC_ADDRESS";

/// How long containerd may take to answer a Forward before the connection is dropped
/// (and the event with it, as a failed forward's).
const ANSWER_LIMIT: Duration = Duration::from_secs(10);

/// A connection to containerd's events service, one Forward at a time on the publisher's
/// thread. ttrpc's sync client would add a reader and a writer thread, and its reader
/// polls the socket with a short timeout for as long as the connection is open: every
/// shim that published in the last second woke many times a second, many shims at once
/// while pods start.
struct Events {
    conn: UnixStream,
    /// A client's streams are odd, one per request.
    next_stream: u32,
}

impl Events {
    /// A new connection, None (said on stderr, which containerd logs) when it cannot be
    /// made: the event is lost, as a failed forward's is.
    fn connect() -> Option<Events> {
        let address = std::env::var(TTRPC_ADDRESS).ok()?;
        let path = address.strip_prefix("unix://").unwrap_or(&address);
        let conn = UnixStream::connect(path)
            .and_then(|c| c.set_read_timeout(Some(ANSWER_LIMIT)).map(|()| c))
            .map_err(|e| {
                eprintln!(
                    "containerd-shim-podinit-v1: connecting to containerd's events at {address}: {e}"
                )
            })
            .ok()?;
        Some(Events {
            conn,
            next_stream: 1,
        })
    }

    /// Forwards one event and waits for containerd's answer.
    fn forward(&mut self, req: &ForwardRequest) -> Result<(), Error> {
        let stream = self.next_stream;
        self.next_stream = self.next_stream.wrapping_add(2);
        let request = Request {
            service: "containerd.services.events.ttrpc.v1.Events".into(),
            method: "Forward".into(),
            payload: req
                .write_to_bytes()
                .map_err(|e| Error::Other(e.to_string()))?,
            ..Default::default()
        };
        let body = request
            .write_to_bytes()
            .map_err(|e| Error::Other(e.to_string()))?;
        let mh = MessageHeader::new_request(stream, body.len() as u32);
        self.conn
            .write_all(&super::server::frame(mh, &body))
            .map_err(|e| Error::io("sending", e))?;
        loop {
            let (mh, body) = super::server::read_message(&mut self.conn).ok_or_else(|| {
                Error::Other("containerd closed the connection or did not answer".into())
            })?;
            if mh.stream_id != stream || mh.type_ != MESSAGE_TYPE_RESPONSE {
                continue;
            }
            let res = Response::parse_from_bytes(&body.unwrap_or_default())
                .map_err(|e| Error::Other(format!("its answer: {e}")))?;
            return match res.status.as_ref().map(|s| (s.code(), s.message.as_str())) {
                None | Some((Code::OK, _)) => Ok(()),
                Some((code, msg)) => Err(Error::Other(format!("{code:?}: {msg}"))),
            };
        }
    }
}

/// Publishes events in the order they were made. Every change to a task publishes one,
/// so this thread also knows when the shim has been quiet for a second: then it gives
/// code pages back (a pod's shim spends its life waiting, and what ran for a create or a
/// start is mapped again from the page cache if it runs again; `sys::pages`, as podinit's
/// supervisor does), closes its connection to containerd and blocks with no timeout: an
/// idle pod's shim wakes for nothing. The next event connects again.
pub fn publisher_thread(rx: mpsc::Receiver<Event>, namespace: String) {
    std::thread::spawn(move || {
        let mut events: Option<Events> = None;
        let publish = |events: &mut Option<Events>, e: Event| {
            if events.is_none() {
                *events = Events::connect();
            }
            if let (Some(c), Some(req)) = (events.as_mut(), envelope(&namespace, &e)) {
                if let Err(err) = c.forward(&req) {
                    eprintln!("containerd-shim-podinit-v1: publishing {}: {err}", e.0);
                    *events = None;
                }
            }
        };
        loop {
            match rx.recv_timeout(Duration::from_secs(1)) {
                Ok(e) => publish(&mut events, e),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    events = None;
                    podinit::sys::pages::release_startup_pages();
                    match rx.recv() {
                        Ok(e) => publish(&mut events, e),
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
